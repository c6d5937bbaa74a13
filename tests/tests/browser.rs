//! What a browser expects from an edge: an idle HTTP/2 connection ends with GOAWAY, not a bare
//! close (RFC 9113 §9.1), so a request sent at that moment is known to be unprocessed.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use squall_e2e::Squall;

fn idle_config(idle_timeout: &str) -> String {
    format!(
        r#"[server]
workers = 1
drain_timeout = "5s"

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[limits]
idle_timeout = "{idle_timeout}"

[[vhost]]
hosts = ["*"]

[[vhost.route]]
exact = "/"
respond = {{ status = 200, body = "Hello, world!" }}
"#
    )
}

#[test]
fn an_idle_http2_connection_gets_goaway_before_the_close() {
    let squall = Squall::start(&idle_config("1s"));
    let mut stream = raw_h2(squall.addr);
    stream
        .write_all(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &get_block()))
        .unwrap();
    let started = Instant::now();
    let (frames, closed) = frames_until_close(&mut stream);
    assert!(closed, "the idle connection is closed: {frames:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "closed at the idle timeout and its grace, not later"
    );
    assert!(
        frames.iter().any(|f| f.kind == HEADERS && f.stream == 1),
        "stream 1 is answered first: {frames:?}"
    );
    let goaway = frames
        .iter()
        .find(|f| f.kind == GOAWAY)
        .unwrap_or_else(|| panic!("a GOAWAY before the close: {frames:?}"));
    assert_eq!(goaway_error(goaway), 0, "GOAWAY(NO_ERROR)");
    assert_eq!(
        goaway_last_stream(goaway),
        1,
        "the last stream Squall processed"
    );
}

// ---- raw HTTP/2 frames ----

/// One frame: the 9-byte header (RFC 9113 §4.1) and the payload.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = Vec::with_capacity(9 + payload.len());
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

const HEADERS: u8 = 0x1;
const SETTINGS: u8 = 0x4;
const GOAWAY: u8 = 0x7;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

/// An HPACK block for `GET http://a/`, from the static table and a literal never indexed.
fn get_block() -> Vec<u8> {
    // :method GET (2), :scheme http (6), :path / (4), :authority "a" literal without indexing.
    vec![0x82, 0x86, 0x84, 0x01, 0x01, b'a']
}

/// A raw connection: preface and an empty SETTINGS sent.
fn raw_h2(addr: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .unwrap();
    stream.write_all(&frame(SETTINGS, 0, 0, &[])).unwrap();
    stream
}

/// One frame read off a raw connection.
#[derive(Debug)]
struct RawFrame {
    kind: u8,
    stream: u32,
    payload: Vec<u8>,
}

/// Splits whole frames off the front of `bytes`.
fn split_frames(bytes: &mut Vec<u8>) -> Vec<RawFrame> {
    let mut frames = Vec::new();
    while bytes.len() >= 9 {
        let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
        if bytes.len() < 9 + len {
            break;
        }
        let stream = u32::from_be_bytes(bytes[5..9].try_into().unwrap()) & 0x7fff_ffff;
        frames.push(RawFrame {
            kind: bytes[3],
            stream,
            payload: bytes[9..9 + len].to_vec(),
        });
        bytes.drain(..9 + len);
    }
    frames
}

/// Reads frames until the server closes (EOF or reset: true) or 15 s pass (false).
fn frames_until_close(stream: &mut TcpStream) -> (Vec<RawFrame>, bool) {
    let mut bytes = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut buf = [0u8; 16384];
    let mut closed = false;
    while Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                closed = true;
                break;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("reading frames: {e}"),
        }
    }
    (split_frames(&mut bytes), closed)
}

fn goaway_error(goaway: &RawFrame) -> u32 {
    u32::from_be_bytes(goaway.payload[4..8].try_into().unwrap())
}

fn goaway_last_stream(goaway: &RawFrame) -> u32 {
    u32::from_be_bytes(goaway.payload[..4].try_into().unwrap()) & 0x7fff_ffff
}
