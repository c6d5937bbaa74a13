//! Stream lifecycle shared by the receive and send sides: where an id stands (RFC 9113
//! §5.1), closing, resetting, and stream errors (§5.4.2).

use super::Connection;
use super::recv::Step;
use super::stream::{AppState, Closed};
use super::types::FloodKind;
use crate::encode::encode_rst_stream;
use crate::error::ErrorCode;
use crate::frame::{FRAME_HEADER_BYTES, StreamId};

/// An RST_STREAM frame's length on the wire.
const RST_STREAM_FRAME_BYTES: usize = FRAME_HEADER_BYTES + 4;

/// Where a client stream id stands (§5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Above the highest id seen, or even (we never push): nothing happened there yet.
    Idle,
    /// Open or half-closed: in the stream map.
    Active,
    /// Closed, and how, as far as it is remembered.
    Closed(Closed),
}

/// Who learns that a stream left the map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notify {
    /// Nobody: it closed normally, and undelivered body data is still handed out.
    Nobody,
    /// The application, with this code, if it had the request; else the request is
    /// dropped from the queue before the application sees it.
    App(ErrorCode),
    /// Nobody, and its undelivered events are dropped: the application reset it.
    Silently,
}

impl Connection {
    pub(super) fn lookup(&self, id: StreamId) -> Lookup {
        if id.is_multiple_of(2) || id > self.highest_stream_id {
            Lookup::Idle
        } else if self.streams.contains_key(&id) {
            Lookup::Active
        } else {
            Lookup::Closed(self.closed.get(id))
        }
    }

    /// Removes the stream if both halves are done.
    pub(super) fn close_if_done(&mut self, id: StreamId) {
        if self.streams.get(&id).is_some_and(|s| s.is_closed()) {
            self.remove_stream(id, Closed::Normally, Notify::Nobody);
        }
    }

    /// Takes a stream out of the map, remembering how it closed. Its queued output goes,
    /// and the body the application will no longer release goes back to the connection
    /// window, so a closed stream never holds window.
    pub(super) fn remove_stream(&mut self, id: StreamId, how: Closed, notify: Notify) {
        let Some(stream) = self.streams.get(&id) else {
            return;
        };
        // What is left to settle, read where the stream lies: it is dropped there, not
        // moved out (a stream is some 200 bytes).
        let (queued, stalled) = (stream.send.queued_bytes, stream.stalled_since.is_some());
        let (priority, slot, app, unreleased) =
            (stream.priority, stream.slot, stream.app, stream.unreleased);
        self.streams.discard(&id);
        self.queued_total -= queued;
        if stalled {
            self.stalled_streams -= 1;
        }
        self.scheduler.remove(id, priority, slot);
        self.closed.insert(id, how);
        match notify {
            Notify::Nobody => {}
            Notify::App(code) => self.forget_events(id, app, code),
            Notify::Silently => self.forget_events(id, AppState::Queued, ErrorCode::NoError),
        }
        self.credit_connection(unreleased);
    }

    /// Resets an active stream with `code`; the application is told.
    pub(super) fn reset(&mut self, id: StreamId, code: ErrorCode) {
        self.send_rst(id, code);
        self.remove_stream(id, Closed::ResetByUs, Notify::App(code));
    }

    /// A stream error (§5.4.2): RST_STREAM, the stream closed if it was open, and one
    /// more against the reset budget (a peer that makes us reset streams costs us as much
    /// as one that resets them).
    pub(super) fn stream_error(&mut self, id: StreamId, code: ErrorCode) -> Step {
        self.stats.protocol_errors += 1;
        self.reset_any(id, code);
        self.count(FloodKind::RapidReset)
    }

    /// A malformed request (§8.1.1): a stream error of type PROTOCOL_ERROR.
    pub(super) fn malformed(&mut self, id: StreamId) -> Step {
        self.stats.malformed_requests += 1;
        self.reset_any(id, ErrorCode::ProtocolError);
        self.count(FloodKind::RapidReset)
    }

    /// RST_STREAM on `id` whatever its state; late frames on it are then ignored.
    fn reset_any(&mut self, id: StreamId, code: ErrorCode) {
        if self.streams.contains_key(&id) {
            self.reset(id, code);
            return;
        }
        self.send_rst(id, code);
        if id % 2 == 1 && id <= self.highest_stream_id {
            self.closed.insert(id, Closed::ResetByUs);
        }
    }

    pub(super) fn send_rst(&mut self, id: StreamId, code: ErrorCode) {
        encode_rst_stream(&mut self.out, id, code);
        self.stats.resets_sent += 1;
        self.reply_bytes += RST_STREAM_FRAME_BYTES;
    }
}
