//! The cache against a counting origin: what is stored and what is not, variants, validation,
//! revalidation, stale-if-error, coalescing, PURGE, invalidation and the memory bound, over
//! HTTP/1.1 and HTTP/2.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use std::io::Write;

use squall_e2e::{
    PathCounts, Response, Squall, admin_addr, admin_get, metric_sum, read_response_head, roundtrip,
};

#[path = "support/h2_client.rs"]
mod h2_client;
#[path = "support/origin.rs"]
mod origin;

/// What the origin saw: requests per path, and the conditional ones.
#[derive(Default)]
struct Seen {
    requests: PathCounts,
    conditional: AtomicUsize,
    /// While set, the origin drops every connection without answering.
    down: AtomicBool,
}

/// The origin's answers, by path: each sets its caching fields and numbers its bodies, so a
/// test can tell a stored response from a fresh one.
async fn handle(
    seen: Arc<Seen>,
    req: http::Request<Incoming>,
) -> Result<http::Response<Full<Bytes>>, std::io::Error> {
    if seen.down.load(Ordering::Relaxed) {
        // An error from the service makes hyper drop the connection without an answer.
        return Err(std::io::Error::other("origin down"));
    }
    let path = req.uri().path().to_owned();
    let n = seen.requests.hit(&path);
    let inm = req.headers().get("if-none-match").cloned();
    if inm.is_some() {
        seen.conditional.fetch_add(1, Ordering::Relaxed);
    }
    let encoding = req
        .headers()
        .get("accept-encoding")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let req_ims = req.headers().contains_key("if-modified-since");
    let method = req.method().clone();
    let _ = req.into_body().collect().await;
    let response = http::Response::builder();
    let (response, body) = match path.as_str() {
        "/c/fresh" => (
            response.header("cache-control", "max-age=60"),
            format!("fresh {n}"),
        ),
        "/c/no-store" => (
            response.header("cache-control", "no-store"),
            format!("no-store {n}"),
        ),
        "/c/private" => (
            response.header("cache-control", "private, max-age=60"),
            format!("private {n}"),
        ),
        "/c/cookie" => (
            response
                .header("cache-control", "max-age=60")
                .header("set-cookie", "session=1"),
            format!("cookie {n}"),
        ),
        "/c/nothing" => (response, format!("nothing {n}")),
        "/c/vary" => (
            response
                .header("cache-control", "max-age=60")
                .header("vary", "Accept-Encoding"),
            format!("vary {encoding} {n}"),
        ),
        "/c/etag" => (
            response
                .header("cache-control", "max-age=60")
                .header("etag", "\"v1\""),
            format!("etag {n}"),
        ),
        "/c/short" if inm.as_ref().is_some_and(|v| v == "\"s1\"") => {
            let response = response
                .status(304)
                .header("cache-control", "max-age=1")
                .header("etag", "\"s1\"");
            return Ok(response.body(Full::new(Bytes::new())).unwrap());
        }
        // Each answer has a new validator: the revalidation's 304 names another ETag than
        // the stored one (RFC 9111 §4.3.4).
        p if p.starts_with("/c/flip") && inm.is_some() => {
            let response = response
                .status(304)
                .header("cache-control", "max-age=1")
                .header("etag", format!("\"f{n}\""));
            return Ok(response.body(Full::new(Bytes::new())).unwrap());
        }
        p if p.starts_with("/c/flip") => (
            response
                .header("cache-control", "max-age=1")
                .header("etag", format!("\"f{n}\"")),
            format!("flip {n}"),
        ),
        "/c/short" => (
            response
                .header("cache-control", "max-age=1")
                .header("etag", "\"s1\""),
            format!("short {n}"),
        ),
        "/c/sie" => (
            response.header("cache-control", "max-age=1, stale-if-error=60"),
            format!("sie {n}"),
        ),
        "/c/slow" => {
            tokio::time::sleep(Duration::from_millis(500)).await;
            (
                response.header("cache-control", "max-age=60"),
                format!("slow {n}"),
            )
        }
        "/c/edit" => (
            response.header("cache-control", "max-age=60"),
            format!("edit {method} {n}"),
        ),
        // A response generated 30 s before it reached Squall.
        "/c/dated" => {
            let date = std::time::SystemTime::now() - Duration::from_secs(30);
            (
                response
                    .header("cache-control", "max-age=600")
                    .header("date", httpdate::fmt_http_date(date)),
                format!("dated {n}"),
            )
        }
        // RFC 9111 §5.1: the first member of an Age list counts; an unreadable one is ignored.
        "/c/age-old" => (
            response
                .header("cache-control", "max-age=3600")
                .header("age", "7200, 0"),
            format!("age-old {n}"),
        ),
        "/c/age-params" => (
            response
                .header("cache-control", "max-age=3600")
                .header("age", "7200;foo=bar"),
            format!("age-params {n}"),
        ),
        "/c/age-young" => (
            response
                .header("cache-control", "max-age=3600")
                .header("age", "60, 7200"),
            format!("age-young {n}"),
        ),
        "/c/age-bad" => (
            response
                .header("cache-control", "max-age=3600")
                .header("age", "soon"),
            format!("age-bad {n}"),
        ),
        // RFC 9111 §4.2.2: no stated freshness, last modified 1,000 s before its Date; the
        // aged one arrives 200 s old, past the tenth of that, and answers a revalidation with
        // a 304 of its own age.
        "/c/modified" | "/c/modified-aged" => {
            let now = std::time::SystemTime::now();
            let response = response
                .header("date", httpdate::fmt_http_date(now))
                .header(
                    "last-modified",
                    httpdate::fmt_http_date(now - Duration::from_secs(1000)),
                );
            if path == "/c/modified" {
                (response, format!("modified {n}"))
            } else if req_ims {
                let response = response.status(304);
                return Ok(response.body(Full::new(Bytes::new())).unwrap());
            } else {
                (response.header("age", "200"), format!("aged {n}"))
            }
        }
        // RFC 9111 §3: statuses with no registered meaning, stored on explicit freshness.
        "/c/s299" => (
            response.status(299).header("cache-control", "max-age=60"),
            format!("s299 {n}"),
        ),
        "/c/s499" => (
            response.status(499).header("cache-control", "s-maxage=60"),
            format!("s499 {n}"),
        ),
        "/c/s599" => (
            response.status(599).header("cache-control", "max-age=60"),
            format!("s599 {n}"),
        ),
        p if p.starts_with("/c/big/") => (
            response.header("cache-control", "max-age=60"),
            "b".repeat(100 * 1024),
        ),
        _ => (response.status(404), String::from("missing")),
    };
    Ok(response.body(Full::new(Bytes::from(body))).unwrap())
}

fn start_origin() -> (SocketAddr, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let shared = seen.clone();
    let down = seen.clone();
    let addr = origin::hyper_origin_with(
        move || !down.down.load(Ordering::Relaxed),
        move |req| handle(shared.clone(), req),
    );
    (addr, seen)
}

fn config(origin: SocketAddr, cache: &str) -> String {
    let ttl =
        "\n[[vhost.route]]\nprefix = \"/ttl/\"\nproxy = \"app\"\ncache = true\ncache_ttl = \"60s\"";
    squall_e2e::cache_config(origin, cache, "/c/", ttl)
}

fn get(squall: &Squall, path: &str, headers: &str) -> Response {
    let mut stream = squall.connect();
    roundtrip(
        &mut stream,
        &format!("GET {path} HTTP/1.1\r\nHost: cache.test\r\n{headers}\r\n"),
    )
}

fn x_cache(response: &Response) -> &str {
    response.header("x-cache").unwrap_or("")
}

#[test]
fn a_second_request_is_a_hit_and_the_origin_saw_one() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin, ""));
    let first = get(&squall, "/c/fresh", "");
    assert_eq!(first.status, 200);
    assert_eq!(x_cache(&first), "MISS");
    assert_eq!(first.body_text(), "fresh 1");
    for _ in 0..5 {
        let again = get(&squall, "/c/fresh", "");
        assert_eq!(again.body_text(), "fresh 1");
        assert_eq!(x_cache(&again), "HIT");
        assert!(again.header("age").is_some());
        assert_eq!(again.header("cache-control"), Some("max-age=60"));
    }
    // HEAD is answered from the GET entry, without a body.
    let mut stream = squall.connect();
    stream
        .write_all(b"HEAD /c/fresh HTTP/1.1\r\nHost: cache.test\r\n\r\n")
        .unwrap();
    let head = read_response_head(&mut stream).unwrap();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("7"));
    assert_eq!(seen.requests.count("/c/fresh"), 1);
}

#[test]
fn what_must_not_be_stored_is_not() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin, ""));
    for path in ["/c/no-store", "/c/private", "/c/cookie", "/c/nothing"] {
        for _ in 0..2 {
            let response = get(&squall, path, "");
            assert_eq!(response.status, 200, "{path}");
            assert_eq!(x_cache(&response), "MISS", "{path}");
        }
        assert_eq!(
            seen.requests.count(path),
            2,
            "{path} reached the origin each time"
        );
    }
    // A request's own no-cache makes it go to the origin, even for a stored object.
    get(&squall, "/c/fresh", "");
    let response = get(&squall, "/c/fresh", "Cache-Control: no-cache\r\n");
    assert_ne!(x_cache(&response), "HIT");
    assert_eq!(seen.requests.count("/c/fresh"), 2);
}

#[test]
fn cache_ttl_gives_freshness_to_responses_without_any() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin, ""));
    // /ttl/ routes store what states no freshness; the origin answers 404 there (heuristically
    // cacheable) for any path it does not know.
    for _ in 0..3 {
        assert_eq!(get(&squall, "/ttl/x", "").status, 404);
    }
    assert_eq!(seen.requests.count("/ttl/x"), 1);
}

#[test]
fn vary_keeps_one_variant_per_encoding() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin, ""));
    let gzip = get(&squall, "/c/vary", "Accept-Encoding: gzip\r\n");
    let br = get(&squall, "/c/vary", "Accept-Encoding: br\r\n");
    assert_eq!(gzip.body_text(), "vary gzip 1");
    assert_eq!(br.body_text(), "vary br 2");
    for _ in 0..3 {
        assert_eq!(
            get(&squall, "/c/vary", "Accept-Encoding: gzip\r\n").body_text(),
            "vary gzip 1"
        );
        assert_eq!(
            get(&squall, "/c/vary", "Accept-Encoding: br\r\n").body_text(),
            "vary br 2"
        );
    }
    assert_eq!(seen.requests.count("/c/vary"), 2);
}

#[test]
fn if_none_match_gets_304_from_the_cache() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin, ""));
    assert_eq!(get(&squall, "/c/etag", "").status, 200);
    let response = get(&squall, "/c/etag", "If-None-Match: \"v1\"\r\n");
    assert_eq!(response.status, 304);
    assert!(response.body.is_empty());
    assert_eq!(response.header("etag"), Some("\"v1\""));
    let response = get(&squall, "/c/etag", "If-None-Match: \"other\"\r\n");
    assert_eq!(response.status, 200);
    assert_eq!(seen.requests.count("/c/etag"), 1);
}

#[test]
fn an_expired_entry_is_revalidated_and_a_304_refreshes_it() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin, ""));
    assert_eq!(get(&squall, "/c/short", "").body_text(), "short 1");
    std::thread::sleep(Duration::from_millis(2100));
    let response = get(&squall, "/c/short", "");
    assert_eq!(response.status, 200);
    assert_eq!(
        response.body_text(),
        "short 1",
        "the stored body, refreshed"
    );
    assert_eq!(x_cache(&response), "REVALIDATED");
    assert_eq!(seen.conditional.load(Ordering::Relaxed), 1);
    let response = get(&squall, "/c/short", "");
    assert_eq!(x_cache(&response), "HIT");
    assert_eq!(seen.requests.count("/c/short"), 2);
}

#[test]
fn stale_if_error_answers_when_the_origin_is_down() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin, ""));
    assert_eq!(get(&squall, "/c/sie", "").body_text(), "sie 1");
    std::thread::sleep(Duration::from_millis(2100));
    seen.down.store(true, Ordering::Relaxed);
    let response = get(&squall, "/c/sie", "");
    assert_eq!(response.status, 200, "{}", squall.log());
    assert_eq!(response.body_text(), "sie 1");
    assert_eq!(x_cache(&response), "STALE");
    // Without stale-if-error, the same outage is a 502.
    assert_eq!(get(&squall, "/c/no-store", "").status, 502);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_misses_on_one_cold_key_make_one_origin_request() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin, ""));
    let addr = squall.addr;
    let mut tasks = Vec::new();
    for _ in 0..100 {
        tasks.push(tokio::task::spawn_blocking(move || {
            let mut stream = std::net::TcpStream::connect(addr).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            roundtrip(
                &mut stream,
                "GET /c/slow HTTP/1.1\r\nHost: cache.test\r\n\r\n",
            )
        }));
    }
    for task in tasks {
        let response = task.await.unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(response.body_text(), "slow 1");
    }
    assert_eq!(seen.requests.count("/c/slow"), 1);
    let (_, metrics) = admin_get(admin_addr(&squall), "/metrics");
    let total = |name| metric_sum(&metrics, name);
    // One leader missed; each of the 99 others waited on it (coalesced, then served from the
    // entry it stored: a hit) or came after the store (a plain hit).
    assert_eq!(total("squall_cache_misses_total"), 1.0, "{metrics}");
    assert_eq!(total("squall_cache_hits_total"), 99.0, "{metrics}");
    let coalesced = total("squall_cache_coalesced_total");
    assert!((1.0..=99.0).contains(&coalesced), "coalesced {coalesced}");
}

#[test]
fn purge_from_allowed_addresses_removes_and_refetches() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin, ""));
    get(&squall, "/c/fresh", "");
    assert_eq!(x_cache(&get(&squall, "/c/fresh", "")), "HIT");
    let mut stream = squall.connect();
    let purge = "PURGE /c/fresh HTTP/1.1\r\nHost: cache.test\r\n\r\n";
    assert_eq!(roundtrip(&mut stream, purge).status, 200);
    assert_eq!(roundtrip(&mut stream, purge).status, 404, "nothing left");
    let response = get(&squall, "/c/fresh", "");
    assert_eq!(response.body_text(), "fresh 2");
    // Refetch: the PURGE itself brings a new copy, and the next GET is a hit on it.
    let refetch = "PURGE /c/fresh HTTP/1.1\r\nHost: cache.test\r\nX-Squall-Purge: refetch\r\n\r\n";
    let response = roundtrip(&mut stream, refetch);
    assert_eq!(response.status, 200);
    assert_eq!(response.body_text(), "fresh 3");
    let response = get(&squall, "/c/fresh", "");
    assert_eq!(
        (response.body_text().as_str(), x_cache(&response)),
        ("fresh 3", "HIT")
    );
    assert_eq!(seen.requests.count("/c/fresh"), 3);
}

#[test]
fn purge_from_other_addresses_is_refused() {
    let (origin, _) = start_origin();
    let squall = Squall::start(&config(origin, "purge_allow = [\"10.0.0.0/8\"]"));
    get(&squall, "/c/fresh", "");
    let mut stream = squall.connect();
    let response = roundtrip(
        &mut stream,
        "PURGE /c/fresh HTTP/1.1\r\nHost: cache.test\r\n\r\n",
    );
    assert_eq!(response.status, 403);
    assert_eq!(x_cache(&get(&squall, "/c/fresh", "")), "HIT");
}

#[test]
fn a_successful_method_that_is_not_safe_invalidates_the_url() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin, ""));
    assert_eq!(get(&squall, "/c/edit", "").body_text(), "edit GET 1");
    assert_eq!(get(&squall, "/c/edit", "").body_text(), "edit GET 1");
    let mut stream = squall.connect();
    let post = "POST /c/edit HTTP/1.1\r\nHost: cache.test\r\nContent-Length: 2\r\n\r\nhi";
    assert_eq!(roundtrip(&mut stream, post).body_text(), "edit POST 2");
    assert_eq!(get(&squall, "/c/edit", "").body_text(), "edit GET 3");
    assert_eq!(seen.requests.count("/c/edit"), 3);
}

/// A bodiless request whose method is not safe (DELETE with no body; over HTTP/2, HEADERS with END_STREAM)
/// invalidates too: it once went to the cache lookup, which passed it on without the purge.
#[tokio::test]
async fn a_bodiless_method_that_is_not_safe_invalidates_the_url_over_http1_and_http2() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin, ""));
    assert_eq!(get(&squall, "/c/edit", "").body_text(), "edit GET 1");
    assert_eq!(get(&squall, "/c/edit", "").body_text(), "edit GET 1");
    let mut stream = squall.connect();
    let delete = "DELETE /c/edit HTTP/1.1\r\nHost: cache.test\r\n\r\n";
    assert_eq!(roundtrip(&mut stream, delete).body_text(), "edit DELETE 2");
    assert_eq!(get(&squall, "/c/edit", "").body_text(), "edit GET 3");
    let client = h2_client::h2c(squall.addr).await;
    let url = "http://cache.test/c/edit";
    let reply = h2_client::fetch(&client, "DELETE", url, None).await;
    assert_eq!(String::from_utf8_lossy(&reply.body), "edit DELETE 4");
    assert_eq!(get(&squall, "/c/edit", "").body_text(), "edit GET 5");
    assert_eq!(seen.requests.count("/c/edit"), 5);
}

#[test]
fn the_memory_bound_holds_while_filling_ten_times_the_limit() {
    let (origin, _) = start_origin();
    let squall = Squall::start(&config(origin, "memory = \"1MiB\""));
    // 100 objects of 100 KiB: 10 MiB through a 1 MiB cache.
    for i in 0..100 {
        let response = get(&squall, &format!("/c/big/{i}"), "");
        assert_eq!(response.body.len(), 100 * 1024);
    }
    let (_, metrics) = admin_get(admin_addr(&squall), "/metrics");
    let value = |name: &str| -> u64 {
        let line = metrics
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} in {metrics}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let bytes = value("squall_cache_bytes");
    assert!(bytes <= 1 << 20, "{bytes} bytes stored");
    assert!(bytes > 0, "something is stored");
    assert!(value("squall_cache_evictions_total") > 0);
}

#[tokio::test]
async fn http2_clients_get_the_same_cache() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin, ""));
    let client = h2_client::h2c(squall.addr).await;
    let url = format!("http://{}/c/fresh", squall.addr);
    let first = h2_client::fetch(&client, "GET", &url, None).await;
    assert_eq!(first.headers["x-cache"], "MISS");
    let again = h2_client::fetch(&client, "GET", &url, None).await;
    assert_eq!(again.headers["x-cache"], "HIT");
    assert_eq!(again.body, b"fresh 1");
    assert_eq!(again.headers["content-length"], "7");
    // An HTTP/1.1 client shares the entry: the key is scheme, host and target.
    let mut stream = squall.connect();
    let h1 = roundtrip(
        &mut stream,
        &format!("GET /c/fresh HTTP/1.1\r\nHost: {}\r\n\r\n", squall.addr),
    );
    assert_eq!((h1.body_text().as_str(), x_cache(&h1)), ("fresh 1", "HIT"));
    assert_eq!(seen.requests.count("/c/fresh"), 1);
}

/// RFC 9111 §5.1: `Age: 7200, 0` and `Age: 7200;foo=bar` are 7200 s old, past a max-age of
/// 3600 (stale on arrival, no validator: not stored); `Age: 60, 7200` is 60 s old (stored,
/// and the hit says so); an Age that is no number is ignored ("a cache SHOULD ignore the
/// field"), so that response is fresh and stored.
#[test]
fn age_lists_count_by_their_first_member_and_bad_ages_are_ignored() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin, ""));
    for path in ["/c/age-old", "/c/age-params"] {
        for _ in 0..2 {
            let response = get(&squall, path, "");
            assert_eq!(
                (response.status, x_cache(&response)),
                (200, "MISS"),
                "{path}"
            );
        }
        assert_eq!(
            seen.requests.count(path),
            2,
            "{path} reached the origin each time"
        );
    }
    assert_eq!(get(&squall, "/c/age-young", "").body_text(), "age-young 1");
    let hit = get(&squall, "/c/age-young", "");
    assert_eq!(
        (hit.body_text().as_str(), x_cache(&hit)),
        ("age-young 1", "HIT")
    );
    let age: u64 = hit.header("age").unwrap().parse().unwrap();
    assert!((60..70).contains(&age), "age {age}");
    assert_eq!(seen.requests.count("/c/age-young"), 1);
    assert_eq!(get(&squall, "/c/age-bad", "").body_text(), "age-bad 1");
    let hit = get(&squall, "/c/age-bad", "");
    assert_eq!(
        (hit.body_text().as_str(), x_cache(&hit)),
        ("age-bad 1", "HIT")
    );
    let age: u64 = hit.header("age").unwrap().parse().unwrap();
    assert!(age < 10, "an ignored Age adds nothing: age {age}");
    assert_eq!(seen.requests.count("/c/age-bad"), 1);
}

/// RFC 9111 §4.2.2: a response with only `Last-Modified` is never stored by default; with
/// `cache.heuristic_freshness_max` it is fresh for a tenth of the time since then (100 s
/// here), a hit carries its `Age` and no `Warning`, and one that arrives with an `Age` past
/// that lifetime is stored stale and revalidated with `If-Modified-Since`; the 304 makes it
/// fresh again for a tenth of the time to the 304's Date.
#[test]
fn last_modified_gives_heuristic_freshness_when_configured() {
    let (origin, seen) = start_origin();
    let off = Squall::start(&config(origin, ""));
    for _ in 0..2 {
        assert_eq!(x_cache(&get(&off, "/c/modified", "")), "MISS");
    }
    assert_eq!(seen.requests.count("/c/modified"), 2, "off by default");
    drop(off);
    let on = Squall::start(&config(origin, "heuristic_freshness_max = \"1h\""));
    assert_eq!(get(&on, "/c/modified", "").body_text(), "modified 3");
    let hit = get(&on, "/c/modified", "");
    assert_eq!(
        (hit.body_text().as_str(), x_cache(&hit)),
        ("modified 3", "HIT")
    );
    let age: u64 = hit.header("age").unwrap().parse().unwrap();
    assert!(age < 10, "age {age}");
    assert_eq!(hit.header("warning"), None);
    assert_eq!(seen.requests.count("/c/modified"), 3);
    assert_eq!(get(&on, "/c/modified-aged", "").body_text(), "aged 1");
    let again = get(&on, "/c/modified-aged", "");
    assert_eq!(
        (again.body_text().as_str(), x_cache(&again)),
        ("aged 1", "REVALIDATED")
    );
    let hit = get(&on, "/c/modified-aged", "");
    assert_eq!((hit.body_text().as_str(), x_cache(&hit)), ("aged 1", "HIT"));
    assert_eq!(seen.requests.count("/c/modified-aged"), 2);
}

/// RFC 9111 §3: a final status the cache knows only by its class (299, 499, 599) is stored and
/// served when its freshness is explicit, to HTTP/1.1 and HTTP/2 clients alike.
#[tokio::test]
async fn unknown_statuses_with_explicit_freshness_are_stored_and_served() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin, ""));
    let client = h2_client::h2c(squall.addr).await;
    for (path, status) in [("/c/s299", 299), ("/c/s499", 499), ("/c/s599", 599)] {
        let first = get(&squall, path, "");
        assert_eq!((first.status, x_cache(&first)), (status, "MISS"), "{path}");
        let name = &path[3..];
        let hit = get(&squall, path, "");
        assert_eq!((hit.status, x_cache(&hit)), (status, "HIT"), "{path}");
        assert_eq!(hit.body_text(), format!("{name} 1"));
        let url = format!("http://cache.test{path}");
        let h2 = h2_client::fetch(&client, "GET", &url, None).await;
        assert_eq!(
            (h2.status, h2.headers["x-cache"].to_str().unwrap()),
            (status, "HIT"),
            "{path}"
        );
        assert_eq!(h2.body, format!("{name} 1").as_bytes());
        assert_eq!(seen.requests.count(path), 1, "{path}");
    }
}

/// RFC 9111 §4.3.4: the revalidation of a stale entry is answered 304 with another ETag than
/// the stored one. That 304 updates nothing and must not reach a client that asked
/// unconditionally: Squall asks again without validators and the client gets the full 200,
/// which replaces the entry (the old body is never served as freshened).
#[tokio::test]
async fn a_304_for_another_validator_is_refetched_not_forwarded() {
    let (origin, seen) = start_origin();
    let squall = Squall::start(&config(origin, ""));
    let client = h2_client::h2c(squall.addr).await;
    for path in ["/c/flip-h1", "/c/flip-h2"] {
        assert_eq!(get(&squall, path, "").body_text(), "flip 1");
        std::thread::sleep(Duration::from_millis(2100));
        let (status, etag, body) = if path.ends_with("h1") {
            let r = get(&squall, path, "");
            (
                r.status,
                r.header("etag").unwrap().to_owned(),
                r.body_text(),
            )
        } else {
            let url = format!("http://cache.test{path}");
            let r = h2_client::fetch(&client, "GET", &url, None).await;
            let etag = r.headers["etag"].to_str().unwrap().to_owned();
            (r.status, etag, String::from_utf8(r.body).unwrap())
        };
        // 1: the first fetch, 2: the revalidation's 304, 3: the unconditional refetch.
        assert_eq!(
            (status, etag.as_str(), body.as_str()),
            (200, "\"f3\"", "flip 3"),
            "{path}"
        );
        assert_eq!(seen.requests.count(path), 3, "{path}");
        let hit = get(&squall, path, "");
        assert_eq!(
            (hit.body_text().as_str(), x_cache(&hit)),
            ("flip 3", "HIT"),
            "{path}"
        );
    }
    assert_eq!(seen.conditional.load(Ordering::Relaxed), 2);
}

/// RFC 9111 §4: a hit carries the stored response's own Date with Age beside it (a fresh Date
/// next to a non-zero Age would count the time in cache twice), over HTTP/1.1 and HTTP/2, and
/// a 304 from the entry carries it too.
#[tokio::test]
async fn a_hit_carries_the_stored_date_with_its_age() {
    let (origin, _) = start_origin();
    let squall = Squall::start(&config(origin, ""));
    let miss = get(&squall, "/c/dated", "");
    assert_eq!(x_cache(&miss), "MISS");
    let etag_miss = get(&squall, "/c/etag", "");
    std::thread::sleep(Duration::from_millis(1100));
    let parse = |date: &str| httpdate::parse_http_date(date).unwrap();
    let hit = get(&squall, "/c/dated", "");
    assert_eq!(x_cache(&hit), "HIT");
    let stored = hit.header("date").unwrap().to_owned();
    let age: u64 = hit.header("age").unwrap().parse().unwrap();
    // The origin dated its response 30 s back: the hit says so, and is 30 s old or more.
    let behind = std::time::SystemTime::now()
        .duration_since(parse(&stored))
        .unwrap();
    assert!((30..40).contains(&behind.as_secs()), "date {stored}");
    assert!((31..40).contains(&age), "age {age}");
    let dates = hit
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("date"));
    assert_eq!(dates.count(), 1);
    let client = h2_client::h2c(squall.addr).await;
    let h2 = h2_client::fetch(&client, "GET", "http://cache.test/c/dated", None).await;
    assert_eq!(h2.headers["x-cache"], "HIT");
    assert_eq!(h2.headers.get_all("date").iter().count(), 1);
    assert_eq!(h2.headers["date"], stored.as_str());
    // hyper dated /c/etag when it answered the miss: the 304 from the entry says that time.
    let not_modified = get(&squall, "/c/etag", "If-None-Match: \"v1\"\r\n");
    assert_eq!(not_modified.status, 304);
    assert_eq!(not_modified.header("date"), etag_miss.header("date"));
}

/// An origin on raw sockets: the first request is answered (fresh for 1 s, stale-if-error for
/// 60), every later one is read and the connection closed without a byte of answer.
fn start_closing_origin() -> SocketAddr {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut answered = false;
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            if !answered {
                answered = true;
                let body = "kept";
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncache-control: max-age=1, stale-if-error=60\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        }
    });
    addr
}

/// RFC 5861 §4: an origin that closes the connection instead of answering is an error that
/// `stale-if-error` covers: the stale entry is served, over HTTP/1.1 and HTTP/2, not a 502.
#[tokio::test]
async fn an_origin_that_closes_without_answering_gets_the_stale_entry_served() {
    let origin = start_closing_origin();
    let squall = Squall::start(&config(origin, ""));
    assert_eq!(get(&squall, "/c/gone", "").body_text(), "kept");
    std::thread::sleep(Duration::from_millis(2100));
    let response = get(&squall, "/c/gone", "");
    assert_eq!(
        (
            response.status,
            response.body_text().as_str(),
            x_cache(&response)
        ),
        (200, "kept", "STALE"),
        "{}",
        squall.log()
    );
    let client = h2_client::h2c(squall.addr).await;
    let h2 = h2_client::fetch(&client, "GET", "http://cache.test/c/gone", None).await;
    assert_eq!((h2.status, h2.body.as_slice()), (200, &b"kept"[..]));
    assert_eq!(h2.headers["x-cache"], "STALE");
}

/// An origin on raw sockets that says `103 Early Hints` before each final answer (a stored
/// 200). Keeps no count: each connection gets one exchange and is closed.
fn start_hinting_origin() -> SocketAddr {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n\
                  HTTP/1.1 200 OK\r\ncache-control: max-age=60\r\ncontent-length: 5\r\n\
                  connection: close\r\n\r\nhints",
            );
        }
    });
    addr
}

/// RFC 9110 §15.2: a `103 Early Hints` from the origin reaches the client ahead of the final
/// response (an interim head on HTTP/1.1, interim HEADERS on HTTP/2), and is not stored: the
/// hit that follows has none.
#[tokio::test]
async fn early_hints_are_forwarded_and_never_stored() {
    use std::io::Read;
    let origin = start_hinting_origin();
    let squall = Squall::start(&config(origin, ""));
    let read_all = |request: &str| {
        let mut stream = squall.connect();
        stream.write_all(request.as_bytes()).unwrap();
        let mut text = String::new();
        let _ = stream.read_to_string(&mut text);
        text
    };
    let request = "GET /c/hints HTTP/1.1\r\nHost: cache.test\r\nConnection: close\r\n\r\n";
    let miss = read_all(request);
    assert!(miss.starts_with("HTTP/1.1 103 Early Hints\r\n"), "{miss}");
    let interim = &miss[..miss.find("\r\n\r\n").unwrap()];
    assert!(
        interim.contains("link: </style.css>; rel=preload"),
        "{miss}"
    );
    let final_at = miss.find("HTTP/1.1 200 OK\r\n").expect("a final 200");
    assert!(miss[final_at..].ends_with("\r\n\r\nhints"), "{miss}");
    let hit = read_all(request);
    assert!(hit.starts_with("HTTP/1.1 200 OK\r\n"), "{hit}");
    assert!(hit.to_lowercase().contains("x-cache: hit"), "{hit}");
    // HTTP/2: the interim HEADERS leave the stream open for the final response.
    let client = h2_client::h2c(squall.addr).await;
    let url = "http://cache.test/c/hints-h2";
    let h2 = h2_client::fetch(&client, "GET", url, None).await;
    assert_eq!((h2.status, h2.body.as_slice()), (200, &b"hints"[..]));
    assert_eq!(h2.headers["x-cache"], "MISS");
    // The h2 crate's client drops interim responses without a word; nghttp shows the frames
    // as they came: the 103 with its link, then the final 200, on the one stream.
    let output = squall_e2e::tool("nghttp")
        .args(["-nv", "-H", ":authority: cache.test"])
        .arg(format!("http://{}/c/hints-nghttp", squall.addr))
        .output()
        .expect("nghttp");
    let text = String::from_utf8_lossy(&output.stdout);
    let interim = text
        .find(":status: 103")
        .unwrap_or_else(|| panic!("a 103 in {text}"));
    let last = text
        .find(":status: 200")
        .unwrap_or_else(|| panic!("a 200 in {text}"));
    assert!(interim < last, "the 103 comes first: {text}");
    assert!(
        text[interim..last].contains("link: </style.css>; rel=preload"),
        "{text}"
    );
}
