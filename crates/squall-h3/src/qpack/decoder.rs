//! The QPACK decoder (RFC 9204 §2.2): follows the peer's encoder stream, decodes field
//! sections, and says what it did on the decoder stream.
//!
//! # Bounds
//!
//! - Dynamic table: at most our SETTINGS_QPACK_MAX_TABLE_CAPACITY; a Set Dynamic Table
//!   Capacity above it, or an entry larger than the capacity, is QPACK_ENCODER_STREAM_ERROR
//!   (§4.3.1, §3.2.2), found as soon as the instruction's lengths are read.
//! - Encoder stream bytes held between calls: one partial instruction, which the checks above
//!   bound by a few times the capacity.
//! - Blocked streams: at most our SETTINGS_QPACK_BLOCKED_STREAMS; one more is
//!   QPACK_DECOMPRESSION_FAILED (§2.2.1). The decoder remembers a blocked stream's id and
//!   Required Insert Count, not its bytes: the caller keeps the section and decodes it again
//!   once [`Decoder::feed_encoder_stream`] reports the stream unblocked.
//! - Field sections: the caller's limit per call, counted as RFC 9114 §4.2.2 does, checked
//!   before each string is copied or decoded (a string is capped by what is left of it).

use bytes::{Bytes, BytesMut};

use super::field_line::{FieldLine, SectionPrefix};
use super::instruction::{DecoderInstruction, EncoderInstruction, TableRef};
use super::prefix::{self, Fault, Span};
use super::static_table::STATIC_TABLE;
use super::table::DynamicTable;
use super::{ENTRY_OVERHEAD_BYTES, Field, QpackError, entry_size, max_entries};

/// The result of decoding a field section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Section {
    /// The fields, in order.
    Fields(Vec<Field>),
    /// The section references insertions not received yet (RFC 9204 §2.1.2). Keep it, and
    /// decode it again when [`Decoder::feed_encoder_stream`] names this stream.
    Blocked,
}

/// What [`Decoder::decode_section_with`] did with a field section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoding {
    /// Every field was handed out, in order.
    Done,
    /// As [`Section::Blocked`]: nothing was handed out.
    Blocked,
}

/// The decoding half of a QPACK context: one per connection.
#[derive(Debug, Clone)]
pub struct Decoder {
    table: DynamicTable,
    /// Our SETTINGS_QPACK_MAX_TABLE_CAPACITY.
    max_capacity: u64,
    /// Our SETTINGS_QPACK_BLOCKED_STREAMS.
    max_blocked: u64,
    /// Blocked streams: (stream id, Required Insert Count).
    blocked: Vec<(u64, u64)>,
    /// Encoder stream bytes that are not a whole instruction yet.
    pending: Vec<u8>,
    /// Decoder stream bytes to send.
    out: BytesMut,
    /// The Known Received Count as the encoder will see it once `out` is sent (§2.1.4).
    known_received: u64,
    /// The error that broke the decoder's sync with the encoder; every later call returns it.
    poisoned: Option<QpackError>,
    /// Huffman-coded strings of the section being decoded, decoded; reused.
    strings: Vec<u8>,
}

impl Decoder {
    /// A decoder for the values we send in SETTINGS: the table capacity the encoder may use
    /// (0: no dynamic table, the RFC's default) and the streams that may be blocked at once.
    pub fn new(max_table_capacity: u64, max_blocked_streams: u64) -> Self {
        Self {
            table: DynamicTable::default(),
            max_capacity: max_table_capacity,
            max_blocked: max_blocked_streams,
            blocked: Vec::new(),
            pending: Vec::new(),
            out: BytesMut::new(),
            known_received: 0,
            poisoned: None,
            strings: Vec::new(),
        }
    }

    /// The number of insertions received (RFC 9204 §3.2.4).
    pub fn insert_count(&self) -> u64 {
        self.table.insert_count()
    }

    /// The dynamic table's size and capacity, in bytes.
    pub fn table_size(&self) -> (u64, u64) {
        (self.table.size(), self.table.capacity())
    }

    /// The dynamic table's entries, oldest first, with their absolute indices.
    pub fn dynamic_table(&self) -> impl Iterator<Item = (u64, &[u8], &[u8])> {
        self.table.iter().map(|(i, (n, v))| (i, &n[..], &v[..]))
    }

    /// The number of streams blocked now.
    pub fn blocked_streams(&self) -> usize {
        self.blocked.len()
    }

    /// Applies bytes of the peer's encoder stream, in any pieces. Returns the streams whose
    /// sections these insertions unblocked (usually none), which are no longer counted as
    /// blocked: decode their sections again.
    pub fn feed_encoder_stream(&mut self, input: &[u8]) -> Result<Vec<u64>, QpackError> {
        if let Some(error) = self.poisoned {
            return Err(error);
        }
        self.pending.extend_from_slice(input);
        let mut at = 0;
        let result = loop {
            // A name or value longer than the capacity allows cannot be part of an entry.
            let cap = self.table.capacity().saturating_sub(ENTRY_OVERHEAD_BYTES);
            let cap = usize::try_from(cap).unwrap_or(usize::MAX);
            match EncoderInstruction::parse_capped(&self.pending[at..], cap) {
                Ok((instruction, len)) => {
                    at += len;
                    if let Err(error) = self.apply(instruction) {
                        break Err(error);
                    }
                }
                Err(Fault::Incomplete) => break Ok(()),
                Err(Fault::OverCap) => {
                    break Err(QpackError::EncoderStream(
                        "entry larger than the table capacity",
                    ));
                }
                Err(Fault::Bad(reason)) => break Err(QpackError::EncoderStream(reason)),
            }
        };
        self.pending.drain(..at);
        if let Err(error) = result {
            self.poisoned = Some(error);
            return Err(error);
        }
        let insert_count = self.table.insert_count();
        let mut unblocked = Vec::new();
        self.blocked.retain(|&(stream_id, ric)| {
            let still = ric > insert_count;
            if !still {
                unblocked.push(stream_id);
            }
            still
        });
        Ok(unblocked)
    }

    fn apply(&mut self, instruction: EncoderInstruction) -> Result<(), QpackError> {
        let error = QpackError::EncoderStream;
        let (name, value) = match instruction {
            EncoderInstruction::SetCapacity(capacity) => {
                if capacity > self.max_capacity {
                    return Err(error("capacity above SETTINGS_QPACK_MAX_TABLE_CAPACITY"));
                }
                self.table.set_capacity(capacity);
                return Ok(());
            }
            EncoderInstruction::InsertWithNameRef { name, value } => {
                let name = match name {
                    TableRef::Static(index) => static_entry(index).map(|(n, _)| n.clone()),
                    TableRef::Dynamic(relative) => {
                        self.relative_entry(relative).map(|(n, _)| n.clone())
                    }
                };
                (
                    name.ok_or(error("name reference not in the tables"))?,
                    value,
                )
            }
            EncoderInstruction::InsertWithLiteralName { name, value } => (name, value),
            EncoderInstruction::Duplicate(relative) => self
                .relative_entry(relative)
                .cloned()
                .ok_or(error("duplicate of an entry not in the table"))?,
        };
        if entry_size(name.len(), value.len()) > self.table.capacity() {
            return Err(error("entry larger than the table capacity"));
        }
        self.table.insert(name, value);
        Ok(())
    }

    /// The entry at a relative index of the encoder stream (§3.2.5: 0 is the newest).
    fn relative_entry(&self, relative: u64) -> Option<&(Bytes, Bytes)> {
        let absolute = self
            .table
            .insert_count()
            .checked_sub(relative)?
            .checked_sub(1)?;
        self.table.get(absolute)
    }

    /// Decodes one field section (a HEADERS payload) of stream `stream_id`, refusing one
    /// larger than `max_size` (names + values + 32 per field).
    ///
    /// A section that needs insertions not received yet is [`Section::Blocked`] while fewer
    /// than SETTINGS_QPACK_BLOCKED_STREAMS streams are; decoding it again before it is
    /// unblocked returns `Blocked` again without counting it twice. A section with dynamic
    /// references, decoded (or found too large), queues a Section Acknowledgment.
    ///
    /// Each field is copied into `Bytes` of its own: for tests and tools. The server decodes
    /// with [`Decoder::decode_section_with`] straight into the request's buffer.
    pub fn decode_section(
        &mut self,
        stream_id: u64,
        section: &Bytes,
        max_size: u64,
    ) -> Result<Section, QpackError> {
        let mut fields = Vec::new();
        let decoding = self.decode_section_with(stream_id, section, max_size, |n, v, s| {
            fields.push(Field {
                name: Bytes::copy_from_slice(n),
                value: Bytes::copy_from_slice(v),
                sensitive: s,
            });
        })?;
        Ok(match decoding {
            Decoding::Done => Section::Fields(fields),
            Decoding::Blocked => Section::Blocked,
        })
    }

    /// [`Decoder::decode_section`], each field handed to `field(name, value, sensitive)` as
    /// it is decoded, from the section, the tables or a reused buffer: nothing is allocated
    /// per field. On an error, the fields handed out so far are not a whole section.
    pub fn decode_section_with(
        &mut self,
        stream_id: u64,
        section: &[u8],
        max_size: u64,
        field: impl FnMut(&[u8], &[u8], bool),
    ) -> Result<Decoding, QpackError> {
        if let Some(error) = self.poisoned {
            return Err(error);
        }
        let result = self.decode_section_inner(stream_id, section, max_size, field);
        if let Err(error) = result
            && error.is_connection_error()
        {
            self.poisoned = Some(error);
        }
        result
    }

    fn decode_section_inner(
        &mut self,
        stream_id: u64,
        section: &[u8],
        max_size: u64,
        mut field: impl FnMut(&[u8], &[u8], bool),
    ) -> Result<Decoding, QpackError> {
        let insert_count = self.table.insert_count();
        let (prefix, mut at) =
            SectionPrefix::parse(section, max_entries(self.max_capacity), insert_count)
                .map_err(section_fault)?;
        let ric = prefix.required_insert_count;
        if ric > insert_count {
            if self.blocked.iter().any(|&(id, _)| id == stream_id) {
                return Ok(Decoding::Blocked);
            }
            if self.blocked.len() as u64 >= self.max_blocked {
                return Err(QpackError::Decompression(
                    "more blocked streams than SETTINGS_QPACK_BLOCKED_STREAMS",
                ));
            }
            self.blocked.push((stream_id, ric));
            return Ok(Decoding::Blocked);
        }
        self.blocked.retain(|&(id, _)| id != stream_id);
        let mut strings = std::mem::take(&mut self.strings);
        strings.clear();
        let mut used = 0u64;
        let mut largest_ref = None;
        let too_large = QpackError::FieldSectionTooLarge { limit: max_size };
        let result = loop {
            if at >= section.len() {
                break Ok(());
            }
            let left = max_size
                .saturating_sub(used)
                .saturating_sub(ENTRY_OVERHEAD_BYTES);
            let cap = usize::try_from(left).unwrap_or(usize::MAX);
            let parsed = FieldLine::parse_with(section, at, cap, |from, bits, cap| {
                prefix::decode_string_into(section, from, bits, cap, &mut strings)
            });
            let (line, next) = match parsed {
                Err(Fault::OverCap) => break Err(too_large),
                Err(fault) => break Err(section_fault(fault)),
                Ok(parsed) => parsed,
            };
            at = next;
            let (name, value, sensitive) =
                match self.resolve(&line, section, &strings, prefix, &mut largest_ref) {
                    Ok(resolved) => resolved,
                    Err(error) => break Err(error),
                };
            used += entry_size(name.len(), value.len());
            if used > max_size {
                break Err(too_large);
            }
            field(name, value, sensitive);
        };
        self.strings = strings;
        match result {
            Err(error @ QpackError::FieldSectionTooLarge { .. }) => {
                self.acknowledge(stream_id, ric);
                return Err(error);
            }
            Err(error) => return Err(error),
            Ok(()) => {}
        }
        // §4.5.1.1: the encoder sets the count to one more than the largest absolute index
        // it references; a larger count would make a decoder wait for nothing.
        if ric != largest_ref.map_or(0, |index| index + 1) {
            return Err(QpackError::Decompression(
                "Required Insert Count is not what the references need",
            ));
        }
        self.acknowledge(stream_id, ric);
        Ok(Decoding::Done)
    }

    /// Queues a Section Acknowledgment for a section with dynamic references (§4.4.1).
    fn acknowledge(&mut self, stream_id: u64, ric: u64) {
        if ric > 0 {
            DecoderInstruction::SectionAck(stream_id).encode(&mut self.out);
            self.known_received = self.known_received.max(ric);
        }
    }

    /// The field a representation stands for, checking its references against the section's
    /// prefix (§2.2.3: an evicted entry, or one at or past the Required Insert Count, is an
    /// error) and tracking the largest absolute index referenced. Literal strings lie in
    /// `section` or, Huffman-decoded, in `strings`.
    fn resolve<'a>(
        &'a self,
        line: &FieldLine<Span>,
        section: &'a [u8],
        strings: &'a [u8],
        prefix: SectionPrefix,
        largest_ref: &mut Option<u64>,
    ) -> Result<(&'a [u8], &'a [u8], bool), QpackError> {
        let literal = |span: &Span| span.bytes(section, strings);
        Ok(match line {
            FieldLine::Indexed(table_ref) => {
                let (name, value) = self.entry(*table_ref, prefix, largest_ref)?;
                (name, value, false)
            }
            FieldLine::IndexedPostBase(index) => {
                let (name, value) = self.post_base(*index, prefix, largest_ref)?;
                (name, value, false)
            }
            FieldLine::LiteralWithNameRef {
                name,
                value,
                never_index,
            } => {
                let name = &self.entry(*name, prefix, largest_ref)?.0;
                (name, literal(value), *never_index)
            }
            FieldLine::LiteralWithPostBaseNameRef {
                index,
                value,
                never_index,
            } => {
                let name = &self.post_base(*index, prefix, largest_ref)?.0;
                (name, literal(value), *never_index)
            }
            FieldLine::LiteralWithLiteralName {
                name,
                value,
                never_index,
            } => (literal(name), literal(value), *never_index),
        })
    }

    /// A static entry, or a dynamic one by index relative to Base (§3.2.5).
    fn entry(
        &self,
        table_ref: TableRef,
        prefix: SectionPrefix,
        largest_ref: &mut Option<u64>,
    ) -> Result<&(Bytes, Bytes), QpackError> {
        match table_ref {
            TableRef::Static(index) => {
                static_entry(index).ok_or(QpackError::Decompression("static index past the table"))
            }
            TableRef::Dynamic(relative) => {
                let absolute = prefix
                    .base
                    .checked_sub(relative)
                    .and_then(|n| n.checked_sub(1));
                self.dynamic(absolute, prefix, largest_ref)
            }
        }
    }

    /// A dynamic entry by post-base index (§3.2.6).
    fn post_base(
        &self,
        index: u64,
        prefix: SectionPrefix,
        largest_ref: &mut Option<u64>,
    ) -> Result<&(Bytes, Bytes), QpackError> {
        self.dynamic(prefix.base.checked_add(index), prefix, largest_ref)
    }

    fn dynamic(
        &self,
        absolute: Option<u64>,
        prefix: SectionPrefix,
        largest_ref: &mut Option<u64>,
    ) -> Result<&(Bytes, Bytes), QpackError> {
        let absolute = absolute
            .filter(|&index| index < prefix.required_insert_count)
            .ok_or(QpackError::Decompression(
                "dynamic reference outside Base and the Required Insert Count",
            ))?;
        *largest_ref = Some(largest_ref.map_or(absolute, |l| l.max(absolute)));
        self.table.get(absolute).ok_or(QpackError::Decompression(
            "dynamic reference to an evicted entry",
        ))
    }

    /// Tells the decoder that a stream was reset or its reading abandoned (§4.4.2): it is
    /// no longer blocked, and the encoder is told, so it can release the stream's references.
    /// Without a dynamic table there is nothing to release and nothing is sent.
    pub fn cancel_stream(&mut self, stream_id: u64) {
        self.blocked.retain(|&(id, _)| id != stream_id);
        if self.max_capacity > 0 {
            DecoderInstruction::StreamCancel(stream_id).encode(&mut self.out);
        }
    }

    /// The decoder stream bytes to send, if any: the acknowledgments and cancellations queued
    /// since the last call, then an Insert Count Increment for the insertions the encoder
    /// does not know we received (§4.4.3). Call it after each batch of input.
    pub fn take_decoder_stream(&mut self) -> Option<Bytes> {
        let insert_count = self.table.insert_count();
        if insert_count > self.known_received {
            DecoderInstruction::InsertCountIncrement(insert_count - self.known_received)
                .encode(&mut self.out);
            self.known_received = insert_count;
        }
        (!self.out.is_empty()).then(|| self.out.split().freeze())
    }

    /// Asserts the decoder's invariants: the table's, the capacity within our setting, the
    /// blocked streams within theirs and each really waiting, the Known Received Count within
    /// the insertions.
    pub fn check_invariants(&self) {
        self.table.check_invariants();
        assert!(self.table.capacity() <= self.max_capacity);
        assert!(self.blocked.len() as u64 <= self.max_blocked);
        let insert_count = self.table.insert_count();
        for &(stream_id, ric) in &self.blocked {
            assert!(ric > insert_count, "stream {stream_id} blocked for nothing");
        }
        assert!(self.known_received <= insert_count);
    }
}

/// A static table entry (§3.1), if the index is in the table.
fn static_entry(index: u64) -> Option<&'static (Bytes, Bytes)> {
    STATIC_TABLE.get(usize::try_from(index).ok()?)
}

/// A wire fault inside a field section: there is no more input to wait for.
fn section_fault(fault: Fault) -> QpackError {
    match fault {
        Fault::Incomplete => {
            QpackError::Decompression("field section ends inside a representation")
        }
        Fault::Bad(reason) => QpackError::Decompression(reason),
        Fault::OverCap => unreachable!("caps are handled where they are set"),
    }
}
