//! Huffman coding of string literals (RFC 7541 §5.2, Appendix B).
//!
//! Public because QPACK (RFC 9204 §4.1.2) reuses the same code, and so that tests can build
//! blocks by hand.
//!
//! Encoding packs each octet's code into a 64-bit accumulator and flushes whole bytes; the
//! last byte is padded with the most significant bits of EOS (ones). Decoding runs the
//! table-driven state machine of `decode_table.rs`, four bits per lookup, with no per-bit loop.

mod codes;
mod decode_table;

use bytes::BufMut;

use codes::CODES;
use decode_table::{ACCEPT, ALL_ONES, EMIT, FAIL, TRANSITIONS};

/// Why a Huffman-coded string was refused (RFC 7541 §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HuffmanError {
    /// The string contains the EOS symbol.
    #[error("Huffman string contains EOS")]
    Eos,
    /// The string ends with more than 7 bits of padding.
    #[error("Huffman padding longer than 7 bits")]
    PaddingTooLong,
    /// The padding is not a prefix of EOS (it has a 0 bit).
    #[error("Huffman padding is not a prefix of EOS")]
    PaddingNotOnes,
    /// The decoded string is longer than the caller's cap (not an RFC rule: a limit of ours).
    #[error("Huffman string decodes past the length cap")]
    TooLong,
}

/// The shortest code is 5 bits, so `n` encoded bytes decode to at most `n * 8 / 5` octets.
pub fn decoded_len_max(encoded_len: usize) -> usize {
    encoded_len.saturating_mul(8) / 5
}

/// The longest code of an octet is 30 bits, so `n` encoded bytes decode to at least
/// `n * 8 / 30` octets, rounded down (the last bits may be padding).
pub fn decoded_len_min(encoded_len: usize) -> usize {
    encoded_len.saturating_mul(8) / 30
}

/// The length in bytes of `src` once Huffman-coded, padding included.
pub fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src
        .iter()
        .map(|&b| usize::from(CODES[usize::from(b)].1))
        .sum();
    bits.div_ceil(8)
}

/// Appends the Huffman coding of `src` to `out`, padded with ones to a whole byte.
pub fn encode(src: &[u8], out: &mut impl BufMut) {
    // Fewer than 32 bits wait in `acc` between octets and a code has at most 30 bits, so 61
    // bits are live at a time: a u64 never loses a pending bit. Bits above them are shifted
    // out harmlessly, since only the low `pending` bits are ever read. Flushing 32 bits at a
    // time makes one buffer write per four output bytes.
    let mut acc: u64 = 0;
    let mut pending: u32 = 0;
    for &octet in src {
        let (code, bits) = CODES[usize::from(octet)];
        acc = (acc << bits) | u64::from(code);
        pending += u32::from(bits);
        if pending >= 32 {
            pending -= 32;
            out.put_u32((acc >> pending) as u32);
        }
    }
    while pending >= 8 {
        pending -= 8;
        out.put_u8((acc >> pending) as u8);
    }
    if pending > 0 {
        // RFC 7541 §5.2: pad with the most significant bits of EOS, which are all ones.
        let padding = 8 - pending;
        out.put_u8(((acc << padding) as u8) | (0xff >> pending));
    }
}

/// Decodes the Huffman-coded `src`, appending the octets to `out`. Fails with
/// [`HuffmanError::TooLong`] as soon as more than `cap` octets have been decoded, so a caller
/// bounds its memory by its budget rather than by the input.
pub fn decode(src: &[u8], cap: usize, out: &mut Vec<u8>) -> Result<(), HuffmanError> {
    let start = out.len();
    // Room for every symbol `src` can hold, or for the cap and the two symbols one byte can
    // overshoot it by; plus one, because `decode_into` writes a slot past the last symbol
    // (see there).
    let room = decoded_len_max(src.len()).min(cap.saturating_add(2)) + 1;
    out.resize(start + room, 0);
    let result = decode_into(src, cap, &mut out[start..]);
    out.truncate(start + result.unwrap_or(0));
    result.map(drop)
}

/// The state machine loop, two nibbles per input byte. Returns the number of octets written
/// to the front of `buf`.
///
/// The loop has no branch per symbol: every nibble writes its transition's symbol at `len`
/// and advances `len` only if the nibble completed one, so the next write overwrites a
/// non-symbol. Why `buf` is large enough: before a byte, `len` is at most the cap (checked
/// after every byte) and at most the symbols decoded so far; the byte writes at `len` and
/// `len + 1`, the second only after a first symbol was completed, so the highest slot written
/// is `min(cap + 1, symbols) <= room - 1` with `room` as computed in [`decode`].
fn decode_into(src: &[u8], cap: usize, buf: &mut [u8]) -> Result<usize, HuffmanError> {
    let mut len = 0;
    let mut state = 0u8;
    let mut flags = ACCEPT;
    for &byte in src {
        let high = TRANSITIONS[usize::from(state)][usize::from(byte >> 4)];
        buf[len] = high.symbol;
        len += usize::from(high.flags & EMIT);
        let low = TRANSITIONS[usize::from(high.next)][usize::from(byte & 0x0f)];
        buf[len] = low.symbol;
        len += usize::from(low.flags & EMIT);
        state = low.next;
        flags = low.flags;
        // After a FAIL the machine is back at the root, so checking once per byte is enough.
        if (high.flags | low.flags) & FAIL != 0 {
            return Err(HuffmanError::Eos);
        }
        if len > cap {
            return Err(HuffmanError::TooLong);
        }
    }
    if flags & ACCEPT != 0 {
        Ok(len)
    } else if ALL_ONES[usize::from(state)] {
        Err(HuffmanError::PaddingTooLong)
    } else {
        Err(HuffmanError::PaddingNotOnes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bit-at-a-time decoder written straight from RFC 7541 §5.2, as the reference the table
    /// is checked against. Returns the octets, or the same errors as [`decode`].
    fn reference_decode(src: &[u8]) -> Result<Vec<u8>, HuffmanError> {
        let mut out = Vec::new();
        let (mut code, mut bits) = (0u32, 0u8);
        for i in 0..src.len() * 8 {
            code = (code << 1) | u32::from((src[i / 8] >> (7 - i % 8)) & 1);
            bits += 1;
            if let Some(symbol) = CODES.iter().position(|&c| c == (code, bits)) {
                if symbol == codes::EOS {
                    return Err(HuffmanError::Eos);
                }
                out.push(symbol as u8);
                (code, bits) = (0, 0);
            }
        }
        match (bits, code == (1 << bits) - 1) {
            (0..=7, true) => Ok(out),
            (_, true) => Err(HuffmanError::PaddingTooLong),
            (_, false) => Err(HuffmanError::PaddingNotOnes),
        }
    }

    fn decode_all(src: &[u8]) -> Result<Vec<u8>, HuffmanError> {
        let mut out = Vec::new();
        decode(src, usize::MAX, &mut out).map(|()| out)
    }

    #[test]
    fn codes_are_the_canonical_code_of_their_lengths() {
        let mut order: Vec<usize> = (0..CODES.len()).collect();
        order.sort_by_key(|&s| (CODES[s].1, s));
        let mut code = 0u32;
        let mut prev_bits = CODES[order[0]].1;
        for (k, &symbol) in order.iter().enumerate() {
            let bits = CODES[symbol].1;
            if k > 0 {
                code = (code + 1) << (bits - prev_bits);
            }
            prev_bits = bits;
            assert_eq!(CODES[symbol].0, code, "symbol {symbol}");
        }
        // Kraft: sum of 2^-bits over all symbols is exactly 1, in units of 2^-30.
        let kraft: u64 = CODES.iter().map(|&(_, bits)| 1u64 << (30 - bits)).sum();
        assert_eq!(kraft, 1 << 30);
        assert_eq!(CODES[codes::EOS], (0x3fff_ffff, 30));
    }

    #[test]
    fn every_octet_round_trips_alone_and_in_runs() {
        for octet in 0..=255u8 {
            for run in [1, 2, 3, 7, 8, 9] {
                let src = vec![octet; run];
                let mut enc = Vec::new();
                encode(&src, &mut enc);
                assert_eq!(enc.len(), encoded_len(&src));
                assert_eq!(decode_all(&enc), Ok(src.clone()), "octet {octet} run {run}");
                assert_eq!(reference_decode(&enc), Ok(src));
            }
        }
    }

    #[test]
    fn rfc_7541_c_4_1_authority() {
        let mut enc = Vec::new();
        encode(b"www.example.com", &mut enc);
        let expected = [
            0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
        ];
        assert_eq!(enc, expected);
        assert_eq!(decode_all(&expected).unwrap(), b"www.example.com");
    }

    #[test]
    fn table_agrees_with_the_bit_by_bit_reference_on_random_input() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for round in 0..20_000 {
            let len = round % 9;
            let src: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Bias toward 0xff so EOS and long all-ones paddings come up often.
                    if x.is_multiple_of(3) { 0xff } else { x as u8 }
                })
                .collect();
            assert_eq!(decode_all(&src), reference_decode(&src), "{src:02x?}");
        }
    }

    #[test]
    fn padding_and_eos_errors() {
        // "a" is 00011 (5 bits): 3 bits of ones pad it to a byte.
        assert_eq!(decode_all(&[0b0001_1111]), Ok(b"a".to_vec()));
        // The same with a 0 in the padding.
        assert_eq!(
            decode_all(&[0b0001_1110]),
            Err(HuffmanError::PaddingNotOnes)
        );
        // A whole byte of ones after a symbol boundary is padding of 8 bits.
        assert_eq!(
            decode_all(&[0b0001_1111, 0xff]),
            Err(HuffmanError::PaddingTooLong)
        );
        assert_eq!(decode_all(&[0xff]), Err(HuffmanError::PaddingTooLong));
        // EOS (30 ones) spelled out, then padded: invalid even though it is "all ones".
        assert_eq!(
            decode_all(&[0xff, 0xff, 0xff, 0xff]),
            Err(HuffmanError::Eos)
        );
        // The empty string is valid.
        assert_eq!(decode_all(&[]), Ok(Vec::new()));
    }

    #[test]
    fn any_cap_is_safe_and_exact() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..5_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 40) as usize;
            let src: Vec<u8> = (0..len).map(|i| (x >> (i % 8 * 8)) as u8 | 0x20).collect();
            let mut enc = Vec::new();
            encode(&src, &mut enc);
            let cap = (x >> 40) as usize % 45;
            let mut out = vec![7u8; 3];
            let result = decode(&enc, cap, &mut out);
            if len <= cap {
                assert_eq!(result, Ok(()), "round {round}");
                assert_eq!(out[3..], src[..], "round {round}");
            } else {
                assert_eq!(result, Err(HuffmanError::TooLong), "round {round}");
                assert_eq!(out, [7, 7, 7], "round {round}: nothing appended on error");
            }
        }
    }

    #[test]
    fn cap_stops_decoding_early() {
        let mut enc = Vec::new();
        encode(&[b'a'; 100], &mut enc);
        let mut out = Vec::new();
        assert_eq!(decode(&enc, 10, &mut out), Err(HuffmanError::TooLong));
        assert!(
            out.len() <= 12,
            "stopped within a byte of the cap: {}",
            out.len()
        );
        let mut out = Vec::new();
        assert_eq!(decode(&enc, 100, &mut out), Ok(()));
        assert_eq!(out.len(), 100);
    }

    #[test]
    fn length_bounds_hold() {
        for octet in 0..=255u8 {
            let src = [octet; 5];
            let n = encoded_len(&src);
            assert!(
                decoded_len_min(n) <= 5 && 5 <= decoded_len_max(n),
                "octet {octet}"
            );
        }
    }
}
