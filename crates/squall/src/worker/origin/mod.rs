//! Connections to origin servers, as the ring sees them: the slab, connects, sends, receives,
//! the keep-alive pool and the timers. This is I/O only: what to send, when to retry, whether
//! a connection may be kept are the exchange's decisions (`session.rs` runs them), and a
//! health probe's are `probe.rs`'s.
//!
//! Origins of a `tls = true` upstream (`tls.rs`) run the TLS handshake after the connect and
//! before the exchange hears "connected", so its connect timeout covers the handshake; from
//! then on what the exchange writes is encrypted on its way to the send, and what arrives is
//! decrypted before anyone reads it. A pooled connection keeps its TLS state.
//!
//! Bounds: a paused origin's receive is cancelled (and re-armed when the exchange resumes
//! it), so a client slow to read holds at most what was already in flight; bytes to send wait
//! behind the one send in flight, and the exchange stops taking request body while they do.

mod h2;
mod news;
mod pool;
mod probe;
mod tls;

pub use h2::OriginH2;
pub(in crate::worker) use h2::origin_protocol;
pub use news::{News, Outbox};

use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use slab::Slab;
use socket2::{Domain, Protocol, Type};
use squall_upstream::{ServerId, Upstream};
use squall_uring::RecvBuf;
use tracing::debug;

use super::ids::SessionId;
use super::socket::Socket;
use super::token::{self, Token};
use super::{Io, Runtime};

/// Where an origin connection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OriginState {
    /// The TCP connect is in flight.
    Connecting,
    /// Connected; the TLS handshake is in flight (TLS upstreams only).
    Handshaking,
    /// Request going out and/or response coming in.
    Busy,
    /// In the pool, read only to notice a close.
    Idle,
    Closed,
}

/// One connection to an origin server.
pub struct Origin {
    /// The socket and the ring operations on it (connect, receive, send, close).
    pub socket: Socket,
    pub generation: u32,
    pub upstream: usize,
    /// The worker's upstream generation this connection belongs to (a reload rebuilds pools).
    pub upstream_generation: u64,
    pub server: ServerId,
    pub address: SocketAddr,
    pub state: OriginState,
    /// Bytes to send behind the send in flight.
    pub out: BytesMut,
    /// The session whose exchange holds this connection, while busy.
    pub session: Option<SessionId>,
    /// A health-check probe's own state, for a probe's connection (see `probe.rs`).
    pub probe: Option<Box<probe::Probe>>,
    /// The receive was cancelled because the client is slow to read.
    pub paused: bool,
    /// When the connection's timer is due: the exchange's `next_deadline`, or a probe's.
    pub deadline: Option<Instant>,
    /// Due time of the earliest timer entry filed for this connection, if one is filed.
    pub timer_due: Option<Instant>,
    /// The TLS client state, for a connection of a `tls = true` upstream.
    pub tls: Option<Box<tls::OriginTls>>,
    /// It began with a PROXY protocol header naming one client (`proxy_protocol` upstreams):
    /// never pooled, since a later request may come from another client.
    pub proxied: bool,
    /// Bytes of that header (on a cleartext connection) not yet reported sent: they are not
    /// the exchange's, so they are not counted as its bytes that left.
    pub header_unsent: usize,
    /// The HTTP/2 state of a connection shared by many exchanges (`h2.rs`); `session` is then
    /// `None`.
    pub mux: Option<Box<OriginH2>>,
}

impl Origin {}

/// The PROXY protocol header an origin connection starts with.
pub struct ProxyHeader {
    pub bytes: Vec<u8>,
    /// It names a client (not `LOCAL` / `UNKNOWN`).
    pub client: bool,
}

impl ProxyHeader {
    /// The header for a connection made for the client at `source` that reached this server
    /// at `destination`, or, without them (a probe, a background revalidation), the `LOCAL`
    /// form.
    pub fn new(
        version: squall_config::ProxyProtocolVersion,
        addresses: Option<(SocketAddr, SocketAddr)>,
    ) -> ProxyHeader {
        use squall_config::ProxyProtocolVersion::{V1, V2};
        use squall_proxy_protocol::{encode_local, encode_v1, encode_v2};
        match (version, addresses) {
            (V1, Some((source, destination))) => ProxyHeader {
                bytes: encode_v1(source, destination),
                client: true,
            },
            (V2, Some((source, destination))) => ProxyHeader {
                bytes: encode_v2(source, destination),
                client: true,
            },
            (version, None) => ProxyHeader {
                bytes: encode_local(version == V2),
                client: false,
            },
        }
    }
}

/// Which server of which group an origin connection goes to.
#[derive(Clone, Copy, Debug)]
pub struct OriginTarget {
    pub upstream: usize,
    pub server: ServerId,
    pub address: SocketAddr,
}

/// One worker's upstream groups, rebuilt on reload (a generation tells old connections apart).
/// The worker's origin side: connections to origin servers (busy, pooled, shared HTTP/2 ones,
/// health probes) and this worker's balancing, health and pool state per upstream group.
#[derive(Default)]
pub struct Origins {
    /// Connections to origin servers, busy or pooled.
    slab: Slab<Origin>,
    /// The slots of `slab` that are shared HTTP/2 connections (`h2.rs`).
    shared: Vec<usize>,
    /// Of those, the ones whose queued exchanges may get a stream now (one was freed inside an
    /// action, where no other session may be called): served at the end of the turn.
    h2_pending: Vec<usize>,
    /// This worker's balancing, health and pool state per upstream group.
    upstreams: Upstreams,
    /// When an origin socket refused for want of a descriptor was last logged.
    fd_logged_at: Option<Instant>,
    /// What the connections learned for their exchanges, for the loop to deliver.
    news: Outbox,
    /// The generation of the next connection's token.
    next_generation: u32,
    /// `limits.buffer_memory_max` in bytes (0: none): under a budget origins are read one
    /// buffer at a time.
    pub buffer_limit: usize,
    /// When the upstream servers' state is next published for `/metrics`.
    gauges_due: Option<Instant>,
    /// Connections whose receive ended with a completion whose bytes went into `news`: armed
    /// again once the news was delivered, unless the exchange paused or let go of them
    /// (slot and generation).
    rearm: Vec<(usize, u32)>,
}

#[derive(Default)]
pub struct Upstreams {
    pub groups: Vec<Upstream>,
    pub generation: u64,
}

/// A new nonblocking TCP socket for `address`, with TCP_NODELAY (requests go out whole).
pub fn origin_socket(address: SocketAddr) -> io::Result<OwnedFd> {
    let socket = socket2::Socket::new(
        Domain::for_address(address),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    socket.set_tcp_nodelay(true)?;
    Ok(socket.into())
}

impl Origins {
    /// Upstream group `upstream` as this worker balances it (read only: its servers, their
    /// health, its timeouts), if the config in force has it.
    pub(in crate::worker) fn group(&self, upstream: usize) -> Option<&Upstream> {
        self.upstreams.groups.get(upstream)
    }

    /// Group `upstream`'s name ("" for a group the config in force lacks).
    pub(in crate::worker) fn group_name(&self, upstream: usize) -> &str {
        self.group(upstream).map_or("", |g| g.group.name())
    }

    /// Which set of groups is in force: a reload's `replace_groups` moves it on, and a
    /// session's upstream index means something only under the generation it began in.
    pub(in crate::worker) fn groups_generation(&self) -> u64 {
        self.upstreams.generation
    }

    /// A server of group `upstream` by its balancing, none of `tried`.
    pub(in crate::worker) fn pick(
        &mut self,
        upstream: usize,
        key: Option<u64>,
        now: Instant,
        tried: &[ServerId],
    ) -> Option<ServerId> {
        (self.upstreams.groups.get_mut(upstream)).and_then(|u| u.group.pick(key, now, tried))
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
        if generation == self.upstreams.generation
            && let Some(group) = self.upstreams.groups.get_mut(upstream)
        {
            group.group.report(server, outcome, now);
        }
    }

    /// A reload's new groups replace this worker's (their pools start empty: the idle
    /// connections of the old ones are closed).
    pub(in crate::worker) fn replace_groups(&mut self, io: &mut Io<'_>, groups: Vec<Upstream>) {
        self.upstreams.groups = groups;
        self.upstreams.generation += 1;
        self.close_idle(io);
    }

    /// Group `upstream`'s counters of HTTP/2 streams and tunnels (a cluster peer's group, which
    /// the config does not list, has its own, made on first use).
    pub(in crate::worker) fn upstream_events(
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
                let name = (self.upstreams.groups.get(upstream)).map_or("", |g| g.group.name());
                runtime.metrics.upstream_events.counters(name)
            }
        }
    }

    /// An origin socket could not be made: out of descriptors (the reserve was too small, or
    /// HTTP/2 clients have many requests in flight each) is counted and logged at warn, at most
    /// once per `PAUSE_LOG_INTERVAL`; the exchange takes it as a connect failure and retries
    /// where it may.
    pub(super) fn origin_socket_failed(
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
            .is_none_or(|at| io.now >= at + super::PAUSE_LOG_INTERVAL)
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

    pub(super) fn origin_index(&self, token: Token) -> Option<usize> {
        debug_assert_eq!(token.kind(), token::Kind::Origin);
        let index = token.index();
        let origin = self.slab.get(index)?;
        token.names(origin.generation).then_some(index)
    }

    /// Puts a new origin connection in the slab and starts its connect: for session `session`
    /// or, with `None`, a health probe of `method`. Returns its slot.
    pub(super) fn open_origin(
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
        // Under a buffer budget an origin is read one buffer at a time, so a pause holds at
        // once (see socket.rs); with the budget off (`buffer_memory_max = 0`), multishot,
        // which saves a receive submission per response.
        let socket = match self.buffer_limit {
            0 => Socket::new(fd),
            _ => Socket::new(fd).one_buffer_at_a_time(),
        };
        // A PROXY protocol header goes first, then a TLS upstream's ClientHello: both wait in
        // `out` for the connect.
        let mut out = BytesMut::new();
        let proxied = proxy_header.as_ref().is_some_and(|h| h.client);
        if let Some(header) = &proxy_header {
            out.extend_from_slice(&header.bytes);
        }
        let tls = self.origin_tls(io, &target, &mut out);
        let header_unsent = match (&tls, &proxy_header) {
            (None, Some(header)) => header.bytes.len(),
            _ => 0,
        };
        let index = self.slab.insert(Origin {
            socket,
            generation,
            upstream: target.upstream,
            upstream_generation: self.upstreams.generation,
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

    pub(super) fn on_origin_connect(
        &mut self,
        io: &mut Io<'_>,
        token: Token,
        result: io::Result<()>,
    ) {
        let Some(index) = self.origin_index(token) else {
            return;
        };
        self.slab[index].socket.on_connect();
        if self.slab[index].state != OriginState::Connecting {
            self.origin_op_done(index);
            return;
        }
        let origin = &mut self.slab[index];
        match result {
            Ok(()) if origin.tls.is_some() => {
                origin.state = OriginState::Handshaking;
                origin.socket.arm_recv(io.ring, token);
                self.flush_origin(io, index);
            }
            Ok(()) => {
                origin.state = OriginState::Busy;
                origin.socket.arm_recv(io.ring, token);
                // A PROXY protocol header waits in `out`; what the exchange writes goes after it.
                self.flush_origin(io, index);
                let origin = &mut self.slab[index];
                if origin.mux.is_some() {
                    return self.h2_connected(io, index);
                }
                match origin.session {
                    Some(id) => (self.news).tell(id, index, News::Connected { reused: false }),
                    None => self.write_probe(io, index),
                }
            }
            Err(e) => {
                debug!(worker = io.worker, address = %origin.address, "connect: {e}");
                let class = squall_upstream::UpstreamErrorClass::ConnectFailed;
                self.origin_failed(io, index, News::ConnectFailed(class));
            }
        }
    }

    /// A connection's I/O failed: its exchange hears `news`, a probe fails; on a shared
    /// HTTP/2 connection every exchange on it hears of it (`h2.rs`).
    fn origin_failed(&mut self, io: &mut Io<'_>, index: usize, news: News) {
        if self.slab[index].mux.is_some() {
            return self.h2_failed(
                io,
                index,
                squall_upstream::UpstreamErrorClass::ConnectFailed,
            );
        }
        match self.slab[index].session {
            Some(id) => self.news.tell(id, index, news),
            None if self.slab[index].probe.is_some() => self.end_probe(io, index, false),
            None => self.close_origin(io, index),
        }
    }

    /// Sends `bytes` after whatever the connection has not sent yet (encrypted first, on TLS).
    pub(super) fn write_origin(&mut self, io: &mut Io<'_>, index: usize, bytes: Bytes) {
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
            return self.flush_origin(io, index);
        }
        if !origin.socket.sending() && origin.out.is_empty() {
            let token = Token::origin(index, origin.generation);
            origin.socket.send(io.ring, bytes, token);
        } else {
            origin.out.extend_from_slice(&bytes);
        }
    }

    pub(super) fn flush_origin(&mut self, io: &mut Io<'_>, index: usize) {
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

    pub(super) fn on_origin_send(
        &mut self,
        io: &mut Io<'_>,
        token: Token,
        result: io::Result<usize>,
        buf: Bytes,
    ) {
        let Some(index) = self.origin_index(token) else {
            return;
        };
        let origin = &mut self.slab[index];
        origin.socket.on_send();
        match result {
            _ if origin.state == OriginState::Closed => {}
            Ok(sent) => {
                // What the exchange wrote that left: on TLS, the plaintext of a whole buffer.
                let written = match origin.tls.as_mut() {
                    Some(tls) => tls.sent(sent >= buf.len()),
                    None => {
                        let header = sent.min(origin.header_unsent);
                        origin.header_unsent -= header;
                        sent - header
                    }
                };
                if sent < buf.len() {
                    // A partial send: the rest goes first, before anything queued since.
                    origin.socket.send(io.ring, buf.slice(sent..), token);
                } else {
                    self.flush_origin(io, index);
                }
                if self.slab[index].mux.is_some() {
                    self.h2_sent(io, index);
                } else if let Some(id) = self.slab[index].session {
                    self.news.tell(id, index, News::Sent(written));
                }
            }
            Err(e) => {
                debug!(worker = io.worker, "origin send: {e}");
                self.origin_failed(io, index, News::Failed);
            }
        }
        self.origin_op_done(index);
    }

    pub(super) fn on_origin_recv(
        &mut self,
        io: &mut Io<'_>,
        token: Token,
        result: io::Result<Option<RecvBuf>>,
        more: bool,
    ) {
        let Some(index) = self.origin_index(token) else {
            if let Ok(Some(buf)) = result {
                io.ring.recycle(buf);
            }
            return;
        };
        self.slab[index].socket.on_recv(more);
        match result {
            Ok(Some(buf)) if self.slab[index].tls.is_some() => {
                self.on_origin_cipher(io, index, buf);
                if !more && self.slab.contains(index) {
                    self.arm_origin_recv(io, index);
                }
            }
            Ok(Some(buf)) if self.slab[index].mux.is_some() => {
                let bytes = io.ring.recv_bytes(&buf);
                if let Some(h2) = self.slab[index].mux.as_deref_mut() {
                    h2.take_input(bytes);
                }
                io.ring.recycle(buf);
                self.h2_input(io, index);
                if !more && self.slab.contains(index) {
                    self.arm_origin_recv(io, index);
                }
            }
            Ok(Some(buf)) => {
                let origin = &mut self.slab[index];
                let bytes = io.ring.recv_bytes(&buf);
                match (origin.state, origin.session, origin.probe.as_mut()) {
                    // A paused origin's bytes already in flight still go to the exchange,
                    // which holds them undecoded until the client has room.
                    (OriginState::Busy, Some(id), _) => {
                        self.news.tell(id, index, News::Received(buf));
                        // Read on once the exchange took the bytes (and did not pause it).
                        if !more {
                            let generation = self.slab[index].generation;
                            self.rearm.push((index, generation));
                        }
                        self.origin_op_done(index);
                        return;
                    }
                    (OriginState::Busy, None, Some(probe)) => {
                        probe.rbuf.extend_from_slice(bytes);
                        io.ring.recycle(buf);
                        self.read_probe(io, index, false);
                    }
                    // An idle origin has nothing to say: a stray byte desyncs it. Close.
                    _ => {
                        io.ring.recycle(buf);
                        self.close_origin(io, index);
                    }
                }
                // Read on once the bytes were taken: a receive that ended (a single one always
                // does) is armed again unless they paused the origin or ended the exchange.
                if !more && self.slab.contains(index) {
                    self.arm_origin_recv(io, index);
                }
            }
            Ok(None) => self.origin_eof(io, index),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::ECANCELED)) => {
                // Every receive buffer was in use for a moment, or the receive was cancelled
                // to pause and the client caught up meanwhile: read again.
                self.arm_origin_recv(io, index);
            }
            Err(e) => {
                debug!(worker = io.worker, "origin recv: {e}");
                match self.slab[index].state {
                    OriginState::Busy => self.origin_failed(io, index, News::Failed),
                    OriginState::Handshaking => {
                        let why = format!("receive failed during the handshake: {e}");
                        self.handshake_failed(io, index, tls::HandshakeFailure::Closed, &why);
                    }
                    _ => self.close_origin(io, index),
                }
            }
        }
        self.origin_op_done(index);
    }

    /// The origin closed its side (a TCP FIN, or a TLS close_notify).
    fn origin_eof(&mut self, io: &mut Io<'_>, index: usize) {
        if self.slab[index].mux.is_some() && self.slab[index].state == OriginState::Busy {
            let class = squall_upstream::UpstreamErrorClass::ClosedBeforeResponse;
            return self.h2_failed(io, index, class);
        }
        match self.slab[index].state {
            OriginState::Busy => match self.slab[index].session {
                Some(id) => self.news.tell(id, index, News::Eof),
                None if self.slab[index].probe.is_some() => self.read_probe(io, index, true),
                None => self.close_origin(io, index),
            },
            OriginState::Handshaking => {
                let why = "the origin closed the connection during the handshake";
                self.handshake_failed(io, index, tls::HandshakeFailure::Closed, why);
            }
            _ => self.close_origin(io, index),
        }
    }

    /// Stops reading the origin while its client is slow to read.
    pub(super) fn pause_origin(&mut self, io: &mut Io<'_>, index: usize) {
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
    pub(super) fn resume_origin(&mut self, io: &mut Io<'_>, index: usize) {
        let origin = &mut self.slab[index];
        if !origin.paused || origin.state != OriginState::Busy {
            return;
        }
        origin.paused = false;
        self.arm_origin_recv(io, index);
    }

    /// Arms the receive of a busy connection that is not paused, or of a pooled one (read to
    /// notice a close), unless one is armed or still reporting its cancellation (whose final
    /// completion arms it again).
    pub(super) fn arm_origin_recv(&mut self, io: &mut Io<'_>, index: usize) {
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
}
