//! The frames of RFC 9113 §6 as values, with the constants of their layout (§4.1).
//!
//! Payloads that can be large (DATA, field block fragments, GOAWAY debug data) are [`Bytes`]
//! that share the receive buffer: decoding one copies nothing.

use bytes::Bytes;

/// A stream identifier: 31 bits, the reserved high bit already cleared (RFC 9113 §4.1).
pub type StreamId = u32;

/// Bytes of the fixed frame header: length (24), type (8), flags (8), R + stream id (32).
pub const FRAME_HEADER_BYTES: usize = 9;

/// The initial SETTINGS_MAX_FRAME_SIZE, and the smallest allowed (RFC 9113 §6.5.2).
pub const FRAME_PAYLOAD_BYTES_DEFAULT: u32 = 16_384;

/// The largest SETTINGS_MAX_FRAME_SIZE allowed, 2^24-1 (RFC 9113 §6.5.2).
pub const FRAME_PAYLOAD_BYTES_LIMIT: u32 = (1 << 24) - 1;

/// The largest flow-control window, 2^31-1 (RFC 9113 §6.9.1).
pub const WINDOW_BYTES_MAX: u32 = (1 << 31) - 1;

/// The initial flow-control window of every stream and the connection (RFC 9113 §6.9.2).
pub const WINDOW_BYTES_INITIAL: u32 = 65_535;

/// Clears the reserved bit R of a stream identifier field (RFC 9113 §4.1: "MUST be ignored").
pub(crate) const STREAM_ID_MASK: u32 = 0x7fff_ffff;

const _: () = assert!(FRAME_PAYLOAD_BYTES_DEFAULT <= FRAME_PAYLOAD_BYTES_LIMIT);

/// Frame type codes (RFC 9113 §6).
pub(crate) mod kind {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const PRIORITY: u8 = 0x2;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PUSH_PROMISE: u8 = 0x5;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const CONTINUATION: u8 = 0x9;
    /// RFC 9218 §7.1.
    pub const PRIORITY_UPDATE: u8 = 0x10;
}

/// Frame flags (RFC 9113 §6). ACK and END_STREAM share a bit on different frame types.
pub(crate) mod flag {
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
    pub const PRIORITY: u8 = 0x20;
}

/// One decoded frame.
///
/// PUSH_PROMISE has no variant: only servers send it, and a server that receives one answers
/// with a connection error (RFC 9113 §8.4), which is what [`crate::FrameDecoder`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// DATA (§6.1), padding stripped.
    Data {
        stream_id: StreamId,
        /// The data, without Pad Length and Padding.
        data: Bytes,
        end_stream: bool,
        /// The whole payload length, padding included: what flow control counts (§6.9.1).
        flow_len: u32,
    },
    /// HEADERS (§6.2), padding stripped.
    Headers {
        stream_id: StreamId,
        /// The field block fragment, for HPACK once the block is complete.
        block: Bytes,
        end_stream: bool,
        end_headers: bool,
        /// The deprecated priority fields, present when the PRIORITY flag was set.
        priority: Option<Priority>,
    },
    /// PRIORITY (§6.3): parsed, but RFC 9113 §5.3.2 deprecates the scheme.
    Priority {
        stream_id: StreamId,
        priority: Priority,
    },
    /// RST_STREAM (§6.4).
    RstStream {
        stream_id: StreamId,
        code: crate::ErrorCode,
    },
    /// SETTINGS (§6.5), on stream 0.
    Settings(Settings),
    /// PING (§6.7), on stream 0.
    Ping { ack: bool, data: [u8; 8] },
    /// GOAWAY (§6.8), on stream 0.
    GoAway {
        last_stream_id: StreamId,
        code: crate::ErrorCode,
        debug: Bytes,
    },
    /// WINDOW_UPDATE (§6.9); stream 0 is the connection window.
    WindowUpdate { stream_id: StreamId, increment: u32 },
    /// CONTINUATION (§6.10). Whether it may come here is the connection's call.
    Continuation {
        stream_id: StreamId,
        block: Bytes,
        end_headers: bool,
    },
    /// PRIORITY_UPDATE (RFC 9218 §7.1), on stream 0: a request stream's new priority.
    PriorityUpdate {
        /// The stream whose priority changes; never 0.
        prioritized_stream_id: StreamId,
        /// The Priority Field Value, as the `priority` field carries it (RFC 9218 §5).
        value: Bytes,
    },
    /// A frame type RFC 9113 does not define: to be ignored (§4.1, §5.5), payload dropped.
    Unknown { ty: u8, stream_id: StreamId },
}

impl Frame {
    /// The frame's stream identifier; 0 for frames that concern the connection.
    pub fn stream_id(&self) -> StreamId {
        match self {
            Self::Data { stream_id, .. }
            | Self::Headers { stream_id, .. }
            | Self::Priority { stream_id, .. }
            | Self::RstStream { stream_id, .. }
            | Self::WindowUpdate { stream_id, .. }
            | Self::Continuation { stream_id, .. }
            | Self::Unknown { stream_id, .. } => *stream_id,
            Self::Settings(_)
            | Self::Ping { .. }
            | Self::GoAway { .. }
            | Self::PriorityUpdate { .. } => 0,
        }
    }
}

/// The deprecated priority fields of HEADERS and PRIORITY (RFC 9113 §6.2, §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Priority {
    /// The E flag.
    pub exclusive: bool,
    /// The stream this one depends on, 31 bits.
    pub dependency: StreamId,
    /// The weight as sent, 0..=255 for 1..=256.
    pub weight: u8,
}

/// The content of a SETTINGS frame (RFC 9113 §6.5).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Settings {
    /// The ACK flag: this acknowledges our SETTINGS and has no parameters.
    pub ack: bool,
    /// Known parameters in the order sent; the last of a repeated id wins (§6.5.3). Values
    /// are validated (§6.5.2) and unknown ids dropped (§6.5.2: "MUST ignore").
    pub params: Vec<(SettingId, u32)>,
}

/// A SETTINGS parameter defined by RFC 9113 §6.5.2, RFC 8441 §3 or RFC 9218 §2.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SettingId {
    /// 0x1: the HPACK dynamic table size the sender's decoder allows.
    HeaderTableSize,
    /// 0x2: 0 or 1; whether server push is allowed.
    EnablePush,
    /// 0x3: streams the sender allows the peer to open at once.
    MaxConcurrentStreams,
    /// 0x4: the initial stream window, at most 2^31-1.
    InitialWindowSize,
    /// 0x5: the largest frame payload the sender accepts, 2^14..=2^24-1.
    MaxFrameSize,
    /// 0x6: advisory limit on the uncompressed header list.
    MaxHeaderListSize,
    /// 0x8: 0 or 1; 1 says the sender accepts the extended CONNECT of RFC 8441 §4
    /// (`:protocol`, WebSocket over HTTP/2).
    EnableConnectProtocol,
    /// 0x9: 0 or 1; 1 says the sender ignores RFC 7540 priority signals (RFC 9218 §2.1).
    NoRfc7540Priorities,
}

impl SettingId {
    /// The id for a wire value, `None` for ids this implementation ignores.
    pub fn from_u16(id: u16) -> Option<Self> {
        Some(match id {
            0x1 => Self::HeaderTableSize,
            0x2 => Self::EnablePush,
            0x3 => Self::MaxConcurrentStreams,
            0x4 => Self::InitialWindowSize,
            0x5 => Self::MaxFrameSize,
            0x6 => Self::MaxHeaderListSize,
            0x8 => Self::EnableConnectProtocol,
            0x9 => Self::NoRfc7540Priorities,
            _ => return None,
        })
    }

    /// The wire value.
    pub fn to_u16(self) -> u16 {
        match self {
            Self::HeaderTableSize => 0x1,
            Self::EnablePush => 0x2,
            Self::MaxConcurrentStreams => 0x3,
            Self::InitialWindowSize => 0x4,
            Self::MaxFrameSize => 0x5,
            Self::MaxHeaderListSize => 0x6,
            Self::EnableConnectProtocol => 0x8,
            Self::NoRfc7540Priorities => 0x9,
        }
    }
}
