//! A WebSocket (RFC 6455) through Squall over HTTP/1.1 with a real peer on both ends:
//! tokio-tungstenite's client against its own `accept_async` echo origin, on a cleartext
//! listener and on a TLS one. Text and binary messages of the lengths where the frame header
//! changes (0, 125, 126 bytes, 64 KiB, 1 MiB) come back as sent; a ping gets its pong; the
//! close handshake works from either end, with the code passed through, and both ends then
//! see EOF; 16 MiB through one connection come back byte for byte.
//!
//! The handshake, the masking and the frame parsing are tungstenite's, not ours: what these
//! tests prove is that the tunnel carries a real WebSocket session unchanged.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use squall_e2e::{Squall, TempDir, openssl_cert};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::{WebSocketStream, accept_async, client_async};

#[path = "support/origin.rs"]
mod origin;

/// Message lengths where the frame header changes (RFC 6455 §5.2: 7-bit, 16-bit and 64-bit
/// lengths), and a large one.
const SIZES: [usize; 5] = [0, 125, 126, 64 << 10, 1 << 20];

/// What the origin sends to end the session itself: a text message asking for it.
const CLOSE_ME: &str = "close me";

/// The code the origin closes with when asked.
const ORIGIN_CLOSE_CODE: u16 = 4001;

/// How long any one step may take.
const STEP: Duration = Duration::from_secs(30);

/// The echo origin: every text and binary message goes back as it came (pings are answered
/// by tungstenite itself); on `CLOSE_ME` it closes with `ORIGIN_CLOSE_CODE`. When the
/// session ends it reports the close code it saw (`close <code>`, or `close none`), and
/// `eof` once the peer's EOF arrives (see `echo` for who half-closes first).
fn origin() -> (SocketAddr, mpsc::Receiver<String>) {
    let (tx, rx) = mpsc::channel();
    let addr = origin::tokio_origin(move |stream| echo(stream, tx.clone()));
    (addr, rx)
}

async fn echo(stream: TcpStream, report: mpsc::Sender<String>) {
    let Ok(mut ws) = accept_async(stream).await else {
        let _ = report.send("handshake failed".into());
        return;
    };
    let mut code = None;
    let mut closed_first = false;
    while let Some(Ok(message)) = ws.next().await {
        match message {
            Message::Text(text) if text.as_str() == CLOSE_ME => {
                let frame = CloseFrame {
                    code: CloseCode::from(ORIGIN_CLOSE_CODE),
                    reason: "origin closes".into(),
                };
                closed_first = true;
                if ws.close(Some(frame)).await.is_err() {
                    break;
                }
            }
            Message::Text(_) | Message::Binary(_) => {
                if ws.send(message).await.is_err() {
                    break;
                }
            }
            Message::Close(frame) => code = frame.map(|f| u16::from(f.code)),
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
        }
    }
    let _ = report.send(match code {
        Some(code) => format!("close {code}"),
        None => "close none".into(),
    });
    // RFC 6455 §7.1.1: the server closes the TCP connection first, but a client may
    // close it as soon as the handshake is done. When the client closed, its EOF must
    // come through first (Squall passes a half-close on); when we did, ours goes first.
    let mut tcp = ws.into_inner();
    let eof = if closed_first {
        let _ = tcp.shutdown().await;
        read_to_eof(&mut tcp).await
    } else {
        let eof = read_to_eof(&mut tcp).await;
        let _ = tcp.shutdown().await;
        eof
    };
    if eof {
        let _ = report.send("eof".into());
    }
}

/// Reads until EOF; whether it came within `STEP` with nothing before it.
async fn read_to_eof<S: AsyncRead + Unpin>(stream: &mut S) -> bool {
    let mut buf = [0u8; 1024];
    matches!(
        tokio::time::timeout(STEP, stream.read(&mut buf)).await,
        Ok(Ok(0))
    )
}

/// Squall with one cleartext and one TLS listener (HTTP/1.1 only: a WebSocket over HTTP/2
/// is websocket_h2.rs), a WebSocket route to `origin` under `/ws`.
fn squall(origin: SocketAddr, dir: &TempDir) -> (Squall, std::path::PathBuf) {
    let (cert, key) = openssl_cert(dir.path(), "ws.test");
    let config = format!(
        r#"[server]
workers = 1

[[listen]]
address = "ADDR"

[[listen]]
address = "127.0.0.3:0"
tls = true
protocols = ["http1"]

[[certificate]]
hosts = ["ws.test"]
cert = {cert:?}
key = {key:?}

[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/ws"
proxy = "app"
upgrade = ["websocket"]
tunnel_idle_timeout = "30s"
"#
    );
    (Squall::start(&config), cert)
}

/// A WebSocket client over the cleartext listener.
async fn connect_plain(squall: &Squall) -> WebSocketStream<TcpStream> {
    let tcp = TcpStream::connect(squall.addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let (ws, response) = client_async("ws://ws.test/ws", tcp)
        .await
        .unwrap_or_else(|e| panic!("handshake through squall: {e}\n{}", squall.log()));
    assert_eq!(response.status(), 101);
    ws
}

/// A WebSocket client over the TLS listener (ALPN http/1.1), the TLS ours with tokio-rustls.
async fn connect_tls(
    squall: &Squall,
    cert: &std::path::Path,
) -> WebSocketStream<tokio_rustls::client::TlsStream<TcpStream>> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, ServerName};

    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(cert).unwrap())
        .unwrap();
    let mut tls_config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls_config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(tls_config));
    let tcp = TcpStream::connect(squall.tls_addr.expect("a TLS listener"))
        .await
        .unwrap();
    let name = ServerName::try_from("ws.test").unwrap();
    let tls = connector.connect(name, tcp).await.expect("TLS handshake");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let (ws, response) = client_async("wss://ws.test/ws", tls)
        .await
        .unwrap_or_else(|e| panic!("handshake through squall: {e}\n{}", squall.log()));
    assert_eq!(response.status(), 101);
    ws
}

/// Varied bytes: position and block both show, so a byte dropped, doubled or moved does too.
fn pattern(len: usize, seed: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i * 7 + i / 4096 + seed * 13) as u8)
        .collect()
}

/// The next data message, within `STEP`.
async fn next<S>(ws: &mut WebSocketStream<S>) -> Message
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    match tokio::time::timeout(STEP, ws.next()).await {
        Ok(Some(Ok(message))) => message,
        other => panic!("no message: {other:?}"),
    }
}

/// Text and binary messages of every size in `SIZES` come back as sent, in order.
async fn echo_every_size<S>(ws: &mut WebSocketStream<S>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    for (i, &size) in SIZES.iter().enumerate() {
        let text: String = (0..size)
            .map(|j| (b'a' + ((i + j) % 26) as u8) as char)
            .collect();
        ws.send(Message::text(text.clone())).await.unwrap();
        match next(ws).await {
            Message::Text(got) => assert!(got.as_str() == text, "text of {size} bytes differs"),
            other => panic!("text of {size} bytes: got {other:?}"),
        }
        let binary = Bytes::from(pattern(size, i));
        ws.send(Message::Binary(binary.clone())).await.unwrap();
        match next(ws).await {
            Message::Binary(got) => assert!(got == binary, "binary of {size} bytes differs"),
            other => panic!("binary of {size} bytes: got {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_and_binary_of_every_length_echo_over_cleartext_and_tls() {
    let (origin, _reports) = origin();
    let dir = TempDir::new();
    let (squall, cert) = squall(origin, &dir);
    let mut plain = connect_plain(&squall).await;
    echo_every_size(&mut plain).await;
    let mut tls = connect_tls(&squall, &cert).await;
    echo_every_size(&mut tls).await;
    plain.close(None).await.unwrap();
    tls.close(None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_gets_its_pong_through_squall() {
    let (origin, _reports) = origin();
    let dir = TempDir::new();
    let (squall, cert) = squall(origin, &dir);
    let mut plain = connect_plain(&squall).await;
    let mut tls = connect_tls(&squall, &cert).await;
    for payload in [&b""[..], b"ping", &[0xa5; 125]] {
        let payload = Bytes::copy_from_slice(payload);
        plain.send(Message::Ping(payload.clone())).await.unwrap();
        assert_eq!(next(&mut plain).await, Message::Pong(payload.clone()));
        tls.send(Message::Ping(payload.clone())).await.unwrap();
        assert_eq!(next(&mut tls).await, Message::Pong(payload));
    }
    // Data after the pings still echoes.
    plain.send(Message::text("after")).await.unwrap();
    assert_eq!(next(&mut plain).await, Message::text("after"));
}

/// The client closes with 1000 over `ws`: it gets the origin's close echoing the code, then
/// half-closes; the origin reports the client's code and the client's EOF, and closes too,
/// so the client reaches EOF.
async fn client_closes<S>(mut ws: WebSocketStream<S>, reports: &mpsc::Receiver<String>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    ws.send(Message::text("hello")).await.unwrap();
    assert_eq!(next(&mut ws).await, Message::text("hello"));
    let frame = CloseFrame {
        code: CloseCode::Normal,
        reason: "client done".into(),
    };
    ws.close(Some(frame)).await.unwrap();
    match next(&mut ws).await {
        Message::Close(Some(frame)) => assert_eq!(frame.code, CloseCode::Normal),
        other => panic!("expected the origin's close: {other:?}"),
    }
    // The handshake is done: the client closes its side first (tungstenite's client would
    // wait for the server's EOF, and the origin waits for ours), then sees the origin's.
    let mut inner = ws.into_inner();
    inner.shutdown().await.unwrap();
    assert!(read_to_eof(&mut inner).await, "no EOF from squall");
    assert_eq!(report(reports), "close 1000");
    assert_eq!(report(reports), "eof");
}

/// The origin closes with `ORIGIN_CLOSE_CODE` when asked: the client sees that code,
/// tungstenite answers it, and both ends reach EOF.
async fn origin_closes<S>(mut ws: WebSocketStream<S>, reports: &mpsc::Receiver<String>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    ws.send(Message::text(CLOSE_ME)).await.unwrap();
    match next(&mut ws).await {
        Message::Close(Some(frame)) => {
            assert_eq!(u16::from(frame.code), ORIGIN_CLOSE_CODE);
            assert_eq!(frame.reason.as_str(), "origin closes");
        }
        other => panic!("expected the origin's close: {other:?}"),
    }
    assert_ended(ws).await;
    assert_eq!(report(reports), format!("close {ORIGIN_CLOSE_CODE}"));
    assert_eq!(report(reports), "eof");
}

/// After the close handshake the message stream ends, and the connection underneath gives
/// EOF once this side half-closes too.
async fn assert_ended<S>(mut ws: WebSocketStream<S>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    match tokio::time::timeout(STEP, ws.next()).await {
        Ok(None) => {}
        other => panic!("the stream goes on after the close: {other:?}"),
    }
    let mut inner = ws.into_inner();
    let _ = inner.shutdown().await;
    assert!(read_to_eof(&mut inner).await, "no EOF from squall");
}

fn report(reports: &mpsc::Receiver<String>) -> String {
    reports
        .recv_timeout(STEP)
        .expect("a report from the origin")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_close_handshake_passes_its_code_both_ways_and_both_ends_see_eof() {
    let (origin, reports) = origin();
    let dir = TempDir::new();
    let (squall, cert) = squall(origin, &dir);
    client_closes(connect_plain(&squall).await, &reports).await;
    client_closes(connect_tls(&squall, &cert).await, &reports).await;
    origin_closes(connect_plain(&squall).await, &reports).await;
    origin_closes(connect_tls(&squall, &cert).await, &reports).await;
}

/// 16 MiB in 1 MiB binary messages, each different, written while a task reads the echo:
/// every message comes back byte for byte, in order.
async fn sixteen_mib<S>(ws: WebSocketStream<S>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    const MESSAGES: usize = 16;
    let (mut sink, mut stream) = ws.split();
    let writer = tokio::spawn(async move {
        for i in 0..MESSAGES {
            let message = Message::Binary(Bytes::from(pattern(1 << 20, i)));
            sink.send(message).await.unwrap();
        }
        sink
    });
    let mut total = 0;
    for i in 0..MESSAGES {
        let got = match tokio::time::timeout(STEP, stream.next()).await {
            Ok(Some(Ok(Message::Binary(got)))) => got,
            other => panic!("message {i}: {other:?}"),
        };
        assert!(got[..] == pattern(1 << 20, i)[..], "message {i} differs");
        total += got.len();
    }
    assert_eq!(total, 16 << 20);
    let sink = writer.await.unwrap();
    let mut ws = sink.reunite(stream).unwrap();
    ws.close(None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_mib_through_one_connection_come_back_byte_for_byte() {
    let (origin, _reports) = origin();
    let dir = TempDir::new();
    let (squall, cert) = squall(origin, &dir);
    sixteen_mib(connect_plain(&squall).await).await;
    sixteen_mib(connect_tls(&squall, &cert).await).await;
}
