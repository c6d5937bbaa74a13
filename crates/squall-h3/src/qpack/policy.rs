//! Which fields the encoder inserts into the dynamic table (RFC 9204 leaves it to us).
//!
//! The same choices as squall-hpack's encoder, for the same reasons:
//!
//! - **Never indexed** (the N bit, RFC 9204 §4.5.4, also for intermediaries after us):
//!   `authorization`, `proxy-authorization`, `cookie` values under 20 bytes (short secrets in
//!   a shared compression context can be guessed from the compressed size; RFC 9204 §7.1),
//!   and every field the caller marks sensitive.
//! - **Not inserted**: fields whose value changes nearly every time (`:path`, `age`,
//!   `content-length`, `content-range`, `date`, `etag`, `expires`, `if-modified-since`,
//!   `if-none-match`, `last-modified`, `location`, `set-cookie`), and any field larger than
//!   3/4 of the table, which would evict almost everything for one entry.
//! - **Inserted**: everything else, when the table has room for it.
//!
//! [`Indexing::All`] inserts every field that fits and is not sensitive.

use super::entry_size;

/// How the encoder chooses fields for the dynamic table; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Indexing {
    /// Skip volatile and sensitive fields (the default).
    #[default]
    Selective,
    /// Insert every field that fits and is not sensitive.
    All,
}

/// What to do with a field the tables do not hold whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Insert it, if the table has room.
    Index,
    /// Send it as a literal.
    DontIndex,
    /// Send it as a literal with the N bit.
    NeverIndex,
}

/// Cookies shorter than this are never indexed.
const COOKIE_INDEXED_BYTES_MIN: usize = 20;

/// Names whose values change too often to be worth a table entry.
const VOLATILE_NAMES: &[&[u8]] = &[
    b":path",
    b"age",
    b"content-length",
    b"content-range",
    b"date",
    b"etag",
    b"expires",
    b"if-modified-since",
    b"if-none-match",
    b"last-modified",
    b"location",
    b"set-cookie",
];

/// Decides how to send `name: value`.
pub(crate) fn decide(
    indexing: Indexing,
    name: &[u8],
    value: &[u8],
    sensitive: bool,
    capacity: u64,
) -> Decision {
    let secret = matches!(name, b"authorization" | b"proxy-authorization")
        || (name == b"cookie" && value.len() < COOKIE_INDEXED_BYTES_MIN);
    if sensitive || secret {
        return Decision::NeverIndex;
    }
    match indexing {
        Indexing::All => Decision::Index,
        Indexing::Selective => {
            let large = entry_size(name.len(), value.len()) * 4 > capacity * 3;
            if large || VOLATILE_NAMES.contains(&name) {
                Decision::DontIndex
            } else {
                Decision::Index
            }
        }
    }
}
