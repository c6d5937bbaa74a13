//! The frames of RFC 9114 §7.2 as values, the unidirectional stream types of §6.2, and the
//! settings of §7.2.4 with the extensions Squall knows (RFC 9220, RFC 9297).
//!
//! A frame is a type and a length, both variable-length integers (RFC 9000 §16), then the
//! payload (§7.1). Unlike HTTP/2 there are no flags and no stream id: a frame belongs to the
//! QUIC stream it arrives on, and a message ends with its stream.

use bytes::Bytes;

/// Frame type codes (RFC 9114 §7.2, §11.2.1).
pub mod kind {
    pub const DATA: u64 = 0x00;
    pub const HEADERS: u64 = 0x01;
    pub const CANCEL_PUSH: u64 = 0x03;
    pub const SETTINGS: u64 = 0x04;
    pub const PUSH_PROMISE: u64 = 0x05;
    pub const GOAWAY: u64 = 0x07;
    pub const MAX_PUSH_ID: u64 = 0x0d;
    /// The HTTP/2 frame types with no HTTP/3 counterpart: PRIORITY, PING, WINDOW_UPDATE and
    /// CONTINUATION. Receiving one is a connection error H3_FRAME_UNEXPECTED (§7.2.8).
    pub const HTTP2_ONLY: [u64; 4] = [0x02, 0x06, 0x08, 0x09];
}

/// Setting identifiers (RFC 9114 §7.2.4.1, RFC 9204 §5, RFC 9220 §3, RFC 9297 §2.1.1).
pub mod setting {
    pub const QPACK_MAX_TABLE_CAPACITY: u64 = 0x01;
    pub const MAX_FIELD_SECTION_SIZE: u64 = 0x06;
    pub const QPACK_BLOCKED_STREAMS: u64 = 0x07;
    pub const ENABLE_CONNECT_PROTOCOL: u64 = 0x08;
    pub const H3_DATAGRAM: u64 = 0x33;
    /// The HTTP/2 settings with no HTTP/3 counterpart (HEADER_TABLE_SIZE's number is reused
    /// by QPACK_MAX_TABLE_CAPACITY, MAX_HEADER_LIST_SIZE's by MAX_FIELD_SECTION_SIZE):
    /// receiving one is a connection error H3_SETTINGS_ERROR (§7.2.4.1).
    pub const HTTP2_ONLY: [u64; 5] = [0x00, 0x02, 0x03, 0x04, 0x05];
}

/// True for the reserved identifiers `0x1f * N + 0x21`, which RFC 9114 sets aside for
/// frame types (§7.2.8), setting ids (§7.2.4.1), stream types (§6.2.3) and error codes
/// (§8.1) so that peers exercise their handling of unknown values ("greasing").
pub fn is_reserved(value: u64) -> bool {
    value >= 0x21 && (value - 0x21).is_multiple_of(0x1f)
}

/// The `n`th reserved identifier, `0x1f * n + 0x21`, for sending grease.
pub fn reserved(n: u64) -> u64 {
    0x1f * n + 0x21
}

/// The kind of a unidirectional stream, from the variable-length integer at its start
/// (RFC 9114 §6.2, RFC 9204 §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamType {
    /// 0x00: the peer's control stream, one per connection, starting with SETTINGS.
    Control,
    /// 0x01: a server push stream. A server that receives one answers with a connection
    /// error H3_STREAM_CREATION_ERROR (§6.2.2): clients do not push.
    Push,
    /// 0x02: the peer's QPACK encoder stream, feeding our QPACK decoder.
    QpackEncoder,
    /// 0x03: the peer's QPACK decoder stream, feeding our QPACK encoder.
    QpackDecoder,
    /// Any other type, reserved (grease) or not: the stream is to be read and discarded, or
    /// refused with STOP_SENDING H3_STREAM_CREATION_ERROR, never a connection error (§6.2).
    Unknown(u64),
}

impl From<u64> for StreamType {
    fn from(ty: u64) -> Self {
        match ty {
            0x00 => Self::Control,
            0x01 => Self::Push,
            0x02 => Self::QpackEncoder,
            0x03 => Self::QpackDecoder,
            other => Self::Unknown(other),
        }
    }
}

impl From<StreamType> for u64 {
    fn from(ty: StreamType) -> Self {
        match ty {
            StreamType::Control => 0x00,
            StreamType::Push => 0x01,
            StreamType::QpackEncoder => 0x02,
            StreamType::QpackDecoder => 0x03,
            StreamType::Unknown(other) => other,
        }
    }
}

/// The settings an endpoint sends once, in the first frame of its control stream
/// (RFC 9114 §7.2.4). Each field has the value the RFCs give it when it is not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Settings {
    /// SETTINGS_QPACK_MAX_TABLE_CAPACITY (RFC 9204 §5): the most the peer's encoder may set
    /// our decoder's dynamic table to. Default 0: no dynamic table.
    pub qpack_max_table_capacity: u64,
    /// SETTINGS_QPACK_BLOCKED_STREAMS (RFC 9204 §5): how many streams may wait for encoder
    /// stream instructions at once. Default 0.
    pub qpack_blocked_streams: u64,
    /// SETTINGS_MAX_FIELD_SECTION_SIZE (RFC 9114 §4.2.2): the largest field section the
    /// sender accepts, counted as names, values and 32 bytes per field. Default: unlimited.
    pub max_field_section_size: Option<u64>,
    /// SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 9220 §3, after RFC 8441): extended CONNECT.
    pub enable_connect_protocol: bool,
    /// SETTINGS_H3_DATAGRAM (RFC 9297 §2.1.1): HTTP datagrams.
    pub h3_datagram: bool,
}

/// One frame.
///
/// The decoder ([`crate::FrameDecoder`]) hands DATA out as pieces of its payload, as they
/// arrive; for the encoder, [`Frame::Data`] is a whole frame. PUSH_PROMISE has no
/// variant: a server refuses it (RFC 9114 §7.2.5) and sends none, since Squall does not push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// DATA (§7.2.1): a piece of a message body.
    Data(Bytes),
    /// HEADERS (§7.2.2): a QPACK-encoded field section, whole.
    Headers(Bytes),
    /// CANCEL_PUSH (§7.2.3), on the control stream: the push id.
    CancelPush(u64),
    /// SETTINGS (§7.2.4), the first frame of a control stream and only there.
    Settings(Settings),
    /// GOAWAY (§7.2.6), on the control stream: from a server, the first request stream id it
    /// will not process; from a client, the first push id.
    GoAway(u64),
    /// MAX_PUSH_ID (§7.2.7), on the control stream, from a client.
    MaxPushId(u64),
}
