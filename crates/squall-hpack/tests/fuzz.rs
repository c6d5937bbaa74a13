//! Fuzz-style tests, seeded and bounded so they run in `cargo test`: random bytes never make
//! the decoder panic or break its invariants, and random lists round-trip through our encoder
//! and decoder with the header list limit enforced exactly. (`fuzz/` holds the same decoder
//! target for `cargo fuzz`, for longer runs.)

mod common;

use common::{List, Rng, UNLIMITED, decode, encode, random_list};
use squall_hpack::{DecodeError, Decoder, Encoder, EncoderConfig, Field, Indexing};

const RANDOM_BLOCKS: usize = 100_000;

/// A decoder whose table holds a few entries, so random indices sometimes hit.
fn warmed_up() -> Decoder {
    let mut encoder = Encoder::with_config(EncoderConfig {
        indexing: Indexing::All,
        ..EncoderConfig::default()
    });
    let mut decoder = Decoder::default();
    let list = common::fields(&[
        ("a", "1"),
        ("user-agent", "curl/8"),
        ("x-long", &"z".repeat(300)),
    ]);
    decode(&mut decoder, &encode(&mut encoder, &list), UNLIMITED).unwrap();
    decoder
}

fn random_block(rng: &mut Rng) -> Vec<u8> {
    let len = rng.below(48);
    let mut block = rng.bytes(len);
    // Bias toward the interesting first bytes: size updates, long integers, Huffman flags.
    if !block.is_empty() && rng.percent(30) {
        block[0] = *rng.pick(&[0x20, 0x3f, 0x7f, 0xff, 0x40, 0x00, 0x10, 0xbe]);
    }
    block
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng::new(42);
    let warm = warmed_up();
    let (mut ok, mut too_large, mut refused) = (0, 0, 0);
    for _ in 0..RANDOM_BLOCKS {
        let block = random_block(&mut rng);
        let limit = *rng.pick(&[0, 100, 4096, UNLIMITED]);
        let mut decoder = if rng.percent(50) {
            warm.clone()
        } else {
            Decoder::default()
        };
        let mut emitted = Vec::<Field>::new();
        let result = decoder.decode(&block, limit, |field| emitted.push(field));
        decoder.check_invariants();
        let emitted_bytes: usize = emitted.iter().map(Field::size).sum();
        assert!(emitted_bytes <= limit, "{block:02x?}");
        match result {
            Ok(()) => ok += 1,
            Err(DecodeError::HeaderListTooLarge { .. }) => {
                too_large += 1;
                // Still usable.
                assert!(
                    decoder.decode_to_vec(&[0x82], UNLIMITED).is_ok(),
                    "{block:02x?}"
                );
            }
            Err(error) => {
                refused += 1;
                assert!(error.is_compression_error());
                // Poisoned: the same error again.
                assert_eq!(decoder.decode_to_vec(&[0x82], UNLIMITED), Err(error));
            }
        }
    }
    eprintln!("random blocks: {ok} accepted, {too_large} over the limit, {refused} refused");
    assert!(ok > 0 && too_large > 0 && refused > 0);
}

fn list_size(list: &List) -> usize {
    list.iter().map(|(n, v, _)| n.len() + v.len() + 32).sum()
}

/// Any list, any limit: exactly the lists that fit are delivered, and whatever the outcome the
/// decoder's table stays equal to the encoder's, so the connection goes on.
#[test]
fn random_lists_round_trip_with_the_limit_enforced_exactly() {
    for seed in 1..=200u64 {
        let mut rng = Rng::new(seed);
        let mut encoder = Encoder::with_config(EncoderConfig {
            indexing: *rng.pick(&[Indexing::Selective, Indexing::All]),
            huffman: rng.percent(50),
            ..EncoderConfig::default()
        });
        let mut decoder = Decoder::default();
        for block_number in 0..30 {
            if rng.percent(5) {
                let size = *rng.pick(&[0, 512, 4096]);
                encoder.set_max_table_size(size);
                decoder.set_max_table_size_limit(size);
            }
            let list = random_list(&mut rng);
            let size = list_size(&list);
            let limit = if rng.percent(50) {
                size
            } else {
                rng.below(size + 1)
            };
            let block = encode(&mut encoder, &list);
            let result = decode(&mut decoder, &block, limit);
            let context = format!("seed {seed} block {block_number} size {size} limit {limit}");
            if size <= limit {
                let decoded = result.expect(&context);
                let names: Vec<_> = decoded.iter().map(|f| (&f.0, &f.1)).collect();
                let sent: Vec<_> = list.iter().map(|f| (&f.0, &f.1)).collect();
                assert_eq!(names, sent, "{context}");
            } else {
                assert_eq!(
                    result,
                    Err(DecodeError::HeaderListTooLarge { limit }),
                    "{context}"
                );
            }
            assert_eq!(
                common::table_of_decoder(&decoder),
                common::table_of_encoder(&encoder)
            );
        }
    }
}
