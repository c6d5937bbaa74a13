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
//! `stale-while-revalidate` (RFC 5861 §3) is served at once to every request inside the
//! window, the first included: the request that finds the entry stale and nobody revalidating
//! it (on any worker: the in-flight table is process-wide) also starts the revalidation, as a
//! background session that answers nobody and whose fill stores or freshens the entry. `stale-if-error` answers with the stale entry when
//! the revalidation fails (an error status, or no response).

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use http::header;
use http::{Method, StatusCode};
use squall_cache::{Admission, CacheKey, Entry, Fill, FillRequest, Join, Lookup, Served};
use squall_h1::RequestHead;
use squall_proxy::ProxyRoute;
use tracing::debug;

use super::Worker;
use super::downstream::{self, Client};
use super::purge::Purged;
use crate::cache::{Cache, Waiter};

/// The `X-Cache` label of a response (the access log's cache field).
pub type Label = Served;

/// The cache side of a session: the fill, and the cache whose store and in-flight table it
/// fills (a reload may have replaced the worker's since).
pub struct CacheFill {
    pub cache: Arc<Cache>,
    pub fill: Fill,
    /// The method the client sent, when the fill forwards another: a PURGE refetched as a GET
    /// is logged as the PURGE it was.
    pub logged_method: Option<Method>,
}

/// A request waiting for another's fetch of the same object.
pub struct Parked {
    pub head: RequestHead,
    pub route: Arc<ProxyRoute>,
    pub key: CacheKey,
    pub until: Instant,
    /// When it parked (wall clock, as entries' response times): an entry stored since then
    /// satisfies its `no-cache` and `max-age`.
    pub since: SystemTime,
    /// It waits for the fetch it caused (a range of an object not stored): the entry it is
    /// then served from is its `MISS`, not a hit.
    pub fetched: bool,
    /// It waits for something of the cluster's, not for a fetch (`cluster.rs`).
    pub cluster: Option<ClusterWait>,
}

/// What a request parked by the cluster waits for.
pub enum ClusterWait {
    /// Nothing: its key's owner failed, and it is served here on the next turn of the loop,
    /// once the failed session has let its client go.
    OwnerFailed,
    /// The answers of the peers a PURGE was sent to (`None`: too many fan-outs at once), and
    /// what it removed here.
    Purge {
        fanout: Option<Arc<crate::cluster::fanout::FanOut>>,
        peers: Vec<String>,
        removed: usize,
    },
}

/// What `begin_cached` did with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Begun {
    /// Answered from the cache (or refused): the client may go on to its next request.
    Answered,
    /// Forwarded: a session runs.
    Forwarded,
    /// Parked behind another fetch.
    Parked,
}

/// The cache key of a request: scheme, host (from Host or `:authority`) and target.
pub fn key_of(head: &RequestHead, scheme: &str) -> CacheKey {
    let host = head
        .headers
        .get(header::HOST)
        .map(|v| v.as_bytes())
        .or_else(|| head.uri.authority().map(|a| a.as_str().as_bytes()))
        .unwrap_or(b"");
    let target = head.uri.path_and_query().map_or("/", |pq| pq.as_str());
    CacheKey::new(scheme, host, target.as_bytes())
}

/// A request head's fields as the cache reads them, without building a map.
pub(crate) struct CacheFields<'a>(pub &'a squall_h1::Fields);

impl squall_cache::RequestFields for CacheFields<'_> {
    fn values<'a>(&'a self, name: &'a http::HeaderName) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.0.get_all(name).map(|v| v.as_bytes())
    }
}

/// The fill's rewrite of the conditionals of the request to the origin
/// ([`squall_cache::Fill::origin_request_headers`]), applied to the head's fields.
fn origin_conditionals(fill: &squall_cache::Fill, headers: &mut squall_h1::Fields) {
    let Some(validators) = fill.origin_conditionals() else {
        return;
    };
    for name in squall_cache::CLIENT_CONDITIONALS {
        headers.remove(name);
    }
    for (name, value) in validators {
        headers.insert(name, value);
    }
}

/// A GET with a Range: on a miss, the whole object is fetched for the store and the range
/// served from it.
fn is_ranged(head: &RequestHead) -> bool {
    head.method == Method::GET && head.headers.contains_key(header::RANGE)
}

/// The PURGE method (Varnish, Squid, Tempesta); not in the `http` crate's constants.
pub(super) fn is_purge(method: &Method) -> bool {
    method.as_str() == "PURGE"
}

const PURGE_HEADER: &str = "x-squall-purge";

impl Worker {
    /// Starts a bodiless request on a route with `cache = true`: hit, fetch, park or pass,
    /// here or (`[cluster]`) at the node that owns its key.
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
        let from_peer = self.hop_from_peer(client, &mut head);
        let key = key_of(&head, self.key_scheme(client, &head, from_peer));
        if is_purge(&head.method) {
            return self.purge(client, head, route, cache, key, from_peer);
        }
        if !from_peer && let Some(node) = self.owner_elsewhere(client, &head, &key) {
            let local_ttl = self.runtime.cluster.as_ref().map(|c| c.local_ttl);
            if let Some(owned) = self.route_to_owner(&route, node, &mut head) {
                if local_ttl.is_none_or(|ttl| ttl.is_zero()) {
                    // No local copy: the owner answers, from its cache or its origin.
                    self.start_session(client, head, owned, None, None);
                    return Begun::Forwarded;
                }
                return self.begin_here(client, head, owned, cache, key, local_ttl);
            }
        }
        self.begin_here(client, head, route, cache, key, None)
    }

    /// [`Worker::begin_cached`] once the node is chosen: `borrowed` is the `local_ttl` of a
    /// key another node owns, whose fetches go to that owner (`route` is already its peer's)
    /// and whose local copy is used only that long after it arrived.
    pub(super) fn begin_here(
        &mut self,
        client: Client,
        head: RequestHead,
        route: Arc<ProxyRoute>,
        cache: Arc<Cache>,
        key: CacheKey,
        borrowed: Option<std::time::Duration>,
    ) -> Begun {
        let control = match squall_cache::lookup_policy(&head.method, &CacheFields(&head.headers)) {
            Lookup::Use(control) => cache.request_control(route.id, control),
            Lookup::Bypass => {
                self.start_session(client, head, route, None, None);
                return Begun::Forwarded;
            }
        };
        let entry = cache.store.lookup(&key, &CacheFields(&head.headers));
        let entry = entry.filter(|e| borrowed.is_none_or(|ttl| self.borrowed_fresh(e, ttl)));
        let decision = squall_cache::decide(entry, &control, self.wall);
        let waiter = Waiter {
            worker: self.id,
            client: self.client_token(client),
        };
        let counters = self.runtime.metrics.worker(self.id);
        match squall_cache::admit(&cache.inflight, &key, decision, waiter, self.wall) {
            Admission::Serve(entry, served) => {
                match served {
                    Served::Stale => counters.cache_stale.inc(),
                    _ => counters.cache_hits.inc(),
                }
                self.downstream().serve_entry(
                    client,
                    &head,
                    &entry,
                    served,
                    cache.x_cache,
                    route.id,
                );
                Begun::Answered
            }
            // RFC 9111 §5.2.1.7: nothing the client accepts is stored, so 504 without asking
            // the origin.
            Admission::GatewayTimeout => {
                self.downstream()
                    .answer_status(client, &head, StatusCode::GATEWAY_TIMEOUT);
                Begun::Answered
            }
            Admission::Wait => {
                counters.cache_coalesced.inc();
                self.park(client, head, route, key, &cache, false)
            }
            // A range of an object not stored: the whole object is fetched once, in the
            // background, and the range served from the entry (RFC 9110 §14.2 lets the cache
            // choose); one too large to store is asked for by range after all, on wake-up.
            Admission::Fetch {
                stale,
                ticket: Some(ticket),
            } if is_ranged(&head) => {
                counters.cache_misses.inc();
                let (head2, route2, key2) = (head.clone(), route.clone(), key.clone());
                self.fetch_in_background(client, head2, route2, cache.clone(), key2, stale, ticket);
                let waiter = Waiter {
                    worker: self.id,
                    client: self.client_token(client),
                };
                match cache.inflight.join(&key, waiter, self.wall) {
                    Join::Follower => self.park(client, head, route, key, &cache, true),
                    _ => {
                        self.start_fill(client, head, route, cache, key, None, None, None);
                        Begun::Forwarded
                    }
                }
            }
            Admission::Fetch { stale, ticket } => {
                counters.cache_misses.inc();
                self.start_fill(client, head, route, cache, key, stale, ticket, None);
                Begun::Forwarded
            }
            // The key's last response was not storable: straight to the origin, coalescing
            // with nobody (what comes back may still be stored).
            Admission::Pass { stale } => {
                counters.cache_misses.inc();
                counters.cache_passes.inc();
                self.start_fill(client, head, route, cache, key, stale, None, None);
                Begun::Forwarded
            }
            Admission::ServeAndRevalidate { entry, ticket } => {
                counters.cache_stale.inc();
                self.downstream().serve_entry(
                    client,
                    &head,
                    &entry,
                    Served::Stale,
                    cache.x_cache,
                    route.id,
                );
                let stale = Some(entry);
                self.fetch_in_background(client, head, route, cache, key, stale, ticket);
                Begun::Answered
            }
        }
    }

    /// Parks `client`'s request behind the fetch of `key` that it joined as a follower, for
    /// at most `cache.coalesce_timeout`; `fetched` when that fetch is its own.
    fn park(
        &mut self,
        client: Client,
        head: RequestHead,
        route: Arc<ProxyRoute>,
        key: CacheKey,
        cache: &Cache,
        fetched: bool,
    ) -> Begun {
        let parked = Parked {
            head,
            route,
            key,
            until: self.now + cache.coalesce_timeout,
            since: self.wall,
            fetched,
            cluster: None,
        };
        downstream::park(&mut self.conns[client.conn()], client, parked);
        self.update_deadline(client.conn());
        Begun::Parked
    }

    /// Fetches `key` for the store with a session of its own that answers nobody, leading the
    /// key with `ticket`: the revalidation of `stale` just served to `client` (RFC 5861 §3), or
    /// the whole object a range was asked of. It asks as a plain GET, with the stale entry's
    /// validators if any: the client's conditionals and range concern its own answer, and a
    /// HEAD would bring no body to store.
    #[allow(clippy::too_many_arguments)]
    fn fetch_in_background(
        &mut self,
        client: Client,
        mut head: RequestHead,
        route: Arc<ProxyRoute>,
        cache: Arc<Cache>,
        key: CacheKey,
        stale: Option<Arc<Entry>>,
        ticket: squall_cache::Ticket,
    ) {
        head.method = Method::GET;
        for name in [
            header::IF_NONE_MATCH,
            header::IF_MODIFIED_SINCE,
            header::IF_MATCH,
            header::IF_UNMODIFIED_SINCE,
            header::IF_RANGE,
            header::RANGE,
        ] {
            head.headers.remove(name);
        }
        head.expect_continue = false;
        let fill = self.cache_fill(&head, &route, cache, key, stale, Some(ticket), None);
        origin_conditionals(&fill.fill, &mut head.headers);
        self.start_background_session(client, head, route, fill);
    }

    /// Sends `head` to the origin through a fill of `key` (revalidating `stale` when it has
    /// validators, leading the key when it has a `ticket`).
    #[allow(clippy::too_many_arguments)]
    fn start_fill(
        &mut self,
        client: Client,
        head: RequestHead,
        route: Arc<ProxyRoute>,
        cache: Arc<Cache>,
        key: CacheKey,
        stale: Option<Arc<Entry>>,
        ticket: Option<squall_cache::Ticket>,
        logged_method: Option<Method>,
    ) {
        let mut head = head;
        let fill = self.cache_fill(&head, &route, cache, key, stale, ticket, logged_method);
        origin_conditionals(&fill.fill, &mut head.headers);
        self.start_session(client, head, route, None, Some(fill));
    }

    /// The fill of `key` for the request `head` (see [`Fill::new`]).
    #[allow(clippy::too_many_arguments)]
    fn cache_fill(
        &self,
        head: &RequestHead,
        route: &ProxyRoute,
        cache: Arc<Cache>,
        key: CacheKey,
        stale: Option<Arc<Entry>>,
        ticket: Option<squall_cache::Ticket>,
        logged_method: Option<Method>,
    ) -> Box<CacheFill> {
        let request = FillRequest {
            key,
            method: head.method.clone(),
            headers: head.headers.to_header_map(),
        };
        let limits = cache.fill_limits(route.cache_ttl);
        let store = cache.store.clone();
        let fill = Fill::new(store, limits, request, stale, ticket, self.wall)
            .with_rules(cache.response_rules(route.id));
        Box::new(CacheFill {
            cache,
            fill,
            logged_method,
        })
    }

    /// A fetch this client waited for has ended (or its wait timed out): look again, then
    /// serve the entry or go to the origin (with no ticket and no stale entry).
    pub(super) fn unpark(&mut self, client: Client) {
        let conn = &mut self.conns[client.conn()];
        if conn.phase != super::conn::Phase::Open {
            return;
        }
        let Some(parked) = downstream::take_parked(conn, client) else {
            return;
        };
        let mut parked = *parked;
        if let Some(wait) = parked.cluster.take() {
            self.unpark_cluster(client, parked, wait);
            self.resume_client(client);
            return;
        }
        let Parked {
            head,
            route,
            key,
            since,
            fetched,
            ..
        } = parked;
        let cache = self.runtime.cache.clone();
        let headers = CacheFields(&head.headers);
        let control = squall_cache::request_cache_control(&headers);
        let control = cache.request_control(route.id, control);
        let entry = cache.store.lookup(&key, &headers);
        // The fetch it waited for was made after it arrived: what it stored answers a
        // `no-cache` request too, so a reload storm makes one origin request, not one each.
        match squall_cache::decide_after_wait(entry, &control, self.wall, since) {
            squall_cache::Decision::Hit(entry) => {
                // A range whose fetch was its own was counted a miss when it began.
                let label = if fetched { Served::Miss } else { Served::Hit };
                if !fetched {
                    self.runtime.metrics.worker(self.id).cache_hits.inc();
                }
                (self.downstream()).serve_entry(
                    client,
                    &head,
                    &entry,
                    label,
                    cache.x_cache,
                    route.id,
                );
            }
            _ => self.start_fill(client, head, route, cache, key, None, None, None),
        }
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

    /// Finishes a fill's ticket once its fate is known, and wakes the requests it led; a
    /// response that could never be stored marks its URL for hit-for-pass.
    pub(super) fn release_fill(&mut self, fill: &mut CacheFill) {
        if let Some(ticket) = fill.fill.release() {
            let (inflight, hold) = (&fill.cache.inflight, fill.cache.hit_for_pass);
            let waiters = if !hold.is_zero() && squall_cache::passes_after(fill.fill.outcome()) {
                inflight.finish_passing(ticket, self.wall, hold)
            } else {
                inflight.finish(ticket)
            };
            crate::cache::wake(&self.peers, waiters);
        }
    }

    /// Wakes the followers of leaders whose ticket was dropped unfinished (a client gone, a
    /// session torn down), once per loop turn, on the cache in force and on tables a reload
    /// replaced until they are empty.
    pub(super) fn wake_abandoned(&mut self) {
        let woken = self.runtime.cache.inflight.take_abandoned();
        crate::cache::wake(&self.peers, woken);
        self.old_inflight.retain(|table| {
            crate::cache::wake(&self.peers, table.take_abandoned());
            !table.is_empty()
        });
    }

    /// PURGE: answered in `purge.rs` (by URL, surrogate key or prefix), except a refetch,
    /// whose fresh copy is fetched here. In a cluster, a PURGE that did not come from a peer
    /// goes to every peer too, and is answered when they have (`cluster.rs`).
    fn purge(
        &mut self,
        client: Client,
        head: RequestHead,
        route: Arc<ProxyRoute>,
        cache: Arc<Cache>,
        key: CacheKey,
        from_peer: bool,
    ) -> Begun {
        let fleet = !from_peer && self.runtime.cluster.is_some();
        let (mut head, removed, refetch) =
            match self.purge_request(client, head, &cache, &key, from_peer, fleet) {
                Purged::Answered => return Begun::Answered,
                Purged::Refetch(head) => (head, 0, true),
                Purged::Fleet(head, removed) => (head, removed, false),
            };
        let route = if fleet {
            // A refetch is answered by its fresh copy: the peers are told, not waited for.
            match self.fan_out_purge(client, head, route, key, removed, !refetch) {
                Some((back, route, key2)) if refetch => {
                    head = back;
                    return self.refetch(client, head, route, cache, key2);
                }
                Some((back, _, _)) => {
                    self.downstream().answer_purged(client, &back, removed);
                    return Begun::Answered;
                }
                None => return Begun::Parked,
            }
        } else {
            route
        };
        self.refetch(client, head, route, cache, key)
    }

    /// Fetches a fresh copy of a purged URL now, as a GET, and answers the PURGE with it
    /// (Tempesta's `X-Tempesta-Cache: get`).
    fn refetch(
        &mut self,
        client: Client,
        mut head: RequestHead,
        route: Arc<ProxyRoute>,
        cache: Arc<Cache>,
        key: CacheKey,
    ) -> Begun {
        let purge = std::mem::replace(&mut head.method, Method::GET);
        head.headers.remove(PURGE_HEADER);
        head.headers.remove(crate::cluster::HOP);
        self.start_fill(client, head, route, cache, key, None, None, Some(purge));
        Begun::Forwarded
    }

    /// Whether a copy of another node's object, which arrived at `entry`'s response time, is
    /// still within `local_ttl`.
    fn borrowed_fresh(&self, entry: &Entry, local_ttl: std::time::Duration) -> bool {
        let age = self.wall.duration_since(entry.freshness.response_time);
        age.is_ok_and(|age| age <= local_ttl)
    }
}
