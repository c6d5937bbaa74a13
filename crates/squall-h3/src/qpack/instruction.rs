//! The instructions of the two QPACK streams (RFC 9204 §4.3, §4.4) as values: their wire
//! layout, both ways. What they do to a table is the encoder's and the decoder's business.

use bytes::{BufMut, Bytes};

use super::QpackError;
use super::prefix::{self, Fault};

/// A reference to a table entry by index: into the static table, or into the dynamic table
/// by *relative* index (RFC 9204 §3.2.5: from the insert count on the encoder stream, from
/// the Base in a field section, counting down from 0 for the newest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TableRef {
    Static(u64),
    Dynamic(u64),
}

/// An encoder stream instruction (RFC 9204 §4.3).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EncoderInstruction {
    /// §4.3.1 `001` + capacity (5-bit prefix).
    SetCapacity(u64),
    /// §4.3.2 `1T` + name index (6-bit prefix), then the value.
    InsertWithNameRef { name: TableRef, value: Bytes },
    /// §4.3.3 `01H` + name length (5-bit prefix), the name, then the value.
    InsertWithLiteralName { name: Bytes, value: Bytes },
    /// §4.3.4 `000` + relative index (5-bit prefix).
    Duplicate(u64),
}

/// A decoder stream instruction (RFC 9204 §4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecoderInstruction {
    /// §4.4.1 `1` + stream id (7-bit prefix): a field section with dynamic references was
    /// decoded.
    SectionAck(u64),
    /// §4.4.2 `01` + stream id (6-bit prefix): the stream was reset or abandoned.
    StreamCancel(u64),
    /// §4.4.3 `00` + increment (6-bit prefix): this many more insertions were received.
    InsertCountIncrement(u64),
}

impl EncoderInstruction {
    /// Appends the instruction; strings Huffman-coded when `huffman` and that is shorter.
    pub fn encode(&self, huffman: bool, out: &mut impl BufMut) {
        match self {
            Self::SetCapacity(capacity) => prefix::encode_int(*capacity, 5, 0x20, out),
            Self::InsertWithNameRef { name, value } => {
                let (index, t) = match *name {
                    TableRef::Static(index) => (index, 0x40),
                    TableRef::Dynamic(index) => (index, 0),
                };
                prefix::encode_int(index, 6, 0x80 | t, out);
                prefix::encode_string(value, 7, 0, huffman, out);
            }
            Self::InsertWithLiteralName { name, value } => {
                prefix::encode_string(name, 5, 0x40, huffman, out);
                prefix::encode_string(value, 7, 0, huffman, out);
            }
            Self::Duplicate(index) => prefix::encode_int(*index, 5, 0, out),
        }
    }

    /// Reads the instruction at the front of `src`: it and its length, or `None` if `src`
    /// ends inside it. Errors are QPACK_ENCODER_STREAM_ERROR.
    pub fn parse(src: &[u8]) -> Result<Option<(Self, usize)>, QpackError> {
        match Self::parse_capped(src, usize::MAX) {
            Ok(parsed) => Ok(Some(parsed)),
            Err(Fault::Incomplete) => Ok(None),
            Err(Fault::OverCap) => unreachable!("no cap"),
            Err(Fault::Bad(reason)) => Err(QpackError::EncoderStream(reason)),
        }
    }

    /// [`Self::parse`], refusing with [`Fault::OverCap`] a name or value longer than `cap`
    /// as soon as its length is read, before its bytes arrive.
    pub(crate) fn parse_capped(src: &[u8], cap: usize) -> Result<(Self, usize), Fault> {
        let Some(&first) = src.first() else {
            return Err(Fault::Incomplete);
        };
        if first & 0x80 != 0 {
            let (index, at) = prefix::decode_int(src, 6)?;
            let name = if first & 0x40 != 0 {
                TableRef::Static(index)
            } else {
                TableRef::Dynamic(index)
            };
            let (value, end) = prefix::decode_string(src, at, 7, cap)?;
            let value = Bytes::copy_from_slice(value.bytes(src));
            Ok((Self::InsertWithNameRef { name, value }, end))
        } else if first & 0x40 != 0 {
            let (name, at) = prefix::decode_string(src, 0, 5, cap)?;
            let (value, end) = prefix::decode_string(src, at, 7, cap - name.len())?;
            let name = Bytes::copy_from_slice(name.bytes(src));
            let value = Bytes::copy_from_slice(value.bytes(src));
            Ok((Self::InsertWithLiteralName { name, value }, end))
        } else if first & 0x20 != 0 {
            let (capacity, end) = prefix::decode_int(src, 5)?;
            Ok((Self::SetCapacity(capacity), end))
        } else {
            let (index, end) = prefix::decode_int(src, 5)?;
            Ok((Self::Duplicate(index), end))
        }
    }
}

impl DecoderInstruction {
    /// Appends the instruction.
    pub fn encode(&self, out: &mut impl BufMut) {
        match *self {
            Self::SectionAck(stream_id) => prefix::encode_int(stream_id, 7, 0x80, out),
            Self::StreamCancel(stream_id) => prefix::encode_int(stream_id, 6, 0x40, out),
            Self::InsertCountIncrement(n) => prefix::encode_int(n, 6, 0, out),
        }
    }

    /// Reads the instruction at the front of `src`: it and its length, or `None` if `src`
    /// ends inside it. Errors are QPACK_DECODER_STREAM_ERROR.
    pub fn parse(src: &[u8]) -> Result<Option<(Self, usize)>, QpackError> {
        let Some(&first) = src.first() else {
            return Ok(None);
        };
        let parsed = if first & 0x80 != 0 {
            prefix::decode_int(src, 7).map(|(id, len)| (Self::SectionAck(id), len))
        } else if first & 0x40 != 0 {
            prefix::decode_int(src, 6).map(|(id, len)| (Self::StreamCancel(id), len))
        } else {
            prefix::decode_int(src, 6).map(|(n, len)| (Self::InsertCountIncrement(n), len))
        };
        match parsed {
            Ok(parsed) => Ok(Some(parsed)),
            Err(Fault::Incomplete) => Ok(None),
            Err(Fault::Bad(reason)) => Err(QpackError::DecoderStream(reason)),
            Err(Fault::OverCap) => unreachable!("integers have no cap"),
        }
    }
}
