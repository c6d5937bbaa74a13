//! The static table (RFC 7541 §2.3.1, Appendix A): 61 fields every peer knows, at indices
//! 1 to 61, before the dynamic table's entries.
//!
//! The entries are `Bytes::from_static`, so the decoder hands out a field taken from here
//! without allocating or touching a reference count. The encoder looks it up by name with a `match`, which the
//! compiler turns into a switch on length followed by a few comparisons.

use bytes::Bytes;

/// The number of entries; dynamic table indices start after it (RFC 7541 §2.3.3).
pub const STATIC_TABLE_LEN: usize = 61;

/// Appendix A, in order: index `i` is `STATIC_TABLE[i - 1]`.
pub(crate) static STATIC_TABLE: [(Bytes, Bytes); STATIC_TABLE_LEN] = [
    entry(b":authority", b""),
    entry(b":method", b"GET"),
    entry(b":method", b"POST"),
    entry(b":path", b"/"),
    entry(b":path", b"/index.html"),
    entry(b":scheme", b"http"),
    entry(b":scheme", b"https"),
    entry(b":status", b"200"),
    entry(b":status", b"204"),
    entry(b":status", b"206"),
    entry(b":status", b"304"),
    entry(b":status", b"400"),
    entry(b":status", b"404"),
    entry(b":status", b"500"),
    entry(b"accept-charset", b""),
    entry(b"accept-encoding", b"gzip, deflate"),
    entry(b"accept-language", b""),
    entry(b"accept-ranges", b""),
    entry(b"accept", b""),
    entry(b"access-control-allow-origin", b""),
    entry(b"age", b""),
    entry(b"allow", b""),
    entry(b"authorization", b""),
    entry(b"cache-control", b""),
    entry(b"content-disposition", b""),
    entry(b"content-encoding", b""),
    entry(b"content-language", b""),
    entry(b"content-length", b""),
    entry(b"content-location", b""),
    entry(b"content-range", b""),
    entry(b"content-type", b""),
    entry(b"cookie", b""),
    entry(b"date", b""),
    entry(b"etag", b""),
    entry(b"expect", b""),
    entry(b"expires", b""),
    entry(b"from", b""),
    entry(b"host", b""),
    entry(b"if-match", b""),
    entry(b"if-modified-since", b""),
    entry(b"if-none-match", b""),
    entry(b"if-range", b""),
    entry(b"if-unmodified-since", b""),
    entry(b"last-modified", b""),
    entry(b"link", b""),
    entry(b"location", b""),
    entry(b"max-forwards", b""),
    entry(b"proxy-authenticate", b""),
    entry(b"proxy-authorization", b""),
    entry(b"range", b""),
    entry(b"referer", b""),
    entry(b"refresh", b""),
    entry(b"retry-after", b""),
    entry(b"server", b""),
    entry(b"set-cookie", b""),
    entry(b"strict-transport-security", b""),
    entry(b"transfer-encoding", b""),
    entry(b"user-agent", b""),
    entry(b"vary", b""),
    entry(b"via", b""),
    entry(b"www-authenticate", b""),
];

const fn entry(name: &'static [u8], value: &'static [u8]) -> (Bytes, Bytes) {
    (Bytes::from_static(name), Bytes::from_static(value))
}

/// What the static table holds for a field, as the encoder wants to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StaticMatch {
    /// The exact field is at this index.
    Field(usize),
    /// The name is at this index (its first entry), with other values.
    Name(usize),
    None,
}

/// Finds `name: value` in the static table.
pub(crate) fn find(name: &[u8], value: &[u8]) -> StaticMatch {
    let Some((first, count)) = name_entries(name) else {
        return StaticMatch::None;
    };
    let entries = &STATIC_TABLE[first - 1..first - 1 + count];
    match entries.iter().position(|(_, v)| v == value) {
        Some(offset) => StaticMatch::Field(first + offset),
        None => StaticMatch::Name(first),
    }
}

/// The index of the first entry named `name` and how many entries have that name. Grouped by
/// length, so that the compiler switches on the length and then compares a few candidates,
/// rather than comparing against every name in turn. Long, but a table rather than logic; the
/// tests check it against [`STATIC_TABLE`].
fn name_entries(name: &[u8]) -> Option<(usize, usize)> {
    let found = match name.len() {
        3 => match name {
            b"age" => (21, 1),
            b"via" => (60, 1),
            _ => return None,
        },
        4 => match name {
            b"date" => (33, 1),
            b"etag" => (34, 1),
            b"from" => (37, 1),
            b"host" => (38, 1),
            b"link" => (45, 1),
            b"vary" => (59, 1),
            _ => return None,
        },
        5 => match name {
            b":path" => (4, 2),
            b"allow" => (22, 1),
            b"range" => (50, 1),
            _ => return None,
        },
        6 => match name {
            b"accept" => (19, 1),
            b"cookie" => (32, 1),
            b"expect" => (35, 1),
            b"server" => (54, 1),
            _ => return None,
        },
        7 => match name {
            b":method" => (2, 2),
            b":scheme" => (6, 2),
            b":status" => (8, 7),
            b"expires" => (36, 1),
            b"referer" => (51, 1),
            b"refresh" => (52, 1),
            _ => return None,
        },
        8 => match name {
            b"if-match" => (39, 1),
            b"if-range" => (42, 1),
            b"location" => (46, 1),
            _ => return None,
        },
        10 => match name {
            b":authority" => (1, 1),
            b"set-cookie" => (55, 1),
            b"user-agent" => (58, 1),
            _ => return None,
        },
        11 => match name {
            b"retry-after" => (53, 1),
            _ => return None,
        },
        12 => match name {
            b"content-type" => (31, 1),
            b"max-forwards" => (47, 1),
            _ => return None,
        },
        13 => match name {
            b"accept-ranges" => (18, 1),
            b"authorization" => (23, 1),
            b"cache-control" => (24, 1),
            b"content-range" => (30, 1),
            b"if-none-match" => (41, 1),
            b"last-modified" => (44, 1),
            _ => return None,
        },
        14 => match name {
            b"accept-charset" => (15, 1),
            b"content-length" => (28, 1),
            _ => return None,
        },
        15 => match name {
            b"accept-encoding" => (16, 1),
            b"accept-language" => (17, 1),
            _ => return None,
        },
        16 => match name {
            b"content-encoding" => (26, 1),
            b"content-language" => (27, 1),
            b"content-location" => (29, 1),
            b"www-authenticate" => (61, 1),
            _ => return None,
        },
        17 => match name {
            b"if-modified-since" => (40, 1),
            b"transfer-encoding" => (57, 1),
            _ => return None,
        },
        18 => match name {
            b"proxy-authenticate" => (48, 1),
            _ => return None,
        },
        19 => match name {
            b"content-disposition" => (25, 1),
            b"if-unmodified-since" => (43, 1),
            b"proxy-authorization" => (49, 1),
            _ => return None,
        },
        25 => match name {
            b"strict-transport-security" => (56, 1),
            _ => return None,
        },
        27 => match name {
            b"access-control-allow-origin" => (20, 1),
            _ => return None,
        },
        _ => return None,
    };
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_agrees_with_the_table_for_every_entry() {
        for (i, (name, value)) in STATIC_TABLE.iter().enumerate() {
            let index = i + 1;
            assert_eq!(find(name, value), StaticMatch::Field(index), "{index}");
            let first = STATIC_TABLE.iter().position(|(n, _)| n == name).unwrap() + 1;
            assert_eq!(
                find(name, b"\0not a value"),
                StaticMatch::Name(first),
                "{index}"
            );
        }
        assert_eq!(find(b"x-custom", b""), StaticMatch::None);
        assert_eq!(
            find(b"Accept", b""),
            StaticMatch::None,
            "names are case-sensitive"
        );
    }

    #[test]
    fn names_of_one_entry_are_counted_once() {
        for (name, _) in &STATIC_TABLE {
            let count = STATIC_TABLE.iter().filter(|(n, _)| n == name).count();
            assert_eq!(name_entries(name).map(|(_, c)| c), Some(count));
        }
    }
}
