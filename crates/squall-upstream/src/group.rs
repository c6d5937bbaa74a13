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
    /// Built only for `ConsistentHash`.
    ring: Option<Ring>,
    /// Where round robin looks first.
    cursor: usize,
}

#[derive(Debug, Clone)]
struct Server {
    spec: ServerSpec,
    health: Health,
    in_flight: u32,
    /// Smooth weighted round robin's running weight (nginx's `current_weight`).
    current: i64,
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
                in_flight: 0,
                current: 0,
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
        self.servers.get(id.index()).map_or(0, |s| s.in_flight)
    }

    pub fn stats(&self, id: ServerId) -> ServerStats {
        self.servers
            .get(id.index())
            .map_or_else(ServerStats::default, |s| s.stats)
    }

    /// Servers not marked down, for a "healthy servers" gauge.
    pub fn up_count(&self) -> usize {
        self.servers.iter().filter(|s| !s.health.is_down()).count()
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
        server.in_flight = server.in_flight.saturating_add(1);
        server.stats.picks += 1;
        Some(ServerId(index as u32))
    }

    /// Ends a picked request: one call per successful [`Group::pick`]. A retry on the same
    /// server over a fresh connection ([`crate::Retry::SameServer`]) is still the same pick.
    pub fn report(&mut self, id: ServerId, outcome: Outcome, now: Instant) {
        let policy = self.policy;
        let Some(server) = self.servers.get_mut(id.index()) else {
            return;
        };
        server.in_flight = server.in_flight.saturating_sub(1);
        match outcome {
            Outcome::Success => {
                server.stats.successes += 1;
                server.stats.ups += u64::from(server.health.success(&policy, false, now));
            }
            Outcome::Failure => {
                server.stats.failures += 1;
                server.stats.downs += u64::from(server.health.failure(&policy, now));
            }
            Outcome::Neutral => server.health.neutral(now),
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
        let policy = self.policy;
        let Some(server) = self.servers.get_mut(id.index()) else {
            return;
        };
        if ok {
            server.stats.probes_ok += 1;
            server.stats.ups += u64::from(server.health.success(&policy, true, now));
        } else {
            server.stats.probes_failed += 1;
            server.stats.downs += u64::from(server.health.failure(&policy, now));
        }
    }

    /// Panics if an internal invariant does not hold; tests call it after every step.
    pub fn check_invariants(&self) {
        assert!(!self.servers.is_empty() && self.servers.len() <= SERVERS_MAX);
        assert!(self.cursor < self.servers.len());
        for server in &self.servers {
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
        assert_eq!(self.servers.iter().map(|s| s.current).sum::<i64>(), 0);
        match &self.ring {
            Some(ring) => ring.check_shape(),
            None => assert_ne!(self.balance, Balance::ConsistentHash),
        }
    }

    fn eligible(&self, index: usize, now: Instant, exclude: &[ServerId]) -> bool {
        !exclude.contains(&ServerId(index as u32))
            && self.servers[index].health.admits(&self.policy, now)
    }

    /// The next eligible server after the last one picked.
    fn pick_round_robin(&mut self, now: Instant, exclude: &[ServerId]) -> Option<usize> {
        let n = self.servers.len();
        let index = (0..n)
            .map(|step| (self.cursor + step) % n)
            .find(|&i| self.eligible(i, now, exclude))?;
        self.cursor = (index + 1) % n;
        Some(index)
    }

    /// nginx's smooth weighted round robin (`ngx_http_upstream_get_peer`): every eligible
    /// server's `current` grows by its weight, the largest wins and gives back the total. Over
    /// `sum(weights)` picks each server wins `weight` times, spread out (5,1,1 gives
    /// a a b a c a a, not a a a a a b c). Ineligible servers keep their `current`.
    fn pick_weighted(&mut self, now: Instant, exclude: &[ServerId]) -> Option<usize> {
        self.smooth_among(|group, i| group.eligible(i, now, exclude))
    }

    /// nginx's `least_conn`: the fewest in-flight requests per unit of weight
    /// (`a.in_flight × b.weight < b.in_flight × a.weight`); ties by smooth weighted round
    /// robin among the tied servers, so an idle group still honours the weights.
    fn pick_least_conn(&mut self, now: Instant, exclude: &[ServerId]) -> Option<usize> {
        let mut best: Option<(usize, Load)> = None;
        let mut tied = 0usize;
        for i in 0..self.servers.len() {
            if !self.eligible(i, now, exclude) {
                continue;
            }
            let load = load(&self.servers[i]);
            match best {
                Some((_, b)) if load > b => {}
                Some((_, b)) if load == b => tied += 1,
                _ => {
                    best = Some((i, load));
                    tied = 1;
                }
            }
        }
        let (index, least) = best?;
        if tied == 1 {
            return Some(index);
        }
        self.smooth_among(|group, i| {
            group.eligible(i, now, exclude) && load(&group.servers[i]) == least
        })
    }

    /// The ring owner of `key` or, if it may not take the request, the owner of the next
    /// point along the ring that may. A server's points are scattered around the ring, so its
    /// keys spread over all the others while it is down instead of piling onto one neighbour.
    fn pick_hash(&mut self, key: u64, now: Instant, exclude: &[ServerId]) -> Option<usize> {
        let ring = self.ring.as_ref()?;
        let start = ring.start(crate::hash::mix64(key));
        let mut seen = BitSet::default();
        for step in 0..ring.len() {
            let index = ring.owner_after(start, step);
            if seen.contains(index) {
                continue;
            }
            if self.eligible(index, now, exclude) {
                return Some(index);
            }
            seen.insert(index);
            if seen.len == self.servers.len() {
                break;
            }
        }
        None
    }

    /// When no server is admitted at all (not merely all excluded), [`AllDown`] decides.
    fn pick_all_down(&self, now: Instant, exclude: &[ServerId]) -> Option<usize> {
        if self.all_down == AllDown::Fail {
            return None;
        }
        if self
            .servers
            .iter()
            .any(|s| s.health.admits(&self.policy, now))
        {
            return None;
        }
        (0..self.servers.len())
            .filter(|&i| !exclude.contains(&ServerId(i as u32)))
            .min_by_key(|&i| (self.servers[i].health.last_failure(), i))
    }

    /// One round of smooth weighted round robin among the servers `include` accepts.
    fn smooth_among(&mut self, include: impl Fn(&Group, usize) -> bool) -> Option<usize> {
        let mut best: Option<usize> = None;
        let mut total: i64 = 0;
        for i in 0..self.servers.len() {
            if !include(self, i) {
                continue;
            }
            let weight = i64::from(self.servers[i].spec.weight);
            self.servers[i].current += weight;
            total += weight;
            if best.is_none_or(|b| self.servers[i].current > self.servers[b].current) {
                best = Some(i);
            }
        }
        let best = best?;
        self.servers[best].current -= total;
        Some(best)
    }
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

/// A server's load for `least_conn`, comparable across weights without division:
/// `in_flight / weight` as the fraction compared by cross-multiplication.
fn load(server: &Server) -> Load {
    Load {
        in_flight: u64::from(server.in_flight),
        weight: u64::from(server.spec.weight),
    }
}

#[derive(Clone, Copy)]
struct Load {
    in_flight: u64,
    weight: u64,
}

impl Ord for Load {
    fn cmp(&self, other: &Load) -> std::cmp::Ordering {
        (self.in_flight * other.weight).cmp(&(other.in_flight * self.weight))
    }
}

impl PartialOrd for Load {
    fn partial_cmp(&self, other: &Load) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Load {
    fn eq(&self, other: &Load) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for Load {}

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

/// A set of server indices on the stack (`SERVERS_MAX` bits), so a pick never allocates.
#[derive(Clone)]
struct BitSet {
    words: [u64; SERVERS_MAX / 64],
    len: usize,
}

impl Default for BitSet {
    fn default() -> Self {
        BitSet {
            words: [0; SERVERS_MAX / 64],
            len: 0,
        }
    }
}

impl BitSet {
    fn insert(&mut self, i: usize) {
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        if self.words[word] & bit == 0 {
            self.words[word] |= bit;
            self.len += 1;
        }
    }

    fn contains(&self, i: usize) -> bool {
        self.words[i / 64] & (1u64 << (i % 64)) != 0
    }
}

const _: () = assert!(
    SERVERS_MAX.is_multiple_of(64),
    "BitSet words cover SERVERS_MAX exactly"
);
