//! squall-cache: RFC 9111 shared-cache policy as pure functions of `now`, the sharded
//! byte-bounded response store with SIEVE eviction, and the in-flight table for request
//! coalescing.
//!
//! Sans-IO: no sockets, no threads, no clock. Every time comes in as an argument
//! (`request_time`, `response_time`, `now`), so the policy is a table of inputs and outputs and
//! the tests replay it with a fake clock.
//!
//! # How the proxy uses it
//! 1. [`lookup_policy`]: GET and HEAD [`Lookup::Use`] the cache, every other method bypasses
//!    it. Every request on a cached route also asks [`Invalidation::for_request`]: the success
//!    of a method that is not safe purges the URL ([`Invalidation::on_response`], RFC 9111 §4.4).
//! 2. [`Store::lookup`] by [`CacheKey`] and the request headers (Vary), then [`decide`] at
//!    `now`: hit, stale while revalidating, revalidate, miss, or 504 for only-if-cached. A
//!    conditional client request may get a 304 from an entry ([`not_modified`]).
//! 3. [`admit`] applies the decision against the [`InFlight`] table: the leader of a key gets
//!    a [`Ticket`] and fetches, followers wait for its end.
//! 4. The fetch runs through a [`Fill`], fed the origin's head, body pieces and end or failure
//!    with `now`: it stores a storable response at its clean end, freshens the stale entry on a
//!    matching 304 ([`freshen`]), or serves it on an error inside `stale-if-error`. As soon as
//!    its fate is known, [`Fill::release`] gives the ticket back for [`InFlight::finish`],
//!    whose waiters the driver wakes; a dropped ticket's waiters come out of
//!    [`InFlight::take_abandoned`] instead.
//!
//! # RFC 9111 choices
//! Where the RFC leaves room this crate takes the stricter reading, because a shared cache
//! that stores wrongly serves one user's response to another, while one that declines only
//! costs an origin round trip.
//! - Only responses to GET are stored; a HEAD is answered from a stored GET response (one key
//!   class for both). 206 and 304 are never stored. A status without a registered meaning
//!   (299, 499, 599) is understood as its class (RFC 9110 §15) and stored only with explicit
//!   freshness (`max-age`, `s-maxage`, `Expires`), never from `cache_ttl` (§3).
//! - Heuristic freshness (§4.2.2) only for heuristically cacheable statuses (200, 203, 204,
//!   300, 301, 308, 404, 405, 410, 414, 501) or `public` responses: the route's `cache_ttl`
//!   (`default_ttl`) when it has one, else, when `cache.heuristic_freshness_max` is set, 10% of
//!   the time since Last-Modified, capped by it ([`heuristic_lifetime`]). The Last-Modified
//!   heuristic is off by default, so that nothing is stored whose freshness is not stated
//!   unless the operator says so. No `Warning` is ever added: RFC 9111 obsoleted it.
//! - `private` and `private="field"` both prevent storing (storing with the fields removed is
//!   allowed but easy to get wrong). `no-cache` and `no-cache="field"` both mean "store, but
//!   revalidate every time".
//! - `Set-Cookie` prevents storing (as Varnish does by default): a cookie meant for one client
//!   must not be replayed to others. A route may instead strip it from the stored copy or store
//!   it ([`SetCookie`]).
//! - Targeted fields (RFC 9213): the first valid one of `cache.target_header`,
//!   `CDN-Cache-Control` and `Surrogate-Control` replaces Cache-Control, Expires and Pragma for
//!   this cache.
//! - `Authorization` in the request allows storing only with public, s-maxage or
//!   must-revalidate (§3.5).
//! - `Vary: *`, or a Vary member that is not a field name, prevents storing.
//! - Request `no-store` prevents storing the response but a stored one may still answer it
//!   (§5.2.1.5 only forbids storing).
//! - `must-understand` is ignored, so a no-store beside it still prevents storing.
//! - Response `Pragma: no-cache` without Cache-Control is read as `no-cache` (§5.4 defines it
//!   only for requests; HTTP/1.0 origins use it to mean "don't cache").
//! - Repeated or invalid directive values take the most conservative reading: the smallest
//!   max-age/s-maxage/max-stale/stale-* value, an unreadable max-age is 0 (stale, §4.2.1), an
//!   invalid or repeated Expires means already expired (§5.3). An invalid Date is ignored; an
//!   Age list counts by its first member (parameters dropped), and an Age that is still not a
//!   non-negative integer is ignored (§5.1: "a cache SHOULD ignore the field").
//! - A response that is unusable from the start (stale on arrival or no-cache, with no
//!   validator and no stale window) is not stored ([`NotStorable::Expired`]).
//! - A stale entry is served only inside its `stale-while-revalidate` or `stale-if-error`
//!   window (RFC 5861) or the client's `max-stale`, never merely because the origin is down
//!   (§4.2.4 allows more); never with `must-revalidate`, `proxy-revalidate`, `s-maxage` or
//!   `no-cache`.
//! - `immutable` (RFC 8246) entries are not revalidated during their lifetime even when the
//!   client sends `no-cache` or `max-age=0` (a browser reload), sparing the origin.
//! - Vary'd request values are normalised only where it is safe: lines joined with `", "` and
//!   trimmed; `Accept*` token lists also lowercased and respaced, and `Accept-Encoding` read
//!   as the sorted set of codings it accepts among br, deflate, gzip, identity and zstd (so
//!   `gzip, br` and `br;q=0.9, gzip` are one variant). `Cookie` and others keep their case,
//!   since there `a=B` and `a=b` are different users.
//! - After a response that could never be stored, the key passes for a while (hit-for-pass,
//!   [`InFlight::finish_passing`]): its requests fetch side by side instead of queueing.
//! - Conditional requests: If-None-Match (weak comparison, `*`) decides alone; If-Modified-Since
//!   only without it and only against a stored Last-Modified (not Date).
#![forbid(unsafe_code)]

mod directives;
mod entry;
mod fill;
mod inflight;
mod key;
mod policy;
mod range;
mod request;
mod sieve;
mod store;
mod tags;
mod targeted;
mod validate;

pub use entry::{
    ENTRY_OVERHEAD_BYTES, Entry, EntryState, HEADER_OVERHEAD_BYTES, normalize_accept_encoding,
    normalize_header,
};
pub use fill::{
    Admission, CLIENT_CONDITIONALS, Decision, EncodeHead, Fill, FillLimits, FillRequest,
    HeadAction, Invalidation, OriginHead, Outcome, Served, admit, decide, decide_after_wait,
    header_lines, passes_after, stored_headers,
};
pub use inflight::{InFlight, Join, PASS_MARKS_PER_SHARD_MAX, Ticket, WAITERS_PER_KEY_MAX};
pub use key::CacheKey;
pub use policy::{
    Freshness, Lookup, NotStorable, RequestCacheControl, ResponseRules, SetCookie,
    corrected_initial_age, heuristic_lifetime, heuristically_cacheable, invalidates, lookup_policy,
    request_cache_control, storable, storable_with,
};
pub use range::{
    ByteRange, ContentRange, Multipart, RANGES_MAX, RangeAnswer, if_range_matches, multipart,
    parse_range, range_answer,
};
pub use request::RequestFields;
pub use store::{NODE_OVERHEAD_BYTES, Store, StoreStats, VARIANTS_PER_KEY_MAX};
pub use tags::{
    SURROGATE_KEY, SURROGATE_KEY_BYTES_MAX, SURROGATE_KEYS_MAX, TAG_OVERHEAD_BYTES, TAG_REF_BYTES,
    Tag, surrogate_keys,
};
pub use targeted::{CDN_CACHE_CONTROL, SURROGATE_CONTROL};
pub use validate::{Exchange, Freshened, freshen, not_modified, revalidation_headers};
