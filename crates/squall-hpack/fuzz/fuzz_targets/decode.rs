//! Fuzz target: arbitrary bytes as two header blocks on one connection.
//!
//! The first byte picks the header list limit, the second where the input splits into two
//! blocks, so the second block decodes against the table the first one left. Nothing may
//! panic, the decoder's invariants must hold after each block, no more than the limit may be
//! emitted, and every list that decodes must survive a round trip through our encoder and a
//! fresh decoder unchanged (sensitive flags included).
//!
//! (No `#![forbid(unsafe_code)]` here: `fuzz_target!` expands to a `#[no_mangle]` entry point,
//! which that lint counts against `unsafe_code`. This crate is outside the workspace and its tidy check.)
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use squall_hpack::{Decoder, Encoder, Field};

const LIMITS: [usize; 4] = [0, 256, 4096, 64 * 1024];

fuzz_target!(|data: &[u8]| {
    let [limit, split, rest @ ..] = data else {
        return;
    };
    let limit = LIMITS[usize::from(*limit) % LIMITS.len()];
    let split = usize::from(*split).min(rest.len());
    let mut decoder = Decoder::default();
    for block in [&rest[..split], &rest[split..]] {
        let mut fields = Vec::new();
        let result = decoder.decode(block, limit, |field| fields.push(field));
        decoder.check_invariants();
        assert!(fields.iter().map(Field::size).sum::<usize>() <= limit);
        match result {
            Ok(()) => round_trip(&fields),
            Err(error) if error.is_compression_error() => return,
            Err(_) => {}
        }
    }
});

fn round_trip(fields: &[Field]) {
    let mut encoder = Encoder::new();
    let mut block = BytesMut::new();
    encoder.encode(fields.iter().map(|f| (&f.name[..], &f.value[..], f.sensitive)), &mut block);
    encoder.check_invariants();
    let decoded = Decoder::default().decode_to_vec(&block, usize::MAX).expect("our own block");
    assert_eq!(decoded.len(), fields.len());
    for (sent, received) in fields.iter().zip(&decoded) {
        assert_eq!((&sent.name, &sent.value), (&received.name, &received.value));
        // The policy may add never-indexed (short cookies), never remove it.
        assert!(received.sensitive || !sent.sensitive);
    }
}
