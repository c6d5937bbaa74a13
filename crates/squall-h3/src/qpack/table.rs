//! The dynamic table (RFC 9204 §3.2), as the encoder and the decoder each keep it.
//!
//! Entries are numbered by insertion: the first ever inserted has absolute index 0, and an
//! index is never reused (§3.2.4). The table holds the entries from [`DynamicTable::dropped`]
//! (the first not yet evicted) to [`DynamicTable::insert_count`] - 1, oldest first, and their
//! sizes (name + value + 32, §3.2.1) add up to at most the capacity.
//!
//! Entries are `Bytes`: a field the decoder emits from the table shares the entry's memory.

use std::collections::VecDeque;

use bytes::Bytes;

use super::entry_size;

/// One table; see the module documentation.
#[derive(Debug, Clone, Default)]
pub(crate) struct DynamicTable {
    /// Oldest first: `entries[i]` has absolute index `dropped + i`.
    entries: VecDeque<(Bytes, Bytes)>,
    /// Entries evicted so far: the absolute index of `entries[0]`.
    dropped: u64,
    /// The sum of the entries' sizes.
    size: u64,
    /// The capacity the encoder set (§3.2.3).
    capacity: u64,
}

impl DynamicTable {
    /// The number of insertions ever made (§3.2.4): one more than the newest absolute index.
    pub(crate) fn insert_count(&self) -> u64 {
        self.dropped + self.entries.len() as u64
    }

    /// The absolute index of the oldest entry still in the table.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.capacity
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entry at absolute index `index`, if it was inserted and is not evicted.
    pub(crate) fn get(&self, index: u64) -> Option<&(Bytes, Bytes)> {
        let offset = index.checked_sub(self.dropped)?;
        self.entries.get(usize::try_from(offset).ok()?)
    }

    /// The entries, oldest first, with their absolute indices.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = (u64, &(Bytes, Bytes))> {
        let dropped = self.dropped;
        self.entries
            .iter()
            .enumerate()
            .map(move |(i, e)| (dropped + i as u64, e))
    }

    /// Sets the capacity, evicting the oldest entries until the table fits (§3.2.3). Whether
    /// that is allowed (not above the maximum, not evicting referenced entries) is the
    /// caller's check.
    pub(crate) fn set_capacity(&mut self, capacity: u64) {
        self.capacity = capacity;
        self.evict_to(capacity);
    }

    /// Adds an entry, evicting the oldest until it fits (§3.2.2). The caller has checked that
    /// it is no larger than the capacity.
    pub(crate) fn insert(&mut self, name: Bytes, value: Bytes) {
        let size = entry_size(name.len(), value.len());
        assert!(size <= self.capacity, "entry larger than the table");
        self.evict_to(self.capacity - size);
        self.entries.push_back((name, value));
        self.size += size;
    }

    /// The bytes freed by evicting, oldest first, every entry below absolute index `below`.
    pub(crate) fn size_below(&self, below: u64) -> u64 {
        self.iter()
            .take_while(|&(index, _)| index < below)
            .map(|(_, (n, v))| entry_size(n.len(), v.len()))
            .sum()
    }

    fn evict_to(&mut self, size: u64) {
        while self.size > size {
            // size > 0 means an entry: each is at least 32 bytes and they sum to size.
            let (name, value) = self.entries.pop_front().expect("size > 0 means an entry");
            self.size -= entry_size(name.len(), value.len());
            self.dropped += 1;
        }
    }

    /// Asserts that the size is the sum of the entries and within the capacity.
    pub(crate) fn check_invariants(&self) {
        let sum: u64 = self
            .entries
            .iter()
            .map(|(n, v)| entry_size(n.len(), v.len()))
            .sum();
        assert_eq!(sum, self.size, "table size is not the sum of its entries");
        assert!(self.size <= self.capacity, "table over its capacity");
        assert_eq!(
            self.insert_count(),
            self.dropped + self.entries.len() as u64
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(name: &'static str, value: &'static str) -> (Bytes, Bytes) {
        (
            Bytes::from_static(name.as_bytes()),
            Bytes::from_static(value.as_bytes()),
        )
    }

    #[test]
    fn absolute_indices_survive_eviction() {
        // 1 + 1 + 32 = 34 bytes an entry; 100 bytes hold two.
        let mut table = DynamicTable::default();
        table.set_capacity(100);
        for (n, v) in [("a", "1"), ("b", "2"), ("c", "3")] {
            let (n, v) = field(n, v);
            table.insert(n, v);
            table.check_invariants();
        }
        assert_eq!(table.insert_count(), 3);
        assert_eq!(table.dropped(), 1);
        assert_eq!(table.get(0), None);
        assert_eq!(table.get(1), Some(&field("b", "2")));
        assert_eq!(table.get(2), Some(&field("c", "3")));
        assert_eq!(table.get(3), None);
        assert_eq!(table.size_below(2), 34);
        table.set_capacity(34);
        assert_eq!(table.len(), 1);
        assert_eq!(table.get(2), Some(&field("c", "3")));
        table.set_capacity(0);
        assert_eq!((table.len(), table.size(), table.insert_count()), (0, 0, 3));
        table.check_invariants();
    }
}
