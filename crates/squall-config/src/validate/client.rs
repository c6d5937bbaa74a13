//! `auth_basic`, a route's `request_rate` / `request_burst` / `request_rate_key`,
//! `server.real_ip` and `limits.auth_failures_max`.

use std::path::PathBuf;
use std::time::Duration;

use http::HeaderName;
use toml::Spanned;

use super::value::{header_name, int_in};
use crate::diagnostics::Report;
use crate::raw::*;
use crate::{AUTH_FAILURES_MAX_DEFAULT, AuthBasic, RateKey, RealIp, RouteRate};

/// A route's `auth_basic`; the users file itself is read when the runtime is built.
pub(super) fn auth_basic(raw: &Spanned<RawAuthBasic>, r: &mut Report) -> Option<AuthBasic> {
    let raw = raw.get_ref();
    let realm = raw.realm.get_ref();
    // The realm goes into a quoted-string (RFC 9110 §5.6.4); keeping it to plain visible
    // ASCII spares every client's parser an escape.
    let bad = realm.is_empty()
        || realm
            .chars()
            .any(|c| !(c == ' ' || c.is_ascii_graphic()) || c == '"' || c == '\\');
    if bad {
        let message =
            format!("bad realm {realm:?}: give visible ASCII and spaces, without '\"' or '\\\\'");
        r.error(&raw.realm.span(), message);
    }
    let path = raw.users_file.get_ref();
    if path.is_empty() {
        r.error(&raw.users_file.span(), "users_file is an empty path");
    }
    (!bad && !path.is_empty()).then(|| AuthBasic {
        realm: realm.clone(),
        users_file: PathBuf::from(path),
    })
}

/// A route's own rate: `request_rate = "N/s"` (or `/m`, `/h`), with `request_burst` and
/// `request_rate_key`, which need it.
pub(super) fn route_rate(raw: &RawRoute, r: &mut Report) -> Option<RouteRate> {
    let key = raw.request_rate_key.as_ref().map(|k| rate_key(k, r));
    let burst = raw
        .request_burst
        .as_ref()
        .and_then(|b| int_in(r, "request_burst", b, 1..=u32::MAX));
    let Some(value) = &raw.request_rate else {
        if let Some(k) = &raw.request_rate_key {
            r.error(
                &k.span(),
                "request_rate_key needs request_rate on the route",
            );
        }
        if let Some(b) = &raw.request_burst {
            r.error(&b.span(), "request_burst needs request_rate on the route");
        }
        return None;
    };
    let Some((requests, per)) = parse_rate(value.get_ref()) else {
        let message = format!(
            "bad request_rate {:?}: give requests per unit, such as \"10/s\", \"600/m\" or \"1000/h\"",
            value.get_ref()
        );
        r.error(&value.span(), message);
        return None;
    };
    Some(RouteRate {
        requests,
        per,
        burst: burst.unwrap_or(requests),
        key: key.flatten().unwrap_or_default(),
    })
}

/// `"10/s"`, `"600/m"`, `"1000/h"`: at least one request per unit.
fn parse_rate(text: &str) -> Option<(u32, Duration)> {
    let (count, unit) = text.split_once('/')?;
    let count: u32 = count.trim().parse().ok().filter(|n| *n > 0)?;
    let per = match unit.trim() {
        "s" => Duration::from_secs(1),
        "m" => Duration::from_secs(60),
        "h" => Duration::from_secs(3600),
        _ => return None,
    };
    Some((count, per))
}

fn rate_key(value: &Str, r: &mut Report) -> Option<RateKey> {
    let text = value.get_ref();
    match text.as_str() {
        "client_ip" => return Some(RateKey::ClientIp),
        "route" => return Some(RateKey::Route),
        _ => {}
    }
    if let Some(name) = text.strip_prefix("header:") {
        let spanned = Spanned::new(value.span(), name.to_owned());
        return header_name(r, &spanned).map(RateKey::Header);
    }
    let message = format!(
        "unknown request_rate_key {text:?}: use \"client_ip\", \"header:NAME\" or \"route\""
    );
    r.error(&value.span(), message);
    None
}

/// `server.real_ip = { header, from }`.
pub(super) fn real_ip(raw: &Spanned<RawRealIp>, r: &mut Report) -> Option<RealIp> {
    let item = raw.get_ref();
    let header: Option<HeaderName> = header_name(r, &item.header);
    let from = super::networks(&item.from, r);
    if item.from.get_ref().is_empty() {
        r.error(
            &item.from.span(),
            "real_ip.from is empty: list the proxies whose header is believed",
        );
    }
    Some(RealIp {
        header: header?,
        from,
    })
    .filter(|real_ip| !real_ip.from.is_empty())
}

/// `limits.auth_failures_max`.
pub(super) fn auth_failures_max(value: Option<&Int>, r: &mut Report) -> u32 {
    value
        .and_then(|v| int_in(r, "auth_failures_max", v, 1..=u32::MAX))
        .unwrap_or(AUTH_FAILURES_MAX_DEFAULT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_have_a_count_and_a_unit() {
        assert_eq!(parse_rate("10/s"), Some((10, Duration::from_secs(1))));
        assert_eq!(parse_rate("600/m"), Some((600, Duration::from_secs(60))));
        assert_eq!(
            parse_rate("1000/h"),
            Some((1000, Duration::from_secs(3600)))
        );
        for bad in ["10", "0/s", "-1/s", "10/d", "x/s", "/s", ""] {
            assert_eq!(parse_rate(bad), None, "{bad}");
        }
    }
}
