//! The response cache as the process holds it: one store and one in-flight table shared by
//! every worker (squall-cache), the `[cache]` settings, and the wake-ups that tell a worker a
//! request it parked behind another's origin fetch may go on (the driver turns a finished or
//! abandoned ticket's waiters into them).
//!
//! The store outlives reloads: a reload that keeps `cache.memory` keeps every cached object.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Sender;
use squall_cache::{FillLimits, InFlight, ResponseRules, SetCookie, Store};
use squall_config::IpNet;
use squall_proxy::cached::CachedRoute;
use squall_uring::Waker;

use crate::worker::ClientToken;
use crate::worker::Control;

/// Shards per worker: at least 4 × workers (docs/ARCHITECTURE.md), so that two workers rarely
/// want the same lock.
const SHARDS_PER_WORKER: usize = 8;

/// The largest share of one shard's memory an object may take: one object must not evict a
/// whole shard.
const OBJECT_SHARE_OF_SHARD: f64 = 0.5;

/// A request parked behind another request's fetch of the same object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waiter {
    pub worker: usize,
    pub client: ClientToken,
}

/// `[cache]` at run time.
pub struct Cache {
    pub store: Arc<Store>,
    pub inflight: Arc<InFlight<Waiter>>,
    pub memory: u64,
    pub object_bytes_max: usize,
    pub x_cache: bool,
    pub coalesce_timeout: Duration,
    /// `cache.hit_for_pass`: how long a URL whose response was not storable passes.
    pub hit_for_pass: Duration,
    pub purge_allow: Vec<IpNet>,
    /// Per route id: `request_no_cache = "ignore"` (the route's, else `[cache]`'s).
    ignore_reload: Vec<bool>,
    /// `cache.target_header`.
    target_header: Option<http::HeaderName>,
    /// `cache.strip_cdn_cache_control`.
    strip_cdn_cache_control: bool,
    /// `cache.heuristic_freshness_max`.
    heuristic_freshness_max: Duration,
    /// Per route id: `cache_set_cookie`.
    set_cookie: Vec<SetCookie>,
}

impl Cache {
    /// Builds the cache for `config`, keeping `previous`'s store (its objects and the fetches
    /// in flight) when its size is unchanged: a reload then changes only settings.
    pub fn new(
        config: &squall_config::Cache,
        vhosts: &[squall_config::Vhost],
        workers: usize,
        previous: Option<&Arc<Cache>>,
    ) -> Arc<Cache> {
        let memory = usize::try_from(config.memory).unwrap_or(usize::MAX);
        let object_bytes_max = usize::try_from(config.object_bytes_max).unwrap_or(usize::MAX);
        let (store, inflight) = match previous.filter(|p| p.memory == config.memory) {
            Some(previous) => (previous.store.clone(), previous.inflight.clone()),
            None => {
                // Each shard must hold a few large objects: a small cache gets fewer shards
                // (a 1 MiB cache, 4 of 256 KiB) rather than refusing every 100 KiB object.
                let mut shards = (workers.max(1) * SHARDS_PER_WORKER).next_power_of_two();
                while shards > 1 && memory / shards < object_bytes_max.min(memory / 4) {
                    shards /= 2;
                }
                (
                    Arc::new(Store::new(memory, shards, OBJECT_SHARE_OF_SHARD)),
                    Arc::new(InFlight::new(shards)),
                )
            }
        };
        Arc::new(Cache {
            // What one shard can take bounds what is worth collecting.
            object_bytes_max: object_bytes_max.min(store.object_max_bytes()),
            store,
            inflight,
            memory: config.memory,
            x_cache: config.x_cache,
            coalesce_timeout: config.coalesce_timeout,
            hit_for_pass: config.hit_for_pass,
            purge_allow: config.purge_allow.clone(),
            // In route id order: the vhosts' routes in file order, as the service numbers them.
            ignore_reload: (vhosts.iter().flat_map(|v| &v.routes))
                .map(|r| r.request_no_cache.unwrap_or(config.request_no_cache))
                .map(|mode| mode == squall_config::RequestNoCache::Ignore)
                .collect(),
            target_header: config.target_header.clone(),
            strip_cdn_cache_control: config.strip_cdn_cache_control,
            heuristic_freshness_max: config.heuristic_freshness_max,
            set_cookie: (vhosts.iter().flat_map(|v| &v.routes))
                .map(|r| set_cookie(r.cache_set_cookie))
                .collect(),
        })
    }

    /// What requests on `route` are looked up and filled under (`squall_proxy::cached`):
    /// the store, the fill's limits and rules, `request_no_cache = "ignore"` (the route's,
    /// else `[cache]`'s) and `hit_for_pass`.
    pub fn route(&self, route: &squall_proxy::ProxyRoute) -> CachedRoute {
        let ignore_reload = usize::try_from(route.id)
            .ok()
            .and_then(|id| self.ignore_reload.get(id));
        CachedRoute {
            store: self.store.clone(),
            limits: self.fill_limits(route.cache_ttl),
            rules: self.response_rules(route.id),
            ignore_reload: ignore_reload == Some(&true),
            hit_for_pass: self.hit_for_pass,
        }
    }

    /// What bounds a fill on a route whose `cache_ttl` is `default_ttl`.
    fn fill_limits(&self, default_ttl: Option<Duration>) -> FillLimits {
        FillLimits {
            object_bytes_max: self.object_bytes_max,
            default_ttl,
            encode_head: squall_cache::header_lines,
        }
    }

    /// How a fill on route `route` reads the response: the cache's targeted field, whether
    /// entries keep `CDN-Cache-Control`, the Last-Modified heuristic's cap, and the route's
    /// `cache_set_cookie`.
    fn response_rules(&self, route: u32) -> ResponseRules {
        let set_cookie = usize::try_from(route)
            .ok()
            .and_then(|id| self.set_cookie.get(id).copied());
        ResponseRules {
            target_header: self.target_header.clone(),
            set_cookie: set_cookie.unwrap_or_default(),
            strip_cdn_cache_control: self.strip_cdn_cache_control,
            heuristic_freshness_max: self.heuristic_freshness_max,
        }
    }

    /// May a client at `ip` send PURGE?
    pub fn purge_allowed(&self, ip: std::net::IpAddr) -> bool {
        self.purge_allow.iter().any(|net| net.contains(ip))
    }
}

fn set_cookie(mode: squall_config::CacheSetCookie) -> SetCookie {
    match mode {
        squall_config::CacheSetCookie::Pass => SetCookie::Pass,
        squall_config::CacheSetCookie::Strip => SetCookie::Strip,
        squall_config::CacheSetCookie::Store => SetCookie::Store,
    }
}

/// Every worker's control channel and waker, so that any worker can wake a request parked on
/// another.
pub struct Peer {
    pub control: Sender<Control>,
    pub waker: Waker,
}

/// Wakes each waiter on the worker that holds it (a finished or abandoned fetch's followers).
pub fn wake(peers: &[Peer], waiters: Vec<Waiter>) {
    for waiter in waiters {
        if let Some(peer) = peers.get(waiter.worker) {
            // A worker that is gone has no requests to wake.
            if peer
                .control
                .send(Control::CacheReady(waiter.client))
                .is_ok()
            {
                peer.waker.wake();
            }
        }
    }
}

/// A worker's in-flight tables: the one in force, then those a reload replaced, kept until no
/// fetch is left in them. Once per loop turn the followers of leaders whose ticket was dropped
/// unfinished (a client gone, a session torn down) are woken, on each.
#[derive(Default)]
pub struct Abandoned {
    replaced: Vec<Arc<InFlight<Waiter>>>,
}

impl Abandoned {
    /// A reload put `new` in force: `old`, if it is another table, is watched until empty.
    pub fn replaced(&mut self, old: &Arc<InFlight<Waiter>>, new: &Arc<InFlight<Waiter>>) {
        if !Arc::ptr_eq(old, new) {
            self.replaced.push(old.clone());
        }
    }

    /// Wakes the followers of abandoned fetches, on `current` and on the replaced tables
    /// (forgetting those now empty).
    pub fn wake(&mut self, current: &InFlight<Waiter>, peers: &[Peer]) {
        wake(peers, current.take_abandoned());
        self.replaced.retain(|table| {
            wake(peers, table.take_abandoned());
            !table.is_empty()
        });
    }
}
