//! One request stream's state, the per-stream output queue, and the bounded memory of
//! request streams closed early.
//!
//! A request stream is one exchange (RFC 9114 §4.1): the request arrives on the receiving
//! part, the response leaves on the sending part, and QUIC closes each part on its own. The
//! connection keeps a stream while either part has work left; a peer that aborts either
//! part (RESET_STREAM, STOP_SENDING) ends the whole exchange.

use std::collections::VecDeque;

use bytes::{Buf, Bytes};

use super::types::{OutStream, StreamOut};
use crate::decode::{FrameDecoder, StreamKind};

/// Where the receiving part of a request stream is (RFC 9114 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recv {
    /// Waiting for the request's HEADERS frame (or its QPACK section is blocked).
    Head,
    /// The head was taken; DATA and trailers may follow.
    Body,
    /// Trailers were taken; only the end of the stream (and unknown frames) may follow.
    Trailers,
    /// The stream ended (FIN) and the request is whole.
    Done,
    /// We stopped reading (STOP_SENDING queued): what arrives is dropped.
    Stopped,
}

impl Recv {
    /// Nothing more is read from the stream.
    pub(crate) fn is_over(self) -> bool {
        matches!(self, Recv::Done | Recv::Stopped)
    }
}

/// Where the sending part is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Send {
    /// No final response head yet (1xx heads may have gone).
    Idle,
    /// The final head is queued; body and trailers may follow.
    Open,
    /// The end is queued; the queue's `fin` is set until it is written.
    Ended,
    /// The driver took the end: the sending part is finished.
    Finished,
}

/// Where the application is with a stream's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum App {
    /// The application does not know the stream: no request yet, or the connection answered
    /// or refused it itself, or the application was told it is gone.
    None,
    /// The request event is queued, not yet polled.
    Queued,
    /// The application has the request and must be told if the stream goes away.
    Delivered,
}

/// A field section blocked on the QPACK encoder stream (RFC 9204 §2.1.2), and what the
/// stream delivered after it, kept until the section can be decoded.
#[derive(Debug)]
pub(crate) struct Blocked {
    pub section: Bytes,
    /// The section is trailers (else the request head).
    pub trailers: bool,
    /// Input after the section, in order.
    pub rest: VecDeque<Bytes>,
    pub rest_bytes: usize,
    /// The stream ended after `rest`.
    pub fin: bool,
}

/// A body's bytes against its content-length and the body limit (RFC 9114 §4.1.2).
#[derive(Debug, Default)]
pub(crate) struct BodyLength {
    pub received: u64,
    pub expected: Option<u64>,
}

impl BodyLength {
    /// Counts `len` more bytes; true when that is more than the content-length.
    pub(crate) fn add(&mut self, len: u64) -> bool {
        self.received += len;
        self.expected.is_some_and(|n| self.received > n)
    }

    /// Whether a body that ends now is not the content-length: malformed.
    pub(crate) fn ends_wrong(&self) -> bool {
        self.expected.is_some_and(|n| n != self.received)
    }
}

/// A request stream the connection still has work on.
#[derive(Debug)]
pub(crate) struct Stream {
    pub frames: FrameDecoder,
    pub recv: Recv,
    pub blocked: Option<Box<Blocked>>,
    pub length: BodyLength,
    /// An extended CONNECT's stream (RFC 9220): its DATA is a tunnel's, not a body, so the
    /// body limit does not apply.
    pub tunnel: bool,
    pub app: App,
    pub send: Send,
    pub out: SendQueue,
}

impl Stream {
    pub(crate) fn new(headers_frame_bytes_max: u64) -> Self {
        Self {
            frames: FrameDecoder::new(StreamKind::Request, headers_frame_bytes_max),
            recv: Recv::Head,
            blocked: None,
            length: BodyLength::default(),
            tunnel: false,
            app: App::None,
            send: Send::Idle,
            out: SendQueue::default(),
        }
    }

    /// The state of a new stream, keeping the room of this one's output queue.
    pub(crate) fn renew(&mut self, headers_frame_bytes_max: u64) {
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        *self = Self {
            out,
            ..Self::new(headers_frame_bytes_max)
        };
    }

    /// Both parts are over: the stream can go.
    pub(crate) fn is_done(&self) -> bool {
        self.recv.is_over() && self.send == Send::Finished
    }
}

/// What one call to [`SendQueue::write`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Wrote {
    pub bytes: usize,
    /// The driver took the end of the stream.
    pub fin: bool,
}

/// Bytes waiting to be written to one QUIC stream, in order, and whether the stream ends
/// after them. Bodies sit here as the application's own `Bytes`.
#[derive(Debug, Default)]
pub(crate) struct SendQueue {
    chunks: VecDeque<Bytes>,
    bytes: usize,
    fin: bool,
}

impl SendQueue {
    pub(crate) fn push(&mut self, chunk: Bytes) {
        debug_assert!(!self.fin, "nothing after the end");
        if !chunk.is_empty() {
            self.bytes += chunk.len();
            self.chunks.push_back(chunk);
        }
    }

    /// The stream ends after what is queued.
    pub(crate) fn finish(&mut self) {
        self.fin = true;
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(crate) fn fin(&self) -> bool {
        self.fin
    }

    /// Nothing to write: no bytes and no end.
    pub(crate) fn is_empty(&self) -> bool {
        self.chunks.is_empty() && !self.fin
    }

    /// Drops what is queued (the stream was reset); returns the bytes dropped.
    pub(crate) fn clear(&mut self) -> usize {
        let bytes = self.bytes;
        self.chunks.clear();
        self.bytes = 0;
        self.fin = false;
        bytes
    }

    /// Offers the chunks to `write` in order until one is not taken whole (the stream is
    /// blocked) or the queue is empty. The chunk with the end carries `fin`.
    pub(crate) fn write(
        &mut self,
        stream: OutStream,
        write: &mut impl FnMut(StreamOut<'_>) -> usize,
    ) -> Wrote {
        let mut wrote = Wrote {
            bytes: 0,
            fin: false,
        };
        loop {
            let last = self.chunks.len() <= 1;
            let fin = self.fin && last;
            let empty = Bytes::new();
            let data = self.chunks.front().unwrap_or(&empty);
            if data.is_empty() && !fin {
                return wrote;
            }
            let len = data.len();
            let taken = write(StreamOut { stream, data, fin }).min(len);
            wrote.bytes += taken;
            self.bytes -= taken;
            if taken < len {
                if let Some(chunk) = self.chunks.front_mut() {
                    chunk.advance(taken);
                }
                return wrote;
            }
            self.chunks.pop_front();
            if fin {
                self.fin = false;
                wrote.fin = true;
                return wrote;
            }
        }
    }

    /// Asserts that the byte count is the chunks' and no chunk is empty.
    pub(crate) fn check(&self) {
        assert_eq!(
            self.chunks.iter().map(Bytes::len).sum::<usize>(),
            self.bytes
        );
        assert!(self.chunks.iter().all(|c| !c.is_empty()));
    }
}

/// Request streams recently closed early (reset or stopped, by either side), in a
/// direct-mapped table indexed by the stream id, so that what QUIC still delivers on them
/// is dropped rather than taken for a new stream. A stream is remembered until one
/// `CLOSED_STREAMS_REMEMBERED_MAX` client bidirectional ids later closes in its slot. O(1),
/// no hashing, one allocation per connection.
#[derive(Debug)]
pub(crate) struct ClosedStreams {
    slots: Box<[Option<u64>; CLOSED_STREAMS_REMEMBERED_MAX]>,
}

/// Closed request streams remembered.
pub(crate) const CLOSED_STREAMS_REMEMBERED_MAX: usize = 256;

impl Default for ClosedStreams {
    fn default() -> Self {
        ClosedStreams {
            slots: Box::new([None; CLOSED_STREAMS_REMEMBERED_MAX]),
        }
    }
}

impl ClosedStreams {
    fn slot(id: u64) -> usize {
        (id >> 2) as usize % CLOSED_STREAMS_REMEMBERED_MAX
    }

    pub(crate) fn insert(&mut self, id: u64) {
        let slot = &mut self.slots[Self::slot(id)];
        if slot.is_none_or(|held| held <= id) {
            *slot = Some(id);
        }
    }

    pub(crate) fn contains(&self, id: u64) -> bool {
        self.slots[Self::slot(id)] == Some(id)
    }
}
