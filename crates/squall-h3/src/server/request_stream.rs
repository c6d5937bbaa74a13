//! Request streams from the peer (RFC 9114 §4.1): a HEADERS frame, DATA frames, optional
//! trailers, then the end of the stream. The head and trailers are decoded with QPACK (a
//! section that waits for the encoder stream is kept, with what follows it, until it can
//! be), validated (`squall_h2::head`: HTTP/2's rules, which HTTP/3 takes over), and become
//! events. Malformed requests are stream errors;
//! frames out of order are connection errors.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use squall_h2::head::{self, HeadError};

use super::flood::Counted;
use super::stream::{App, Blocked, Recv, Send, Stream};
use super::types::{Command, ConnError, FloodKind};
use super::{Connection, Step};
use crate::error::ErrorCode;
use crate::frame::Frame;
use crate::qpack::{Decoding, QpackError};

/// A field section, decoded or not.
enum Decoded {
    /// Its fields in one buffer, their spans in the connection's `spans`.
    Fields(BytesMut),
    /// Over our SETTINGS_MAX_FIELD_SECTION_SIZE (the decoder stays in step).
    TooLarge,
    /// Waiting for the encoder stream.
    Blocked,
}

impl Connection {
    /// Bytes of a request stream: a new one is opened (or refused after our GOAWAY); a
    /// stream closed early drops them.
    pub(super) fn recv_request(&mut self, id: u64, data: Bytes, fin: bool) -> Step {
        if !self.streams.contains_key(&id) {
            if self.closed.contains(id) {
                return Ok(());
            }
            self.highest_request = Some(self.highest_request.map_or(id, |h| h.max(id)));
            if self.goaway.is_some_and(|goaway| id >= goaway) {
                return self.refuse(id);
            }
            let max = self.config.headers_frame_bytes_max();
            let stream = match self.spare.pop() {
                Some(mut stream) => {
                    stream.renew(max);
                    stream
                }
                None => Box::new(Stream::new(max)),
            };
            self.streams.insert(id, stream);
        }
        self.feed_request(id, data, fin)
    }

    /// §5.2: a request stream at or past our GOAWAY's id is not processed.
    fn refuse(&mut self, id: u64) -> Step {
        self.stats.refused += 1;
        self.stats.resets_sent += 1;
        let code = ErrorCode::RequestRejected;
        self.command(Command::ResetStream {
            stream_id: id,
            code,
        });
        self.command(Command::StopSending {
            stream_id: id,
            code,
        });
        self.decoder.cancel_stream(id);
        self.closed.insert(id);
        self.count(Counted::Kind(FloodKind::RapidReset), 1)
    }

    /// Frames from a request stream's bytes, in order; body data of this call is joined
    /// into one event.
    pub(super) fn feed_request(&mut self, id: u64, mut data: Bytes, fin: bool) -> Step {
        let mut body = Vec::new();
        loop {
            let Some(stream) = self.streams.get_mut(&id) else {
                return Ok(());
            };
            if stream.recv.is_over() {
                return Ok(());
            }
            if stream.blocked.is_some() {
                self.flush_body(id, &mut body, false);
                return self.buffer_blocked(id, data, fin);
            }
            let before = stream.frames.unknown_frames();
            let result = stream.frames.decode(&mut data);
            let unknown = stream.frames.unknown_frames() - before;
            self.count(Counted::Kind(FloodKind::UnknownFrames), unknown)?;
            match result {
                Ok(Some(Frame::Data(piece))) => self.on_data(id, piece, &mut body)?,
                Ok(Some(Frame::Headers(section))) => {
                    self.flush_body(id, &mut body, false);
                    let end = fin && data.is_empty();
                    self.on_headers(id, section, end)?;
                }
                Ok(Some(_)) => {
                    let reason = "control frame on a request stream";
                    return Err(self.fail(ErrorCode::FrameUnexpected, reason, None));
                }
                Ok(None) => break,
                Err(error) => return Err(self.fail(error.code, error.reason, None)),
            }
        }
        if fin {
            return self.on_fin(id, body);
        }
        self.flush_body(id, &mut body, false);
        Ok(())
    }

    /// A piece of a DATA frame's payload (§4.1: only between the head and trailers).
    fn on_data(&mut self, id: u64, piece: Bytes, body: &mut Vec<Bytes>) -> Step {
        let Some(stream) = self.streams.get_mut(&id) else {
            return Ok(());
        };
        match stream.recv {
            Recv::Body => {}
            Recv::Head => {
                let reason = "DATA before the request's HEADERS";
                return Err(self.fail(ErrorCode::FrameUnexpected, reason, None));
            }
            Recv::Trailers => {
                let reason = "DATA after the trailers";
                return Err(self.fail(ErrorCode::FrameUnexpected, reason, None));
            }
            Recv::Done | Recv::Stopped => return Ok(()),
        }
        // The decoder gives an empty piece only for an empty DATA frame.
        if piece.is_empty() {
            return self.count(Counted::Kind(FloodKind::EmptyFrames), 1);
        }
        let over_length = stream.length.add(piece.len() as u64);
        let over_limit = !stream.tunnel && stream.length.received > self.config.max_body_bytes;
        if over_length {
            body.clear();
            return self.malformed(id, ErrorCode::MessageError);
        }
        if over_limit {
            body.clear();
            return self.reject_started(id, 413);
        }
        body.push(piece);
        Ok(())
    }

    /// Body data of this call, joined (copied only when it came in several frames), or only
    /// the news of the end.
    fn flush_body(&mut self, id: u64, body: &mut Vec<Bytes>, end: bool) {
        if body.is_empty() && !end {
            return;
        }
        let data = match body.len() {
            0 => Bytes::new(),
            1 => body.pop().unwrap_or_default(),
            _ => {
                let len = body.iter().map(Bytes::len).sum();
                let mut joined = BytesMut::with_capacity(len);
                for piece in body.drain(..) {
                    joined.extend_from_slice(&piece);
                }
                joined.freeze()
            }
        };
        body.clear();
        self.push_data(id, data, end);
    }

    /// A HEADERS frame: the request's head, or its trailers (§4.1); `end`: the stream ends
    /// right after it.
    fn on_headers(&mut self, id: u64, section: Bytes, end: bool) -> Step {
        let Some(stream) = self.streams.get(&id) else {
            return Ok(());
        };
        let trailers = match stream.recv {
            Recv::Head => false,
            Recv::Body => true,
            Recv::Trailers => {
                let reason = "HEADERS after the trailers";
                return Err(self.fail(ErrorCode::FrameUnexpected, reason, None));
            }
            Recv::Done | Recv::Stopped => return Ok(()),
        };
        let fields = match self.decode_section(id, &section)? {
            Decoded::Blocked => {
                if let Some(stream) = self.streams.get_mut(&id) {
                    stream.blocked = Some(Box::new(Blocked {
                        section,
                        trailers,
                        rest: VecDeque::new(),
                        rest_bytes: 0,
                        fin: false,
                    }));
                }
                return Ok(());
            }
            Decoded::TooLarge => None,
            Decoded::Fields(fields) => Some(fields),
        };
        match trailers {
            true => self.on_trailers(id, fields, end),
            false => self.on_head(id, fields, end),
        }
    }

    /// Decodes a section into one buffer (returned) and the spans of its fields (in
    /// `self.spans`): the shape `squall_h2::head` validates, and a request then keeps.
    fn decode_section(&mut self, id: u64, section: &Bytes) -> Result<Decoded, ConnError> {
        let limit = self.config.max_field_section_size;
        let mut bytes = BytesMut::with_capacity(section.len() * 2 + SECTION_ROOM_BYTES);
        let mut spans = std::mem::take(&mut self.spans);
        spans.clear();
        let mut fits = true;
        let decoded = self
            .decoder
            .decode_section_with(id, section, limit, |n, v, s| {
                fits &= head::push_field(&mut bytes, &mut spans, n, v, s);
            });
        self.spans = spans;
        match decoded {
            Ok(Decoding::Done) if fits => Ok(Decoded::Fields(bytes)),
            Ok(Decoding::Done) => Ok(Decoded::TooLarge),
            Ok(Decoding::Blocked) => Ok(Decoded::Blocked),
            Err(QpackError::FieldSectionTooLarge { .. }) => Ok(Decoded::TooLarge),
            Err(error) => Err(self.qpack_fail(error)),
        }
    }

    /// The request head, decoded (`None`: too large).
    fn on_head(&mut self, id: u64, fields: Option<BytesMut>, end: bool) -> Step {
        self.stats.requests += 1;
        let parsed = match fields {
            Some(bytes) => head::parse_request(bytes, &self.spans, end, self.limits),
            // §4.2.2 lets a server answer 431 (the decoder kept its table in step).
            None => Err(HeadError::Answer(431)),
        };
        let Some(stream) = self.streams.get_mut(&id) else {
            return Ok(());
        };
        if end {
            stream.recv = Recv::Done;
        }
        match parsed {
            Ok(request) => {
                stream.length.expected = request.content_length;
                stream.tunnel = request.protocol.is_some();
                if !end {
                    stream.recv = Recv::Body;
                }
                stream.app = App::Queued;
                self.push_request(id, request);
                Ok(())
            }
            Err(HeadError::Malformed(_)) => self.malformed(id, ErrorCode::MessageError),
            Err(HeadError::Answer(status)) => self.answer(id, status),
        }
    }

    /// §4.1: trailers carry no pseudo-header field and complete the body that
    /// content-length announced.
    fn on_trailers(&mut self, id: u64, fields: Option<BytesMut>, end: bool) -> Step {
        let Some(bytes) = fields else {
            return self.reject_started(id, 431);
        };
        let parsed = head::parse_trailers(bytes, &self.spans);
        let headers = match parsed {
            Ok(headers) => headers.to_header_map(),
            Err(HeadError::Malformed(_)) => return self.malformed(id, ErrorCode::MessageError),
            Err(HeadError::Answer(status)) => return self.reject_started(id, status),
        };
        let Some(stream) = self.streams.get_mut(&id) else {
            return Ok(());
        };
        if stream.length.ends_wrong() {
            return self.malformed(id, ErrorCode::MessageError);
        }
        stream.recv = if end { Recv::Done } else { Recv::Trailers };
        self.push_trailers(id, headers);
        self.close_if_done(id);
        Ok(())
    }

    /// The stream ended (after the frames of this call, whose body data is `body`).
    fn on_fin(&mut self, id: u64, mut body: Vec<Bytes>) -> Step {
        let Some(stream) = self.streams.get_mut(&id) else {
            return Ok(());
        };
        // §7.1: not inside a frame.
        if let Err(error) = stream.frames.finish() {
            return Err(self.fail(error.code, error.reason, None));
        }
        let recv = std::mem::replace(&mut stream.recv, Recv::Done);
        match recv {
            // §4.1.2: the stream ended without a request.
            Recv::Head => self.malformed(id, ErrorCode::RequestIncomplete),
            Recv::Body if stream.length.ends_wrong() => self.malformed(id, ErrorCode::MessageError),
            Recv::Body => {
                self.flush_body(id, &mut body, true);
                self.close_if_done(id);
                Ok(())
            }
            Recv::Trailers => {
                self.close_if_done(id);
                Ok(())
            }
            Recv::Done | Recv::Stopped => {
                stream.recv = recv;
                Ok(())
            }
        }
    }

    /// Input behind a blocked section, kept for it (RFC 9204 §2.1.2) within our bound.
    fn buffer_blocked(&mut self, id: u64, data: Bytes, fin: bool) -> Step {
        let limit = self.config.max_blocked_stream_bytes;
        let Some(blocked) = self.streams.get_mut(&id).and_then(|s| s.blocked.as_mut()) else {
            return Ok(());
        };
        blocked.fin |= fin;
        if !data.is_empty() {
            blocked.rest_bytes += data.len();
            blocked.rest.push_back(data);
        }
        if blocked.rest_bytes > limit {
            self.stats.resets_sent += 1;
            let code = Some(ErrorCode::ExcessiveLoad);
            self.end_exchange(id, code, code, code);
            return self.count(Counted::Kind(FloodKind::RapidReset), 1);
        }
        Ok(())
    }

    /// The encoder stream unblocked stream `id`: its section is decoded now, then what came
    /// after it is read.
    pub(super) fn unblock(&mut self, id: u64) -> Step {
        let Some(blocked) = self.streams.get_mut(&id).and_then(|s| s.blocked.take()) else {
            return Ok(());
        };
        let Blocked {
            section,
            trailers,
            rest,
            rest_bytes,
            fin,
        } = *blocked;
        let end = rest_bytes == 0 && fin;
        let fields = match self.decode_section(id, &section)? {
            Decoded::Fields(fields) => Some(fields),
            Decoded::TooLarge => None,
            // The decoder names a stream only once its insertions are in.
            Decoded::Blocked => {
                let reason = "a section still blocked once unblocked";
                return Err(self.fail(ErrorCode::InternalError, reason, None));
            }
        };
        match trailers {
            true => self.on_trailers(id, fields, end)?,
            false => self.on_head(id, fields, end)?,
        }
        let chunks = rest.len();
        for (i, chunk) in rest.into_iter().enumerate() {
            self.feed_request(id, chunk, fin && i + 1 == chunks)?;
        }
        Ok(())
    }

    /// A request the connection answers itself, before or instead of the application:
    /// `status` with no body; the rest of the request is not read (§4.1.1: STOP_SENDING
    /// H3_NO_ERROR). The application, if it had the request, is told it is gone.
    fn answer(&mut self, id: u64, status: u16) -> Step {
        match status {
            413 => self.stats.answered_413 += 1,
            414 => self.stats.answered_414 += 1,
            431 => self.stats.answered_431 += 1,
            _ => self.stats.answered_501 += 1,
        }
        let frame = self.head_frame(id, Some(status), std::iter::empty());
        let Some(stream) = self.streams.get_mut(&id) else {
            return Ok(());
        };
        self.queued_total += frame.len();
        stream.out.push(frame);
        stream.out.finish();
        stream.send = Send::Ended;
        let stop = !stream.recv.is_over();
        if stop {
            stream.recv = Recv::Stopped;
            stream.blocked = None;
        }
        let app = std::mem::replace(&mut stream.app, App::None);
        if stop {
            self.command(Command::StopSending {
                stream_id: id,
                code: ErrorCode::NoError,
            });
            self.decoder.cancel_stream(id);
        }
        self.forget_events(id, app, ErrorCode::NoError);
        self.flush_encoder_stream();
        Ok(())
    }

    /// A request the application has (or has queued) that the connection must stop: a body
    /// or trailers over the limits. Answered with `status` if no response has begun, else
    /// reset with H3_REQUEST_CANCELLED; the application gets a Reset either way.
    fn reject_started(&mut self, id: u64, status: u16) -> Step {
        match self.streams.get(&id) {
            Some(stream) if stream.send == Send::Idle => self.answer(id, status),
            Some(_) => {
                self.stats.resets_sent += 1;
                let code = Some(ErrorCode::RequestCancelled);
                self.end_exchange(id, code, code, code);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// A malformed request (§4.1.2) or one that ended incomplete: a stream error, both
    /// parts reset with `code`, counted against the reset budget.
    fn malformed(&mut self, id: u64, code: ErrorCode) -> Step {
        self.stats.malformed += 1;
        self.stats.resets_sent += 1;
        self.end_exchange(id, Some(code), Some(code), Some(code));
        self.count(Counted::Kind(FloodKind::RapidReset), 1)
    }

    /// The peer reset its sending part of a request stream.
    pub(super) fn request_reset(&mut self, id: u64, code: ErrorCode) -> Step {
        let cancelled = Some(ErrorCode::RequestCancelled);
        match self.streams.get(&id) {
            // The request was whole, or we stopped reading it: the response goes on.
            Some(stream) if stream.recv.is_over() => return Ok(()),
            Some(_) => self.end_exchange(id, cancelled, None, Some(code)),
            None if self.closed.contains(id) => return Ok(()),
            // Reset before any byte arrived: our sending part goes too.
            None => self.abandon_unseen(
                id,
                Command::ResetStream {
                    stream_id: id,
                    code: ErrorCode::RequestCancelled,
                },
            ),
        }
        self.stats.resets_received += 1;
        self.count(Counted::Kind(FloodKind::RapidReset), 1)
    }

    /// The peer stopped reading a request stream: the response cannot go.
    pub(super) fn request_stopped(&mut self, id: u64, code: ErrorCode) -> Step {
        let cancelled = Some(ErrorCode::RequestCancelled);
        match self.streams.get(&id) {
            // All of the response was written: nothing is lost.
            Some(stream) if stream.send == Send::Finished => return Ok(()),
            Some(_) => self.end_exchange(id, None, cancelled, Some(code)),
            None if self.closed.contains(id) => return Ok(()),
            // Stopped before any byte arrived: we stop reading it too.
            None => self.abandon_unseen(
                id,
                Command::StopSending {
                    stream_id: id,
                    code: ErrorCode::RequestCancelled,
                },
            ),
        }
        self.stats.resets_received += 1;
        self.count(Counted::Kind(FloodKind::RapidReset), 1)
    }

    /// A request stream the peer gave up on before any of its bytes arrived: `command` gives
    /// up our half of it, QPACK is told (the sections sent on it will never be read, RFC 9204
    /// §4.4.2), and the stream counts as closed.
    fn abandon_unseen(&mut self, id: u64, command: Command) {
        self.command(command);
        self.decoder.cancel_stream(id);
        self.closed.insert(id);
    }

    /// Ends the exchange on stream `id` early. `reset`: our sending part is reset with it
    /// (if not finished); `stop`: the peer's is stopped with it (if still arriving), and
    /// QPACK is told we will read no more of it (RFC 9204 §4.4.2). The application is told
    /// with `notify` if it had the request, or its events silently dropped if `None`.
    pub(super) fn end_exchange(
        &mut self,
        id: u64,
        reset: Option<ErrorCode>,
        stop: Option<ErrorCode>,
        notify: Option<ErrorCode>,
    ) {
        let Some(stream) = self.streams.remove(&id) else {
            return;
        };
        self.queued_total -= stream.out.bytes();
        if let Some(code) = reset
            && stream.send != Send::Finished
        {
            self.command(Command::ResetStream {
                stream_id: id,
                code,
            });
        }
        if !stream.recv.is_over() {
            if let Some(code) = stop {
                self.command(Command::StopSending {
                    stream_id: id,
                    code,
                });
            }
            self.decoder.cancel_stream(id);
        }
        match notify {
            Some(code) => self.forget_events(id, stream.app, code),
            None => self.forget_events(id, App::Queued, ErrorCode::NoError),
        }
        self.closed.insert(id);
        self.keep_spare(stream);
    }

    /// Keeps a closed stream's allocation for a later one, up to `SPARE_STREAMS_MAX`.
    fn keep_spare(&mut self, stream: Box<Stream>) {
        if self.spare.len() < SPARE_STREAMS_MAX {
            self.spare.push(stream);
        }
    }

    /// Removes the stream if both parts are over; one we stopped reading is remembered,
    /// since the peer may still send on it.
    pub(super) fn close_if_done(&mut self, id: u64) {
        if self.streams.get(&id).is_some_and(|s| s.is_done())
            && let Some(stream) = self.streams.remove(&id)
        {
            if stream.recv == Recv::Stopped {
                self.closed.insert(id);
            }
            self.keep_spare(stream);
        }
    }
}

/// Closed request streams a connection keeps for reuse: about the requests a client keeps
/// in flight, so that a busy connection allocates no stream per request, while an idle one
/// holds only a few hundred bytes each.
const SPARE_STREAMS_MAX: usize = 16;

/// Room for what a section's fields take beyond twice its size (Huffman-coded strings decode
/// to at most 8/5 of their size; a static-table reference to a few dozen bytes).
const SECTION_ROOM_BYTES: usize = 64;
