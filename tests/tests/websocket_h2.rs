//! WebSocket over HTTP/2 (RFC 8441) through Squall: the `h2` crate's extended CONNECT
//! (`:protocol websocket`) on a route with `upgrade = ["websocket"]` becomes an HTTP/1.1
//! upgrade to the origin, the client hears 200, and the stream's DATA frames carry the tunnel
//! both ways under flow control, on an h2c and a TLS (ALPN h2) listener: 16 MiB echoed with a half-close, a second stream served
//! meanwhile, a slow reader that holds Squall to a bounded buffer, RST_STREAM closing the
//! origin side; a route without `upgrade` answers 501, and an origin whose 101 carries the
//! wrong `Sec-WebSocket-Accept` is a 502, each counted and logged.
//!
//! The origin is written by hand on raw sockets (as in `websocket.rs`): it answers the upgrade
//! with a 101 whose accept it computes from the key Squall made, echoes every byte, and says
//! `bye` after the client's FIN.

#[path = "support/h2_client.rs"]
mod h2_client;
#[path = "support/upgrade_origin.rs"]
mod upgrade_origin;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use h2_client::{fetch, h2c, send_all};
use squall_e2e::{
    Squall, TempDir, admin_addr, admin_get, listener_with_buffers, metric_sum, openssl_cert,
};
use upgrade_origin::{origin, origin_on, refused, websocket_accept};

fn config(origin: SocketAddr) -> String {
    config_with(origin, "")
}

/// The config with `extra_listen` after the cleartext listener.
fn config_with(origin: SocketAddr, extra_listen: &str) -> String {
    format!(
        r#"[server]
workers = 1

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]
{extra_listen}

[admin]
listen = "127.0.0.2:0"

[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/ws"
proxy = "app"
upgrade = ["websocket"]
tunnel_idle_timeout = "10s"

[[vhost.route]]
prefix = "/bad-"
proxy = "app"
upgrade = ["websocket"]

[[vhost.route]]
prefix = "/"
proxy = "app"
"#
    )
}

/// An extended CONNECT for a WebSocket at `path` (RFC 8441 §5).
fn websocket_request(path: &str) -> http::Request<()> {
    let mut request = http::Request::builder()
        .method(http::Method::CONNECT)
        .uri(format!("http://o.test{path}"))
        .header("sec-websocket-version", "13")
        .header("sec-websocket-protocol", "chat")
        .body(())
        .unwrap();
    (request.extensions_mut()).insert(h2::ext::Protocol::from_static("websocket"));
    request
}

/// Opens a tunnel: the response head, and the stream both ways.
async fn open(
    client: &h2::client::SendRequest<Bytes>,
    path: &str,
) -> (http::Response<h2::RecvStream>, h2::SendStream<Bytes>) {
    let mut client = client.clone().ready().await.expect("ready");
    // The server's SETTINGS may still be on their way when the handshake returns.
    for _ in 0..100 {
        if client.is_extended_connect_protocol_enabled() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        client.is_extended_connect_protocol_enabled(),
        "RFC 8441 setting"
    );
    let (response, send) = client
        .send_request(websocket_request(path), false)
        .expect("send");
    (response.await.expect("response"), send)
}

/// Reads the stream to its end (or `limit` bytes), giving the window back as it goes.
async fn read_all(body: &mut h2::RecvStream, limit: usize) -> Vec<u8> {
    let mut got = Vec::new();
    while got.len() < limit {
        let Some(chunk) = body.data().await else {
            break;
        };
        let Ok(chunk) = chunk else {
            break;
        };
        got.extend_from_slice(&chunk);
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    got
}

fn pattern(total: usize) -> Vec<u8> {
    (0..total).map(|i| (i * 7 + i / 4096) as u8).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_over_h2_echoes_16_mib_with_a_half_close_and_other_streams_go_on() {
    let (origin, seen) = origin();
    let squall = Squall::start(&config(origin));
    let admin = admin_addr(&squall);
    let client = h2c(squall.addr).await;
    let (response, mut send) = open(&client, "/ws").await;
    assert_eq!(response.status(), 200, "{}", squall.log());
    let headers = response.headers();
    assert_eq!(headers.get("sec-websocket-protocol").unwrap(), "chat");
    assert!(headers.get("sec-websocket-accept").is_none());
    assert!(headers.get("upgrade").is_none() && headers.get("connection").is_none());
    // The origin got an HTTP/1.1 upgrade with a key of Squall's making.
    let head = seen.heads.lock().unwrap()[0].to_ascii_lowercase();
    assert!(head.starts_with("get /ws http/1.1"), "{head}");
    assert!(head.contains("upgrade: websocket") && head.contains("sec-websocket-key: "));
    assert!(head.contains("sec-websocket-version: 13"), "{head}");

    let total = 16 << 20;
    let sent = pattern(total);
    let mut body = response.into_body();
    let reader = tokio::spawn(async move { read_all(&mut body, usize::MAX).await });
    // A second stream on the same connection is served while the tunnel runs.
    let plain = fetch(&client, "GET", "http://o.test/plain", None).await;
    assert_eq!(plain.status, 200);
    assert_eq!(plain.body, b"plain");
    let (_, text) = admin_get(admin, "/metrics");
    let app = "squall_upstream_tunnels_open{upstream=\"app\"}";
    assert_eq!(metric_sum(&text, app), 1.0);
    send_all(&mut send, Bytes::from(sent.clone())).await;
    let got = tokio::time::timeout(Duration::from_secs(60), reader)
        .await
        .expect("echo in time")
        .unwrap();
    assert_eq!(got.len(), total + 3, "{}", squall.log());
    assert!(got[..total] == sent[..], "the echo differs");
    assert_eq!(
        &got[total..],
        b"bye",
        "the origin's answer after the half-close"
    );
    let (_, text) = admin_get(admin, "/metrics");
    assert_eq!(metric_sum(&text, "squall_tunnels_total"), 1.0);
    assert_eq!(metric_sum(&text, "squall_tunnels_open"), 0.0);
    assert_eq!(metric_sum(&text, app), 0.0);
    assert_eq!(
        metric_sum(&text, "squall_tunnel_bytes_up_total"),
        total as f64
    );
    assert_eq!(
        metric_sum(&text, "squall_tunnel_bytes_down_total"),
        (total + 3) as f64
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_over_h2_runs_on_a_tls_listener_with_alpn_h2() {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, ServerName};

    let dir = TempDir::new();
    let (cert, key) = openssl_cert(dir.path(), "ws.test");
    let tls_listen = format!(
        "\n[[listen]]\naddress = \"127.0.0.3:0\"\ntls = true\nprotocols = [\"h2\", \"http1\"]\n\n\
         [[certificate]]\nhosts = [\"ws.test\"]\ncert = {cert:?}\nkey = {key:?}\n"
    );
    let (origin, _) = origin();
    let squall = Squall::start(&config_with(origin, &tls_listen));
    let tls_addr = squall.tls_addr.expect("a TLS listener");
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(&cert).unwrap())
        .unwrap();
    let mut tls_config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls_config.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(tls_config));
    let tcp = tokio::net::TcpStream::connect(tls_addr).await.unwrap();
    let name = ServerName::try_from("ws.test").unwrap();
    let tls = connector.connect(name, tcp).await.expect("handshake");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (client, connection) = h2::client::handshake(tls).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let (response, mut send) = open(&client, "/ws").await;
    assert_eq!(response.status(), 200, "{}", squall.log());
    let total = 4 << 20;
    let sent = pattern(total);
    let mut body = response.into_body();
    let reader = tokio::spawn(async move { read_all(&mut body, usize::MAX).await });
    send_all(&mut send, Bytes::from(sent.clone())).await;
    let got = tokio::time::timeout(Duration::from_secs(60), reader)
        .await
        .expect("echo in time")
        .unwrap();
    assert_eq!(got.len(), total + 3);
    assert!(got[..total] == sent[..], "the echo differs");
    assert_eq!(&got[total..], b"bye");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_h2_reader_holds_the_tunnel_to_a_bounded_buffer() {
    // With the origin's kernel buffers small, only Squall's own sockets to it (autotuned:
    // a few MiB) and bounded buffers remain to take the 16 MiB sent. With the origin's
    // autotuned too, all 16 MiB were taken in about 1 run in 4.
    let (origin, _) = origin_on(listener_with_buffers(64 << 10));
    let squall = Squall::start(&config(origin));
    let client = h2c(squall.addr).await;
    let (response, mut send) = open(&client, "/ws").await;
    assert_eq!(response.status(), 200);
    let total = 16 << 20;
    let sent = pattern(total);
    let before = squall.rss();
    let data = Bytes::from(sent.clone());
    let writer = tokio::spawn(async move { send_all(&mut send, data).await });
    // The client reads nothing for two seconds: the echo backs up to the origin, the
    // origin stops reading, and the client's own sends stall on their window.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let during = squall.rss();
    assert!(!writer.is_finished(), "16 MiB cannot all have been taken");
    let grown = during.saturating_sub(before);
    eprintln!("RSS before {before}, while the reader sleeps {during}");
    assert!(
        grown < 8 << 20,
        "Squall grew by {grown} bytes while the reader slept"
    );
    // Another client is served meanwhile. (Not another stream of this connection: the
    // unread tunnel holds the client's connection window, which is the client's to give.)
    let other = h2c(squall.addr).await;
    let plain = fetch(&other, "GET", "http://o.test/plain", None).await;
    assert_eq!(plain.status, 200);
    let mut body = response.into_body();
    let got = tokio::time::timeout(Duration::from_secs(60), read_all(&mut body, usize::MAX))
        .await
        .expect("echo in time");
    writer.await.unwrap();
    assert_eq!(got.len(), total + 3);
    assert!(got[..total] == sent[..], "the echo differs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rst_stream_mid_tunnel_closes_the_origin_side() {
    let (origin, seen) = origin();
    let squall = Squall::start(&config(origin));
    let client = h2c(squall.addr).await;
    let (response, mut send) = open(&client, "/ws").await;
    assert_eq!(response.status(), 200);
    send.send_data(Bytes::from_static(b"ping"), false).unwrap();
    let mut body = response.into_body();
    assert_eq!(read_all(&mut body, 4).await, b"ping");
    assert_eq!(seen.ended.load(Ordering::SeqCst), 0);
    send.send_reset(h2::Reason::CANCEL);
    let mut waited = 0;
    while seen.ended.load(Ordering::SeqCst) == 0 && waited < 50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += 1;
    }
    assert_eq!(seen.ended.load(Ordering::SeqCst), 1, "origin side closed");
    let plain = fetch(&client, "GET", "http://o.test/plain", None).await;
    assert_eq!(plain.status, 200, "the connection goes on");
    let (_, text) = admin_get(admin_addr(&squall), "/metrics");
    assert_eq!(metric_sum(&text, "squall_tunnels_open"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_without_upgrade_answers_501_and_a_bad_accept_is_a_502() {
    let (origin, seen) = origin();
    let squall = Squall::start(&config(origin));
    let admin = admin_addr(&squall);
    let client = h2c(squall.addr).await;
    let (response, _send) = open(&client, "/plain").await;
    assert_eq!(response.status(), 501);
    assert!(
        seen.heads.lock().unwrap().is_empty(),
        "nothing reached the origin"
    );
    let (response, _send) = open(&client, "/bad-accept").await;
    assert_eq!(response.status(), 502);
    let (_, text) = admin_get(admin, "/metrics");
    assert_eq!(refused(&text, "not_allowed"), 1.0, "{text}");
    assert_eq!(refused(&text, "bad_101"), 1.0);
    assert_eq!(metric_sum(&text, "squall_tunnels_total"), 0.0);
    assert!(squall.wait_log("malformed 101", 1, Duration::from_secs(5)));
    assert!(squall.wait_log("does not allow its upgrade", 1, Duration::from_secs(5)));
    // The same connection serves other requests.
    let plain = fetch(&client, "GET", "http://o.test/plain", None).await;
    assert_eq!(plain.status, 200);
}

#[test]
fn the_origins_accept_is_rfc_6455s_example() {
    let accept = websocket_accept(b"dGhlIHNhbXBsZSBub25jZQ==");
    assert_eq!(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}
