//! Test helpers: a fixed-seed PRNG, hex as the RFCs print it, and feeding a frame decoder.
#![allow(dead_code)] // each test binary uses its own subset

use bytes::Bytes;
use squall_h3::{Frame, FrameDecoder, FrameError};

/// xorshift64: deterministic, so a failure reproduces from its seed and round.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform-ish in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn percent(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// Parses hex as the RFCs print it ("0381 10 11"), whitespace ignored.
pub fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

/// What a frame decoder made of a stream: its frames, with consecutive DATA pieces joined
/// (where the pieces break depends on the split), then how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub frames: Vec<Frame>,
    pub end: Result<(), FrameError>,
}

/// Feeds `chunks` to `decoder` in order, then `finish()` if `fin`.
pub fn feed(mut decoder: FrameDecoder, chunks: &[&[u8]], fin: bool) -> Outcome {
    let mut frames: Vec<Frame> = Vec::new();
    // DATA pieces of one frame are joined; `open` says the last DATA frame is still arriving.
    let mut data_frame_left = false;
    for chunk in chunks {
        let mut input = Bytes::copy_from_slice(chunk);
        loop {
            match decoder.decode(&mut input) {
                Ok(Some(Frame::Data(piece))) => {
                    match frames.last_mut() {
                        Some(Frame::Data(joined)) if data_frame_left => {
                            let mut all = joined.to_vec();
                            all.extend_from_slice(&piece);
                            *joined = Bytes::from(all);
                        }
                        _ => frames.push(Frame::Data(piece)),
                    }
                    data_frame_left = !decoder.is_between_frames();
                }
                Ok(Some(frame)) => {
                    data_frame_left = false;
                    frames.push(frame);
                }
                Ok(None) => {
                    assert!(input.is_empty(), "None with input left");
                    break;
                }
                Err(error) => {
                    return Outcome {
                        frames,
                        end: Err(error),
                    };
                }
            }
        }
    }
    let end = if fin { decoder.finish() } else { Ok(()) };
    Outcome { frames, end }
}

/// The outcome of `input` whole, checked equal to its outcome split at every boundary into
/// two pieces and into pieces of one byte.
pub fn feed_every_split(make: impl Fn() -> FrameDecoder, input: &[u8], fin: bool) -> Outcome {
    let whole = feed(make(), &[input], fin);
    for cut in 0..=input.len() {
        let (a, b) = input.split_at(cut);
        assert_eq!(feed(make(), &[a, b], fin), whole, "split at {cut}");
    }
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(feed(make(), &bytes, fin), whole, "one byte at a time");
    whole
}
