//! One client stream's state (RFC 9113 §5.1, from the side that opened it): the response
//! coming in, the request body going out.

use crate::common::length::BodyLength;
use crate::common::send::{SendHalf, SendState};

/// Where the response is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecvState {
    /// No final head yet (1xx heads may have come).
    AwaitingHead,
    /// The final head came; DATA or trailers may follow.
    Body,
    /// END_STREAM arrived: half-closed (remote).
    Done,
}

/// Where a stream is in the DATA scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// Not filed: nothing to send, or blocked on its own window.
    Out,
    /// In the round robin.
    Ready,
    /// Waiting for connection window.
    Parked,
}

/// An open or half-closed stream we opened.
#[derive(Debug)]
pub(crate) struct Stream {
    pub recv: RecvState,
    /// What the peer may still send on this stream.
    pub recv_window: i64,
    /// Window the application released (or padding) not yet announced.
    pub recv_owed: u64,
    /// Body bytes handed to the event queue and not yet released.
    pub unreleased: u64,
    /// Response body bytes received, against content-length (none for 204 and 304,
    /// RFC 9113 §8.1.1).
    pub length: BodyLength,
    /// Interim heads received, against [`INTERIM_HEADS_MAX`].
    pub interim: u32,
    /// The request body going out.
    pub send: SendHalf,
    pub slot: Slot,
    /// Where the stream's HEADERS begin in the output, counted from the first byte ever
    /// queued: once the output handed out passes it, the peer may have seen the request.
    pub head_at: u64,
}

/// Interim (1xx) heads kept per stream; later ones are dropped. A 103 or two is normal; an
/// origin that sends thousands must not grow the event queue.
pub(crate) const INTERIM_HEADS_MAX: u32 = 8;

impl Stream {
    pub(crate) fn new(end_stream: bool, recv_window: i64, send_window: i64, head_at: u64) -> Self {
        Self {
            recv: RecvState::AwaitingHead,
            recv_window,
            recv_owed: 0,
            unreleased: 0,
            length: BodyLength::default(),
            interim: 0,
            send: SendHalf::new(
                if end_stream {
                    SendState::Done
                } else {
                    SendState::Open
                },
                send_window,
            ),
            slot: Slot::Out,
            head_at,
        }
    }

    /// Both halves are done (§5.1 closed).
    pub(crate) fn is_closed(&self) -> bool {
        self.recv == RecvState::Done && self.send.state == SendState::Done
    }
}
