//! A worker: one pinned thread, one io_uring, its own listeners, connections and timers.
//!
//! The loop is run-to-completion, like nginx's event loop: submit, wait for completions, and for
//! each one do all the work it enables (decode, route, encode, queue the send) before the next.
//! Nothing blocks and nothing is shared with other workers on this path but the read-only
//! [`Runtime`].

mod cache;
mod conn;
mod entry;
mod forward;
mod h2;
mod probe;
mod proxy;
mod token;

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use crossbeam_channel::{Receiver, Sender};
use slab::Slab;
use socket2::SockRef;
use squall_h1::{Event, RequestDecoder};
use squall_tls::TlsConn;
use squall_uring::{Completion, OpId, RecvBuf, Ring, RingConfig, Waker};
use tracing::{debug, info, warn};

use crate::access_log;
use crate::clients::ClientTable;
use crate::date::DateCache;
use crate::metrics::WorkerCounters;
use crate::server::{Control, Runtime};
use crate::timer::{Entry, TimerWheel};
use conn::{Conn, Phase};
use entry::Admission;
pub use h2::Protocols;
pub use proxy::ClientToken;
use token::{Kind, Token};

/// Output buffered for one connection beyond which decoding pauses until a send completes: a
/// client pipelining thousands of requests without reading cannot grow our memory.
const OUT_HIGH_BYTES: usize = 256 * 1024;
/// Unsent input beyond which a connection that is not being decoded (blocked on output) is cut.
const RBUF_BLOCKED_MAX_BYTES: usize = 1024 * 1024;
/// How long a closing connection reads and discards before the socket is closed.
const LINGER: Duration = Duration::from_secs(2);
/// How long accepting stays paused after running out of descriptors before it is retried.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);
/// Least time between two warnings about running out of descriptors.
const PAUSE_LOG_INTERVAL: Duration = Duration::from_secs(60);
/// Connections per worker: far below what a token can address.
const CONNS_MAX: usize = 1 << 24;

const _: () = assert!(OUT_HIGH_BYTES < RBUF_BLOCKED_MAX_BYTES);
const _: () = assert!(CONNS_MAX <= token::INDEX_MAX);

/// What a worker is started with.
pub struct Setup {
    pub id: usize,
    pub core: Option<core_affinity::CoreId>,
    /// Listening sockets with the address each was configured as (`127.0.0.1:0` stays so).
    pub listeners: Vec<(SocketAddr, OwnedFd)>,
    pub runtime: Arc<Runtime>,
    pub control: Receiver<Control>,
    pub waker: Waker,
    /// Reports set-up success or the reason for failure to the main thread.
    pub ready: Sender<Result<(), String>>,
    /// The access log's logger thread, when `[log] access` is set.
    pub access_log: Option<Sender<access_log::Message>>,
    /// Per-client-address counts, shared by every worker.
    pub clients: Arc<ClientTable>,
    /// Every worker's control channel and waker, to wake requests parked on the cache.
    pub peers: Arc<[crate::cache::Peer]>,
}

struct Listener {
    /// The `[[listen]]` address this socket serves, as configured.
    address: SocketAddr,
    fd: Option<OwnedFd>,
    accept: Option<OpId>,
    /// Set while accepting is paused for lack of descriptors.
    paused_since: Option<Instant>,
}

struct Worker {
    id: usize,
    ring: Ring,
    runtime: Arc<Runtime>,
    conns: Slab<Conn>,
    listeners: Vec<Listener>,
    timers: TimerWheel,
    fired: Vec<Entry>,
    date: DateCache,
    control: Receiver<Control>,
    waker: Waker,
    now: Instant,
    next_generation: u32,
    /// Set by a graceful stop: the time by which every connection must be gone.
    drain_deadline: Option<Instant>,
    accept_retry_at: Option<Instant>,
    /// When running out of descriptors was last logged.
    pause_logged_at: Option<Instant>,
    /// This worker's batch of access log lines, when the access log is on.
    log: RequestLog,
    clients: Arc<ClientTable>,
    peers: Arc<[crate::cache::Peer]>,
    /// The Date field HPACK-encoded for HTTP/2 responses, re-encoded when the second changes.
    h2_date: h2::EncodedDate,
    /// Reused to assemble a cache hit's response head, so that a hit allocates nothing.
    scratch: bytes::BytesMut,
    /// When this worker next publishes its upstream servers' state for `/metrics`.
    upstream_gauges_due: Instant,
    /// Debug builds only: when worker 0 should freeze, and for how long (see `test_stall`).
    stall: Option<(Instant, Duration)>,
    /// Connections to origin servers, busy or pooled.
    origins: Slab<proxy::Origin>,
    /// This worker's balancing, health and pool state per upstream group.
    upstreams: proxy::Upstreams,
    /// Client connections with work to do that an event found while handling another (a
    /// failed exchange lets the next pipelined request go on): processed at the end of the
    /// loop's turn, never re-entrantly, so a thousand pipelined failures cost no stack.
    ready: std::collections::VecDeque<Token>,
}

/// Runs a worker until it has drained after a stop.
pub fn run(setup: Setup) {
    if let Some(core) = setup.core {
        core_affinity::set_for_current(core);
    }
    let ring = match Ring::new(&RingConfig {
        sq_entries: 4096,
        recv_buffers: 1024,
        recv_buffer_bytes: 16 * 1024,
    }) {
        Ok(ring) => ring,
        Err(e) => {
            let _ = setup.ready.send(Err(ring_error(&e)));
            return;
        }
    };
    debug!(worker = setup.id, flavor = ?ring.flavor(), "ring ready");
    let now = Instant::now();
    let routes = setup.runtime.routes.clone();
    let mut worker = Worker {
        id: setup.id,
        ring,
        runtime: setup.runtime,
        conns: Slab::with_capacity(1024),
        listeners: Vec::new(),
        timers: TimerWheel::new(now),
        fired: Vec::new(),
        date: DateCache::new(),
        control: setup.control,
        waker: setup.waker,
        now,
        next_generation: 0,
        drain_deadline: None,
        accept_retry_at: None,
        pause_logged_at: None,
        log: RequestLog {
            access: setup.access_log.map(|tx| access_log::Batch::new(tx, now)),
            routes,
            worker: setup.id,
        },
        clients: setup.clients,
        peers: setup.peers,
        stall: test_stall(setup.id),
        h2_date: h2::EncodedDate::default(),
        upstream_gauges_due: Instant::now(),
        scratch: bytes::BytesMut::new(),
        origins: Slab::new(),
        upstreams: proxy::Upstreams {
            groups: Vec::new(),
            generation: 0,
        },
        ready: std::collections::VecDeque::new(),
    };
    worker.rebuild_upstreams();
    worker.start(setup.listeners);
    let _ = setup.ready.send(Ok(()));
    if let Err(e) = worker.event_loop() {
        warn!(worker = worker.id, "event loop failed: {e}");
    }
    if let Some(log) = &mut worker.log.access {
        log.flush(worker.runtime.metrics.worker(worker.id));
    }
    debug!(worker = worker.id, "stopped");
}

fn ring_error(e: &io::Error) -> String {
    if squall_uring::is_unavailable(e) {
        format!(
            "io_uring is unavailable on this host ({e}): Squall needs Linux 6.1 or later with \
             io_uring enabled (sysctl kernel.io_uring_disabled=0, and no seccomp filter denying it)"
        )
    } else {
        format!("cannot set up io_uring: {e}")
    }
}

impl Worker {
    fn start(&mut self, listeners: Vec<(SocketAddr, OwnedFd)>) {
        self.ring.poll_waker(&self.waker, Token::waker().raw());
        self.add_listeners(listeners);
    }

    /// Builds this worker's upstream state from the runtime's groups. On a reload the old
    /// pooled connections close (their group may be gone); busy ones finish their exchange
    /// and then close instead of going back to a pool.
    fn rebuild_upstreams(&mut self) {
        let seed = self.id as u64;
        let groups: Result<Vec<_>, _> = self
            .runtime
            .upstreams
            .iter()
            .map(|spec| squall_upstream::Upstream::new(spec, self.now, seed))
            .collect();
        // Validation makes an error here unreachable; if it happens, proxy routes answer 502.
        self.upstreams.groups = groups.unwrap_or_else(|e| {
            warn!(
                worker = self.id,
                "upstreams: {e}; proxy routes will answer 502"
            );
            Vec::new()
        });
        self.upstreams.generation += 1;
        let idle: Vec<usize> = self
            .origins
            .iter()
            .filter(|(_, o)| o.state == proxy::OriginState::Idle)
            .map(|(i, _)| i)
            .collect();
        for index in idle {
            self.close_origin(index);
        }
    }

    /// Starts accepting on new listening sockets (at start-up and from a reload).
    fn add_listeners(&mut self, listeners: Vec<(SocketAddr, OwnedFd)>) {
        for (address, fd) in listeners {
            self.listeners.push(Listener {
                address,
                fd: Some(fd),
                accept: None,
                paused_since: None,
            });
            self.arm_accept(self.listeners.len() - 1);
        }
    }

    /// Stops accepting on the listeners configured as `address` and closes their sockets;
    /// connections they accepted go on. The entries stay, so accept tokens keep their index.
    fn remove_listener(&mut self, address: SocketAddr) {
        /// Connections taken from a closing listener's queue at most (a bound on the loop).
        const QUEUED_TAKEN_MAX: usize = 4096;
        for index in 0..self.listeners.len() {
            let listener = &mut self.listeners[index];
            if listener.address != address {
                continue;
            }
            if let Some(op) = listener.accept.take() {
                self.ring.cancel(op, Token::listener(0).raw());
            }
            listener.paused_since = None;
            let Some(fd) = listener.fd.take() else {
                continue;
            };
            // Closing a listening socket resets the connections the kernel completed but no
            // accept took yet: take them first, without blocking, and serve them.
            let mut queued = Vec::new();
            let socket = SockRef::from(&fd);
            if socket.set_nonblocking(true).is_ok() {
                while queued.len() < QUEUED_TAKEN_MAX {
                    match socket.accept() {
                        Ok((conn, _)) => queued.push(OwnedFd::from(conn)),
                        Err(_) => break,
                    }
                }
            }
            self.ring.close(fd, Token::listener(0).raw());
            for conn in queued {
                if self.drain_deadline.is_none() && self.conns.len() < CONNS_MAX {
                    self.open_conn(conn, index);
                }
            }
        }
    }

    fn event_loop(&mut self) -> io::Result<()> {
        loop {
            if self.drain_finished() {
                return Ok(());
            }
            self.ring.submit_and_wait(self.wait_timeout())?;
            self.now = Instant::now();
            self.date.update(SystemTime::now());
            while let Some(completion) = self.ring.next_completion() {
                self.on_completion(completion);
            }
            self.expire_timers();
            self.retry_accept();
            self.expire_pools();
            self.start_due_probes();
            self.publish_upstream_state();
            self.run_ready();
            if let Some((at, length)) = self.stall
                && self.now >= at
            {
                // The test hook: a stuck worker, as a bug or a blocking call would make one.
                self.stall = None;
                std::thread::sleep(length);
            }
            let counters = self.runtime.metrics.worker(self.id);
            counters.beat();
            counters.connections_active.store(
                self.conns.len() as u64,
                std::sync::atomic::Ordering::Relaxed,
            );
            if let Some(log) = &mut self.log.access {
                log.tick(self.now, counters);
            }
        }
    }

    fn wait_timeout(&self) -> Option<Duration> {
        let mut timeout = self.timers.timeout(self.now);
        for at in [
            self.accept_retry_at,
            self.drain_deadline,
            self.next_probe_at(),
        ]
        .into_iter()
        .flatten()
        {
            let d = at
                .saturating_duration_since(self.now)
                .max(Duration::from_millis(1));
            timeout = Some(timeout.map_or(d, |t| t.min(d)));
        }
        // The Date header must tick even on an idle worker with no timers.
        Some(
            timeout
                .unwrap_or(Duration::from_secs(1))
                .min(Duration::from_secs(1)),
        )
    }

    fn on_completion(&mut self, completion: Completion) {
        match completion {
            Completion::Accept {
                token,
                result,
                more,
            } => self.on_accept(Token::from_raw(token), result, more),
            Completion::Recv {
                token,
                result,
                more,
            } => match Token::from_raw(token) {
                t if t.kind() == Kind::Origin => self.on_origin_recv(t, result, more),
                t => self.on_recv(t, result, more),
            },
            Completion::Send { token, result, buf } => match Token::from_raw(token) {
                t if t.kind() == Kind::Origin => self.on_origin_send(t, result, buf),
                t => self.on_send(t, result, buf),
            },
            Completion::Connect { token, result } => {
                self.on_origin_connect(Token::from_raw(token), result);
            }
            Completion::Close { token, .. } => match Token::from_raw(token) {
                t if t.kind() == Kind::Client => self.op_done(t),
                t if t.kind() == Kind::Origin => self.on_origin_close(t),
                _ => {}
            },
            Completion::Wake { more, .. } => {
                if !more {
                    self.ring.poll_waker(&self.waker, Token::waker().raw());
                }
                self.on_control();
            }
            // Only client connections use writev (origins get one send of the request).
            Completion::Writev {
                token,
                result,
                bufs,
            } => match Token::from_raw(token) {
                t if t.kind() == Kind::Client => self.on_writev(t, result, bufs),
                _ => {}
            },
            Completion::Cancel { .. } => {}
        }
    }

    // ---- accepting ----

    fn arm_accept(&mut self, index: usize) {
        let listener = &mut self.listeners[index];
        if let (Some(fd), None) = (&listener.fd, listener.accept) {
            let token = Token::listener(index).raw();
            listener.accept = Some(self.ring.accept_multi(fd.as_raw_fd(), token));
        }
    }

    fn on_accept(&mut self, token: Token, result: io::Result<OwnedFd>, more: bool) {
        let index = token.index();
        if !more {
            self.listeners[index].accept = None;
        }
        match result {
            Ok(fd) if self.drain_deadline.is_none() && self.conns.len() < CONNS_MAX => {
                self.listeners[index].paused_since = None;
                self.open_conn(fd, index);
            }
            Ok(fd) => drop(fd),
            Err(e) if is_out_of_descriptors(&e) => {
                let listener = &mut self.listeners[index];
                if listener.paused_since.is_none() {
                    self.runtime.metrics.worker(self.id).accept_pauses.inc();
                    listener.paused_since = Some(self.now);
                }
                // At the limit, accepting flaps between paused and running as connections come
                // and go: one warning per minute says it all.
                if self
                    .pause_logged_at
                    .is_none_or(|at| self.now >= at + PAUSE_LOG_INTERVAL)
                {
                    warn!(
                        worker = self.id,
                        "accept paused: {e}; resuming when descriptors free up"
                    );
                    self.pause_logged_at = Some(self.now);
                }
                self.accept_retry_at = Some(self.now + ACCEPT_RETRY);
                return;
            }
            Err(e) if e.raw_os_error() == Some(libc::ECANCELED) => return,
            Err(e) => debug!(worker = self.id, "accept: {e}"),
        }
        if !more && self.drain_deadline.is_none() {
            self.arm_accept(index);
        }
    }

    fn retry_accept(&mut self) {
        if self.accept_retry_at.is_some_and(|at| at <= self.now) {
            self.accept_retry_at = None;
            self.resume_accepting();
        }
    }

    fn resume_accepting(&mut self) {
        if self.drain_deadline.is_some() {
            return;
        }
        for index in 0..self.listeners.len() {
            if self.listeners[index].paused_since.is_some()
                && self.listeners[index].accept.is_none()
            {
                self.arm_accept(index);
            }
        }
    }

    fn open_conn(&mut self, fd: OwnedFd, listener: usize) {
        // Small responses go out at once: Nagle would hold a pipelined batch's tail for an ACK.
        if let Err(e) = SockRef::from(&fd).set_tcp_nodelay(true) {
            debug!(worker = self.id, "TCP_NODELAY: {e}");
        }
        // 30 bits: the top two bits of a token say what it belongs to.
        self.next_generation = token::next_generation(self.next_generation);
        let generation = self.next_generation;
        let decoder = RequestDecoder::new(self.runtime.h1_limits);
        let acceptor = self.runtime.tls.acceptor(self.listeners[listener].address);
        let tls = acceptor.map(|acceptor| Box::new(TlsConn::new(acceptor)));
        let raw = fd.as_raw_fd();
        let mut conn = Conn::new(fd, generation, decoder, tls, self.now);
        conn.protocols = self.listener_protocols(listener);
        let limits = self.runtime.client_limits;
        if self.log.access.is_some() || limits.any() || !self.runtime.upstreams.is_empty() {
            // One getpeername per connection, paid only when a log, a limit or the
            // X-Forwarded-For of a proxied request needs it.
            let fd = conn.fd.as_ref().expect("a new connection has its socket");
            conn.peer = SockRef::from(fd)
                .peer_addr()
                .ok()
                .and_then(|a| a.as_socket());
        }
        if let (true, Some(peer)) = (limits.any(), conn.peer) {
            if !self
                .clients
                .open(peer.ip(), limits.connections_max, self.now)
            {
                debug!(worker = self.id, %peer, "connections_per_ip_max reached: refused");
                self.runtime.metrics.worker(self.id).limit_connections.inc();
                return; // dropping `conn` closes the socket
            }
            conn.counted_ip = Some(peer.ip());
        }
        let index = self.conns.insert(conn);
        let token = Token::client(index, generation);
        let conn = &mut self.conns[index];
        conn.recv = Some(self.ring.recv_multi(raw, token.raw()));
        conn.ops += 1;
        self.runtime
            .metrics
            .worker(self.id)
            .connections_accepted
            .inc();
        self.update_deadline(index);
    }

    // ---- receiving and decoding ----

    fn conn_index(&self, token: Token) -> Option<usize> {
        debug_assert_eq!(token.kind(), token::Kind::Client);
        let index = token.index();
        let conn = self.conns.get(index)?;
        token.names(conn.generation).then_some(index)
    }

    fn on_recv(&mut self, token: Token, result: io::Result<Option<RecvBuf>>, more: bool) {
        let Some(index) = self.conn_index(token) else {
            if let Ok(Some(buf)) = result {
                self.ring.recycle(buf);
            }
            return;
        };
        let conn = &mut self.conns[index];
        if !more {
            conn.recv = None;
            conn.ops -= 1;
        }
        match result {
            Ok(Some(buf)) => {
                if conn.phase == Phase::Open {
                    let counters = self.runtime.metrics.worker(self.id);
                    receive(conn, self.ring.recv_bytes(&buf), counters, self.id, index);
                    conn.last_activity = self.now;
                }
                self.ring.recycle(buf);
                if !more && conn.phase != Phase::Closed {
                    let raw = conn.raw_fd().expect("open connections have a socket");
                    conn.recv = Some(self.ring.recv_multi(raw, token.raw()));
                    conn.ops += 1;
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
                if conn.phase != Phase::Closed {
                    let raw = conn.raw_fd().expect("open connections have a socket");
                    conn.recv = Some(self.ring.recv_multi(raw, token.raw()));
                    conn.ops += 1;
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::ECANCELED) => {}
            Err(e) => {
                debug!(worker = self.id, conn = index, "recv: {e}");
                self.close_now(index);
            }
        }
        self.op_done_at(index);
    }

    /// The protocols listener `listener` serves (HTTP/1.1 for one no longer configured).
    fn listener_protocols(&self, listener: usize) -> Protocols {
        let address = self.listeners[listener].address;
        self.runtime
            .protocols
            .iter()
            .find(|(a, _)| *a == address)
            .map_or(
                Protocols {
                    http1: true,
                    ..Protocols::default()
                },
                |(_, p)| *p,
            )
    }

    /// Queues connection `index` to be processed at the end of this turn (see `ready`).
    pub(super) fn schedule(&mut self, index: usize) {
        let token = Token::client(index, self.conns[index].generation);
        self.ready.push_back(token);
    }

    /// Processes the connections queued by `schedule`, including those queued meanwhile.
    fn run_ready(&mut self) {
        while let Some(token) = self.ready.pop_front() {
            if let Some(index) = self.conn_index(token) {
                self.process(index);
            }
        }
    }

    /// Lets a client go on after its exchange or cached request ended or made room: an
    /// HTTP/1.x connection reads its next request (queued, not re-entrantly), an HTTP/2
    /// connection sends what its streams have.
    pub(super) fn resume_client(&mut self, client: proxy::Client) {
        if client.stream == 0 {
            self.schedule(client.index);
        } else {
            self.pump_h2(client.index);
        }
    }

    /// Answers what the connection received, in the protocol it speaks.
    fn process(&mut self, index: usize) {
        if self.conns[index].h2.is_some() {
            self.process_h2(index);
            return;
        }
        if !self.conns[index].selected {
            match h2::select(&self.conns[index]) {
                h2::Selection::Undecided => {
                    // The TLS handshake's records, or nothing yet.
                    self.flush(index);
                    self.update_deadline(index);
                    return;
                }
                h2::Selection::H2 => {
                    self.conns[index].selected = true;
                    self.start_h2(index);
                    self.process_h2(index);
                    return;
                }
                h2::Selection::Http1 => self.conns[index].selected = true,
                h2::Selection::Refused => {
                    debug!(worker = self.id, conn = index, "protocol not served here");
                    self.runtime.metrics.worker(self.id).bad_requests.inc();
                    self.close_now(index);
                    return;
                }
            }
        }
        self.process_h1(index);
    }

    /// Decodes and answers every complete HTTP/1.x request in the receive buffer, in order.
    fn process_h1(&mut self, index: usize) {
        // A request for the cache stops the decoding loop (the cache needs the whole worker);
        // when the cache answered it, decoding goes on with the next pipelined request.
        while let Some((head, route)) = self.decode_h1(index) {
            let begun = self.begin_cached(proxy::Client::h1(index), head, route);
            if begun != cache::Begun::Answered {
                break;
            }
        }
        let conn = &mut self.conns[index];
        if conn.phase != Phase::Open {
            return;
        }
        if conn.blocked && conn.rbuf.len() > RBUF_BLOCKED_MAX_BYTES {
            debug!(
                worker = self.id,
                conn = index,
                "client sends without reading: closing"
            );
            self.close_now(index);
            return;
        }
        self.flush(index);
        self.update_deadline(index);
    }

    /// The decoding loop of `process_h1`: answers `respond` routes and starts exchanges, and
    /// returns a complete request for a cached route, to be begun by the caller.
    fn decode_h1(
        &mut self,
        index: usize,
    ) -> Option<(squall_h1::RequestHead, Arc<squall_proxy::ProxyRoute>)> {
        let runtime = &self.runtime;
        let counters = runtime.metrics.worker(self.id);
        let date = self.date.get();
        let draining = self.drain_deadline.is_some();
        let mut start_exchange = false;
        loop {
            let conn = &mut self.conns[index];
            if conn.close_after || conn.phase != Phase::Open {
                break;
            }
            // A proxied request is answered before the next pipelined one is read.
            if conn.exchange.as_ref().is_some_and(|e| e.request_complete) || conn.parked.is_some() {
                break;
            }
            if conn.unsent_bytes() >= OUT_HIGH_BYTES {
                conn.blocked = true;
                break;
            }
            if conn.head_started.is_none() && conn.request.is_none() && !conn.rbuf.is_empty() {
                conn.head_started = Some(self.now);
                conn.fresh = false;
            }
            match conn.decoder.decode(&mut conn.rbuf) {
                Ok(Some(Event::Head(head))) => {
                    conn.request_started = conn.head_started.take().unwrap_or(self.now);
                    let bodiless = head.body == squall_h1::BodyKind::Empty;
                    let admission = self.admit(index, &head, bodiless);
                    let conn = &mut self.conns[index];
                    if head.expect_continue && !matches!(admission, Admission::OverRate) {
                        squall_h1::encode_continue(&mut conn.out);
                    }
                    match admission {
                        Admission::OverRate => {
                            let status = http::StatusCode::TOO_MANY_REQUESTS;
                            counters.count_response(status);
                            let before = conn.out.len();
                            squall_h1::encode_error(status, date, &mut conn.out);
                            let sent = conn.out.len() - before;
                            log_request(
                                &mut self.log,
                                conn,
                                Some(&head),
                                status,
                                sent,
                                self.now,
                                counters,
                            );
                            conn.close_after = true;
                        }
                        // To the cache at the request's end (the next event).
                        Admission::Cached(route) => {
                            conn.cached_route = Some(route);
                            conn.request = Some(head);
                        }
                        Admission::Forward { route, invalidate } => {
                            let mut exchange =
                                Box::new(proxy::Exchange::new(head, route, self.now));
                            exchange.invalidate = invalidate;
                            conn.exchange = Some(exchange);
                            start_exchange = true;
                        }
                        Admission::Answer { route } => {
                            conn.answer_route = route;
                            conn.request = Some(head);
                        }
                    }
                }
                // A proxied request's body goes to its origin, framed as it came; `respond`
                // routes do not read bodies, so the bytes are dropped as they arrive.
                Ok(Some(Event::Data(data))) => {
                    if let Some(exchange) = conn.exchange.as_mut() {
                        if exchange.head.body == squall_h1::BodyKind::Chunked {
                            squall_h1::encode_chunk(&data, &mut exchange.body);
                        } else {
                            exchange.body.extend_from_slice(&data);
                        }
                        if exchange.body.len() >= OUT_HIGH_BYTES {
                            conn.blocked = true;
                            break;
                        }
                    }
                }
                Ok(Some(Event::End { .. })) if conn.exchange.is_some() => {
                    let exchange = conn.exchange.as_mut().expect("checked by the guard");
                    if exchange.head.body == squall_h1::BodyKind::Chunked {
                        squall_h1::encode_last_chunk(None, &mut exchange.body);
                    }
                    exchange.request_complete = true;
                }
                Ok(Some(Event::End { .. })) => {
                    let head = conn
                        .request
                        .take()
                        .expect("the codec ends only a started request");
                    if let Some(route) = conn.cached_route.take() {
                        return Some((head, route));
                    }
                    let before = conn.out.len();
                    let outcome = runtime.service.respond_routed(
                        conn.answer_route.take(),
                        &head,
                        scheme(conn),
                        date,
                        draining,
                        &mut conn.out,
                    );
                    counters.count_response(outcome.status);
                    conn.log_note.route = outcome.route;
                    let sent = conn.out.len() - before;
                    log_request(
                        &mut self.log,
                        conn,
                        Some(&head),
                        outcome.status,
                        sent,
                        self.now,
                        counters,
                    );
                    if !outcome.keep_alive {
                        conn.close_after = true;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    let status = e.status();
                    debug!(
                        worker = self.id,
                        conn = index,
                        status = status.as_u16(),
                        "bad request: {e}"
                    );
                    counters.count_bad_request(status);
                    let before = conn.out.len();
                    squall_h1::encode_error(status, date, &mut conn.out);
                    conn.close_after = true;
                    let sent = conn.out.len() - before;
                    let head = conn.request.take();
                    log_request(
                        &mut self.log,
                        conn,
                        head.as_ref(),
                        status,
                        sent,
                        self.now,
                        counters,
                    );
                }
            }
        }
        let has_exchange = self.conns[index].exchange.is_some();
        if start_exchange {
            self.assign_origin(proxy::Client::h1(index));
        } else if has_exchange {
            self.pump_body(proxy::Client::h1(index));
        }
        None
    }

    /// Answers with a short text response generated here (PURGE results, 403, 502, 504), as
    /// the request's framing allows (keep-alive, no body for HEAD).
    pub(super) fn answer_status(
        &mut self,
        client: proxy::Client,
        head: &squall_h1::RequestHead,
        status: http::StatusCode,
    ) {
        if client.stream != 0 {
            self.answer_h2_error(client.index, client.stream, status, Some(head));
            return;
        }
        let counters = self.runtime.metrics.worker(self.id);
        let conn = &mut self.conns[client.index];
        let before = conn.out.len();
        let reason = status.canonical_reason().unwrap_or("");
        let body = format!("{} {reason}\n", status.as_u16());
        let response = squall_h1::ResponseHead {
            status,
            headers: &http::HeaderMap::new(),
            raw_headers: b"server: squall\r\ncontent-type: text/plain\r\n",
            body_len: Some(body.len() as u64),
        };
        if squall_h1::encode_response_head(
            &response,
            head.framing(),
            self.date.get(),
            &mut conn.out,
        ) {
            conn.out.extend_from_slice(body.as_bytes());
        }
        counters.count_response(status);
        let sent = conn.out.len() - before;
        log_request(
            &mut self.log,
            conn,
            Some(head),
            status,
            sent,
            self.now,
            counters,
        );
    }

    // ---- sending ----

    fn flush(&mut self, index: usize) {
        let conn = &mut self.conns[index];
        if conn.send.is_some() || conn.phase == Phase::Closed {
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
            let raw = conn.raw_fd().expect("only open connections send");
            let token = Token::client(index, conn.generation).raw();
            conn.send = Some(self.ring.writev(raw, bufs, token));
            conn.ops += 1;
            return;
        }
        let pending = if conn.tls.is_some() {
            &mut conn.wire
        } else {
            &mut conn.out
        };
        if pending.is_empty() {
            if conn.close_after && conn.phase == Phase::Open {
                self.linger(index);
            }
            return;
        }
        let buf = pending.split().freeze();
        self.queue_send(index, buf);
    }

    fn queue_send(&mut self, index: usize, buf: Bytes) {
        let conn = &mut self.conns[index];
        let raw = conn.raw_fd().expect("only open connections send");
        let token = Token::client(index, conn.generation).raw();
        conn.send = Some(self.ring.send(raw, buf, token));
        conn.ops += 1;
    }

    fn on_send(&mut self, token: Token, result: io::Result<usize>, buf: Bytes) {
        let Some(index) = self.conn_index(token) else {
            return;
        };
        let conn = &mut self.conns[index];
        conn.send = None;
        conn.ops -= 1;
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

    fn on_writev(&mut self, token: Token, result: io::Result<usize>, bufs: Vec<Bytes>) {
        let Some(index) = self.conn_index(token) else {
            return;
        };
        let conn = &mut self.conns[index];
        conn.send = None;
        conn.ops -= 1;
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

    /// A send completed whole: produce and send more.
    fn sent(&mut self, index: usize) {
        let conn = &mut self.conns[index];
        conn.last_activity = self.now;
        if conn.h2.is_some() {
            self.pump_h2(index);
        } else if conn.blocked {
            conn.blocked = false;
            self.process(index);
        } else {
            self.flush(index);
            self.update_deadline(index);
        }
        // A proxied response paused for this client reads on once it has drained.
        if self.conns[index].unsent_bytes() < OUT_HIGH_BYTES / 2 {
            self.resume_origin(proxy::Client::h1(index));
        }
    }

    // ---- closing ----

    /// Shuts our write side and reads until the client closes or `LINGER` passes.
    fn linger(&mut self, index: usize) {
        let conn = &mut self.conns[index];
        let shut = conn
            .fd
            .as_ref()
            .map(|fd| SockRef::from(fd).shutdown(std::net::Shutdown::Write));
        if conn.recv.is_none() || !matches!(shut, Some(Ok(()))) {
            self.close_now(index);
            return;
        }
        conn.phase = Phase::Lingering;
        conn.rbuf = bytes::BytesMut::new();
        self.update_deadline(index);
    }

    /// Cancels the connection's operations and queues the close of its socket.
    fn close_now(&mut self, index: usize) {
        if self.conns[index].exchange.is_some() {
            self.abort_exchange(proxy::Client::h1(index));
        }
        let streams: Vec<u32> = self.conns[index]
            .h2
            .as_ref()
            .map(|h2| h2.exchanges.keys().copied().collect())
            .unwrap_or_default();
        for stream in streams {
            self.abort_exchange(proxy::Client { index, stream });
        }
        let conn = &mut self.conns[index];
        if conn.phase == Phase::Closed {
            return;
        }
        conn.phase = Phase::Closed;
        let token = Token::client(index, conn.generation).raw();
        for op in [conn.recv, conn.send].into_iter().flatten() {
            self.ring.cancel(op, token);
        }
        if let Some(fd) = conn.fd.take() {
            self.ring.close(fd, token);
            conn.ops += 1;
        }
        conn.request = None;
        conn.rbuf = bytes::BytesMut::new();
        // Requests parked on the cache go too: a later wake-up finds nothing to resume.
        conn.parked = None;
        if let Some(h2) = conn.h2.as_mut() {
            h2.parked.clear();
        }
    }

    fn op_done(&mut self, token: Token) {
        if let Some(index) = self.conn_index(token) {
            self.conns[index].ops -= 1;
            self.op_done_at(index);
        }
    }

    /// Frees a closed connection's slot once the kernel has reported all its operations.
    fn op_done_at(&mut self, index: usize) {
        let Some(conn) = self.conns.get(index) else {
            return;
        };
        conn.check_invariants();
        if conn.phase == Phase::Closed && conn.ops == 0 {
            let conn = self.conns.remove(index);
            if let Some(ip) = conn.counted_ip {
                self.clients.close(ip);
            }
            if self.listeners.iter().any(|l| l.paused_since.is_some()) {
                self.resume_accepting();
            }
        }
    }

    // ---- timers ----

    /// Recomputes when this connection must next be looked at, and files a timer if needed.
    fn update_deadline(&mut self, index: usize) {
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
                let idle = conn.last_activity + limits.idle_timeout;
                // HTTP/2's own timers (streams stalled on a zero window), and requests parked
                // behind another's fetch.
                let h2 = conn.h2.as_ref();
                [
                    h2.and_then(|h2| h2.conn.next_deadline()),
                    conn.parked.as_ref().map(|p| p.until),
                    h2.and_then(|h2| h2.parked.values().map(|p| p.until).min()),
                ]
                .into_iter()
                .flatten()
                .fold(idle, Instant::min)
            }
        };
        conn.deadline = deadline;
        if conn.timer_due.is_none_or(|due| deadline < due) {
            conn.timer_due = Some(deadline);
            self.timers
                .insert(Token::client(index, conn.generation).raw(), deadline);
        }
    }

    fn expire_timers(&mut self) {
        let mut fired = std::mem::take(&mut self.fired);
        self.timers.expire(self.now, &mut fired);
        for entry in fired.drain(..) {
            let token = Token::from_raw(entry.key);
            if token.kind() == Kind::Origin {
                self.on_origin_timer(token, entry.due);
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

    fn on_deadline(&mut self, index: usize) {
        if self.conns[index].phase == Phase::Open {
            self.unpark_expired(index);
        }
        let conn = &mut self.conns[index];
        let metrics = self.runtime.metrics.worker(self.id);
        if conn.phase == Phase::Open
            && (conn.parked.is_some() || conn.exchange.is_some())
            && conn.last_activity + self.runtime.limits.idle_timeout > self.now
        {
            self.update_deadline(index);
            return;
        }
        if let Some(h2) = conn.h2.as_mut()
            && conn.phase == Phase::Open
            && conn.last_activity + self.runtime.limits.idle_timeout > self.now
        {
            // Not idle: an HTTP/2 timer (a stalled stream) is due.
            h2.conn.on_timer(self.now);
            self.pump_h2(index);
            return;
        }
        if conn.phase == Phase::Open && conn.send.is_none() && conn.head_in_progress() {
            // Slowloris: part of a head arrived, the rest did not come in time.
            debug!(worker = self.id, conn = index, "request header timeout");
            metrics.count_bad_request(http::StatusCode::REQUEST_TIMEOUT);
            conn.out.clear();
            squall_h1::encode_error(
                http::StatusCode::REQUEST_TIMEOUT,
                self.date.get(),
                &mut conn.out,
            );
            conn.close_after = true;
            self.flush(index);
            self.update_deadline(index);
        } else {
            // Idle keep-alive, a client that stopped reading, or the end of a linger.
            metrics.timeouts.inc();
            self.close_now(index);
        }
    }

    // ---- control ----

    fn on_control(&mut self) {
        while let Ok(message) = self.control.try_recv() {
            match message {
                Control::Reload {
                    runtime,
                    add,
                    remove,
                } => {
                    // Removed listeners first, under the old runtime: the connections still in
                    // their accept queues are taken with the protocols and TLS they came for.
                    for address in remove {
                        self.remove_listener(address);
                    }
                    self.log.routes = runtime.routes.clone();
                    self.runtime = runtime;
                    self.rebuild_upstreams();
                    self.add_listeners(add);
                    info!(worker = self.id, "configuration reloaded");
                }
                Control::Drain { deadline } => self.begin_drain(deadline),
                Control::CacheReady(client) => {
                    if let Some(index) = self.conn_index(client.token) {
                        self.unpark(proxy::Client {
                            index,
                            stream: client.stream,
                        });
                    }
                }
            }
        }
    }

    fn begin_drain(&mut self, deadline: Instant) {
        if self.drain_deadline.is_some() {
            return;
        }
        self.drain_deadline = Some(deadline);
        for listener in &mut self.listeners {
            if let Some(op) = listener.accept.take() {
                self.ring.cancel(op, Token::listener(0).raw());
            }
            if let Some(fd) = listener.fd.take() {
                self.ring.close(fd, Token::listener(0).raw());
            }
        }
        // Every HTTP/2 connection gets a GOAWAY first (RFC 9113 §6.8), idle ones included, so
        // a client knows its requests were not lost; those with streams in progress finish
        // them. A connection closes once it is idle and its GOAWAY has left.
        let h2: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| c.phase == Phase::Open && c.h2.is_some())
            .map(|(i, _)| i)
            .collect();
        for index in h2 {
            self.go_away_h2(index);
        }
        self.close_idle();
    }

    /// Closes every open connection with no request in progress and nothing left to send.
    fn close_idle(&mut self) {
        let idle: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| c.phase == Phase::Open && c.is_idle())
            .map(|(i, _)| i)
            .collect();
        for index in idle {
            self.close_now(index);
        }
    }

    /// During a drain: true once every connection is gone, or the deadline has passed (then the
    /// rest are closed and the ring's drop waits for their operations).
    fn drain_finished(&mut self) -> bool {
        let Some(deadline) = self.drain_deadline else {
            return false;
        };
        if self.now >= deadline {
            let open: Vec<usize> = self.conns.iter().map(|(i, _)| i).collect();
            if !open.is_empty() {
                warn!(
                    worker = self.id,
                    connections = open.len(),
                    "drain timeout: closing"
                );
            }
            for index in open {
                self.close_now(index);
            }
            return true;
        }
        // Connections that became idle since the drain began close now.
        self.close_idle();
        self.conns.is_empty()
    }
}

/// The watchdog's test hook, in debug builds only: `SQUALL_TEST_STALL_WORKER=AFTER_MS:FOR_MS`
/// freezes worker 0 for FOR_MS once AFTER_MS have passed, so that a test can see the
/// watchdog pings stop. Release builds ignore it.
fn test_stall(worker: usize) -> Option<(Instant, Duration)> {
    if !cfg!(debug_assertions) || worker != 0 {
        return None;
    }
    let value = std::env::var("SQUALL_TEST_STALL_WORKER").ok()?;
    let (after, length) = value.split_once(':')?;
    let after = Duration::from_millis(after.parse().ok()?);
    let length = Duration::from_millis(length.parse().ok()?);
    Some((Instant::now() + after, length))
}

/// The scheme requests on `conn` arrived with.
fn scheme(conn: &Conn) -> &'static str {
    if conn.tls.is_some() { "https" } else { "http" }
}

/// What every answered request is recorded in: the access log, if there is one, and the
/// per-route counters of the config in force.
struct RequestLog {
    access: Option<access_log::Batch>,
    routes: Arc<crate::metrics::RouteCounters>,
    worker: usize,
}

fn log_request(
    log: &mut RequestLog,
    conn: &mut Conn,
    head: Option<&squall_h1::RequestHead>,
    status: http::StatusCode,
    bytes: usize,
    now: Instant,
    counters: &WorkerCounters,
) {
    let started = if head.is_some() {
        conn.request_started
    } else {
        conn.head_started.unwrap_or(now)
    };
    let elapsed = now.saturating_duration_since(started);
    counters.request_duration.observe(elapsed);
    if conn.h2.is_some() {
        counters.requests_h2.inc();
    } else {
        counters.requests_h1.inc();
    }
    let note = std::mem::take(&mut conn.log_note);
    if let Some(route) = note.route {
        log.routes.count(log.worker, route, status);
    }
    let Some(log) = &mut log.access else { return };
    let entry = access_log::Entry {
        peer: conn.peer,
        head,
        status: status.as_u16(),
        bytes,
        elapsed,
        upstream: note.upstream,
        cache: note.cache,
    };
    log.push(&entry, SystemTime::now(), counters);
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
    if conn.close_after && conn.phase == Phase::Open {
        tls.close(&mut conn.wire);
    }
    Ok(())
}

fn is_out_of_descriptors(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}
