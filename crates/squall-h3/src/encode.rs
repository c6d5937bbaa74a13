//! Frame and stream-type encoders (RFC 9114 §6.2, §7). Each appends to a buffer and cannot
//! fail: every value here is bounded well below 2^62.

use bytes::BufMut;

use crate::frame::{Frame, Settings, StreamType, kind, setting};
use crate::varint;

impl Frame {
    /// Appends the whole frame: type, length, payload.
    pub fn encode(&self, out: &mut impl BufMut) {
        match self {
            Frame::Data(data) => {
                encode_data_header(data.len() as u64, out);
                out.put_slice(data);
            }
            Frame::Headers(block) => encode_headers(block, out),
            Frame::CancelPush(id) => encode_id_frame(kind::CANCEL_PUSH, *id, out),
            Frame::Settings(settings) => encode_settings(settings, out),
            Frame::GoAway(id) => encode_id_frame(kind::GOAWAY, *id, out),
            Frame::MaxPushId(id) => encode_id_frame(kind::MAX_PUSH_ID, *id, out),
        }
    }
}

/// Appends the type and length of a DATA frame whose `len` payload bytes the caller sends
/// next, so that a body leaves as the caller's own buffers, never copied into a frame.
pub fn encode_data_header(len: u64, out: &mut impl BufMut) {
    varint::encode(kind::DATA, out);
    varint::encode(len, out);
}

/// Appends a HEADERS frame carrying the encoded field section `block` (RFC 9114 §7.2.2).
pub fn encode_headers(block: &[u8], out: &mut impl BufMut) {
    varint::encode(kind::HEADERS, out);
    varint::encode(block.len() as u64, out);
    out.put_slice(block);
}

/// Appends a SETTINGS frame (RFC 9114 §7.2.4) with each setting whose value is not its
/// default, in increasing order of identifier.
pub fn encode_settings(settings: &Settings, out: &mut impl BufMut) {
    let pairs = settings_pairs(settings);
    let len: usize = pairs
        .iter()
        .map(|&(id, value)| varint::encoded_len(id) + varint::encoded_len(value))
        .sum();
    varint::encode(kind::SETTINGS, out);
    varint::encode(len as u64, out);
    for (id, value) in pairs {
        varint::encode(id, out);
        varint::encode(value, out);
    }
}

/// The (identifier, value) pairs [`encode_settings`] writes.
fn settings_pairs(settings: &Settings) -> Vec<(u64, u64)> {
    let mut pairs = Vec::with_capacity(5);
    if settings.qpack_max_table_capacity != 0 {
        pairs.push((
            setting::QPACK_MAX_TABLE_CAPACITY,
            settings.qpack_max_table_capacity,
        ));
    }
    if let Some(size) = settings.max_field_section_size {
        pairs.push((setting::MAX_FIELD_SECTION_SIZE, size));
    }
    if settings.qpack_blocked_streams != 0 {
        pairs.push((
            setting::QPACK_BLOCKED_STREAMS,
            settings.qpack_blocked_streams,
        ));
    }
    if settings.enable_connect_protocol {
        pairs.push((setting::ENABLE_CONNECT_PROTOCOL, 1));
    }
    if settings.h3_datagram {
        pairs.push((setting::H3_DATAGRAM, 1));
    }
    // A limit past what a varint carries says "as much as can be said": the largest one.
    for (_, value) in &mut pairs {
        *value = (*value).min(varint::VARINT_MAX);
    }
    pairs
}

/// CANCEL_PUSH, GOAWAY and MAX_PUSH_ID: a payload of one variable-length integer.
fn encode_id_frame(ty: u64, id: u64, out: &mut impl BufMut) {
    varint::encode(ty, out);
    varint::encode(varint::encoded_len(id) as u64, out);
    varint::encode(id, out);
}

/// Appends the stream type that opens a unidirectional stream (RFC 9114 §6.2).
pub fn encode_stream_type(ty: StreamType, out: &mut impl BufMut) {
    varint::encode(u64::from(ty), out);
}
