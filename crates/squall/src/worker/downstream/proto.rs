//! What a client connection speaks, and the request state that goes with it: one request at a
//! time for HTTP/1.x ([`H1`]), a map per stream for HTTP/2 ([`H2`]). The connection
//! ([`Conn`](super::super::conn::Conn)) holds one [`Proto`] and asks it the questions its
//! timers and bounds need; nothing outside the protocol layer looks inside.

use std::time::{Duration, Instant};

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use squall_h1::{RequestDecoder, RequestHead};
use squall_h2::Connection;
use squall_proxy::ProxyRoute;

use super::super::IDLE_GOAWAY_GRACE;
use super::super::ids::{FileId, SessionId};
use super::super::parked::Parked;

/// A client connection's protocol, with its request state.
#[derive(Default)]
pub enum Proto {
    /// Not chosen yet: the TLS handshake runs, or too few bytes arrived to tell an h2c
    /// preface from an HTTP/1.1 request.
    #[default]
    Undecided,
    /// HTTP/1.x (boxed with the H2 variant, so that the connection stays small).
    H1(Box<H1>),
    /// HTTP/2, with its streams.
    H2(Box<H2>),
    /// HTTP/3: a QUIC connection (the worker's `Quic` part moves its datagrams) with its
    /// streams.
    H3(Box<H3>),
}

/// What a connection's deadline, once reached, calls for (see [`Proto::at_deadline`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// Not idle after all (a request in progress, or activity since): compute it again.
    Later,
    /// The protocol's own timers are due (HTTP/2: a stream stalled on a zero window; HTTP/3:
    /// QUIC's loss detection, acknowledgments and idle timeout); `again`: the connection's
    /// deadline is computed again (it waits on Squall, such as a password check, or its
    /// timers are QUIC's, which decide its idleness themselves).
    Timers { again: bool },
    /// The grace after an idle GOAWAY is over: what is still in flight is cut.
    Cut,
    /// An idle HTTP/2 connection: GOAWAY(NO_ERROR) first, then close.
    GoAway,
    /// Idle, or a head that did not finish in time (the caller tells them apart).
    Idle,
}

impl Proto {
    pub fn h1(&self) -> Option<&H1> {
        match self {
            Proto::H1(h1) => Some(h1),
            _ => None,
        }
    }

    pub fn h1_mut(&mut self) -> Option<&mut H1> {
        match self {
            Proto::H1(h1) => Some(h1),
            _ => None,
        }
    }

    pub fn h2_mut(&mut self) -> Option<&mut H2> {
        match self {
            Proto::H2(h2) => Some(h2),
            _ => None,
        }
    }

    /// A new HTTP/3 connection's protocol state.
    pub fn h3(h3: H3) -> Proto {
        Proto::H3(Box::new(h3))
    }

    /// Takes an HTTP/3 connection's state out (leaving `Undecided`); `None`, taking nothing,
    /// for a connection QUIC does not carry.
    pub fn take_h3(&mut self) -> Option<Box<H3>> {
        match std::mem::take(self) {
            Proto::H3(h3) => Some(h3),
            other => {
                *self = other;
                None
            }
        }
    }

    pub fn h3_mut(&mut self) -> Option<&mut H3> {
        match self {
            Proto::H3(h3) => Some(h3),
            _ => None,
        }
    }

    /// The per-stream request state of a multiplexed connection (HTTP/2 or HTTP/3).
    pub fn streams(&self) -> Option<&Streams> {
        match self {
            Proto::H2(h2) => Some(&h2.streams),
            Proto::H3(h3) => Some(&h3.streams),
            Proto::H1(_) | Proto::Undecided => None,
        }
    }

    pub fn streams_mut(&mut self) -> Option<&mut Streams> {
        match self {
            Proto::H2(h2) => Some(&mut h2.streams),
            Proto::H3(h3) => Some(&mut h3.streams),
            Proto::H1(_) | Proto::Undecided => None,
        }
    }

    /// True when no request is in progress or waiting; `rbuf_empty`: no received byte waits
    /// to be decoded.
    pub fn is_idle(&self, rbuf_empty: bool) -> bool {
        match self {
            Proto::Undecided => rbuf_empty,
            Proto::H1(h1) => h1.is_idle(rbuf_empty),
            Proto::H2(h2) => h2.is_idle() && rbuf_empty,
            Proto::H3(h3) => {
                h3.streams.is_idle() && h3.held.is_empty() && h3.quic.h3_ref().is_idle()
            }
        }
    }

    /// Gives back what an idle connection's protocol state keeps for its next requests.
    pub fn shrink_idle(&mut self) {
        if let Proto::H2(h2) = self {
            h2.conn.shrink_idle();
        }
    }

    /// True when part of an HTTP/1.x request head (or of whatever decides the protocol) has
    /// arrived and is not complete: the header timeout runs.
    pub fn head_in_progress(&self, rbuf_empty: bool) -> bool {
        match self {
            Proto::Undecided => !rbuf_empty,
            Proto::H1(h1) => h1.head_in_progress(rbuf_empty),
            Proto::H2(_) | Proto::H3(_) => false,
        }
    }

    /// Response bytes queued on HTTP/2 or HTTP/3 streams under flow control (none on
    /// HTTP/1.x).
    pub fn queued_bytes(&self) -> usize {
        match self {
            Proto::H2(h2) => h2.conn.queued_data_total(),
            Proto::H3(h3) => h3.quic.h3_ref().queued_data_total(),
            Proto::H1(_) | Proto::Undecided => 0,
        }
    }

    /// True while a request of this connection waits for more of the client's bytes (its
    /// head, body or trailers): once the client sends no more, it can never be answered.
    pub fn waits_on_client(&self) -> bool {
        match self {
            Proto::Undecided => false,
            Proto::H1(h1) => {
                h1.request.is_some() || h1.forwarding || !h1.decoder.is_between_messages()
            }
            Proto::H2(h2) => !h2.streams.pending.is_empty(),
            Proto::H3(h3) => !h3.streams.pending.is_empty() || !h3.held.is_empty(),
        }
    }

    /// True while a proxied request answers this connection.
    pub fn has_sessions(&self) -> bool {
        match self {
            Proto::Undecided => false,
            Proto::H1(h1) => h1.exchange.is_some(),
            Proto::H2(h2) => !h2.streams.exchanges.is_empty(),
            Proto::H3(h3) => !h3.streams.exchanges.is_empty(),
        }
    }

    /// Drops what waits on a closing connection: a request whose body was arriving and
    /// requests parked on the cache (a later wake-up finds nothing to resume).
    pub fn forget_waiting(&mut self) {
        match self {
            Proto::Undecided => {}
            Proto::H1(h1) => {
                h1.request = None;
                h1.parked = None;
            }
            Proto::H2(h2) => h2.streams.parked.clear(),
            Proto::H3(h3) => h3.streams.parked.clear(),
        }
    }

    /// When an open connection that is not reading a head must next be looked at: its idle
    /// limit from `last_activity` (from `now` while Squall, not the client, takes its time:
    /// a password check, or, `origin_wait`, a proxied request waiting on its origin, whose
    /// own timers bound it; the grace after an idle GOAWAY once one was sent), or sooner for
    /// an HTTP/2 timer or a request parked on the cache whose wait ends.
    pub fn deadline(
        &self,
        last_activity: Instant,
        now: Instant,
        idle_timeout: Duration,
        origin_wait: bool,
    ) -> Instant {
        let idle = match self {
            Proto::H2(h2) => match h2.streams.idle_goaway {
                Some(sent) => sent + IDLE_GOAWAY_GRACE,
                None if h2.streams.verifying > 0 || origin_wait => now + idle_timeout,
                None => last_activity + idle_timeout,
            },
            // QUIC closes an idle connection itself (its max_idle_timeout is `idle_timeout`):
            // this deadline only runs its timers.
            Proto::H3(h3) => h3.due.unwrap_or(now + idle_timeout),
            _ if origin_wait => now + idle_timeout,
            _ => last_activity + idle_timeout,
        };
        let sooner = match self {
            Proto::Undecided => None,
            Proto::H1(h1) => h1.parked.as_ref().map(|p| p.until),
            Proto::H2(h2) => {
                let parked = h2.streams.parked.values().map(|p| p.until).min();
                [h2.conn.next_deadline(), parked]
                    .into_iter()
                    .flatten()
                    .min()
            }
            Proto::H3(h3) => h3.streams.parked.values().map(|p| p.until).min(),
        };
        sooner.map_or(idle, |at| at.min(idle))
    }

    /// What an open connection's deadline calls for at `now`; `active_since_idle`: bytes
    /// moved within the idle limit; `origin_wait`: a proxied request waits on its origin.
    pub fn at_deadline(&self, now: Instant, active_since_idle: bool, origin_wait: bool) -> Due {
        let active = active_since_idle || origin_wait;
        match self {
            Proto::H2(h2)
                if (h2.streams.idle_goaway).is_some_and(|t| t + IDLE_GOAWAY_GRACE <= now) =>
            {
                Due::Cut
            }
            Proto::H1(h1) if (h1.parked.is_some() || h1.exchange.is_some()) && active => Due::Later,
            // A stream waits for its password check or its origin, not for the client: not
            // idle. Its HTTP/2 timers (stalled streams) still run.
            Proto::H2(h2) if h2.streams.verifying > 0 || origin_wait => Due::Timers { again: true },
            // Not idle: an HTTP/2 timer (a stalled stream) is due.
            Proto::H2(_) if active_since_idle => Due::Timers { again: false },
            Proto::H3(_) => Due::Timers { again: true },
            Proto::H2(h2) if h2.streams.idle_goaway.is_none() => Due::GoAway,
            _ => Due::Idle,
        }
    }
}

/// An HTTP/1.x connection's request state: its decoder and the one request it answers at a
/// time (pipelined ones wait in the receive buffer). Its HTTP/2 counterpart is
/// [`super::h2::H2`], with a map per slot.
pub struct H1 {
    pub decoder: RequestDecoder,
    /// A request head whose body is still arriving; answered at its end.
    pub request: Option<RequestHead>,
    /// The cached route of `request`, which goes to the cache at the request's end.
    pub cached_route: Option<Arc<ProxyRoute>>,
    /// The route that answers `request` at its end (routed once, at its head).
    pub answer_route: Option<u32>,
    /// The session of the proxied request in progress, if any (one at a time: later ones
    /// wait in the receive buffer).
    pub exchange: Option<SessionId>,
    /// The request being decoded is a proxied one: its body and end go to its session (or
    /// are dropped, if the session ended first).
    pub forwarding: bool,
    /// A request waiting for another's origin fetch of the same object (see `cache.rs`).
    pub parked: Option<Box<Parked>>,
    /// The static file being sent (see `files.rs`): later requests wait in the buffer.
    pub file: Option<FileId>,
    /// A request waits for its Basic credentials to be checked: decoding waits.
    pub verifying: bool,
}

impl H1 {
    pub fn new(decoder: RequestDecoder) -> H1 {
        H1 {
            decoder,
            request: None,
            cached_route: None,
            answer_route: None,
            exchange: None,
            forwarding: false,
            parked: None,
            file: None,
            verifying: false,
        }
    }

    /// True when no request is in progress or waiting: `rbuf_empty` says whether the
    /// connection holds received bytes not yet decoded.
    pub fn is_idle(&self, rbuf_empty: bool) -> bool {
        self.is_between_requests() && rbuf_empty && self.decoder.is_between_messages()
    }

    /// True when part of a request head has arrived and the head is not complete.
    pub fn head_in_progress(&self, rbuf_empty: bool) -> bool {
        self.is_between_requests() && !(rbuf_empty && self.decoder.is_between_messages())
    }

    fn is_between_requests(&self) -> bool {
        self.request.is_none()
            && self.exchange.is_none()
            && self.parked.is_none()
            && self.file.is_none()
    }
}

/// The per-stream request state of a multiplexed connection (HTTP/2 or HTTP/3), keyed by
/// stream id (HTTP/2's 31-bit ids and QUIC's 62-bit ones alike).
#[derive(Default)]
pub struct Streams {
    /// Requests whose body or trailers are still arriving: answered at their end, as HTTP/1.1
    /// answers `respond` routes after the body. Bounded by the streams the connection admits.
    pub pending: HashMap<u64, (RequestHead, Option<u32>)>,
    /// Streams forwarded to an origin (`proxy` routes), one session each.
    pub exchanges: HashMap<u64, SessionId>,
    /// Streams waiting for another request's fetch of the same object.
    pub parked: HashMap<u64, Box<crate::worker::parked::Parked>>,
    /// Streams answered with a static file (`root` routes), one transfer each.
    pub files: HashMap<u64, FileId>,
    /// When `idle_timeout` sent this connection its GOAWAY: it is closed `IDLE_GOAWAY_GRACE`
    /// later at the latest.
    pub idle_goaway: Option<Instant>,
    /// Streams whose credentials a verifier thread is checking (`auth_basic`): the connection
    /// is not idle while one waits, so neither the idle GOAWAY nor a drain cuts it off.
    pub verifying: usize,
    /// Tunnel bytes an extended CONNECT's client sent before its tunnel began, kept (their
    /// window not given back, which bounds them) until it does (`tunnel.rs`).
    pub early: HashMap<u64, Vec<(Bytes, bool)>>,
}

impl Streams {
    /// No request of the connection's is in progress or waiting on Squall.
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty()
            && self.exchanges.is_empty()
            && self.parked.is_empty()
            && self.files.is_empty()
            && self.verifying == 0
    }

    /// Forgets what a stream the client reset had; gives back its session and file, which
    /// the loop ends.
    pub fn reset(&mut self, stream: u64) -> (Option<SessionId>, Option<FileId>) {
        self.pending.remove(&stream);
        self.parked.remove(&stream);
        self.early.remove(&stream);
        let file = self.files.remove(&stream);
        (self.exchanges.get(&stream).copied(), file)
    }
}

/// The HTTP/3 side of a connection: QUIC and HTTP/3 together (`squall_quic::Conn`), which
/// of the worker's QUIC listeners it came on, and its name there.
pub struct H3 {
    pub quic: Box<squall_quic::Conn>,
    pub listener: usize,
    pub handle: squall_quic::ConnectionHandle,
    pub streams: Streams,
    /// When QUIC's timers next need running, as of the last time it was driven.
    pub due: Option<Instant>,
    /// Heads of requests with a safe method and no length whose stream has not ended yet
    /// (QUIC may carry the FIN in a later packet than the HEADERS): held until their end
    /// says they have no body, or their first body bytes say they do (`h3.rs`).
    pub held: HashMap<u64, RequestHead>,
    /// An event of the HTTP/3 connection taken early (the first body bytes of a held
    /// request), handed out after the head it follows.
    pub stash: Option<squall_h3::server::Event>,
}

impl H3 {
    pub fn new(
        quic: Box<squall_quic::Conn>,
        listener: usize,
        handle: squall_quic::ConnectionHandle,
    ) -> H3 {
        H3 {
            quic,
            listener,
            handle,
            streams: Streams::default(),
            due: None,
            held: HashMap::new(),
            stash: None,
        }
    }
}

/// The HTTP/2 side of a connection.
pub struct H2 {
    pub conn: Connection,
    pub streams: Streams,
}

impl H2 {
    pub fn new(conn: Connection) -> H2 {
        H2 {
            conn,
            streams: Streams::default(),
        }
    }

    pub fn is_idle(&self) -> bool {
        self.streams.is_idle() && self.conn.is_idle()
    }
}
