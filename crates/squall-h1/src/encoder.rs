//! The response encoder: status line, framing fields and chunks, written into a `BytesMut`.
//!
//! Framing is decided in one place, [`response_framing`], from the status, the body length and
//! the request (RFC 9112 §6.3): the encoder writes the fields that announce it and the worker
//! uses the same answer to know whether to write a body, chunk it, or close after it. The
//! proxy supplies every other field, including `Server`; the ones that set framing
//! (Content-Length, Transfer-Encoding, Connection) must not be among them.

use bytes::{BufMut, BytesMut};
use http::{HeaderMap, StatusCode, Version};

use crate::RequestFraming;

/// A response head to encode.
#[derive(Debug, Clone, Copy)]
pub struct ResponseHead<'a> {
    pub status: StatusCode,
    /// Emitted as `name: value\r\n` lines, in the map's order.
    pub headers: &'a HeaderMap,
    /// Pre-encoded `name: value\r\n` lines appended verbatim (the proxy pre-builds these per
    /// route).
    pub raw_headers: &'a [u8],
    /// `Some(n)`: `Content-Length: n`. `None`: chunked for HTTP/1.1, close-delimited for
    /// HTTP/1.0 (which forces the connection to close).
    pub body_len: Option<u64>,
}

/// How a response body is delimited on the wire: what the encoder writes to a client, and
/// what [`crate::ResponseDecoder`] found in an origin's response (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseBody {
    /// No body (HEAD, 1xx, 204, 304).
    Absent,
    /// Exactly this many bytes follow.
    Length(u64),
    /// Chunked: written with [`encode_chunk`] and ended with [`encode_last_chunk`].
    Chunked,
    /// The body runs until the connection closes (HTTP/1.0 or unknown length when encoding;
    /// no framing field, or a transfer coding other than a final `chunked`, when decoding).
    Close,
}

/// How to send a response and what happens to the connection after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseFraming {
    pub body: ResponseBody,
    /// The connection stays open after this response.
    pub keep_alive: bool,
}

/// Decides the framing of a response to `req` (RFC 9112 §6.3, RFC 9110 §6.4.1).
pub fn response_framing(
    status: StatusCode,
    body_len: Option<u64>,
    req: RequestFraming,
) -> ResponseFraming {
    let bodiless_status = status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let body = match body_len {
        _ if bodiless_status || req.is_head => ResponseBody::Absent,
        Some(n) => ResponseBody::Length(n),
        None if req.version == Version::HTTP_11 => ResponseBody::Chunked,
        None => ResponseBody::Close,
    };
    ResponseFraming {
        body,
        keep_alive: req.keep_alive && body != ResponseBody::Close,
    }
}

/// Writes the status line, `Date`, `Content-Length` or `Transfer-Encoding`, `Connection`, the
/// headers and the blank line. Returns true when the caller must write a body (false for
/// HEAD, 1xx, 204, 304).
///
/// `date` is a preformatted 29-byte IMF-fixdate (RFC 9110 §5.6.7) that the worker caches per
/// second. The status line always says HTTP/1.1, our version, also to HTTP/1.0 clients
/// (RFC 9110 §2.5). A 1xx must not be sent to an HTTP/1.0 client (RFC 9110 §15.2); that is the
/// caller's check.
pub fn encode_response_head(
    head: &ResponseHead<'_>,
    req: RequestFraming,
    date: &[u8],
    out: &mut BytesMut,
) -> bool {
    debug_assert_eq!(date.len(), 29, "date must be an IMF-fixdate");
    debug_assert!(
        !head.headers.contains_key(http::header::CONTENT_LENGTH)
            && !head.headers.contains_key(http::header::TRANSFER_ENCODING),
        "framing fields are the encoder's job"
    );
    let framing = response_framing(head.status, head.body_len, req);
    out.reserve(128 + head.raw_headers.len() + 32 * head.headers.len());
    put_status_line(head.status, out);
    put_date(date, out);
    let informational = head.status.is_informational();
    // RFC 9112 §6.1, RFC 9110 §8.6: no Content-Length or Transfer-Encoding in 1xx and 204.
    // A 304 and a response to HEAD carry the length a 200 to GET would have had.
    if !informational && head.status != StatusCode::NO_CONTENT {
        match (head.body_len, framing.body) {
            (Some(n), _) => put_content_length(n, out),
            (None, ResponseBody::Chunked) => out.put_slice(b"transfer-encoding: chunked\r\n"),
            (None, _) => {}
        }
    }
    // A 1xx is interim: persistence is decided by the final response.
    if !informational {
        if !framing.keep_alive {
            out.put_slice(b"connection: close\r\n");
        } else if req.version == Version::HTTP_10 {
            // RFC 9112 §9.3: an HTTP/1.0 connection persists only when both sides say so.
            out.put_slice(b"connection: keep-alive\r\n");
        }
    }
    for (name, value) in head.headers {
        put_line(out, name.as_str().as_bytes(), value.as_bytes());
    }
    out.put_slice(head.raw_headers);
    out.put_slice(b"\r\n");
    framing.body != ResponseBody::Absent
}

/// `HTTP/1.1 100 Continue`, sent before reading a body the client holds back
/// (RFC 9110 §10.1.1).
pub fn encode_continue(out: &mut BytesMut) {
    out.put_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
}

/// One chunk: size line, data, CRLF (RFC 9112 §7.1). Empty data writes nothing, since a zero
/// size would end the body.
pub fn encode_chunk(data: &[u8], out: &mut BytesMut) {
    if data.is_empty() {
        return;
    }
    out.reserve(data.len() + 20);
    encode_chunk_header(data.len() as u64, out);
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

/// Only the size line of a chunk of `len` bytes (`len` > 0), for a caller that sends the data
/// from its own buffer (writev) and then `\r\n`, saving a copy of large bodies.
pub fn encode_chunk_header(len: u64, out: &mut BytesMut) {
    debug_assert!(len > 0, "a zero-size chunk is the last chunk");
    put_hex(len, out);
    out.put_slice(b"\r\n");
}

/// The last chunk, the trailer fields if any, and the final CRLF (RFC 9112 §7.1.2).
pub fn encode_last_chunk(trailers: Option<&HeaderMap>, out: &mut BytesMut) {
    out.put_slice(b"0\r\n");
    for (name, value) in trailers.into_iter().flatten() {
        put_line(out, name.as_str().as_bytes(), value.as_bytes());
    }
    out.put_slice(b"\r\n");
}

/// A complete error response: status line, Date, a short text body naming the status, and
/// `Connection: close`, for the requests the decoder refuses (400, 408, 413, 414, 431, ...).
pub fn encode_error(status: StatusCode, date: &[u8], out: &mut BytesMut) {
    debug_assert_eq!(date.len(), 29, "date must be an IMF-fixdate");
    let reason = status.canonical_reason().unwrap_or("");
    let bodiless = status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    out.reserve(160);
    put_status_line(status, out);
    put_date(date, out);
    if !bodiless {
        out.put_slice(b"content-type: text/plain\r\n");
        // The body is "NNN Reason\n".
        put_content_length(3 + 1 + reason.len() as u64 + 1, out);
    }
    out.put_slice(b"connection: close\r\n\r\n");
    if !bodiless {
        out.put_slice(status.as_str().as_bytes());
        out.put_u8(b' ');
        out.put_slice(reason.as_bytes());
        out.put_u8(b'\n');
    }
}

/// `HTTP/1.1 200 OK\r\n`; an unknown status gets an empty reason, which RFC 9112 §4 allows.
fn put_status_line(status: StatusCode, out: &mut BytesMut) {
    out.put_slice(b"HTTP/1.1 ");
    out.put_slice(status.as_str().as_bytes());
    out.put_u8(b' ');
    out.put_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.put_slice(b"\r\n");
}

fn put_date(date: &[u8], out: &mut BytesMut) {
    out.put_slice(b"date: ");
    out.put_slice(date);
    out.put_slice(b"\r\n");
}

/// `name: value\r\n`.
pub(crate) fn put_line(out: &mut BytesMut, name: &[u8], value: &[u8]) {
    out.put_slice(name);
    out.put_slice(b": ");
    out.put_slice(value);
    out.put_slice(b"\r\n");
}

pub(crate) fn put_content_length(n: u64, out: &mut BytesMut) {
    put_length_field(b"content-length: ", n, out);
}

/// `name` (with its `: `) and `n` in decimal, then CRLF: the request encoder keeps its own
/// spelling of the field name.
pub(crate) fn put_length_field(name: &[u8], n: u64, out: &mut BytesMut) {
    out.put_slice(name);
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.put_slice(&digits[i..]);
    out.put_slice(b"\r\n");
}

/// Lower-case hex without leading zeros (RFC 9112 §7.1 allows either case).
fn put_hex(n: u64, out: &mut BytesMut) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = HEX[(n & 0xf) as usize];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.put_slice(&digits[i..]);
}
