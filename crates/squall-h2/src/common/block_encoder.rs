//! Outgoing header blocks: our HPACK encoder, and the scratch buffer a block is encoded in
//! before it is split into HEADERS and CONTINUATION frames (RFC 9113 §4.3, §6.10).

use bytes::BytesMut;
use squall_hpack::Encoder;

use crate::encode::encode_headers;
use crate::frame::StreamId;

/// A scratch buffer grown past this by one huge head is not kept.
const BLOCK_BUF_BYTES_KEPT_MAX: usize = 16 * 1024;

/// Our side of HPACK, for a connection's outgoing header blocks.
#[derive(Debug)]
pub(crate) struct BlockEncoder {
    /// The encoder; its table size follows the peer's SETTINGS_HEADER_TABLE_SIZE.
    pub hpack: Encoder,
    /// Scratch for the block being encoded, kept across blocks.
    scratch: BytesMut,
}

impl BlockEncoder {
    pub(crate) fn new() -> Self {
        Self {
            hpack: Encoder::new(),
            scratch: BytesMut::new(),
        }
    }

    /// Encodes one header block, what `write` puts in it (through the HPACK encoder, whose
    /// blocks must reach the peer in encoding order), into `out` as HEADERS and CONTINUATION
    /// frames of at most `max_frame_size` bytes.
    #[inline]
    pub(crate) fn encode(
        &mut self,
        out: &mut BytesMut,
        id: StreamId,
        end_stream: bool,
        max_frame_size: u32,
        write: impl FnOnce(&mut Encoder, &mut BytesMut),
    ) {
        write(&mut self.hpack, &mut self.scratch);
        encode_headers(out, id, end_stream, &self.scratch, max_frame_size);
        self.scratch.clear();
        if self.scratch.capacity() > BLOCK_BUF_BYTES_KEPT_MAX {
            self.scratch = BytesMut::new();
        }
    }
}
