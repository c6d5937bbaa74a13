//! Targeted cache control (RFC 9213) and `cache_set_cookie` against a counting origin, over
//! HTTP/1.1 and HTTP/2: `CDN-Cache-Control` (and `Surrogate-Control`) let Squall store what
//! Cache-Control forbids to other caches, `cache.target_header` beats `CDN-Cache-Control`,
//! clients never see the target header or `Surrogate-Control` and see `CDN-Cache-Control`
//! unless `cache.strip_cdn_cache_control` is on, and a response with `Set-Cookie` is passed,
//! stored without the cookie, or stored with it, as the route says.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;

use squall_e2e::{PathCounts, Squall, roundtrip};

#[path = "support/h2_client.rs"]
mod h2_client;
#[path = "support/origin.rs"]
mod origin;

/// Requests the origin saw, by path and query.
type Seen = Arc<PathCounts>;

/// The origin's answers, by path; each body is numbered, so a stored answer shows.
async fn handle(
    seen: Seen,
    req: http::Request<Incoming>,
) -> Result<http::Response<Full<Bytes>>, std::io::Error> {
    let target = req.uri().path_and_query().unwrap().as_str().to_owned();
    let n = seen.hit(&target);
    let path = req.uri().path().to_owned();
    let _ = req.into_body().collect().await;
    let fields: &[(&str, &str)] = match path.as_str() {
        // Other caches must not store it; a CDN (Squall) may, for a minute.
        "/c/cdn" => &[
            ("cdn-cache-control", "max-age=60"),
            ("cache-control", "no-store"),
        ],
        "/c/surrogate" => &[
            ("surrogate-control", "max-age=60"),
            ("cache-control", "no-store"),
        ],
        // Our own field says no; CDN-Cache-Control and Cache-Control say yes.
        "/c/ours-no" => &[
            ("squall-cache-control", "no-store"),
            ("cdn-cache-control", "max-age=60"),
            ("cache-control", "max-age=60"),
        ],
        // Our own field says yes; the others say no.
        "/c/ours-yes" => &[
            ("squall-cache-control", "max-age=60"),
            ("cdn-cache-control", "no-store"),
            ("cache-control", "no-store"),
        ],
        _ if path.ends_with("/cookie") => &[("cache-control", "max-age=60")],
        _ => &[],
    };
    let mut response = http::Response::builder();
    for (name, value) in fields {
        response = response.header(*name, *value);
    }
    if path.ends_with("/cookie") {
        response = response.header("set-cookie", format!("id={n}; Path=/"));
    }
    let body = format!("{path} {n}");
    Ok(response.body(Full::new(Bytes::from(body))).unwrap())
}

fn start_origin() -> (SocketAddr, Seen) {
    let seen = Seen::default();
    let shared = seen.clone();
    let addr = origin::hyper_origin(move |req| handle(shared.clone(), req));
    (addr, seen)
}

/// The tests' config; `strip` sets `cache.strip_cdn_cache_control`.
fn config(origin: SocketAddr, strip: bool) -> String {
    let routes = [
        ("/pass/", ""),
        ("/strip/", "cache_set_cookie = \"strip\""),
        ("/store/", "cache_set_cookie = \"store\""),
    ];
    let more: String = routes
        .iter()
        .map(|(prefix, extra)| {
            format!(
                "\n[[vhost.route]]\nprefix = \"{prefix}\"\nproxy = \"app\"\ncache = true\n{extra}\n"
            )
        })
        .collect();
    let cache =
        format!("target_header = \"Squall-Cache-Control\"\nstrip_cdn_cache_control = {strip}");
    squall_e2e::cache_config(origin, &cache, "/c/", &more)
}

#[derive(Clone, Copy, Debug)]
enum Proto {
    H1,
    H2,
}

/// One answer as a test looks at it: X-Cache, the fields (lowercase names), the body.
struct Answer {
    x_cache: String,
    fields: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn field(&self, name: &str) -> Option<&str> {
        let mut found = self.fields.iter().filter(|(n, _)| n == name);
        let first = found.next().map(|(_, v)| v.as_str());
        assert!(found.next().is_none(), "{name} once at most");
        first
    }
}

struct Client {
    squall: Squall,
    h2: h2::client::SendRequest<Bytes>,
}

impl Client {
    async fn start(origin: SocketAddr) -> Client {
        Client::start_with(origin, false).await
    }

    async fn start_with(origin: SocketAddr, strip: bool) -> Client {
        let squall = Squall::start(&config(origin, strip));
        let h2 = h2_client::h2c(squall.addr).await;
        Client { squall, h2 }
    }

    /// GET `target` over `proto`; `?h1` or `?h2` is appended so that each protocol has its
    /// own cache key.
    async fn get(&self, proto: Proto, path: &str) -> Answer {
        let target = format!("{path}?{proto:?}").to_ascii_lowercase();
        match proto {
            Proto::H1 => {
                let mut stream = self.squall.connect();
                let request = format!("GET {target} HTTP/1.1\r\nHost: cache.test\r\n\r\n");
                let r = roundtrip(&mut stream, &request);
                assert_eq!(r.status, 200);
                let fields = (r.headers.iter())
                    .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
                    .collect();
                Answer {
                    x_cache: r.header("x-cache").unwrap_or("").to_owned(),
                    fields,
                    body: r.body_text(),
                }
            }
            Proto::H2 => {
                let url = format!("http://cache.test{target}");
                let r = h2_client::fetch(&self.h2, "GET", &url, None).await;
                assert_eq!(r.status, 200);
                let fields = (r.headers.iter())
                    .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
                    .collect();
                Answer {
                    x_cache: r.headers["x-cache"].to_str().unwrap().to_owned(),
                    fields,
                    body: String::from_utf8(r.body).unwrap(),
                }
            }
        }
    }
}

/// The targeted fields meant for Squall alone: clients never see them.
const OURS_ALONE: [&str; 2] = ["surrogate-control", "squall-cache-control"];

fn assert_no_targeted_field(answer: &Answer) {
    for name in OURS_ALONE.iter().chain(&["cdn-cache-control"]) {
        assert_eq!(answer.field(name), None, "{name} reached the client");
    }
}

fn assert_none_of_ours(answer: &Answer) {
    for name in OURS_ALONE {
        assert_eq!(answer.field(name), None, "{name} reached the client");
    }
}

/// By default `CDN-Cache-Control` goes on to the client as the origin sent it, misses and
/// hits alike, for a CDN tier behind Squall (RFC 9213 §3: CDNs "will typically forward" it);
/// `Surrogate-Control` and the target header do not.
#[tokio::test]
async fn cdn_cache_control_stores_what_cache_control_forbids_and_goes_on_to_the_next_cdn() {
    let (origin, seen) = start_origin();
    let client = Client::start(origin).await;
    for proto in [Proto::H1, Proto::H2] {
        for (path, cdn) in [("/c/cdn", Some("max-age=60")), ("/c/surrogate", None)] {
            let first = client.get(proto, path).await;
            assert_eq!(first.x_cache, "MISS", "{proto:?} {path}");
            assert_eq!(first.body, format!("{path} 1"));
            // Cache-Control goes to the client unchanged, and CDN-Cache-Control too.
            assert_eq!(first.field("cache-control"), Some("no-store"));
            assert_eq!(first.field("cdn-cache-control"), cdn, "{proto:?} {path}");
            assert_none_of_ours(&first);
            let again = client.get(proto, path).await;
            assert_eq!(again.x_cache, "HIT", "{proto:?} {path}");
            assert_eq!(again.body, format!("{path} 1"));
            assert_eq!(again.field("cache-control"), Some("no-store"));
            assert_eq!(again.field("cdn-cache-control"), cdn, "{proto:?} {path}");
            assert_none_of_ours(&again);
            let target = format!("{path}?{proto:?}").to_ascii_lowercase();
            assert_eq!(seen.count(&target), 1, "{target}");
        }
    }
}

/// `strip_cdn_cache_control = true`: no targeted field reaches a client, miss or hit, and
/// CDN-Cache-Control still decides what is stored.
#[tokio::test]
async fn strip_cdn_cache_control_keeps_every_targeted_field_from_clients() {
    let (origin, seen) = start_origin();
    let client = Client::start_with(origin, true).await;
    for proto in [Proto::H1, Proto::H2] {
        for path in ["/c/cdn", "/c/surrogate", "/c/ours-yes"] {
            let first = client.get(proto, path).await;
            assert_eq!(first.x_cache, "MISS", "{proto:?} {path}");
            assert_no_targeted_field(&first);
            let again = client.get(proto, path).await;
            assert_eq!(
                (again.x_cache.as_str(), again.body.as_str()),
                ("HIT", format!("{path} 1").as_str()),
                "{proto:?}"
            );
            assert_no_targeted_field(&again);
            let target = format!("{path}?{proto:?}").to_ascii_lowercase();
            assert_eq!(seen.count(&target), 1, "{target}");
        }
    }
}

#[tokio::test]
async fn the_target_header_beats_cdn_cache_control() {
    let (origin, seen) = start_origin();
    let client = Client::start(origin).await;
    for proto in [Proto::H1, Proto::H2] {
        let tag = format!("{proto:?}").to_ascii_lowercase();
        for n in 1..=2 {
            let no = client.get(proto, "/c/ours-no").await;
            assert_eq!(no.x_cache, "MISS");
            assert_eq!(no.body, format!("/c/ours-no {n}"));
            assert_none_of_ours(&no);
            assert_eq!(no.field("cdn-cache-control"), Some("max-age=60"));
        }
        assert_eq!(seen.count(&format!("/c/ours-no?{tag}")), 2);
        let yes = client.get(proto, "/c/ours-yes").await;
        assert_eq!(yes.x_cache, "MISS");
        assert_none_of_ours(&yes);
        let yes = client.get(proto, "/c/ours-yes").await;
        assert_eq!(
            (yes.x_cache.as_str(), yes.body.as_str()),
            ("HIT", "/c/ours-yes 1")
        );
        assert_none_of_ours(&yes);
        assert_eq!(yes.field("cdn-cache-control"), Some("no-store"));
        assert_eq!(seen.count(&format!("/c/ours-yes?{tag}")), 1);
    }
}

#[tokio::test]
async fn set_cookie_is_passed_stripped_or_stored_as_the_route_says() {
    let (origin, seen) = start_origin();
    let client = Client::start(origin).await;
    for proto in [Proto::H1, Proto::H2] {
        let tag = format!("{proto:?}").to_ascii_lowercase();
        // pass: never stored, every client gets its own cookie from the origin.
        for n in 1..=2 {
            let pass = client.get(proto, "/pass/cookie").await;
            assert_eq!(pass.x_cache, "MISS", "{proto:?}");
            assert_eq!(
                pass.field("set-cookie"),
                Some(format!("id={n}; Path=/").as_str())
            );
        }
        assert_eq!(seen.count(&format!("/pass/cookie?{tag}")), 2);
        // strip: the client whose request fetched it gets the cookie; hits do not.
        let strip = client.get(proto, "/strip/cookie").await;
        assert_eq!(strip.x_cache, "MISS");
        assert_eq!(strip.field("set-cookie"), Some("id=1; Path=/"));
        let strip = client.get(proto, "/strip/cookie").await;
        assert_eq!(
            (strip.x_cache.as_str(), strip.body.as_str()),
            ("HIT", "/strip/cookie 1")
        );
        assert_eq!(strip.field("set-cookie"), None, "{proto:?}");
        assert_eq!(seen.count(&format!("/strip/cookie?{tag}")), 1);
        // store: every hit replays the stored cookie.
        let store = client.get(proto, "/store/cookie").await;
        assert_eq!(store.x_cache, "MISS");
        let store = client.get(proto, "/store/cookie").await;
        assert_eq!(store.x_cache, "HIT", "{proto:?}");
        assert_eq!(store.field("set-cookie"), Some("id=1; Path=/"));
        assert_eq!(seen.count(&format!("/store/cookie?{tag}")), 1);
    }
}
