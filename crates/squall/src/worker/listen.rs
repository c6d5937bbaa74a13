//! Listening sockets: accepts, the pause at the descriptor reserve's mark and the back-off when
//! descriptors run out, listeners added and removed by a reload, and the set-up of each
//! accepted client connection.
//!
//! Far from the mark a listener runs one multishot accept, which the kernel completes for every
//! connection in the queue at once: cheap, but unbounded. Near the mark (less headroom than
//! every worker's queues could hold) the multishot is cancelled and each accept is armed for one
//! connection only, so the process passes the mark by at most one connection per listener and
//! worker. At the mark nothing is armed: clients wait in the kernel's queue. A closing
//! connection re-arms this worker's paused listeners, and every paused worker looks again each
//! `ACCEPT_RETRY` (another worker's closes free the room), so a pause always ends.
//!
//! Requests in flight are charged the descriptor they hold (`descriptors.rs`): a proxied
//! request at its first pick, a file transfer before its open. One that finds the room full
//! waits here, in order, and goes on when a request ends or a client leaves (in this worker
//! at the end of the turn, in another within `DESCRIPTOR_RETRY`).

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};

use socket2::SockRef;
use squall_tls::TlsConn;
use tracing::{debug, warn};

use super::conn::Conn;
use super::files::FileId;
use super::h2::Protocols;
use super::session::SessionId;
use super::token::{self, Token};
use super::{ACCEPT_RETRY, CONNS_MAX, Listener, PAUSE_LOG_INTERVAL, Worker};

/// How often a worker with requests waiting for a descriptor looks again (another worker's
/// requests ending free them without telling it).
pub(super) const DESCRIPTOR_RETRY: std::time::Duration = std::time::Duration::from_millis(10);

/// A request waiting for a descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Waiter {
    /// A proxied request, before its first pick.
    Session(SessionId),
    /// A static file transfer, before its open.
    File(FileId),
}

/// The listen backlog of a worker's socket (see `listener.rs`): what one multishot accept may
/// take at once.
const QUEUE_MAX: usize = 4096;

impl Worker {
    /// Starts accepting on new listening sockets (at start-up and from a reload).
    pub(super) fn add_listeners(&mut self, listeners: Vec<(SocketAddr, OwnedFd)>) {
        for (address, fd) in listeners {
            self.listeners.push(Listener {
                address,
                fd: Some(fd),
                accept: None,
                multishot: false,
                paused_since: None,
            });
            self.arm_accept(self.listeners.len() - 1);
        }
    }

    /// Stops accepting on the listeners configured as `address` and closes their sockets;
    /// connections they accepted go on. The entries stay, so accept tokens keep their index.
    pub(super) fn remove_listener(&mut self, address: SocketAddr) {
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

    /// Arms listener `index`'s accept: multishot far from the descriptor mark, one connection at
    /// a time near it, none at it (then the listener is paused until connections close).
    pub(super) fn arm_accept(&mut self, index: usize) {
        let headroom = self.runtime.metrics.descriptors.headroom();
        let multishot = headroom > self.multishot_headroom();
        let listener = &mut self.listeners[index];
        let (Some(fd), None) = (&listener.fd, listener.accept) else {
            return;
        };
        if headroom == 0 {
            self.pause_at_mark(index);
            return;
        }
        let (fd, token) = (fd.as_raw_fd(), Token::listener(index).raw());
        listener.multishot = multishot;
        listener.accept = Some(if multishot {
            self.ring.accept_multi(fd, token)
        } else {
            self.ring.accept(fd, token)
        });
        self.publish_paused();
    }

    /// The headroom below which a multishot accept could pass the mark by a whole queue: every
    /// worker's queue on every listener.
    fn multishot_headroom(&self) -> usize {
        self.peers
            .len()
            .max(1)
            .saturating_mul(self.listeners.len().max(1))
            .saturating_mul(QUEUE_MAX)
    }

    /// Listener `index` stops accepting: the process holds as many client connections as the
    /// descriptor reserve allows. It resumes when one closes (`op_done_at`) or on the retry.
    fn pause_at_mark(&mut self, index: usize) {
        let listener = &mut self.listeners[index];
        if listener.paused_since.is_none() {
            self.runtime.metrics.worker(self.id).accept_pauses.inc();
            listener.paused_since = Some(self.now);
        }
        if self.pause_log_due() {
            let budget = &self.runtime.metrics.descriptors;
            warn!(
                worker = self.id,
                "accept paused: {} client connections open, the most the descriptor reserve \
                 allows ({}); resuming as connections close",
                budget.open(),
                budget.max()
            );
        }
        self.accept_retry_at = Some(self.now + ACCEPT_RETRY);
        self.publish_paused();
    }

    /// Sets this worker's `squall_accept_paused` gauge: 1 while a listener waits to be re-armed.
    pub(super) fn publish_paused(&self) {
        let paused = self
            .listeners
            .iter()
            .any(|l| l.paused_since.is_some() && l.accept.is_none() && l.fd.is_some());
        let gauge = &self.runtime.metrics.worker(self.id).accept_paused;
        gauge.store(u64::from(paused), std::sync::atomic::Ordering::Relaxed);
    }

    pub(super) fn on_accept(&mut self, token: Token, result: io::Result<OwnedFd>, more: bool) {
        let index = token.index();
        if !more {
            self.listeners[index].accept = None;
        }
        match result {
            Ok(fd) if self.drain_deadline.is_none() && self.conns.len() < CONNS_MAX => {
                self.listeners[index].paused_since = None;
                self.open_conn(fd, index);
                let listener = &self.listeners[index];
                if more
                    && listener.multishot
                    && let Some(op) = listener.accept
                    && self.runtime.metrics.descriptors.headroom() <= self.multishot_headroom()
                {
                    // Near the mark: one connection at a time from now on. The cancelled
                    // accept's last completion re-arms it (below).
                    self.ring.cancel(op, Token::listener(0).raw());
                    self.listeners[index].multishot = false;
                }
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
                if self.pause_log_due() {
                    warn!(
                        worker = self.id,
                        "accept paused: {e}; resuming when descriptors free up"
                    );
                }
                self.accept_retry_at = Some(self.now + ACCEPT_RETRY);
                self.publish_paused();
                return;
            }
            // A listener closed by a reload or a drain has no socket left to re-arm on; one
            // cancelled to accept one connection at a time is re-armed below.
            Err(e) if e.raw_os_error() == Some(libc::ECANCELED) => {}
            Err(e) => debug!(worker = self.id, "accept: {e}"),
        }
        if !more && self.drain_deadline.is_none() {
            self.arm_accept(index);
        }
    }

    /// Charges a request the descriptor it is about to open; false when it must wait (the
    /// room is full, or requests wait before it).
    pub(super) fn take_descriptor(&mut self) -> bool {
        self.descriptor_waiters.is_empty() && self.runtime.metrics.descriptors.take()
    }

    /// Request `holder` ended: its charge is given back (a waiting request takes it at the
    /// end of the turn), or, never charged, it leaves the queue it may wait in, so that
    /// requests abandoned while the room is full cannot grow the queue without bound.
    pub(super) fn end_descriptor(&mut self, holder: Waiter, charged: bool) {
        if charged {
            self.runtime.metrics.descriptors.give();
        } else if !self.descriptor_waiters.is_empty() {
            self.descriptor_waiters.retain(|waiter| *waiter != holder);
        }
    }

    /// Queues `waiter` until a descriptor is free (`wake_descriptor_waiters`).
    pub(super) fn wait_for_descriptor(&mut self, waiter: Waiter) {
        self.runtime.metrics.worker(self.id).descriptor_waits.inc();
        if self.pause_log_due() {
            let budget = &self.runtime.metrics.descriptors;
            warn!(
                worker = self.id,
                "requests wait for a descriptor: {} client connections and {} requests in \
                 flight hold what the descriptor reserve leaves; going on as they end",
                budget.open(),
                budget.held()
            );
        }
        self.descriptor_waiters.push_back(waiter);
    }

    /// Starts the waiting requests, in order, while descriptors are free (once per turn).
    /// One whose client went away meanwhile gives its charge back at once.
    pub(super) fn wake_descriptor_waiters(&mut self) {
        while let Some(&waiter) = self.descriptor_waiters.front() {
            if !self.runtime.metrics.descriptors.take() {
                return;
            }
            self.descriptor_waiters.pop_front();
            let started = match waiter {
                Waiter::Session(id) => self.pick_charged(id),
                Waiter::File(id) => self.open_charged(id),
            };
            if !started {
                self.runtime.metrics.descriptors.give();
            }
        }
    }

    /// Whether a pause (of accepting, or of requests waiting for a descriptor) is to be
    /// logged now: at most once per `PAUSE_LOG_INTERVAL`, which this call starts again.
    fn pause_log_due(&mut self) -> bool {
        let due = (self.pause_logged_at).is_none_or(|at| self.now >= at + PAUSE_LOG_INTERVAL);
        if due {
            self.pause_logged_at = Some(self.now);
        }
        due
    }

    pub(super) fn retry_accept(&mut self) {
        if self.accept_retry_at.is_some_and(|at| at <= self.now) {
            self.accept_retry_at = None;
            self.resume_accepting();
        }
    }

    pub(super) fn resume_accepting(&mut self) {
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
        let acceptor = self.runtime.tls.acceptor(self.listeners[listener].address);
        let tls = acceptor.map(|acceptor| Box::new(TlsConn::new(acceptor)));
        let mut conn = Conn::new(fd, generation, tls, self.now);
        conn.protocols = self.listener_protocols(listener);
        let limits = self.runtime.client_limits;
        let runtime = &self.runtime;
        let access = runtime.access_rules;
        let balancers = self.proxy_protocol_from(listener);
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

    /// The trusted balancers of listener `listener` when it speaks the PROXY protocol.
    fn proxy_protocol_from(
        &self,
        listener: usize,
    ) -> Option<std::sync::Arc<[squall_config::IpNet]>> {
        let address = self.listeners[listener].address;
        let mut listeners = self.runtime.proxy_protocol.iter();
        listeners
            .find(|(a, _)| *a == address)
            .map(|(_, nets)| nets.clone())
    }

    /// The protocols listener `listener` serves (HTTP/1.1 for one no longer configured).
    pub(super) fn listener_protocols(&self, listener: usize) -> Protocols {
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
}

fn is_out_of_descriptors(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}
