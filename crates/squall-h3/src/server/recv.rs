//! Input from the driver: stream bytes ([`Connection::recv`]) and the peer's resets
//! ([`Connection::stream_reset`], [`Connection::stop_sending`]); the peer's unidirectional
//! streams (RFC 9114 §6.2): its control stream, its QPACK encoder and decoder streams
//! (RFC 9204 §4.2), and unknown ones. Request streams are in `request_stream.rs`.

use std::time::Instant;

use bytes::Bytes;

use super::flood::Counted;
use super::types::{Command, ConnError, FloodKind};
use super::{Connection, Step};
use crate::decode::{FrameDecoder, StreamKind, StreamTypeDecoder};
use crate::error::ErrorCode;
use crate::frame::{Frame, StreamType};
use crate::qpack::QpackError;

/// The largest frame payload the peer's control stream may send: SETTINGS is the only
/// one with more than an integer, and a few dozen bytes make a generous one.
const CONTROL_FRAME_BYTES_MAX: u64 = 16 * 1024;

/// One of the peer's unidirectional streams, while it is open.
#[derive(Debug)]
pub(crate) enum UniStream {
    /// Its type is still arriving.
    Type(StreamTypeDecoder),
    /// The peer's control stream.
    Control(Box<FrameDecoder>),
    /// The peer's QPACK encoder stream, feeding our decoder.
    Encoder,
    /// The peer's QPACK decoder stream, feeding our encoder.
    Decoder,
    /// An unknown or reserved type, read and discarded (RFC 9114 §6.2).
    Discard,
    /// An unknown or reserved type, stopped: what still arrives is dropped.
    Stopped,
}

impl Connection {
    /// Takes bytes the peer sent on stream `stream_id` (any peer-initiated QUIC stream), in
    /// order, in pieces of any size; `fin`: the stream ended after them. Client
    /// bidirectional streams carry requests, client unidirectional ones start with their type.
    ///
    /// On `Err` the connection is over: a [`Command::Close`] is queued, and every later call
    /// returns the same error.
    pub fn recv(
        &mut self,
        stream_id: u64,
        data: Bytes,
        fin: bool,
        now: Instant,
    ) -> Result<(), ConnError> {
        self.input(now, |conn| match stream_id % 4 {
            0 => conn.recv_request(stream_id, data, fin),
            2 => conn.recv_uni(stream_id, data, fin),
            // RFC 9114 §6: the peer cannot send on streams we open; a driver that says it
            // did has the id wrong.
            _ => Err(conn.fail(
                ErrorCode::StreamCreationError,
                "data on a server-initiated stream",
                None,
            )),
        })
    }

    /// The peer reset its sending part of stream `stream_id` (QUIC RESET_STREAM) with
    /// application error `code`. A request still arriving is over: the application gets
    /// [`super::Event::Reset`] if it had it, and our sending part is reset
    /// ([`Command::ResetStream`] H3_REQUEST_CANCELLED). A request already whole keeps its
    /// response. A control or QPACK stream reset is a connection error
    /// H3_CLOSED_CRITICAL_STREAM.
    pub fn stream_reset(
        &mut self,
        stream_id: u64,
        code: u64,
        now: Instant,
    ) -> Result<(), ConnError> {
        self.input(now, |conn| match stream_id % 4 {
            0 => conn.request_reset(stream_id, ErrorCode::from(code)),
            2 => match conn.uni.remove(&stream_id) {
                Some(UniStream::Control(_) | UniStream::Encoder | UniStream::Decoder) => {
                    let reason = "the peer reset its control or a QPACK stream";
                    Err(conn.fail(ErrorCode::ClosedCriticalStream, reason, None))
                }
                Some(UniStream::Discard) => {
                    conn.unknown_uni -= 1;
                    Ok(())
                }
                _ => Ok(()),
            },
            // QUIC lets the peer reset only what it sends.
            _ => Ok(()),
        })
    }

    /// The peer asked us to stop sending on stream `stream_id` (QUIC STOP_SENDING) with
    /// `code`. On a request stream whose response is not all written, the response is
    /// dropped (the driver resets the QUIC stream's sending part, as QUIC requires), the
    /// application gets [`super::Event::Reset`] if it had the request, and a request still
    /// arriving is stopped ([`Command::StopSending`] H3_REQUEST_CANCELLED). On one of our
    /// control or QPACK streams it is a connection error H3_CLOSED_CRITICAL_STREAM.
    pub fn stop_sending(
        &mut self,
        stream_id: u64,
        code: u64,
        now: Instant,
    ) -> Result<(), ConnError> {
        self.input(now, |conn| match stream_id % 4 {
            0 => conn.request_stopped(stream_id, ErrorCode::from(code)),
            // Server unidirectional streams: we open only the three critical ones.
            3 => {
                let reason = "the peer stopped our control or a QPACK stream";
                Err(conn.fail(ErrorCode::ClosedCriticalStream, reason, None))
            }
            _ => Ok(()),
        })
    }

    /// What every entry point for input does around its `step`: nothing once the connection
    /// has failed (its error again), the clock moved on to `now`, and our decoder's
    /// acknowledgments (section acknowledgments, stream cancellations) flushed after it.
    fn input(&mut self, now: Instant, step: impl FnOnce(&mut Self) -> Step) -> Step {
        if let Some(error) = self.error {
            return Err(error);
        }
        self.now = self.now.max(now);
        let result = step(self);
        self.flush_decoder_stream();
        result
    }

    /// A client unidirectional stream: its type, then what the type says.
    fn recv_uni(&mut self, id: u64, mut data: Bytes, fin: bool) -> Step {
        // Out of the map while it is worked on; back in if it is still open.
        let mut state =
            (self.uni.remove(&id)).unwrap_or_else(|| UniStream::Type(StreamTypeDecoder::new()));
        if let UniStream::Type(types) = &mut state {
            let Some(ty) = types.decode(&mut data) else {
                // A stream that ends before its type is complete is ignored.
                if !fin {
                    self.uni.insert(id, state);
                }
                return Ok(());
            };
            state = self.open_uni(id, ty)?;
        }
        let critical = "the peer closed its control or a QPACK stream";
        let open = match &mut state {
            UniStream::Type(_) => true,
            UniStream::Control(frames) => {
                self.on_control(frames, data, fin)?;
                true
            }
            UniStream::Encoder => {
                self.on_encoder_stream(&data)?;
                if fin {
                    return Err(self.fail(ErrorCode::ClosedCriticalStream, critical, None));
                }
                true
            }
            UniStream::Decoder => {
                if let Err(error) = self.encoder.feed_decoder_stream(&data) {
                    return Err(self.qpack_fail(error));
                }
                if fin {
                    return Err(self.fail(ErrorCode::ClosedCriticalStream, critical, None));
                }
                true
            }
            UniStream::Discard => {
                if fin {
                    self.unknown_uni -= 1;
                }
                !fin
            }
            UniStream::Stopped => !fin,
        };
        if open {
            self.uni.insert(id, state);
        }
        Ok(())
    }

    /// A unidirectional stream's type is known (RFC 9114 §6.2, RFC 9204 §4.2).
    fn open_uni(&mut self, id: u64, ty: StreamType) -> Result<UniStream, ConnError> {
        let second = |seen: &mut bool| std::mem::replace(seen, true);
        let state = match ty {
            StreamType::Control if !second(&mut self.control_seen) => UniStream::Control(Box::new(
                FrameDecoder::new(StreamKind::Control, CONTROL_FRAME_BYTES_MAX),
            )),
            StreamType::QpackEncoder if !second(&mut self.encoder_seen) => UniStream::Encoder,
            StreamType::QpackDecoder if !second(&mut self.decoder_seen) => UniStream::Decoder,
            StreamType::Control | StreamType::QpackEncoder | StreamType::QpackDecoder => {
                let reason = "a second control or QPACK stream";
                return Err(self.fail(ErrorCode::StreamCreationError, reason, None));
            }
            // §6.2.2: only servers push.
            StreamType::Push => {
                let reason = "a push stream from a client";
                return Err(self.fail(ErrorCode::StreamCreationError, reason, None));
            }
            StreamType::Unknown(_) if self.unknown_uni < self.config.max_unknown_uni_streams => {
                self.unknown_uni += 1;
                UniStream::Discard
            }
            StreamType::Unknown(_) => {
                self.stats.uni_streams_stopped += 1;
                self.command(Command::StopSending {
                    stream_id: id,
                    code: ErrorCode::StreamCreationError,
                });
                UniStream::Stopped
            }
        };
        Ok(state)
    }

    /// Bytes of the peer's control stream (RFC 9114 §6.2.1): the frame decoder checks
    /// SETTINGS first and once and which frames may come; the rest is here.
    fn on_control(&mut self, frames: &mut FrameDecoder, mut data: Bytes, fin: bool) -> Step {
        loop {
            let before = frames.unknown_frames();
            let result = frames.decode(&mut data);
            let unknown = frames.unknown_frames() - before;
            self.count(Counted::Kind(FloodKind::UnknownFrames), unknown)?;
            match result {
                Ok(Some(frame)) => self.on_control_frame(frame)?,
                Ok(None) => break,
                Err(error) => return Err(self.fail(error.code, error.reason, None)),
            }
        }
        // A control stream never ends: this is H3_CLOSED_CRITICAL_STREAM.
        if fin && let Err(error) = frames.finish() {
            return Err(self.fail(error.code, error.reason, None));
        }
        Ok(())
    }

    fn on_control_frame(&mut self, frame: Frame) -> Step {
        match frame {
            Frame::Settings(settings) => {
                self.peer_settings = Some(settings);
                let (capacity, blocked) = (
                    settings.qpack_max_table_capacity,
                    settings.qpack_blocked_streams,
                );
                self.encoder.apply_peer_settings(capacity, blocked);
                self.flush_encoder_stream();
                Ok(())
            }
            // §5.2: a client's GOAWAY carries a push id, and may only stay or shrink. We
            // push nothing, so it changes nothing else.
            Frame::GoAway(id) => {
                self.count(Counted::Kind(FloodKind::ControlFrames), 1)?;
                if self.peer_goaway.is_some_and(|last| id > last) {
                    let reason = "GOAWAY with a larger id than the last";
                    return Err(self.fail(ErrorCode::IdError, reason, None));
                }
                self.peer_goaway = Some(id);
                Ok(())
            }
            // §7.2.7: it may not shrink. We push nothing, so it changes nothing else.
            Frame::MaxPushId(id) => {
                self.count(Counted::Kind(FloodKind::ControlFrames), 1)?;
                if self.peer_max_push_id.is_some_and(|last| id < last) {
                    let reason = "MAX_PUSH_ID smaller than the last";
                    return Err(self.fail(ErrorCode::IdError, reason, None));
                }
                self.peer_max_push_id = Some(id);
                Ok(())
            }
            // §7.2.3: a CANCEL_PUSH for a push id no PUSH_PROMISE named is H3_ID_ERROR, and
            // we never promise.
            Frame::CancelPush(_) => {
                let reason = "CANCEL_PUSH of a push never promised";
                Err(self.fail(ErrorCode::IdError, reason, None))
            }
            // The frame decoder refuses these on a control stream.
            Frame::Data(_) | Frame::Headers(_) => {
                let reason = "DATA or HEADERS on the control stream";
                Err(self.fail(ErrorCode::FrameUnexpected, reason, None))
            }
        }
    }

    /// Bytes of the peer's QPACK encoder stream: insertions into our decoder's table, which
    /// may unblock request streams waiting for them.
    fn on_encoder_stream(&mut self, data: &[u8]) -> Step {
        let before = self.decoder.insert_count();
        let unblocked = match self.decoder.feed_encoder_stream(data) {
            Ok(unblocked) => unblocked,
            Err(error) => return Err(self.qpack_fail(error)),
        };
        let inserted = self.decoder.insert_count() - before;
        if inserted > 0 {
            self.count(Counted::Kind(FloodKind::QpackEncoder), inserted)?;
            let empty = (self.decoder.dynamic_table())
                .filter(|&(index, name, _)| index >= before && name.is_empty())
                .count();
            self.count(Counted::EmptyInserts, empty as u64)?;
        }
        for id in unblocked {
            self.unblock(id)?;
        }
        Ok(())
    }

    /// A QPACK error that ends the connection, with its RFC 9204 §6 code.
    pub(super) fn qpack_fail(&mut self, error: QpackError) -> ConnError {
        let reason = match error {
            QpackError::Decompression(reason)
            | QpackError::EncoderStream(reason)
            | QpackError::DecoderStream(reason) => reason,
            QpackError::FieldSectionTooLarge { .. } => "field section too large",
        };
        self.fail(error.code(), reason, None)
    }
}
