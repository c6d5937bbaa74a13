//! RFC 9204 Appendix B, byte for byte: every instruction and field section of B.1 to B.5
//! parsed into values and encoded back from them, and the whole exchange run through our
//! decoder, whose table is checked against the RFC's after each step.

mod common;

use bytes::{Bytes, BytesMut};
use common::hex;
use squall_h3::qpack::{
    Decoder, DecoderInstruction, EncoderInstruction, FieldLine, Section, SectionPrefix, TableRef,
    max_entries,
};

const CAPACITY: u64 = 220;

fn b(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}

/// The encoder stream of each step, as bytes and as the instructions they hold.
fn encoder_stream() -> Vec<(&'static str, Vec<EncoderInstruction>)> {
    use EncoderInstruction::*;
    vec![
        (
            // B.2
            "3fbd01 c00f 7777 772e 6578 616d 706c 652e 636f 6d \
             c10c 2f73 616d 706c 652f 7061 7468",
            vec![
                SetCapacity(220),
                InsertWithNameRef {
                    name: TableRef::Static(0),
                    value: b("www.example.com"),
                },
                InsertWithNameRef {
                    name: TableRef::Static(1),
                    value: b("/sample/path"),
                },
            ],
        ),
        (
            // B.3
            "4a63 7573 746f 6d2d 6b65 790c 6375 7374 6f6d 2d76 616c 7565",
            vec![InsertWithLiteralName {
                name: b("custom-key"),
                value: b("custom-value"),
            }],
        ),
        // B.4
        ("02", vec![Duplicate(2)]),
        (
            // B.5
            "810d 6375 7374 6f6d 2d76 616c 7565 32",
            vec![InsertWithNameRef {
                name: TableRef::Dynamic(1),
                value: b("custom-value2"),
            }],
        ),
    ]
}

/// Each section: stream, bytes, prefix, lines, and the fields they decode to (with the
/// insert count the decoder has then).
struct SectionCase {
    stream_id: u64,
    bytes: &'static str,
    prefix: SectionPrefix,
    lines: Vec<FieldLine>,
    fields: Vec<(&'static str, &'static str)>,
}

fn sections() -> Vec<SectionCase> {
    vec![
        SectionCase {
            // B.1
            stream_id: 0,
            bytes: "0000 510b 2f69 6e64 6578 2e68 746d 6c",
            prefix: SectionPrefix {
                required_insert_count: 0,
                base: 0,
            },
            lines: vec![FieldLine::LiteralWithNameRef {
                name: TableRef::Static(1),
                value: b("/index.html"),
                never_index: false,
            }],
            fields: vec![(":path", "/index.html")],
        },
        SectionCase {
            // B.2
            stream_id: 4,
            bytes: "0381 10 11",
            prefix: SectionPrefix {
                required_insert_count: 2,
                base: 0,
            },
            lines: vec![FieldLine::IndexedPostBase(0), FieldLine::IndexedPostBase(1)],
            fields: vec![(":authority", "www.example.com"), (":path", "/sample/path")],
        },
        SectionCase {
            // B.4
            stream_id: 8,
            bytes: "0500 80 c1 81",
            prefix: SectionPrefix {
                required_insert_count: 4,
                base: 4,
            },
            lines: vec![
                FieldLine::Indexed(TableRef::Dynamic(0)),
                FieldLine::Indexed(TableRef::Static(1)),
                FieldLine::Indexed(TableRef::Dynamic(1)),
            ],
            fields: vec![
                (":authority", "www.example.com"),
                (":path", "/"),
                ("custom-key", "custom-value"),
            ],
        },
    ]
}

#[test]
fn encoder_instructions_both_ways() {
    for (bytes, instructions) in encoder_stream() {
        let bytes = hex(bytes);
        let mut encoded = Vec::new();
        for instruction in &instructions {
            instruction.encode(false, &mut encoded);
        }
        assert_eq!(encoded, bytes);
        let mut parsed = Vec::new();
        let mut at = 0;
        while let Some((instruction, len)) = EncoderInstruction::parse(&bytes[at..]).unwrap() {
            parsed.push(instruction);
            at += len;
        }
        assert_eq!(at, bytes.len());
        assert_eq!(parsed, instructions);
    }
}

#[test]
fn decoder_instructions_both_ways() {
    use DecoderInstruction::*;
    // B.2 Section Acknowledgment (stream 4), B.3 and B.5 Insert Count Increment (1), B.4
    // Stream Cancellation (stream 8).
    for (bytes, instruction) in [
        ("84", SectionAck(4)),
        ("01", InsertCountIncrement(1)),
        ("48", StreamCancel(8)),
    ] {
        let bytes = hex(bytes);
        let mut encoded = Vec::new();
        instruction.encode(&mut encoded);
        assert_eq!(encoded, bytes);
        assert_eq!(
            DecoderInstruction::parse(&bytes).unwrap(),
            Some((instruction, 1))
        );
    }
}

#[test]
fn field_sections_encode_to_the_rfc_bytes() {
    for case in sections() {
        let mut out = BytesMut::new();
        case.prefix.encode(max_entries(CAPACITY), &mut out);
        for line in &case.lines {
            line.encode(false, &mut out);
        }
        assert_eq!(out.to_vec(), hex(case.bytes), "stream {}", case.stream_id);
    }
}

/// The decoder's table, newest last: (absolute index, name, value).
fn table(decoder: &Decoder) -> Vec<(u64, String, String)> {
    decoder
        .dynamic_table()
        .map(|(i, n, v)| {
            (
                i,
                String::from_utf8(n.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            )
        })
        .collect()
}

fn entries(list: &[(u64, &str, &str)]) -> Vec<(u64, String, String)> {
    list.iter()
        .map(|&(i, n, v)| (i, n.to_owned(), v.to_owned()))
        .collect()
}

fn decode(decoder: &mut Decoder, case: &SectionCase) {
    let section = Bytes::from(hex(case.bytes));
    let Section::Fields(fields) = decoder
        .decode_section(case.stream_id, &section, 16 * 1024)
        .unwrap()
    else {
        panic!("stream {} blocked", case.stream_id);
    };
    let got: Vec<(&[u8], &[u8])> = fields.iter().map(|f| (&f.name[..], &f.value[..])).collect();
    let want: Vec<(&[u8], &[u8])> = case
        .fields
        .iter()
        .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
        .collect();
    assert_eq!(got, want, "stream {}", case.stream_id);
    assert!(fields.iter().all(|f| !f.sensitive));
    decoder.check_invariants();
}

/// The appendix as one connection, the encoder stream fed a byte at a time. Our decoder
/// sends its Insert Count Increments when its output is taken, after each step; the RFC
/// shows one decoder's timing, so where ours differs the test says why.
#[test]
fn the_appendix_through_our_decoder() {
    let [b1, b2, b4] = <[SectionCase; 3]>::try_from(sections()).ok().unwrap();
    let stream = encoder_stream();
    let feed = |decoder: &mut Decoder, step: usize| {
        for byte in hex(stream[step].0) {
            assert_eq!(
                decoder.feed_encoder_stream(&[byte]).unwrap(),
                Vec::<u64>::new()
            );
            decoder.check_invariants();
        }
    };
    let mut decoder = Decoder::new(CAPACITY, 1);

    // B.1: static table only; nothing to acknowledge.
    decode(&mut decoder, &b1);
    assert_eq!(decoder.take_decoder_stream(), None);

    // B.2: the stream 4 section arrives first and blocks, then the insertions unblock it.
    let section = Bytes::from(hex(b2.bytes));
    assert_eq!(
        decoder.decode_section(4, &section, 16 * 1024),
        Ok(Section::Blocked)
    );
    assert_eq!(decoder.blocked_streams(), 1);
    let mut unblocked = Vec::new();
    for byte in hex(stream[0].0) {
        unblocked.extend(decoder.feed_encoder_stream(&[byte]).unwrap());
        decoder.check_invariants();
    }
    assert_eq!(unblocked, [4]);
    assert_eq!(
        table(&decoder),
        entries(&[
            (0, ":authority", "www.example.com"),
            (1, ":path", "/sample/path")
        ])
    );
    assert_eq!(decoder.table_size(), (106, 220));
    decode(&mut decoder, &b2);
    // Section Acknowledgment (stream 4), which also tells the encoder of both insertions.
    assert_eq!(decoder.take_decoder_stream().unwrap(), hex("84"));

    // B.3: Insert Count Increment (1).
    feed(&mut decoder, 1);
    assert_eq!(decoder.table_size(), (160, 220));
    assert_eq!(decoder.take_decoder_stream().unwrap(), hex("01"));

    // B.4: the duplicate, then stream 8's section. The RFC's decoder sends a Stream
    // Cancellation for stream 8 (its request was reset); ours decodes the section and
    // acknowledges it, which also tells the encoder of the duplicate. Then the cancellation.
    feed(&mut decoder, 2);
    assert_eq!(
        table(&decoder),
        entries(&[
            (0, ":authority", "www.example.com"),
            (1, ":path", "/sample/path"),
            (2, "custom-key", "custom-value"),
            (3, ":authority", "www.example.com"),
        ])
    );
    assert_eq!(decoder.table_size(), (217, 220));
    decode(&mut decoder, &b4);
    assert_eq!(decoder.take_decoder_stream().unwrap(), hex("88"));
    decoder.cancel_stream(8);
    assert_eq!(decoder.take_decoder_stream().unwrap(), hex("48"));

    // B.5: the insertion evicts entry 0; Insert Count Increment (1).
    feed(&mut decoder, 3);
    assert_eq!(
        table(&decoder),
        entries(&[
            (1, ":path", "/sample/path"),
            (2, "custom-key", "custom-value"),
            (3, ":authority", "www.example.com"),
            (4, "custom-key", "custom-value2"),
        ])
    );
    assert_eq!(decoder.table_size(), (215, 220));
    assert_eq!(decoder.take_decoder_stream().unwrap(), hex("01"));
    decoder.check_invariants();
}

/// The encoder stream of the whole appendix, split at every boundary into two pieces, gives
/// the same table as fed whole.
#[test]
fn the_encoder_stream_at_every_split() {
    let all: Vec<u8> = encoder_stream().iter().flat_map(|(s, _)| hex(s)).collect();
    let mut whole = Decoder::new(CAPACITY, 0);
    whole.feed_encoder_stream(&all).unwrap();
    for cut in 0..=all.len() {
        let mut decoder = Decoder::new(CAPACITY, 0);
        decoder.feed_encoder_stream(&all[..cut]).unwrap();
        decoder.check_invariants();
        decoder.feed_encoder_stream(&all[cut..]).unwrap();
        decoder.check_invariants();
        assert_eq!(table(&decoder), table(&whole), "split at {cut}");
    }
    assert_eq!(whole.insert_count(), 5);
}
