//! A stream's send half (RFC 9113 §5.1 from our side, §6.9 flow control): the DATA queued
//! by the application, the stream's send window, and what ends it (END_STREAM or
//! trailers). Both roles queue DATA in a [`SendHalf`] and frame its turns with
//! [`send_turn`] (each in its own buffer: the server in its output, the client apart from
//! it); each schedules streams its own way.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

use crate::WINDOW_BYTES_MAX;
use crate::common::settings::SettingsState;
use crate::encode::encode_data_header;
use crate::frame::{FRAME_HEADER_BYTES, StreamId};

/// DATA payloads shorter than this are copied behind their frame header: one piece for
/// the caller's writev instead of two, at the price of a small copy.
pub(crate) const DATA_COPY_BYTES_MAX: usize = 1024;

/// Where a send half is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendState {
    /// No final head yet (1xx heads may have gone): a server's stream before its response.
    Idle,
    /// The head went without END_STREAM; the application may queue DATA or trailers.
    Open,
    /// The end (END_STREAM or trailers) is queued behind DATA.
    Ending,
    /// END_STREAM is queued in the output: half-closed (local).
    Done,
}

/// What ends the send half once its queued DATA is out.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum SendEnd {
    /// Nothing yet.
    #[default]
    None,
    /// END_STREAM on the last DATA frame (an empty one if nothing is queued).
    EndStream,
    /// A trailer block; encoded only when it goes out, so HPACK blocks leave in the order
    /// they were encoded (RFC 9113 §4.3).
    Trailers(Vec<(Bytes, Bytes)>),
}

/// What one stream's turn in its connection's DATA scheduler gave.
pub(crate) enum Turn {
    /// A frame, made in the caller's buffer (its header, and its payload when that was
    /// copied behind it); `payload`: a larger payload, to leave right after what the buffer
    /// holds ([`emit_frame`]). `more`: the stream can send again.
    Sent { payload: Option<Bytes>, more: bool },
    /// DATA waits for connection window: the stream is parked until it opens.
    WaitConnection,
    /// Nothing can go until the stream's window opens (or nothing is left).
    Blocked,
}

/// One stream's send half.
#[derive(Debug)]
pub(crate) struct SendHalf {
    pub state: SendState,
    /// What we may still send: i64, because a SETTINGS change may make it negative (§6.9.2).
    pub window: i64,
    /// Body queued for DATA frames, shared with the application's buffers.
    pub queue: DataQueue,
    pub queued_bytes: usize,
    pub end: SendEnd,
}

/// A send half's queued DATA pieces. The first is kept inline: most answers queue one
/// piece (a whole small body, or a cache entry's), and a queue of its own for it was an
/// allocation per stream.
#[derive(Debug, Default)]
pub struct DataQueue {
    first: Option<Bytes>,
    /// The pieces after `first`; empty while `first` is `None`.
    rest: VecDeque<Bytes>,
}

impl DataQueue {
    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    pub fn push_back(&mut self, piece: Bytes) {
        match self.first {
            None => self.first = Some(piece),
            Some(_) => self.rest.push_back(piece),
        }
    }

    pub fn front_mut(&mut self) -> Option<&mut Bytes> {
        self.first.as_mut()
    }

    pub fn pop_front(&mut self) -> Option<Bytes> {
        let front = self.first.take();
        self.first = self.rest.pop_front();
        front
    }

    /// The pieces, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Bytes> {
        self.first.iter().chain(&self.rest)
    }
}

/// What one turn of a send half gave, for its connection to frame.
pub(crate) enum Take {
    /// A DATA payload within both windows and the max frame size; `end`: it carries
    /// END_STREAM (the half is done).
    Data { payload: Bytes, end: bool },
    /// All DATA is out and the half ends with trailers (the half is done).
    Trailers(Vec<(Bytes, Bytes)>),
    /// DATA waits for connection window.
    WaitConnection,
    /// Nothing can go until the stream's window opens (or nothing is left).
    Blocked,
}

impl SendHalf {
    pub(crate) fn new(state: SendState, window: i64) -> Self {
        Self {
            state,
            window,
            queue: DataQueue::default(),
            queued_bytes: 0,
            end: SendEnd::None,
        }
    }

    /// Whether the next frame could go now if the connection window allows: DATA needs
    /// stream window, an end without DATA does not.
    pub(crate) fn sendable(&self) -> bool {
        if self.queue.is_empty() {
            self.end != SendEnd::None
        } else {
            self.window > 0
        }
    }

    /// Opens the window by a WINDOW_UPDATE's `increment` (§6.9.1); false when it went above
    /// 2^31-1, a stream FLOW_CONTROL_ERROR.
    pub(crate) fn open_window(&mut self, increment: u32) -> bool {
        self.window += i64::from(increment);
        self.window <= i64::from(WINDOW_BYTES_MAX)
    }

    /// Whether the next frame needs connection window.
    pub(crate) fn needs_window(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Queues body bytes, and END_STREAM behind them when `end_stream`. Returns the bytes
    /// queued, for the connection's total.
    pub(crate) fn queue_data(&mut self, data: Bytes, end_stream: bool) -> usize {
        let len = data.len();
        if len > 0 {
            self.queue.push_back(data);
            self.queued_bytes += len;
        }
        if end_stream {
            self.end = SendEnd::EndStream;
            self.state = SendState::Ending;
        }
        len
    }

    /// Takes `len` bytes that end the half, to leave at once in one DATA frame the caller
    /// makes, when nothing is queued ahead of them and both windows and the peer's frame
    /// size take them whole. False: queue them ([`SendHalf::queue_data`]).
    pub(crate) fn take_whole(&mut self, len: usize, conn_window: &mut i64, max_frame: u32) -> bool {
        let n = len as i64;
        let fits = n <= self.window.min(*conn_window) && len <= max_frame as usize;
        let alone = self.queue.is_empty() && self.end == SendEnd::None;
        if self.state != SendState::Open || !alone || !fits {
            return false;
        }
        self.window -= n;
        *conn_window -= n;
        self.state = SendState::Done;
        true
    }

    /// Ends the half with trailers. With nothing queued they go now: the half is done and
    /// `fields` come back for the caller to encode. Else they are kept (owned) to go out
    /// behind the DATA, encoded then, since HPACK blocks must reach the peer in encoding
    /// order.
    pub(crate) fn end_with_trailers<'a, I>(&mut self, fields: I) -> Option<I>
    where
        I: IntoIterator<Item = (&'a [u8], &'a [u8])>,
    {
        if self.queue.is_empty() {
            self.state = SendState::Done;
            return Some(fields);
        }
        let owned = (fields.into_iter())
            .map(|(n, v)| (Bytes::copy_from_slice(n), Bytes::copy_from_slice(v)))
            .collect();
        self.end = SendEnd::Trailers(owned);
        self.state = SendState::Ending;
        None
    }

    /// The next frame's worth: DATA within this window, `conn_window` (both debited, with
    /// `queued_total`) and `max_frame_size`, or the end once the DATA is all out.
    #[inline]
    pub(crate) fn take_frame(
        &mut self,
        conn_window: &mut i64,
        queued_total: &mut usize,
        max_frame_size: u32,
    ) -> Take {
        let Some(front) = self.queue.front_mut() else {
            return match std::mem::take(&mut self.end) {
                SendEnd::None => Take::Blocked,
                SendEnd::EndStream => {
                    self.state = SendState::Done;
                    Take::Data {
                        payload: Bytes::new(),
                        end: true,
                    }
                }
                SendEnd::Trailers(fields) => {
                    self.state = SendState::Done;
                    Take::Trailers(fields)
                }
            };
        };
        if self.window <= 0 {
            return Take::Blocked;
        }
        if *conn_window <= 0 {
            return Take::WaitConnection;
        }
        let allowed = (self.window)
            .min(*conn_window)
            .min(i64::from(max_frame_size));
        // `allowed` is positive: both windows were checked above.
        let n = front.len().min(allowed as usize);
        // A piece that goes whole is moved out, not split off and dropped: each split and
        // drop of a shared piece is a locked count.
        let payload = match n == front.len() {
            true => self.queue.pop_front().unwrap_or_default(),
            false => front.split_to(n),
        };
        self.queued_bytes -= n;
        self.window -= n as i64;
        *queued_total -= n;
        *conn_window -= n as i64;
        let end = self.queue.is_empty() && self.end == SendEnd::EndStream;
        if end {
            self.end = SendEnd::None;
            self.state = SendState::Done;
        }
        Take::Data { payload, end }
    }
}

/// One turn of stream `id`'s send half in its connection's DATA scheduler: a DATA frame
/// within the stream's window, `conn_window` (both debited, with `queued_total`) and the
/// peer's max frame size, or the end (an empty DATA with END_STREAM, or the trailers,
/// encoded through `settings`' HPACK encoder). The frame is made in `buf`, behind anything
/// already there, and left in it: the frames of one `poll_output` leave as one piece, not a
/// shared piece (two locked counts) each. Returns the turn and whether the half is done (the
/// connection then closes the stream if its other half is too).
#[inline]
pub(crate) fn send_turn(
    send: &mut SendHalf,
    id: StreamId,
    conn_window: &mut i64,
    queued_total: &mut usize,
    settings: &mut SettingsState,
    buf: &mut BytesMut,
) -> (Turn, bool) {
    let take = send.take_frame(conn_window, queued_total, settings.peer_max_frame_size);
    let (payload, end) = match take {
        Take::Data { payload, end } => (payload, end),
        Take::Trailers(fields) => {
            let fields = fields.iter().map(|(n, v)| (&n[..], &v[..]));
            settings.encode_fields(buf, id, true, fields);
            let turn = Turn::Sent {
                payload: None,
                more: false,
            };
            return (turn, true);
        }
        Take::WaitConnection => return (Turn::WaitConnection, false),
        Take::Blocked => return (Turn::Blocked, false),
    };
    let more = send.sendable();
    buf.reserve(FRAME_HEADER_BYTES + payload.len().min(DATA_COPY_BYTES_MAX));
    let payload = encode_data(buf, id, payload, end);
    (Turn::Sent { payload, more }, end)
}

/// §6.9.2: a new SETTINGS_INITIAL_WINDOW_SIZE changes every send window by the difference,
/// `delta`, possibly below zero; true when one went above 2^31-1, a connection
/// FLOW_CONTROL_ERROR.
pub(crate) fn shift_windows<'a>(
    halves: impl Iterator<Item = &'a mut SendHalf>,
    delta: i64,
) -> bool {
    let mut overflow = false;
    for half in halves {
        half.window += delta;
        overflow |= half.window > i64::from(WINDOW_BYTES_MAX);
    }
    overflow
}

/// Encodes a DATA frame's header into `frame`, with the payload behind it when it is small;
/// returns the payload when it goes as its own piece.
#[inline]
pub(crate) fn encode_data(
    frame: &mut BytesMut,
    id: StreamId,
    payload: Bytes,
    end: bool,
) -> Option<Bytes> {
    // At most the peer's max frame size, itself below 2^24.
    encode_data_header(frame, id, payload.len() as u32, end);
    if payload.len() < DATA_COPY_BYTES_MAX {
        frame.extend_from_slice(&payload);
        return None;
    }
    Some(payload)
}

/// After a turn that made a frame in `buf`: a payload that was not copied leaves now, right
/// behind what `buf` holds; a frame made whole waits in `buf` for the next ones
/// ([`emit_made`]).
#[inline]
pub(crate) fn emit_frame(
    buf: &mut BytesMut,
    payload: Option<Bytes>,
    emitted: &mut usize,
    emit: &mut impl FnMut(Bytes),
) {
    if let Some(payload) = payload {
        emit_made(buf, emitted, emit);
        *emitted += payload.len();
        emit(payload);
    }
}

/// Whether a `poll_output` that has made `made` bytes (handed out or waiting in its buffer)
/// takes another turn within `budget`: always the first, so that something goes.
#[inline]
pub(crate) fn budget_left(made: usize, budget: usize) -> bool {
    made == 0 || made < budget
}

/// Hands what `buf` holds to `emit` as one piece, adding its bytes to `emitted`.
#[inline]
pub(crate) fn emit_made(buf: &mut BytesMut, emitted: &mut usize, emit: &mut impl FnMut(Bytes)) {
    if !buf.is_empty() {
        let piece = buf.split().freeze();
        *emitted += piece.len();
        emit(piece);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces leave in order, whole when they fit and split where a frame or a window ends,
    /// with END_STREAM on the last; the inline first piece and the rest behind it are one
    /// queue.
    #[test]
    fn queued_pieces_leave_in_order_split_at_frames_and_windows() {
        let mut half = SendHalf::new(SendState::Open, 10);
        let mut total = 0;
        for piece in [&b"abc"[..], b"defghij", b"klmnopq"] {
            total += half.queue_data(Bytes::from_static(piece), false);
        }
        half.queue_data(Bytes::new(), true);
        assert_eq!(half.queue.iter().map(Bytes::len).sum::<usize>(), 17);
        let mut conn_window = 100;
        let mut taken = Vec::new();
        for _ in 0..20 {
            match half.take_frame(&mut conn_window, &mut total, 4) {
                Take::Data { payload, end } => {
                    taken.push((payload, end));
                    if end {
                        break;
                    }
                }
                // The stream window (10) ends after "hij".
                Take::Blocked => assert!(half.open_window(100)),
                other => panic!("{}", matches!(other, Take::WaitConnection)),
            }
        }
        let frames: Vec<_> = taken.iter().map(|(p, e)| (&p[..], *e)).collect();
        assert_eq!(
            frames,
            [
                (&b"abc"[..], false),
                (b"defg", false),
                (b"hij", false),
                (b"klmn", false),
                (b"opq", true),
            ]
        );
        assert_eq!((total, conn_window, half.queued_bytes), (0, 83, 0));
        assert!(half.queue.is_empty());
    }
}
