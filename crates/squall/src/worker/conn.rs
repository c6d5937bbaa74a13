//! One client connection's state, as the worker sees it between completions.
//!
//! A connection moves Open → Lingering → Closed. Open: requests are decoded and answered in
//! order. Lingering: the last response is sent, our write side is shut, and we read and discard
//! until the client closes or a short timer ends it: closing a socket with unread input makes
//! the kernel send RST, which can destroy the error response the client has not read yet (the
//! reason for nginx's `lingering_close`). Closed: the close is queued and the slot waits for every
//! in-flight operation to report before it is reused, because the ring owns their buffers.

use std::os::fd::OwnedFd;
use std::time::Instant;

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use squall_tls::TlsConn;

use super::socket::Socket;
use crate::worker::downstream::proto::Proto;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Open,
    Lingering,
    Closed,
}

pub struct Conn {
    /// The socket and the ring operations on it (receive, send, close).
    pub socket: Socket,
    pub generation: u32,
    pub phase: Phase,
    /// Received bytes not yet decoded.
    pub rbuf: BytesMut,
    /// Encoded responses not yet handed to the ring (plaintext, for TLS connections).
    pub out: BytesMut,
    /// Large shared pieces (cache entry bodies, HTTP/2 DATA, proxied bodies) queued by
    /// reference, in order, before what `out` holds; cleartext connections only.
    pub chain: Chain,
    /// The TLS session on a `tls = true` listener; boxed, as most of it is cold.
    pub tls: Option<Box<TlsConn>>,
    /// TLS records (handshake, encrypted responses, alerts) not yet handed to the ring.
    pub wire: BytesMut,
    /// Bytes of the send or writev in flight: the ring holds them until the client takes them.
    pub in_flight: usize,
    /// What this connection is charged in the process's count of buffered response bytes
    /// (`Metrics::buffered`): its [`Conn::held_bytes`] when last accounted.
    pub charged: usize,
    /// Origin bytes the sessions answering this connection hold undecoded: not charged here
    /// (each session charges its own) but part of what the connection holds for its bounds.
    pub session_bytes: usize,
    /// Counted in the process's connections answered by proxied responses
    /// (`BufferedBytes::responders`): a session answers it.
    pub responding: bool,
    /// Queued on the worker's ready list (see `Worker::schedule`).
    pub scheduled: bool,
    /// Decoding stopped for good: close once `out` is sent (Connection: close, an error).
    pub close_after: bool,
    /// The client sends no more (its end of stream, or TLS close_notify): the requests it
    /// sent are answered, then the connection closes (`Clients::flush_out`).
    pub peer_done: bool,
    /// The last response was cut short: once what is queued has left, close at once (no
    /// linger, no TLS close_notify), so the client sees a truncated response, never a whole
    /// one.
    pub cut: bool,
    /// Decoding paused because `out` is full; resumed when a send completes.
    pub blocked: bool,
    /// The socket is lent to a static file's splice (`files/splice.rs`): nothing else is
    /// sent until the transfer ends.
    pub lent: bool,
    /// The socket was made nonblocking (for a splice).
    pub nonblocking: bool,
    /// A tunnel's origin has the high-water mark unsent: the client's receive is not re-armed
    /// until it drains (`tunnel.rs`).
    pub reads_paused: bool,
    /// When the first byte of the current request head arrived (the slowloris clock).
    pub head_started: Option<Instant>,
    /// True until the first request head has begun (a new connection's wait counts as a head).
    pub fresh: bool,
    /// The protocols the listener serves.
    pub protocols: crate::listener::Protocols,
    /// The protocol this connection speaks, once chosen, with its request state.
    pub proto: Proto,
    /// The `Alt-Svc` field value its HTTP/1.1 and HTTP/2 responses carry (its listener also
    /// serves HTTP/3), if any.
    pub alt_svc: Option<Bytes>,
    /// The client's address, read at accept only when the access log needs it; on a PROXY
    /// protocol listener, the address the balancer's header carries.
    pub peer: Option<std::net::SocketAddr>,
    /// On a PROXY protocol listener, the bytes received until the header is whole (`None`
    /// once it was taken, and on other listeners).
    pub proxy_header: Option<Vec<u8>>,
    /// The address counted in the client table at accept, to uncount at close.
    pub counted_ip: Option<std::net::IpAddr>,
    /// What the next access log line adds (upstream time, cache status): set just before the
    /// response is logged, taken when it is.
    pub log_note: LogNote,
    /// When the head of the request being answered began to arrive (for the access log).
    pub request_started: Instant,
    /// When the connection was accepted.
    pub accepted_at: Instant,
    /// Last time bytes arrived or a send completed.
    pub last_activity: Instant,
    /// When this connection must be acted on (see `Worker::on_deadline`).
    pub deadline: Instant,
    /// Due time of the earliest timer entry filed for this connection, if one is filed.
    pub timer_due: Option<Instant>,
    /// Where giving back an idle connection's buffers stands (see [`Shrink`]).
    pub shrink: Shrink,
}

/// When an idle connection gives its buffers back ([`Conn::shrink_idle`]): a moment after it
/// went idle ([`SHRINK_IDLE_AFTER`]), not at once, so that a client between two bursts of
/// requests (an HTTP/2 client with ten in flight goes idle after each ten) does not give
/// them back and take them again each time: that was most of the allocations per request
/// left in a small HTTP/2 answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shrink {
    /// Requests are in progress, or bytes wait to be read or sent.
    Busy,
    /// Idle since a moment before this instant, when the buffers go back.
    At(Instant),
    /// Given back; nothing to do until the connection is busy again.
    Done,
}

/// How long a connection stays idle before it gives its buffers back.
pub const SHRINK_IDLE_AFTER: std::time::Duration = std::time::Duration::from_millis(500);

impl Shrink {
    /// The state once the connection's deadline is recomputed at `now`, `idle` or not: a
    /// connection that just went idle gives its buffers back `SHRINK_IDLE_AFTER` later.
    pub fn next(self, idle: bool, now: Instant) -> Shrink {
        match (idle, self) {
            (false, _) => Shrink::Busy,
            (true, Shrink::Busy) => Shrink::At(now + SHRINK_IDLE_AFTER),
            (true, shrink) => shrink,
        }
    }

    /// The connection's deadline `due`, or the moment its buffers go back if that is sooner.
    pub fn deadline(self, due: Instant) -> Instant {
        match self {
            Shrink::At(at) => due.min(at),
            Shrink::Busy | Shrink::Done => due,
        }
    }

    /// At `now`: `None` when the buffers are not due to go back; else whether they go back
    /// (the connection is still `idle`) and the state after.
    pub fn fire(self, idle: bool, now: Instant) -> Option<(bool, Shrink)> {
        match self {
            Shrink::At(at) if at <= now && idle => Some((true, Shrink::Done)),
            Shrink::At(at) if at <= now => Some((false, Shrink::Busy)),
            _ => None,
        }
    }
}

impl Conn {
    pub fn new(fd: OwnedFd, generation: u32, tls: Option<Box<TlsConn>>, now: Instant) -> Conn {
        Conn::new_with(Socket::new(fd), generation, tls, now)
    }

    fn new_with(socket: Socket, generation: u32, tls: Option<Box<TlsConn>>, now: Instant) -> Conn {
        Conn {
            socket,
            generation,
            phase: Phase::Open,
            rbuf: BytesMut::new(),
            out: BytesMut::new(),
            chain: Chain::default(),
            tls,
            wire: BytesMut::new(),
            in_flight: 0,
            charged: 0,
            session_bytes: 0,
            responding: false,
            scheduled: false,
            close_after: false,
            peer_done: false,
            cut: false,
            blocked: false,
            lent: false,
            nonblocking: false,
            reads_paused: false,
            head_started: None,
            fresh: true,
            protocols: crate::listener::Protocols::default(),
            proto: Proto::default(),
            alt_svc: None,
            peer: None,
            proxy_header: None,
            counted_ip: None,
            log_note: LogNote::default(),
            request_started: now,
            accepted_at: now,
            last_activity: now,
            deadline: now,
            timer_due: None,
            shrink: Shrink::Busy,
        }
    }

    /// The slot of a connection without a socket of its own (HTTP/3: its QUIC listener's
    /// carries its datagrams), its protocol `proto` chosen and its handshake done by QUIC.
    pub fn detached(generation: u32, proto: Proto, now: Instant) -> Conn {
        let mut conn = Conn::new_with(Socket::detached(), generation, None, now);
        conn.proto = proto;
        conn.fresh = false;
        conn
    }

    /// True when no request is in progress and nothing is left to send: safe to close at once.
    pub fn is_idle(&self) -> bool {
        self.proto.is_idle(self.rbuf.is_empty())
            && self.unsent_bytes() == 0
            && !self.socket.sending()
    }

    /// Gives back buffer memory an idle keep-alive connection does not need, so that 10,000 of
    /// them cost little more than their slab entries. Called once the connection has been
    /// idle for a moment ([`Shrink`]), not after every read: re-allocating a buffer each
    /// request would cost more than it saves.
    pub fn shrink_idle(&mut self) {
        const KEEP_BYTES: usize = 4096;
        if self.rbuf.is_empty() && self.rbuf.capacity() > KEEP_BYTES {
            self.rbuf = BytesMut::new();
        }
        if self.out.is_empty() && self.out.capacity() > KEEP_BYTES {
            self.out = BytesMut::new();
        }
        if self.wire.is_empty() && self.wire.capacity() > KEEP_BYTES {
            self.wire = BytesMut::new();
        }
        if let Some(tls) = &mut self.tls {
            tls.shrink();
        }
        self.proto.shrink_idle();
    }

    /// Adds the `Alt-Svc` line, if the connection has one, to the HTTP/1.1 response head
    /// written into `out` from `start` (after its status line). Not for 1xx heads.
    pub fn alt_svc_h1(&mut self, start: usize) {
        let Some(value) = &self.alt_svc else {
            return;
        };
        let Some(end) = memchr::memmem::find(&self.out[start..], b"\r\n") else {
            return;
        };
        let tail = self.out.split_off(start + end + 2);
        self.out.extend_from_slice(b"alt-svc: ");
        self.out.extend_from_slice(value);
        self.out.extend_from_slice(b"\r\n");
        self.out.unsplit(tail);
    }

    /// Bytes produced but not yet handed to the ring.
    pub fn unsent_bytes(&self) -> usize {
        self.out.len() + self.wire.len() + self.chain.bytes
    }

    /// Brings this connection's charge in the process's count of buffered response bytes
    /// (`limits.buffer_memory_max`) up to date with what it holds now, and whether it is
    /// answering a proxied request.
    pub fn account(&mut self, buffered: crate::metrics::WorkerBuffered<'_>) {
        let held = self.held_bytes();
        let before = std::mem::replace(&mut self.charged, held);
        buffered.charge(before, held, true);
        let responding = self.proto.has_sessions();
        if responding != std::mem::replace(&mut self.responding, responding) {
            buffered.set_responding(responding);
        }
    }

    /// The client sends no more (its end of stream, or TLS close_notify). A proxied request in
    /// progress is given up, as nginx does (`proxy_ignore_client_abort off`): a client that
    /// closed may be gone altogether, which only a send would tell, and its origin may keep
    /// the connection and its buffers for long. What else it asked for (fixed answers,
    /// static files, cache hits, requests waiting in the receive buffer) is answered, then the
    /// connection closes (`Clients::flush_out`).
    pub fn peer_finished(&mut self) {
        if self.proto.has_sessions() {
            self.close_after = true;
        } else {
            self.peer_done = true;
        }
    }

    /// Response bytes this connection holds for its client: unsent, in flight, and queued on
    /// its HTTP/2 streams under flow control.
    pub fn held_bytes(&self) -> usize {
        self.unsent_bytes() + self.in_flight + self.proto.queued_bytes()
    }

    /// True when part of a request head has arrived and the head is not complete.
    pub fn head_in_progress(&self) -> bool {
        self.proto.head_in_progress(self.rbuf.is_empty())
    }

    /// Checks the relations the worker relies on; called by tests and debug builds.
    pub fn check_invariants(&self) {
        debug_assert_eq!(self.phase == Phase::Closed, !self.socket.is_open());
        self.socket.check_invariants();
    }
}

/// The parts of an access log line only some responses have.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogNote {
    pub upstream: Option<std::time::Duration>,
    pub cache: Option<&'static str>,
    /// The route that answered, for the per-route counters.
    pub route: Option<u32>,
    /// The id a proxied request was forwarded with; others get one when logged.
    pub request_id: Option<u128>,
}

/// Pieces at or above this size go out by reference (writev); smaller ones are copied, since an
/// iovec and a reference count cost more than copying a few hundred bytes.
const SHARED_COPY_BYTES_MAX: usize = 2048;

/// Output queued by reference: what a cleartext connection sends with one writev.
#[derive(Default)]
pub struct Chain {
    pub pieces: VecDeque<Bytes>,
    /// Their total length.
    pub bytes: usize,
}

impl Chain {
    /// Appends shared bytes after what `out` holds: copied into `out` when small or when
    /// `copy` (TLS encrypts from a copy anyway), else queued by reference behind `out`'s
    /// bytes so far.
    pub fn push(&mut self, out: &mut BytesMut, data: Bytes, copy: bool) {
        if copy || data.len() < SHARED_COPY_BYTES_MAX {
            out.extend_from_slice(&data);
            return;
        }
        if !out.is_empty() {
            self.push_back(out.split().freeze());
        }
        self.push_back(data);
    }

    fn push_back(&mut self, piece: Bytes) {
        self.bytes += piece.len();
        self.pieces.push_back(piece);
    }

    /// Takes at most `max` pieces to send, and `out`'s bytes after them if there is room.
    pub fn take(&mut self, out: &mut BytesMut, max: usize) -> Vec<Bytes> {
        if !out.is_empty() {
            self.push_back(out.split().freeze());
        }
        let count = self.pieces.len().min(max);
        let taken: Vec<Bytes> = self.pieces.drain(..count).collect();
        self.bytes -= taken.iter().map(Bytes::len).sum::<usize>();
        taken
    }

    /// Puts back what a partial writev left unsent, ahead of everything queued since.
    pub fn unsent(&mut self, bufs: Vec<Bytes>, mut sent: usize) {
        let mut rest = Vec::new();
        for buf in bufs {
            if sent >= buf.len() {
                sent -= buf.len();
            } else {
                rest.push(buf.slice(sent..));
                sent = 0;
            }
        }
        for piece in rest.into_iter().rev() {
            self.bytes += piece.len();
            self.pieces.push_front(piece);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An idle connection's buffers go back `SHRINK_IDLE_AFTER` after it went idle, once per
    /// idle spell, never while it is busy; going busy in between starts the wait again, and
    /// the moment is the connection's deadline only when it is sooner.
    #[test]
    fn idle_buffers_go_back_a_moment_after_the_connection_went_idle() {
        let t0 = Instant::now();
        let later = |ms| t0 + std::time::Duration::from_millis(ms);
        let due = later(60_000);
        let shrink = Shrink::Busy.next(true, t0);
        assert_eq!(shrink, Shrink::At(t0 + SHRINK_IDLE_AFTER));
        assert_eq!(shrink.deadline(due), t0 + SHRINK_IDLE_AFTER);
        assert_eq!(
            shrink.deadline(later(1)),
            later(1),
            "a sooner deadline stays"
        );
        assert_eq!(
            shrink.next(true, later(100)),
            shrink,
            "still idle: same moment"
        );
        assert_eq!(shrink.fire(true, later(100)), None, "not yet");
        // Busy in between: the wait starts again when it is idle again.
        let busy = shrink.next(false, later(200));
        assert_eq!((busy, busy.deadline(due)), (Shrink::Busy, due));
        let again = busy.next(true, later(300));
        assert_eq!(again, Shrink::At(later(300) + SHRINK_IDLE_AFTER));
        assert_eq!(again.fire(true, later(700)), None);
        let (given, done) = again.fire(true, later(800)).unwrap();
        assert!(given);
        assert_eq!((done, done.deadline(due)), (Shrink::Done, due));
        assert_eq!(
            done.next(true, later(900)),
            Shrink::Done,
            "once per idle spell"
        );
        assert_eq!(done.fire(true, later(5_000)), None);
        // Due while busy (the deadline was not recomputed): nothing goes back.
        assert_eq!(again.fire(false, later(900)), Some((false, Shrink::Busy)));
    }

    #[test]
    fn small_pieces_are_copied_and_large_ones_keep_their_order() {
        let mut out = BytesMut::from(&b"head"[..]);
        let mut chain = Chain::default();
        chain.push(&mut out, Bytes::from_static(b"tiny"), false);
        let big = Bytes::from(vec![b'x'; SHARED_COPY_BYTES_MAX]);
        chain.push(&mut out, big.clone(), false);
        out.extend_from_slice(b"tail");
        assert_eq!(chain.bytes, 8 + big.len());
        let taken = chain.take(&mut out, 16);
        assert_eq!(
            taken,
            vec![
                Bytes::from_static(b"headtiny"),
                big,
                Bytes::from_static(b"tail")
            ]
        );
        assert!(chain.is_empty() && out.is_empty());
        assert_eq!(chain.bytes, 0);
    }

    #[test]
    fn a_partial_writev_puts_the_rest_back_in_front() {
        let mut chain = Chain::default();
        let mut out = BytesMut::new();
        chain.push(&mut out, Bytes::from_static(b"later"), true);
        let bufs = vec![Bytes::from_static(b"abc"), Bytes::from_static(b"defg")];
        chain.unsent(bufs, 4);
        assert_eq!(chain.bytes, 3);
        let taken = chain.take(&mut out, 16);
        assert_eq!(
            taken,
            vec![Bytes::from_static(b"efg"), Bytes::from_static(b"later")]
        );
    }

    #[test]
    fn take_stops_at_the_writev_limit() {
        let mut chain = Chain::default();
        let mut out = BytesMut::new();
        for _ in 0..5 {
            chain.push(&mut out, Bytes::from(vec![1; SHARED_COPY_BYTES_MAX]), false);
        }
        assert_eq!(chain.take(&mut out, 3).len(), 3);
        assert_eq!(chain.bytes, 2 * SHARED_COPY_BYTES_MAX);
    }
}
