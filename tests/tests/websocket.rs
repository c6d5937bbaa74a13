//! Upgrades over HTTP/1.1 (RFC 9110 §7.8, RFC 6455's WebSocket) through Squall: on a route
//! with `upgrade = ["websocket"]` the origin's 101 reaches the client and the connection
//! becomes a tunnel (bytes both ways, in order, early bytes included, half-close, the idle
//! timeout, counted in metrics, a client that stops reading pausing its origin); a malformed
//! 101 is a 502; a route without `upgrade` and an
//! `Upgrade: h2c` are forwarded without `Upgrade`.
//!
//! The origin here is written by hand on raw sockets: it answers an upgrade with a 101 and
//! echoes every byte after it, so what the client reads back proves both directions.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use squall_e2e::{Squall, admin_addr, admin_get, metric_sum, read_response, read_response_head};

/// Reads one request head from `stream`; returns it (lowercase) and what followed it.
fn read_head(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let (head, rest) = squall_e2e::read_request_head(stream)?;
    Some((head.to_ascii_lowercase(), rest))
}

/// The origin: `/ws` upgrades and echoes until the client's FIN, then says `bye` and closes;
/// `/flood` upgrades and sends `FLOOD_BYTES` at once;
/// `/bad-*` answers a malformed 101; anything else `200` with the `Upgrade` it saw.
fn origin() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || serve(&mut stream));
        }
    });
    addr
}

fn serve(stream: &mut TcpStream) {
    let Some((head, early)) = read_head(stream) else {
        return;
    };
    let path = head.split(' ').nth(1).unwrap_or("").to_owned();
    let upgrade = head
        .lines()
        .find_map(|l| l.strip_prefix("upgrade:"))
        .map(|v| v.trim().to_owned());
    if path.starts_with("/bad-none") {
        let _ =
            stream.write_all(b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\n\r\n");
        return;
    }
    if path.starts_with("/bad-other") {
        let _ = stream.write_all(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n",
        );
        return;
    }
    let tunnels = path.starts_with("/ws") || path.starts_with("/flood");
    if !tunnels || upgrade.as_deref() != Some("websocket") {
        let body = format!("upgrade={}", upgrade.as_deref().unwrap_or("none"));
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(answer.as_bytes());
        return;
    }
    let switch = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                  Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
    if stream.write_all(switch.as_bytes()).is_err() || stream.write_all(&early).is_err() {
        return;
    }
    if path.starts_with("/flood") {
        // Sends FLOOD_BYTES at once, whoever reads them.
        for i in 0..FLOOD_BYTES / 65_536 {
            if stream.write_all(&[i as u8; 65_536]).is_err() {
                return;
            }
        }
        return;
    }
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if stream.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(_) => return,
        }
    }
    // The client's FIN arrived (passed on as a shutdown): the other direction still works.
    let _ = stream.write_all(b"bye");
}

/// What `/flood` sends right after its 101.
const FLOOD_BYTES: usize = 32 << 20;

fn config(origin: SocketAddr) -> String {
    format!(
        r#"[server]
workers = 1

[[listen]]
address = "ADDR"

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
tunnel_idle_timeout = "1s"

[[vhost.route]]
prefix = "/ws-steady"
proxy = "app"
upgrade = ["websocket"]

[[vhost.route]]
prefix = "/bad-"
proxy = "app"
upgrade = ["websocket"]

# The default tunnel_idle_timeout (60s): a paused tunnel is not cut while the test waits.
[[vhost.route]]
prefix = "/flood"
proxy = "app"
upgrade = ["websocket"]

[[vhost.route]]
prefix = "/"
proxy = "app"
"#
    )
}

fn upgrade_request(path: &str, protocol: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: o.test\r\nConnection: Upgrade\r\nUpgrade: {protocol}\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
}

fn connect(squall: &Squall) -> TcpStream {
    let stream = squall.connect();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// The client reads the 101 and what follows it into `rest`.
fn read_switch(stream: &mut TcpStream) -> (String, Vec<u8>) {
    read_head(stream).expect("a response head")
}

#[test]
fn a_websocket_tunnel_echoes_16_mib_both_ways_and_passes_a_half_close_on() {
    // On `/ws-steady`, whose tunnel_idle_timeout is the default 60 s: on a loaded machine,
    // making the payload (16 M steps of a debug build) or the metrics request below could
    // outlast `/ws`'s 1 s, which would then rightly end the tunnel before a byte was sent.
    let total = 16 << 20;
    let sent: Vec<u8> = (0..total)
        .map(|i: usize| (i * 7 + i / 4096) as u8)
        .collect();
    let squall = Squall::start(&config(origin()));
    let admin = admin_addr(&squall);
    let mut client = connect(&squall);
    // The first frames sent early, right behind the request: they follow it, in order.
    let mut request = upgrade_request("/ws-steady", "websocket").into_bytes();
    request.extend_from_slice(b"early");
    client.write_all(&request).unwrap();
    let (head, mut got) = read_switch(&mut client);
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(head.contains("upgrade: websocket"), "{head}");
    assert!(head.contains("connection: upgrade"), "{head}");
    assert!(head.contains("sec-websocket-accept: "), "{head}");
    assert!(!head.contains("content-length") && !head.contains("transfer-encoding"));
    let (_, text) = admin_get(admin, "/metrics");
    assert_eq!(metric_sum(&text, "squall_tunnels_open"), 1.0);
    let app = "squall_upstream_tunnels_open{upstream=\"app\"}";
    assert_eq!(metric_sum(&text, app), 1.0);
    // 16 MiB of varied bytes (made above), written while a thread reads the echo.
    let mut reader = client.try_clone().unwrap();
    let expect = 5 + total + 3;
    let read = std::thread::spawn(move || {
        let mut buf = vec![0u8; 256 * 1024];
        while got.len() < expect {
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        // After `bye` the tunnel ends: the connection closes.
        let closed = matches!(reader.read(&mut buf), Ok(0));
        (got, closed)
    });
    for piece in sent.chunks(100_000) {
        if let Err(e) = client.write_all(piece) {
            panic!("write: {e}\n{}", squall.log());
        }
    }
    // Half-close: the origin sees EOF, and still answers.
    client.shutdown(Shutdown::Write).unwrap();
    let (got, closed) = read.join().unwrap();
    assert_eq!(got.len(), expect, "echo bytes\n{}", squall.log());
    assert_eq!(&got[..5], b"early");
    assert!(got[5..5 + total] == sent[..], "the echo differs");
    assert_eq!(&got[5 + total..], b"bye");
    assert!(closed, "the tunnel ends once both sides are done");
    let (_, text) = admin_get(admin, "/metrics");
    assert_eq!(metric_sum(&text, "squall_tunnels_total"), 1.0);
    assert_eq!(metric_sum(&text, "squall_tunnels_open"), 0.0);
    assert_eq!(metric_sum(&text, app), 0.0);
    assert_eq!(
        metric_sum(&text, "squall_tunnel_bytes_up_total"),
        (5 + total) as f64
    );
    assert_eq!(
        metric_sum(&text, "squall_tunnel_bytes_down_total"),
        expect as f64
    );
}

#[test]
fn a_silent_tunnel_is_closed_after_its_idle_timeout() {
    let lateness = squall_e2e::Lateness::start();
    let squall = Squall::start(&config(origin()));
    let mut client = connect(&squall);
    client
        .write_all(upgrade_request("/ws", "websocket").as_bytes())
        .unwrap();
    let (head, _) = read_switch(&mut client);
    assert!(head.starts_with("http/1.1 101"), "{head}");
    client.write_all(b"ping").unwrap();
    let mut buf = [0u8; 4];
    client.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"ping");
    let started = Instant::now();
    let mut rest = Vec::new();
    let _ = client.read_to_end(&mut rest);
    let waited = started.elapsed();
    assert!(rest.is_empty());
    assert!(
        waited >= Duration::from_millis(800),
        "closed after {waited:?} (tunnel_idle_timeout 1s)"
    );
    lateness.assert_within("the idle close", waited, Duration::from_secs(5));
}

#[test]
fn a_malformed_101_is_a_502_and_others_go_on() {
    let squall = Squall::start(&config(origin()));
    let admin = admin_addr(&squall);
    for path in ["/bad-none", "/bad-other"] {
        let mut client = connect(&squall);
        client
            .write_all(upgrade_request(path, "websocket").as_bytes())
            .unwrap();
        let response = read_response_head(&mut client).expect("a response");
        assert_eq!(response.status, 502, "{path}");
    }
    let (_, text) = admin_get(admin, "/metrics");
    assert_eq!(metric_sum(&text, "squall_tunnels_total"), 0.0);
    // Another client is unaffected.
    let mut other = connect(&squall);
    write!(other, "GET /plain HTTP/1.1\r\nHost: o.test\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut other).unwrap().status, 200);
}

#[test]
fn upgrades_a_route_does_not_allow_and_h2c_are_stripped() {
    let squall = Squall::start(&config(origin()));
    for (path, protocol) in [("/plain", "websocket"), ("/ws", "h2c")] {
        let mut client = connect(&squall);
        client
            .write_all(upgrade_request(path, protocol).as_bytes())
            .unwrap();
        let response = read_response(&mut client).expect("a response");
        assert_eq!(response.status, 200, "{path} {protocol}");
        assert_eq!(response.body_text(), "upgrade=none", "{path} {protocol}");
        assert!(response.header("upgrade").is_none());
        // Served as HTTP/1.1: the connection goes on.
        write!(client, "GET /again HTTP/1.1\r\nHost: o.test\r\n\r\n").unwrap();
        assert_eq!(read_response(&mut client).unwrap().status, 200);
    }
}

#[test]
fn a_tunnel_client_that_stops_reading_pauses_its_origin_and_others_go_on() {
    let squall = Squall::start(&config(origin()));
    let mut client = connect(&squall);
    let before = squall.rss();
    client
        .write_all(upgrade_request("/flood", "websocket").as_bytes())
        .unwrap();
    let (head, mut got) = read_switch(&mut client);
    assert!(head.starts_with("http/1.1 101"), "{head}");
    // The client reads nothing for two seconds while the origin sends 32 MiB.
    std::thread::sleep(Duration::from_secs(2));
    let during = squall.rss();
    let grown = during.saturating_sub(before);
    eprintln!("RSS before {before}, while the client does not read {during}");
    assert!(grown < 8 << 20, "Squall grew by {grown} bytes");
    // Other clients are served meanwhile.
    let mut other = connect(&squall);
    write!(other, "GET /plain HTTP/1.1\r\nHost: o.test\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut other).unwrap().status, 200);
    // Then the client reads on, and everything arrives, in order.
    let mut buf = vec![0u8; 256 * 1024];
    while got.len() < FLOOD_BYTES {
        match client.read(&mut buf) {
            Ok(0) => break,
            Err(e) => panic!("read: {e}; log:\n{}", squall.log()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    assert_eq!(got.len(), FLOOD_BYTES, "{}", squall.log());
    let in_order = (got.chunks(65_536).enumerate()).all(|(i, c)| c.iter().all(|&b| b == i as u8));
    assert!(in_order, "the bytes arrive as sent");
}
