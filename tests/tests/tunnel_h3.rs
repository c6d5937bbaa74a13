//! Extended CONNECT over HTTP/3 (RFC 9220) through Squall, with hyperium's `h3` client over
//! `quinn`: Squall's SETTINGS offer it, and a request with `:protocol` on a route whose
//! `upgrade` allows that protocol goes to the origin as an HTTP/1.1 upgrade; the client hears
//! 200, and the stream's DATA frames carry the tunnel both ways under QUIC's flow control,
//! the stream's end standing for FIN, as over HTTP/2 (`websocket_h2.rs`). A route without
//! `upgrade` answers 501, and a reset stream closes the origin's side.
//!
//! The `h3` crate's client names only the `webtransport` and `connect-udp` protocols, so the
//! route allows `webtransport`: to Squall a `:protocol` is a token the route allows or not,
//! and the tunnel does not depend on which (WebSocket's own key and accept are checked by the
//! HTTP/2 tests and by the aioquic case of `tests/interop`).
//!
//! The origin (`support/upgrade_origin.rs`) answers the upgrade with a 101 naming the protocol
//! asked for, echoes every byte, and says `bye` after the client's FIN.

#[path = "support/h3_client.rs"]
mod h3_client;
#[path = "support/upgrade_origin.rs"]
mod upgrade_origin;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::{Buf, Bytes};
use squall_e2e::{Squall, admin_addr, admin_get, metric_sum};
use upgrade_origin::{origin, refused};

fn config(origin: SocketAddr) -> String {
    format!(
        r#"[server]
workers = 1

[admin]
listen = "127.0.0.2:0"

[[certificate]]
hosts = ["localhost"]
self_signed = true

[[listen]]
address = "ADDR"
tls = true
protocols = ["h2", "http1", "h3"]

[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/tunnel"
proxy = "app"
upgrade = ["webtransport"]

[[vhost.route]]
prefix = "/"
proxy = "app"
"#
    )
}

type Stream = h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// An extended CONNECT to `path` with `:protocol webtransport`: its response and stream.
async fn open(squall: &Squall, h3: &mut h3_client::H3, path: &str) -> (u16, Stream) {
    let uri = format!("https://localhost:{}{path}", squall.addr.port());
    let mut request = http::Request::builder()
        .method(http::Method::CONNECT)
        .uri(uri)
        .body(())
        .unwrap();
    request
        .extensions_mut()
        .insert(h3::ext::Protocol::WEB_TRANSPORT);
    let exchange = async {
        let mut stream = h3.send.send_request(request).await?;
        let response = stream.recv_response().await?;
        Ok::<_, h3::error::StreamError>((response.status().as_u16(), stream))
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .expect("an answer in time")
        .unwrap_or_else(|e| panic!("the extended CONNECT: {e}; squall's log:\n{}", squall.log()))
}

/// Reads `stream`'s DATA until its end, or until `limit` bytes came.
async fn read_until(
    stream: &mut h3::client::RequestStream<h3_quinn::RecvStream, Bytes>,
    limit: usize,
) -> Vec<u8> {
    let mut got = Vec::new();
    let read = async {
        while got.len() < limit {
            let Some(mut chunk) = stream.recv_data().await.expect("tunnel data") else {
                break;
            };
            while chunk.has_remaining() {
                let piece = chunk.chunk();
                got.extend_from_slice(piece);
                let n = piece.len();
                chunk.advance(n);
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .expect("tunnel bytes in time");
    got
}

fn pattern(total: usize) -> Vec<u8> {
    (0..total)
        .map(|i| (i % 251) as u8 ^ (i >> 11) as u8)
        .collect()
}

/// 4 MiB each way through the tunnel while reading concurrently, then the client's end of
/// the stream becomes the origin's FIN, whose `bye` and FIN come back; a plain request on the
/// same connection meanwhile is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extended_connect_over_h3_tunnels_both_ways() {
    let (origin, seen) = origin();
    let squall = Squall::start(&config(origin));
    let mut h3 = h3_client::connect(squall.addr).await;
    let (status, stream) = open(&squall, &mut h3, "/tunnel").await;
    assert_eq!(status, 200, "the origin's 101 becomes 200 (RFC 9220 §3)");
    let head = seen.heads.lock().unwrap()[0].to_ascii_lowercase();
    assert!(head.starts_with("get /tunnel http/1.1\r\n"), "{head}");
    assert!(head.contains("\r\nupgrade: webtransport"), "{head}");
    assert!(head.contains("\r\nconnection: upgrade"), "{head}");

    let (mut send, mut recv) = stream.split();
    let data = pattern(4 << 20);
    let sent = data.clone();
    let writer = tokio::spawn(async move {
        for piece in sent.chunks(50_000) {
            send.send_data(Bytes::copy_from_slice(piece)).await.unwrap();
        }
        send.finish().await.unwrap();
    });
    let uri = format!("https://localhost:{}/plain", squall.addr.port());
    let plain = h3_client::fetch(&mut h3, "GET", &uri, None).await;
    assert_eq!((plain.status, &plain.body[..]), (200, &b"plain"[..]));
    let echoed = read_until(&mut recv, usize::MAX).await;
    writer.await.unwrap();
    assert_eq!(echoed.len(), data.len() + 3);
    assert!(
        echoed[..data.len()] == data[..],
        "the bytes came back in order"
    );
    assert_eq!(&echoed[data.len()..], b"bye");
    assert_eq!(seen.ended.load(Ordering::SeqCst), 1);
    let (_, text) = admin_get(admin_addr(&squall), "/metrics");
    assert_eq!(metric_sum(&text, "squall_tunnels_total"), 1.0, "{text}");
}

/// A stream reset mid-tunnel closes the origin's side, and the connection goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_stream_mid_tunnel_closes_the_origin_side() {
    let (origin, seen) = origin();
    let squall = Squall::start(&config(origin));
    let mut h3 = h3_client::connect(squall.addr).await;
    let (status, stream) = open(&squall, &mut h3, "/tunnel").await;
    assert_eq!(status, 200);
    let (mut send, mut recv) = stream.split();
    send.send_data(Bytes::from_static(b"ping")).await.unwrap();
    assert_eq!(read_until(&mut recv, 4).await, b"ping");
    assert_eq!(seen.ended.load(Ordering::SeqCst), 0);
    // RESET_STREAM on the client's sending side: the tunnel is over.
    send.stop_stream(h3::error::Code::H3_REQUEST_CANCELLED);
    let mut waited = 0;
    while seen.ended.load(Ordering::SeqCst) == 0 && waited < 100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += 1;
    }
    assert_eq!(
        seen.ended.load(Ordering::SeqCst),
        1,
        "the origin's side closed"
    );
    let uri = format!("https://localhost:{}/plain", squall.addr.port());
    let plain = h3_client::fetch(&mut h3, "GET", &uri, None).await;
    assert_eq!(plain.status, 200, "the connection goes on");
    let (_, text) = admin_get(admin_addr(&squall), "/metrics");
    assert_eq!(metric_sum(&text, "squall_tunnels_open"), 0.0);
}

/// On a route without `upgrade` an extended CONNECT is answered 501 (RFC 9220 §3), nothing
/// reaches the origin, the refusal is counted, and the connection goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_without_upgrade_answers_501() {
    let (origin, seen) = origin();
    let squall = Squall::start(&config(origin));
    let mut h3 = h3_client::connect(squall.addr).await;
    let (status, _stream) = open(&squall, &mut h3, "/other").await;
    assert_eq!(status, 501);
    assert!(
        seen.heads.lock().unwrap().is_empty(),
        "nothing reached the origin"
    );
    let (_, text) = admin_get(admin_addr(&squall), "/metrics");
    assert_eq!(refused(&text, "not_allowed"), 1.0, "{text}");
    let uri = format!("https://localhost:{}/plain", squall.addr.port());
    let plain = h3_client::fetch(&mut h3, "GET", &uri, None).await;
    assert_eq!(plain.status, 200);
}
