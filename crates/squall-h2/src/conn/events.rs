//! The queue of events for the application, and the per-stream inboxes of request body.
//!
//! Body data does not sit in the event queue frame by frame: a peer sending one-byte DATA
//! frames would make one event per byte of window. Each stream has an
//! [`Inbox`](crate::common::inbox::Inbox) instead, where small frames are copied together,
//! and the queue holds one marker per inbox.
//! So the queue stays within a few entries per stream and the inboxes within the
//! flow-control windows.

use bytes::Bytes;

use super::Connection;
use super::stream::AppState;
use super::types::Event;
use crate::error::ErrorCode;
use crate::frame::StreamId;
use crate::head::Request;

/// An event waiting for the application.
#[derive(Debug)]
pub(crate) enum Queued {
    /// The stream's request is the next in [`Connection`]'s `requests`: kept there, not
    /// boxed here, so that the queues grow once per connection rather than per request.
    Request(StreamId),
    /// The stream's inbox has data (or its end) to hand out.
    Data(StreamId),
    Trailers(StreamId, http::HeaderMap),
    Reset(StreamId, ErrorCode),
}

impl Queued {
    fn stream_id(&self) -> StreamId {
        match self {
            Self::Request(id) | Self::Data(id) | Self::Trailers(id, _) | Self::Reset(id, _) => *id,
        }
    }
}

impl Connection {
    /// The next event for the application, in the order the peer's frames arrived (per
    /// stream; body data of a stream may come ahead of other streams' later events).
    pub fn poll_event(&mut self) -> Option<Event> {
        loop {
            let event = match self.events.pop_front()? {
                Queued::Request(stream_id) => {
                    let request = self.requests.pop_front();
                    // A stream reset before its request was polled took its events and its
                    // request along, so both are there; skipping is only a safety net.
                    let (Some(stream), Some((id, request))) =
                        (self.streams.get_mut(&stream_id), request)
                    else {
                        continue;
                    };
                    debug_assert_eq!(id, stream_id);
                    stream.app = AppState::Delivered;
                    // Returned from here, not through `event`: a request is some 200 bytes,
                    // and the extra move showed in profiles.
                    return Some(Event::Request { stream_id, request });
                }
                Queued::Data(stream_id) => match self.pop_data(stream_id) {
                    Some(event) => event,
                    None => continue,
                },
                Queued::Trailers(stream_id, headers) => Event::Trailers { stream_id, headers },
                Queued::Reset(stream_id, code) => Event::Reset { stream_id, code },
            };
            return Some(event);
        }
    }

    /// One piece of a stream's inbox; the marker goes back to the front while more is left.
    fn pop_data(&mut self, stream_id: StreamId) -> Option<Event> {
        let (data, end_stream, more) = self.inboxes.pop(stream_id)?;
        if more {
            self.events.push_front(Queued::Data(stream_id));
        }
        Some(Event::Data {
            stream_id,
            data,
            end_stream,
        })
    }

    pub(super) fn push_request(&mut self, stream_id: StreamId, request: Request) {
        self.requests.push_back((stream_id, request));
        self.events.push_back(Queued::Request(stream_id));
    }

    /// Adds body data (possibly empty, when only `end_stream` is news) to a stream's inbox.
    pub(super) fn push_data(&mut self, stream_id: StreamId, data: Bytes, end_stream: bool) {
        if self.inboxes.push(stream_id, data, end_stream) {
            self.events.push_back(Queued::Data(stream_id));
        }
    }

    pub(super) fn push_trailers(&mut self, stream_id: StreamId, headers: http::HeaderMap) {
        self.events.push_back(Queued::Trailers(stream_id, headers));
    }

    /// A stream is gone: drops its undelivered body, and tells the application if it knew
    /// the stream, else removes every trace of it from the queue (a rapid reset costs the
    /// application nothing).
    pub(super) fn forget_events(&mut self, stream_id: StreamId, app: AppState, code: ErrorCode) {
        self.inboxes.remove(stream_id);
        match app {
            AppState::Delivered => self.events.push_back(Queued::Reset(stream_id, code)),
            AppState::Queued => {
                self.events.retain(|q| q.stream_id() != stream_id);
                self.requests.retain(|(id, _)| *id != stream_id);
            }
        }
    }
}
