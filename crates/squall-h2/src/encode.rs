//! Frame encoders: each appends whole frames to a send buffer (RFC 9113 §4.1, §6).
//!
//! There is no DATA encoder that copies a payload: [`encode_data_header`] writes only the
//! 9-byte header, so the payload can go out as its own `Bytes`, straight from the cache or
//! the origin's buffer.

use bytes::{BufMut, BytesMut};

use crate::error::ErrorCode;
use crate::frame::{
    FRAME_HEADER_BYTES, FRAME_PAYLOAD_BYTES_DEFAULT, FRAME_PAYLOAD_BYTES_LIMIT, Priority,
    STREAM_ID_MASK, SettingId, StreamId, flag, kind,
};

/// Appends the 9-byte DATA frame header for a `len`-byte payload sent right after it
/// (RFC 9113 §6.1). `len` must fit the peer's SETTINGS_MAX_FRAME_SIZE.
pub fn encode_data_header(dst: &mut BytesMut, stream_id: StreamId, len: u32, end_stream: bool) {
    debug_assert!(stream_id != 0, "DATA on stream 0");
    let flags = if end_stream { flag::END_STREAM } else { 0 };
    put_head(dst, len, kind::DATA, flags, stream_id);
}

/// Appends a field block as one HEADERS frame followed by as many CONTINUATION frames as
/// needed, none longer than `max_frame_size` (the peer's, clamped to RFC 9113 §6.5.2's
/// range). END_STREAM goes on the HEADERS frame, END_HEADERS on the last (§6.2, §6.10).
pub fn encode_headers(
    dst: &mut BytesMut,
    stream_id: StreamId,
    end_stream: bool,
    block: &[u8],
    max_frame_size: u32,
) {
    debug_assert!(stream_id != 0, "HEADERS on stream 0");
    let chunk_bytes =
        max_frame_size.clamp(FRAME_PAYLOAD_BYTES_DEFAULT, FRAME_PAYLOAD_BYTES_LIMIT) as usize;
    // `chunks` yields nothing for an empty block, which still needs its HEADERS frame.
    let mut chunks = block.chunks(chunk_bytes).peekable();
    let first = chunks.next().unwrap_or(&[]);
    let mut flags = if end_stream { flag::END_STREAM } else { 0 };
    if chunks.peek().is_none() {
        flags |= flag::END_HEADERS;
    }
    dst.reserve(block.len() + FRAME_HEADER_BYTES * (1 + block.len() / chunk_bytes));
    put_frame(dst, kind::HEADERS, flags, stream_id, first);
    while let Some(chunk) = chunks.next() {
        let flags = if chunks.peek().is_none() {
            flag::END_HEADERS
        } else {
            0
        };
        put_frame(dst, kind::CONTINUATION, flags, stream_id, chunk);
    }
}

/// Appends a PRIORITY frame (RFC 9113 §6.3). Deprecated; here for tests and completeness.
pub fn encode_priority(dst: &mut BytesMut, stream_id: StreamId, priority: Priority) {
    put_head(dst, 5, kind::PRIORITY, 0, stream_id);
    let e = if priority.exclusive {
        !STREAM_ID_MASK
    } else {
        0
    };
    dst.put_u32(e | (priority.dependency & STREAM_ID_MASK));
    dst.put_u8(priority.weight);
}

/// Appends a PRIORITY_UPDATE frame (RFC 9218 §7.1): on stream 0, for `prioritized`.
pub fn encode_priority_update(dst: &mut BytesMut, prioritized: StreamId, value: &[u8]) {
    // A priority value is a short field; the caller keeps it within a frame.
    let len = u32::try_from(4 + value.len()).unwrap_or(u32::MAX);
    put_head(dst, len, kind::PRIORITY_UPDATE, 0, 0);
    dst.put_u32(prioritized & STREAM_ID_MASK);
    dst.put_slice(value);
}

/// Appends an RST_STREAM frame (RFC 9113 §6.4).
pub fn encode_rst_stream(dst: &mut BytesMut, stream_id: StreamId, code: ErrorCode) {
    debug_assert!(stream_id != 0, "RST_STREAM on stream 0");
    put_head(dst, 4, kind::RST_STREAM, 0, stream_id);
    dst.put_u32(code.into());
}

/// Appends a SETTINGS frame with `params` in order (RFC 9113 §6.5).
pub fn encode_settings(dst: &mut BytesMut, params: &[(SettingId, u32)]) {
    // Six parameter ids exist; a caller never sends anywhere near 2^24 / 6 of them.
    let len = u32::try_from(params.len() * 6).unwrap_or(u32::MAX);
    put_head(dst, len, kind::SETTINGS, 0, 0);
    for &(id, value) in params {
        dst.put_u16(id.to_u16());
        dst.put_u32(value);
    }
}

/// Appends an empty SETTINGS frame with ACK (RFC 9113 §6.5.3).
pub fn encode_settings_ack(dst: &mut BytesMut) {
    put_head(dst, 0, kind::SETTINGS, flag::ACK, 0);
}

/// Appends a PING frame; a reply carries `ack` and the data received (RFC 9113 §6.7).
pub fn encode_ping(dst: &mut BytesMut, ack: bool, data: [u8; 8]) {
    put_frame(dst, kind::PING, if ack { flag::ACK } else { 0 }, 0, &data);
}

/// Appends a GOAWAY frame (RFC 9113 §6.8). `debug` is for diagnostics only; keep it short,
/// since it must fit the peer's SETTINGS_MAX_FRAME_SIZE with the 8 fixed bytes.
pub fn encode_goaway(dst: &mut BytesMut, last_stream_id: StreamId, code: ErrorCode, debug: &[u8]) {
    debug_assert!(debug.len() + 8 <= FRAME_PAYLOAD_BYTES_DEFAULT as usize);
    let len = u32::try_from(debug.len() + 8).unwrap_or(u32::MAX);
    put_head(dst, len, kind::GOAWAY, 0, 0);
    dst.put_u32(last_stream_id & STREAM_ID_MASK);
    dst.put_u32(code.into());
    dst.put_slice(debug);
}

/// Appends a WINDOW_UPDATE frame; stream 0 is the connection window (RFC 9113 §6.9).
/// `increment` must be 1..=2^31-1.
pub fn encode_window_update(dst: &mut BytesMut, stream_id: StreamId, increment: u32) {
    debug_assert!(
        increment != 0 && increment <= STREAM_ID_MASK,
        "bad increment {increment}"
    );
    put_head(dst, 4, kind::WINDOW_UPDATE, 0, stream_id);
    dst.put_u32(increment & STREAM_ID_MASK);
}

/// Header then payload. Payloads here come from `chunks` of a clamped size or are fixed.
fn put_frame(dst: &mut BytesMut, ty: u8, flags: u8, stream_id: StreamId, payload: &[u8]) {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    put_head(dst, len, ty, flags, stream_id);
    dst.put_slice(payload);
}

/// The 9-byte header (RFC 9113 §4.1); the reserved bit is sent as 0.
fn put_head(dst: &mut BytesMut, len: u32, ty: u8, flags: u8, stream_id: StreamId) {
    debug_assert!(
        len <= FRAME_PAYLOAD_BYTES_LIMIT,
        "frame length {len} over 2^24-1"
    );
    dst.put_uint(u64::from(len), 3);
    dst.put_u8(ty);
    dst.put_u8(flags);
    dst.put_u32(stream_id & STREAM_ID_MASK);
}
