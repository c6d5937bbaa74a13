//! Connections to origin servers, as the ring sees them: the slab, connects, sends, receives,
//! the keep-alive pool and the timers. This is I/O only: what to send, when to retry, whether
//! a connection may be kept are the exchange's decisions (`session.rs` runs them), and a
//! health probe's are `probe.rs`'s.
//!
//! The part, `Origins`, owns two sub-parts with their own state and methods: `Conns`
//! (`conns.rs`), the connection table and the ring operations on one connection, and
//! `Upstreams` (`upstreams.rs`), this worker's upstream groups (balancing, health, pools).
//! What a completion means (news for a session, the pool, HTTP/2, a probe, TLS) is decided by
//! `Origins`' own methods, here and in the other files of this folder.
//!
//! Origins of a `tls = true` upstream (`tls.rs`) run the TLS handshake after the connect and
//! before the exchange hears "connected", so its connect timeout covers the handshake; from
//! then on what the exchange writes is encrypted on its way to the send, and what arrives is
//! decrypted before anyone reads it. A pooled connection keeps its TLS state.
//!
//! Bounds: a paused origin's receive is cancelled (and re-armed when the exchange resumes
//! it), so a client slow to read holds at most what was already in flight; bytes to send wait
//! behind the one send in flight, and the exchange stops taking request body while they do.

mod conns;
mod h2;
mod news;
mod pool;
mod probe;
mod tls;
mod upstreams;

pub use conns::Conns;
pub use h2::OriginH2;
pub(in crate::worker) use h2::origin_protocol;
pub use news::{News, Outbox};
pub use upstreams::Upstreams;

use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use socket2::{Domain, Protocol, Type};
use squall_upstream::{ServerId, Upstream};
use squall_uring::RecvBuf;
use tracing::{debug, info};

use super::Io;
use super::ids::SessionId;
use super::socket::Socket;
use super::token::Token;

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

/// Which server of which group an origin connection goes to, under which set of groups.
#[derive(Clone, Copy, Debug)]
pub struct OriginTarget {
    pub upstream: usize,
    pub server: ServerId,
    pub address: SocketAddr,
    /// The groups' generation it was picked under (`Upstreams::generation`): a reload makes a
    /// connection of an older one unfit for the pool.
    pub generation: u64,
}

/// The worker's origin side: connections to origin servers (busy, pooled, shared HTTP/2 ones,
/// health probes) and this worker's balancing, health and pool state per upstream group.
///
/// It is made of two sub-parts that own their state, reached as fields: `conns`, the
/// connection table and the ring operations on each connection (`conns.rs`), and `upstreams`,
/// the upstream groups (`upstreams.rs`). What a completion means for a session, the pool,
/// the shared HTTP/2 connections, a probe or TLS is decided here, in `Origins`' own methods.
#[derive(Default)]
pub struct Origins {
    /// Connections to origin servers, busy or pooled.
    pub(in crate::worker) conns: Conns,
    /// The slots of `conns` that are shared HTTP/2 connections (`h2.rs`).
    shared: Vec<usize>,
    /// Of those, the ones whose queued exchanges may get a stream now (one was freed inside an
    /// action, where no other session may be called): served at the end of the turn.
    h2_pending: Vec<usize>,
    /// This worker's balancing, health and pool state per upstream group.
    pub(in crate::worker) upstreams: Upstreams,
    /// What the connections learned for their exchanges, for the loop to deliver.
    news: Outbox,
    /// Connections whose receive ended with a completion whose bytes went into `news`: armed
    /// again once the news was delivered, unless the exchange paused or let go of them
    /// (slot and generation).
    rearm: Vec<(usize, u32)>,
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
    /// A reload's new groups replace this worker's (their pools start empty: the idle
    /// connections of the old ones are closed).
    pub(in crate::worker) fn replace_groups(&mut self, io: &mut Io<'_>, groups: Vec<Upstream>) {
        self.upstreams.replace(groups);
        self.close_idle(io);
    }

    pub(super) fn on_origin_connect(
        &mut self,
        io: &mut Io<'_>,
        token: Token,
        result: io::Result<()>,
    ) {
        let Some(index) = self.conns.slot(token) else {
            return;
        };
        self.conns[index].socket.on_connect();
        if self.conns[index].state != OriginState::Connecting {
            self.conns.op_done(index);
            return;
        }
        let origin = &mut self.conns[index];
        match result {
            Ok(()) if origin.tls.is_some() => {
                origin.state = OriginState::Handshaking;
                origin.socket.arm_recv(io.ring, token);
                self.conns.flush(io, index);
            }
            Ok(()) => {
                origin.state = OriginState::Busy;
                origin.socket.arm_recv(io.ring, token);
                // A PROXY protocol header waits in `out`; what the exchange writes goes after it.
                self.conns.flush(io, index);
                let origin = &mut self.conns[index];
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
        if self.conns[index].mux.is_some() {
            return self.h2_failed(
                io,
                index,
                squall_upstream::UpstreamErrorClass::ConnectFailed,
            );
        }
        match self.conns[index].session {
            Some(id) => self.news.tell(id, index, news),
            None if self.conns[index].probe.is_some() => self.end_probe(io, index, false),
            None => self.close_origin(io, index),
        }
    }

    pub(super) fn on_origin_send(
        &mut self,
        io: &mut Io<'_>,
        token: Token,
        result: io::Result<usize>,
        buf: Bytes,
    ) {
        let Some(index) = self.conns.slot(token) else {
            return;
        };
        let origin = &mut self.conns[index];
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
                    self.conns.flush(io, index);
                }
                if self.conns[index].mux.is_some() {
                    self.h2_sent(io, index);
                } else if let Some(id) = self.conns[index].session {
                    self.news.tell(id, index, News::Sent(written));
                }
            }
            Err(e) => {
                debug!(worker = io.worker, "origin send: {e}");
                self.origin_failed(io, index, News::Failed);
            }
        }
        self.conns.op_done(index);
    }

    pub(super) fn on_origin_recv(
        &mut self,
        io: &mut Io<'_>,
        token: Token,
        result: io::Result<Option<RecvBuf>>,
        more: bool,
    ) {
        let Some(index) = self.conns.slot(token) else {
            if let Ok(Some(buf)) = result {
                io.ring.recycle(buf);
            }
            return;
        };
        self.conns[index].socket.on_recv(more);
        match result {
            Ok(Some(buf)) if self.conns[index].tls.is_some() => {
                self.on_origin_cipher(io, index, buf);
                if !more && self.conns.contains(index) {
                    self.conns.arm_recv(io, index);
                }
            }
            Ok(Some(buf)) if self.conns[index].mux.is_some() => {
                let bytes = io.ring.recv_bytes(&buf);
                if let Some(h2) = self.conns[index].mux.as_deref_mut() {
                    h2.take_input(bytes);
                }
                io.ring.recycle(buf);
                self.h2_input(io, index);
                if !more && self.conns.contains(index) {
                    self.conns.arm_recv(io, index);
                }
            }
            Ok(Some(buf)) => {
                let origin = &mut self.conns[index];
                let bytes = io.ring.recv_bytes(&buf);
                match (origin.state, origin.session, origin.probe.as_mut()) {
                    // A paused origin's bytes already in flight still go to the exchange,
                    // which holds them undecoded until the client has room.
                    (OriginState::Busy, Some(id), _) => {
                        self.news.tell(id, index, News::Received(buf));
                        // Read on once the exchange took the bytes (and did not pause it).
                        if !more {
                            let generation = self.conns[index].generation;
                            self.rearm.push((index, generation));
                        }
                        self.conns.op_done(index);
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
                if !more && self.conns.contains(index) {
                    self.conns.arm_recv(io, index);
                }
            }
            Ok(None) => self.origin_eof(io, index),
            Err(e)
                if e.raw_os_error() == Some(libc::EINVAL)
                    && self.conns[index].socket.armed_limited() =>
            {
                // A kernel without multishot receive limits: one buffer per receive from now
                // on, on every connection of this worker.
                info!(
                    worker = io.worker,
                    "origin receives: one buffer per receive (the kernel has no multishot receive limit)"
                );
                io.ring.refuse_multishot_limit();
                self.conns.arm_recv(io, index);
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::ECANCELED)) => {
                // Every receive buffer was in use for a moment, or the receive was cancelled
                // to pause and the client caught up meanwhile: read again.
                self.conns.arm_recv(io, index);
            }
            Err(e) => {
                debug!(worker = io.worker, "origin recv: {e}");
                match self.conns[index].state {
                    OriginState::Busy => self.origin_failed(io, index, News::Failed),
                    OriginState::Handshaking => {
                        let why = format!("receive failed during the handshake: {e}");
                        self.handshake_failed(io, index, tls::HandshakeFailure::Closed, &why);
                    }
                    _ => self.close_origin(io, index),
                }
            }
        }
        self.conns.op_done(index);
    }

    /// The origin closed its side (a TCP FIN, or a TLS close_notify).
    fn origin_eof(&mut self, io: &mut Io<'_>, index: usize) {
        if self.conns[index].mux.is_some() && self.conns[index].state == OriginState::Busy {
            let class = squall_upstream::UpstreamErrorClass::ClosedBeforeResponse;
            return self.h2_failed(io, index, class);
        }
        match self.conns[index].state {
            OriginState::Busy => match self.conns[index].session {
                Some(id) => self.news.tell(id, index, News::Eof),
                None if self.conns[index].probe.is_some() => self.read_probe(io, index, true),
                None => self.close_origin(io, index),
            },
            OriginState::Handshaking => {
                let why = "the origin closed the connection during the handshake";
                self.handshake_failed(io, index, tls::HandshakeFailure::Closed, why);
            }
            _ => self.close_origin(io, index),
        }
    }
}
