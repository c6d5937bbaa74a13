//! Checks of single values shared by every section: durations, sizes, integers, addresses,
//! header fields, status codes and host names.
//!
//! Each check reports its own problem at the value's position and returns `None` (or the
//! default), so the caller carries on and the file's other mistakes are found in the same run.

use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::time::Duration;

use http::{HeaderName, HeaderValue, StatusCode};

use crate::diagnostics::Report;
use crate::raw::{Int, Pairs, Str, Val};
use crate::units::{parse_duration, parse_size};

/// Header fields that carry connection management and message framing (RFC 9110 §7.6.1,
/// RFC 9112 §6). Squall computes them for each hop; a configured value would contradict the
/// real framing and open the door to request smuggling, so edits may not touch them.
const MANAGED_HEADERS: &[&str] = &[
    "connection",
    "content-length",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Methods whose lowercase spelling is surely a mistake: methods are case-sensitive
/// (RFC 9110 §9.1), so "get" would be a different, never-used method.
const STANDARD_METHODS: &[&str] = &[
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

/// Longest host name (RFC 1035 §2.3.4).
const HOST_BYTES_MAX: usize = 253;

/// `value` as a duration, `default` when absent, `default` after reporting when invalid.
pub(super) fn duration_or(
    r: &mut Report,
    key: &str,
    value: Option<&Val>,
    default: Duration,
) -> Duration {
    let Some(value) = value else { return default };
    let message = match value.get_ref() {
        toml::Value::String(s) => match parse_duration(s) {
            Ok(duration) => return duration,
            Err(e) => format!("{key}: {e}"),
        },
        toml::Value::Integer(n) => {
            format!("{key}: duration without a unit: use ms, s, m or h, as in \"{n}s\"")
        }
        other => format!(
            "{key}: expected a duration such as \"10s\", found {}",
            other.type_str()
        ),
    };
    r.error(&value.span(), message);
    default
}

/// Like [`duration_or`], for timeouts and intervals, where zero would mean "expire at once".
pub(super) fn timeout_or(
    r: &mut Report,
    key: &str,
    value: Option<&Val>,
    default: Duration,
) -> Duration {
    let duration = duration_or(r, key, value, default);
    if duration.is_zero() {
        if let Some(value) = value {
            r.error(&value.span(), format!("{key} must be longer than 0"));
        }
        return default;
    }
    duration
}

/// `value` as a size in bytes, `default` when absent, `default` after reporting when invalid.
pub(super) fn size_or(r: &mut Report, key: &str, value: Option<&Val>, default: u64) -> u64 {
    let Some(value) = value else { return default };
    let message = match value.get_ref() {
        toml::Value::String(s) => match parse_size(s) {
            Ok(size) => return size,
            Err(e) => format!("{key}: {e}"),
        },
        toml::Value::Integer(n) => match u64::try_from(*n) {
            Ok(size) => return size,
            Err(_) => format!("{key}: size must not be negative"),
        },
        other => format!(
            "{key}: expected a size such as \"16KiB\" or a number of bytes, found {}",
            other.type_str()
        ),
    };
    r.error(&value.span(), message);
    default
}

/// Like [`size_or`], for limits where zero would refuse every request.
pub(super) fn nonzero_size_or(r: &mut Report, key: &str, value: Option<&Val>, default: u64) -> u64 {
    let size = size_or(r, key, value, default);
    if size == 0 {
        if let Some(value) = value {
            r.error(&value.span(), format!("{key} must be more than 0"));
        }
        return default;
    }
    size
}

/// `value` if it lies in `range`.
pub(super) fn int_in(
    r: &mut Report,
    key: &str,
    value: &Int,
    range: RangeInclusive<u32>,
) -> Option<u32> {
    let n = *value.get_ref();
    match u32::try_from(n) {
        Ok(n) if range.contains(&n) => Some(n),
        _ => {
            let (min, max) = (range.start(), range.end());
            let message = if *max == u32::MAX {
                format!("{key} must be at least {min}, not {n}")
            } else {
                format!("{key} must be from {min} to {max}, not {n}")
            };
            r.error(&value.span(), message);
            None
        }
    }
}

/// `value` as an IP address and port.
pub(super) fn socket_addr(r: &mut Report, value: &Str) -> Option<SocketAddr> {
    let text = value.get_ref();
    match text.parse() {
        Ok(address) => Some(address),
        Err(_) => {
            let hint = "expected IP:PORT, as in \"127.0.0.1:8080\" or \"[::1]:8080\"";
            r.error(&value.span(), format!("bad address {text:?}: {hint}"));
            None
        }
    }
}

/// `value` as a header name, lowercased as HTTP/2 requires (RFC 9113 §8.2.1).
pub(super) fn header_name(r: &mut Report, value: &Str) -> Option<HeaderName> {
    let text = value.get_ref();
    match HeaderName::from_bytes(text.as_bytes()) {
        Ok(name) => Some(name),
        Err(_) => {
            let hint = "a name is a token of letters, digits and !#$%&'*+-.^_`|~ (RFC 9110 §5.1)";
            r.error(&value.span(), format!("bad header name {text:?}: {hint}"));
            None
        }
    }
}

/// `name` unless it is one Squall manages itself; `name` sits at `span`.
pub(super) fn editable(r: &mut Report, name: HeaderName, value: &Str) -> Option<HeaderName> {
    if MANAGED_HEADERS.contains(&name.as_str()) {
        let why = "Squall sets connection and framing headers itself";
        r.error(
            &value.span(),
            format!("header {:?} cannot be set or removed: {why}", name.as_str()),
        );
        return None;
    }
    Some(name)
}

/// `value` as a header value.
pub(super) fn header_value(r: &mut Report, value: &Str) -> Option<HeaderValue> {
    let text = value.get_ref();
    // `http` accepts obs-text (bytes >= 0x80), but RFC 9110 §5.5 asks senders to keep to
    // ASCII, and Squall sends what is configured here.
    match HeaderValue::from_str(text).ok().filter(|_| text.is_ascii()) {
        Some(value) => Some(value),
        None => {
            let hint = "only visible ASCII, spaces and tabs are allowed (RFC 9110 §5.5)";
            r.error(&value.span(), format!("bad header value {text:?}: {hint}"));
            None
        }
    }
}

/// A table of header fields; with `edit`, names Squall manages are refused.
pub(super) fn header_fields(
    r: &mut Report,
    pairs: &Pairs,
    edit: bool,
) -> Vec<(HeaderName, HeaderValue)> {
    let mut fields = Vec::new();
    for (name, value) in &pairs.0 {
        let checked_name = header_name(r, name);
        let checked_name = if edit {
            checked_name.and_then(|n| editable(r, n, name))
        } else {
            checked_name
        };
        if let (Some(name), Some(value)) = (checked_name, header_value(r, value)) {
            fields.push((name, value));
        }
    }
    fields
}

/// `value` as a method token, refusing lowercase spellings of standard methods.
pub(super) fn method(r: &mut Report, value: &Str) -> Option<http::Method> {
    let text = value.get_ref();
    let upper = text.to_ascii_uppercase();
    if *text != upper && STANDARD_METHODS.contains(&upper.as_str()) {
        r.error(
            &value.span(),
            format!("methods are case-sensitive: did you mean {upper:?}?"),
        );
        return None;
    }
    match http::Method::from_bytes(text.as_bytes()) {
        Ok(method) => Some(method),
        Err(_) => {
            let hint = "methods are tokens such as \"GET\" or \"M-SEARCH\" (RFC 9110 §9.1)";
            r.error(&value.span(), format!("bad method {text:?}: {hint}"));
            None
        }
    }
}

/// `value` as a status code accepted by `allowed`; `what` says which codes are, for the message.
pub(super) fn status(
    r: &mut Report,
    key: &str,
    value: &Int,
    allowed: impl Fn(u16) -> bool,
    what: &str,
) -> Option<StatusCode> {
    let n = *value.get_ref();
    let code = u16::try_from(n).ok().filter(|&c| allowed(c));
    match code.and_then(|c| StatusCode::from_u16(c).ok()) {
        Some(status) => Some(status),
        None => {
            r.error(
                &value.span(),
                format!("{key} status {n} is not allowed: use {what}"),
            );
            None
        }
    }
}

/// `value` as a lowercase host pattern: a name, an IP literal, `*.suffix`, or (only where
/// `star` allows it) `*`, the catch-all.
pub(super) fn host_pattern(r: &mut Report, value: &Str, star: bool) -> Option<String> {
    let host = value.get_ref().to_ascii_lowercase();
    match host_error(&host, star) {
        None => Some(host),
        Some(error) => {
            r.error(
                &value.span(),
                format!("bad host {:?}: {error}", value.get_ref()),
            );
            None
        }
    }
}

/// Why `host` is not a valid pattern, if it is not. `host` is lowercase.
fn host_error(host: &str, star: bool) -> Option<String> {
    if host == "*" {
        return (!star).then(|| "\"*\" is not allowed here".to_owned());
    }
    if host.len() > HOST_BYTES_MAX {
        return Some(format!("longer than {HOST_BYTES_MAX} bytes"));
    }
    if let Some(ip) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return ip
            .parse::<std::net::Ipv6Addr>()
            .err()
            .map(|_| "not an IPv6 address".to_owned());
    }
    if host.contains(':') {
        return Some("hosts are matched without the port; remove \":PORT\"".to_owned());
    }
    let name = host.strip_prefix("*.").unwrap_or(host);
    let label_ok = |label: &str| {
        !label.is_empty()
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if name.split('.').all(label_ok) {
        return None;
    }
    let example = if star { ", or \"*\"" } else { "" };
    Some(format!(
        "use a name such as \"example.test\", a wildcard such as \"*.example.test\"{example}"
    ))
}

#[cfg(test)]
mod tests {
    use super::host_error;

    #[test]
    fn host_patterns() {
        for host in [
            "example.test",
            "*.example.test",
            "a-b.c_d.test",
            "127.0.0.1",
            "[::1]",
            "localhost",
        ] {
            assert_eq!(host_error(host, false), None, "{host}");
        }
        assert_eq!(host_error("*", true), None);
        let bad = [
            ("*", "\"*\" is not allowed here"),
            (
                "example.test:8080",
                "hosts are matched without the port; remove \":PORT\"",
            ),
            ("[::g]", "not an IPv6 address"),
        ];
        for (host, error) in bad {
            assert_eq!(host_error(host, false).as_deref(), Some(error), "{host}");
        }
        for host in [
            "",
            "a..b",
            ".a",
            "a.",
            "*example.test",
            "a.*.test",
            "*.",
            "ex ample",
            "é.test",
        ] {
            assert!(host_error(host, true).is_some(), "{host}");
        }
    }
}
