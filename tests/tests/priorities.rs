//! RFC 9218 priorities end to end: over a raw HTTP/2 connection whose windows the client
//! opens when it chooses, a small response asked for at urgency 0 leaves ahead of a large
//! one at urgency 3 (incremental) that had the window first; without priority fields the
//! same two responses share the connection round robin.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use squall_e2e::Squall;

#[path = "support/raw_h2.rs"]
mod raw_h2;
use raw_h2::*;

/// The large body: four times what the worker pulls ahead of the socket.
const BIG_BYTES: usize = 1 << 20;
/// The small body: four DATA frames, so that round robin shows.
const SMALL_BYTES: usize = 64 << 10;
/// What the worker pulls from the connection ahead of the socket.
const LOOKAHEAD_BYTES: usize = 256 << 10;

const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;

fn config() -> String {
    format!(
        r#"[server]
workers = 1

[[listen]]
address = "ADDR"
protocols = ["h2c"]

[[vhost]]
hosts = ["*"]

[[vhost.route]]
exact = "/big"
respond = {{ status = 200, body = "{big}" }}

[[vhost.route]]
exact = "/small"
respond = {{ status = 200, body = "{small}" }}
"#,
        big = "b".repeat(BIG_BYTES),
        small = "s".repeat(SMALL_BYTES),
    )
}

fn window_update(stream: u32, increment: u32) -> Vec<u8> {
    frame(WINDOW_UPDATE, 0, stream, &increment.to_be_bytes())
}

/// HEADERS for `GET http://a{path}`, with a `priority` field when given; literals that are
/// never indexed, so each block decodes alone.
fn get(stream: u32, path: &str, priority: Option<&str>) -> Vec<u8> {
    // :method GET, :scheme http (static table), then :path and :authority by name index.
    let mut block = vec![0x82, 0x86, 0x04, path.len() as u8];
    block.extend_from_slice(path.as_bytes());
    block.extend_from_slice(&[0x01, 0x01, b'a']);
    if let Some(value) = priority {
        block.extend_from_slice(&[0x00, 8]);
        block.extend_from_slice(b"priority");
        block.push(value.len() as u8);
        block.extend_from_slice(value.as_bytes());
    }
    frame(HEADERS, END_HEADERS | END_STREAM, stream, &block)
}

/// A frame read back: its kind, flags, stream and payload length.
#[derive(Debug, Clone, Copy)]
struct Seen {
    kind: u8,
    flags: u8,
    stream: u32,
    len: usize,
}

/// Reads frames off `socket` until `done` says so (10 s at most).
fn read_until(socket: &mut TcpStream, seen: &mut Vec<Seen>, done: impl Fn(&[Seen]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    while !done(seen) {
        assert!(Instant::now() < deadline, "timed out; frames: {seen:?}");
        let n = socket.read(&mut buf).expect("read frames");
        assert!(n > 0, "closed early; frames: {seen:?}");
        bytes.extend_from_slice(&buf[..n]);
        while bytes.len() >= 9 {
            let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
            if bytes.len() < 9 + len {
                break;
            }
            let stream = u32::from_be_bytes(bytes[5..9].try_into().unwrap()) & 0x7fff_ffff;
            let (kind, flags) = (bytes[3], bytes[4]);
            seen.push(Seen {
                kind,
                flags,
                stream,
                len,
            });
            bytes.drain(..9 + len);
        }
    }
}

/// Asks for `/big` on stream 1 and `/small` on stream 3 with no window to answer in; once
/// both heads are back, opens the connection's and the big stream's windows before the small
/// one's, in one write. Returns the DATA frames, in the order they came.
fn race(big_priority: Option<&str>, small_priority: Option<&str>) -> Vec<Seen> {
    let squall = Squall::start(&config());
    let mut socket = squall.connect();
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    let mut settings = SETTINGS_INITIAL_WINDOW_SIZE.to_be_bytes().to_vec();
    settings.extend_from_slice(&0u32.to_be_bytes());
    hello.extend(frame(SETTINGS, 0, 0, &settings));
    hello.extend(get(1, "/big", big_priority));
    socket.write_all(&hello).unwrap();
    let mut seen = Vec::new();
    let head = |id: u32| move |s: &[Seen]| s.iter().any(|f| f.kind == HEADERS && f.stream == id);
    read_until(&mut socket, &mut seen, head(1));
    socket.write_all(&get(3, "/small", small_priority)).unwrap();
    read_until(&mut socket, &mut seen, head(3));
    let mut grant = window_update(0, 1 << 30);
    grant.extend(window_update(1, 1 << 30));
    grant.extend(window_update(3, 1 << 30));
    socket.write_all(&grant).unwrap();
    let ended =
        |id: u32| move |s: &Seen| s.kind == DATA && s.stream == id && s.flags & END_STREAM != 0;
    read_until(&mut socket, &mut seen, |s| {
        s.iter().any(ended(1)) && s.iter().any(ended(3))
    });
    let data: Vec<Seen> = seen.into_iter().filter(|f| f.kind == DATA).collect();
    let total = |id: u32| (data.iter().filter(|f| f.stream == id).map(|f| f.len)).sum::<usize>();
    assert_eq!((total(1), total(3)), (BIG_BYTES, SMALL_BYTES));
    data
}

/// Bytes of the big response sent before the small one's last DATA frame.
fn big_bytes_before_small_ends(data: &[Seen]) -> usize {
    let end = (data.iter())
        .position(|f| f.stream == 3 && f.flags & END_STREAM != 0)
        .expect("the small response ends");
    (data[..end].iter())
        .filter(|f| f.stream == 1)
        .map(|f| f.len)
        .sum()
}

/// Whether a frame of the big response came between the small one's first and last.
fn interleaved(data: &[Seen]) -> bool {
    let small: Vec<usize> = (data.iter().enumerate())
        .filter(|(_, f)| f.stream == 3)
        .map(|(i, _)| i)
        .collect();
    let (first, last) = (small[0], small[small.len() - 1]);
    data[first..last].iter().any(|f| f.stream == 1)
}

#[test]
fn an_urgent_small_response_overtakes_a_large_incremental_one() {
    let data = race(Some("u=3, i"), Some("u=0"));
    // In one batch the scheduler sends all of urgency 0 first. Had the server read the
    // grants in two pieces, the big stream could have had one look-ahead's worth first.
    let before = big_bytes_before_small_ends(&data);
    assert!(
        before <= LOOKAHEAD_BYTES,
        "{before} bytes of the big response went before the small one ended"
    );
    assert!(!interleaved(&data), "the small response was interleaved");
}

#[test]
fn without_priorities_the_responses_share_round_robin() {
    let data = race(None, None);
    assert!(interleaved(&data), "no round robin: {data:?}");
    let before = big_bytes_before_small_ends(&data);
    assert!(before > 0, "the big response had the window first");
}
