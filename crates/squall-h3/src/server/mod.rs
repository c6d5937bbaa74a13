//! The server side of an HTTP/3 connection (RFC 9114) above QUIC streams, sans-IO: stream
//! bytes and `Instant`s in; events, commands and stream bytes out.
//!
//! The QUIC transport is the driver's. It feeds each received stream chunk to
//! [`Connection::recv`], reports the peer's RESET_STREAM and STOP_SENDING
//! ([`Connection::stream_reset`], [`Connection::stop_sending`]), writes what
//! [`Connection::poll_output`] offers into QUIC streams (which take only what flow control
//! allows; the rest stays queued here), and carries out [`Command`]s: resetting a stream,
//! stopping reading one, closing the connection.
//!
//! - `recv.rs`: the entry points for input, the unidirectional streams (control, QPACK) and
//!   resets from the peer.
//! - `request_stream.rs`: a request stream's frames: head, body, trailers, blocked QPACK
//!   sections, the answers the connection gives itself, stream errors.
//! - `send.rs`: the application's responses, and the output to the driver.
//! - `events.rs`: events for the application, commands for the driver.
//! - `stream.rs`, `flood.rs`, `config.rs`, `types.rs`: the pieces.
//!
//! Request heads and trailers are validated by `squall_h2::head` (RFC 9114 §4.2 and §4.3 are
//! RFC 9113's rules), and a request is a `squall_h2::Request`, re-exported here.

mod config;
mod events;
mod flood;
mod recv;
mod request_stream;
mod send;
mod stream;
mod types;

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use bytes::BytesMut;
use squall_h2::head::HeadLimits;

pub use config::ServerConfig;
pub use squall_h2::{FieldSpan, HeaderFields, Request};
pub use types::{
    Command, ConnError, Event, FloodKind, OutStream, Stats, StreamClosed, StreamOut, Uni,
};

use crate::encode::{encode_settings, encode_stream_type};
use crate::error::ErrorCode;
use crate::frame::{Frame, Settings, StreamType};
use crate::qpack;
use events::Queued;
use flood::{Counted, Floods};
use recv::UniStream;
use stream::{App, ClosedStreams, SendQueue, Stream};

/// What a handler returns: `Err` once the connection has failed (Close queued).
pub(crate) type Step = Result<(), ConnError>;

/// One server connection. See the crate docs for what it does and what the driver does.
#[derive(Debug)]
pub struct Connection {
    config: ServerConfig,
    limits: HeadLimits,
    /// The latest instant passed in.
    now: Instant,

    // QPACK: our decoder (the peer's encoder stream and request sections), our encoder
    // (responses, and the peer's decoder stream).
    decoder: qpack::Decoder,
    encoder: qpack::Encoder,

    // The peer's unidirectional streams, by id, while they are open.
    uni: BTreeMap<u64, UniStream>,
    control_seen: bool,
    encoder_seen: bool,
    decoder_seen: bool,
    /// Unknown unidirectional streams being read and discarded.
    unknown_uni: usize,
    /// The peer's SETTINGS, once they came.
    peer_settings: Option<Settings>,
    /// The last GOAWAY (a push id) and MAX_PUSH_ID from the peer.
    peer_goaway: Option<u64>,
    peer_max_push_id: Option<u64>,

    // Request streams.
    /// Boxed: a B-tree moves its values as it splits and merges nodes, and a stream is big.
    streams: BTreeMap<u64, Box<Stream>>,
    closed: ClosedStreams,
    /// The highest request stream id seen.
    highest_request: Option<u64>,
    /// The id our GOAWAY carried: request streams from it on are refused.
    goaway: Option<u64>,

    // Output.
    uni_out: [SendQueue; 3],
    /// Bytes queued on request streams.
    queued_total: usize,
    /// Where the next round of request stream output starts, so that a stream QUIC keeps
    /// blocked does not always go first.
    cursor: u64,
    /// Reused by `poll_output`: the request streams with output, in the order offered.
    writable: Vec<u64>,
    /// Where response HEADERS frames and DATA frame headers are written, each split off as
    /// a `Bytes` of its own: one allocation serves many answers, and QUIC's copies of them
    /// (kept until acknowledged) share it by reference count.
    arena: BytesMut,
    /// Reused by `head_frame`: a field section while its frame header is worked out.
    block: BytesMut,
    /// Request streams that closed, kept for the next ones (their queues keep their room).
    /// Boxed as `streams` holds them: reusing one reuses its allocation.
    #[allow(clippy::vec_box)]
    spare: Vec<Box<Stream>>,
    /// The spans of the fields of the section decoded last; reused.
    spans: Vec<squall_h2::head::Decoded>,

    // Application and driver.
    events: VecDeque<Queued>,
    commands: VecDeque<Command>,

    floods: Floods,
    stats: Stats,
    error: Option<ConnError>,
}

impl Connection {
    /// A connection whose first output is our control stream (its type and SETTINGS) and
    /// the types of our QPACK encoder and decoder streams.
    pub fn new(config: ServerConfig, now: Instant) -> Self {
        let limits = HeadLimits {
            path_bytes_max: config.max_path_bytes,
            body_bytes_max: config.max_body_bytes,
            connect_protocol: config.enable_connect_protocol,
        };
        let mut conn = Self {
            limits,
            now,
            decoder: qpack::Decoder::new(
                config.qpack_max_table_capacity,
                config.qpack_blocked_streams,
            ),
            encoder: qpack::Encoder::new(config.qpack_encoder),
            uni: BTreeMap::new(),
            control_seen: false,
            encoder_seen: false,
            decoder_seen: false,
            unknown_uni: 0,
            peer_settings: None,
            peer_goaway: None,
            peer_max_push_id: None,
            streams: BTreeMap::new(),
            closed: ClosedStreams::default(),
            highest_request: None,
            goaway: None,
            uni_out: Default::default(),
            queued_total: 0,
            cursor: 0,
            writable: Vec::new(),
            arena: BytesMut::new(),
            block: BytesMut::new(),
            spare: Vec::new(),
            spans: Vec::new(),
            events: VecDeque::new(),
            commands: VecDeque::new(),
            floods: Floods::new(config.flood_window, now),
            stats: Stats::default(),
            error: None,
            config,
        };
        conn.queue_preface();
        conn
    }

    fn queue_preface(&mut self) {
        let settings = Settings {
            qpack_max_table_capacity: self.config.qpack_max_table_capacity,
            qpack_blocked_streams: self.config.qpack_blocked_streams,
            max_field_section_size: Some(self.config.max_field_section_size),
            enable_connect_protocol: self.config.enable_connect_protocol,
            h3_datagram: false,
        };
        let mut control = BytesMut::new();
        encode_stream_type(StreamType::Control, &mut control);
        encode_settings(&settings, &mut control);
        self.uni_out[Uni::Control.index()].push(control.freeze());
        for (uni, ty) in [
            (Uni::QpackEncoder, StreamType::QpackEncoder),
            (Uni::QpackDecoder, StreamType::QpackDecoder),
        ] {
            let mut bytes = BytesMut::new();
            encode_stream_type(ty, &mut bytes);
            self.uni_out[uni.index()].push(bytes.freeze());
        }
    }

    /// Graceful shutdown (RFC 9114 §5.2): GOAWAY on our control stream with the first
    /// request stream id not processed (one past the highest seen). Request streams from that
    /// id on are refused with H3_REQUEST_REJECTED; lower ones, even if their bytes come
    /// later, and open ones finish. Later calls do nothing.
    pub fn go_away(&mut self) {
        if self.goaway.is_some() || self.error.is_some() {
            return;
        }
        let id = self.highest_request.map_or(0, |id| id + 4);
        self.goaway = Some(id);
        let mut frame = BytesMut::new();
        Frame::GoAway(id).encode(&mut frame);
        self.uni_out[Uni::Control.index()].push(frame.freeze());
    }

    /// The id our GOAWAY carried, once sent.
    pub fn goaway_id(&self) -> Option<u64> {
        self.goaway
    }

    /// The peer's SETTINGS, once its control stream brought them.
    pub fn peer_settings(&self) -> Option<&Settings> {
        self.peer_settings.as_ref()
    }

    /// True when the connection is over: after an error once its commands are taken, or
    /// after a GOAWAY (ours or the peer's) with no request stream left and all output taken.
    /// The driver then closes the QUIC connection (H3_NO_ERROR when there was no error).
    pub fn is_finished(&self) -> bool {
        if self.error.is_some() {
            return self.commands.is_empty();
        }
        (self.goaway.is_some() || self.peer_goaway.is_some())
            && self.streams.is_empty()
            && self.events.is_empty()
            && !self.has_output()
    }

    /// Request streams the connection still has work on: requests not yet answered, or not
    /// yet fully received, or whose response is not yet all taken by the driver.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// No request stream, no event, no command and no output: an idle timeout may close
    /// the connection.
    pub fn is_idle(&self) -> bool {
        self.streams.is_empty()
            && self.events.is_empty()
            && self.commands.is_empty()
            && !self.has_output()
    }

    /// Counters since the last call.
    pub fn take_stats(&mut self) -> Stats {
        std::mem::take(&mut self.stats)
    }

    /// The error that ended the connection, if one did.
    pub fn last_error(&self) -> Option<&ConnError> {
        self.error.as_ref()
    }

    /// Counts `n` events against a flood limit; past it, the connection ends.
    pub(crate) fn count(&mut self, counted: Counted, n: u64) -> Step {
        if n == 0 {
            return Ok(());
        }
        let c = &self.config;
        let (limit, kind) = match counted {
            Counted::Kind(kind) => (
                match kind {
                    FloodKind::RapidReset => c.max_resets_per_window,
                    FloodKind::EmptyFrames => c.max_empty_frames_per_window,
                    FloodKind::UnknownFrames => c.max_unknown_frames_per_window,
                    FloodKind::ControlFrames => c.max_control_frames_per_window,
                    FloodKind::QpackEncoder => c.max_qpack_inserts_per_window,
                },
                kind,
            ),
            Counted::EmptyInserts => (c.max_empty_frames_per_window, FloodKind::QpackEncoder),
        };
        if self.floods.hit(counted, n, self.now, limit) {
            let reason = match counted {
                Counted::EmptyInserts => "QPACK insertions of empty names",
                Counted::Kind(FloodKind::RapidReset) => "request streams reset or malformed",
                Counted::Kind(FloodKind::EmptyFrames) => "empty frames",
                Counted::Kind(FloodKind::UnknownFrames) => "unknown or reserved frames",
                Counted::Kind(FloodKind::ControlFrames) => "control frames",
                Counted::Kind(FloodKind::QpackEncoder) => "QPACK insertions",
            };
            return Err(self.fail(ErrorCode::ExcessiveLoad, reason, Some(kind)));
        }
        Ok(())
    }

    /// A connection error (RFC 9114 §8): everything that could still produce output or
    /// events is dropped and [`Command::Close`] queued. Returns the error; only the first
    /// counts.
    pub(crate) fn fail(
        &mut self,
        code: ErrorCode,
        reason: &'static str,
        flood: Option<FloodKind>,
    ) -> ConnError {
        if let Some(first) = self.error {
            return first;
        }
        let error = ConnError {
            code,
            reason,
            flood,
        };
        self.error = Some(error);
        match flood {
            Some(kind) => self.stats.flood = Some(kind),
            None => self.stats.protocol_errors += 1,
        }
        self.streams.clear();
        self.uni.clear();
        self.queued_total = 0;
        for queue in &mut self.uni_out {
            queue.clear();
        }
        self.events.clear();
        self.commands.clear();
        self.commands.push_back(Command::Close { code, reason });
        error
    }

    /// Asserts the connection's invariants; tests call it after every step.
    #[doc(hidden)]
    pub fn check_invariants(&self) {
        self.decoder.check_invariants();
        self.encoder.check_invariants();
        for queue in &self.uni_out {
            queue.check();
            assert!(!queue.fin(), "our unidirectional streams never end");
        }
        let queued: usize = self.streams.values().map(|s| s.out.bytes()).sum();
        assert_eq!(queued, self.queued_total);
        let mut blocked = 0;
        for (&id, stream) in &self.streams {
            self.check_stream(id, stream);
            blocked += usize::from(stream.blocked.is_some());
        }
        if self.error.is_none() {
            assert_eq!(blocked, self.decoder.blocked_streams(), "blocked streams");
        }
        // One Request event per stream the application has not polled yet, and only those.
        let mut requests = 0;
        for event in &self.events {
            if let Queued::Request(id, _) = event {
                requests += 1;
                let stream = self.streams.get(id).expect("a queued request's stream");
                assert_eq!(stream.app, App::Queued, "stream {id}");
            }
        }
        let queued_apps = self.streams.values().filter(|s| s.app == App::Queued);
        assert_eq!(queued_apps.count(), requests);
        assert!(self.unknown_uni <= self.config.max_unknown_uni_streams);
        let discarding = self
            .uni
            .values()
            .filter(|u| matches!(u, UniStream::Discard));
        assert_eq!(discarding.count(), self.unknown_uni);
        assert!(usize::from(self.control_seen) + usize::from(self.encoder_seen) <= 2);
        if let Some(error) = self.error {
            assert!(self.streams.is_empty() && self.events.is_empty() && self.uni.is_empty());
            assert!(self.uni_out.iter().all(SendQueue::is_empty));
            assert!(self.commands.len() <= 1);
            assert!(self.commands.iter().all(|c| matches!(
                c,
                Command::Close { code, .. } if *code == error.code
            )));
        }
    }

    fn check_stream(&self, id: u64, stream: &Stream) {
        use stream::{Recv, Send};
        assert_eq!(id % 4, 0, "request stream ids are client bidirectional");
        assert!(self.highest_request.is_some_and(|h| id <= h));
        assert!(!stream.is_done(), "finished stream {id} kept");
        stream.out.check();
        assert_eq!(stream.send == Send::Ended, stream.out.fin(), "stream {id}");
        if stream.send == Send::Finished {
            assert!(stream.out.is_empty());
        }
        if let Some(blocked) = &stream.blocked {
            assert!(matches!(stream.recv, Recv::Head | Recv::Body));
            assert!(blocked.rest_bytes <= self.config.max_blocked_stream_bytes);
            let rest: usize = blocked.rest.iter().map(|b| b.len()).sum();
            assert_eq!(rest, blocked.rest_bytes);
        }
        match stream.app {
            App::Queued | App::Delivered => {
                assert!(
                    !matches!(stream.recv, Recv::Head | Recv::Stopped),
                    "stream {id}"
                );
            }
            App::None => assert!(
                (stream.recv == Recv::Head && stream.send == Send::Idle)
                    || (stream.recv.is_over()
                        && matches!(stream.send, Send::Ended | Send::Finished)),
                "stream {id}: {:?} {:?}",
                stream.recv,
                stream.send
            ),
        }
        if stream.recv == Recv::Head {
            assert!(stream.app == App::None && stream.out.is_empty());
        }
    }
}
