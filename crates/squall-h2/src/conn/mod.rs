//! The server side of an HTTP/2 connection (RFC 9113): connection and stream state
//! machines, flow control in both directions, HPACK, request validation and flood limits,
//! sans-IO. Bytes and instants in; events, and bytes to send, out.
//!
//! - `recv.rs`: frames from the peer, by type; stream states and receive flow control.
//! - `send.rs`: the application's responses, and the output (send flow control).
//! - `schedule.rs`, `priority.rs`: the DATA scheduler and the RFC 9218 priorities it orders by.
//! - `events.rs`: the event queue and request body inboxes.
//! - `headers.rs`: header blocks, validated by `head.rs` (shared with `squall-h3`).
//! - `stream.rs`, `flood.rs`, `config.rs`, `types.rs`: the pieces.
//!
//! What the client role does alike (a stream's send half, body inboxes, header block
//! assembly, window crediting, the SETTINGS exchange) is shared with it in `common/`.

mod body;
mod config;
mod events;
mod fixed;
mod flood;
mod headers;
mod lifecycle;
mod priority;
mod recv;
mod schedule;
mod send;
pub(crate) mod stream;
mod table;
mod types;

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use bytes::BytesMut;

pub use config::ServerConfig;
pub use types::{ConnError, Event, FloodKind, Stats, StreamClosed};

use crate::common::inbox::Inboxes;
use crate::common::settings::SettingsState;
use crate::common::window::ConnRecvWindow;
use crate::decode::FrameDecoder;
use crate::encode::{encode_goaway, encode_settings, encode_window_update};
use crate::error::ErrorCode;
use crate::frame::{SettingId, StreamId, WINDOW_BYTES_INITIAL, WINDOW_BYTES_MAX};
use crate::head::{HeadLimits, Request};
use events::Queued;
use flood::Floods;
use lifecycle::{Lookup, Notify};
use priority::PriorityParams;
use schedule::{Scheduler, Slot};
use stream::ClosedStreams;
use table::StreamTable;

/// One server connection. See the crate docs for the limits it enforces.
#[derive(Debug)]
pub struct Connection {
    config: ServerConfig,
    limits: HeadLimits,
    /// The latest instant passed in: when a stall that starts in a call without `now`
    /// (a send, an output poll) is taken to have started.
    now: Instant,

    // Input.
    preface_done: bool,
    /// The peer's first frame, a SETTINGS, has arrived (RFC 9113 §3.4).
    settings_seen: bool,
    frames: FrameDecoder,
    /// A header block waiting for its CONTINUATION frames (§6.10).
    block: Option<recv::PartialBlock>,
    /// Both sides' SETTINGS, and the HPACK decoder and encoder they size.
    settings: SettingsState,

    // Streams.
    /// The open streams, in reused slots (`table.rs`).
    streams: StreamTable,
    closed: ClosedStreams,
    /// The highest client stream id seen: every higher odd id is idle (§5.1.1).
    highest_stream_id: StreamId,
    /// The highest stream id we opened or answered: GOAWAY's last stream id (§6.8).
    last_processed: StreamId,
    /// PRIORITY_UPDATEs for streams not open yet (RFC 9218 §7.1), applied when they open:
    /// with the open streams at most SETTINGS_MAX_CONCURRENT_STREAMS when one is added.
    pending_priorities: BTreeMap<StreamId, PriorityParams>,

    // Flow control.
    conn_send_window: i64,
    /// Our receive window, and what is owed back to the peer.
    conn_recv: ConnRecvWindow,

    // Output.
    /// Frames to send, in order: control frames, HEADERS, and each DATA frame header just
    /// before its payload leaves. Every HPACK block passes through here in encoding order.
    out: BytesMut,
    /// Bytes in `out` that answer the peer's frames (ACKs, RST_STREAM, WINDOW_UPDATE)
    /// since it was last drained: what a peer that sends but does not read makes us keep.
    reply_bytes: usize,
    /// The last fixed response's fields as a block of indices (`fixed.rs`).
    fixed_block: fixed::FixedBlock,
    /// Streams with something to send, by RFC 9218 priority (`schedule.rs`).
    scheduler: Scheduler,
    queued_total: usize,
    conn_stalled_since: Option<Instant>,
    /// Streams whose `stalled_since` is set, so that the hot path never scans for stalls.
    stalled_streams: usize,
    /// Scratch list for decoded header fields, reused block after block.
    spans_buf: Vec<squall_hpack::FieldSpan>,
    /// Where header blocks are decoded, each split off it as its request's bytes.
    head_chunk: BytesMut,
    /// The room the next header block's decoded bytes need in `head_chunk`: the last one's
    /// size.
    head_bytes_hint: usize,

    // Application.
    events: VecDeque<Queued>,
    /// The requests of the `Queued::Request` events, in the same order.
    requests: VecDeque<(StreamId, Request)>,
    inboxes: Inboxes,

    floods: Floods,
    stats: Stats,
    goaway_sent: bool,
    peer_goaway: bool,
    error: Option<ConnError>,
}

impl Connection {
    /// A connection whose first output is our SETTINGS and the WINDOW_UPDATE that raises the
    /// connection window (RFC 9113 §3.4: the server preface).
    pub fn new(config: ServerConfig, now: Instant) -> Self {
        let config = config.sanitized();
        let limits = HeadLimits {
            path_bytes_max: config.max_path_bytes,
            body_bytes_max: config.max_body_bytes,
            connect_protocol: config.enable_connect_protocol,
        };
        let mut conn = Self {
            limits,
            now,
            preface_done: false,
            settings_seen: false,
            frames: FrameDecoder::new(config.max_frame_size),
            block: None,
            settings: SettingsState::new(config.initial_window_size, config.header_table_size),
            streams: StreamTable::default(),
            closed: ClosedStreams::default(),
            highest_stream_id: 0,
            last_processed: 0,
            pending_priorities: BTreeMap::new(),
            conn_send_window: i64::from(WINDOW_BYTES_INITIAL),
            conn_recv: ConnRecvWindow::new(config.connection_window_size),
            out: BytesMut::new(),
            reply_bytes: 0,
            fixed_block: fixed::FixedBlock::default(),
            scheduler: Scheduler::default(),
            queued_total: 0,
            conn_stalled_since: None,
            stalled_streams: 0,
            spans_buf: Vec::new(),
            head_chunk: BytesMut::new(),
            head_bytes_hint: 512,
            events: VecDeque::new(),
            requests: VecDeque::new(),
            inboxes: Inboxes::default(),
            floods: Floods::new(config.flood_window, now),
            stats: Stats::default(),
            goaway_sent: false,
            peer_goaway: false,
            error: None,
            config,
        };
        conn.queue_preface();
        conn
    }

    fn queue_preface(&mut self) {
        let c = &self.config;
        let settings = [
            (SettingId::HeaderTableSize, c.header_table_size),
            (SettingId::MaxConcurrentStreams, c.max_concurrent_streams),
            (SettingId::InitialWindowSize, c.initial_window_size),
            (SettingId::MaxFrameSize, c.max_frame_size),
            (SettingId::MaxHeaderListSize, c.max_header_list_size),
            // RFC 9218 §2.1: priorities come from the `priority` field and
            // PRIORITY_UPDATE, so clients need not send RFC 7540 ones.
            (SettingId::NoRfc7540Priorities, 1),
            // RFC 8441 §3: clients may send the extended CONNECT only after seeing this.
            (SettingId::EnableConnectProtocol, 1),
        ];
        let sent = settings.len() - usize::from(!c.enable_connect_protocol);
        encode_settings(&mut self.out, &settings[..sent]);
        // `sanitized` keeps the connection window at least 65,535.
        let raise = c.connection_window_size - WINDOW_BYTES_INITIAL;
        if raise > 0 {
            encode_window_update(&mut self.out, 0, raise);
        }
    }

    /// Graceful shutdown: GOAWAY with `code` and the highest stream id processed; new
    /// streams are refused, open ones finish. Later calls do nothing.
    pub fn go_away(&mut self, code: ErrorCode) {
        if self.goaway_sent || self.error.is_some() {
            return;
        }
        self.goaway_sent = true;
        encode_goaway(&mut self.out, self.last_processed, code, &[]);
    }

    /// True when the connection is over: after GOAWAY (ours or the peer's) or an error,
    /// with no stream left and all output taken. The caller closes the socket.
    pub fn is_finished(&self) -> bool {
        if self.error.is_some() {
            return self.out.is_empty();
        }
        (self.goaway_sent || self.peer_goaway) && self.streams.is_empty() && self.out.is_empty()
    }

    /// Streams open or half-closed: requests not yet answered, or not yet fully received.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// No stream, no event and no output: an idle timeout may close the connection.
    pub fn is_idle(&self) -> bool {
        self.streams.is_empty() && self.events.is_empty() && !self.has_output()
    }

    /// Gives back what an idle connection keeps for its next requests (the head chunk, the
    /// request queue, the stream table, the last fixed answer's block), so that an idle
    /// connection costs no more than it did before they were kept: they pay within a burst
    /// of requests, not across bursts.
    pub fn shrink_idle(&mut self) {
        self.head_chunk = BytesMut::new();
        self.streams.shrink();
        // Made again, of the indices still in the table, by the next fixed answer.
        self.fixed_block = fixed::FixedBlock::default();
        if self.requests.is_empty() {
            self.requests = VecDeque::new();
        }
    }

    /// Counters since the last call.
    pub fn take_stats(&mut self) -> Stats {
        std::mem::take(&mut self.stats)
    }

    /// The error that ended the connection, if one did.
    pub fn last_error(&self) -> Option<&ConnError> {
        self.error.as_ref()
    }

    /// When [`Connection::on_timer`] wants to be called next: the earliest stall deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.error.is_some() {
            return None;
        }
        let timeout = self.config.stall_timeout;
        let streams = (self.stalled_streams > 0).then(|| {
            (self.streams.values())
                .filter_map(|s| s.stalled_since)
                .min()
        });
        (streams.flatten().into_iter())
            .chain(self.conn_stalled_since)
            .min()
            .map(|since| since + timeout)
    }

    /// Resets streams whose send window stayed closed for `stall_timeout` (CANCEL), and
    /// ends the connection (GOAWAY ENHANCE_YOUR_CALM) if its own window did.
    pub fn on_timer(&mut self, now: Instant) {
        self.now = self.now.max(now);
        if self.error.is_some() {
            return;
        }
        self.refresh_all_stalls();
        let timeout = self.config.stall_timeout;
        let expired = |since: Option<Instant>| since.is_some_and(|s| s + timeout <= now);
        let stalled: Vec<StreamId> = (self.streams.iter())
            .filter(|(_, s)| expired(s.stalled_since))
            .map(|(&id, _)| id)
            .collect();
        for id in stalled {
            self.stats.stalls += 1;
            self.reset(id, ErrorCode::Cancel);
        }
        if expired(self.conn_stalled_since) {
            self.stats.stalls += 1;
            self.fail(
                ErrorCode::EnhanceYourCalm,
                "connection send window stalled",
                Some(FloodKind::Stall),
            );
        }
    }

    /// Marks and unmarks every stream's stall (data queued and no window to send it), and the
    /// connection's: for the timer and for SETTINGS, which move every window at once.
    fn refresh_all_stalls(&mut self) {
        let ids: Vec<StreamId> = self.streams.keys().copied().collect();
        for id in ids {
            self.refresh_stall(id);
        }
        self.refresh_stalls();
    }

    /// Marks or unmarks one stream's stall: called wherever its queue or window changes, so
    /// that stall bookkeeping costs O(1) per frame instead of a scan of every stream.
    pub(super) fn refresh_stall(&mut self, id: StreamId) {
        let now = self.now;
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        match (stream.is_stalled(), stream.stalled_since.is_some()) {
            (true, false) => {
                stream.stalled_since = Some(now);
                self.stalled_streams += 1;
            }
            (false, true) => {
                stream.stalled_since = None;
                self.stalled_streams -= 1;
            }
            _ => {}
        }
    }

    /// Marks and unmarks the connection's stall: data queued and no connection window.
    fn refresh_stalls(&mut self) {
        let now = self.now;
        let conn_stalled = self.queued_total > 0 && self.conn_send_window <= 0;
        self.conn_stalled_since = match conn_stalled {
            true => Some(self.conn_stalled_since.unwrap_or(now)),
            false => None,
        };
    }

    /// A connection error (RFC 9113 §5.4.1): GOAWAY with `code`, and everything that could
    /// still produce output or events dropped. Returns the error; only the first counts.
    fn fail(
        &mut self,
        code: ErrorCode,
        reason: &'static str,
        flood: Option<FloodKind>,
    ) -> ConnError {
        let error = ConnError {
            code,
            reason,
            flood,
        };
        let error = match ConnError::record(&mut self.error, error) {
            Ok(error) => error,
            Err(first) => return first,
        };
        match flood {
            Some(kind) => self.stats.flood = Some(kind),
            None => self.stats.protocol_errors += 1,
        }
        self.streams = StreamTable::default();
        self.stalled_streams = 0;
        self.scheduler.clear();
        self.pending_priorities.clear();
        self.queued_total = 0;
        self.conn_stalled_since = None;
        self.events.clear();
        self.requests.clear();
        self.inboxes.clear();
        self.block = None;
        encode_goaway(&mut self.out, self.last_processed, code, &[]);
        error
    }

    /// Asserts the connection's invariants; tests call it after every step.
    #[doc(hidden)]
    pub fn check_invariants(&self) {
        let max = i64::from(WINDOW_BYTES_MAX);
        assert!(self.conn_send_window <= max);
        assert!(self.conn_recv.window <= max && self.conn_recv.window >= 0);
        assert!(self.streams.len() <= self.config.max_concurrent_streams as usize);
        assert!(self.closed.len() <= stream::CLOSED_STREAMS_REMEMBERED_MAX);
        let queued: usize = self.streams.values().map(|s| s.send.queued_bytes).sum();
        assert_eq!(queued, self.queued_total);
        for (&id, stream) in self.streams.iter() {
            assert!(id % 2 == 1 && id <= self.highest_stream_id);
            assert!(stream.send.window <= max);
            assert_eq!(
                stream.send.queue.iter().map(|b| b.len()).sum::<usize>(),
                stream.send.queued_bytes
            );
            assert!(!stream.is_closed(), "closed stream {id} kept");
        }
        self.check_schedule();
        let stalled = (self.streams.values())
            .filter(|s| s.stalled_since.is_some())
            .count();
        assert_eq!(stalled, self.stalled_streams, "stalled streams counted");
        // One Request, one data marker, one Trailers and one Reset per stream at most, plus
        // Resets of streams gone since the last poll, bounded by the reset budget.
        let bound = 4 * self.config.max_concurrent_streams as usize
            + 2 * self.config.max_resets_per_window as usize
            + 16;
        assert!(self.events.len() <= bound, "{} events", self.events.len());
        // The request queue holds the requests of the Request events, in their order.
        let marked = (self.events.iter()).filter_map(|q| match q {
            Queued::Request(id) => Some(*id),
            _ => None,
        });
        assert!(marked.eq(self.requests.iter().map(|(id, _)| *id)));
        for inbox in self.inboxes.iter() {
            let window = self.config.initial_window_size.max(WINDOW_BYTES_INITIAL) as usize;
            assert!(inbox.pieces() <= 2 * window / 1024 + 2);
        }
        if let Some(block) = &self.block {
            assert!(block.fragments.len() <= self.config.header_block_bytes_max());
        }
        if self.error.is_some() {
            assert!(self.streams.is_empty() && self.events.is_empty());
        }
    }

    /// Every stream is filed where its slot says, once, at its current priority; a stream
    /// waits for connection window only while that window is closed; pending priorities
    /// are for idle streams and within the stream limit.
    fn check_schedule(&self) {
        let filed = self.scheduler.check();
        let mut seen = std::collections::BTreeSet::new();
        for &(id, slot, priority) in &filed {
            assert!(seen.insert(id), "stream {id} filed twice");
            let stream = self.streams.get(&id).expect("filed stream exists");
            assert_eq!(stream.slot, slot, "stream {id}");
            if let Some(priority) = priority {
                assert_eq!(
                    stream.priority, priority,
                    "stream {id} filed at another priority"
                );
            }
        }
        let out = self
            .streams
            .values()
            .filter(|s| s.slot == Slot::Out)
            .count();
        assert_eq!(filed.len() + out, self.streams.len());
        assert!(!self.scheduler.has_parked() || self.conn_send_window <= 0);
        let limit = self.config.max_concurrent_streams as usize;
        assert!(self.pending_priorities.len() <= limit);
        if let Some((&id, _)) = self.pending_priorities.first_key_value() {
            assert!(id > self.highest_stream_id && !id.is_multiple_of(2));
        }
    }
}
