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
//!
//! The decisions are `squall_proxy::cached`'s (`begin`, `after_wait`, and the
//! `CachedExchange` of each fetch); this file runs them: answers, parks, starts sessions,
//! counts.

use std::sync::Arc;

use http::header;
use http::{Method, StatusCode};
use squall_cache::CacheKey;
use squall_h1::RequestHead;
use squall_proxy::ProxyRoute;
use squall_proxy::cached::{self, Answer, Count};

use super::Worker;
use super::cluster::Owners;
use super::downstream;
use super::downstream::part_downstream;
use super::ids::Client;
use super::parked::Parked;
use super::purge::Purged;
use super::session::CacheFill;
use crate::cache::{Cache, Waiter};

pub(crate) use squall_proxy::cached::CacheFields;

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
    ) {
        let cache = self.runtime.cache.clone();
        if cache.memory == 0 {
            self.start_session(client, head, route, None, None);
            return;
        }
        let conn = &self.clients.conns[client.conn()];
        // The choice of the key's owner reads the runtime and which peers this worker believes
        // alive, lent for this request.
        let owners = Owners {
            runtime: &self.runtime,
            upstreams: &self.origins.upstreams,
            now: self.now,
            worker: self.id,
        };
        let from_peer = owners.hop_from_peer(conn, &mut head);
        let key = key_of(&head, owners.key_scheme(conn, &head, from_peer));
        if is_purge(&head.method) {
            return self.purge(client, head, route, cache, key, from_peer);
        }
        // A key another node owns goes to that node, with its peer group as the route.
        let owned = (!from_peer)
            .then(|| owners.owner_elsewhere(conn, &head, &key))
            .flatten()
            .and_then(|node| owners.route_to_owner(&route, node, &mut head));
        if let Some(owned) = owned {
            let local_ttl = self.runtime.cluster.as_ref().map(|c| c.local_ttl);
            if local_ttl.is_none_or(|ttl| ttl.is_zero()) {
                // No local copy: the owner answers, from its cache or its origin.
                self.start_session(client, head, owned, None, None);
                return;
            }
            return self.begin_here(client, head, owned, cache, key, local_ttl);
        }
        self.begin_here(client, head, route, cache, key, None)
    }

    /// [`Worker::begin_cached`] once the node is chosen: `borrowed` is the `local_ttl` of a
    /// key another node owns, whose fetches go to that owner (`route` is already its peer's)
    /// and whose local copy is used only that long after it arrived. The way is decided in
    /// `squall_proxy::cached::begin`; this runs it.
    pub(super) fn begin_here(
        &mut self,
        client: Client,
        head: RequestHead,
        route: Arc<ProxyRoute>,
        cache: Arc<Cache>,
        key: CacheKey,
        borrowed: Option<std::time::Duration>,
    ) {
        let waiter = Waiter {
            worker: self.id,
            client: part_downstream!(self).client_token(client),
        };
        let cached = cache.route(&route);
        let inflight = &cache.inflight;
        let begun = cached::begin(&cached, inflight, head, key, borrowed, waiter, self.wall);
        self.run_begun(client, route, cache, begun)
    }

    /// Carries out the way a request on a cached route was found: counts it, answers, parks
    /// or fetches, and starts the background fetch that goes beside it.
    fn run_begun(
        &mut self,
        client: Client,
        route: Arc<ProxyRoute>,
        cache: Arc<Cache>,
        begun: cached::Begun,
    ) {
        count_cache(self.runtime.metrics.worker(self.id), begun.count);
        match begun.answer {
            Answer::Bypass(head) => {
                self.start_session(client, head, route.clone(), None, None);
            }
            Answer::Serve {
                head,
                entry,
                served,
            } => {
                let x_cache = cache.x_cache;
                part_downstream!(self)
                    .serve_entry(client, &head, &entry, served, x_cache, route.id);
            }
            // RFC 9111 §5.2.1.7: nothing the client accepts is stored, so 504 without asking
            // the origin.
            Answer::GatewayTimeout(head) => {
                part_downstream!(self).answer_status(client, &head, StatusCode::GATEWAY_TIMEOUT);
            }
            // Behind the fetch of `key` that it joined as a follower, for at most
            // `cache.coalesce_timeout`; `fetched` when that fetch is its own.
            Answer::Park { head, key, fetched } => {
                let parked = Parked {
                    head,
                    route: route.clone(),
                    key,
                    until: self.now + cache.coalesce_timeout,
                    since: self.wall,
                    fetched,
                    cluster: None,
                };
                downstream::park(&mut self.clients.conns[client.conn()], client, parked);
                self.update_deadline(client.conn());
            }
            Answer::Fetch(fetch) => {
                let (head, fill) = CacheFill::of(fetch, cache.clone(), None);
                self.start_session(client, head, route.clone(), None, Some(fill));
            }
        }
        if let Some(fetch) = begun.background {
            let (head, fill) = CacheFill::of(fetch, cache, None);
            self.start_session(client, head, route, None, Some(fill));
        }
    }

    /// A fetch this client waited for has ended (or its wait timed out): look again, then
    /// serve the entry or go to the origin (with no ticket and no stale entry).
    pub(super) fn unpark(&mut self, client: Client) {
        let conn = &mut self.clients.conns[client.conn()];
        if conn.phase != super::conn::Phase::Open {
            return;
        }
        let Some(parked) = downstream::take_parked(conn, client) else {
            return;
        };
        let mut parked = *parked;
        if let Some(wait) = parked.cluster.take() {
            self.unpark_cluster(client, parked, wait);
            part_downstream!(self).resume(client);
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
        let cached = cache.route(&route);
        let begun = cached::after_wait(&cached, head, key, since, fetched, self.wall);
        self.run_begun(client, route, cache, begun);
        part_downstream!(self).resume(client);
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
    ) {
        let fleet = !from_peer && self.runtime.cluster.is_some();
        let (head, removed, refetch) =
            match part_downstream!(self).purge(client, head, &cache, &key, from_peer, fleet) {
                Purged::Answered => return,
                Purged::Refetch(head) => (head, 0, true),
                Purged::Fleet(head, removed) => (head, removed, false),
            };
        let route = if fleet {
            // A refetch is answered by its fresh copy: the peers are told, not waited for.
            match self.fan_out_purge(client, head, route, key, removed, !refetch) {
                Some((back, route, key2)) if refetch => {
                    let (head, fill) = refetch_get(back, &route, cache, key2, self.wall);
                    return self.start_session(client, head, route, None, Some(fill));
                }
                Some((back, _, _)) => {
                    part_downstream!(self).answer_purged(client, &back, removed);
                    return;
                }
                None => return,
            }
        } else {
            route
        };
        let (head, fill) = refetch_get(head, &route, cache, key, self.wall);
        self.start_session(client, head, route, None, Some(fill));
    }
}

/// The GET that fetches a fresh copy of a purged URL now, and the fill that answers the PURGE
/// with it (Tempesta's `X-Tempesta-Cache: get`), logged as the PURGE it was.
fn refetch_get(
    mut head: RequestHead,
    route: &ProxyRoute,
    cache: Arc<Cache>,
    key: CacheKey,
    wall: std::time::SystemTime,
) -> (RequestHead, Box<CacheFill>) {
    let purge = std::mem::replace(&mut head.method, Method::GET);
    head.headers.remove(PURGE_HEADER);
    head.headers.remove(crate::cluster::HOP);
    let fetch = cache.route(route).fetch(head, key, None, None, wall);
    CacheFill::of(fetch, cache, Some(purge))
}

/// Counts how a request on a cached route was found.
fn count_cache(counters: &crate::metrics::WorkerCounters, count: Count) {
    match count {
        Count::Nothing => {}
        Count::Hit => counters.cache_hits.inc(),
        Count::Stale => counters.cache_stale.inc(),
        Count::Miss => counters.cache_misses.inc(),
        Count::Pass => {
            counters.cache_misses.inc();
            counters.cache_passes.inc();
        }
        Count::Coalesced => counters.cache_coalesced.inc(),
    }
}
