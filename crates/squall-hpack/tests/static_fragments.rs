//! `encode_static`: fragments that use no dynamic table decode the same whatever the tables
//! hold, interleaved with blocks from an `Encoder` that does use its table, and checked by an
//! independent decoder (the `hpack` crate) as well as ours.

use bytes::BytesMut;
use squall_hpack::{Decoder, Encoder, encode_static};

const FIXED: &[(&[u8], &[u8])] = &[
    (b":status", b"200"),
    (b":status", b"203"),
    (b"server", b"squall"),
    (b"content-type", b"text/plain; charset=utf-8"),
    (b"x-custom", b"Value With Spaces"),
    (b"content-length", b"13"),
];

fn decode(decoder: &mut Decoder, block: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    decoder
        .decode_to_vec(block, 1 << 20)
        .expect("a valid block")
        .into_iter()
        .map(|f| (f.name.to_vec(), f.value.to_vec()))
        .collect()
}

#[test]
fn a_static_fragment_decodes_alike_in_any_table_state() {
    let mut fragment = BytesMut::new();
    encode_static(FIXED.iter().copied(), &mut fragment);
    let expected: Vec<(Vec<u8>, Vec<u8>)> = FIXED
        .iter()
        .map(|(n, v)| (n.to_vec(), v.to_vec()))
        .collect();

    let mut encoder = Encoder::new();
    let mut ours = Decoder::new(4096);
    let mut theirs = hpack::Decoder::new();
    for round in 0..50 {
        // A block that fills and churns the dynamic table...
        let value = format!("value-{round}-{}", "x".repeat(round * 7));
        let dynamic: Vec<(&[u8], &[u8], bool)> = vec![
            (b"x-round", value.as_bytes(), false),
            (b"server", b"squall", false),
            (b"cache-control", b"max-age=60", false),
        ];
        let mut block = BytesMut::new();
        encoder.encode(dynamic.iter().copied(), &mut block);
        decode(&mut ours, &block);
        theirs
            .decode(&block)
            .expect("hpack crate decodes the encoder's block");
        // ...then one made of the fixed fragment and a field from the encoder, as a response.
        let mut block = BytesMut::new();
        encoder.begin_block(&mut block);
        block.extend_from_slice(&fragment);
        encoder.encode(
            [(&b"date"[..], &b"Mon, 30 Nov 2026 06:00:00 GMT"[..], false)],
            &mut block,
        );
        let mut fields = decode(&mut ours, &block);
        assert_eq!(fields.pop().unwrap().0, b"date");
        assert_eq!(fields, expected, "round {round}");
        let theirs_fields = theirs
            .decode(&block)
            .expect("hpack crate decodes the fragment");
        assert_eq!(theirs_fields.len(), FIXED.len() + 1);
        for ((n, v), (en, ev)) in theirs_fields.iter().zip(FIXED) {
            assert_eq!((&n[..], &v[..]), (*en, *ev));
        }
    }
}

#[test]
fn begin_block_sends_a_pending_size_update_first() {
    let mut encoder = Encoder::new();
    let mut decoder = Decoder::new(4096);
    let mut block = BytesMut::new();
    encoder.encode([(&b"x-a"[..], &b"1"[..], false)], &mut block);
    decode(&mut decoder, &block);
    // The peer lowers its table: the next block must start with the update.
    encoder.set_max_table_size(0);
    decoder.set_max_table_size_limit(0);
    let mut block = BytesMut::new();
    encoder.begin_block(&mut block);
    encode_static([(&b":status"[..], &b"404"[..])], &mut block);
    assert_eq!(block[0] & 0xe0, 0x20, "a size update comes first");
    assert_eq!(
        decode(&mut decoder, &block),
        vec![(b":status".to_vec(), b"404".to_vec())]
    );
    assert_eq!(decoder.table_size(), 0);
}
