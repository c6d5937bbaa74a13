//! The response head: parsing a complete head with httparse, then the rules of RFC 9112 §6.3
//! that decide how the body is framed and whether the connection can carry another request.
//!
//! As in the server role, the head arrives cut from the receive buffer as one `Bytes`, and
//! the reason phrase and every field are spans of it ([`Fields`]): no `http::HeaderMap` is
//! built per response, nothing is allocated per field.

use std::mem::MaybeUninit;

use bytes::Bytes;
use http::{StatusCode, Version};

use super::ResponseErrorKind;
use crate::fields::{self, CodedBody, ConnectionOptions, ResponseCodings};
use crate::head::{STACK_HEADERS, has_bare_cr, header_slots};
use crate::{ErrorKind, Fields, ResponseBody};

/// A parsed response head, from an origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginHead {
    pub status: StatusCode,
    /// `HTTP_10` or `HTTP_11`, as the origin said.
    pub version: Version,
    /// The reason phrase as sent (possibly empty, possibly obs-text); RFC 9112 §4 says a client
    /// SHOULD ignore it, and the response encoder writes the canonical one.
    pub reason: Bytes,
    /// Every field line, in order, as spans of the received head; framing and hop-by-hop
    /// fields included (see [`crate::HopByHop`]).
    pub headers: Fields,
    /// The origin allows another request on this connection once this response has ended
    /// (RFC 9112 §9.3): HTTP/1.1 without `Connection: close`, or HTTP/1.0 with `keep-alive`;
    /// never when the body runs until close. Meaningless on an interim (1xx) head.
    pub keep_alive: bool,
    /// How the body is framed (RFC 9112 §6.3). `Absent` for HEAD, 1xx, 204 and 304 whatever
    /// the fields say; `Length(0)` is kept apart from `Absent` so that the proxy can forward
    /// the explicit zero.
    pub body: ResponseBody,
    /// Transfer-Encoding lists a coding other than `chunked` (`gzip, chunked`, or `gzip` alone,
    /// which makes the body close-delimited). The decoder removes only the chunked framing, so
    /// the Data is still in that coding: forwarding it with Transfer-Encoding stripped would
    /// hand the client bytes it cannot read. nginx answers 502 here; the proxy decides.
    pub transfer_coded: bool,
}

/// The longest well-formed status line prefix: `HTTP/` must open every response.
const STATUS_LINE_PREFIX: &[u8] = b"HTTP/";

/// Checks, on however many bytes have arrived, that they can begin a status line. An origin
/// that answers with something else (HTML without a head, an HTTP/0.9 body, a TLS alert on a
/// plain port, or an empty line where RFC 9112 §2.2 allows no leniency towards a client) is
/// refused at once instead of after `header_bytes_max` bytes. The answer depends only on the
/// first five bytes, so it is the same however they are split.
pub(crate) fn check_status_line_start(buf: &[u8]) -> Result<(), ResponseErrorKind> {
    let n = buf.len().min(STATUS_LINE_PREFIX.len());
    if buf[..n] != STATUS_LINE_PREFIX[..n] {
        return Err(ResponseErrorKind::BadStatusLine);
    }
    Ok(())
}

/// Parses a complete head (from the status line to the blank line, the scanner having checked
/// line endings and size) of a response to a request that was `HEAD` or not.
pub(crate) fn parse_response_head(
    head: &Bytes,
    headers_count_max: usize,
    request_is_head: bool,
) -> Result<OriginHead, ResponseErrorKind> {
    if u32::try_from(head.len()).is_err() {
        // Field offsets are u32 (`Fields`); only a header_bytes_max of 4 GiB lets one through.
        return Err(ResponseErrorKind::HeaderTooLarge);
    }
    let mut stack = [const { MaybeUninit::uninit() }; STACK_HEADERS];
    let mut heap = Vec::new();
    let slots = header_slots(&mut stack, &mut heap, headers_count_max, head.len());
    let mut resp = httparse::Response::new(&mut []);
    match httparse::ParserConfig::default()
        .parse_response_with_uninit_headers(&mut resp, head, slots)
    {
        Ok(httparse::Status::Complete(len)) => debug_assert_eq!(len, head.len()),
        // The scanner saw the blank line, so httparse cannot want more; refuse defensively.
        Ok(httparse::Status::Partial) => return Err(ResponseErrorKind::BadStatusLine),
        Err(e) => return Err(classify_httparse_error(e, head)),
    }
    // `Complete` sets version and code.
    let (Some(minor), Some(code)) = (resp.version, resp.code) else {
        return Err(ResponseErrorKind::BadStatusLine);
    };
    // httparse reads exactly three digits; 000-099 are not status codes (RFC 9110 §15).
    let status = StatusCode::from_u16(code).map_err(|_| ResponseErrorKind::BadStatusLine)?;
    if status == StatusCode::SWITCHING_PROTOCOLS {
        return Err(ResponseErrorKind::SwitchingProtocols);
    }
    let version = if minor == 0 {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
    let mut fields = FramingFields::default();
    let mut headers = Fields::with_capacity(head.clone(), resp.headers.len());
    for field in resp.headers.iter() {
        let name = field.name.as_bytes();
        // httparse checked names as tokens and values as field-value bytes, the sets `http`
        // checks too; a name `http` would refuse for its length is refused here, so that
        // every name converts to a HeaderName at the edges that want one.
        if name.len() > usize::from(u16::MAX) {
            return Err(ResponseErrorKind::BadHeaderName);
        }
        debug_assert!(
            http::HeaderName::from_bytes(name).is_ok()
                && http::HeaderValue::from_bytes(field.value).is_ok()
        );
        fields.add(name, field.value)?;
        headers.push_received(name, field.value);
    }
    let body = fields.body(status, version, request_is_head)?;
    Ok(OriginHead {
        status,
        version,
        reason: reason_phrase(head),
        headers,
        keep_alive: fields.keep_alive(version, body),
        body,
        transfer_coded: fields.transfer_codings.other,
    })
}

/// The reason phrase: what follows `HTTP/1.x SSS SP` on the status line. httparse has checked
/// its bytes, but hands back "" for a phrase with obs-text; we keep the bytes as sent.
fn reason_phrase(head: &Bytes) -> Bytes {
    const REASON_START: usize = "HTTP/1.1 200 ".len();
    let line_end = memchr::memchr(b'\r', head).unwrap_or(head.len());
    if line_end <= REASON_START {
        return Bytes::new();
    }
    head.slice(REASON_START..line_end)
}

/// Maps an httparse error to our kind.
fn classify_httparse_error(e: httparse::Error, head: &[u8]) -> ResponseErrorKind {
    if has_bare_cr(head) {
        return ResponseErrorKind::BareCr;
    }
    match e {
        httparse::Error::HeaderName => ResponseErrorKind::BadHeaderName,
        httparse::Error::HeaderValue => ResponseErrorKind::BadHeaderValue,
        httparse::Error::TooManyHeaders => ResponseErrorKind::TooManyHeaders,
        httparse::Error::Version if is_other_version(head) => ResponseErrorKind::UnsupportedVersion,
        _ => ResponseErrorKind::BadStatusLine,
    }
}

/// Whether the status line starts with a well-formed `HTTP/DIGIT.DIGIT SP` (RFC 9112 §2.3);
/// called once httparse refused the version, so it is not 1.0 or 1.1.
fn is_other_version(head: &[u8]) -> bool {
    matches!(head, [b'H', b'T', b'T', b'P', b'/', major, b'.', minor, b' ', ..]
        if major.is_ascii_digit() && minor.is_ascii_digit())
}

/// The fields that decide framing and persistence, as seen so far.
#[derive(Debug, Default)]
struct FramingFields {
    content_length: Option<u64>,
    transfer_codings: ResponseCodings,
    connection: ConnectionOptions,
}

impl FramingFields {
    /// Looks at one field line; the grammars are the server role's.
    fn add(&mut self, name: &[u8], value: &[u8]) -> Result<(), ErrorKind> {
        if name.eq_ignore_ascii_case(b"content-length") {
            self.content_length = Some(fields::merge_content_length(self.content_length, value)?);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            self.transfer_codings.add(value)?;
        } else if name.eq_ignore_ascii_case(b"connection") {
            self.connection.add(value);
        }
        Ok(())
    }

    /// After all lines: the body framing, in the order of RFC 9112 §6.3 (rule 2, CONNECT,
    /// cannot apply: we send no CONNECT; an invalid Content-Length, rule 5, is an error in
    /// `add`).
    ///
    /// The framing fields are checked even when the status says there is no body: a response
    /// with both Content-Length and Transfer-Encoding, or a malformed one, says the origin (or
    /// something between us) frames messages differently from us, and the connection cannot be
    /// trusted for the next response either.
    fn body(
        &self,
        status: StatusCode,
        version: Version,
        request_is_head: bool,
    ) -> Result<ResponseBody, ErrorKind> {
        let coded = if self.transfer_codings.present {
            if self.content_length.is_some() {
                // Rule 3 lets TE override and calls the pair "ought to be handled as an error".
                return Err(ErrorKind::ContentLengthAndTransferEncoding);
            }
            if version == Version::HTTP_10 {
                return Err(ErrorKind::TransferEncodingOnHttp10);
            }
            Some(self.transfer_codings.finish()?)
        } else {
            None
        };
        // Rule 1: a response to HEAD, a 1xx, 204 or 304 ends with its head (RFC 9110 §6.4.1).
        let bodiless = request_is_head
            || status.is_informational()
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED;
        Ok(match (coded, self.content_length) {
            _ if bodiless => ResponseBody::Absent,
            (Some(CodedBody::Chunked), _) => ResponseBody::Chunked, // rule 4
            (Some(CodedBody::Close), _) => ResponseBody::Close,     // rule 4, responses
            (None, Some(n)) => ResponseBody::Length(n),             // rule 6
            (None, None) => ResponseBody::Close,                    // rule 8
        })
    }

    /// RFC 9112 §9.3; a close-delimited body ends the connection whatever was said.
    fn keep_alive(&self, version: Version, body: ResponseBody) -> bool {
        if self.connection.close || body == ResponseBody::Close {
            return false;
        }
        version == Version::HTTP_11 || self.connection.keep_alive
    }
}
