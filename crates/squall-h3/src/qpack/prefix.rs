//! QPACK's primitives (RFC 9204 §4.1): prefixed integers and string literals.
//!
//! The integers are HPACK's (RFC 7541 §5.1), with a wider range: RFC 9204 §4.1.1 requires
//! decoding integers "up to and including 62 bits long", so the decoder accepts values up to
//! [`INTEGER_MAX`] = 2^62 - 1 in at most nine continuation bytes and refuses anything larger
//! or longer, even redundant zero bytes, as HPACK's decoder does.
//!
//! A string literal is an H bit (Huffman or not), a length with an N-bit prefix, and the
//! bytes (RFC 9204 §4.1.2). Unlike HPACK, the prefix is not always 7 bits (5 for a name in
//! an encoder stream insertion, 3 in a field line), so the H bit sits just above the prefix.
//! The Huffman code is HPACK's: [`squall_hpack::huffman`].

use bytes::BufMut;
use squall_hpack::huffman::{self, HuffmanError};

/// The largest integer the decoder accepts: 2^62 - 1 (RFC 9204 §4.1.1).
pub const INTEGER_MAX: u64 = (1 << 62) - 1;

/// Continuation bytes enough for [`INTEGER_MAX`] above any prefix: 9 × 7 = 63 bits.
const CONTINUATION_BYTES_MAX: usize = 9;
const _: () = assert!(7 * CONTINUATION_BYTES_MAX >= 62);

/// Why a representation could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The input ends inside it: on a stream, wait for more; in a field section, an error.
    Incomplete,
    /// A string would decode past the caller's cap (the field section budget).
    OverCap,
    /// It breaks RFC 9204; the reason is for logs.
    Bad(&'static str),
}

/// Appends `value` with a `prefix_bits`-bit prefix; `flags` fills the byte's high bits.
pub(crate) fn encode_int(value: u64, prefix_bits: u8, flags: u8, out: &mut impl BufMut) {
    debug_assert!((1..=8).contains(&prefix_bits));
    let max_prefix = (1u64 << prefix_bits) - 1;
    debug_assert!(
        u64::from(flags) & max_prefix == 0,
        "flags overlap the prefix"
    );
    if value < max_prefix {
        out.put_u8(flags | value as u8);
        return;
    }
    out.put_u8(flags | max_prefix as u8);
    let mut rest = value - max_prefix;
    while rest >= 0x80 {
        out.put_u8((rest as u8 & 0x7f) | 0x80);
        rest >>= 7;
    }
    out.put_u8(rest as u8);
}

/// Decodes an integer with a `prefix_bits`-bit prefix from the front of `src` (whose first
/// byte also holds the representation's flags): the value and the bytes it took.
pub(crate) fn decode_int(src: &[u8], prefix_bits: u8) -> Result<(u64, usize), Fault> {
    debug_assert!((1..=8).contains(&prefix_bits));
    let max_prefix = (1u64 << prefix_bits) - 1;
    let Some(&first) = src.first() else {
        return Err(Fault::Incomplete);
    };
    let prefix = u64::from(first) & max_prefix;
    if prefix < max_prefix {
        return Ok((prefix, 1));
    }
    let mut value = prefix;
    for (i, &byte) in src[1..].iter().enumerate() {
        if i >= CONTINUATION_BYTES_MAX {
            return Err(Fault::Bad("integer longer than 62 bits"));
        }
        // i <= 8, so the shift is at most 56 and the 7 bits stay within u64 below 2^63.
        value += u64::from(byte & 0x7f) << (7 * i);
        if value > INTEGER_MAX {
            return Err(Fault::Bad("integer above 2^62 - 1"));
        }
        if byte & 0x80 == 0 {
            return Ok((value, i + 2));
        }
    }
    Err(Fault::Incomplete)
}

/// Appends a string literal with a `prefix_bits`-bit length prefix, the H bit just above it
/// and `flags` above that; Huffman-coded when `huffman` is set and that is shorter.
pub(crate) fn encode_string(
    s: &[u8],
    prefix_bits: u8,
    flags: u8,
    huffman: bool,
    out: &mut impl BufMut,
) {
    let h = 1u8 << prefix_bits;
    let coded_len = huffman::encoded_len(s);
    if huffman && coded_len < s.len() {
        encode_int(coded_len as u64, prefix_bits, flags | h, out);
        huffman::encode(s, out);
    } else {
        encode_int(s.len() as u64, prefix_bits, flags, out);
        out.put_slice(s);
    }
}

/// A decoded string literal: where its raw bytes lie in the input, or its Huffman decoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Str {
    /// Raw: `len` bytes at `at` in the input.
    Raw { at: usize, len: usize },
    /// Huffman-coded, decoded.
    Decoded(Vec<u8>),
}

impl Str {
    /// The string's length once decoded.
    pub(crate) fn len(&self) -> usize {
        match self {
            Str::Raw { len, .. } => *len,
            Str::Decoded(bytes) => bytes.len(),
        }
    }

    /// The string's bytes, given the input it was read from.
    pub(crate) fn bytes<'a>(&'a self, src: &'a [u8]) -> &'a [u8] {
        match self {
            Str::Raw { at, len } => &src[*at..*at + *len],
            Str::Decoded(bytes) => bytes,
        }
    }
}

/// The H bit and encoded length of the string literal at `src[at..]`, and where its bytes
/// start, without reading them.
pub(crate) fn string_head(
    src: &[u8],
    at: usize,
    prefix_bits: u8,
) -> Result<(bool, u64, usize), Fault> {
    let rest = &src[at..];
    let Some(&first) = rest.first() else {
        return Err(Fault::Incomplete);
    };
    let huffman = first & (1 << prefix_bits) != 0;
    let (len, used) = decode_int(rest, prefix_bits)?;
    Ok((huffman, len, at + used))
}

/// The fewest bytes a string encoded in `len` bytes can decode to.
pub(crate) fn decoded_len_min(huffman: bool, len: u64) -> u64 {
    if huffman {
        len.saturating_mul(8) / 30
    } else {
        len
    }
}

/// Reads the string literal at `src[at..]`: the string and the offset after it. A string
/// that would decode to more than `cap` bytes is [`Fault::OverCap`], found before its bytes
/// are copied (raw) or as soon as decoding passes the cap (Huffman).
pub(crate) fn decode_string(
    src: &[u8],
    at: usize,
    prefix_bits: u8,
    cap: usize,
) -> Result<(Str, usize), Fault> {
    let mut decoded = Vec::new();
    let (span, end) = decode_string_into(src, at, prefix_bits, cap, &mut decoded)?;
    match span {
        Span::Input { at, len } => Ok((Str::Raw { at, len }, end)),
        Span::Scratch { .. } => Ok((Str::Decoded(decoded), end)),
    }
}

/// Where a decoded string literal lies: in the input, or (Huffman-coded) in the scratch
/// buffer it was decoded into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Span {
    Input { at: usize, len: usize },
    Scratch { at: usize, len: usize },
}

impl Span {
    /// The string's bytes, given the input and the scratch buffer.
    pub(crate) fn bytes<'a>(&self, src: &'a [u8], scratch: &'a [u8]) -> &'a [u8] {
        match *self {
            Span::Input { at, len } => &src[at..at + len],
            Span::Scratch { at, len } => &scratch[at..at + len],
        }
    }
}

/// [`decode_string`], a Huffman-coded string appended to `scratch` instead of a buffer of
/// its own: decoding a section allocates nothing per string.
pub(crate) fn decode_string_into(
    src: &[u8],
    at: usize,
    prefix_bits: u8,
    cap: usize,
    scratch: &mut Vec<u8>,
) -> Result<(Span, usize), Fault> {
    let (huffman, len, start) = string_head(src, at, prefix_bits)?;
    if decoded_len_min(huffman, len) > cap as u64 {
        // Over the cap whatever its bytes hold: refused before waiting for them.
        return Err(Fault::OverCap);
    }
    let len = len as usize;
    let end = start.checked_add(len).ok_or(Fault::Incomplete)?;
    let Some(bytes) = src.get(start..end) else {
        return Err(Fault::Incomplete);
    };
    if !huffman {
        return Ok((Span::Input { at: start, len }, end));
    }
    let from = scratch.len();
    huffman::decode(bytes, cap, scratch).map_err(|error| match error {
        HuffmanError::TooLong => Fault::OverCap,
        HuffmanError::Eos => Fault::Bad("Huffman string contains EOS"),
        HuffmanError::PaddingTooLong => Fault::Bad("Huffman padding longer than 7 bits"),
        HuffmanError::PaddingNotOnes => Fault::Bad("Huffman padding is not a prefix of EOS"),
    })?;
    let len = scratch.len() - from;
    Ok((Span::Scratch { at: from, len }, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(value: u64, prefix_bits: u8) -> Vec<u8> {
        let mut out = Vec::new();
        encode_int(value, prefix_bits, 0, &mut out);
        out
    }

    #[test]
    fn rfc_7541_c_1_examples_hold_for_qpack_too() {
        assert_eq!(enc(10, 5), [0b01010]);
        assert_eq!(enc(1337, 5), [0b11111, 0b1001_1010, 0b0000_1010]);
        assert_eq!(
            decode_int(&[0b11111, 0b1001_1010, 0b0000_1010], 5),
            Ok((1337, 3))
        );
        assert_eq!(enc(42, 8), [42]);
    }

    #[test]
    fn round_trips_at_every_prefix_up_to_62_bits() {
        for prefix_bits in 1..=8u8 {
            let max_prefix = (1u64 << prefix_bits) - 1;
            for value in [
                0,
                1,
                max_prefix - 1,
                max_prefix,
                max_prefix + 1,
                16_384,
                u32::MAX.into(),
                INTEGER_MAX,
            ] {
                let bytes = enc(value, prefix_bits);
                assert_eq!(
                    decode_int(&bytes, prefix_bits),
                    Ok((value, bytes.len())),
                    "{value} {prefix_bits}"
                );
                for cut in 0..bytes.len() {
                    assert_eq!(
                        decode_int(&bytes[..cut], prefix_bits),
                        Err(Fault::Incomplete)
                    );
                }
            }
        }
    }

    #[test]
    fn too_large_or_too_long_is_refused() {
        let mut over = Vec::new();
        encode_int(INTEGER_MAX + 1, 5, 0, &mut over);
        assert!(matches!(decode_int(&over, 5), Err(Fault::Bad(_))));
        // A tenth continuation byte, even a zero one.
        let long = [
            0x1f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00,
        ];
        assert!(matches!(decode_int(&long, 5), Err(Fault::Bad(_))));
        // Nine are fine.
        let nine: Vec<u8> = long[..9].iter().copied().chain([0]).collect();
        assert_eq!(decode_int(&nine, 5), Ok((31, 10)));
        assert!(matches!(decode_int(&[0xff; 100], 8), Err(Fault::Bad(_))));
    }

    #[test]
    fn strings_put_the_h_bit_above_the_prefix() {
        for prefix_bits in [3u8, 5, 7] {
            for huffman in [false, true] {
                let mut out = Vec::new();
                encode_string(b"www.example.com", prefix_bits, 0, huffman, &mut out);
                assert_eq!(out[0] & (1 << prefix_bits) != 0, huffman);
                let (s, end) = decode_string(&out, 0, prefix_bits, 100).unwrap();
                assert_eq!(end, out.len());
                assert_eq!(s.bytes(&out), b"www.example.com");
                assert_eq!(decode_string(&out, 0, prefix_bits, 14), Err(Fault::OverCap));
                assert_eq!(
                    decode_string(&out[..out.len() - 1], 0, prefix_bits, 100),
                    Err(Fault::Incomplete)
                );
            }
        }
    }
}
