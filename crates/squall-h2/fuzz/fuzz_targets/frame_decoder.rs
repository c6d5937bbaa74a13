//! Fuzz target: arbitrary bytes through the frame decoder, cut into pieces.
//!
//! The first byte picks the max frame size, the second the piece length. Nothing may panic;
//! a decoded frame never takes more than one frame's worth of bytes; after a stream error
//! the decoder moves on; the buffer never keeps a whole frame it could have decoded.
//!
//! (No `#![forbid(unsafe_code)]` here: `fuzz_target!` expands to a `#[no_mangle]` entry point,
//! which that lint counts against `unsafe_code`. This crate is outside the workspace and its tidy check.)
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use squall_h2::{FRAME_HEADER_BYTES, Frame, FrameDecoder};

const MAX_FRAME_SIZES: [u32; 3] = [16_384, 65_535, 16_777_215];

fuzz_target!(|data: &[u8]| {
    let [max, piece, rest @ ..] = data else {
        return;
    };
    let max = MAX_FRAME_SIZES[usize::from(*max) % MAX_FRAME_SIZES.len()];
    let piece = 1 + usize::from(*piece);
    let mut decoder = FrameDecoder::new(max);
    let mut buf = BytesMut::new();
    for chunk in rest.chunks(piece) {
        buf.extend_from_slice(chunk);
        loop {
            let before = buf.len();
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => check(&frame, before - buf.len(), max),
                Ok(None) => break,
                Err(error) if error.is_connection_error() => return,
                Err(_) => assert!(buf.len() < before, "stream error consumed nothing"),
            }
        }
        assert!(buf.len() < FRAME_HEADER_BYTES + max as usize);
    }
});

fn check(frame: &Frame, consumed: usize, max: u32) {
    assert!(consumed >= FRAME_HEADER_BYTES);
    assert!(consumed <= FRAME_HEADER_BYTES + max as usize);
    if let Frame::Data { data, flow_len, .. } = frame {
        assert!(data.len() <= *flow_len as usize);
    }
    assert!(frame.stream_id() <= 0x7fff_ffff);
}
