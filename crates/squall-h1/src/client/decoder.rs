//! The response decoder: the state machine that turns bytes from an origin into response
//! events.
//!
//! One decoder lives per origin connection. It must be told what it is waiting for, because a
//! response's framing depends on the request (a response to HEAD has no body, RFC 9112 §6.3
//! rule 1): [`ResponseDecoder::new`] arms it for the first request, and
//! [`ResponseDecoder::expect`] for each later one on the same connection. Between a response's
//! `End` and the next `expect`, any byte from the origin is an error, not the next response:
//! that is what keeps one client from being handed the response meant for another.
//!
//! Bytes of a head are not consumed until the whole head is in; body bytes are handed out as
//! they arrive, cut from the receive buffer without a copy, so the decoder holds no body
//! bytes and its memory is bounded by the head limit whatever the body size.

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Method};

use super::head::{OriginHead, check_status_line_start, parse_response_head};
use super::{ResponseError, ResponseErrorKind};
use crate::chunked::{ChunkEvent, ChunkedDecoder};
use crate::head::STACK_HEADERS;
use crate::scan::SectionScan;
use crate::{ErrorKind, Limits, ResponseBody};

/// What the decoder found in the bytes from an origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseEvent {
    /// An interim (1xx) response, 100 Continue or 103 Early Hints, say: it has no body and the
    /// final response follows (RFC 9110 §15.2). The proxy may forward it (103 to HTTP/1.1 and
    /// HTTP/2 clients; never to HTTP/1.0 ones) or drop it. 101 is an error, not an interim.
    Interim(OriginHead),
    /// The final response head. The body, if any, follows.
    Head(OriginHead),
    /// A piece of the body (never empty), cut from the receive buffer without a copy. Pieces
    /// follow the reads, not the chunks of a chunked body.
    Data(Bytes),
    /// The response is complete. `trailers` are the trailer fields of a chunked body, if any.
    End { trailers: Option<HeaderMap> },
}

/// Limits on what an origin may make the decoder hold. The body has none: it streams through
/// and is never buffered here; bounding a response's size is the cache's business.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseLimits {
    /// A response head (status line, fields, blank line) and, together with it, the trailer
    /// section of a chunked body.
    pub header_bytes_max: usize,
    /// Field lines in the head (and, separately, in the trailer section).
    pub headers_count_max: usize,
    /// 1xx responses before the final one. Each is bounded by the head limit, but without a
    /// count an origin could keep a request busy with endless 103s.
    pub interim_count_max: usize,
}

impl Default for ResponseLimits {
    fn default() -> Self {
        Self {
            // Origins send larger heads than clients (long Set-Cookie, CSP, Link lists); nginx's
            // default proxy_buffer_size is one page, we are roomier.
            header_bytes_max: 64 * 1024,
            headers_count_max: STACK_HEADERS,
            interim_count_max: 8,
        }
    }
}

/// Decodes the responses of one origin connection.
#[derive(Debug, Clone)]
pub struct ResponseDecoder {
    limits: ResponseLimits,
    /// `limits` in the form the shared chunked decoder takes: the body unbounded.
    chunk_limits: Limits,
    /// The request being answered was HEAD.
    request_is_head: bool,
    state: State,
    /// The final head of the current response has been returned.
    head_received: bool,
    /// Interim heads returned for the current response.
    interims: usize,
    /// Set by the first error; every later call returns it again.
    poisoned: Option<ResponseError>,
}

#[derive(Debug, Clone)]
enum State {
    /// No request outstanding: the last response ended and `expect` has not been called.
    Idle,
    /// Waiting for (the rest of) a head, interim or final.
    Head(SectionScan),
    /// Delivering a Content-Length body; `remaining` > 0.
    Length { remaining: u64 },
    /// Delivering a chunked body.
    Chunked(ChunkedDecoder),
    /// Delivering a body that ends when the origin closes (RFC 9112 §6.3 rules 4 and 8).
    UntilClose,
    /// The body is complete; End is next.
    End,
}

impl ResponseDecoder {
    /// A decoder waiting for the response to a first request with `method`.
    pub fn new(limits: ResponseLimits, method: &Method) -> Self {
        let chunk_limits = Limits {
            header_bytes_max: limits.header_bytes_max,
            uri_bytes_max: 0,
            body_bytes_max: u64::MAX,
            headers_count_max: limits.headers_count_max,
        };
        Self {
            limits,
            chunk_limits,
            request_is_head: *method == Method::HEAD,
            state: State::Head(SectionScan::default()),
            head_received: false,
            interims: 0,
            poisoned: None,
        }
    }

    /// Arms the decoder for the response to the next request, with `method`, sent on the same
    /// (kept-alive) connection. Call it once the previous response has ended ([`is_idle`]);
    /// calls at other times are a caller bug, asserted in debug builds and ignored otherwise
    /// (the origin's next bytes are then refused as unsolicited, which closes the connection).
    ///
    /// [`is_idle`]: ResponseDecoder::is_idle
    pub fn expect(&mut self, method: &Method) {
        debug_assert!(self.is_idle(), "expect() while a response is in progress");
        if !self.is_idle() {
            return;
        }
        self.request_is_head = *method == Method::HEAD;
        self.state = State::Head(SectionScan::default());
        self.head_received = false;
        self.interims = 0;
    }

    /// Consumes bytes from the front of `buf`. `Ok(None)`: more bytes are needed. A response
    /// yields `Interim`* then `Head`, zero or more `Data`, then `End` (right after `Head` when
    /// there is no body); then nothing until [`expect`](ResponseDecoder::expect).
    ///
    /// After an error the decoder is poisoned: every later call returns the same error, and
    /// the caller closes the origin connection.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<ResponseEvent>, ResponseError> {
        if let Some(e) = self.poisoned {
            return Err(e);
        }
        let result = self.step(buf);
        result.map_err(|kind| self.poison(kind))
    }

    /// The origin closed the connection (a read returned 0, or the TLS layer saw close_notify
    /// or a truncation). Call it after [`decode`](ResponseDecoder::decode) has returned
    /// `Ok(None)`, so that every received byte has been looked at.
    ///
    /// A close-delimited body ends here: `Ok(Some(End))`. Between responses the close is
    /// clean: `Ok(None)`. Anywhere else the response is truncated, which is an error, so that
    /// a truncated response is never passed off as a complete one.
    pub fn eof(&mut self) -> Result<Option<ResponseEvent>, ResponseError> {
        if let Some(e) = self.poisoned {
            return Err(e);
        }
        let kind = match &self.state {
            State::Idle => return Ok(None),
            State::UntilClose | State::End => {
                self.state = State::Idle;
                return Ok(Some(ResponseEvent::End { trailers: None }));
            }
            State::Head(scan) if scan.scanned() == 0 && self.interims == 0 => {
                ResponseErrorKind::ClosedBeforeResponse
            }
            State::Head(_) => ResponseErrorKind::TruncatedHead,
            State::Length { .. } | State::Chunked(_) => ResponseErrorKind::TruncatedBody,
        };
        Err(self.poison(kind))
    }

    /// True when no response is in progress and none is expected: the previous one has ended
    /// and [`expect`](ResponseDecoder::expect) is due. False once poisoned.
    ///
    /// An origin connection goes back to the keep-alive pool only when this holds, the last
    /// head said `keep_alive`, and its receive buffer is empty.
    pub fn is_idle(&self) -> bool {
        self.poisoned.is_none() && matches!(self.state, State::Idle)
    }

    /// Whether the final head of the current response has been returned; see
    /// [`ResponseError::head_received`].
    pub fn head_received(&self) -> bool {
        self.head_received
    }

    pub fn limits(&self) -> &ResponseLimits {
        &self.limits
    }

    /// Asserts the decoder's invariants; tests call it after every step.
    #[doc(hidden)]
    pub fn check_invariants(&self) {
        assert!(self.interims <= self.limits.interim_count_max);
        match &self.state {
            State::Idle => {}
            State::Head(scan) => {
                scan.check_invariants();
                assert!(!self.head_received, "a head after the final head");
            }
            State::Length { remaining } => {
                assert!(*remaining > 0);
                assert!(self.head_received);
            }
            State::Chunked(chunked) => {
                chunked.check_invariants(&self.chunk_limits);
                assert!(self.head_received);
            }
            State::UntilClose | State::End => assert!(self.head_received),
        }
    }

    fn poison(&mut self, kind: ResponseErrorKind) -> ResponseError {
        let e = ResponseError::new(kind, self.head_received);
        self.poisoned = Some(e);
        e
    }

    fn step(&mut self, buf: &mut BytesMut) -> Result<Option<ResponseEvent>, ResponseErrorKind> {
        match &mut self.state {
            State::Idle if buf.is_empty() => Ok(None),
            State::Idle => Err(ResponseErrorKind::UnsolicitedResponse),
            State::Head(_) => self.head(buf),
            State::Length { remaining } => {
                if buf.is_empty() {
                    return Ok(None);
                }
                let n = usize::try_from(*remaining).map_or(buf.len(), |r| r.min(buf.len()));
                let data = buf.split_to(n).freeze();
                // n <= remaining, so this cannot underflow.
                *remaining -= n as u64;
                if *remaining == 0 {
                    self.state = State::End;
                }
                Ok(Some(ResponseEvent::Data(data)))
            }
            State::Chunked(chunked) => match chunked.decode(buf, &self.chunk_limits)? {
                None => Ok(None),
                Some(ChunkEvent::Data(data)) => Ok(Some(ResponseEvent::Data(data))),
                Some(ChunkEvent::End(trailers)) => {
                    self.state = State::Idle;
                    Ok(Some(ResponseEvent::End { trailers }))
                }
            },
            State::UntilClose if buf.is_empty() => Ok(None),
            State::UntilClose => Ok(Some(ResponseEvent::Data(buf.split().freeze()))),
            State::End => {
                self.state = State::Idle;
                Ok(Some(ResponseEvent::End { trailers: None }))
            }
        }
    }

    /// Scans for a complete head, parses it and decides what follows.
    fn head(&mut self, buf: &mut BytesMut) -> Result<Option<ResponseEvent>, ResponseErrorKind> {
        let State::Head(scan) = &mut self.state else {
            unreachable!("called in State::Head only");
        };
        check_status_line_start(buf)?;
        let max = self.limits.header_bytes_max;
        let Some(len) = scan.scan_section(buf, max, ErrorKind::HeaderTooLarge)? else {
            return Ok(None);
        };
        let bytes = buf.split_to(len).freeze();
        let head =
            parse_response_head(&bytes, self.limits.headers_count_max, self.request_is_head)?;
        if head.status.is_informational() {
            if self.interims == self.limits.interim_count_max {
                return Err(ResponseErrorKind::TooManyInterim);
            }
            self.interims += 1;
            self.state = State::Head(SectionScan::default());
            return Ok(Some(ResponseEvent::Interim(head)));
        }
        // Trailer fields share the head's budget; the blank line ending the body is framing,
        // so it always fits.
        let trailer_budget = max.saturating_sub(len) + 2;
        self.state = match head.body {
            ResponseBody::Absent | ResponseBody::Length(0) => State::End,
            ResponseBody::Length(remaining) => State::Length { remaining },
            ResponseBody::Chunked => State::Chunked(ChunkedDecoder::new(trailer_budget)),
            ResponseBody::Close => State::UntilClose,
        };
        self.head_received = true;
        Ok(Some(ResponseEvent::Head(head)))
    }
}
