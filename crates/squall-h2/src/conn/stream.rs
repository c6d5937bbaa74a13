//! One stream's state (RFC 9113 §5.1), and the bounded memory of streams that are closed.
//!
//! A stream in [`super::Connection`]'s map is open or half-closed; idle streams have no
//! entry (every id above the highest seen is idle, §5.1.1), and closed ones leave the map
//! for [`ClosedStreams`], which forgets the oldest.

use std::time::Instant;

use super::priority::PriorityParams;
use super::schedule::Slot;
use crate::common::length::BodyLength;
use crate::common::send::{SendHalf, SendState};
use crate::frame::StreamId;

/// Where the application is with a stream's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AppState {
    /// The request event is queued, not yet polled: the application knows nothing.
    Queued,
    /// The application has the request and must be told if the stream goes away.
    Delivered,
}

/// An open or half-closed stream.
#[derive(Debug)]
pub(crate) struct Stream {
    /// False once the peer's END_STREAM arrived: half-closed (remote).
    pub recv_open: bool,
    /// What the peer may still send on this stream.
    pub recv_window: i64,
    /// Bytes the application released (or padding) not yet given back in a WINDOW_UPDATE.
    pub recv_owed: u64,
    /// Body bytes handed to the event queue and not yet released by the application.
    pub unreleased: u64,
    /// Body bytes received, against content-length and the body limit.
    pub length: BodyLength,
    /// An extended CONNECT's stream (RFC 8441): its DATA is a tunnel's, not a body, so the
    /// body limit does not apply (flow control still does).
    pub tunnel: bool,
    /// The application bounds this stream's body itself (`Connection::lift_body_limit`).
    pub body_limit_lifted: bool,
    pub app: AppState,
    /// The response going out.
    pub send: SendHalf,
    /// Where the id is in the connection's DATA scheduler.
    pub slot: Slot,
    /// The RFC 9218 priority its response is sent with.
    pub priority: PriorityParams,
    /// Since when data has been queued with no stream window.
    pub stalled_since: Option<Instant>,
}

impl Stream {
    pub(crate) fn new(recv_open: bool, recv_window: i64, send_window: i64) -> Self {
        Self {
            recv_open,
            recv_window,
            recv_owed: 0,
            unreleased: 0,
            length: BodyLength::default(),
            tunnel: false,
            body_limit_lifted: false,
            app: AppState::Queued,
            send: SendHalf::new(SendState::Idle, send_window),
            slot: Slot::Out,
            priority: PriorityParams::UNSIGNALLED,
            stalled_since: None,
        }
    }

    /// Queued data that cannot move for lack of stream window.
    pub(crate) fn is_stalled(&self) -> bool {
        self.send.queued_bytes > 0 && self.send.window <= 0
    }

    /// Both halves are done: the stream is closed (§5.1).
    pub(crate) fn is_closed(&self) -> bool {
        !self.recv_open && self.send.state == SendState::Done
    }
}

/// How a stream was closed, which decides what a late frame on it means (§5.1 "closed").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Closed {
    /// END_STREAM both ways.
    Normally,
    /// We sent RST_STREAM (or answered and stopped reading): frames the peer sent before
    /// seeing it must be ignored.
    ResetByUs,
    /// The peer sent RST_STREAM.
    ResetByPeer,
    /// Below the highest stream id, but not remembered: never opened, or long closed.
    Forgotten,
}

/// Recently closed streams, in a direct-mapped table indexed by the stream id: client ids are
/// odd and opened in increasing order, so a closed stream is remembered until the stream
/// `2 × CLOSED_STREAMS_REMEMBERED_MAX` ids later closes in its slot, that is for at least
/// that many newer streams. A frame on a forgotten stream is judged as [`Closed::Forgotten`].
/// O(1), no hashing and no allocation after the first close: this runs once per request.
#[derive(Debug)]
pub(crate) struct ClosedStreams {
    slots: Box<[Option<(StreamId, Closed)>; CLOSED_STREAMS_REMEMBERED_MAX]>,
}

impl Default for ClosedStreams {
    fn default() -> Self {
        ClosedStreams {
            slots: Box::new([None; CLOSED_STREAMS_REMEMBERED_MAX]),
        }
    }
}

/// Closed streams remembered: four generations of the default 128 concurrent streams.
pub(crate) const CLOSED_STREAMS_REMEMBERED_MAX: usize = 512;

impl ClosedStreams {
    fn slot(id: StreamId) -> usize {
        (id as usize >> 1) % CLOSED_STREAMS_REMEMBERED_MAX
    }

    pub(crate) fn insert(&mut self, id: StreamId, how: Closed) {
        let slot = &mut self.slots[Self::slot(id)];
        // An older stream in the slot is forgotten; a newer one (a late insert for an old id)
        // is kept.
        if slot.is_none_or(|(held, _)| held <= id) {
            *slot = Some((id, how));
        }
    }

    pub(crate) fn get(&self, id: StreamId) -> Closed {
        match self.slots[Self::slot(id)] {
            Some((held, how)) if held == id => how,
            _ => Closed::Forgotten,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.iter().flatten().count()
    }
}
