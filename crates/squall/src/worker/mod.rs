//! A worker: one pinned thread, one io_uring, its own listeners, connections and timers.
//!
//! The loop is run-to-completion, like nginx's event loop: submit, wait for completions, and for
//! each one do all the work it enables (decode, route, encode, queue the send) before the next.
//! Nothing blocks and nothing is shared with other workers on this path but the read-only
//! [`Runtime`].

mod budget;
mod cache;
mod client;
mod cluster;
mod conn;
mod downstream;
mod entry;
mod files;
mod h1;
mod h2;
mod h3;
mod ids;
mod listen;
mod origin;
mod parked;
mod purge;
mod quic;
mod request;
mod session;
mod setup;
mod socket;
mod token;
mod tunnel;

use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Receiver, Sender};
use squall_uring::{Completion, Ring, RingConfig, Waker};
use tracing::{debug, info, warn};

use crate::access_log;
use crate::clients::ClientTable;
use crate::date::DateCache;
use crate::runtime::Runtime;
use crate::timer::{Entry, TimerWheel};
use conn::Phase;
use downstream::scheme;
use downstream::{RequestLog, part_downstream};
pub use ids::ClientToken;
use ids::{Client, Waiter};

use token::{Kind, Token};

/// Output buffered for one connection beyond which decoding pauses until a send completes: a
/// client pipelining thousands of requests without reading cannot grow our memory.
const OUT_HIGH_BYTES: usize = 256 * 1024;
/// Unsent input beyond which a connection that is not being decoded (blocked on output) is cut.
const RBUF_BLOCKED_MAX_BYTES: usize = 1024 * 1024;
/// How long a closing connection reads and discards before the socket is closed.
const LINGER: Duration = Duration::from_secs(2);
/// How long an HTTP/2 connection that reached `idle_timeout` has, after its GOAWAY, to finish
/// what it has before it is closed: a request the client sent as the GOAWAY left is refused
/// (REFUSED_STREAM, safe to retry, RFC 9113 §8.7) rather than cut off by a bare close. A
/// connection with nothing in flight is closed sooner: once the GOAWAY has left, it lingers.
const IDLE_GOAWAY_GRACE: Duration = Duration::from_secs(1);
/// How long accepting stays paused after running out of descriptors before it is retried.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);
/// Least time between two warnings about running out of descriptors.
const PAUSE_LOG_INTERVAL: Duration = Duration::from_secs(60);
/// Connections per worker: far below what a token can address.
const CONNS_MAX: usize = 1 << 24;

const _: () = assert!(OUT_HIGH_BYTES < RBUF_BLOCKED_MAX_BYTES);
const _: () = assert!(CONNS_MAX <= token::INDEX_MAX);

/// Messages from the control thread to a worker.
pub enum Control {
    /// A new runtime for new requests, and the listeners to open and to close.
    Reload {
        runtime: Arc<Runtime>,
        add: Vec<(SocketAddr, std::os::fd::OwnedFd)>,
        remove: Vec<SocketAddr>,
    },
    Drain {
        deadline: Instant,
    },
    /// A fetch that a request of this worker waited for has ended.
    CacheReady(ClientToken),
    /// The verdict on the Basic credentials of a request of this worker, parked meanwhile.
    Verified {
        client: ClientToken,
        head: Box<squall_h1::RequestHead>,
        verdict: crate::auth::Verdict,
    },
    /// HTTP/3 packets another worker received for this one's connections (`quic.rs`).
    QuicPackets(Vec<quic::Handed>),
}

/// What a worker is started with.
pub struct Setup {
    pub id: usize,
    pub core: Option<core_affinity::CoreId>,
    /// Listening sockets with the address each was configured as (`127.0.0.1:0` stays so).
    pub listeners: Vec<(SocketAddr, OwnedFd)>,
    /// UDP sockets of the listeners that serve HTTP/3, likewise.
    pub udp: Vec<(SocketAddr, OwnedFd)>,
    pub runtime: Arc<Runtime>,
    pub control: Receiver<Control>,
    pub waker: Waker,
    /// Reports set-up success or the reason for failure to the main thread.
    pub ready: Sender<Result<(), String>>,
    /// The access log's logger thread, when `[log] access` is set.
    pub access_log: Option<access_log::Logger>,
    /// Per-client-address counts, shared by every worker.
    pub clients: Arc<ClientTable>,
    /// Every worker's control channel and waker, to wake requests parked on the cache.
    pub peers: Arc<[crate::cache::Peer]>,
}

/// The worker's `Io` for one call to a part, borrowing only the fields it names, so that the
/// part (another field) can be borrowed beside it.
macro_rules! part_io {
    ($worker:expr) => {
        $crate::worker::Io {
            ring: &mut $worker.ring,
            timers: &mut $worker.timers,
            now: $worker.now,
            runtime: &$worker.runtime,
            worker: $worker.id,
        }
    };
}
use part_io;

/// What the loop lends a part for one call: the ring to submit on, the timer wheel, the clock
/// and the configuration in force. A part keeps none of it, and reaches nothing else of the
/// worker.
pub(super) struct Io<'a> {
    pub ring: &'a mut Ring,
    pub timers: &'a mut TimerWheel,
    pub now: Instant,
    pub runtime: &'a Runtime,
    /// The worker's index, for log lines and per-worker counters.
    pub worker: usize,
}

struct Worker {
    id: usize,
    ring: Ring,
    runtime: Arc<Runtime>,
    /// The client connections, the ready queue and the per-address table (`client.rs`).
    clients: client::Clients,
    /// The listening sockets and the requests waiting for a descriptor (`listen.rs`).
    admission: listen::Admission,
    timers: TimerWheel,
    fired: Vec<Entry>,
    date: DateCache,
    control: Receiver<Control>,
    waker: Waker,
    now: Instant,
    /// The wall clock, read once per loop turn with `now`: what the cache's freshness
    /// arithmetic and ages are computed against.
    wall: SystemTime,
    /// Set by a graceful stop: the time by which every connection must be gone.
    drain_deadline: Option<Instant>,
    /// This worker's batch of access log lines, when the access log is on.
    log: RequestLog,
    peers: Arc<[crate::cache::Peer]>,
    /// The Date field HPACK-encoded for HTTP/2 responses, re-encoded when the second changes.
    h2_date: downstream::EncodedDate,
    /// Reused to assemble a cache hit's response head, so that a hit allocates nothing.
    scratch: bytes::BytesMut,
    /// Debug builds only: when worker 0 should freeze, and for how long (see `test_stall`).
    stall: Option<(Instant, Duration)>,
    /// Connections to origin servers, their pools and this worker's upstream state.
    origins: origin::Origins,
    /// Proxied requests in progress (see `session.rs`).
    sessions: session::Sessions,
    /// Static files being served (see `files.rs`).
    files: files::Files,
    /// In-flight tables a reload replaced, drained of abandoned tickets until empty.
    abandoned: crate::cache::Abandoned,
    /// `limits.buffer_memory_max` in bytes for this machine (0: no budget); see `budget.rs`.
    buffer_limit: usize,
    /// Reused by `process`: the sessions fed request body bytes, driven once decoding stops.
    fed: Vec<ids::SessionId>,
    /// Reused by `drained`: what answers the clients of the connection that drained.
    answering: Vec<downstream::Answering>,
    /// The UDP sockets of the HTTP/3 listeners and their QUIC endpoints (`quic.rs`).
    quic: quic::Quic,
    /// Reused for what a received datagram means for other parts.
    arrivals: Vec<quic::Arrival>,
}

/// Runs a worker until it has drained after a stop.
pub fn run(setup: Setup) {
    if let Some(core) = setup.core {
        core_affinity::set_for_current(core);
    }
    // Datagram buffers only for HTTP/3: 64 KiB each with receive offload (what GRO
    // coalesces), a packet's worth without.
    let (udp_buffers, udp_buffer_bytes) = match &setup.runtime.quic {
        Some(quic) if quic.gro => (256, squall_uring::UDP_BUFFER_BYTES_GRO),
        Some(_) => (1024, (2048 + squall_uring::DATAGRAM_HEADROOM) as u32),
        None => (0, squall_uring::UDP_BUFFER_BYTES_GRO),
    };
    let ring = match Ring::new(&RingConfig {
        sq_entries: 4096,
        recv_buffers: 1024,
        recv_buffer_bytes: 16 * 1024,
        udp_buffers,
        udp_buffer_bytes,
        ..RingConfig::default()
    }) {
        Ok(ring) => ring,
        Err(e) => {
            let _ = setup.ready.send(Err(setup::ring_error(&e)));
            return;
        }
    };
    debug!(worker = setup.id, flavor = ?ring.flavor(), "ring ready");
    let now = Instant::now();
    let routes = setup.runtime.routes.clone();
    let real_ip = setup.runtime.real_ip.clone();
    let mut worker = Worker {
        id: setup.id,
        ring,
        runtime: setup.runtime,
        clients: client::Clients::new(setup.clients),
        admission: listen::Admission::new(setup.peers.len()),
        timers: TimerWheel::new(now),
        fired: Vec::new(),
        date: DateCache::new(),
        control: setup.control,
        waker: setup.waker,
        now,
        wall: SystemTime::now(),
        drain_deadline: None,
        log: RequestLog {
            access: setup
                .access_log
                .map(|logger| access_log::Batch::new(logger, now)),
            routes,
            worker: setup.id,
            real_ip,
        },
        peers: setup.peers,
        stall: setup::test_stall(setup.id),
        h2_date: downstream::EncodedDate::default(),
        scratch: bytes::BytesMut::new(),
        origins: origin::Origins::default(),
        sessions: session::Sessions::default(),
        files: files::Files::default(),
        abandoned: crate::cache::Abandoned::default(),
        buffer_limit: 0,
        fed: Vec::new(),
        answering: Vec::new(),
        quic: quic::Quic::default(),
        arrivals: Vec::new(),
    };
    worker.apply_runtime();
    (worker.ring).poll_waker(&worker.waker, Token::waker().raw());
    (worker.admission).add(&mut part_io!(worker), setup.listeners);
    (worker.quic).add(&mut part_io!(worker), setup.udp);
    let _ = setup.ready.send(Ok(()));
    if let Err(e) = worker.event_loop() {
        warn!(worker = worker.id, "event loop failed: {e}");
    }
    if let Some(log) = &mut worker.log.access {
        log.flush(worker.runtime.metrics.worker(worker.id));
    }
    debug!(worker = worker.id, "stopped");
}

impl Worker {
    /// Puts the runtime in force to work: resolves `limits.buffer_memory_max` for this
    /// machine (worker 0 logs it), and builds this worker's upstream state from the runtime's
    /// groups. On a reload the old pooled connections close (their group may be gone); busy
    /// ones finish their exchange and then close instead of going back to a pool.
    fn apply_runtime(&mut self) {
        let limit = budget::limit(&self.runtime.limits);
        if self.id == 0 && limit != self.buffer_limit {
            match limit {
                0 => info!("buffered response bytes: no process-wide budget"),
                n => info!(
                    "buffered response bytes limited to {} KiB (limits.buffer_memory_max)",
                    n / 1024
                ),
            }
        }
        self.buffer_limit = limit;
        self.origins.conns.set_buffer_limit(limit);
        let seed = self.id as u64;
        let groups: Result<Vec<_>, _> = self
            .runtime
            .upstreams
            .iter()
            .map(|u| squall_upstream::Upstream::new(&u.spec, self.now, seed))
            .collect();
        // Validation makes an error here unreachable; if it happens, proxy routes answer 502.
        let groups = groups.unwrap_or_else(|e| {
            warn!(
                worker = self.id,
                "upstreams: {e}; proxy routes will answer 502"
            );
            Vec::new()
        });
        self.origins.replace_groups(&mut part_io!(self), groups);
    }

    fn event_loop(&mut self) -> io::Result<()> {
        loop {
            if self.drain_finished() {
                return Ok(());
            }
            let due = [
                self.admission.next_wake(self.now),
                self.drain_deadline,
                self.origins.upstreams.next_probe_at(),
                self.quic.next_wake(),
            ];
            (self.ring).submit_and_wait(Some(wait_timeout(self.now, &self.timers, due)))?;
            self.now = Instant::now();
            self.wall = SystemTime::now();
            self.date.update(self.wall);
            while let Some(completion) = self.ring.next_completion() {
                self.on_completion(completion);
                self.deliver();
            }
            self.expire_timers();
            self.quic.expire(&mut part_io!(self));
            self.deliver();
            if self.drain_deadline.is_none() {
                self.admission.retry(&mut part_io!(self));
            }
            self.origins.expire_pools(&mut part_io!(self));
            self.wake_descriptor_waiters();
            self.origins.start_due_probes(&mut part_io!(self));
            self.origins.upstreams.publish(&mut part_io!(self));
            self.deliver();
            self.run_ready();
            // Streams freed on HTTP/2 origins go to the exchanges queued for them, which may
            // give their clients more to do.
            while self.origins.run_h2_pending(&mut part_io!(self)) {
                self.deliver();
                self.run_ready();
            }
            (self.abandoned).wake(&self.runtime.cache.inflight, &self.peers);
            self.deliver();
            debug_assert!(self.origins.quiet());
            if let Some((at, length)) = self.stall
                && self.now >= at
            {
                // The test hook: a stuck worker, as a bug or a blocking call would make one.
                self.stall = None;
                std::thread::sleep(length);
            }
            self.runtime.metrics.buffered.of(self.id).publish();
            let counters = self.runtime.metrics.worker(self.id);
            counters.beat();
            counters.connections_active.store(
                self.clients.conns.len() as u64,
                std::sync::atomic::Ordering::Relaxed,
            );
            if let Some(log) = &mut self.log.access {
                log.tick(self.now, counters);
            }
        }
    }

    /// Starts the requests waiting for a descriptor, in order, while descriptors are free
    /// (once per turn). One whose client went away meanwhile gives its charge back at once.
    fn wake_descriptor_waiters(&mut self) {
        while let Some(waiter) = self.admission.next_waiter(&self.runtime) {
            let started = match waiter {
                Waiter::Session(id) => {
                    let started = self.with_sessions(|s, cx| s.pick_charged(cx, id));
                    if started {
                        self.drive(id);
                    }
                    started
                }
                Waiter::File(id) => self.with_files(|files, io, _| files.open_charged(io, id)),
            };
            if !started {
                self.runtime.metrics.descriptors.give();
            }
        }
    }

    /// Delivers what the origin side learned to the sessions it concerns, in order, until
    /// none is left (what a session does may teach the origins more); then the connections
    /// whose received bytes were delivered read on, unless their exchange paused or let go of
    /// them. The one way from an origin connection to a session.
    fn deliver(&mut self) {
        while let Some((id, origin, news)) = self.origins.next_news() {
            if self.with_sessions(|s, cx| s.hear(cx, id, origin, news)) {
                self.drive(id);
            }
        }
        self.origins.read_on(&mut part_io!(self));
    }

    fn on_completion(&mut self, completion: Completion) {
        match completion {
            Completion::Accept {
                token,
                result,
                more,
            } => {
                let index = Token::from_raw(token).index();
                let draining = self.drain_deadline.is_some();
                let room = !draining && self.clients.conns.len() < CONNS_MAX;
                let io = &mut part_io!(self);
                if let Some(fd) = self
                    .admission
                    .accepted(io, index, result, more, room, draining)
                {
                    let (address, logging) =
                        (self.admission.address(index), self.log.access.is_some());
                    self.clients.open(&mut part_io!(self), fd, address, logging);
                    self.admission.opened(&mut part_io!(self), index, more);
                }
            }
            Completion::Recv {
                token,
                result,
                more,
            } => match Token::from_raw(token) {
                t if t.kind() == Kind::Origin => {
                    self.origins
                        .on_origin_recv(&mut part_io!(self), t, result, more)
                }
                t => self.on_recv(t, result, more),
            },
            Completion::Send { token, result, buf } => match Token::from_raw(token) {
                t if t.kind() == Kind::Udp => self.quic.on_send(&part_io!(self), t, result),
                t if t.kind() == Kind::Origin => {
                    self.origins
                        .on_origin_send(&mut part_io!(self), t, result, buf)
                }
                t => {
                    if let Some(index) = self.clients.index(t) {
                        let io = &mut part_io!(self);
                        let done = self.clients.on_send(io, index, result, buf);
                        self.after_send(index, done);
                    }
                }
            },
            Completion::Connect { token, result } => {
                self.origins
                    .on_origin_connect(&mut part_io!(self), Token::from_raw(token), result);
            }
            Completion::Close { token, .. } => match Token::from_raw(token) {
                t if t.kind() == Kind::Client => {
                    if let Some(index) = self.clients.index(t) {
                        self.clients.conns[index].socket.on_close();
                        self.op_done_at(index);
                    }
                }
                t if t.kind() == Kind::Origin => self.origins.conns.on_close(t),
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
                t if t.kind() == Kind::Client => {
                    if let Some(index) = self.clients.index(t) {
                        let io = &part_io!(self);
                        let done = self.clients.on_writev(io, index, result, bufs);
                        self.after_send(index, done);
                    }
                }
                _ => {}
            },
            Completion::Cancel { .. } => {}
            // HTTP/3: what a datagram means goes to the part it concerns (`quic.rs`).
            Completion::Datagram {
                token,
                result,
                more,
            } => {
                let token = Token::from_raw(token);
                let io = &mut part_io!(self);
                self.quic
                    .receive(io, token, result, more, &mut self.arrivals);
                self.quic.hand_over(&self.peers);
            }
            // Static files (`files.rs`).
            Completion::Open { token, result } => {
                self.with_files(|files, io, down| files.on_open(io, down, token, result));
            }
            Completion::Statx { token, result } => {
                self.with_files(|files, io, down| files.on_stat(io, down, token, result));
            }
            Completion::Read { token, result, buf } => {
                self.with_files(|files, io, down| files.on_read(io, down, token, result, buf));
            }
            Completion::Splice { token, result } => {
                self.with_files(|files, io, down| files.on_splice(io, down, token, result));
            }
            Completion::Poll { token, result } => {
                self.with_files(|files, io, down| files.on_poll(io, down, token, result));
            }
        }
        // What QUIC datagrams (received, or handed over by another worker) meant for the
        // client slots: a new connection gets one, a packet goes to its connection.
        let mut arrivals = std::mem::take(&mut self.arrivals);
        for arrival in arrivals.drain(..) {
            match arrival {
                quic::Arrival::New {
                    listener,
                    handle,
                    proto,
                    peer,
                } => {
                    let address = self.quic.address(listener).unwrap_or(peer);
                    let io = &mut part_io!(self);
                    match self.clients.open_quic(io, proto, address, peer) {
                        Ok(client) => {
                            self.quic.opened(listener, handle, client);
                            part_downstream!(self).schedule(client.index());
                        }
                        Err(mut proto) => {
                            self.quic.retire(&mut part_io!(self), &mut proto);
                        }
                    }
                }
                quic::Arrival::Packet {
                    listener,
                    handle,
                    event,
                } => {
                    let client = self.quic.client(listener, handle);
                    if let Some(index) = client.and_then(|c| self.clients.index(c)) {
                        part_downstream!(self).receive_h3(index, event);
                    }
                }
            }
        }
        self.arrivals = arrivals;
    }

    /// Processes the connections queued by `schedule`, including those queued meanwhile.
    fn run_ready(&mut self) {
        while let Some(token) = self.clients.ready.pop_front() {
            if let Some(index) = self.clients.index(token) {
                self.clients.conns[index].scheduled = false;
                if self.clients.conns[index].phase == Phase::Closed {
                    // A connection without a socket (HTTP/3) closed this turn: its slot goes.
                    self.op_done_at(index);
                    continue;
                }
                self.process(index);
            }
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
                        for (fd, listener) in self.admission.remove(&mut part_io!(self), address) {
                            if self.drain_deadline.is_none() && self.clients.conns.len() < CONNS_MAX
                            {
                                let address = self.admission.address(listener);
                                let logging = self.log.access.is_some();
                                self.clients.open(&mut part_io!(self), fd, address, logging);
                            }
                        }
                    }
                    self.log.routes = runtime.routes.clone();
                    self.log.real_ip = runtime.real_ip.clone();
                    (self.abandoned)
                        .replaced(&self.runtime.cache.inflight, &runtime.cache.inflight);
                    self.runtime = runtime;
                    self.apply_runtime();
                    self.quic.reloaded(&part_io!(self));
                    self.admission.add(&mut part_io!(self), add);
                    info!(worker = self.id, "configuration reloaded");
                }
                Control::Drain { deadline } => self.begin_drain(deadline),
                Control::CacheReady(client) => {
                    if let Some(index) = self.clients.index(client.token) {
                        self.unpark(Client::of(index, client));
                    }
                }
                Control::Verified {
                    client,
                    head,
                    verdict,
                } => self.verified(client, *head, verdict),
                // Their arrivals are taken at the end of `on_completion`.
                Control::QuicPackets(packets) => {
                    (self.quic).handed(&mut part_io!(self), packets, &mut self.arrivals);
                }
            }
        }
    }

    fn begin_drain(&mut self, deadline: Instant) {
        if self.drain_deadline.is_some() {
            return;
        }
        self.drain_deadline = Some(deadline);
        self.admission.close_all(&mut part_io!(self));
        // QUIC listeners take no new connection; theirs keep their datagrams until they end.
        self.quic.stop_accepting();
        // Every HTTP/2 connection gets a GOAWAY first (RFC 9113 §6.8), idle ones included, so
        // a client knows its requests were not lost; those with streams in progress finish
        // them. A connection closes once it is idle and its GOAWAY has left.
        let open: Vec<usize> = (self.clients.conns.iter())
            .filter(|(_, c)| c.phase == Phase::Open)
            .map(|(i, _)| i)
            .collect();
        for index in open {
            // Nothing for an HTTP/1.1 connection.
            if part_downstream!(self).go_away(index, false) {
                self.pump(index);
            }
        }
        // The idle ones close at the top of the next turn (`drain_finished`).
    }

    /// During a drain: true once every connection is gone, or the deadline has passed (then the
    /// rest are closed and the ring's drop waits for their operations).
    fn drain_finished(&mut self) -> bool {
        let Some(deadline) = self.drain_deadline else {
            return false;
        };
        if self.now >= deadline {
            let open: Vec<usize> = self.clients.conns.iter().map(|(i, _)| i).collect();
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
        // Connections with no request in progress and nothing left to send close now.
        let idle: Vec<usize> = (self.clients.conns.iter())
            .filter(|(_, c)| c.phase == Phase::Open && c.is_idle())
            .map(|(i, _)| i)
            .collect();
        for index in idle {
            self.close_now(index);
        }
        self.clients.conns.is_empty()
    }
}

/// How long the ring may wait for a completion: until the first timer or the first of `due`
/// (a listener's retry, the drain's deadline, a probe), at least a millisecond, and at most a
/// second, since the Date header must tick even on an idle worker with no timers.
fn wait_timeout(now: Instant, timers: &TimerWheel, due: [Option<Instant>; 4]) -> Duration {
    let mut timeout = timers.timeout(now);
    for at in due.into_iter().flatten() {
        let d = at
            .saturating_duration_since(now)
            .max(Duration::from_millis(1));
        timeout = Some(timeout.map_or(d, |t| t.min(d)));
    }
    timeout
        .unwrap_or(Duration::from_secs(1))
        .min(Duration::from_secs(1))
}
