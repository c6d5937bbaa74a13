//! The keep-alive pool and an origin connection's end: a checkout for a request (only a
//! recently used connection for one that could not be sent again), a release into the pool or
//! a close, the slot freed once every operation has reported, the connect and idle timers,
//! and the expiry of idle pooled connections.

use std::time::Instant;

use squall_upstream::{Checkin, ConnId, ServerId};
use tracing::debug;

use super::super::Io;
use super::super::ids::SessionId;
use super::super::token::Token;
use super::{News, OriginState, Origins};

impl Origins {
    /// Pooled connection `index` for session `id`: false when it is not idle (it closed or
    /// was taken meanwhile). The caller arms its receive.
    pub(in crate::worker) fn take_pooled(&mut self, index: usize, id: SessionId) -> bool {
        let origin = &mut self.slab[index];
        if origin.state != OriginState::Idle {
            return false;
        }
        origin.state = OriginState::Busy;
        origin.session = Some(id);
        true
    }

    /// Closes every pooled connection (a reload replaced the upstreams they were made for).
    pub(in crate::worker) fn close_idle(&mut self, io: &mut Io<'_>) {
        let idle: Vec<usize> = (self.slab.iter())
            .filter(|(_, o)| o.state == OriginState::Idle)
            .map(|(i, _)| i)
            .collect();
        for index in idle {
            self.close_origin(io, index);
        }
    }

    /// Whether connection `index` is a shared HTTP/2 one (its streams are the sessions').
    pub(in crate::worker) fn is_shared(&self, index: usize) -> bool {
        self.slab[index].mux.is_some()
    }

    /// Session `id` lets go of connection `index`: a stream of a shared one is released,
    /// a connection of its own goes back to the pool if `reusable`, else is closed.
    pub(in crate::worker) fn let_go(
        &mut self,
        io: &mut Io<'_>,
        id: SessionId,
        index: usize,
        reusable: bool,
    ) {
        if self.is_shared(index) {
            return self.h2_release(io, id, index);
        }
        self.slab[index].session = None;
        self.release_origin(io, index, reusable);
    }

    /// Files session `deadline` as connection `index`'s timer (a connection of the session's
    /// own).
    pub(in crate::worker) fn set_deadline(
        &mut self,
        io: &mut Io<'_>,
        index: usize,
        deadline: Option<Instant>,
    ) {
        self.slab[index].deadline = deadline;
        self.arm_origin_timer(io, index);
    }

    /// Shuts connection `index`'s write side (a tunnel whose client closed its own); false
    /// when that failed.
    pub(in crate::worker) fn shutdown_write(&mut self, index: usize) -> bool {
        self.slab[index].socket.shutdown_write()
    }

    /// The next news for a session (`Worker::deliver`).
    pub(in crate::worker) fn next_news(&mut self) -> Option<(SessionId, usize, News)> {
        self.news.next()
    }

    /// Whether no news waits (the loop asserts it at the end of a turn).
    pub(in crate::worker) fn quiet(&self) -> bool {
        self.news.is_empty() && self.rearm.is_empty()
    }

    /// Arms again the receives of connections whose bytes were delivered, unless their
    /// exchange paused or let go of them meanwhile (`Worker::deliver`, after the news).
    pub(in crate::worker) fn read_on(&mut self, io: &mut Io<'_>) {
        for (index, generation) in std::mem::take(&mut self.rearm) {
            if (self.slab.get(index)).is_some_and(|o| o.generation == generation) {
                self.arm_origin_recv(io, index);
            }
        }
    }

    /// Sets the buffer budget (`limits.buffer_memory_max` in bytes, 0: none).
    pub(in crate::worker) fn set_buffer_limit(&mut self, limit: usize) {
        self.buffer_limit = limit;
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
