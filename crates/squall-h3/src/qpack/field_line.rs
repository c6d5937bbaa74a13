//! The encoded field section (RFC 9204 §4.5): a prefix, then field line representations, as
//! values with their wire layout both ways. Resolving references against the tables is the
//! decoder's business.

use bytes::{BufMut, Bytes};

use super::instruction::TableRef;
use super::prefix::{self, Fault};

/// The field section prefix (§4.5.1): the Required Insert Count, the smallest insert count
/// at which every dynamic reference of the section can be resolved, and the Base that
/// relative and post-base indices count from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SectionPrefix {
    pub required_insert_count: u64,
    pub base: u64,
}

impl SectionPrefix {
    /// Appends the prefix. `max_entries` is the decoder's SETTINGS_QPACK_MAX_TABLE_CAPACITY
    /// divided by 32 (§4.5.1.1); it must be positive when the count is.
    pub fn encode(&self, max_entries: u64, out: &mut impl BufMut) {
        let ric = self.required_insert_count;
        let encoded = if ric == 0 {
            0
        } else {
            assert!(
                max_entries > 0,
                "dynamic references without a dynamic table"
            );
            ric % (2 * max_entries) + 1
        };
        prefix::encode_int(encoded, 8, 0, out);
        if self.base >= ric {
            prefix::encode_int(self.base - ric, 7, 0, out);
        } else {
            prefix::encode_int(ric - self.base - 1, 7, 0x80, out);
        }
    }

    /// Reads the prefix at the front of `src`, reconstructing the Required Insert Count from
    /// its encoding (§4.5.1.1) with `max_entries` as above and `total_inserts`, the decoder's
    /// insert count now. Returns it and the bytes it took.
    pub(crate) fn parse(
        src: &[u8],
        max_entries: u64,
        total_inserts: u64,
    ) -> Result<(Self, usize), Fault> {
        let (encoded, used) = prefix::decode_int(src, 8)?;
        let required_insert_count =
            decode_required_insert_count(encoded, max_entries, total_inserts)?;
        let Some(&first) = src.get(used) else {
            return Err(Fault::Incomplete);
        };
        let (delta, delta_len) = prefix::decode_int(&src[used..], 7)?;
        let base = if first & 0x80 == 0 {
            required_insert_count
                .checked_add(delta)
                .ok_or(Fault::Bad("Base overflows"))?
        } else {
            // §4.5.1.2: Base = ReqInsertCount - DeltaBase - 1, which may not go below 0.
            required_insert_count
                .checked_sub(delta)
                .and_then(|n| n.checked_sub(1))
                .ok_or(Fault::Bad("negative Base"))?
        };
        Ok((
            Self {
                required_insert_count,
                base,
            },
            used + delta_len,
        ))
    }
}

/// §4.5.1.1, step by step as the RFC writes it.
fn decode_required_insert_count(
    encoded: u64,
    max_entries: u64,
    total_inserts: u64,
) -> Result<u64, Fault> {
    if encoded == 0 {
        return Ok(0);
    }
    let full_range = 2 * max_entries;
    if encoded > full_range {
        return Err(Fault::Bad(
            "Required Insert Count past what the table can hold",
        ));
    }
    let max_value = total_inserts + max_entries;
    let max_wrapped = max_value / full_range * full_range;
    let mut ric = max_wrapped + encoded - 1;
    if ric > max_value {
        if ric <= full_range {
            return Err(Fault::Bad("Required Insert Count from the future"));
        }
        ric -= full_range;
    }
    if ric == 0 {
        return Err(Fault::Bad("Required Insert Count of 0 encoded as nonzero"));
    }
    Ok(ric)
}

/// One field line representation (RFC 9204 §4.5.2 to §4.5.6). Dynamic indices are relative
/// to the section's Base: [`TableRef::Dynamic`] counts down from Base - 1, post-base ones up
/// from Base. `never_index` is the N bit: an intermediary must not put the field in a
/// dynamic table when it forwards it (§4.5.4). Strings are `S`: `Bytes` when parsed, the
/// caller's slices when encoded (an answer's fields are encoded without a copy).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FieldLine<S = Bytes> {
    /// §4.5.2 `1T` + index (6-bit prefix).
    Indexed(TableRef),
    /// §4.5.3 `0001` + post-base index (4-bit prefix).
    IndexedPostBase(u64),
    /// §4.5.4 `01NT` + name index (4-bit prefix), value.
    LiteralWithNameRef {
        name: TableRef,
        value: S,
        never_index: bool,
    },
    /// §4.5.5 `0000N` + post-base name index (3-bit prefix), value.
    LiteralWithPostBaseNameRef {
        index: u64,
        value: S,
        never_index: bool,
    },
    /// §4.5.6 `001NH` + name length (3-bit prefix), name, value.
    LiteralWithLiteralName {
        name: S,
        value: S,
        never_index: bool,
    },
}

impl<S: AsRef<[u8]>> FieldLine<S> {
    /// Appends the representation; strings Huffman-coded when `huffman` and that is shorter.
    pub fn encode(&self, huffman: bool, out: &mut impl BufMut) {
        let n = |never_index: bool, bit: u8| if never_index { bit } else { 0 };
        match self {
            Self::Indexed(TableRef::Static(index)) => prefix::encode_int(*index, 6, 0xc0, out),
            Self::Indexed(TableRef::Dynamic(index)) => prefix::encode_int(*index, 6, 0x80, out),
            Self::IndexedPostBase(index) => prefix::encode_int(*index, 4, 0x10, out),
            Self::LiteralWithNameRef {
                name,
                value,
                never_index,
            } => {
                let (index, t) = match *name {
                    TableRef::Static(index) => (index, 0x10),
                    TableRef::Dynamic(index) => (index, 0),
                };
                prefix::encode_int(index, 4, 0x40 | n(*never_index, 0x20) | t, out);
                prefix::encode_string(value.as_ref(), 7, 0, huffman, out);
            }
            Self::LiteralWithPostBaseNameRef {
                index,
                value,
                never_index,
            } => {
                prefix::encode_int(*index, 3, n(*never_index, 0x08), out);
                prefix::encode_string(value.as_ref(), 7, 0, huffman, out);
            }
            Self::LiteralWithLiteralName {
                name,
                value,
                never_index,
            } => {
                prefix::encode_string(name.as_ref(), 3, 0x20 | n(*never_index, 0x10), huffman, out);
                prefix::encode_string(value.as_ref(), 7, 0, huffman, out);
            }
        }
    }
}

impl<S> FieldLine<S> {
    /// Reads the representation at `src[at..]`: it and the offset after it. Each string is
    /// made by `string(from, prefix_bits, cap)`: the string literal at `src[from..]`, capped
    /// at `cap` bytes ([`Fault::OverCap`]), and the offset after it.
    pub(crate) fn parse_with(
        src: &[u8],
        at: usize,
        cap: usize,
        mut string: impl FnMut(usize, u8, usize) -> Result<(S, usize), Fault>,
    ) -> Result<(Self, usize), Fault> {
        let rest = &src[at..];
        let Some(&first) = rest.first() else {
            return Err(Fault::Incomplete);
        };
        let table_ref = |is_static: bool, index: u64| {
            if is_static {
                TableRef::Static(index)
            } else {
                TableRef::Dynamic(index)
            }
        };
        if first & 0x80 != 0 {
            let (index, used) = prefix::decode_int(rest, 6)?;
            Ok((
                Self::Indexed(table_ref(first & 0x40 != 0, index)),
                at + used,
            ))
        } else if first & 0x40 != 0 {
            let (index, used) = prefix::decode_int(rest, 4)?;
            let (value, end) = string(at + used, 7, cap)?;
            let line = Self::LiteralWithNameRef {
                name: table_ref(first & 0x10 != 0, index),
                value,
                never_index: first & 0x20 != 0,
            };
            Ok((line, end))
        } else if first & 0x20 != 0 {
            let (name, at) = string(at, 3, cap)?;
            let (value, end) = string(at, 7, cap)?;
            let line = Self::LiteralWithLiteralName {
                name,
                value,
                never_index: first & 0x10 != 0,
            };
            Ok((line, end))
        } else if first & 0x10 != 0 {
            let (index, used) = prefix::decode_int(rest, 4)?;
            Ok((Self::IndexedPostBase(index), at + used))
        } else {
            let (index, used) = prefix::decode_int(rest, 3)?;
            let (value, end) = string(at + used, 7, cap)?;
            let line = Self::LiteralWithPostBaseNameRef {
                index,
                value,
                never_index: first & 0x08 != 0,
            };
            Ok((line, end))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 9204 §4.5.1.1's example ranges: with 10 entries, every count from 0 to 200
    /// survives encoding against any insert count within MaxEntries of it.
    #[test]
    fn required_insert_count_round_trips_through_its_wrapping() {
        let max_entries = 10;
        for ric in 0..200u64 {
            let prefix = SectionPrefix {
                required_insert_count: ric,
                base: ric,
            };
            let mut out = Vec::new();
            prefix.encode(max_entries, &mut out);
            // The decoder has between RIC - MaxEntries (the encoder cannot reference
            // entries further back, §2.1.1) and RIC - 1 insertions while the section waits,
            // or more once it is unblocked; encoding is unambiguous over that window.
            for total in ric.saturating_sub(max_entries)..ric + max_entries {
                let (parsed, used) = SectionPrefix::parse(&out, max_entries, total).unwrap();
                assert_eq!(
                    (parsed, used),
                    (prefix, out.len()),
                    "ric {ric} total {total}"
                );
            }
        }
    }

    #[test]
    fn impossible_counts_are_refused() {
        // No dynamic table: any nonzero encoding.
        assert!(matches!(
            SectionPrefix::parse(&[0x01, 0x00], 0, 0),
            Err(Fault::Bad(_))
        ));
        // Past 2 * MaxEntries.
        assert!(matches!(
            SectionPrefix::parse(&[0x15, 0x00], 10, 0),
            Err(Fault::Bad(_))
        ));
        // Sign bit with a delta that would make Base negative.
        assert!(matches!(
            SectionPrefix::parse(&[0x02, 0x81], 10, 1),
            Err(Fault::Bad(_))
        ));
        assert_eq!(SectionPrefix::parse(&[0x02], 10, 1), Err(Fault::Incomplete));
    }
}
