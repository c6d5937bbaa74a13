//! The queue of events for the application and of commands for the driver.
//!
//! A request's events are queued as its frames are read; a stream that goes away before
//! the application polled its request takes all its events along (a rapid reset costs the
//! application nothing), one it had gets an [`Event::Reset`]. Body data of one `recv` call
//! is one event, so the queue grows with the calls since the last poll, not with the
//! frames: the driver polls events after each batch of input.

use bytes::Bytes;

use super::Connection;
use super::Request;
use super::stream::App;
use super::types::{Command, Event};
use crate::error::ErrorCode;

/// An event waiting for the application.
#[derive(Debug)]
pub(crate) enum Queued {
    Request(u64, Box<Request>),
    Data(u64, Bytes, bool),
    Trailers(u64, http::HeaderMap),
    Reset(u64, ErrorCode),
}

impl Queued {
    fn stream_id(&self) -> u64 {
        match self {
            Self::Request(id, _)
            | Self::Data(id, ..)
            | Self::Trailers(id, _)
            | Self::Reset(id, _) => *id,
        }
    }
}

impl Connection {
    /// The next event for the application, in the order the peer's frames arrived.
    pub fn poll_event(&mut self) -> Option<Event> {
        Some(match self.events.pop_front()? {
            Queued::Request(stream_id, request) => {
                if let Some(stream) = self.streams.get_mut(&stream_id) {
                    stream.app = App::Delivered;
                }
                Event::Request {
                    stream_id,
                    request: *request,
                }
            }
            Queued::Data(stream_id, data, end_stream) => Event::Data {
                stream_id,
                data,
                end_stream,
            },
            Queued::Trailers(stream_id, headers) => Event::Trailers { stream_id, headers },
            Queued::Reset(stream_id, code) => Event::Reset { stream_id, code },
        })
    }

    /// The next thing the driver must do to the QUIC connection.
    pub fn poll_command(&mut self) -> Option<Command> {
        self.commands.pop_front()
    }

    pub(super) fn push_request(&mut self, stream_id: u64, request: Request) {
        self.events
            .push_back(Queued::Request(stream_id, Box::new(request)));
    }

    pub(super) fn push_data(&mut self, stream_id: u64, data: Bytes, end_stream: bool) {
        self.events
            .push_back(Queued::Data(stream_id, data, end_stream));
    }

    pub(super) fn push_trailers(&mut self, stream_id: u64, headers: http::HeaderMap) {
        self.events.push_back(Queued::Trailers(stream_id, headers));
    }

    /// The application no longer has a say on the stream: it gets [`Event::Reset`] if it
    /// had the request (body data and trailers not yet polled go), else every queued event
    /// of the stream goes.
    pub(super) fn forget_events(&mut self, stream_id: u64, app: App, code: ErrorCode) {
        match app {
            App::Delivered => {
                self.events.retain(|q| {
                    !(matches!(q, Queued::Data(..) | Queued::Trailers(..))
                        && q.stream_id() == stream_id)
                });
                self.events.push_back(Queued::Reset(stream_id, code));
            }
            App::Queued => self.events.retain(|q| q.stream_id() != stream_id),
            App::None => {}
        }
    }

    pub(super) fn command(&mut self, command: Command) {
        self.commands.push_back(command);
    }
}
