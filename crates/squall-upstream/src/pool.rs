//! The keep-alive policy of one worker's connections to one group's servers: which idle
//! connection a request reuses, which ones are kept, and which must be closed.
//!
//! The worker owns the sockets and names each connection with a [`ConnId`] of its choosing (a
//! slab index with a generation, say); the pool only keeps ids and times. Per server the idle
//! connections form a stack, newest on top:
//! - [`Pool::checkout`] takes the top one (LIFO). The most recently used connection is the one
//!   least likely to have been closed by the origin's own idle timeout, and reusing the same few
//!   connections lets the rest age out, so the pool shrinks to what the load needs.
//!   [`Pool::checkout_unsafe`] does the same for a request that could not be sent again, only
//!   if that connection has been idle for less than `unsafe_idle_timeout`.
//! - [`Pool::checkin`] puts a connection back after a complete exchange, unless it has served
//!   `requests_max` requests or the server already has `idle_max` idle connections.
//! - [`Pool::expire`] hands back the connections idle for `idle_timeout`, from the bottom of
//!   each stack. A checkout never returns one of those: with the stack ordered by age, an
//!   expired top means the whole stack is expired, and they wait for the next `expire`.
//! - [`Pool::remove`] forgets a connection the worker closed for any other reason (the origin
//!   closed an idle one, an error, `Connection: close`). Every connection the pool has seen must
//!   end in a `Checkin::Close`, an `expire`, a `drain` or a `remove`: an id is only safe to reuse
//!   for a new connection after that.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::time::{Duration, Instant};

use crate::ServerId;
use crate::spec::PoolLimits;

/// The worker's name for one origin connection; unique among the connections it has open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// What to do with a connection whose exchange completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checkin {
    /// It is in the pool now; keep the socket open and read from it only to notice a close.
    Keep,
    /// Close it; the pool has forgotten it.
    Close(CloseReason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// It has served `requests_max` requests.
    RequestsMax,
    /// The server already has `idle_max` idle connections (or keep-alive is off).
    IdleFull,
    /// The server id is not of this group (a bug in the caller, handled without panicking).
    UnknownServer,
}

/// Counters for the worker's metrics. `hits / (hits + misses)` is the reuse ratio.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Checkouts that returned a connection.
    pub hits: u64,
    /// Checkouts that found none: the worker connects.
    pub misses: u64,
    /// Checkins kept.
    pub kept: u64,
    pub closed_requests_max: u64,
    pub closed_idle_full: u64,
    /// Connections handed back by `expire`.
    pub expired: u64,
    /// Idle connections forgotten through `remove` (the origin closed them, mostly).
    pub removed_idle: u64,
    /// `checkout_unsafe` calls that found idle connections, all idle too long for the request.
    pub unsafe_stale: u64,
}

/// One worker's idle connections to the servers of one group.
#[derive(Debug, Clone)]
pub struct Pool {
    limits: PoolLimits,
    /// Per server, oldest at the front, newest at the back.
    idle: Vec<VecDeque<Idle>>,
    /// Every connection the pool knows, idle or lent out.
    conns: HashMap<ConnId, Conn, BuildHasherDefault<IdHasher>>,
    stats: PoolStats,
}

#[derive(Debug, Clone, Copy)]
struct Idle {
    conn: ConnId,
    since: Instant,
}

#[derive(Debug, Clone, Copy)]
struct Conn {
    server: ServerId,
    /// Exchanges completed on it.
    requests: u32,
    idle: bool,
}

impl Pool {
    /// An empty pool for a group of `servers` servers.
    pub fn new(servers: usize, limits: PoolLimits) -> Pool {
        Pool {
            limits,
            idle: (0..servers).map(|_| VecDeque::new()).collect(),
            conns: HashMap::default(),
            stats: PoolStats::default(),
        }
    }

    pub fn limits(&self) -> PoolLimits {
        self.limits
    }

    pub fn stats(&self) -> PoolStats {
        self.stats
    }

    /// Idle connections to `server`.
    pub fn idle_count(&self, server: ServerId) -> usize {
        self.idle.get(server.index()).map_or(0, VecDeque::len)
    }

    /// Idle connections to all servers.
    pub fn idle_total(&self) -> usize {
        self.idle.iter().map(VecDeque::len).sum()
    }

    /// Connections the pool knows, idle or lent out (a leak shows here).
    pub fn known(&self) -> usize {
        self.conns.len()
    }

    /// An idle connection to `server`, the most recently used, or `None`: connect a new one.
    pub fn checkout(&mut self, server: ServerId, now: Instant) -> Option<ConnId> {
        self.checkout_within(server, now, self.limits.idle_timeout)
    }

    /// As [`checkout`](Pool::checkout), for a request that could not be sent again if the
    /// connection turned out closed (RFC 9110 §9.2.2: not idempotent, or with a body the
    /// worker does not keep): only a connection idle for less than `unsafe_idle_timeout`, one
    /// its origin is unlikely to be closing at this very moment (its own keep-alive timeout
    /// runs out). An older one stays for requests that may be retried, and this is a miss
    /// (counted in `unsafe_stale` when there was one): the worker connects.
    pub fn checkout_unsafe(&mut self, server: ServerId, now: Instant) -> Option<ConnId> {
        let within = self
            .limits
            .unsafe_idle_timeout
            .min(self.limits.idle_timeout);
        let found = self.checkout_within(server, now, within);
        if found.is_none() && self.idle_count(server) > 0 {
            self.stats.unsafe_stale += 1;
        }
        found
    }

    /// The top of `server`'s stack if it has been idle for less than `within`.
    fn checkout_within(
        &mut self,
        server: ServerId,
        now: Instant,
        within: Duration,
    ) -> Option<ConnId> {
        let found = self.idle.get_mut(server.index()).and_then(|stack| {
            // Newest on top: if the top is too old, so is everything below it.
            let top = stack.back()?;
            if now.saturating_duration_since(top.since) >= within {
                return None;
            }
            stack.pop_back()
        });
        let Some(idle) = found else {
            self.stats.misses += 1;
            return None;
        };
        if let Some(conn) = self.conns.get_mut(&idle.conn) {
            conn.idle = false;
        }
        self.stats.hits += 1;
        Some(idle.conn)
    }

    /// A connection to `server` finished an exchange and may be kept. The worker calls this
    /// only when the connection can carry another request: the response was complete, neither
    /// side said `Connection: close`, and no error happened. Otherwise it closes and `remove`s.
    pub fn checkin(&mut self, server: ServerId, conn: ConnId, now: Instant) -> Checkin {
        if server.index() >= self.idle.len() {
            self.forget(conn);
            return Checkin::Close(CloseReason::UnknownServer);
        }
        let known = self.conns.get(&conn).copied();
        if let Some(old) = known.filter(|c| c.idle) {
            // Checked in twice without a checkout: take the stale entry out first.
            self.unlink_idle(old.server, conn);
        }
        let requests = match known {
            Some(c) if c.server == server => c.requests.saturating_add(1),
            // New to the pool (its first exchange), or re-homed by the caller: starts afresh.
            _ => 1,
        };
        if requests >= self.limits.requests_max {
            self.conns.remove(&conn);
            self.stats.closed_requests_max += 1;
            return Checkin::Close(CloseReason::RequestsMax);
        }
        let stack = &mut self.idle[server.index()];
        if stack.len() >= self.limits.idle_max as usize {
            self.conns.remove(&conn);
            self.stats.closed_idle_full += 1;
            return Checkin::Close(CloseReason::IdleFull);
        }
        // Times only grow along the stack, even if a caller's clock went backwards, so that
        // "top expired implies all expired" holds.
        let since = stack.back().map_or(now, |top| top.since.max(now));
        stack.push_back(Idle { conn, since });
        self.conns.insert(
            conn,
            Conn {
                server,
                requests,
                idle: true,
            },
        );
        self.stats.kept += 1;
        Checkin::Keep
    }

    /// Idle connections whose `idle_timeout` has passed; the worker closes them.
    pub fn expire(&mut self, now: Instant) -> Vec<ConnId> {
        let timeout = self.limits.idle_timeout;
        let mut out = Vec::new();
        for stack in &mut self.idle {
            while let Some(oldest) = stack.front() {
                if now.saturating_duration_since(oldest.since) < timeout {
                    break;
                }
                out.push(oldest.conn);
                stack.pop_front();
            }
        }
        for conn in &out {
            self.conns.remove(conn);
        }
        self.stats.expired += out.len() as u64;
        out
    }

    /// When the next idle connection expires, for the worker's timer.
    pub fn next_expiry(&self) -> Option<Instant> {
        let oldest = self
            .idle
            .iter()
            .filter_map(|s| s.front())
            .map(|i| i.since)
            .min()?;
        Some(crate::health::after(oldest, self.limits.idle_timeout))
    }

    /// Forgets a connection the worker closed (or is closing) for its own reasons. Returns true
    /// if it was idle in the pool.
    pub fn remove(&mut self, conn: ConnId) -> bool {
        let was_idle = self.forget(conn);
        if was_idle {
            self.stats.removed_idle += 1;
        }
        was_idle
    }

    /// Every idle connection, for shutdown or reload; the worker closes them.
    pub fn drain(&mut self) -> Vec<ConnId> {
        let out: Vec<ConnId> = self
            .idle
            .iter_mut()
            .flat_map(|s| s.drain(..))
            .map(|i| i.conn)
            .collect();
        for conn in &out {
            self.conns.remove(conn);
        }
        out
    }

    /// Panics if an internal invariant does not hold; tests call it after every step.
    pub fn check_invariants(&self) {
        let mut idle_seen = 0;
        for (index, stack) in self.idle.iter().enumerate() {
            assert!(
                stack.len() <= self.limits.idle_max as usize,
                "idle_max per server"
            );
            for pair in stack.iter().collect::<Vec<_>>().windows(2) {
                assert!(pair[0].since <= pair[1].since, "ordered by age");
            }
            for idle in stack {
                let conn = self
                    .conns
                    .get(&idle.conn)
                    .expect("an idle connection is known");
                assert!(
                    conn.idle && conn.server.index() == index,
                    "idle where it is filed"
                );
                assert!(
                    conn.requests < self.limits.requests_max,
                    "at the limit it is closed"
                );
            }
            idle_seen += stack.len();
        }
        let idle_known = self.conns.values().filter(|c| c.idle).count();
        assert_eq!(
            idle_seen, idle_known,
            "every idle connection is in exactly one stack"
        );
    }

    /// Drops `conn` from the map and, if idle, from its stack. Returns whether it was idle.
    fn forget(&mut self, conn: ConnId) -> bool {
        match self.conns.remove(&conn) {
            Some(c) if c.idle => {
                self.unlink_idle(c.server, conn);
                true
            }
            _ => false,
        }
    }

    fn unlink_idle(&mut self, server: ServerId, conn: ConnId) {
        if let Some(stack) = self.idle.get_mut(server.index())
            && let Some(at) = stack.iter().position(|i| i.conn == conn)
        {
            stack.remove(at);
        }
    }
}

/// Hashes a `ConnId` with one multiply-mix instead of SipHash: the ids come from the worker,
/// not from the network, so there is no flooding to defend against.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = crate::hash::mix64(self.0 ^ u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = crate::hash::mix64(self.0 ^ n);
    }
}
