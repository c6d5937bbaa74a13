//! Field-value parsers the policy needs: Cache-Control directives (RFC 9111 §5.2), delta-seconds
//! (§1.2.2), HTTP dates (RFC 9110 §5.6.7) and entity-tag lists (RFC 9110 §8.8.3).
//!
//! Every parser here reads network input, so none of them panics or fails loudly: a malformed
//! piece is skipped or reported as `None`, and the policy decides what that means (usually the
//! stricter reading).

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use http::header::{AsHeaderName, HeaderValue};

use crate::RequestFields;

/// RFC 9111 §1.2.2: a delta-seconds value too large to represent is taken as 2^31 seconds.
pub(crate) const DELTA_SECONDS_MAX: u64 = 1 << 31;

/// One directive of a Cache-Control field: the name as sent (compare it case-insensitively)
/// and the value without its quotes, if it had one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Directive<'a> {
    pub name: &'a [u8],
    pub value: Option<&'a [u8]>,
}

impl Directive<'_> {
    pub fn is(&self, name: &str) -> bool {
        self.name.eq_ignore_ascii_case(name.as_bytes())
    }

    /// The value as delta-seconds: `None` when absent or not a number (RFC 9111 §1.2.2).
    /// Quoted values are accepted (§5.2: recipients SHOULD accept both forms).
    pub fn seconds(&self) -> Option<u64> {
        self.value.and_then(delta_seconds)
    }
}

/// Calls `f` for each directive in every `Cache-Control` line of `headers`, in order.
pub(crate) fn for_each_directive<F: RequestFields + ?Sized>(
    headers: &F,
    mut f: impl FnMut(Directive<'_>),
) {
    for line in headers.values(&http::header::CACHE_CONTROL) {
        parse_line(line, &mut f);
    }
}

/// Splits one field line into directives: `name[=token|"quoted"]`, comma separated. Commas
/// inside a quoted string (`no-cache="a, b"`) do not split; garbage up to the next comma is
/// skipped.
pub(crate) fn parse_line(line: &[u8], f: &mut impl FnMut(Directive<'_>)) {
    let mut at = 0;
    while at < line.len() {
        at = skip(line, at, |b| b == b',' || is_ows(b));
        let name_end = skip(line, at, is_tchar);
        let name = &line[at..name_end];
        at = skip(line, name_end, is_ows);
        let mut value = None;
        if line.get(at) == Some(&b'=') {
            at = skip(line, at + 1, is_ows);
            let (v, end) = if line.get(at) == Some(&b'"') {
                quoted(line, at + 1)
            } else {
                let end = skip(line, at, is_tchar);
                (&line[at..end], end)
            };
            value = Some(v);
            at = end;
        }
        if !name.is_empty() {
            f(Directive { name, value });
        }
        // Whatever follows before the next comma is malformed; drop it.
        at = skip(line, at, |b| b != b',');
    }
}

/// The inside of a quoted string starting after its opening quote, and the index after the
/// closing quote. An unterminated string runs to the end of the line.
fn quoted(line: &[u8], start: usize) -> (&[u8], usize) {
    let mut at = start;
    while at < line.len() {
        match line[at] {
            b'\\' => at += 2,
            b'"' => return (&line[start..at], at + 1),
            _ => at += 1,
        }
    }
    (&line[start..], line.len())
}

fn skip(line: &[u8], mut at: usize, pred: impl Fn(u8) -> bool) -> usize {
    while at < line.len() && pred(line[at]) {
        at += 1;
    }
    at
}

pub(crate) fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// RFC 9110 §5.6.2 tchar.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// RFC 9111 §1.2.2 delta-seconds: digits only; values beyond 2^31 become 2^31.
pub(crate) fn delta_seconds(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut n: u64 = 0;
    for &d in value {
        n = n * 10 + u64::from(d - b'0');
        if n >= DELTA_SECONDS_MAX {
            return Some(DELTA_SECONDS_MAX);
        }
    }
    Some(n)
}

pub(crate) fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The first line of a header as an HTTP date; `None` if absent or invalid.
pub(crate) fn date(headers: &HeaderMap, name: impl AsHeaderName) -> Option<SystemTime> {
    headers.get(name).and_then(parse_date)
}

/// `time` as an IMF-fixdate (RFC 9110 §5.6.7), the only form a sender generates: always 29
/// bytes.
pub(crate) fn imf_fixdate(time: SystemTime) -> HeaderValue {
    let text = httpdate::fmt_http_date(time);
    debug_assert_eq!(text.len(), 29);
    // An IMF-fixdate is visible ASCII and spaces only, a valid field value.
    HeaderValue::from_str(&text).expect("an IMF-fixdate is a valid field value")
}

pub(crate) fn parse_date(value: &HeaderValue) -> Option<SystemTime> {
    parse_date_bytes(value.as_bytes())
}

/// [`parse_date`] of a value's bytes (an HTTP date is ASCII; anything else is no date).
pub(crate) fn parse_date_bytes(value: &[u8]) -> Option<SystemTime> {
    let text = std::str::from_utf8(value).ok()?;
    httpdate::parse_http_date(text.trim()).ok()
}

/// An entity tag (RFC 9110 §8.8.3): `"opaque"` or `W/"opaque"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EntityTag<'a> {
    pub weak: bool,
    /// The opaque tag with its quotes.
    pub opaque: &'a [u8],
}

impl<'a> EntityTag<'a> {
    /// Parses one whole entity tag, surrounding whitespace allowed.
    pub fn parse(value: &'a [u8]) -> Option<EntityTag<'a>> {
        let value = value.trim_ascii();
        match parse_tag(value, 0) {
            Some((tag, end)) if end == value.len() => Some(tag),
            _ => None,
        }
    }

    /// RFC 9110 §8.8.3.2 weak comparison: the opaque tags are equal.
    pub fn weak_eq(&self, other: &EntityTag<'_>) -> bool {
        self.opaque == other.opaque
    }

    /// RFC 9110 §8.8.3.2 strong comparison: both strong and the opaque tags are equal.
    pub fn strong_eq(&self, other: &EntityTag<'_>) -> bool {
        !self.weak && !other.weak && self.opaque == other.opaque
    }
}

/// One entity tag at `at`; the tag and the index after it. etagc (0x21, 0x23-0x7E, obs-text)
/// includes the comma, so a list must be split by parsing, not at commas.
fn parse_tag(line: &[u8], mut at: usize) -> Option<(EntityTag<'_>, usize)> {
    let weak = line[at..].starts_with(b"W/");
    if weak {
        at += 2;
    }
    if line.get(at) != Some(&b'"') {
        return None;
    }
    let start = at;
    at += 1;
    while at < line.len() && line[at] != b'"' {
        let b = line[at];
        if !(b == 0x21 || (0x23..=0x7e).contains(&b) || b >= 0x80) {
            return None;
        }
        at += 1;
    }
    if at == line.len() {
        return None;
    }
    Some((
        EntityTag {
            weak,
            opaque: &line[start..=at],
        },
        at + 1,
    ))
}

/// An `If-None-Match`/`If-Match` field value, over all lines.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TagList<'a> {
    Any,
    Tags(Vec<EntityTag<'a>>),
}

/// Parses every line of a tag-list field; `None` if any line is malformed (the caller then
/// ignores the precondition, the safe reading for a cache: it only loses a 304).
pub(crate) fn tag_list<'a>(lines: impl Iterator<Item = &'a [u8]>) -> Option<TagList<'a>> {
    let mut tags = Vec::new();
    for line in lines {
        let line = line.trim_ascii();
        if line == b"*" {
            return Some(TagList::Any);
        }
        let mut at = 0;
        loop {
            at = skip(line, at, |b| b == b',' || is_ows(b));
            if at == line.len() {
                break;
            }
            let (tag, end) = parse_tag(line, at)?;
            tags.push(tag);
            at = skip(line, end, is_ows);
            if at < line.len() && line[at] != b',' {
                return None;
            }
        }
    }
    Some(TagList::Tags(tags))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn directives(line: &str) -> Vec<(String, Option<String>)> {
        let mut out = Vec::new();
        parse_line(line.as_bytes(), &mut |d: Directive<'_>| {
            out.push((
                String::from_utf8_lossy(d.name).into_owned(),
                d.value.map(|v| String::from_utf8_lossy(v).into_owned()),
            ))
        });
        out
    }

    fn s(name: &str, value: Option<&str>) -> (String, Option<String>) {
        (name.to_owned(), value.map(str::to_owned))
    }

    #[test]
    fn cache_control_lines() {
        assert_eq!(
            directives("max-age=60, public"),
            [s("max-age", Some("60")), s("public", None)]
        );
        assert_eq!(
            directives(r#"no-cache="set-cookie, x", MAX-AGE = "5" ,,private"#),
            [
                s("no-cache", Some("set-cookie, x")),
                s("MAX-AGE", Some("5")),
                s("private", None)
            ]
        );
        assert_eq!(
            directives(r#"a="x\"y", b"#),
            [s("a", Some(r#"x\"y"#)), s("b", None)]
        );
        assert_eq!(directives(r#"a="open"#), [s("a", Some("open"))]);
        assert_eq!(
            directives("@@, max-age=1 junk, x"),
            [s("max-age", Some("1")), s("x", None)]
        );
        assert_eq!(directives(""), []);
    }

    #[test]
    fn delta_seconds_values() {
        assert_eq!(delta_seconds(b"0"), Some(0));
        assert_eq!(delta_seconds(b"3600"), Some(3600));
        assert_eq!(delta_seconds(b"-1"), None);
        assert_eq!(delta_seconds(b"1.5"), None);
        assert_eq!(delta_seconds(b""), None);
        assert_eq!(
            delta_seconds(b"99999999999999999999999"),
            Some(DELTA_SECONDS_MAX)
        );
    }

    #[test]
    fn entity_tags() {
        let strong = EntityTag::parse(b" \"a,b\" ").unwrap();
        assert!(!strong.weak);
        assert_eq!(strong.opaque, b"\"a,b\"");
        let weak = EntityTag::parse(b"W/\"a,b\"").unwrap();
        assert!(weak.weak && weak.weak_eq(&strong) && !weak.strong_eq(&strong));
        assert_eq!(EntityTag::parse(b"abc"), None);
        assert_eq!(EntityTag::parse(b"\"a\" x"), None);
        assert_eq!(EntityTag::parse(b"\"a"), None);

        let v = [
            HeaderValue::from_static("\"x\", W/\"y\""),
            HeaderValue::from_static("\"z\""),
        ];
        let Some(TagList::Tags(tags)) = tag_list(v.iter().map(HeaderValue::as_bytes)) else {
            panic!("list")
        };
        assert_eq!(tags.len(), 3);
        let any = [HeaderValue::from_static(" * ")];
        assert_eq!(
            tag_list(any.iter().map(HeaderValue::as_bytes)),
            Some(TagList::Any)
        );
        let bad = [HeaderValue::from_static("\"x\" \"y\"")];
        assert_eq!(tag_list(bad.iter().map(HeaderValue::as_bytes)), None);
    }
}
