//! squall-hpack: HPACK header compression for HTTP/2 (RFC 7541), sans-IO.
//!
//! An HTTP/2 connection has two independent compression contexts: our [`Decoder`] follows the
//! peer's encoder, our [`Encoder`] is followed by the peer's decoder. Each keeps a dynamic
//! table that the other side mirrors, so every block must be processed once, in the order of
//! the connection, and a decoding error (except [`DecodeError::HeaderListTooLarge`]) ends the
//! connection with COMPRESSION_ERROR (RFC 9113 §4.3).
//!
//! - Integers (§5.1) and strings (§5.2) are in `integer` and [`huffman`]; Huffman decoding is
//!   a 4-bits-per-step state machine built at compile time, with no per-bit loop.
//! - The decoder writes a block's fields into one buffer, with a [`FieldSpan`] per field
//!   ([`Decoder::decode_spans`]): a field from a table is copied into it, a literal decoded
//!   into it, and nothing is allocated per field but a new dynamic table entry (one
//!   allocation for its name and value).
//! - The decoder bounds its work and memory by the caller's header list limit (RFC 9113
//!   §6.5.2), checked before emitting or allocating each field: see [`Decoder`].
//! - The encoder's indexing policy is in [`Indexing`].
//!
//! # Limits
//!
//! - Header list: the caller's `max_header_list_size` per block, counted as RFC 9113 §6.5.2
//!   does, before a field is emitted or its strings allocated. There is no separate string
//!   limit: a string is bounded by what is left of that budget, or, for a literal with
//!   incremental indexing (which must reach the table whatever the budget), by the block.
//! - Dynamic table: [`DYNAMIC_TABLE_BYTES_DEFAULT`] to start; the decoder refuses size updates
//!   above [`Decoder::set_max_table_size_limit`], the encoder never uses more than
//!   [`EncoderConfig::table_bytes_max`].
//! - Integers: at most [`INTEGER_MAX`], in at most five continuation bytes.
//!
//! # Example
//!
//! ```
//! use bytes::BytesMut;
//! use squall_hpack::{DYNAMIC_TABLE_BYTES_DEFAULT, Decoder, Encoder};
//!
//! let mut encoder = Encoder::new();
//! let mut decoder = Decoder::new(DYNAMIC_TABLE_BYTES_DEFAULT);
//! let mut block = BytesMut::new();
//! encoder.encode(
//!     [
//!         (&b":status"[..], &b"200"[..], false),
//!         (b"content-type", b"text/html", false),
//!         (b"set-cookie", b"session=secret", true),
//!     ],
//!     &mut block,
//! );
//! let fields = decoder.decode_to_vec(&block, 16 * 1024).unwrap();
//! assert_eq!(fields[1].name, "content-type");
//! assert_eq!(fields[1].value, "text/html");
//! assert!(fields[2].sensitive);
//! ```

#![forbid(unsafe_code)]

mod decoder;
mod encoder;
mod error;
pub mod huffman;
mod integer;
mod static_table;

use bytes::Bytes;

pub use decoder::{Decoder, FieldSpan};
pub use encoder::policy::{Decision, Indexing, decide};
pub use encoder::{Encoder, EncoderConfig, encode_static};
pub use error::DecodeError;
pub use integer::INTEGER_MAX;
pub use static_table::STATIC_TABLE_LEN;

/// The dynamic table size both sides start with in HTTP/2: the initial value of
/// SETTINGS_HEADER_TABLE_SIZE (RFC 9113 §6.5.2).
pub const DYNAMIC_TABLE_BYTES_DEFAULT: usize = 4096;

/// What each table entry, and each field of a header list, costs beyond its name and value
/// (RFC 7541 §4.1, RFC 9113 §6.5.2): an estimate of an implementation's per-entry overhead.
pub const ENTRY_OVERHEAD_BYTES: usize = 32;

/// A decoded field. `name` and `value` are slices of the block's one buffer of decoded
/// fields; cloning a `Field` copies no bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Field {
    pub name: Bytes,
    pub value: Bytes,
    /// Sent as "literal never indexed" (RFC 7541 §6.2.3): a proxy re-encoding the field must
    /// send it never-indexed too, and should not log its value.
    pub sensitive: bool,
}

impl Field {
    /// The field's size as HPACK and SETTINGS_MAX_HEADER_LIST_SIZE count it: name, value and
    /// [`ENTRY_OVERHEAD_BYTES`] (RFC 7541 §4.1, RFC 9113 §6.5.2).
    pub fn size(&self) -> usize {
        entry_size(self.name.len(), self.value.len())
    }
}

/// The size of a table entry or header list field (RFC 7541 §4.1).
pub(crate) fn entry_size(name_len: usize, value_len: usize) -> usize {
    name_len + value_len + ENTRY_OVERHEAD_BYTES
}
