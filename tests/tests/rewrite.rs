//! Upstream path rewrites (`strip_prefix`, `upstream_prefix`, `rewrite`) against a real origin
//! that answers with the target it received, over HTTP/1.1 and HTTP/2: what the origin reads,
//! the query kept, captures that would not stay one segment refused, and the cache keyed by
//! the client's normalised URL, not the origin's.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use squall_e2e::{Squall, roundtrip};

#[path = "support/h2_client.rs"]
mod h2_client;
#[path = "support/origin.rs"]
mod origin;

/// An origin that answers every request with its target, storable for a minute, and keeps
/// the targets it was sent.
fn start_origin() -> (std::net::SocketAddr, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let addr = origin::hyper_origin(move |req| {
        let target = req.uri().to_string();
        log.lock().unwrap().push(target.clone());
        async move {
            let response = http::Response::builder().header("cache-control", "max-age=60");
            Ok(response.body(Full::new(Bytes::from(target))).unwrap())
        }
    });
    (addr, seen)
}

fn config(origin: std::net::SocketAddr) -> String {
    squall_e2e::proxy_config(origin, ROUTES)
}

/// One route for each kind of rewrite, and one without.
const ROUTES: &str = r#"[[vhost.route]]
prefix = "/app/"
proxy = "app"
strip_prefix = true
cache = true

[[vhost.route]]
prefix = "/old/"
proxy = "app"
upstream_prefix = "/new/v2/"

[[vhost.route]]
template = "/u/{id}/{file}.json"
proxy = "app"
rewrite = "/users/{id}/files/{file}"

[[vhost.route]]
regex = "^/v1/(?P<item>[a-z0-9]+)$"
proxy = "app"
rewrite = "/v2/items/{item}"

[[vhost.route]]
prefix = "/plain/"
proxy = "app"
"#;

/// Client target, then what the origin must be sent for it.
const CASES: [(&str, &str); 7] = [
    ("/app/a/b?x=1&y=%2f", "/a/b?x=1&y=%2f"),
    ("/app/", "/"),
    ("/old/x/y.css?v=3", "/new/v2/x/y.css?v=3"),
    ("/u/42/report.json?full", "/users/42/files/report?full"),
    // Normalised first: %61 is `a`, the dot segment goes, then the template matches.
    ("/u/%34%32/./r%61w.json", "/users/42/files/raw"),
    ("/v1/item7?a=b", "/v2/items/item7?a=b"),
    ("/plain/as/is?q", "/plain/as/is?q"),
];

fn get(squall: &Squall, target: &str) -> squall_e2e::Response {
    let mut stream = squall.connect();
    roundtrip(
        &mut stream,
        &format!("GET {target} HTTP/1.1\r\nHost: rewrite.test\r\n\r\n"),
    )
}

#[test]
fn http1_clients_reach_the_rewritten_path_with_the_query() {
    let (origin, _) = start_origin();
    let squall = Squall::start(&config(origin));
    for (target, sent) in CASES {
        let response = get(&squall, target);
        assert_eq!(
            (response.status, response.body_text().as_str()),
            (200, sent),
            "{target}"
        );
    }
}

#[tokio::test]
async fn http2_clients_reach_the_rewritten_path_with_the_query() {
    let (origin, _) = start_origin();
    let squall = Squall::start(&config(origin));
    let client = h2_client::h2c(squall.addr).await;
    for (target, sent) in CASES {
        let url = format!("http://rewrite.test{target}");
        let reply = h2_client::fetch(&client, "GET", &url, None).await;
        assert_eq!(
            (reply.status, String::from_utf8_lossy(&reply.body).as_ref()),
            (200, sent),
            "{target}"
        );
    }
}

/// A capture that would be a dot segment of the origin's path, or read as a separator by a
/// lenient origin, is refused with 400 and never reaches the origin.
#[test]
fn captures_that_would_not_stay_one_segment_are_refused() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin));
    for target in [
        "/u/42/..json",
        "/u/42/a%2Fb.json",
        "/u/..;x/a.json",
        "/u/42/..%20.json",
    ] {
        assert_eq!(get(&squall, target).status, 400, "{target}");
    }
    assert_eq!(*seen.lock().unwrap(), Vec::<String>::new());
    assert_eq!(
        get(&squall, "/u/a..b/c.json").body_text(),
        "/users/a..b/files/c"
    );
}

/// The cache key is the client's normalised URL: another spelling of it is a hit, the origin
/// is asked once, under the rewritten path, and a PURGE names the client's URL.
#[tokio::test]
async fn the_cache_keeps_the_clients_url() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin));
    let first = get(&squall, "/app/page?x=1");
    assert_eq!(first.header("x-cache"), Some("MISS"));
    let again = get(&squall, "/app/p%61ge?x=1");
    assert_eq!(
        (again.header("x-cache"), again.body_text().as_str()),
        (Some("HIT"), "/page?x=1")
    );
    let client = h2_client::h2c(squall.addr).await;
    let url = "http://rewrite.test/app/page?x=1";
    let reply = h2_client::fetch(&client, "GET", url, None).await;
    assert_eq!(reply.headers.get("x-cache").unwrap(), "HIT");
    assert_eq!(*seen.lock().unwrap(), vec!["/page?x=1".to_owned()]);
    let mut stream = squall.connect();
    let purge = roundtrip(
        &mut stream,
        "PURGE /app/page?x=1 HTTP/1.1\r\nHost: rewrite.test\r\n\r\n",
    );
    assert_eq!((purge.status, purge.body_text().trim()), (200, "purged 1"));
}
