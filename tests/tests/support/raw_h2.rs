//! Raw HTTP/2 for the end-to-end tests: frames built and read byte by byte, for what a client
//! library hides (a GOAWAY's code and last stream, floods, PRIORITY_UPDATE, exact interleaving).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// One frame: the 9-byte header (RFC 9113 §4.1) and the payload.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = Vec::with_capacity(9 + payload.len());
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;
pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const FRAME_SIZE_ERROR: u32 = 0x6;
pub const ENHANCE_YOUR_CALM: u32 = 0xb;

/// An HPACK block for `GET http://a/`, from the static table and literals that are never
/// added to the dynamic table, so every copy decodes alike.
pub fn get_block() -> Vec<u8> {
    // :method GET (2), :scheme http (6), :path / (4), :authority "a" literal without indexing.
    vec![0x82, 0x86, 0x84, 0x01, 0x01, b'a']
}

/// A raw connection: preface and an empty SETTINGS sent.
pub fn raw_h2(addr: SocketAddr) -> TcpStream {
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
pub struct RawFrame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

/// Splits whole frames off the front of `bytes`.
pub fn split_frames(bytes: &mut Vec<u8>) -> Vec<RawFrame> {
    let mut frames = Vec::new();
    while bytes.len() >= 9 {
        let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
        if bytes.len() < 9 + len {
            break;
        }
        let stream = u32::from_be_bytes(bytes[5..9].try_into().unwrap()) & 0x7fff_ffff;
        frames.push(RawFrame {
            kind: bytes[3],
            flags: bytes[4],
            stream,
            payload: bytes[9..9 + len].to_vec(),
        });
        bytes.drain(..9 + len);
    }
    frames
}

/// Reads frames until one satisfies `done` (panics on a close, an error or 10 s first).
pub fn read_frames_until(
    stream: &mut TcpStream,
    done: impl Fn(&RawFrame) -> bool,
) -> Vec<RawFrame> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut bytes, mut frames) = (Vec::new(), Vec::new());
    let mut buf = [0u8; 16384];
    while Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => panic!("closed early; frames: {frames:?}"),
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(e) => panic!("{e}; frames: {frames:?}"),
        }
        frames.extend(split_frames(&mut bytes));
        if frames.iter().any(&done) {
            return frames;
        }
    }
    panic!("no awaited frame in 10 s: {frames:?}")
}

/// Reads frames until the server closes (EOF or reset: true) or 15 s pass (false).
pub fn frames_until_close(stream: &mut TcpStream) -> (Vec<RawFrame>, bool) {
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

pub fn goaway_error(goaway: &RawFrame) -> u32 {
    u32::from_be_bytes(goaway.payload[4..8].try_into().unwrap())
}

pub fn goaway_last_stream(goaway: &RawFrame) -> u32 {
    u32::from_be_bytes(goaway.payload[..4].try_into().unwrap()) & 0x7fff_ffff
}

/// Reads until the server closes, and returns the error code of its GOAWAY, if it sent one.
pub fn goaway_code(stream: &mut TcpStream) -> Option<u32> {
    let (frames, _) = frames_until_close(stream);
    frames
        .iter()
        .rev()
        .find(|f| f.kind == GOAWAY && f.payload.len() >= 8)
        .map(goaway_error)
}
