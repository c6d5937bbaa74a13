//! A socket on the ring, as client and origin connections both hold one: its descriptor, the
//! armed receive, the one send in flight, and the count of operations the kernel has not
//! reported yet.
//!
//! Client sockets receive multishot: one armed receive delivers every buffer the kernel fills.
//! Origin sockets under a buffer budget receive a bounded amount per armed receive
//! ([`Socket::bounded_receives`]): a paused origin (its client reads slowly) then stops
//! within two buffers, where an unbounded multishot receive would go on filling buffers at the
//! origin's speed until its cancellation landed, and every one would be held for the client
//! (measured: up to 1.5 MiB per request on loopback). Where the kernel has multishot receives
//! with a total limit, the armed receive is multishot up to one buffer's bytes, then armed
//! again: small responses from a keep-alive origin share one receive instead of arming one
//! each (7% less CPU per proxied request, docs/PERFORMANCE.md); elsewhere it is a single
//! receive of one buffer.
//!
//! Why count: the ring owns an operation's buffers until its completion arrives, even after the
//! connection is gone, so a connection's slot may be reused only once every operation it
//! queued (connect, receive, send, close) has reported. Every submission here adds one and
//! every `on_*` report takes one away, so the rule is kept in one place rather than at each
//! call site; [`Socket::drained`] says when the slot may go.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use bytes::Bytes;
use squall_uring::{OpId, Ring};

use super::token::Token;

#[derive(Debug)]
pub struct Socket {
    /// The descriptor; `None` once its close is queued.
    fd: Option<OwnedFd>,
    /// A connection with no socket of its own (HTTP/3: its datagrams go through its QUIC
    /// listener's socket), open until closed.
    detached: bool,
    /// Whether it had a descriptor of its own (counted in the process's descriptors).
    own: bool,
    /// The armed multishot receive, until its last completion (`more` false) reports, also
    /// after a cancel.
    recv: Option<OpId>,
    /// The send or writev in flight; at most one, so bytes leave in order.
    send: Option<OpId>,
    /// Operations queued or in flight.
    ops: u32,
    /// Each armed receive takes a bounded amount (see the module docs).
    once: bool,
    /// The armed (or last) receive is a multishot one with a total limit.
    limited: bool,
}

impl Socket {
    pub fn new(fd: OwnedFd) -> Socket {
        Socket {
            fd: Some(fd),
            detached: false,
            own: true,
            recv: None,
            send: None,
            ops: 0,
            once: false,
            limited: false,
        }
    }

    /// A connection without a socket of its own: no operation is ever queued on it, and it is
    /// drained as soon as it is closed.
    pub fn detached() -> Socket {
        Socket {
            fd: None,
            detached: true,
            own: false,
            recv: None,
            send: None,
            ops: 0,
            once: false,
            limited: false,
        }
    }

    /// Each armed receive of the socket takes a bounded amount (see the module docs).
    pub fn bounded_receives(mut self) -> Socket {
        self.once = true;
        self
    }

    pub fn fd(&self) -> Option<&OwnedFd> {
        self.fd.as_ref()
    }

    fn raw(&self) -> RawFd {
        self.fd
            .as_ref()
            .map(AsRawFd::as_raw_fd)
            .expect("operations are queued only on an open socket")
    }

    /// Whether the socket had a descriptor of its own (not a detached one).
    pub fn owned_descriptor(&self) -> bool {
        self.own
    }

    /// True until the close is queued.
    pub fn is_open(&self) -> bool {
        self.fd.is_some() || self.detached
    }

    pub fn receiving(&self) -> bool {
        self.recv.is_some()
    }

    pub fn sending(&self) -> bool {
        self.send.is_some()
    }

    /// Starts a connect to `address`; [`Socket::on_connect`] when it reports.
    pub fn connect(&mut self, ring: &mut Ring, address: SocketAddr, token: Token) {
        ring.connect(self.raw(), address, token.raw());
        self.ops += 1;
    }

    pub fn on_connect(&mut self) {
        self.done();
    }

    /// Arms a receive (multishot, or a single one), unless one is armed (or still reporting
    /// its cancellation) or the socket is closing. True when one was armed now.
    pub fn arm_recv(&mut self, ring: &mut Ring, token: Token) -> bool {
        if self.recv.is_some() || self.fd.is_none() {
            return false;
        }
        let (fd, token) = (self.raw(), token.raw());
        self.limited = self.once && ring.multishot_limit();
        self.recv = Some(match (self.once, self.limited) {
            (true, true) => ring.recv_multi_limited(fd, token, ring.recv_buffer_bytes()),
            (true, false) => ring.recv_once(fd, token),
            (false, _) => ring.recv_multi(fd, token),
        });
        self.ops += 1;
        true
    }

    /// A receive completion: the last of its multishot (`more` false) disarms it.
    pub fn on_recv(&mut self, more: bool) {
        if !more {
            self.recv = None;
            self.done();
        }
    }

    /// Whether the last receive armed was a multishot one with a total limit: its `EINVAL`
    /// means the kernel has no such limit ([`squall_uring::Ring::refuse_multishot_limit`]).
    pub fn armed_limited(&self) -> bool {
        self.limited
    }

    /// Cancels the armed receive; it stays armed until its final completion reports.
    pub fn cancel_recv(&mut self, ring: &mut Ring, token: Token) {
        if let Some(op) = self.recv {
            ring.cancel(op, token.raw());
        }
    }

    /// Sends `buf`; the caller sends nothing else until [`Socket::on_send`].
    pub fn send(&mut self, ring: &mut Ring, buf: Bytes, token: Token) {
        debug_assert!(self.send.is_none(), "one send in flight at a time");
        self.send = Some(ring.send(self.raw(), buf, token.raw()));
        self.ops += 1;
    }

    /// Sends `bufs` in one writev; as [`Socket::send`].
    pub fn writev(&mut self, ring: &mut Ring, bufs: Vec<Bytes>, token: Token) {
        debug_assert!(self.send.is_none(), "one send in flight at a time");
        self.send = Some(ring.writev(self.raw(), bufs, token.raw()));
        self.ops += 1;
    }

    /// A send or writev reported.
    pub fn on_send(&mut self) {
        self.send = None;
        self.done();
    }

    /// Shuts the write side (the connection lingers, reading).
    pub fn shutdown_write(&self) -> bool {
        self.fd.as_ref().is_some_and(|fd| {
            socket2::SockRef::from(fd)
                .shutdown(std::net::Shutdown::Write)
                .is_ok()
        })
    }

    /// Cancels what is in flight and queues the close; [`Socket::on_close`] when it reports.
    pub fn close(&mut self, ring: &mut Ring, token: Token) {
        self.detached = false;
        for op in [self.recv, self.send].into_iter().flatten() {
            ring.cancel(op, token.raw());
        }
        if let Some(fd) = self.fd.take() {
            ring.close(fd, token.raw());
            self.ops += 1;
        }
    }

    pub fn on_close(&mut self) {
        self.done();
    }

    /// Closed, and every operation has reported: the slot may be reused.
    pub fn drained(&self) -> bool {
        !self.is_open() && self.ops == 0
    }

    fn done(&mut self) {
        debug_assert!(self.ops > 0, "a report for an operation never queued");
        self.ops = self.ops.saturating_sub(1);
    }

    pub fn check_invariants(&self) {
        let armed = u32::from(self.recv.is_some()) + u32::from(self.send.is_some());
        debug_assert!(self.ops >= armed, "ops {} < armed {armed}", self.ops);
    }
}
