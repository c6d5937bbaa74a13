//! Request heads and trailers from decoded fields: field validity (RFC 9113 §8.2.1),
//! connection-specific fields (§8.2.2), cookies (§8.2.3), request pseudo-header fields
//! (§8.3.1) and content-length (§8.1.1). Pure functions: fields in, a [`Request`] or the
//! answer the stream gets out.

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use squall_hpack::Field;

use super::types::Request;

/// The limits a request head is checked against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeadLimits {
    pub path_bytes_max: usize,
    pub body_bytes_max: u64,
}

/// Why a head was not turned into a request, and what the stream gets instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadError {
    /// Malformed (§8.1.1): a stream error of type PROTOCOL_ERROR.
    Malformed(&'static str),
    /// Well-formed, but answered by the connection with this status and no body.
    Answer(u16),
}

/// Fields that make a message malformed in HTTP/2 whatever their value (§8.2.2).
const CONNECTION_SPECIFIC: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// Whether a response field is one HTTP/2 cannot carry (§8.2.2); the connection drops it.
pub(crate) fn is_connection_specific(name: &[u8]) -> bool {
    CONNECTION_SPECIFIC
        .iter()
        .any(|c| c.as_bytes().eq_ignore_ascii_case(name))
}

/// Builds a request from a decoded header block.
pub(crate) fn parse_request(
    fields: impl IntoIterator<Item = Field>,
    end_stream: bool,
    limits: HeadLimits,
) -> Result<Request, HeadError> {
    let mut pseudo = Pseudo::default();
    let mut regular = Regular::default();
    for field in fields {
        check_value(&field.value)?;
        if field.name.first() == Some(&b':') {
            // §8.3: pseudo-header fields come before every regular field.
            if !regular.headers.is_empty() || !regular.cookies.is_empty() {
                return Err(HeadError::Malformed(
                    "pseudo-header field after a regular one",
                ));
            }
            pseudo.set(field)?;
        } else {
            regular.add(field)?;
        }
    }
    let content_length = regular.content_length;
    let host = regular.host.clone();
    let headers = regular.finish()?;
    let target = pseudo.target(host, limits)?;
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
        headers,
        content_length,
        end_stream,
    })
}

/// Builds trailers from a decoded header block: regular fields only (§8.1).
pub(crate) fn parse_trailers(
    fields: impl IntoIterator<Item = Field>,
) -> Result<HeaderMap, HeadError> {
    let mut regular = Regular::default();
    for field in fields {
        check_value(&field.value)?;
        if field.name.first() == Some(&b':') {
            return Err(HeadError::Malformed("pseudo-header field in trailers"));
        }
        regular.add(field)?;
    }
    regular.finish()
}

/// §8.2.1: no NUL, CR or LF anywhere, no whitespace at either end.
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

/// The four request pseudo-header fields, each at most once (§8.3.1).
#[derive(Debug, Default)]
struct Pseudo {
    method: Option<Bytes>,
    scheme: Option<Bytes>,
    authority: Option<Bytes>,
    path: Option<Bytes>,
}

/// The validated pseudo-header fields.
struct Target {
    method: http::Method,
    scheme: Bytes,
    authority: Option<Bytes>,
    path: Bytes,
}

impl Pseudo {
    fn set(&mut self, field: Field) -> Result<(), HeadError> {
        let slot = match &field.name[..] {
            b":method" => &mut self.method,
            b":scheme" => &mut self.scheme,
            b":authority" => &mut self.authority,
            b":path" => &mut self.path,
            // §8.3: response pseudo-headers and unknown ones (:protocol too: we do not
            // send SETTINGS_ENABLE_CONNECT_PROTOCOL) make a request malformed.
            _ => return Err(HeadError::Malformed("unknown pseudo-header field")),
        };
        if slot.replace(field.value).is_some() {
            return Err(HeadError::Malformed("repeated pseudo-header field"));
        }
        Ok(())
    }

    /// Checks presence and syntax; `host` is the Host field, if any.
    fn target(self, host: Option<Bytes>, limits: HeadLimits) -> Result<Target, HeadError> {
        let Some(method) = &self.method else {
            return Err(HeadError::Malformed("no :method"));
        };
        let method = http::Method::from_bytes(method)
            .map_err(|_| HeadError::Malformed("invalid :method"))?;
        if let Some(authority) = &self.authority {
            check_authority(authority, host.as_ref())?;
        }
        if method == http::Method::CONNECT {
            return Err(connect(&self));
        }
        let (Some(scheme), Some(path)) = (self.scheme, self.path) else {
            return Err(HeadError::Malformed("no :scheme or no :path"));
        };
        check_scheme(&scheme)?;
        check_path(&path, &method)?;
        if path.len() > limits.path_bytes_max {
            return Err(HeadError::Answer(414));
        }
        Ok(Target {
            method,
            scheme,
            authority: self.authority.or(host),
            path,
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

/// Regular fields being collected.
#[derive(Debug, Default)]
struct Regular {
    headers: HeaderMap,
    cookies: Vec<Bytes>,
    content_length: Option<u64>,
    host: Option<Bytes>,
}

impl Regular {
    fn add(&mut self, field: Field) -> Result<(), HeadError> {
        let name = regular_name(&field.name)?;
        match name {
            header::TE if !field.value.eq_ignore_ascii_case(b"trailers") => {
                return Err(HeadError::Malformed("te other than trailers"));
            }
            header::COOKIE => {
                self.cookies.push(field.value);
                return Ok(());
            }
            header::CONTENT_LENGTH => self.content_length(&field.value)?,
            header::HOST => self.host = Some(field.value.clone()),
            _ => {}
        }
        let value = HeaderValue::from_maybe_shared(field.value)
            .map_err(|_| HeadError::Malformed("invalid field value"))?;
        append(&mut self.headers, name, value)
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

    /// §8.2.3: cookie fields split for compression go back together with "; ".
    fn finish(mut self) -> Result<HeaderMap, HeadError> {
        if !self.cookies.is_empty() {
            let len = self.cookies.iter().map(|c| c.len() + 2).sum::<usize>();
            let mut joined = BytesMut::with_capacity(len);
            for (i, cookie) in self.cookies.iter().enumerate() {
                if i > 0 {
                    joined.put_slice(b"; ");
                }
                joined.put_slice(cookie);
            }
            let value = HeaderValue::from_maybe_shared(joined.freeze())
                .map_err(|_| HeadError::Malformed("invalid cookie value"))?;
            append(&mut self.headers, header::COOKIE, value)?;
        }
        Ok(self.headers)
    }
}

/// §8.2.1 and §8.2.2: a lowercase token that is not connection-specific.
fn regular_name(name: &[u8]) -> Result<HeaderName, HeadError> {
    // `HeaderName::from_bytes` would lowercase what HTTP/2 calls malformed.
    if name.iter().any(u8::is_ascii_uppercase) {
        return Err(HeadError::Malformed("uppercase field name"));
    }
    if is_connection_specific(name) {
        return Err(HeadError::Malformed("connection-specific field"));
    }
    HeaderName::from_bytes(name).map_err(|_| HeadError::Malformed("invalid field name"))
}

/// `HeaderMap` holds at most 32,768 fields and panics past that; a list that long can only
/// come from a very large `max_header_list_size`, so it is answered like one too large.
fn append(map: &mut HeaderMap, name: HeaderName, value: HeaderValue) -> Result<(), HeadError> {
    map.try_append(name, value)
        .map(|_| ())
        .map_err(|_| HeadError::Answer(431))
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
