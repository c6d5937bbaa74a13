//! squall-h2: HTTP/2 (RFC 9113), sans-IO: the frame layer, and above it the connection and
//! stream state machines of a server, and of a client for proxying to HTTP/2 origins.
//!
//! # Frame layer
//!
//! The client connection preface ([`PREFACE`], [`match_preface`], RFC 9113 §3.4), a frame
//! decoder ([`FrameDecoder`]) and encoders (`encode_*`) for every frame type of §6. The
//! decoder is a server's: it rejects PUSH_PROMISE (§8.4). It checks what one frame can
//! break by itself (length, stream id, padding, flags, SETTINGS values) and says for each
//! error whether it ends a stream or the connection ([`ErrorScope`], §5.4).
//!
//! # Request layer
//!
//! [`head`]: request heads and trailers validated from decoded fields (§8.2, §8.3.1; pure
//! functions, fields in, a [`Request`] or the answer out: malformed, or 413, 414, 431, 501),
//! the [`Request`] and its [`HeaderFields`], and the filter on response fields. It knows no
//! HPACK and no frames: HTTP/3's request rules are these (RFC 9114 §4.2, §4.3), and
//! `squall-h3`'s server validates its requests here too, so that both protocols accept, refuse
//! and answer a request alike and hand the application the same [`Request`].
//!
//! # Connection layer
//!
//! [`Connection`] is one server connection: bytes and `Instant`s in, [`Event`]s and bytes
//! to send out. No sockets, no threads, no clock.
//!
//! - Input: [`Connection::recv`] takes whole frames from a buffer (the preface first) and
//!   runs the stream states of §5.1, HPACK (`squall-hpack`), header block assembly (§6.10),
//!   request validation (§8.2, §8.3.1) and receive flow control (§6.9). Connection errors
//!   queue a GOAWAY and return [`ConnError`]; stream errors queue RST_STREAM.
//! - Events: [`Connection::poll_event`] gives requests, body data, trailers and resets.
//!   Body data keeps its flow-control window until [`Connection::release_capacity`], so a
//!   slow application slows the client; window goes back in WINDOW_UPDATEs of at least half
//!   a window. A stream reset before its request was polled never reaches the application.
//! - Output: `send_headers`, `send_data`, `send_trailers` and `reset_stream` queue the
//!   response; [`Connection::poll_output`] emits control frames and header blocks first,
//!   then DATA one frame per turn, within the peer's windows and SETTINGS_MAX_FRAME_SIZE,
//!   in the order of RFC 9218 priorities (the `priority` request field, PRIORITY_UPDATE):
//!   lower urgency first, non-incremental streams of an urgency one after another,
//!   incremental ones round robin; requests without a signal share urgency 3 round robin.
//!   Our SETTINGS carry SETTINGS_NO_RFC7540_PRIORITIES = 1. DATA payloads are slices of the
//!   application's `Bytes` (copied only below 1 KiB); HPACK blocks leave in the order they were
//!   encoded.
//! - Answered by the connection itself, without the application: 431 (header list over
//!   SETTINGS_MAX_HEADER_LIST_SIZE), 414 (`:path` too long), 413 (body over the limit, by
//!   content-length or counted; reset with CANCEL instead if the response has begun), 501
//!   (a well-formed CONNECT: Squall is not a forward proxy). With
//!   `ServerConfig::enable_connect_protocol`, SETTINGS_ENABLE_CONNECT_PROTOCOL is sent and an
//!   extended CONNECT (RFC 8441 §4) reaches the application with [`Request::protocol`] set;
//!   its stream's DATA is a tunnel's, free of the body limit. Streams over
//!   SETTINGS_MAX_CONCURRENT_STREAMS, or opened after a GOAWAY, get REFUSED_STREAM.
//! - Time: [`Connection::next_deadline`] and [`Connection::on_timer`] detect stalled send
//!   windows.
//!
//! # Client role
//!
//! [`ClientConnection`] is one connection to an HTTP/2 origin, for the proxy: many requests
//! on it at once, bytes and `Instant`s in, [`ClientEvent`]s and bytes out, like the server,
//! with which it shares what both roles do alike (`src/common/`: a stream's send half and
//! DATA framing, body inboxes, header block assembly and encoding, receive-window crediting,
//! the SETTINGS exchange).
//!
//! - Output: the preface and our SETTINGS first (SETTINGS_ENABLE_PUSH = 0, our windows,
//!   frame size, header list and table sizes; [`ClientConfig`]), then a WINDOW_UPDATE that
//!   raises the connection window. [`ClientConnection::send_request`] opens odd stream ids
//!   in increasing order, within [`ClientConnection::available_streams`] (our cap and the
//!   peer's SETTINGS_MAX_CONCURRENT_STREAMS); `send_data` and `send_trailers` queue the
//!   body, which leaves round robin within the peer's windows and SETTINGS_MAX_FRAME_SIZE.
//! - Input: response heads are validated (§8.3.2: one three-digit `:status`, and the field
//!   rules of §8.2 the server applies to requests); 1xx heads come as
//!   [`ClientEvent::Interim`] (at most 8 per stream), a 101 is malformed (§8.6). DATA is
//!   checked against content-length (not for 204 and 304, nor a head with END_STREAM, which
//!   may answer HEAD). A malformed response resets its stream with PROTOCOL_ERROR and the
//!   application gets [`ClientEvent::Reset`]. PUSH_PROMISE, and HEADERS or DATA on a stream
//!   we did not open, are connection errors; frames on streams we reset are ignored.
//! - Flow control: response DATA keeps its window until
//!   [`ClientConnection::release_capacity`], so a slow client slows the origin; windows go
//!   back in WINDOW_UPDATEs of at least half a window, the connection's also for the body of
//!   a response that already completed.
//! - GOAWAY from the origin: [`ClientEvent::GoAway`], then a Reset with `refused: true` for
//!   every stream above its last stream id (safe to retry elsewhere, as is RST_STREAM
//!   REFUSED_STREAM); the others finish. [`ClientConnection::fail`] ends every stream when
//!   the transport goes.
//! - Bounds against a misbehaving origin: header blocks (2 × the header list limit, 64
//!   CONTINUATION frames), answers it leaves unread (64 KiB, then GOAWAY(ENHANCE_YOUR_CALM)),
//!   closed streams remembered (512), events (a few per stream; body data waits in
//!   per-stream inboxes within the receive windows).
//!
//! # Limits and defaults ([`ServerConfig`])
//!
//! | Limit | Default | Exceeded |
//! |---|---|---|
//! | concurrent streams | 128 | RST_STREAM(REFUSED_STREAM) |
//! | stream / connection receive window | 1 MiB / 16 MiB | FLOW_CONTROL_ERROR |
//! | frame payload received | 16,384 | GOAWAY(FRAME_SIZE_ERROR) |
//! | header list | 16 KiB | 431 |
//! | HPACK table | 4,096 | GOAWAY(COMPRESSION_ERROR) |
//! | `:path` / body | 8 KiB / 16 MiB | 414 / 413 |
//! | streams reset (by the peer, refused, or malformed) per 10 s | 200 | GOAWAY(ENHANCE_YOUR_CALM) |
//! | SETTINGS, PING, PRIORITY, PRIORITY_UPDATE, RST_STREAM, useless WINDOW_UPDATE per 10 s | 1,000 | same |
//! | PRIORITY_UPDATEs kept for streams not yet open, with the open streams | concurrent streams | GOAWAY(PROTOCOL_ERROR) |
//! | WINDOW_UPDATEs below 1 KiB per 10 s | 1,000 | same |
//! | empty DATA / HEADERS / CONTINUATION per 10 s | 100 | same |
//! | CONTINUATION frames per block / block bytes | 32 / 2 × header list | same |
//! | answers (ACKs, RST_STREAM, WINDOW_UPDATE) the peer leaves unread | 64 KiB | same |
//! | send window closed with data queued | 30 s | RST_STREAM(CANCEL); connection: GOAWAY(ENHANCE_YOUR_CALM) |
//!
//! Memory per connection is bounded by these: the event queue holds a few entries per
//! stream (body data waits in per-stream inboxes within the receive windows, small frames
//! copied together), closed streams are remembered up to 256, a partial header block up
//! to its byte limit, and a caller's receive buffer never needs more than one frame.
//!
//! # Example
//!
//! ```
//! use std::time::Instant;
//!
//! use bytes::{Bytes, BytesMut};
//! use squall_h2::{Connection, Event, ServerConfig, PREFACE, encode_headers, encode_settings};
//!
//! let now = Instant::now();
//! let mut conn = Connection::new(ServerConfig::default(), now);
//!
//! // A client: preface, SETTINGS, and GET / as an HPACK block.
//! let mut input = BytesMut::from(&PREFACE[..]);
//! encode_settings(&mut input, &[]);
//! let mut block = BytesMut::new();
//! squall_hpack::Encoder::new().encode(
//!     [
//!         (&b":method"[..], &b"GET"[..], false),
//!         (b":scheme", b"https", false),
//!         (b":authority", b"example.com", false),
//!         (b":path", b"/", false),
//!     ],
//!     &mut block,
//! );
//! encode_headers(&mut input, 1, true, &block, 16_384);
//!
//! conn.recv(&mut input, now).unwrap();
//! let Some(Event::Request { stream_id, request }) = conn.poll_event() else {
//!     panic!("a request");
//! };
//! assert_eq!(request.path, "/");
//! conn.send_headers(stream_id, 200, [(&b"content-type"[..], &b"text/plain"[..])], false)
//!     .unwrap();
//! conn.send_data(stream_id, Bytes::from_static(b"hello"), true).unwrap();
//! let mut out = Vec::new();
//! conn.poll_output(64 * 1024, |piece| out.push(piece));
//! assert!(!out.is_empty());
//! assert!(conn.is_idle());
//! ```

#![forbid(unsafe_code)]

mod client;
mod common;
mod conn;
mod decode;
mod encode;
mod error;
mod fields;
mod frame;
pub mod head;

pub use client::{ClientConfig, ClientConnection, ClientEvent, OpenError};
pub use conn::{ConnError, Connection, Event, FloodKind, ServerConfig, Stats, StreamClosed};
pub use decode::FrameDecoder;
pub use encode::{
    encode_data_header, encode_goaway, encode_headers, encode_ping, encode_priority,
    encode_priority_update, encode_rst_stream, encode_settings, encode_settings_ack,
    encode_window_update,
};
pub use error::{ErrorCode, ErrorScope, FrameError};
pub use fields::{FieldSpan, HeaderFields};
pub use frame::{
    FRAME_HEADER_BYTES, FRAME_PAYLOAD_BYTES_DEFAULT, FRAME_PAYLOAD_BYTES_LIMIT, Frame, Priority,
    SettingId, Settings, StreamId, WINDOW_BYTES_INITIAL, WINDOW_BYTES_MAX,
};
pub use head::Request;

/// The client connection preface (RFC 9113 §3.4), before the client's first SETTINGS.
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How the start of a connection compares with [`PREFACE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PrefaceState {
    /// The bytes so far agree with the preface; read more.
    Incomplete,
    /// The buffer starts with the whole preface; skip `PREFACE.len()` bytes.
    Matched,
    /// Not HTTP/2: RFC 9113 §3.4 says to treat it as a connection PROTOCOL_ERROR (and
    /// RFC 9113 §3.3 lets a server fall back to HTTP/1.1 before any byte is answered).
    Mismatch,
}

/// Compares the start of `buf` with the preface; consumes nothing.
pub fn match_preface(buf: &[u8]) -> PrefaceState {
    let n = buf.len().min(PREFACE.len());
    if buf[..n] != PREFACE[..n] {
        PrefaceState::Mismatch
    } else if n < PREFACE.len() {
        PrefaceState::Incomplete
    } else {
        PrefaceState::Matched
    }
}
