//! HTTP/2 origin connections (`protocol = "h2" | "h2c" | "auto"` upstreams): one connection
//! carries many exchanges, each on its own stream of squall-h2's client role.
//!
//! Why apart from the HTTP/1.1 path: an HTTP/1.1 origin connection belongs to one exchange from
//! its `Connect` to its `ReleaseOrigin`, and the pool hands idle ones out whole; an HTTP/2 one
//! is shared. Here a `Connect` opens a stream on a connection to the server that has room (the
//! origin's SETTINGS_MAX_CONCURRENT_STREAMS, capped at [`STREAMS_MAX`]) or joins one still
//! connecting, and opens a new connection only when none has; a `ReleaseOrigin` resets the
//! stream if it is still open (CANCEL) and leaves the connection to the others. Connections
//! with no stream are closed after [`IDLE_TIMEOUT`], or at once when a reload made their
//! upstream generation old.
//!
//! Backpressure is HTTP/2's own: the socket is always read, and a stream's received DATA keeps
//! its window until its exchange passes it on (`OriginBodyConsumed`), so a slow client stops
//! its stream at one window (256 KiB) without holding back the connection's other streams.
//! Request bodies wait in the connection's queue within the origin's windows; the exchange
//! hears that its bytes left once the send that carried them completed.
//!
//! Timers: an exchange on a shared connection has its own timer entry (a `Session` token),
//! since the connection's one timer is for the connection (its connect, its stall detection).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use http::StatusCode;
use squall_config::OriginProtocol;
use squall_h1::ResponseEvent;
use squall_h2::{ClientConfig, ClientConnection, ClientEvent, ErrorCode, HeaderFields, StreamId};
use squall_proxy::OriginMessage;
use squall_upstream::{ServerId, UpstreamErrorClass};
use tracing::debug;

use super::super::ids::SessionId;
use super::{News, OriginState, Origins};
use crate::upstream_events::UpstreamEvents;
use crate::worker::Io;
use crate::worker::Runtime;

mod events;

/// The most streams Squall opens on one origin connection, whatever the origin allows.
pub const STREAMS_MAX: usize = 100;
/// How long a connection with no stream is kept for the next request.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Frames waiting in the connection's output before more are taken from the HTTP/2 state.
const OUT_HIGH_BYTES: usize = 256 * 1024;

/// The HTTP/2 side of an origin connection.
pub struct OriginH2 {
    pub conn: ClientConnection,
    /// The exchange on each open stream.
    streams: HashMap<StreamId, SessionId>,
    /// Each exchange's stream, from its request head until it lets the connection go (an
    /// ended stream's id is kept, for the window its exchange gives back; a reset one's not).
    stream_of: HashMap<SessionId, StreamId>,
    /// The streams of HEAD requests, whose responses have no body whatever they say.
    heads: HashSet<StreamId>,
    /// Exchanges waiting for a stream, in order: until the connection is up and the origin's
    /// SETTINGS say how many streams it takes, and while it has none free.
    waiting: VecDeque<SessionId>,
    /// Exchanges told a stream is free for them whose request head has not opened it yet
    /// (the news reaches them after the origin side is done): those streams are spoken for.
    granted: HashSet<SessionId>,
    /// The preface went out: streams may open.
    ready: bool,
    /// `:scheme` is `https`.
    tls: bool,
    /// Received bytes not yet taken as frames.
    rbuf: BytesMut,
    /// Per stream: request body handed to the connection and not yet reported as gone to it.
    unsent: HashMap<StreamId, usize>,
    /// Body bytes that went into a send, reported to their exchanges when the send completes.
    left: Vec<(SessionId, usize)>,
    /// Since when the connection has had no stream.
    idle_since: Option<Instant>,
    /// Its upstream's counters of streams, GOAWAYs, resets and errors.
    counters: Arc<UpstreamEvents>,
    /// Scratch for the frames one flush takes from `conn` (see `Origins::h2_flush`).
    pieces: Vec<bytes::Bytes>,
}

impl OriginH2 {
    pub fn new(tls: bool, counters: Arc<UpstreamEvents>, now: Instant) -> OriginH2 {
        let config = ClientConfig {
            max_concurrent_streams: STREAMS_MAX as u32,
            ..ClientConfig::default()
        };
        OriginH2 {
            conn: ClientConnection::new(config, now),
            streams: HashMap::new(),
            stream_of: HashMap::new(),
            heads: HashSet::new(),
            waiting: VecDeque::new(),
            granted: HashSet::new(),
            ready: false,
            tls,
            rbuf: BytesMut::new(),
            unsent: HashMap::new(),
            left: Vec::new(),
            idle_since: None,
            counters,
            pieces: Vec::new(),
        }
    }

    /// Bytes received from the origin (decrypted, on TLS), for [`Origins::h2_input`].
    pub fn take_input(&mut self, bytes: &[u8]) {
        self.rbuf.extend_from_slice(bytes);
    }

    /// Another exchange may start on this connection: a stream free for each waiting one and
    /// it, as the origin's SETTINGS allow, or until they arrive a place among [`STREAMS_MAX`].
    fn has_room(&self) -> bool {
        if self.conn.peer_settings_received() {
            self.waiting.len() < self.free_streams()
        } else {
            self.streams.len() + self.granted.len() + self.waiting.len() < STREAMS_MAX
        }
    }

    /// A stream may open now, and no exchange waits for one before.
    fn stream_free(&self) -> bool {
        self.ready
            && self.conn.peer_settings_received()
            && self.waiting.is_empty()
            && self.free_streams() > 0
    }

    /// Streams the origin allows that are not spoken for.
    fn free_streams(&self) -> usize {
        (self.conn.available_streams()).saturating_sub(self.granted.len())
    }
}

/// A response head's fields as the proxy's field list, without a copy.
pub fn fields(headers: HeaderFields) -> Option<squall_h1::Fields> {
    let (bytes, spans) = headers.into_parts();
    let spans = (spans.into_iter())
        .map(|s| [s.name, s.name_len, s.value, s.value_len])
        .collect();
    squall_h1::Fields::from_parts(bytes, spans)
}

/// The HTTP version upstream `upstream` is spoken to in.
pub(in crate::worker) fn origin_protocol(runtime: &Runtime, upstream: usize) -> OriginProtocol {
    (runtime.upstreams.get(upstream)).map_or_else(Default::default, |u| u.protocol)
}

impl Origins {
    /// Makes the new connection `index` (to an upstream spoken to in HTTP/2) a shared one,
    /// with session `id` waiting for its first stream.
    pub(in crate::worker) fn share(&mut self, io: &mut Io<'_>, index: usize, id: SessionId) {
        let now = io.now;
        let upstream = self.conns[index].upstream;
        let tls = (io.runtime.upstreams.get(upstream)).is_some_and(|u| u.tls.is_some());
        let mut h2 = OriginH2::new(tls, self.upstreams.events(io.runtime, upstream), now);
        h2.waiting.push_back(id);
        self.conns[index].session = None;
        self.conns[index].mux = Some(Box::new(h2));
        self.shared.push(index);
        self.h2_deadline(io, index);
    }

    /// A stream for session `id` on a connection to `server` that has room: the connection,
    /// which tells the session when its stream is free; `None` when there is none. An `auto`
    /// upstream's connections that became HTTP/2 are found here too. `pooled = false` (a
    /// retry after a stale or refused stream) takes only a connection not yet connected,
    /// which cannot be the one that failed.
    pub(in crate::worker) fn join_h2(
        &mut self,
        io: &mut Io<'_>,
        id: SessionId,
        upstream: usize,
        server: ServerId,
        pooled: bool,
    ) -> Option<usize> {
        let generation = self.upstreams.generation();
        let found = self.shared.iter().copied().find(|&index| {
            let origin = &self.conns[index];
            let Some(h2) = origin.mux.as_deref() else {
                return false;
            };
            origin.upstream == upstream
                && origin.server == server
                && origin.upstream_generation == generation
                && origin.state != OriginState::Closed
                && (pooled || !h2.ready)
                && h2.has_room()
        });
        let index = found?;
        let origin = &mut self.conns[index];
        let h2 = origin
            .mux
            .as_deref_mut()
            .expect("found among HTTP/2 origins");
        h2.idle_since = None;
        let (free, tls) = (h2.stream_free(), h2.tls);
        if free {
            h2.granted.insert(id);
        } else {
            h2.waiting.push_back(id);
        }
        io.runtime.metrics.worker(io.worker).upstream_reuses.inc();
        if free {
            let news = News::Stream { reused: true, tls };
            self.news.tell(id, index, news);
        }
        Some(index)
    }

    /// A new connection made for an `auto` upstream whose origin chose `h2` with ALPN: its
    /// exchange becomes the first stream of a shared connection.
    pub(in crate::worker) fn become_h2(&mut self, io: &mut Io<'_>, index: usize) {
        let now = io.now;
        let counters = self
            .upstreams
            .events(io.runtime, self.conns[index].upstream);
        let origin = &mut self.conns[index];
        let mut h2 = OriginH2::new(true, counters, now);
        h2.waiting.extend(origin.session.take());
        self.h2_pending.push(index);
        origin.mux = Some(Box::new(h2));
        self.shared.push(index);
    }

    /// While connecting, the connection's own deadline is its connect timeout.
    fn h2_deadline(&mut self, io: &mut Io<'_>, index: usize) {
        let origin = &self.conns[index];
        let timeout = (self.upstreams.group(origin.upstream)).map(|g| g.connect_timeout);
        self.conns[index].deadline = timeout.map(|t| io.now + t);
        self.conns.arm_timer(io, index);
    }

    /// The connection is up (TCP for `h2c`, the handshake for TLS): the preface goes out; the
    /// waiting exchanges get their streams once the origin's SETTINGS are in.
    pub(in crate::worker) fn h2_connected(&mut self, io: &mut Io<'_>, index: usize) {
        let origin = &mut self.conns[index];
        origin.deadline = None;
        let Some(h2) = origin.mux.as_deref_mut() else {
            return;
        };
        h2.ready = true;
        self.h2_flush(io, index);
        self.h2_settle(io, index);
    }

    /// Gives the exchanges waiting on connection `index` the streams it has free, in order.
    /// Only where sessions may be called (not from inside an action: see `h2_pending`).
    fn h2_dispatch(&mut self, index: usize) {
        loop {
            let Some(h2) = self.conns.h2_mut(index) else {
                return;
            };
            if !h2.ready || !h2.conn.peer_settings_received() || h2.free_streams() == 0 {
                return;
            }
            let tls = h2.tls;
            let Some(id) = h2.waiting.pop_front() else {
                return;
            };
            h2.granted.insert(id);
            let news = News::Stream { reused: false, tls };
            self.news.tell(id, index, news);
        }
    }

    /// Serves the connections whose waiting exchanges may have a stream now (see
    /// `Origins::h2_pending`); true when there were any.
    pub(in crate::worker) fn run_h2_pending(&mut self, io: &mut Io<'_>) -> bool {
        if self.h2_pending.is_empty() {
            return false;
        }
        let mut pending = std::mem::take(&mut self.h2_pending);
        pending.sort_unstable();
        pending.dedup();
        for index in pending {
            self.h2_dispatch(index);
            self.h2_settle(io, index);
        }
        true
    }

    /// The connection will take no new stream (a GOAWAY): the exchanges waiting on it go to
    /// another connection to the same server.
    fn h2_requeue(&mut self, index: usize) {
        let Some(h2) = self.conns.h2_mut(index) else {
            return;
        };
        let waiting = std::mem::take(&mut h2.waiting);
        let (upstream, server) = (self.conns[index].upstream, self.conns[index].server);
        for id in waiting {
            (self.news).tell(id, index, News::Requeue { upstream, server });
        }
    }

    /// `Action::SendOrigin` of session `id`, whose exchange holds connection `index`;
    /// `head_request`: its request is a HEAD.
    pub(in crate::worker) fn h2_send(
        &mut self,
        io: &mut Io<'_>,
        id: SessionId,
        index: usize,
        message: OriginMessage,
        head_request: bool,
    ) {
        let worker = io.worker;
        let Some(h2) = self.conns.h2_mut(index) else {
            return;
        };
        let stream = h2.stream_of.get(&id).copied();
        match (message, stream) {
            (OriginMessage::Head { fields, end_stream }, None) => {
                h2.granted.remove(&id);
                match h2.conn.send_request(fields.iter(), end_stream) {
                    Ok(stream) => {
                        h2.streams.insert(stream, id);
                        h2.stream_of.insert(id, stream);
                        if head_request {
                            h2.heads.insert(stream);
                        }
                        h2.counters.h2_streams.inc(worker);
                    }
                    Err(e) => {
                        debug!(worker, "origin stream refused: {e}");
                        // Not sent: the exchange goes again on another connection.
                        let news = News::Reset { refused: true };
                        self.news.tell(id, index, news);
                        return;
                    }
                }
            }
            (OriginMessage::Data { data, end_stream }, Some(stream)) => {
                let len = data.len();
                if h2.conn.send_data(stream, data, end_stream).is_ok() && len > 0 {
                    *h2.unsent.entry(stream).or_default() += len;
                }
            }
            (OriginMessage::Trailers(trailers), Some(stream)) => {
                let fields = trailers
                    .iter()
                    .map(|(name, value)| (name.as_str().as_bytes(), value.as_bytes()));
                let _ = h2.conn.send_trailers(stream, fields);
            }
            // A message for a stream already gone: its reset is on its way to the exchange.
            _ => return,
        }
        self.h2_flush(io, index);
    }

    /// `Action::OriginBodyConsumed`: the stream's window (and the connection's) is given back.
    pub(in crate::worker) fn h2_consumed(
        &mut self,
        io: &mut Io<'_>,
        id: SessionId,
        index: usize,
        n: usize,
    ) {
        let Some(h2) = self.conns.h2_mut(index) else {
            return;
        };
        let stream = h2.stream_of.get(&id).copied();
        // A stream that ended (its id is kept until `ReleaseOrigin`) still gives the connection
        // its window back; a reset one gave it back when it was reset.
        if let Some(stream) = stream {
            h2.conn.release_capacity(stream, n);
        }
        self.h2_flush(io, index);
    }

    /// `Action::ReleaseOrigin` of a session on connection `index`: its stream, if still open,
    /// is reset; the connection stays for the others.
    pub(in crate::worker) fn h2_release(&mut self, io: &mut Io<'_>, id: SessionId, index: usize) {
        let Some(h2) = self.conns.h2_mut(index) else {
            return;
        };
        h2.waiting.retain(|w| *w != id);
        h2.granted.remove(&id);
        if let Some(stream) = h2.stream_of.remove(&id) {
            h2.heads.remove(&stream);
            h2.unsent.remove(&stream);
            if h2.streams.remove(&stream).is_some() {
                h2.conn.reset_stream(stream, ErrorCode::Cancel);
            }
        }
        if !h2.waiting.is_empty() {
            self.h2_pending.push(index);
        }
        self.h2_flush(io, index);
        self.h2_settle(io, index);
    }

    /// Moves frames from the HTTP/2 state to the connection's output, while it holds less
    /// than `OUT_HIGH_BYTES`, and notes which exchanges' body bytes went with them.
    pub(in crate::worker) fn h2_flush(&mut self, io: &mut Io<'_>, index: usize) {
        let Some(origin) = self.conns.get_mut(index) else {
            return;
        };
        if origin.state == OriginState::Closed || !origin.mux.as_ref().is_some_and(|h| h.ready) {
            return;
        }
        let waiting = origin.out.len();
        let Some(budget) = OUT_HIGH_BYTES.checked_sub(waiting).filter(|b| *b > 0) else {
            return;
        };
        let h2 = origin.mux.as_deref_mut().expect("checked above");
        // The scratch list is the connection's, reused flush after flush.
        let mut pieces = std::mem::take(&mut h2.pieces);
        h2.conn.poll_output(budget, |piece| pieces.push(piece));
        let OriginH2 {
            conn,
            streams,
            unsent,
            left,
            ..
        } = h2;
        unsent.retain(|stream, unsent| {
            let gone = *unsent - conn.queued_data(*stream).min(*unsent);
            if gone > 0
                && let Some(id) = streams.get(stream)
            {
                left.push((*id, gone));
            }
            *unsent -= gone;
            *unsent > 0
        });
        for piece in pieces.drain(..) {
            self.conns.write(io, index, piece);
        }
        if let Some(h2) = self.conns.h2_mut(index) {
            h2.pieces = pieces;
        }
    }

    /// A send of connection `index` completed: the body bytes it carried are reported to their
    /// exchanges (which may take more from their clients), and more frames go out.
    pub(in crate::worker) fn h2_sent(&mut self, io: &mut Io<'_>, index: usize) {
        self.h2_flush(io, index);
        let Some(h2) = self.conns.h2_mut(index) else {
            return;
        };
        for (id, n) in std::mem::take(&mut h2.left) {
            self.news.tell(id, index, News::Sent(n));
        }
    }

    /// What the origin sent (`OriginH2::take_input`): frames in, events out to the exchanges.
    pub(in crate::worker) fn h2_input(&mut self, io: &mut Io<'_>, index: usize) {
        let now = io.now;
        let Some(h2) = self.conns.h2_mut(index) else {
            return;
        };
        let OriginH2 {
            conn,
            rbuf,
            counters,
            ..
        } = h2;
        if let Err(e) = conn.recv(rbuf, now) {
            UpstreamEvents::inc(&counters.h2_errors);
            let address = self.conns[index].address;
            debug!(worker = io.worker, %address, "origin HTTP/2: {e}");
        }
        self.h2_events(io, index);
        self.h2_dispatch(index);
        self.h2_flush(io, index);
        self.h2_settle(io, index);
    }

    /// The connection failed or the origin closed it: exchanges waiting for it fail as a
    /// connect does, those on a stream hear the stream reset (refused when nothing of the
    /// request left); then it closes.
    pub(in crate::worker) fn h2_failed(
        &mut self,
        io: &mut Io<'_>,
        index: usize,
        class: UpstreamErrorClass,
    ) {
        let Some(h2) = self.conns.h2_mut(index) else {
            return;
        };
        let waiting = std::mem::take(&mut h2.waiting);
        h2.granted.clear();
        h2.conn.fail();
        for id in waiting {
            self.news.tell(id, index, News::ConnectFailed(class));
        }
        self.h2_events(io, index);
        if let Some(h2) = self.conns.h2_mut(index) {
            // Anything still mapped heard nothing: fail it as a reset.
            let left: Vec<SessionId> = h2.streams.drain().map(|(_, id)| id).collect();
            for id in &left {
                h2.stream_of.remove(id);
            }
            for id in left {
                (self.news).tell(id, index, News::Reset { refused: false });
            }
        }
        self.close_origin(io, index);
    }

    /// The connection's timer: its connect timeout, or the HTTP/2 state's own (stalls).
    pub(in crate::worker) fn h2_timer(&mut self, io: &mut Io<'_>, index: usize) {
        let now = io.now;
        let origin = &mut self.conns[index];
        match origin.state {
            OriginState::Connecting | OriginState::Handshaking => {
                if origin.state == OriginState::Handshaking {
                    self.handshake_timed_out(io, index);
                }
                self.h2_failed(io, index, UpstreamErrorClass::ConnectTimeout);
            }
            OriginState::Busy => {
                if let Some(h2) = origin.mux.as_deref_mut() {
                    h2.conn.on_timer(now);
                }
                self.h2_events(io, index);
                self.h2_flush(io, index);
                self.h2_settle(io, index);
            }
            OriginState::Idle | OriginState::Closed => {}
        }
    }

    /// After a change: closes a connection that is finished (GOAWAY, error, no stream left),
    /// notes when it went idle, and files the HTTP/2 state's next deadline.
    fn h2_settle(&mut self, io: &mut Io<'_>, index: usize) {
        let now = io.now;
        let Some(origin) = self.conns.get_mut(index) else {
            return;
        };
        let Some(h2) = origin.mux.as_deref_mut() else {
            return;
        };
        if !h2.ready {
            return;
        }
        if h2.conn.is_finished() && h2.streams.is_empty() && !h2.conn.has_output() {
            return self.close_origin(io, index);
        }
        let idle = h2.streams.is_empty() && h2.waiting.is_empty() && h2.granted.is_empty();
        match (idle, h2.idle_since) {
            (true, None) => h2.idle_since = Some(now),
            (false, Some(_)) => h2.idle_since = None,
            _ => {}
        }
        let deadline = h2.conn.next_deadline();
        if deadline.is_some() {
            origin.deadline = deadline;
            self.conns.arm_timer(io, index);
        }
    }

    /// Closes HTTP/2 origin connections idle for [`IDLE_TIMEOUT`], or idle and of an upstream
    /// generation a reload replaced (once per loop turn, with the pools).
    pub(in crate::worker) fn expire_h2_origins(&mut self, io: &mut Io<'_>) {
        let now = io.now;
        let generation = self.upstreams.generation();
        let expired: Vec<usize> = (self.shared.iter().copied())
            .filter(|&index| {
                let origin = &self.conns[index];
                origin
                    .mux
                    .as_deref()
                    .and_then(|h| h.idle_since)
                    .is_some_and(|since| {
                        origin.upstream_generation != generation || since + IDLE_TIMEOUT <= now
                    })
            })
            .collect();
        for index in expired {
            if let Some(h2) = self.conns[index].mux.as_deref_mut() {
                h2.conn.go_away(ErrorCode::NoError);
            }
            self.h2_flush(io, index);
            self.close_origin(io, index);
        }
    }

    /// Forgets a closed connection.
    pub(in crate::worker) fn forget_h2_origin(&mut self, index: usize) {
        self.shared.retain(|&i| i != index);
    }
}
