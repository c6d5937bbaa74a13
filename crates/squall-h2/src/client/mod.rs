//! The client side of an HTTP/2 connection (RFC 9113), for proxying to HTTP/2 origins:
//! one connection carries many requests, with flow control both ways. Sans-IO like the
//! server side (`conn/`), which it follows in style and limits: bytes and instants in,
//! events and bytes to send out.
//!
//! - `recv.rs`: frames from the origin, by type: SETTINGS, PING, GOAWAY, RST_STREAM,
//!   WINDOW_UPDATE.
//! - `headers.rs`: response heads and trailers: header block assembly, HPACK, validation.
//! - `body.rs`: response DATA and receive flow control.
//! - `send.rs`: requests, request bodies and the output (send flow control, round robin).
//! - `events.rs`, `stream.rs`, `types.rs`: the event queue, a stream, the public types.
//!
//! A stream's send half, the body inboxes, header block assembly, window crediting and the
//! SETTINGS exchange are the server's, shared in `common/`.

mod body;
mod events;
mod headers;
mod recv;
mod send;
mod stream;
mod types;

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use bytes::BytesMut;

pub use types::{ClientConfig, ClientEvent, OpenError};

use crate::common::inbox::{Inbox, Inboxes};
use crate::common::settings::SettingsState;
use crate::common::window::ConnRecvWindow;
use crate::conn::ConnError;
use crate::conn::stream::{CLOSED_STREAMS_REMEMBERED_MAX, Closed, ClosedStreams};
use crate::decode::FrameDecoder;
use crate::encode::{encode_goaway, encode_rst_stream, encode_settings, encode_window_update};
use crate::error::ErrorCode;
use crate::frame::{SettingId, StreamId, WINDOW_BYTES_INITIAL, WINDOW_BYTES_MAX};
use events::Queued;
use headers::PartialBlock;
use stream::{Slot, Stream};

/// Answers to the peer's frames (SETTINGS ACKs, PING ACKs, RST_STREAM, WINDOW_UPDATE) that
/// may wait unread in the output: an origin that sends but does not read cannot make us
/// keep more (the server side's `max_queued_output_bytes` default).
const REPLY_BYTES_MAX: usize = 64 << 10;

/// The largest stream id (RFC 9113 §5.1.1: 31 bits).
const STREAM_ID_MAX: StreamId = (1 << 31) - 1;

/// One client connection to an HTTP/2 origin. See the crate docs, "Client role".
#[derive(Debug)]
pub struct ClientConnection {
    config: ClientConfig,
    /// The latest instant passed in.
    now: Instant,

    // Input.
    /// The server's first frame, a SETTINGS, has arrived (RFC 9113 §3.4).
    settings_seen: bool,
    frames: FrameDecoder,
    /// A header block waiting for its CONTINUATION frames (§6.10).
    block: Option<PartialBlock>,

    // Settings.
    /// Both sides' SETTINGS, and the HPACK decoder and encoder they size.
    settings: SettingsState,
    /// SETTINGS_MAX_CONCURRENT_STREAMS; unlimited until the peer says (§6.5.2).
    peer_max_streams: Option<u32>,
    /// SETTINGS_ENABLE_CONNECT_PROTOCOL = 1 (RFC 8441 §3).
    peer_extended_connect: bool,

    // Streams.
    streams: BTreeMap<StreamId, Box<Stream>>,
    closed: ClosedStreams,
    /// The id the next request gets: odd, increasing (§5.1.1). Every id at or above it, and
    /// every even id, is idle.
    next_stream_id: StreamId,

    // Flow control.
    conn_send_window: i64,
    /// Our receive window, and what is owed back to the peer.
    conn_recv: ConnRecvWindow,
    /// Body bytes of streams that closed normally, delivered and not yet released: the
    /// application still gives them back with `release_capacity` (the stream is unknown by
    /// then, the connection window is not).
    orphan_unreleased: u64,

    // Output.
    /// Control frames and header blocks, in order; each HPACK block passes through here in
    /// encoding order.
    out: BytesMut,
    /// Bytes ever handed out of `out`: a stream whose `head_at` is below has been seen.
    out_emitted: u64,
    /// Bytes in `out` answering the peer's frames since it was last drained.
    reply_bytes: usize,
    /// Streams with something to send, round robin.
    ready: VecDeque<StreamId>,
    /// Streams waiting for connection window, in the order they began to wait.
    parked: VecDeque<StreamId>,
    queued_total: usize,
    /// Scratch list for decoded header fields.
    spans_buf: Vec<squall_hpack::FieldSpan>,

    // Application.
    events: VecDeque<Queued>,
    inboxes: Inboxes,

    goaway_sent: bool,
    /// The lowest last stream id of the peer's GOAWAYs, once one came.
    peer_goaway: Option<StreamId>,
    error: Option<ConnError>,
}

impl ClientConnection {
    /// First output: the preface, our SETTINGS (ENABLE_PUSH = 0, the values above), a
    /// connection WINDOW_UPDATE.
    pub fn new(config: ClientConfig, now: Instant) -> Self {
        let config = config.sanitized();
        let mut conn = Self {
            now,
            settings_seen: false,
            frames: FrameDecoder::new(config.max_frame_size),
            block: None,
            settings: SettingsState::new(config.stream_window, config.header_table_size),
            peer_max_streams: None,
            peer_extended_connect: false,
            streams: BTreeMap::new(),
            closed: ClosedStreams::default(),
            next_stream_id: 1,
            conn_send_window: i64::from(WINDOW_BYTES_INITIAL),
            conn_recv: ConnRecvWindow::new(config.connection_window),
            orphan_unreleased: 0,
            out: BytesMut::new(),
            out_emitted: 0,
            reply_bytes: 0,
            ready: VecDeque::new(),
            parked: VecDeque::new(),
            queued_total: 0,
            spans_buf: Vec::new(),
            events: VecDeque::new(),
            inboxes: Inboxes::default(),
            goaway_sent: false,
            peer_goaway: None,
            error: None,
            config,
        };
        conn.queue_preface();
        conn
    }

    /// RFC 9113 §3.4: the preface, then SETTINGS; the connection window is raised by a
    /// WINDOW_UPDATE, since SETTINGS has no say over it (§6.9.2).
    fn queue_preface(&mut self) {
        let c = self.config;
        self.out.extend_from_slice(crate::PREFACE);
        encode_settings(
            &mut self.out,
            &[
                (SettingId::HeaderTableSize, c.header_table_size),
                // §8.4: we take no pushes.
                (SettingId::EnablePush, 0),
                (SettingId::InitialWindowSize, c.stream_window),
                (SettingId::MaxFrameSize, c.max_frame_size),
                (SettingId::MaxHeaderListSize, c.max_header_list_size),
            ],
        );
        // `sanitized` keeps the connection window at least 65,535.
        let raise = c.connection_window - WINDOW_BYTES_INITIAL;
        if raise > 0 {
            encode_window_update(&mut self.out, 0, raise);
        }
    }

    /// How many more streams `send_request` would open now: min(our cap, the peer's
    /// SETTINGS_MAX_CONCURRENT_STREAMS (unlimited until its SETTINGS arrive)) less the open
    /// ones; 0 after a GOAWAY either way, after an error, or when stream ids run out.
    pub fn available_streams(&self) -> usize {
        if self.going_away() || self.next_stream_id > STREAM_ID_MAX {
            return 0;
        }
        let cap = (self.config.max_concurrent_streams)
            .min(self.peer_max_streams.unwrap_or(u32::MAX)) as usize;
        let by_ids = ((STREAM_ID_MAX - self.next_stream_id) / 2 + 1) as usize;
        cap.saturating_sub(self.streams.len()).min(by_ids)
    }

    /// Whether the server's SETTINGS have arrived: until then `available_streams` does not
    /// know its SETTINGS_MAX_CONCURRENT_STREAMS (a caller that opens many streams at once
    /// may wait for this, or retry the refused ones).
    pub fn peer_settings_received(&self) -> bool {
        self.settings_seen
    }

    /// Whether the peer said SETTINGS_ENABLE_CONNECT_PROTOCOL = 1 (RFC 8441 §3): an
    /// extended CONNECT (`:protocol`) may be sent.
    pub fn peer_allows_extended_connect(&self) -> bool {
        self.peer_extended_connect
    }

    /// No new streams: a GOAWAY either way, or an error.
    fn going_away(&self) -> bool {
        self.goaway_sent || self.peer_goaway.is_some() || self.error.is_some()
    }

    /// We close: GOAWAY(code, last stream id 0: a server opens none); no new streams.
    /// Open streams finish. Later calls do nothing.
    pub fn go_away(&mut self, code: ErrorCode) {
        if self.goaway_sent || self.error.is_some() {
            return;
        }
        self.goaway_sent = true;
        encode_goaway(&mut self.out, 0, code, &[]);
    }

    /// The transport failed or the peer closed (EOF, reset): every open stream gets a Reset
    /// event (refused = true only for a stream of which not one byte was handed to
    /// `poll_output`). Nothing more is sent; later calls to `recv` return an error.
    pub fn fail(&mut self) {
        if self.error.is_some() {
            return;
        }
        self.error = Some(ConnError {
            code: ErrorCode::Cancel,
            reason: "transport failed or closed",
            flood: None,
        });
        // A header block half received belongs to a stream that is gone.
        self.block = None;
        self.reset_all(ErrorCode::Cancel);
        self.out.clear();
        self.reply_bytes = 0;
    }

    /// Streams open or half-closed.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// No open streams.
    pub fn is_idle(&self) -> bool {
        self.streams.is_empty()
    }

    /// No open streams and nothing more can happen on it (GOAWAY either way, or an error),
    /// and every event and byte of output has been taken: close it.
    pub fn is_finished(&self) -> bool {
        self.going_away()
            && self.streams.is_empty()
            && self.events.is_empty()
            && self.out.is_empty()
    }

    /// The error that ended the connection, if one did.
    pub fn last_error(&self) -> Option<&ConnError> {
        self.error.as_ref()
    }

    /// When `on_timer` wants to be called: never. Stalled send windows are not detected
    /// here; the worker's own timeouts bound a request to an origin.
    pub fn next_deadline(&self) -> Option<Instant> {
        None
    }

    /// Time passes; nothing is due (see `next_deadline`).
    pub fn on_timer(&mut self, now: Instant) {
        self.now = self.now.max(now);
    }

    /// A connection error (RFC 9113 §5.4.1): GOAWAY with `code`, and a Reset event for every
    /// open stream. Returns the error; only the first counts.
    fn conn_error(&mut self, code: ErrorCode, reason: &'static str) -> ConnError {
        self.end_with(ConnError {
            code,
            reason,
            flood: None,
        })
    }

    /// `conn_error` with any error, a flood too.
    fn end_with(&mut self, error: ConnError) -> ConnError {
        let error = match ConnError::record(&mut self.error, error) {
            Ok(error) => error,
            Err(first) => return first,
        };
        self.block = None;
        self.reset_all(error.code);
        encode_goaway(&mut self.out, 0, error.code, &[]);
        error
    }

    /// Every open stream goes, each with a Reset event.
    fn reset_all(&mut self, code: ErrorCode) {
        let ids: Vec<StreamId> = self.streams.keys().copied().collect();
        for id in ids {
            let refused = !self.head_sent(id);
            self.remove_stream(id, Closed::ResetByUs, Some((code, refused)));
        }
        debug_assert!(self.ready.is_empty() && self.parked.is_empty());
    }

    /// Whether any byte of the stream's HEADERS was handed to `poll_output`.
    fn head_sent(&self, id: StreamId) -> bool {
        self.streams
            .get(&id)
            .is_some_and(|s| s.head_at < self.out_emitted)
    }

    /// Takes a stream out of the map. `reset`: it ended without a complete response, and
    /// the application gets a Reset event with that code and `refused` (its undelivered
    /// events go first); `None`: it closed normally, or the application reset it.
    /// Body the application holds goes back to the connection window at once after a
    /// reset; after a normal close, when the application releases it.
    fn remove_stream(&mut self, id: StreamId, how: Closed, reset: Option<(ErrorCode, bool)>) {
        let Some(stream) = self.streams.remove(&id) else {
            return;
        };
        self.queued_total -= stream.send.queued_bytes;
        self.unfile(id, stream.slot);
        self.closed.insert(id, how);
        if how == Closed::Normally {
            self.orphan_unreleased += stream.unreleased;
            return;
        }
        self.forget_events(id);
        if let Some((code, refused)) = reset {
            self.push_event(ClientEvent::Reset {
                stream_id: id,
                code,
                refused,
            });
        }
        self.credit_connection(stream.unreleased);
    }

    /// Removes a stream from the round robin or the parked list.
    fn unfile(&mut self, id: StreamId, slot: Slot) {
        let list = match slot {
            Slot::Out => return,
            Slot::Ready => &mut self.ready,
            Slot::Parked => &mut self.parked,
        };
        if let Some(at) = list.iter().position(|&s| s == id) {
            list.remove(at);
        }
    }

    /// Removes the stream if both halves are done.
    fn close_if_done(&mut self, id: StreamId) {
        if self.streams.get(&id).is_some_and(|s| s.is_closed()) {
            self.remove_stream(id, Closed::Normally, None);
        }
    }

    /// A stream error (§5.4.2) on an open stream or a late one: RST_STREAM with `code`; an
    /// open stream goes with a Reset event.
    fn stream_error(&mut self, id: StreamId, code: ErrorCode) {
        self.send_rst(id, code);
        if self.streams.contains_key(&id) {
            self.remove_stream(id, Closed::ResetByUs, Some((code, false)));
        } else if id % 2 == 1 && id < self.next_stream_id {
            self.closed.insert(id, Closed::ResetByUs);
        }
    }

    /// RST_STREAM as an answer to the peer: counted against what it may leave unread.
    fn send_rst(&mut self, id: StreamId, code: ErrorCode) {
        encode_rst_stream(&mut self.out, id, code);
        self.reply_bytes += crate::frame::FRAME_HEADER_BYTES + 4;
    }

    /// Panics when an invariant does not hold (tests call it after every step).
    #[doc(hidden)]
    pub fn check_invariants(&self) {
        let max = i64::from(WINDOW_BYTES_MAX);
        assert!(self.conn_send_window <= max);
        assert!((0..=max).contains(&self.conn_recv.window));
        assert!(self.streams.len() <= self.config.max_concurrent_streams as usize);
        assert!(self.closed.len() <= CLOSED_STREAMS_REMEMBERED_MAX);
        assert!(self.next_stream_id % 2 == 1);
        let queued: usize = self.streams.values().map(|s| s.send.queued_bytes).sum();
        assert_eq!(queued, self.queued_total);
        let initial = self.settings.local_initial_window();
        for (&id, s) in &self.streams {
            assert!(id % 2 == 1 && id < self.next_stream_id, "stream {id}");
            assert!(s.send.window <= max);
            assert!(!s.is_closed(), "closed stream {id} kept");
            let in_queue: usize = s.send.queue.iter().map(|b| b.len()).sum();
            assert_eq!(in_queue, s.send.queued_bytes, "stream {id}");
            // Every byte of the stream window is with the peer, owed, or held.
            let accounted = s.recv_window + s.recv_owed as i64 + s.unreleased as i64;
            assert_eq!(accounted, initial, "stream {id} receive window");
            let filed = match s.slot {
                Slot::Out => 0,
                Slot::Ready => self.ready.iter().filter(|&&r| r == id).count(),
                Slot::Parked => self.parked.iter().filter(|&&r| r == id).count(),
            };
            assert_eq!(filed, usize::from(s.slot != Slot::Out), "stream {id} filed");
        }
        assert!(self.ready.len() + self.parked.len() <= self.streams.len());
        assert!(self.parked.is_empty() || self.conn_send_window <= 0);
        if self.error.is_none() {
            let held: u64 = self.streams.values().map(|s| s.unreleased).sum();
            let accounted = self.conn_recv.window
                + (self.conn_recv.owed + held + self.orphan_unreleased) as i64;
            assert_eq!(accounted, i64::from(self.config.connection_window));
        } else {
            assert!(self.streams.is_empty() && self.block.is_none());
        }
        // Per stream at most: interim heads, a response, a data marker, trailers, a reset;
        // plus resets of streams gone, and one GOAWAY.
        let per_stream = stream::INTERIM_HEADS_MAX as usize + 4;
        let bound = per_stream * self.config.max_concurrent_streams as usize
            + 2 * CLOSED_STREAMS_REMEMBERED_MAX
            + 1;
        assert!(self.events.len() <= bound, "{} events", self.events.len());
        let window = self.config.stream_window.max(WINDOW_BYTES_INITIAL) as usize;
        for inbox in self.inboxes.iter() {
            assert!(inbox.pieces() <= 2 * window / 1024 + 2);
        }
        let inboxed: usize = self.inboxes.iter().map(Inbox::bytes).sum();
        assert!(inboxed as u64 <= u64::from(self.config.connection_window));
        if let Some(block) = &self.block {
            assert!(block.fragments.len() <= self.config.header_block_bytes_max());
        }
        assert!(self.reply_bytes <= REPLY_BYTES_MAX || self.error.is_some());
    }
}
