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

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Instant;

use socket2::SockRef;
use squall_config::IpNet;
use tracing::{debug, warn};

use super::ids::Waiter;
use super::token::Token;
use super::{ACCEPT_RETRY, Io, PAUSE_LOG_INTERVAL};
use crate::listener::Protocols;
use crate::runtime::Runtime;

/// How often a worker with requests waiting for a descriptor looks again (another worker's
/// requests ending free them without telling it).
const DESCRIPTOR_RETRY: std::time::Duration = std::time::Duration::from_millis(10);

/// The listen backlog of a worker's socket (see `listener.rs`): what one multishot accept may
/// take at once.
const QUEUE_MAX: usize = 4096;

struct Listener {
    /// The `[[listen]]` address this socket serves, as configured.
    address: SocketAddr,
    fd: Option<OwnedFd>,
    accept: Option<squall_uring::OpId>,
    /// Whether `accept` is a multishot one (far from the descriptor mark).
    multishot: bool,
    /// Set while accepting is paused: at the descriptor reserve's mark, or out of descriptors.
    paused_since: Option<Instant>,
}

/// What a worker lets in: client connections from its listeners, and requests to the
/// descriptors they are about to open. It owns the listening sockets and the queue of waiting
/// requests; an accepted socket and a request whose turn came are handed back to the loop,
/// which gives them to the client connections and the sessions.
pub(super) struct Admission {
    listeners: Vec<Listener>,
    /// Every worker's listeners share the descriptor reserve: the headroom a multishot accept
    /// needs counts them all.
    workers: usize,
    retry_at: Option<Instant>,
    /// When running out of descriptors was last logged.
    pause_logged_at: Option<Instant>,
    /// Proxied requests and file transfers waiting for a descriptor, in order.
    waiters: VecDeque<Waiter>,
}

impl Admission {
    pub(super) fn new(workers: usize) -> Admission {
        Admission {
            listeners: Vec::new(),
            workers: workers.max(1),
            retry_at: None,
            pause_logged_at: None,
            waiters: VecDeque::new(),
        }
    }

    /// Starts accepting on new listening sockets (at start-up and from a reload).
    pub(super) fn add(&mut self, io: &mut Io<'_>, listeners: Vec<(SocketAddr, OwnedFd)>) {
        for (address, fd) in listeners {
            self.listeners.push(Listener {
                address,
                fd: Some(fd),
                accept: None,
                multishot: false,
                paused_since: None,
            });
            self.arm(io, self.listeners.len() - 1);
        }
    }

    /// Stops accepting on the listeners configured as `address` and closes their sockets;
    /// connections they accepted go on. The entries stay, so accept tokens keep their index.
    /// Returns the connections that were waiting in the closed sockets' queues, with the
    /// listener each came from, for the loop to serve.
    pub(super) fn remove(&mut self, io: &mut Io<'_>, address: SocketAddr) -> Vec<(OwnedFd, usize)> {
        /// Connections taken from a closing listener's queue at most (a bound on the loop).
        const QUEUED_TAKEN_MAX: usize = 4096;
        let mut queued = Vec::new();
        for (index, listener) in self.listeners.iter_mut().enumerate() {
            if listener.address != address {
                continue;
            }
            if let Some(op) = listener.accept.take() {
                io.ring.cancel(op, Token::listener(0).raw());
            }
            listener.paused_since = None;
            let Some(fd) = listener.fd.take() else {
                continue;
            };
            // Closing a listening socket resets the connections the kernel completed but no
            // accept took yet: take them first, without blocking, and serve them.
            let socket = SockRef::from(&fd);
            if socket.set_nonblocking(true).is_ok() {
                while queued.len() < QUEUED_TAKEN_MAX {
                    match socket.accept() {
                        Ok((conn, _)) => queued.push((OwnedFd::from(conn), index)),
                        Err(_) => break,
                    }
                }
            }
            io.ring.close(fd, Token::listener(0).raw());
        }
        queued
    }

    /// A graceful stop: every listener stops accepting and closes.
    pub(super) fn close_all(&mut self, io: &mut Io<'_>) {
        for listener in &mut self.listeners {
            if let Some(op) = listener.accept.take() {
                io.ring.cancel(op, Token::listener(0).raw());
            }
            if let Some(fd) = listener.fd.take() {
                io.ring.close(fd, Token::listener(0).raw());
            }
        }
    }

    /// The address listener `index` was configured as.
    pub(super) fn address(&self, index: usize) -> SocketAddr {
        self.listeners[index].address
    }

    /// Arms listener `index`'s accept: multishot far from the descriptor mark, one connection at
    /// a time near it, none at it (then the listener is paused until connections close).
    fn arm(&mut self, io: &mut Io<'_>, index: usize) {
        let headroom = io.runtime.metrics.descriptors.headroom();
        let multishot = headroom > self.multishot_headroom();
        let listener = &mut self.listeners[index];
        let (Some(fd), None) = (&listener.fd, listener.accept) else {
            return;
        };
        if headroom == 0 {
            self.pause_at_mark(io, index);
            return;
        }
        let (fd, token) = (fd.as_raw_fd(), Token::listener(index).raw());
        listener.multishot = multishot;
        listener.accept = Some(if multishot {
            io.ring.accept_multi(fd, token)
        } else {
            io.ring.accept(fd, token)
        });
        self.publish_paused(io);
    }

    /// The headroom below which a multishot accept could pass the mark by a whole queue: every
    /// worker's queue on every listener.
    fn multishot_headroom(&self) -> usize {
        self.workers
            .saturating_mul(self.listeners.len().max(1))
            .saturating_mul(QUEUE_MAX)
    }

    /// Listener `index` stops accepting: the process holds as many client connections as the
    /// descriptor reserve allows. It resumes when one closes (`resume`) or on the retry.
    fn pause_at_mark(&mut self, io: &mut Io<'_>, index: usize) {
        self.mark_paused(io, index);
        if self.pause_log_due(io.now) {
            let budget = &io.runtime.metrics.descriptors;
            warn!(
                worker = io.worker,
                "accept paused: {} client connections open, the most the descriptor reserve \
                 allows ({}); resuming as connections close",
                budget.open(),
                budget.max()
            );
        }
        self.retry_at = Some(io.now + ACCEPT_RETRY);
        self.publish_paused(io);
    }

    /// Listener `index` is paused from now, unless it already was: counted once per pause.
    fn mark_paused(&mut self, io: &Io<'_>, index: usize) {
        let listener = &mut self.listeners[index];
        if listener.paused_since.is_none() {
            io.runtime.metrics.worker(io.worker).accept_pauses.inc();
            listener.paused_since = Some(io.now);
        }
    }

    /// Sets this worker's `squall_accept_paused` gauge: 1 while a listener waits to be re-armed.
    fn publish_paused(&self, io: &Io<'_>) {
        let paused = self
            .listeners
            .iter()
            .any(|l| l.paused_since.is_some() && l.accept.is_none() && l.fd.is_some());
        let gauge = &io.runtime.metrics.worker(io.worker).accept_paused;
        gauge.store(u64::from(paused), std::sync::atomic::Ordering::Relaxed);
    }

    /// An accept completed on listener `index`. Returns the new connection when there is
    /// `room` for it (not `draining`, below the worker's connection bound); the loop opens it
    /// and then calls `opened`. Otherwise the listener is re-armed, paused or left closed here.
    pub(super) fn accepted(
        &mut self,
        io: &mut Io<'_>,
        index: usize,
        result: io::Result<OwnedFd>,
        more: bool,
        room: bool,
        draining: bool,
    ) -> Option<OwnedFd> {
        if !more {
            self.listeners[index].accept = None;
        }
        match result {
            Ok(fd) if room => {
                self.listeners[index].paused_since = None;
                return Some(fd);
            }
            Ok(fd) => drop(fd),
            Err(e) if is_out_of_descriptors(&e) => {
                self.mark_paused(io, index);
                // At the limit, accepting flaps between paused and running as connections come
                // and go: one warning per minute says it all.
                if self.pause_log_due(io.now) {
                    warn!(
                        worker = io.worker,
                        "accept paused: {e}; resuming when descriptors free up"
                    );
                }
                self.retry_at = Some(io.now + ACCEPT_RETRY);
                self.publish_paused(io);
                return None;
            }
            // A listener closed by a reload or a drain has no socket left to re-arm on; one
            // cancelled to accept one connection at a time is re-armed below.
            Err(e) if e.raw_os_error() == Some(libc::ECANCELED) => {}
            Err(e) => debug!(worker = io.worker, "accept: {e}"),
        }
        if !more && !draining {
            self.arm(io, index);
        }
        None
    }

    /// The connection `accepted` returned for listener `index` was opened: near the mark the
    /// multishot accept is cancelled, and a finished accept is armed again.
    pub(super) fn opened(&mut self, io: &mut Io<'_>, index: usize, more: bool) {
        let listener = &self.listeners[index];
        if more
            && listener.multishot
            && let Some(op) = listener.accept
            && io.runtime.metrics.descriptors.headroom() <= self.multishot_headroom()
        {
            // Near the mark: one connection at a time from now on. The cancelled
            // accept's last completion re-arms it (`accepted`).
            io.ring.cancel(op, Token::listener(0).raw());
            self.listeners[index].multishot = false;
        }
        if !more {
            self.arm(io, index);
        }
    }

    /// Whether a listener is paused, waiting for a connection to close.
    pub(super) fn any_paused(&self) -> bool {
        self.listeners.iter().any(|l| l.paused_since.is_some())
    }

    /// Re-arms the paused listeners once the retry is due (not while draining).
    pub(super) fn retry(&mut self, io: &mut Io<'_>) {
        if self.retry_at.is_some_and(|at| at <= io.now) {
            self.retry_at = None;
            self.resume(io);
        }
    }

    /// Re-arms every paused listener.
    pub(super) fn resume(&mut self, io: &mut Io<'_>) {
        for index in 0..self.listeners.len() {
            if self.listeners[index].paused_since.is_some()
                && self.listeners[index].accept.is_none()
            {
                self.arm(io, index);
            }
        }
    }

    /// The next time admission must look again without an event: an accept retry, or a
    /// retry for requests waiting for a descriptor (another worker may free one).
    pub(super) fn next_wake(&self, now: Instant) -> Option<Instant> {
        let descriptor_retry = (!self.waiters.is_empty()).then(|| now + DESCRIPTOR_RETRY);
        match (descriptor_retry, self.retry_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Charges a request the descriptor it is about to open; false when it must wait (the
    /// room is full, or requests wait before it).
    pub(super) fn take_descriptor(&self, runtime: &Runtime) -> bool {
        self.waiters.is_empty() && runtime.metrics.descriptors.take()
    }

    /// Request `holder` ended: its charge is given back (a waiting request takes it at the
    /// end of the turn), or, never charged, it leaves the queue it may wait in, so that
    /// requests abandoned while the room is full cannot grow the queue without bound.
    pub(super) fn end_descriptor(&mut self, runtime: &Runtime, holder: Waiter, charged: bool) {
        if charged {
            runtime.metrics.descriptors.give();
        } else if !self.waiters.is_empty() {
            self.waiters.retain(|waiter| *waiter != holder);
        }
    }

    /// Queues `waiter` until a descriptor is free (`next_waiter`).
    pub(super) fn wait_for_descriptor(&mut self, io: &Io<'_>, waiter: Waiter) {
        io.runtime.metrics.worker(io.worker).descriptor_waits.inc();
        if self.pause_log_due(io.now) {
            let budget = &io.runtime.metrics.descriptors;
            warn!(
                worker = io.worker,
                "requests wait for a descriptor: {} client connections and {} requests in \
                 flight hold what the descriptor reserve leaves; going on as they end",
                budget.open(),
                budget.held()
            );
        }
        self.waiters.push_back(waiter);
    }

    /// The first waiting request, charged its descriptor, while one is free. The loop starts
    /// it, and gives the charge back if it is gone meanwhile.
    pub(super) fn next_waiter(&mut self, runtime: &Runtime) -> Option<Waiter> {
        if self.waiters.is_empty() || !runtime.metrics.descriptors.take() {
            return None;
        }
        self.waiters.pop_front()
    }

    /// Whether a pause (of accepting, or of requests waiting for a descriptor) is to be
    /// logged now: at most once per `PAUSE_LOG_INTERVAL`, which this call starts again.
    fn pause_log_due(&mut self, now: Instant) -> bool {
        let due = (self.pause_logged_at).is_none_or(|at| now >= at + PAUSE_LOG_INTERVAL);
        if due {
            self.pause_logged_at = Some(now);
        }
        due
    }
}

/// The trusted balancers of the listener configured as `address`, when it speaks the PROXY
/// protocol.
pub(super) fn proxy_protocol_from(
    runtime: &Runtime,
    address: SocketAddr,
) -> Option<std::sync::Arc<[IpNet]>> {
    let mut listeners = runtime.proxy_protocol.iter();
    listeners
        .find(|(a, _)| *a == address)
        .map(|(_, nets)| nets.clone())
}

/// The protocols the listener configured as `address` serves (HTTP/1.1 for one no longer
/// configured).
pub(super) fn listener_protocols(runtime: &Runtime, address: SocketAddr) -> Protocols {
    runtime
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

fn is_out_of_descriptors(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}
