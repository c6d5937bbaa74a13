//! Request coalescing: concurrent misses for one key wait on one origin fetch, across workers
//! (docs/ARCHITECTURE.md, the squall-cache row).
//!
//! The table only records who waits; it wakes nobody and keeps no time. The first caller for a
//! key becomes the leader and gets a [`Ticket`]; later callers park a waiter handle (`W`: e.g.
//! worker and connection ids) and bound their own wait. When the leader's fill ends, stored or
//! not, [`InFlight::finish`] takes the ticket and hands back the waiters; the driver turns each
//! into a wake-up on whichever worker holds it, and they look the store up again and, on a
//! miss, go to the origin themselves. So a leader whose response was not storable costs the
//! followers one extra round trip, never a wrong response.
//!
//! # A leader's end always wakes its followers
//! A ticket dropped unfinished (a client gone, a session torn down, a panic unwinding) must not
//! strand its followers until their own timeouts, nor leave the key led by nobody. Its `Drop`
//! cannot wake anyone itself (this crate knows no workers and no rings), so it queues its key
//! on the table it came from; every driver calls [`InFlight::take_abandoned`] once per loop
//! turn, which removes those keys and returns their waiters to be woken like `finish`'s. The
//! key stays in flight until then, so nobody else can lead it meanwhile and each waiter is
//! handed out exactly once, by `finish`, `take_abandoned` or `leave`. A ticket holds its
//! table alive (type-erased, so `Ticket` needs no waiter type), so the queue outlives a table
//! its owner replaced; an owner that replaces its table keeps draining the old one until
//! [`InFlight::is_empty`].

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::key::{CacheKey, PassThrough, shard_count, shard_of};

/// Followers parked per key unless [`InFlight::with_waiters_max`] says otherwise. Past it, a
/// request goes to the origin itself: a hot key's waiter list must not grow without bound.
pub const WAITERS_PER_KEY_MAX: usize = 1024;

/// One shard of the table: key -> parked waiters.
type Waiters<W> = HashMap<CacheKey, Vec<W>, PassThrough>;

/// The in-flight table. `Send + Sync` when `W` is `Send`; share it through an `Arc`.
#[derive(Debug)]
pub struct InFlight<W> {
    table: Arc<Table<W>>,
    waiters_max: usize,
}

/// What [`InFlight::join`] made of the caller.
#[derive(Debug)]
pub enum Join<W> {
    /// Nobody was fetching: fetch, then give this ticket to [`InFlight::finish`] when the fill
    /// ends (stored, not storable, origin error). Dropping it instead releases the followers
    /// through [`InFlight::take_abandoned`].
    Leader(Ticket),
    /// Someone is fetching; the waiter is parked until `finish` or `take_abandoned` returns it,
    /// or `leave` removes it.
    Follower,
    /// The key already has the maximum number of waiters: go to the origin yourself. The
    /// waiter comes back.
    Full(W),
}

/// Proof of leadership for one key, consumed by [`InFlight::finish`]. Dropped unfinished, it
/// queues its key on its table's abandoned list (see the module docs), so its followers are
/// still woken by the next [`InFlight::take_abandoned`].
#[must_use = "a leader's ticket should go to InFlight::finish; dropped, its followers wait for take_abandoned"]
pub struct Ticket {
    key: CacheKey,
    /// The table the ticket came from; `None` once finished.
    table: Option<Arc<dyn Abandon>>,
}

/// The part of a table a ticket needs, without its waiter type.
trait Abandon: Send + Sync {
    /// Queues `key`, whose leader is gone, for [`InFlight::take_abandoned`].
    fn abandon(&self, key: CacheKey);
}

/// The shared state of an [`InFlight`]: waiters by key, and keys whose ticket was dropped.
#[derive(Debug)]
struct Table<W> {
    shards: Box<[Mutex<Waiters<W>>]>,
    mask: usize,
    abandoned: Mutex<Vec<CacheKey>>,
    /// Whether `abandoned` may be non-empty: lets every driver check each loop turn without
    /// taking a lock that all workers share.
    any_abandoned: AtomicBool,
}

impl Ticket {
    pub fn key(&self) -> &CacheKey {
        &self.key
    }
}

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket")
            .field("key", &self.key)
            .field("finished", &self.table.is_none())
            .finish()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(table) = self.table.take() {
            table.abandon(self.key.clone());
        }
    }
}

impl<W> InFlight<W> {
    /// A table in `shards` shards (rounded up to a power of two, at least 1), with
    /// [`WAITERS_PER_KEY_MAX`] waiters per key.
    pub fn new(shards: usize) -> Self {
        let count = shard_count(shards);
        InFlight {
            table: Arc::new(Table {
                shards: (0..count)
                    .map(|_| Mutex::new(HashMap::with_hasher(PassThrough)))
                    .collect(),
                mask: count - 1,
                abandoned: Mutex::new(Vec::new()),
                any_abandoned: AtomicBool::new(false),
            }),
            waiters_max: WAITERS_PER_KEY_MAX,
        }
    }

    /// The same table with at most `waiters_max` followers per key (0: nobody waits, every
    /// concurrent miss but the leader's goes to the origin).
    pub fn with_waiters_max(mut self, waiters_max: usize) -> Self {
        self.waiters_max = waiters_max;
        self
    }

    /// Number of keys in flight (including abandoned ones not yet taken).
    pub fn len(&self) -> usize {
        self.table
            .shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Followers parked for `key` now (0 when not in flight).
    pub fn waiters(&self, key: &CacheKey) -> usize {
        self.table.lock(key).get(key).map_or(0, Vec::len)
    }

    /// The waiters of every key whose ticket was dropped unfinished since the last call, to be
    /// woken as [`InFlight::finish`]'s are; those keys are no longer in flight. Call it once
    /// per loop turn: it costs one atomic load when nothing was abandoned.
    pub fn take_abandoned(&self) -> Vec<W> {
        let table = &*self.table;
        if !table.any_abandoned.load(Ordering::Acquire) {
            return Vec::new();
        }
        let keys = {
            let mut abandoned = table
                .abandoned
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            table.any_abandoned.store(false, Ordering::Release);
            std::mem::take(&mut *abandoned)
        };
        let mut woken = Vec::new();
        for key in keys {
            let waiters = table.lock(&key).remove(&key);
            debug_assert!(waiters.is_some(), "abandoned {key:?} was not in flight");
            woken.extend(waiters.unwrap_or_default());
        }
        woken
    }

    /// Whether `ticket` was handed out by this table.
    fn owns(&self, ticket: &Ticket) -> bool {
        ticket
            .table
            .as_ref()
            .is_some_and(|table| std::ptr::addr_eq(Arc::as_ptr(table), Arc::as_ptr(&self.table)))
    }
}

impl<W: Send + 'static> InFlight<W> {
    /// The first caller for `key` becomes the leader; later ones are parked as followers, up to
    /// the waiter limit, beyond which they get [`Join::Full`].
    pub fn join(&self, key: &CacheKey, waiter: W) -> Join<W> {
        let mut shard = self.table.lock(key);
        match shard.get_mut(key) {
            None => {
                shard.insert(key.clone(), Vec::new());
                drop(shard);
                Join::Leader(self.ticket(key))
            }
            Some(waiters) if waiters.len() >= self.waiters_max => Join::Full(waiter),
            Some(waiters) => {
                waiters.push(waiter);
                Join::Follower
            }
        }
    }

    /// Leads `key` if nobody does, without parking anybody otherwise: for a request that has
    /// something to serve meanwhile (a stale entry inside its stale-while-revalidate window).
    pub fn try_lead(&self, key: &CacheKey) -> Option<Ticket> {
        let mut shard = self.table.lock(key);
        if shard.contains_key(key) {
            return None;
        }
        shard.insert(key.clone(), Vec::new());
        drop(shard);
        Some(self.ticket(key))
    }

    /// The leader's fetch ended: removes the key and returns its parked waiters, in the order
    /// they joined, to be woken. A ticket from another table (one its owner replaced) is
    /// abandoned to that table instead, and nothing is returned here.
    pub fn finish(&self, mut ticket: Ticket) -> Vec<W> {
        if !self.owns(&ticket) {
            drop(ticket);
            return Vec::new();
        }
        ticket.table = None;
        let waiters = self.table.lock(&ticket.key).remove(&ticket.key);
        debug_assert!(waiters.is_some(), "finished a key that was not in flight");
        waiters.unwrap_or_default()
    }

    fn ticket(&self, key: &CacheKey) -> Ticket {
        let table: Arc<dyn Abandon> = self.table.clone();
        Ticket {
            key: key.clone(),
            table: Some(table),
        }
    }
}

impl<W: PartialEq> InFlight<W> {
    /// A follower stopped waiting (its bounded wait ended, or its client left): removes it if
    /// it is still parked. `false`: already handed out by `finish` or `take_abandoned` (a
    /// wake-up is on its way and should be ignored) or never parked.
    pub fn leave(&self, key: &CacheKey, waiter: &W) -> bool {
        let mut shard = self.table.lock(key);
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

impl<W> Table<W> {
    fn lock(&self, key: &CacheKey) -> MutexGuard<'_, Waiters<W>> {
        let shard = &self.shards[shard_of(key.hash64(), self.mask)];
        // The map is consistent after every single operation, so a poisoned lock is safe.
        shard.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<W: Send> Abandon for Table<W> {
    fn abandon(&self, key: CacheKey) {
        // Runs in `Drop`, perhaps while unwinding: a poisoned lock is taken over, never a
        // second panic.
        let mut abandoned = self
            .abandoned
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        abandoned.push(key);
        self.any_abandoned.store(true, Ordering::Release);
    }
}
