//! PURGE by surrogate key (HTTP/1.1) and by prefix (HTTP/2), both counted in the answer, refused
//! outside `purge_allow`, and `Accept-Encoding` read as the set of codings it accepts, against a
//! counting origin.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;

use squall_e2e::{PathCounts, Response, Squall, admin_addr, admin_get, metric_sum, roundtrip};

#[path = "support/h2_client.rs"]
mod h2_client;
#[path = "support/origin.rs"]
mod origin;

/// Requests the origin saw, by path.
type Seen = PathCounts;

/// Every path is fresh for a minute and numbers its bodies. `/c/tag/<tags>` carries
/// `Surrogate-Key: <tags with '+' for spaces>`; `/c/vary` varies on Accept-Encoding.
async fn handle(
    seen: Arc<Seen>,
    req: http::Request<Incoming>,
) -> Result<http::Response<Full<Bytes>>, std::io::Error> {
    let path = req.uri().path().to_owned();
    let n = seen.hit(&path);
    let encoding = (req.headers().get("accept-encoding"))
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let _ = req.into_body().collect().await;
    let mut response = http::Response::builder().header("cache-control", "max-age=60");
    if let Some(tags) = path.strip_prefix("/c/tag/") {
        response = response.header("surrogate-key", tags.replace('+', " "));
    }
    let body = if path == "/c/vary" {
        response = response.header("vary", "Accept-Encoding");
        format!("vary {encoding} {n}")
    } else {
        format!("{path} {n}")
    };
    Ok(response.body(Full::new(Bytes::from(body))).unwrap())
}

fn start_origin() -> (SocketAddr, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let shared = seen.clone();
    let addr = origin::hyper_origin(move |req| handle(shared.clone(), req));
    (addr, seen)
}

fn config(origin: SocketAddr, cache: &str) -> String {
    squall_e2e::cache_config(origin, cache, "/c/", "")
}

fn get(squall: &Squall, path: &str, fields: &str) -> Response {
    let mut stream = squall.connect();
    roundtrip(
        &mut stream,
        &format!("GET {path} HTTP/1.1\r\nHost: cache.test\r\n{fields}\r\n"),
    )
}

fn purge(squall: &Squall, path: &str, fields: &str) -> Response {
    let mut stream = squall.connect();
    roundtrip(
        &mut stream,
        &format!("PURGE {path} HTTP/1.1\r\nHost: cache.test\r\n{fields}\r\n"),
    )
}

fn x_cache(response: &Response) -> &str {
    response.header("x-cache").unwrap_or("")
}

/// (status, body, X-Squall-Purged) of a PURGE answer.
fn counted(response: &Response) -> (u16, String, Option<&str>) {
    let purged = response.header("x-squall-purged");
    (response.status, response.body_text(), purged)
}

#[test]
fn purge_by_surrogate_key_removes_every_tagged_object_and_counts_them() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin, ""));
    let paths = ["/c/tag/a", "/c/tag/a+b", "/c/tag/c"];
    for path in paths {
        assert_eq!(x_cache(&get(&squall, path, "")), "MISS", "{path}");
        let hit = get(&squall, path, "");
        assert_eq!(x_cache(&hit), "HIT", "{path}");
        // Served with the field, as Varnish xkey does.
        let tags = path.trim_start_matches("/c/tag/").replace('+', " ");
        assert_eq!(hit.header("surrogate-key"), Some(tags.as_str()));
    }
    // Any URL on a cached route carries a tag purge.
    let answer = purge(&squall, "/c/anything", "Surrogate-Key: a\r\n");
    assert_eq!(counted(&answer), (200, "purged 2\n".into(), Some("2")));
    assert_eq!(x_cache(&get(&squall, "/c/tag/c", "")), "HIT");
    assert_eq!(x_cache(&get(&squall, "/c/tag/a", "")), "MISS");
    assert_eq!(x_cache(&get(&squall, "/c/tag/a+b", "")), "MISS");
    assert_eq!(
        paths.map(|p| seen.count(p)),
        [2, 2, 1],
        "the tagged ones were fetched again"
    );
    // Purged again at once: both were stored anew, so two again; then nothing: 404.
    let answer = purge(&squall, "/c/x", "Surrogate-Key: nothing a\r\n");
    assert_eq!(counted(&answer), (200, "purged 2\n".into(), Some("2")));
    let answer = purge(&squall, "/c/x", "Surrogate-Key: a\r\n");
    assert_eq!(counted(&answer), (404, "purged 0\n".into(), Some("0")));
    // A single URL's purge answers the same way.
    let answer = purge(&squall, "/c/tag/c", "");
    assert_eq!(counted(&answer), (200, "purged 1\n".into(), Some("1")));
    let answer = purge(&squall, "/c/tag/c", "");
    assert_eq!(counted(&answer), (404, "purged 0\n".into(), Some("0")));
    // A mode Squall does not know is refused rather than read as a URL purge.
    assert_eq!(
        purge(&squall, "/c/x", "X-Squall-Purge: prefixes\r\n").status,
        400
    );
    let (_, metrics) = admin_get(admin_addr(&squall), "/metrics");
    assert_eq!(metric_sum(&metrics, "squall_cache_purged_total"), 5.0);
}

/// A PURGE over HTTP/2 with extra request fields, read whole.
async fn h2_purge(
    client: &h2::client::SendRequest<Bytes>,
    uri: &str,
    fields: &[(&str, &str)],
) -> h2_client::Reply {
    let mut client = client.clone().ready().await.expect("connection ready");
    let mut request = http::Request::builder().method("PURGE").uri(uri);
    for (name, value) in fields {
        request = request.header(*name, *value);
    }
    let (response, _) = client
        .send_request(request.body(()).unwrap(), true)
        .expect("send request");
    let response = response.await.expect("response");
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    let mut stream = response.into_body();
    let mut body = Vec::new();
    while let Some(chunk) = stream.data().await {
        let chunk = chunk.expect("body chunk");
        body.extend_from_slice(&chunk);
        stream.flow_control().release_capacity(chunk.len()).unwrap();
    }
    h2_client::Reply {
        status,
        headers,
        body,
    }
}

#[tokio::test]
async fn purge_by_prefix_over_http2_removes_what_is_under_the_path_and_not_its_siblings() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin, ""));
    let client = h2_client::h2c(squall.addr).await;
    let url = |path: &str| format!("http://cache.test{path}");
    let under = ["/c/dir/", "/c/dir/x", "/c/dir/sub/y?q=1"];
    let beside = ["/c/dir", "/c/dirx", "/c/other/dir/x"];
    for path in under.iter().chain(&beside) {
        let first = h2_client::fetch(&client, "GET", &url(path), None).await;
        assert_eq!(first.headers["x-cache"], "MISS", "{path}");
        let again = h2_client::fetch(&client, "GET", &url(path), None).await;
        assert_eq!(again.headers["x-cache"], "HIT", "{path}");
    }
    let mode = [("x-squall-purge", "prefix")];
    let answer = h2_purge(&client, &url("/c/dir/"), &mode).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.headers["x-squall-purged"], "3");
    assert_eq!(String::from_utf8_lossy(&answer.body), "purged 3\n");
    for path in under {
        let reply = h2_client::fetch(&client, "GET", &url(path), None).await;
        assert_eq!(reply.headers["x-cache"], "MISS", "{path} was purged");
    }
    for path in beside {
        let reply = h2_client::fetch(&client, "GET", &url(path), None).await;
        assert_eq!(reply.headers["x-cache"], "HIT", "{path} was kept");
        assert_eq!(seen.count(path.split('?').next().unwrap()), 1, "{path}");
    }
    // Another host's objects under the same path stay.
    let other = h2_purge(&client, "http://other.test/c/", &mode).await;
    let text = String::from_utf8_lossy(&other.body);
    assert_eq!((other.status, &*text), (404, "purged 0\n"));
    assert_eq!(other.headers["x-squall-purged"], "0");
    let reply = h2_client::fetch(&client, "GET", &url("/c/dirx"), None).await;
    assert_eq!(reply.headers["x-cache"], "HIT");
}

#[test]
fn tag_and_prefix_purges_from_other_addresses_are_refused() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin, "purge_allow = [\"10.0.0.0/8\"]"));
    get(&squall, "/c/tag/a", "");
    for fields in ["Surrogate-Key: a\r\n", "X-Squall-Purge: prefix\r\n", ""] {
        let answer = purge(&squall, "/c/", fields);
        assert_eq!(answer.status, 403, "{fields:?}");
        assert_eq!(answer.header("x-squall-purged"), None);
    }
    assert_eq!(x_cache(&get(&squall, "/c/tag/a", "")), "HIT");
    assert_eq!(seen.count("/c/tag/a"), 1);
}

#[test]
fn differently_ordered_accept_encodings_share_one_variant() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin, ""));
    let first = get(&squall, "/c/vary", "Accept-Encoding: gzip, deflate, br\r\n");
    assert_eq!(x_cache(&first), "MISS");
    let second = get(
        &squall,
        "/c/vary",
        "Accept-Encoding: br, gzip;q=0.9, deflate\r\n",
    );
    assert_eq!(x_cache(&second), "HIT");
    assert_eq!(second.body_text(), "vary gzip, deflate, br 1");
    assert_eq!(seen.count("/c/vary"), 1, "one origin request");
    // Another set of codings is another variant.
    let gzip = get(&squall, "/c/vary", "Accept-Encoding: gzip\r\n");
    assert_eq!(x_cache(&gzip), "MISS");
    assert_eq!(seen.count("/c/vary"), 2);
}
