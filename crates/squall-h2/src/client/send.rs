//! Requests, request bodies and the output.
//!
//! Output leaves in this order: everything in `out` (control frames and header blocks, in
//! the order they were queued), then DATA, one frame per turn, round robin across streams,
//! as the peer's windows and SETTINGS_MAX_FRAME_SIZE allow (RFC 9113 §6.9). A stream's
//! frames keep their order: its HEADERS went into `out` before any DATA could be queued,
//! and its trailers wait behind its DATA.

use bytes::{Bytes, BytesMut};

use super::stream::{Slot, Stream};
use super::types::OpenError;
use super::{ClientConnection, STREAM_ID_MAX};
use crate::common::send::{SendState, Turn, budget_left, emit_frame, emit_made, send_turn};
use crate::conn::StreamClosed;
use crate::conn::stream::Closed;
use crate::encode::encode_rst_stream;
use crate::error::ErrorCode;
use crate::frame::StreamId;
use crate::head::is_connection_specific;

impl ClientConnection {
    /// Opens a stream: HEADERS (+CONTINUATION as the peer's max frame size needs) with
    /// `fields` HPACK-encoded in order: pseudo-fields first (`:method`, `:scheme`,
    /// `:authority`, `:path`, and `:protocol` for an extended CONNECT), then regular fields
    /// with lowercase names (the caller never passes connection-specific ones). END_STREAM
    /// when `end_stream`.
    pub fn send_request<'a>(
        &mut self,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        end_stream: bool,
    ) -> Result<StreamId, OpenError> {
        if self.going_away() || self.next_stream_id > STREAM_ID_MAX {
            return Err(OpenError::GoingAway);
        }
        if self.available_streams() == 0 {
            return Err(OpenError::NoCapacity);
        }
        let id = self.next_stream_id;
        self.next_stream_id += 2;
        let head_at = self.out_emitted + self.out.len() as u64;
        (self.settings).encode_fields(&mut self.out, id, end_stream, checked(fields));
        let recv_window = self.settings.local_initial_window();
        let send_window = i64::from(self.settings.peer_initial_window);
        let stream = Stream::new(end_stream, recv_window, send_window, head_at);
        self.streams.insert(id, Box::new(stream));
        Ok(id)
    }

    /// Queues request body on an open stream; it leaves within the peer's windows, as
    /// slices of `data` (copied only below 1 KiB).
    pub fn send_data(
        &mut self,
        stream_id: StreamId,
        data: Bytes,
        end_stream: bool,
    ) -> Result<(), StreamClosed> {
        let stream = self.sending_stream(stream_id)?;
        self.queued_total += stream.send.queue_data(data, end_stream);
        self.schedule(stream_id);
        Ok(())
    }

    /// Request trailers (HEADERS with END_STREAM), after the queued data. Lowercase names.
    pub fn send_trailers<'a>(
        &mut self,
        stream_id: StreamId,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Result<(), StreamClosed> {
        let stream = self.sending_stream(stream_id)?;
        if let Some(fields) = stream.send.end_with_trailers(checked(fields)) {
            (self.settings).encode_fields(&mut self.out, stream_id, true, fields);
            self.close_if_done(stream_id);
            return Ok(());
        }
        self.schedule(stream_id);
        Ok(())
    }

    /// Resets a stream we no longer want (the client went away): RST_STREAM(code) unless it
    /// is already closed; no event follows for it; its queued data is dropped and its
    /// window given back. A stream that closed while its last events still wait sends
    /// nothing, but those events go too, and the window of the body among them comes back.
    pub fn reset_stream(&mut self, stream_id: StreamId, code: ErrorCode) {
        // After a connection error every open stream is gone too, but the events of those
        // that had closed before it may still wait.
        if !self.streams.contains_key(&stream_id) {
            self.forget_closed(stream_id);
            return;
        }
        // Not `send_rst`: no answer to the peer, so not its output to bound.
        encode_rst_stream(&mut self.out, stream_id, code);
        self.remove_stream(stream_id, Closed::ResetByUs, None);
    }

    /// Request body bytes queued for `stream_id` and not yet handed to `poll_output`.
    pub fn queued_data(&self, stream_id: StreamId) -> usize {
        self.streams
            .get(&stream_id)
            .map_or(0, |s| s.send.queued_bytes)
    }

    /// Emits frames to send: control frames and header blocks first, then DATA within the
    /// peer's windows and max frame size, round robin across streams, up to about
    /// `budget` bytes (at least one piece if any is pending).
    pub fn poll_output(&mut self, budget: usize, mut emit: impl FnMut(Bytes)) {
        let mut emitted = 0;
        if !self.out.is_empty() {
            let control = self.out.split().freeze();
            emitted += control.len();
            self.out_emitted += control.len() as u64;
            emit(control);
        }
        self.reply_bytes = 0;
        // DATA frames are made apart from `out` (whose bytes `out_emitted` counts), all in
        // one buffer: small ones leave together.
        let mut frames = BytesMut::new();
        while budget_left(emitted + frames.len(), budget) {
            let Some(id) = self.ready.pop_front() else {
                break;
            };
            if let Some(stream) = self.streams.get_mut(&id) {
                stream.slot = Slot::Out;
            }
            match self.send_frame(id, &mut frames) {
                Turn::Sent { payload, more } => {
                    emit_frame(&mut frames, payload, &mut emitted, &mut emit);
                    if more {
                        self.schedule(id);
                    }
                }
                Turn::WaitConnection => {
                    if let Some(stream) = self.streams.get_mut(&id) {
                        stream.slot = Slot::Parked;
                        self.parked.push_back(id);
                    }
                }
                Turn::Blocked => {}
            }
        }
        emit_made(&mut frames, &mut emitted, &mut emit);
    }

    /// Whether `poll_output` would emit something now.
    pub fn has_output(&self) -> bool {
        if !self.out.is_empty() {
            return true;
        }
        let connection_open = self.conn_send_window > 0;
        self.ready.iter().any(|id| {
            self.streams
                .get(id)
                .is_some_and(|s| s.send.sendable() && (connection_open || !s.send.needs_window()))
        })
    }

    /// Files a stream in the round robin if it can send and is not filed yet.
    pub(super) fn schedule(&mut self, id: StreamId) {
        if let Some(stream) = self.streams.get_mut(&id)
            && stream.slot == Slot::Out
            && stream.send.sendable()
        {
            stream.slot = Slot::Ready;
            self.ready.push_back(id);
        }
    }

    /// The connection window opened: parked streams go back in the order they were parked.
    pub(super) fn unpark(&mut self) {
        while let Some(id) = self.parked.pop_front() {
            if let Some(stream) = self.streams.get_mut(&id) {
                stream.slot = Slot::Out;
            }
            self.schedule(id);
        }
    }

    /// One frame of a stream's send half: DATA, or the end (empty DATA, trailers).
    fn send_frame(&mut self, id: StreamId, frames: &mut BytesMut) -> Turn {
        let Some(stream) = self.streams.get_mut(&id) else {
            return Turn::Blocked;
        };
        let (turn, done) = send_turn(
            &mut stream.send,
            id,
            &mut self.conn_send_window,
            &mut self.queued_total,
            &mut self.settings,
            frames,
        );
        if done {
            self.close_if_done(id);
        }
        turn
    }

    /// The stream, if the application may still send on it.
    fn sending_stream(&mut self, id: StreamId) -> Result<&mut Stream, StreamClosed> {
        if self.error.is_some() {
            return Err(StreamClosed);
        }
        match self.streams.get_mut(&id) {
            Some(s) if s.send.state == SendState::Open => Ok(s),
            _ => Err(StreamClosed),
        }
    }
}

/// The caller's fields, checked in debug builds: pseudo-fields first, then lowercase
/// regular names that HTTP/2 may carry (RFC 9113 §8.2.1, §8.2.2, §8.3).
fn checked<'a>(
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
    let mut regular_seen = false;
    fields.into_iter().inspect(move |(name, _)| {
        let pseudo = name.starts_with(b":");
        debug_assert!(
            !(pseudo && regular_seen),
            "pseudo-field after a regular one"
        );
        regular_seen |= !pseudo;
        debug_assert!(
            pseudo || !name.iter().any(u8::is_ascii_uppercase),
            "uppercase field name"
        );
        debug_assert!(!is_connection_specific(name), "connection-specific field");
    })
}
