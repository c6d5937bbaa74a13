//! Prefix-coded integers (RFC 7541 §5.1).
//!
//! An integer starts in the low `N` bits of a byte whose high bits carry the representation's
//! flags; a value of at least `2^N - 1` continues in 7-bit groups, least significant first,
//! with the high bit of each byte saying "more follows". The RFC sets no maximum but requires
//! a decoder to refuse encodings that are "excessively large in value or octet length", so
//! we refuse any value above [`INTEGER_MAX`] and any encoding with more continuation bytes
//! than that maximum needs, even if the extra bytes are zeros.

use bytes::BufMut;

use crate::DecodeError;

/// The largest integer the decoder accepts. Every integer HPACK carries (an index, a string
/// length, a table size) is far below it; bigger ones are attacks or garbage.
pub const INTEGER_MAX: u64 = u32::MAX as u64;

/// The number of continuation bytes that can carry [`INTEGER_MAX`]: 7 bits each, after a
/// prefix of at least 1 bit. A sixth is refused even if its bits are zero (RFC 7541 §5.1:
/// "excessively large ... in octet length").
const CONTINUATION_BYTES_MAX: u32 = 5;
const _: () = assert!(7 * CONTINUATION_BYTES_MAX >= 32);

/// Appends `value` with an `prefix_bits`-bit prefix; `flags` fills the byte's high bits.
pub(crate) fn encode(value: usize, prefix_bits: u8, flags: u8, out: &mut impl BufMut) {
    debug_assert!((1..=8).contains(&prefix_bits));
    let max_prefix = (1usize << prefix_bits) - 1;
    debug_assert!(
        usize::from(flags) & max_prefix == 0,
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

/// Decodes an integer with an `prefix_bits`-bit prefix from the front of `src` (whose first
/// byte also holds the representation's flags). Returns the value and the bytes consumed.
pub(crate) fn decode(src: &[u8], prefix_bits: u8) -> Result<(u32, usize), DecodeError> {
    debug_assert!((1..=8).contains(&prefix_bits));
    let max_prefix = (1u32 << prefix_bits) - 1;
    let Some(&first) = src.first() else {
        return Err(DecodeError::Truncated);
    };
    let prefix = u32::from(first) & max_prefix;
    if prefix < max_prefix {
        return Ok((prefix, 1));
    }
    let mut value = u64::from(prefix);
    for (i, &byte) in src[1..].iter().enumerate() {
        if i as u32 >= CONTINUATION_BYTES_MAX {
            return Err(DecodeError::IntegerOverflow);
        }
        value += u64::from(byte & 0x7f) << (7 * i);
        if value > INTEGER_MAX {
            return Err(DecodeError::IntegerOverflow);
        }
        if byte & 0x80 == 0 {
            // Checked against INTEGER_MAX = u32::MAX just above.
            return Ok((value as u32, i + 2));
        }
    }
    Err(DecodeError::Truncated)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(value: usize, prefix_bits: u8) -> Vec<u8> {
        let mut out = Vec::new();
        encode(value, prefix_bits, 0, &mut out);
        out
    }

    #[test]
    fn rfc_7541_c_1_examples() {
        // C.1.1: 10 with a 5-bit prefix.
        assert_eq!(enc(10, 5), [0b01010]);
        assert_eq!(decode(&[0b01010], 5), Ok((10, 1)));
        // C.1.2: 1337 with a 5-bit prefix.
        assert_eq!(enc(1337, 5), [0b11111, 0b1001_1010, 0b0000_1010]);
        assert_eq!(
            decode(&[0b11111, 0b1001_1010, 0b0000_1010], 5),
            Ok((1337, 3))
        );
        // C.1.3: 42 starting at an octet boundary.
        assert_eq!(enc(42, 8), [42]);
        assert_eq!(decode(&[42], 8), Ok((42, 1)));
    }

    #[test]
    fn flags_in_the_first_byte_are_ignored_by_decode() {
        assert_eq!(decode(&[0b1110_1010], 5), Ok((10, 1)));
        let mut out = Vec::new();
        encode(1337, 5, 0b1110_0000, &mut out);
        assert_eq!(decode(&out, 5), Ok((1337, 3)));
    }

    #[test]
    fn round_trips_at_every_prefix_and_boundary() {
        for prefix_bits in 1..=8u8 {
            let max_prefix = (1u64 << prefix_bits) - 1;
            let mut values = vec![0, 1, max_prefix - 1, max_prefix, max_prefix + 1, 127, 128];
            values.extend([
                max_prefix + 127,
                max_prefix + 128,
                16_383,
                16_384,
                INTEGER_MAX,
            ]);
            for value in values {
                let bytes = enc(value as usize, prefix_bits);
                assert_eq!(decode(&bytes, prefix_bits), Ok((value as u32, bytes.len())));
            }
        }
    }

    #[test]
    fn overflow_is_refused() {
        let mut too_big = enc(INTEGER_MAX as usize + 1, 5);
        assert_eq!(decode(&too_big, 5), Err(DecodeError::IntegerOverflow));
        // Redundant zero continuation bytes: small value, excessive length.
        too_big = vec![0x1f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00];
        assert_eq!(decode(&too_big, 5), Err(DecodeError::IntegerOverflow));
        // Five continuation bytes are still fine when the value fits.
        assert_eq!(
            decode(&[0x1f, 0x80, 0x80, 0x80, 0x80, 0x00], 5),
            Ok((31, 6))
        );
        // An endless run of continuation bytes stops at the limit, not at the end of input.
        assert_eq!(decode(&[0xff; 1000], 7), Err(DecodeError::IntegerOverflow));
    }

    #[test]
    fn truncation_is_refused() {
        assert_eq!(decode(&[], 5), Err(DecodeError::Truncated));
        assert_eq!(decode(&[0x1f], 5), Err(DecodeError::Truncated));
        assert_eq!(decode(&[0x1f, 0x9a], 5), Err(DecodeError::Truncated));
    }
}
