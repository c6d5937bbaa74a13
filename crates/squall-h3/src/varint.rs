//! QUIC variable-length integers (RFC 9000 §16), which HTTP/3 uses for frame types, frame
//! lengths, stream types, setting identifiers and values, and push and stream ids.
//!
//! The two high bits of the first byte give the length (1, 2, 4 or 8 bytes); the other bits,
//! with the bytes that follow, are the value in network byte order. Values go up to
//! [`VARINT_MAX`] (2^62 - 1). A decoder must accept an encoding longer than needed (RFC 9000
//! §16: "values do not need to be encoded on the minimum number of bytes"), so nothing here
//! refuses one; the encoder always writes the shortest.

use bytes::BufMut;

/// The largest value a variable-length integer carries: 2^62 - 1.
pub const VARINT_MAX: u64 = (1 << 62) - 1;

/// The longest encoding, in bytes.
pub const VARINT_BYTES_MAX: usize = 8;

/// The number of bytes the encoding that starts with `first` takes: 1, 2, 4 or 8.
pub fn len_from_first(first: u8) -> usize {
    1 << (first >> 6)
}

/// The number of bytes [`encode`] writes for `value`. Panics above [`VARINT_MAX`].
pub fn encoded_len(value: u64) -> usize {
    match value {
        0..=0x3f => 1,
        0x40..=0x3fff => 2,
        0x4000..=0x3fff_ffff => 4,
        0x4000_0000..=VARINT_MAX => 8,
        _ => panic!("{value} does not fit a QUIC variable-length integer"),
    }
}

/// A value above [`VARINT_MAX`], which no variable-length integer carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge(pub u64);

/// Appends `value` in its shortest encoding and returns its length, or refuses a value above
/// [`VARINT_MAX`] (writing nothing).
pub fn try_encode(value: u64, out: &mut impl BufMut) -> Result<usize, TooLarge> {
    let len = match value {
        0..=0x3f => 1,
        0x40..=0x3fff => 2,
        0x4000..=0x3fff_ffff => 4,
        0x4000_0000..=VARINT_MAX => 8,
        _ => return Err(TooLarge(value)),
    };
    match len {
        1 => out.put_u8(value as u8),
        2 => out.put_u16(0x4000 | value as u16),
        4 => out.put_u32(0x8000_0000 | value as u32),
        _ => out.put_u64(0xc000_0000_0000_0000 | value),
    }
    Ok(len)
}

/// Appends `value` in its shortest encoding. Every value this crate writes is bounded below
/// [`VARINT_MAX`] (types, lengths of buffers, stream and push ids, which QUIC bounds, and
/// setting values, clamped to it): a larger one is a bug of the caller's, and panics.
pub fn encode(value: u64, out: &mut impl BufMut) {
    if let Err(TooLarge(value)) = try_encode(value, out) {
        panic!("{value} does not fit a QUIC variable-length integer");
    }
}

/// Decodes the integer at the front of `src`: its value and its length, or `None` when
/// `src` ends before the encoding does. Never fails otherwise: every byte string that long
/// is some integer.
pub fn decode(src: &[u8]) -> Option<(u64, usize)> {
    let first = *src.first()?;
    let len = len_from_first(first);
    let bytes = src.get(..len)?;
    let mut value = u64::from(first & 0x3f);
    for &byte in &bytes[1..] {
        value = (value << 8) | u64::from(byte);
    }
    Some((value, len))
}

/// An integer read a byte at a time, for input that arrives in arbitrary pieces (a stream
/// type, or a frame header split across QUIC packets).
#[derive(Debug, Clone, Default)]
pub struct VarintReader {
    bytes: [u8; VARINT_BYTES_MAX],
    have: usize,
}

impl VarintReader {
    /// A reader with nothing read yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes bytes from the front of `src` until the integer is complete, and returns it then
    /// (the reader is empty again). `None`: `src` ran out first; what it held is kept.
    pub fn read(&mut self, src: &mut &[u8]) -> Option<u64> {
        while let Some((&byte, rest)) = src.split_first() {
            *src = rest;
            self.bytes[self.have] = byte;
            self.have += 1;
            if self.have == len_from_first(self.bytes[0]) {
                let value = decode(&self.bytes[..self.have]).map(|(value, _)| value);
                self.have = 0;
                return value;
            }
        }
        None
    }

    /// True when part of an integer has been read.
    pub fn is_partial(&self) -> bool {
        self.have > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(value: u64) -> Vec<u8> {
        let mut out = Vec::new();
        encode(value, &mut out);
        out
    }

    #[test]
    fn boundaries_round_trip_at_their_lengths() {
        for (value, len) in [
            (0, 1),
            (63, 1),
            (64, 2),
            (16_383, 2),
            (16_384, 4),
            (0x3fff_ffff, 4),
            (0x4000_0000, 8),
            (VARINT_MAX, 8),
        ] {
            let bytes = enc(value);
            assert_eq!(bytes.len(), len, "{value}");
            assert_eq!(encoded_len(value), len);
            assert_eq!(decode(&bytes), Some((value, len)));
            for cut in 0..len {
                assert_eq!(decode(&bytes[..cut]), None);
            }
        }
    }

    #[test]
    fn a_value_past_the_maximum_is_refused_and_nothing_written() {
        let mut out = Vec::new();
        assert_eq!(
            try_encode(VARINT_MAX + 1, &mut out),
            Err(TooLarge(VARINT_MAX + 1))
        );
        assert_eq!(try_encode(u64::MAX, &mut out), Err(TooLarge(u64::MAX)));
        assert!(out.is_empty());
        assert_eq!(try_encode(VARINT_MAX, &mut out), Ok(8));
        assert_eq!(decode(&out), Some((VARINT_MAX, 8)));
    }

    #[test]
    fn the_reader_takes_one_byte_at_a_time() {
        let bytes = enc(151_288_809_941_952_652);
        let mut reader = VarintReader::new();
        for (i, byte) in bytes.iter().enumerate() {
            let mut src = &[*byte][..];
            let got = reader.read(&mut src);
            assert!(src.is_empty());
            if i + 1 < bytes.len() {
                assert_eq!(got, None);
                assert!(reader.is_partial());
            } else {
                assert_eq!(got, Some(151_288_809_941_952_652));
                assert!(!reader.is_partial());
            }
        }
        // It stops at the integer's end and leaves the rest.
        let mut src = &[0x25, 0x40, 0x25, 0xff][..];
        assert_eq!(reader.read(&mut src), Some(37));
        assert_eq!(reader.read(&mut src), Some(37));
        assert_eq!(src, [0xff]);
    }
}
