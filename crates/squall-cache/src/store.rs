//! The shared store: entries by key and Vary variant, split into shards by key hash, each
//! bounded in bytes and evicting with SIEVE.
//!
//! The byte bound is hard: every shard has `memory_bytes / shards` and never holds more, so
//! the store never holds more than `memory_bytes` (counting headers, body, wire head, key and
//! fixed overheads). A hit takes its shard's lock for reading only, to find the variant, set
//! its visited bit (an atomic, SIEVE needs nothing else) and clone the `Arc`; the body is sent
//! outside any lock. Inserts, purges and evictions take it for writing, and entries they drop
//! are freed after the lock is released.
//!
//! Each shard also indexes its entries by surrogate key ([`crate::tags`]), charged to the same
//! budget; purging by tag or by URL prefix walks the shards one at a time, holding each lock
//! only for that shard's part.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::RequestFields;
use crate::entry::Entry;
use crate::key::{CacheKey, PassThrough, shard_count, shard_of};
use crate::sieve::Sieve;
use crate::tags::{self, Tag, TagIndex};

/// Bytes charged per stored variant for the store's own bookkeeping (slab slot, map entry).
pub const NODE_OVERHEAD_BYTES: usize = 64;
/// Variants kept per URL. A `Vary: User-Agent` response could otherwise fill a shard with
/// copies of one page; past this the oldest variant of that URL goes first.
pub const VARIANTS_PER_KEY_MAX: usize = 32;

// `insert` keeps `VARIANTS_PER_KEY_MAX - 1` old variants beside the new one.
const _: () = assert!(VARIANTS_PER_KEY_MAX >= 1);

/// The sharded, byte-bounded response store. `Send + Sync`: share it through an `Arc`.
#[derive(Debug)]
pub struct Store {
    shards: Box<[RwLock<Shard>]>,
    mask: usize,
    memory_bytes: usize,
    object_max_bytes: usize,
    rejected_too_large: AtomicU64,
}

/// Counters and gauges of a [`Store`], summed over its shards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Bytes charged for what is stored now.
    pub bytes: usize,
    /// Variants stored now.
    pub entries: usize,
    /// Variants evicted to make room, since start.
    pub evictions: u64,
    /// Successful inserts, since start.
    pub inserts: u64,
    /// Inserts refused for size, since start.
    pub rejected_too_large: u64,
}

impl Store {
    /// A store of at most `memory_bytes`, in `shards` shards (rounded up to a power of two, at
    /// least 1), each with `memory_bytes / shards` bytes. An object is refused when its charge
    /// exceeds `max_object_fraction` (clamped to 0..=1) of one shard's budget, so that one large
    /// object cannot flush a shard. `memory_bytes == 0` stores nothing.
    pub fn new(memory_bytes: usize, shards: usize, max_object_fraction: f64) -> Store {
        let count = shard_count(shards);
        let budget = memory_bytes / count;
        let fraction = if max_object_fraction.is_nan() {
            0.0
        } else {
            max_object_fraction.clamp(0.0, 1.0)
        };
        // `as` saturates; the min keeps float rounding from passing the budget.
        let object_max_bytes = ((budget as f64 * fraction) as usize).min(budget);
        Store {
            shards: (0..count)
                .map(|_| RwLock::new(Shard::new(budget)))
                .collect(),
            mask: count - 1,
            memory_bytes,
            object_max_bytes,
            rejected_too_large: AtomicU64::new(0),
        }
    }

    /// The variant stored for `key` whose Vary values match `request_headers`, the most recent
    /// if several do (RFC 9111 §4.1). Marks it visited for SIEVE. Freshness is the caller's to
    /// judge ([`Entry::state`]).
    pub fn lookup<F: RequestFields + ?Sized>(
        &self,
        key: &CacheKey,
        request_headers: &F,
    ) -> Option<Arc<Entry>> {
        let shard = self.read(key);
        let index = shard.find(key, |e| e.matches_vary(request_headers))?;
        shard.sieve.mark_visited(index);
        shard.sieve.get(index).map(|s| Arc::clone(&s.entry))
    }

    /// Stores `entry` for `key`, replacing the variant with the same Vary values and dropping
    /// variants stored under a different set of Vary names (the newest response defines the
    /// Vary). Evicts by SIEVE until it fits. `false`: too large for this store, not stored.
    /// Indexes the response's `Surrogate-Key` tags ([`tags::surrogate_keys`]).
    pub fn insert(&self, key: CacheKey, entry: Arc<Entry>) -> bool {
        let tags = tags::surrogate_keys(&entry.headers);
        if charge(&key, &entry) + tags::worst_bytes(&tags) > self.object_max_bytes {
            self.rejected_too_large.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let stored = Stored {
            charge: charge(&key, &entry) + tags::ref_bytes(&tags),
            key,
            entry,
            tags: Box::default(),
        };
        let dropped = self.write(&stored.key).insert(stored, tags);
        // Freed here, after the lock: a large body's free should not stall the shard.
        drop(dropped);
        true
    }

    /// Removes every variant of `key`'s URL; returns how many there were.
    pub fn purge(&self, key: &CacheKey) -> usize {
        let dropped = self.write(key).remove_where(key, |_| true);
        dropped.len()
    }

    /// Removes every entry carrying any of `tags` (from [`tags::surrogate_keys`] of a PURGE),
    /// in every shard; returns how many there were.
    pub fn purge_tags(&self, tags: &[Tag]) -> usize {
        if tags.is_empty() {
            return 0;
        }
        self.purge_each_shard(|shard| shard.tags.slots(tags))
    }

    /// Removes every entry of `prefix`'s scheme and host whose path and query start with
    /// `prefix`'s, in every shard; returns how many there were.
    pub fn purge_prefix(&self, prefix: &CacheKey) -> usize {
        self.purge_each_shard(|shard| {
            let under = shard
                .sieve
                .iter()
                .filter(|(_, s)| s.key.starts_with(prefix));
            under.map(|(slot, _)| slot).collect()
        })
    }

    /// Removes the slots `select` picks in each shard, one shard's lock at a time; the
    /// entries are freed after each lock is released.
    fn purge_each_shard(&self, select: impl Fn(&Shard) -> Vec<usize>) -> usize {
        let mut removed = 0;
        for shard in &self.shards {
            let mut shard = shard.write().unwrap_or_else(PoisonError::into_inner);
            let slots = select(&shard);
            let dropped: Vec<Arc<Entry>> = slots
                .into_iter()
                .filter_map(|i| shard.remove_slot(i))
                .collect();
            drop(shard);
            removed += dropped.len();
        }
        removed
    }

    /// Removes this very entry if it is still stored (e.g. after its revalidation failed or
    /// said it may no longer be stored).
    pub fn remove_variant(&self, key: &CacheKey, entry: &Arc<Entry>) {
        let dropped = self.write(key).remove_where(key, |e| Arc::ptr_eq(e, entry));
        drop(dropped);
    }

    pub fn stats(&self) -> StoreStats {
        let mut stats = StoreStats {
            rejected_too_large: self.rejected_too_large.load(Ordering::Relaxed),
            ..StoreStats::default()
        };
        for shard in &self.shards {
            let shard = shard.read().unwrap_or_else(PoisonError::into_inner);
            stats.bytes += shard.bytes;
            stats.entries += shard.sieve.len();
            stats.evictions += shard.evictions;
            stats.inserts += shard.inserts;
        }
        stats
    }

    /// The `memory_bytes` this store was built with.
    pub fn memory_limit(&self) -> usize {
        self.memory_bytes
    }

    /// The largest charge ([`Store::charge`]) an insert accepts.
    pub fn object_max_bytes(&self) -> usize {
        self.object_max_bytes
    }

    /// What storing `entry` under `key` costs against the memory limit at most: the entry's
    /// size, the key, [`NODE_OVERHEAD_BYTES`], and its tags ([`crate::tags`]) as if none were
    /// indexed yet (a tag another entry of the shard carries costs only its reference).
    pub fn charge(key: &CacheKey, entry: &Entry) -> usize {
        charge(key, entry) + tags::worst_bytes(&tags::surrogate_keys(&entry.headers))
    }

    /// Panics if any shard's bookkeeping is inconsistent or over budget, or the total exceeds
    /// the limit. Linear in the number of entries; for tests.
    pub fn check_invariants(&self) {
        let mut total = 0;
        for (i, shard) in self.shards.iter().enumerate() {
            let shard = shard.read().unwrap_or_else(PoisonError::into_inner);
            shard.check_invariants(|hash| shard_of(hash, self.mask) == i);
            total += shard.bytes;
        }
        assert!(
            total <= self.memory_bytes,
            "{total} bytes stored over {}",
            self.memory_bytes
        );
    }

    fn read(&self, key: &CacheKey) -> RwLockReadGuard<'_, Shard> {
        let shard = &self.shards[shard_of(key.hash64(), self.mask)];
        // A panic under the lock leaves the shard as consistent as any single step leaves it;
        // serving on beats failing every later request of that shard.
        shard.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self, key: &CacheKey) -> RwLockWriteGuard<'_, Shard> {
        let shard = &self.shards[shard_of(key.hash64(), self.mask)];
        shard.write().unwrap_or_else(PoisonError::into_inner)
    }
}

fn charge(key: &CacheKey, entry: &Entry) -> usize {
    entry.size() + key.size() + NODE_OVERHEAD_BYTES
}

/// One variant in a shard.
#[derive(Debug)]
struct Stored {
    key: CacheKey,
    entry: Arc<Entry>,
    /// What it costs, with its tag references (the strings are the index's to charge).
    charge: usize,
    /// Its surrogate keys, shared with the shard's index.
    tags: Box<[Tag]>,
}

/// One shard: variants in a SIEVE queue, found through a map from key hash to their slots.
/// Keying the map by the 64-bit keyed hash keeps one copy of the key per variant; the rare
/// collision is resolved by comparing keys.
#[derive(Debug)]
struct Shard {
    /// Key hash -> slots of its variants, newest first.
    map: HashMap<u64, Vec<usize>, PassThrough>,
    sieve: Sieve<Stored>,
    tags: TagIndex,
    /// Every stored charge plus the tag index's strings.
    bytes: usize,
    budget: usize,
    evictions: u64,
    inserts: u64,
}

impl Shard {
    fn new(budget: usize) -> Shard {
        Shard {
            map: HashMap::with_hasher(PassThrough),
            sieve: Sieve::new(),
            tags: TagIndex::default(),
            bytes: 0,
            budget,
            evictions: 0,
            inserts: 0,
        }
    }

    /// The newest variant of `key` that `pred` accepts.
    fn find(&self, key: &CacheKey, pred: impl Fn(&Entry) -> bool) -> Option<usize> {
        let slots = self.map.get(&key.hash64())?;
        slots.iter().copied().find(|&i| {
            self.sieve
                .get(i)
                .is_some_and(|s| s.key == *key && pred(&s.entry))
        })
    }

    /// Inserts a variant carrying `tags` whose charge with every tag string fits the budget
    /// (the caller checked it against the object limit, which is at most the budget). Returns
    /// the entries it dropped.
    fn insert(&mut self, mut stored: Stored, tags: Vec<Tag>) -> Vec<Arc<Entry>> {
        let (key, entry) = (&stored.key, &stored.entry);
        let mut dropped =
            self.remove_where(key, |e| e.same_variant(entry) || !e.same_vary_names(entry));
        let variants = self.variants_of(&stored.key);
        if variants.len() >= VARIANTS_PER_KEY_MAX {
            // Newest first, so the last ones are the oldest.
            for &i in &variants[VARIANTS_PER_KEY_MAX - 1..] {
                dropped.extend(self.remove_slot(i));
            }
        }
        stored.tags = self.tags.share(tags);
        // What the strings new to the index cost grows as evictions drop tags, up to every
        // string: the caller checked that much against the object limit.
        while self.bytes + stored.charge + self.tags.new_bytes(&stored.tags) > self.budget {
            // Invariant: bytes > 0 here (the worst charge <= budget), so the queue is not
            // empty.
            let Some(victim) = self.sieve.victim() else {
                break;
            };
            dropped.extend(self.remove_slot(victim));
            self.evictions += 1;
        }
        let (hash, charge) = (stored.key.hash64(), stored.charge);
        let slot = self.sieve.push(stored);
        let tags = self.sieve.get(slot).map_or(&[][..], |s| &s.tags[..]);
        let strings = self.tags.add(slot, tags);
        self.map.entry(hash).or_default().insert(0, slot);
        self.bytes += charge + strings;
        self.inserts += 1;
        debug_assert!(self.bytes <= self.budget);
        dropped
    }

    /// Slots of `key`'s variants, newest first.
    fn variants_of(&self, key: &CacheKey) -> Vec<usize> {
        let Some(slots) = self.map.get(&key.hash64()) else {
            return Vec::new();
        };
        slots
            .iter()
            .copied()
            .filter(|&i| self.sieve.get(i).is_some_and(|s| s.key == *key))
            .collect()
    }

    /// Removes the variants of `key` that `pred` selects; returns their entries.
    fn remove_where(
        &mut self,
        key: &CacheKey,
        pred: impl Fn(&Arc<Entry>) -> bool,
    ) -> Vec<Arc<Entry>> {
        let selected: Vec<usize> = self
            .variants_of(key)
            .into_iter()
            .filter(|&i| self.sieve.get(i).is_some_and(|s| pred(&s.entry)))
            .collect();
        selected
            .into_iter()
            .filter_map(|i| self.remove_slot(i))
            .collect()
    }

    fn remove_slot(&mut self, slot: usize) -> Option<Arc<Entry>> {
        let stored = self.sieve.remove(slot)?;
        self.bytes -= stored.charge + self.tags.remove(slot, &stored.tags);
        let hash = stored.key.hash64();
        if let Some(slots) = self.map.get_mut(&hash) {
            slots.retain(|&i| i != slot);
            if slots.is_empty() {
                self.map.remove(&hash);
            }
        }
        Some(stored.entry)
    }

    fn check_invariants(&self, in_this_shard: impl Fn(u64) -> bool) {
        self.sieve.check_invariants();
        assert!(self.bytes <= self.budget, "shard over budget");
        let mut bytes = 0;
        let mut mapped = 0;
        for (&hash, slots) in &self.map {
            assert!(!slots.is_empty(), "empty slot list kept");
            assert!(in_this_shard(hash), "key in the wrong shard");
            for &i in slots {
                let stored = self.sieve.get(i).expect("map points at a free slot");
                assert_eq!(stored.key.hash64(), hash, "slot under the wrong hash");
                assert_eq!(
                    slots.iter().filter(|&&j| j == i).count(),
                    1,
                    "slot listed twice"
                );
                mapped += 1;
            }
        }
        for (_, stored) in self.sieve.iter() {
            bytes += stored.charge;
            let own = charge(&stored.key, &stored.entry) + tags::ref_bytes(&stored.tags);
            assert_eq!(stored.charge, own, "charge is not the entry's");
            let same_key = self.variants_of(&stored.key).len();
            assert!(same_key <= VARIANTS_PER_KEY_MAX, "too many variants");
        }
        assert_eq!(mapped, self.sieve.len(), "map and queue disagree");
        let carried = self.sieve.iter().map(|(i, s)| (i, &s.tags[..]));
        self.tags.check(carried);
        assert_eq!(bytes + self.tags.bytes(), self.bytes, "byte count drifted");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn store_is_shareable() {
        assert_send_sync::<Store>();
    }

    #[test]
    fn geometry() {
        let s = Store::new(1000, 3, 0.5);
        assert_eq!(s.shards.len(), 4);
        assert_eq!(s.object_max_bytes(), 125);
        assert_eq!(Store::new(0, 8, 1.0).object_max_bytes(), 0);
        assert_eq!(Store::new(100, 1, f64::NAN).object_max_bytes(), 0);
        assert_eq!(Store::new(100, 1, 7.0).object_max_bytes(), 100);
    }
}
