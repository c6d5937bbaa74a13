//! The origin keep-alive pool against an origin that closes idle connections (issue 29 item
//! 12): a request that could not be sent again (a PUT or POST with a body) must not go out on
//! a pooled connection the origin may be closing at that moment, since its 502 would be
//! Squall's own doing; requests that may be retried still reuse the pool, and a pooled
//! connection is closed after the upstream's `pool_idle_timeout`.
//!
//! The origin closes an idle connection lazily: a request that arrives on a connection idle
//! for its keep-alive timeout or more is dropped unanswered and the connection closed. That
//! is the race at its worst, made repeatable: the origin's timer fired just as the request
//! arrived (with node, whose timer fires on its own, a PUT sent within about 1.5 ms of it
//! gets the same 502 over loopback).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use squall_e2e::{Squall, admin_addr, admin_get, metric_sum, roundtrip};

#[path = "support/h2_client.rs"]
mod h2_client;

/// The origin's keep-alive timeout (gunicorn's default): above Squall's default
/// `pool_unsafe_idle_timeout` of 1 s, far below its 60 s `pool_idle_timeout`.
const ORIGIN_IDLE: Duration = Duration::from_secs(2);
/// How long the tests leave the pool idle: past the origin's timeout.
const PAUSE: Duration = Duration::from_millis(2500);

/// What the origin saw.
#[derive(Default)]
struct Seen {
    connections: AtomicUsize,
    answered: AtomicUsize,
    /// Requests that arrived after the keep-alive timeout, dropped with their connection.
    dropped: AtomicUsize,
    /// How long each connection had been idle when Squall closed it (EOF while waiting).
    closed_after: Mutex<Vec<Duration>>,
}

/// An HTTP/1.1 origin that keeps connections alive for `idle`, answering each request `200`
/// with `METHOD BODY-LENGTH` as its body.
fn closing_origin(idle: Duration) -> (SocketAddr, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an origin");
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let shared = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(1000) {
            let Ok(stream) = stream else { return };
            shared.connections.fetch_add(1, Ordering::SeqCst);
            let seen = shared.clone();
            std::thread::spawn(move || serve(stream, idle, &seen));
        }
    });
    (addr, seen)
}

fn serve(mut stream: TcpStream, idle: Duration, seen: &Seen) {
    let mut pending = Vec::new();
    let mut buf = [0u8; 4096];
    let mut last = Instant::now();
    loop {
        let Ok(n) = stream.read(&mut buf) else { return };
        if n == 0 {
            seen.closed_after.lock().unwrap().push(last.elapsed());
            return;
        }
        if pending.is_empty() && last.elapsed() >= idle {
            // Its keep-alive timer "fired" as the request came in: the request is lost.
            seen.dropped.fetch_add(1, Ordering::SeqCst);
            return;
        }
        pending.extend_from_slice(&buf[..n]);
        while let Some((method, used)) = whole_request(&pending) {
            let body = format!("{method} {}", used.1);
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            pending.drain(..used.0);
            if stream.write_all(response.as_bytes()).is_err() {
                return;
            }
            seen.answered.fetch_add(1, Ordering::SeqCst);
            last = Instant::now();
        }
    }
}

/// The method of the first whole request in `bytes` (bodies framed by `content-length` or
/// chunked, without trailers), with the bytes it takes and its body's length.
fn whole_request(bytes: &[u8]) -> Option<(String, (usize, usize))> {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
    let method = head.split(' ').next()?.to_ascii_uppercase();
    if head.contains("transfer-encoding: chunked") {
        let (used, length) = chunked(&bytes[end..])?;
        return Some((method, (end + used, length)));
    }
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().expect("a content-length"));
    (bytes.len() >= end + length).then_some((method, (end + length, length)))
}

/// A whole chunked body at the start of `bytes`: the bytes it takes and the data's length.
fn chunked(bytes: &[u8]) -> Option<(usize, usize)> {
    let (mut at, mut length) = (0, 0);
    loop {
        let line = bytes[at..].windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&bytes[at..at + line]).ok()?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        at += line + 2 + size + 2;
        if bytes.len() < at {
            return None;
        }
        if size == 0 {
            return Some((at, length));
        }
        length += size;
    }
}

/// One proxy route to `origin` with the upstream's `pool` lines, and the admin listener.
fn config(origin: SocketAddr, pool: &str) -> String {
    // No limits: the admin table goes after the empty [limits] one.
    squall_e2e::proxy_route_config(origin, "[admin]\nlisten = \"127.0.0.2:0\"", pool, "")
}

/// One HTTP/1.1 request on a new connection; its status and body.
fn h1(squall: &Squall, method: &str, body: &str) -> (u16, String) {
    let mut stream = squall.connect();
    let request = format!(
        "{method} /r HTTP/1.1\r\nHost: x\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let response = roundtrip(&mut stream, &request);
    (response.status, response.body_text())
}

fn counter(squall: &Squall, name: &str) -> f64 {
    let (status, text) = admin_get(admin_addr(squall), "/metrics");
    assert_eq!(status, 200);
    metric_sum(&text, name)
}

#[test]
fn unsafe_requests_after_the_origins_keepalive_timeout_get_a_new_connection() {
    let (origin, seen) = closing_origin(ORIGIN_IDLE);
    let squall = Squall::start(&config(origin, ""));
    let connections = || seen.connections.load(Ordering::SeqCst);
    assert_eq!(h1(&squall, "GET", ""), (200, "GET 0".to_owned()));
    // Used within the second: an unsafe request reuses the connection.
    assert_eq!(h1(&squall, "PUT", "abc"), (200, "PUT 3".to_owned()));
    assert_eq!(connections(), 1, "a recently used connection is reused");

    // HTTP/1.1: a PUT with a body after the origin's keep-alive timeout.
    std::thread::sleep(PAUSE);
    assert_eq!(
        h1(&squall, "PUT", "abc"),
        (200, "PUT 3".to_owned()),
        "a PUT on a pooled connection idle for {PAUSE:?} (origin log: {} dropped)",
        seen.dropped.load(Ordering::SeqCst)
    );
    assert_eq!(connections(), 2, "the PUT went on a new connection");

    // HTTP/2 (h2c): a POST with a body, the same way.
    std::thread::sleep(PAUSE);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let reply = runtime.block_on(async {
        let client = h2_client::h2c(squall.addr).await;
        let body = Some(Bytes::from_static(b"hello"));
        h2_client::fetch(&client, "POST", "http://x/r", body).await
    });
    assert_eq!(
        (
            reply.status,
            String::from_utf8_lossy(&reply.body).into_owned()
        ),
        (200, "POST 5".to_owned()),
        "an HTTP/2 client's POST on a pooled connection idle for {PAUSE:?}"
    );
    assert_eq!(connections(), 3, "the POST went on a new connection");
    assert_eq!(seen.dropped.load(Ordering::SeqCst), 0, "no request lost");
    assert_eq!(counter(&squall, "squall_upstream_unsafe_fresh_total"), 2.0);

    // A GET still takes the old connection, and is sent again when the origin drops it.
    std::thread::sleep(PAUSE);
    assert_eq!(h1(&squall, "GET", ""), (200, "GET 0".to_owned()));
    assert_eq!(seen.dropped.load(Ordering::SeqCst), 1, "the GET tried it");
    assert_eq!(connections(), 4, "then went again on a new one");
}

#[test]
fn pool_unsafe_idle_timeout_zero_sends_every_unsafe_request_on_a_new_connection() {
    let (origin, seen) = closing_origin(ORIGIN_IDLE);
    let pool = r#"pool_unsafe_idle_timeout = "0s""#;
    let squall = Squall::start(&config(origin, pool));
    for _ in 0..3 {
        assert_eq!(h1(&squall, "POST", "ab"), (200, "POST 2".to_owned()));
    }
    assert_eq!(seen.connections.load(Ordering::SeqCst), 3);
    // A GET reuses one of them.
    assert_eq!(h1(&squall, "GET", ""), (200, "GET 0".to_owned()));
    assert_eq!(seen.connections.load(Ordering::SeqCst), 3);
}

#[test]
fn pooled_connections_are_closed_after_pool_idle_timeout() {
    let lateness = squall_e2e::Lateness::start();
    // The origin would keep them for a minute; Squall closes them after a second.
    let (origin, seen) = closing_origin(Duration::from_secs(60));
    let pool = r#"pool_idle_timeout = "1s""#;
    let squall = Squall::start(&config(origin, pool));
    assert_eq!(h1(&squall, "GET", ""), (200, "GET 0".to_owned()));
    // The pool is expired at least once a second: closed between 1 s and 2 s idle, with slack
    // for a loaded machine.
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.closed_after.lock().unwrap().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the idle connection was not closed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let idle = seen.closed_after.lock().unwrap()[0];
    assert!(
        idle >= Duration::from_millis(950),
        "closed after {idle:?} idle"
    );
    lateness.assert_within("the idle close", idle, Duration::from_secs(8));
    assert_eq!(h1(&squall, "GET", ""), (200, "GET 0".to_owned()));
    assert_eq!(seen.connections.load(Ordering::SeqCst), 2);
}
