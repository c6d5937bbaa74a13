//! Test helpers: feed encoded bytes to a decoder at every chunk split.

#![allow(dead_code)]

use bytes::{BufMut, BytesMut};
use squall_h2::{Frame, FrameDecoder, FrameError};

/// What a run of the decoder over some input gave: the frames, then possibly an error.
#[derive(Debug, PartialEq)]
pub struct Outcome {
    pub frames: Vec<Frame>,
    pub error: Option<FrameError>,
    /// Bytes left in the buffer after the last call.
    pub left: usize,
}

/// Feeds `pieces` one at a time, decoding as far as possible after each, stopping at the
/// first error.
pub fn run<'a>(max: u32, pieces: impl IntoIterator<Item = &'a [u8]>) -> Outcome {
    let mut decoder = FrameDecoder::new(max);
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    for piece in pieces {
        buf.extend_from_slice(piece);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break,
                Err(error) => {
                    return Outcome {
                        frames,
                        error: Some(error),
                        left: buf.len(),
                    };
                }
            }
        }
    }
    Outcome {
        frames,
        error: None,
        left: buf.len(),
    }
}

/// Runs `input` whole, in pieces of 1, 2, 3, ... bytes, and split once at every point;
/// asserts every run gives the same outcome, and returns it.
pub fn run_all_splits(max: u32, input: &[u8]) -> Outcome {
    let whole = run(max, [input]);
    for size in 1..=input.len() {
        assert_eq!(run(max, input.chunks(size)), whole, "chunk size {size}");
    }
    for at in 0..=input.len() {
        let (a, b) = input.split_at(at);
        assert_eq!(run(max, [a, b]), whole, "split at {at}");
    }
    whole
}

/// Asserts `input` decodes to exactly `expected` at every split, leaving nothing.
pub fn assert_frames(input: &[u8], expected: &[Frame]) {
    let outcome = run_all_splits(16_384, input);
    assert_eq!(outcome.error, None);
    assert_eq!(outcome.frames, expected);
    assert_eq!(outcome.left, 0);
}

/// Asserts `input` gives `expected` at every split, after no frame, and returns how many
/// bytes the error left in the buffer.
pub fn assert_error(input: &[u8], expected: FrameError) -> usize {
    let outcome = run_all_splits(16_384, input);
    assert_eq!(outcome.frames, []);
    let error = outcome.error.expect("an error");
    assert_eq!(
        (error.code, error.scope),
        (expected.code, expected.scope),
        "{error}"
    );
    outcome.left
}

/// A raw frame, for layouts the encoders do not produce (padding, bad lengths, reserved bit).
pub fn raw(ty: u8, flags: u8, stream_id: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_uint(payload.len() as u64, 3);
    out.put_u8(ty);
    out.put_u8(flags);
    out.put_u32(stream_id);
    out.put_slice(payload);
    out.to_vec()
}
