//! Test helpers: a fixed-seed PRNG, hex blocks, random header lists, and encode/decode
//! wrappers that check invariants after every block.
#![allow(dead_code)] // each test binary uses its own subset

use bytes::BytesMut;
use squall_hpack::{DecodeError, Decoder, Encoder, Field};

/// A header list as the tests handle it: owned (name, value, sensitive).
pub type List = Vec<(Vec<u8>, Vec<u8>, bool)>;

/// A header list limit no test list comes near.
pub const UNLIMITED: usize = usize::MAX;

/// xorshift64: deterministic, so a failure reproduces from its seed and round.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform-ish in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn percent(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }

    /// Printable ASCII, the usual content of header values.
    pub fn text(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| b' ' + self.below(95) as u8).collect()
    }
}

/// Parses hex as RFC 7541 prints it ("8286 8441 ..."), whitespace ignored.
pub fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

/// An HPACK integer (RFC 7541 §5.1), written independently of the crate's encoder.
pub fn int(value: u64, prefix_bits: u8, flags: u8) -> Vec<u8> {
    let max_prefix = (1u64 << prefix_bits) - 1;
    if value < max_prefix {
        return vec![flags | value as u8];
    }
    let mut out = vec![flags | max_prefix as u8];
    let mut rest = value - max_prefix;
    while rest >= 128 {
        out.push(rest as u8 | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
    out
}

/// A raw (not Huffman) string literal (RFC 7541 §5.2).
pub fn raw_string(s: &[u8]) -> Vec<u8> {
    let mut out = int(s.len() as u64, 7, 0);
    out.extend_from_slice(s);
    out
}

pub fn fields(list: &[(&str, &str)]) -> List {
    list.iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec(), false))
        .collect()
}

pub fn encode(encoder: &mut Encoder, list: &List) -> Vec<u8> {
    let mut out = BytesMut::new();
    encoder.encode(list.iter().map(|(n, v, s)| (&n[..], &v[..], *s)), &mut out);
    encoder.check_invariants();
    out.to_vec()
}

pub fn decode(decoder: &mut Decoder, block: &[u8], limit: usize) -> Result<List, DecodeError> {
    let result = decoder.decode_to_vec(block, limit);
    decoder.check_invariants();
    result.map(|fields| fields.into_iter().map(owned).collect())
}

pub fn owned(field: Field) -> (Vec<u8>, Vec<u8>, bool) {
    (field.name.to_vec(), field.value.to_vec(), field.sensitive)
}

pub fn table_of_decoder(decoder: &Decoder) -> Vec<(Vec<u8>, Vec<u8>)> {
    decoder
        .dynamic_table()
        .map(|(n, v)| (n.to_vec(), v.to_vec()))
        .collect()
}

pub fn table_of_encoder(encoder: &Encoder) -> Vec<(Vec<u8>, Vec<u8>)> {
    encoder
        .dynamic_table()
        .map(|(n, v)| (n.to_vec(), v.to_vec()))
        .collect()
}

/// Names that come up in real traffic, static table names among them, so that random lists
/// hit static names, static fields and repeats.
const NAMES: &[&str] = &[
    ":authority",
    ":method",
    ":path",
    ":scheme",
    ":status",
    "accept",
    "accept-encoding",
    "accept-language",
    "cache-control",
    "content-length",
    "content-type",
    "cookie",
    "date",
    "etag",
    "location",
    "server",
    "set-cookie",
    "user-agent",
    "vary",
    "authorization",
    "x-request-id",
    "x-forwarded-for",
];

/// Values to draw from, so that exact repeats (and static fields) happen.
const VALUES: &[&str] = &[
    "",
    "GET",
    "POST",
    "/",
    "/index.html",
    "http",
    "https",
    "200",
    "404",
    "gzip, deflate",
    "gzip, deflate, br, zstd",
    "text/html; charset=utf-8",
    "no-cache",
    "max-age=3600",
    "www.example.com",
];

/// A random header list of 0 to 19 fields: known names with pooled or random values, random
/// names (lowercase, as HTTP/2 requires, but HPACK does not care), arbitrary octets in values
/// now and then to reach every Huffman code, and some fields marked sensitive.
///
/// `accept-charset` is never produced: the `hpack` crate's static table has `accept-` at
/// index 15 (a bug), so the two would disagree on that name.
pub fn random_list(rng: &mut Rng) -> List {
    let count = rng.below(20);
    (0..count).map(|_| random_field(rng)).collect()
}

fn random_field(rng: &mut Rng) -> (Vec<u8>, Vec<u8>, bool) {
    let name = if rng.percent(80) {
        rng.pick(NAMES).as_bytes().to_vec()
    } else {
        let len = 1 + rng.below(20);
        (0..len).map(|_| b'a' + rng.below(26) as u8).collect()
    };
    let value = match rng.below(10) {
        0..=4 => rng.pick(VALUES).as_bytes().to_vec(),
        5..=7 => {
            let len = rng.below(40);
            rng.text(len)
        }
        8 => {
            let len = rng.below(300);
            rng.text(len)
        }
        _ => {
            let len = rng.below(30);
            rng.bytes(len)
        }
    };
    (name, value, rng.percent(5))
}
