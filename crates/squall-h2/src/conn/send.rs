//! Responses from the application, and the output scheduler.
//!
//! Output leaves in this order: everything in `out` (control frames and header blocks, in
//! the order they were queued), then DATA, one frame per turn in the order of the streams'
//! RFC 9218 priorities (`schedule.rs`; round robin for streams that sent none), as the
//! peer's windows and SETTINGS_MAX_FRAME_SIZE allow (RFC 9113 §6.9). A stream's own
//! frames keep their order: its HEADERS went into `out` before any of its DATA could be
//! queued, and its trailers wait behind its DATA.

use bytes::Bytes;

use super::Connection;
use super::lifecycle::Notify;
use super::priority::PriorityParams;
use super::schedule::Slot;
use super::stream::{AppState, Closed, Stream};
use super::types::StreamClosed;
use crate::common::send::{
    DATA_COPY_BYTES_MAX, SendState, Turn, budget_left, emit_frame, emit_made, send_turn,
};
use crate::encode::{encode_data_header, encode_rst_stream};
use crate::error::ErrorCode;
use crate::frame::StreamId;
use crate::head::{response_fields, status_digits};

/// A field list with none: the fixed fields of a head that has none.
type NoFields = [(&'static [u8], &'static [u8]); 0];

/// No fixed fields, for [`Connection::encode_head`].
pub(super) const NO_FIXED: Option<(&[&[u8]], NoFields)> = None;

impl Connection {
    /// Sends the response head: `status` (100..=999) and regular fields with lowercase
    /// names. Connection-specific fields (§8.2.2) and pseudo-header names are dropped.
    /// 1xx heads may come first and never end the stream.
    pub fn send_headers<'a>(
        &mut self,
        stream_id: StreamId,
        status: u16,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        end_stream: bool,
    ) -> Result<(), StreamClosed> {
        let stream = self.sending_stream(stream_id, SendState::Idle)?;
        let informational = (100..200).contains(&status);
        let end_stream = end_stream && !informational;
        if !informational {
            stream.send.state = match end_stream {
                true => SendState::Done,
                false => SendState::Open,
            };
        }
        self.encode_head(stream_id, status, NO_FIXED, fields, end_stream);
        if end_stream {
            self.close_if_done(stream_id);
        }
        Ok(())
    }

    /// [`Connection::send_headers`] for a fixed response, whose fields come back unchanged
    /// on many streams: `fixed` is their static HPACK encoding (from
    /// [`squall_hpack::encode_static`], in pieces), which identifies them, and the fields
    /// themselves. They go through the connection's table, each indexed, `date` and
    /// `content-length` too: from the second such response on, one byte each, and their
    /// block is copied, not encoded, while the table stays as it was. `fields` follow them,
    /// encoded as [`Connection::send_headers`] does. A final (non-1xx) head only.
    pub fn send_headers_fixed<'a>(
        &mut self,
        stream_id: StreamId,
        status: u16,
        fixed: (&[&[u8]], impl IntoIterator<Item = (&'a [u8], &'a [u8])>),
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        end_stream: bool,
    ) -> Result<(), StreamClosed> {
        debug_assert!(status >= 200, "a final response");
        let stream = self.sending_stream(stream_id, SendState::Idle)?;
        stream.send.state = match end_stream {
            true => SendState::Done,
            false => SendState::Open,
        };
        self.encode_head(stream_id, status, Some(fixed), fields, end_stream);
        if end_stream {
            self.close_if_done(stream_id);
        }
        Ok(())
    }

    /// Queues response body bytes; they leave as DATA frames as windows allow, as slices
    /// of `data` (copied only below 1 KiB). A small last piece with nothing ahead of it, on
    /// its stream or any other, is framed at once behind what is already in the output:
    /// the whole of most small responses, with no queue and no turn in the scheduler.
    pub fn send_data(
        &mut self,
        stream_id: StreamId,
        data: Bytes,
        end_stream: bool,
    ) -> Result<(), StreamClosed> {
        let alone = self.scheduler.is_idle();
        let (mut conn_window, max_frame) =
            (self.conn_send_window, self.settings.peer_max_frame_size);
        let stream = self.sending_stream(stream_id, SendState::Open)?;
        if end_stream
            && alone
            && data.len() < DATA_COPY_BYTES_MAX
            && stream
                .send
                .take_whole(data.len(), &mut conn_window, max_frame)
        {
            self.conn_send_window = conn_window;
            encode_data_header(&mut self.out, stream_id, data.len() as u32, true);
            self.out.extend_from_slice(&data);
            self.close_if_done(stream_id);
            self.refresh_stalls();
            return Ok(());
        }
        self.queued_total += stream.send.queue_data(data, end_stream);
        self.schedule(stream_id);
        self.refresh_stall(stream_id);
        self.refresh_stalls();
        Ok(())
    }

    /// Sends trailers, which end the stream, after the DATA queued so far.
    pub fn send_trailers<'a>(
        &mut self,
        stream_id: StreamId,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Result<(), StreamClosed> {
        let stream = self.sending_stream(stream_id, SendState::Open)?;
        if let Some(fields) = stream.send.end_with_trailers(response_fields(fields)) {
            (self.settings).encode_fields(&mut self.out, stream_id, true, fields);
            self.close_if_done(stream_id);
            return Ok(());
        }
        self.schedule(stream_id);
        Ok(())
    }

    /// Resets a stream (RST_STREAM with `code`) at the application's request; its queued
    /// output and undelivered events go. Unknown or closed streams are left alone.
    pub fn reset_stream(&mut self, stream_id: StreamId, code: ErrorCode) {
        if self.error.is_some() || !self.streams.contains_key(&stream_id) {
            return;
        }
        // Not `send_rst`: this is no answer to the peer, so not its output to bound.
        encode_rst_stream(&mut self.out, stream_id, code);
        self.stats.resets_sent += 1;
        self.remove_stream(stream_id, Closed::ResetByUs, Notify::Silently);
    }

    /// Response data queued on a stream and not yet emitted.
    pub fn queued_data(&self, stream_id: StreamId) -> usize {
        self.streams
            .get(&stream_id)
            .map_or(0, |s| s.send.queued_bytes)
    }

    /// Response data queued on every stream and not yet emitted: what the connection holds
    /// for a client that does not read (or whose windows are closed).
    pub fn queued_data_total(&self) -> usize {
        self.queued_total
    }

    /// How many DATA bytes stream `stream_id` could send now: the lesser of its window and the
    /// connection's (0 for a stream not open to send).
    pub fn send_window(&self, stream_id: StreamId) -> usize {
        let stream = self.streams.get(&stream_id).map_or(0, |s| s.send.window);
        usize::try_from(stream.min(self.conn_send_window)).unwrap_or(0)
    }

    /// Emits pending output in order, up to about `budget` bytes (at least one piece if
    /// any is pending). Control frames, header blocks and small DATA frames come as one
    /// `Bytes`; larger DATA as its frame header there and a slice of the application's
    /// buffer after it.
    pub fn poll_output(&mut self, budget: usize, mut emit: impl FnMut(Bytes)) {
        let mut emitted = 0;
        self.reply_bytes = 0;
        self.emit_data(budget, &mut emitted, &mut emit);
        emit_made(&mut self.out, &mut emitted, &mut emit);
        self.refresh_stalls();
    }

    /// Bytes of frames encoded and not yet handed out by [`Connection::poll_output`]: HEADERS,
    /// CONTINUATION and control frames (DATA leaves from the streams' queues). Read before and
    /// after a `send_headers`, it is what the head took on the wire, frame headers included
    /// (the access log's bytes sent).
    pub fn encoded_bytes(&self) -> usize {
        self.out.len()
    }

    /// Whether [`Connection::poll_output`] would emit something now.
    pub fn has_output(&self) -> bool {
        if !self.out.is_empty() {
            return true;
        }
        // Parked streams need the connection window, which is closed while any are parked.
        let connection_open = self.conn_send_window > 0;
        self.scheduler.ready().any(|id| {
            self.streams
                .get(&id)
                .is_some_and(|s| s.send.sendable() && (connection_open || !s.send.needs_window()))
        })
    }

    /// One frame per turn, in the scheduler's order (`schedule.rs`), until the budget is
    /// spent (counting what waits in `out`) or every stream left waits for window.
    fn emit_data(&mut self, budget: usize, emitted: &mut usize, emit: &mut impl FnMut(Bytes)) {
        while budget_left(*emitted + self.out.len(), budget) {
            let Some(id) = self.scheduler.pop() else {
                break;
            };
            // Out of the scheduler while its frame is made: a stream that closes now is
            // removed without a scan.
            if let Some(stream) = self.streams.get_mut(&id) {
                stream.slot = Slot::Out;
            }
            let turn = self.send_frame(id);
            self.refresh_stall(id);
            match turn {
                Turn::Sent { payload, more } => {
                    emit_frame(&mut self.out, payload, emitted, emit);
                    if more {
                        self.schedule(id);
                    }
                }
                Turn::WaitConnection => self.park(id),
                Turn::Blocked => {}
            }
        }
    }

    /// Sets a stream aside until the connection window opens ([`Connection::unpark`]).
    fn park(&mut self, id: StreamId) {
        if let Some(stream) = self.streams.get_mut(&id) {
            stream.slot = Slot::Parked;
            self.scheduler.park(id);
        }
    }

    /// The connection window opened: parked streams go back to their levels, in the order
    /// they were parked.
    pub(super) fn unpark(&mut self) {
        for id in self.scheduler.unpark() {
            if let Some(stream) = self.streams.get_mut(&id) {
                stream.slot = Slot::Out;
            }
            self.schedule(id);
        }
    }

    /// A new priority for a stream (RFC 9218 §7.1); a stream waiting in a level moves to
    /// the back of its new one.
    pub(super) fn reprioritize(&mut self, id: StreamId, priority: PriorityParams) {
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        let old = std::mem::replace(&mut stream.priority, priority);
        if stream.slot == Slot::Ready && old != priority {
            self.scheduler.remove(id, old, Slot::Ready);
            self.scheduler.push(id, priority);
        }
    }

    /// One frame of a stream's send half: DATA, or the end (empty DATA, trailers).
    fn send_frame(&mut self, id: StreamId) -> Turn {
        let Some(stream) = self.streams.get_mut(&id) else {
            return Turn::Blocked;
        };
        // Made in `out`, behind the control frames and header blocks queued there: all leave
        // together.
        let (turn, done) = send_turn(
            &mut stream.send,
            id,
            &mut self.conn_send_window,
            &mut self.queued_total,
            &mut self.settings,
            &mut self.out,
        );
        if done {
            self.close_if_done(id);
        }
        turn
    }

    /// Files a stream in the scheduler at its priority if it can send and is not filed yet.
    pub(super) fn schedule(&mut self, id: StreamId) {
        if let Some(stream) = self.streams.get_mut(&id)
            && stream.slot == Slot::Out
            && stream.send.sendable()
        {
            stream.slot = Slot::Ready;
            self.scheduler.push(id, stream.priority);
        }
    }

    /// The stream, if the application may send on it in state `expected`.
    fn sending_stream(
        &mut self,
        id: StreamId,
        expected: SendState,
    ) -> Result<&mut Stream, StreamClosed> {
        if self.error.is_some() {
            return Err(StreamClosed);
        }
        match self.streams.get_mut(&id) {
            Some(s) if s.app == AppState::Delivered && s.send.state == expected => Ok(s),
            _ => Err(StreamClosed),
        }
    }

    /// Encodes a response head into `out`, split at the peer's max frame size: `:status`,
    /// a fixed response's fields (`Connection::send_headers_fixed`), then `fields`.
    pub(super) fn encode_head<'a, F>(
        &mut self,
        id: StreamId,
        status: u16,
        fixed: Option<(&[&[u8]], F)>,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        end_stream: bool,
    ) where
        F: IntoIterator<Item = (&'a [u8], &'a [u8])>,
    {
        let digits = status_digits(status);
        let kept = &mut self.fixed_block;
        (self.settings).encode_block(&mut self.out, id, end_stream, |hpack, block| {
            // Table size updates first, then `:status` (static: an index for the common
            // codes), the fixed fields, and the others.
            hpack.begin_block(block);
            squall_hpack::encode_static([(&b":status"[..], digits)], block);
            if let Some((key, fixed)) = fixed {
                kept.encode(hpack, key, fixed, block);
            }
            hpack.encode(response_fields(fields).map(|(n, v)| (n, v, false)), block);
        });
    }
}
