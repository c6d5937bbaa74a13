//! Request heads and trailers from decoded fields: field validity (RFC 9114 §4.2),
//! connection-specific fields (§4.2), cookies (§4.2.1), request pseudo-header fields
//! (§4.3.1), CONNECT (§4.4), the extended CONNECT of RFC 9220 and content-length (§4.1.2).
//! Pure functions: fields in, a [`Request`] or the answer the stream gets out.
//!
//! The rules are HTTP/2's (RFC 9113 §8.2, §8.3), which HTTP/3 takes over, and so is this
//! code: it follows `squall-h2`'s request validation line by line, so that a request is
//! accepted, refused or answered alike over either protocol.

use bytes::{BufMut, Bytes, BytesMut};

use super::fields::{FieldSpan, HeaderFields};
use super::types::Request;
use crate::qpack::Field;

/// The limits a request head is checked against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeadLimits {
    pub path_bytes_max: usize,
    pub body_bytes_max: u64,
    /// We advertised SETTINGS_ENABLE_CONNECT_PROTOCOL: `:protocol` is allowed on CONNECT.
    pub connect_protocol: bool,
}

/// Why a head was not turned into a request, and what the stream gets instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadError {
    /// Malformed (§4.1.2): a stream error of type H3_MESSAGE_ERROR.
    Malformed(&'static str),
    /// Well-formed, but answered by the connection with this status and no body.
    Answer(u16),
}

/// Fields that make a message malformed in HTTP/3 whatever their value (§4.2).
const CONNECTION_SPECIFIC: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// Whether a response field is one HTTP/3 cannot carry (§4.2); the connection drops it.
pub(crate) fn is_connection_specific(name: &[u8]) -> bool {
    CONNECTION_SPECIFIC
        .iter()
        .any(|c| c.as_bytes().eq_ignore_ascii_case(name))
}

/// Where one decoded field lies in the head's buffer.
#[derive(Debug, Clone, Copy)]
struct Decoded {
    name: u32,
    name_len: u32,
    value: u32,
    value_len: u32,
}

impl Decoded {
    fn name<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        &buf[self.name as usize..(self.name + self.name_len) as usize]
    }

    fn value<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        &buf[self.value as usize..(self.value + self.value_len) as usize]
    }

    fn span(&self) -> FieldSpan {
        FieldSpan {
            name: self.name,
            name_len: self.name_len,
            value: self.value,
            value_len: self.value_len,
        }
    }
}

/// Copies QPACK's fields into one buffer, each name then its value, with their spans. A
/// section whose bytes do not fit `u32` offsets can only come from a very large limit: it is
/// answered like one too large.
fn flatten(fields: &[Field]) -> Result<(BytesMut, Vec<Decoded>), HeadError> {
    let total: usize = fields.iter().map(|f| f.name.len() + f.value.len()).sum();
    // Room for a joined cookie, which goes at the end.
    if total.saturating_mul(2) > u32::MAX as usize {
        return Err(HeadError::Answer(431));
    }
    let mut bytes = BytesMut::with_capacity(total);
    let mut spans = Vec::with_capacity(fields.len());
    for field in fields {
        let name = bytes.len() as u32;
        bytes.put_slice(&field.name);
        let value = bytes.len() as u32;
        bytes.put_slice(&field.value);
        spans.push(Decoded {
            name,
            name_len: field.name.len() as u32,
            value,
            value_len: field.value.len() as u32,
        });
    }
    Ok((bytes, spans))
}

/// Builds a request from a decoded field section. The request keeps one buffer of the
/// fields (a joined cookie is appended to it) and the spans of its regular fields.
pub(crate) fn parse_request(
    fields: &[Field],
    end_stream: bool,
    limits: HeadLimits,
) -> Result<Request, HeadError> {
    let (mut bytes, decoded) = flatten(fields)?;
    let mut pseudo = Pseudo::default();
    let mut regular = Regular::with_capacity(decoded.len());
    for span in &decoded {
        let (name, value) = (span.name(&bytes), span.value(&bytes));
        check_value(value)?;
        if name.first() == Some(&b':') {
            // §4.3: pseudo-header fields come before every regular field.
            if !regular.spans.is_empty() || regular.cookies > 0 {
                return Err(HeadError::Malformed(
                    "pseudo-header field after a regular one",
                ));
            }
            pseudo.set(name, span, limits.connect_protocol)?;
        } else {
            regular.add(name, value, span)?;
        }
    }
    let content_length = regular.content_length;
    let host = regular.host;
    regular.join_cookies(&mut bytes, &decoded)?;
    let bytes = bytes.freeze();
    let target = pseudo.target(&bytes, host, limits)?;
    if let Some(length) = content_length {
        // §4.1.2: a content-length that the DATA frames (none here) do not match.
        if end_stream && length > 0 {
            return Err(HeadError::Malformed(
                "content-length on a request without body",
            ));
        }
        if length > limits.body_bytes_max {
            return Err(HeadError::Answer(413));
        }
    }
    Ok(Request {
        method: target.method,
        scheme: target.scheme,
        authority: target.authority,
        path: target.path,
        headers: HeaderFields::new(bytes, regular.spans),
        content_length,
        end_stream,
        protocol: target.protocol,
    })
}

/// Builds trailers from a decoded field section: regular fields only (§4.1).
pub(crate) fn parse_trailers(fields: &[Field]) -> Result<HeaderFields, HeadError> {
    let (mut bytes, decoded) = flatten(fields)?;
    let mut regular = Regular::with_capacity(decoded.len());
    for span in &decoded {
        let (name, value) = (span.name(&bytes), span.value(&bytes));
        check_value(value)?;
        if name.first() == Some(&b':') {
            return Err(HeadError::Malformed("pseudo-header field in trailers"));
        }
        regular.add(name, value, span)?;
    }
    regular.join_cookies(&mut bytes, &decoded)?;
    Ok(HeaderFields::new(bytes.freeze(), regular.spans))
}

/// §4.2 (RFC 9110 §5.5): no NUL, CR or LF anywhere, no whitespace at either end.
fn check_value(value: &[u8]) -> Result<(), HeadError> {
    if value.iter().any(|&b| matches!(b, 0 | b'\r' | b'\n')) {
        return Err(HeadError::Malformed("field value with NUL, CR or LF"));
    }
    let blank = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    if blank(value.first()) || blank(value.last()) {
        return Err(HeadError::Malformed(
            "field value with whitespace at an end",
        ));
    }
    Ok(())
}

/// The four request pseudo-header fields, and RFC 9220's `:protocol`, each at most once
/// (§4.3.1), as spans of their values.
#[derive(Debug, Default)]
struct Pseudo {
    method: Option<Value>,
    scheme: Option<Value>,
    authority: Option<Value>,
    path: Option<Value>,
    protocol: Option<Value>,
}

/// Where a value lies in the head's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Value {
    at: u32,
    len: u32,
}

impl Value {
    fn of(span: &Decoded) -> Value {
        Value {
            at: span.value,
            len: span.value_len,
        }
    }

    fn range(self) -> std::ops::Range<usize> {
        self.at as usize..(self.at + self.len) as usize
    }
}

/// The validated pseudo-header fields.
struct Target {
    method: http::Method,
    scheme: Bytes,
    authority: Option<Bytes>,
    path: Bytes,
    protocol: Option<Bytes>,
}

impl Pseudo {
    /// `connect_protocol`: we advertised SETTINGS_ENABLE_CONNECT_PROTOCOL.
    fn set(
        &mut self,
        name: &[u8],
        span: &Decoded,
        connect_protocol: bool,
    ) -> Result<(), HeadError> {
        let slot = match name {
            b":method" => &mut self.method,
            b":scheme" => &mut self.scheme,
            b":authority" => &mut self.authority,
            b":path" => &mut self.path,
            // RFC 9220 §3: a client may send it only once we said we take it.
            b":protocol" if connect_protocol => &mut self.protocol,
            // §4.3: response pseudo-headers and unknown ones (:protocol too, when we did
            // not send SETTINGS_ENABLE_CONNECT_PROTOCOL) make a request malformed.
            _ => return Err(HeadError::Malformed("unknown pseudo-header field")),
        };
        if slot.replace(Value::of(span)).is_some() {
            return Err(HeadError::Malformed("repeated pseudo-header field"));
        }
        Ok(())
    }

    /// Checks presence and syntax; `host` is the Host field, if any; the values lie in
    /// `bytes`.
    fn target(
        self,
        bytes: &Bytes,
        host: Option<Value>,
        limits: HeadLimits,
    ) -> Result<Target, HeadError> {
        let Some(method) = self.method else {
            return Err(HeadError::Malformed("no :method"));
        };
        let method = http::Method::from_bytes(&bytes[method.range()])
            .map_err(|_| HeadError::Malformed("invalid :method"))?;
        let host = host.map(|h| bytes.slice(h.range()));
        let authority = self.authority.map(|a| bytes.slice(a.range()));
        if let Some(authority) = &authority {
            check_authority(authority, host.as_ref())?;
        }
        let protocol = self.protocol.map(|p| bytes.slice(p.range()));
        if method == http::Method::CONNECT && protocol.is_none() {
            return Err(connect(&self));
        }
        // RFC 9220 §3 (RFC 8441 §4): `:protocol` only on CONNECT, which then has all four
        // others.
        if protocol.is_some() && (method != http::Method::CONNECT || authority.is_none()) {
            return Err(HeadError::Malformed(
                ":protocol on a method other than CONNECT, or without :authority",
            ));
        }
        let protocol_ok = |p: &Bytes| p.split(|&b| b == b'/').all(is_token);
        if protocol.as_ref().is_some_and(|p| !protocol_ok(p)) {
            return Err(HeadError::Malformed("invalid :protocol"));
        }
        let (Some(scheme), Some(path)) = (self.scheme, self.path) else {
            return Err(HeadError::Malformed("no :scheme or no :path"));
        };
        let (scheme, path) = (bytes.slice(scheme.range()), bytes.slice(path.range()));
        check_scheme(&scheme)?;
        check_path(&path, &method)?;
        if path.len() > limits.path_bytes_max {
            return Err(HeadError::Answer(414));
        }
        Ok(Target {
            method,
            scheme,
            authority: authority.or(host),
            path,
            protocol,
        })
    }
}

/// §4.4: a well-formed CONNECT has `:authority` and neither `:scheme` nor `:path`. Squall
/// is not a forward proxy, so a well-formed one is answered 501 rather than reset: the
/// client learns that the method, not its request, is the problem.
fn connect(pseudo: &Pseudo) -> HeadError {
    if pseudo.scheme.is_some() || pseudo.path.is_some() || pseudo.authority.is_none() {
        return HeadError::Malformed("CONNECT with :scheme or :path, or without :authority");
    }
    HeadError::Answer(501)
}

/// RFC 3986 §3.1: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
fn check_scheme(scheme: &[u8]) -> Result<(), HeadError> {
    let ok = scheme.first().is_some_and(u8::is_ascii_alphabetic)
        && scheme
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if !ok {
        return Err(HeadError::Malformed("invalid :scheme"));
    }
    Ok(())
}

/// §4.3.1: non-empty; `*` only for OPTIONS; else origin form. Only visible ASCII, so the
/// path can go into an HTTP/1.1 request line unchanged.
fn check_path(path: &[u8], method: &http::Method) -> Result<(), HeadError> {
    let form_ok = match path.first() {
        Some(b'/') => true,
        Some(b'*') => path.len() == 1 && method == http::Method::OPTIONS,
        _ => false,
    };
    if !form_ok || !path.iter().all(|&b| (0x21..=0x7e).contains(&b)) {
        return Err(HeadError::Malformed("invalid :path"));
    }
    Ok(())
}

/// §4.3.1: no userinfo, visible ASCII; and a Host field, if present, names the same.
fn check_authority(authority: &[u8], host: Option<&Bytes>) -> Result<(), HeadError> {
    let visible = authority.iter().all(|&b| (0x21..=0x7e).contains(&b));
    if authority.is_empty() || !visible || authority.contains(&b'@') {
        return Err(HeadError::Malformed("invalid :authority"));
    }
    if host.is_some_and(|host| !host.eq_ignore_ascii_case(authority)) {
        return Err(HeadError::Malformed("Host differs from :authority"));
    }
    Ok(())
}

/// Regular fields being collected: the spans of those that pass, cookies apart.
#[derive(Debug)]
struct Regular {
    spans: Vec<FieldSpan>,
    /// How many `cookie` fields there were; they are joined at the end.
    cookies: usize,
    content_length: Option<u64>,
    host: Option<Value>,
}

/// The most regular fields a head may have: what `http::HeaderMap` holds (it panics past
/// that), since the server still converts a head to one at some edges. A list that long can
/// only come from a very large `max_field_section_size`, so it is answered like one too
/// large.
const FIELDS_MAX: usize = 32_768;

impl Regular {
    fn with_capacity(capacity: usize) -> Regular {
        Regular {
            spans: Vec::with_capacity(capacity),
            cookies: 0,
            content_length: None,
            host: None,
        }
    }

    fn add(&mut self, name: &[u8], value: &[u8], span: &Decoded) -> Result<(), HeadError> {
        check_name(name)?;
        // What `http::HeaderValue` accepts: no control byte but tab (NUL, CR and LF are
        // already refused), no DEL.
        if value.iter().any(|&b| (b < b' ' && b != b'\t') || b == 0x7f) {
            return Err(HeadError::Malformed("invalid field value"));
        }
        match name {
            b"te" if !value.eq_ignore_ascii_case(b"trailers") => {
                return Err(HeadError::Malformed("te other than trailers"));
            }
            b"cookie" => {
                self.cookies += 1;
                return Ok(());
            }
            b"content-length" => self.content_length(value)?,
            b"host" => self.host = Some(Value::of(span)),
            _ => {}
        }
        if self.spans.len() + usize::from(self.cookies > 0) >= FIELDS_MAX {
            return Err(HeadError::Answer(431));
        }
        self.spans.push(span.span());
        Ok(())
    }

    /// §4.1.2: one value of digits; repeats must agree (RFC 9110 §8.6).
    fn content_length(&mut self, value: &[u8]) -> Result<(), HeadError> {
        let parsed = parse_decimal(value).ok_or(HeadError::Malformed("invalid content-length"))?;
        if self.content_length.is_some_and(|old| old != parsed) {
            return Err(HeadError::Malformed("conflicting content-length"));
        }
        self.content_length = Some(parsed);
        Ok(())
    }

    /// §4.2.1: cookie fields split for compression go back together with "; ", as one
    /// field after the others; several are joined at the end of `bytes` (`flatten` left
    /// room for it within `u32` offsets).
    fn join_cookies(&mut self, bytes: &mut BytesMut, decoded: &[Decoded]) -> Result<(), HeadError> {
        let is_cookie = |s: &&Decoded| s.name_len == 6 && s.name(bytes) == b"cookie";
        let Some(&first) = decoded.iter().find(is_cookie) else {
            return Ok(());
        };
        let mut span = first.span();
        if self.cookies > 1 {
            let at = bytes.len();
            let len: usize = decoded
                .iter()
                .filter(is_cookie)
                .map(|c| c.value_len as usize + 2)
                .sum();
            bytes.reserve(len);
            let mut joined = 0;
            for cookie in decoded {
                if !(cookie.name_len == 6 && cookie.name(bytes) == b"cookie") {
                    continue;
                }
                if joined > 0 {
                    bytes.put_slice(b"; ");
                }
                joined += 1;
                let value = cookie.value as usize..(cookie.value + cookie.value_len) as usize;
                bytes.extend_from_within(value);
            }
            span.value = at as u32;
            span.value_len = (bytes.len() - at) as u32;
        }
        self.spans.push(span);
        Ok(())
    }
}

/// §4.2: a lowercase token, not connection-specific, of at most 65,535 bytes (what
/// `http::HeaderName` holds, for the edges that convert).
fn check_name(name: &[u8]) -> Result<(), HeadError> {
    if name.iter().any(u8::is_ascii_uppercase) {
        return Err(HeadError::Malformed("uppercase field name"));
    }
    if is_connection_specific(name) {
        return Err(HeadError::Malformed("connection-specific field"));
    }
    if name.len() > usize::from(u16::MAX) || !is_token(name) {
        return Err(HeadError::Malformed("invalid field name"));
    }
    Ok(())
}

/// RFC 9110 §5.6.2: a non-empty token. Field names are one, and so is a `:protocol` (an
/// `Upgrade` protocol name, which may carry a version: `websocket/13`).
fn is_token(bytes: &[u8]) -> bool {
    let token = |b: &u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b);
    !bytes.is_empty() && bytes.iter().all(token)
}

/// Digits only, no sign, no overflow.
fn parse_decimal(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |n, &b| {
        let digit = char::from(b).to_digit(10)?;
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: HeadLimits = HeadLimits {
        path_bytes_max: 64,
        body_bytes_max: 1000,
        connect_protocol: true,
    };

    fn fields(list: &[(&str, &str)]) -> Vec<Field> {
        list.iter()
            .map(|(n, v)| Field {
                name: Bytes::copy_from_slice(n.as_bytes()),
                value: Bytes::copy_from_slice(v.as_bytes()),
                sensitive: false,
            })
            .collect()
    }

    fn get(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
        let mut list = vec![
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "example.com"),
            (":path", "/a"),
        ];
        list.extend_from_slice(extra);
        list
    }

    #[test]
    fn cookies_join_and_spans_point_into_one_buffer() {
        let list = get(&[("cookie", "a=1"), ("accept", "*/*"), ("cookie", "b=2")]);
        let request = parse_request(&fields(&list), true, LIMITS).unwrap();
        assert_eq!(request.method, http::Method::GET);
        assert_eq!(request.authority.as_deref(), Some(&b"example.com"[..]));
        let got: Vec<_> = request.headers.iter().collect();
        assert_eq!(
            got,
            [(&b"accept"[..], &b"*/*"[..]), (b"cookie", b"a=1; b=2")]
        );
        let (bytes, spans) = request.headers.into_parts();
        for span in spans {
            assert!((span.value + span.value_len) as usize <= bytes.len());
        }
    }

    #[test]
    fn each_rule_refuses_or_answers() {
        let malformed = |list: Vec<(&str, &str)>, end| {
            assert!(
                matches!(
                    parse_request(&fields(&list), end, LIMITS),
                    Err(HeadError::Malformed(_))
                ),
                "{list:?}"
            );
        };
        malformed(get(&[("Accept", "x")]), true);
        malformed(get(&[("connection", "close")]), true);
        malformed(get(&[("te", "gzip")]), true);
        malformed(get(&[(":path", "/b")]), true);
        malformed(get(&[(":status", "200")]), true);
        malformed(get(&[("content-length", "5")]), true);
        malformed(get(&[("content-length", "x")]), true);
        malformed(get(&[("x", " padded")]), true);
        malformed(vec![(":method", "GET"), ("a", "b"), (":path", "/")], true);
        malformed(
            vec![
                (":method", "CONNECT"),
                (":authority", "a:443"),
                (":path", "/"),
            ],
            true,
        );
        let answer = |list: Vec<(&str, &str)>| match parse_request(&fields(&list), false, LIMITS) {
            Err(HeadError::Answer(status)) => status,
            other => panic!("{other:?}"),
        };
        assert_eq!(answer(get(&[("content-length", "1001")])), 413);
        assert_eq!(
            answer(vec![(":method", "CONNECT"), (":authority", "a:443")]),
            501
        );
        let long = format!("/{}", "a".repeat(64));
        let list = vec![
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "a"),
            (":path", long.as_str()),
        ];
        assert_eq!(answer(list), 414);
        assert!(parse_request(&fields(&get(&[("te", "trailers")])), true, LIMITS).is_ok());
    }
}
