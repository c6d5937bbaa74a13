//! The timers of a proxied request, from HTTP/1.1 and HTTP/2 clients: the upstream's
//! `response_timeout` covers the wait for the response head only; once the head arrived, the
//! route's `read_timeout` bounds the origin's silence (a response that pauses between pieces
//! longer than the head may take is not cut, one silent for longer than it is); and a client
//! connection whose request waits on its origin is never closed by `limits.idle_timeout`.
//!
//! The origin is scripted on raw sockets: for each request head it reads, it sends pieces after
//! set pauses, so every silence here is the origin's, seconds long against timeouts of 1 s.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::Bytes;
use squall_e2e::{Squall, proxy_route_config, read_response_head};

#[path = "support/h2_client.rs"]
mod h2_client;
#[path = "support/origin.rs"]
mod origin;

/// The response head every scripted origin starts with: 11 bytes of body follow, in pieces.
const HEAD: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\n";

/// An origin that answers each request head on a connection with `script`: each piece after
/// its pause (milliseconds), in order; the connection stays open for the next request.
fn paced_origin(script: &'static [(u64, &'static [u8])]) -> SocketAddr {
    origin::raw_origin_writing(move |_, stream| {
        script.iter().all(|(pause, piece)| {
            std::thread::sleep(Duration::from_millis(*pause));
            stream.write_all(piece).is_ok()
        })
    })
}

/// GET `/` over HTTP/1.1, returning the status and as much of the body as arrives before the
/// connection ends or the 11 bytes are in.
fn h1_get(squall: &Squall) -> (TcpStream, u16, Vec<u8>) {
    let mut stream = squall.connect();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let head = read_response_head(&mut stream).expect("a response head");
    let mut body = Vec::new();
    let mut buf = [0u8; 64];
    while body.len() < 11 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&buf[..n]),
        }
    }
    (stream, head.status, body)
}

/// A response that pauses 2.5 s mid-body, past the head's 1 s, reaches the client whole
/// within the route's `read_timeout` of 6 s, over both protocols.
#[tokio::test]
async fn a_body_may_pause_past_the_head_timeout_within_the_read_timeout() {
    static SCRIPT: &[(u64, &[u8])] = &[(0, HEAD), (0, b"first"), (2_500, b"second")];
    let origin = paced_origin(SCRIPT);
    let squall = Squall::start(&proxy_route_config(
        origin,
        "",
        "response_timeout = \"1s\"",
        "read_timeout = \"6s\"",
    ));
    let (_, status, body) = h1_get(&squall);
    assert_eq!((status, body.as_slice()), (200, &b"firstsecond"[..]));

    let client = h2_client::h2c(squall.addr).await;
    let reply = h2_client::fetch(&client, "GET", "http://x/", None).await;
    assert_eq!(
        (reply.status, reply.body.as_slice()),
        (200, &b"firstsecond"[..])
    );
}

/// The origin falls silent after its head and a first piece: the route's `read_timeout`
/// (1 s, with the head's 10 s) cuts the response, an HTTP/1.1 connection closed short of its
/// length, an HTTP/2 stream reset; not before 1 s, and well before the head's 10 s.
#[tokio::test]
async fn a_silent_origin_is_cut_at_the_read_timeout() {
    static SCRIPT: &[(u64, &[u8])] = &[(0, HEAD), (0, b"first"), (20_000, b"second")];
    let origin = paced_origin(SCRIPT);
    let squall = Squall::start(&proxy_route_config(
        origin,
        "",
        "response_timeout = \"10s\"",
        "read_timeout = \"1s\"",
    ));
    let started = Instant::now();
    let (_, status, body) = h1_get(&squall);
    let took = started.elapsed();
    assert_eq!((status, body.as_slice()), (200, &b"first"[..]), "cut short");
    let bounds = Duration::from_millis(900)..Duration::from_secs(8);
    assert!(bounds.contains(&took), "HTTP/1.1 cut after {took:?}");

    let client = h2_client::h2c(squall.addr).await;
    let mut client = client.ready().await.unwrap();
    let started = Instant::now();
    let request = http::Request::get("http://x/").body(()).unwrap();
    let (response, _) = client.send_request(request, true).unwrap();
    let response = response.await.expect("a response head");
    let mut stream = response.into_body();
    let first = stream
        .data()
        .await
        .expect("a piece")
        .expect("the first piece");
    assert_eq!(first, Bytes::from_static(b"first"));
    let error = match stream.data().await {
        Some(Err(e)) => e,
        other => panic!("a reset stream, got {other:?}"),
    };
    let took = started.elapsed();
    assert_eq!(error.reason(), Some(h2::Reason::INTERNAL_ERROR), "{error}");
    assert!(bounds.contains(&took), "HTTP/2 cut after {took:?}");
}

/// `limits.idle_timeout` (1 s) does not close a connection whose request waits on its origin
/// (2.5 s before the head): the HTTP/1.1 connection and the HTTP/2 one each get their
/// response whole and then take another request.
#[tokio::test]
async fn idle_timeout_spares_a_connection_waiting_on_its_origin() {
    static SCRIPT: &[(u64, &[u8])] = &[(2_500, HEAD), (0, b"firstsecond")];
    let origin = paced_origin(SCRIPT);
    let squall = Squall::start(&proxy_route_config(
        origin,
        "idle_timeout = \"1s\"",
        "response_timeout = \"10s\"",
        "",
    ));
    let (mut stream, status, body) = h1_get(&squall);
    assert_eq!((status, body.as_slice()), (200, &b"firstsecond"[..]));
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let again = read_response_head(&mut stream).expect("a second response on the connection");
    assert_eq!(again.status, 200);

    let client = h2_client::h2c(squall.addr).await;
    for _ in 0..2 {
        let reply = h2_client::fetch(&client, "GET", "http://x/", None).await;
        assert_eq!(
            (reply.status, reply.body.as_slice()),
            (200, &b"firstsecond"[..])
        );
    }
}
