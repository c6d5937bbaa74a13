//! What a connection hands the application ([`Event`]; its [`Request`] is `head.rs`'s) and
//! its error and statistics types.

use bytes::Bytes;

use crate::error::ErrorCode;
use crate::frame::StreamId;
use crate::head::Request;

/// Something the application must act on, from [`crate::Connection::poll_event`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A new request; answer with `send_headers`.
    Request {
        stream_id: StreamId,
        request: Request,
    },
    /// Request body bytes. Their flow-control window is given back only when the
    /// application calls `release_capacity`, so a slow consumer slows the client down.
    Data {
        stream_id: StreamId,
        data: Bytes,
        end_stream: bool,
    },
    /// Request trailers; the body is complete.
    Trailers {
        stream_id: StreamId,
        headers: http::HeaderMap,
    },
    /// A stream the application had a [`Event::Request`] for is gone (the peer reset it, or
    /// the connection did): drop what is kept for it; sends to it now fail.
    Reset {
        stream_id: StreamId,
        code: ErrorCode,
    },
}

/// A limit that protects the server from a peer that makes it work for nothing. Each ends
/// the connection with GOAWAY(ENHANCE_YOUR_CALM).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FloodKind {
    /// Too many streams reset or refused (CVE-2023-44487).
    RapidReset,
    /// A header block of too many CONTINUATION frames or bytes.
    Continuation,
    /// Too many SETTINGS, PING, PRIORITY, PRIORITY_UPDATE, RST_STREAM or useless
    /// WINDOW_UPDATE frames.
    Control,
    /// Too many DATA, HEADERS or CONTINUATION frames that carry nothing.
    EmptyFrames,
    /// Too many WINDOW_UPDATEs with tiny increments (data dribble).
    WindowUpdate,
    /// Too many answers to the peer's frames that the peer does not read.
    OutputQueue,
    /// The connection send window stayed closed with data waiting.
    Stall,
}

/// Why a connection ended with an error; a GOAWAY with `code` has been queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[error("HTTP/2 connection error {code:?}: {reason}")]
pub struct ConnError {
    /// The code sent in GOAWAY.
    pub code: ErrorCode,
    /// A short fixed sentence for logs; not sent to the peer.
    pub reason: &'static str,
    /// Set when a flood limit was exceeded.
    pub flood: Option<FloodKind>,
}

impl ConnError {
    /// Records `error` as the connection's in `slot`, where only the first counts: `Ok`
    /// with it when it is new (the caller then ends the connection), `Err` with the first.
    pub(crate) fn record(
        slot: &mut Option<ConnError>,
        error: ConnError,
    ) -> Result<ConnError, ConnError> {
        match *slot {
            Some(first) => Err(first),
            None => Ok(*slot.insert(error)),
        }
    }
}

/// A send to a stream that is not open for sending: unknown, reset, or already ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[error("HTTP/2 stream is not open for sending")]
pub struct StreamClosed;

/// Counters since the last [`crate::Connection::take_stats`], for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Requests handed to the application, or answered by the connection itself.
    pub streams_opened: u64,
    /// Streams refused with REFUSED_STREAM (concurrency limit, or after GOAWAY).
    pub streams_refused: u64,
    /// RST_STREAM frames we sent (refusals included).
    pub resets_sent: u64,
    /// RST_STREAM frames received on streams that were still open.
    pub resets_received: u64,
    /// Malformed requests (RFC 9113 §8.1.1), each reset with PROTOCOL_ERROR.
    pub malformed_requests: u64,
    /// Stream and connection errors caused by the peer, floods excluded.
    pub protocol_errors: u64,
    /// The flood that ended the connection, if one did.
    pub flood: Option<FloodKind>,
    /// Responses 413 (body too large) the connection answered itself.
    pub answered_413: u64,
    /// Responses 414 (path too long) the connection answered itself.
    pub answered_414: u64,
    /// Responses 431 (header list too large) the connection answered itself.
    pub answered_431: u64,
    /// Responses 501 (CONNECT) the connection answered itself.
    pub answered_501: u64,
    /// Streams reset, or the connection ended, because the peer's window stayed closed.
    pub stalls: u64,
}
