//! Routes with `cache = true`: answering from the store, fetching misses once, and storing what
//! comes back (RFC 9111 through squall-cache).
//!
//! A request on a cached route goes one of four ways, for HTTP/1.1 and HTTP/2 alike:
//! - **hit**: a fresh entry (or a 304 for a conditional request) is written straight from the
//!   entry's pre-encoded head and shared body: no origin, no lock held while sending;
//! - **fetch**: the first request for a missing or stale object becomes the leader of its key in
//!   the process-wide in-flight table and goes to the origin (conditionally, with the entry's
//!   validators, when one is stored); the response streams to its client while it is collected,
//!   and is stored when complete, storable and not too large;
//! - **park**: later requests for the same key, on any worker, wait for the leader (at most
//!   `cache.coalesce_timeout`), then look the store up again; on a miss they go to the origin
//!   themselves, as nginx's `proxy_cache_lock` does;
//! - **pass**: other methods go to the origin as on any proxy route; a successful one that is
//!   not safe (POST, PUT, DELETE, ...) purges the URL (RFC 9111 §4.4). PURGE from `cache.purge_allow` removes the URL's variants
//!   (with `X-Squall-Purge: refetch`, fetches it again at once).
//!
//! `stale-while-revalidate` is served while one revalidation runs: the request that finds the
//! entry stale leads the revalidation (and waits for it); requests arriving meanwhile get the
//! stale entry at once rather than parking. `stale-if-error` answers with the stale entry when
//! the revalidation fails (an error status, or no response).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use squall_cache::{CacheKey, Entry, EntryState, Freshness, Join, Lookup};
use squall_h1::RequestHead;
use squall_proxy::ProxyRoute;
use tracing::debug;

use super::Worker;
use super::downstream::{self, Client, put_line};
use crate::cache::{Cache, Leader, Waiter};

/// The cache side of an exchange that may store its response.
pub struct Fill {
    pub cache: Arc<Cache>,
    pub key: CacheKey,
    /// Held by the one request that fetches for its key; waking the others when dropped.
    #[expect(
        dead_code,
        reason = "held for its Drop, which wakes the parked requests"
    )]
    pub leader: Option<Leader>,
    pub request_time: SystemTime,
    pub ttl: Option<Duration>,
    /// The stored entry this fetch replaces: revalidated when the request went out
    /// conditional, and served if the fetch fails and `stale-if-error` allows.
    pub stale: Option<Arc<Entry>>,
    /// The client's own request fields, when revalidation replaced its conditionals.
    pub client_headers: Option<HeaderMap>,
    pub state: FillState,
}

pub enum FillState {
    /// No response head yet.
    Waiting,
    /// Collecting a storable response.
    Storing(Box<Storing>),
    /// Not stored (not storable, too large, or answered from the cache after all).
    Passed,
}

pub struct Storing {
    status: StatusCode,
    headers: HeaderMap,
    freshness: Freshness,
    body: BytesMut,
}

/// A request waiting for another's fetch of the same object.
pub struct Parked {
    pub head: RequestHead,
    pub route: Arc<ProxyRoute>,
    pub key: CacheKey,
    pub until: Instant,
}

/// What `begin_cached` did with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Begun {
    /// Answered from the cache (or refused): the client may go on to its next request.
    Answered,
    /// Forwarded: an exchange runs.
    Forwarded,
    /// Parked behind another fetch.
    Parked,
}

/// The `X-Cache` label of a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Label {
    Hit,
    Miss,
    Stale,
    Revalidated,
}

impl Label {
    pub fn as_str(self) -> &'static str {
        match self {
            Label::Hit => "HIT",
            Label::Miss => "MISS",
            Label::Stale => "STALE",
            Label::Revalidated => "REVALIDATED",
        }
    }
}

/// The cache key of a request: scheme, host (from Host or `:authority`) and target.
pub fn key_of(head: &RequestHead, scheme: &str) -> CacheKey {
    let host = head
        .headers
        .get(header::HOST)
        .map(HeaderValue::as_bytes)
        .or_else(|| head.uri.authority().map(|a| a.as_str().as_bytes()))
        .unwrap_or(b"");
    let target = head.uri.path_and_query().map_or("/", |pq| pq.as_str());
    CacheKey::new(scheme, host, target.as_bytes())
}

/// Encodes stored header fields as HTTP/1.1 lines: the head every hit copies.
pub fn wire_head(headers: &HeaderMap) -> Bytes {
    let mut out = BytesMut::with_capacity(32 * headers.len());
    for (name, value) in headers {
        put_line(&mut out, name.as_str().as_bytes(), value.as_bytes());
    }
    out.freeze()
}

/// The PURGE method (Varnish, Squid, Tempesta); not in the `http` crate's constants.
pub(super) fn is_purge(method: &Method) -> bool {
    method.as_str() == "PURGE"
}

const PURGE_HEADER: &str = "x-squall-purge";

impl Worker {
    /// Starts a bodiless request on a route with `cache = true`: hit, fetch, park or pass.
    pub(super) fn begin_cached(
        &mut self,
        client: Client,
        mut head: RequestHead,
        route: Arc<ProxyRoute>,
    ) -> Begun {
        let cache = self.runtime.cache.clone();
        if cache.memory == 0 {
            self.start_session(client, head, route, None, None);
            return Begun::Forwarded;
        }
        let key = key_of(&head, super::scheme(&self.conns[client.conn()]));
        if is_purge(&head.method) {
            return self.purge(client, head, route, cache, key);
        }
        let control = match squall_cache::lookup_policy(&head.method, &head.headers) {
            Lookup::Use(control) => control,
            Lookup::Bypass => {
                self.start_session(client, head, route, None, None);
                return Begun::Forwarded;
            }
        };
        let now = SystemTime::now();
        let counters = self.runtime.metrics.worker(self.id);
        let entry = cache.store.lookup(&key, &head.headers);
        let mut stale = None;
        if let Some(entry) = entry {
            match entry.state(now, &control) {
                EntryState::Fresh => {
                    counters.cache_hits.inc();
                    self.downstream().serve_entry(
                        client,
                        &head,
                        &entry,
                        Label::Hit,
                        cache.x_cache,
                        route.id,
                    );
                    return Begun::Answered;
                }
                EntryState::Stale {
                    can_serve_while_revalidate,
                    ..
                } => {
                    if can_serve_while_revalidate && !self.may_lead(&cache, &key, client) {
                        // Another request is revalidating it: serve stale meanwhile.
                        counters.cache_stale.inc();
                        self.downstream().serve_entry(
                            client,
                            &head,
                            &entry,
                            Label::Stale,
                            cache.x_cache,
                            route.id,
                        );
                        return Begun::Answered;
                    }
                    stale = Some(entry);
                }
                EntryState::MustRevalidate => stale = Some(entry),
            }
        } else if control.only_if_cached {
            // RFC 9111 §5.2.1.7: nothing stored, so 504 without asking the origin.
            self.downstream()
                .answer_status(client, &head, StatusCode::GATEWAY_TIMEOUT);
            return Begun::Answered;
        }
        let waiter = Waiter {
            worker: self.id,
            client: self.client_token(client),
        };
        let leader = match cache.inflight.join(&key, waiter) {
            Join::Leader(ticket) => Some(Leader::new(ticket, cache.clone(), self.peers.clone())),
            Join::Follower => {
                counters.cache_coalesced.inc();
                let until = self.now + cache.coalesce_timeout;
                self.park(
                    client,
                    Parked {
                        head,
                        route,
                        key,
                        until,
                    },
                );
                return Begun::Parked;
            }
            // Too many waiting already: this one goes to the origin itself.
            Join::Full(_) => None,
        };
        counters.cache_misses.inc();
        let mut client_headers = None;
        if let Some(entry) = &stale {
            let validators = squall_cache::revalidation_headers(entry);
            if !validators.is_empty() {
                client_headers = Some(head.headers.clone());
                for name in [
                    header::IF_NONE_MATCH,
                    header::IF_MODIFIED_SINCE,
                    header::IF_MATCH,
                    header::IF_UNMODIFIED_SINCE,
                    header::IF_RANGE,
                ] {
                    head.headers.remove(name);
                }
                for (name, value) in validators {
                    head.headers.insert(name, value);
                }
            }
        }
        let fill = Fill {
            cache,
            key,
            leader,
            request_time: now,
            ttl: route.cache_ttl,
            stale,
            client_headers,
            state: FillState::Waiting,
        };
        self.start_session(client, head, route, None, Some(Box::new(fill)));
        Begun::Forwarded
    }

    /// True when `client` may lead a fetch of `key` (nobody else is fetching it); registers it
    /// as a waiter otherwise, whose wake-up is then ignored.
    fn may_lead(&self, cache: &Cache, key: &CacheKey, client: Client) -> bool {
        let waiter = Waiter {
            worker: self.id,
            client: self.client_token(client),
        };
        match cache.inflight.join(key, waiter) {
            // Give the ticket straight back: `begin_cached` joins again as the leader.
            Join::Leader(ticket) => {
                cache.inflight.finish(ticket);
                true
            }
            Join::Follower => {
                cache.inflight.leave(key, &waiter);
                false
            }
            Join::Full(_) => false,
        }
    }

    fn park(&mut self, client: Client, parked: Parked) {
        downstream::park(&mut self.conns[client.conn()], client, parked);
        self.update_deadline(client.conn());
    }

    /// A fetch this client waited for has ended (or its wait timed out): look again, then
    /// serve the entry or go to the origin.
    pub(super) fn unpark(&mut self, client: Client) {
        let conn = &mut self.conns[client.conn()];
        if conn.phase != super::conn::Phase::Open {
            return;
        }
        let Some(parked) = downstream::take_parked(conn, client) else {
            return;
        };
        let Parked {
            head, route, key, ..
        } = *parked;
        let cache = self.runtime.cache.clone();
        let control = squall_cache::request_cache_control(&head.headers);
        let now = SystemTime::now();
        let fresh = cache
            .store
            .lookup(&key, &head.headers)
            .filter(|e| e.state(now, &control) == EntryState::Fresh);
        if let Some(entry) = fresh {
            self.runtime.metrics.worker(self.id).cache_hits.inc();
            self.downstream().serve_entry(
                client,
                &head,
                &entry,
                Label::Hit,
                cache.x_cache,
                route.id,
            );
        } else {
            let fill = Fill {
                cache,
                key,
                leader: None,
                request_time: now,
                ttl: route.cache_ttl,
                stale: None,
                client_headers: None,
                state: FillState::Waiting,
            };
            self.start_session(client, head, route, None, Some(Box::new(fill)));
        }
        self.after_begin(client);
    }

    /// Lets the client's connection go on after a cached request was answered or started.
    fn after_begin(&mut self, client: Client) {
        self.resume_client(client);
    }

    /// Wakes parked requests whose wait has run out.
    pub(super) fn unpark_expired(&mut self, index: usize) {
        for client in downstream::parked_due(&self.conns[index], index, self.now) {
            debug!(
                worker = self.id,
                conn = index,
                "coalesce_timeout: to the origin"
            );
            self.unpark(client);
        }
    }

    /// PURGE: removes every variant of the URL, if the client may.
    fn purge(
        &mut self,
        client: Client,
        mut head: RequestHead,
        route: Arc<ProxyRoute>,
        cache: Arc<Cache>,
        key: CacheKey,
    ) -> Begun {
        let allowed = self.conns[client.conn()]
            .peer
            .is_some_and(|peer| cache.purge_allowed(peer.ip()));
        if !allowed {
            (self.runtime.metrics.worker(self.id)).count_refused(StatusCode::FORBIDDEN);
            self.downstream()
                .answer_status(client, &head, StatusCode::FORBIDDEN);
            return Begun::Answered;
        }
        let removed = cache.store.purge(&key);
        self.runtime
            .metrics
            .worker(self.id)
            .cache_purges
            .add(removed as u64);
        debug!(worker = self.id, removed, "purge");
        let refetch = head
            .headers
            .get(PURGE_HEADER)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"refetch"));
        if !refetch {
            let status = if removed > 0 {
                StatusCode::OK
            } else {
                StatusCode::NOT_FOUND
            };
            self.downstream().answer_status(client, &head, status);
            return Begun::Answered;
        }
        // Fetch a fresh copy now, as a GET, and answer the PURGE with it (Tempesta's
        // `X-Tempesta-Cache: get`).
        head.method = Method::GET;
        head.headers.remove(PURGE_HEADER);
        let fill = Fill {
            cache,
            key,
            leader: None,
            request_time: SystemTime::now(),
            ttl: route.cache_ttl,
            stale: None,
            client_headers: None,
            state: FillState::Waiting,
        };
        self.start_session(client, head, route, None, Some(Box::new(fill)));
        Begun::Forwarded
    }
}

// ---- the fill's side: called by the session as the origin's response arrives ----

/// What the exchange does with the origin's response head.
pub enum HeadAction {
    /// Forward it (with `X-Cache: MISS` added when configured).
    Forward,
    /// The response was answered from the cache (a 304 refreshed the entry, or an error
    /// turned into a stale entry): swallow the origin's body.
    Answered(Arc<Entry>, Label),
}

/// Decides what to do with the origin's response head for an exchange that has a fill, and
/// starts collecting the body when it will be stored. `headers` are the fields as they go to
/// the client (hop-by-hop removed, route edits applied).
pub fn on_head(
    fill: &mut Fill,
    method: &Method,
    request_headers: &HeaderMap,
    status: StatusCode,
    origin_headers: &HeaderMap,
    headers: &mut HeaderMap,
    content_length: Option<u64>,
) -> HeadAction {
    let now = SystemTime::now();
    let client_headers = fill.client_headers.as_ref().unwrap_or(request_headers);
    if let Some(stale) = &fill.stale {
        if status == StatusCode::NOT_MODIFIED {
            let exchange = squall_cache::Exchange {
                request_headers: client_headers,
                default_ttl: fill.ttl,
                request_time: fill.request_time,
                response_time: now,
            };
            let mut merged = headers.clone();
            merged.remove(header::AGE);
            if let Some(freshened) =
                squall_cache::freshen(stale, &merged, &exchange, |_, h| wire_head(&stored(h)))
            {
                let entry = Arc::new(freshened.entry);
                if freshened.storable.is_ok() {
                    fill.cache.store.insert(fill.key.clone(), entry.clone());
                } else {
                    fill.cache.store.remove_variant(&fill.key, stale);
                }
                fill.state = FillState::Passed;
                return HeadAction::Answered(entry, Label::Revalidated);
            }
        }
        if status.is_server_error() {
            let state = stale.state(now, &squall_cache::request_cache_control(client_headers));
            if matches!(
                state,
                EntryState::Stale {
                    can_serve_if_error: true,
                    ..
                }
            ) {
                fill.state = FillState::Passed;
                return HeadAction::Answered(stale.clone(), Label::Stale);
            }
        }
    }
    if fill.cache.x_cache {
        headers.insert(
            HeaderName::from_static("x-cache"),
            HeaderValue::from_static(Label::Miss.as_str()),
        );
    }
    let storable = squall_cache::storable(
        method,
        client_headers,
        status,
        origin_headers,
        fill.ttl,
        fill.request_time,
        now,
    );
    let too_big = content_length.is_some_and(|n| n > fill.cache.object_bytes_max as u64);
    fill.state = match storable {
        Ok(freshness) if !too_big => FillState::Storing(Box::new(Storing {
            status,
            headers: stored(headers),
            freshness,
            body: BytesMut::with_capacity(content_length.unwrap_or(0) as usize),
        })),
        Ok(_) => FillState::Passed,
        Err(reason) => {
            debug!(reason = reason.as_str(), "not stored");
            FillState::Passed
        }
    };
    HeadAction::Forward
}

/// The stale entry to serve when the fetch that revalidates it fails, if `stale-if-error`
/// allows it.
pub fn stale_for_error(fill: &Fill, request_headers: &HeaderMap) -> Option<Arc<Entry>> {
    let stale = fill.stale.as_ref()?;
    let client_headers = fill.client_headers.as_ref().unwrap_or(request_headers);
    let control = squall_cache::request_cache_control(client_headers);
    match stale.state(SystemTime::now(), &control) {
        EntryState::Stale {
            can_serve_if_error: true,
            ..
        } => Some(stale.clone()),
        _ => None,
    }
}

/// The request as the client sent it: a revalidation replaced its conditional fields with the
/// entry's validators, and a 304 to the client must follow the client's own.
pub fn client_request(sent: &RequestHead, fill: &Fill) -> RequestHead {
    let mut request = sent.clone();
    if let Some(headers) = &fill.client_headers {
        request.headers = headers.clone();
    }
    request
}

/// The fields an entry keeps: the client's, without per-response ones.
fn stored(headers: &HeaderMap) -> HeaderMap {
    let mut kept = headers.clone();
    for name in [header::AGE, header::DATE, header::CONTENT_LENGTH] {
        kept.remove(name);
    }
    kept.remove("x-cache");
    kept
}

/// Collects a piece of the body of a response being stored.
pub fn on_data(fill: &mut Fill, data: &[u8]) {
    if let FillState::Storing(storing) = &mut fill.state {
        if storing.body.len() + data.len() > fill.cache.object_bytes_max {
            fill.state = FillState::Passed;
        } else {
            storing.body.put_slice(data);
        }
    }
}

/// The response ended cleanly: store it. Returns true when an entry was stored.
pub fn on_end(fill: &mut Fill, request_headers: &HeaderMap) -> bool {
    let state = std::mem::replace(&mut fill.state, FillState::Passed);
    let FillState::Storing(storing) = state else {
        return false;
    };
    let Storing {
        status,
        headers,
        freshness,
        body,
    } = *storing;
    let client_headers = fill.client_headers.as_ref().unwrap_or(request_headers);
    let wire = wire_head(&headers);
    let entry = Entry::new(
        status,
        headers,
        body.freeze(),
        wire,
        freshness,
        client_headers,
    );
    fill.cache.store.insert(fill.key.clone(), Arc::new(entry))
}
