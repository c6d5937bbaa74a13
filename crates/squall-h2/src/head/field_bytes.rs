//! The byte rules of a field line in HTTP/2 and HTTP/3 (RFC 9113 §8.2.1, RFC 9114 §4.2, with
//! RFC 9110's token): which bytes a name and a value may hold, checked a table lookup a byte
//! (names) or eight bytes at a time (values), each value once. The request and trailer
//! parsers in `head.rs` call these; the messages are the ones a malformed request is reset
//! with.

use super::{HeadError, is_connection_specific};

/// §8.2.1: no NUL, CR or LF anywhere, no whitespace at either end. True when the value holds
/// only what a regular field's may ([`VALUE_BYTES`]), so that `Regular::add` need not
/// look again.
pub(super) fn check_value(value: &[u8]) -> Result<bool, HeadError> {
    let clean = plain(value) || value.iter().all(|&b| VALUE_BYTES[usize::from(b)]);
    if !clean && value.iter().any(|&b| matches!(b, 0 | b'\r' | b'\n')) {
        return Err(HeadError::Malformed("field value with NUL, CR or LF"));
    }
    let blank = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    if blank(value.first()) || blank(value.last()) {
        return Err(HeadError::Malformed(
            "field value with whitespace at an end",
        ));
    }
    Ok(clean)
}

/// True when no byte of `value` is a control byte or DEL, eight bytes at a time (a tab gives
/// false: [`VALUE_BYTES`] decides then). The word tests are the classic ones: a byte below
/// 0x20 borrows into its top bit when 0x20 is taken from it, and only DEL gives zero when
/// XORed with 0x7f.
fn plain(value: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const TOPS: u64 = u64::from_ne_bytes([0x80; 8]);
    let mut words = value.chunks_exact(8);
    for word in &mut words {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(word);
        let x = u64::from_le_bytes(bytes);
        let below_space = x.wrapping_sub(ONES * 0x20) & !x & TOPS;
        let del = x ^ (ONES * 0x7f);
        let is_del = del.wrapping_sub(ONES) & !del & TOPS;
        if below_space | is_del != 0 {
            return false;
        }
    }
    (words.remainder().iter()).all(|&b| b >= 0x20 && b != 0x7f)
}

/// The bytes a regular field's value may hold (what `http::HeaderValue` accepts): every byte
/// but the controls other than tab, and DEL. One table lookup a byte, where the rules read
/// as two scans with several comparisons each (profiled: 6% of a small HTTP/2 request's CPU
/// went to checking its head).
static VALUE_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = (b >= 0x20 && b != 0x7f) || b == 0x09;
        b += 1;
    }
    table
};

/// The bytes of a field name as HTTP/2 and HTTP/3 carry it: a token's (RFC 9110 §5.6.2) but
/// for the uppercase letters (§8.2.1).
static NAME_BYTES: [bool; 256] = token_bytes(false);

/// A token's bytes (RFC 9110 §5.6.2 `tchar`), uppercase letters included.
static TOKEN_BYTES: [bool; 256] = token_bytes(true);

/// The bytes a token may hold: letters (the uppercase ones if `uppercase`), digits and
/// these symbols.
const fn token_bytes(uppercase: bool) -> [bool; 256] {
    const SYMBOLS: &[u8] = b"!#$%&'*+-.^_`|~";
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_lowercase() || c.is_ascii_digit();
        table[b] |= uppercase && c.is_ascii_uppercase();
        b += 1;
    }
    let mut i = 0;
    while i < SYMBOLS.len() {
        table[SYMBOLS[i] as usize] = true;
        i += 1;
    }
    table
}

/// §8.2.1 and §8.2.2: a lowercase token, not connection-specific, of at most 65,535 bytes
/// (what `http::HeaderName` holds, for the edges that convert).
pub(super) fn check_name(name: &[u8]) -> Result<(), HeadError> {
    let lowercase_token = !name.is_empty() && name.iter().all(|&b| NAME_BYTES[usize::from(b)]);
    if lowercase_token && name.len() <= usize::from(u16::MAX) {
        if is_connection_specific(name) {
            return Err(HeadError::Malformed("connection-specific field"));
        }
        return Ok(());
    }
    if name.iter().any(u8::is_ascii_uppercase) {
        return Err(HeadError::Malformed("uppercase field name"));
    }
    if is_connection_specific(name) {
        return Err(HeadError::Malformed("connection-specific field"));
    }
    if name.len() > usize::from(u16::MAX) || !is_token(name) {
        return Err(HeadError::Malformed("invalid field name"));
    }
    Ok(())
}

/// RFC 9110 §5.6.2: a non-empty token. Field names are one, and so is a `:protocol` (an
/// `Upgrade` protocol name, RFC 8441 §4, which may carry a version: `websocket/13`).
pub(super) fn is_token(bytes: &[u8]) -> bool {
    let token = |&b: &u8| TOKEN_BYTES[usize::from(b)];
    !bytes.is_empty() && bytes.iter().all(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-at-a-time test finds a control byte or DEL wherever it lies in a word or
    /// the tail, among any other bytes, and never refuses a byte that is allowed.
    #[test]
    fn plain_values_are_found_word_by_word() {
        for b in 0..=255u8 {
            let control = b < 0x20 || b == 0x7f;
            for filler in [b'a', b' ', 0x80, 0xff, 0x7e, 0x21] {
                for len in [1, 7, 8, 9, 16, 17, 23] {
                    for at in 0..len {
                        let mut value = vec![filler; len];
                        value[at] = b;
                        assert_eq!(plain(&value), !control, "{b:#04x} at {at} of {len}");
                    }
                }
            }
        }
        assert!(plain(b""));
    }
}
