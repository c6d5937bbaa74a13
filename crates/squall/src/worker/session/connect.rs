//! A session's way to an origin: the pick from the route's group, a pooled connection or a new
//! one (or a stream on a shared HTTP/2 connection), the PROXY protocol header a new connection
//! starts with, and the session's own timer (the exchange's next deadline on the wheel).

use std::time::Instant;

use squall_config::OriginProtocol;
use squall_upstream::{ConnId, ServerId, UpstreamErrorClass};

use super::super::ids::SessionId;
use super::super::ids::Waiter;
use super::super::origin::{self, OriginTarget};
use super::super::token::Token;
use super::{SessionIo, Sessions};

impl Sessions {
    /// `Action::Pick`: a server of the route's group, by its balancing, not yet tried.
    pub(super) fn pick(&mut self, cx: &mut SessionIo<'_>, id: SessionId) {
        let now = cx.io.now;
        if self.refuse_grpc(cx, id) {
            return;
        }
        // Its origin connection's descriptor is charged once, before the first pick; with none
        // free the request waits (no timer runs before a pick) rather than fail its connect.
        if self.get(id).is_some_and(|s| !s.descriptor) {
            if !cx.admission.take_descriptor(cx.io.runtime) {
                return cx
                    .admission
                    .wait_for_descriptor(&cx.io, Waiter::Session(id));
            }
            if let Some(session) = self.get_mut(id) {
                session.descriptor = true;
            }
        }
        let Some(session) = self.get_mut(id) else {
            return;
        };
        let key = (cx.io.runtime.upstreams.get(session.upstream)).map(|u| {
            squall_proxy::forward::balance_key(&u.hash_key, session.ex.head(), session.peer)
        });
        let picked = (cx.origins)
            .upstreams
            .pick(session.upstream, key, now, session.ex.tried());
        session.ex.on_pick(picked, now);
    }

    /// Picks for session `id`, waiting until now for a descriptor, now charged one; false
    /// when it is gone (the loop drives it when true).
    pub(in crate::worker) fn pick_charged(
        &mut self,
        cx: &mut SessionIo<'_>,
        id: SessionId,
    ) -> bool {
        let Some(session) = self.get_mut(id) else {
            return false;
        };
        debug_assert!(!session.descriptor, "a session is charged once");
        session.descriptor = true;
        self.pick(cx, id);
        true
    }

    /// `Action::Connect`: a pooled connection to `server` if allowed and one is idle (LIFO:
    /// the one most likely still open), else a new connect.
    pub(super) fn connect(
        &mut self,
        cx: &mut SessionIo<'_>,
        id: SessionId,
        server: ServerId,
        pooled: bool,
    ) {
        let now = cx.io.now;
        let Some(upstream) = self.get(id).map(|s| s.upstream) else {
            return;
        };
        match origin::origin_protocol(cx.io.runtime, upstream) {
            OriginProtocol::H2 | OriginProtocol::H2c => {
                return self.connect_h2(cx, id, upstream, server, pooled);
            }
            // A connection that chose HTTP/2 with ALPN, else one of HTTP/1.1 as below.
            OriginProtocol::Auto if pooled => {
                if let Some(index) = cx.origins.join_h2(&mut cx.io, id, upstream, server, true) {
                    if let Some(session) = self.get_mut(id) {
                        session.origin = Some(index);
                    }
                    return;
                }
            }
            _ => {}
        }
        // A `proxy_protocol` upstream's connection names one client: never shared.
        let pooled = pooled
            && (cx.io.runtime.upstreams.get(upstream)).is_none_or(|u| u.proxy_protocol.is_none());
        // A request that could not be sent again takes only a recently used connection.
        let replayable =
            (self.get(id)).is_some_and(|s| squall_proxy::forward::replayable(s.ex.head()));
        while pooled
            && let Some(ConnId(raw)) = cx
                .origins
                .upstreams
                .checkout(&cx.io, upstream, server, replayable)
        {
            let Some(index) = cx.origins.conns.slot(Token::from_raw(raw)) else {
                continue;
            };
            if !cx.origins.conns.take_pooled(index, id) {
                continue;
            }
            // Its receive may have ended while it was pooled (a pause's cancellation
            // reporting late): a busy connection must be read.
            cx.origins.conns.arm_recv(&mut cx.io, index);
            (cx.io.runtime.metrics.worker(cx.io.worker))
                .upstream_reuses
                .inc();
            if let Some(session) = self.get_mut(id) {
                session.origin = Some(index);
                session.ex.on_origin_connected(true, now);
            }
            return;
        }
        self.connect_new(cx, id, upstream, server);
    }

    /// `Action::Connect` for an upstream spoken to in HTTP/2 (`h2`, `h2c`): a stream on a
    /// connection to `server` with room, else a place on one still connecting, else a new
    /// connection (see `origin/h2.rs`).
    pub(super) fn connect_h2(
        &mut self,
        cx: &mut SessionIo<'_>,
        id: SessionId,
        upstream: usize,
        server: ServerId,
        pooled: bool,
    ) {
        if let Some(index) = cx.origins.join_h2(&mut cx.io, id, upstream, server, pooled) {
            if let Some(session) = self.get_mut(id) {
                session.origin = Some(index);
            }
            return;
        }
        if let Some(index) = self.connect_new(cx, id, upstream, server) {
            cx.origins.share(&mut cx.io, index, id);
        }
    }

    /// A new connection to `server` for session `id` (its exchange hears "connected" or the
    /// failure later; a socket that cannot be made fails it now). Returns the connection.
    fn connect_new(
        &mut self,
        cx: &mut SessionIo<'_>,
        id: SessionId,
        upstream: usize,
        server: ServerId,
    ) -> Option<usize> {
        let now = cx.io.now;
        let proxy_header = self.origin_proxy_header(cx, id, upstream);
        let address = (cx.origins.upstreams.group(upstream)).and_then(|g| g.group.address(server));
        let fd = address.map(origin::origin_socket);
        let Some(Ok(fd)) = fd else {
            if let Some(Err(e)) = fd {
                cx.origins.conns.socket_failed(&mut cx.io, address, &e);
            }
            if let Some(session) = self.get_mut(id) {
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
            generation: cx.origins.upstreams.generation(),
        };
        let method = &http::Method::GET;
        let index = (cx.origins)
            .conns
            .open(&mut cx.io, fd, target, method, Some(id), proxy_header);
        (cx.io.runtime.metrics.worker(cx.io.worker))
            .upstream_connects
            .inc();
        if let Some(session) = self.get_mut(id) {
            session.origin = Some(index);
        }
        Some(index)
    }

    /// The PROXY protocol header a new connection for session `id` starts with, when its
    /// upstream has `proxy_protocol`: the client's address (as every other rule sees it) and
    /// the address it reached Squall at; `LOCAL` when the session answers no connection.
    fn origin_proxy_header(
        &self,
        cx: &SessionIo<'_>,
        id: SessionId,
        upstream: usize,
    ) -> Option<origin::ProxyHeader> {
        let version = cx.io.runtime.upstreams.get(upstream)?.proxy_protocol?;
        let session = self.get(id)?;
        let destination = (cx.down.conns.get(session.client.conn()))
            .filter(|_| !session.ex.detached())
            .and_then(|conn| conn.socket.fd())
            .and_then(|fd| socket2::SockRef::from(fd).local_addr().ok())
            .and_then(|addr| addr.as_socket());
        let addresses = session.peer.zip(destination);
        Some(origin::ProxyHeader::new(version, addresses))
    }

    /// Files the exchange's next deadline under its origin connection's timer.
    pub(super) fn arm_timer(&mut self, cx: &mut SessionIo<'_>, id: SessionId) {
        let Some(session) = self.get(id) else {
            return;
        };
        let (origin, deadline) = (session.origin, session.ex.next_deadline());
        if origin.is_some_and(|index| cx.origins.conns.is_shared(index)) {
            return self.arm_own_timer(cx, id);
        }
        if let Some(index) = origin {
            cx.origins.conns.set_deadline(&mut cx.io, index, deadline);
        }
    }

    /// A timer of a session on a shared HTTP/2 connection came due: the session whose
    /// exchange is due now, for the loop to feed its timer to.
    pub(in crate::worker) fn on_timer(
        &mut self,
        cx: &mut SessionIo<'_>,
        token: Token,
        due: Instant,
    ) -> Option<SessionId> {
        let session = self.slab.get_mut(token.index())?;
        if !token.names(session.generation()) {
            return None;
        }
        let id = SessionId {
            index: token.index(),
            generation: session.generation(),
        };
        if session.timer_due == Some(due) {
            session.timer_due = None;
        }
        match session.ex.next_deadline() {
            Some(deadline) if deadline <= cx.io.now => return Some(id),
            Some(_) => self.arm_own_timer(cx, id),
            None => {}
        }
        None
    }

    /// Files the exchange's next deadline under the session's own timer.
    fn arm_own_timer(&mut self, cx: &mut SessionIo<'_>, id: SessionId) {
        let Some(session) = self.get_mut(id) else {
            return;
        };
        let Some(deadline) = session.ex.next_deadline() else {
            return;
        };
        if session.timer_due.is_none_or(|due| deadline < due) {
            session.timer_due = Some(deadline);
            let key = Token::session(id.index, id.generation).raw();
            cx.io.timers.insert(key, deadline);
        }
    }
}
