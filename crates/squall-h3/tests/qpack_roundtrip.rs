//! Our encoder against our decoder: round trips with and without a dynamic table, and a
//! seeded random walk of a connection (sections, both QPACK streams delivered in random
//! pieces and order, cancellations) with every invariant checked after every step.

mod common;

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use common::Rng;
use squall_h3::qpack::{Decoder, Encoder, EncoderConfig, Field, Indexing, Section};

type List = Vec<(Vec<u8>, Vec<u8>, bool)>;

fn encode(encoder: &mut Encoder, stream_id: u64, list: &List) -> Bytes {
    let mut out = BytesMut::new();
    encoder.encode_section(
        stream_id,
        list.iter().map(|(n, v, s)| (&n[..], &v[..], *s)),
        &mut out,
    );
    encoder.check_invariants();
    out.freeze()
}

fn assert_same(sent: &List, received: &[Field]) {
    assert_eq!(sent.len(), received.len());
    for ((name, value, sensitive), field) in sent.iter().zip(received) {
        assert_eq!((&name[..], &value[..]), (&field.name[..], &field.value[..]));
        // The policy may add the N bit (short cookies, authorization), never drop it.
        assert!(field.sensitive || !sensitive);
    }
}

fn request() -> List {
    [
        (":method", "GET", false),
        (":scheme", "https", false),
        (":authority", "www.example.com", false),
        (":path", "/assets/app.js?v=1", false),
        ("user-agent", "test/1.0", false),
        ("accept-encoding", "gzip, deflate, br", false),
        ("x-custom", "a value", false),
        ("authorization", "Bearer secret", false),
        ("cookie", "id=1", true),
        ("x-empty", "", false),
    ]
    .iter()
    .map(|(n, v, s)| (n.as_bytes().to_vec(), v.as_bytes().to_vec(), *s))
    .collect()
}

#[test]
fn without_a_dynamic_table_sections_stand_alone() {
    let mut encoder = Encoder::default();
    encoder.apply_peer_settings(4096, 100);
    let section = encode(&mut encoder, 0, &request());
    assert_eq!(
        encoder.take_encoder_stream(),
        None,
        "no table: nothing inserted"
    );
    assert_eq!(&section[..2], [0, 0], "Required Insert Count 0, Base 0");
    let mut decoder = Decoder::new(0, 0);
    let Ok(Section::Fields(fields)) = decoder.decode_section(0, &section, u64::MAX) else {
        panic!();
    };
    assert_same(&request(), &fields);
    assert!(fields[7].sensitive, "authorization is never indexed");
    assert!(fields[8].sensitive);
    assert_eq!(decoder.take_decoder_stream(), None);
}

#[test]
fn with_a_dynamic_table_and_blocking_the_first_request_already_shrinks() {
    let config = EncoderConfig {
        table_bytes_max: 4096,
        ..EncoderConfig::default()
    };
    let mut encoder = Encoder::new(config);
    encoder.apply_peer_settings(4096, 16);
    let mut decoder = Decoder::new(4096, 16);
    let plain = encode(&mut Encoder::default(), 0, &request()).len();
    let first = encode(&mut encoder, 0, &request());
    // It references its own insertions, post-base.
    assert!(first.len() < plain * 2 / 3, "{} vs {plain}", first.len());
    // The section arrives before the encoder stream: blocked, then unblocked.
    assert_eq!(
        decoder.decode_section(0, &first, u64::MAX),
        Ok(Section::Blocked)
    );
    let unblocked = decoder
        .feed_encoder_stream(&encoder.take_encoder_stream().unwrap())
        .unwrap();
    assert_eq!(unblocked, [0]);
    let Ok(Section::Fields(fields)) = decoder.decode_section(0, &first, u64::MAX) else {
        panic!();
    };
    assert_same(&request(), &fields);
    encoder
        .feed_decoder_stream(&decoder.take_decoder_stream().unwrap())
        .unwrap();
    assert_eq!(encoder.known_received_count(), encoder.insert_count());
    assert_eq!(encoder.blocked_streams(), 0);
    // The same request again references acknowledged entries only: never blocked.
    let second = encode(&mut encoder, 4, &request());
    assert!(
        second.len() <= first.len(),
        "{} vs {}",
        second.len(),
        first.len()
    );
    assert_eq!(encoder.take_encoder_stream(), None);
    let Ok(Section::Fields(fields)) = decoder.decode_section(4, &second, u64::MAX) else {
        panic!();
    };
    assert_same(&request(), &fields);
    decoder.check_invariants();
}

#[test]
fn without_blocked_streams_new_entries_wait_for_their_acknowledgment() {
    let config = EncoderConfig {
        table_bytes_max: 4096,
        indexing: Indexing::All,
        ..EncoderConfig::default()
    };
    let mut encoder = Encoder::new(config);
    encoder.apply_peer_settings(4096, 0);
    let mut decoder = Decoder::new(4096, 0);
    let first = encode(&mut encoder, 0, &request());
    // Inserted, but referenced by nothing yet: the section decodes without the stream.
    let Ok(Section::Fields(fields)) = decoder.decode_section(0, &first, u64::MAX) else {
        panic!("never blocked");
    };
    assert_same(&request(), &fields);
    assert!(encoder.insert_count() > 0);
    decoder
        .feed_encoder_stream(&encoder.take_encoder_stream().unwrap())
        .unwrap();
    encoder
        .feed_decoder_stream(&decoder.take_decoder_stream().unwrap())
        .unwrap();
    let second = encode(&mut encoder, 4, &request());
    assert!(second.len() < first.len() / 2);
    let Ok(Section::Fields(fields)) = decoder.decode_section(4, &second, u64::MAX) else {
        panic!();
    };
    assert_same(&request(), &fields);
}

fn random_list(rng: &mut Rng) -> List {
    const NAMES: &[&str] = &[
        ":status",
        ":path",
        "content-type",
        "cache-control",
        "x-custom",
        "x-trace",
        "server",
        "cookie",
        "set-cookie",
        "vary",
    ];
    const VALUES: &[&str] = &["200", "404", "text/html", "no-cache", "a", "bb", "/", ""];
    (0..rng.below(8))
        .map(|_| {
            let name = rng.pick(NAMES).as_bytes().to_vec();
            let value = if rng.percent(70) {
                rng.pick(VALUES).as_bytes().to_vec()
            } else {
                let long = rng.percent(10);
                let len = rng.below(if long { 200 } else { 12 });
                (0..len).map(|_| b'a' + rng.below(26) as u8).collect()
            };
            (name, value, rng.percent(5))
        })
        .collect()
}

/// What a walk reached, so that a generator that stops exercising the table fails the test.
#[derive(Debug, Default)]
struct Tally {
    sections: u64,
    blocked: u64,
    unblocked: u64,
    cancelled: u64,
    inserts: u64,
    evictions: u64,
}

/// One connection's worth of random steps.
fn walk(seed: u64, steps: usize, tally: &mut Tally) {
    let mut rng = Rng::new(seed);
    let capacity = *rng.pick(&[64u64, 220, 512, 4096]);
    let blocked_max = *rng.pick(&[0u64, 1, 3, 100]);
    let config = EncoderConfig {
        table_bytes_max: capacity,
        indexing: *rng.pick(&[Indexing::All, Indexing::Selective]),
        huffman: rng.percent(50),
    };
    let mut encoder = Encoder::new(config);
    encoder.apply_peer_settings(capacity, blocked_max);
    let mut decoder = Decoder::new(capacity, blocked_max);
    // Bytes in flight on each QPACK stream, and sections not yet decoded.
    let mut to_decoder: VecDeque<u8> = VecDeque::new();
    let mut to_encoder: VecDeque<u8> = VecDeque::new();
    let mut sections: Vec<(u64, Bytes, List)> = Vec::new();
    let mut next_stream = 0;
    let decode = |decoder: &mut Decoder, id: u64, section: &Bytes, list: &List| {
        decoder.decode_section(id, section, u64::MAX).inspect(|s| {
            if let Section::Fields(fields) = s {
                assert_same(list, fields);
            }
        })
    };
    for _ in 0..steps {
        match rng.below(6) {
            0 | 1 => {
                let list = random_list(&mut rng);
                let before = encoder.insert_count();
                let section = encode(&mut encoder, next_stream, &list);
                tally.inserts += encoder.insert_count() - before;
                sections.push((next_stream, section, list));
                next_stream += 4;
                if let Some(bytes) = encoder.take_encoder_stream() {
                    to_decoder.extend(bytes);
                }
            }
            2 => {
                let n = rng.below(to_decoder.len() + 1);
                let piece: Vec<u8> = to_decoder.drain(..n).collect();
                let inserts = decoder.insert_count();
                let dropped_before = decoder.dynamic_table().next().map_or(inserts, |e| e.0);
                for id in decoder.feed_encoder_stream(&piece).unwrap() {
                    tally.unblocked += 1;
                    let at = sections.iter().position(|s| s.0 == id).unwrap();
                    let (id, section, list) = sections.remove(at);
                    let result = decode(&mut decoder, id, &section, &list).unwrap();
                    assert!(matches!(result, Section::Fields(_)));
                }
                let dropped_after = decoder
                    .dynamic_table()
                    .next()
                    .map_or(decoder.insert_count(), |e| e.0);
                tally.evictions += dropped_after.saturating_sub(dropped_before);
            }
            3 if !sections.is_empty() => {
                let at = rng.below(sections.len());
                let (id, section, list) = sections[at].clone();
                tally.sections += 1;
                match decode(&mut decoder, id, &section, &list).unwrap() {
                    Section::Fields(_) => {
                        sections.remove(at);
                    }
                    Section::Blocked => tally.blocked += 1,
                }
            }
            4 => {
                if let Some(bytes) = decoder.take_decoder_stream() {
                    to_encoder.extend(bytes);
                }
                let n = rng.below(to_encoder.len() + 1);
                let piece: Vec<u8> = to_encoder.drain(..n).collect();
                encoder.feed_decoder_stream(&piece).unwrap();
            }
            5 if !sections.is_empty() && rng.percent(20) => {
                let at = rng.below(sections.len());
                let (id, _, _) = sections.remove(at);
                decoder.cancel_stream(id);
                tally.cancelled += 1;
            }
            _ => {}
        }
        encoder.check_invariants();
        decoder.check_invariants();
    }
    // Deliver everything: every section decodes, and the encoder learns of every insertion.
    decoder
        .feed_encoder_stream(&to_decoder.drain(..).collect::<Vec<_>>())
        .unwrap();
    for (id, section, list) in sections.drain(..) {
        let result = decode(&mut decoder, id, &section, &list).unwrap();
        assert!(matches!(result, Section::Fields(_)), "seed {seed}");
    }
    to_encoder.extend(decoder.take_decoder_stream().unwrap_or_default());
    encoder
        .feed_decoder_stream(&to_encoder.drain(..).collect::<Vec<_>>())
        .unwrap();
    encoder.check_invariants();
    decoder.check_invariants();
    assert_eq!(
        encoder.known_received_count(),
        encoder.insert_count(),
        "seed {seed}"
    );
    assert_eq!(encoder.blocked_streams(), 0);
    assert_eq!(
        encoder.table_size(),
        decoder.table_size(),
        "the tables agree"
    );
}

#[test]
fn random_walks_keep_both_tables_in_step() {
    let mut tally = Tally::default();
    for seed in 1..=60 {
        walk(seed, 400, &mut tally);
    }
    // Every path was taken, many times.
    assert!(tally.sections > 1000, "{tally:?}");
    assert!(tally.blocked > 50, "{tally:?}");
    assert!(tally.unblocked > 50, "{tally:?}");
    assert!(tally.cancelled > 20, "{tally:?}");
    assert!(tally.inserts > 1000, "{tally:?}");
    assert!(tally.evictions > 100, "{tally:?}");
}
