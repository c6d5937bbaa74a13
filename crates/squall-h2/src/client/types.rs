//! What a client connection is configured with and hands out: [`ClientConfig`],
//! [`ClientEvent`], [`OpenError`].

use crate::common::block::block_bytes_max;
use crate::error::ErrorCode;
use crate::fields::HeaderFields;
use crate::frame::{
    FRAME_PAYLOAD_BYTES_DEFAULT, FRAME_PAYLOAD_BYTES_LIMIT, StreamId, WINDOW_BYTES_INITIAL,
    WINDOW_BYTES_MAX,
};

/// Limits and windows of a client connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientConfig {
    /// SETTINGS_INITIAL_WINDOW_SIZE we announce: each stream's receive window (default 256 KiB).
    pub stream_window: u32,
    /// The connection receive window (default 4 MiB), raised by a WINDOW_UPDATE after SETTINGS.
    pub connection_window: u32,
    /// SETTINGS_MAX_FRAME_SIZE we accept (default 16,384).
    pub max_frame_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE we announce; a larger response head resets its stream (default 64 KiB).
    pub max_header_list_size: u32,
    /// SETTINGS_HEADER_TABLE_SIZE we announce (default 4,096).
    pub header_table_size: u32,
    /// Our own cap on concurrent streams we open, whatever the peer allows (default 100).
    pub max_concurrent_streams: u32,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            stream_window: 256 << 10,
            connection_window: 4 << 20,
            max_frame_size: FRAME_PAYLOAD_BYTES_DEFAULT,
            max_header_list_size: 64 << 10,
            header_table_size: 4096,
            max_concurrent_streams: 100,
        }
    }
}

impl ClientConfig {
    /// The values RFC 9113 §6.5.2 allows, and at least one stream: windows of 1..=2^31-1
    /// (the connection's at least the 65,535 it starts with, since only a WINDOW_UPDATE
    /// changes it), a frame size of 16,384..=16,777,215.
    pub(crate) fn sanitized(mut self) -> Self {
        self.stream_window = self.stream_window.clamp(1, WINDOW_BYTES_MAX);
        self.connection_window =
            (self.connection_window).clamp(WINDOW_BYTES_INITIAL, WINDOW_BYTES_MAX);
        self.max_frame_size =
            (self.max_frame_size).clamp(FRAME_PAYLOAD_BYTES_DEFAULT, FRAME_PAYLOAD_BYTES_LIMIT);
        self.max_concurrent_streams = self.max_concurrent_streams.max(1);
        self
    }

    /// The most bytes of one header block (HEADERS and CONTINUATIONs) we keep while it
    /// arrives ([`block_bytes_max`]).
    pub(crate) fn header_block_bytes_max(&self) -> usize {
        block_bytes_max(self.max_header_list_size, self.max_frame_size)
    }
}

/// What a client connection hands the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientEvent {
    /// An interim response (1xx other than 101), e.g. 103 Early Hints; a final one follows.
    Interim {
        stream_id: StreamId,
        status: u16,
        fields: HeaderFields,
    },
    /// The final response head: `fields` are the regular fields only (validated as RFC 9113
    /// §8.2/§8.3.2 require: exactly one `:status` of three digits, no other pseudo-field,
    /// none after a regular field, lowercase names, no connection-specific field; else the
    /// stream is reset with PROTOCOL_ERROR and a Reset event comes instead).
    /// `content_length` parsed when present (several equal values are one).
    /// `end_stream`: no body follows.
    Response {
        stream_id: StreamId,
        status: u16,
        fields: HeaderFields,
        content_length: Option<u64>,
        end_stream: bool,
    },
    /// Response body. Its window is returned only by `release_capacity`.
    Data {
        stream_id: StreamId,
        data: bytes::Bytes,
        end_stream: bool,
    },
    /// Response trailers; the response is complete. (No pseudo-fields allowed.)
    Trailers {
        stream_id: StreamId,
        fields: HeaderFields,
    },
    /// The stream ended without a complete response: the peer reset it (its code), we
    /// found it malformed (content-length mismatch, bad head: PROTOCOL_ERROR, RST_STREAM
    /// sent), a head over max_header_list_size (RST_STREAM sent), or the connection failed.
    /// `refused`: the peer did not process the request (RST_STREAM REFUSED_STREAM, or the
    /// stream is above a GOAWAY's last stream id, or `fail()` before any byte left), so it
    /// may be retried on another connection whatever its method.
    Reset {
        stream_id: StreamId,
        code: ErrorCode,
        refused: bool,
    },
    /// The peer sent GOAWAY: no new streams on this connection; streams above
    /// `last_stream_id` come as Reset { refused: true } right after this event; those below
    /// finish normally.
    GoAway {
        last_stream_id: StreamId,
        code: ErrorCode,
    },
}

impl ClientEvent {
    /// The stream the event is about; `None` for [`ClientEvent::GoAway`].
    pub fn stream_id(&self) -> Option<StreamId> {
        match self {
            Self::Interim { stream_id, .. }
            | Self::Response { stream_id, .. }
            | Self::Data { stream_id, .. }
            | Self::Trailers { stream_id, .. }
            | Self::Reset { stream_id, .. } => Some(*stream_id),
            Self::GoAway { .. } => None,
        }
    }
}

/// Why `send_request` opened nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error("no stream available on this connection")]
    NoCapacity,
    #[error("the connection is going away")]
    GoingAway,
}
