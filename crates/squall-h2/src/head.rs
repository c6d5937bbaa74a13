//! Request heads and trailers from decoded fields, for HTTP/2 and HTTP/3 alike: field
//! validity (RFC 9113 §8.2.1), connection-specific fields (§8.2.2), cookies (§8.2.3), request
//! pseudo-header fields (§8.3.1), CONNECT (§8.5), the extended CONNECT of RFC 8441 §4 and
//! content-length (§8.1.1). Pure functions: fields in, a [`Request`] or the answer the
//! stream gets out.
//!
//! HTTP/3 takes these rules over unchanged (RFC 9114 §4.1.2, §4.2, §4.3, §4.4; RFC 9220 for
//! the extended CONNECT), so `squall-h3`'s server validates its requests here too, and a
//! request is accepted, refused or answered alike over either protocol. What differs stays
//! with each protocol: how fields are decoded (HPACK, QPACK), how the end of the stream is
//! signalled (END_STREAM, QUIC FIN), the error code of a malformed request (PROTOCOL_ERROR,
//! H3_MESSAGE_ERROR), and the field section size limit, which each decoder enforces (431).
//!
//! The fields come as one buffer and the [`Decoded`] span of each name and value in it, as
//! [`squall_hpack::Decoder::decode_spans`] writes them; a decoder that hands out fields one
//! by one (QPACK) writes them so with [`push_field`]. The request keeps that buffer and the spans
//! of its regular fields: nothing is allocated per field.
//!
//! Responses: [`response_fields`] drops what neither protocol may carry, and
//! [`status_digits`] gives `:status` values as `'static` bytes.

use bytes::{BufMut, Bytes, BytesMut};
pub use squall_hpack::FieldSpan as Decoded;

use crate::fields::{FieldSpan, HeaderFields};
use field_bytes::{check_name, check_value, is_token};

mod field_bytes;

/// One request head, validated as RFC 9113 §8.2 and §8.3.1 require (RFC 9114 §4.2 and §4.3
/// for HTTP/3, the same rules): what [`parse_request`] makes, and what a server connection of
/// either protocol hands the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: http::Method,
    /// `:scheme`.
    pub scheme: Bytes,
    /// `:authority`, else the Host field when there is no `:authority`.
    pub authority: Option<Bytes>,
    /// `:path`; `*` for a server-wide OPTIONS.
    pub path: Bytes,
    /// Regular fields only, as spans of the decoded block. Several `cookie` fields are
    /// joined with "; " (RFC 9113 §8.2.3, RFC 9114 §4.2.1).
    pub headers: HeaderFields,
    /// The content-length field, when sent.
    pub content_length: Option<u64>,
    /// True when no body follows: in HTTP/2, END_STREAM on the HEADERS; in HTTP/3, the
    /// stream ended right after the HEADERS frame, in the same input (otherwise its end
    /// comes as body data marked as the end, possibly empty, or as trailers).
    pub end_stream: bool,
    /// `:protocol` of an extended CONNECT (RFC 8441 §4, RFC 9220 for HTTP/3; `method` is
    /// CONNECT): the stream carries that protocol (`websocket`) both ways in DATA frames once
    /// answered 2xx. Only when the server enabled it ([`HeadLimits::connect_protocol`]:
    /// `ServerConfig::enable_connect_protocol` in either crate).
    pub protocol: Option<Bytes>,
}

/// The limits a request head is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadLimits {
    /// A longer `:path` is answered 414.
    pub path_bytes_max: usize,
    /// A larger content-length is answered 413.
    pub body_bytes_max: u64,
    /// We advertised SETTINGS_ENABLE_CONNECT_PROTOCOL: `:protocol` is allowed on CONNECT.
    pub connect_protocol: bool,
}

/// Why a head was not turned into a request, and what the stream gets instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadError {
    /// Malformed (RFC 9113 §8.1.1, RFC 9114 §4.1.2): a stream error, of type PROTOCOL_ERROR
    /// in HTTP/2 and H3_MESSAGE_ERROR in HTTP/3. The text is for logs.
    Malformed(&'static str),
    /// Well-formed, but answered by the connection with this status (413, 414, 431 or 501)
    /// and no body.
    Answer(u16),
}

/// Fields that make a message malformed whatever their value (RFC 9113 §8.2.2, RFC 9114
/// §4.2).
const CONNECTION_SPECIFIC: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// Whether a field is connection-specific (RFC 9113 §8.2.2, RFC 9114 §4.2), which neither
/// HTTP/2 nor HTTP/3 can carry: a request with one is malformed, and a response's is
/// dropped ([`response_fields`]). Any case.
pub fn is_connection_specific(name: &[u8]) -> bool {
    CONNECTION_SPECIFIC
        .iter()
        .any(|c| c.as_bytes().eq_ignore_ascii_case(name))
}

/// The fields HTTP/2 and HTTP/3 can carry in a response head or trailers: no pseudo-header
/// name (the connection writes `:status` itself) and no connection-specific field.
pub fn response_fields<'a>(
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
    (fields.into_iter())
        .filter(|(name, _)| !name.starts_with(b":") && !is_connection_specific(name))
}

/// "000" to "999" back to back: `:status` values with a `'static` lifetime.
static STATUS_DIGITS: [u8; 3000] = {
    let mut table = [0u8; 3000];
    let mut i = 0;
    while i < 1000 {
        table[3 * i] = b'0' + (i / 100) as u8;
        table[3 * i + 1] = b'0' + (i / 10 % 10) as u8;
        table[3 * i + 2] = b'0' + (i % 10) as u8;
        i += 1;
    }
    table
};

/// The three digits of `status` (100..=999; others are clamped), with a `'static` lifetime
/// so that `:status` can go through a field encoder alongside a caller's borrowed fields.
pub fn status_digits(status: u16) -> &'static [u8] {
    debug_assert!((100..=999).contains(&status), "status {status}");
    let at = usize::from(status.clamp(100, 999)) * 3;
    &STATUS_DIGITS[at..at + 3]
}

/// Appends one field to `bytes` and its span to `spans`: a decoder that hands fields over
/// one by one (QPACK) lays a section out so, each name then its value, the shape
/// [`parse_request`] and [`parse_trailers`] take. False, with nothing appended, when the
/// buffer would pass `u32` offsets: a list that large is answered like one too large (431).
pub fn push_field(
    bytes: &mut BytesMut,
    spans: &mut Vec<Decoded>,
    name: &[u8],
    value: &[u8],
    sensitive: bool,
) -> bool {
    let at = bytes.len();
    if at + name.len() + value.len() > u32::MAX as usize {
        return false;
    }
    bytes.put_slice(name);
    bytes.put_slice(value);
    let at = at as u32;
    spans.push(Decoded {
        name: at,
        name_len: name.len() as u32,
        value: at + name.len() as u32,
        value_len: value.len() as u32,
        sensitive,
    });
    true
}

/// Builds a request from a decoded field block: `bytes` and the `decoded` spans of each
/// field in it, in received order, as the HPACK decoder wrote them (or [`push_field`]);
/// `end_stream`: no body follows. The request keeps `bytes` (a joined cookie is appended to
/// it) and the spans of its regular fields; nothing is allocated per field.
pub fn parse_request(
    mut bytes: BytesMut,
    decoded: &[Decoded],
    end_stream: bool,
    limits: HeadLimits,
) -> Result<Request, HeadError> {
    let mut pseudo = Pseudo::default();
    let mut regular = Regular::with_capacity(decoded.len());
    for span in decoded {
        let (name, value) = (span.name(&bytes), span.value(&bytes));
        let clean = check_value(value)?;
        if name.first() == Some(&b':') {
            // §8.3: pseudo-header fields come before every regular field.
            if !regular.spans.is_empty() || regular.cookies > 0 {
                return Err(HeadError::Malformed(
                    "pseudo-header field after a regular one",
                ));
            }
            pseudo.set(name, span, limits.connect_protocol)?;
        } else {
            regular.add(name, value, span, clean)?;
        }
    }
    let content_length = regular.content_length;
    let host = regular.host;
    regular.join_cookies(&mut bytes, decoded)?;
    let bytes = bytes.freeze();
    let target = pseudo.target(&bytes, host, limits)?;
    if let Some(length) = content_length {
        // §8.1.1: a content-length that the DATA frames (none here) do not match.
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

/// Builds trailers from a decoded field block, as [`parse_request`] takes it: regular
/// fields only (RFC 9113 §8.1, RFC 9114 §4.1).
pub fn parse_trailers(mut bytes: BytesMut, decoded: &[Decoded]) -> Result<HeaderFields, HeadError> {
    let mut regular = Regular::with_capacity(decoded.len());
    for span in decoded {
        let (name, value) = (span.name(&bytes), span.value(&bytes));
        let clean = check_value(value)?;
        if name.first() == Some(&b':') {
            return Err(HeadError::Malformed("pseudo-header field in trailers"));
        }
        regular.add(name, value, span, clean)?;
    }
    regular.join_cookies(&mut bytes, decoded)?;
    Ok(HeaderFields::new(bytes.freeze(), regular.spans))
}

/// The four request pseudo-header fields, and RFC 8441's `:protocol`, each at most once
/// (§8.3.1), as spans of their values.
#[derive(Debug, Default)]
struct Pseudo {
    method: Option<Value>,
    scheme: Option<Value>,
    authority: Option<Value>,
    path: Option<Value>,
    protocol: Option<Value>,
}

/// Where a value lies in the block's bytes.
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
            // RFC 8441 §3: a client may send it only once we said we take it.
            b":protocol" if connect_protocol => &mut self.protocol,
            // §8.3: response pseudo-headers and unknown ones (:protocol too, when we did
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
        // RFC 8441 §4: `:protocol` only on CONNECT, which then has all four others.
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
        // The usual schemes as static bytes: a slice of the block would be a locked count
        // up and down for a field the server rarely reads.
        let scheme = match &bytes[scheme.range()] {
            b"https" => Bytes::from_static(b"https"),
            b"http" => Bytes::from_static(b"http"),
            _ => bytes.slice(scheme.range()),
        };
        let path = bytes.slice(path.range());
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

/// §8.5: a well-formed CONNECT has `:authority` and neither `:scheme` nor `:path`. Squall
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

/// §8.3.1: non-empty; `*` only for OPTIONS; else origin form. Only visible ASCII, so the
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

/// §8.3.1: no userinfo, visible ASCII; and a Host field, if present, names the same.
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
/// only come from a very large `max_header_list_size`, so it is answered like one too large.
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

    /// `clean`: [`check_value`] found only bytes a regular value may hold in `value`.
    fn add(
        &mut self,
        name: &[u8],
        value: &[u8],
        span: &Decoded,
        clean: bool,
    ) -> Result<(), HeadError> {
        check_name(name)?;
        // What `http::HeaderValue` accepts: no control byte but tab (NUL, CR and LF are
        // already refused), no DEL.
        if !clean {
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
        self.spans.push(FieldSpan {
            name: span.name,
            name_len: span.name_len,
            value: span.value,
            value_len: span.value_len,
        });
        Ok(())
    }

    /// §8.1.1: one value of digits; repeats must agree (RFC 9110 §8.6).
    fn content_length(&mut self, value: &[u8]) -> Result<(), HeadError> {
        let parsed = parse_decimal(value).ok_or(HeadError::Malformed("invalid content-length"))?;
        if self.content_length.is_some_and(|old| old != parsed) {
            return Err(HeadError::Malformed("conflicting content-length"));
        }
        self.content_length = Some(parsed);
        Ok(())
    }

    /// §8.2.3: cookie fields split for compression go back together with "; ", as one
    /// field after the others; several are joined at the end of `bytes`.
    fn join_cookies(&mut self, bytes: &mut BytesMut, decoded: &[Decoded]) -> Result<(), HeadError> {
        let is_cookie = |s: &&Decoded| s.name_len == 6 && s.name(bytes) == b"cookie";
        let Some(&first) = decoded.iter().find(is_cookie) else {
            return Ok(());
        };
        let mut span = FieldSpan {
            name: first.name,
            name_len: first.name_len,
            value: first.value,
            value_len: first.value_len,
        };
        if self.cookies > 1 {
            let at = bytes.len();
            let len: usize = decoded
                .iter()
                .filter(is_cookie)
                .map(|c| c.value_len as usize + 2)
                .sum();
            // Offsets are u32; a list that large can only come from a very large limit.
            if at + len > u32::MAX as usize {
                return Err(HeadError::Answer(431));
            }
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

/// Digits only, no sign, no overflow (a content-length, in either role).
pub(crate) fn parse_decimal(value: &[u8]) -> Option<u64> {
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

    /// `fields` laid out one by one with [`push_field`], as a QPACK decoder does.
    fn gather<'a>(
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Result<(BytesMut, Vec<Decoded>), HeadError> {
        let (mut bytes, mut spans) = (BytesMut::new(), Vec::new());
        for (name, value) in fields {
            if !push_field(&mut bytes, &mut spans, name, value, false) {
                return Err(HeadError::Answer(431));
            }
        }
        Ok((bytes, spans))
    }

    /// Validates `list` as QPACK's fields are: given one by one, gathered into one buffer.
    fn parse(list: &[(&str, &str)], end_stream: bool) -> Result<Request, HeadError> {
        let (bytes, spans) = gather(list.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())))?;
        parse_request(bytes, &spans, end_stream, LIMITS)
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
    fn gathered_fields_lie_in_one_buffer() {
        let (bytes, spans) = gather([(&b"ab"[..], &b"c"[..]), (b"d", b"")]).unwrap();
        assert_eq!(&bytes[..], b"abcd");
        let pairs: Vec<_> = spans
            .iter()
            .map(|s| (s.name(&bytes), s.value(&bytes)))
            .collect();
        assert_eq!(pairs, [(&b"ab"[..], &b"c"[..]), (b"d", b"")]);
    }

    #[test]
    fn cookies_join_and_spans_point_into_one_buffer() {
        let list = get(&[("cookie", "a=1"), ("accept", "*/*"), ("cookie", "b=2")]);
        let request = parse(&list, true).unwrap();
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
                matches!(parse(&list, end), Err(HeadError::Malformed(_))),
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
        let answer = |list: Vec<(&str, &str)>| match parse(&list, false) {
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
        assert!(parse(&get(&[("te", "trailers")]), true).is_ok());
    }

    /// Every byte, in a regular field's name and in its value, gets the verdict the RFCs
    /// give it (the lookup tables against the rules written out), with the message for its
    /// kind of fault.
    #[test]
    fn each_byte_of_a_name_and_a_value_is_judged_by_the_rules() {
        const TCHAR: &[u8] = b"!#$%&'*+-.^_`|~";
        for b in 0..=255u8 {
            let name = [b'x', b, b'y'];
            let value = [b'v', b, b'w'];
            let request = |name: &[u8], value: &[u8]| {
                let fields = [
                    (&b":method"[..], &b"GET"[..]),
                    (b":scheme", b"https"),
                    (b":authority", b"a"),
                    (b":path", b"/"),
                    (name, value),
                ];
                let (bytes, spans) = gather(fields).unwrap();
                parse_request(bytes, &spans, true, LIMITS)
            };
            let name_ok = b.is_ascii_lowercase() || b.is_ascii_digit() || TCHAR.contains(&b);
            match request(&name, b"v") {
                Ok(_) => assert!(name_ok, "name byte {b:#04x} taken"),
                Err(HeadError::Malformed(reason)) => {
                    assert!(!name_ok, "name byte {b:#04x} refused: {reason}");
                    let expected = match b.is_ascii_uppercase() {
                        true => "uppercase field name",
                        false => "invalid field name",
                    };
                    assert_eq!(reason, expected, "name byte {b:#04x}");
                }
                Err(other) => panic!("name byte {b:#04x}: {other:?}"),
            }
            let value_ok = (b >= 0x20 && b != 0x7f) || b == b'\t';
            match request(b"x", &value) {
                Ok(_) => assert!(value_ok, "value byte {b:#04x} taken"),
                Err(HeadError::Malformed(reason)) => {
                    assert!(!value_ok, "value byte {b:#04x} refused: {reason}");
                    let expected = match b {
                        0 | b'\r' | b'\n' => "field value with NUL, CR or LF",
                        _ => "invalid field value",
                    };
                    assert_eq!(reason, expected, "value byte {b:#04x}");
                }
                Err(other) => panic!("value byte {b:#04x}: {other:?}"),
            }
        }
        let refused = |name: &[u8]| {
            let fields = [(&b":method"[..], &b"GET"[..]), (name, &b"v"[..])];
            let (bytes, spans) = gather(fields).unwrap();
            parse_request(bytes, &spans, true, LIMITS).unwrap_err()
        };
        let connection = HeadError::Malformed("connection-specific field");
        assert_eq!(refused(b"keep-alive"), connection);
        assert_eq!(
            refused(b"Keep-Alive"),
            HeadError::Malformed("uppercase field name")
        );
        let long = vec![b'a'; usize::from(u16::MAX) + 1];
        assert_eq!(refused(&long), HeadError::Malformed("invalid field name"));
    }

    #[test]
    fn trailers_take_regular_fields_only() {
        let list = [(&b"x"[..], &b"1"[..]), (b"cookie", b"a"), (b"cookie", b"b")];
        let (bytes, spans) = gather(list).unwrap();
        let trailers = parse_trailers(bytes, &spans).unwrap();
        let got: Vec<_> = trailers.iter().collect();
        assert_eq!(got, [(&b"x"[..], &b"1"[..]), (b"cookie", b"a; b")]);
        let (bytes, spans) = gather([(&b":path"[..], &b"/"[..])]).unwrap();
        assert!(matches!(
            parse_trailers(bytes, &spans),
            Err(HeadError::Malformed(_))
        ));
    }

    #[test]
    fn responses_drop_what_neither_protocol_carries() {
        let fields = [
            (&b"content-type"[..], &b"text/plain"[..]),
            (b"Connection", b"close"),
            (b"transfer-encoding", b"chunked"),
            (b":status", b"500"),
            (b"x-a", b"1"),
        ];
        let kept: Vec<_> = response_fields(fields).map(|(n, _)| n).collect();
        assert_eq!(kept, [&b"content-type"[..], b"x-a"]);
        assert_eq!(status_digits(200), b"200");
        assert_eq!(status_digits(103), b"103");
        assert_eq!(status_digits(999), b"999");
    }
}
