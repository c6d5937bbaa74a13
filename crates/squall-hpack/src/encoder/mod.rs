//! The HPACK encoder (RFC 7541 §6): turns a field list into a header block, choosing for
//! each field the shortest representation its indexing policy allows.
//!
//! For each field, in order of preference:
//! 1. an exact match in the static, then the dynamic table: an index (§6.1), usually 1 byte
//!    (never for a never-indexed field, which must stay a literal);
//! 2. otherwise a literal (§6.2), naming the field by index when a table holds the name
//!    (static first: its indices never move, and are smaller), with incremental indexing,
//!    without, or never indexed as [`policy`] decides;
//! 3. each string Huffman-coded (§5.2) unless that is longer than the raw octets.
//!
//! Table size changes from the peer's SETTINGS are sent at the start of the next block
//! (§4.2, §6.3), at most two of them: the smallest size since the last block, then the
//! final one, as the RFC requires when the size went down and back up in between.

pub(crate) mod policy;
mod table;

use bytes::BytesMut;

use crate::static_table::{self, StaticMatch};
use crate::{DYNAMIC_TABLE_BYTES_DEFAULT, entry_size, huffman, integer};
use policy::{Decision, Indexing};
use table::EncoderTable;

/// Settings of an [`Encoder`]; [`EncoderConfig::default`] suits HTTP/2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncoderConfig {
    /// The table size the peer's decoder starts with: [`DYNAMIC_TABLE_BYTES_DEFAULT`] in
    /// HTTP/2 until its SETTINGS arrive (RFC 9113 §6.5.2).
    pub peer_table_bytes: usize,
    /// The most table memory we keep per connection, whatever the peer allows; a smaller size
    /// than the peer's is announced with a size update (RFC 7541 §4.2).
    pub table_bytes_max: usize,
    /// Which fields go into the dynamic table.
    pub indexing: Indexing,
    /// Whether to Huffman-code strings when it makes them no longer.
    pub huffman: bool,
}

impl Default for EncoderConfig {
    fn default() -> Self {
        Self {
            peer_table_bytes: DYNAMIC_TABLE_BYTES_DEFAULT,
            table_bytes_max: DYNAMIC_TABLE_BYTES_DEFAULT,
            indexing: Indexing::Selective,
            huffman: true,
        }
    }
}

/// The encoding half of an HPACK context: one per connection, fed every header block we send,
/// in the order the blocks go out.
#[derive(Debug, Clone)]
pub struct Encoder {
    config: EncoderConfig,
    table: EncoderTable,
    /// Table sizes to announce at the start of the next block.
    pending: Option<PendingSizes>,
    /// Changes made to the dynamic table so far ([`Encoder::changes`]).
    changes: u64,
}

/// The table size changes since the last block (RFC 7541 §4.2).
#[derive(Debug, Clone, Copy)]
struct PendingSizes {
    lowest: usize,
    latest: usize,
}

/// The representations of a literal field (RFC 7541 §6.2): first byte pattern and prefix.
const INCREMENTAL: (u8, u8) = (0x40, 6);
const WITHOUT_INDEXING: (u8, u8) = (0x00, 4);
const NEVER_INDEXED: (u8, u8) = (0x10, 4);

impl Encoder {
    /// An encoder with [`EncoderConfig::default`].
    pub fn new() -> Self {
        Self::with_config(EncoderConfig::default())
    }

    /// An encoder for a peer whose decoder starts at `config.peer_table_bytes`. When our
    /// `table_bytes_max` is smaller, the first block starts with a size update saying so.
    pub fn with_config(config: EncoderConfig) -> Self {
        let mut encoder = Self {
            config,
            table: EncoderTable::new(config.peer_table_bytes),
            pending: None,
            changes: 0,
        };
        encoder.set_max_table_size(config.peer_table_bytes);
        encoder
    }

    /// Takes the peer's SETTINGS_HEADER_TABLE_SIZE. We use that size, or our own
    /// `table_bytes_max` if smaller, from the next block on, which starts with the update.
    pub fn set_max_table_size(&mut self, peer_table_bytes: usize) {
        let size = peer_table_bytes.min(self.config.table_bytes_max);
        let lowest = self.pending.map_or(size, |p| p.lowest.min(size));
        self.pending = Some(PendingSizes {
            lowest,
            latest: size,
        });
    }

    /// Appends the header block for `fields` (name, value, sensitive) to `out`. A sensitive
    /// field is sent never-indexed (RFC 7541 §6.2.3): neither we nor any intermediary after
    /// us will put it in a compression table.
    pub fn encode<'a, I>(&mut self, fields: I, out: &mut BytesMut)
    where
        I: IntoIterator<Item = (&'a [u8], &'a [u8], bool)>,
    {
        self.size_updates(out);
        for (name, value, sensitive) in fields {
            self.field(name, value, sensitive, false, out);
        }
    }

    /// [`Encoder::encode`] for fields the caller knows will come again as they are on this
    /// connection (a fixed response's, its `date` and `content-length` included): each one
    /// the table can hold is indexed, whatever the policy says of its name, unless it must
    /// never be. From the next such block on, each is one byte.
    pub fn encode_repeated<'a, I>(&mut self, fields: I, out: &mut BytesMut)
    where
        I: IntoIterator<Item = (&'a [u8], &'a [u8])>,
    {
        self.size_updates(out);
        for (name, value) in fields {
            self.field(name, value, false, true, out);
        }
    }

    /// How many times the dynamic table has changed (an entry added, entries evicted, a new
    /// size). Two blocks encoded at the same count met the same table: a block made of
    /// indices only, which changed nothing, is valid again as long as the count stays.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Starts a header block: appends the dynamic table size updates the peer is owed (RFC
    /// 7541 §4.2), which must come first. Call it before appending fragments made by
    /// [`encode_static`]; [`Encoder::encode`] calls it itself.
    pub fn begin_block(&mut self, out: &mut BytesMut) {
        self.size_updates(out);
    }

    /// The table's current size in bytes (RFC 7541 §4.1).
    pub fn table_size(&self) -> usize {
        self.table.size()
    }

    /// The table's maximum size, as last announced to the peer.
    pub fn max_table_size(&self) -> usize {
        self.table.max_size()
    }

    /// The dynamic table's entries, newest (index 62) first.
    pub fn dynamic_table(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.table.iter()
    }

    /// Asserts the encoder's invariants; tests call it after every block.
    #[doc(hidden)]
    pub fn check_invariants(&self) {
        self.table.check_invariants();
        assert!(
            self.table.max_size()
                <= self
                    .config
                    .table_bytes_max
                    .max(self.config.peer_table_bytes)
        );
    }

    fn size_updates(&mut self, out: &mut BytesMut) {
        let Some(PendingSizes { lowest, latest }) = self.pending.take() else {
            return;
        };
        if lowest < self.table.max_size() {
            self.size_update(lowest, out);
        }
        if latest != self.table.max_size() {
            self.size_update(latest, out);
        }
    }

    /// A dynamic table size update (RFC 7541 §6.3): `001` and a 5-bit prefix.
    fn size_update(&mut self, size: usize, out: &mut BytesMut) {
        integer::encode(size, 5, 0x20, out);
        self.table.set_max_size(size);
        self.changes += 1;
    }

    fn field(
        &mut self,
        name: &[u8],
        value: &[u8],
        sensitive: bool,
        repeated: bool,
        out: &mut BytesMut,
    ) {
        let indexing = self.config.indexing;
        let never = policy::is_never_indexed(indexing, name, value, sensitive);
        let in_static = static_table::find(name, value);
        if let (StaticMatch::Field(index), false) = (in_static, never) {
            Self::indexed(index, out);
            return;
        }
        let table_max = self.table.max_size();
        let decision = match policy::decide(indexing, name, value, sensitive, table_max) {
            // The policy's other limit stays: no entry over 3/4 of the table.
            Decision::DontIndex
                if repeated && entry_size(name.len(), value.len()) <= table_max / 4 * 3 =>
            {
                Decision::Index
            }
            decision => decision,
        };
        // Hashing is the costliest step left, so we hash only for a lookup that can succeed.
        // Only a field the policy indexes can be in the dynamic table (a field the policy
        // skips was never inserted; after a table size change the 3/4 rule may differ, and a
        // miss then costs compression, not correctness). A name the static table has needs no
        // lookup.
        let mut name_hash = None;
        if decision == Decision::Index {
            let hash = table::name_hash(name);
            name_hash = Some(hash);
            if let Some(index) = self.table.find_field(name, value, hash) {
                Self::indexed(index, out);
                return;
            }
        }
        let name_index = match in_static {
            StaticMatch::Field(index) | StaticMatch::Name(index) => Some(index),
            StaticMatch::None => {
                let hash = *name_hash.get_or_insert_with(|| table::name_hash(name));
                self.table.find_name(name, hash)
            }
        };
        let representation = match decision {
            Decision::Index => INCREMENTAL,
            Decision::DontIndex => WITHOUT_INDEXING,
            Decision::NeverIndex => NEVER_INDEXED,
        };
        self.literal(representation, name_index, name, value, out);
        if decision == Decision::Index {
            // After writing: the name index above may point at an entry this evicts, which
            // the decoder resolves before inserting too (RFC 7541 §4.4).
            let hash = name_hash.unwrap_or_else(|| table::name_hash(name));
            self.table.insert(name, value, hash);
            self.changes += 1;
        }
    }

    /// An indexed field (RFC 7541 §6.1): `1` and a 7-bit prefix.
    fn indexed(index: usize, out: &mut BytesMut) {
        integer::encode(index, 7, 0x80, out);
    }

    fn literal(
        &self,
        (flags, prefix_bits): (u8, u8),
        name_index: Option<usize>,
        name: &[u8],
        value: &[u8],
        out: &mut BytesMut,
    ) {
        integer::encode(name_index.unwrap_or(0), prefix_bits, flags, out);
        if name_index.is_none() {
            self.string(name, out);
        }
        self.string(value, out);
    }

    /// A string literal (RFC 7541 §5.2): `H` and a 7-bit length prefix, then the octets.
    fn string(&self, s: &[u8], out: &mut BytesMut) {
        string_literal(s, self.config.huffman, out);
    }
}

/// A string literal (RFC 7541 §5.2), Huffman-coded when `huffman` and that is no longer.
fn string_literal(s: &[u8], huffman: bool, out: &mut BytesMut) {
    // Huffman when it is no longer than the raw string. nghttp2 wants it strictly shorter;
    // at equal length we follow RFC 7541 Appendix C.6.2 (`307` is sent Huffman-coded in 3
    // bytes), so the examples stay byte-exact.
    let huffman_len = if huffman {
        huffman::encoded_len(s)
    } else {
        usize::MAX
    };
    if huffman_len <= s.len() {
        out.reserve(huffman_len + 5);
        integer::encode(huffman_len, 7, 0x80, out);
        huffman::encode(s, out);
    } else {
        out.reserve(s.len() + 5);
        integer::encode(s.len(), 7, 0x00, out);
        out.extend_from_slice(s);
    }
}

/// Appends `fields` as a block fragment that uses no dynamic table: an exact static-table
/// match as its index (§6.1), anything else as a literal without indexing (§6.2.2), its name
/// from the static table when it is there, values Huffman-coded when that is shorter.
///
/// Such a fragment decodes the same whatever either table holds, so a server can encode the
/// fields of a fixed response once and append the bytes to every block that carries them,
/// after [`Encoder::begin_block`]: no lookups, no hashing, no table churn per response.
pub fn encode_static<'a>(
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    out: &mut BytesMut,
) {
    for (name, value) in fields {
        match static_table::find(name, value) {
            static_table::StaticMatch::Field(index) => integer::encode(index, 7, 0x80, out),
            static_table::StaticMatch::Name(index) => {
                integer::encode(index, WITHOUT_INDEXING.1, WITHOUT_INDEXING.0, out);
                string_literal(value, true, out);
            }
            static_table::StaticMatch::None => {
                integer::encode(0, WITHOUT_INDEXING.1, WITHOUT_INDEXING.0, out);
                string_literal(name, true, out);
                string_literal(value, true, out);
            }
        }
    }
}

impl Default for Encoder {
    fn default() -> Self {
        Self::new()
    }
}
