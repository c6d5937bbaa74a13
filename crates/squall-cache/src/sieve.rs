//! SIEVE eviction (Zhang et al., "SIEVE is Simpler than LRU", NSDI '24) over a slab of values.
//!
//! Values sit in one FIFO queue, newest first, each with a visited bit. A hit only sets the
//! bit, so it needs no exclusive lock and moves nothing (unlike LRU). To evict, a hand walks
//! from the oldest value toward the newest, clearing visited bits, and evicts the first value
//! whose bit was already clear; the hand stays there for the next eviction and wraps to the
//! oldest at the end. Visited values thus stay in place, and new values that are not visited
//! again leave quickly ("quick demotion"), which beats LRU on skewed web traces.
//!
//! The queue is a doubly-linked list through slab indices, so the code needs no raw pointers
//! and no allocation per operation once the slab has grown.

use std::sync::atomic::{AtomicBool, Ordering};

/// One slab slot: a value (or a free slot) with its links and visited bit.
#[derive(Debug)]
struct Slot<T> {
    value: Option<T>,
    /// Set by hits through a shared reference; cleared by the hand under an exclusive one.
    /// Relaxed: the bit is a hint, and the shard's lock orders everything else.
    visited: AtomicBool,
    newer: Option<usize>,
    older: Option<usize>,
}

#[derive(Debug)]
pub(crate) struct Sieve<T> {
    slots: Vec<Slot<T>>,
    free: Vec<usize>,
    newest: Option<usize>,
    oldest: Option<usize>,
    /// The next value the eviction hand looks at; `None`: start at the oldest.
    hand: Option<usize>,
    len: usize,
}

impl<T> Sieve<T> {
    pub fn new() -> Sieve<T> {
        Sieve {
            slots: Vec::new(),
            free: Vec::new(),
            newest: None,
            oldest: None,
            hand: None,
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Adds `value` as the newest, not visited; returns its index.
    pub fn push(&mut self, value: T) -> usize {
        let slot = Slot {
            value: Some(value),
            visited: AtomicBool::new(false),
            newer: None,
            older: self.newest,
        };
        let index = match self.free.pop() {
            Some(i) => {
                self.slots[i] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                self.slots.len() - 1
            }
        };
        match self.newest {
            Some(n) => self.slots[n].newer = Some(index),
            None => self.oldest = Some(index),
        }
        self.newest = Some(index);
        self.len += 1;
        index
    }

    /// The value at `index`, if that slot is in use.
    pub fn get(&self, index: usize) -> Option<&T> {
        self.slots.get(index).and_then(|s| s.value.as_ref())
    }

    /// Records a hit: the only operation a reader does.
    pub fn mark_visited(&self, index: usize) {
        // Read first: a hot entry's bit is already set, and a store would take its cache
        // line away from every other worker reading it (hits take only the shard's read lock).
        if let Some(slot) = self.slots.get(index)
            && !slot.visited.load(Ordering::Relaxed)
        {
            slot.visited.store(true, Ordering::Relaxed);
        }
    }

    /// Unlinks and returns the value at `index`. The hand, if it pointed there, moves on to
    /// the next newer value, as if it had passed it.
    pub fn remove(&mut self, index: usize) -> Option<T> {
        let slot = self.slots.get_mut(index)?;
        let value = slot.value.take()?;
        let (newer, older) = (slot.newer.take(), slot.older.take());
        match newer {
            Some(n) => self.slots[n].older = older,
            None => self.newest = older,
        }
        match older {
            Some(o) => self.slots[o].newer = newer,
            None => self.oldest = newer,
        }
        if self.hand == Some(index) {
            self.hand = newer;
        }
        self.free.push(index);
        self.len -= 1;
        Some(value)
    }

    /// Runs the hand and returns the index of the value to evict (still in place; the caller
    /// removes it with [`Sieve::remove`] after its own bookkeeping). `None` when empty.
    /// Terminates: each step clears one visited bit, and after one full turn none is set.
    pub fn victim(&mut self) -> Option<usize> {
        let mut at = self.hand.or(self.oldest)?;
        loop {
            let slot = &mut self.slots[at];
            if !*slot.visited.get_mut() {
                break;
            }
            *slot.visited.get_mut() = false;
            // Invariant: `oldest` is Some because the list holds at least `at`.
            at = slot.newer.or(self.oldest).unwrap_or(at);
        }
        self.hand = self.slots[at].newer;
        Some(at)
    }

    /// Values from newest to oldest, with their indices.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &T)> {
        let mut at = self.newest;
        std::iter::from_fn(move || {
            let i = at?;
            at = self.slots[i].older;
            self.slots[i].value.as_ref().map(|v| (i, v))
        })
    }

    /// Panics if the list, the free list, the count or the hand disagree. For tests.
    pub fn check_invariants(&self) {
        let mut count = 0;
        let mut prev: Option<usize> = None;
        let mut at = self.newest;
        while let Some(i) = at {
            let slot = &self.slots[i];
            assert!(slot.value.is_some(), "linked slot {i} is free");
            assert_eq!(slot.newer, prev, "slot {i}: newer link broken");
            count += 1;
            assert!(count <= self.len, "list longer than len (a cycle?)");
            prev = Some(i);
            at = slot.older;
        }
        assert_eq!(prev, self.oldest, "oldest is not the list's end");
        assert_eq!(count, self.len, "len disagrees with the list");
        assert_eq!(self.len + self.free.len(), self.slots.len(), "slots leaked");
        for &f in &self.free {
            assert!(self.slots[f].value.is_none(), "free slot {f} holds a value");
        }
        if let Some(h) = self.hand {
            assert!(self.slots[h].value.is_some(), "hand on a free slot");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_unvisited_first_and_keeps_visited() {
        let mut s = Sieve::new();
        let a = s.push('a');
        let b = s.push('b');
        let c = s.push('c');
        s.mark_visited(a);
        s.mark_visited(c);
        // The hand starts at the oldest (a, visited: cleared), then b: evicted.
        assert_eq!(s.victim(), Some(b));
        assert_eq!(s.remove(b), Some('b'));
        s.check_invariants();
        let d = s.push('d');
        // Hand is at c (visited: cleared), then d (not visited): evicted.
        assert_eq!(s.victim(), Some(d));
        s.remove(d);
        // Hand wrapped: a (cleared earlier) is next.
        assert_eq!(s.victim(), Some(a));
        s.remove(a);
        assert_eq!(s.iter().map(|(_, v)| *v).collect::<String>(), "c");
        s.check_invariants();
    }

    #[test]
    fn all_visited_evicts_oldest_after_a_turn() {
        let mut s = Sieve::new();
        let ids: Vec<_> = (0..5).map(|i| s.push(i)).collect();
        for &i in &ids {
            s.mark_visited(i);
        }
        assert_eq!(s.victim(), Some(ids[0]));
        assert_eq!(Sieve::<u8>::new().victim(), None);
    }

    #[test]
    fn removing_the_hand_moves_it() {
        let mut s = Sieve::new();
        let a = s.push(1);
        let b = s.push(2);
        let c = s.push(3);
        s.mark_visited(a);
        assert_eq!(s.victim(), Some(b));
        // The hand is now at c; removing c moves it past the newest (wraps to oldest).
        s.remove(c);
        s.check_invariants();
        // a's bit was cleared on the first turn.
        assert_eq!(s.victim(), Some(a));
        assert_eq!(s.remove(b), Some(2));
        assert_eq!(s.remove(b), None);
        assert_eq!(s.len(), 1);
        s.check_invariants();
    }
}
