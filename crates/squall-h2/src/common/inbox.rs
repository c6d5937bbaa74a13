//! A stream's inbox: body data received and not yet handed to the application.
//!
//! Body data does not sit in a connection's event queue frame by frame: a peer sending
//! one-byte DATA frames would make one event per byte of window. Each stream has an
//! [`Inbox`] instead, where small frames are copied together, and the queue holds one marker
//! per inbox. So the queue stays within a few entries per stream and the inboxes within the
//! flow-control windows.

use std::collections::{HashMap, VecDeque};

use bytes::{Bytes, BytesMut};

use crate::frame::StreamId;

/// Data frames shorter than this are copied into the inbox's tail rather than kept as
/// their own `Bytes`: it bounds the pieces per stream to about two per KiB of window.
const DATA_COPY_BYTES_MAX: usize = 1024;
/// The tail is handed out as a piece once it reaches this size.
const INBOX_TAIL_BYTES_MAX: usize = 16 * 1024;

/// The inboxes of a connection's streams, one for each stream with body (or its end) to
/// hand out.
#[derive(Debug, Default)]
pub(crate) struct Inboxes {
    by_stream: HashMap<StreamId, Inbox>,
}

impl Inboxes {
    /// Adds body data (possibly empty, when only `end_stream` is news) to a stream's inbox.
    /// True when the inbox held nothing before, so the stream's marker must be queued.
    #[inline]
    pub(crate) fn push(&mut self, id: StreamId, data: Bytes, end_stream: bool) -> bool {
        if data.is_empty() && !end_stream {
            return false;
        }
        self.by_stream.entry(id).or_default().push(data, end_stream)
    }

    /// The next piece of a stream's body: the data, whether it ends the stream, and whether
    /// more is left (the marker must stay queued). `None` for a stream with nothing.
    #[inline]
    pub(crate) fn pop(&mut self, id: StreamId) -> Option<(Bytes, bool, bool)> {
        let inbox = self.by_stream.get_mut(&id)?;
        let (data, end_stream) = inbox.pop();
        let more = !inbox.is_empty();
        if !more {
            self.by_stream.remove(&id);
        }
        Some((data, end_stream, more))
    }

    /// Bytes waiting for a stream.
    pub(crate) fn bytes(&self, id: StreamId) -> usize {
        self.by_stream.get(&id).map_or(0, Inbox::bytes)
    }

    /// Drops a stream's undelivered body.
    pub(crate) fn remove(&mut self, id: StreamId) {
        self.by_stream.remove(&id);
    }

    pub(crate) fn clear(&mut self) {
        self.by_stream.clear();
    }

    /// Every inbox, for the invariant checks.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Inbox> {
        self.by_stream.values()
    }
}

/// Body received on one stream and not yet handed out.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    chunks: VecDeque<Bytes>,
    tail: BytesMut,
    /// END_STREAM arrived after the data in here (and no trailers).
    end: bool,
}

impl Inbox {
    /// Adds body data (possibly empty, when only `end_stream` is news). True when the inbox
    /// held nothing before, so its marker must be queued.
    fn push(&mut self, data: Bytes, end_stream: bool) -> bool {
        let was_queued = !self.is_empty() || self.end;
        if data.len() < DATA_COPY_BYTES_MAX {
            self.tail.extend_from_slice(&data);
            if self.tail.len() >= INBOX_TAIL_BYTES_MAX {
                self.chunks.push_back(self.tail.split().freeze());
            }
        } else {
            if !self.tail.is_empty() {
                self.chunks.push_back(self.tail.split().freeze());
            }
            self.chunks.push_back(data);
        }
        self.end |= end_stream;
        !was_queued
    }

    /// The next piece, and whether it is the last one.
    fn pop(&mut self) -> (Bytes, bool) {
        let data = match self.chunks.pop_front() {
            Some(chunk) => chunk,
            None => self.tail.split().freeze(),
        };
        (data, self.end && self.is_empty())
    }

    /// No data left (the end may still be news: see [`Inbox::pop`]).
    fn is_empty(&self) -> bool {
        self.chunks.is_empty() && self.tail.is_empty()
    }

    /// Bytes waiting in here.
    pub(crate) fn bytes(&self) -> usize {
        self.chunks.iter().map(Bytes::len).sum::<usize>() + self.tail.len()
    }

    /// Pieces waiting in here, for the invariant checks.
    pub(crate) fn pieces(&self) -> usize {
        self.chunks.len() + usize::from(!self.tail.is_empty())
    }
}
