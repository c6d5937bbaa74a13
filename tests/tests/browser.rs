//! What a browser expects from an edge: an idle HTTP/2 connection ends with GOAWAY, not a bare
//! close (RFC 9113 §9.1), so a request sent at that moment is known to be unprocessed; and a
//! reload (`Cache-Control: no-cache`) either stays at the edge (`request_no_cache = "ignore"`)
//! or, honoured, reaches the origin once however many clients reload at the same moment; and
//! an origin that was never asked reads as up, not down.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use squall_e2e::{Squall, admin_addr, admin_get, roundtrip};

#[path = "support/origin.rs"]
mod origin;
#[path = "support/raw_h2.rs"]
mod raw_h2;
use raw_h2::*;

fn idle_config(idle_timeout: &str) -> String {
    format!(
        r#"[server]
workers = 1
drain_timeout = "5s"

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[limits]
idle_timeout = "{idle_timeout}"

[[vhost]]
hosts = ["*"]

[[vhost.route]]
exact = "/"
respond = {{ status = 200, body = "Hello, world!" }}
"#
    )
}

#[test]
fn an_idle_http2_connection_gets_goaway_before_the_close() {
    let lateness = squall_e2e::Lateness::start();
    let squall = Squall::start(&idle_config("1s"));
    let mut stream = raw_h2(squall.addr);
    stream
        .write_all(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &get_block()))
        .unwrap();
    let started = Instant::now();
    let (frames, closed) = frames_until_close(&mut stream);
    assert!(closed, "the idle connection is closed: {frames:?}");
    // Not before the second of idle_timeout has passed (a lower bound holds however busy the
    // machine), and not long after it.
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(950),
        "closed after {elapsed:?}, before the idle timeout"
    );
    // Closed at the idle timeout and its grace, not later.
    lateness.assert_within("the idle close", elapsed, Duration::from_secs(10));
    assert!(
        frames.iter().any(|f| f.kind == HEADERS && f.stream == 1),
        "stream 1 is answered first: {frames:?}"
    );
    let goaway = frames
        .iter()
        .find(|f| f.kind == GOAWAY)
        .unwrap_or_else(|| panic!("a GOAWAY before the close: {frames:?}"));
    assert_eq!(goaway_error(goaway), 0, "GOAWAY(NO_ERROR)");
    assert_eq!(
        goaway_last_stream(goaway),
        1,
        "the last stream Squall processed"
    );
}

// ---- request no-cache ----

/// An origin that answers every request `200`, fresh for 600 s, after `delay`, and counts
/// what it answered.
fn counting_origin(delay: Duration) -> (SocketAddr, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    let addr = origin::raw_origin(move |_| {
        std::thread::sleep(delay);
        let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
        let fields = ["cache-control: max-age=600", "etag: \"v1\""];
        origin::response("200 OK", &fields, format!("response {n}").as_bytes())
    });
    (addr, count)
}

fn cache_config(origin: SocketAddr, request_no_cache: &str) -> String {
    squall_e2e::cache_config(origin, request_no_cache, "/", "")
}

fn get(squall: &Squall, extra: &str) -> squall_e2e::Response {
    let mut stream = squall.connect();
    roundtrip(
        &mut stream,
        &format!("GET /page HTTP/1.1\r\nHost: b.test\r\n{extra}\r\n"),
    )
}

#[test]
fn with_ignore_a_reload_is_a_hit() {
    let (origin, count) = counting_origin(Duration::ZERO);
    let squall = Squall::start(&cache_config(origin, "request_no_cache = \"ignore\""));
    assert_eq!(get(&squall, "").header("x-cache"), Some("MISS"));
    for reload in [
        "Cache-Control: no-cache\r\nPragma: no-cache\r\n",
        "Cache-Control: max-age=0\r\n",
        "Pragma: no-cache\r\n",
    ] {
        let response = get(&squall, reload);
        assert_eq!(response.status, 200);
        assert_eq!(response.header("x-cache"), Some("HIT"), "{reload}");
    }
    assert_eq!(
        count.load(Ordering::SeqCst),
        1,
        "only the first reached the origin"
    );
}

#[test]
fn with_honor_a_hundred_concurrent_reloads_make_one_origin_request() {
    // The origin takes 1 s, so every reload arrives while the first one's fetch is on.
    let (origin, count) = counting_origin(Duration::from_secs(1));
    let squall = Squall::start(&cache_config(origin, "request_no_cache = \"honor\""));
    assert_eq!(get(&squall, "").header("x-cache"), Some("MISS"));
    assert_eq!(count.load(Ordering::SeqCst), 1);
    // Each client connects first, then all send together.
    let barrier = Arc::new(std::sync::Barrier::new(100));
    let clients: Vec<_> = (0..100)
        .map(|_| {
            let mut stream = squall.connect();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                roundtrip(
                    &mut stream,
                    "GET /page HTTP/1.1\r\nHost: b.test\r\nCache-Control: no-cache\r\n\r\n",
                )
            })
        })
        .collect();
    for client in clients {
        let response = client.join().unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(
            response.body_text(),
            "response 2",
            "every reload got the one refetch"
        );
    }
    assert_eq!(
        count.load(Ordering::SeqCst),
        2,
        "100 concurrent no-cache requests made one origin request"
    );
}

/// Right after start, before any request or probe, every upstream server reads as up in
/// `/metrics` (it read 0 until a worker had published, which made a healthy origin look down).
#[test]
fn upstream_servers_read_as_up_before_any_request() {
    let (origin, _) = counting_origin(Duration::ZERO);
    let squall = Squall::start(&cache_config(origin, ""));
    let (_, metrics) = admin_get(admin_addr(&squall), "/metrics");
    let series =
        format!("squall_upstream_server_up{{upstream=\"app\",server=\"{origin}\",worker=\"0\"}} ");
    let line = metrics
        .lines()
        .find(|l| l.starts_with(&series))
        .unwrap_or_else(|| panic!("{series} in {metrics}"));
    assert!(line.ends_with(" 1"), "{line}");
}
