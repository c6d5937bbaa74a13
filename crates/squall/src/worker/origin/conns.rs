//! The connection table: each origin connection's slot and token, and the ring operations on
//! it (connect, send, receive arming, pause, the timer filed for its deadline, the slot freed
//! once every operation has reported). It learns nothing for a session: what a completion
//! means (news for the exchange, the pool, a probe, HTTP/2, TLS) is `Origins`' to decide.

use std::io;
use std::net::SocketAddr;
use std::ops::{Index, IndexMut};
use std::os::fd::OwnedFd;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use slab::Slab;
use tracing::debug;

use super::super::Io;
use super::super::ids::SessionId;
use super::super::socket::Socket;
use super::super::token::{self, Token};
use super::{Origin, OriginH2, OriginState, OriginTarget, ProxyHeader, probe, tls};

/// The origin connections: their slab (a slot and a token generation each) and what making
/// and reading their sockets needs. Its state is its own: `Origins` reaches a connection by
/// its slot (`conns[index]`), and the table only through these methods.
#[derive(Default)]
pub struct Conns {
    /// Connections to origin servers, busy or pooled.
    slab: Slab<Origin>,
    /// The generation of the next connection's token.
    next_generation: u32,
    /// `limits.buffer_memory_max` in bytes (0: none): under a budget origins are read a
    /// bounded amount per armed receive.
    buffer_limit: usize,
    /// When an origin socket refused for want of a descriptor was last logged.
    fd_logged_at: Option<Instant>,
}

impl Conns {
    /// The slot of the connection `token` names: `None` when the slot was freed, or reused
    /// by a later connection (a completion of an older one).
    pub(in crate::worker) fn slot(&self, token: Token) -> Option<usize> {
        debug_assert_eq!(token.kind(), token::Kind::Origin);
        let index = token.index();
        let origin = self.slab.get(index)?;
        token.names(origin.generation).then_some(index)
    }

    /// Puts a new origin connection in the slab and starts its connect: for session `session`
    /// or, with `None`, a health probe of `method`. Returns its slot.
    pub(in crate::worker) fn open(
        &mut self,
        io: &mut Io<'_>,
        fd: OwnedFd,
        target: OriginTarget,
        method: &http::Method,
        session: Option<SessionId>,
        proxy_header: Option<ProxyHeader>,
    ) -> usize {
        self.next_generation = token::next_generation(self.next_generation);
        let generation = self.next_generation;
        let probe = session
            .is_none()
            .then(|| Box::new(probe::Probe::new(method)));
        // Under a buffer budget an origin is read a bounded amount per armed receive, so a
        // pause holds within two buffers (see socket.rs); with the budget off
        // (`buffer_memory_max = 0`), multishot without a bound.
        let socket = match self.buffer_limit {
            0 => Socket::new(fd),
            _ => Socket::new(fd).bounded_receives(),
        };
        // A PROXY protocol header goes first, then a TLS upstream's ClientHello: both wait in
        // `out` for the connect.
        let mut out = BytesMut::new();
        let proxied = proxy_header.as_ref().is_some_and(|h| h.client);
        if let Some(header) = &proxy_header {
            out.extend_from_slice(&header.bytes);
        }
        let tls = tls::OriginTls::open(io, &target, &mut out);
        let header_unsent = match (&tls, &proxy_header) {
            (None, Some(header)) => header.bytes.len(),
            _ => 0,
        };
        let index = self.slab.insert(Origin {
            socket,
            generation,
            upstream: target.upstream,
            upstream_generation: target.generation,
            server: target.server,
            address: target.address,
            state: OriginState::Connecting,
            out,
            session,
            probe,
            paused: false,
            deadline: None,
            timer_due: None,
            tls,
            proxied,
            header_unsent,
            mux: None,
        });
        let token = Token::origin(index, generation);
        self.slab[index]
            .socket
            .connect(io.ring, target.address, token);
        index
    }

    /// Sends `bytes` after whatever the connection has not sent yet (encrypted first, on TLS).
    pub(in crate::worker) fn write(&mut self, io: &mut Io<'_>, index: usize, bytes: Bytes) {
        let origin = &mut self.slab[index];
        if origin.state == OriginState::Closed {
            return;
        }
        if let Some(tls) = origin.tls.as_mut() {
            if let Err(e) = tls.encrypt(&bytes, &mut origin.out) {
                // Only after the connection failed, which its exchange has heard of already.
                debug!(worker = io.worker, address = %origin.address, "origin tls: {e}");
                return tls::cut(origin);
            }
            return self.flush(io, index);
        }
        if !origin.socket.sending() && origin.out.is_empty() {
            let token = Token::origin(index, origin.generation);
            origin.socket.send(io.ring, bytes, token);
        } else {
            origin.out.extend_from_slice(&bytes);
        }
    }

    /// Sends what waits in the connection's `out`, unless a send is in flight (its completion
    /// flushes again).
    pub(super) fn flush(&mut self, io: &mut Io<'_>, index: usize) {
        let origin = &mut self.slab[index];
        if origin.socket.sending() || origin.out.is_empty() || origin.state == OriginState::Closed {
            return;
        }
        let token = Token::origin(index, origin.generation);
        let buf = origin.out.split().freeze();
        if let Some(tls) = origin.tls.as_mut() {
            tls.sending();
        }
        origin.socket.send(io.ring, buf, token);
    }

    /// Stops reading the origin while its client is slow to read.
    pub(in crate::worker) fn pause(&mut self, io: &mut Io<'_>, index: usize) {
        let origin = &mut self.slab[index];
        // A shared HTTP/2 connection is never paused: its streams' windows hold them back.
        if origin.paused || origin.state != OriginState::Busy || origin.mux.is_some() {
            return;
        }
        debug!(worker = io.worker, address = %origin.address, "client reads slowly: origin paused");
        origin.paused = true;
        // The receive stays armed until the cancelled receive's final completion arrives.
        let token = Token::origin(index, origin.generation);
        origin.socket.cancel_recv(io.ring, token);
    }

    /// Reads a paused origin again.
    pub(in crate::worker) fn resume(&mut self, io: &mut Io<'_>, index: usize) {
        let origin = &mut self.slab[index];
        if !origin.paused || origin.state != OriginState::Busy {
            return;
        }
        origin.paused = false;
        self.arm_recv(io, index);
    }

    /// Arms the receive of a busy connection that is not paused, or of a pooled one (read to
    /// notice a close), unless one is armed or still reporting its cancellation (whose final
    /// completion arms it again).
    pub(in crate::worker) fn arm_recv(&mut self, io: &mut Io<'_>, index: usize) {
        let origin = &mut self.slab[index];
        let reading = match origin.state {
            OriginState::Busy => !origin.paused,
            OriginState::Idle | OriginState::Handshaking => true,
            OriginState::Connecting | OriginState::Closed => false,
        };
        if reading {
            let token = Token::origin(index, origin.generation);
            origin.socket.arm_recv(io.ring, token);
        }
    }

    /// Files the connection's `deadline` in the timer wheel, unless an entry due no later is
    /// filed already (an entry that comes due early only files the deadline again).
    pub(super) fn arm_timer(&mut self, io: &mut Io<'_>, index: usize) {
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

    /// Frees a closed origin's slot once every operation has reported.
    pub(super) fn op_done(&mut self, index: usize) {
        let Some(origin) = self.slab.get(index) else {
            return;
        };
        if origin.state == OriginState::Closed && origin.socket.drained() {
            self.slab.remove(index);
        }
    }

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

    /// Whether connection `index` is a shared HTTP/2 one (its streams are the sessions').
    pub(in crate::worker) fn is_shared(&self, index: usize) -> bool {
        self.slab[index].mux.is_some()
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
        self.arm_timer(io, index);
    }

    /// Shuts connection `index`'s write side (a tunnel whose client closed its own); false
    /// when that failed.
    pub(in crate::worker) fn shutdown_write(&mut self, index: usize) -> bool {
        self.slab[index].socket.shutdown_write()
    }

    /// Sets the buffer budget (`limits.buffer_memory_max` in bytes, 0: none).
    pub(in crate::worker) fn set_buffer_limit(&mut self, limit: usize) {
        self.buffer_limit = limit;
    }

    /// The close of a connection completed: its slot is freed once every operation has
    /// reported.
    pub(in crate::worker) fn on_close(&mut self, token: Token) {
        if let Some(index) = self.slot(token) {
            self.slab[index].socket.on_close();
            self.op_done(index);
        }
    }

    /// An origin socket could not be made: out of descriptors (the reserve was too small, or
    /// HTTP/2 clients have many requests in flight each) is counted and logged at warn, at most
    /// once per `PAUSE_LOG_INTERVAL`; the exchange takes it as a connect failure and retries
    /// where it may.
    pub(in crate::worker) fn socket_failed(
        &mut self,
        io: &mut Io<'_>,
        address: Option<SocketAddr>,
        e: &io::Error,
    ) {
        if !matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
            debug!(worker = io.worker, ?address, "origin socket: {e}");
            return;
        }
        let counters = io.runtime.metrics.worker(io.worker);
        counters.upstream_descriptor_failures.inc();
        if self
            .fd_logged_at
            .is_none_or(|at| io.now >= at + super::super::PAUSE_LOG_INTERVAL)
        {
            tracing::warn!(
                worker = io.worker,
                ?address,
                "origin connection refused for want of a descriptor: {e}; retried as a connect \
                 failure (raise RLIMIT_NOFILE or limits.descriptor_reserve)"
            );
            self.fd_logged_at = Some(io.now);
        }
    }

    /// Connection `index`'s HTTP/2 state, if it is a shared HTTP/2 connection still in the slab.
    pub(super) fn h2_mut(&mut self, index: usize) -> Option<&mut OriginH2> {
        self.slab.get_mut(index)?.mux.as_deref_mut()
    }

    /// Connection `index`, if its slot holds one.
    pub(super) fn get(&self, index: usize) -> Option<&Origin> {
        self.slab.get(index)
    }

    /// Connection `index`, if its slot holds one, to change.
    pub(super) fn get_mut(&mut self, index: usize) -> Option<&mut Origin> {
        self.slab.get_mut(index)
    }

    /// Whether slot `index` holds a connection (it may have been freed meanwhile).
    pub(super) fn contains(&self, index: usize) -> bool {
        self.slab.contains(index)
    }

    /// The slots of the pooled connections.
    pub(super) fn idle(&self) -> Vec<usize> {
        (self.slab.iter())
            .filter(|(_, o)| o.state == OriginState::Idle)
            .map(|(i, _)| i)
            .collect()
    }
}

/// The connection in slot `index` (the slot must hold one, as a slab's index requires).
impl Index<usize> for Conns {
    type Output = Origin;

    fn index(&self, index: usize) -> &Origin {
        &self.slab[index]
    }
}

impl IndexMut<usize> for Conns {
    fn index_mut(&mut self, index: usize) -> &mut Origin {
        &mut self.slab[index]
    }
}
