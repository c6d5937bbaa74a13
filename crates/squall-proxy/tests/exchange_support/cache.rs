//! The pair harness with a cache: a real `squall_cache::Store` and in-flight table shared by
//! every request of a test, each request begun as the driver begins it ([`World::begin`]),
//! its fetches driven as [`Pair`]s around a [`CachedExchange`] with a fill.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use squall_cache::{CacheKey, FillLimits, InFlight, ResponseRules, Store};
use squall_proxy::cached::{self, Answer, Begun, CachedRoute, Fetch};
use squall_proxy::{CachedExchange, ClientProtocol, Exchange};

use super::{Pair, Server, client, config, head, route};

/// The store's size: room for every test's objects.
pub const MEMORY_BYTES: usize = 1 << 20;
/// The largest body a fill collects.
pub const OBJECT_BYTES_MAX: usize = 64;
/// `cache.hit_for_pass`.
pub const HIT_FOR_PASS: Duration = Duration::from_secs(5);

/// The store, the in-flight table (waiters are client numbers) and the clocks requests begin
/// at.
pub struct World {
    pub route: CachedRoute,
    pub inflight: Arc<InFlight<u32>>,
    pub now: Instant,
    pub wall: SystemTime,
}

impl World {
    pub fn new() -> World {
        let store = Arc::new(Store::new(MEMORY_BYTES, 4, 0.5));
        World {
            route: CachedRoute {
                store,
                limits: FillLimits {
                    object_bytes_max: OBJECT_BYTES_MAX,
                    default_ttl: None,
                    encode_head: squall_cache::header_lines,
                },
                rules: ResponseRules::default(),
                ignore_reload: false,
                hit_for_pass: HIT_FOR_PASS,
            },
            inflight: Arc::new(InFlight::new(4)),
            now: Instant::now(),
            // A whole second, so that dates written and read back agree.
            wall: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        }
    }

    /// The key of every test request's target on host `x`.
    pub fn key(path: &str) -> CacheKey {
        CacheKey::new("http", b"x", path.as_bytes())
    }

    pub fn store(&self) -> &Store {
        &self.route.store
    }

    /// Begins the request `raw` from client `waiter`, as the driver does on a cached route.
    pub fn begin(&self, raw: &str, waiter: u32) -> Begun {
        let head = head(raw);
        let path = head.uri.path_and_query().map_or("/", |pq| pq.as_str());
        let key = World::key(path);
        cached::begin(
            &self.route,
            &self.inflight,
            head,
            key,
            None,
            waiter,
            self.wall,
        )
    }

    /// A parked request woken (`since`: when it parked).
    pub fn after_wait(&self, raw: &str, since: SystemTime, fetched: bool) -> Begun {
        let head = head(raw);
        let path = head.uri.path_and_query().map_or("/", |pq| pq.as_str());
        let key = World::key(path);
        cached::after_wait(&self.route, head, key, since, fetched, self.wall)
    }

    /// The pair that drives `fetch` for an HTTP/1.1 client, servers as given.
    pub fn pair(&self, fetch: Box<Fetch>, servers: &[Server]) -> Pair {
        self.pair_for(fetch, ClientProtocol::Http11, servers)
    }

    pub fn pair_for(
        &self,
        fetch: Box<Fetch>,
        protocol: ClientProtocol,
        servers: &[Server],
    ) -> Pair {
        let Fetch { head, plan } = *fetch;
        let ex = Exchange::new(
            head,
            route(true),
            client(protocol),
            config(servers.len()),
            self.now,
        );
        let mut pair = Pair::around(
            CachedExchange::new(ex, Some(plan), None),
            self.now,
            self.wall,
            servers,
        );
        pair.inflight = Some(self.inflight.clone());
        pair
    }

    /// The pair of a request that is not safe on a cached route, purging its URL on success.
    pub fn unsafe_pair(&self, raw: &str, servers: &[Server]) -> Pair {
        let head = head(raw);
        let path = head.uri.path_and_query().map_or("/", |pq| pq.as_str());
        let invalidation =
            squall_cache::Invalidation::for_request(&head.method, || World::key(path))
                .expect("a method that is not safe");
        let ex = Exchange::new(
            head,
            route(true),
            client(ClientProtocol::Http11),
            config(servers.len()),
            self.now,
        );
        let store = self.route.store.clone();
        let ex = CachedExchange::new(ex, None, Some((store, invalidation)));
        Pair::around(ex, self.now, self.wall, servers)
    }

    /// Stores `response` (whole, one read) for `raw` through a fetch of its own.
    pub fn fill(&self, raw: &str, response: &[u8]) {
        let fetch = fetch(self.begin(raw, 0));
        let mut pair = self.pair(fetch, &[Server::Accept]);
        pair.run();
        pair.origin_sends(&[response]);
        assert!(
            pair.cache.contains(&"stored".to_owned()),
            "{:?}",
            pair.cache
        );
    }

    /// Moves both clocks on.
    pub fn advance(&mut self, by: Duration) {
        self.now += by;
        self.wall += by;
    }
}

/// The fetch a request began with; panics on any other way.
pub fn fetch(begun: Begun) -> Box<Fetch> {
    assert!(begun.background.is_none(), "a fetch alone: {begun:?}");
    match begun.answer {
        Answer::Fetch(fetch) => fetch,
        other => panic!("not a fetch: {other:?}"),
    }
}

/// `begun`'s answer as a line: `serve LABEL STATUS BODY`, `park`, `park fetched`, `fetch`,
/// `504`, `bypass`; with ` + background` when a background fetch starts beside it.
pub fn answer_line(begun: &Begun) -> String {
    let answer = match &begun.answer {
        Answer::Serve { entry, served, .. } => format!(
            "serve {} {} {}",
            served.as_str(),
            entry.status.as_u16(),
            String::from_utf8_lossy(&entry.body)
        ),
        Answer::Park { fetched: false, .. } => "park".to_owned(),
        Answer::Park { fetched: true, .. } => "park fetched".to_owned(),
        Answer::Fetch(_) => "fetch".to_owned(),
        Answer::GatewayTimeout(_) => "504".to_owned(),
        Answer::Bypass(_) => "bypass".to_owned(),
    };
    let background = if begun.background.is_some() {
        " + background"
    } else {
        ""
    };
    format!("{answer}{background}")
}
