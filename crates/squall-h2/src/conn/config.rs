//! What a server connection advertises and enforces: [`ServerConfig`] and its defaults.
//!
//! The defaults follow the Squall config's `limits.*` defaults where one exists (header list,
//! path, body) and otherwise what nginx, h2o and the `h2` crate ship with, tightened where a
//! proxy gains nothing from slack (flood budgets).

use std::time::Duration;

use crate::common::block::block_bytes_max;
use crate::frame::{FRAME_PAYLOAD_BYTES_DEFAULT, FRAME_PAYLOAD_BYTES_LIMIT, WINDOW_BYTES_MAX};

/// Settings and limits of one server connection. Every limit is per connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Our SETTINGS_MAX_CONCURRENT_STREAMS (default 128). A HEADERS that would open one more
    /// stream is refused with RST_STREAM(REFUSED_STREAM), which the client may retry.
    pub max_concurrent_streams: u32,
    /// Our SETTINGS_INITIAL_WINDOW_SIZE, the receive window of each request body
    /// (default 1 MiB), at most 2^31-1.
    pub initial_window_size: u32,
    /// Our connection receive window (default 16 MiB): a WINDOW_UPDATE on stream 0 right
    /// after our SETTINGS raises it from 65,535 (RFC 9113 §6.9.2 gives SETTINGS no say).
    pub connection_window_size: u32,
    /// Our SETTINGS_MAX_FRAME_SIZE (default 16,384), clamped to 16,384..=16,777,215.
    pub max_frame_size: u32,
    /// Our SETTINGS_MAX_HEADER_LIST_SIZE (default 16 KiB, `limits.header_bytes_max`). A
    /// larger request head is answered 431 by the connection.
    pub max_header_list_size: u32,
    /// Our SETTINGS_HEADER_TABLE_SIZE, the HPACK table the peer may make us keep
    /// (default 4,096).
    pub header_table_size: u32,
    /// The longest `:path` (default 8 KiB, `limits.uri_bytes_max`); longer is answered 414.
    pub max_path_bytes: usize,
    /// The largest request body (default 16 MiB, `limits.body_bytes_max`). A larger
    /// content-length, or more DATA, is answered 413 (or reset if the response has begun).
    pub max_body_bytes: u64,
    /// Streams reset by the peer, refused by us or reset by us for a malformed request, per
    /// `flood_window` (default 200): the rapid reset attack, CVE-2023-44487.
    pub max_resets_per_window: u32,
    /// SETTINGS, PING, PRIORITY, PRIORITY_UPDATE, RST_STREAM and useless WINDOW_UPDATE frames
    /// received per `flood_window` (default 1,000; CVE-2019-9512, -9515, -9513). Also the
    /// budget of tiny WINDOW_UPDATEs (CVE-2019-9511, data dribble): see the crate docs.
    pub max_control_frames_per_window: u32,
    /// DATA frames with no data and no END_STREAM, and empty HEADERS or CONTINUATION
    /// fragments, per `flood_window` (default 100; CVE-2019-9518).
    pub max_empty_frames_per_window: u32,
    /// CONTINUATION frames in one header block (default 32). The block's bytes are bounded
    /// too, by twice `max_header_list_size` (at least one frame's worth).
    pub max_continuation_frames: u32,
    /// The window the flood counters count over (default 10 s).
    pub flood_window: Duration,
    /// How long a stream may have response data queued and no send window before it is
    /// reset with CANCEL, and the connection window may stay closed with data queued before
    /// the connection ends (default 30 s).
    pub stall_timeout: Duration,
    /// Bytes of frames queued in answer to the peer's (SETTINGS and PING ACKs, RST_STREAM,
    /// WINDOW_UPDATE) that the peer has not read yet (default 64 KiB; CVE-2019-9512,
    /// -9515, -9514).
    pub max_queued_output_bytes: usize,
    /// Advertise SETTINGS_ENABLE_CONNECT_PROTOCOL = 1 and accept the extended CONNECT of
    /// RFC 8441 §4 (`:protocol`, WebSocket over HTTP/2) as a [`crate::Request`] whose
    /// `protocol` is set; its stream then carries a tunnel, with no body limit. Off by
    /// default: only an application that runs tunnels should say it does (Squall turns it
    /// on). Off, `:protocol` makes a request malformed.
    pub enable_connect_protocol: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            max_concurrent_streams: 128,
            initial_window_size: 1 << 20,
            connection_window_size: 16 << 20,
            max_frame_size: FRAME_PAYLOAD_BYTES_DEFAULT,
            max_header_list_size: 16 << 10,
            header_table_size: 4096,
            max_path_bytes: 8 << 10,
            max_body_bytes: 16 << 20,
            max_resets_per_window: 200,
            max_control_frames_per_window: 1000,
            max_empty_frames_per_window: 100,
            max_continuation_frames: 32,
            flood_window: Duration::from_secs(10),
            stall_timeout: Duration::from_secs(30),
            max_queued_output_bytes: 64 << 10,
            enable_connect_protocol: false,
        }
    }
}

impl ServerConfig {
    /// The config with every value brought into the range RFC 9113 allows, so the rest of
    /// the connection can rely on it.
    pub(crate) fn sanitized(mut self) -> Self {
        self.initial_window_size = self.initial_window_size.min(WINDOW_BYTES_MAX);
        // Below 65,535 the connection window could not be raised by a WINDOW_UPDATE.
        self.connection_window_size = self
            .connection_window_size
            .clamp(crate::WINDOW_BYTES_INITIAL, WINDOW_BYTES_MAX);
        self.max_frame_size = self
            .max_frame_size
            .clamp(FRAME_PAYLOAD_BYTES_DEFAULT, FRAME_PAYLOAD_BYTES_LIMIT);
        self.max_concurrent_streams = self.max_concurrent_streams.max(1);
        self
    }

    /// The most bytes one header block (HEADERS and its CONTINUATIONs) may carry before it
    /// is a flood ([`block_bytes_max`]).
    pub(crate) fn header_block_bytes_max(&self) -> usize {
        block_bytes_max(self.max_header_list_size, self.max_frame_size)
    }
}
