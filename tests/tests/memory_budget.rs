//! Slow readers of proxied responses against the buffer bounds: HTTP/2 connections whose
//! streams never open their windows and HTTP/1.1 clients that never read, all fetching a large
//! body, hold the process over `limits.buffer_memory_max`; a client that reads keeps getting
//! whole, correct responses meanwhile, on its own connection and on a stream of a slow
//! connection; when the slow clients leave, the buffered bytes go back to 0.
//!
//! The process's growth is printed, and checked against the budget plus a stated overhead.
//! Origins are read one receive buffer at a time: with a multishot receive, a fast local
//! origin's bytes kept arriving until a pause's cancellation landed (up to ~1.5 MiB per
//! request measured, +317 MiB for this test's 1,200 requests against a 32 MiB budget).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use squall_e2e::{Squall, admin_addr, admin_get, metric_sum, read_response_head};

#[path = "support/raw_h2.rs"]
mod raw_h2;

use raw_h2::*;

/// The origin's body: 8 MiB of a pattern the clients check byte by byte.
const BODY_BYTES: usize = 8 << 20;
/// The budget the test configures (the issue's scale: 10 HTTP/2 connections × 128 streams and
/// 1,000 HTTP/1.1 readers, none reading).
const BUDGET_MIB: u64 = 32;
/// What RSS may stay above its baseline once the slow clients have left (measured: +4 MiB).
const RETURNED_WITHIN_MIB: u64 = 24;
const H2_CONNECTIONS: usize = 10;
const H2_STREAMS: u32 = 128;
const H1_READERS: usize = 1000;
/// What the process may grow beyond the budget: at most 16 KiB per connection answered (the
/// room a drained client always gets) and 16 KiB per request in progress (one origin receive
/// buffer, held undecoded), and a fixed part for the worker's tables, origin connections and
/// allocator slack. docs/CONFIG.md allows two receive buffers per request where the kernel
/// limits multishot receives (a pause may land a buffer later); the test holds the process to
/// one, which it meets (RSS +82.8 MiB against this bound's 99.4 MiB, 2026-12-05).
const OVERHEAD_BYTES: u64 = (16 << 20)
    + (16 << 10) * (H2_CONNECTIONS + H1_READERS) as u64
    + (16 << 10) * (H2_CONNECTIONS * H2_STREAMS as usize + H1_READERS) as u64;

fn pattern(i: usize) -> u8 {
    (i % 251) as u8
}

/// An HTTP/1.1 origin, a thread per connection, answering every request with the 8 MiB body.
fn big_origin() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let body: Arc<Vec<u8>> = Arc::new((0..BODY_BYTES).map(pattern).collect());
    std::thread::spawn(move || {
        for stream in listener.incoming().take(5_000) {
            let Ok(stream) = stream else { return };
            let body = body.clone();
            let _ = std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || serve(stream, &body));
        }
    });
    addr
}

fn serve(mut stream: TcpStream, body: &[u8]) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    let mut pending = Vec::new();
    let mut buf = [0u8; 2048];
    loop {
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            pending.drain(..end + 4);
            let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
            if stream.write_all(head.as_bytes()).is_err() || stream.write_all(body).is_err() {
                return;
            }
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
        }
    }
}

fn config(origin: SocketAddr, budget: &str) -> String {
    format!(
        r#"[server]
workers = 1

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[admin]
listen = "127.0.0.2:0"

[limits]
buffer_memory_max = "{budget}"
# One more than the slow streams: the reader's stream on a slow connection.
h2_streams_max = {streams}
h2_stall_timeout = "2m"
idle_timeout = "2m"

[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]
response_timeout = "2m"

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/big"
proxy = "app"
"#,
        streams = H2_STREAMS + 1,
    )
}

/// Lifts this test process's own soft limit: it holds every client socket and the origin's.
fn raise_own_nofile() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit(RLIMIT_NOFILE)");
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).expect("setrlimit(RLIMIT_NOFILE)");
}

fn buffered(admin: SocketAddr) -> f64 {
    metric_sum(
        &admin_get(admin, "/metrics").1,
        "squall_buffered_response_bytes",
    )
}

/// An HPACK block for `GET http://a/big`: static entries and literals never indexed.
fn big_block() -> Vec<u8> {
    let mut block = vec![0x82, 0x86, 0x04, 0x04];
    block.extend_from_slice(b"/big");
    block.extend_from_slice(&[0x01, 0x01, b'a']);
    block
}

/// An HTTP/2 connection that opens `streams` requests for the body with every stream window
/// at 0 (SETTINGS_INITIAL_WINDOW_SIZE), and never reads.
fn slow_h2(addr: SocketAddr, streams: u32) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .unwrap();
    // SETTINGS_INITIAL_WINDOW_SIZE (4) = 0.
    stream
        .write_all(&frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 0]))
        .unwrap();
    let block = big_block();
    for n in 0..streams {
        let id = 1 + 2 * n;
        let request = frame(HEADERS, END_HEADERS | END_STREAM, id, &block);
        stream.write_all(&request).unwrap();
    }
    stream
}

/// An HTTP/1.1 client that asks for the body and never reads.
fn slow_h1(addr: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .write_all(b"GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    stream
}

/// A whole response on a fresh HTTP/1.1 connection, its body checked against the pattern.
fn fetch_h1(addr: SocketAddr) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
        .write_all(b"GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    let head = read_response_head(&mut stream).expect("a response head");
    assert_eq!(head.status, 200);
    let mut body = head.body;
    body.reserve(BODY_BYTES);
    let mut buf = vec![0u8; 64 * 1024];
    while body.len() < BODY_BYTES {
        let n = stream.read(&mut buf).expect("the body keeps coming");
        assert!(n > 0, "closed after {} bytes", body.len());
        body.extend_from_slice(&buf[..n]);
    }
    assert_eq!(body.len(), BODY_BYTES);
    assert!(body.iter().enumerate().all(|(i, b)| *b == pattern(i)));
}

/// On a slow HTTP/2 connection, a stream the client reads (opening its windows as the data
/// comes) gets the whole body while its neighbours hold theirs.
fn fetch_h2_stream(stream: &mut TcpStream, id: u32) {
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let block = big_block();
    let window = |id: u32, n: u32| frame(WINDOW_UPDATE, 0, id, &n.to_be_bytes());
    stream
        .write_all(&frame(HEADERS, END_HEADERS | END_STREAM, id, &block))
        .unwrap();
    stream.write_all(&window(id, 1 << 24)).unwrap();
    stream.write_all(&window(0, 1 << 30)).unwrap();
    let mut body = Vec::with_capacity(BODY_BYTES);
    let mut pending = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(
            Instant::now() < deadline,
            "stream {id}: {} bytes",
            body.len()
        );
        let n = stream.read(&mut buf).expect("the stream keeps coming");
        assert!(n > 0, "closed after {} bytes", body.len());
        pending.extend_from_slice(&buf[..n]);
        let ended = split_frames(&mut pending)
            .into_iter()
            .filter(|f| f.stream == id)
            .fold(false, |ended, f| {
                if f.kind == DATA {
                    body.extend_from_slice(&f.payload);
                }
                ended || f.flags & END_STREAM != 0
            });
        if ended {
            break;
        }
    }
    assert_eq!(body.len(), BODY_BYTES);
    assert!(body.iter().enumerate().all(|(i, b)| *b == pattern(i)));
}

/// Waits until the buffered bytes stop growing (the slow clients hold all they will get).
fn settle(admin: SocketAddr) -> f64 {
    let mut last = -1.0;
    let mut still = 0;
    let deadline = Instant::now() + Duration::from_secs(40);
    while Instant::now() < deadline && still < 8 {
        std::thread::sleep(Duration::from_millis(250));
        let now = buffered(admin);
        still = if now <= last { still + 1 } else { 0 };
        last = last.max(now);
    }
    last
}

/// The slow clients, started and settled; returns them, the buffered bytes and RSS growth.
struct Slow {
    h2: Vec<TcpStream>,
    h1: Vec<TcpStream>,
    held: f64,
    grown: u64,
}

fn hold_the_budget(squall: &Squall, admin: SocketAddr, before: u64) -> Slow {
    let h2: Vec<TcpStream> = (0..H2_CONNECTIONS)
        .map(|_| slow_h2(squall.addr, H2_STREAMS))
        .collect();
    let h1: Vec<TcpStream> = (0..H1_READERS).map(|_| slow_h1(squall.addr)).collect();
    let held = settle(admin);
    let grown = squall.rss().saturating_sub(before);
    eprintln!(
        "buffered {:.1} MiB, RSS grew {:.1} MiB (budget {BUDGET_MIB} MiB, overhead {:.1} MiB)",
        held / 1048576.0,
        grown as f64 / 1048576.0,
        OVERHEAD_BYTES as f64 / 1048576.0
    );
    Slow {
        h2,
        h1,
        held,
        grown,
    }
}

#[test]
fn readers_are_served_while_slow_readers_hold_the_budget() {
    raise_own_nofile();
    let origin = big_origin();
    let squall = Squall::start(&config(origin, &format!("{BUDGET_MIB}MiB")));
    let admin = admin_addr(&squall);
    // Warm up: one whole response, so that the baseline includes the first allocations.
    fetch_h1(squall.addr);
    let before = squall.rss();
    let mut slow = hold_the_budget(&squall, admin, before);
    assert!(
        slow.held > (BUDGET_MIB << 20) as f64,
        "the slow clients did not reach the budget ({} bytes)",
        slow.held
    );
    assert!(
        slow.held <= ((BUDGET_MIB << 20) + OVERHEAD_BYTES) as f64,
        "the slow clients hold {} bytes",
        slow.held
    );

    // Readers still get everything: on their own connection, and on a slow one's stream.
    fetch_h1(squall.addr);
    fetch_h2_stream(&mut slow.h2[0], 1 + 2 * H2_STREAMS);
    let pauses = metric_sum(
        &admin_get(admin, "/metrics").1,
        "squall_buffer_budget_pauses_total",
    );
    assert!(pauses > 0.0, "the budget paused nobody");

    drop(slow);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left = buffered(admin);
    while left > 0.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        left = buffered(admin);
    }
    assert_eq!(left, 0.0, "bytes still counted after the slow clients left");
    // The memory goes back to the system once the burst has passed (trim.rs samples once a
    // second): glibc alone kept all of it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut after = squall.rss().saturating_sub(before);
    while after > RETURNED_WITHIN_MIB << 20 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
        after = squall.rss().saturating_sub(before);
    }
    eprintln!(
        "after the slow clients left, RSS is {:.1} MiB above the baseline",
        after as f64 / 1048576.0
    );
    assert!(
        after <= RETURNED_WITHIN_MIB << 20,
        "RSS stayed {after} bytes above the baseline after the slow clients left"
    );
    // The trim thread samples once a second: RSS may have fallen (freed mappings go back at
    // once) before its first sample after the fall, so its count is waited for, boundedly.
    let deadline = Instant::now() + Duration::from_secs(5);
    let trims = || metric_sum(&admin_get(admin, "/metrics").1, "squall_memory_trims_total");
    while trims() < 1.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(trims() >= 1.0, "no trim counted");
}

/// What the budget is for: the process's growth stays within it and the stated overhead.
#[test]
fn slow_readers_stay_within_the_buffer_budget() {
    raise_own_nofile();
    let origin = big_origin();
    let squall = Squall::start(&config(origin, &format!("{BUDGET_MIB}MiB")));
    let admin = admin_addr(&squall);
    fetch_h1(squall.addr);
    let before = squall.rss();
    let slow = hold_the_budget(&squall, admin, before);
    assert!(
        slow.grown <= (BUDGET_MIB << 20) + OVERHEAD_BYTES,
        "RSS grew {} bytes for a budget of {BUDGET_MIB} MiB",
        slow.grown
    );
    drop((slow.h1, slow.h2));
}
