//! The cache fill: the life of one origin fetch on a cached route, as a state machine with the
//! time passed in.
//!
//! The driver makes a [`Fill`] when [`admit`] says fetch, and forwards to it what the proxy
//! exchange reports: the origin's response head ([`Fill::on_head`]), body pieces
//! ([`Fill::on_body`]), the clean end ([`Fill::on_end`]) or a failure ([`Fill::on_failed`]).
//! The fill decides storability (RFC 9111 §3), collects a storable body up to the object byte
//! limit, stores the entry at the clean end, folds a matching 304 into the stale entry
//! (§4.3.4), and picks the stale entry to serve when the origin fails and `stale-if-error`
//! allows it (RFC 5861 §4). It holds the store and its limits, and the leader's [`Ticket`]:
//! after every event the driver asks [`Fill::release`], and hands a returned ticket to
//! [`InFlight::finish`](crate::InFlight::finish) to wake the followers as soon as the fill's
//! fate is known (for a response that is not stored, at its head, not at its end).
//!
//! Dropping a fill (client gone, session torn down) drops its ticket, which then reaches the
//! in-flight table's abandoned queue: the followers are still woken.

mod invalidate;
mod lookup;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{
    AGE, CONTENT_LENGTH, DATE, HeaderName, HeaderValue, IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH,
    IF_RANGE, IF_UNMODIFIED_SINCE, SET_COOKIE,
};
use http::{HeaderMap, Method, StatusCode};

pub use invalidate::Invalidation;
pub use lookup::{Admission, Decision, Served, admit, decide, decide_after_wait, passes_after};

use crate::directives;
use crate::entry::{Entry, EntryState};
use crate::inflight::Ticket;
use crate::key::CacheKey;
use crate::policy::{
    Freshness, NotStorable, ResponseRules, SetCookie, request_cache_control, storable_with,
};
use crate::store::Store;
use crate::targeted::{CDN_CACHE_CONTROL, SURROGATE_CONTROL};
use crate::validate::{self, Freshened, freshen, revalidation_headers};

/// The request's conditional fields, which a revalidating fill replaces with the stale entry's
/// validators ([`Fill::origin_conditionals`]).
pub const CLIENT_CONDITIONALS: [HeaderName; 5] = [
    IF_NONE_MATCH,
    IF_MODIFIED_SINCE,
    IF_MATCH,
    IF_UNMODIFIED_SINCE,
    IF_RANGE,
];

/// Encodes an entry's status and stored header fields into its wire head
/// ([`Entry::wire_head`]), e.g. [`header_lines`].
pub type EncodeHead = fn(StatusCode, &HeaderMap) -> Bytes;

/// What bounds a fill, from the cache's and the route's settings.
#[derive(Clone, Copy, Debug)]
pub struct FillLimits {
    /// The largest body collected: past it the response still goes to the client but is not
    /// stored. The binary clamps it to [`Store::object_max_bytes`].
    pub object_bytes_max: usize,
    /// The route's `cache_ttl`: the lifetime of a response without explicit freshness
    /// (RFC 9111 §4.2.2); `None` stores only explicitly fresh responses.
    pub default_ttl: Option<Duration>,
    /// How a stored entry's wire head is built.
    pub encode_head: EncodeHead,
}

/// The request a fill fetches for, as the client sent it.
#[derive(Clone, Debug)]
pub struct FillRequest {
    pub key: CacheKey,
    pub method: Method,
    /// The client's own header fields, conditionals included: they decide storability
    /// (no-store, Authorization), the entry's Vary values, and a 304 to the client.
    pub headers: HeaderMap,
}

/// The origin's response head, as the proxy exchange saw it.
#[derive(Clone, Copy, Debug)]
pub struct OriginHead<'a> {
    pub status: StatusCode,
    /// The fields as the origin sent them: storability is judged on these.
    pub origin_headers: &'a HeaderMap,
    /// The fields as they go to the client (hop-by-hop removed, route edits applied): what an
    /// entry stores, less the per-response ones ([`stored_headers`]).
    pub client_headers: &'a HeaderMap,
    /// The body length, when the origin framed it by length.
    pub content_length: Option<u64>,
}

/// What the driver does with the origin's response head.
#[derive(Clone, Debug)]
pub enum HeadAction {
    /// Forward the response to the client as usual (the fill collects its body if storable).
    Forward,
    /// Answer the client from this entry instead ([`Served::Revalidated`] after a matching
    /// 304, [`Served::Stale`] for a server error inside `stale-if-error`), write it against
    /// [`Fill::client_headers`] (a 304 to the client follows its own conditionals), and drop
    /// the origin's body.
    Answer(Arc<Entry>, Served),
    /// The origin's 304 names another validator than the stale entry's (RFC 9111 §4.3.4): it
    /// updates nothing and must not reach a client that did not ask for it. Drop this response
    /// and send the request again with [`Fill::client_headers`]; the fill now waits for that
    /// head, as a plain miss.
    Refetch,
}

/// How a fill ended, or is known to end, for logs and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A complete response was stored.
    Stored,
    /// A 304 refreshed the stale entry, which was replaced.
    Freshened,
    /// Not stored: the policy refused it (for a 304, the merged response may no longer be
    /// stored, so the old entry was removed).
    NotStorable(NotStorable),
    /// Not stored: the body, declared or collected, passed the object limit, or the store
    /// refused its size.
    TooLarge,
    /// The origin failed and the stale entry was served (stale-if-error).
    StaleOnError,
    /// The origin failed, or the response ended before its body was complete.
    Failed,
}

/// One cache fill. See the module docs for its life.
#[derive(Debug)]
pub struct Fill {
    store: Arc<Store>,
    limits: FillLimits,
    /// The cache's targeted field and the route's `cache_set_cookie` ([`Fill::with_rules`]).
    rules: ResponseRules,
    request: FillRequest,
    /// When the request went out (RFC 9111 §4.2.3), for the age of the response.
    request_time: SystemTime,
    /// The stored entry this fetch replaces: revalidated, freshened by a 304, served on error.
    stale: Option<Arc<Entry>>,
    /// The request to the origin carries the stale entry's validators, not the client's
    /// conditionals.
    revalidating: bool,
    ticket: Option<Ticket>,
    state: State,
    outcome: Option<Outcome>,
}

#[derive(Debug)]
enum State {
    /// No response head yet.
    AwaitingHead,
    /// Collecting a storable response.
    Collecting(Box<Collecting>),
    /// The response goes to the client and will not be stored.
    Passing,
    /// The client was answered from an entry; the origin's response is dropped.
    Answered,
    /// Ended.
    Done,
}

#[derive(Debug)]
struct Collecting {
    status: StatusCode,
    headers: HeaderMap,
    freshness: Freshness,
    body: BytesMut,
}

impl Fill {
    /// A fill for `request`, sent at `now`, replacing `stale` if any, leading its key if it has
    /// a `ticket` (from [`admit`]).
    pub fn new(
        store: Arc<Store>,
        limits: FillLimits,
        request: FillRequest,
        stale: Option<Arc<Entry>>,
        ticket: Option<Ticket>,
        now: SystemTime,
    ) -> Fill {
        let revalidating = stale
            .as_deref()
            .is_some_and(|e| e.etag.is_some() || e.last_modified.is_some());
        Fill {
            store,
            limits,
            rules: ResponseRules::default(),
            request,
            request_time: now,
            stale,
            revalidating,
            ticket,
            state: State::AwaitingHead,
            outcome: None,
        }
    }

    /// This fill under `rules`: the cache's own targeted field (RFC 9213) and the route's
    /// `Set-Cookie` handling. Without it: `CDN-Cache-Control` and `Surrogate-Control` only,
    /// and a response with `Set-Cookie` is not stored.
    pub fn with_rules(mut self, rules: ResponseRules) -> Fill {
        self.rules = rules;
        self
    }

    /// Rewrites the header fields of the request to the origin: when revalidating, the
    /// client's conditionals are replaced by the stale entry's validators (RFC 9111 §4.3.1).
    /// Otherwise leaves them as they are.
    pub fn origin_request_headers(&self, headers: &mut HeaderMap) {
        let Some(validators) = self.origin_conditionals() else {
            return;
        };
        for name in CLIENT_CONDITIONALS {
            headers.remove(name);
        }
        for (name, value) in validators {
            headers.insert(name, value);
        }
    }

    /// When revalidating, the fields that replace the client's [`CLIENT_CONDITIONALS`] in the
    /// request to the origin (the stale entry's validators, RFC 9111 §4.3.1); `None` when
    /// the client's conditionals go as they are. For callers whose fields are no `HeaderMap`.
    pub fn origin_conditionals(&self) -> Option<Vec<(HeaderName, HeaderValue)>> {
        let stale = self.stale.as_deref().filter(|_| self.revalidating)?;
        Some(revalidation_headers(stale))
    }

    /// The origin's response head arrived at `now`.
    pub fn on_head(&mut self, head: OriginHead<'_>, now: SystemTime) -> HeadAction {
        debug_assert!(
            matches!(self.state, State::AwaitingHead),
            "a second response head for one fill"
        );
        if !matches!(self.state, State::AwaitingHead) {
            return HeadAction::Forward;
        }
        if head.status == StatusCode::NOT_MODIFIED
            && let Some(action) = self.on_not_modified(head, now)
        {
            return action;
        }
        if head.status.is_server_error()
            && let Some(stale) = self.stale_for_error(now)
        {
            self.end_answered(Outcome::StaleOnError);
            return HeadAction::Answer(stale, Served::Stale);
        }
        self.start_body(head, now);
        HeadAction::Forward
    }

    /// A piece of the response body, in order. Ignored unless the response is being stored.
    pub fn on_body(&mut self, piece: &[u8]) {
        let State::Collecting(collecting) = &mut self.state else {
            return;
        };
        if collecting.body.len() + piece.len() > self.limits.object_bytes_max {
            self.state = State::Passing;
            self.outcome = Some(Outcome::TooLarge);
        } else {
            collecting.body.put_slice(piece);
        }
    }

    /// The response ended cleanly: a collected response is stored. Returns the outcome.
    pub fn on_end(&mut self) -> Option<Outcome> {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Collecting(collecting) => {
                let stored = self.store_entry(*collecting);
                self.outcome = Some(if stored {
                    Outcome::Stored
                } else {
                    Outcome::TooLarge
                });
            }
            // An end before any head: the exchange ended without a response.
            State::AwaitingHead => self.outcome = Some(Outcome::Failed),
            State::Passing | State::Answered | State::Done => {}
        }
        self.outcome
    }

    /// The origin failed at `now` (no response, or the body cut short). Returns the stale
    /// entry to serve instead of the error when no head has gone to the client yet and
    /// `stale-if-error` allows it; `None`: do what the exchange would do without a cache (and
    /// nothing at all if the client was already answered from an entry).
    pub fn on_failed(&mut self, now: SystemTime) -> Option<Arc<Entry>> {
        match std::mem::replace(&mut self.state, State::Done) {
            State::AwaitingHead => {
                let stale = self.stale_for_error(now);
                self.outcome = Some(match stale {
                    Some(_) => Outcome::StaleOnError,
                    None => Outcome::Failed,
                });
                stale
            }
            State::Collecting(_) => {
                self.outcome = Some(Outcome::Failed);
                None
            }
            State::Passing | State::Answered | State::Done => None,
        }
    }

    /// The leader's ticket, once the fill's fate is known (stored, not storable, answered from
    /// an entry, failed): finish it on the in-flight table and wake the waiters it returns.
    /// `None` while the outcome is still open, for a fill that leads nothing, and after the
    /// ticket was taken.
    pub fn release(&mut self) -> Option<Ticket> {
        match self.state {
            State::AwaitingHead | State::Collecting(_) => None,
            State::Passing | State::Answered | State::Done => self.ticket.take(),
        }
    }

    /// The client's own request fields: for writing an entry to the client (its conditionals
    /// decide a 304) and for a [`HeadAction::Refetch`].
    pub fn client_headers(&self) -> &HeaderMap {
        &self.request.headers
    }

    pub fn key(&self) -> &CacheKey {
        &self.request.key
    }

    /// The stored entry this fetch would replace.
    pub fn stale(&self) -> Option<&Arc<Entry>> {
        self.stale.as_ref()
    }

    /// Whether the request to the origin carries the stale entry's validators.
    pub fn revalidating(&self) -> bool {
        self.revalidating
    }

    /// Whether the response is being collected to be stored.
    pub fn collecting(&self) -> bool {
        matches!(self.state, State::Collecting(_))
    }

    /// Whether the fill leads its key and has not released its ticket yet.
    pub fn leads(&self) -> bool {
        self.ticket.is_some()
    }

    /// How the fill ended, or `None` while that is still open.
    pub fn outcome(&self) -> Option<Outcome> {
        self.outcome
    }

    /// Panics if the fill's state and outcome disagree. For tests, after every step.
    pub fn check_invariants(&self) {
        // The outcome is open exactly while a head or a body is awaited.
        match &self.state {
            State::AwaitingHead | State::Collecting(_) => assert_eq!(self.outcome, None),
            State::Passing | State::Answered | State::Done => assert!(self.outcome.is_some()),
        }
        if let State::Collecting(c) = &self.state {
            assert!(c.body.len() <= self.limits.object_bytes_max);
        }
        assert!(!self.revalidating || self.stale.is_some());
    }

    /// A 304: freshen the stale entry if its validator matches. `None`: not a revalidation
    /// answer (no stale entry, or the client's own conditional request was passed on), so the
    /// 304 is forwarded like any response.
    fn on_not_modified(&mut self, head: OriginHead<'_>, now: SystemTime) -> Option<HeadAction> {
        let stale = self.stale.clone()?;
        let exchange = validate::Exchange {
            request_headers: &self.request.headers,
            default_ttl: self.limits.default_ttl,
            request_time: self.request_time,
            response_time: now,
        };
        let encode = self.limits.encode_head;
        let mut update = self.entry_headers(head.client_headers);
        // §3.2: the 304's Date replaces the stored one, as its other fields do.
        add_date(&mut update, head.origin_headers, now);
        let Some(mut freshened) = freshen(&stale, &update, &exchange, encode) else {
            if !self.revalidating {
                return None;
            }
            // §4.3.4: a 304 that selects no stored response updates nothing; fetch again
            // without the validators.
            self.stale = None;
            self.revalidating = false;
            self.request_time = now;
            return Some(HeadAction::Refetch);
        };
        self.apply_rules(&mut freshened, head.origin_headers, now);
        let entry = Arc::new(freshened.entry);
        let outcome = match freshened.storable {
            Ok(()) if self.store.insert(self.request.key.clone(), entry.clone()) => {
                Outcome::Freshened
            }
            Ok(()) => {
                self.store.remove_variant(&self.request.key, &stale);
                Outcome::TooLarge
            }
            Err(why) => {
                self.store.remove_variant(&self.request.key, &stale);
                Outcome::NotStorable(why)
            }
        };
        self.end_answered(outcome);
        Some(HeadAction::Answer(entry, Served::Revalidated))
    }

    /// The stale entry, if the client may have it in place of an origin error at `now`.
    fn stale_for_error(&self, now: SystemTime) -> Option<Arc<Entry>> {
        let stale = self.stale.as_ref()?;
        let control = request_cache_control(&self.request.headers);
        match stale.state(now, &control) {
            EntryState::Stale {
                can_serve_if_error: true,
                ..
            } => Some(stale.clone()),
            _ => None,
        }
    }

    /// A response that goes to the client: collect it if it may be stored.
    fn start_body(&mut self, head: OriginHead<'_>, now: SystemTime) {
        let storable = storable_with(
            &self.request.method,
            &self.request.headers,
            head.status,
            head.origin_headers,
            self.limits.default_ttl,
            &self.rules,
            self.request_time,
            now,
        );
        let limit = self.limits.object_bytes_max;
        let too_large = head.content_length.is_some_and(|n| n > limit as u64);
        match storable {
            Ok(_) if too_large => self.pass(Outcome::TooLarge),
            Err(why) => self.pass(Outcome::NotStorable(why)),
            Ok(freshness) => {
                // Bounded by the limit: the length was checked above.
                let capacity = head.content_length.unwrap_or(0) as usize;
                let mut headers = self.entry_headers(head.client_headers);
                add_date(&mut headers, head.origin_headers, now);
                self.state = State::Collecting(Box::new(Collecting {
                    status: head.status,
                    headers,
                    freshness,
                    body: BytesMut::with_capacity(capacity),
                }));
            }
        }
    }

    /// What an entry keeps of the client-bound fields: [`stored_headers`], never a targeted
    /// field meant for this cache alone (`Surrogate-Control`, the target header, and
    /// `CDN-Cache-Control` under [`ResponseRules::strip_cdn_cache_control`]; a route's edits
    /// normally removed them already), and no `Set-Cookie` under [`SetCookie::Strip`].
    fn entry_headers(&self, client_headers: &HeaderMap) -> HeaderMap {
        let mut headers = stored_headers(client_headers);
        if self.rules.strip_cdn_cache_control {
            headers.remove(CDN_CACHE_CONTROL);
        }
        headers.remove(SURROGATE_CONTROL);
        if let Some(target) = &self.rules.target_header {
            headers.remove(target);
        }
        if self.rules.set_cookie == SetCookie::Strip {
            headers.remove(SET_COOKIE);
        }
        headers
    }

    /// [`freshen`] judges the merged response by RFC 9111 alone; judge it again under this
    /// fill's rules, with the targeted fields the 304 brought and only those: the entry may
    /// keep a `CDN-Cache-Control` for clients, but that is the one the client got (a route may
    /// set its own), not the origin's word now. A 304 without them leaves Cache-Control to
    /// decide.
    fn apply_rules(&self, freshened: &mut Freshened, origin_304: &HeaderMap, now: SystemTime) {
        let entry = &mut freshened.entry;
        let mut policy = entry.headers.clone();
        if let Some(date) = &entry.date {
            policy.insert(DATE, date.clone());
        }
        let standard = [CDN_CACHE_CONTROL, SURROGATE_CONTROL].map(HeaderName::from_static);
        for name in self.rules.target_header.iter().chain(&standard) {
            policy.remove(name);
            for value in origin_304.get_all(name) {
                policy.append(name.clone(), value.clone());
            }
        }
        let result = storable_with(
            &Method::GET,
            &self.request.headers,
            entry.status,
            &policy,
            self.limits.default_ttl,
            &self.rules,
            self.request_time,
            now,
        );
        match result {
            Ok(freshness) => {
                entry.freshness = freshness;
                freshened.storable = Ok(());
            }
            Err(why) => {
                entry.freshness = validate::revalidate_always(now);
                freshened.storable = Err(why);
            }
        }
    }

    fn pass(&mut self, outcome: Outcome) {
        self.state = State::Passing;
        self.outcome = Some(outcome);
    }

    fn end_answered(&mut self, outcome: Outcome) {
        self.state = State::Answered;
        self.outcome = Some(outcome);
    }

    /// Builds the entry from a complete collected response and inserts it; `false` when the
    /// store refused it for size.
    fn store_entry(&self, collecting: Collecting) -> bool {
        let Collecting {
            status,
            headers,
            freshness,
            body,
        } = collecting;
        let wire_head = (self.limits.encode_head)(status, &headers);
        let entry = Entry::new(
            status,
            headers,
            body.freeze(),
            wire_head,
            freshness,
            &self.request.headers,
        );
        self.store.insert(self.request.key.clone(), Arc::new(entry))
    }
}

/// The fields an entry keeps of a response's client-bound fields: all but the per-response
/// ones (Age and Content-Length are written fresh on every hit, `X-Cache` by the binary when
/// configured; the Date is the origin's, see [`add_date`]).
pub fn stored_headers(headers: &HeaderMap) -> HeaderMap {
    let mut kept = headers.clone();
    for name in [AGE, DATE, CONTENT_LENGTH] {
        kept.remove(name);
    }
    kept.remove("x-cache");
    kept
}

/// The stored response's Date (RFC 9110 §6.6.1): the origin's, when it sent one valid Date
/// line, else `received`, the time the response arrived (a recipient with a clock adds the
/// Date a cached message lacks). Re-formatted as an IMF-fixdate by [`Entry::new`].
fn add_date(stored: &mut HeaderMap, origin: &HeaderMap, received: SystemTime) {
    let mut lines = origin.get_all(DATE).iter();
    let date = match (lines.next(), lines.next()) {
        (Some(line), None) => directives::parse_date(line).unwrap_or(received),
        _ => received,
    };
    stored.insert(DATE, directives::imf_fixdate(date));
}

/// Encodes header fields as HTTP/1.1 lines (`name: value\r\n`), the wire head every HTTP/1.1
/// hit copies after its status line. Date is left out: the encoder writes the status line and
/// Date itself, from [`Entry::date`]. Usable as [`FillLimits::encode_head`].
pub fn header_lines(_status: StatusCode, headers: &HeaderMap) -> Bytes {
    let mut out = BytesMut::with_capacity(32 * headers.len());
    for (name, value) in headers.iter().filter(|(name, _)| *name != DATE) {
        out.put_slice(name.as_str().as_bytes());
        out.put_slice(b": ");
        out.put_slice(value.as_bytes());
        out.put_slice(b"\r\n");
    }
    out.freeze()
}
