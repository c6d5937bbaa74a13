//! Range requests answered from a stored response (RFC 9110 §14): which part of an entry a
//! `Range` asks for, whether `If-Range` lets it (§13.1.5), and the `multipart/byteranges` body
//! (§14.6) for several parts.
//!
//! The store keeps complete responses only; a range is cut from the entry's shared body
//! ([`Bytes::slice`], no copy), so one stored object answers every range of it. Sans-IO: the
//! caller passes the request fields and the entry, and gets back what to send.
//!
//! # Choices
//! Where RFC 9110 lets a server ignore a Range (§14.2: "a server MAY ignore the Range header
//! field"), this module answers the whole 200 rather than guess:
//! - a unit other than `bytes`, any syntax error (`bytes=5-2`, `bytes=a-`, `bytes 0-1`, spaces
//!   inside a range), more than one Range line, or an If-Range that does not match;
//! - more than [`RANGES_MAX`] ranges, or ranges whose sizes add up to more than the
//!   representation (heavy overlap): the two ways §17.15 names of making a small request cost
//!   a large response (nginx refuses the second the same way);
//! - an empty representation (no byte range can be written for it);
//! - an entry whose status is not 200 (§14.2: Range applies to a GET whose response would be 200).
//!
//! Overlapping and adjacent ranges are coalesced; the parts keep the order the client asked
//! for them in (§14.6 SHOULD), each coalesced part at the place of its first member. One part
//! left is a plain 206 (§14.6: a single range is never sent as multipart). Numbers too large
//! for a `u64` saturate: a first position past the end is unsatisfiable, a last position past
//! it is the end, a suffix longer than the body is the whole body (§14.1.2).
//!
//! Whitespace: optional whitespace around each comma-separated range and empty list elements
//! are accepted (§5.6.1); none is accepted inside a range or around `=`, as the grammar has
//! none there.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{CONTENT_TYPE, IF_RANGE, RANGE};
use http::{HeaderValue, StatusCode};

use crate::RequestFields;
use crate::directives::{self, EntityTag};
use crate::entry::Entry;

/// The most ranges one request may ask for before the Range is ignored (nginx's
/// `max_ranges` is unlimited by default; browsers and download tools ask for one or a few).
pub const RANGES_MAX: usize = 16;

/// One satisfiable byte range: first and last positions, both included, within the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteRange {
    pub first: u64,
    pub last: u64,
}

impl ByteRange {
    /// The number of bytes in the range (at least one).
    pub fn len(&self) -> u64 {
        self.last - self.first + 1
    }

    /// Never true: a satisfiable range has at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The range's bytes of `body`, sharing its buffer.
    pub fn slice(&self, body: &Bytes) -> Bytes {
        body.slice(self.first as usize..=self.last as usize)
    }
}

/// What a request's Range makes of a stored response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RangeAnswer {
    /// No Range, or one to ignore: the whole response.
    Full,
    /// 206 with these parts: at least one, coalesced, in the order asked.
    Partial(Vec<ByteRange>),
    /// 416: no range overlaps the body.
    Unsatisfiable,
}

/// How `entry` answers the request with `request_headers` (RFC 9110 §14.2, §13.1.5): a GET or
/// HEAD the caller has already found fresh and not answered with a 304.
pub fn range_answer<F: RequestFields + ?Sized>(request_headers: &F, entry: &Entry) -> RangeAnswer {
    if entry.status != StatusCode::OK {
        return RangeAnswer::Full;
    }
    let Some(range) = single(request_headers, &RANGE) else {
        return RangeAnswer::Full;
    };
    if request_headers.has(&IF_RANGE) {
        match single(request_headers, &IF_RANGE) {
            Some(value) if if_range_matches(value, entry) => {}
            _ => return RangeAnswer::Full,
        }
    }
    parse_range(range, entry.body.len() as u64)
}

/// The one line of a field; `None` when absent or repeated.
fn single<'a, F: RequestFields + ?Sized>(
    headers: &'a F,
    name: &'a http::HeaderName,
) -> Option<&'a [u8]> {
    let mut lines = headers.values(name);
    match (lines.next(), lines.next()) {
        (Some(line), None) => Some(line),
        _ => None,
    }
}

/// Whether an If-Range value names `entry` (RFC 9110 §13.1.5): an entity tag by strong
/// comparison (a weak tag on either side never matches), or an HTTP-date equal to the stored
/// Last-Modified when that is a strong validator, i.e. at least a second before the stored
/// Date (§8.8.2.2). Anything else does not match.
pub fn if_range_matches(value: &[u8], entry: &Entry) -> bool {
    let bytes = value.trim_ascii();
    if bytes.starts_with(b"\"") || bytes.starts_with(b"W/") {
        let Some(tag) = EntityTag::parse(bytes) else {
            return false;
        };
        let current = entry.etag.as_deref().and_then(EntityTag::parse);
        return current.is_some_and(|current| tag.strong_eq(&current));
    }
    let Some(modified) = entry.last_modified else {
        return false;
    };
    let date = entry.date.as_ref().and_then(directives::parse_date);
    let strong = date.is_some_and(|date| {
        date.duration_since(modified)
            .is_ok_and(|d| d >= Duration::from_secs(1))
    });
    strong && directives::parse_date_bytes(value) == Some(modified)
}

/// One range-spec as written (RFC 9110 §14.1.1), before the body's length is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Spec {
    /// `first-last` or `first-`.
    Int { first: u64, last: Option<u64> },
    /// `-suffix`: the last `suffix` bytes.
    Suffix(u64),
}

impl Spec {
    /// The bytes of a body of `len` bytes this spec selects; `None` when unsatisfiable.
    fn resolve(self, len: u64) -> Option<ByteRange> {
        let (first, last) = match self {
            Spec::Int { first, .. } if first >= len => return None,
            Spec::Int { first, last } => (first, last.map_or(len - 1, |l| l.min(len - 1))),
            Spec::Suffix(0) => return None,
            Spec::Suffix(n) => (len.saturating_sub(n), len - 1),
        };
        Some(ByteRange { first, last })
    }
}

/// A Range field value against a body of `len` bytes (see the module docs for what is
/// ignored).
pub fn parse_range(value: &[u8], len: u64) -> RangeAnswer {
    let Some(eq) = value.iter().position(|&b| b == b'=') else {
        return RangeAnswer::Full;
    };
    let (unit, set) = (&value[..eq], &value[eq + 1..]);
    if !unit.eq_ignore_ascii_case(b"bytes") || len == 0 {
        return RangeAnswer::Full;
    }
    let mut specs = 0;
    let mut total: u64 = 0;
    let mut ranges = Vec::new();
    for element in set.split(|&b| b == b',') {
        let element = trim_ows(element);
        if element.is_empty() {
            continue;
        }
        specs += 1;
        let Some(spec) = parse_spec(element) else {
            return RangeAnswer::Full;
        };
        if specs > RANGES_MAX {
            return RangeAnswer::Full;
        }
        if let Some(range) = spec.resolve(len) {
            total = total.saturating_add(range.len());
            ranges.push(range);
        }
    }
    if specs == 0 || total > len {
        return RangeAnswer::Full;
    }
    if ranges.is_empty() {
        return RangeAnswer::Unsatisfiable;
    }
    RangeAnswer::Partial(coalesce(ranges))
}

fn trim_ows(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|&b| b != b' ' && b != b'\t');
    let Some(start) = start else {
        return &[];
    };
    let end = bytes.iter().rposition(|&b| b != b' ' && b != b'\t');
    &bytes[start..=end.unwrap_or(start)]
}

/// `first-last`, `first-` or `-suffix`, digits only; `first > last` is invalid (§14.1.1).
fn parse_spec(spec: &[u8]) -> Option<Spec> {
    let dash = spec.iter().position(|&b| b == b'-')?;
    let (first, last) = (&spec[..dash], &spec[dash + 1..]);
    if first.is_empty() {
        return Some(Spec::Suffix(number(last)?));
    }
    let first = number(first)?;
    let last = match last {
        [] => None,
        last => Some(number(last)?),
    };
    if last.is_some_and(|last| last < first) {
        return None;
    }
    Some(Spec::Int { first, last })
}

/// A non-empty run of ASCII digits, saturating at `u64::MAX`.
fn number(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits.iter().fold(0u64, |n, &d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    });
    Some(n)
}

/// Merges overlapping and adjacent ranges; the merged parts stay in the order their first
/// member was asked for.
fn coalesce(ranges: Vec<ByteRange>) -> Vec<ByteRange> {
    let mut sorted: Vec<(usize, ByteRange)> = ranges.into_iter().enumerate().collect();
    sorted.sort_by_key(|(_, r)| r.first);
    let mut merged: Vec<(usize, ByteRange)> = Vec::with_capacity(sorted.len());
    for (at, range) in sorted {
        match merged.last_mut() {
            Some((first_at, last)) if range.first <= last.last.saturating_add(1) => {
                last.last = last.last.max(range.last);
                *first_at = (*first_at).min(at);
            }
            _ => merged.push((at, range)),
        }
    }
    merged.sort_by_key(|(at, _)| *at);
    merged.into_iter().map(|(_, r)| r).collect()
}

/// A Content-Range value (RFC 9110 §14.4), formatted without allocating: `bytes a-b/len`
/// for a part, `bytes */len` for a 416.
#[derive(Clone, Copy)]
pub struct ContentRange {
    buf: [u8; 72],
    len: usize,
}

impl ContentRange {
    /// `bytes first-last/complete`.
    pub fn part(range: ByteRange, complete: u64) -> ContentRange {
        let mut value = ContentRange::start();
        value.number(range.first);
        value.push(b"-");
        value.number(range.last);
        value.push(b"/");
        value.number(complete);
        value
    }

    /// `bytes */complete`, for a 416.
    pub fn unsatisfied(complete: u64) -> ContentRange {
        let mut value = ContentRange::start();
        value.push(b"*/");
        value.number(complete);
        value
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    fn start() -> ContentRange {
        let mut value = ContentRange {
            buf: [0; 72],
            len: 0,
        };
        value.push(b"bytes ");
        value
    }

    fn push(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn number(&mut self, n: u64) {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut n = n;
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[at..]);
    }
}

impl std::fmt::Debug for ContentRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.as_bytes()))
    }
}

/// A `multipart/byteranges` body (RFC 9110 §14.6): the response's Content-Type and the body
/// as pieces to send in order, the parts being slices of the entry's body.
#[derive(Clone, Debug)]
pub struct Multipart {
    /// `multipart/byteranges; boundary=...`.
    pub content_type: HeaderValue,
    pub pieces: Vec<Bytes>,
    /// The body's length: the sum of the pieces.
    pub len: usize,
}

/// The multipart body of `ranges` of `entry`: each part with the entry's Content-Type (when
/// it has one) and its Content-Range. The boundary is 16 hex digits mixed from `seed`;
/// a body that happened to contain it would still parse, since every part's length is in its
/// Content-Range, and a client that splits on the boundary alone would need a 1 in 2^64
/// coincidence (the seed is not the origin's to choose).
pub fn multipart(entry: &Entry, ranges: &[ByteRange], seed: u64) -> Multipart {
    let boundary = boundary(seed);
    let complete = entry.body.len() as u64;
    let part_type = entry.headers.get(CONTENT_TYPE).map(HeaderValue::as_bytes);
    let mut pieces = Vec::with_capacity(2 * ranges.len() + 1);
    for (n, range) in ranges.iter().enumerate() {
        let mut head = BytesMut::with_capacity(128);
        if n > 0 {
            head.put_slice(b"\r\n");
        }
        head.put_slice(b"--");
        head.put_slice(&boundary);
        head.put_slice(b"\r\n");
        if let Some(part_type) = part_type {
            head.put_slice(b"Content-Type: ");
            head.put_slice(part_type);
            head.put_slice(b"\r\n");
        }
        head.put_slice(b"Content-Range: ");
        head.put_slice(ContentRange::part(*range, complete).as_bytes());
        head.put_slice(b"\r\n\r\n");
        pieces.push(head.freeze());
        pieces.push(range.slice(&entry.body));
    }
    let mut end = BytesMut::with_capacity(boundary.len() + 8);
    end.put_slice(b"\r\n--");
    end.put_slice(&boundary);
    end.put_slice(b"--\r\n");
    pieces.push(end.freeze());
    let mut content_type = b"multipart/byteranges; boundary=".to_vec();
    content_type.extend_from_slice(&boundary);
    Multipart {
        content_type: HeaderValue::from_bytes(&content_type).expect("ASCII boundary"),
        len: pieces.iter().map(Bytes::len).sum(),
        pieces,
    }
}

/// 16 lowercase hex digits of splitmix64(`seed`): a different boundary for nearby seeds.
fn boundary(seed: u64) -> [u8; 16] {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        let nibble = (z >> (60 - 4 * i)) & 0xf;
        *b = b"0123456789abcdef"[nibble as usize];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;
    use std::time::{Duration, SystemTime};

    use crate::policy::Freshness;

    fn partial(pairs: &[(u64, u64)]) -> RangeAnswer {
        let ranges = pairs.iter().map(|&(first, last)| ByteRange { first, last });
        RangeAnswer::Partial(ranges.collect())
    }

    fn entry(status: u16, fields: &[(&str, &str)], body: &'static [u8]) -> Entry {
        let mut headers = HeaderMap::new();
        for (name, value) in fields {
            headers.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        let freshness = Freshness {
            lifetime: Duration::from_secs(60),
            corrected_initial_age: Duration::ZERO,
            response_time: SystemTime::UNIX_EPOCH,
            stale_while_revalidate: Duration::ZERO,
            stale_if_error: Duration::ZERO,
            must_revalidate: false,
            no_cache: false,
            immutable: false,
        };
        let status = StatusCode::from_u16(status).unwrap();
        let body = Bytes::from_static(body);
        Entry::new(
            status,
            headers,
            body,
            Bytes::new(),
            freshness,
            &HeaderMap::new(),
        )
    }

    fn request(fields: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in fields {
            headers.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        headers
    }

    const MODIFIED: &str = "Sun, 06 Nov 1994 08:49:37 GMT";
    const LATER: &str = "Sun, 06 Nov 1994 09:49:37 GMT";

    fn validated() -> Entry {
        let fields = [
            ("etag", "\"v1\""),
            ("last-modified", MODIFIED),
            ("date", LATER),
            ("content-type", "text/plain"),
        ];
        entry(200, &fields, b"0123456789")
    }

    /// RFC 9110 §14.1.2's examples, against its 10000-byte representation.
    #[test]
    fn rfc_9110_examples() {
        let len = 10000;
        assert_eq!(parse_range(b"bytes=0-499", len), partial(&[(0, 499)]));
        assert_eq!(parse_range(b"bytes=500-999", len), partial(&[(500, 999)]));
        assert_eq!(parse_range(b"bytes=-500", len), partial(&[(9500, 9999)]));
        assert_eq!(parse_range(b"bytes=9500-", len), partial(&[(9500, 9999)]));
        assert_eq!(
            parse_range(b"bytes=0-0,-1", len),
            partial(&[(0, 0), (9999, 9999)])
        );
        // Non-canonical but valid ranges: 500-600 and 601-999 are adjacent and coalesce,
        // so does 500-700 with 601-999 (total 458 of 10000 is no abuse).
        assert_eq!(
            parse_range(b"bytes=500-600,601-999", len),
            partial(&[(500, 999)])
        );
        assert_eq!(
            parse_range(b"bytes=500-700,601-999", len),
            partial(&[(500, 999)])
        );
    }

    #[test]
    fn open_suffix_and_clamped_ranges() {
        assert_eq!(parse_range(b"bytes=0-0", 10), partial(&[(0, 0)]));
        assert_eq!(parse_range(b"bytes=0-", 10), partial(&[(0, 9)]));
        assert_eq!(parse_range(b"bytes=9-", 10), partial(&[(9, 9)]));
        assert_eq!(parse_range(b"bytes=5-100", 10), partial(&[(5, 9)]));
        // A suffix longer than the body is the whole body.
        assert_eq!(parse_range(b"bytes=-100", 10), partial(&[(0, 9)]));
        assert_eq!(parse_range(b"bytes=-10", 10), partial(&[(0, 9)]));
        assert_eq!(parse_range(b"BYTES=1-2", 10), partial(&[(1, 2)]));
    }

    #[test]
    fn unsatisfiable() {
        assert_eq!(parse_range(b"bytes=10-", 10), RangeAnswer::Unsatisfiable);
        assert_eq!(parse_range(b"bytes=10-20", 10), RangeAnswer::Unsatisfiable);
        assert_eq!(parse_range(b"bytes=-0", 10), RangeAnswer::Unsatisfiable);
        assert_eq!(
            parse_range(b"bytes=20-30, 11-, -0", 10),
            RangeAnswer::Unsatisfiable
        );
        // One satisfiable range is enough; the others are dropped.
        assert_eq!(parse_range(b"bytes=20-30,2-3", 10), partial(&[(2, 3)]));
    }

    #[test]
    fn invalid_or_other_units_are_ignored() {
        for value in [
            &b"bytes=5-2"[..],
            b"bytes=",
            b"bytes= , ",
            b"bytes=-",
            b"bytes=a-",
            b"bytes=1-b",
            b"bytes=1",
            b"bytes=--1",
            b"bytes=1-2-3",
            b"bytes=+1-2",
            b"bytes=1 - 2",
            b"bytes =1-2",
            b"bytes 1-2",
            b"items=1-2",
            b"",
            b"=1-2",
            b"bytes=0-1,5-2",
            b"bytes=0-1,x",
        ] {
            let text = String::from_utf8_lossy(value);
            assert_eq!(parse_range(value, 10), RangeAnswer::Full, "{text}");
        }
    }

    #[test]
    fn whitespace_and_empty_elements() {
        assert_eq!(
            parse_range(b"bytes= 0-1 ,\t3-4\t, ,", 10),
            partial(&[(0, 1), (3, 4)])
        );
        assert_eq!(parse_range(b"bytes=,,0-1", 10), partial(&[(0, 1)]));
    }

    #[test]
    fn overflowing_numbers_saturate() {
        let huge = b"bytes=99999999999999999999999999-";
        assert_eq!(parse_range(huge, 10), RangeAnswer::Unsatisfiable);
        let huge = b"bytes=2-99999999999999999999999999";
        assert_eq!(parse_range(huge, 10), partial(&[(2, 9)]));
        let huge = b"bytes=-99999999999999999999999999";
        assert_eq!(parse_range(huge, 10), partial(&[(0, 9)]));
        let last = b"bytes=18446744073709551615-";
        assert_eq!(parse_range(last, u64::MAX), RangeAnswer::Unsatisfiable);
        let last = b"bytes=18446744073709551614-";
        assert_eq!(
            parse_range(last, u64::MAX),
            partial(&[(u64::MAX - 1, u64::MAX - 1)])
        );
    }

    #[test]
    fn coalescing_keeps_the_order_asked() {
        assert_eq!(
            parse_range(b"bytes=8-9,0-1,2-3", 100),
            partial(&[(8, 9), (0, 3)])
        );
        assert_eq!(
            parse_range(b"bytes=50-59,0-9,20-29", 100),
            partial(&[(50, 59), (0, 9), (20, 29)])
        );
        // Contained ranges disappear into the larger one.
        assert_eq!(parse_range(b"bytes=10-20,12-13", 100), partial(&[(10, 20)]));
    }

    #[test]
    fn many_or_heavily_overlapping_ranges_are_ignored() {
        let ranges: Vec<String> = (0..RANGES_MAX)
            .map(|i| format!("{}-{}", 2 * i, 2 * i))
            .collect();
        let at_max = format!("bytes={}", ranges.join(","));
        let RangeAnswer::Partial(parts) = parse_range(at_max.as_bytes(), 100) else {
            panic!("{at_max}");
        };
        assert_eq!(parts.len(), RANGES_MAX);
        let over = format!("{at_max},90-91");
        assert_eq!(parse_range(over.as_bytes(), 100), RangeAnswer::Full);
        // Unsatisfiable ones count too: each is work to parse.
        let over = format!("{at_max},500-");
        assert_eq!(parse_range(over.as_bytes(), 100), RangeAnswer::Full);
        // The same bytes asked twice add up to more than the body.
        assert_eq!(parse_range(b"bytes=0-,0-", 100), RangeAnswer::Full);
        assert_eq!(parse_range(b"bytes=0-59,40-99", 100), RangeAnswer::Full);
        assert_eq!(parse_range(b"bytes=0-49,40-89", 100), partial(&[(0, 89)]));
    }

    #[test]
    fn an_empty_body_is_sent_whole() {
        assert_eq!(parse_range(b"bytes=0-", 0), RangeAnswer::Full);
        assert_eq!(parse_range(b"bytes=-5", 0), RangeAnswer::Full);
    }

    #[test]
    fn if_range_by_entity_tag_is_strong() {
        let e = validated();
        let answer = |fields: &[(&str, &str)]| range_answer(&request(fields), &e);
        let asked = [("range", "bytes=0-1"), ("if-range", "\"v1\"")];
        assert_eq!(answer(&asked), partial(&[(0, 1)]));
        for if_range in ["W/\"v1\"", "\"v2\"", "\"v1", "v1", ""] {
            let asked = [("range", "bytes=0-1"), ("if-range", if_range)];
            assert_eq!(answer(&asked), RangeAnswer::Full, "{if_range}");
        }
        // A weak stored tag never matches, even the same opaque tag.
        let weak = entry(200, &[("etag", "W/\"v1\"")], b"0123456789");
        let asked = request(&[("range", "bytes=0-1"), ("if-range", "\"v1\"")]);
        assert_eq!(range_answer(&asked, &weak), RangeAnswer::Full);
        let asked = request(&[("range", "bytes=0-1"), ("if-range", "W/\"v1\"")]);
        assert_eq!(range_answer(&asked, &weak), RangeAnswer::Full);
        // No stored tag.
        let untagged = entry(200, &[], b"0123456789");
        let asked = request(&[("range", "bytes=0-1"), ("if-range", "\"v1\"")]);
        assert_eq!(range_answer(&asked, &untagged), RangeAnswer::Full);
    }

    #[test]
    fn if_range_by_date_is_exact_and_strong() {
        let e = validated();
        let answer = |fields: &[(&str, &str)]| range_answer(&request(fields), &e);
        let asked = [("range", "bytes=0-1"), ("if-range", MODIFIED)];
        assert_eq!(answer(&asked), partial(&[(0, 1)]));
        for if_range in [LATER, "Sun, 06 Nov 1994 08:49:36 GMT", "yesterday"] {
            let asked = [("range", "bytes=0-1"), ("if-range", if_range)];
            assert_eq!(answer(&asked), RangeAnswer::Full, "{if_range}");
        }
        // Last-Modified within a second of Date is a weak validator (RFC 9110 §8.8.2.2).
        let weak = entry(
            200,
            &[("last-modified", MODIFIED), ("date", MODIFIED)],
            b"0123456789",
        );
        let asked = request(&[("range", "bytes=0-1"), ("if-range", MODIFIED)]);
        assert_eq!(range_answer(&asked, &weak), RangeAnswer::Full);
        let no_date = entry(200, &[("last-modified", MODIFIED)], b"0123456789");
        assert_eq!(range_answer(&asked, &no_date), RangeAnswer::Full);
    }

    #[test]
    fn range_answer_guards() {
        let e = validated();
        // If-Range without Range is ignored; repeated fields are ignored.
        assert_eq!(
            range_answer(&request(&[("if-range", "\"v1\"")]), &e),
            RangeAnswer::Full
        );
        let twice = request(&[("range", "bytes=0-1"), ("range", "bytes=2-3")]);
        assert_eq!(range_answer(&twice, &e), RangeAnswer::Full);
        let twice = request(&[
            ("range", "bytes=0-1"),
            ("if-range", "\"v1\""),
            ("if-range", "\"v1\""),
        ]);
        assert_eq!(range_answer(&twice, &e), RangeAnswer::Full);
        assert_eq!(range_answer(&HeaderMap::new(), &e), RangeAnswer::Full);
        // Only a 200 is cut into ranges.
        let asked = request(&[("range", "bytes=0-1")]);
        for status in [203, 404, 410] {
            let other = entry(status, &[], b"0123456789");
            assert_eq!(range_answer(&asked, &other), RangeAnswer::Full, "{status}");
        }
        assert_eq!(
            range_answer(&request(&[("range", "bytes=20-")]), &e),
            RangeAnswer::Unsatisfiable
        );
    }

    #[test]
    fn content_range_values() {
        let part = ContentRange::part(
            ByteRange {
                first: 0,
                last: 499,
            },
            1234,
        );
        assert_eq!(part.as_bytes(), b"bytes 0-499/1234");
        let max = ByteRange {
            first: u64::MAX - 1,
            last: u64::MAX - 1,
        };
        let part = ContentRange::part(max, u64::MAX);
        let expected = format!("bytes {0}-{0}/{1}", u64::MAX - 1, u64::MAX);
        assert_eq!(part.as_bytes(), expected.as_bytes());
        assert_eq!(ContentRange::unsatisfied(0).as_bytes(), b"bytes */0");
        assert_eq!(
            ContentRange::unsatisfied(47022).as_bytes(),
            b"bytes */47022"
        );
    }

    #[test]
    fn multipart_body_is_byte_exact() {
        let e = validated();
        let ranges = [
            ByteRange { first: 7, last: 9 },
            ByteRange { first: 0, last: 1 },
        ];
        let body = multipart(&e, &ranges, 42);
        let b = String::from_utf8(boundary(42).to_vec()).unwrap();
        assert_eq!(
            body.content_type.to_str().unwrap(),
            format!("multipart/byteranges; boundary={b}")
        );
        let expected = format!(
            "--{b}\r\nContent-Type: text/plain\r\nContent-Range: bytes 7-9/10\r\n\r\n789\
             \r\n--{b}\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-1/10\r\n\r\n01\
             \r\n--{b}--\r\n"
        );
        let joined: Vec<u8> = body.pieces.iter().flat_map(|p| p.to_vec()).collect();
        assert_eq!(String::from_utf8(joined).unwrap(), expected);
        assert_eq!(body.len, expected.len());
        // The parts are the entry's own bytes, not copies.
        let part = &body.pieces[1];
        assert_eq!(part.as_ptr(), e.body[7..].as_ptr());
        // Without a stored Content-Type the parts carry none.
        let untyped = entry(200, &[], b"0123456789");
        let body = multipart(&untyped, &ranges[..1], 1);
        assert!(!body.pieces[0].windows(13).any(|w| w == b"Content-Type:"));
        assert_ne!(boundary(1), boundary(2));
    }

    #[test]
    fn slices_share_the_body() {
        let body = Bytes::from_static(b"0123456789");
        let part = ByteRange { first: 3, last: 5 }.slice(&body);
        assert_eq!(&part[..], b"345");
        assert_eq!(part.as_ptr(), body[3..].as_ptr());
    }
}
