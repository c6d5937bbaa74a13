//! Request coalescing: concurrent misses for one key wait on one origin fetch, across workers
//! (DESIGN.md "Threads and sharing").
//!
//! The table only records who waits; it wakes nobody and keeps no time. The first caller for a
//! key becomes the leader and fetches; later callers park a waiter handle (`W`: e.g. worker and
//! connection ids) and bound their own wait. When the leader's fetch ends, stored or not,
//! [`InFlight::finish`] hands back the waiters; the caller wakes each one, and they look the
//! store up again and, on a miss, go to the origin themselves. So a leader whose response was
//! not storable costs the followers one extra round trip, never a wrong response.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::key::{CacheKey, PassThrough, shard_count, shard_of};

/// Followers parked per key unless [`InFlight::with_waiters_max`] says otherwise. Past it, a
/// request goes to the origin itself: a hot key's waiter list must not grow without bound.
pub const WAITERS_PER_KEY_MAX: usize = 1024;

/// One shard of the table: key -> parked waiters.
type Waiters<W> = HashMap<CacheKey, Vec<W>, PassThrough>;

/// The in-flight table. `Send + Sync` when `W` is `Send`; share it through an `Arc`.
#[derive(Debug)]
pub struct InFlight<W> {
    shards: Box<[Mutex<Waiters<W>>]>,
    mask: usize,
    waiters_max: usize,
}

/// What [`InFlight::join`] made of the caller.
#[derive(Debug)]
pub enum Join<W> {
    /// Nobody was fetching: fetch, then call [`InFlight::finish`] with this ticket on every
    /// path (stored, not storable, origin error, client gone).
    Leader(Ticket),
    /// Someone is fetching; the waiter is parked until `finish` returns it or `leave` removes
    /// it.
    Follower,
    /// The key already has the maximum number of waiters: go to the origin yourself. The
    /// waiter comes back.
    Full(W),
}

/// Proof of leadership for one key; consumed by [`InFlight::finish`]. Dropping it unfinished
/// would strand the key's followers until their own timeouts and make every later request
/// for the key a follower, so debug builds panic on that.
#[derive(Debug)]
#[must_use = "a leader must call InFlight::finish, or the key's followers are stranded"]
pub struct Ticket {
    key: CacheKey,
    finished: bool,
}

impl Ticket {
    pub fn key(&self) -> &CacheKey {
        &self.key
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            debug_assert!(
                self.finished,
                "in-flight ticket for {:?} dropped unfinished",
                self.key
            );
        }
    }
}

impl<W> InFlight<W> {
    /// A table in `shards` shards (rounded up to a power of two, at least 1), with
    /// [`WAITERS_PER_KEY_MAX`] waiters per key.
    pub fn new(shards: usize) -> Self {
        let count = shard_count(shards);
        InFlight {
            shards: (0..count)
                .map(|_| Mutex::new(HashMap::with_hasher(PassThrough)))
                .collect(),
            mask: count - 1,
            waiters_max: WAITERS_PER_KEY_MAX,
        }
    }

    /// The same table with at most `waiters_max` followers per key (0: nobody waits, every
    /// concurrent miss but the leader's goes to the origin).
    pub fn with_waiters_max(mut self, waiters_max: usize) -> Self {
        self.waiters_max = waiters_max;
        self
    }

    /// The first caller for `key` becomes the leader; later ones are parked as followers, up to
    /// the waiter limit, beyond which they get [`Join::Full`].
    pub fn join(&self, key: &CacheKey, waiter: W) -> Join<W> {
        let mut shard = self.lock(key);
        match shard.get_mut(key) {
            None => {
                shard.insert(key.clone(), Vec::new());
                Join::Leader(Ticket {
                    key: key.clone(),
                    finished: false,
                })
            }
            Some(waiters) if waiters.len() >= self.waiters_max => Join::Full(waiter),
            Some(waiters) => {
                waiters.push(waiter);
                Join::Follower
            }
        }
    }

    /// The leader's fetch ended: removes the key and returns its parked waiters, in the order
    /// they joined, to be woken.
    pub fn finish(&self, mut ticket: Ticket) -> Vec<W> {
        ticket.finished = true;
        let waiters = self.lock(&ticket.key).remove(&ticket.key);
        debug_assert!(waiters.is_some(), "finished a key that was not in flight");
        waiters.unwrap_or_default()
    }

    /// Number of keys in flight.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Followers parked for `key` now (0 when not in flight).
    pub fn waiters(&self, key: &CacheKey) -> usize {
        self.lock(key).get(key).map_or(0, Vec::len)
    }

    fn lock(&self, key: &CacheKey) -> MutexGuard<'_, Waiters<W>> {
        let shard = &self.shards[shard_of(key.hash64(), self.mask)];
        // The map is consistent after every single operation, so a poisoned lock is safe.
        shard.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<W: PartialEq> InFlight<W> {
    /// A follower stopped waiting (its bounded wait ended, or its client left): removes it if
    /// it is still parked. `false`: already handed out by `finish` (a wake-up is on its way and
    /// should be ignored) or never parked.
    pub fn leave(&self, key: &CacheKey, waiter: &W) -> bool {
        let mut shard = self.lock(key);
        let Some(waiters) = shard.get_mut(key) else {
            return false;
        };
        match waiters.iter().position(|w| w == waiter) {
            Some(i) => {
                waiters.remove(i);
                true
            }
            None => false,
        }
    }
}
