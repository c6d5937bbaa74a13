//! The request decoder: the state machine that turns received bytes into request events.
//!
//! One decoder lives per connection. The worker appends what it receives to a `BytesMut` and
//! calls [`RequestDecoder::decode`] until it returns `Ok(None)`. Each request yields
//! `Head`, zero or more `Data`, then `End`, and then the decoder starts on the next request in
//! the same buffer, which is how pipelining (RFC 9112 §9.3.2) works without a queue.
//!
//! Bytes of a head are not consumed until the whole head is in: the head is then split off
//! the buffer in one piece, and the `RequestHead` points into it. Body bytes are consumed as
//! they come.

use bytes::{Bytes, BytesMut};
use http::HeaderMap;

use crate::chunked::{ChunkEvent, ChunkedDecoder};
use crate::head::{BodyKind, RequestHead, parse_head};
use crate::scan::SectionScan;
use crate::{Error, ErrorKind, Limits};

/// What the decoder found in the bytes. A head is most of what it finds and is moved out at
/// once: boxing it to shrink the other variants would allocate once per request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(clippy::large_enum_variant)]
pub enum Event {
    /// A request head. The body, if any, follows.
    Head(RequestHead),
    /// A piece of the body (never empty), cut from the receive buffer without a copy. Pieces
    /// follow the reads, not the chunks of a chunked body.
    Data(Bytes),
    /// The request is complete. `trailers` are the trailer fields of a chunked body, if it
    /// had any; they are not merged into the head, since RFC 9110 §6.5.1 forbids that for
    /// fields not defined to allow it, and the proxy decides what to forward.
    End { trailers: Option<HeaderMap> },
}

/// Decodes the requests of one connection.
#[derive(Debug, Clone)]
pub struct RequestDecoder {
    limits: Limits,
    state: State,
    /// Set by the first error; every later call returns it again.
    poisoned: Option<ErrorKind>,
}

#[derive(Debug, Clone)]
enum State {
    /// Waiting for (the rest of) a head.
    Head(SectionScan),
    /// Delivering a Content-Length body; `remaining` > 0.
    Length { remaining: u64 },
    /// Delivering a chunked body.
    Chunked(ChunkedDecoder),
    /// The body is complete; End is next.
    End,
}

impl RequestDecoder {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            state: State::Head(SectionScan::default()),
            poisoned: None,
        }
    }

    /// Consumes bytes from the front of `buf`. `Ok(None)`: more bytes are needed. Every
    /// request yields `Head`, zero or more `Data`, then `End` (right after `Head` when the body
    /// is empty), then the next pipelined request follows.
    ///
    /// After an error the decoder is poisoned: every later call returns an error of the same
    /// kind, and the caller should answer with `encode_error(err.status(), ..)` and close.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Event>, Error> {
        if let Some(kind) = self.poisoned {
            return Err(Error::new(kind));
        }
        self.step(buf).map_err(|kind| {
            self.poisoned = Some(kind);
            Error::new(kind)
        })
    }

    /// True when no message is in progress and no byte of the next one has been consumed.
    /// With an empty buffer this means the connection is idle (idle timeout); otherwise a
    /// head is arriving (header timeout). False once poisoned.
    pub fn is_between_messages(&self) -> bool {
        self.poisoned.is_none() && matches!(self.state, State::Head(_))
    }

    /// After the head of a request without a body, takes the `End` the next `decode` would
    /// give (it reads no byte), so that the caller has the request whole with its head. True
    /// when it did; false, changing nothing, in any other state.
    pub fn take_end(&mut self) -> bool {
        if self.poisoned.is_some() || !matches!(self.state, State::End) {
            return false;
        }
        self.state = State::Head(SectionScan::default());
        true
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Asserts the decoder's invariants; tests call it after every step.
    #[doc(hidden)]
    pub fn check_invariants(&self) {
        match &self.state {
            State::Head(scan) => scan.check_invariants(),
            State::Length { remaining } => assert!(*remaining > 0),
            State::Chunked(chunked) => chunked.check_invariants(&self.limits),
            State::End => {}
        }
    }

    fn step(&mut self, buf: &mut BytesMut) -> Result<Option<Event>, ErrorKind> {
        match &mut self.state {
            State::Head(scan) => {
                let limits = &self.limits;
                let Some(span) =
                    scan.scan_head(buf, limits.header_bytes_max, limits.uri_bytes_max)?
                else {
                    return Ok(None);
                };
                let mut head = buf.split_to(span.end).freeze();
                if span.start > 0 {
                    // Leading empty lines (RFC 9112 §2.2): counted, then dropped.
                    head = head.slice(span.start..);
                }
                let request = parse_head(&head, limits)?;
                // Trailer fields share the head's budget; the blank line ending the body is
                // framing, so it always fits.
                let trailer_budget = limits.header_bytes_max.saturating_sub(span.end) + 2;
                self.state = match request.body {
                    BodyKind::Empty | BodyKind::Length(0) => State::End,
                    BodyKind::Length(remaining) => State::Length { remaining },
                    BodyKind::Chunked => State::Chunked(ChunkedDecoder::new(trailer_budget)),
                };
                Ok(Some(Event::Head(request)))
            }
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
                Ok(Some(Event::Data(data)))
            }
            State::Chunked(chunked) => match chunked.decode(buf, &self.limits)? {
                None => Ok(None),
                Some(ChunkEvent::Data(data)) => Ok(Some(Event::Data(data))),
                Some(ChunkEvent::End(trailers)) => {
                    self.state = State::Head(SectionScan::default());
                    Ok(Some(Event::End { trailers }))
                }
            },
            State::End => {
                self.state = State::Head(SectionScan::default());
                Ok(Some(Event::End { trailers: None }))
            }
        }
    }
}
