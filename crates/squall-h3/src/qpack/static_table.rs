//! The QPACK static table (RFC 9204 §3.1, Appendix A): 99 fields, indexed from 0.
//!
//! Unlike HPACK's, QPACK's table was chosen by how often fields appear in real traffic, so
//! one name's entries are not always together (`:status` is at 24 to 28 and 63 to 71). The
//! encoder looks a name up with a `match` that lists its entries.

use bytes::Bytes;

/// The number of entries.
pub const STATIC_TABLE_LEN: usize = 99;

/// Appendix A, in order: index `i` is `STATIC_TABLE[i]`.
pub(crate) static STATIC_TABLE: [(Bytes, Bytes); STATIC_TABLE_LEN] = [
    entry(b":authority", b""),
    entry(b":path", b"/"),
    entry(b"age", b"0"),
    entry(b"content-disposition", b""),
    entry(b"content-length", b"0"),
    entry(b"cookie", b""),
    entry(b"date", b""),
    entry(b"etag", b""),
    entry(b"if-modified-since", b""),
    entry(b"if-none-match", b""),
    entry(b"last-modified", b""),
    entry(b"link", b""),
    entry(b"location", b""),
    entry(b"referer", b""),
    entry(b"set-cookie", b""),
    entry(b":method", b"CONNECT"),
    entry(b":method", b"DELETE"),
    entry(b":method", b"GET"),
    entry(b":method", b"HEAD"),
    entry(b":method", b"OPTIONS"),
    entry(b":method", b"POST"),
    entry(b":method", b"PUT"),
    entry(b":scheme", b"http"),
    entry(b":scheme", b"https"),
    entry(b":status", b"103"),
    entry(b":status", b"200"),
    entry(b":status", b"304"),
    entry(b":status", b"404"),
    entry(b":status", b"503"),
    entry(b"accept", b"*/*"),
    entry(b"accept", b"application/dns-message"),
    entry(b"accept-encoding", b"gzip, deflate, br"),
    entry(b"accept-ranges", b"bytes"),
    entry(b"access-control-allow-headers", b"cache-control"),
    entry(b"access-control-allow-headers", b"content-type"),
    entry(b"access-control-allow-origin", b"*"),
    entry(b"cache-control", b"max-age=0"),
    entry(b"cache-control", b"max-age=2592000"),
    entry(b"cache-control", b"max-age=604800"),
    entry(b"cache-control", b"no-cache"),
    entry(b"cache-control", b"no-store"),
    entry(b"cache-control", b"public, max-age=31536000"),
    entry(b"content-encoding", b"br"),
    entry(b"content-encoding", b"gzip"),
    entry(b"content-type", b"application/dns-message"),
    entry(b"content-type", b"application/javascript"),
    entry(b"content-type", b"application/json"),
    entry(b"content-type", b"application/x-www-form-urlencoded"),
    entry(b"content-type", b"image/gif"),
    entry(b"content-type", b"image/jpeg"),
    entry(b"content-type", b"image/png"),
    entry(b"content-type", b"text/css"),
    entry(b"content-type", b"text/html; charset=utf-8"),
    entry(b"content-type", b"text/plain"),
    entry(b"content-type", b"text/plain;charset=utf-8"),
    entry(b"range", b"bytes=0-"),
    entry(b"strict-transport-security", b"max-age=31536000"),
    entry(
        b"strict-transport-security",
        b"max-age=31536000; includesubdomains",
    ),
    entry(
        b"strict-transport-security",
        b"max-age=31536000; includesubdomains; preload",
    ),
    entry(b"vary", b"accept-encoding"),
    entry(b"vary", b"origin"),
    entry(b"x-content-type-options", b"nosniff"),
    entry(b"x-xss-protection", b"1; mode=block"),
    entry(b":status", b"100"),
    entry(b":status", b"204"),
    entry(b":status", b"206"),
    entry(b":status", b"302"),
    entry(b":status", b"400"),
    entry(b":status", b"403"),
    entry(b":status", b"421"),
    entry(b":status", b"425"),
    entry(b":status", b"500"),
    entry(b"accept-language", b""),
    entry(b"access-control-allow-credentials", b"FALSE"),
    entry(b"access-control-allow-credentials", b"TRUE"),
    entry(b"access-control-allow-headers", b"*"),
    entry(b"access-control-allow-methods", b"get"),
    entry(b"access-control-allow-methods", b"get, post, options"),
    entry(b"access-control-allow-methods", b"options"),
    entry(b"access-control-expose-headers", b"content-length"),
    entry(b"access-control-request-headers", b"content-type"),
    entry(b"access-control-request-method", b"get"),
    entry(b"access-control-request-method", b"post"),
    entry(b"alt-svc", b"clear"),
    entry(b"authorization", b""),
    entry(
        b"content-security-policy",
        b"script-src 'none'; object-src 'none'; base-uri 'none'",
    ),
    entry(b"early-data", b"1"),
    entry(b"expect-ct", b""),
    entry(b"forwarded", b""),
    entry(b"if-range", b""),
    entry(b"origin", b""),
    entry(b"purpose", b"prefetch"),
    entry(b"server", b""),
    entry(b"timing-allow-origin", b"*"),
    entry(b"upgrade-insecure-requests", b"1"),
    entry(b"user-agent", b""),
    entry(b"x-forwarded-for", b""),
    entry(b"x-frame-options", b"deny"),
    entry(b"x-frame-options", b"sameorigin"),
];

const fn entry(name: &'static [u8], value: &'static [u8]) -> (Bytes, Bytes) {
    (Bytes::from_static(name), Bytes::from_static(value))
}

/// What the static table holds for a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StaticMatch {
    /// The whole field, at this index.
    Field(usize),
    /// The name only; this is its first index.
    Name(usize),
    None,
}

/// Looks `name: value` up.
pub(crate) fn find(name: &[u8], value: &[u8]) -> StaticMatch {
    let Some(indices) = name_indices(name) else {
        return StaticMatch::None;
    };
    indices
        .iter()
        .map(|&i| usize::from(i))
        .find(|&i| STATIC_TABLE[i].1 == value)
        .map_or(
            StaticMatch::Name(usize::from(indices[0])),
            StaticMatch::Field,
        )
}

/// The indices of a name's entries, in increasing order.
fn name_indices(name: &[u8]) -> Option<&'static [u8]> {
    let indices: &'static [u8] = match name {
        b":authority" => &[0],
        b":path" => &[1],
        b"age" => &[2],
        b"content-disposition" => &[3],
        b"content-length" => &[4],
        b"cookie" => &[5],
        b"date" => &[6],
        b"etag" => &[7],
        b"if-modified-since" => &[8],
        b"if-none-match" => &[9],
        b"last-modified" => &[10],
        b"link" => &[11],
        b"location" => &[12],
        b"referer" => &[13],
        b"set-cookie" => &[14],
        b":method" => &[15, 16, 17, 18, 19, 20, 21],
        b":scheme" => &[22, 23],
        b":status" => &[24, 25, 26, 27, 28, 63, 64, 65, 66, 67, 68, 69, 70, 71],
        b"accept" => &[29, 30],
        b"accept-encoding" => &[31],
        b"accept-ranges" => &[32],
        b"access-control-allow-headers" => &[33, 34, 75],
        b"access-control-allow-origin" => &[35],
        b"cache-control" => &[36, 37, 38, 39, 40, 41],
        b"content-encoding" => &[42, 43],
        b"content-type" => &[44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54],
        b"range" => &[55],
        b"strict-transport-security" => &[56, 57, 58],
        b"vary" => &[59, 60],
        b"x-content-type-options" => &[61],
        b"x-xss-protection" => &[62],
        b"accept-language" => &[72],
        b"access-control-allow-credentials" => &[73, 74],
        b"access-control-allow-methods" => &[76, 77, 78],
        b"access-control-expose-headers" => &[79],
        b"access-control-request-headers" => &[80],
        b"access-control-request-method" => &[81, 82],
        b"alt-svc" => &[83],
        b"authorization" => &[84],
        b"content-security-policy" => &[85],
        b"early-data" => &[86],
        b"expect-ct" => &[87],
        b"forwarded" => &[88],
        b"if-range" => &[89],
        b"origin" => &[90],
        b"purpose" => &[91],
        b"server" => &[92],
        b"timing-allow-origin" => &[93],
        b"upgrade-insecure-requests" => &[94],
        b"user-agent" => &[95],
        b"x-forwarded-for" => &[96],
        b"x-frame-options" => &[97, 98],
        _ => return None,
    };
    Some(indices)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_agrees_with_the_table_for_every_entry() {
        for (index, (name, value)) in STATIC_TABLE.iter().enumerate() {
            assert_eq!(find(name, value), StaticMatch::Field(index), "{index}");
            let first = STATIC_TABLE.iter().position(|(n, _)| n == name).unwrap();
            assert_eq!(find(name, b"\0not a value"), StaticMatch::Name(first));
            let all: Vec<u8> = (0..STATIC_TABLE_LEN as u8)
                .filter(|&i| STATIC_TABLE[usize::from(i)].0 == name)
                .collect();
            assert_eq!(name_indices(name), Some(&all[..]), "{index}");
        }
        assert_eq!(find(b"x-custom", b""), StaticMatch::None);
        assert_eq!(find(b"Accept", b"*/*"), StaticMatch::None, "case-sensitive");
    }

    #[test]
    fn spot_checks_against_appendix_a() {
        assert_eq!(STATIC_TABLE.len(), 99);
        assert_eq!(find(b":path", b"/"), StaticMatch::Field(1));
        assert_eq!(find(b":method", b"GET"), StaticMatch::Field(17));
        assert_eq!(find(b":status", b"200"), StaticMatch::Field(25));
        assert_eq!(find(b":status", b"500"), StaticMatch::Field(71));
        assert_eq!(
            find(b"x-frame-options", b"sameorigin"),
            StaticMatch::Field(98)
        );
    }
}
