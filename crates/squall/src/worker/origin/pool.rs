//! The keep-alive pool and an origin connection's end: a checkout for a request (only a
//! recently used connection for one that could not be sent again), a release into the pool or
//! a close, the slot freed once every operation has reported, the connect and idle timers,
//! and the expiry of idle pooled connections.

use std::time::Instant;

use squall_upstream::{Checkin, ConnId, ServerId};
use tracing::debug;

use super::super::Io;
use super::super::token::Token;
use super::{News, OriginState, Origins};

impl Origins {
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
        let pool = &mut self.upstreams.groups.get_mut(upstream)?.pool;
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

    /// The exchange is done with the connection: to the pool when reusable and still of the
    /// current upstream generation (and its receive armed, so a close is noticed), else closed.
    pub(in crate::worker) fn release_origin(
        &mut self,
        io: &mut Io<'_>,
        index: usize,
        reusable: bool,
    ) {
        let now = io.now;
        let origin = &mut self.slab[index];
        let current = origin.upstream_generation == self.upstreams.generation;
        // A receive need not be armed now (origins receive one buffer at a time): a pooled
        // connection gets one below, to notice its origin closing.
        let keep = reusable
            && !origin.proxied
            && current
            && origin.state == OriginState::Busy
            && origin.socket.is_open()
            && !origin.paused;
        if keep {
            let group = &mut self.upstreams.groups[origin.upstream];
            let id = ConnId(Token::origin(index, origin.generation).raw());
            if group.pool.checkin(origin.server, id, now) == Checkin::Keep {
                origin.state = OriginState::Idle;
                origin.deadline = None;
                self.arm_origin_recv(io, index);
                return;
            }
        }
        self.close_origin(io, index);
    }

    pub(in crate::worker) fn close_origin(&mut self, io: &mut Io<'_>, index: usize) {
        let origin = &mut self.slab[index];
        if origin.state == OriginState::Closed {
            return;
        }
        if origin.state == OriginState::Idle
            && origin.upstream_generation == self.upstreams.generation
        {
            let id = ConnId(Token::origin(index, origin.generation).raw());
            self.upstreams.groups[origin.upstream].pool.remove(id);
        }
        // A sound TLS connection says goodbye (an ended or failed one has nothing to say to).
        if matches!(origin.state, OriginState::Idle | OriginState::Busy)
            && let Some(tls) = origin.tls.as_mut()
        {
            tls.close_notify(&origin.socket);
        }
        origin.state = OriginState::Closed;
        let token = Token::origin(index, origin.generation);
        origin.socket.close(io.ring, token);
        if origin.mux.is_some() {
            self.forget_h2_origin(index);
        }
        self.origin_op_done(index);
    }

    pub(in crate::worker) fn on_origin_close(&mut self, token: Token) {
        if let Some(index) = self.origin_index(token) {
            self.slab[index].socket.on_close();
            self.origin_op_done(index);
        }
    }

    /// Frees a closed origin's slot once every operation has reported.
    pub(super) fn origin_op_done(&mut self, index: usize) {
        let Some(origin) = self.slab.get(index) else {
            return;
        };
        if origin.state == OriginState::Closed && origin.socket.drained() {
            self.slab.remove(index);
        }
    }

    pub(in crate::worker) fn arm_origin_timer(&mut self, io: &mut Io<'_>, index: usize) {
        let origin = &mut self.slab[index];
        let Some(deadline) = origin.deadline else {
            return;
        };
        if origin.timer_due.is_none_or(|due| deadline < due) {
            origin.timer_due = Some(deadline);
            io.timers
                .insert(Token::origin(index, origin.generation).raw(), deadline);
        }
    }

    /// A timer entry for an origin came due: its exchange's (or probe's) deadline may have
    /// passed.
    pub(in crate::worker) fn on_origin_timer(
        &mut self,
        io: &mut Io<'_>,
        token: Token,
        due: Instant,
    ) {
        let Some(index) = self.origin_index(token) else {
            return;
        };
        let now = io.now;
        let origin = &mut self.slab[index];
        if origin.timer_due == Some(due) {
            origin.timer_due = None;
        }
        if !matches!(
            origin.state,
            OriginState::Connecting | OriginState::Handshaking | OriginState::Busy
        ) {
            return;
        }
        let Some(deadline) = origin.deadline else {
            return;
        };
        if deadline > now {
            self.arm_origin_timer(io, index);
            return;
        }
        if origin.mux.is_some() {
            return self.h2_timer(io, index);
        }
        if origin.state == OriginState::Handshaking {
            // The exchange's connect timeout, or the probe's, passed during the handshake.
            self.handshake_timed_out(io, index);
        }
        let origin = &mut self.slab[index];
        match origin.session {
            Some(id) => self.news.tell(id, index, News::Timer),
            None => {
                debug!(worker = io.worker, address = %origin.address, "probe timeout");
                self.end_probe(io, index, false);
            }
        }
    }

    /// Closes pooled connections that sat idle too long (once per loop turn).
    pub(in crate::worker) fn expire_pools(&mut self, io: &mut Io<'_>) {
        let now = io.now;
        let mut expired = Vec::new();
        for group in &mut self.upstreams.groups {
            if group.pool.next_expiry().is_some_and(|at| at <= now) {
                expired.extend(group.pool.expire(now));
            }
        }
        for ConnId(raw) in expired {
            if let Some(index) = self.origin_index(Token::from_raw(raw)) {
                // Already forgotten by the pool: mark busy-less and close.
                self.slab[index].state = OriginState::Busy;
                self.close_origin(io, index);
            }
        }
        self.expire_h2_origins(io);
    }
}
