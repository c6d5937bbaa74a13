//! squall-h1: the sans-IO HTTP/1.1 codec, server and client roles (RFC 9112).
//!
//! The client role, towards origins ([`encode_request_head`], [`ResponseDecoder`]), is described
//! in [`client`]; its items are re-exported here. What follows is the server role.
//!
//! The worker hands received plaintext to [`RequestDecoder::decode`], which consumes bytes from
//! the front of its buffer and returns [`Event`]s: one [`Event::Head`] per request, zero or more
//! [`Event::Data`] slices of the body, then [`Event::End`], then the next pipelined request. The
//! response side is a handful of pure functions writing into a `BytesMut`
//! ([`encode_response_head`], [`encode_chunk`], [`encode_error`], ...). Nothing here owns a
//! socket or reads a clock: the `Date` value comes in preformatted from the worker.
//!
//! # Why it is strict
//!
//! Squall sits in front of origins that parse HTTP/1.1 their own way. Any message that two
//! parsers could frame differently is a request-smuggling vector, so the decoder rejects rather
//! than repairs ambiguity, as Tempesta FW does:
//!
//! - every line of the head, the chunk framing and the trailers must end in CRLF; a bare LF is
//!   a 400 (RFC 9112 §2.2 lets a recipient accept a bare LF, but an origin behind us might not
//!   agree on where the line ended);
//! - obs-fold, whitespace before a field's colon, control characters in field values: 400
//!   (RFC 9112 §5.1, §5.2);
//! - Content-Length together with Transfer-Encoding, differing Content-Length values, any
//!   transfer coding but a lone final `chunked`, Transfer-Encoding on HTTP/1.0: 400 or 501
//!   (RFC 9112 §6.1, §6.3);
//! - a missing Host on HTTP/1.1, or more than one Host: 400 (RFC 9112 §3.2).
//!
//! `CONNECT` is answered with 501: Squall is not a forward proxy and tunnels nothing, and 501
//! (unlike 405) needs no `Allow` header (RFC 9110 §15.6.2).
//!
//! Every buffer the decoder keeps is bounded by [`Limits`]; after any error the decoder is
//! poisoned and keeps returning the same error, because the worker is expected to send
//! [`encode_error`] with `Connection: close` and stop reading.
//!
//! # Example
//!
//! ```
//! use bytes::BytesMut;
//! use http::{HeaderMap, StatusCode};
//! use squall_h1::{Event, Limits, RequestDecoder, ResponseHead, encode_error, encode_response_head};
//!
//! let date = b"Sun, 06 Nov 1994 08:49:37 GMT"; // cached by the worker, once a second
//! let mut decoder = RequestDecoder::new(Limits::default());
//! let mut recv = BytesMut::from(&b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"[..]);
//! let mut send = BytesMut::new();
//! loop {
//!     match decoder.decode(&mut recv) {
//!         Ok(Some(Event::Head(head))) => {
//!             let headers = HeaderMap::new();
//!             let response = ResponseHead {
//!                 status: StatusCode::OK,
//!                 headers: &headers,
//!                 raw_headers: b"Server: squall\r\n",
//!                 body_len: Some(2),
//!             };
//!             if encode_response_head(&response, head.framing(), date, &mut send) {
//!                 send.extend_from_slice(b"ok");
//!             }
//!         }
//!         Ok(Some(Event::Data(_) | Event::End { .. })) => {}
//!         Ok(None) => break, // wait for more bytes
//!         Err(e) => {
//!             encode_error(e.status(), date, &mut send);
//!             break; // send, then close
//!         }
//!     }
//! }
//! assert!(send.starts_with(b"HTTP/1.1 200 OK\r\n"));
//! assert!(decoder.is_between_messages() && recv.is_empty());
//! ```
#![forbid(unsafe_code)]

mod chunked;
pub mod client;
mod decoder;
mod encoder;
mod error;
mod field_list;
mod fields;
mod head;
mod scan;
pub mod target;

pub use client::{
    HopByHop, OriginHead, OutboundRequest, ResponseDecoder, ResponseError, ResponseErrorKind,
    ResponseEvent, ResponseLimits, encode_request_head, encode_request_start, is_framing_field,
    strip_hop_by_hop,
};
pub use decoder::{Event, RequestDecoder};
pub use encoder::{
    ResponseBody, ResponseFraming, ResponseHead, encode_chunk, encode_chunk_header,
    encode_continue, encode_error, encode_last_chunk, encode_response_head, response_framing,
};
pub use error::{Error, ErrorKind, Fault};
pub use field_list::{AsFieldName, FieldName, FieldValue, Fields, GetAll, Iter, ToStrError};
pub use head::{BodyKind, RequestFraming, RequestHead};

/// The longest chunk-size line (size and extensions, up to and including its CR) accepted.
///
/// Chunk extensions are parsed and discarded; without a cap a client could stream an endless
/// extension and keep the connection busy for free (the class of bug behind CVE-2024-22019 in
/// Node.js). Real clients send none, so 4 KiB is generous.
pub const CHUNK_LINE_BYTES_MAX: usize = 4096;

/// Per-message limits; every byte the decoder holds on to is bounded by one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The request head (leading empty lines, request line, fields and the blank line) and,
    /// together with it, the trailer section of a chunked body. Exceeding it is a 431.
    pub header_bytes_max: usize,
    /// The request-target. Exceeding it is a 414.
    pub uri_bytes_max: usize,
    /// The body, whether framed by Content-Length or chunked. Exceeding it is a 413.
    pub body_bytes_max: u64,
    /// Field lines in the head (and, separately, in the trailer section). Exceeding it is a 431.
    pub headers_count_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_bytes_max: 16 * 1024,
            uri_bytes_max: 8 * 1024,
            body_bytes_max: 16 * 1024 * 1024,
            headers_count_max: 100,
        }
    }
}
