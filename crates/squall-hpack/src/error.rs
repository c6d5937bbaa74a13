//! Decoding errors.
//!
//! Every error is the peer's fault, and all but one are COMPRESSION_ERROR: the decoder could
//! not follow the encoder's dynamic table, so every later block on the connection would
//! decode wrong, and RFC 9113 §4.3 requires a connection error. The decoder is poisoned and
//! keeps returning the same error.
//!
//! The exception is [`DecodeError::HeaderListTooLarge`]: the decoder stopped handing out
//! fields but read the block to its end and updated its table, so it is still in step with
//! the encoder. The connection survives; only the stream is refused (RFC 9113 §8.2.2 allows a
//! 431, or RST_STREAM).

/// Why a header block was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum DecodeError {
    /// The block ends inside a representation (RFC 7541 §5.1, §5.2).
    #[error("HPACK block ends inside a field representation")]
    Truncated,
    /// An integer above [`crate::INTEGER_MAX`] or with too many continuation bytes
    /// (RFC 7541 §5.1).
    #[error("HPACK integer too large")]
    IntegerOverflow,
    /// Index 0, or an index past the end of the dynamic table (RFC 7541 §2.3.3, §6.1).
    #[error("HPACK index {0} is not in the tables")]
    InvalidIndex(u32),
    /// A Huffman-coded string contains EOS (RFC 7541 §5.2).
    #[error("HPACK Huffman string contains EOS")]
    HuffmanEos,
    /// A Huffman-coded string ends with more than 7 bits of padding (RFC 7541 §5.2).
    #[error("HPACK Huffman padding longer than 7 bits")]
    HuffmanPaddingTooLong,
    /// A Huffman-coded string ends with padding that is not all ones (RFC 7541 §5.2).
    #[error("HPACK Huffman padding is not a prefix of EOS")]
    HuffmanPaddingNotOnes,
    /// A dynamic table size update after the first field of a block (RFC 7541 §4.2).
    #[error("HPACK dynamic table size update after a field")]
    SizeUpdateNotAtStart,
    /// A dynamic table size update above our SETTINGS_HEADER_TABLE_SIZE (RFC 7541 §6.3).
    #[error("HPACK dynamic table size update to {size} bytes, above the limit of {limit}")]
    SizeUpdateOverLimit { size: u32, limit: usize },
    /// We lowered SETTINGS_HEADER_TABLE_SIZE below the table's size and the next block did not
    /// start with a size update that fits the new limit (RFC 7541 §4.2).
    #[error("HPACK block does not start with the size update our lowered limit requires")]
    SizeUpdateMissing,
    /// The header list exceeds the caller's `max_header_list_size` (RFC 9113 §6.5.2: names,
    /// values and 32 bytes per field). Not a compression error: see the module docs.
    #[error("HPACK header list larger than {limit} bytes")]
    HeaderListTooLarge { limit: usize },
}

impl DecodeError {
    /// True for every error but [`DecodeError::HeaderListTooLarge`]: the connection must end
    /// with GOAWAY(COMPRESSION_ERROR) (RFC 9113 §4.3).
    pub fn is_compression_error(&self) -> bool {
        !matches!(self, Self::HeaderListTooLarge { .. })
    }

    /// A short fixed name, for metric labels and logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Truncated => "truncated",
            Self::IntegerOverflow => "integer_overflow",
            Self::InvalidIndex(_) => "invalid_index",
            Self::HuffmanEos => "huffman_eos",
            Self::HuffmanPaddingTooLong => "huffman_padding_too_long",
            Self::HuffmanPaddingNotOnes => "huffman_padding_not_ones",
            Self::SizeUpdateNotAtStart => "size_update_not_at_start",
            Self::SizeUpdateOverLimit { .. } => "size_update_over_limit",
            Self::SizeUpdateMissing => "size_update_missing",
            Self::HeaderListTooLarge { .. } => "header_list_too_large",
        }
    }
}
