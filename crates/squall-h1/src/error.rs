//! Decoder errors: one kind per cause, each mapped to the status code the worker answers with.
//!
//! Every error of the server-role decoder is the client's fault: the worker answers with
//! [`Error::status`] (via `encode_error`), closes the connection and counts [`ErrorKind::as_str`]
//! in its metrics. A retry is never safe, because the request could not be framed.

use http::StatusCode;

/// A request the decoder refused. The decoder is poisoned afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("bad HTTP/1.1 request ({status}): {kind}", status = kind.status().as_u16(), kind = kind.as_str())]
pub struct Error {
    kind: ErrorKind,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind) -> Self {
        Self { kind }
    }

    /// The status code to answer with.
    pub fn status(&self) -> StatusCode {
        self.kind.status()
    }

    /// What was wrong, for logs and metrics.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Always [`Fault::Client`]: the server role only refuses what a client sent.
    pub fn fault(&self) -> Fault {
        Fault::Client
    }
}

/// Who is to blame for a codec error; decides 4xx against 5xx and what a metric counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The client sent something we refuse: answer 4xx (or 5xx for what we do not implement).
    Client,
    /// An origin sent something we refuse: answer 502 (or abort the client's response).
    Origin,
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Self {
        Self::new(kind)
    }
}

/// The cause of an [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    // 400 Bad Request: the message is malformed.
    /// Method, request-target or delimiters of the request line are not valid syntax.
    BadRequestLine,
    /// The request-target is not a URI of a form allowed for the method (RFC 9112 §3.2).
    BadUri,
    /// A line ends in LF without CR (we refuse what RFC 9112 §2.2 merely allows).
    BareLf,
    /// A CR not followed by LF.
    BareCr,
    /// A field name is not a token, is followed by whitespace, or the line is an obs-fold.
    BadHeaderName,
    /// A field value has a control character.
    BadHeaderValue,
    /// HTTP/1.1 without Host (RFC 9112 §3.2).
    MissingHost,
    /// More than one Host field line (RFC 9112 §3.2).
    DuplicateHost,
    /// A Host value that is not `uri-host [":" port]`.
    BadHost,
    /// Content-Length not 1*DIGIT, overflowing, or several differing values (RFC 9112 §6.3).
    BadContentLength,
    /// Both Content-Length and Transfer-Encoding (RFC 9112 §6.1: a smuggling signature).
    ContentLengthAndTransferEncoding,
    /// Transfer-Encoding that is malformed, repeats `chunked` or has it not last (RFC 9112 §6.3).
    BadTransferEncoding,
    /// Transfer-Encoding on an HTTP/1.0 request (RFC 9112 §6.1).
    TransferEncodingOnHttp10,
    /// A chunk size that is not hex, empty, or overflows 64 bits.
    BadChunkSize,
    /// A chunk extension that is not `;name[=token|quoted-string]` (RFC 9112 §7.1.1).
    BadChunkExtension,
    /// Chunk data not followed by CRLF.
    BadChunkFraming,
    /// A chunk-size line longer than `CHUNK_LINE_BYTES_MAX`.
    ChunkLineTooLong,
    /// A malformed trailer field.
    BadTrailer,
    // 413, 414, 431: a limit was exceeded.
    /// The body is larger than `body_bytes_max`.
    BodyTooLarge,
    /// The request-target is longer than `uri_bytes_max`.
    UriTooLong,
    /// The head is larger than `header_bytes_max`.
    HeaderTooLarge,
    /// More than `headers_count_max` field lines.
    TooManyHeaders,
    /// The trailer section overflows what `header_bytes_max` leaves after the head.
    TrailerTooLarge,
    // 417
    /// An Expect value other than `100-continue` (RFC 9110 §10.1.1).
    UnsupportedExpectation,
    // 501
    /// A well-formed transfer coding other than `chunked`.
    UnsupportedTransferCoding,
    /// The CONNECT method: we tunnel nothing.
    ConnectNotSupported,
    // 505
    /// An `HTTP/x.y` version other than 1.0 and 1.1.
    UnsupportedVersion,
}

impl ErrorKind {
    /// The status code to answer with.
    pub fn status(self) -> StatusCode {
        use ErrorKind::*;
        match self {
            BadRequestLine
            | BadUri
            | BareLf
            | BareCr
            | BadHeaderName
            | BadHeaderValue
            | MissingHost
            | DuplicateHost
            | BadHost
            | BadContentLength
            | ContentLengthAndTransferEncoding
            | BadTransferEncoding
            | TransferEncodingOnHttp10
            | BadChunkSize
            | BadChunkExtension
            | BadChunkFraming
            | ChunkLineTooLong
            | BadTrailer => StatusCode::BAD_REQUEST,
            BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            UriTooLong => StatusCode::URI_TOO_LONG,
            HeaderTooLarge | TooManyHeaders | TrailerTooLarge => {
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
            }
            UnsupportedExpectation => StatusCode::EXPECTATION_FAILED,
            UnsupportedTransferCoding | ConnectNotSupported => StatusCode::NOT_IMPLEMENTED,
            UnsupportedVersion => StatusCode::HTTP_VERSION_NOT_SUPPORTED,
        }
    }

    /// A stable snake_case name, for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        use ErrorKind::*;
        match self {
            BadRequestLine => "bad_request_line",
            BadUri => "bad_uri",
            BareLf => "bare_lf",
            BareCr => "bare_cr",
            BadHeaderName => "bad_header_name",
            BadHeaderValue => "bad_header_value",
            MissingHost => "missing_host",
            DuplicateHost => "duplicate_host",
            BadHost => "bad_host",
            BadContentLength => "bad_content_length",
            ContentLengthAndTransferEncoding => "content_length_and_transfer_encoding",
            BadTransferEncoding => "bad_transfer_encoding",
            TransferEncodingOnHttp10 => "transfer_encoding_on_http10",
            BadChunkSize => "bad_chunk_size",
            BadChunkExtension => "bad_chunk_extension",
            BadChunkFraming => "bad_chunk_framing",
            ChunkLineTooLong => "chunk_line_too_long",
            BadTrailer => "bad_trailer",
            BodyTooLarge => "body_too_large",
            UriTooLong => "uri_too_long",
            HeaderTooLarge => "header_too_large",
            TooManyHeaders => "too_many_headers",
            TrailerTooLarge => "trailer_too_large",
            UnsupportedExpectation => "unsupported_expectation",
            UnsupportedTransferCoding => "unsupported_transfer_coding",
            ConnectNotSupported => "connect_not_supported",
            UnsupportedVersion => "unsupported_version",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
