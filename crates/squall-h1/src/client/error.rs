//! Errors of the client role: an origin's response that cannot be framed or trusted.
//!
//! Every one is the origin's fault ([`Fault::Origin`]) and ends the origin connection, since
//! after a framing error nobody knows where the next response would start (RFC 9112 §6.3:
//! "the connection is unreliable"). What the proxy then does depends on how far the response
//! got, which the error carries: before a final head was received nothing has reached the
//! client, so the proxy may answer 502 or, for an idempotent request, try another server
//! (RFC 9110 §9.2.2); after it, the client's response is already under way and the only
//! honest ending is to abort it (reset the stream, or close an HTTP/1.1 connection without the
//! final chunk), never to pass a truncated body off as complete.

use http::StatusCode;

use crate::{ErrorKind, Fault};

/// A response the decoder refused, or a connection that ended too early. The decoder is
/// poisoned afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("bad HTTP/1.1 response from origin: {kind}{after}", kind = kind.as_str(),
    after = if *head_received { " (after the head)" } else { "" })]
pub struct ResponseError {
    kind: ResponseErrorKind,
    head_received: bool,
}

impl ResponseError {
    pub(crate) fn new(kind: ResponseErrorKind, head_received: bool) -> Self {
        Self {
            kind,
            head_received,
        }
    }

    /// What was wrong, for logs and metrics.
    pub fn kind(&self) -> ResponseErrorKind {
        self.kind
    }

    /// Always [`Fault::Origin`].
    pub fn fault(&self) -> Fault {
        Fault::Origin
    }

    /// The status to answer the client with, when nothing of the response has been sent to it
    /// yet: 502 Bad Gateway (RFC 9110 §15.6.3: an invalid response from an inbound server).
    pub fn status(&self) -> StatusCode {
        StatusCode::BAD_GATEWAY
    }

    /// Whether the decoder had returned the final (non-1xx) head of the response in progress.
    /// If so, the proxy may have started the client's response, and must abort it.
    pub fn head_received(&self) -> bool {
        self.head_received
    }

    /// Whether the request may be sent again (to another server, on another connection) as
    /// far as the response is concerned: no final head was received, so nothing of this
    /// response can have reached the client. Only for idempotent methods (RFC 9110 §9.2.2):
    /// that check, and the bound on retries, are the proxy's.
    ///
    /// [`ResponseErrorKind::ClosedBeforeResponse`] is the case RFC 9112 §9.3.1 has in mind:
    /// an idle keep-alive connection that the origin closed as we reused it.
    pub fn retryable_if_idempotent(&self) -> bool {
        !self.head_received
    }
}

/// The cause of a [`ResponseError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ResponseErrorKind {
    // The head.
    /// Not `HTTP/1.x SP 3DIGIT [SP reason]` CRLF, or a status below 100 (RFC 9112 §4).
    BadStatusLine,
    /// A well-formed `HTTP/x.y` other than 1.0 and 1.1.
    UnsupportedVersion,
    /// 101 Switching Protocols: we forward no upgrades (and strip `Upgrade` from requests, so
    /// the origin had no reason to send it).
    SwitchingProtocols,
    /// More than `interim_count_max` 1xx responses before the final one.
    TooManyInterim,
    /// A line ends in LF without CR.
    BareLf,
    /// A CR not followed by LF.
    BareCr,
    /// A field name is not a token, is followed by whitespace, or the line is an obs-fold
    /// (RFC 9112 §5.2 lets us reject those).
    BadHeaderName,
    /// A field value has a control character (NUL, ...).
    BadHeaderValue,
    /// The head is larger than `header_bytes_max`.
    HeaderTooLarge,
    /// More than `headers_count_max` field lines (in the head or the trailers).
    TooManyHeaders,
    // Framing fields (RFC 9112 §6).
    /// Content-Length not 1*DIGIT, overflowing, or several differing values.
    BadContentLength,
    /// Both Content-Length and Transfer-Encoding. RFC 9112 §6.3 lets TE win; like nginx we
    /// refuse, since the pair is how responses are smuggled past one parser and not another.
    ContentLengthAndTransferEncoding,
    /// Transfer-Encoding that is malformed, empty, or has `chunked` twice.
    BadTransferEncoding,
    /// Transfer-Encoding on an HTTP/1.0 response: faulty framing (RFC 9112 §6.1).
    TransferEncodingOnHttp10,
    // The chunked body (RFC 9112 §7.1).
    /// A chunk size that is not hex, empty, or overflows 64 bits.
    BadChunkSize,
    /// A malformed chunk extension.
    BadChunkExtension,
    /// Chunk data not followed by CRLF.
    BadChunkFraming,
    /// A chunk-size line longer than `CHUNK_LINE_BYTES_MAX`.
    ChunkLineTooLong,
    /// A malformed trailer field.
    BadTrailer,
    /// The trailer section overflows what `header_bytes_max` leaves after the head.
    TrailerTooLarge,
    // The connection.
    /// Bytes arrived while no response was expected (after the previous one ended and
    /// before [`crate::ResponseDecoder::expect`]): the origin is out of step with us, and
    /// taking those bytes as the next response would hand one client another's response.
    /// The response before them was complete: only the connection is lost.
    UnsolicitedResponse,
    /// The origin closed the connection before sending any byte of a response.
    ClosedBeforeResponse,
    /// The origin closed the connection in the middle of a head.
    TruncatedHead,
    /// The origin closed the connection before a Content-Length or chunked body was complete.
    TruncatedBody,
}

impl ResponseErrorKind {
    /// A stable snake_case name, for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        use ResponseErrorKind::*;
        match self {
            BadStatusLine => "bad_status_line",
            UnsupportedVersion => "unsupported_version",
            SwitchingProtocols => "switching_protocols",
            TooManyInterim => "too_many_interim",
            BareLf => "bare_lf",
            BareCr => "bare_cr",
            BadHeaderName => "bad_header_name",
            BadHeaderValue => "bad_header_value",
            HeaderTooLarge => "header_too_large",
            TooManyHeaders => "too_many_headers",
            BadContentLength => "bad_content_length",
            ContentLengthAndTransferEncoding => "content_length_and_transfer_encoding",
            BadTransferEncoding => "bad_transfer_encoding",
            TransferEncodingOnHttp10 => "transfer_encoding_on_http10",
            BadChunkSize => "bad_chunk_size",
            BadChunkExtension => "bad_chunk_extension",
            BadChunkFraming => "bad_chunk_framing",
            ChunkLineTooLong => "chunk_line_too_long",
            BadTrailer => "bad_trailer",
            TrailerTooLarge => "trailer_too_large",
            UnsolicitedResponse => "unsolicited_response",
            ClosedBeforeResponse => "closed_before_response",
            TruncatedHead => "truncated_head",
            TruncatedBody => "truncated_body",
        }
    }
}

impl std::fmt::Display for ResponseErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<ErrorKind> for ResponseErrorKind {
    /// Names, for a response, an error of the pieces both roles share (the scanner, the
    /// field grammars, the chunked decoder).
    fn from(kind: ErrorKind) -> Self {
        use ResponseErrorKind as R;
        match kind {
            ErrorKind::BareLf => R::BareLf,
            ErrorKind::BareCr => R::BareCr,
            ErrorKind::BadHeaderName => R::BadHeaderName,
            ErrorKind::BadHeaderValue => R::BadHeaderValue,
            ErrorKind::HeaderTooLarge => R::HeaderTooLarge,
            ErrorKind::TooManyHeaders => R::TooManyHeaders,
            ErrorKind::BadContentLength => R::BadContentLength,
            ErrorKind::ContentLengthAndTransferEncoding => R::ContentLengthAndTransferEncoding,
            ErrorKind::BadTransferEncoding | ErrorKind::UnsupportedTransferCoding => {
                R::BadTransferEncoding
            }
            ErrorKind::TransferEncodingOnHttp10 => R::TransferEncodingOnHttp10,
            // The body of a response is unbounded, so the chunked decoder's "too large" can
            // only mean the sizes summed past 2^64: a bogus size.
            ErrorKind::BadChunkSize | ErrorKind::BodyTooLarge => R::BadChunkSize,
            ErrorKind::BadChunkExtension => R::BadChunkExtension,
            ErrorKind::BadChunkFraming => R::BadChunkFraming,
            ErrorKind::ChunkLineTooLong => R::ChunkLineTooLong,
            ErrorKind::BadTrailer => R::BadTrailer,
            ErrorKind::TrailerTooLarge => R::TrailerTooLarge,
            ErrorKind::UnsupportedVersion => R::UnsupportedVersion,
            // Request-line, URI, Host and Expect errors come from request parsing only.
            ErrorKind::BadRequestLine
            | ErrorKind::BadUri
            | ErrorKind::MissingHost
            | ErrorKind::DuplicateHost
            | ErrorKind::BadHost
            | ErrorKind::UriTooLong
            | ErrorKind::UnsupportedExpectation
            | ErrorKind::ConnectNotSupported => R::BadStatusLine,
        }
    }
}
