//! The HPACK decoder (RFC 7541 §3, §6): turns a complete header block into fields, keeping
//! the dynamic table in step with the peer's encoder. How it resists "HPACK bombs" is told
//! on [`Decoder`].
//!
//! The fields of a block are written one after the other into one buffer, with a
//! [`FieldSpan`] saying where each lies ([`Decoder::decode_spans`]): a request head costs one
//! buffer and one list, not an allocation per field. [`Decoder::decode`] hands out the same
//! fields as [`Field`]s, slices of that one buffer.

mod table;

use bytes::{Bytes, BytesMut};

use crate::huffman::{self, HuffmanError};
use crate::static_table::{STATIC_TABLE, STATIC_TABLE_LEN};
use crate::{DYNAMIC_TABLE_BYTES_DEFAULT, DecodeError, ENTRY_OVERHEAD_BYTES, Field, integer};
use table::DynamicTable;

/// The decoding half of an HPACK context: one per connection, fed every header block the
/// peer sends, in order.
///
/// # Bounded by the header list size
///
/// A block of a few bytes can name a large dynamic table entry thousands of times (an "HPACK
/// bomb"). So the caller passes its SETTINGS_MAX_HEADER_LIST_SIZE and the decoder counts every
/// field as RFC 9113 §6.5.2 does (name + value + 32 bytes) *before* emitting it or allocating
/// its strings. Past the limit it stops emitting and allocating for the rest of the block, but
/// still parses it to the end and applies its table insertions, because the encoder has
/// applied them too: the stream is refused, the connection keeps a consistent table.
///
/// Strings are capped by the remaining budget while they are decoded, so an oversized literal
/// is skipped without being allocated. The one exception is a literal with incremental
/// indexing, which must reach the table even if the list is over its limit; its allocation is
/// bounded by the block itself (a Huffman string decodes to at most 8/5 of its length).
///
/// Cloning copies the table's entries by reference count, not their bytes.
#[derive(Debug, Clone)]
pub struct Decoder {
    table: DynamicTable,
    /// Our SETTINGS_HEADER_TABLE_SIZE, as last acknowledged: the most a size update may ask.
    limit: usize,
    /// Set when the limit was lowered below the table's maximum: the next block must start
    /// with a size update no larger than this (RFC 7541 §4.2).
    required_update: Option<usize>,
    /// The error that broke the table's sync with the encoder; every later call returns it.
    poisoned: Option<DecodeError>,
    /// Where Huffman strings are decoded before being copied out at their exact length; kept
    /// between blocks so a block costs one allocation per string, not two.
    scratch: Vec<u8>,
}

/// Where one decoded field lies in the buffer [`Decoder::decode_spans`] wrote it into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldSpan {
    /// Offset of the name in the buffer.
    pub name: u32,
    pub name_len: u32,
    /// Offset of the value in the buffer; the value follows the name.
    pub value: u32,
    pub value_len: u32,
    /// Sent as "literal never indexed" (see [`Field::sensitive`]).
    pub sensitive: bool,
}

impl FieldSpan {
    /// The name, in the buffer the span was decoded into.
    pub fn name<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        &buf[self.name as usize..(self.name + self.name_len) as usize]
    }

    /// The value, in the buffer the span was decoded into.
    pub fn value<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        &buf[self.value as usize..(self.value + self.value_len) as usize]
    }
}

/// Where a block's fields go: their bytes, then their spans.
struct Out<'a> {
    bytes: &'a mut BytesMut,
    spans: &'a mut Vec<FieldSpan>,
}

impl Out<'_> {
    /// Records the field whose name and value were just written from `at` on.
    fn push(&mut self, at: usize, name_len: usize, value_len: usize, sensitive: bool) {
        debug_assert_eq!(at + name_len + value_len, self.bytes.len());
        // `decode_spans` bounds the buffer at u32::MAX bytes.
        self.spans.push(FieldSpan {
            name: at as u32,
            name_len: name_len as u32,
            value: (at + name_len) as u32,
            value_len: value_len as u32,
            sensitive,
        });
    }

    /// Copies a table entry in as a field.
    fn push_copy(&mut self, name: &[u8], value: &[u8]) {
        let at = self.bytes.len();
        self.bytes.extend_from_slice(name);
        self.bytes.extend_from_slice(value);
        self.push(at, name.len(), value.len(), false);
    }
}

/// Scratch capacity kept between blocks. Most strings are far shorter; a rare large one
/// should not pin its buffer to the connection for good.
const SCRATCH_BYTES_KEPT_MAX: usize = 4096;

/// The three kinds of literal field representation (RFC 7541 §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Literal {
    /// §6.2.1: `01` and a 6-bit index; the field is added to the dynamic table.
    Incremental,
    /// §6.2.2: `0000` and a 4-bit index.
    WithoutIndexing,
    /// §6.2.3: `0001` and a 4-bit index; intermediaries must keep it a literal.
    NeverIndexed,
}

impl Literal {
    fn prefix_bits(self) -> u8 {
        match self {
            Literal::Incremental => 6,
            Literal::WithoutIndexing | Literal::NeverIndexed => 4,
        }
    }
}

/// What is left of the caller's header list budget for the block being decoded.
struct Budget {
    limit: usize,
    used: usize,
    exceeded: bool,
}

impl Budget {
    /// The longest string one more field could still carry (its name and value together).
    fn string_cap(&self) -> usize {
        if self.exceeded {
            return 0;
        }
        (self.limit - self.used).saturating_sub(ENTRY_OVERHEAD_BYTES)
    }

    /// Counts a field of this size against the budget; false (from now on) once over.
    fn admit(&mut self, name_len: usize, value_len: usize) -> bool {
        if self.exceeded {
            return false;
        }
        let size = name_len + value_len + ENTRY_OVERHEAD_BYTES;
        if size > self.limit - self.used {
            self.exceeded = true;
            return false;
        }
        self.used += size;
        true
    }
}

impl Decoder {
    /// A decoder whose table starts at, and is limited to, `max_table_size` bytes: the
    /// SETTINGS_HEADER_TABLE_SIZE both sides start with, [`DYNAMIC_TABLE_BYTES_DEFAULT`] in
    /// HTTP/2 (RFC 9113 §6.5.2).
    pub fn new(max_table_size: usize) -> Self {
        Self {
            table: DynamicTable::new(max_table_size),
            limit: max_table_size,
            required_update: None,
            poisoned: None,
            scratch: Vec::new(),
        }
    }

    /// Sets the limit on the table's size, when the peer has acknowledged a
    /// SETTINGS_HEADER_TABLE_SIZE of ours. If the table is now larger than the limit, the next
    /// block must start with a size update that fits, or it is refused (RFC 7541 §4.2: "the
    /// smallest maximum table size that occurs in that interval MUST be signaled").
    pub fn set_max_table_size_limit(&mut self, limit: usize) {
        self.limit = limit;
        if limit < self.table.max_size() {
            let lowest = self.required_update.map_or(limit, |r| r.min(limit));
            self.required_update = Some(lowest);
        }
    }

    /// Decodes one complete header block (the HEADERS frame's fragment and its CONTINUATION
    /// fragments, joined), calling `emit` for each field in order. The fields share one
    /// buffer (see [`Decoder::decode_spans`]).
    ///
    /// `max_header_list_size` bounds the fields' total size (RFC 9113 §6.5.2). On
    /// [`DecodeError::HeaderListTooLarge`] the fields emitted so far must be dropped, but the
    /// decoder stays usable; on any other error it is poisoned (see [`DecodeError`]).
    pub fn decode(
        &mut self,
        block: &[u8],
        max_header_list_size: usize,
        mut emit: impl FnMut(Field),
    ) -> Result<(), DecodeError> {
        let mut bytes = BytesMut::new();
        let mut spans = Vec::new();
        let result = self.decode_spans(block, max_header_list_size, &mut bytes, &mut spans);
        let bytes = bytes.freeze();
        for span in spans {
            let name = span.name as usize..(span.name + span.name_len) as usize;
            let value = span.value as usize..(span.value + span.value_len) as usize;
            emit(Field {
                name: bytes.slice(name),
                value: bytes.slice(value),
                sensitive: span.sensitive,
            });
        }
        result
    }

    /// Decodes one complete header block as [`Decoder::decode`] does, writing each field's
    /// name and value at the end of `bytes` and where they lie at the end of `spans`, in
    /// order. Nothing is allocated per field, except a table entry's copy for a literal with
    /// incremental indexing. The list's size is checked before a field's bytes are written,
    /// so `bytes` grows by at most `max_header_list_size`; on an error, what was added to
    /// `bytes` and `spans` must be dropped.
    pub fn decode_spans(
        &mut self,
        block: &[u8],
        max_header_list_size: usize,
        bytes: &mut BytesMut,
        spans: &mut Vec<FieldSpan>,
    ) -> Result<(), DecodeError> {
        if let Some(error) = self.poisoned {
            return Err(error);
        }
        // Offsets are u32: a limit that would carry them past u32::MAX is one that large.
        let room = (u32::MAX as usize).saturating_sub(bytes.len().saturating_add(block.len()));
        let mut budget = Budget {
            limit: max_header_list_size.min(room),
            used: 0,
            exceeded: false,
        };
        let mut out = Out { bytes, spans };
        let result = self.decode_block(block, &mut budget, &mut out);
        if self.scratch.capacity() > SCRATCH_BYTES_KEPT_MAX {
            self.scratch = Vec::new();
        }
        match result {
            Err(error) => {
                self.poisoned = Some(error);
                Err(error)
            }
            Ok(()) if budget.exceeded => Err(DecodeError::HeaderListTooLarge {
                limit: max_header_list_size,
            }),
            Ok(()) => Ok(()),
        }
    }

    /// [`Decoder::decode`] into a `Vec`.
    pub fn decode_to_vec(
        &mut self,
        block: &[u8],
        max_header_list_size: usize,
    ) -> Result<Vec<Field>, DecodeError> {
        let mut fields = Vec::new();
        self.decode(block, max_header_list_size, |field| fields.push(field))?;
        Ok(fields)
    }

    /// The table's current size in bytes (RFC 7541 §4.1).
    pub fn table_size(&self) -> usize {
        self.table.size()
    }

    /// The table's maximum size, as the encoder last set it.
    pub fn max_table_size(&self) -> usize {
        self.table.max_size()
    }

    /// The dynamic table's entries, newest (index 62) first.
    pub fn dynamic_table(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.table.iter().map(|(n, v)| (&n[..], &v[..]))
    }

    /// Asserts the decoder's invariants; tests call it after every block.
    #[doc(hidden)]
    pub fn check_invariants(&self) {
        self.table.check_invariants();
        if self.required_update.is_none() && self.poisoned.is_none() {
            assert!(self.table.max_size() <= self.limit);
        }
        assert!(self.scratch.capacity() <= SCRATCH_BYTES_KEPT_MAX);
    }

    fn decode_block(
        &mut self,
        block: &[u8],
        budget: &mut Budget,
        out: &mut Out<'_>,
    ) -> Result<(), DecodeError> {
        let mut pos = self.size_updates(block)?;
        while let Some(&first) = block.get(pos) {
            let rest = &block[pos..];
            // RFC 7541 §6: the representation is told by the leading bits of its first byte.
            pos += match first {
                0x80..=0xff => self.indexed(rest, budget, out)?,
                0x40..=0x7f => self.literal(rest, Literal::Incremental, budget, out)?,
                0x20..=0x3f => return Err(DecodeError::SizeUpdateNotAtStart),
                0x10..=0x1f => self.literal(rest, Literal::NeverIndexed, budget, out)?,
                0x00..=0x0f => self.literal(rest, Literal::WithoutIndexing, budget, out)?,
            };
        }
        Ok(())
    }

    /// Applies the dynamic table size updates at the start of `block` (RFC 7541 §4.2, §6.3)
    /// and returns the bytes they took.
    fn size_updates(&mut self, block: &[u8]) -> Result<usize, DecodeError> {
        let mut required = self.required_update.take();
        let mut pos = 0;
        while let Some(&first) = block.get(pos) {
            if first & 0xe0 != 0x20 {
                break;
            }
            let (size, len) = integer::decode(&block[pos..], 5)?;
            pos += len;
            if size as usize > self.limit {
                return Err(DecodeError::SizeUpdateOverLimit {
                    size,
                    limit: self.limit,
                });
            }
            if required.take().is_some_and(|lowest| size as usize > lowest) {
                return Err(DecodeError::SizeUpdateMissing);
            }
            self.table.set_max_size(size as usize);
        }
        match required {
            Some(_) => Err(DecodeError::SizeUpdateMissing),
            None => Ok(pos),
        }
    }

    /// An indexed field (RFC 7541 §6.1). Returns the bytes it took.
    fn indexed(
        &self,
        src: &[u8],
        budget: &mut Budget,
        out: &mut Out<'_>,
    ) -> Result<usize, DecodeError> {
        let (index, len) = integer::decode(src, 7)?;
        let (name, value) = self.entry(index)?;
        if budget.admit(name.len(), value.len()) {
            out.push_copy(name, value);
        }
        Ok(len)
    }

    /// A literal field (RFC 7541 §6.2), with an indexed or a literal name. Returns the bytes
    /// it took.
    fn literal(
        &mut self,
        src: &[u8],
        kind: Literal,
        budget: &mut Budget,
        out: &mut Out<'_>,
    ) -> Result<usize, DecodeError> {
        let (index, mut pos) = integer::decode(src, kind.prefix_bits())?;
        let insert = kind == Literal::Incremental;
        // See the module documentation: a field bound for the table is decoded whatever its
        // size; any other is capped by the budget.
        let cap = if insert {
            usize::MAX
        } else {
            budget.string_cap()
        };
        let start = out.bytes.len();
        // The name is copied out before the insertion below, which may evict the entry it
        // names (RFC 7541 §4.4).
        let name_fits = if index == 0 {
            let (fits, len) = self.string(&src[pos..], cap, out.bytes)?;
            pos += len;
            fits
        } else {
            let name = &self.entry(index)?.0;
            let fits = name.len() <= cap;
            if fits {
                out.bytes.extend_from_slice(name);
            }
            fits
        };
        let name_len = out.bytes.len() - start;
        let value_cap = if name_fits { cap - name_len } else { 0 };
        let (value_fits, len) = self.string(&src[pos..], value_cap, out.bytes)?;
        pos += len;
        if !(name_fits && value_fits) {
            // Only a capped string is skipped, and only when the budget cannot hold it.
            debug_assert!(!insert);
            out.bytes.truncate(start);
            budget.exceeded = true;
            return Ok(pos);
        }
        let value_len = out.bytes.len() - start - name_len;
        if insert {
            // One allocation holds the entry's name and value.
            let entry = Bytes::copy_from_slice(&out.bytes[start..]);
            self.table
                .insert(entry.slice(..name_len), entry.slice(name_len..));
        }
        if budget.admit(name_len, value_len) {
            out.push(start, name_len, value_len, kind == Literal::NeverIndexed);
        } else {
            out.bytes.truncate(start);
        }
        Ok(pos)
    }

    /// A string literal (RFC 7541 §5.2) at the front of `src`, written at the end of `dst`,
    /// and the bytes it took. The string is skipped undecoded (false) when it would be
    /// longer than `cap`.
    fn string(
        &mut self,
        src: &[u8],
        cap: usize,
        dst: &mut BytesMut,
    ) -> Result<(bool, usize), DecodeError> {
        let (len, prefix_len) = integer::decode(src, 7)?;
        let end = prefix_len.saturating_add(len as usize);
        let Some(raw) = src.get(prefix_len..end) else {
            return Err(DecodeError::Truncated);
        };
        let is_huffman = src[0] & 0x80 != 0;
        if !is_huffman {
            let fits = raw.len() <= cap;
            if fits {
                dst.extend_from_slice(raw);
            }
            return Ok((fits, end));
        }
        if huffman::decoded_len_min(raw.len()) > cap {
            return Ok((false, end));
        }
        self.scratch.clear();
        match huffman::decode(raw, cap, &mut self.scratch) {
            Ok(()) => {
                dst.extend_from_slice(&self.scratch);
                Ok((true, end))
            }
            Err(HuffmanError::TooLong) => Ok((false, end)),
            Err(HuffmanError::Eos) => Err(DecodeError::HuffmanEos),
            Err(HuffmanError::PaddingTooLong) => Err(DecodeError::HuffmanPaddingTooLong),
            Err(HuffmanError::PaddingNotOnes) => Err(DecodeError::HuffmanPaddingNotOnes),
        }
    }

    /// The field at HPACK index `index`: 1 to 61 in the static table, then the dynamic table
    /// from newest to oldest (RFC 7541 §2.3.3). Index 0 is invalid.
    fn entry(&self, index: u32) -> Result<&(Bytes, Bytes), DecodeError> {
        let i = index as usize;
        let entry = match i {
            0 => None,
            1..=STATIC_TABLE_LEN => Some(&STATIC_TABLE[i - 1]),
            _ => self.table.get(i - STATIC_TABLE_LEN - 1),
        };
        entry.ok_or(DecodeError::InvalidIndex(index))
    }
}

impl Default for Decoder {
    /// A decoder with the HTTP/2 initial table size, [`DYNAMIC_TABLE_BYTES_DEFAULT`].
    fn default() -> Self {
        Self::new(DYNAMIC_TABLE_BYTES_DEFAULT)
    }
}
