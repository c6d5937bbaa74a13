//! gRPC over HTTP/3: a client that frames gRPC messages itself (hyperium's h3 over quinn; no
//! gRPC library speaks HTTP/3 here) calls the tonic origin of `grpc.rs` (h2c upstream) through
//! Squall's h3 listener, and every part of the call crosses as it does over HTTP/2: request
//! metadata and `te: trailers` reach the origin, the length-prefixed response message comes
//! back whole, then `grpc-status` and trailing metadata in a trailing HEADERS frame; an error
//! status arrives as the origin sent it.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Buf, Bytes};
use prost::Message;
use squall_e2e::Squall;

#[path = "support/grpc_echo.rs"]
mod grpc_echo;
#[path = "support/h3_client.rs"]
mod h3_client;
#[path = "support/origin.rs"]
mod origin;

use grpc_echo::{Msg, grpc_origin, msg};

/// How long the test may take: a call the proxy loses fails it instead of hanging it.
const TEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Squall with a TLS listener offering h3 (and h2, http/1.1), everything proxied to `origin`
/// in h2c.
fn config(origin: SocketAddr) -> String {
    format!(
        r#"[server]
workers = 2

[[listen]]
address = "ADDR"
tls = true
protocols = ["h2", "http1", "h3"]

[[certificate]]
hosts = ["localhost"]
self_signed = true

[[upstream]]
name = "grpc"
protocol = "h2c"
servers = [{{ address = "{origin}" }}]

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/"
proxy = "grpc"
"#
    )
}

/// A gRPC length-prefixed message: not compressed, its length in 4 bytes, then its bytes.
fn frame(message: &Msg) -> Bytes {
    let body = message.encode_to_vec();
    let mut framed = vec![0u8];
    framed.extend_from_slice(&(body.len() as u32).to_be_bytes());
    framed.extend_from_slice(&body);
    Bytes::from(framed)
}

/// The one message of a unary response body.
fn unframe(body: &[u8]) -> Msg {
    assert!(body.len() >= 5, "a short body: {body:?}");
    assert_eq!(body[0], 0, "not compressed");
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    assert_eq!(body.len(), 5 + len, "one message, whole");
    Msg::decode(&body[5..]).expect("a Msg")
}

/// What one call over HTTP/3 brought back.
struct Call {
    head: http::Response<()>,
    body: Vec<u8>,
    trailers: Option<http::HeaderMap>,
}

async fn call(h3: &mut h3_client::H3, port: u16, path: &str, message: &Msg) -> Call {
    let request = http::Request::post(format!("https://localhost:{port}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("x-client-tag", "abc123")
        .body(())
        .unwrap();
    let mut stream = h3.send.send_request(request).await.expect("request sent");
    stream
        .send_data(frame(message))
        .await
        .expect("message sent");
    stream.finish().await.expect("request ended");
    let head = stream.recv_response().await.expect("a response head");
    let mut body = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await.expect("body data") {
        while chunk.has_remaining() {
            let piece = chunk.chunk().to_vec();
            chunk.advance(piece.len());
            body.extend_from_slice(&piece);
        }
    }
    let trailers = stream.recv_trailers().await.expect("trailers read");
    Call {
        head,
        body,
        trailers,
    }
}

fn field<'a>(map: &'a http::HeaderMap, name: &str) -> &'a str {
    map.get(name).map_or("<none>", |v| v.to_str().unwrap())
}

#[tokio::test]
async fn grpc_calls_over_http3_keep_metadata_messages_trailers_and_errors() {
    let squall = Squall::start(&config(grpc_origin()));
    let port = squall.addr.port();
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut h3 = h3_client::connect(squall.addr).await;

        let ok = call(
            &mut h3,
            port,
            "/squall.test.Echo/Unary",
            &msg(7, b"hello".to_vec(), "ping"),
        )
        .await;
        assert_eq!(ok.head.status(), 200);
        assert_eq!(field(ok.head.headers(), "content-type"), "application/grpc");
        assert_eq!(field(ok.head.headers(), "x-origin-header"), "yes");
        assert_eq!(
            unframe(&ok.body),
            msg(8, b"olleh".to_vec(), "tag=abc123 te=trailers note=ping")
        );
        let trailers = ok.trailers.expect("trailers after the message");
        assert_eq!(field(&trailers, "grpc-status"), "0");
        assert_eq!(field(&trailers, "x-origin-trailer"), "unary");

        // An error status: tonic sends it alone in the head (a trailers-only response), or in
        // trailers; either way it reaches the client as the origin sent it.
        let failed = call(&mut h3, port, "/squall.test.Echo/Fail", &msg(1, vec![], "")).await;
        assert_eq!(failed.head.status(), 200);
        let status = failed.trailers.as_ref().unwrap_or(failed.head.headers());
        assert_eq!(field(status, "grpc-status"), "5", "NOT_FOUND");
        // Percent-encoded, as the gRPC protocol sends messages.
        assert_eq!(field(status, "grpc-message"), "no%20such%20thing:%20x");
        assert_eq!(field(status, "x-why"), "testing");
        assert!(failed.body.is_empty(), "no message with an error");
    })
    .await
    .expect("within the time limit");
}
