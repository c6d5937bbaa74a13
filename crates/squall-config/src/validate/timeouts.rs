//! A proxy route's own timers and bounds: `response_timeout` (the wait for the origin's
//! response head, over its upstream's), `read_timeout` (the longest silence once the head
//! arrived) and `body_bytes_max` (the largest request body, over `limits.body_bytes_max`).
//!
//! Why per route: one upstream often serves both short calls and long streams (a gRPC
//! service's unary calls and its server streams), and only the route knows which it is.

use std::time::Duration;

use super::value::{duration_or, size_or};
use crate::diagnostics::Report;
use crate::model::{Action, ProxyTimeouts};
use crate::raw::{RawRoute, Val};

/// The route's `response_timeout` and `read_timeout`: durations over 0, on proxy routes only.
pub(super) fn proxy_timeouts(
    raw: &RawRoute,
    action: &Option<Action>,
    r: &mut Report,
) -> ProxyTimeouts {
    let proxy = action.as_ref().is_none_or(Action::is_proxy);
    let mut one = |key: &str, value: Option<&Val>| {
        let value = value?;
        if !proxy {
            r.error(&value.span(), format!("{key} only applies to proxy routes"));
        }
        // A bad value is reported once, and leaves the default in place.
        let timeout = duration_or(r, key, Some(value), Duration::MAX);
        if timeout.is_zero() {
            r.error(&value.span(), format!("{key} must be longer than 0"));
        }
        Some(timeout).filter(|t| !t.is_zero() && *t != Duration::MAX)
    };
    ProxyTimeouts {
        response: one("response_timeout", raw.response_timeout.as_ref()),
        read: one("read_timeout", raw.read_timeout.as_ref()),
    }
}

/// The route's `body_bytes_max`: a size, on proxy routes only (a long gRPC or upload stream's
/// total, which `limits.body_bytes_max` would cap).
pub(super) fn body_bytes_max(
    raw: &RawRoute,
    action: &Option<Action>,
    r: &mut Report,
) -> Option<u64> {
    let value = raw.body_bytes_max.as_ref()?;
    if action.as_ref().is_some_and(|a| !a.is_proxy()) {
        r.error(&value.span(), "body_bytes_max only applies to proxy routes");
    }
    Some(size_or(r, "body_bytes_max", Some(value), u64::MAX))
}
