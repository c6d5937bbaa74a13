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
//!
//! # Hit-for-pass
//! A leader whose response turned out not storable for reasons of the response itself
//! (no-store, private, Set-Cookie, no freshness, too large) finishes with
//! [`InFlight::finish_passing`]: the key keeps a *pass mark* until the given time, and
//! [`InFlight::join`] answers [`Join::Pass`] meanwhile, so the key's requests go to the origin
//! side by side instead of queueing behind one another's fetches (Varnish's hit-for-miss: what
//! they fetch may still be stored). Marks are few and short-lived: a shard holds at most
//! [`PASS_MARKS_PER_SHARD_MAX`], expired ones are swept when it is full, and a mark found
//! expired is replaced by the next leader.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use crate::key::{CacheKey, PassThrough, shard_count, shard_of};

/// Followers parked per key unless [`InFlight::with_waiters_max`] says otherwise. Past it, a
/// request goes to the origin itself: a hot key's waiter list must not grow without bound.
pub const WAITERS_PER_KEY_MAX: usize = 1024;

/// Pass marks one shard holds at most (see the module docs): a flood of distinct uncacheable
/// URLs costs a bounded table, and past it keys simply coalesce as before.
pub const PASS_MARKS_PER_SHARD_MAX: usize = 4096;

/// One shard of the table: key -> its slot.
type Slots<W> = HashMap<CacheKey, Slot<W>, PassThrough>;

/// What the table holds for a key.
#[derive(Debug)]
enum Slot<W> {
    /// A leader is fetching; these followers wait for it, in the order they joined.
    Led(Vec<W>),
    /// Not storable lately: requests go to the origin unled until this time.
    Pass(SystemTime),
}

impl<W> Slot<W> {
    fn passes_at(&self, now: SystemTime) -> bool {
        matches!(self, Slot::Pass(until) if *until > now)
    }
}

/// One shard: the slots, and how many of them are pass marks.
#[derive(Debug)]
struct Shard<W> {
    slots: Slots<W>,
    pass_marks: usize,
}

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
    /// The key's last response was not storable, lately (hit-for-pass): go to the origin
    /// yourself, without waiting for anyone. The waiter comes back.
    Pass(W),
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
    shards: Box<[Mutex<Shard<W>>]>,
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
                    .map(|_| {
                        Mutex::new(Shard {
                            slots: HashMap::with_hasher(PassThrough),
                            pass_marks: 0,
                        })
                    })
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

    /// Number of keys in flight (including abandoned ones not yet taken); pass marks do not
    /// count.
    pub fn len(&self) -> usize {
        self.table
            .shards
            .iter()
            .map(|s| {
                let shard = s.lock().unwrap_or_else(PoisonError::into_inner);
                shard.slots.len() - shard.pass_marks
            })
            .sum()
    }

    /// Number of pass marks held, expired ones not yet swept included.
    pub fn pass_marks(&self) -> usize {
        self.table
            .shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).pass_marks)
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Followers parked for `key` now (0 when not in flight).
    pub fn waiters(&self, key: &CacheKey) -> usize {
        match self.table.lock(key).slots.get(key) {
            Some(Slot::Led(waiters)) => waiters.len(),
            Some(Slot::Pass(_)) | None => 0,
        }
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
            let waiters = table.lock(&key).take_led(&key);
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
    /// the waiter limit, beyond which they get [`Join::Full`]. While the key has a pass mark
    /// at `now`, everyone gets [`Join::Pass`].
    pub fn join(&self, key: &CacheKey, waiter: W, now: SystemTime) -> Join<W> {
        let mut shard = self.table.lock(key);
        match shard.slots.get_mut(key) {
            Some(slot) if slot.passes_at(now) => Join::Pass(waiter),
            Some(Slot::Led(waiters)) if waiters.len() >= self.waiters_max => Join::Full(waiter),
            Some(Slot::Led(waiters)) => {
                waiters.push(waiter);
                Join::Follower
            }
            Some(Slot::Pass(_)) | None => {
                shard.lead(key);
                drop(shard);
                Join::Leader(self.ticket(key))
            }
        }
    }

    /// Leads `key` if nobody does, without parking anybody otherwise: for a request that has
    /// something to serve meanwhile (a stale entry inside its stale-while-revalidate window).
    /// A pass mark does not stop it: the entry is stored, so it is worth refreshing.
    pub fn try_lead(&self, key: &CacheKey) -> Option<Ticket> {
        let mut shard = self.table.lock(key);
        if let Some(Slot::Led(_)) = shard.slots.get(key) {
            return None;
        }
        shard.lead(key);
        drop(shard);
        Some(self.ticket(key))
    }

    /// The leader's fetch ended: removes the key and returns its parked waiters, in the order
    /// they joined, to be woken. A ticket from another table (one its owner replaced) is
    /// abandoned to that table instead, and nothing is returned here.
    pub fn finish(&self, ticket: Ticket) -> Vec<W> {
        self.settle(ticket, None)
    }

    /// As [`finish`](InFlight::finish), for a fetch whose response could not be stored because
    /// of what it was, at `now`: the key's requests go to the origin without coalescing for
    /// `hold` (hit-for-pass; see the module docs).
    pub fn finish_passing(&self, ticket: Ticket, now: SystemTime, hold: Duration) -> Vec<W> {
        self.settle(ticket, Some((now, hold)))
    }

    fn settle(&self, mut ticket: Ticket, pass: Option<(SystemTime, Duration)>) -> Vec<W> {
        if !self.owns(&ticket) {
            drop(ticket);
            return Vec::new();
        }
        ticket.table = None;
        let mut shard = self.table.lock(&ticket.key);
        let waiters = shard.take_led(&ticket.key);
        debug_assert!(waiters.is_some(), "finished a key that was not in flight");
        if let Some((now, hold)) = pass {
            shard.mark_pass(&ticket.key, now, hold);
        }
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
        let Some(Slot::Led(waiters)) = shard.slots.get_mut(key) else {
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

impl<W> Shard<W> {
    /// Makes `key` led (replacing an expired or overridden pass mark).
    fn lead(&mut self, key: &CacheKey) {
        if let Some(Slot::Pass(_)) = self.slots.insert(key.clone(), Slot::Led(Vec::new())) {
            self.pass_marks -= 1;
        }
    }

    /// Removes `key`'s leadership, returning its waiters; `None` if it was not led.
    fn take_led(&mut self, key: &CacheKey) -> Option<Vec<W>> {
        match self.slots.remove(key)? {
            Slot::Led(waiters) => Some(waiters),
            pass => {
                self.slots.insert(key.clone(), pass);
                None
            }
        }
    }

    /// Marks `key` for passing from `now` for `hold`, if the shard has room once the marks
    /// expired by `now` are swept.
    fn mark_pass(&mut self, key: &CacheKey, now: SystemTime, hold: Duration) {
        if self.pass_marks >= PASS_MARKS_PER_SHARD_MAX {
            let before = self.slots.len();
            self.slots
                .retain(|_, slot| !matches!(slot, Slot::Pass(until) if *until <= now));
            self.pass_marks -= before - self.slots.len();
        }
        if self.pass_marks < PASS_MARKS_PER_SHARD_MAX {
            self.slots.insert(key.clone(), Slot::Pass(now + hold));
            self.pass_marks += 1;
        }
    }
}

impl<W> Table<W> {
    fn lock(&self, key: &CacheKey) -> MutexGuard<'_, Shard<W>> {
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
