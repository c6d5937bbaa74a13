//! The QPACK encoder (RFC 9204 §2.1): encodes field sections, inserts into the dynamic table
//! on the encoder stream, and follows the peer's decoder stream.
//!
//! # Policy
//!
//! - The dynamic table is used only when both [`EncoderConfig::table_bytes_max`] (default 0)
//!   and the peer's SETTINGS_QPACK_MAX_TABLE_CAPACITY allow one; its capacity is the smaller
//!   of the two, set once by [`Encoder::apply_peer_settings`]. With 0, sections use the
//!   static table and literals only, and the encoder stream carries nothing.
//! - Which fields are inserted: [`Indexing`]. A field is inserted only if the table has room
//!   once entries are evicted that are both acknowledged (below the Known Received Count) and
//!   referenced by no unacknowledged section (§2.1.1): so every entry the decoder has not
//!   acknowledged stays in the table, at most MaxEntries of them, and a Required Insert
//!   Count never runs further ahead of the decoder than §4.5.1.1's encoding can tell.
//! - A section references an entry the decoder has not acknowledged (one just inserted, or
//!   older) only if that may block it: its stream is already blocked, or fewer streams are
//!   than the peer's SETTINGS_QPACK_BLOCKED_STREAMS (§2.1.2). Otherwise the field goes as a
//!   literal and the insertion only serves later sections.
//! - Base is the insert count at the start of the section, so entries inserted for it are
//!   referenced post-base.
//!
//! Lookups in the dynamic table scan it, newest first: it holds at most capacity / 32
//! entries, a few hundred at the sizes a proxy uses.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

use super::field_line::{FieldLine, SectionPrefix};
use super::instruction::{DecoderInstruction, EncoderInstruction, TableRef};
use super::static_table::{self, StaticMatch};
use super::table::DynamicTable;
use super::{QpackError, entry_size, max_entries};
use squall_hpack::{Decision, Indexing, decide};

/// How the encoder behaves; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncoderConfig {
    /// The most dynamic table the encoder uses, whatever the peer allows. Default 0: none.
    pub table_bytes_max: u64,
    /// Which fields go into the dynamic table.
    pub indexing: Indexing,
    /// Huffman-code strings where that is shorter (default); raw always when false.
    pub huffman: bool,
}

impl Default for EncoderConfig {
    fn default() -> Self {
        Self {
            table_bytes_max: 0,
            indexing: Indexing::default(),
            huffman: true,
        }
    }
}

/// A field section with dynamic references that the decoder has not acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Outstanding {
    stream_id: u64,
    required_insert_count: u64,
    /// The smallest absolute index it references: that entry and newer ones may not be
    /// evicted until the section is acknowledged or its stream cancelled.
    min_ref: u64,
}

/// The encoding half of a QPACK context: one per connection.
#[derive(Debug, Clone)]
pub struct Encoder {
    config: EncoderConfig,
    table: DynamicTable,
    /// The peer's SETTINGS_QPACK_MAX_TABLE_CAPACITY (0 until its SETTINGS arrive).
    peer_max_capacity: u64,
    /// The peer's SETTINGS_QPACK_BLOCKED_STREAMS.
    peer_max_blocked: u64,
    /// The Known Received Count (§2.1.4).
    known_received: u64,
    /// Sections not yet acknowledged, oldest first.
    outstanding: VecDeque<Outstanding>,
    /// Decoder stream bytes that are not a whole instruction yet.
    pending: Vec<u8>,
    /// Encoder stream bytes to send.
    out: BytesMut,
    /// Lines of the section being encoded, before its prefix is known.
    scratch: BytesMut,
    /// The error that broke the encoder's sync with the decoder.
    poisoned: Option<QpackError>,
}

impl Default for Encoder {
    fn default() -> Self {
        Self::new(EncoderConfig::default())
    }
}

/// The dynamic references of the section being encoded.
#[derive(Debug, Clone, Copy)]
struct Refs {
    base: u64,
    required_insert_count: u64,
    min_ref: Option<u64>,
    /// Whether the section may reference entries the decoder has not acknowledged.
    may_block: bool,
}

impl Refs {
    fn note(&mut self, absolute: u64) {
        self.required_insert_count = self.required_insert_count.max(absolute + 1);
        self.min_ref = Some(self.min_ref.map_or(absolute, |m| m.min(absolute)));
    }
}

impl Encoder {
    /// An encoder that uses no dynamic table until [`Encoder::apply_peer_settings`].
    pub fn new(config: EncoderConfig) -> Self {
        Self {
            config,
            table: DynamicTable::default(),
            peer_max_capacity: 0,
            peer_max_blocked: 0,
            known_received: 0,
            outstanding: VecDeque::new(),
            pending: Vec::new(),
            out: BytesMut::new(),
            scratch: BytesMut::new(),
            poisoned: None,
        }
    }

    /// Applies the peer's SETTINGS_QPACK_MAX_TABLE_CAPACITY and SETTINGS_QPACK_BLOCKED_STREAMS,
    /// once, when its SETTINGS arrive. If both sides allow a table, this queues a Set Dynamic
    /// Table Capacity on the encoder stream.
    pub fn apply_peer_settings(&mut self, max_table_capacity: u64, blocked_streams: u64) {
        debug_assert_eq!(self.table.insert_count(), 0, "settings apply once, first");
        self.peer_max_capacity = max_table_capacity;
        self.peer_max_blocked = blocked_streams;
        let capacity = max_table_capacity.min(self.config.table_bytes_max);
        if capacity > 0 && self.table.insert_count() == 0 {
            EncoderInstruction::SetCapacity(capacity).encode(false, &mut self.out);
            self.table.set_capacity(capacity);
        }
    }

    /// The dynamic table's size and capacity, in bytes.
    pub fn table_size(&self) -> (u64, u64) {
        (self.table.size(), self.table.capacity())
    }

    /// The number of insertions made.
    pub fn insert_count(&self) -> u64 {
        self.table.insert_count()
    }

    /// The Known Received Count: insertions the decoder has acknowledged.
    pub fn known_received_count(&self) -> u64 {
        self.known_received
    }

    /// The streams whose unacknowledged sections may be blocked at the decoder now.
    pub fn blocked_streams(&self) -> usize {
        let mut streams: Vec<u64> = self
            .outstanding
            .iter()
            .filter(|s| s.required_insert_count > self.known_received)
            .map(|s| s.stream_id)
            .collect();
        streams.sort_unstable();
        streams.dedup();
        streams.len()
    }

    /// Encodes the fields `(name, value, sensitive)` of one field section of stream
    /// `stream_id` into `out` (a HEADERS payload); insertions it makes are queued on the
    /// encoder stream, which must reach the peer ([`Encoder::take_encoder_stream`]).
    /// Sensitive fields go as literals with the N bit.
    pub fn encode_section<N, V, I>(&mut self, stream_id: u64, fields: I, out: &mut BytesMut)
    where
        N: AsRef<[u8]>,
        V: AsRef<[u8]>,
        I: IntoIterator<Item = (N, V, bool)>,
    {
        let blocking = self
            .outstanding
            .iter()
            .any(|s| s.stream_id == stream_id && s.required_insert_count > self.known_received);
        let mut refs = Refs {
            base: self.table.insert_count(),
            required_insert_count: 0,
            min_ref: None,
            may_block: blocking || (self.blocked_streams() as u64) < self.peer_max_blocked,
        };
        let mut lines = std::mem::take(&mut self.scratch);
        for (name, value, sensitive) in fields {
            let line = self.line(name.as_ref(), value.as_ref(), sensitive, &mut refs);
            line.encode(self.config.huffman, &mut lines);
        }
        let prefix = SectionPrefix {
            required_insert_count: refs.required_insert_count,
            base: if refs.required_insert_count == 0 {
                0
            } else {
                refs.base
            },
        };
        prefix.encode(max_entries(self.peer_max_capacity), out);
        out.extend_from_slice(&lines);
        lines.clear();
        self.scratch = lines;
        if let Some(min_ref) = refs.min_ref {
            self.outstanding.push_back(Outstanding {
                stream_id,
                required_insert_count: refs.required_insert_count,
                min_ref,
            });
        }
    }

    /// The representation of one field, inserting it first if the policy and table allow.
    fn line<'a>(
        &mut self,
        name: &'a [u8],
        value: &'a [u8],
        sensitive: bool,
        refs: &mut Refs,
    ) -> FieldLine<&'a [u8]> {
        // squall-hpack's policy: the same fields are worth a table entry in QPACK.
        let capacity = usize::try_from(self.table.capacity()).unwrap_or(usize::MAX);
        let decision = decide(self.config.indexing, name, value, sensitive, capacity);
        let never_index = decision == Decision::NeverIndex;
        let static_match = static_table::find(name, value);
        if !never_index {
            if let StaticMatch::Field(index) = static_match {
                return FieldLine::Indexed(TableRef::Static(index as u64));
            }
            if let Some(absolute) = self.find_dynamic(name, Some(value), refs) {
                return self.indexed(absolute, refs);
            }
            if decision == Decision::Index
                && let Some(absolute) = self.insert(name, value, static_match, refs)
                && refs.may_block
            {
                return self.indexed(absolute, refs);
            }
        }
        if let StaticMatch::Name(index) | StaticMatch::Field(index) = static_match {
            return FieldLine::LiteralWithNameRef {
                name: TableRef::Static(index as u64),
                value,
                never_index,
            };
        }
        if let Some(absolute) = self.find_dynamic(name, None, refs) {
            refs.note(absolute);
            return if absolute < refs.base {
                FieldLine::LiteralWithNameRef {
                    name: TableRef::Dynamic(refs.base - 1 - absolute),
                    value,
                    never_index,
                }
            } else {
                FieldLine::LiteralWithPostBaseNameRef {
                    index: absolute - refs.base,
                    value,
                    never_index,
                }
            };
        }
        FieldLine::LiteralWithLiteralName {
            name,
            value,
            never_index,
        }
    }

    /// An indexed representation of the dynamic entry `absolute`, noted as referenced.
    fn indexed<'a>(&self, absolute: u64, refs: &mut Refs) -> FieldLine<&'a [u8]> {
        refs.note(absolute);
        if absolute < refs.base {
            FieldLine::Indexed(TableRef::Dynamic(refs.base - 1 - absolute))
        } else {
            FieldLine::IndexedPostBase(absolute - refs.base)
        }
    }

    /// The newest dynamic entry with this name (and value, if given) that the section may
    /// reference: acknowledged, or any if it may block.
    fn find_dynamic(&self, name: &[u8], value: Option<&[u8]>, refs: &Refs) -> Option<u64> {
        self.table
            .iter()
            .rev()
            .filter(|&(index, _)| refs.may_block || index < self.known_received)
            .find(|(_, (n, v))| n == name && value.is_none_or(|value| v == value))
            .map(|(index, _)| index)
    }

    /// Inserts `name: value` if it fits once evictable entries are evicted, queuing the
    /// instruction; returns its absolute index.
    fn insert(
        &mut self,
        name: &[u8],
        value: &[u8],
        static_match: StaticMatch,
        refs: &Refs,
    ) -> Option<u64> {
        let size = entry_size(name.len(), value.len());
        let capacity = self.table.capacity();
        if size > capacity {
            return None;
        }
        let needed = (self.table.size() + size).saturating_sub(capacity);
        if needed > 0 && self.table.size_below(self.evictable_below(refs)) < needed {
            return None;
        }
        let value_bytes = Bytes::copy_from_slice(value);
        let instruction = match static_match {
            StaticMatch::Name(index) | StaticMatch::Field(index) => {
                EncoderInstruction::InsertWithNameRef {
                    name: TableRef::Static(index as u64),
                    value: value_bytes.clone(),
                }
            }
            StaticMatch::None => EncoderInstruction::InsertWithLiteralName {
                name: Bytes::copy_from_slice(name),
                value: value_bytes.clone(),
            },
        };
        instruction.encode(self.config.huffman, &mut self.out);
        self.table.insert(Bytes::copy_from_slice(name), value_bytes);
        Some(self.table.insert_count() - 1)
    }

    /// Entries below this absolute index may be evicted: acknowledged, and referenced by no
    /// unacknowledged section, this one included.
    fn evictable_below(&self, refs: &Refs) -> u64 {
        self.outstanding
            .iter()
            .map(|s| s.min_ref)
            .chain(refs.min_ref)
            .fold(self.known_received, u64::min)
    }

    /// Applies bytes of the peer's decoder stream, in any pieces.
    pub fn feed_decoder_stream(&mut self, input: &[u8]) -> Result<(), QpackError> {
        if let Some(error) = self.poisoned {
            return Err(error);
        }
        self.pending.extend_from_slice(input);
        let mut at = 0;
        let result = loop {
            match DecoderInstruction::parse(&self.pending[at..]) {
                Ok(Some((instruction, len))) => {
                    at += len;
                    if let Err(error) = self.apply(instruction) {
                        break Err(error);
                    }
                }
                Ok(None) => break Ok(()),
                Err(error) => break Err(error),
            }
        };
        self.pending.drain(..at);
        if let Err(error) = result {
            self.poisoned = Some(error);
        }
        result
    }

    fn apply(&mut self, instruction: DecoderInstruction) -> Result<(), QpackError> {
        match instruction {
            DecoderInstruction::SectionAck(stream_id) => {
                let Some(at) = self
                    .outstanding
                    .iter()
                    .position(|s| s.stream_id == stream_id)
                else {
                    return Err(QpackError::DecoderStream(
                        "acknowledgment of a stream with no section outstanding",
                    ));
                };
                let section = self.outstanding.remove(at).expect("position found it");
                self.known_received = self.known_received.max(section.required_insert_count);
            }
            DecoderInstruction::StreamCancel(stream_id) => {
                self.outstanding.retain(|s| s.stream_id != stream_id);
            }
            DecoderInstruction::InsertCountIncrement(increment) => {
                let known = self.known_received.checked_add(increment);
                match known {
                    Some(known) if increment > 0 && known <= self.table.insert_count() => {
                        self.known_received = known;
                    }
                    _ => {
                        return Err(QpackError::DecoderStream(
                            "Insert Count Increment of 0 or past the insertions",
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// The encoder stream bytes to send, if any. They must reach the peer before, or with,
    /// the sections that reference their insertions, or those sections stay blocked.
    pub fn take_encoder_stream(&mut self) -> Option<Bytes> {
        (!self.out.is_empty()).then(|| self.out.split().freeze())
    }

    /// Asserts the encoder's invariants: the table's; its capacity within both sides'
    /// limits; every outstanding section's references still in the table and below its
    /// Required Insert Count; the entries the decoder has not acknowledged all in the table;
    /// the blocked streams within the peer's limit.
    pub fn check_invariants(&self) {
        self.table.check_invariants();
        assert!(self.table.capacity() <= self.peer_max_capacity.min(self.config.table_bytes_max));
        assert!(self.known_received <= self.table.insert_count());
        assert!(
            self.table.dropped() <= self.known_received,
            "evicted an unacknowledged entry"
        );
        for section in &self.outstanding {
            assert!(
                section.min_ref >= self.table.dropped(),
                "evicted a referenced entry"
            );
            assert!(section.min_ref < section.required_insert_count);
            assert!(section.required_insert_count <= self.table.insert_count());
        }
        assert!(self.blocked_streams() as u64 <= self.peer_max_blocked);
    }
}
