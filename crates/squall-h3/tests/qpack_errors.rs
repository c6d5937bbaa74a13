//! QPACK's error cases, each with the code RFC 9204 §6 gives it.

mod common;

use bytes::Bytes;
use common::hex;
use squall_h3::ErrorCode;
use squall_h3::qpack::{Decoder, Encoder, EncoderConfig, QpackError, Section};

/// B.2's encoder stream: capacity 220, two insertions.
const B2_INSERTS: &str = "3fbd01 c00f 7777 772e 6578 616d 706c 652e 636f 6d \
                          c10c 2f73 616d 706c 652f 7061 7468";

fn decoder_with_b2() -> Decoder {
    let mut decoder = Decoder::new(220, 2);
    decoder.feed_encoder_stream(&hex(B2_INSERTS)).unwrap();
    decoder
}

fn section(decoder: &mut Decoder, bytes: &str) -> Result<Section, QpackError> {
    let result = decoder.decode_section(0, &Bytes::from(hex(bytes)), 16 * 1024);
    decoder.check_invariants();
    result
}

fn code<T: std::fmt::Debug>(result: Result<T, QpackError>) -> ErrorCode {
    result.expect_err("an error").code()
}

#[test]
fn truncated_sections_fail_at_every_length() {
    let b1 = hex("0000 510b 2f69 6e64 6578 2e68 746d 6c");
    for len in 0..b1.len() {
        let mut decoder = Decoder::new(0, 0);
        let result = decoder.decode_section(0, &Bytes::copy_from_slice(&b1[..len]), 1024);
        if len == 2 {
            // The prefix alone is an empty section.
            assert_eq!(result, Ok(Section::Fields(vec![])));
        } else {
            assert_eq!(code(result), ErrorCode::QpackDecompressionFailed, "{len}");
        }
    }
}

#[test]
fn decompression_failures() {
    let cases = [
        // Static index 99, one past the table (63 + 36).
        ("static index past the table", "0000 ff24"),
        (
            "literal name reference past the static table",
            "0000 5f54 00",
        ),
        // A dynamic reference in a section whose Required Insert Count is 0.
        (
            "dynamic reference without a Required Insert Count",
            "0000 80",
        ),
        (
            "post-base reference without a Required Insert Count",
            "0000 10",
        ),
        // Required Insert Count 2 (encoded 3) but only entry 0 referenced.
        (
            "Required Insert Count larger than the references need",
            "0381 10",
        ),
        // Required Insert Count 1 but entry 1 referenced (post-base 1 from Base 0).
        ("reference at the Required Insert Count", "0200 11"),
        // 2 * MaxEntries = 12 with a capacity of 220: 13 is past it.
        ("Required Insert Count past the table's capacity", "0d00"),
        ("Base below zero", "0382"),
        ("relative index before the table", "0300 82"),
        ("integer past 2^62 - 1", "0000 ffffffffffffffffffffff7f"),
        ("literal value cut short", "0000 5f1d 05 6162"),
        // A Huffman string of one byte 0xff: eight bits of padding.
        ("Huffman padding too long", "0000 20 81ff"),
    ];
    for (what, bytes) in cases {
        let mut decoder = decoder_with_b2();
        let result = section(&mut decoder, bytes);
        assert_eq!(code(result), ErrorCode::QpackDecompressionFailed, "{what}");
        // The decoder is poisoned: the next valid section fails the same way.
        assert!(section(&mut decoder, "0000 d1").is_err(), "{what}");
    }
    // No dynamic table at all: any nonzero Required Insert Count.
    let mut decoder = Decoder::new(0, 100);
    assert_eq!(
        code(section(&mut decoder, "0100")),
        ErrorCode::QpackDecompressionFailed
    );
}

#[test]
fn an_evicted_entry_is_an_error() {
    let mut decoder = decoder_with_b2();
    // Lower the capacity to 60: entry 0 (57 bytes) goes, then entry 1 (53 bytes) fits.
    decoder.feed_encoder_stream(&hex("3f1d")).unwrap();
    assert_eq!(decoder.dynamic_table().count(), 1);
    // Indexed entry 0 with Required Insert Count 1, Base 1: evicted.
    assert_eq!(
        code(section(&mut decoder, "0200 80")),
        ErrorCode::QpackDecompressionFailed
    );
}

#[test]
fn blocked_streams_are_bounded() {
    // Required Insert Count 3, with two insertions received: blocked.
    let mut decoder = decoder_with_b2();
    let blocked = Bytes::from(hex("0400 10"));
    assert_eq!(
        decoder.decode_section(0, &blocked, 1024),
        Ok(Section::Blocked)
    );
    // The same stream again is not counted twice.
    assert_eq!(
        decoder.decode_section(0, &blocked, 1024),
        Ok(Section::Blocked)
    );
    assert_eq!(
        decoder.decode_section(4, &blocked, 1024),
        Ok(Section::Blocked)
    );
    assert_eq!(decoder.blocked_streams(), 2);
    decoder.check_invariants();
    // A third stream is one more than SETTINGS_QPACK_BLOCKED_STREAMS = 2.
    assert_eq!(
        code(decoder.decode_section(8, &blocked, 1024)),
        ErrorCode::QpackDecompressionFailed
    );
    // With none allowed, the first is already an error.
    let mut decoder = Decoder::new(220, 0);
    decoder.feed_encoder_stream(&hex(B2_INSERTS)).unwrap();
    assert!(decoder.decode_section(0, &blocked, 1024).is_err());
}

#[test]
fn a_cancelled_stream_is_no_longer_blocked() {
    let mut decoder = decoder_with_b2();
    let blocked = Bytes::from(hex("0400 10"));
    assert_eq!(
        decoder.decode_section(4, &blocked, 1024),
        Ok(Section::Blocked)
    );
    decoder.cancel_stream(4);
    assert_eq!(decoder.blocked_streams(), 0);
    // Insert Count Increment (2) for B.2's insertions, after the Stream Cancellation (4).
    assert_eq!(decoder.take_decoder_stream().unwrap(), hex("44 02"));
}

#[test]
fn a_section_over_the_limit_is_refused_without_poisoning() {
    let mut decoder = decoder_with_b2();
    // B.2 section: 57 + 49 = 106 bytes of fields.
    let b2 = Bytes::from(hex("0381 10 11"));
    let error = decoder.decode_section(4, &b2, 105).unwrap_err();
    assert_eq!(error, QpackError::FieldSectionTooLarge { limit: 105 });
    assert!(!error.is_connection_error());
    assert_eq!(error.code(), ErrorCode::ExcessiveLoad);
    // Still acknowledged: the encoder may release its references.
    assert_eq!(decoder.take_decoder_stream().unwrap(), hex("84"));
    assert!(matches!(
        decoder.decode_section(4, &b2, 106),
        Ok(Section::Fields(_))
    ));
    // A literal over the limit is refused from its length, before its bytes arrive.
    let mut decoder = Decoder::new(0, 0);
    let huge = Bytes::from(hex("0000 20 7f81ff03"));
    assert_eq!(
        decoder.decode_section(0, &huge, 1024),
        Err(QpackError::FieldSectionTooLarge { limit: 1024 })
    );
    decoder.check_invariants();
}

#[test]
fn encoder_stream_errors() {
    let cases = [
        ("capacity above the maximum", "3fbe01"),
        // Capacity 220, then an insertion of 32 + 10 + 200 bytes, refused from its lengths.
        (
            "entry larger than the capacity",
            "3fbd01 4a 6375 7374 6f6d 2d6b 6579 7f49",
        ),
        ("entry larger than a capacity of 0", "c100"),
        ("static name index 99", "3fbd01 ff24 00"),
        ("dynamic name reference with an empty table", "3fbd01 8000"),
        ("duplicate of nothing", "3fbd01 00"),
        ("Huffman padding not ones", "3fbd01 c081 00"),
        ("integer above 2^62", "3f ffffffffffffffffffff7f"),
    ];
    for (what, bytes) in cases {
        let mut decoder = Decoder::new(220, 0);
        let result = decoder.feed_encoder_stream(&hex(bytes));
        assert_eq!(code(result), ErrorCode::QpackEncoderStreamError, "{what}");
        decoder.check_invariants();
        assert!(
            decoder.feed_encoder_stream(&[]).is_err(),
            "poisoned: {what}"
        );
    }
}

#[test]
fn decoder_stream_errors() {
    let config = EncoderConfig {
        table_bytes_max: 4096,
        ..EncoderConfig::default()
    };
    let cases = [
        ("acknowledgment of a stream with nothing outstanding", "84"),
        ("Insert Count Increment of 0", "00"),
        ("Insert Count Increment past the insertions", "01"),
        ("integer above 2^62", "ff ffffffffffffffffff7f"),
    ];
    for (what, bytes) in cases {
        let mut encoder = Encoder::new(config);
        encoder.apply_peer_settings(4096, 0);
        let result = encoder.feed_decoder_stream(&hex(bytes));
        assert_eq!(code(result), ErrorCode::QpackDecoderStreamError, "{what}");
        encoder.check_invariants();
    }
    // A cancellation of a stream the encoder never referenced anything on is fine.
    let mut encoder = Encoder::new(config);
    encoder.feed_decoder_stream(&hex("48")).unwrap();
}
