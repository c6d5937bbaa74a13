//! The exchange: one proxied request's life, from its head to the last byte of the response,
//! as a sans-IO state machine.
//!
//! Why a state machine: the decisions of a proxied request (which server, when to retry, 502
//! or 504, when to stop reading a side that outruns the other, how to frame the response for
//! the client, whether the origin connection may be kept) are the proxy's whole job, and they
//! must be testable byte by byte on a virtual clock. So, as quinn-proto's `Connection` and
//! `squall-h2`'s connection do, the exchange owns no socket, no ring and no clock: the driver
//! feeds it events (`on_*` methods, each given `now` where time matters) and runs the
//! [`Action`]s it queues, in order, from [`Exchange::poll_action`]. The balancer, the pool and
//! the sockets stay with the driver; the exchange asks for them through actions.
//!
//! # One request, as the driver runs it
//! ```text
//! let mut ex = Exchange::new(head, route, client, config, now);
//! loop {
//!     while let Some(action) = ex.poll_action() {
//!         match action {
//!             Action::Pick => ex.on_pick(group.pick(key, now, ex.tried()), now),
//!             Action::Connect { server, pooled } => pooled conn? ex.on_origin_connected(true, now)
//!                                                   : start a connect,
//!             Action::WriteOrigin(bytes) => send, then ex.on_origin_sent(n, now),
//!             Action::Client(to_client) => the downstream writes it,
//!             ...
//!         }
//!     }
//!     wait for I/O or ex.next_deadline(); feed what happened back as on_* events
//!     if ex.is_finished() { break }
//! }
//! ```
//! The rules the exchange applies live in `request.rs` (picking, connecting, the request and
//! its body, failures and retries) and `response.rs` (the response, re-framing, backpressure,
//! the end and the connection's reuse).
//!
//! Every `Connect` is answered by exactly one `ReleaseOrigin`, and every server handed to
//! `on_pick` by exactly one `Report`: `check_invariants` holds the exchange to both.

mod request;
mod response;
mod tunnel;

pub use tunnel::{TunnelRefusal, TunnelStats};

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, StatusCode};
use smallvec::SmallVec;
use squall_h1::{RequestHead, ResponseDecoder, ResponseEvent, ResponseLimits};
use squall_upstream::{Outcome, RetryPolicy, ServerId, UpstreamErrorClass};

use crate::ProxyRoute;
use crate::compress::{Compressor, Stats};

/// The actions an exchange's queue has room for from the start: what a plain request queues
/// between two events, so that its queue is allocated once and not grown.
const ACTIONS_USUAL: usize = 8;

/// Servers an exchange remembers having tried without allocating: as many as a request may
/// try at all, so the list never spills to the heap.
const TRIED_INLINE: usize = squall_upstream::ATTEMPTS_CAP as usize;

/// The protocol the client speaks, which decides how the response is framed for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientProtocol {
    Http10,
    Http11,
    /// A client whose requests are streams with framed bodies: HTTP/2, and HTTP/3 alike.
    H2,
}

impl ClientProtocol {
    /// Whether a body whose length is not known up front can be framed for this client with
    /// the connection kept (chunked on HTTP/1.1, DATA frames on HTTP/2); HTTP/1.0 has only a
    /// close to end it. What decides if a response may be compressed as it streams.
    pub fn frames_unknown_length(self) -> bool {
        self != ClientProtocol::Http10
    }
}

/// What the exchange needs to know about the client side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientInfo {
    /// The client's address, for `X-Forwarded-For` and `Forwarded`.
    pub peer: Option<SocketAddr>,
    /// The client as Squall sees it (PROXY protocol and `real_ip` applied), for
    /// `$remote_addr`.
    pub client: Option<SocketAddr>,
    /// The request's id (`$request_id`), the same as in the access log.
    pub request_id: u128,
    /// The client connection is TLS (`X-Forwarded-Proto: https`).
    pub tls: bool,
    pub protocol: ClientProtocol,
    /// The driver lets the client connection persist after this response (false while the
    /// worker drains). Combined with the request's own keep-alive for HTTP/1.x.
    pub keep_alive: bool,
}

/// The group's timeouts and retry policy, and the bounds on what the exchange holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExchangeConfig {
    pub retry: RetryPolicy,
    /// From the connect to its completion: past it, the attempt fails with `ConnectTimeout`.
    pub connect_timeout: Duration,
    /// The wait for the response head: from the request's last byte sent (or the head's last
    /// byte received); past it, the attempt fails with `ResponseTimeout` (a 504).
    pub response_timeout: Duration,
    /// Once the head arrived, the longest time with no body byte from the origin (nor to it);
    /// past it, the attempt fails with `ResponseTimeout` and the response is cut
    /// ([`Exchange::failure`] tells the cut's cause).
    pub read_timeout: Duration,
    /// The most request body the exchange takes (`u64::MAX`: the client's codec bounds it).
    /// Past it the request ends: a 413 before the response head, a cut after, and
    /// [`Exchange::body_over_limit`] says why.
    pub body_bytes_max: u64,
    /// The high-water mark both ways: the origin is paused while the client has this much
    /// unsent (room 0), resumed once half has drained; request body is taken from the client
    /// only while less than this waits for the origin.
    pub high_water_bytes: usize,
    pub response_limits: ResponseLimits,
}

/// Something the driver must do, in the order the exchange queued it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Pick a server of the route's group, excluding [`Exchange::tried`], and answer with
    /// [`Exchange::on_pick`].
    Pick,
    /// Get a connection to `server`: a pooled one if `pooled` allows and the pool has one
    /// (then [`Exchange::on_origin_connected`] with `reused`), else a new connect (then
    /// `on_origin_connected` or [`Exchange::on_connect_failed`]).
    Connect { server: ServerId, pooled: bool },
    /// Send these bytes to the origin connection, after any sent before; report completion
    /// with [`Exchange::on_origin_sent`]. (HTTP/1.1 origins.)
    WriteOrigin(Bytes),
    /// Send this on the exchange's stream of an HTTP/2 origin connection; report the body
    /// bytes that left with [`Exchange::on_origin_sent`].
    SendOrigin(OriginMessage),
    /// Body bytes of an HTTP/2 origin's response were passed on (or dropped): the driver gives
    /// this much window back to the origin's stream, the backpressure of a multiplexed origin.
    OriginBodyConsumed(usize),
    /// Stop reading the origin: the client is slow to take the response.
    PauseOrigin,
    /// Read the origin again.
    ResumeOrigin,
    /// The exchange is done with the origin connection: back to the pool if `reusable`, else
    /// close it (a connect in flight is cancelled).
    ReleaseOrigin { reusable: bool },
    /// Shut the origin connection's write side (`shutdown(SHUT_WR)`): the client of a tunnel
    /// closed its side, and everything it sent before has been written.
    ShutdownOrigin,
    /// Tell the balancer how the pick of `server` went (one report per pick).
    Report {
        server: ServerId,
        outcome: Outcome,
        /// The failure, when the attempt failed.
        error: Option<UpstreamErrorClass>,
        /// Since the exchange began.
        elapsed: Duration,
    },
    /// Request body bytes (as the client sent them, before framing) moved on to the origin:
    /// an HTTP/2 driver gives this much window back to the client's stream.
    ClientBodyConsumed(usize),
    /// Something for the client, through the protocol-neutral downstream.
    Client(ToClient),
    /// On a cached route: what the cache fill observes.
    Fill(FillHook),
}

/// What goes to an HTTP/2 origin on the exchange's stream, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OriginMessage {
    /// The request head, which opens the stream; `end_stream`: no body follows.
    Head {
        fields: crate::forward::OriginFields,
        end_stream: bool,
    },
    /// A piece of the request body (empty only to carry `end_stream`).
    Data { data: Bytes, end_stream: bool },
    /// The client's trailers, fit to forward (lowercase names); they end the stream.
    Trailers(HeaderMap),
}

/// What the downstream sends to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToClient {
    /// `100 Continue` (RFC 9110 §10.1.1): the client waits for it before sending its body.
    /// The exchange says it at once, as nginx does, and does not forward the origin's 100.
    Continue,
    /// An origin's interim (1xx) response other than 100 and 101, `103 Early Hints` say
    /// (RFC 9110 §15.2), its fields as the final head's are (hop-by-hop removed, route edits
    /// applied): an interim head on HTTP/1.1, an interim HEADERS frame on HTTP/2. Never sent
    /// to HTTP/1.0 clients, which do not know 1xx, and never stored.
    Interim {
        status: StatusCode,
        headers: HeaderMap,
    },
    Head(ClientHead),
    /// A piece of the body, never empty; the downstream frames it as [`ClientHead::framing`]
    /// says (a chunk for `Chunked`, a DATA frame for `Frames`, as it is otherwise).
    Data(Bytes),
    /// The response is complete: the last chunk (with `trailers` when chunked), END_STREAM
    /// on HTTP/2 (a trailers HEADERS frame with `trailers`), nothing more otherwise.
    /// `trailers` are the origin's, already fit to forward: only for HTTP/2 clients and
    /// HTTP/1.1 ones that sent `TE: trailers`, hop-by-hop and framing fields removed.
    End {
        trailers: Option<HeaderMap>,
        /// The request body was not read to its end: an HTTP/1.x connection must close after
        /// this response, an HTTP/2 stream is reset with NO_ERROR (RFC 9113 §8.1).
        request_unfinished: bool,
    },
    /// Answer with a short error response (502, 504): only ever before a head went out.
    Error {
        status: StatusCode,
        /// As in `End`: HTTP/1.x then says `Connection: close`.
        request_unfinished: bool,
    },
    /// The response had started and cannot be completed: close the HTTP/1.x connection, reset
    /// the HTTP/2 stream (INTERNAL_ERROR). A truncated body is never passed off as whole.
    Abort,
}

/// The response head for the client, its framing decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHead {
    pub status: StatusCode,
    /// Hop-by-hop, framing fields and Date removed, route edits applied.
    pub headers: HeaderMap,
    /// The Content-Length to announce (also for HEAD and 304, which have no body).
    pub body_len: Option<u64>,
    pub framing: ClientFraming,
    /// HTTP/1.x: the client connection stays open after this response.
    pub keep_alive: bool,
}

/// How the body reaches the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientFraming {
    /// No body follows the head (HEAD, 1xx, 204, 304, or HTTP/2 with nothing to send: END_STREAM
    /// on the HEADERS frame).
    Empty,
    /// HTTP/1.x with `Content-Length`: the pieces as they are.
    Length(u64),
    /// HTTP/1.1 without a length: chunked (RFC 9112 §7.1).
    Chunked,
    /// HTTP/1.0 without a length: the body runs until the connection closes (RFC 9112 §6.3).
    UntilClose,
    /// HTTP/2: DATA frames, END_STREAM at the end.
    Frames,
}

/// What a cache fill observes of the origin's response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FillHook {
    /// Queued just before the client's head: the fill may add fields to that head, or answer
    /// the client itself and call [`Exchange::on_answered_elsewhere`].
    Head {
        status: StatusCode,
        /// The origin's fields, as received.
        headers: HeaderMap,
        /// The fields as they go to the client (hop-by-hop removed, route edits applied, and
        /// on a compressed response `Content-Encoding`, `Vary` and a weak `ETag`): what an
        /// entry stores.
        client_headers: HeaderMap,
        /// The length of the body the client gets (`None` when it is compressed).
        body_len: Option<u64>,
    },
    /// A piece of the body as the client gets it (compressed, on a compressed response):
    /// what an entry stores, so a hit is never compressed again.
    Data(Bytes),
    /// The response ended cleanly: the fill may store it.
    End { trailers: Option<HeaderMap> },
}

/// What an exchange on an HTTP/2 stream sent of its request body: the pieces as they went
/// (shared, not copied), their length, and the trailers.
#[derive(Debug, Default)]
struct Replay {
    pieces: Vec<Bytes>,
    bytes: usize,
    trailers: Option<HeaderMap>,
}

/// Where the exchange is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for `on_pick`.
    Picking,
    /// Waiting for `on_origin_connected` or a failure.
    Connecting,
    /// Connected: request going out, response coming in.
    Exchanging,
    /// Upgraded (`tunnel.rs`): bytes both ways until both sides are done.
    Tunnel,
    /// Ended one way or another; later events are ignored.
    Done,
}

/// One proxied request (see the module documentation).
#[derive(Debug)]
pub struct Exchange {
    head: RequestHead,
    route: Arc<ProxyRoute>,
    client: ClientInfo,
    config: ExchangeConfig,
    started: Instant,
    phase: Phase,
    actions: VecDeque<Action>,
    /// The server of the current attempt; `Some` from `on_pick` until its `Report`.
    server: Option<ServerId>,
    /// Servers picked for this request (a same-server retry adds none): inline for the usual
    /// few, so that a request's first pick allocates nothing.
    tried: SmallVec<[ServerId; TRIED_INLINE]>,
    /// A `Connect` was queued and its `ReleaseOrigin` not yet.
    holding_origin: bool,
    /// The current connection came from the pool.
    reused: bool,
    /// When the current wait ends: the connect, or the origin's silence.
    deadline: Option<Instant>,
    /// Request body bytes, as the client sent them (not yet framed), waiting for the origin.
    body: BytesMut,
    /// The client's request trailers, fit to forward, waiting to go after the body.
    body_trailers: Option<HeaderMap>,
    /// The end of the request (last chunk, END_STREAM) went to the origin in this attempt.
    body_end_sent: bool,
    /// The current attempt's origin speaks HTTP/2: the exchange is one stream of a shared
    /// connection, and its messages go as `SendOrigin` instead of bytes.
    origin_h2: bool,
    /// An HTTP/2 origin's response events not yet taken (the client had no room), and the
    /// body bytes among them.
    h2_events: VecDeque<ResponseEvent>,
    h2_held: usize,
    /// Body bytes of those taken and not yet reported as `OriginBodyConsumed`.
    h2_unreleased: usize,
    /// Why the last failed attempt failed (see [`Exchange::failure`]).
    failure: Option<UpstreamErrorClass>,
    /// Request body bytes taken from the client, against `config.body_bytes_max`.
    body_received: u64,
    /// The request body went over `config.body_bytes_max`.
    over_limit: bool,
    /// HTTP/2 streams of this exchange the origin refused (`on_origin_reset`).
    refusals: u8,
    /// On an HTTP/2 origin: the body (and trailers) sent in this attempt, kept while it stays
    /// under `REPLAY_BYTES_MAX`, so that a refused stream can go again whole.
    replay: Option<Replay>,
    /// Client body bytes taken and not yet reported as `ClientBodyConsumed`.
    body_unreleased: usize,
    /// Bytes handed out in `WriteOrigin` and not yet reported sent.
    origin_unsent: usize,
    /// The client's request has ended (its last body byte was framed into `body`).
    request_complete: bool,
    /// Some byte of the request was handed to the origin connection in this attempt.
    request_sent: bool,
    decoder: Option<ResponseDecoder>,
    /// Bytes from the origin not yet decoded.
    rbuf: BytesMut,
    /// The origin closed its side in this attempt.
    origin_eof: bool,
    /// The origin's head said the connection may carry another request.
    origin_keep_alive: bool,
    /// The response head went to the client: from here an error can only cut it.
    response_started: bool,
    status: StatusCode,
    framing: Option<ClientFraming>,
    /// How many more body bytes the client side takes before the origin is paused.
    room: usize,
    paused: bool,
    /// The client was answered by someone else (the cache): the origin's body is dropped.
    answered_elsewhere: bool,
    /// The response is being compressed (the route's `compress`, see `crate::compress`).
    compressor: Option<Box<Compressor>>,
    /// What the compression of a finished response did.
    compressed: Option<Stats>,
    /// The upgrade protocols forwarded to the origin (`tunnel.rs`), when the route allows the
    /// request's.
    offered: Option<String>,
    tunnel: Option<tunnel::Tunnel>,
}

impl Exchange {
    /// A new exchange for `head` on `route`; its first action is `Pick` (after `Continue`
    /// when the client waits for one).
    pub fn new(
        head: RequestHead,
        route: Arc<ProxyRoute>,
        client: ClientInfo,
        config: ExchangeConfig,
        now: Instant,
    ) -> Exchange {
        let request_complete = head.body == squall_h1::BodyKind::Empty;
        let offered = tunnel::offered(&head, &route, client.protocol);
        let mut exchange = Exchange {
            head,
            route,
            client,
            config,
            started: now,
            phase: Phase::Picking,
            // Room for a request's usual batch (pick, connect, write, the response's pieces):
            // one allocation per exchange instead of one and a grow.
            actions: VecDeque::with_capacity(ACTIONS_USUAL),
            server: None,
            tried: SmallVec::new(),
            holding_origin: false,
            reused: false,
            deadline: None,
            body: BytesMut::new(),
            body_trailers: None,
            body_end_sent: false,
            origin_h2: false,
            h2_events: VecDeque::new(),
            h2_held: 0,
            h2_unreleased: 0,
            failure: None,
            body_received: 0,
            over_limit: false,
            refusals: 0,
            replay: None,
            body_unreleased: 0,
            origin_unsent: 0,
            request_complete,
            request_sent: false,
            decoder: None,
            rbuf: BytesMut::new(),
            origin_eof: false,
            origin_keep_alive: false,
            response_started: false,
            status: StatusCode::BAD_GATEWAY,
            framing: None,
            room: config.high_water_bytes,
            paused: false,
            answered_elsewhere: false,
            compressor: None,
            compressed: None,
            offered,
            tunnel: None,
        };
        if exchange.head.expect_continue && client.protocol == ClientProtocol::Http11 {
            exchange.tell_client(ToClient::Continue);
        }
        exchange.actions.push_back(Action::Pick);
        exchange
    }

    /// The next thing to do, in order; `None` until the next event.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// The request as received (for the balancer's hash key, logs and the cache).
    pub fn head(&self) -> &RequestHead {
        &self.head
    }

    pub fn route(&self) -> &Arc<ProxyRoute> {
        &self.route
    }

    /// Servers already picked for this request: the `exclude` list of the next pick.
    pub fn tried(&self) -> &[ServerId] {
        &self.tried
    }

    /// The response status so far: the origin's once its head arrived, else 502.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// What compressing the response did (coding, bytes in and out), once it began; `None`
    /// for a response sent as the origin sent it.
    pub fn compression(&self) -> Option<Stats> {
        (self.compressor.as_ref().map(|c| c.stats())).or(self.compressed)
    }

    /// Why the last failed attempt failed; after a [`ToClient::Abort`], why the response was
    /// cut (`ResponseTimeout`: the origin was silent for the read timeout, others: it failed).
    pub fn failure(&self) -> Option<UpstreamErrorClass> {
        self.failure
    }

    /// The request ended because its body went over `ExchangeConfig::body_bytes_max`.
    pub fn body_over_limit(&self) -> bool {
        self.over_limit
    }

    /// When the exchange began (upstream latency, log lines).
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The request waits on its origin (a server, a connection, the response or its next
    /// byte), not on its client: not a tunnel, not paused for the client's room. Its client
    /// connection is not idle meanwhile; the exchange's own timers bound the wait.
    pub fn awaits_origin(&self) -> bool {
        matches!(
            self.phase,
            Phase::Picking | Phase::Connecting | Phase::Exchanging
        ) && !self.paused
    }

    /// The exchange has ended; its last actions may still be queued.
    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Done
    }

    /// How many more request body bytes the exchange takes now: an HTTP/1.x driver stops
    /// decoding the client's body at 0 and tries again after `on_origin_sent`.
    pub fn request_body_room(&self) -> usize {
        if self.phase == Phase::Done {
            return usize::MAX;
        }
        let waiting = self.body.len() + self.origin_unsent;
        self.config.high_water_bytes.saturating_sub(waiting)
    }

    /// When [`on_timer`](Exchange::on_timer) is due.
    pub fn next_deadline(&self) -> Option<Instant> {
        match self.phase {
            Phase::Connecting | Phase::Exchanging | Phase::Tunnel => self.deadline,
            Phase::Picking | Phase::Done => None,
        }
    }

    /// The clock reached `now`: a connect or an origin's silence may have lasted too long.
    pub fn on_timer(&mut self, now: Instant) {
        let Some(deadline) = self.next_deadline() else {
            return;
        };
        if deadline > now {
            return;
        }
        match self.phase {
            Phase::Connecting => self.fail(UpstreamErrorClass::ConnectTimeout, now),
            // Waiting on the client, not the origin: the client's own timers bound this.
            Phase::Exchanging if self.paused => self.arm_origin_timer(now),
            Phase::Exchanging => self.fail(UpstreamErrorClass::ResponseTimeout, now),
            // Nothing either way for `tunnel_idle_timeout`.
            Phase::Tunnel => self.tunnel_origin_eof(now),
            Phase::Picking | Phase::Done => {}
        }
    }

    /// The client side can take `room` more bytes now (the high-water mark less what it has
    /// unsent). Call it after running the queued actions, whenever that changes.
    pub fn on_client_room(&mut self, room: usize, now: Instant) {
        self.room = room;
        if !matches!(self.phase, Phase::Exchanging | Phase::Tunnel) {
            return;
        }
        if self.paused && room > self.config.high_water_bytes / 2 {
            self.paused = false;
            self.actions.push_back(Action::ResumeOrigin);
        }
        self.pump_response(now);
    }

    /// As [`on_client_room`](Exchange::on_client_room), for a client with nothing of this
    /// response waiting: any room resumes a paused origin. A shared bound (the HTTP/2
    /// connection's, the process's buffer budget) can leave a drained client less than half
    /// the high-water mark for as long as other clients hold their bytes; without this a
    /// client that reads would wait on the ones that do not.
    pub fn on_client_room_drained(&mut self, room: usize, now: Instant) {
        if matches!(self.phase, Phase::Exchanging | Phase::Tunnel) && self.paused && room > 0 {
            self.paused = false;
            self.actions.push_back(Action::ResumeOrigin);
        }
        self.on_client_room(room, now);
    }

    /// Bytes from the origin held undecoded (those that came while the client had no room).
    pub fn buffered_bytes(&self) -> usize {
        self.rbuf.len() + self.h2_held
    }

    /// The client went away (connection closed, stream reset) before the response ended: the
    /// origin connection cannot be reused, and the attempt says nothing about the server.
    pub fn on_client_gone(&mut self, now: Instant) {
        if self.phase == Phase::Done {
            return;
        }
        if self.holding_origin {
            self.release_origin(false);
        }
        self.report(Outcome::Neutral, None, now);
        self.paused = false;
        self.phase = Phase::Done;
    }

    /// The client was answered from elsewhere after the head (the cache revalidated or served
    /// a stale entry): the origin's response is read to its end and dropped, so that its
    /// connection may still be kept. Client actions already queued are withdrawn.
    pub fn on_answered_elsewhere(&mut self) {
        self.answered_elsewhere = true;
        self.actions.retain(|a| !matches!(a, Action::Client(_)));
    }

    /// Sends the request again from the start with `headers` in place of its own, and drops
    /// the response in progress: the cache fill found that the origin's 304 answers a
    /// validator it does not hold (RFC 9111 §4.3.4), so it must neither reach the client nor
    /// end the request. The response's client actions and fill hooks still queued are
    /// withdrawn; a connection still held is let go (not reused: the rest of that response
    /// is not read) and its pick reported as the status it had. The new attempt picks afresh, with
    /// the group's whole retry budget.
    ///
    /// Only for requests without a body (what a cache fill fetches): a body is not kept for
    /// a second send.
    pub fn refetch(&mut self, headers: HeaderMap, now: Instant) {
        debug_assert!(
            self.request_complete && self.body.is_empty(),
            "a bodiless request"
        );
        if !self.request_complete || !self.response_started {
            return;
        }
        self.actions
            .retain(|a| !matches!(a, Action::Client(_) | Action::Fill(_)));
        if self.holding_origin {
            self.release_origin(false);
        }
        let outcome = Outcome::from_status(self.status.as_u16());
        self.report(outcome, None, now);
        self.head.headers = squall_h1::Fields::from_header_map(&headers);
        self.tried.clear();
        self.decoder = None;
        self.rbuf.clear();
        self.clear_h2_events();
        self.paused = false;
        self.response_started = false;
        self.framing = None;
        self.compressor = None;
        self.status = StatusCode::BAD_GATEWAY;
        self.room = self.config.high_water_bytes;
        self.phase = Phase::Picking;
        self.actions.push_back(Action::Pick);
    }

    /// Panics if an invariant does not hold; tests call it after every step.
    pub fn check_invariants(&self) {
        let attempts = u32::try_from(self.tried.len()).unwrap_or(u32::MAX);
        assert!(
            attempts <= self.config.retry.attempts_max,
            "more picks than attempts"
        );
        match self.phase {
            Phase::Picking => assert!(!self.holding_origin && self.server.is_none()),
            Phase::Connecting => {
                assert!(self.holding_origin && self.server.is_some());
                assert!(self.decoder.is_none() && !self.request_sent);
                assert!(self.deadline.is_some());
            }
            Phase::Exchanging => {
                assert!(self.holding_origin && self.server.is_some());
                assert!(
                    self.request_sent && self.body.is_empty(),
                    "body waits while connected"
                );
                assert!(self.deadline.is_some());
                if self.origin_h2 {
                    assert!(self.decoder.is_none(), "an HTTP/2 stream has no decoder");
                } else {
                    let decoder = self.decoder.as_ref().expect("connected exchanges decode");
                    decoder.check_invariants();
                }
            }
            Phase::Tunnel => {
                assert!(
                    self.holding_origin && self.server.is_none(),
                    "reported at the 101"
                );
                assert!(self.decoder.is_none() && self.tunnel.is_some());
                assert!(self.deadline.is_some());
            }
            Phase::Done => {
                assert!(!self.holding_origin, "a finished exchange holds no origin");
                assert!(self.server.is_none(), "every pick is reported");
            }
        }
        assert!(
            !self.paused || matches!(self.phase, Phase::Exchanging | Phase::Tunnel),
            "only a live origin pauses"
        );
        assert!(self.framing.is_some() == self.response_started);
        assert_eq!(
            self.h2_held,
            (self.h2_events.iter())
                .map(|e| match e {
                    ResponseEvent::Data(data) => data.len(),
                    _ => 0,
                })
                .sum::<usize>(),
            "held HTTP/2 body bytes are counted"
        );
        assert!(
            self.compressor.is_none() || self.response_started,
            "compression starts with a response"
        );
        if let Some(server) = self.server {
            assert!(
                self.tried.contains(&server),
                "the current server was picked"
            );
        }
    }

    fn tell_client(&mut self, message: ToClient) {
        if !self.answered_elsewhere {
            self.actions.push_back(Action::Client(message));
        }
    }

    fn release_origin(&mut self, reusable: bool) {
        debug_assert!(self.holding_origin, "released twice");
        // An HTTP/2 stream's received body goes back to the connection's window first.
        self.clear_h2_events();
        self.holding_origin = false;
        self.actions.push_back(Action::ReleaseOrigin { reusable });
    }

    /// Reports the current pick, once.
    fn report(&mut self, outcome: Outcome, error: Option<UpstreamErrorClass>, now: Instant) {
        if let Some(server) = self.server.take() {
            self.actions.push_back(Action::Report {
                server,
                outcome,
                error,
                elapsed: now.saturating_duration_since(self.started),
            });
        }
    }

    /// The origin showed life (or is not the one waited on): its silence is counted from
    /// `now`, against the head's timeout until the head arrived, the read timeout after.
    fn arm_origin_timer(&mut self, now: Instant) {
        let timeout = match self.response_started {
            false => self.config.response_timeout,
            true => self.config.read_timeout,
        };
        self.deadline = Some(now + timeout);
    }
}
