//! HTTP/1.1 behaviour of the real binary: routes, keep-alive, pipelining, many connections.

use std::io::Write;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use squall_e2e::{Squall, hello_config, is_closed, read_response, roundtrip};

/// An independent client (hyper) gets the `respond` route's status, headers and body.
#[tokio::test]
async fn respond_route_via_hyper() {
    let squall = Squall::start(&hello_config(""));
    let stream = tokio::net::TcpStream::connect(squall.addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    for _ in 0..3 {
        let request = http::Request::get("/")
            .header("host", "example.test")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-length"], "13");
        assert_eq!(response.headers()["server"], "squall");
        assert!(response.headers().contains_key("date"));
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"Hello, world!");
    }
}

#[test]
fn unknown_path_gets_default_404() {
    let squall = Squall::start(&hello_config(""));
    let mut stream = squall.connect();
    let response = roundtrip(&mut stream, "GET /missing HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(response.status, 404);
    assert_eq!(response.body_text(), "404 Not Found\n");
    // The connection stays usable after a 404.
    let response = roundtrip(&mut stream, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(response.body_text(), "A");
}

#[test]
fn five_pipelined_requests_are_answered_in_order() {
    let squall = Squall::start(&hello_config(""));
    let mut stream = squall.connect();
    let paths = ["/a", "/b", "/c/1", "/nope", "/a"];
    let batch: String = paths
        .iter()
        .map(|p| format!("GET {p} HTTP/1.1\r\nHost: x\r\n\r\n"))
        .collect();
    stream.write_all(batch.as_bytes()).unwrap();
    let got: Vec<(u16, String)> = (0..paths.len())
        .map(|_| {
            let r = read_response(&mut stream).expect("response");
            (r.status, r.body_text())
        })
        .collect();
    let want = vec![
        (200, "A".to_owned()),
        (200, "B".to_owned()),
        (201, "C".to_owned()),
        (404, "404 Not Found\n".to_owned()),
        (200, "A".to_owned()),
    ];
    assert_eq!(got, want);
}

#[test]
fn head_http10_and_connection_close() {
    let squall = Squall::start(&hello_config(""));
    let mut stream = squall.connect();
    stream
        .write_all(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let head = read_head_only(&mut stream);
    assert!(head.contains("content-length: 13\r\n"), "{head}");
    // The HEAD response had no body: the next bytes are the second response.
    let next = read_response_after_head(&mut stream);
    assert_eq!((next.status, next.body_text()), (200, "A".to_owned()));

    let mut old = squall.connect();
    let r = roundtrip(&mut old, "GET /a HTTP/1.0\r\n\r\n");
    assert_eq!(r.body_text(), "A");
    assert!(is_closed(&mut old), "HTTP/1.0 without keep-alive closes");

    let mut old_ka = squall.connect();
    let r = roundtrip(
        &mut old_ka,
        "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    );
    assert_eq!(r.header("connection"), Some("keep-alive"));
    let r = roundtrip(
        &mut old_ka,
        "GET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    );
    assert_eq!(r.body_text(), "B");

    let mut closing = squall.connect();
    let r = roundtrip(
        &mut closing,
        "GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.header("connection"), Some("close"));
    assert!(is_closed(&mut closing));
}

#[test]
fn bodies_and_expect_continue() {
    let squall = Squall::start(&hello_config(""));
    let mut stream = squall.connect();
    let r = roundtrip(
        &mut stream,
        "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
    );
    assert_eq!(r.body_text(), "A");
    let chunked = "POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
                   5;ext=1\r\nhello\r\n0\r\nx-trailer: t\r\n\r\n";
    let r = roundtrip(&mut stream, chunked);
    assert_eq!(r.body_text(), "B");
    stream
        .write_all(
            b"PUT /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n",
        )
        .unwrap();
    let interim = read_response(&mut stream).unwrap();
    assert_eq!(interim.status, 100);
    stream.write_all(b"abc").unwrap();
    let r = read_response(&mut stream).unwrap();
    assert_eq!((r.status, r.body_text()), (200, "A".to_owned()));
}

/// 1,000 concurrent keep-alive connections, each making several requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_keep_alive_connections() {
    let squall = Squall::start(&hello_config(""));
    let addr = squall.addr;
    let mut tasks = Vec::new();
    for _ in 0..1000 {
        tasks.push(tokio::spawn(async move {
            let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .unwrap();
            tokio::spawn(conn);
            for _ in 0..3 {
                let request = http::Request::get("/a")
                    .header("host", "x")
                    .body(Empty::<Bytes>::new())
                    .unwrap();
                let response = sender.send_request(request).await.unwrap();
                assert_eq!(response.status(), 200);
                let body = response.into_body().collect().await.unwrap().to_bytes();
                assert_eq!(&body[..], b"A");
            }
            sender
        }));
    }
    let mut senders = Vec::new();
    for task in tasks {
        senders.push(
            tokio::time::timeout(Duration::from_secs(60), task)
                .await
                .unwrap()
                .unwrap(),
        );
    }
    // All 1,000 are still open and usable at the same time.
    assert_eq!(senders.len(), 1000);
    for sender in senders.iter_mut().step_by(50) {
        let request = http::Request::get("/b")
            .header("host", "x")
            .body(Empty::<Bytes>::new())
            .unwrap();
        assert_eq!(sender.send_request(request).await.unwrap().status(), 200);
    }
}

/// Reads a response head without consuming a body (for HEAD responses).
fn read_head_only(stream: &mut std::net::TcpStream) -> String {
    use std::io::Read;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).unwrap(), 1, "EOF in a head");
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap().to_lowercase()
}

fn read_response_after_head(stream: &mut std::net::TcpStream) -> squall_e2e::Response {
    read_response(stream).expect("the response after the HEAD response")
}
