//! This worker's upstream groups: each group's balancing, passive and active health and
//! keep-alive pool, as squall-upstream keeps them, and the generation a reload moves on. Read
//! and changed only through these methods; the connections themselves are `Conns`'.

use std::time::Instant;

use squall_upstream::{Checkin, ConnId, ServerId, Upstream};

use super::super::Io;
use crate::worker::Runtime;

/// One worker's upstream groups, rebuilt on reload (a generation tells old connections
/// apart). Its state is its own, reached only through its methods.
#[derive(Default)]
pub struct Upstreams {
    groups: Vec<Upstream>,
    generation: u64,
    /// When the upstream servers' state is next published for `/metrics`.
    gauges_due: Option<Instant>,
}

impl Upstreams {
    /// Upstream group `upstream` as this worker balances it (read only: its servers, their
    /// health, its timeouts), if the config in force has it.
    pub(in crate::worker) fn group(&self, upstream: usize) -> Option<&Upstream> {
        self.groups.get(upstream)
    }

    /// Group `upstream`'s name ("" for a group the config in force lacks).
    pub(in crate::worker) fn group_name(&self, upstream: usize) -> &str {
        self.group(upstream).map_or("", |g| g.group.name())
    }

    /// Which set of groups is in force: a reload's `replace_groups` moves it on, and a
    /// session's upstream index means something only under the generation it began in.
    pub(in crate::worker) fn generation(&self) -> u64 {
        self.generation
    }

    /// A server of group `upstream` by its balancing, none of `tried`.
    pub(in crate::worker) fn pick(
        &mut self,
        upstream: usize,
        key: Option<u64>,
        now: Instant,
        tried: &[ServerId],
    ) -> Option<ServerId> {
        (self.groups.get_mut(upstream)).and_then(|u| u.group.pick(key, now, tried))
    }

    /// What a request to `server` of group `upstream` came to, for its passive health, when
    /// the session began under the groups in force (`generation`).
    pub(in crate::worker) fn report(
        &mut self,
        generation: u64,
        upstream: usize,
        server: ServerId,
        outcome: squall_upstream::Outcome,
        now: Instant,
    ) {
        if generation == self.generation
            && let Some(group) = self.groups.get_mut(upstream)
        {
            group.group.report(server, outcome, now);
        }
    }

    /// Group `upstream`'s counters of HTTP/2 streams and tunnels (a cluster peer's group, which
    /// the config does not list, has its own, made on first use).
    pub(in crate::worker) fn events(
        &self,
        runtime: &Runtime,
        upstream: usize,
    ) -> std::sync::Arc<crate::upstream_events::UpstreamEvents> {
        match runtime
            .upstreams
            .get(upstream)
            .and_then(|u| u.events.as_ref())
        {
            Some(events) => events.clone(),
            None => {
                let name = (self.groups.get(upstream)).map_or("", |g| g.group.name());
                runtime.metrics.upstream_events.counters(name)
            }
        }
    }

    /// Publishes this worker's view of every upstream server (up, in flight, picks, failures)
    /// for `/metrics`, at most every `UPSTREAM_GAUGES_PERIOD`.
    pub(in crate::worker) fn publish(&mut self, io: &mut Io<'_>) {
        use std::sync::atomic::Ordering::Relaxed;
        const UPSTREAM_GAUGES_PERIOD: std::time::Duration = std::time::Duration::from_millis(100);
        if self.gauges_due.is_some_and(|due| io.now < due) {
            return;
        }
        self.gauges_due = Some(io.now + UPSTREAM_GAUGES_PERIOD);
        let gauges = io.runtime.upstream_gauges.clone();
        for (group, published) in self.groups.iter().zip(gauges.iter()) {
            for (id, server) in group.group.ids().zip(published.servers.iter()) {
                let up = group.group.state(id, io.now) != Some(squall_upstream::HealthState::Down);
                let stats = group.group.stats(id);
                let slot = |values: &[std::sync::atomic::AtomicU64], value: u64| {
                    if let Some(v) = values.get(io.worker) {
                        v.store(value, Relaxed);
                    }
                };
                slot(&server.up, u64::from(up));
                slot(&server.in_flight, u64::from(group.group.in_flight(id)));
                slot(&server.picks, stats.picks);
                slot(&server.failures, stats.failures);
            }
        }
    }

    /// When the next probe of any group is due, for the loop's wait.
    pub(in crate::worker) fn next_probe_at(&self) -> Option<std::time::Instant> {
        (self.groups.iter())
            .filter_map(|g| g.group.next_check_at())
            .min()
    }

    /// A pooled connection to `server`: any one not yet expired for a `replayable` request,
    /// else one idle for less than `pool_unsafe_idle_timeout` (an older one may be closing
    /// under the origin's own keep-alive timeout, and such a request could not be retried).
    pub(in crate::worker) fn checkout(
        &mut self,
        io: &Io<'_>,
        upstream: usize,
        server: ServerId,
        replayable: bool,
    ) -> Option<ConnId> {
        let pool = &mut self.groups.get_mut(upstream)?.pool;
        if replayable {
            return pool.checkout(server, io.now);
        }
        let stale = pool.stats().unsafe_stale;
        let found = pool.checkout_unsafe(server, io.now);
        if pool.stats().unsafe_stale > stale {
            let counters = io.runtime.metrics.worker(io.worker);
            counters.upstream_unsafe_fresh.inc();
        }
        found
    }

    /// A reload's new groups replace this worker's, under a new generation (their pools start
    /// empty; `Origins::replace_groups` closes the idle connections of the old ones).
    pub(super) fn replace(&mut self, groups: Vec<Upstream>) {
        self.groups = groups;
        self.generation += 1;
    }

    /// The health probes due by `now`, as (group, server), each taken as started.
    pub(super) fn due_probes(&mut self, now: Instant) -> Vec<(usize, ServerId)> {
        let mut due = Vec::new();
        for (upstream, group) in self.groups.iter_mut().enumerate() {
            if group.group.next_check_at().is_some_and(|at| at <= now) {
                due.extend(group.group.due_checks(now).map(|server| (upstream, server)));
            }
        }
        due
    }

    /// A probe of `server` of group `upstream` passed (`ok`) or failed, recorded for its
    /// active health if the probe began under the groups in force (`generation`); whether
    /// it was.
    pub(super) fn record_check(
        &mut self,
        generation: u64,
        upstream: usize,
        server: ServerId,
        ok: bool,
        now: Instant,
    ) -> bool {
        if generation != self.generation {
            return false;
        }
        let Some(group) = self.groups.get_mut(upstream) else {
            return false;
        };
        group.group.record_check(server, ok, now);
        true
    }

    /// Offers connection `id` to `server`'s pool of group `upstream`: whether the pool kept
    /// it (the caller checked that it belongs to the groups in force).
    pub(super) fn checkin(
        &mut self,
        upstream: usize,
        server: ServerId,
        id: ConnId,
        now: Instant,
    ) -> bool {
        (self.groups.get_mut(upstream))
            .is_some_and(|group| group.pool.checkin(server, id, now) == Checkin::Keep)
    }

    /// Takes pooled connection `id` out of group `upstream`'s pool (it is closing), if it was
    /// pooled under the groups in force (`generation`).
    pub(super) fn unpool(&mut self, generation: u64, upstream: usize, id: ConnId) {
        if generation == self.generation
            && let Some(group) = self.groups.get_mut(upstream)
        {
            group.pool.remove(id);
        }
    }

    /// The pooled connections idle too long by `now`, which the pools forgot.
    pub(super) fn expire_pools(&mut self, now: Instant) -> Vec<ConnId> {
        let mut expired = Vec::new();
        for group in &mut self.groups {
            if group.pool.next_expiry().is_some_and(|at| at <= now) {
                expired.extend(group.pool.expire(now));
            }
        }
        expired
    }
}
