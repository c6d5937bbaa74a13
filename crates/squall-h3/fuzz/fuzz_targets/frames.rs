//! Fuzz target: arbitrary bytes as one HTTP/3 stream, whole and in two pieces.
//!
//! The first byte picks the stream kind (request or control) and the payload limit, the
//! second where the input splits. Nothing may panic; the frames and the way the stream ends
//! must be the same whole and split (DATA pieces joined); no buffered frame may exceed the
//! limit; and every frame decoded must encode back to bytes that decode to it again.
//!
//! (No `#![forbid(unsafe_code)]` here: `fuzz_target!` expands to a `#[no_mangle]` entry point,
//! which that lint counts against `unsafe_code`. This crate is outside the workspace and its tidy check.)
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use squall_h3::{Frame, FrameDecoder, FrameError, StreamKind};

const LIMITS: [u64; 4] = [0, 16, 1024, 64 * 1024];

fuzz_target!(|data: &[u8]| {
    let [config, split, rest @ ..] = data else {
        return;
    };
    let kind = if config & 1 == 0 {
        StreamKind::Request
    } else {
        StreamKind::Control
    };
    let limit = LIMITS[usize::from(config >> 1) % LIMITS.len()];
    let split = usize::from(*split).min(rest.len());
    let whole = run(kind, limit, &[rest]);
    let (a, b) = rest.split_at(split);
    assert_eq!(run(kind, limit, &[a, b]), whole);
    for frame in &whole.0 {
        if matches!(frame, Frame::Data(_)) {
            continue;
        }
        let mut bytes = BytesMut::new();
        frame.encode(&mut bytes);
        assert!(bytes.len() as u64 <= limit + 16);
        let mut decoder = FrameDecoder::new(StreamKind::Request, u64::MAX);
        if let Frame::Settings(_) | Frame::GoAway(_) | Frame::MaxPushId(_) | Frame::CancelPush(_) =
            frame
        {
            decoder = FrameDecoder::new(StreamKind::Control, u64::MAX);
            if !matches!(frame, Frame::Settings(_)) {
                let mut settings = Bytes::from_static(&[0x04, 0x00]);
                decoder.decode(&mut settings).unwrap();
            }
        }
        let mut input = bytes.freeze();
        assert_eq!(decoder.decode(&mut input).unwrap().as_ref(), Some(frame));
    }
});

/// The frames (consecutive DATA pieces joined) and how the stream ended.
fn run(kind: StreamKind, limit: u64, chunks: &[&[u8]]) -> (Vec<Frame>, Result<(), FrameError>) {
    let mut decoder = FrameDecoder::new(kind, limit);
    let mut frames = Vec::new();
    let mut data_open = false;
    for chunk in chunks {
        let mut input = Bytes::copy_from_slice(chunk);
        loop {
            match decoder.decode(&mut input) {
                Ok(Some(Frame::Data(piece))) => {
                    match frames.last_mut() {
                        Some(Frame::Data(joined)) if data_open => {
                            *joined = [&joined[..], &piece[..]].concat().into();
                        }
                        _ => frames.push(Frame::Data(piece)),
                    }
                    data_open = !decoder.is_between_frames();
                }
                Ok(Some(frame)) => {
                    data_open = false;
                    frames.push(frame);
                }
                Ok(None) => break,
                Err(error) => return (frames, Err(error)),
            }
        }
    }
    let end = decoder.finish();
    (frames, end)
}
