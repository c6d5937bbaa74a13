//! Client connections on the ring: receiving (through TLS when configured), sending (one send
//! or writev in flight, partial sends resumed in order), lingering, closing once the kernel has
//! reported every operation, and the connection's deadline (header, idle, linger, HTTP/2 and
//! parked-request timers).

use std::io;
use std::os::fd::OwnedFd;

use bytes::Bytes;
use socket2::SockRef;
use squall_tls::TlsConn;
use squall_uring::RecvBuf;
use tracing::debug;

use super::conn::{Conn, Phase};
use super::downstream::{self, Due};
use super::token::{self, Kind, Token};
use super::{LINGER, Worker, listen, part_io};
use crate::metrics::WorkerCounters;

impl Worker {
    pub(super) fn conn_index(&self, token: Token) -> Option<usize> {
        debug_assert_eq!(token.kind(), token::Kind::Client);
        let index = token.index();
        let conn = self.conns.get(index)?;
        token.names(conn.generation).then_some(index)
    }

    pub(super) fn on_recv(
        &mut self,
        token: Token,
        result: io::Result<Option<RecvBuf>>,
        more: bool,
    ) {
        let Some(index) = self.conn_index(token) else {
            if let Ok(Some(buf)) = result {
                self.ring.recycle(buf);
            }
            return;
        };
        self.conns[index].socket.on_recv(more);
        // A tunnel's client closed its side: the tunnel runs on, the other way.
        if matches!(result, Ok(None)) && self.tunnel_client_eof(index) {
            self.op_done_at(index);
            return;
        }
        let conn = &mut self.conns[index];
        match result {
            Ok(Some(buf)) => {
                if conn.phase == Phase::Open && conn.proxy_header.is_some() {
                    // Copied: only until the balancer's header is whole, once per connection.
                    let bytes = self.ring.recv_bytes(&buf).to_vec();
                    if !self.proxy_header(index, &bytes) {
                        self.ring.recycle(buf);
                        self.close_now(index);
                        self.op_done_at(index);
                        return;
                    }
                } else if conn.phase == Phase::Open {
                    let counters = self.runtime.metrics.worker(self.id);
                    receive(conn, self.ring.recv_bytes(&buf), counters, self.id, index);
                }
                let conn = &mut self.conns[index];
                if conn.phase == Phase::Open {
                    conn.last_activity = self.now;
                }
                self.ring.recycle(buf);
                // A multishot receive ends when the ring runs short of buffers: re-armed
                // unless the connection is closing (or a tunnel's origin is full).
                if !conn.reads_paused {
                    conn.socket.arm_recv(&mut self.ring, token);
                }
                if conn.phase == Phase::Open {
                    self.process(index);
                }
            }
            // End of stream: answer what was received, then close.
            Ok(None) => {
                if conn.phase == Phase::Open {
                    conn.close_after = true;
                    self.process(index);
                } else {
                    self.close_now(index);
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                // Every receive buffer is in use for a moment: ask again.
                conn.socket.arm_recv(&mut self.ring, token);
            }
            // A receive cancelled to pause reading (a tunnel's origin or a request body's
            // exchange full) whose pause was lifted before the cancel landed: read on.
            Err(e) if e.raw_os_error() == Some(libc::ECANCELED) => {
                if !conn.reads_paused && conn.phase == Phase::Open {
                    conn.socket.arm_recv(&mut self.ring, token);
                }
            }
            Err(e) => {
                debug!(worker = self.id, conn = index, "recv: {e}");
                self.close_now(index);
            }
        }
        self.op_done_at(index);
    }

    /// Stops reading connection `index`'s socket (its receive is cancelled) or reads on, as
    /// `pause` says: a tunnel whose origin is full, a request body its exchange cannot take.
    /// A cancel that lands after the pause was lifted arms the receive again (`on_recv`).
    pub(super) fn pause_reads(&mut self, index: usize, pause: bool) {
        let conn = &mut self.conns[index];
        if pause == conn.reads_paused {
            return;
        }
        conn.reads_paused = pause;
        let token = Token::client(index, conn.generation);
        if pause {
            conn.socket.cancel_recv(&mut self.ring, token);
        } else {
            conn.socket.arm_recv(&mut self.ring, token);
        }
    }

    /// Hands what the connection has to the ring (one send or writev at a time), and charges
    /// what it holds to the process's count of buffered response bytes.
    pub(super) fn flush(&mut self, index: usize) {
        self.flush_out(index);
        self.downstream().account(index);
    }

    fn flush_out(&mut self, index: usize) {
        let conn = &mut self.conns[index];
        if conn.socket.sending() || conn.phase == Phase::Closed {
            return;
        }
        if let Err(e) = seal(conn) {
            debug!(worker = self.id, conn = index, "tls: {e}");
            self.close_now(index);
            return;
        }
        if !conn.chain.is_empty() {
            let bufs = conn
                .chain
                .take(&mut conn.out, squall_uring::WRITEV_BUFS_MAX);
            let token = Token::client(index, conn.generation);
            conn.in_flight = bufs.iter().map(Bytes::len).sum();
            conn.socket.writev(&mut self.ring, bufs, token);
            return;
        }
        let pending = if conn.tls.is_some() {
            &mut conn.wire
        } else {
            &mut conn.out
        };
        if pending.is_empty() {
            if conn.cut && conn.phase == Phase::Open {
                self.close_now(index);
            } else if conn.close_after && conn.phase == Phase::Open {
                self.linger(index);
            }
            return;
        }
        let buf = pending.split().freeze();
        self.queue_send(index, buf);
    }

    pub(super) fn queue_send(&mut self, index: usize, buf: Bytes) {
        let conn = &mut self.conns[index];
        let token = Token::client(index, conn.generation);
        conn.in_flight = buf.len();
        conn.socket.send(&mut self.ring, buf, token);
    }

    pub(super) fn on_send(&mut self, token: Token, result: io::Result<usize>, buf: Bytes) {
        let Some(index) = self.conn_index(token) else {
            return;
        };
        let conn = &mut self.conns[index];
        conn.socket.on_send();
        conn.in_flight = 0;
        match result {
            _ if conn.phase == Phase::Closed => {}
            Ok(sent) if sent < buf.len() => {
                // A partial send: the rest goes first, before anything queued since.
                self.queue_send(index, buf.slice(sent..));
            }
            Ok(_) => self.sent(index),
            Err(e) => {
                debug!(worker = self.id, conn = index, "send: {e}");
                self.close_now(index);
            }
        }
        self.op_done_at(index);
    }

    pub(super) fn on_writev(&mut self, token: Token, result: io::Result<usize>, bufs: Vec<Bytes>) {
        let Some(index) = self.conn_index(token) else {
            return;
        };
        let conn = &mut self.conns[index];
        conn.socket.on_send();
        conn.in_flight = 0;
        match result {
            _ if conn.phase == Phase::Closed => {}
            Ok(sent) => {
                let total: usize = bufs.iter().map(Bytes::len).sum();
                if sent < total {
                    // The rest goes first, before anything queued since.
                    conn.chain.unsent(bufs, sent);
                    self.flush(index);
                } else {
                    self.sent(index);
                }
            }
            Err(e) => {
                debug!(worker = self.id, conn = index, "writev: {e}");
                self.close_now(index);
            }
        }
        self.op_done_at(index);
    }

    // ---- closing ----

    /// Shuts our write side and reads until the client closes or `LINGER` passes.
    pub(super) fn linger(&mut self, index: usize) {
        let conn = &mut self.conns[index];
        if !conn.socket.receiving() || !conn.socket.shutdown_write() {
            self.close_now(index);
            return;
        }
        conn.phase = Phase::Lingering;
        conn.rbuf = bytes::BytesMut::new();
        self.update_deadline(index);
    }

    /// Cancels the connection's operations and queues the close of its socket.
    pub(super) fn close_now(&mut self, index: usize) {
        for id in downstream::sessions_of(&self.conns[index]) {
            self.abort_session(id);
        }
        self.with_files(|files, io, down| files.gone_all(io, down, index));
        let conn = &mut self.conns[index];
        if conn.phase == Phase::Closed {
            return;
        }
        conn.phase = Phase::Closed;
        let token = Token::client(index, conn.generation);
        conn.socket.close(&mut self.ring, token);
        conn.rbuf = bytes::BytesMut::new();
        // Requests parked on the cache go too: a later wake-up finds nothing to resume.
        conn.proto.forget_waiting();
    }

    pub(super) fn op_done(&mut self, token: Token) {
        if let Some(index) = self.conn_index(token) {
            self.conns[index].socket.on_close();
            self.op_done_at(index);
        }
    }

    /// Frees a closed connection's slot once the kernel has reported all its operations.
    pub(super) fn op_done_at(&mut self, index: usize) {
        let Some(conn) = self.conns.get(index) else {
            return;
        };
        conn.check_invariants();
        if conn.phase == Phase::Closed && conn.socket.drained() {
            let conn = self.conns.remove(index);
            self.runtime.metrics.buffered.charge(conn.charged, 0, true);
            if conn.responding {
                self.runtime.metrics.buffered.set_responding(false);
            }
            self.runtime.metrics.descriptors.closed();
            if let Some(ip) = conn.counted_ip {
                self.clients.close(ip);
            }
            if self.admission.any_paused() && self.drain_deadline.is_none() {
                self.admission.resume(&mut part_io!(self));
            }
        }
    }

    // ---- timers ----

    /// Recomputes when this connection must next be looked at, and files a timer if needed.
    pub(super) fn update_deadline(&mut self, index: usize) {
        let origin_wait = self.awaits_origin(index);
        let limits = &self.runtime.limits;
        let conn = &mut self.conns[index];
        let deadline = match conn.phase {
            Phase::Closed => return,
            Phase::Lingering => self.now + LINGER,
            // A new connection has header_timeout from its accept for the TLS handshake and
            // its first head together: trickling either does not extend it.
            Phase::Open if conn.fresh => conn.accepted_at + limits.header_timeout,
            Phase::Open if conn.head_in_progress() => {
                conn.head_started.unwrap_or(conn.last_activity) + limits.header_timeout
            }
            Phase::Open => {
                if conn.is_idle() {
                    conn.shrink_idle();
                }
                // The idle limit (Squall's own wait, a password check, does not count), or
                // sooner: HTTP/2's own timers, requests parked behind another's fetch.
                (conn.proto).deadline(
                    conn.last_activity,
                    self.now,
                    limits.idle_timeout,
                    origin_wait,
                )
            }
        };
        conn.deadline = deadline;
        if conn.timer_due.is_none_or(|due| deadline < due) {
            conn.timer_due = Some(deadline);
            self.timers
                .insert(Token::client(index, conn.generation).raw(), deadline);
        }
    }

    /// A request on connection `index` waits on its origin, and the connection has nothing
    /// unsent for its client (a client that stops reading is idle, whatever it waits for).
    fn awaits_origin(&self, index: usize) -> bool {
        let conn = &self.conns[index];
        conn.unsent_bytes() == 0
            && !conn.socket.sending()
            && downstream::awaits_origin(conn, &self.sessions)
    }

    pub(super) fn expire_timers(&mut self) {
        let mut fired = std::mem::take(&mut self.fired);
        self.timers.expire(self.now, &mut fired);
        for entry in fired.drain(..) {
            let token = Token::from_raw(entry.key);
            if token.kind() == Kind::Origin {
                self.with_origins(|o, io| o.on_origin_timer(io, token, entry.due));
                continue;
            }
            if token.kind() == Kind::Session {
                let due = self.with_sessions(|s, cx| s.on_timer(cx, token, entry.due));
                if let Some(id) = due {
                    let now = self.now;
                    self.feed(id, |ex| ex.on_timer(now));
                }
                continue;
            }
            let Some(index) = self.conn_index(token) else {
                continue;
            };
            let conn = &mut self.conns[index];
            if conn.timer_due == Some(entry.due) {
                conn.timer_due = None;
            }
            if conn.phase == Phase::Closed {
                continue;
            }
            if conn.deadline <= self.now {
                self.on_deadline(index);
            } else if conn.timer_due.is_none() {
                conn.timer_due = Some(conn.deadline);
                self.timers.insert(entry.key, conn.deadline);
            }
        }
        self.fired = fired;
    }

    pub(super) fn on_deadline(&mut self, index: usize) {
        if self.conns[index].phase == Phase::Open {
            self.unpark_expired(index);
        }
        let origin_wait = self.awaits_origin(index);
        let conn = &mut self.conns[index];
        let metrics = self.runtime.metrics.worker(self.id);
        let active = conn.last_activity + self.runtime.limits.idle_timeout > self.now;
        let due = match conn.phase {
            Phase::Open => conn.proto.at_deadline(self.now, active, origin_wait),
            Phase::Lingering | Phase::Closed => Due::Idle,
        };
        match due {
            Due::Cut => self.close_now(index),
            Due::Later => self.update_deadline(index),
            Due::H2Timers { again } => {
                self.h2_timers(index);
                if again {
                    self.update_deadline(index);
                }
            }
            Due::Idle
                if conn.phase == Phase::Open
                    && !conn.socket.sending()
                    && conn.head_in_progress() =>
            {
                // Slowloris: part of a head arrived, the rest did not come in time.
                debug!(worker = self.id, conn = index, "request header timeout");
                self.downstream().head_timeout(index);
                self.flush(index);
                self.update_deadline(index);
            }
            Due::GoAway => {
                // RFC 9113 §9.1: an idle HTTP/2 connection is ended with GOAWAY(NO_ERROR) and
                // the last stream processed, not a bare close, so the client knows which of
                // its requests were not seen and may send them again. The connection closes
                // once the GOAWAY has left (then lingers), or after the grace.
                metrics.timeouts.inc();
                self.go_away_h2(index, true);
            }
            Due::Idle => {
                // Idle keep-alive, a client that stopped reading, or the end of a linger.
                metrics.timeouts.inc();
                self.close_now(index);
            }
        }
    }

    /// Sets up a connection accepted on listener `listener` and starts reading it.
    pub(super) fn open_conn(&mut self, fd: OwnedFd, listener: usize) {
        // Small responses go out at once: Nagle would hold a pipelined batch's tail for an ACK.
        if let Err(e) = SockRef::from(&fd).set_tcp_nodelay(true) {
            debug!(worker = self.id, "TCP_NODELAY: {e}");
        }
        // The kernel keeps only a little unsent data queued, so the next frame to go out is
        // the one the HTTP/2 scheduler picks now, not one queued behind a large response.
        let lowat = self.runtime.limits.tcp_notsent_lowat;
        if lowat > 0
            && let Err(e) = squall_uring::set_tcp_notsent_lowat(&fd, lowat)
        {
            debug!(worker = self.id, "TCP_NOTSENT_LOWAT: {e}");
        }
        // 30 bits: the top two bits of a token say what it belongs to.
        self.next_generation = token::next_generation(self.next_generation);
        let generation = self.next_generation;
        let address = self.admission.address(listener);
        let acceptor = self.runtime.tls.acceptor(address);
        let tls = acceptor.map(|acceptor| Box::new(TlsConn::new(acceptor)));
        let mut conn = Conn::new(fd, generation, tls, self.now);
        conn.protocols = listen::listener_protocols(&self.runtime, address);
        let limits = self.runtime.client_limits;
        let runtime = &self.runtime;
        let access = runtime.access_rules;
        let balancers = listen::proxy_protocol_from(runtime, address);
        let needs_peer =
            !runtime.upstreams.is_empty() || access || runtime.needs_client || balancers.is_some();
        if self.log.access.is_some() || limits.any() || needs_peer {
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
                debug!(worker = self.id, peer = ?conn.peer, "PROXY protocol: not a trusted balancer");
                self.runtime
                    .metrics
                    .worker(self.id)
                    .proxy_protocol_refused
                    .inc();
                return; // dropping `conn` closes the socket
            }
            conn.proxy_header = Some(Vec::new());
        } else if !self.count_client(conn.peer, &mut conn.counted_ip) {
            return; // dropping `conn` closes the socket
        }
        let index = self.conns.insert(conn);
        // Counted from the slot's insertion to its removal (`op_done_at`), however it closes.
        self.runtime.metrics.descriptors.opened();
        let token = Token::client(index, generation);
        let conn = &mut self.conns[index];
        conn.socket.arm_recv(&mut self.ring, token);
        self.runtime
            .metrics
            .worker(self.id)
            .connections_accepted
            .inc();
        self.update_deadline(index);
    }

    /// Counts a connection from `peer` under its address for `connections_per_ip_max`, noting
    /// the address in `counted` (to uncount at close); false when that address has as many as
    /// it may (the connection is then refused).
    pub(super) fn count_client(
        &self,
        peer: Option<std::net::SocketAddr>,
        counted: &mut Option<std::net::IpAddr>,
    ) -> bool {
        let limits = self.runtime.client_limits;
        let (true, Some(peer)) = (limits.any(), peer) else {
            return true;
        };
        if !self
            .clients
            .open(peer.ip(), limits.connections_max, self.now)
        {
            debug!(worker = self.id, %peer, "connections_per_ip_max reached: refused");
            self.runtime.metrics.worker(self.id).limit_connections.inc();
            return false;
        }
        *counted = Some(peer.ip());
        true
    }
}

impl Worker {
    /// Takes `bytes` into connection `index` while its PROXY protocol header is incomplete:
    /// once whole, the client's address replaces the balancer's, the connection is counted
    /// under it, and what followed the header goes on as the connection's first bytes. False
    /// when the connection must close: a malformed header, or a client over its limit.
    fn proxy_header(&mut self, index: usize, bytes: &[u8]) -> bool {
        use squall_proxy_protocol::{Header, Parsed};
        let conn = &mut self.conns[index];
        let Some(pending) = conn.proxy_header.as_mut() else {
            return true;
        };
        pending.extend_from_slice(bytes);
        let counters = self.runtime.metrics.worker(self.id);
        let (header, len) = match squall_proxy_protocol::parse(pending) {
            Ok(Parsed::Incomplete) => return true,
            Ok(Parsed::Done { header, len }) => (header, len),
            Err(e) => {
                debug!(worker = self.id, conn = index, peer = ?conn.peer, "PROXY protocol: {e}");
                counters.proxy_protocol_refused.inc();
                return false;
            }
        };
        let pending = conn.proxy_header.take().unwrap_or_default();
        if let Header::Proxied { source, .. } = header {
            conn.peer = Some(source);
        }
        let (peer, mut counted) = (conn.peer, None);
        if !self.count_client(peer, &mut counted) {
            return false;
        }
        let conn = &mut self.conns[index];
        conn.counted_ip = counted;
        receive(conn, &pending[len..], counters, self.id, index);
        true
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
    if !conn.close_after && tls.peer_closed() {
        // close_notify: the client sends no more requests; answer those received, then close.
        conn.close_after = true;
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
