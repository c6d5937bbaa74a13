//! What an upstream group is built from: this crate's own description of an `[[upstream]]`.
//!
//! The proxy translates `squall_config::Upstream` into an [`UpstreamSpec`]; this crate may not
//! depend on `squall-config` (docs/ARCHITECTURE.md, the dependency order, enforced by `cargo xtask tidy`), so
//! it owns these types and checks them again in [`UpstreamSpec::validate`]: the config validator
//! is one caller, tests and benches are others, and a group built from a bad spec would divide
//! by a zero weight or never leave the down state.

use std::net::SocketAddr;
use std::time::Duration;

/// The most servers in one group. The consistent-hash walk marks the servers it has seen in a
/// fixed bit set of this many bits on the stack, so a pick never allocates.
pub const SERVERS_MAX: usize = 1024;
/// Upper bound of a server's weight, as in the config (`squall_config::model::WEIGHT_MAX`):
/// weights scale the consistent-hash ring and the smooth round robin's counters.
pub const WEIGHT_MAX: u32 = 1000;
/// Upper bound of every duration in a spec. `Instant + Duration` panics on overflow; with this
/// bound it cannot overflow for any `Instant` a process will see.
pub const DURATION_MAX: Duration = Duration::from_secs(7 * 24 * 3600);
/// Upper bound of `fails` and `passes`, as in the config (`HEALTH_COUNT_MAX`).
pub const HEALTH_COUNT_MAX: u32 = 100;

/// `PoolLimits::idle_max` when not set: idle keep-alive connections kept per server (nginx's
/// `keepalive 32` is the common setting).
pub const POOL_IDLE_MAX_DEFAULT: u32 = 32;
/// `PoolLimits::idle_timeout` when not set: nginx's `keepalive_timeout` for upstreams. An origin
/// with a shorter keep-alive timeout closes first; the retry policy absorbs that race.
pub const POOL_IDLE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(60);
/// `PoolLimits::unsafe_idle_timeout` when not set: below every common origin keep-alive timeout
/// (gunicorn 2 s, node and Apache 5 s, nginx 75 s), so that a request that could not be sent
/// again never goes out on a connection the origin may be closing at that moment.
pub const POOL_UNSAFE_IDLE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(1);
/// `PoolLimits::requests_max` when not set: nginx's `keepalive_requests` for upstreams. Closing
/// a connection now and then frees what an origin accumulates per connection.
pub const POOL_REQUESTS_MAX_DEFAULT: u32 = 1000;

/// Passive thresholds when the group has no active health check (the config's defaults).
pub const PASSIVE_FAILS_DEFAULT: u32 = 3;
/// See [`PASSIVE_FAILS_DEFAULT`].
pub const PASSIVE_PASSES_DEFAULT: u32 = 2;
/// First back-off of a server marked down; it doubles after each failed trial.
pub const BACKOFF_MIN_DEFAULT: Duration = Duration::from_secs(1);
/// The back-off stops doubling here, so a server that comes back is tried within this long.
pub const BACKOFF_MAX_DEFAULT: Duration = Duration::from_secs(30);

/// One `[[upstream]]`: a named group of origin servers and how to use them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamSpec {
    pub name: String,
    /// 1 ..= [`SERVERS_MAX`] servers; a server's [`crate::ServerId`] is its index here.
    pub servers: Vec<ServerSpec>,
    pub balance: Balance,
    /// Carried for the worker, which arms the connect timer; this crate only classifies the
    /// timeout when it fires ([`crate::UpstreamErrorClass::ConnectTimeout`]).
    pub connect_timeout: Duration,
    /// Time to wait for the response head once the request is sent; carried for the worker.
    pub response_timeout: Duration,
    /// Active probes; `None` leaves passive health (real traffic) as the only signal.
    pub health_check: Option<HealthCheckSpec>,
    pub passive: PassiveHealth,
    pub pool: PoolLimits,
    pub all_down: AllDown,
    /// Most attempts per request, over distinct servers; capped by the number of servers.
    pub attempts_max: u32,
    /// Retry an idempotent request whose response timed out (nginx does by default; we do not,
    /// so that a client waits at most about one `response_timeout`: see `retry.rs`).
    pub retry_response_timeout: bool,
}

impl UpstreamSpec {
    /// A spec with every optional part at its default.
    pub fn new(name: impl Into<String>, servers: Vec<ServerSpec>, balance: Balance) -> Self {
        UpstreamSpec {
            name: name.into(),
            servers,
            balance,
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(60),
            health_check: None,
            passive: PassiveHealth::default(),
            pool: PoolLimits::default(),
            all_down: AllDown::default(),
            attempts_max: crate::retry::ATTEMPTS_CAP,
            retry_response_timeout: false,
        }
    }

    /// Checks every bound this crate relies on; the first problem found.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.servers.is_empty() {
            return Err(SpecError::NoServers);
        }
        if self.servers.len() > SERVERS_MAX {
            return Err(SpecError::TooManyServers(self.servers.len()));
        }
        for (index, server) in self.servers.iter().enumerate() {
            if !(1..=WEIGHT_MAX).contains(&server.weight) {
                return Err(SpecError::Weight {
                    index,
                    weight: server.weight,
                });
            }
            if self.servers[..index]
                .iter()
                .any(|s| s.address == server.address)
            {
                return Err(SpecError::DuplicateAddress(server.address));
            }
        }
        duration("connect_timeout", self.connect_timeout)?;
        duration("response_timeout", self.response_timeout)?;
        if let Some(check) = &self.health_check {
            duration("health_check.interval", check.interval)?;
            count("health_check.fails", check.fails)?;
            count("health_check.passes", check.passes)?;
        }
        self.passive.validate()?;
        duration("pool.idle_timeout", self.pool.idle_timeout)?;
        if self.pool.unsafe_idle_timeout > DURATION_MAX {
            return Err(SpecError::Duration("pool.unsafe_idle_timeout"));
        }
        if self.pool.requests_max == 0 {
            return Err(SpecError::Zero("pool.requests_max"));
        }
        if self.attempts_max == 0 {
            return Err(SpecError::Zero("attempts_max"));
        }
        Ok(())
    }

    /// The fails/passes thresholds in force: the active check's when there is one (probes and
    /// real traffic then share them), the passive ones otherwise.
    pub fn thresholds(&self) -> (u32, u32) {
        match &self.health_check {
            Some(check) => (check.fails, check.passes),
            None => (self.passive.fails, self.passive.passes),
        }
    }
}

/// One origin server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServerSpec {
    pub address: SocketAddr,
    /// 1 ..= [`WEIGHT_MAX`].
    pub weight: u32,
}

/// How a group picks a server for a request (CONFIG.md `balance`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Balance {
    /// Each available server in turn; weights are ignored (use `Weighted` for them).
    RoundRobin,
    /// nginx's smooth weighted round robin: over `sum(weights)` picks each server is chosen
    /// `weight` times, interleaved rather than in bursts.
    Weighted,
    /// A ring with virtual nodes, keyed by a caller-provided hash (the URL by default), so one
    /// key keeps going to one server and a change of servers moves only the keys it must.
    ConsistentHash,
    /// Fewest requests in flight from this worker relative to weight; ties by smooth weighted
    /// round robin, as nginx's `least_conn`.
    LeastConn,
}

/// Active health checking: the worker sends `GET path` to each server every `interval`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheckSpec {
    /// Request path of the probe; carried for the worker.
    pub path: String,
    pub interval: Duration,
    /// Failures in a row (probes or requests) that mark a server down.
    pub fails: u32,
    /// Good probes in a row that mark a down server up again.
    pub passes: u32,
}

/// Passive health: what real traffic does to a server's state when it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassiveHealth {
    /// Failures in a row that mark a server down (replaced by `health_check.fails` if set).
    pub fails: u32,
    /// Successful trial requests in a row that bring it back (replaced by `health_check.passes`
    /// if set).
    pub passes: u32,
    /// First back-off after a server is marked down; then one trial request is let through.
    pub backoff_min: Duration,
    /// The back-off doubles after each failed trial up to this.
    pub backoff_max: Duration,
}

impl PassiveHealth {
    fn validate(&self) -> Result<(), SpecError> {
        count("passive.fails", self.fails)?;
        count("passive.passes", self.passes)?;
        duration("passive.backoff_min", self.backoff_min)?;
        duration("passive.backoff_max", self.backoff_max)?;
        if self.backoff_min > self.backoff_max {
            return Err(SpecError::BackoffOrder);
        }
        Ok(())
    }
}

impl Default for PassiveHealth {
    fn default() -> Self {
        PassiveHealth {
            fails: PASSIVE_FAILS_DEFAULT,
            passes: PASSIVE_PASSES_DEFAULT,
            backoff_min: BACKOFF_MIN_DEFAULT,
            backoff_max: BACKOFF_MAX_DEFAULT,
        }
    }
}

/// Limits of the per-worker keep-alive pool of one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolLimits {
    /// Idle connections kept per server; 0 turns keep-alive to origins off.
    pub idle_max: u32,
    /// An idle connection older than this is closed rather than reused.
    pub idle_timeout: Duration,
    /// Requests one connection serves before it is closed; at least 1.
    pub requests_max: u32,
    /// A request that could not be sent again if its connection turned out closed (not
    /// idempotent, or with a body) reuses only a connection idle for less than this
    /// ([`crate::Pool::checkout_unsafe`]); zero sends every such request on a new connection.
    pub unsafe_idle_timeout: Duration,
}

impl Default for PoolLimits {
    fn default() -> Self {
        PoolLimits {
            idle_max: POOL_IDLE_MAX_DEFAULT,
            idle_timeout: POOL_IDLE_TIMEOUT_DEFAULT,
            requests_max: POOL_REQUESTS_MAX_DEFAULT,
            unsafe_idle_timeout: POOL_UNSAFE_IDLE_TIMEOUT_DEFAULT,
        }
    }
}

/// What [`crate::Group::pick`] does when no server is available (all down, or waiting out
/// their back-off).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AllDown {
    /// Pick the down server that failed least recently. A group whose every server is marked
    /// down is more often a shared blip (a deploy, a flaky network) than a dead fleet, and
    /// failing every request until back-offs run out turns a blip into an outage. nginx
    /// likewise forgets all failures when every peer is down ("mark them as live for quick
    /// recovery" in `ngx_http_upstream_round_robin.c`, answering only that one request with 502),
    /// and Envoy routes to all hosts below its panic threshold. It also makes a one-server
    /// group behave as nginx's, which never marks a lone server down: every request still
    /// reaches it, and the failures only show in the counters.
    #[default]
    PickLeastRecentlyFailed,
    /// Return `None`, and the proxy answers 502 at once (issue 6's wording). Right when an
    /// operator prefers fast failure over latency, e.g. origins that black-hole connections.
    Fail,
}

/// A spec this crate cannot build a group from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("an upstream needs at least one server")]
    NoServers,
    #[error("{0} servers; an upstream has at most {SERVERS_MAX}")]
    TooManyServers(usize),
    #[error("server {index}: weight {weight} is not in 1..={WEIGHT_MAX}")]
    Weight { index: usize, weight: u32 },
    #[error("server address {0} appears twice")]
    DuplicateAddress(SocketAddr),
    #[error("{0} must be more than zero and at most a week")]
    Duration(&'static str),
    #[error("{0} must be in 1..={HEALTH_COUNT_MAX}")]
    Count(&'static str),
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    #[error("passive.backoff_min is more than passive.backoff_max")]
    BackoffOrder,
}

fn duration(what: &'static str, value: Duration) -> Result<(), SpecError> {
    if value.is_zero() || value > DURATION_MAX {
        return Err(SpecError::Duration(what));
    }
    Ok(())
}

fn count(what: &'static str, value: u32) -> Result<(), SpecError> {
    if !(1..=HEALTH_COUNT_MAX).contains(&value) {
        return Err(SpecError::Count(what));
    }
    Ok(())
}
