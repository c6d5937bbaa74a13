//! A session's way to an origin: the pick from the route's group, a pooled connection or a new
//! one (or a stream on a shared HTTP/2 connection), the PROXY protocol header a new connection
//! starts with, and the session's own timer (the exchange's next deadline on the wheel).

use std::time::Instant;

use squall_config::OriginProtocol;
use squall_upstream::{ConnId, ServerId, UpstreamErrorClass};

use super::super::Worker;
use super::super::origin::{self, OriginTarget};
use super::super::token::Token;
use super::SessionId;

impl Worker {
    /// `Action::Pick`: a server of the route's group, by its balancing, not yet tried.
    pub(super) fn pick(&mut self, id: SessionId) {
        let now = self.now;
        if self.refuse_grpc(id) {
            return;
        }
        // Its origin connection's descriptor is charged once, before the first pick; with none
        // free the request waits (no timer runs before a pick) rather than fail its connect.
        if self.session_mut(id).is_some_and(|s| !s.descriptor) {
            if !self.admission.take_descriptor(&self.runtime) {
                let waiter = super::super::listen::Waiter::Session(id);
                let io = super::super::part_io!(self);
                return self.admission.wait_for_descriptor(&io, waiter);
            }
            if let Some(session) = self.session_mut(id) {
                session.descriptor = true;
            }
        }
        let Some(session) = self.sessions.get_mut(id.index).filter(|s| s.is(id)) else {
            return;
        };
        let key = (self.runtime.upstreams.get(session.upstream)).map(|u| {
            squall_proxy::forward::balance_key(&u.hash_key, session.ex.head(), session.peer)
        });
        let picked = (self.origins).pick(session.upstream, key, now, session.ex.tried());
        session.ex.on_pick(picked, now);
    }

    /// Picks for session `id`, waiting until now for a descriptor, now charged one; false
    /// when it is gone.
    pub(in crate::worker) fn pick_charged(&mut self, id: SessionId) -> bool {
        let Some(session) = self.session_mut(id) else {
            return false;
        };
        debug_assert!(!session.descriptor, "a session is charged once");
        session.descriptor = true;
        self.pick(id);
        self.drive(id);
        true
    }

    /// `Action::Connect`: a pooled connection to `server` if allowed and one is idle (LIFO:
    /// the one most likely still open), else a new connect.
    pub(super) fn connect_session(&mut self, id: SessionId, server: ServerId, pooled: bool) {
        let now = self.now;
        let Some(upstream) = self.session_mut(id).map(|s| s.upstream) else {
            return;
        };
        match origin::origin_protocol(&self.runtime, upstream) {
            OriginProtocol::H2 | OriginProtocol::H2c => {
                return self.connect_h2(id, upstream, server, pooled);
            }
            // A connection that chose HTTP/2 with ALPN, else one of HTTP/1.1 as below.
            OriginProtocol::Auto if pooled => {
                if let Some(index) =
                    self.with_origins(|o, io| o.join_h2(io, id, upstream, server, true))
                {
                    if let Some(session) = self.session_mut(id) {
                        session.origin = Some(index);
                    }
                    return;
                }
            }
            _ => {}
        }
        // A `proxy_protocol` upstream's connection names one client: never shared.
        let pooled = pooled
            && (self.runtime.upstreams.get(upstream)).is_none_or(|u| u.proxy_protocol.is_none());
        // A request that could not be sent again takes only a recently used connection.
        let replayable =
            (self.session_mut(id)).is_some_and(|s| squall_proxy::forward::replayable(s.ex.head()));
        while pooled
            && let Some(ConnId(raw)) =
                self.with_origins(|o, io| o.checkout(io, upstream, server, replayable))
        {
            let Some(index) = self.origins.origin_index(Token::from_raw(raw)) else {
                continue;
            };
            if !self.origins.take_pooled(index, id) {
                continue;
            }
            // Its receive may have ended while it was pooled (a pause's cancellation
            // reporting late): a busy connection must be read.
            self.with_origins(|o, io| o.arm_origin_recv(io, index));
            self.runtime.metrics.worker(self.id).upstream_reuses.inc();
            if let Some(session) = self.session_mut(id) {
                session.origin = Some(index);
                session.ex.on_origin_connected(true, now);
            }
            return;
        }
        self.connect_new(id, upstream, server);
    }

    /// `Action::Connect` for an upstream spoken to in HTTP/2 (`h2`, `h2c`): a stream on a
    /// connection to `server` with room, else a place on one still connecting, else a new
    /// connection (see `origin/h2.rs`).
    pub(super) fn connect_h2(
        &mut self,
        id: SessionId,
        upstream: usize,
        server: ServerId,
        pooled: bool,
    ) {
        if let Some(index) = self.with_origins(|o, io| o.join_h2(io, id, upstream, server, pooled))
        {
            if let Some(session) = self.session_mut(id) {
                session.origin = Some(index);
            }
            return;
        }
        if let Some(index) = self.connect_new(id, upstream, server) {
            self.with_origins(|o, io| o.share(io, index, id));
        }
    }

    /// A new connection to `server` for session `id` (its exchange hears "connected" or the
    /// failure later; a socket that cannot be made fails it now). Returns the connection.
    pub(in crate::worker) fn connect_new(
        &mut self,
        id: SessionId,
        upstream: usize,
        server: ServerId,
    ) -> Option<usize> {
        let now = self.now;
        let proxy_header = self.origin_proxy_header(id, upstream);
        let address = (self.origins.group(upstream)).and_then(|g| g.group.address(server));
        let fd = address.map(origin::origin_socket);
        let Some(Ok(fd)) = fd else {
            if let Some(Err(e)) = fd {
                self.with_origins(|o, io| o.origin_socket_failed(io, address, &e));
            }
            if let Some(session) = self.session_mut(id) {
                session
                    .ex
                    .on_connect_failed(UpstreamErrorClass::ConnectFailed, now);
            }
            return None;
        };
        let target = OriginTarget {
            upstream,
            server,
            address: address.expect("a socket was made for it"),
        };
        let index = self.with_origins(|o, io| {
            o.open_origin(io, fd, target, &http::Method::GET, Some(id), proxy_header)
        });
        self.runtime.metrics.worker(self.id).upstream_connects.inc();
        if let Some(session) = self.session_mut(id) {
            session.origin = Some(index);
        }
        Some(index)
    }

    /// The PROXY protocol header a new connection for session `id` starts with, when its
    /// upstream has `proxy_protocol`: the client's address (as every other rule sees it) and
    /// the address it reached Squall at; `LOCAL` when the session answers no connection.
    pub(super) fn origin_proxy_header(
        &self,
        id: SessionId,
        upstream: usize,
    ) -> Option<origin::ProxyHeader> {
        let version = self.runtime.upstreams.get(upstream)?.proxy_protocol?;
        let session = self.sessions.get(id.index).filter(|s| s.is(id))?;
        let destination = (self.conns.get(session.client.conn()))
            .filter(|_| !session.ex.detached())
            .and_then(|conn| conn.socket.fd())
            .and_then(|fd| socket2::SockRef::from(fd).local_addr().ok())
            .and_then(|addr| addr.as_socket());
        let addresses = session.peer.zip(destination);
        Some(origin::ProxyHeader::new(version, addresses))
    }

    /// Files the exchange's next deadline under its origin connection's timer.
    pub(super) fn arm_session_timer(&mut self, id: SessionId) {
        let Some(session) = self.session_mut(id) else {
            return;
        };
        let (origin, deadline) = (session.origin, session.ex.next_deadline());
        if origin.is_some_and(|index| self.origins.is_shared(index)) {
            return self.arm_own_timer(id);
        }
        if let Some(index) = origin {
            self.with_origins(|o, io| o.set_deadline(io, index, deadline));
        }
    }

    /// A timer of a session on a shared HTTP/2 connection came due.
    pub(in crate::worker) fn on_session_timer(&mut self, token: Token, due: Instant) {
        let now = self.now;
        let id = SessionId {
            index: token.index(),
            generation: token.generation(),
        };
        let Some(session) = self.sessions.get_mut(id.index) else {
            return;
        };
        if !token.names(session.generation()) {
            return;
        }
        let id = SessionId {
            index: id.index,
            generation: session.generation(),
        };
        if session.timer_due == Some(due) {
            session.timer_due = None;
        }
        match session.ex.next_deadline() {
            Some(deadline) if deadline <= now => self.feed(id, |ex| ex.on_timer(now)),
            Some(_) => self.arm_own_timer(id),
            None => {}
        }
    }

    /// Files the exchange's next deadline under the session's own timer.
    pub(in crate::worker) fn arm_own_timer(&mut self, id: SessionId) {
        let Some(session) = self.session_mut(id) else {
            return;
        };
        let Some(deadline) = session.ex.next_deadline() else {
            return;
        };
        if session.timer_due.is_none_or(|due| deadline < due) {
            session.timer_due = Some(deadline);
            let key = Token::session(id.index, id.generation).raw();
            self.timers.insert(key, deadline);
        }
    }
}
