//! The encoder's copy of the dynamic table, with hash indexes to find a field or a name in
//! constant time rather than by scanning up to 128 entries per field.
//!
//! Each entry gets a sequence number when inserted; the maps go from a 64-bit hash of the
//! field (or of its name) to the sequence number of the newest entry with that hash, and the
//! HPACK index follows from the distance to the newest entry. A hash collision can only make
//! a lookup miss (the entry is compared before use), never return a wrong index, so a fast
//! non-cryptographic hash is enough: the worst an origin choosing colliding headers can do
//! is lose some compression on its own responses.
//!
//! Eviction is oldest first, so when an entry leaves, any newer entry with the same hash is
//! still present: the map keeps pointing at it, and we remove a key only when it names the
//! entry being evicted.
//!
//! A field is looked up by name first: when the newest entry of that name has the same value
//! (a repeated `user-agent` or `cookie`, the common case) one `memcmp` confirms it, and the
//! value, often hundreds of bytes, is never hashed. Only otherwise is the whole field hashed.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use crate::{STATIC_TABLE_LEN, entry_size};

#[derive(Debug, Clone, Default)]
pub(crate) struct EncoderTable {
    /// Newest first, as in the decoder.
    entries: VecDeque<Entry>,
    size: usize,
    max_size: usize,
    /// How many entries were ever inserted: the newest has sequence number `inserted - 1`.
    inserted: u64,
    by_field: HashMap<u64, u64, BuildHasherDefault<HashIsKey>>,
    by_name: HashMap<u64, u64, BuildHasherDefault<HashIsKey>>,
}

/// One entry: name and value in one allocation, with their hashes for eviction.
#[derive(Debug, Clone)]
struct Entry {
    bytes: Box<[u8]>,
    name_len: usize,
    name_hash: u64,
    field_hash: u64,
}

impl Entry {
    fn name(&self) -> &[u8] {
        &self.bytes[..self.name_len]
    }

    fn value(&self) -> &[u8] {
        &self.bytes[self.name_len..]
    }

    fn size(&self) -> usize {
        entry_size(self.name_len, self.bytes.len() - self.name_len)
    }
}

/// The hash of a name, the key of [`EncoderTable::find_name`] and [`EncoderTable::find_field`].
pub(crate) fn name_hash(name: &[u8]) -> u64 {
    hash(SEED, name)
}

/// The hash of a whole field, from its name's hash. The name's length goes in between, so
/// that ("ab", "c") and ("a", "bc") differ.
fn field_hash(name_hash: u64, name: &[u8], value: &[u8]) -> u64 {
    hash(mix(name_hash, name.len() as u64), value)
}

impl EncoderTable {
    pub(crate) fn new(max_size: usize) -> Self {
        Self {
            max_size,
            ..Self::default()
        }
    }

    pub(crate) fn size(&self) -> usize {
        self.size
    }

    pub(crate) fn max_size(&self) -> usize {
        self.max_size
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.entries.iter().map(|e| (e.name(), e.value()))
    }

    /// The HPACK index of `name: value`, if the table holds it; `name_hash` is
    /// [`name_hash`]`(name)`.
    pub(crate) fn find_field(&self, name: &[u8], value: &[u8], name_hash: u64) -> Option<usize> {
        let newest = self.position(self.by_name.get(&name_hash)?);
        let entry = &self.entries[newest];
        if entry.name() == name && entry.value() == value {
            return Some(newest + STATIC_TABLE_LEN + 1);
        }
        // An older entry of the same name may hold the value.
        let position = self.position(self.by_field.get(&field_hash(name_hash, name, value))?);
        let entry = &self.entries[position];
        (entry.name() == name && entry.value() == value).then_some(position + STATIC_TABLE_LEN + 1)
    }

    /// The HPACK index of the newest entry named `name`, if any.
    pub(crate) fn find_name(&self, name: &[u8], name_hash: u64) -> Option<usize> {
        let position = self.position(self.by_name.get(&name_hash)?);
        (self.entries[position].name() == name).then_some(position + STATIC_TABLE_LEN + 1)
    }

    /// Adds a field as the decoder will (RFC 7541 §4.4): evicting the oldest entries, or
    /// emptying the table when the field is larger than all of it.
    pub(crate) fn insert(&mut self, name: &[u8], value: &[u8], name_hash: u64) {
        let size = entry_size(name.len(), value.len());
        if size > self.max_size {
            self.evict_to(0);
            return;
        }
        self.evict_to(self.max_size - size);
        let field_hash = field_hash(name_hash, name, value);
        let bytes = [name, value].concat().into_boxed_slice();
        let name_len = name.len();
        self.entries.push_front(Entry {
            bytes,
            name_len,
            name_hash,
            field_hash,
        });
        self.size += size;
        let seq = self.inserted;
        self.inserted += 1;
        self.by_field.insert(field_hash, seq);
        self.by_name.insert(name_hash, seq);
    }

    /// Applies a size update we are sending (RFC 7541 §4.3).
    pub(crate) fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size;
        self.evict_to(max_size);
    }

    /// Asserts sizes and that every map value names a live entry of that hash.
    pub(crate) fn check_invariants(&self) {
        let sum: usize = self.entries.iter().map(Entry::size).sum();
        assert_eq!(sum, self.size);
        assert!(self.size <= self.max_size);
        for (&hash, seq) in &self.by_field {
            assert_eq!(self.entries[self.position(seq)].field_hash, hash);
        }
        for (&hash, seq) in &self.by_name {
            assert_eq!(self.entries[self.position(seq)].name_hash, hash);
        }
        for entry in &self.entries {
            assert_eq!(entry.name_hash, name_hash(entry.name()));
            assert_eq!(
                entry.field_hash,
                field_hash(entry.name_hash, entry.name(), entry.value())
            );
            assert!(self.by_field.contains_key(&entry.field_hash));
            assert!(self.by_name.contains_key(&entry.name_hash));
        }
    }

    /// The position in `entries` of the entry with sequence number `seq`. The maps only hold
    /// live entries (see the module documentation), so it is in range.
    fn position(&self, seq: &u64) -> usize {
        let position = (self.inserted - 1 - seq) as usize;
        debug_assert!(position < self.entries.len());
        position
    }

    fn evict_to(&mut self, size: usize) {
        while self.size > size {
            let seq = self.inserted - self.entries.len() as u64;
            // size > 0 means an entry, as in the decoder's table.
            let entry = self.entries.pop_back().expect("size > 0 means an entry");
            self.size -= entry.size();
            if self.by_field.get(&entry.field_hash) == Some(&seq) {
                self.by_field.remove(&entry.field_hash);
            }
            if self.by_name.get(&entry.name_hash) == Some(&seq) {
                self.by_name.remove(&entry.name_hash);
            }
        }
    }
}

const SEED: u64 = 0x243f_6a88_85a3_08d3;
const MULTIPLIER: u64 = 0x517c_c1b7_2722_0a95;

fn mix(h: u64, word: u64) -> u64 {
    (h.rotate_left(5) ^ word).wrapping_mul(MULTIPLIER)
}

/// An FxHash-style hash, eight bytes at a time; see the module documentation for why a weak
/// hash is fine here.
fn hash(mut h: u64, bytes: &[u8]) -> u64 {
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        // chunks_exact(8) yields 8-byte slices.
        h = mix(h, u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    mix(h, u64::from_le_bytes(tail) ^ bytes.len() as u64)
}

/// The keys are already hashes: pass them through.
#[derive(Debug, Default)]
struct HashIsKey(u64);

impl Hasher for HashIsKey {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insert(table: &mut EncoderTable, name: &str, value: &str) {
        let (n, v) = (name.as_bytes(), value.as_bytes());
        table.insert(n, v, name_hash(n));
        table.check_invariants();
    }

    fn find(table: &EncoderTable, name: &str, value: &str) -> (Option<usize>, Option<usize>) {
        let (n, v) = (name.as_bytes(), value.as_bytes());
        (
            table.find_field(n, v, name_hash(n)),
            table.find_name(n, name_hash(n)),
        )
    }

    #[test]
    fn finds_the_newest_entry_and_forgets_evicted_ones() {
        // 34-byte entries, three fit.
        let mut table = EncoderTable::new(102);
        insert(&mut table, "a", "1");
        insert(&mut table, "a", "2");
        insert(&mut table, "b", "3");
        assert_eq!(find(&table, "a", "1"), (Some(64), Some(63)));
        assert_eq!(find(&table, "a", "2"), (Some(63), Some(63)));
        assert_eq!(find(&table, "b", "3"), (Some(62), Some(62)));
        insert(&mut table, "c", "4");
        assert_eq!(find(&table, "a", "1"), (None, Some(64)));
        insert(&mut table, "d", "5");
        assert_eq!(find(&table, "a", "2"), (None, None));
        table.set_max_size(0);
        assert_eq!(find(&table, "d", "5"), (None, None));
        table.check_invariants();
    }

    #[test]
    fn split_point_changes_the_hash() {
        let hash = |n: &[u8], v: &[u8]| field_hash(name_hash(n), n, v);
        assert_ne!(hash(b"ab", b"c"), hash(b"a", b"bc"));
        assert_ne!(hash(b"", b""), hash(b"", b"\0"));
    }
}
