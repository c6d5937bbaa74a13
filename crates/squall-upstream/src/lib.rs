//! squall-upstream: upstream groups as pure decisions — which server a request goes to, what
//! requests and probes say about each server's health, which keep-alive connection to reuse,
//! and whether a failed attempt may be retried.
//!
//! Like the codecs this crate is sans-IO: no sockets, no timers, no clock. Every
//! method that needs the time takes `now: Instant`, so tests run on a virtual clock and the
//! worker keeps the only real one. The worker (`crates/squall`) owns the sockets, the timers
//! and the HTTP/1 client codec, and asks this crate what to do; the proxy session turns the
//! answers into responses. It knows nothing of `squall-config` (docs/ARCHITECTURE.md "Dependency
//! order"): the proxy translates each `[[upstream]]` into an [`UpstreamSpec`].
//!
//! # One request, as the worker drives it
//! ```text
//! let up = &mut worker.upstreams[i];                 // an Upstream per group, per worker
//! let mut tried = Vec::new();                        // servers this request has tried
//! loop {
//!     let Some(server) = up.group.pick(key, now, &tried) else { answer 502; break };
//!     let conn = up.pool.checkout(server, now)       // reused: connection_reused = true
//!         .unwrap_or_else(|| connect(up.group.address(server)));
//!     ... send, receive; on success:
//!     up.group.report(server, Outcome::from_status(status), now);
//!     match up.pool.checkin(server, conn, now) { Checkin::Keep => {}, Checkin::Close(_) => close(conn) }
//!     ... on a failure `error`:
//!     close(conn); up.pool.remove(conn);
//!     match up.retry.decide(&AttemptFailure { error, attempts: tried.len() as u32 + 1, .. }) {
//!         Retry::SameServer => continue on a fresh connection to `server` (no report, no pick),
//!         Retry::OtherServer => { up.group.report(server, error.outcome(reused), now); tried.push(server) }
//!         Retry::No => { up.group.report(server, error.outcome(reused), now); answer error.status() or abort; break }
//!     }
//! }
//! ```
//! Timers: [`Group::next_check_at`] (then [`Group::due_checks`] and a probe per server, whose
//! result goes to [`Group::record_check`]) and [`Pool::next_expiry`] (then [`Pool::expire`]).
//! When an idle pooled connection reads EOF or an error, [`Pool::remove`] it and close it.
#![forbid(unsafe_code)]

mod group;
mod hash;
mod health;
mod pool;
mod retry;
mod ring;
mod spec;

use std::time::{Duration, Instant};

pub use group::{DueChecks, Group, Outcome, ServerId, ServerStats};
pub use hash::key_hash;
pub use health::HealthState;
pub use pool::{Checkin, CloseReason, ConnId, Pool, PoolStats};
pub use retry::{
    ATTEMPTS_CAP, AttemptFailure, NO_SERVER_STATUS, Retry, RetryPolicy, UpstreamErrorClass,
};
pub use ring::{RING_POINTS_MAX, VNODES_PER_WEIGHT};
pub use spec::{
    AllDown, BACKOFF_MAX_DEFAULT, BACKOFF_MIN_DEFAULT, Balance, DURATION_MAX, HEALTH_COUNT_MAX,
    HealthCheckSpec, PASSIVE_FAILS_DEFAULT, PASSIVE_PASSES_DEFAULT, POOL_IDLE_MAX_DEFAULT,
    POOL_IDLE_TIMEOUT_DEFAULT, POOL_REQUESTS_MAX_DEFAULT, POOL_UNSAFE_IDLE_TIMEOUT_DEFAULT,
    PassiveHealth, PoolLimits, SERVERS_MAX, ServerSpec, SpecError, UpstreamSpec, WEIGHT_MAX,
};

impl Outcome {
    /// The outcome of an exchange that got a complete response with `status`. Every 5xx
    /// counts as a failure, as issue 6 asks and as Envoy's `consecutive_5xx` outlier detection
    /// does: an origin answering 5xx to everything is as useless as one refusing connections.
    pub fn from_status(status: u16) -> Outcome {
        if (500..600).contains(&status) {
            Outcome::Failure
        } else {
            Outcome::Success
        }
    }

    /// The outcome of an attempt that failed with `error` (see
    /// [`UpstreamErrorClass::outcome`]).
    pub fn from_error(error: UpstreamErrorClass, connection_reused: bool) -> Outcome {
        error.outcome(connection_reused)
    }
}

/// Everything one worker keeps for one upstream group: balancing and health, the keep-alive
/// pool, the retry policy, and the timeouts the worker arms.
#[derive(Debug, Clone)]
pub struct Upstream {
    pub group: Group,
    pub pool: Pool,
    pub retry: RetryPolicy,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    /// The probe's request path, when active checks are on.
    pub health_check_path: Option<String>,
}

impl Upstream {
    /// Builds a worker's state for one group; `seed` as in [`Group::new`].
    pub fn new(spec: &UpstreamSpec, now: Instant, seed: u64) -> Result<Upstream, SpecError> {
        let group = Group::new(spec, now, seed)?;
        Ok(Upstream {
            pool: Pool::new(spec.servers.len(), spec.pool),
            retry: RetryPolicy::new(
                spec.attempts_max,
                spec.servers.len(),
                spec.retry_response_timeout,
            ),
            connect_timeout: spec.connect_timeout,
            response_timeout: spec.response_timeout,
            health_check_path: spec.health_check.as_ref().map(|c| c.path.clone()),
            group,
        })
    }

    /// Panics if an internal invariant of the group or the pool does not hold.
    pub fn check_invariants(&self) {
        self.group.check_invariants();
        self.pool.check_invariants();
        assert!(self.retry.attempts_max >= 1 && self.retry.attempts_max <= ATTEMPTS_CAP);
    }
}
