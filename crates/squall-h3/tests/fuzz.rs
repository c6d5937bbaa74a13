//! Bounded fuzz-style runs, in every `cargo test`: random and mutated bytes through every
//! decoder, in random pieces. Nothing may panic, invariants hold after every call, and the
//! runs count what they reached so a generator that stops reaching the parsers fails.

mod common;

use bytes::{Bytes, BytesMut};
use common::{Rng, feed};
use squall_h3::qpack::{Decoder, Encoder, EncoderConfig, Section};
use squall_h3::{Frame, FrameDecoder, Settings, StreamKind};

/// A valid stream to mutate: frames of every kind for each stream kind.
fn seed_stream(kind: StreamKind) -> Vec<u8> {
    let mut out = BytesMut::new();
    let frames = match kind {
        StreamKind::Control => vec![
            Frame::Settings(Settings {
                qpack_max_table_capacity: 4096,
                qpack_blocked_streams: 8,
                max_field_section_size: Some(1 << 20),
                enable_connect_protocol: true,
                h3_datagram: true,
            }),
            Frame::MaxPushId(8),
            Frame::CancelPush(1),
            Frame::GoAway(400),
        ],
        StreamKind::Request => vec![
            Frame::Headers(Bytes::from_static(b"\x00\x00\xd1\xd7\x51\x01/")),
            Frame::Data(Bytes::from_static(b"body")),
            Frame::Data(Bytes::new()),
            Frame::Headers(Bytes::from_static(b"\x00\x00")),
        ],
    };
    for frame in frames {
        frame.encode(&mut out);
    }
    out.to_vec()
}

fn mutate(rng: &mut Rng, mut input: Vec<u8>) -> Vec<u8> {
    for _ in 0..1 + rng.below(4) {
        if input.is_empty() || rng.percent(10) {
            let len = 1 + rng.below(8);
            input.extend(rng.bytes(len));
            continue;
        }
        let at = rng.below(input.len());
        match rng.below(4) {
            0 => input[at] = rng.next() as u8,
            1 => input[at] ^= 1 << rng.below(8),
            2 => {
                input.remove(at);
            }
            _ => input.truncate(at),
        }
    }
    input
}

#[test]
fn frame_decoders_survive_garbage_in_pieces() {
    let mut rng = Rng::new(0x9114);
    let (mut frames, mut errors, mut clean) = (0, 0, 0);
    for round in 0..4000 {
        let kind = if round % 2 == 0 {
            StreamKind::Control
        } else {
            StreamKind::Request
        };
        let input = if rng.percent(20) {
            let len = rng.below(64);
            rng.bytes(len)
        } else {
            mutate(&mut rng, seed_stream(kind))
        };
        let mut pieces = Vec::new();
        let mut rest = &input[..];
        while !rest.is_empty() {
            let (piece, tail) = rest.split_at(1 + rng.below(rest.len()));
            pieces.push(piece);
            rest = tail;
        }
        let outcome = feed(FrameDecoder::new(kind, 256), &pieces, true);
        // The same bytes whole give the same frames and end.
        assert_eq!(feed(FrameDecoder::new(kind, 256), &[&input], true), outcome);
        frames += outcome.frames.len();
        match outcome.end {
            Ok(()) => clean += 1,
            Err(_) => errors += 1,
        }
    }
    assert!(
        frames > 4000 && errors > 1000 && clean > 200,
        "{frames} {errors} {clean}"
    );
}

#[test]
fn qpack_decoders_survive_garbage() {
    let mut rng = Rng::new(0x9204);
    let (mut fields, mut blocked, mut errors) = (0, 0, 0);
    for _ in 0..3000 {
        // A valid start: an encoder with a table, a few sections, its encoder stream.
        let config = EncoderConfig {
            table_bytes_max: 512,
            ..EncoderConfig::default()
        };
        let mut encoder = Encoder::new(config);
        encoder.apply_peer_settings(512, 4);
        let mut sections = Vec::new();
        for stream in 0..3u64 {
            let mut out = BytesMut::new();
            let list = [
                (&b":status"[..], &b"200"[..], false),
                (b"x-name", b"value", false),
                (b"content-type", b"text/x", rng.percent(20)),
            ];
            encoder.encode_section(stream * 4, list, &mut out);
            sections.push(out.to_vec());
        }
        let stream = encoder
            .take_encoder_stream()
            .map(|b| b.to_vec())
            .unwrap_or_default();
        let stream = if rng.percent(30) {
            mutate(&mut rng, stream)
        } else {
            stream
        };
        let mut decoder = Decoder::new(512, 2);
        let cut = rng.below(stream.len() + 1);
        for piece in [&stream[..cut], &stream[cut..]] {
            if decoder.feed_encoder_stream(piece).is_err() {
                errors += 1;
            }
            decoder.check_invariants();
        }
        for (i, section) in sections.into_iter().enumerate() {
            let section = if rng.percent(30) {
                mutate(&mut rng, section)
            } else {
                section
            };
            let section = Bytes::from(section);
            match decoder.decode_section(i as u64 * 4, &section, 4096) {
                Ok(Section::Fields(list)) => fields += list.len(),
                Ok(Section::Blocked) => blocked += 1,
                Err(_) => errors += 1,
            }
            decoder.check_invariants();
        }
        // And garbage on the decoder stream of an encoder.
        let len = rng.below(16);
        let garbage = rng.bytes(len);
        let _ = encoder.feed_decoder_stream(&garbage);
        encoder.check_invariants();
    }
    assert!(
        fields > 1000 && blocked > 100 && errors > 1000,
        "{fields} {blocked} {errors}"
    );
}
