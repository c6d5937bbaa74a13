//! `proxy_protocol = "v1" | "v2"` on an upstream: each connection to its servers starts with a
//! PROXY protocol header naming the client (its address and port as the client connected from,
//! and the address it reached Squall at), for HTTP/1.1 and HTTP/2 clients, cleartext and TLS
//! listeners alike; such connections are never pooled (a later request may be another
//! client's); health probes send the header's `LOCAL` form.
//!
//! The origin here parses the header by hand (an independent reading of the spec) and answers
//! each request with what its connection's header said.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use squall_e2e::{Squall, read_response};

/// What the origin saw on each connection: the header, as text.
type Seen = Arc<Mutex<Vec<String>>>;

const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// Reads a PROXY header from the start of `stream` (whatever follows stays in `rest`) and
/// describes it: `TCP4 src dst`, or `LOCAL`; `None` if there is none.
fn read_header(stream: &mut TcpStream, rest: &mut Vec<u8>) -> Option<String> {
    let mut buf = [0u8; 4096];
    loop {
        if rest.starts_with(b"PROXY ") {
            if let Some(end) = rest.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8(rest[6..end].to_vec()).ok()?;
                rest.drain(..end + 2);
                let parts: Vec<&str> = line.split(' ').collect();
                return Some(match parts.as_slice() {
                    ["TCP4", src, dst, sport, dport] => format!("TCP4 {src}:{sport} {dst}:{dport}"),
                    ["UNKNOWN", ..] => "LOCAL".to_owned(),
                    _ => format!("BAD {line}"),
                });
            }
        } else if rest.len() >= 16 && rest.starts_with(V2_SIGNATURE) {
            let (command, family) = (rest[12], rest[13]);
            let len = usize::from(u16::from_be_bytes([rest[14], rest[15]]));
            if rest.len() >= 16 + len {
                let block = rest[16..16 + len].to_vec();
                rest.drain(..16 + len);
                return Some(match (command, family) {
                    (0x20, _) => "LOCAL".to_owned(),
                    (0x21, 0x11) if block.len() >= 12 => {
                        let ip = |at: usize| {
                            Ipv4Addr::new(block[at], block[at + 1], block[at + 2], block[at + 3])
                        };
                        let port = |at: usize| u16::from_be_bytes([block[at], block[at + 1]]);
                        format!("TCP4 {}:{} {}:{}", ip(0), port(8), ip(4), port(10))
                    }
                    _ => format!("BAD v2 {command:#x} {family:#x}"),
                });
            }
        } else if rest.len() >= 16
            || (!rest.is_empty()
                && !b"PROXY ".starts_with(&rest[..rest.len().min(6)])
                && !V2_SIGNATURE.starts_with(&rest[..rest.len().min(12)]))
        {
            return None;
        }
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        rest.extend_from_slice(&buf[..n]);
    }
}

/// An origin that records each connection's header and answers every request on it (kept
/// alive) with that header as the body.
fn origin() -> (SocketAddr, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let record = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let record = record.clone();
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let mut pending = Vec::new();
                let header =
                    read_header(&mut stream, &mut pending).unwrap_or_else(|| "NONE".into());
                record.lock().unwrap().push(header.clone());
                let mut buf = [0u8; 4096];
                loop {
                    while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        pending.drain(..end + 4);
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{header}",
                            header.len()
                        );
                        if stream.write_all(answer.as_bytes()).is_err() {
                            return;
                        }
                    }
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => pending.extend_from_slice(&buf[..n]),
                    }
                }
            });
        }
    });
    (addr, seen)
}

fn config(origin: SocketAddr, version: &str, probe: bool) -> String {
    let health = if probe {
        "health_check = { path = \"/health\", interval = \"200ms\" }\n"
    } else {
        ""
    };
    format!(
        r#"[server]
workers = 1

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]
proxy_protocol = "{version}"
{health}
[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/"
proxy = "app"
"#
    )
}

/// Two requests on one HTTP/1.1 connection; returns the bodies and the client's address.
fn two_requests(squall: &Squall) -> (Vec<String>, SocketAddr) {
    let mut stream = TcpStream::connect(squall.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let me = stream.local_addr().unwrap();
    let mut bodies = Vec::new();
    for path in ["/a", "/b"] {
        write!(stream, "GET {path} HTTP/1.1\r\nHost: o.test\r\n\r\n").unwrap();
        let response = read_response(&mut stream).expect("a response");
        assert_eq!(response.status, 200);
        bodies.push(String::from_utf8(response.body).unwrap());
    }
    (bodies, me)
}

#[test]
fn each_origin_connection_names_its_http1_client_in_v1_and_v2() {
    for version in ["v1", "v2"] {
        let (origin, seen) = origin();
        let squall = Squall::start(&config(origin, version, false));
        let (bodies, me) = two_requests(&squall);
        let expected = format!("TCP4 {me} {}", squall.addr);
        assert_eq!(bodies, [expected.clone(), expected.clone()], "{version}");
        // Another client: its own address, on its own connection.
        let (others, other) = two_requests(&squall);
        assert_ne!(other, me);
        assert_eq!(others[0], format!("TCP4 {other} {}", squall.addr));
        // Never pooled: one origin connection per request, each with its client's header.
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 4, "{version}: {seen:?}");
        assert_eq!(seen.iter().filter(|h| **h == expected).count(), 2);
    }
}

#[tokio::test]
async fn an_http2_clients_requests_carry_its_address() {
    let (origin, seen) = origin();
    let squall = Squall::start(&config(origin, "v2", false));
    let stream = tokio::net::TcpStream::connect(squall.addr).await.unwrap();
    let me = stream.local_addr().unwrap();
    let (client, connection) = h2::client::handshake(stream).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut client = client.ready().await.unwrap();
    for path in ["/x", "/y"] {
        let request = http::Request::get(format!("http://o.test{path}"))
            .body(())
            .unwrap();
        let (response, _) = client.send_request(request, true).unwrap();
        let response = response.await.unwrap();
        assert_eq!(response.status(), 200);
        let mut body = Vec::new();
        let mut data = response.into_body();
        while let Some(chunk) = data.data().await {
            let chunk: Bytes = chunk.unwrap();
            body.extend_from_slice(&chunk);
        }
        assert_eq!(
            String::from_utf8(body).unwrap(),
            format!("TCP4 {me} {}", squall.addr)
        );
        client = client.ready().await.unwrap();
    }
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[test]
fn health_probes_send_the_local_form() {
    let (origin, seen) = origin();
    let _squall = Squall::start(&config(origin, "v2", true));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while seen.lock().unwrap().len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() >= 2, "probes: {seen:?}");
    assert!(seen.iter().all(|h| h == "LOCAL"), "{seen:?}");
}

#[test]
fn squall_check_names_an_unknown_version() {
    let (origin, _) = origin();
    let text = config(origin, "v3", false).replace("ADDR", "127.0.0.1:0");
    let dir = squall_e2e::TempDir::new();
    let path = dir.path().join("squall.toml");
    std::fs::write(&path, text).unwrap();
    let out = std::process::Command::new(squall_e2e::squall_bin())
        .arg("check")
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown proxy_protocol \"v3\""), "{stderr}");
}
