//! What a server connection advertises and enforces: [`ServerConfig`] and its defaults.
//!
//! The defaults follow `squall-h2`'s `ServerConfig` (itself the Squall config's `limits.*`)
//! where both protocols have the limit, so that a request gets the same answer over either.

use std::time::Duration;

use crate::qpack::EncoderConfig;

/// Settings and limits of one server connection. Every limit is per connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Our SETTINGS_MAX_FIELD_SECTION_SIZE (default 16 KiB): a request head or trailers
    /// larger (names, values and 32 bytes per field, RFC 9114 §4.2.2) is answered 431 by
    /// the connection. A HEADERS frame whose encoded section is over
    /// `max(64 KiB, 2 × this)` is a connection error H3_EXCESSIVE_LOAD, found from its length.
    pub max_field_section_size: u64,
    /// Our SETTINGS_QPACK_MAX_TABLE_CAPACITY (default 4,096): the dynamic table the peer's
    /// encoder may make our decoder keep. 0: none.
    pub qpack_max_table_capacity: u64,
    /// Our SETTINGS_QPACK_BLOCKED_STREAMS (default 16): request streams whose field section
    /// may wait for encoder stream instructions at once. One more is a connection error
    /// QPACK_DECOMPRESSION_FAILED (RFC 9204 §2.2.1).
    pub qpack_blocked_streams: u64,
    /// Our QPACK encoder's policy, for response heads. Its `table_bytes_max` defaults to 0:
    /// static table and literals only, and our encoder stream carries nothing.
    pub qpack_encoder: EncoderConfig,
    /// The longest `:path` (default 8 KiB); longer is answered 414.
    pub max_path_bytes: usize,
    /// The largest request body (default 16 MiB). A larger content-length, or more DATA, is
    /// answered 413 (or the stream reset with H3_REQUEST_CANCELLED if the response began).
    pub max_body_bytes: u64,
    /// Bytes a request stream may deliver while its field section is blocked on the QPACK
    /// encoder stream (default 64 KiB): they are kept until it is unblocked. More is a stream
    /// error H3_EXCESSIVE_LOAD.
    pub max_blocked_stream_bytes: usize,
    /// Advertise SETTINGS_ENABLE_CONNECT_PROTOCOL = 1 and accept the extended CONNECT of
    /// RFC 9220 (`:protocol`, WebSocket over HTTP/3) as a request whose `protocol` is set;
    /// its stream then carries a tunnel, with no body limit. Off by default; off,
    /// `:protocol` makes a request malformed.
    pub enable_connect_protocol: bool,
    /// Request streams reset by the peer, malformed, or refused, per `flood_window`
    /// (default 200): the rapid reset attack.
    pub max_resets_per_window: u32,
    /// Empty DATA frames per `flood_window` (default 100).
    pub max_empty_frames_per_window: u32,
    /// Frames of unknown or reserved types (grease, RFC 9114 §7.2.8) per `flood_window`,
    /// all streams together (default 1,000: a client greases a few per connection or
    /// request).
    pub max_unknown_frames_per_window: u32,
    /// GOAWAY and MAX_PUSH_ID frames on the peer's control stream per `flood_window`
    /// (default 100).
    pub max_control_frames_per_window: u32,
    /// QPACK insertions (with name reference, literal name, or duplicate) on the peer's
    /// encoder stream per `flood_window` (default 10,000); insertions of an entry with an
    /// empty name, which no field can use, count against `max_empty_frames_per_window`.
    pub max_qpack_inserts_per_window: u32,
    /// Unidirectional streams of unknown or reserved types read and discarded at once
    /// (default 4); one more is stopped (STOP_SENDING H3_STREAM_CREATION_ERROR, RFC 9114
    /// §6.2).
    pub max_unknown_uni_streams: usize,
    /// The window the flood counters count over (default 10 s).
    pub flood_window: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            max_field_section_size: 16 << 10,
            qpack_max_table_capacity: 4096,
            qpack_blocked_streams: 16,
            qpack_encoder: EncoderConfig::default(),
            max_path_bytes: 8 << 10,
            max_body_bytes: 16 << 20,
            max_blocked_stream_bytes: 64 << 10,
            enable_connect_protocol: false,
            max_resets_per_window: 200,
            max_empty_frames_per_window: 100,
            max_unknown_frames_per_window: 1000,
            max_control_frames_per_window: 100,
            max_qpack_inserts_per_window: 10_000,
            max_unknown_uni_streams: 4,
            flood_window: Duration::from_secs(10),
        }
    }
}

impl ServerConfig {
    /// The largest HEADERS payload a request stream buffers: room for a field section of
    /// `max_field_section_size` even if loosely encoded.
    pub(crate) fn headers_frame_bytes_max(&self) -> u64 {
        crate::FRAME_PAYLOAD_BYTES_DEFAULT.max(self.max_field_section_size.saturating_mul(2))
    }
}
