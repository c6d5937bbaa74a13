//! Fuzz target: arbitrary bytes as a QPACK encoder stream and field sections on one decoder.
//!
//! The first byte picks the table capacity and the blocked-streams limit, the second and
//! third where the input splits: encoder stream bytes, then sections, then more encoder
//! stream bytes, then the sections again (the blocked ones may now decode). Nothing may
//! panic, the decoder's invariants must hold after every call, no section may decode past
//! the size limit, and every section that decodes must survive a round trip through our
//! encoder and a fresh decoder unchanged (never-index bits included).
//!
//! (No `#![forbid(unsafe_code)]` here: `fuzz_target!` expands to a `#[no_mangle]` entry point,
//! which that lint counts against `unsafe_code`. This crate is outside the workspace and its tidy check.)
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use squall_h3::qpack::{Decoder, Encoder, EncoderConfig, Field, Section};

const CAPACITIES: [u64; 4] = [0, 64, 220, 4096];
const LIMIT: u64 = 8 * 1024;

fuzz_target!(|data: &[u8]| {
    let [config, a, b, rest @ ..] = data else {
        return;
    };
    let capacity = CAPACITIES[usize::from(config & 3)];
    let blocked = u64::from(config >> 2 & 3);
    let a = usize::from(*a).min(rest.len());
    let b = (a + usize::from(*b)).min(rest.len());
    let (stream1, rest) = rest.split_at(a);
    let (sections, stream2) = rest.split_at(b - a);
    let mut decoder = Decoder::new(capacity, blocked);
    if decoder.feed_encoder_stream(stream1).is_err() {
        decoder.check_invariants();
        return;
    }
    decoder.check_invariants();
    // Sections: a length byte each, then that many bytes.
    let mut list = Vec::new();
    let mut at = 0;
    while at < sections.len() {
        let len = usize::from(sections[at]).min(sections.len() - at - 1);
        list.push(Bytes::copy_from_slice(&sections[at + 1..at + 1 + len]));
        at += 1 + len;
    }
    for pass in 0..2 {
        for (i, section) in list.iter().enumerate() {
            match decoder.decode_section(i as u64 * 4, section, LIMIT) {
                Ok(Section::Fields(fields)) => {
                    assert!(fields.iter().map(|f| f.size() as u64).sum::<u64>() <= LIMIT);
                    round_trip(&fields);
                }
                Ok(Section::Blocked) => {}
                Err(error) if error.is_connection_error() => {
                    decoder.check_invariants();
                    return;
                }
                Err(_) => {}
            }
            decoder.check_invariants();
        }
        if pass == 0 && decoder.feed_encoder_stream(stream2).is_err() {
            return;
        }
        decoder.check_invariants();
        let _ = decoder.take_decoder_stream();
    }
});

fn round_trip(fields: &[Field]) {
    let config = EncoderConfig {
        table_bytes_max: 4096,
        ..EncoderConfig::default()
    };
    let mut encoder = Encoder::new(config);
    encoder.apply_peer_settings(4096, 1);
    let mut block = BytesMut::new();
    encoder.encode_section(
        0,
        fields
            .iter()
            .map(|f| (&f.name[..], &f.value[..], f.sensitive)),
        &mut block,
    );
    encoder.check_invariants();
    let mut decoder = Decoder::new(4096, 1);
    if let Some(stream) = encoder.take_encoder_stream() {
        decoder
            .feed_encoder_stream(&stream)
            .expect("our own encoder stream");
    }
    let Ok(Section::Fields(decoded)) = decoder.decode_section(0, &block.freeze(), u64::MAX) else {
        panic!("our own section");
    };
    assert_eq!(decoded.len(), fields.len());
    for (sent, received) in fields.iter().zip(&decoded) {
        assert_eq!((&sent.name, &sent.value), (&received.name, &received.value));
        assert!(received.sensitive || !sent.sensitive);
    }
}
