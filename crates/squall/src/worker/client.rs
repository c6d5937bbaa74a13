//! Client connections on the ring: receiving (through TLS when configured), sending (one send
//! or writev in flight, partial sends resumed in order), lingering, closing once the kernel has
//! reported every operation, and the connection's deadline (header, idle, linger, HTTP/2 and
//! parked-request timers).
//!
//! The `Clients` part owns the connections, the ready queue and the per-address table, and
//! does their socket I/O with the `Io` context the loop lends it. What it cannot do alone
//! comes back as a value: a send that completed (`SendDone`: the protocol goes on, or the
//! connection closes), output that wants the connection closed or lingering (`After`), a slot
//! freed (paused listeners may resume). Closing a connection aborts its sessions and file
//! transfers first, which only the loop can do (`client/driver.rs`).

mod driver;

use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::OwnedFd;
use std::sync::Arc;

use bytes::Bytes;
use slab::Slab;
use socket2::SockRef;
use squall_tls::TlsConn;
use tracing::debug;

use super::conn::{Conn, Phase};
use super::token::{self, Token};
use super::{Io, LINGER, listen};
use crate::clients::ClientTable;
use crate::metrics::WorkerCounters;

/// The client connections of a worker (see the module docs).
pub(super) struct Clients {
    pub conns: Slab<Conn>,
    /// Client connections with work to do that an event found while handling another (a
    /// failed exchange lets the next pipelined request go on): processed at the end of the
    /// loop's turn, never re-entrantly, so a thousand pipelined failures cost no stack.
    pub ready: VecDeque<Token>,
    /// Per-client-address counts, shared by every worker.
    pub table: Arc<ClientTable>,
    generation: u32,
}

/// What a connection's output asks of the loop once it is handed to the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum After {
    /// Nothing: a send is in flight, or nothing is left to send.
    Nothing,
    /// The connection is to close now (a cut response has left, or TLS failed).
    Close,
    /// Everything has left a connection that closes after it: it lingers.
    Linger,
}

/// What a completed send or writev asks of the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SendDone {
    /// Everything queued has left: the connection's protocol goes on (`Worker::sent`).
    Sent,
    /// Part of a writev is left: hand it to the ring again.
    Flush,
    /// The send failed: the connection closes.
    Close,
    /// A partial send was queued again, or the connection is closed already.
    Nothing,
}

impl Clients {
    pub(super) fn new(table: Arc<ClientTable>) -> Clients {
        Clients {
            conns: Slab::with_capacity(1024),
            ready: VecDeque::new(),
            table,
            generation: 0,
        }
    }

    /// The connection a client token names, if it is still the slot's occupant.
    pub(super) fn index(&self, token: Token) -> Option<usize> {
        debug_assert_eq!(token.kind(), token::Kind::Client);
        let index = token.index();
        let conn = self.conns.get(index)?;
        token.names(conn.generation).then_some(index)
    }

    /// Sets up a connection accepted on the listener configured as `address`, starts reading
    /// it and files its first deadline; `logging` says the access log is on (it needs the
    /// peer's address). A connection refused (an untrusted PROXY protocol sender, an address
    /// over its connection limit) is dropped, which closes its socket.
    pub(super) fn open(
        &mut self,
        io: &mut Io<'_>,
        fd: OwnedFd,
        address: SocketAddr,
        logging: bool,
    ) {
        let (runtime, worker) = (io.runtime, io.worker);
        // Small responses go out at once: Nagle would hold a pipelined batch's tail for an ACK.
        if let Err(e) = SockRef::from(&fd).set_tcp_nodelay(true) {
            debug!(worker, "TCP_NODELAY: {e}");
        }
        // The kernel keeps only a little unsent data queued, so the next frame to go out is
        // the one the HTTP/2 scheduler picks now, not one queued behind a large response.
        let lowat = runtime.limits.tcp_notsent_lowat;
        if lowat > 0
            && let Err(e) = squall_uring::set_tcp_notsent_lowat(&fd, lowat)
        {
            debug!(worker, "TCP_NOTSENT_LOWAT: {e}");
        }
        // 30 bits: the top two bits of a token say what it belongs to.
        self.generation = token::next_generation(self.generation);
        let generation = self.generation;
        let acceptor = runtime.tls.acceptor(address);
        let tls = acceptor.map(|acceptor| Box::new(TlsConn::new(acceptor)));
        // A listener that also serves HTTP/3 says so in its responses, with its own port
        // (the bound one: `:0` in tests).
        let alt_svc = (runtime.alt_svc.iter().any(|(a, _)| *a == address))
            .then(|| SockRef::from(&fd).local_addr().ok()?.as_socket())
            .flatten()
            .and_then(|local| runtime.alt_svc(address, local.port()));
        let mut conn = Conn::new(fd, generation, tls, io.now);
        conn.alt_svc = alt_svc;
        conn.protocols = listen::listener_protocols(runtime, address);
        let limits = runtime.client_limits;
        let access = runtime.access_rules;
        let balancers = listen::proxy_protocol_from(runtime, address);
        let needs_peer =
            !runtime.upstreams.is_empty() || access || runtime.needs_client || balancers.is_some();
        if logging || limits.any() || needs_peer {
            // One getpeername per connection, paid only when a log, a limit, a route's
            // allow / deny, auth or rate, `real_ip` or the X-Forwarded-For of a proxied
            // request needs it.
            let fd = conn.socket.fd().expect("a new connection has its socket");
            conn.peer = SockRef::from(fd)
                .peer_addr()
                .ok()
                .and_then(|a| a.as_socket());
        }
        if let Some(balancers) = balancers {
            // The client's address comes with the header; only the balancers may send one.
            if !conn
                .peer
                .is_some_and(|p| balancers.iter().any(|n| n.contains(p.ip())))
            {
                debug!(worker, peer = ?conn.peer, "PROXY protocol: not a trusted balancer");
                runtime.metrics.worker(worker).proxy_protocol_refused.inc();
                return; // dropping `conn` closes the socket
            }
            conn.proxy_header = Some(Vec::new());
        } else if !self.count(io, conn.peer, &mut conn.counted_ip) {
            return; // dropping `conn` closes the socket
        }
        let index = self.conns.insert(conn);
        // Counted from the slot's insertion to its removal (`op_done_at`), however it closes.
        runtime.metrics.descriptors.opened();
        let token = Token::client(index, generation);
        let conn = &mut self.conns[index];
        conn.socket.arm_recv(io.ring, token);
        runtime.metrics.worker(worker).connections_accepted.inc();
        // A new connection waits on no origin.
        self.deadline(io, index, false);
    }

    /// Gives a new HTTP/3 connection, accepted on the QUIC listener configured as `address`, a
    /// slot (with no socket: its listener's carries its datagrams) and files its first
    /// deadline. Its token, for the `Quic` part to find it by; the connection back when its
    /// address is over `connections_per_ip_max` (it is then closed).
    pub(super) fn open_quic(
        &mut self,
        io: &mut Io<'_>,
        proto: super::downstream::proto::Proto,
        address: SocketAddr,
        peer: SocketAddr,
    ) -> Result<Token, super::downstream::proto::Proto> {
        let mut counted = None;
        if !self.count(io, Some(peer), &mut counted) {
            return Err(proto);
        }
        self.generation = token::next_generation(self.generation);
        let generation = self.generation;
        let mut conn = Conn::detached(generation, proto, io.now);
        conn.protocols = listen::listener_protocols(io.runtime, address);
        conn.peer = Some(peer);
        conn.counted_ip = counted;
        let index = self.conns.insert(conn);
        io.runtime
            .metrics
            .worker(io.worker)
            .connections_accepted
            .inc();
        self.deadline(io, index, false);
        Ok(Token::client(index, generation))
    }

    /// Counts a connection from `peer` under its address for `connections_per_ip_max`, noting
    /// the address in `counted` (to uncount at close); false when that address has as many as
    /// it may (the connection is then refused).
    fn count(&self, io: &Io<'_>, peer: Option<SocketAddr>, counted: &mut Option<IpAddr>) -> bool {
        let limits = io.runtime.client_limits;
        let (true, Some(peer)) = (limits.any(), peer) else {
            return true;
        };
        if !self.table.open(peer.ip(), limits.connections_max, io.now) {
            debug!(worker = io.worker, %peer, "connections_per_ip_max reached: refused");
            io.runtime.metrics.worker(io.worker).limit_connections.inc();
            return false;
        }
        *counted = Some(peer.ip());
        true
    }

    /// Takes received bytes into connection `index` (an open one): as they are, or through
    /// TLS; while its PROXY protocol header is incomplete, into the header first. False when
    /// the connection must close: a malformed header, or a client over its limit.
    pub(super) fn receive(&mut self, io: &Io<'_>, index: usize, bytes: &[u8]) -> bool {
        let counters = io.runtime.metrics.worker(io.worker);
        let conn = &mut self.conns[index];
        if conn.proxy_header.is_none() {
            receive(conn, bytes, counters, io.worker, index);
            return true;
        }
        self.proxy_header(io, index, bytes)
    }

    /// Takes `bytes` into connection `index` while its PROXY protocol header is incomplete:
    /// once whole, the client's address replaces the balancer's, the connection is counted
    /// under it, and what followed the header goes on as the connection's first bytes. False
    /// when the connection must close: a malformed header, or a client over its limit.
    fn proxy_header(&mut self, io: &Io<'_>, index: usize, bytes: &[u8]) -> bool {
        use squall_proxy_protocol::{Header, Parsed};
        let conn = &mut self.conns[index];
        let Some(pending) = conn.proxy_header.as_mut() else {
            return true;
        };
        pending.extend_from_slice(bytes);
        let counters = io.runtime.metrics.worker(io.worker);
        let (header, len) = match squall_proxy_protocol::parse(pending) {
            Ok(Parsed::Incomplete) => return true,
            Ok(Parsed::Done { header, len }) => (header, len),
            Err(e) => {
                debug!(worker = io.worker, conn = index, peer = ?conn.peer, "PROXY protocol: {e}");
                counters.proxy_protocol_refused.inc();
                return false;
            }
        };
        let pending = conn.proxy_header.take().unwrap_or_default();
        if let Header::Proxied { source, .. } = header {
            conn.peer = Some(source);
        }
        let (peer, mut counted) = (conn.peer, None);
        if !self.count(io, peer, &mut counted) {
            return false;
        }
        let conn = &mut self.conns[index];
        conn.counted_ip = counted;
        receive(conn, &pending[len..], counters, io.worker, index);
        true
    }

    /// Stops reading connection `index`'s socket (its receive is cancelled) or reads on, as
    /// `pause` says: a tunnel whose origin is full, a request body its exchange cannot take.
    /// A cancel that lands after the pause was lifted arms the receive again (`on_recv`).
    pub(super) fn pause_reads(&mut self, io: &mut Io<'_>, index: usize, pause: bool) {
        let conn = &mut self.conns[index];
        if pause == conn.reads_paused {
            return;
        }
        conn.reads_paused = pause;
        let token = Token::client(index, conn.generation);
        if pause {
            conn.socket.cancel_recv(io.ring, token);
        } else {
            conn.socket.arm_recv(io.ring, token);
        }
    }

    /// Hands what connection `index` has to the ring (one send or writev at a time; TLS
    /// connections' output sealed first), and says what the loop must do when nothing is left.
    pub(super) fn flush_out(&mut self, io: &mut Io<'_>, index: usize) -> After {
        let conn = &mut self.conns[index];
        // A static file's splice writes to the socket until its transfer ends.
        if conn.socket.sending() || conn.phase == Phase::Closed || conn.lent {
            return After::Nothing;
        }
        // The client sends no more: once nothing it asked for is in progress (and decoding
        // stopped for want of bytes, not of room), or what is in progress waits for bytes
        // that will not come, it ends as after `Connection: close`.
        if conn.peer_done
            && !conn.close_after
            && !conn.blocked
            && conn.phase == Phase::Open
            && (conn.proto.is_idle(true) || conn.proto.waits_on_client())
        {
            conn.close_after = true;
        }
        if let Err(e) = seal(conn) {
            debug!(worker = io.worker, conn = index, "tls: {e}");
            return After::Close;
        }
        if !conn.chain.is_empty() {
            let bufs = conn
                .chain
                .take(&mut conn.out, squall_uring::WRITEV_BUFS_MAX);
            let token = Token::client(index, conn.generation);
            conn.in_flight = bufs.iter().map(Bytes::len).sum();
            conn.socket.writev(io.ring, bufs, token);
            return After::Nothing;
        }
        let pending = if conn.tls.is_some() {
            &mut conn.wire
        } else {
            &mut conn.out
        };
        if pending.is_empty() {
            if conn.cut && conn.phase == Phase::Open {
                return After::Close;
            } else if conn.close_after && conn.phase == Phase::Open {
                return After::Linger;
            }
            return After::Nothing;
        }
        let buf = pending.split().freeze();
        self.queue_send(io, index, buf);
        After::Nothing
    }

    fn queue_send(&mut self, io: &mut Io<'_>, index: usize, buf: Bytes) {
        let conn = &mut self.conns[index];
        let token = Token::client(index, conn.generation);
        conn.in_flight = buf.len();
        conn.socket.send(io.ring, buf, token);
    }

    /// A send on connection `index` completed with `result` for `buf`.
    pub(super) fn on_send(
        &mut self,
        io: &mut Io<'_>,
        index: usize,
        result: io::Result<usize>,
        buf: Bytes,
    ) -> SendDone {
        let conn = &mut self.conns[index];
        conn.socket.on_send();
        conn.in_flight = 0;
        match result {
            _ if conn.phase == Phase::Closed => SendDone::Nothing,
            Ok(sent) if sent < buf.len() => {
                // A partial send: the rest goes first, before anything queued since.
                self.queue_send(io, index, buf.slice(sent..));
                SendDone::Nothing
            }
            Ok(_) => SendDone::Sent,
            Err(e) => {
                debug!(worker = io.worker, conn = index, "send: {e}");
                SendDone::Close
            }
        }
    }

    /// A writev on connection `index` completed with `result` for `bufs`.
    pub(super) fn on_writev(
        &mut self,
        io: &Io<'_>,
        index: usize,
        result: io::Result<usize>,
        bufs: Vec<Bytes>,
    ) -> SendDone {
        let conn = &mut self.conns[index];
        conn.socket.on_send();
        conn.in_flight = 0;
        match result {
            _ if conn.phase == Phase::Closed => SendDone::Nothing,
            Ok(sent) => {
                let total: usize = bufs.iter().map(Bytes::len).sum();
                if sent < total {
                    // The rest goes first, before anything queued since.
                    conn.chain.unsent(bufs, sent);
                    SendDone::Flush
                } else {
                    SendDone::Sent
                }
            }
            Err(e) => {
                debug!(worker = io.worker, conn = index, "writev: {e}");
                SendDone::Close
            }
        }
    }

    /// Shuts our write side and reads until the client closes or `LINGER` passes; false when
    /// it cannot (the connection is to close now).
    pub(super) fn linger(&mut self, io: &mut Io<'_>, index: usize) -> bool {
        let conn = &mut self.conns[index];
        if !conn.socket.receiving() || !conn.socket.shutdown_write() {
            return false;
        }
        conn.phase = Phase::Lingering;
        conn.rbuf = bytes::BytesMut::new();
        self.deadline(io, index, false);
        true
    }

    /// Cancels connection `index`'s operations and queues the close of its socket (its
    /// sessions and file transfers are the loop's to end first).
    pub(super) fn close(&mut self, io: &mut Io<'_>, index: usize) {
        let conn = &mut self.conns[index];
        if conn.phase == Phase::Closed {
            return;
        }
        conn.phase = Phase::Closed;
        let token = Token::client(index, conn.generation);
        conn.socket.close(io.ring, token);
        conn.rbuf = bytes::BytesMut::new();
        // Requests parked on the cache go too: a later wake-up finds nothing to resume.
        conn.proto.forget_waiting();
    }

    /// Frees a closed connection's slot once the kernel has reported all its operations;
    /// true when it did (a descriptor is free: paused listeners may resume).
    pub(super) fn op_done_at(&mut self, io: &Io<'_>, index: usize) -> bool {
        let Some(conn) = self.conns.get(index) else {
            return false;
        };
        conn.check_invariants();
        if conn.phase != Phase::Closed || !conn.socket.drained() {
            return false;
        }
        let conn = self.conns.remove(index);
        let metrics = &io.runtime.metrics;
        let buffered = metrics.buffered.of(io.worker);
        buffered.charge(conn.charged, 0, true);
        if conn.responding {
            buffered.set_responding(false);
        }
        if conn.socket.owned_descriptor() {
            metrics.descriptors.closed();
        }
        if let Some(ip) = conn.counted_ip {
            self.table.close(ip);
        }
        true
    }

    /// If open connection `index`'s time to give its buffers back has come (`conn::Shrink`), they
    /// go back if it is still idle: true then, and its deadline must be filed again.
    pub(super) fn shrink_if_due(&mut self, index: usize, now: std::time::Instant) -> bool {
        let conn = &mut self.conns[index];
        if conn.phase != Phase::Open {
            return false;
        }
        let Some((shrink, after)) = conn.shrink.fire(conn.is_idle(), now) else {
            return false;
        };
        if shrink {
            conn.shrink_idle();
        }
        conn.shrink = after;
        true
    }

    /// Recomputes when connection `index` must next be looked at, and files a timer if
    /// needed; `origin_wait`: a request on it waits on its origin with nothing unsent.
    pub(super) fn deadline(&mut self, io: &mut Io<'_>, index: usize, origin_wait: bool) {
        let limits = &io.runtime.limits;
        let conn = &mut self.conns[index];
        let deadline = match conn.phase {
            Phase::Closed => return,
            Phase::Lingering => io.now + LINGER,
            // A new connection has header_timeout from its accept for the TLS handshake and
            // its first head together: trickling either does not extend it.
            Phase::Open if conn.fresh => conn.accepted_at + limits.header_timeout,
            Phase::Open if conn.head_in_progress() => {
                conn.head_started.unwrap_or(conn.last_activity) + limits.header_timeout
            }
            Phase::Open => {
                // The idle limit (Squall's own wait, a password check, does not count), or
                // sooner: HTTP/2's own timers, requests parked behind another's fetch; or
                // the moment an idle connection gives its buffers back.
                let due = (conn.proto).deadline(
                    conn.last_activity,
                    io.now,
                    limits.idle_timeout,
                    origin_wait,
                );
                conn.shrink = conn.shrink.next(conn.is_idle(), io.now);
                conn.shrink.deadline(due)
            }
        };
        conn.deadline = deadline;
        if conn.timer_due.is_none_or(|due| deadline < due) {
            conn.timer_due = Some(deadline);
            let key = Token::client(index, conn.generation).raw();
            io.timers.insert(key, deadline);
        }
    }
}

/// Takes received bytes into the connection: as they are, or through TLS. A TLS failure leaves
/// its alert in `wire` and ends the connection after it is sent.
fn receive(conn: &mut Conn, bytes: &[u8], counters: &WorkerCounters, worker: usize, index: usize) {
    let Some(tls) = &mut conn.tls else {
        conn.rbuf.extend_from_slice(bytes);
        return;
    };
    let handshaking = tls.is_handshaking();
    if let Err(e) = tls.read_tls(bytes, &mut conn.rbuf, &mut conn.wire) {
        debug!(worker, conn = index, kind = e.kind().as_str(), "tls: {e}");
        counters.tls_errors.inc();
        conn.close_after = true;
    } else if handshaking && !tls.is_handshaking() {
        if tls.is_resumed() {
            counters.tls_handshakes_resumed.inc();
        } else {
            counters.tls_handshakes_full.inc();
        }
    }
    if tls.peer_closed() && !conn.peer_done {
        // close_notify: the client sends no more requests.
        conn.peer_finished();
    }
}

/// Encrypts the plaintext responses of a TLS connection into `wire`, with a close_notify after
/// the last one when the connection is to close. A no-op for cleartext connections and while
/// the handshake runs (a response exists only after a request, which follows the handshake).
fn seal(conn: &mut Conn) -> Result<(), squall_tls::TlsError> {
    let Some(tls) = &mut conn.tls else {
        return Ok(());
    };
    if tls.is_handshaking() {
        return Ok(());
    }
    if !conn.out.is_empty() {
        tls.write_plain(&conn.out, &mut conn.wire)?;
        conn.out.clear();
    }
    if conn.close_after && !conn.cut && conn.phase == Phase::Open {
        tls.close(&mut conn.wire);
    }
    Ok(())
}
