//! Frames from the origin: the entry point [`ClientConnection::recv`], the dispatch by
//! frame type, and the frames that concern the connection or a stream's existence
//! (SETTINGS, PING, GOAWAY, RST_STREAM, WINDOW_UPDATE). Header blocks are in `headers.rs`,
//! DATA in `body.rs`.

use std::time::Instant;

use bytes::BytesMut;

use super::stream::RecvState;
use super::{ClientConnection, REPLY_BYTES_MAX};
use crate::common::order::{check_order, error_stream};
use crate::common::settings::Applied;
use crate::conn::stream::Closed;
use crate::conn::{ConnError, FloodKind};
use crate::encode::{encode_ping, encode_settings_ack};
use crate::error::{ErrorCode, FrameError};
use crate::frame::{
    FRAME_HEADER_BYTES, Frame, SettingId, Settings, StreamId, WINDOW_BYTES_MAX, kind,
};

/// What a handler returns: `Err` once the connection has failed (GOAWAY queued).
pub(super) type Step = Result<(), ConnError>;

/// Where a stream id stands, from the side that opens odd streams (RFC 9113 §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lookup {
    /// Even (a server's, and we take no pushes) or not opened by us yet.
    Idle,
    /// Open or half-closed.
    Active,
    /// Closed, and how, as far as it is remembered.
    Closed(Closed),
}

impl ClientConnection {
    /// Whole frames from `input` (consumed as decoded; a partial frame stays). Connection
    /// errors queue a GOAWAY, queue a Reset event for every open stream, and return the
    /// error; later calls return it again.
    pub fn recv(&mut self, input: &mut BytesMut, now: Instant) -> Result<(), ConnError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        self.now = self.now.max(now);
        while let Some(frame) = self.next_frame(input)? {
            self.on_frame(frame)?;
            if self.reply_bytes > REPLY_BYTES_MAX {
                let reason = "peer does not read what we answer";
                let code = ErrorCode::EnhanceYourCalm;
                return Err(self.end_with(ConnError {
                    code,
                    reason,
                    flood: Some(FloodKind::OutputQueue),
                }));
            }
        }
        Ok(())
    }

    /// The next whole frame; frames that are stream errors by themselves are handled here.
    fn next_frame(&mut self, input: &mut BytesMut) -> Result<Option<Frame>, ConnError> {
        loop {
            self.peek_raw(input)?;
            match self.frames.decode(input) {
                Ok(frame) => return Ok(frame),
                Err(error) => self.on_frame_error(error)?,
            }
        }
    }

    /// What the frame decoder, a server's, does not tell a client: a PUSH_PROMISE is a
    /// connection error because we said SETTINGS_ENABLE_PUSH = 0 (RFC 9113 §6.6, §8.4). The
    /// decoder refuses it too, but as a server would; this says why a client does. Looks at
    /// the frame header at the front of `input`; consumes nothing.
    fn peek_raw(&mut self, input: &[u8]) -> Result<(), ConnError> {
        if input.len() >= FRAME_HEADER_BYTES && input[3] == kind::PUSH_PROMISE {
            let reason = "PUSH_PROMISE though we disabled push";
            return Err(self.conn_error(ErrorCode::ProtocolError, reason));
        }
        Ok(())
    }

    fn on_frame_error(&mut self, error: FrameError) -> Step {
        let id = match error_stream(&error, self.block.is_some(), self.settings_seen) {
            Ok(id) => id,
            Err((code, reason)) => return Err(self.conn_error(code, reason)),
        };
        // §5.1: on an idle stream, any frame but HEADERS and PRIORITY is a connection
        // error; a bad PRIORITY there is too, rather than an RST_STREAM on a stream that
        // never existed.
        if self.lookup(id) == Lookup::Idle {
            return Err(self.conn_error(ErrorCode::ProtocolError, error.reason));
        }
        self.stream_error(id, error.code);
        Ok(())
    }

    fn on_frame(&mut self, frame: Frame) -> Step {
        let block = self.block.as_ref().map(|b| b.stream_id);
        let not_settings = "server's first frame is not SETTINGS";
        if let Err(reason) = check_order(&frame, &mut self.settings_seen, block, not_settings) {
            return Err(self.conn_error(ErrorCode::ProtocolError, reason));
        }
        match frame {
            Frame::Data {
                stream_id,
                data,
                end_stream,
                flow_len,
            } => self.on_data(stream_id, data, end_stream, flow_len),
            Frame::Headers {
                stream_id,
                block,
                end_stream,
                end_headers,
                ..
            } => self.on_headers(stream_id, block, end_stream, end_headers),
            Frame::Continuation {
                stream_id,
                block,
                end_headers,
            } => self.on_continuation(stream_id, block, end_headers),
            Frame::RstStream { stream_id, code } => self.on_rst_stream(stream_id, code),
            Frame::Settings(settings) => self.on_settings(settings),
            Frame::Ping { ack, data } => {
                // §6.7: answered with the same data; we send no PING, so ACKs are noise.
                if !ack {
                    encode_ping(&mut self.out, true, data);
                    self.reply_bytes += FRAME_HEADER_BYTES + 8;
                }
                Ok(())
            }
            Frame::GoAway {
                last_stream_id,
                code,
                ..
            } => {
                self.on_goaway(last_stream_id, code);
                Ok(())
            }
            Frame::WindowUpdate {
                stream_id,
                increment,
            } => self.on_window_update(stream_id, increment),
            // §5.3.2: priorities are deprecated, and only clients send PRIORITY_UPDATE
            // (RFC 9218 §7.1); §5.5: unknown frame types are ignored.
            Frame::Priority { .. } | Frame::PriorityUpdate { .. } | Frame::Unknown { .. } => Ok(()),
        }
    }

    pub(super) fn lookup(&self, id: StreamId) -> Lookup {
        if id.is_multiple_of(2) || id >= self.next_stream_id {
            Lookup::Idle
        } else if self.streams.contains_key(&id) {
            Lookup::Active
        } else {
            Lookup::Closed(self.closed.get(id))
        }
    }

    /// RFC 9113 §6.5.
    fn on_settings(&mut self, settings: Settings) -> Step {
        if settings.ack {
            let recvs = self.streams.values_mut().map(|s| &mut s.recv_window);
            self.settings.on_ack(recvs);
            return Ok(());
        }
        for (id, value) in settings.params {
            let sends = self.streams.values_mut().map(|s| &mut s.send);
            match self.settings.apply(id, value, sends) {
                Ok(Applied::Done) => {}
                Ok(Applied::SendWindows { grew }) => self.send_windows_moved(grew),
                Ok(Applied::Role) => self.apply_role_setting(id, value)?,
                Err(reason) => return Err(self.conn_error(ErrorCode::FlowControlError, reason)),
            }
        }
        encode_settings_ack(&mut self.out);
        self.reply_bytes += FRAME_HEADER_BYTES;
        Ok(())
    }

    /// A setting whose meaning is the client's own.
    fn apply_role_setting(&mut self, id: SettingId, value: u32) -> Step {
        match id {
            SettingId::MaxConcurrentStreams => self.peer_max_streams = Some(value),
            // RFC 8441 §3; the decoder refused values other than 0 and 1.
            SettingId::EnableConnectProtocol => self.peer_extended_connect = value == 1,
            // §6.5.2: "A client MUST treat receipt of a SETTINGS frame with
            // SETTINGS_ENABLE_PUSH set to 1 as a connection error of type PROTOCOL_ERROR."
            SettingId::EnablePush if value == 1 => {
                let reason = "server sent SETTINGS_ENABLE_PUSH = 1";
                return Err(self.conn_error(ErrorCode::ProtocolError, reason));
            }
            // ENABLE_PUSH = 0 changes nothing: we take no pushes anyway.
            _ => {}
        }
        Ok(())
    }

    /// A new initial window moved every stream's send window; `grew`: up, so streams that
    /// waited for window may send.
    fn send_windows_moved(&mut self, grew: bool) {
        if grew {
            let ids: Vec<StreamId> = self.streams.keys().copied().collect();
            for id in ids {
                self.schedule(id);
            }
        }
    }

    /// §6.8: no new streams; streams above `last` were not processed and may be retried
    /// elsewhere; the others finish. A later GOAWAY may only lower `last`.
    fn on_goaway(&mut self, last: StreamId, code: ErrorCode) {
        if self.peer_goaway.is_some_and(|old| old <= last) {
            return;
        }
        self.peer_goaway = Some(last);
        self.push_goaway(last, code);
        let above: Vec<StreamId> = self.streams.range(last + 1..).map(|(&id, _)| id).collect();
        for id in above {
            let reset = Some((ErrorCode::RefusedStream, true));
            self.remove_stream(id, Closed::ResetByUs, reset);
        }
    }

    /// §6.4.
    fn on_rst_stream(&mut self, id: StreamId, code: ErrorCode) -> Step {
        match self.lookup(id) {
            Lookup::Idle => {
                let reason = "RST_STREAM on an idle stream";
                Err(self.conn_error(ErrorCode::ProtocolError, reason))
            }
            Lookup::Closed(_) => Ok(()),
            Lookup::Active => {
                // §8.1: a server may answer before the request is complete and then ask us
                // to stop sending (NO_ERROR): the response stands, nothing is reported.
                let complete = self
                    .streams
                    .get(&id)
                    .is_some_and(|s| s.recv == RecvState::Done);
                if complete {
                    self.remove_stream(id, Closed::Normally, None);
                } else {
                    let refused = code == ErrorCode::RefusedStream;
                    self.remove_stream(id, Closed::ResetByPeer, Some((code, refused)));
                }
                Ok(())
            }
        }
    }

    /// §6.9, §6.9.1.
    fn on_window_update(&mut self, id: StreamId, increment: u32) -> Step {
        let max = i64::from(WINDOW_BYTES_MAX);
        if id == 0 {
            self.conn_send_window += i64::from(increment);
            if self.conn_send_window > max {
                let reason = "connection send window above 2^31-1";
                return Err(self.conn_error(ErrorCode::FlowControlError, reason));
            }
            self.unpark();
            return Ok(());
        }
        match self.lookup(id) {
            Lookup::Idle => {
                let reason = "WINDOW_UPDATE on an idle stream";
                Err(self.conn_error(ErrorCode::ProtocolError, reason))
            }
            Lookup::Closed(_) => Ok(()),
            Lookup::Active => {
                let Some(stream) = self.streams.get_mut(&id) else {
                    return Ok(());
                };
                if !stream.send.open_window(increment) {
                    self.stream_error(id, ErrorCode::FlowControlError);
                    return Ok(());
                }
                self.schedule(id);
                Ok(())
            }
        }
    }
}
