//! Every way a block can be refused (RFC 7541 §4.2, §5.1, §5.2, §6, and the header list
//! limit of RFC 9113 §6.5.2), and what the decoder is good for afterwards.

mod common;

use common::{List, Rng, UNLIMITED, decode, encode, fields, int, random_list, raw_string};
use squall_hpack::{DecodeError, Decoder, Encoder, EncoderConfig, Field, Indexing};

fn decode_fresh(block: &[u8]) -> Result<List, DecodeError> {
    decode(&mut Decoder::default(), block, UNLIMITED)
}

fn concat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn integer_overflow() {
    // An indexed field whose index needs more than 32 bits.
    let block = concat(&[&[0xff], &[0xff; 5], &[0x7f]]);
    assert_eq!(decode_fresh(&block), Err(DecodeError::IntegerOverflow));
    // A string length of 2^32.
    let block = concat(&[&[0x00], &int(1 << 32, 7, 0)]);
    assert_eq!(decode_fresh(&block), Err(DecodeError::IntegerOverflow));
    // A size update with a sixth continuation byte, even of zeros.
    let block = [0x3f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00];
    assert_eq!(decode_fresh(&block), Err(DecodeError::IntegerOverflow));
}

#[test]
fn index_zero_and_past_the_table() {
    // RFC 7541 §6.1: index 0 is an error.
    assert_eq!(decode_fresh(&[0x80]), Err(DecodeError::InvalidIndex(0)));
    // 62 is the first dynamic entry, and the table is empty.
    assert_eq!(decode_fresh(&[0xbe]), Err(DecodeError::InvalidIndex(62)));
    // A literal naming a dynamic entry that does not exist, in each literal representation.
    for (flags, prefix_bits) in [(0x40, 6), (0x00, 4), (0x10, 4)] {
        let block = concat(&[&int(62, prefix_bits, flags), &raw_string(b"v")]);
        assert_eq!(
            decode_fresh(&block),
            Err(DecodeError::InvalidIndex(62)),
            "{flags:#x}"
        );
    }
    // With one entry, 62 is valid and 63 is not.
    let mut decoder = Decoder::default();
    let insert = concat(&[&[0x40], &raw_string(b"k"), &raw_string(b"v")]);
    decode(&mut decoder, &insert, UNLIMITED).unwrap();
    assert_eq!(
        decode(&mut decoder, &[0xbe], UNLIMITED).unwrap(),
        fields(&[("k", "v")])
    );
    assert_eq!(
        decode(&mut decoder, &[0xbf], UNLIMITED),
        Err(DecodeError::InvalidIndex(63))
    );
    // Huge indices are refused as indices, not as overflow, while they fit 32 bits.
    let block = int(u64::from(u32::MAX), 7, 0x80);
    assert_eq!(
        decode_fresh(&block),
        Err(DecodeError::InvalidIndex(u32::MAX))
    );
}

/// A literal without indexing, name `:path` (index 4), with a Huffman-coded value.
fn huffman_value(encoded: &[u8]) -> Vec<u8> {
    concat(&[&[0x04], &int(encoded.len() as u64, 7, 0x80), encoded])
}

#[test]
fn huffman_errors() {
    // "a" (00011) padded with 111: valid.
    assert_eq!(
        decode_fresh(&huffman_value(&[0x1f])).unwrap(),
        fields(&[(":path", "a")])
    );
    // Padding with a 0 bit.
    let error = decode_fresh(&huffman_value(&[0x1e]));
    assert_eq!(error, Err(DecodeError::HuffmanPaddingNotOnes));
    // A whole byte of padding after "a".
    let error = decode_fresh(&huffman_value(&[0x1f, 0xff]));
    assert_eq!(error, Err(DecodeError::HuffmanPaddingTooLong));
    // EOS (thirty 1 bits) inside the string.
    let error = decode_fresh(&huffman_value(&[0xff, 0xff, 0xff, 0xff]));
    assert_eq!(error, Err(DecodeError::HuffmanEos));
    // EOS after a symbol: "a" then 30 ones.
    let error = decode_fresh(&huffman_value(&[0x1f, 0xff, 0xff, 0xff, 0xfc]));
    assert_eq!(error, Err(DecodeError::HuffmanEos));
}

#[test]
fn size_update_limits() {
    // Up to the limit is fine, and so are two updates in a row at the start.
    let mut decoder = Decoder::new(4096);
    let block = concat(&[&int(0, 5, 0x20), &int(4096, 5, 0x20), &[0x82]]);
    assert_eq!(
        decode(&mut decoder, &block, UNLIMITED).unwrap(),
        fields(&[(":method", "GET")])
    );
    assert_eq!(decoder.max_table_size(), 4096);
    // Above the limit the decoder was given.
    let block = int(4097, 5, 0x20);
    let error = decode(&mut Decoder::new(4096), &block, UNLIMITED);
    assert_eq!(
        error,
        Err(DecodeError::SizeUpdateOverLimit {
            size: 4097,
            limit: 4096
        })
    );
    // After a field.
    let block = concat(&[&[0x82], &int(100, 5, 0x20)]);
    assert_eq!(decode_fresh(&block), Err(DecodeError::SizeUpdateNotAtStart));
}

#[test]
fn a_lowered_limit_requires_a_size_update() {
    let insert = concat(&[&[0x40], &raw_string(b"k"), &raw_string(b"v")]);
    // Lowered below the table's size and not signalled: refused.
    let mut decoder = Decoder::new(4096);
    decoder.set_max_table_size_limit(1024);
    assert_eq!(
        decode(&mut decoder, &[0x82], UNLIMITED),
        Err(DecodeError::SizeUpdateMissing)
    );
    // Signalled: accepted, and the next block needs nothing more.
    let mut decoder = Decoder::new(4096);
    decode(&mut decoder, &insert, UNLIMITED).unwrap();
    decoder.set_max_table_size_limit(1024);
    let block = concat(&[&int(1024, 5, 0x20), &[0xbe]]);
    assert_eq!(
        decode(&mut decoder, &block, UNLIMITED).unwrap(),
        fields(&[("k", "v")])
    );
    decode(&mut decoder, &[0x82], UNLIMITED).unwrap();
    // Lowered to 0 and raised back: the first update must be the lowest (RFC 7541 §4.2).
    let mut decoder = Decoder::new(4096);
    decoder.set_max_table_size_limit(0);
    decoder.set_max_table_size_limit(4096);
    let only_final = concat(&[&int(4096, 5, 0x20), &[0x82]]);
    let error = decode(&mut decoder.clone(), &only_final, UNLIMITED);
    assert_eq!(error, Err(DecodeError::SizeUpdateMissing));
    let both = concat(&[&int(0, 5, 0x20), &int(4096, 5, 0x20), &[0x82]]);
    decode(&mut decoder, &both, UNLIMITED).unwrap();
    // Raising the limit requires nothing.
    let mut decoder = Decoder::new(4096);
    decoder.set_max_table_size_limit(8192);
    decode(&mut decoder, &[0x82], UNLIMITED).unwrap();
}

#[test]
fn the_encoder_signals_size_changes_as_the_decoder_requires() {
    let mut encoder = Encoder::new();
    let mut decoder = Decoder::default();
    let list = fields(&[(":authority", "example.com"), ("server", "squall")]);
    decode(&mut decoder, &encode(&mut encoder, &list), UNLIMITED).unwrap();
    // Down to 0 and back up between two blocks: both updates, lowest first.
    encoder.set_max_table_size(0);
    encoder.set_max_table_size(4096);
    decoder.set_max_table_size_limit(0);
    decoder.set_max_table_size_limit(4096);
    let block = encode(&mut encoder, &list);
    assert_eq!(
        block[..4],
        concat(&[&int(0, 5, 0x20), &int(4096, 5, 0x20)])[..]
    );
    assert_eq!(decode(&mut decoder, &block, UNLIMITED).unwrap(), list);
    // Above our own cap: the encoder stays at its cap and says nothing.
    encoder.set_max_table_size(65_536);
    decoder.set_max_table_size_limit(65_536);
    let block = encode(&mut encoder, &list);
    assert_eq!(block, [0xbf, 0xbe], "no size update, two indexed fields");
    assert_eq!(encoder.max_table_size(), 4096);
    // A cap below the protocol default is announced in the first block.
    let config = EncoderConfig {
        table_bytes_max: 512,
        ..EncoderConfig::default()
    };
    let mut encoder = Encoder::with_config(config);
    let block = encode(&mut encoder, &list);
    assert_eq!(block[..3], int(512, 5, 0x20)[..]);
    let mut decoder = Decoder::default();
    assert_eq!(decode(&mut decoder, &block, UNLIMITED).unwrap(), list);
    assert_eq!(decoder.max_table_size(), 512);
}

#[test]
fn truncation_at_every_split() {
    let mut rng = Rng::new(7);
    for round in 0..200 {
        let config = EncoderConfig {
            indexing: Indexing::All,
            ..EncoderConfig::default()
        };
        let mut encoder = Encoder::with_config(config);
        let mut decoder = Decoder::default();
        let warmup = random_list(&mut rng);
        decode(&mut decoder, &encode(&mut encoder, &warmup), UNLIMITED).unwrap();
        // Encode field by field to learn where each representation ends.
        let list = random_list(&mut rng);
        let mut block = Vec::new();
        let mut ends = vec![0];
        for field in &list {
            block.extend(encode(&mut encoder, &vec![field.clone()]));
            ends.push(block.len());
        }
        for split in 0..block.len() {
            let mut fresh = decoder.clone();
            let result = decode(&mut fresh, &block[..split], UNLIMITED);
            match ends.iter().position(|&end| end == split) {
                Some(n) => assert_eq!(result.unwrap(), list[..n], "round {round} split {split}"),
                None => assert_eq!(result, Err(DecodeError::Truncated), "round {round} {split}"),
            }
        }
    }
}

/// One 4 KiB-ish entry, then a block of 10,000 references to it: 40 MB of header list from a
/// 10 KB block. The decoder hands out no more than the limit, returns the stream-level error,
/// and stays in step with the encoder.
#[test]
fn hpack_bomb_is_bounded_by_the_header_list_limit() {
    const LIMIT: usize = 64 * 1024;
    let mut decoder = Decoder::default();
    let value = vec![b'x'; 4000];
    let insert = concat(&[&[0x40], &raw_string(b"b"), &raw_string(&value)]);
    decode(&mut decoder, &insert, LIMIT).unwrap();
    let bomb = vec![0xbe; 10_000];
    let mut emitted = Vec::<Field>::new();
    let result = decoder.decode(&bomb, LIMIT, |field| emitted.push(field));
    assert_eq!(
        result,
        Err(DecodeError::HeaderListTooLarge { limit: LIMIT })
    );
    assert!(!result.unwrap_err().is_compression_error());
    let emitted_bytes: usize = emitted.iter().map(Field::size).sum();
    assert!(emitted_bytes <= LIMIT, "{emitted_bytes}");
    assert_eq!(emitted.len(), LIMIT / (1 + 4000 + 32));
    // Emitted fields are copied into one buffer, which the limit bounds.
    let first = emitted[0].name.as_ptr() as usize;
    let last = emitted[emitted.len() - 1].value.as_ptr() as usize + value.len();
    assert!(last - first <= LIMIT, "{}", last - first);
    decoder.check_invariants();
    // Not poisoned: the next block decodes against the same table.
    assert_eq!(decode(&mut decoder, &[0xbe], LIMIT).unwrap()[0].1, value);
}

/// Past the limit the decoder keeps applying insertions, so its table still matches the
/// encoder's.
#[test]
fn over_the_limit_the_table_stays_in_step() {
    let mut encoder = Encoder::with_config(EncoderConfig {
        indexing: Indexing::All,
        ..EncoderConfig::default()
    });
    let mut decoder = Decoder::default();
    let big = "y".repeat(1000);
    let list = fields(&[
        ("a", "1"),
        (":path", &big),
        ("b", "2"),
        ("c", &big),
        ("d", "3"),
    ]);
    let block = encode(&mut encoder, &list);
    let result = decode(&mut decoder, &block, 500);
    assert_eq!(result, Err(DecodeError::HeaderListTooLarge { limit: 500 }));
    assert_eq!(
        common::table_of_decoder(&decoder),
        common::table_of_encoder(&encoder)
    );
    // The same fields again are all indices now, and decode within a larger limit.
    let block = encode(&mut encoder, &list);
    assert_eq!(block.len(), 5);
    assert_eq!(decode(&mut decoder, &block, 16 * 1024).unwrap(), list);
}

#[test]
fn a_literal_longer_than_the_limit_is_refused_before_decoding() {
    // 100 KB raw value, 16 KiB limit, without indexing: skipped, then refused.
    let value = vec![b'v'; 100_000];
    let block = concat(&[&[0x04], &raw_string(&value), &[0x82]]);
    let mut decoder = Decoder::default();
    let mut emitted = 0;
    let result = decoder.decode(&block, 16 * 1024, |_| emitted += 1);
    assert_eq!(
        result,
        Err(DecodeError::HeaderListTooLarge { limit: 16 * 1024 })
    );
    assert_eq!(emitted, 0, "nothing after the oversized field either");
    decoder.check_invariants();
}

#[test]
fn exactly_at_the_limit_is_accepted() {
    // ":method: GET" is 7 + 3 + 32 = 42 bytes.
    let mut decoder = Decoder::default();
    assert_eq!(decode(&mut decoder, &[0x82, 0x82], 84).unwrap().len(), 2);
    let error = decode(&mut decoder, &[0x82, 0x82], 83);
    assert_eq!(error, Err(DecodeError::HeaderListTooLarge { limit: 83 }));
}

#[test]
fn a_compression_error_poisons_the_decoder() {
    let mut decoder = Decoder::default();
    assert_eq!(
        decode(&mut decoder, &[0x80], UNLIMITED),
        Err(DecodeError::InvalidIndex(0))
    );
    assert_eq!(
        decode(&mut decoder, &[0x82], UNLIMITED),
        Err(DecodeError::InvalidIndex(0))
    );
    assert!(DecodeError::InvalidIndex(0).is_compression_error());
    assert_eq!(DecodeError::InvalidIndex(0).as_str(), "invalid_index");
}
