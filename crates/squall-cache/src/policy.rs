//! RFC 9111 as pure functions: may a request use the cache, may a response be stored, and for
//! how long is it fresh. The choices where the RFC leaves room are listed in the crate docs.

use std::fmt;
use std::time::{Duration, SystemTime};

use http::header::{
    AGE, AUTHORIZATION, DATE, ETAG, EXPIRES, HeaderName, LAST_MODIFIED, PRAGMA, SET_COOKIE,
};
use http::{HeaderMap, Method, StatusCode};

use crate::RequestFields;
use crate::directives::{self, Directive, date, for_each_directive, secs};
use crate::entry::vary_names;
use crate::targeted::{self, Targeted, Value};

/// The request's Cache-Control directives (RFC 9111 §5.2.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestCacheControl {
    /// Do not store the response to this request (§5.2.1.5); a stored response may still
    /// answer it.
    pub no_store: bool,
    /// Do not answer from the cache without revalidating (§5.2.1.4); also `Pragma: no-cache`
    /// when the request has no Cache-Control (§5.4).
    pub no_cache: bool,
    /// The client accepts no response older than this many seconds (§5.2.1.1). An invalid
    /// value reads as 0.
    pub max_age: Option<u64>,
    /// `Some(None)`: any staleness is acceptable; `Some(Some(n))`: up to n seconds (§5.2.1.2).
    pub max_stale: Option<Option<u64>>,
    /// The response must stay fresh for at least this many more seconds (§5.2.1.3).
    pub min_fresh: Option<u64>,
    /// Answer from the cache or with 504 (§5.2.1.7).
    pub only_if_cached: bool,
}

impl RequestCacheControl {
    /// These directives without the ones a browser sends on reload to force a revalidation:
    /// `no-cache` (also from `Pragma: no-cache`) and `max-age`. What `request_no_cache =
    /// "ignore"` applies, as nginx and Varnish do: a fresh entry answers a reload, so clients
    /// cannot make the origin work by asking. The other directives keep their meaning.
    pub fn without_reload(self) -> RequestCacheControl {
        RequestCacheControl {
            no_cache: false,
            max_age: None,
            ..self
        }
    }
}

/// Parses the request's Cache-Control (all lines) and Pragma. Repeated directives take the
/// value that asks more of the cache: the smallest max-age and max-stale, the largest
/// min-fresh.
pub fn request_cache_control<F: RequestFields + ?Sized>(headers: &F) -> RequestCacheControl {
    let mut cc = RequestCacheControl::default();
    let mut any = false;
    for_each_directive(headers, |d| {
        any = true;
        request_directive(&mut cc, d);
    });
    if !any && pragma_no_cache(headers) {
        cc.no_cache = true;
    }
    cc
}

fn request_directive(cc: &mut RequestCacheControl, d: Directive<'_>) {
    if d.is("no-store") {
        cc.no_store = true;
    } else if d.is("no-cache") {
        cc.no_cache = true;
    } else if d.is("only-if-cached") {
        cc.only_if_cached = true;
    } else if d.is("max-age") {
        cc.max_age = Some(min_opt(cc.max_age, d.seconds().unwrap_or(0)));
    } else if d.is("min-fresh") {
        // An unreadable min-fresh is ignored: the stricter reading has no upper bound.
        if let Some(n) = d.seconds() {
            cc.min_fresh = Some(cc.min_fresh.map_or(n, |m| m.max(n)));
        }
    } else if d.is("max-stale") {
        cc.max_stale = match (d.value, cc.max_stale) {
            // `max-stale` without a value: any staleness, unless a bound was given too.
            (None, None) => Some(None),
            (None, bound) => bound,
            // An unreadable bound accepts no staleness at all.
            (Some(_), prev) => {
                let n = d.seconds().unwrap_or(0);
                Some(Some(prev.flatten().map_or(n, |m| m.min(n))))
            }
        };
    }
}

fn min_opt(prev: Option<u64>, n: u64) -> u64 {
    prev.map_or(n, |m| m.min(n))
}

/// `Pragma: no-cache` (RFC 9111 §5.4), looked at only when there is no Cache-Control.
fn pragma_no_cache<F: RequestFields + ?Sized>(headers: &F) -> bool {
    headers.values(&PRAGMA).any(|v| {
        v.split(|&b| b == b',')
            .any(|p| p.trim_ascii().eq_ignore_ascii_case(b"no-cache"))
    })
}

/// Whether a request may use the cache at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Not a GET or HEAD: go to the origin and neither read nor store.
    Bypass,
    /// Look the key up, then apply these directives to what is found.
    Use(RequestCacheControl),
}

/// May this request be answered from or stored to the cache at all? GET and HEAD only; every
/// other method bypasses (RFC 9111 §2: this cache keys only those).
pub fn lookup_policy<F: RequestFields + ?Sized>(method: &Method, headers: &F) -> Lookup {
    if method == Method::GET || method == Method::HEAD {
        Lookup::Use(request_cache_control(headers))
    } else {
        Lookup::Bypass
    }
}

/// How long a stored response stays fresh and what may be done once it is stale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Freshness {
    /// The freshness lifetime (RFC 9111 §4.2.1): s-maxage, else max-age, else Expires − Date,
    /// else the route's default TTL.
    pub lifetime: Duration,
    /// The age the response already had when it arrived (§4.2.3).
    pub corrected_initial_age: Duration,
    /// When the response arrived; resident time counts from here.
    pub response_time: SystemTime,
    /// RFC 5861 §3: serve stale this long past the lifetime while revalidating in the
    /// background.
    pub stale_while_revalidate: Duration,
    /// RFC 5861 §4: serve stale this long past the lifetime when the origin fails.
    pub stale_if_error: Duration,
    /// must-revalidate, proxy-revalidate or s-maxage (§5.2.2.2, §5.2.2.8, §5.2.2.10): once
    /// stale, never served without a successful revalidation.
    pub must_revalidate: bool,
    /// Response no-cache (§5.2.2.4), also `no-cache="field"` and a Pragma: no-cache without
    /// Cache-Control: never served without revalidating.
    pub no_cache: bool,
    /// RFC 8246: unchanged while fresh, so request no-cache and max-age do not force a
    /// revalidation during the lifetime.
    pub immutable: bool,
}

/// Why a response is not stored; [`NotStorable::as_str`] names it for logs and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NotStorable {
    /// Only responses to GET are stored.
    Method,
    /// The request said no-store (RFC 9111 §5.2.1.5).
    RequestNoStore,
    /// 206, 304, an informational or unregistered status, or a status that is not
    /// heuristically cacheable and has no explicit freshness.
    Status,
    /// Response no-store (§5.2.2.5).
    NoStore,
    /// Response private, with or without a field list (§5.2.2.7).
    Private,
    /// The request had Authorization and the response none of public, s-maxage,
    /// must-revalidate (§3.5).
    Authorization,
    /// `Vary: *`, or a Vary member that is not a field name (§4.1).
    VaryStar,
    /// The response sets a cookie.
    SetCookie,
    /// No explicit freshness and no default TTL for the route.
    NoFreshness,
    /// Unusable from the start: stale on arrival (or no-cache) with no validator to revalidate
    /// with and no stale-while-revalidate/stale-if-error window to serve it in.
    Expired,
}

impl NotStorable {
    pub fn as_str(self) -> &'static str {
        match self {
            NotStorable::Method => "method",
            NotStorable::RequestNoStore => "request_no_store",
            NotStorable::Status => "status",
            NotStorable::NoStore => "no_store",
            NotStorable::Private => "private",
            NotStorable::Authorization => "authorization",
            NotStorable::VaryStar => "vary_star",
            NotStorable::SetCookie => "set_cookie",
            NotStorable::NoFreshness => "no_freshness",
            NotStorable::Expired => "expired",
        }
    }
}

impl fmt::Display for NotStorable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a response with `Set-Cookie` does on a cached route (`cache_set_cookie`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SetCookie {
    /// Not stored ([`NotStorable::SetCookie`]): a cookie meant for one client is never
    /// replayed to another.
    #[default]
    Pass,
    /// Stored without its `Set-Cookie` fields: the client whose request fetched it gets the
    /// cookie, hits do not.
    Strip,
    /// Stored with the cookie, which every hit replays: for origins known to set only
    /// cookies that are the same for everyone.
    Store,
}

/// A cache's and a route's settings for reading a response, beyond RFC 9111.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResponseRules {
    /// `cache.target_header`: a targeted field (RFC 9213) of this cache's own, read before
    /// `CDN-Cache-Control` and `Surrogate-Control`, which are always on the target list.
    pub target_header: Option<HeaderName>,
    /// The route's `cache_set_cookie`.
    pub set_cookie: SetCookie,
    /// `cache.strip_cdn_cache_control`: entries keep no `CDN-Cache-Control`, as the client
    /// that fetched them got none. Off: they keep it, so that hits forward it as misses do
    /// (RFC 9213 §3: a CDN "will typically forward" it to the next one).
    pub strip_cdn_cache_control: bool,
    /// `cache.heuristic_freshness_max`: the cap on the Last-Modified heuristic (RFC 9111
    /// §4.2.2, [`heuristic_lifetime`]); zero turns the heuristic off.
    pub heuristic_freshness_max: Duration,
}

/// The response's cache directives this cache acts on (RFC 9111 §5.2.2): from the selected
/// targeted field when there is one (RFC 9213 §2.2), else from Cache-Control.
#[derive(Clone, Copy, Debug, Default)]
struct ResponseCacheControl {
    no_store: bool,
    no_cache: bool,
    private: bool,
    public: bool,
    must_revalidate: bool,
    proxy_revalidate: bool,
    immutable: bool,
    max_age: Option<u64>,
    s_maxage: Option<u64>,
    stale_while_revalidate: Option<u64>,
    stale_if_error: Option<u64>,
    any: bool,
    /// Read from a targeted field: Cache-Control, Expires and Pragma are ignored.
    targeted: bool,
}

impl ResponseCacheControl {
    /// The first valid targeted field of the target list decides alone; without one,
    /// Cache-Control (RFC 9213 §2.2).
    fn select(headers: &HeaderMap, target: Option<&HeaderName>) -> ResponseCacheControl {
        match targeted::select(headers, target) {
            Some(list) => ResponseCacheControl::targeted(&list),
            None => ResponseCacheControl::parse(headers),
        }
    }

    /// A targeted field's directives, with Cache-Control's meanings (RFC 9213 §2.2). A value
    /// of the wrong type is not consumed (§2.1): `max-age=1.5` is no max-age, `no-store=?0`
    /// no no-store. `private` and `no-cache` count with a field list (a String) as without.
    fn targeted(list: &[Targeted<'_>]) -> ResponseCacheControl {
        let mut cc = ResponseCacheControl {
            any: true,
            targeted: true,
            ..ResponseCacheControl::default()
        };
        for t in list {
            let set = t.value == Value::True;
            let set_or_list = set || t.value == Value::Text;
            let Value::Seconds(n) = t.value else {
                match t.name {
                    "no-store" => cc.no_store |= set,
                    "no-cache" => cc.no_cache |= set_or_list,
                    "private" => cc.private |= set_or_list,
                    "public" => cc.public |= set,
                    "must-revalidate" => cc.must_revalidate |= set,
                    "proxy-revalidate" => cc.proxy_revalidate |= set,
                    "immutable" => cc.immutable |= set,
                    _ => {}
                }
                continue;
            };
            let slot = match t.name {
                "max-age" => &mut cc.max_age,
                "s-maxage" => &mut cc.s_maxage,
                "stale-while-revalidate" => &mut cc.stale_while_revalidate,
                "stale-if-error" => &mut cc.stale_if_error,
                _ => continue,
            };
            *slot = Some(min_opt(*slot, n));
        }
        cc
    }

    /// Repeated or unreadable values take the smallest reading: an unreadable max-age or
    /// s-maxage is 0 ("consider it stale", §4.2.1), an unreadable stale-* window is none.
    fn parse(headers: &HeaderMap) -> ResponseCacheControl {
        let mut cc = ResponseCacheControl::default();
        for_each_directive(headers, |d| {
            cc.any = true;
            let n = d.seconds().unwrap_or(0);
            match () {
                _ if d.is("no-store") => cc.no_store = true,
                _ if d.is("no-cache") => cc.no_cache = true,
                _ if d.is("private") => cc.private = true,
                _ if d.is("public") => cc.public = true,
                _ if d.is("must-revalidate") => cc.must_revalidate = true,
                _ if d.is("proxy-revalidate") => cc.proxy_revalidate = true,
                _ if d.is("immutable") => cc.immutable = true,
                _ if d.is("max-age") => cc.max_age = Some(min_opt(cc.max_age, n)),
                _ if d.is("s-maxage") => cc.s_maxage = Some(min_opt(cc.s_maxage, n)),
                _ if d.is("stale-while-revalidate") => {
                    cc.stale_while_revalidate = Some(min_opt(cc.stale_while_revalidate, n));
                }
                _ if d.is("stale-if-error") => {
                    cc.stale_if_error = Some(min_opt(cc.stale_if_error, n));
                }
                // no-transform (§5.2.2.6): this cache never transforms content, nothing to do.
                // must-understand (§5.2.2.3) is ignored, so no-store beside it still holds.
                _ => {}
            }
        });
        if !cc.any && pragma_no_cache(headers) {
            cc.no_cache = true;
        }
        cc
    }
}

/// RFC 9110 §15.1: status codes cacheable by default (heuristically cacheable). 206 is left
/// out: this cache stores only complete responses.
pub fn heuristically_cacheable(status: StatusCode) -> bool {
    matches!(
        status.as_u16(),
        200 | 203 | 204 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501
    )
}

/// RFC 9111 §3 for a shared cache: may this response be stored, and if so, how fresh is it.
///
/// `default_ttl` is the route's `cache_ttl`: the heuristic lifetime of a response that has no
/// explicit one. Without it nothing is stored whose freshness is not explicit (the Last-Modified
/// heuristic is off under the default [`ResponseRules`]). `request_time` is when the request was sent to the origin, `response_time` when
/// its response head arrived (§4.2.3).
pub fn storable(
    request_method: &Method,
    request_headers: &HeaderMap,
    status: StatusCode,
    response_headers: &HeaderMap,
    default_ttl: Option<Duration>,
    request_time: SystemTime,
    response_time: SystemTime,
) -> Result<Freshness, NotStorable> {
    storable_with(
        request_method,
        request_headers,
        status,
        response_headers,
        default_ttl,
        &ResponseRules::default(),
        request_time,
        response_time,
    )
}

/// [`storable`] under a route's [`ResponseRules`]: the configured targeted field joins the
/// target list (RFC 9213: the first valid field of `cache.target_header`, `CDN-Cache-Control`,
/// `Surrogate-Control` decides freshness and storability alone, and Cache-Control, Expires and
/// Pragma are then ignored), and `Set-Cookie` prevents storing only under [`SetCookie::Pass`].
#[allow(clippy::too_many_arguments)]
pub fn storable_with(
    request_method: &Method,
    request_headers: &HeaderMap,
    status: StatusCode,
    response_headers: &HeaderMap,
    default_ttl: Option<Duration>,
    rules: &ResponseRules,
    request_time: SystemTime,
    response_time: SystemTime,
) -> Result<Freshness, NotStorable> {
    if request_method != Method::GET {
        return Err(NotStorable::Method);
    }
    if request_cache_control(request_headers).no_store {
        return Err(NotStorable::RequestNoStore);
    }
    if !understood_status(status) {
        return Err(NotStorable::Status);
    }
    let cc = ResponseCacheControl::select(response_headers, rules.target_header.as_ref());
    refusal(&cc, request_headers, response_headers)?;
    if rules.set_cookie == SetCookie::Pass && response_headers.contains_key(SET_COOKIE) {
        return Err(NotStorable::SetCookie);
    }
    let heuristic = Heuristic {
        default_ttl,
        max: rules.heuristic_freshness_max,
    };
    let lifetime = lifetime(&cc, status, response_headers, heuristic, response_time)?;
    let freshness = Freshness {
        lifetime,
        corrected_initial_age: corrected_initial_age(response_headers, request_time, response_time),
        response_time,
        stale_while_revalidate: secs(cc.stale_while_revalidate.unwrap_or(0)),
        stale_if_error: secs(cc.stale_if_error.unwrap_or(0)),
        must_revalidate: cc.must_revalidate || cc.proxy_revalidate || cc.s_maxage.is_some(),
        no_cache: cc.no_cache,
        immutable: cc.immutable,
    };
    if !has_validator(response_headers) && !usable_without_origin(&freshness) {
        return Err(NotStorable::Expired);
    }
    Ok(freshness)
}

/// A final status, and not a partial (206) or not-modified (304) one. An unregistered status
/// is understood as its class (RFC 9110 §15), which is enough to store it when its freshness
/// is explicit (§3); see [`lifetime`].
fn understood_status(status: StatusCode) -> bool {
    !status.is_informational()
        && status != StatusCode::PARTIAL_CONTENT
        && status != StatusCode::NOT_MODIFIED
}

/// The directive and header checks of §3, §3.5 and §4.1, in a fixed order so the reported
/// reason is stable.
fn refusal(
    cc: &ResponseCacheControl,
    request_headers: &HeaderMap,
    response_headers: &HeaderMap,
) -> Result<(), NotStorable> {
    if cc.no_store {
        return Err(NotStorable::NoStore);
    }
    if cc.private {
        return Err(NotStorable::Private);
    }
    let authorized = cc.public || cc.s_maxage.is_some() || cc.must_revalidate;
    if request_headers.contains_key(AUTHORIZATION) && !authorized {
        return Err(NotStorable::Authorization);
    }
    if vary_names(response_headers).is_none() {
        return Err(NotStorable::VaryStar);
    }
    Ok(())
}

/// Where a lifetime comes from when the response states none (RFC 9111 §4.2.2).
#[derive(Clone, Copy, Debug)]
struct Heuristic {
    /// The route's `cache_ttl`: the operator's word for this route, so it goes first.
    default_ttl: Option<Duration>,
    /// The cap of the Last-Modified heuristic; zero: off.
    max: Duration,
}

/// §4.2.1 freshness lifetime, or why there is none.
fn lifetime(
    cc: &ResponseCacheControl,
    status: StatusCode,
    headers: &HeaderMap,
    heuristic: Heuristic,
    response_time: SystemTime,
) -> Result<Duration, NotStorable> {
    if let Some(n) = cc.s_maxage.or(cc.max_age) {
        return Ok(secs(n));
    }
    // RFC 9213 §2.2: a targeted field decides alone, Expires included.
    if headers.contains_key(EXPIRES) && !cc.targeted {
        return Ok(expires_lifetime(headers, response_time));
    }
    // §4.2.2: a heuristic lifetime only for heuristically cacheable statuses or `public`, and
    // never for a status without a registered meaning: its freshness must be explicit.
    let registered = status.canonical_reason().is_some();
    if !registered || (!heuristically_cacheable(status) && !cc.public) {
        return Err(NotStorable::Status);
    }
    (heuristic.default_ttl)
        .or_else(|| heuristic_lifetime(headers, response_time, heuristic.max))
        .ok_or(NotStorable::NoFreshness)
}

/// The fraction of the time since Last-Modified that a response is taken to stay fresh:
/// RFC 9111 §4.2.2's "typical setting of this fraction might be 10%", which browsers and
/// Traffic Server use too.
const HEURISTIC_PERCENT: u64 = 10;

/// RFC 9111 §4.2.2: a tenth of the time between the response's `Last-Modified` and its `Date`
/// (the arrival time when it has no valid Date), in whole seconds, at most `max`. `None` when
/// `max` is zero (the heuristic is off), `Last-Modified` is absent or not a date, or the result
/// is under a second (a Last-Modified less than 10 s before Date, or after it): such a
/// response stays without freshness, as it was without the heuristic.
///
/// The interval ends at Date, not at the arrival time, so that the time a response spent in
/// caches before this one (its `Age`) does not lengthen its lifetime: that time counts against
/// the lifetime instead, through the corrected initial age (§4.2.3).
pub fn heuristic_lifetime(
    headers: &HeaderMap,
    response_time: SystemTime,
    max: Duration,
) -> Option<Duration> {
    if max.is_zero() {
        return None;
    }
    let modified = date(headers, LAST_MODIFIED)?;
    let date = date(headers, DATE).unwrap_or(response_time);
    let unchanged = date.duration_since(modified).ok()?.as_secs();
    let lifetime = secs(unchanged.saturating_mul(HEURISTIC_PERCENT) / 100).min(max);
    (!lifetime.is_zero()).then_some(lifetime)
}

/// Expires − Date (§4.2.1). An invalid Expires, or several lines, means already expired
/// (§5.3); without a valid Date the arrival time stands in for it.
fn expires_lifetime(headers: &HeaderMap, response_time: SystemTime) -> Duration {
    let mut lines = headers.get_all(EXPIRES).iter();
    let (Some(line), None) = (lines.next(), lines.next()) else {
        return Duration::ZERO;
    };
    let Some(expires) = directives::parse_date(line) else {
        return Duration::ZERO;
    };
    let date = date(headers, DATE).unwrap_or(response_time);
    let lifetime = expires.duration_since(date).unwrap_or(Duration::ZERO);
    lifetime.min(secs(directives::DELTA_SECONDS_MAX))
}

/// §4.2.3:
/// ```text
/// apparent_age = max(0, response_time - date_value)
/// response_delay = response_time - request_time
/// corrected_age_value = age_value + response_delay
/// corrected_initial_age = max(apparent_age, corrected_age_value)
/// ```
/// A missing or invalid Date gives an apparent age of 0; the age value is [`age_value`].
pub fn corrected_initial_age(
    headers: &HeaderMap,
    request_time: SystemTime,
    response_time: SystemTime,
) -> Duration {
    let apparent_age = date(headers, DATE)
        .and_then(|d| response_time.duration_since(d).ok())
        .unwrap_or(Duration::ZERO);
    let age_value = age_value(headers);
    let response_delay = response_time
        .duration_since(request_time)
        .unwrap_or(Duration::ZERO);
    apparent_age.max(age_value.saturating_add(response_delay))
}

/// The Age a response arrived with (RFC 9111 §5.1): 0 when absent. A list (`7200, 0`, or
/// several lines) counts by its first member ("a cache ... SHOULD use the first member"), and
/// parameters after a `;` are dropped, since they can only make an Age read older than
/// ignoring it would. A first member that is still not a non-negative integer (`abc`, `-7200`,
/// `7200.0`, empty) is ignored, as §5.1 says a cache SHOULD: it counts as 0, and freshness
/// comes from Date and the response delay alone.
fn age_value(headers: &HeaderMap) -> Duration {
    let Some(line) = headers.get(AGE) else {
        return Duration::ZERO;
    };
    let bytes = line.as_bytes();
    let first = bytes.split(|&b| b == b',').next().unwrap_or(bytes);
    let value = first.split(|&b| b == b';').next().unwrap_or(first);
    directives::delta_seconds(value.trim_ascii()).map_or(Duration::ZERO, secs)
}

fn has_validator(headers: &HeaderMap) -> bool {
    headers.contains_key(ETAG) || date(headers, LAST_MODIFIED).is_some()
}

/// Could a stored copy answer a request without asking the origin first: fresh on arrival, or
/// servable while stale in a stale-while-revalidate or stale-if-error window.
fn usable_without_origin(f: &Freshness) -> bool {
    if f.no_cache {
        return false;
    }
    let stale_windows =
        f.stale_while_revalidate > Duration::ZERO || f.stale_if_error > Duration::ZERO;
    f.lifetime > f.corrected_initial_age || (!f.must_revalidate && stale_windows)
}

/// RFC 9111 §4.4: a response to a method that is not safe (RFC 9110 §9.2.1) that is not an error invalidates the stored
/// responses for the target URI. Safe methods (RFC 9110 §9.2.1) never do.
pub fn invalidates(method: &Method, status: StatusCode) -> bool {
    !safe_method(method) && (status.is_success() || status.is_redirection())
}

/// RFC 9110 §9.2.1: the methods defined as safe.
pub(crate) fn safe_method(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    )
}
