//! What a connection hands the application ([`Event`], with `squall_h2`'s [`Request`]) and
//! the driver ([`Command`], [`StreamOut`]), and its error and statistics types.

use bytes::Bytes;

use super::Request;
use crate::error::ErrorCode;

/// Something the application must act on, from [`super::Connection::poll_event`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A new request; answer with `send_headers`.
    Request { stream_id: u64, request: Request },
    /// Request body bytes, as they arrived (the DATA pieces of one `recv` call joined), or
    /// only the news that the body ended (`data` empty, `end_stream`).
    Data {
        stream_id: u64,
        data: Bytes,
        end_stream: bool,
    },
    /// Request trailers; the body is complete.
    Trailers {
        stream_id: u64,
        headers: http::HeaderMap,
    },
    /// A stream the application had an [`Event::Request`] for is gone (the peer reset it or
    /// stopped reading it, or the connection did): drop what is kept for it; sends to it now
    /// fail.
    Reset { stream_id: u64, code: ErrorCode },
}

/// Something the driver must do to the QUIC connection, from
/// [`super::Connection::poll_command`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Reset the sending part of the stream (QUIC RESET_STREAM) with this code. Nothing more
    /// is written to it: its queued output is gone.
    ResetStream { stream_id: u64, code: ErrorCode },
    /// Abort reading the stream (QUIC STOP_SENDING) with this code; what it still delivers
    /// may be dropped (the connection ignores it).
    StopSending { stream_id: u64, code: ErrorCode },
    /// A connection error: close the QUIC connection (CONNECTION_CLOSE of the application
    /// kind) with this code. Always the last command; the connection is over.
    Close {
        code: ErrorCode,
        reason: &'static str,
    },
}

/// One of the three unidirectional streams we open (RFC 9114 §6.2.1, RFC 9204 §4.2). The
/// driver opens three QUIC unidirectional streams at the start and maps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Uni {
    /// Our control stream: its type, SETTINGS, and a GOAWAY at the end.
    Control,
    /// Our QPACK encoder stream: its type, then our encoder's instructions.
    QpackEncoder,
    /// Our QPACK decoder stream: its type, then our decoder's acknowledgments.
    QpackDecoder,
}

impl Uni {
    /// The three, in the order their output is offered.
    pub const ALL: [Uni; 3] = [Uni::Control, Uni::QpackEncoder, Uni::QpackDecoder];

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// Which QUIC stream output goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OutStream {
    /// One of our unidirectional streams.
    Uni(Uni),
    /// A request stream (client-initiated bidirectional), by its QUIC stream id.
    Request(u64),
}

/// A piece of output offered to the driver by [`super::Connection::poll_output`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamOut<'a> {
    pub stream: OutStream,
    /// Bytes to write, in order. May be empty when only `fin` is news.
    pub data: &'a Bytes,
    /// The stream ends after `data`: once all of `data` is accepted, the driver finishes the
    /// stream (QUIC FIN).
    pub fin: bool,
}

/// A limit that protects the server from a peer that makes it work for nothing. Each ends
/// the connection with H3_EXCESSIVE_LOAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FloodKind {
    /// Too many request streams reset by the peer (RESET_STREAM or STOP_SENDING before the
    /// exchange was over), malformed, or refused (the rapid reset attack, CVE-2023-44487).
    RapidReset,
    /// Too many frames that carry nothing: empty DATA frames.
    EmptyFrames,
    /// Too many frames of unknown or reserved types (grease), on any stream.
    UnknownFrames,
    /// Too many GOAWAY and MAX_PUSH_ID frames on the control stream.
    ControlFrames,
    /// Too many QPACK insertions on the peer's encoder stream, or too many of entries with
    /// an empty name (which no field line can use).
    QpackEncoder,
}

/// Why a connection ended with an error; a [`Command::Close`] with `code` has been queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[error("HTTP/3 connection error {code:?}: {reason}")]
pub struct ConnError {
    /// The application error code to close the QUIC connection with.
    pub code: ErrorCode,
    /// A short fixed sentence for logs; not sent to the peer.
    pub reason: &'static str,
    /// Set when a flood limit was exceeded.
    pub flood: Option<FloodKind>,
}

/// A send to a stream that is not open for sending: unknown, reset, not yet delivered to the
/// application, or already ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[error("HTTP/3 stream is not open for sending")]
pub struct StreamClosed;

/// Counters since the last [`super::Connection::take_stats`], for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Request heads received whole: handed to the application, or answered (413, 414, 431,
    /// 501) or found malformed by the connection.
    pub requests: u64,
    /// Request streams refused with H3_REQUEST_REJECTED after our GOAWAY.
    pub refused: u64,
    /// Malformed requests (RFC 9114 §4.1.2), each reset with H3_MESSAGE_ERROR, and requests
    /// whose stream ended without a whole request (H3_REQUEST_INCOMPLETE).
    pub malformed: u64,
    /// Request streams reset by the peer (RESET_STREAM, or STOP_SENDING) before the exchange
    /// was over.
    pub resets_received: u64,
    /// Request streams we reset (malformed, refused, cancelled, or by the application).
    pub resets_sent: u64,
    /// Responses 413 (body too large) the connection answered itself.
    pub answered_413: u64,
    /// Responses 414 (path too long) the connection answered itself.
    pub answered_414: u64,
    /// Responses 431 (field section too large) the connection answered itself.
    pub answered_431: u64,
    /// Responses 501 (CONNECT) the connection answered itself.
    pub answered_501: u64,
    /// Unidirectional streams of unknown types stopped (beyond the few read and discarded).
    pub uni_streams_stopped: u64,
    /// Connection errors caused by the peer, floods excluded.
    pub protocol_errors: u64,
    /// The flood that ended the connection, if one did.
    pub flood: Option<FloodKind>,
}
