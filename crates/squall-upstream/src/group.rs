//! One worker's view of an upstream group: which server the next request goes to, and what the
//! outcomes of requests and probes say about each server.
//!
//! Each worker owns its `Group` and nothing is shared, so there are no locks and no atomics on
//! the pick path; the price is that each worker learns a server's health on its own (a server
//! that fails sees `fails` failures from every worker before all of them mark it down), and that
//! `least_conn` counts only this worker's requests. nginx without a `zone` works the same way.
//!
//! The request cycle, as the worker drives it:
//! 1. [`Group::pick`] with the servers already tried for this request as `exclude`; the chosen
//!    server's in-flight count goes up (and, if it was down, it is on trial).
//! 2. [`Group::report`] exactly once per pick with the [`Outcome`], which brings the count back
//!    down and feeds passive health.
//! 3. Probes: [`Group::due_checks`] on a timer ([`Group::next_check_at`]), then
//!    [`Group::record_check`] with each probe's result.

mod balance;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::health::{self, Health, HealthState};
use crate::ring::Ring;
use crate::spec::{AllDown, Balance, SERVERS_MAX, ServerSpec, SpecError, UpstreamSpec};

/// A server of one group: its index in [`UpstreamSpec::servers`]. Methods given an id that is
/// out of range (from another group, or from before a reload) ignore it rather than panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServerId(u32);

impl ServerId {
    pub const fn new(index: u32) -> ServerId {
        ServerId(index)
    }

    /// The index in the spec's server list, for the worker's own per-server tables.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// What became of a picked request, as far as the server's health is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The origin answered (a status below 500) and the exchange completed.
    Success,
    /// The origin failed: see [`Outcome::from_error`] and [`Outcome::from_status`].
    Failure,
    /// Says nothing about the server: the client went away, or a reused keep-alive connection
    /// had been closed by the origin (a race of idle timeouts, not a sick server).
    Neutral,
}

/// Counters per server, for the worker's metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    pub picks: u64,
    pub successes: u64,
    pub failures: u64,
    pub probes_ok: u64,
    pub probes_failed: u64,
    /// Times marked down.
    pub downs: u64,
    /// Times brought back up.
    pub ups: u64,
}

/// Balancing and health state of one upstream group in one worker.
#[derive(Debug, Clone)]
pub struct Group {
    name: String,
    balance: Balance,
    all_down: AllDown,
    policy: health::Policy,
    check_interval: Option<Duration>,
    servers: Vec<Server>,
    /// What the balancers read for every server on every pick, apart from the rest so that a
    /// pass over 64 servers reads 1 KiB (`balance.rs`). Parallel to `servers`.
    hot: Vec<balance::Hot>,
    /// Servers marked down; while it is zero and nothing is excluded, the balancers skip the
    /// per-server eligibility test.
    down_count: usize,
    /// `sum(weight)`, what a smooth round over every server hands back.
    weight_total: i64,
    /// Built only for `ConsistentHash`.
    ring: Option<Ring>,
    /// Where round robin looks first.
    cursor: usize,
}

#[derive(Debug, Clone)]
struct Server {
    spec: ServerSpec,
    health: Health,
    /// When the next probe is due (ignored without an active check).
    next_check: Instant,
    stats: ServerStats,
}

impl Group {
    /// Builds the group from a valid spec. `seed` (the worker's index, say) staggers the
    /// workers: where round robin starts and when each server's first probe is due, so that N
    /// workers do not all hit server 0 first or probe every server in the same instant.
    pub fn new(spec: &UpstreamSpec, now: Instant, seed: u64) -> Result<Group, SpecError> {
        spec.validate()?;
        let (fails, passes) = spec.thresholds();
        let policy = health::Policy {
            fails,
            passes,
            backoff_min: spec.passive.backoff_min,
            backoff_max: spec.passive.backoff_max,
            active: spec.health_check.is_some(),
        };
        let check_interval = spec.health_check.as_ref().map(|c| c.interval);
        let servers = spec
            .servers
            .iter()
            .enumerate()
            .map(|(i, s)| Server {
                spec: *s,
                health: Health::new(&policy, now),
                next_check: first_check(now, check_interval, seed, i),
                stats: ServerStats::default(),
            })
            .collect::<Vec<_>>();
        let ring = (spec.balance == Balance::ConsistentHash).then(|| Ring::new(&spec.servers));
        Ok(Group {
            name: spec.name.clone(),
            balance: spec.balance,
            all_down: spec.all_down,
            policy,
            check_interval,
            cursor: (crate::hash::mix64(seed) % servers.len() as u64) as usize,
            hot: spec
                .servers
                .iter()
                .map(|s| balance::Hot::new(s.weight))
                .collect(),
            down_count: 0,
            weight_total: spec.servers.iter().map(|s| i64::from(s.weight)).sum(),
            servers,
            ring,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn balance(&self) -> Balance {
        self.balance
    }

    /// Number of servers (at least 1).
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// Always false: a group has at least one server. For clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Every server's id, in spec order.
    pub fn ids(&self) -> impl Iterator<Item = ServerId> + use<> {
        (0..self.servers.len() as u32).map(ServerId)
    }

    pub fn address(&self, id: ServerId) -> Option<SocketAddr> {
        self.servers.get(id.index()).map(|s| s.spec.address)
    }

    pub fn state(&self, id: ServerId, now: Instant) -> Option<HealthState> {
        let server = self.servers.get(id.index())?;
        Some(server.health.state(&self.policy, now))
    }

    /// Requests of this worker now out on `id`.
    pub fn in_flight(&self, id: ServerId) -> u32 {
        self.hot.get(id.index()).map_or(0, |h| h.in_flight)
    }

    pub fn stats(&self, id: ServerId) -> ServerStats {
        self.servers
            .get(id.index())
            .map_or_else(ServerStats::default, |s| s.stats)
    }

    /// Servers not marked down, for a "healthy servers" gauge.
    pub fn up_count(&self) -> usize {
        self.servers.len() - self.down_count
    }

    /// Chooses a server for a request, or `None` when none may take it.
    ///
    /// `key` is the consistent-hash key (ignored by the other policies; without one,
    /// `ConsistentHash` falls back to round robin). `exclude` lists servers this request has
    /// already tried. Down servers are skipped, except one in half-open state, which gets a
    /// single trial. When *every* server is down, [`AllDown`] decides: by default the down
    /// server that failed least recently is returned anyway (see [`AllDown`] for why); `None`
    /// then only means every server is in `exclude`.
    pub fn pick(
        &mut self,
        key: Option<u64>,
        now: Instant,
        exclude: &[ServerId],
    ) -> Option<ServerId> {
        let chosen = match (self.balance, key) {
            (Balance::RoundRobin, _) | (Balance::ConsistentHash, None) => {
                self.pick_round_robin(now, exclude)
            }
            (Balance::Weighted, _) => self.pick_weighted(now, exclude),
            (Balance::ConsistentHash, Some(key)) => self.pick_hash(key, now, exclude),
            (Balance::LeastConn, _) => self.pick_least_conn(now, exclude),
        };
        let index = match chosen {
            Some(index) => index,
            None => self.pick_all_down(now, exclude)?,
        };
        let server = &mut self.servers[index];
        server.health.on_pick(now);
        server.stats.picks += 1;
        let hot = &mut self.hot[index];
        hot.in_flight = hot.in_flight.saturating_add(1);
        Some(ServerId(index as u32))
    }

    /// Ends a picked request: one call per successful [`Group::pick`]. A retry on the same
    /// server over a fresh connection ([`crate::Retry::SameServer`]) is still the same pick.
    pub fn report(&mut self, id: ServerId, outcome: Outcome, now: Instant) {
        let Some(hot) = self.hot.get_mut(id.index()) else {
            return;
        };
        hot.in_flight = hot.in_flight.saturating_sub(1);
        match outcome {
            Outcome::Success => self.health_event(id, Event::Success, now),
            Outcome::Failure => self.health_event(id, Event::Failure, now),
            Outcome::Neutral => self.servers[id.index()].health.neutral(now),
        }
    }

    /// Servers whose probe is due; each one yielded is scheduled for `now + interval`, so the
    /// worker sends it a probe now. Yields nothing without an active check. Servers not yet
    /// yielded when the iterator is dropped stay due.
    pub fn due_checks(&mut self, now: Instant) -> DueChecks<'_> {
        DueChecks {
            group: self,
            next: 0,
            now,
        }
    }

    /// When the next probe is due, for the worker's timer; `None` without an active check.
    pub fn next_check_at(&self) -> Option<Instant> {
        self.check_interval?;
        self.servers.iter().map(|s| s.next_check).min()
    }

    /// A probe's result: `ok` is a 2xx/3xx answer within the timeout.
    pub fn record_check(&mut self, id: ServerId, ok: bool, now: Instant) {
        if id.index() < self.servers.len() {
            let event = if ok {
                Event::ProbeOk
            } else {
                Event::ProbeFailed
            };
            self.health_event(id, event, now);
        }
    }

    /// Panics if an internal invariant does not hold; tests call it after every step.
    pub fn check_invariants(&self) {
        assert!(!self.servers.is_empty() && self.servers.len() <= SERVERS_MAX);
        assert!(self.cursor < self.servers.len());
        assert_eq!(self.hot.len(), self.servers.len());
        let down = self.servers.iter().filter(|s| s.health.is_down()).count();
        assert_eq!(self.down_count, down, "down_count follows the transitions");
        for (server, hot) in self.servers.iter().zip(&self.hot) {
            assert_eq!(hot.weight, i64::from(server.spec.weight));
            server.health.check_invariants(&self.policy);
            assert!(
                server.stats.ups <= server.stats.downs,
                "up again only after down"
            );
            assert!(
                server.stats.downs <= server.stats.ups + 1,
                "down only when up"
            );
            assert_eq!(
                server.health.is_down(),
                server.stats.downs > server.stats.ups
            );
        }
        // Each smooth round adds `total` among the candidates and takes it back from the
        // winner, so the running weights always sum to zero.
        assert_eq!(self.hot.iter().map(|h| h.current).sum::<i64>(), 0);
        assert_eq!(
            self.hot.iter().map(|h| h.weight).sum::<i64>(),
            self.weight_total
        );
        match &self.ring {
            Some(ring) => ring.check_shape(),
            None => assert_ne!(self.balance, Balance::ConsistentHash),
        }
    }

    /// Feeds one health event to server `id` (in range) and keeps the counts in step.
    fn health_event(&mut self, id: ServerId, event: Event, now: Instant) {
        let policy = self.policy;
        let server = &mut self.servers[id.index()];
        let stats = &mut server.stats;
        let (came_up, went_down) = match event {
            Event::Success => (server.health.success(&policy, false, now), false),
            Event::ProbeOk => (server.health.success(&policy, true, now), false),
            Event::Failure | Event::ProbeFailed => (false, server.health.failure(&policy, now)),
        };
        match event {
            Event::Success => stats.successes += 1,
            Event::Failure => stats.failures += 1,
            Event::ProbeOk => stats.probes_ok += 1,
            Event::ProbeFailed => stats.probes_failed += 1,
        }
        if came_up {
            stats.ups += 1;
            self.down_count -= 1;
        }
        if went_down {
            stats.downs += 1;
            self.down_count += 1;
        }
    }
}

/// What a report or probe result says, for [`Group::health_event`].
#[derive(Clone, Copy)]
enum Event {
    Success,
    Failure,
    ProbeOk,
    ProbeFailed,
}

/// Iterator of [`Group::due_checks`].
#[derive(Debug)]
pub struct DueChecks<'a> {
    group: &'a mut Group,
    next: usize,
    now: Instant,
}

impl Iterator for DueChecks<'_> {
    type Item = ServerId;

    fn next(&mut self) -> Option<ServerId> {
        let interval = self.group.check_interval?;
        while self.next < self.group.servers.len() {
            let index = self.next;
            self.next += 1;
            let server = &mut self.group.servers[index];
            if server.next_check <= self.now {
                // From `now`, not from the missed deadline: a worker that stalled sends one
                // probe, not a burst to catch up.
                server.next_check = health::after(self.now, interval);
                return Some(ServerId(index as u32));
            }
        }
        None
    }
}

/// The first probe of server `index`: somewhere in the first interval, at a point fixed by
/// the seed, so probes from different workers and to different servers spread out.
fn first_check(now: Instant, interval: Option<Duration>, seed: u64, index: usize) -> Instant {
    let Some(interval) = interval else {
        return now;
    };
    let h = crate::hash::mix64(seed ^ crate::hash::mix64(index as u64));
    // 53 bits make an exact f64 fraction in [0, 1).
    let fraction = (h >> 11) as f64 / (1u64 << 53) as f64;
    health::after(now, interval.mul_f64(fraction))
}
