//! Counts the heap allocations one proxied request costs in the sans-IO exchange: from
//! `Exchange::new` to its end, a GET forwarded to an origin that answers 200 with a small
//! body, over a pooled connection, for each client protocol. The request head is decoded
//! and the route made before counting (the driver's costs, not the exchange's).
//!
//! `cargo run --release -p squall-proxy --example exchange_allocations`
//!
//! What the driver adds around it (the session slot, the client's framing, the send) is not
//! counted here; this is the exchange's own share, the part issue 30 asks to bring to zero.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use squall_h1::{Event, Limits, RequestDecoder, ResponseLimits};
use squall_proxy::{Action, ClientInfo, ClientProtocol, Exchange, ExchangeConfig, ProxyRoute};
use squall_upstream::{RetryPolicy, ServerId};

/// dhat's allocator counts every heap block the program asks for (safe code: no allocator of
/// our own outside `squall-uring`).
#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const REQUESTS: u64 = 10_000;
const GET: &[u8] = b"GET /p/x?q=1 HTTP/1.1\r\nHost: example.test\r\nAccept: */*\r\n\r\n";

fn main() {
    let _profiler = dhat::Profiler::builder().testing().build();
    println!("heap allocations per proxied GET in the exchange ({REQUESTS} requests each)");
    println!("| client | response body | allocations | bytes allocated |");
    println!("|---|---:|---:|---:|");
    let clients = [
        ("HTTP/1.1", ClientProtocol::Http11),
        ("HTTP/2", ClientProtocol::H2),
    ];
    for (name, protocol) in clients {
        for body in [13, 1024] {
            let (allocations, bytes) = measure(protocol, body);
            println!("| {name} | {body} B | {allocations:.1} | {bytes:.0} |");
        }
    }
}

/// Allocations and bytes per request, averaged over `REQUESTS`.
fn measure(protocol: ClientProtocol, body: usize) -> (f64, f64) {
    let head = {
        let mut decoder = RequestDecoder::new(Limits::default());
        let mut buf = BytesMut::from(GET);
        match decoder.decode(&mut buf) {
            Ok(Some(Event::Head(head))) => head,
            other => panic!("not a request head: {other:?}"),
        }
    };
    let route = Arc::new(ProxyRoute {
        id: 1,
        upstream: 0,
        request_headers: Default::default(),
        response_headers: Default::default(),
        cache: false,
        cache_ttl: None,
        compress: None,
        upgrade: None,
        rewrite: None,
        timeouts: Default::default(),
        body_bytes_max: None,
    });
    let peer: SocketAddr = "192.0.2.7:40000".parse().expect("a literal address");
    let info = ClientInfo {
        peer: Some(peer),
        client: Some(peer),
        request_id: 42,
        tls: false,
        protocol,
        keep_alive: true,
    };
    let response = {
        let mut r = format!("HTTP/1.1 200 OK\r\nContent-Length: {body}\r\nServer: o\r\n\r\n");
        r.push_str(&"x".repeat(body));
        r.into_bytes()
    };
    let (mut allocations, mut bytes) = (0, 0);
    for _ in 0..REQUESTS {
        let head = head.clone();
        let route = route.clone();
        let now = Instant::now();
        let before = dhat::HeapStats::get();
        run(head, route, info, &response, now);
        let after = dhat::HeapStats::get();
        allocations += after.total_blocks - before.total_blocks;
        bytes += after.total_bytes - before.total_bytes;
    }
    (
        allocations as f64 / REQUESTS as f64,
        bytes as f64 / REQUESTS as f64,
    )
}

/// One exchange from its start to its end, the origin answering `response` at once.
fn run(
    head: squall_h1::RequestHead,
    route: Arc<ProxyRoute>,
    info: ClientInfo,
    response: &[u8],
    now: Instant,
) {
    let config = ExchangeConfig {
        retry: RetryPolicy::new(1, 1, false),
        connect_timeout: Duration::from_secs(5),
        response_timeout: Duration::from_secs(30),
        read_timeout: Duration::from_secs(30),
        body_bytes_max: u64::MAX,
        high_water_bytes: 256 * 1024,
        response_limits: ResponseLimits::default(),
    };
    let mut ex = Exchange::new(head, route, info, config, now);
    ex.on_client_room(256 * 1024, now);
    let mut answered = false;
    while !ex.is_finished() {
        let Some(action) = ex.poll_action() else {
            assert!(!answered, "the exchange stalled after its response");
            ex.on_origin_data(response, now);
            answered = true;
            continue;
        };
        match action {
            Action::Pick => ex.on_pick(Some(ServerId::new(0)), now),
            Action::Connect { .. } => ex.on_origin_connected(true, now),
            Action::WriteOrigin(request) => ex.on_origin_sent(request.len(), now),
            _ => {}
        }
    }
}
