//! The decoder's dynamic table (RFC 7541 §2.3.2, §4): a FIFO of fields, newest first, whose
//! size is bounded by a maximum that the encoder sets with size updates.
//!
//! Entries are `Bytes`, so a field the decoder emits from the table shares the entry's memory
//! instead of copying it: a block that references one large entry many times costs a
//! reference count per reference, not a copy.

use std::collections::VecDeque;

use bytes::Bytes;

use crate::entry_size;

/// Table entries with their total size; see the module documentation.
#[derive(Debug, Clone)]
pub(crate) struct DynamicTable {
    /// Newest at the front: dynamic index 0 (HPACK index 62) is `entries[0]`.
    entries: VecDeque<(Bytes, Bytes)>,
    /// Sum of the entries' sizes (RFC 7541 §4.1).
    size: usize,
    /// The maximum size the encoder last set (RFC 7541 §4.2).
    max_size: usize,
}

impl DynamicTable {
    pub(crate) fn new(max_size: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            size: 0,
            max_size,
        }
    }

    /// The entry at dynamic index `index` (0 is the newest).
    pub(crate) fn get(&self, index: usize) -> Option<&(Bytes, Bytes)> {
        self.entries.get(index)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn size(&self) -> usize {
        self.size
    }

    pub(crate) fn max_size(&self) -> usize {
        self.max_size
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &(Bytes, Bytes)> {
        self.entries.iter()
    }

    /// Adds a field, evicting the oldest entries until it fits (RFC 7541 §4.4). A field larger
    /// than the whole table empties it and is not added, which is not an error.
    pub(crate) fn insert(&mut self, name: Bytes, value: Bytes) {
        let entry_size = entry_size(name.len(), value.len());
        if entry_size > self.max_size {
            self.entries.clear();
            self.size = 0;
            return;
        }
        self.evict_to(self.max_size - entry_size);
        self.entries.push_front((name, value));
        self.size += entry_size;
    }

    /// Applies a dynamic table size update (RFC 7541 §4.3): evicts until the table fits.
    pub(crate) fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size;
        self.evict_to(max_size);
    }

    fn evict_to(&mut self, size: usize) {
        while self.size > size {
            // The loop only runs while size > 0, and size is the sum of the entries' sizes,
            // each at least ENTRY_OVERHEAD_BYTES, so there is an entry to evict.
            let (name, value) = self.entries.pop_back().expect("size > 0 means an entry");
            self.size -= entry_size(name.len(), value.len());
        }
    }

    /// Asserts that `size` is the sum of the entries and within the maximum.
    pub(crate) fn check_invariants(&self) {
        let sum: usize = self
            .entries
            .iter()
            .map(|(n, v)| entry_size(n.len(), v.len()))
            .sum();
        assert_eq!(sum, self.size);
        assert!(self.size <= self.max_size);
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
    fn eviction_is_oldest_first_and_keeps_the_size() {
        // Each entry is 1 + 1 + 32 = 34 bytes; 100 bytes hold two.
        let mut table = DynamicTable::new(100);
        for (n, v) in [("a", "1"), ("b", "2"), ("c", "3")] {
            let (n, v) = field(n, v);
            table.insert(n, v);
            table.check_invariants();
        }
        assert_eq!(table.len(), 2);
        assert_eq!(table.get(0), Some(&field("c", "3")));
        assert_eq!(table.get(1), Some(&field("b", "2")));
        assert_eq!(table.size(), 68);
    }

    #[test]
    fn an_entry_larger_than_the_table_empties_it() {
        let mut table = DynamicTable::new(40);
        let (n, v) = field("a", "1");
        table.insert(n, v);
        let (n, v) = field("a", "0123456789");
        table.insert(n, v);
        assert_eq!(table.len(), 0);
        assert_eq!(table.size(), 0);
        table.check_invariants();
    }

    #[test]
    fn shrinking_evicts_and_zero_empties() {
        let mut table = DynamicTable::new(100);
        for (n, v) in [("a", "1"), ("b", "2")] {
            let (n, v) = field(n, v);
            table.insert(n, v);
        }
        table.set_max_size(34);
        assert_eq!(table.len(), 1);
        assert_eq!(table.get(0), Some(&field("b", "2")));
        table.set_max_size(0);
        assert_eq!(table.len(), 0);
        table.check_invariants();
    }
}
