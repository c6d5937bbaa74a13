//! squall-h2: HTTP/2 (RFC 9113), sans-IO. For now, the frame layer.
//!
//! The client connection preface ([`PREFACE`], [`match_preface`], RFC 9113 §3.4), a frame
//! decoder ([`FrameDecoder`]) and encoders (`encode_*`) for every frame type of §6. No
//! sockets, no clock: bytes in, [`Frame`]s out; frames in, bytes appended to a buffer.
//!
//! The decoder is a server's: it rejects PUSH_PROMISE (§8.4). It checks what one frame can
//! break by itself (length, stream id, padding, flags, SETTINGS values) and says for each
//! error whether it ends a stream or the connection ([`ErrorScope`], §5.4). The connection
//! and stream state machines, flow control and HPACK (`squall-hpack`) sit above it.
//!
//! # Limits
//!
//! - Frame payload: the decoder's `max_frame_size` (our SETTINGS_MAX_FRAME_SIZE, 16,384 to
//!   start, §6.5.2). A longer length is refused from the 9-byte header alone, so a caller
//!   never buffers more than `9 + max_frame_size` bytes of one frame.
//! - Sent frames: [`encode_headers`] splits blocks at the peer's max frame size; DATA
//!   payloads are sized by the caller, who knows the windows.
//!
//! # Example
//!
//! ```
//! use bytes::BytesMut;
//! use squall_h2::{Frame, FrameDecoder, encode_ping};
//!
//! let mut buf = BytesMut::new();
//! encode_ping(&mut buf, false, *b"12345678");
//! let mut decoder = FrameDecoder::new(16_384);
//! let frame = decoder.decode(&mut buf).unwrap();
//! assert_eq!(frame, Some(Frame::Ping { ack: false, data: *b"12345678" }));
//! assert!(buf.is_empty());
//! ```

#![forbid(unsafe_code)]

mod decode;
mod encode;
mod error;
mod frame;

pub use decode::FrameDecoder;
pub use encode::{
    encode_data_header, encode_goaway, encode_headers, encode_ping, encode_priority,
    encode_rst_stream, encode_settings, encode_settings_ack, encode_window_update,
};
pub use error::{ErrorCode, ErrorScope, FrameError};
pub use frame::{
    FRAME_HEADER_BYTES, FRAME_PAYLOAD_BYTES_DEFAULT, FRAME_PAYLOAD_BYTES_LIMIT, Frame, Priority,
    SettingId, Settings, StreamId, WINDOW_BYTES_INITIAL, WINDOW_BYTES_MAX,
};

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
