//! The keep-alive pool and an origin connection's end: a checkout for a request (only a
//! recently used connection for one that could not be sent again), a release into the pool or
//! a close, the slot freed once every operation has reported, the connect and idle timers,
//! and the expiry of idle pooled connections.

use std::time::Instant;

use squall_upstream::ConnId;
use tracing::debug;

use super::super::Io;
use super::super::ids::SessionId;
use super::super::token::Token;
use super::{News, OriginState, Origins};

impl Origins {
    /// Closes every pooled connection (a reload replaced the upstreams they were made for).
    pub(in crate::worker) fn close_idle(&mut self, io: &mut Io<'_>) {
        for index in self.conns.idle() {
            self.close_origin(io, index);
        }
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
        if self.conns.is_shared(index) {
            return self.h2_release(io, id, index);
        }
        self.conns[index].session = None;
        self.release_origin(io, index, reusable);
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
            if (self.conns.get(index)).is_some_and(|o| o.generation == generation) {
                self.conns.arm_recv(io, index);
            }
        }
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
        let origin = &mut self.conns[index];
        let current = origin.upstream_generation == self.upstreams.generation();
        // A receive need not be armed now (under a budget, origin receives end): a pooled
        // connection gets one below, to notice its origin closing.
        let keep = reusable
            && !origin.proxied
            && current
            && origin.state == OriginState::Busy
            && origin.socket.is_open()
            && !origin.paused;
        if keep {
            let id = ConnId(Token::origin(index, origin.generation).raw());
            if self
                .upstreams
                .checkin(origin.upstream, origin.server, id, now)
            {
                origin.state = OriginState::Idle;
                origin.deadline = None;
                self.conns.arm_recv(io, index);
                return;
            }
        }
        self.close_origin(io, index);
    }

    pub(in crate::worker) fn close_origin(&mut self, io: &mut Io<'_>, index: usize) {
        let origin = &mut self.conns[index];
        if origin.state == OriginState::Closed {
            return;
        }
        if origin.state == OriginState::Idle {
            let id = ConnId(Token::origin(index, origin.generation).raw());
            self.upstreams
                .unpool(origin.upstream_generation, origin.upstream, id);
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
        self.conns.op_done(index);
    }

    /// A timer entry for an origin came due: its exchange's (or probe's) deadline may have
    /// passed.
    pub(in crate::worker) fn on_origin_timer(
        &mut self,
        io: &mut Io<'_>,
        token: Token,
        due: Instant,
    ) {
        let Some(index) = self.conns.slot(token) else {
            return;
        };
        let now = io.now;
        let origin = &mut self.conns[index];
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
            self.conns.arm_timer(io, index);
            return;
        }
        if origin.mux.is_some() {
            return self.h2_timer(io, index);
        }
        if origin.state == OriginState::Handshaking {
            // The exchange's connect timeout, or the probe's, passed during the handshake.
            self.handshake_timed_out(io, index);
        }
        let origin = &mut self.conns[index];
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
        for ConnId(raw) in self.upstreams.expire_pools(io.now) {
            if let Some(index) = self.conns.slot(Token::from_raw(raw)) {
                // Already forgotten by the pool: mark busy-less and close.
                self.conns[index].state = OriginState::Busy;
                self.close_origin(io, index);
            }
        }
        self.expire_h2_origins(io);
    }
}
