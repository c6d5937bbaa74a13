//! Frames from the peer: the entry point [`Connection::recv`], the dispatch by frame type,
//! and the frames that concern the connection or a stream's existence (SETTINGS, PING,
//! GOAWAY, PRIORITY, PRIORITY_UPDATE, RST_STREAM, WINDOW_UPDATE). Header blocks are in
//! `headers.rs`, DATA in `body.rs`.

use std::time::Instant;

use bytes::{Buf, BytesMut};

use super::priority::PriorityParams;
use super::stream::Closed;
use super::types::{ConnError, FloodKind};
use super::{Connection, Lookup};
use crate::common::order::{check_order, error_stream};
use crate::common::send::SendState;
use crate::common::settings::Applied;
use crate::decode::WholeBlock;
use crate::encode::{encode_ping, encode_settings_ack};
use crate::error::{ErrorCode, FrameError};
use crate::frame::{FRAME_HEADER_BYTES, Frame, Priority, Settings, StreamId};
use crate::{PREFACE, PrefaceState, WINDOW_BYTES_MAX, match_preface};

pub(super) use super::headers::PartialBlock;

/// What a handler returns: `Err` once the connection has failed (GOAWAY queued).
pub(super) type Step = Result<(), ConnError>;

/// WINDOW_UPDATE increments below this are counted as [`FloodKind::WindowUpdate`]: honest
/// peers give back window in large steps (half a window, as h2 and nginx do), while tiny
/// ones make us cut tiny DATA frames (CVE-2019-9511, "data dribble").
const WINDOW_UPDATE_SMALL_BYTES: u32 = 1024;

impl Connection {
    /// Consumes whole frames from `input`, the client preface first, leaving a partial
    /// frame in it. On `Err` a GOAWAY is queued: flush the output, then close. Every later
    /// call returns the same error.
    pub fn recv(&mut self, input: &mut BytesMut, now: Instant) -> Result<(), ConnError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        self.now = self.now.max(now);
        let result = self.recv_frames(input);
        self.refresh_stalls();
        result
    }

    fn recv_frames(&mut self, input: &mut BytesMut) -> Step {
        if !self.preface_done {
            match match_preface(input) {
                PrefaceState::Incomplete => return Ok(()),
                PrefaceState::Mismatch => {
                    let reason = "not the HTTP/2 client preface";
                    return Err(self.fail(ErrorCode::ProtocolError, reason, None));
                }
                PrefaceState::Matched => {
                    input.advance(PREFACE.len());
                    self.preface_done = true;
                }
            }
        }
        loop {
            // The common request: a HEADERS frame with its whole block, read in place.
            if let Some(whole) = self.whole_block(input) {
                let (start, end) = whole.block;
                self.on_whole_block(whole, &input[start..end])?;
                input.advance(whole.frame_len);
            } else {
                let Some(frame) = self.next_frame(input)? else {
                    break;
                };
                self.on_frame(frame)?;
            }
            if self.reply_bytes > self.config.max_queued_output_bytes {
                let reason = "peer does not read what we answer";
                return Err(self.flood(FloodKind::OutputQueue, reason));
            }
        }
        Ok(())
    }

    /// A HEADERS frame with a whole block at the front of `input`, when one may come now:
    /// not before the peer's SETTINGS, nor inside another block (`on_frame`'s order checks).
    fn whole_block(&self, input: &[u8]) -> Option<WholeBlock> {
        if !self.settings_seen || self.block.is_some() {
            return None;
        }
        self.frames.whole_block(input)
    }

    /// The next whole frame; frames that are stream errors by themselves are handled here.
    fn next_frame(&mut self, input: &mut BytesMut) -> Result<Option<Frame>, ConnError> {
        loop {
            match self.frames.decode(input) {
                Ok(frame) => return Ok(frame),
                Err(error) => self.on_frame_error(error)?,
            }
        }
    }

    fn on_frame_error(&mut self, error: FrameError) -> Step {
        let id = match error_stream(&error, self.block.is_some(), self.settings_seen) {
            Ok(id) => id,
            Err((code, reason)) => return Err(self.fail(code, reason, None)),
        };
        // A zero WINDOW_UPDATE increment on an idle stream: §5.1 makes any frame but
        // HEADERS and PRIORITY there a connection error.
        if self.lookup(id) == Lookup::Idle && error.code == ErrorCode::ProtocolError {
            return Err(self.fail(ErrorCode::ProtocolError, error.reason, None));
        }
        self.count(FloodKind::Control)?;
        self.stream_error(id, error.code)
    }

    fn on_frame(&mut self, frame: Frame) -> Step {
        let block = self.block.as_ref().map(|b| b.start.stream_id);
        let not_settings = "first frame is not SETTINGS";
        if let Err(reason) = check_order(&frame, &mut self.settings_seen, block, not_settings) {
            return Err(self.fail(ErrorCode::ProtocolError, reason, None));
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
                priority,
            } => self.on_headers(stream_id, block, end_stream, end_headers, priority),
            Frame::Continuation {
                stream_id,
                block,
                end_headers,
            } => self.on_continuation(stream_id, block, end_headers),
            Frame::Priority {
                stream_id,
                priority,
            } => self.on_priority(stream_id, priority),
            Frame::PriorityUpdate {
                prioritized_stream_id,
                value,
            } => self.on_priority_update(prioritized_stream_id, &value),
            Frame::RstStream { stream_id, code } => self.on_rst_stream(stream_id, code),
            Frame::Settings(settings) => self.on_settings(settings),
            Frame::Ping { ack, data } => self.on_ping(ack, data),
            Frame::GoAway { .. } => self.on_goaway(),
            Frame::WindowUpdate {
                stream_id,
                increment,
            } => self.on_window_update(stream_id, increment),
            // §5.5: unknown frame types are ignored.
            Frame::Unknown { .. } => Ok(()),
        }
    }

    /// RFC 9113 §6.5.
    fn on_settings(&mut self, settings: Settings) -> Step {
        self.count(FloodKind::Control)?;
        if settings.ack {
            let recvs = self.streams.values_mut().map(|s| &mut s.recv_window);
            self.settings.on_ack(recvs);
            return Ok(());
        }
        for (id, value) in settings.params {
            // A server does not push, and SETTINGS_MAX_CONCURRENT_STREAMS limits the
            // streams a server opens: none. A client's SETTINGS_ENABLE_CONNECT_PROTOCOL
            // means nothing to a server (RFC 8441 §3). So `Applied::Role` is ignored.
            let sends = self.streams.values_mut().map(|s| &mut s.send);
            match self.settings.apply(id, value, sends) {
                Ok(Applied::Done | Applied::Role) => {}
                Ok(Applied::SendWindows { grew }) => self.send_windows_moved(grew),
                Err(reason) => return Err(self.fail(ErrorCode::FlowControlError, reason, None)),
            }
        }
        encode_settings_ack(&mut self.out);
        self.reply_bytes += FRAME_HEADER_BYTES;
        Ok(())
    }

    /// A new initial window moved every stream's send window: the streams that may send
    /// now are filed, and every stall is looked at again.
    fn send_windows_moved(&mut self, grew: bool) {
        if grew {
            let ids: Vec<StreamId> = self.streams.keys().copied().collect();
            for id in ids {
                self.schedule(id);
            }
        }
        self.refresh_all_stalls();
    }

    /// §6.7: answered with the same data; our own PINGs are never sent, so ACKs are noise.
    fn on_ping(&mut self, ack: bool, data: [u8; 8]) -> Step {
        self.count(FloodKind::Control)?;
        if !ack {
            encode_ping(&mut self.out, true, data);
            self.reply_bytes += FRAME_HEADER_BYTES + 8;
        }
        Ok(())
    }

    /// §6.8: the client opens no more streams; the open ones finish.
    fn on_goaway(&mut self) -> Step {
        self.count(FloodKind::Control)?;
        self.peer_goaway = true;
        Ok(())
    }

    /// §5.3.2: priorities are ignored, but §5.3.1 still forbids self-dependency.
    fn on_priority(&mut self, id: StreamId, priority: Priority) -> Step {
        self.count(FloodKind::Control)?;
        if priority.dependency == id {
            return self.stream_error(id, ErrorCode::ProtocolError);
        }
        Ok(())
    }

    /// RFC 9218 §7.1: a new priority for an open stream, or one not opened yet (kept until it
    /// opens, within the stream limit; beyond it, a PROTOCOL_ERROR as the RFC asks).
    /// Closed streams, even ids (Squall never pushes) and values that are not a
    /// dictionary are ignored. Counted as a control frame, against floods.
    fn on_priority_update(&mut self, id: StreamId, value: &[u8]) -> Step {
        self.count(FloodKind::Control)?;
        let Some(priority) = PriorityParams::parse([value]) else {
            return Ok(());
        };
        match self.lookup(id) {
            Lookup::Active => self.reprioritize(id, priority),
            Lookup::Closed(_) => {}
            Lookup::Idle if id.is_multiple_of(2) => {}
            Lookup::Idle => {
                let pending = &mut self.pending_priorities;
                let limit = self.config.max_concurrent_streams as usize;
                if !pending.contains_key(&id) && pending.len() + self.streams.len() >= limit {
                    let reason = "PRIORITY_UPDATE for more streams than the stream limit";
                    return Err(self.fail(ErrorCode::ProtocolError, reason, None));
                }
                pending.insert(id, priority);
            }
        }
        Ok(())
    }

    /// §6.4.
    fn on_rst_stream(&mut self, id: StreamId, code: ErrorCode) -> Step {
        self.count(FloodKind::Control)?;
        match self.lookup(id) {
            Lookup::Idle => {
                let reason = "RST_STREAM on an idle stream";
                Err(self.fail(ErrorCode::ProtocolError, reason, None))
            }
            Lookup::Closed(_) => Ok(()),
            Lookup::Active => {
                self.stats.resets_received += 1;
                self.remove_stream(id, Closed::ResetByPeer, super::Notify::App(code));
                self.count(FloodKind::RapidReset)
            }
        }
    }

    /// §6.9, §6.9.1.
    fn on_window_update(&mut self, id: StreamId, increment: u32) -> Step {
        if increment < WINDOW_UPDATE_SMALL_BYTES {
            self.count(FloodKind::WindowUpdate)?;
        }
        let max = i64::from(WINDOW_BYTES_MAX);
        if id == 0 {
            let window = self.conn_send_window + i64::from(increment);
            if window > max {
                let reason = "connection window above 2^31-1";
                return Err(self.fail(ErrorCode::FlowControlError, reason, None));
            }
            self.conn_send_window = window;
            if window > 0 {
                self.unpark();
            }
            return Ok(());
        }
        match self.lookup(id) {
            Lookup::Idle => {
                let reason = "WINDOW_UPDATE on an idle stream";
                Err(self.fail(ErrorCode::ProtocolError, reason, None))
            }
            // Legal (it may have crossed our END_STREAM), but it changes nothing.
            Lookup::Closed(_) => self.count(FloodKind::Control),
            Lookup::Active => self.stream_window_update(id, increment),
        }
    }

    fn stream_window_update(&mut self, id: StreamId, increment: u32) -> Step {
        let Some(stream) = self.streams.get_mut(&id) else {
            return Ok(());
        };
        if !stream.send.open_window(increment) {
            return self.stream_error(id, ErrorCode::FlowControlError);
        }
        let useless = stream.send.state == SendState::Done;
        self.schedule(id);
        self.refresh_stall(id);
        if useless {
            self.count(FloodKind::Control)?;
        }
        Ok(())
    }

    /// Counts one frame of a flooding kind; over the limit, the connection ends.
    pub(super) fn count(&mut self, kind: FloodKind) -> Step {
        let c = &self.config;
        let limit = match kind {
            FloodKind::RapidReset => c.max_resets_per_window,
            FloodKind::Control | FloodKind::WindowUpdate => c.max_control_frames_per_window,
            FloodKind::EmptyFrames => c.max_empty_frames_per_window,
            FloodKind::Continuation | FloodKind::OutputQueue | FloodKind::Stall => u32::MAX,
        };
        if self.floods.hit(kind, self.now, limit) {
            return Err(self.flood(kind, flood_reason(kind)));
        }
        Ok(())
    }

    /// GOAWAY(ENHANCE_YOUR_CALM) for a flood.
    pub(super) fn flood(&mut self, kind: FloodKind, reason: &'static str) -> ConnError {
        self.fail(ErrorCode::EnhanceYourCalm, reason, Some(kind))
    }
}

fn flood_reason(kind: FloodKind) -> &'static str {
    match kind {
        FloodKind::RapidReset => "too many streams reset",
        FloodKind::Control => "too many control frames",
        FloodKind::EmptyFrames => "too many empty frames",
        FloodKind::WindowUpdate => "too many small WINDOW_UPDATE frames",
        FloodKind::Continuation => "header block too long",
        FloodKind::OutputQueue => "peer does not read what we answer",
        FloodKind::Stall => "connection send window stalled",
    }
}
