//! The lookup decision and the coalescing step before a fill: what a request on a cached route
//! gets from what the store holds, at `now`.
//!
//! [`decide`] is a pure function of (entry, request cache-control, now). [`admit`] then applies
//! it against the in-flight table, because the stale-while-revalidate rule needs both: the
//! request that finds the entry stale is served it at once and hands the revalidation to the
//! background (RFC 5861 §3), and requests arriving while it runs are served the stale entry
//! too, without a second revalidation.

use std::sync::Arc;
use std::time::SystemTime;

use crate::entry::{Entry, EntryState};
use crate::inflight::{InFlight, Join, Ticket};
use crate::key::CacheKey;
use crate::policy::{NotStorable, RequestCacheControl};

use super::Outcome;

/// How a response was served from the cache's point of view: the `X-Cache` label and the
/// access log's cache field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Served {
    /// From a stored entry, without asking the origin.
    Hit,
    /// From the origin (also when not stored).
    Miss,
    /// From a stale entry: while another request revalidates it, or after the origin failed.
    Stale,
    /// From a stored entry the origin just confirmed with a 304.
    Revalidated,
}

impl Served {
    pub fn as_str(self) -> &'static str {
        match self {
            Served::Hit => "HIT",
            Served::Miss => "MISS",
            Served::Stale => "STALE",
            Served::Revalidated => "REVALIDATED",
        }
    }
}

/// What a lookup found, for one request at one `now`.
#[derive(Clone, Debug)]
pub enum Decision {
    /// Serve the entry: fresh, or stale within what the client's max-stale accepts.
    Hit(Arc<Entry>),
    /// Stale but servable while one revalidation runs (RFC 5861 §3): serve it, and start the
    /// revalidation in the background if nobody runs one.
    StaleWhileRevalidate(Arc<Entry>),
    /// Go to the origin before serving it, conditionally when it has validators; it becomes the
    /// fill's stale entry (304 freshening, stale-if-error).
    Revalidate(Arc<Entry>),
    /// Nothing stored answers this request.
    Miss,
    /// `only-if-cached` and no entry the client accepts: 504 without asking the origin
    /// (RFC 9111 §5.2.1.7).
    GatewayTimeout,
}

/// The lookup decision for `entry` (the store's answer for the request's key and Vary values)
/// under the request's `control`, at `now`.
///
/// `only-if-cached` is answered from a usable entry or with 504: a stale entry is not
/// revalidated for such a client, nor served while another request revalidates it, since
/// either would make the client's answer wait on, or depend on, the origin.
pub fn decide(
    entry: Option<Arc<Entry>>,
    control: &RequestCacheControl,
    now: SystemTime,
) -> Decision {
    let Some(entry) = entry else {
        return if control.only_if_cached {
            Decision::GatewayTimeout
        } else {
            Decision::Miss
        };
    };
    match entry.state(now, control) {
        EntryState::Fresh => Decision::Hit(entry),
        _ if control.only_if_cached => Decision::GatewayTimeout,
        EntryState::Stale {
            can_serve_while_revalidate: true,
            ..
        } => Decision::StaleWhileRevalidate(entry),
        EntryState::Stale { .. } | EntryState::MustRevalidate => Decision::Revalidate(entry),
    }
}

/// The lookup decision for a request that waited, since `waited_since`, for another's fetch of
/// its key: as [`decide`], except that an entry stored or revalidated at or after
/// `waited_since` already satisfies the request's `no-cache` and `max-age`, since the origin
/// was asked after this request arrived (RFC 9111 §5.2.1.1, §5.2.1.4). Without this, every
/// follower of a reload storm would go to the origin again once the leader's fetch ended.
pub fn decide_after_wait(
    entry: Option<Arc<Entry>>,
    control: &RequestCacheControl,
    now: SystemTime,
    waited_since: SystemTime,
) -> Decision {
    let validated_since = entry
        .as_ref()
        .is_some_and(|e| e.freshness.response_time >= waited_since);
    if validated_since {
        decide(entry, &control.without_reload(), now)
    } else {
        decide(entry, control, now)
    }
}

/// What a request on a cached route does after [`admit`].
#[derive(Debug)]
pub enum Admission {
    /// Answer from this entry ([`Served::Hit`] or [`Served::Stale`]).
    Serve(Arc<Entry>, Served),
    /// Answer 504 (only-if-cached).
    GatewayTimeout,
    /// Parked as a follower: wait for the wake-up from the leader's ticket (or your own
    /// timeout), then [`decide`] again: serve a `Hit`, else fetch with no ticket and no stale
    /// entry.
    Wait,
    /// Go to the origin through a [`crate::Fill`] made with these. `ticket` is `None` when the
    /// key already had the most followers allowed, or is passed: this request fetches on its
    /// own.
    Fetch {
        stale: Option<Arc<Entry>>,
        ticket: Option<Ticket>,
    },
    /// As `Fetch` with no ticket, because the key's last response was not storable
    /// (hit-for-pass): counted apart.
    Pass { stale: Option<Arc<Entry>> },
    /// Serve `entry` stale now ([`Served::Stale`]), and revalidate it in the background
    /// through a [`crate::Fill`] with `Some(entry)` as its stale entry, leading the key with
    /// `ticket`: no client waits for that fetch.
    ServeAndRevalidate { entry: Arc<Entry>, ticket: Ticket },
}

/// Applies `decision` for `key` against the in-flight table: a miss or a revalidation joins
/// (leader fetches, follower waits); a stale-while-revalidate entry is served to everyone, and
/// whoever finds nobody revalidating it also starts the background revalidation.
pub fn admit<W: Send + 'static>(
    inflight: &InFlight<W>,
    key: &CacheKey,
    decision: Decision,
    waiter: W,
    now: SystemTime,
) -> Admission {
    let stale = match decision {
        Decision::Hit(entry) => return Admission::Serve(entry, Served::Hit),
        Decision::GatewayTimeout => return Admission::GatewayTimeout,
        Decision::StaleWhileRevalidate(entry) => {
            return match inflight.try_lead(key) {
                Some(ticket) => Admission::ServeAndRevalidate { entry, ticket },
                None => Admission::Serve(entry, Served::Stale),
            };
        }
        Decision::Revalidate(entry) => Some(entry),
        Decision::Miss => None,
    };
    match inflight.join(key, waiter, now) {
        Join::Leader(ticket) => Admission::Fetch {
            stale,
            ticket: Some(ticket),
        },
        Join::Follower => Admission::Wait,
        Join::Full(_) => Admission::Fetch {
            stale,
            ticket: None,
        },
        Join::Pass(_) => Admission::Pass { stale },
    }
}

/// Whether a fill that ended with `outcome` makes its key hit-for-pass
/// ([`InFlight::finish_passing`]): only when the response itself was not storable. A refusal
/// that comes from the request (method, request no-store, Authorization, a range's 206 or a
/// conditional's 304) or from a passing error status says nothing of the key's next requests.
pub fn passes_after(outcome: Option<Outcome>) -> bool {
    match outcome {
        Some(Outcome::NotStorable(reason)) => matches!(
            reason,
            NotStorable::NoStore
                | NotStorable::Private
                | NotStorable::VaryStar
                | NotStorable::SetCookie
                | NotStorable::NoFreshness
                | NotStorable::Expired
        ),
        Some(Outcome::TooLarge) => true,
        _ => false,
    }
}
