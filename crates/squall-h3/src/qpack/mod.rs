//! QPACK (RFC 9204): field compression for HTTP/3.
//!
//! QPACK is HPACK reworked for streams that arrive out of order. Each side's encoder keeps a
//! dynamic table that the peer's decoder mirrors, but insertions travel on a dedicated
//! unidirectional *encoder stream*, and field sections (HEADERS payloads) only reference
//! entries. A section names the insert count it needs (its Required Insert Count); one that
//! arrives before the insertions it references waits, *blocked*, up to the number of streams
//! the decoder allowed (SETTINGS_QPACK_BLOCKED_STREAMS). The decoder reports back on its own
//! *decoder stream*: sections decoded, streams cancelled, insertions received, which tells
//! the encoder which entries it may evict.
//!
//! - [`Decoder`]: our side of the peer's encoder. Fed the peer's encoder stream
//!   ([`Decoder::feed_encoder_stream`]) and field sections ([`Decoder::decode_section`]); its
//!   decoder stream bytes come from [`Decoder::take_decoder_stream`].
//! - [`Encoder`]: our side of the peer's decoder. Encodes field sections
//!   ([`Encoder::encode_section`]), writing insertions to its encoder stream
//!   ([`Encoder::take_encoder_stream`]), and follows the peer's decoder stream
//!   ([`Encoder::feed_decoder_stream`]). Its dynamic table is off unless configured
//!   ([`EncoderConfig::table_bytes_max`]) and the peer allows one.
//! - The wire layer as values, for tests and tools: [`EncoderInstruction`],
//!   [`DecoderInstruction`], [`SectionPrefix`] and [`FieldLine`].
//!
//! Errors ([`QpackError`]) carry the code RFC 9204 §6 gives them: QPACK_DECOMPRESSION_FAILED
//! for a field section, QPACK_ENCODER_STREAM_ERROR and QPACK_DECODER_STREAM_ERROR for the two
//! streams; all close the connection. A field section over the caller's size limit is not a
//! QPACK error (the tables stay in step): only that request is refused.

mod decoder;
mod encoder;
mod field_line;
mod instruction;
mod prefix;
mod static_table;
mod table;

pub use decoder::{Decoder, Decoding, Section};
pub use encoder::{Encoder, EncoderConfig};
pub use field_line::{FieldLine, SectionPrefix};
pub use instruction::{DecoderInstruction, EncoderInstruction, TableRef};
pub use prefix::INTEGER_MAX;
pub use squall_hpack::Field;
pub use squall_hpack::Indexing;
pub use static_table::STATIC_TABLE_LEN;

use crate::ErrorCode;

/// What each dynamic table entry, and each field of a section, costs beyond its name and
/// value (RFC 9204 §3.2.1, RFC 9114 §4.2.2).
pub const ENTRY_OVERHEAD_BYTES: u64 = 32;

/// The size of a table entry or field (RFC 9204 §3.2.1).
pub(crate) fn entry_size(name_len: usize, value_len: usize) -> u64 {
    name_len as u64 + value_len as u64 + ENTRY_OVERHEAD_BYTES
}

/// MaxEntries (RFC 9204 §4.5.1.1): the most entries a table of this maximum capacity holds.
pub fn max_entries(max_table_capacity: u64) -> u64 {
    max_table_capacity / ENTRY_OVERHEAD_BYTES
}

/// Why QPACK input was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum QpackError {
    /// A field section could not be decoded (RFC 9204 §6: QPACK_DECOMPRESSION_FAILED).
    #[error("QPACK_DECOMPRESSION_FAILED: {0}")]
    Decompression(&'static str),
    /// An encoder stream instruction could not be applied (QPACK_ENCODER_STREAM_ERROR).
    #[error("QPACK_ENCODER_STREAM_ERROR: {0}")]
    EncoderStream(&'static str),
    /// A decoder stream instruction could not be applied (QPACK_DECODER_STREAM_ERROR).
    #[error("QPACK_DECODER_STREAM_ERROR: {0}")]
    DecoderStream(&'static str),
    /// The field section is larger than the caller's limit, counted as RFC 9114 §4.2.2 does
    /// (names, values and 32 bytes per field). Not a connection error: the decoder stays in
    /// step, and only the request is refused (431, or a stream error
    /// [`ErrorCode::ExcessiveLoad`]).
    #[error("field section larger than {limit} bytes")]
    FieldSectionTooLarge { limit: u64 },
}

impl QpackError {
    /// The error code to close the connection (or, for
    /// [`QpackError::FieldSectionTooLarge`], to reset the stream) with.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Decompression(_) => ErrorCode::QpackDecompressionFailed,
            Self::EncoderStream(_) => ErrorCode::QpackEncoderStreamError,
            Self::DecoderStream(_) => ErrorCode::QpackDecoderStreamError,
            Self::FieldSectionTooLarge { .. } => ErrorCode::ExcessiveLoad,
        }
    }

    /// True for every error but [`QpackError::FieldSectionTooLarge`].
    pub fn is_connection_error(&self) -> bool {
        !matches!(self, Self::FieldSectionTooLarge { .. })
    }
}
