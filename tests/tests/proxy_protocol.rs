//! The PROXY protocol on a listener: a trusted balancer's header (v1 or v2) makes the address
//! it carries the client's everywhere (route `allow`, the access log, X-Forwarded-For to the
//! origin), over HTTP/1.1 and HTTP/2; a header from anywhere else, a malformed one, or none at
//! all closes the connection and is counted.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::Bytes;
use squall_e2e::{Squall, TempDir, admin_addr, admin_get, metric_sum, read_response};

#[path = "support/origin.rs"]
mod origin;

/// An origin that answers each request with the X-Forwarded-For it received.
fn echo_origin() -> SocketAddr {
    origin::raw_origin(|head| {
        let xff = origin::field(head, "x-forwarded-for").unwrap_or("-");
        origin::response("200 OK", &[], xff.as_bytes())
    })
}

fn config(origin: SocketAddr, log: &std::path::Path) -> String {
    format!(
        r#"[server]
workers = 1

[admin]
listen = "127.0.0.9:0"

[log]
access = {log:?}
format = "json"

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]
proxy_protocol = true
proxy_protocol_from = ["127.0.0.1/32"]

[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/office/"
respond = {{ status = 200, body = "office" }}
allow = ["10.0.0.0/8"]

[[vhost.route]]
prefix = "/"
proxy = "app"
"#
    )
}

/// A connection to Squall from the local address `from` (std has no bind-then-connect).
fn connect_from(squall: &Squall, from: &str) -> TcpStream {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
        socket.connect(squall.addr).await.unwrap()
    });
    let stream = stream.into_std().unwrap();
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
}

/// Sends `header` then `GET path` over HTTP/1.1 on a connection from `from`.
fn h1(squall: &Squall, from: &str, header: &[u8], path: &str) -> Option<squall_e2e::Response> {
    let mut stream = connect_from(squall, from);
    let request = format!("GET {path} HTTP/1.1\r\nHost: p.test\r\n\r\n");
    stream
        .write_all(&[header, request.as_bytes()].concat())
        .ok()?;
    read_response(&mut stream)
}

/// Whether Squall closed the connection without answering (not merely stayed silent).
fn closed_without_answer(mut stream: TcpStream) -> bool {
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    }
}

fn v1(source: &str) -> Vec<u8> {
    format!("PROXY TCP4 {source} 127.0.0.1 40000 80\r\n").into_bytes()
}

/// The v2 header of a TCP4 connection from `source`.
fn v2(source: [u8; 4]) -> Vec<u8> {
    let mut header = b"\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x0c".to_vec();
    header.extend_from_slice(&source);
    header.extend_from_slice(&[127, 0, 0, 1]);
    header.extend_from_slice(&40000u16.to_be_bytes());
    header.extend_from_slice(&80u16.to_be_bytes());
    header
}

fn wait_lines(path: &std::path::Path, n: usize) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<_> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if lines.len() >= n || Instant::now() > deadline {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_trusted_balancers_header_gives_the_client_address_everywhere() {
    let dir = TempDir::new();
    let log = dir.path().join("access.json");
    let squall = Squall::start(&config(echo_origin(), &log));
    // v1: the route that allows only 10/8 answers, the origin sees the client address.
    let office = h1(&squall, "127.0.0.1", &v1("10.1.2.3"), "/office/a").unwrap();
    assert_eq!((office.status, office.body_text()), (200, "office".into()));
    let proxied = h1(&squall, "127.0.0.1", &v1("10.1.2.3"), "/app").unwrap();
    assert_eq!(proxied.body_text(), "10.1.2.3");
    // v2, the header and the request in one write or split byte by byte.
    let v2_answer = h1(&squall, "127.0.0.1", &v2([10, 9, 8, 7]), "/app").unwrap();
    assert_eq!(v2_answer.body_text(), "10.9.8.7");
    let mut stream = connect_from(&squall, "127.0.0.1");
    for byte in v2([10, 6, 6, 6]) {
        stream.write_all(&[byte]).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    stream
        .write_all(b"GET /app HTTP/1.1\r\nHost: p.test\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut stream).unwrap().body_text(), "10.6.6.6");
    // A balancer's own health check (v2 LOCAL): its own address stands, so 10/8 is refused.
    let mut local = v2([10, 1, 1, 1]);
    local[12] = 0x20;
    let check = h1(&squall, "127.0.0.1", &local, "/office/a").unwrap();
    assert_eq!(check.status, 403);
    // The access log records the client addresses, not the balancer's.
    let lines = wait_lines(&log, 5);
    let addrs: Vec<&str> = lines
        .iter()
        .filter_map(|l| l["remote_addr"].as_str())
        .collect();
    assert_eq!(
        addrs,
        ["10.1.2.3", "10.1.2.3", "10.9.8.7", "10.6.6.6", "127.0.0.1"]
    );
}

#[tokio::test]
async fn http2_after_the_header_carries_the_client_address() {
    let dir = TempDir::new();
    let log = dir.path().join("access.json");
    let squall = Squall::start(&config(echo_origin(), &log));
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let mut stream = socket.connect(squall.addr).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stream, &v2([10, 20, 30, 40]))
        .await
        .unwrap();
    let (client, connection) = h2::client::handshake(stream).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    for (path, expected) in [("/app", "10.20.30.40"), ("/office/x", "office")] {
        let mut client = client.clone().ready().await.unwrap();
        let request = http::Request::get(format!("http://p.test{path}"))
            .body(())
            .unwrap();
        let (response, _) = client.send_request(request, true).unwrap();
        let response = response.await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let mut body = response.into_body();
        let mut got = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk: Bytes = chunk.unwrap();
            got.extend_from_slice(&chunk);
        }
        assert_eq!(got, expected.as_bytes(), "{path}");
    }
}

#[test]
fn headers_from_elsewhere_malformed_or_missing_close_the_connection() {
    let dir = TempDir::new();
    let log = dir.path().join("access.json");
    let squall = Squall::start(&config(echo_origin(), &log));
    // From an address that is not a trusted balancer, even with a good header.
    let mut untrusted = connect_from(&squall, "127.0.0.2");
    let request = b"GET /app HTTP/1.1\r\nHost: p.test\r\n\r\n";
    let _ = untrusted.write_all(&[&v1("10.1.2.3")[..], request].concat());
    assert!(closed_without_answer(untrusted));
    for bad in [
        &b"GET / HTTP/1.1\r\nHost: p.test\r\n\r\n"[..],
        b"PROXY TCP4 10.1.2.3 127.0.0.1 40000\r\n",
        b"PROXY TCP4 10.1.2.3 127.0.0.1 40000 80\n",
        b"\r\n\r\n\0\r\nQUIT\n\x31\x11\x00\x0c",
    ] {
        let mut stream = connect_from(&squall, "127.0.0.1");
        let _ = stream.write_all(bad);
        assert!(
            closed_without_answer(stream),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    // Every other connection goes on.
    let fine = h1(&squall, "127.0.0.1", &v1("10.1.2.3"), "/app").unwrap();
    assert_eq!(fine.body_text(), "10.1.2.3");
    let (_, metrics) = admin_get(admin_addr(&squall), "/metrics");
    assert_eq!(
        metric_sum(&metrics, "squall_proxy_protocol_refused_total"),
        5.0
    );
}
