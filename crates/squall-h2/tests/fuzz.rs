//! Deterministic fuzzing of the decoder: random and mutated bytes, fed in random pieces,
//! never panic and never leave the decoder unable to make progress (STYLE §5, §10).

mod common;

use bytes::BytesMut;
use common::raw;
use squall_h2::{FRAME_HEADER_BYTES, Frame, FrameDecoder};

/// xorshift64*: a fixed seed gives the same run on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Decodes `input` in random pieces; stops at a connection error as a connection would.
fn feed(rng: &mut Rng, input: &[u8], max: u32) {
    let mut decoder = FrameDecoder::new(max);
    let mut buf = BytesMut::new();
    let mut rest = input;
    while !rest.is_empty() {
        let (piece, tail) = rest.split_at(1 + rng.below(rest.len().min(64)));
        rest = tail;
        buf.extend_from_slice(piece);
        loop {
            let before = buf.len();
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => check(&frame, before - buf.len(), max),
                Ok(None) => break,
                Err(e) if e.is_connection_error() => return,
                Err(_) => assert!(buf.len() < before, "stream error consumed nothing"),
            }
        }
        // Never holds a whole frame it could have decoded, nor more than one frame's worth.
        assert!(buf.len() < FRAME_HEADER_BYTES + max as usize);
    }
}

fn check(frame: &Frame, consumed: usize, max: u32) {
    assert!(consumed >= FRAME_HEADER_BYTES);
    assert!(consumed <= FRAME_HEADER_BYTES + max as usize);
    if let Frame::Data { data, flow_len, .. } = frame {
        assert!(data.len() <= *flow_len as usize);
        assert_eq!(*flow_len as usize, consumed - FRAME_HEADER_BYTES);
    }
    assert!(frame.stream_id() <= 0x7fff_ffff);
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..3_000 {
        let len = rng.below(600);
        let input: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        feed(&mut rng, &input, 16_384);
    }
}

#[test]
fn random_small_frames_never_panic() {
    // Random bytes rarely form a header with a small length; build plausible frames instead:
    // every type 0..=10, random flags, stream ids near 0, lengths 0..24.
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for _ in 0..3_000 {
        let mut input = Vec::new();
        for _ in 0..1 + rng.below(8) {
            let payload: Vec<u8> = (0..rng.below(24)).map(|_| rng.next() as u8).collect();
            let stream_id = [0, 1, 3, 0x8000_0000, rng.next() as u32][rng.below(5)];
            input.extend(raw(
                rng.below(11) as u8,
                rng.next() as u8,
                stream_id,
                &payload,
            ));
        }
        // Sometimes corrupt one byte, header included.
        if rng.below(2) == 0 {
            let at = rng.below(input.len());
            input[at] = rng.next() as u8;
        }
        feed(&mut rng, &input, 16_384);
    }
}
