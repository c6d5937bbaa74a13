//! Response bodies: DATA frames (RFC 9113 §6.1), receive flow control (§6.9), and giving
//! window back as the application consumes (`release_capacity`).

use bytes::Bytes;

use super::ClientConnection;
use super::recv::{Lookup, Step};
use super::stream::RecvState;
use crate::common::window::{credit, threshold};
use crate::conn::stream::Closed;
use crate::error::ErrorCode;
use crate::frame::StreamId;

impl ClientConnection {
    /// Gives `n` bytes of received DATA back to the peer's windows (stream and
    /// connection): a WINDOW_UPDATE once at least half a window is owed. Received DATA
    /// keeps its window until then (that is the backpressure on a slow client). No-op for
    /// unknown streams (but the connection window is still returned, for the body of a
    /// stream that completed; a reset stream's went back when it was reset).
    pub fn release_capacity(&mut self, stream_id: StreamId, n: usize) {
        let n = n as u64;
        let Some(stream) = self.streams.get_mut(&stream_id) else {
            if !matches!(
                self.lookup(stream_id),
                Lookup::Closed(Closed::Normally | Closed::Forgotten)
            ) {
                return;
            }
            let n = n.min(self.orphan_unreleased);
            self.orphan_unreleased -= n;
            self.credit_connection(n);
            return;
        };
        let n = n.min(stream.unreleased);
        stream.unreleased -= n;
        self.credit_stream(stream_id, n);
        self.credit_connection(n);
    }

    /// §6.1, §6.9. Flow control counts the whole payload, padding included, on every DATA
    /// frame, whatever the stream's state.
    pub(super) fn on_data(&mut self, id: StreamId, data: Bytes, end: bool, flow_len: u32) -> Step {
        let flow = u64::from(flow_len);
        if !self.conn_recv.take(flow_len) {
            let reason = "DATA beyond the connection window";
            return Err(self.conn_error(ErrorCode::FlowControlError, reason));
        }
        match self.lookup(id) {
            Lookup::Idle => {
                let reason = "DATA on a stream we did not open";
                Err(self.conn_error(ErrorCode::ProtocolError, reason))
            }
            // §5.1: sent before the peer saw our RST_STREAM; dropped, window given back.
            Lookup::Closed(Closed::ResetByUs | Closed::Forgotten) => {
                self.credit_connection(flow);
                Ok(())
            }
            Lookup::Closed(_) => {
                self.credit_connection(flow);
                self.stream_error(id, ErrorCode::StreamClosed);
                Ok(())
            }
            Lookup::Active => {
                self.on_stream_data(id, data, end, flow_len);
                Ok(())
            }
        }
    }

    fn on_stream_data(&mut self, id: StreamId, data: Bytes, end: bool, flow_len: u32) {
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        let flow = u64::from(flow_len);
        let len = data.len() as u64;
        let code = match stream.recv {
            // §8.1.1: DATA before the final head is malformed.
            RecvState::AwaitingHead => Some(ErrorCode::ProtocolError),
            // §5.1 half-closed (remote).
            RecvState::Done => Some(ErrorCode::StreamClosed),
            // §6.9.1: the stream window exceeded.
            RecvState::Body if i64::from(flow_len) > stream.recv_window => {
                Some(ErrorCode::FlowControlError)
            }
            RecvState::Body => None,
        };
        if let Some(code) = code {
            self.credit_connection(flow);
            return self.stream_error(id, code);
        }
        stream.recv_window -= i64::from(flow_len);
        let length_wrong = stream.length.add(len, end);
        // Padding is nobody's to release: it goes back at once.
        let padding = flow - len;
        self.credit_stream(id, padding);
        self.credit_connection(padding);
        if length_wrong {
            // Not held by anyone: the stream's window is forgotten with it.
            if let Some(stream) = self.streams.get_mut(&id) {
                stream.recv_window += len as i64;
            }
            self.credit_connection(len);
            return self.stream_error(id, ErrorCode::ProtocolError);
        }
        if let Some(stream) = self.streams.get_mut(&id) {
            stream.unreleased += len;
            if end {
                stream.recv = RecvState::Done;
            }
        }
        self.push_data(id, data, end);
        if end {
            self.close_if_done(id);
        }
    }

    /// Window the peer may use again on a stream, announced once half a window is owed.
    /// Nothing is announced once the peer has ended the stream: it will send no more.
    fn credit_stream(&mut self, id: StreamId, n: u64) {
        let threshold = threshold(self.config.stream_window);
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        let (window, owed) = (&mut stream.recv_window, &mut stream.recv_owed);
        let announce = stream.recv == RecvState::Body;
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
