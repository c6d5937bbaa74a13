//! RFC 7541 Appendix C, byte for byte: every example block decodes to its header list and
//! leaves the dynamic table the RFC shows, and our encoder produces exactly the RFC's bytes
//! (C.2 with the default policy, C.3/C.4 with either policy, C.5/C.6 with `Indexing::All`
//! and the RFC's 256-byte table). C.1 (integers) is in `src/integer.rs`.

mod common;

use common::{List, UNLIMITED, decode, encode, fields, hex, table_of_decoder, table_of_encoder};
use squall_hpack::{Decoder, Encoder, EncoderConfig, Indexing};

/// One block of an example sequence.
struct Example {
    section: &'static str,
    list: List,
    block: &'static str,
    /// The dynamic table afterwards, newest first, and its size.
    table: Vec<(&'static str, &'static str)>,
    size: usize,
}

/// Decodes the blocks in order on one decoder, and encodes the lists in order on one encoder,
/// checking bytes, fields and tables after each.
fn run(examples: &[Example], table_bytes: usize, config: EncoderConfig) {
    let mut decoder = Decoder::new(table_bytes);
    let mut encoder = Encoder::with_config(EncoderConfig {
        peer_table_bytes: table_bytes,
        ..config
    });
    for example in examples {
        let section = example.section;
        let block = hex(example.block);
        let table: Vec<(Vec<u8>, Vec<u8>)> = example
            .table
            .iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();

        let decoded = decode(&mut decoder, &block, UNLIMITED).unwrap();
        assert_eq!(decoded, example.list, "{section}: decoded fields");
        assert_eq!(
            table_of_decoder(&decoder),
            table,
            "{section}: decoder table"
        );
        assert_eq!(
            decoder.table_size(),
            example.size,
            "{section}: decoder table size"
        );

        let encoded = encode(&mut encoder, &example.list);
        assert_eq!(encoded, block, "{section}: encoded bytes\n{encoded:02x?}");
        assert_eq!(
            table_of_encoder(&encoder),
            table,
            "{section}: encoder table"
        );
        assert_eq!(
            encoder.table_size(),
            example.size,
            "{section}: encoder table size"
        );
    }
}

fn plain(indexing: Indexing) -> EncoderConfig {
    EncoderConfig {
        indexing,
        huffman: false,
        ..EncoderConfig::default()
    }
}

fn huffman(indexing: Indexing) -> EncoderConfig {
    EncoderConfig {
        indexing,
        huffman: true,
        ..EncoderConfig::default()
    }
}

#[test]
fn c_2_1_literal_with_indexing() {
    let example = Example {
        section: "C.2.1",
        list: fields(&[("custom-key", "custom-header")]),
        block: "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
        table: vec![("custom-key", "custom-header")],
        size: 55,
    };
    run(&[example], 4096, plain(Indexing::Selective));
}

#[test]
fn c_2_2_literal_without_indexing() {
    let example = Example {
        section: "C.2.2",
        list: fields(&[(":path", "/sample/path")]),
        block: "040c 2f73 616d 706c 652f 7061 7468",
        table: vec![],
        size: 0,
    };
    run(&[example], 4096, plain(Indexing::Selective));
}

#[test]
fn c_2_3_literal_never_indexed() {
    let example = Example {
        section: "C.2.3",
        list: vec![(b"password".to_vec(), b"secret".to_vec(), true)],
        block: "1008 7061 7373 776f 7264 0673 6563 7265 74",
        table: vec![],
        size: 0,
    };
    run(&[example], 4096, plain(Indexing::Selective));
}

#[test]
fn c_2_4_indexed() {
    let example = Example {
        section: "C.2.4",
        list: fields(&[(":method", "GET")]),
        block: "82",
        table: vec![],
        size: 0,
    };
    run(&[example], 4096, plain(Indexing::Selective));
}

fn requests(blocks: [&'static str; 3], section: &'static str) -> Vec<Example> {
    let sections = match section {
        "C.3" => ["C.3.1", "C.3.2", "C.3.3"],
        _ => ["C.4.1", "C.4.2", "C.4.3"],
    };
    let first = [(":method", "GET"), (":scheme", "http"), (":path", "/")];
    let authority = (":authority", "www.example.com");
    vec![
        Example {
            section: sections[0],
            list: fields(&[first[0], first[1], first[2], authority]),
            block: blocks[0],
            table: vec![authority],
            size: 57,
        },
        Example {
            section: sections[1],
            list: fields(&[
                first[0],
                first[1],
                first[2],
                authority,
                ("cache-control", "no-cache"),
            ]),
            block: blocks[1],
            table: vec![("cache-control", "no-cache"), authority],
            size: 110,
        },
        Example {
            section: sections[2],
            list: fields(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/index.html"),
                authority,
                ("custom-key", "custom-value"),
            ]),
            block: blocks[2],
            table: vec![
                ("custom-key", "custom-value"),
                ("cache-control", "no-cache"),
                authority,
            ],
            size: 164,
        },
    ]
}

const C3: [&str; 3] = [
    "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
    "8286 84be 5808 6e6f 2d63 6163 6865",
    "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
];

const C4: [&str; 3] = [
    "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
    "8286 84be 5886 a8eb 1064 9cbf",
    "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
];

#[test]
fn c_3_requests_without_huffman() {
    run(&requests(C3, "C.3"), 4096, plain(Indexing::Selective));
    run(&requests(C3, "C.3"), 4096, plain(Indexing::All));
}

#[test]
fn c_4_requests_with_huffman() {
    run(&requests(C4, "C.4"), 4096, huffman(Indexing::Selective));
    run(&requests(C4, "C.4"), 4096, huffman(Indexing::All));
}

const DATE_1: &str = "Mon, 21 Oct 2013 20:13:21 GMT";
const DATE_2: &str = "Mon, 21 Oct 2013 20:13:22 GMT";
const LOCATION: &str = "https://www.example.com";
const COOKIE: &str = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";

fn responses(blocks: [&'static str; 3], section: &'static str) -> Vec<Example> {
    let sections = match section {
        "C.5" => ["C.5.1", "C.5.2", "C.5.3"],
        _ => ["C.6.1", "C.6.2", "C.6.3"],
    };
    let (private, date_1) = (("cache-control", "private"), ("date", DATE_1));
    let location = ("location", LOCATION);
    vec![
        Example {
            section: sections[0],
            list: fields(&[(":status", "302"), private, date_1, location]),
            block: blocks[0],
            table: vec![location, date_1, private, (":status", "302")],
            size: 222,
        },
        Example {
            section: sections[1],
            list: fields(&[(":status", "307"), private, date_1, location]),
            block: blocks[1],
            table: vec![(":status", "307"), location, date_1, private],
            size: 222,
        },
        Example {
            section: sections[2],
            list: fields(&[
                (":status", "200"),
                private,
                ("date", DATE_2),
                location,
                ("content-encoding", "gzip"),
                ("set-cookie", COOKIE),
            ]),
            block: blocks[2],
            table: vec![
                ("set-cookie", COOKIE),
                ("content-encoding", "gzip"),
                ("date", DATE_2),
            ],
            size: 215,
        },
    ]
}

const C5: [&str; 3] = [
    "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a
     3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
    "4803 3330 37c1 c0bf",
    "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04
     677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49
     553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
];

const C6: [&str; 3] = [
    "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e
     919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
    "4883 640e ffc1 c0bf",
    "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7
     821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed
     4ee5 b106 3d50 07",
];

#[test]
fn c_5_responses_without_huffman_evicting_at_256() {
    run(&responses(C5, "C.5"), 256, plain(Indexing::All));
}

#[test]
fn c_6_responses_with_huffman_evicting_at_256() {
    run(&responses(C6, "C.6"), 256, huffman(Indexing::All));
}

/// The default policy on the C.5 responses: `date`, `location` and `set-cookie` are sent
/// without indexing, so the table keeps only `:status` and `cache-control`, and the peer's
/// decoder (here the `hpack` crate, as an independent check) still reads every field.
#[test]
fn default_policy_on_the_c_5_responses() {
    let mut encoder = Encoder::new();
    let mut oracle = hpack::Decoder::new();
    for example in responses(C5, "C.5") {
        let block = encode(&mut encoder, &example.list);
        let decoded = oracle.decode(&block).unwrap();
        let expected: Vec<(Vec<u8>, Vec<u8>)> = example
            .list
            .iter()
            .map(|(n, v, _)| (n.clone(), v.clone()))
            .collect();
        assert_eq!(decoded, expected, "{}", example.section);
    }
    let names: Vec<Vec<u8>> = table_of_encoder(&encoder)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        names,
        [
            &b"content-encoding"[..],
            b":status",
            b"cache-control",
            b":status"
        ]
    );
}
