//! `stale-while-revalidate` (RFC 5861 §3) served without waiting: every request inside the
//! window gets the stale entry at once, the first included, while one revalidation runs in the
//! background, across workers and protocols.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use squall_e2e::{Squall, admin_addr, admin_get, metric_sum, read_response_head, roundtrip};

#[path = "support/h2_client.rs"]
mod h2_client;
#[path = "support/origin.rs"]
mod origin;

/// The request lines and fields the origin saw, one string per request.
type Seen = Arc<Mutex<Vec<String>>>;

/// An origin on raw sockets. Its first answer is `v1` (fresh for 1 s, then servable stale for
/// a minute, with an ETag); every later answer waits for a message on the returned gate, then
/// is `v2`, fresh for a minute.
fn start_origin() -> (SocketAddr, Seen, mpsc::Sender<()>) {
    let seen: Seen = Arc::default();
    let (open, gate) = mpsc::channel::<()>();
    let gate = Mutex::new(gate);
    let log = seen.clone();
    let addr = origin::raw_origin(move |head| {
        let n = {
            let mut seen = log.lock().unwrap();
            seen.push(head.to_ascii_lowercase());
            seen.len()
        };
        let (cache_control, etag, body) = if n == 1 {
            ("max-age=1, stale-while-revalidate=60", "\"v1\"", "v1")
        } else {
            // The test decides when the revalidation is answered; a closed gate (the test
            // ended) answers at once.
            let _ = gate.lock().unwrap().recv_timeout(Duration::from_secs(20));
            ("max-age=60", "\"v2\"", "v2")
        };
        let fields = [
            format!("cache-control: {cache_control}"),
            format!("etag: {etag}"),
        ];
        let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
        origin::response("200 OK", &fields, body.as_bytes())
    });
    (addr, seen, open)
}

fn config(origin: SocketAddr) -> String {
    format!(
        r#"[server]
workers = 2

[admin]
listen = "127.0.0.2:0"

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]
response_timeout = "30s"

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/"
proxy = "app"
cache = true
"#
    )
}

fn requests(seen: &Seen) -> Vec<String> {
    seen.lock().unwrap().clone()
}

/// Waits (bounded) until the origin has seen `n` requests.
fn wait_for_requests(seen: &Seen, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while requests(seen).len() < n {
        assert!(Instant::now() < deadline, "origin saw {:?}", requests(seen));
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_entry_is_served_at_once_while_one_background_revalidation_runs() {
    let (origin, seen, gate) = start_origin();
    let squall = Squall::start(&config(origin));
    let host = squall.addr.to_string();
    let get = |extra: &str| {
        let mut stream = squall.connect();
        roundtrip(
            &mut stream,
            &format!("GET /swr HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n"),
        )
    };
    let first = get("");
    assert_eq!(first.header("x-cache"), Some("MISS"));
    assert_eq!(first.body_text(), "v1");
    // Past max-age=1: stale, inside the stale-while-revalidate window.
    std::thread::sleep(Duration::from_millis(1300));

    // The first request to find it stale is a HEAD with its own validator: it is answered
    // stale at once (the origin is held until the gate opens), not made to wait.
    let mut stream = squall.connect();
    let head = format!("HEAD /swr HTTP/1.1\r\nHost: {host}\r\nIf-None-Match: \"zz\"\r\n\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let stale = read_response_head(&mut stream).unwrap();
    assert_eq!(stale.status, 200);
    assert_eq!(stale.header("x-cache"), Some("STALE"));
    assert_eq!(stale.header("etag"), Some("\"v1\""));

    // The revalidation reached the origin as a GET carrying the entry's validator, not the
    // client's method or conditional.
    wait_for_requests(&seen, 2);
    let revalidation = &requests(&seen)[1];
    assert!(revalidation.starts_with("get /swr "), "{revalidation}");
    assert!(
        revalidation.contains("if-none-match: \"v1\""),
        "{revalidation}"
    );
    assert!(!revalidation.contains("\"zz\""), "{revalidation}");

    // While it runs, everyone else gets the stale entry too, over HTTP/1.1 and HTTP/2 and on
    // both workers, and nobody starts a second revalidation.
    let client = h2_client::h2c(squall.addr).await;
    let url = format!("http://{host}/swr");
    for _ in 0..4 {
        let h1 = get("");
        assert_eq!(h1.header("x-cache"), Some("STALE"));
        assert_eq!(h1.body_text(), "v1");
        let h2 = h2_client::fetch(&client, "GET", &url, None).await;
        assert_eq!(h2.headers["x-cache"], "STALE");
        assert_eq!(h2.body, b"v1");
    }
    assert_eq!(requests(&seen).len(), 2, "{:?}", requests(&seen));

    // The origin answers: the background fill stores v2, which the next requests hit.
    gate.send(()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let response = get("");
        if response.header("x-cache") == Some("HIT") {
            assert_eq!(response.body_text(), "v2");
            break;
        }
        assert_eq!(response.body_text(), "v1");
        assert!(Instant::now() < deadline, "v2 was never stored");
        std::thread::sleep(Duration::from_millis(50));
    }
    let h2 = h2_client::fetch(&client, "GET", &url, None).await;
    assert_eq!(
        (h2.headers["x-cache"].to_str().unwrap(), &h2.body[..]),
        ("HIT", &b"v2"[..])
    );
    assert_eq!(requests(&seen).len(), 2);

    let (_, metrics) = admin_get(admin_addr(&squall), "/metrics");
    let total = |name| metric_sum(&metrics, name);
    assert_eq!(total("squall_cache_background_fetches_total"), 1.0);
    assert_eq!(total("squall_cache_misses_total"), 1.0, "{metrics}");
    assert!(total("squall_cache_stale_total") >= 9.0, "{metrics}");
}
