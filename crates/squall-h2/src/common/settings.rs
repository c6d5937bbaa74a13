//! The SETTINGS exchange (RFC 9113 §6.5) as both roles run it: the peer's values that
//! shape our output (frame size, initial stream window, the HPACK table our encoder keeps
//! to) and our own, which bind the peer once it acknowledges them (§6.5.3). Each role
//! acts on what a setting changes for its streams, and decides the settings whose meaning
//! differs by role (ENABLE_PUSH, MAX_CONCURRENT_STREAMS, ENABLE_CONNECT_PROTOCOL).

use bytes::BytesMut;
use squall_hpack::{DYNAMIC_TABLE_BYTES_DEFAULT, Decoder, Encoder, FieldSpan};

use super::block_encoder::BlockEncoder;
use super::send::{SendHalf, shift_windows};
use crate::frame::{FRAME_PAYLOAD_BYTES_DEFAULT, SettingId, StreamId, WINDOW_BYTES_INITIAL};

/// What applying one setting asks of the role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Applied {
    /// Nothing: taken here, or one that neither role acts on (SETTINGS_MAX_HEADER_LIST_SIZE
    /// is advisory, §6.5.2; RFC 7540 priorities are never sent).
    Done,
    /// A new SETTINGS_INITIAL_WINDOW_SIZE moved every stream's send window; `grew`: up, so
    /// streams that waited for window may send.
    SendWindows { grew: bool },
    /// One whose meaning differs by role: ENABLE_PUSH, MAX_CONCURRENT_STREAMS or
    /// ENABLE_CONNECT_PROTOCOL.
    Role,
}

/// The reason of the FLOW_CONTROL_ERROR when a new initial window takes a stream's send
/// window above 2^31-1 (§6.9.2).
pub(crate) const WINDOW_OVERFLOW: &str = "SETTINGS_INITIAL_WINDOW_SIZE overflows a stream window";

/// Both sides' settings, and the HPACK state they size.
#[derive(Debug)]
pub(crate) struct SettingsState {
    /// Our SETTINGS_INITIAL_WINDOW_SIZE.
    local_initial_window: u32,
    /// Our SETTINGS_HEADER_TABLE_SIZE: the decoder's table limit once acknowledged.
    local_header_table_size: u32,
    /// The peer acknowledged our SETTINGS, so our values bind it (§6.5.3).
    acked: bool,
    /// Our HPACK decoder, for the peer's header blocks.
    hpack_in: Decoder,
    /// The peer's SETTINGS_MAX_FRAME_SIZE.
    pub(crate) peer_max_frame_size: u32,
    /// The peer's SETTINGS_INITIAL_WINDOW_SIZE: a new stream's send window.
    pub(crate) peer_initial_window: u32,
    /// Our HPACK encoder, for our header blocks; its table follows the peer's
    /// SETTINGS_HEADER_TABLE_SIZE.
    block_encoder: BlockEncoder,
}

impl SettingsState {
    /// Before any SETTINGS either way: the peer's values are the defaults, and ours are
    /// the ones we announce.
    pub(crate) fn new(local_initial_window: u32, local_header_table_size: u32) -> Self {
        let mut hpack_in = Decoder::new(DYNAMIC_TABLE_BYTES_DEFAULT);
        // Until the peer acknowledges, it may use either the default or our value (§6.5.3).
        hpack_in.set_max_table_size_limit(
            DYNAMIC_TABLE_BYTES_DEFAULT.max(local_header_table_size as usize),
        );
        Self {
            local_initial_window,
            local_header_table_size,
            acked: false,
            hpack_in,
            peer_max_frame_size: FRAME_PAYLOAD_BYTES_DEFAULT,
            peer_initial_window: WINDOW_BYTES_INITIAL,
            block_encoder: BlockEncoder::new(),
        }
    }

    /// The receive window a new stream starts with: until the peer acknowledges our
    /// SETTINGS it may still use the default, so the larger of the two (§6.5.3).
    pub(crate) fn local_initial_window(&self) -> i64 {
        let ours = self.local_initial_window;
        match self.acked {
            true => i64::from(ours),
            false => i64::from(ours.max(WINDOW_BYTES_INITIAL)),
        }
    }

    /// Applies one of the peer's settings. A new initial window changes every stream's send
    /// window, `sends`, by the difference, possibly below zero (§6.9.2); `Err` with
    /// [`WINDOW_OVERFLOW`] when one goes above 2^31-1, a connection FLOW_CONTROL_ERROR.
    pub(crate) fn apply<'a>(
        &mut self,
        id: SettingId,
        value: u32,
        sends: impl Iterator<Item = &'a mut SendHalf>,
    ) -> Result<Applied, &'static str> {
        match id {
            SettingId::HeaderTableSize => {
                (self.block_encoder.hpack).set_max_table_size(value as usize);
            }
            SettingId::InitialWindowSize => {
                let delta = i64::from(value) - i64::from(self.peer_initial_window);
                self.peer_initial_window = value;
                if shift_windows(sends, delta) {
                    return Err(WINDOW_OVERFLOW);
                }
                return Ok(Applied::SendWindows { grew: delta > 0 });
            }
            SettingId::MaxFrameSize => self.peer_max_frame_size = value,
            // The header list limit is advisory (§6.5.2): what we send comes from a peer
            // on the other side that kept to a similar one. RFC 7540 priorities are
            // neither sent nor followed, whatever the peer says.
            SettingId::MaxHeaderListSize | SettingId::NoRfc7540Priorities => {}
            SettingId::EnablePush
            | SettingId::MaxConcurrentStreams
            | SettingId::EnableConnectProtocol => return Ok(Applied::Role),
        }
        Ok(Applied::Done)
    }

    /// The peer acknowledged our SETTINGS, which now bind it (§6.5.3): the HPACK table limit
    /// and the streams' receive windows, `recvs`, tighten to what we announced, if that is
    /// below the defaults. A repeated ACK changes nothing.
    pub(crate) fn on_ack<'a>(&mut self, recvs: impl Iterator<Item = &'a mut i64>) {
        if self.acked {
            return;
        }
        let loose = self.local_initial_window();
        self.acked = true;
        let delta = self.local_initial_window() - loose;
        for window in recvs {
            *window += delta;
        }
        (self.hpack_in).set_max_table_size_limit(self.local_header_table_size as usize);
    }

    /// Decodes a header block of the peer's into `bytes` and `spans`: `Ok(false)` when the
    /// list is over `limit`, our SETTINGS_MAX_HEADER_LIST_SIZE (the decoder is still in
    /// step); `Err`, the reason of a connection COMPRESSION_ERROR (§4.3).
    #[inline]
    pub(crate) fn decode_block(
        &mut self,
        block: &[u8],
        limit: usize,
        bytes: &mut BytesMut,
        spans: &mut Vec<FieldSpan>,
    ) -> Result<bool, &'static str> {
        match self.hpack_in.decode_spans(block, limit, bytes, spans) {
            Ok(()) => Ok(true),
            Err(error) if error.is_compression_error() => Err("HPACK block cannot be decoded"),
            Err(_) => Ok(false),
        }
    }

    /// Encodes one header block into `out` as HEADERS and CONTINUATION frames within the
    /// peer's max frame size: what `write` puts in it through our HPACK encoder.
    #[inline]
    pub(crate) fn encode_block(
        &mut self,
        out: &mut BytesMut,
        id: StreamId,
        end_stream: bool,
        write: impl FnOnce(&mut Encoder, &mut BytesMut),
    ) {
        let max = self.peer_max_frame_size;
        (self.block_encoder).encode(out, id, end_stream, max, write);
    }

    /// Encodes `fields`, in order and through the HPACK table, as one header block.
    #[inline]
    pub(crate) fn encode_fields<'a>(
        &mut self,
        out: &mut BytesMut,
        id: StreamId,
        end_stream: bool,
        fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    ) {
        self.encode_block(out, id, end_stream, |hpack, block| {
            hpack.encode(fields.map(|(n, v)| (n, v, false)), block);
        });
    }
}
