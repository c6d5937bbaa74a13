//! Request bodies: DATA frames (RFC 9113 §6.1), receive flow control (§6.9), and giving
//! window back as the application consumes (`release_capacity`).

use bytes::Bytes;

use super::recv::Step;
use super::stream::Closed;
use super::types::FloodKind;
use super::{Connection, Lookup};
use crate::common::window::{credit, threshold};
use crate::error::ErrorCode;
use crate::frame::StreamId;

impl Connection {
    /// The application consumed `n` bytes of a stream's request body: the window they
    /// took is given back, in WINDOW_UPDATEs batched to half a window (as h2 and nginx
    /// do) so a stream of small reads does not become a stream of small frames. More than
    /// was delivered and not yet released is ignored; so is an unknown stream (its
    /// window went back when it closed).
    pub fn release_capacity(&mut self, stream_id: StreamId, n: usize) {
        let Some(stream) = self.streams.get_mut(&stream_id) else {
            return;
        };
        let n = (n as u64).min(stream.unreleased);
        stream.unreleased -= n;
        self.credit_stream(stream_id, n);
        self.credit_connection(n);
    }

    /// Takes `max_body_bytes` off stream `stream_id`'s DATA: the application bounds its body
    /// itself from here (a route's own limit, or an answer the connection cannot give, such
    /// as a gRPC status). Flow control still applies. A request whose content-length was over
    /// the limit was answered before the application saw it.
    pub fn lift_body_limit(&mut self, stream_id: StreamId) {
        if let Some(stream) = self.streams.get_mut(&stream_id) {
            stream.body_limit_lifted = true;
        }
    }

    /// §6.1, §6.9. Flow control counts the whole payload, padding included, on every DATA
    /// frame, whatever the stream's state.
    pub(super) fn on_data(&mut self, id: StreamId, data: Bytes, end: bool, flow_len: u32) -> Step {
        if data.is_empty() && !end {
            self.count(FloodKind::EmptyFrames)?;
        }
        let flow = u64::from(flow_len);
        if !self.conn_recv.take(flow_len) {
            let reason = "DATA beyond the connection window";
            return Err(self.fail(ErrorCode::FlowControlError, reason, None));
        }
        match self.lookup(id) {
            Lookup::Idle => {
                let reason = "DATA on an idle stream";
                Err(self.fail(ErrorCode::ProtocolError, reason, None))
            }
            // §5.1: sent before the peer saw our RST_STREAM; dropped, window given back.
            Lookup::Closed(Closed::ResetByUs) => {
                self.credit_connection(flow);
                Ok(())
            }
            Lookup::Closed(_) => {
                self.credit_connection(flow);
                self.stream_error(id, ErrorCode::StreamClosed)
            }
            Lookup::Active => self.on_stream_data(id, data, end, flow_len),
        }
    }

    fn on_stream_data(&mut self, id: StreamId, data: Bytes, end: bool, flow_len: u32) -> Step {
        let Some(stream) = self.streams.get_mut(&id) else {
            return Ok(());
        };
        let flow = u64::from(flow_len);
        let len = data.len() as u64;
        if !stream.recv_open || i64::from(flow_len) > stream.recv_window {
            // §5.1 half-closed (remote); §6.9.1 a stream window exceeded.
            let code = match stream.recv_open {
                true => ErrorCode::FlowControlError,
                false => ErrorCode::StreamClosed,
            };
            self.credit_connection(flow);
            return self.stream_error(id, code);
        }
        stream.recv_window -= i64::from(flow_len);
        let length_wrong = stream.length.add(len, end);
        let body = stream.length.received;
        let unbounded = stream.tunnel || stream.body_limit_lifted;
        // Padding is nobody's to release: it goes back at once.
        let padding = flow - len;
        self.credit_stream(id, padding);
        self.credit_connection(padding);
        if length_wrong {
            self.credit_connection(len);
            return self.malformed(id);
        }
        if body > self.config.max_body_bytes && !unbounded {
            self.credit_connection(len);
            return self.reject_started(id, 413);
        }
        if let Some(stream) = self.streams.get_mut(&id) {
            stream.unreleased += len;
            stream.recv_open &= !end;
        }
        self.push_data(id, data, end);
        if end {
            self.close_if_done(id);
        }
        Ok(())
    }

    /// Window the peer may use again on a stream, announced once half a window is owed.
    /// Nothing is announced once the peer has ended the stream: it will send no more.
    fn credit_stream(&mut self, id: StreamId, n: u64) {
        let threshold = threshold(self.config.initial_window_size);
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        let (window, owed) = (&mut stream.recv_window, &mut stream.recv_owed);
        let announce = stream.recv_open;
        self.reply_bytes += credit(&mut self.out, id, window, owed, n, threshold, announce);
    }

    /// Window the peer may use again on the connection, announced once half is owed.
    pub(super) fn credit_connection(&mut self, n: u64) {
        if n == 0 || self.error.is_some() {
            return;
        }
        self.reply_bytes += self.conn_recv.credit(&mut self.out, n);
    }
}
