//! The queue of events for the application, and the per-stream inboxes of response body.
//!
//! As on the server side (`conn/events.rs`), body data waits in one
//! [`Inbox`](crate::common::inbox::Inbox) per stream, where small frames are copied
//! together, and the queue holds one marker per inbox: an origin sending one-byte DATA frames
//! makes neither one event per byte nor one `Bytes` per byte. The queue stays within a few
//! entries per stream, the inboxes within the receive windows.

use bytes::Bytes;

use super::ClientConnection;
use super::recv::Lookup;
use super::types::ClientEvent;
use crate::error::ErrorCode;
use crate::frame::StreamId;

/// An event waiting for the application.
#[derive(Debug)]
pub(crate) enum Queued {
    /// Anything but body data.
    Event(ClientEvent),
    /// The stream's inbox has data (or its end) to hand out.
    Data(StreamId),
}

impl Queued {
    fn stream_id(&self) -> Option<StreamId> {
        match self {
            Self::Event(event) => event.stream_id(),
            Self::Data(id) => Some(*id),
        }
    }
}

impl ClientConnection {
    /// The next event, in the order the peer's frames arrived (per stream: a stream's body
    /// may come ahead of other streams' later events).
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        loop {
            match self.events.pop_front()? {
                Queued::Event(event) => return Some(event),
                Queued::Data(id) => {
                    if let Some(event) = self.pop_data(id) {
                        return Some(event);
                    }
                }
            }
        }
    }

    /// One piece of a stream's inbox; the marker goes back to the front while more is left.
    fn pop_data(&mut self, stream_id: StreamId) -> Option<ClientEvent> {
        let (data, end_stream, more) = self.inboxes.pop(stream_id)?;
        if more {
            self.events.push_front(Queued::Data(stream_id));
        }
        Some(ClientEvent::Data {
            stream_id,
            data,
            end_stream,
        })
    }

    pub(super) fn push_event(&mut self, event: ClientEvent) {
        self.events.push_back(Queued::Event(event));
    }

    /// A GOAWAY event; one right behind another replaces it, so a peer repeating GOAWAY
    /// cannot grow the queue.
    pub(super) fn push_goaway(&mut self, last_stream_id: StreamId, code: ErrorCode) {
        if let Some(Queued::Event(ClientEvent::GoAway { .. })) = self.events.back() {
            self.events.pop_back();
        }
        self.push_event(ClientEvent::GoAway {
            last_stream_id,
            code,
        });
    }

    /// Adds body data (possibly empty, when only `end_stream` is news) to a stream's inbox.
    pub(super) fn push_data(&mut self, stream_id: StreamId, data: Bytes, end_stream: bool) {
        if self.inboxes.push(stream_id, data, end_stream) {
            self.events.push_back(Queued::Data(stream_id));
        }
    }

    /// A stream that closed normally, reset by the application before it took the last
    /// events: they go, and the body among them, counted with the closed streams' unreleased
    /// bytes, goes back to the connection window (the application, told no event follows
    /// a reset, will never release it).
    pub(super) fn forget_closed(&mut self, stream_id: StreamId) {
        if !matches!(self.lookup(stream_id), Lookup::Closed(_)) {
            return;
        }
        let undelivered = self.inboxes.bytes(stream_id) as u64;
        self.forget_events(stream_id);
        let n = undelivered.min(self.orphan_unreleased);
        self.orphan_unreleased -= n;
        self.credit_connection(n);
    }

    /// Drops every undelivered event and body byte of a stream (it was reset).
    pub(super) fn forget_events(&mut self, stream_id: StreamId) {
        self.inboxes.remove(stream_id);
        self.events.retain(|q| q.stream_id() != Some(stream_id));
    }
}
