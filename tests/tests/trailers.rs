//! Trailers through the proxy, both ways: an HTTP/1.1 origin's chunked trailers reach an
//! HTTP/1.1 client that sent `TE: trailers` in its last chunk (and a client that did not gets
//! none), and an HTTP/2 client as a trailing HEADERS frame (gRPC's `grpc-status`); request
//! trailers from a chunked HTTP/1.1 request and from an HTTP/2 client reach the origin; hop-by-hop
//! and framing fields never cross as trailers.

use std::convert::Infallible;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use http_body_util::BodyExt;
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use squall_e2e::Squall;

#[path = "support/h2_client.rs"]
mod h2_client;
#[path = "support/origin.rs"]
mod origin;

/// A body of one data frame then a trailers frame: hyper sends it chunked.
struct Trailed {
    data: Option<Bytes>,
    trailers: Option<HeaderMap>,
}

impl hyper::body::Body for Trailed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(data) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }
}

/// What the hyper origin answers: the request's `te`, body and trailers as text, and the
/// trailers `grpc-status: 0` and `x-sum: abc` (which hyper sends only to a request with
/// `TE: trailers`, and only as the `Trailer` field announces them).
async fn echo(request: http::Request<Incoming>) -> Result<http::Response<Trailed>, Infallible> {
    let te = request.headers().get(http::header::TE).cloned();
    let collected = request
        .into_body()
        .collect()
        .await
        .expect("a whole request");
    let trailers = collected.trailers().map(fields).unwrap_or_default();
    let body = collected.to_bytes();
    let text = format!(
        "te={}\nbody={}\ntrailers={trailers}\n",
        te.as_ref().map_or("-", |v| v.to_str().unwrap()),
        String::from_utf8_lossy(&body)
    );
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    trailers.insert("x-sum", HeaderValue::from_static("abc"));
    let response = http::Response::builder()
        .header("trailer", "grpc-status, x-sum")
        .body(Trailed {
            data: Some(Bytes::from(text)),
            trailers: Some(trailers),
        })
        .unwrap();
    Ok(response)
}

/// `name: value` for each field, sorted, joined by `, `.
fn fields(map: &HeaderMap) -> String {
    let mut lines: Vec<String> = map
        .iter()
        .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap()))
        .collect();
    lines.sort();
    lines.join(", ")
}

/// A hyper HTTP/1.1 origin serving [`echo`] on a thread of its own.
fn hyper_echo() -> SocketAddr {
    origin::tokio_origin(|stream| async move {
        let service = hyper::service::service_fn(echo);
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service)
            .await;
    })
}

/// An origin that always sends trailers, fit to forward or not, whatever the request's TE.
fn raw_trailing_origin() -> SocketAddr {
    origin::raw_origin(|head| {
        let te = origin::field(head, "te").unwrap_or("-");
        let body = format!("te={te}\n");
        format!(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\
             x-sum: abc\r\nconnection: close\r\ncontent-length: 4\r\nkeep-alive: timeout=1\r\n\
             host: elsewhere\r\n\r\n",
            body.len()
        )
        .into_bytes()
    })
}

fn config(origin: SocketAddr) -> String {
    format!(
        r#"[server]
workers = 1

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[[upstream]]
name = "o"
servers = [{{ address = "{origin}" }}]

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/"
proxy = "o"
"#
    )
}

/// Sends `request` and reads one chunked response whole: its head and the chunked body as
/// it came, up to the blank line after the last chunk.
fn chunked_roundtrip(squall: &Squall, request: &[u8]) -> (String, String) {
    let mut stream = squall.connect();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream.write_all(request).unwrap();
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    for _ in 0..1000 {
        let text = String::from_utf8_lossy(&bytes);
        if let Some((head, body)) = text.split_once("\r\n\r\n")
            && let Some(end) = chunked_end(body)
        {
            return (head.to_owned(), body[..end].to_owned());
        }
        let n = stream.read(&mut buf).expect("a whole response");
        assert!(n > 0, "EOF inside {text:?}");
        bytes.extend_from_slice(&buf[..n]);
    }
    panic!("no end: {:?}", String::from_utf8_lossy(&bytes));
}

/// Where the chunked body at the start of `body` ends, once it is whole.
fn chunked_end(body: &str) -> Option<usize> {
    let mut at = 0;
    loop {
        let line = body[at..].find("\r\n")?;
        let size = usize::from_str_radix(&body[at..at + line], 16).expect("a chunk size");
        at += line + 2;
        if size == 0 {
            return body[at - 2..].find("\r\n\r\n").map(|end| at + end + 2);
        }
        at += size + 2;
        if at > body.len() {
            return None;
        }
    }
}

/// The trailer section of a chunked body `body`: the lines after its last chunk.
fn trailer_section(body: &str) -> Vec<String> {
    let last = body.rfind("\r\n0\r\n").expect("a last chunk") + 5;
    let mut lines: Vec<String> = body[last..]
        .split("\r\n")
        .filter(|l| !l.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    lines.sort();
    lines
}

#[test]
fn an_http11_client_with_te_trailers_gets_the_origins_trailers() {
    let squall = Squall::start(&config(hyper_echo()));
    let request = b"GET /t HTTP/1.1\r\nHost: x\r\nTE: trailers\r\n\r\n";
    let (head, body) = chunked_roundtrip(&squall, request);
    assert!(
        head.to_ascii_lowercase()
            .contains("\r\ntransfer-encoding: chunked"),
        "{head}"
    );
    assert!(
        body.contains("te=trailers\n"),
        "the origin was asked: {body}"
    );
    assert_eq!(trailer_section(&body), ["grpc-status: 0", "x-sum: abc"]);
}

#[test]
fn an_http11_client_without_te_gets_no_trailers_and_never_framing_ones() {
    let squall = Squall::start(&config(raw_trailing_origin()));
    let request = b"GET /t HTTP/1.1\r\nHost: x\r\n\r\n";
    let (_, body) = chunked_roundtrip(&squall, request);
    assert!(body.contains("te=-\n"), "TE goes only if sent: {body}");
    assert!(trailer_section(&body).is_empty(), "{body:?}");
    // With TE: trailers, the fields fit to forward and no others.
    let request = b"GET /t HTTP/1.1\r\nHost: x\r\nTE: trailers\r\n\r\n";
    let (_, body) = chunked_roundtrip(&squall, request);
    assert_eq!(trailer_section(&body), ["x-sum: abc"]);
}

/// An h2c request to `squall` (with `te: trailers`, as gRPC sends it); its body, if any, is
/// followed by `trailers`. Returns the response body and trailers.
async fn h2_exchange(
    squall: &Squall,
    body: Option<&'static str>,
    trailers: Option<HeaderMap>,
) -> (String, Option<HeaderMap>) {
    let client = h2_client::h2c(squall.addr).await;
    let mut client = client.ready().await.expect("connection ready");
    let request = http::Request::builder()
        .method(if body.is_some() { "POST" } else { "GET" })
        .uri("http://x/t")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (response, mut send) = client
        .send_request(request, body.is_none())
        .expect("send request");
    if let Some(body) = body {
        send.send_data(Bytes::from_static(body.as_bytes()), trailers.is_none())
            .unwrap();
        if let Some(trailers) = trailers {
            send.send_trailers(trailers).unwrap();
        }
    }
    let response = response.await.expect("response");
    assert_eq!(response.status(), 200);
    let mut stream = response.into_body();
    let mut text = Vec::new();
    while let Some(chunk) = stream.data().await {
        let chunk = chunk.expect("body chunk");
        text.extend_from_slice(&chunk);
        stream.flow_control().release_capacity(chunk.len()).unwrap();
    }
    let trailers = stream.trailers().await.expect("trailers, well formed");
    (String::from_utf8(text).unwrap(), trailers)
}

#[tokio::test]
async fn an_http2_client_gets_the_trailers_in_a_trailing_headers_frame() {
    let squall = Squall::start(&config(hyper_echo()));
    let (body, trailers) = h2_exchange(&squall, None, None).await;
    assert!(body.contains("te=trailers\n"), "{body}");
    let trailers = trailers.expect("trailers");
    assert_eq!(fields(&trailers), "grpc-status: 0, x-sum: abc");
    // Connection-specific fields would make the HEADERS frame malformed (RFC 9113 §8.2.2).
    let squall = Squall::start(&config(raw_trailing_origin()));
    let (_, trailers) = h2_exchange(&squall, None, None).await;
    assert_eq!(fields(&trailers.expect("trailers")), "x-sum: abc");
}

#[tokio::test]
async fn an_http2_clients_request_trailers_reach_the_origin() {
    let squall = Squall::start(&config(hyper_echo()));
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-timeout", HeaderValue::from_static("1S"));
    trailers.insert("x-checksum", HeaderValue::from_static("c0ffee"));
    let (body, _) = h2_exchange(&squall, Some("hello"), Some(trailers)).await;
    assert!(body.contains("body=hello\n"), "{body}");
    assert!(
        body.contains("trailers=grpc-timeout: 1S, x-checksum: c0ffee\n"),
        "{body}"
    );
}

#[test]
fn a_chunked_http11_requests_trailers_reach_the_origin() {
    let squall = Squall::start(&config(hyper_echo()));
    let request = b"POST /t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
        5\r\nhello\r\n0\r\nX-Checksum: c0ffee\r\nContent-Length: 5\r\n\r\n";
    let (_, body) = chunked_roundtrip(&squall, request);
    assert!(body.contains("body=hello\n"), "{body}");
    assert!(body.contains("te=-\n"), "{body}");
    assert!(body.contains("trailers=x-checksum: c0ffee\n"), "{body}");
}

#[path = "support/h3_client.rs"]
mod h3_client;

/// [`config`] on a TLS listener that also serves HTTP/3.
fn h3_config(origin: SocketAddr) -> String {
    config(origin).replace(
        "protocols = [\"http1\", \"h2c\"]",
        "tls = true\nprotocols = [\"h2\", \"http1\", \"h3\"]\n\n[[certificate]]\nhosts = [\"localhost\"]\nself_signed = true",
    )
}

/// Trailers both ways over HTTP/3: the client's request trailers reach the origin in its last
/// chunk, and the origin's trailers come back in a trailing HEADERS frame.
#[tokio::test]
async fn http3_trailers_both_ways() {
    let squall = Squall::start(&h3_config(hyper_echo()));
    let mut h3 = h3_client::connect(squall.addr).await;
    let request = http::Request::post(format!("https://localhost:{}/t", squall.addr.port()))
        .header("te", "trailers")
        .body(())
        .unwrap();
    let mut stream = h3.send.send_request(request).await.unwrap();
    stream
        .send_data(Bytes::from_static(b"hello"))
        .await
        .unwrap();
    let mut request_trailers = HeaderMap::new();
    request_trailers.insert("x-checksum", HeaderValue::from_static("c0ffee"));
    stream.send_trailers(request_trailers).await.unwrap();
    stream.finish().await.unwrap();
    let response = stream.recv_response().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut text = Vec::new();
    while let Some(chunk) = stream.recv_data().await.unwrap() {
        text.extend_from_slice(bytes::Buf::chunk(&chunk));
    }
    let body = String::from_utf8(text).unwrap();
    assert!(body.contains("body=hello\n"), "{body}");
    assert!(body.contains("trailers=x-checksum: c0ffee\n"), "{body}");
    let trailers = stream.recv_trailers().await.unwrap().expect("trailers");
    assert_eq!(fields(&trailers), "grpc-status: 0, x-sum: abc");
    drop(h3);
}
