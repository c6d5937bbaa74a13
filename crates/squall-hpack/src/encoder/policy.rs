//! Which fields the encoder adds to the dynamic table (RFC 7541 §6.2 leaves it to us). The
//! QPACK encoder of squall-h3 asks the same [`decide`]: the same fields pay off there.
//!
//! Indexing a field costs a table slot and evicts older entries; it pays off only when the
//! same name *and value* come again on the connection. The default, [`Indexing::Selective`],
//! follows nghttp2's choices, adjusted for a caching proxy:
//!
//! - **Never indexed** (§6.2.3, also for intermediaries after us): `authorization`,
//!   `proxy-authorization`, and `cookie` values under 20 bytes. Short secrets in a shared
//!   compression context can be guessed byte by byte from the compressed size (CRIME; RFC 7541
//!   §7.1.3 names exactly these fields). Fields the caller marks sensitive, always.
//! - **Not indexed** (§6.2.2): fields whose value is different nearly every time, so an entry
//!   would only push useful ones out: `:path`, `age`, `content-length`, `content-range`, `date`,
//!   `etag`, `expires`, `if-modified-since`, `if-none-match`, `last-modified`, `location`,
//!   `set-cookie`. `date` is among them because a cache answers with each stored response's
//!   own `Date`, which is rarely the same on two consecutive responses. Also any field larger
//!   than 3/4 of the table, which would evict almost everything for one entry.
//! - **Indexed** (§6.2.1): everything else: `:authority`, `:status`, `content-type`,
//!   `cache-control`, `server`, `vary`, `user-agent`, `accept-*`, long cookies and so on.
//!
//! Exact matches already in a table are sent as an index whatever the policy says (unless
//! never-indexed), so `:path: /` still costs one byte.
//!
//! [`Indexing::All`] indexes every field that fits in the table: what the encoder of RFC 7541
//! Appendix C does, which the tests reproduce byte for byte.

use crate::entry_size;

/// How the encoder chooses fields for the dynamic table; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Indexing {
    /// Skip volatile and sensitive fields (the default).
    #[default]
    Selective,
    /// Index every field that fits, like RFC 7541 Appendix C.
    All,
}

/// The representation chosen for a field that is not sent as an index (QPACK's encoder,
/// squall-h3's, makes the same choice: insert, literal, or literal with the N bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Literal with incremental indexing (§6.2.1).
    Index,
    /// Literal without indexing (§6.2.2).
    DontIndex,
    /// Literal never indexed (§6.2.3).
    NeverIndex,
}

/// Cookies shorter than this are never indexed: see the module documentation.
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

/// Decides how to send `name: value` when the tables have no exact match for it.
pub fn decide(
    indexing: Indexing,
    name: &[u8],
    value: &[u8],
    sensitive: bool,
    table_max_size: usize,
) -> Decision {
    if sensitive {
        return Decision::NeverIndex;
    }
    let size = entry_size(name.len(), value.len());
    match indexing {
        Indexing::All if size <= table_max_size => Decision::Index,
        Indexing::All => Decision::DontIndex,
        Indexing::Selective => selective(name, value, size, table_max_size),
    }
}

fn selective(name: &[u8], value: &[u8], size: usize, table_max_size: usize) -> Decision {
    if is_secret(name, value) {
        Decision::NeverIndex
    } else if VOLATILE_NAMES.contains(&name) || size > table_max_size / 4 * 3 {
        Decision::DontIndex
    } else {
        Decision::Index
    }
}

/// Whether a field is sent never-indexed even when a table holds it exactly. The same answer
/// as `decide(..) == NeverIndex`, without the rest of the work: it runs for every field.
pub(crate) fn is_never_indexed(
    indexing: Indexing,
    name: &[u8],
    value: &[u8],
    sensitive: bool,
) -> bool {
    sensitive || (indexing == Indexing::Selective && is_secret(name, value))
}

fn is_secret(name: &[u8], value: &[u8]) -> bool {
    match name {
        b"authorization" | b"proxy-authorization" => true,
        b"cookie" => value.len() < COOKIE_INDEXED_BYTES_MIN,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: usize = 4096;

    #[test]
    fn selective_policy() {
        let d = |name: &str, value: &str| {
            decide(
                Indexing::Selective,
                name.as_bytes(),
                value.as_bytes(),
                false,
                TABLE,
            )
        };
        assert_eq!(
            d("authorization", "Basic Zm9vOmJhcg=="),
            Decision::NeverIndex
        );
        assert_eq!(d("cookie", "sid=1234"), Decision::NeverIndex);
        assert_eq!(d("cookie", "sid=0123456789abcdef0123"), Decision::Index);
        assert_eq!(d(":path", "/a"), Decision::DontIndex);
        assert_eq!(
            d("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
            Decision::DontIndex
        );
        assert_eq!(d("content-length", "12"), Decision::DontIndex);
        assert_eq!(d(":authority", "example.com"), Decision::Index);
        assert_eq!(d("user-agent", &"x".repeat(3000)), Decision::Index);
        assert_eq!(d("user-agent", &"x".repeat(3100)), Decision::DontIndex);
    }

    #[test]
    fn sensitive_is_always_never_indexed() {
        for indexing in [Indexing::Selective, Indexing::All] {
            assert_eq!(
                decide(indexing, b"x", b"y", true, TABLE),
                Decision::NeverIndex
            );
            assert!(is_never_indexed(indexing, b"x", b"y", true));
        }
    }

    #[test]
    fn is_never_indexed_agrees_with_decide() {
        let cases: [(&[u8], &[u8]); 5] = [
            (b"authorization", b"x"),
            (b"cookie", b"short"),
            (b"cookie", b"long enough to be indexed"),
            (b":path", b"/"),
            (b"x", b"y"),
        ];
        for indexing in [Indexing::Selective, Indexing::All] {
            for (name, value) in cases {
                for sensitive in [false, true] {
                    let decided = decide(indexing, name, value, sensitive, TABLE);
                    let never = is_never_indexed(indexing, name, value, sensitive);
                    assert_eq!(never, decided == Decision::NeverIndex);
                }
            }
        }
    }

    #[test]
    fn all_indexes_what_fits() {
        let d = |value: &[u8]| decide(Indexing::All, b"date", value, false, 100);
        assert_eq!(d(&[b'x'; 64]), Decision::Index);
        assert_eq!(d(&[b'x'; 65]), Decision::DontIndex);
    }
}
