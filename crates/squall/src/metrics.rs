//! Counters, one padded block per worker so that counting never bounces a cache line between
//! cores; readers (the admin endpoint, the stop log) read every block.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Instant;

/// Every worker's counters.
#[derive(Debug)]
pub struct Metrics {
    workers: Box<[WorkerCounters]>,
    /// Set when a graceful stop begins: `/healthz` fails so load balancers move traffic away.
    pub draining: AtomicBool,
    /// Reloads applied and refused since start.
    pub reloads_ok: Counter,
    pub reloads_failed: Counter,
    /// Times the allocator's free memory was given back after a burst (`trim.rs`).
    pub memory_trims: Counter,
    /// Set when the last applied reload changed a setting only a restart applies.
    pub restart_required: AtomicBool,
    /// The cache store of the current runtime, for its gauges.
    cache: std::sync::RwLock<Option<std::sync::Arc<squall_cache::Store>>>,
    /// A hash of the config file in force (start-up, then each applied reload).
    pub config_hash: AtomicU64,
    /// The upstream servers of the config in force, as each worker last saw them.
    upstreams: std::sync::RwLock<std::sync::Arc<[UpstreamGauges]>>,
    /// Responses by route for the config in force.
    routes: std::sync::RwLock<Option<std::sync::Arc<RouteCounters>>>,
    /// Client connections open in the whole process, and where accepting pauses.
    pub descriptors: crate::descriptors::Budget,
    /// Response bytes buffered for clients in the whole process (`limits.buffer_memory_max`).
    pub buffered: BufferedBytes,
    /// Lookups of servers' host names, and what each last resolved to (`resolve.rs`).
    pub resolution: crate::resolve::ResolveMetrics,
    /// TLS handshakes with origins, per upstream (`origin_tls.rs`).
    pub origin_tls: crate::origin_tls::OriginTlsMetrics,
    /// HTTP/2 streams and errors, and tunnels, per upstream (`upstream_events.rs`).
    pub upstream_events: crate::upstream_events::UpstreamEventMetrics,
}

/// Response bytes buffered for clients, across every worker: each connection charges what it
/// holds (unsent, in flight, queued on its HTTP/2 streams) and each session its undecoded
/// origin bytes, and takes it back as it is sent or when it ends. Read by every worker to
/// decide who waits (`worker/budget.rs`), and by `/metrics`.
///
/// A worker charges its own slot (`of`), on cache lines of its own, with plain loads and
/// stores, and folds it into the process's totals once per loop turn (`publish`): a response
/// costs no write to a line that other cores read. A worker sees the others' charges as of
/// their last turn, and its own at once.
#[derive(Debug)]
pub struct BufferedBytes {
    bytes: AtomicU64,
    /// Connections holding any.
    holders: AtomicU64,
    /// Connections answered by a proxied response in progress, holding any or not yet.
    responders: AtomicU64,
    /// Each worker's changes since its last `publish`.
    pending: Box<[Pending]>,
}

/// One worker's unpublished changes to the totals, written only by that worker.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Pending {
    bytes: AtomicI64,
    holders: AtomicI64,
    responders: AtomicI64,
}

/// Adds `delta` to a slot only its worker writes: a load and a store, no locked instruction.
fn bump(slot: &AtomicI64, delta: i64) {
    slot.store(slot.load(Ordering::Relaxed) + delta, Ordering::Relaxed);
}

/// Folds a pending `delta` into `total`, where other workers' come too.
fn fold(total: &AtomicU64, delta: i64) {
    if delta > 0 {
        total.fetch_add(delta.unsigned_abs(), Ordering::Relaxed);
    } else if delta < 0 {
        total.fetch_sub(delta.unsigned_abs(), Ordering::Relaxed);
    }
}

/// A published total with a worker's own pending change applied.
fn seen(total: &AtomicU64, pending: &AtomicI64) -> u64 {
    let total = total.load(Ordering::Relaxed);
    total.saturating_add_signed(pending.load(Ordering::Relaxed))
}

impl BufferedBytes {
    pub fn new(workers: usize) -> BufferedBytes {
        BufferedBytes {
            bytes: AtomicU64::new(0),
            holders: AtomicU64::new(0),
            responders: AtomicU64::new(0),
            pending: (0..workers.max(1)).map(|_| Pending::default()).collect(),
        }
    }

    /// Worker `worker`'s view, through which it charges.
    pub fn of(&self, worker: usize) -> WorkerBuffered<'_> {
        WorkerBuffered {
            totals: self,
            pending: &self.pending[worker % self.pending.len()],
        }
    }

    /// Every worker's bytes, published or not (`/metrics`, the memory trimmer).
    pub fn bytes(&self) -> u64 {
        let pending: i64 = (self.pending.iter())
            .map(|p| p.bytes.load(Ordering::Relaxed))
            .sum();
        self.bytes
            .load(Ordering::Relaxed)
            .saturating_add_signed(pending)
    }
}

/// One worker's handle on [`BufferedBytes`].
#[derive(Clone, Copy, Debug)]
pub struct WorkerBuffered<'a> {
    totals: &'a BufferedBytes,
    pending: &'a Pending,
}

impl WorkerBuffered<'_> {
    /// A holder's charge goes from `before` to `now` bytes; `holder` says whether it is one
    /// that counts in the holders (a connection, not a session).
    pub fn charge(self, before: usize, now: usize, holder: bool) {
        if now != before {
            bump(&self.pending.bytes, now as i64 - before as i64);
        }
        if holder && (before == 0) != (now == 0) {
            bump(&self.pending.holders, if now > 0 { 1 } else { -1 });
        }
    }

    /// A connection starts (`true`) or stops being answered by proxied responses.
    pub fn set_responding(self, responding: bool) {
        bump(&self.pending.responders, if responding { 1 } else { -1 });
    }

    /// Connections holding any, or answered by a proxied response in progress (whichever
    /// is more): how many the budget is shared between.
    pub fn sharers(self) -> u64 {
        let holders = seen(&self.totals.holders, &self.pending.holders);
        holders.max(seen(&self.totals.responders, &self.pending.responders))
    }

    /// Folds this worker's changes into the totals (once per loop turn).
    pub fn publish(self) {
        let pending = self.pending;
        for (total, slot) in [
            (&self.totals.bytes, &pending.bytes),
            (&self.totals.holders, &pending.holders),
            (&self.totals.responders, &pending.responders),
        ] {
            fold(total, slot.load(Ordering::Relaxed));
            slot.store(0, Ordering::Relaxed);
        }
    }
}

/// Responses per route and status class, one block per worker (each worker writes its own),
/// for the routes of one config; `/metrics` sums the workers.
#[derive(Debug)]
pub struct RouteCounters {
    pub labels: Vec<String>,
    /// `[worker][ROUTE_PAD + route][class]`, class 0..4 for 2xx..5xx. Each worker's block is
    /// an allocation of its own, with `ROUTE_PAD` unused entries at both ends, so that two
    /// workers' counters never share a cache line (the allocator puts small blocks side by
    /// side).
    per_worker: Box<[Box<[[Counter; 4]]>]>,
}

/// Unused route entries at each end of a worker's block: 4 × 32 bytes, a cache line pair's
/// worth on the machines that prefetch lines in pairs.
const ROUTE_PAD: usize = 4;

impl RouteCounters {
    pub fn new(labels: Vec<String>, workers: usize) -> std::sync::Arc<RouteCounters> {
        let per_worker = (0..workers.max(1))
            .map(|_| {
                (0..labels.len() + 2 * ROUTE_PAD)
                    .map(|_| Default::default())
                    .collect()
            })
            .collect();
        std::sync::Arc::new(RouteCounters { labels, per_worker })
    }

    /// The counters of `route` on one worker's block, if there is such a route.
    fn of<'a>(&self, block: &'a [[Counter; 4]], route: usize) -> Option<&'a [Counter; 4]> {
        (route < self.labels.len()).then(|| &block[ROUTE_PAD + route])
    }

    /// Counts a response of `route` on `worker`. An id from before a reload may name another
    /// route or none: it is counted where it lands, or not at all.
    pub fn count(&self, worker: usize, route: u32, status: http::StatusCode) {
        let class = match status.as_u16() {
            200..=299 => 0,
            300..=399 => 1,
            400..=499 => 2,
            _ => 3,
        };
        if let Some(counters) =
            (self.per_worker.get(worker)).and_then(|w| self.of(w, route as usize))
        {
            counters[class].inc();
        }
    }

    /// Route `route`'s responses by class, summed over the workers.
    pub fn totals(&self, route: usize) -> [u64; 4] {
        let mut totals = [0; 4];
        for worker in self.per_worker.iter() {
            if let Some(counters) = self.of(worker, route) {
                for (total, counter) in totals.iter_mut().zip(counters) {
                    *total += counter.get();
                }
            }
        }
        totals
    }
}

/// One `[[upstream]]` group's servers, as every worker sees them.
#[derive(Debug)]
pub struct UpstreamGauges {
    pub name: String,
    pub servers: Box<[ServerGauges]>,
}

/// One origin server's state, one slot per worker (health is per worker), written by its
/// worker every 100 ms at most and read by `/metrics`.
#[derive(Debug)]
pub struct ServerGauges {
    pub address: std::net::SocketAddr,
    /// The host name (`NAME:PORT`) the address was resolved from, for servers named so.
    pub name: Option<String>,
    /// 1 while the worker sends it traffic, 0 while it is marked down.
    pub up: Box<[AtomicU64]>,
    pub in_flight: Box<[AtomicU64]>,
    /// Since the worker's group was built (start-up or the last reload).
    pub picks: Box<[AtomicU64]>,
    pub failures: Box<[AtomicU64]>,
}

impl UpstreamGauges {
    /// Gauges for `specs`, with a slot per worker: every server up, every count zero.
    pub fn for_specs(
        specs: &[squall_upstream::UpstreamSpec],
        workers: usize,
    ) -> std::sync::Arc<[UpstreamGauges]> {
        let slots_of = |value: u64| (0..workers.max(1)).map(|_| AtomicU64::new(value)).collect();
        let slots = || slots_of(0);
        specs
            .iter()
            .map(|spec| UpstreamGauges {
                name: spec.name.clone(),
                servers: spec
                    .servers
                    .iter()
                    .map(|s| ServerGauges {
                        address: s.address,
                        name: None,
                        // Up until a worker's health state says otherwise (a failure or a
                        // probe), as the balancer treats a server it has not tried yet: a
                        // healthy origin must not read as down right after a start or reload.
                        up: slots_of(1),
                        in_flight: slots(),
                        picks: slots(),
                        failures: slots(),
                    })
                    .collect(),
            })
            .collect()
    }
}

/// The `reason` labels of `squall_tunnel_refused_total`, in the order of `tunnel_refused`.
pub const TUNNEL_REFUSALS: [&str; 2] = ["bad_101", "not_allowed"];

/// One worker's counters, alone on its cache lines (128 bytes covers adjacent-line prefetch).
#[derive(Default, Debug)]
#[repr(align(128))]
pub struct WorkerCounters {
    pub connections_accepted: Counter,
    pub responses_2xx: Counter,
    pub responses_3xx: Counter,
    pub responses_4xx: Counter,
    pub responses_5xx: Counter,
    pub bad_requests: Counter,
    pub timeouts: Counter,
    pub accept_pauses: Counter,
    /// 1 while this worker's accepting is paused (the descriptor reserve, or EMFILE), else 0.
    pub accept_paused: AtomicU64,
    /// Origin sockets that could not be made for want of a descriptor (EMFILE, ENFILE).
    pub upstream_descriptor_failures: Counter,
    /// Requests that waited for a descriptor before their origin connection or file.
    pub descriptor_waits: Counter,
    /// Proxied responses whose origin paused because the process was over its buffer budget.
    pub buffer_budget_pauses: Counter,
    /// HTTP/1.1 upgrades that became tunnels, those that ended, and their bytes each way.
    pub tunnels: Counter,
    pub tunnels_closed: Counter,
    pub tunnel_bytes_up: Counter,
    pub tunnel_bytes_down: Counter,
    /// Upgrades refused, by reason: a bad 101 from the origin, and one the route does not
    /// allow (`worker/tunnel.rs`, in the order of `TUNNEL_REFUSALS`).
    pub tunnel_refused: [Counter; TUNNEL_REFUSALS.len()],
    pub tls_errors: Counter,
    /// TLS handshakes completed: full ones, and resumptions (ticket or session id).
    pub tls_handshakes_full: Counter,
    pub tls_handshakes_resumed: Counter,
    /// Requests refused, by the status they got (index: see `REFUSED_STATUSES`).
    pub refused: [Counter; REFUSED_STATUSES.len()],
    pub access_log_dropped: Counter,
    pub limit_connections: Counter,
    /// Origin connections opened, and requests that reused a pooled one.
    pub upstream_connects: Counter,
    pub upstream_reuses: Counter,
    /// Requests that could not be sent again which found pooled connections idle for
    /// `pool_unsafe_idle_timeout` or more, and went on a new one.
    pub upstream_unsafe_fresh: Counter,
    /// gRPC calls answered 502 because their upstream is spoken to in HTTP/1.1.
    pub upstream_grpc_refused: Counter,
    pub limit_requests: Counter,
    pub access_denied: Counter,
    /// Requests refused with 400 because a lenient origin could read their target as a path
    /// of another route; TRACE requests refused with 405.
    pub target_ambiguous: Counter,
    pub trace_refused: Counter,
    /// Basic authentication: requests let through by the credential cache; passwords
    /// checked (bcrypt / argon2); of those, wrong ones; requests answered 429 after too many
    /// wrong ones; 503 because no password could be checked then.
    pub auth_cache_hits: Counter,
    pub auth_verifications: Counter,
    pub auth_failures: Counter,
    pub auth_limited: Counter,
    pub auth_busy: Counter,
    pub proxy_protocol_refused: Counter,
    /// HTTP/2: connections, streams, resets by clients, connections ended for a flood or a
    /// protocol error.
    pub h2_connections: Counter,
    pub h2_streams: Counter,
    pub h2_resets_received: Counter,
    pub h2_floods: Counter,
    /// Connections cut for sending far ahead of what they read or their origin takes.
    pub input_overflows: Counter,
    pub h2_protocol_errors: Counter,
    /// Cache: answered from a fresh entry; fetched from the origin (misses and
    /// revalidations); answered stale; parked behind another fetch; responses stored;
    /// entries removed by PURGE.
    pub cache_hits: Counter,
    pub cache_misses: Counter,
    pub cache_stale: Counter,
    pub cache_coalesced: Counter,
    pub cache_background_fetches: Counter,
    pub cache_passes: Counter,
    pub cache_stores: Counter,
    pub cache_purges: Counter,
    /// Responses compressed, by coding (index: `squall_proxy::compress::Coding as usize`),
    /// and the body bytes that went into the compressors and came out.
    pub compressed: [Counter; 3],
    pub compress_bytes_in: Counter,
    pub compress_bytes_out: Counter,
    /// `[cluster]`: requests sent to their key's owner; requests served for another node;
    /// forwards whose owner failed (served here instead); peers that confirmed a purge
    /// fanned out to them, and peers that did not.
    pub cluster_forwarded: Counter,
    pub cluster_served_for_peers: Counter,
    pub cluster_owner_failures: Counter,
    pub cluster_purge_confirmed: Counter,
    pub cluster_purge_failed: Counter,
    /// HTTP/3 and QUIC: connections accepted (handshakes begun), handshakes completed, Retry
    /// packets sent, new connections refused by the endpoint, packets whose connection ID
    /// named another worker, request streams, 0-RTT requests answered 425 (their method not safe), connections
    /// ended for a flood or a protocol error, packets lost and congestion events (from QUIC's
    /// own counts, when each connection ends).
    pub quic_connections: Counter,
    pub quic_handshakes: Counter,
    pub quic_retries: Counter,
    pub quic_refused: Counter,
    pub quic_misrouted: Counter,
    pub h3_streams: Counter,
    pub quic_early_refused: Counter,
    pub quic_early_accepted: Counter,
    pub h3_floods: Counter,
    pub h3_protocol_errors: Counter,
    pub quic_lost_packets: Counter,
    pub quic_congestion_events: Counter,
    /// Requests answered, by protocol.
    pub requests_h1: Counter,
    pub requests_h2: Counter,
    pub requests_h3: Counter,
    /// Client connections open now (a gauge the worker sets once per loop turn).
    pub connections_active: AtomicU64,
    /// Time from a request's first byte to its response's last byte being queued.
    pub request_duration: Histogram,
    /// Time from picking an origin to the end of its response, for proxied requests.
    pub upstream_duration: Histogram,
    /// When the worker's event loop last turned, in ms since start (for the watchdog).
    pub heartbeat_ms: AtomicU64,
}

/// The clock heartbeats are read against: milliseconds since the first call.
pub fn heartbeat_now_ms() -> u64 {
    static START: LazyLock<Instant> = LazyLock::new(Instant::now);
    u64::try_from(START.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The statuses refusals are counted under (`squall_refused_total{status}`); 0 is "other".
pub const REFUSED_STATUSES: [u16; 11] = [400, 408, 413, 414, 429, 431, 501, 505, 403, 405, 0];

/// Upper bounds of the latency buckets, in seconds (Prometheus `le`), from 0.5 ms to 10 s.
pub const DURATION_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A latency histogram, written by one worker: a count per bucket (not cumulative; the
/// exposition sums them), the total count and the sum in microseconds.
#[derive(Default, Debug)]
pub struct Histogram {
    buckets: [Counter; DURATION_BUCKETS.len()],
    count: Counter,
    sum_micros: Counter,
}

impl Histogram {
    pub fn observe(&self, elapsed: std::time::Duration) {
        let seconds = elapsed.as_secs_f64();
        if let Some(i) = DURATION_BUCKETS.iter().position(|&le| seconds <= le) {
            self.buckets[i].inc();
        }
        self.count.inc();
        self.sum_micros
            .add(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX));
    }

    /// Cumulative bucket counts (as Prometheus wants them), the count and the sum in seconds.
    pub fn snapshot(&self) -> ([u64; DURATION_BUCKETS.len()], u64, f64) {
        let mut cumulative = [0; DURATION_BUCKETS.len()];
        let mut running = 0;
        for (i, bucket) in self.buckets.iter().enumerate() {
            running += bucket.get();
            cumulative[i] = running;
        }
        let sum = self.sum_micros.get() as f64 / 1e6;
        (cumulative, self.count.get(), sum)
    }
}

/// A monotonically increasing count, written by one thread only (see [`Counter::add`]).
#[derive(Default, Debug)]
pub struct Counter(AtomicU64);

impl Metrics {
    pub fn new(workers: usize) -> Metrics {
        Metrics {
            workers: (0..workers.max(1))
                .map(|_| WorkerCounters::default())
                .collect(),
            draining: AtomicBool::new(false),
            reloads_ok: Counter::default(),
            memory_trims: Counter::default(),
            reloads_failed: Counter::default(),
            restart_required: AtomicBool::new(false),
            cache: std::sync::RwLock::new(None),
            config_hash: AtomicU64::new(0),
            upstreams: std::sync::RwLock::new(std::sync::Arc::from([])),
            routes: std::sync::RwLock::new(None),
            descriptors: crate::descriptors::Budget::default(),
            buffered: BufferedBytes::new(workers),
            resolution: Default::default(),
            origin_tls: Default::default(),
            upstream_events: crate::upstream_events::UpstreamEventMetrics::new(workers),
        }
    }

    /// Makes `routes` the per-route counters `/metrics` shows (the config in force).
    pub fn set_routes(&self, routes: std::sync::Arc<RouteCounters>) {
        *self.routes.write().unwrap_or_else(|e| e.into_inner()) = Some(routes);
    }

    pub fn routes(&self) -> Option<std::sync::Arc<RouteCounters>> {
        self.routes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Makes `upstreams` the gauges `/metrics` shows (the config in force).
    pub fn set_upstreams(&self, upstreams: std::sync::Arc<[UpstreamGauges]>) {
        *self.upstreams.write().unwrap_or_else(|e| e.into_inner()) = upstreams;
    }

    pub fn upstreams(&self) -> std::sync::Arc<[UpstreamGauges]> {
        self.upstreams
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Makes `store` the cache whose gauges `/metrics` shows.
    pub fn set_cache_store(&self, store: std::sync::Arc<squall_cache::Store>) {
        *self.cache.write().unwrap_or_else(|e| e.into_inner()) = Some(store);
    }

    pub fn cache_store(&self) -> Option<std::sync::Arc<squall_cache::Store>> {
        self.cache.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The block of worker `id`.
    pub fn worker(&self, id: usize) -> &WorkerCounters {
        &self.workers[id % self.workers.len()]
    }

    /// Every worker's block, in worker order.
    pub fn workers(&self) -> &[WorkerCounters] {
        &self.workers
    }

    /// The sum of one counter over all workers.
    pub fn total(&self, counter: impl Fn(&WorkerCounters) -> &Counter) -> u64 {
        self.workers.iter().map(|w| counter(w).get()).sum()
    }
}

impl WorkerCounters {
    /// Records that the event loop turned.
    pub fn beat(&self) {
        self.heartbeat_ms
            .store(heartbeat_now_ms(), Ordering::Relaxed);
    }

    /// Counts a compressed response (a proxied one, or a static file's) by what it did.
    pub fn count_compression(&self, stats: squall_proxy::compress::Stats) {
        self.compressed[stats.coding as usize].inc();
        self.compress_bytes_in.add(stats.bytes_in);
        self.compress_bytes_out.add(stats.bytes_out);
    }

    pub fn count_response(&self, status: http::StatusCode) {
        match status.as_u16() {
            200..=299 => self.responses_2xx.inc(),
            300..=399 => self.responses_3xx.inc(),
            400..=499 => self.responses_4xx.inc(),
            _ => self.responses_5xx.inc(),
        }
    }

    pub fn count_bad_request(&self, status: http::StatusCode) {
        self.bad_requests.inc();
        self.count_refused(status);
        self.count_response(status);
    }

    /// Counts a refusal under its status; statuses not listed count under the last entry.
    pub fn count_refused(&self, status: http::StatusCode) {
        let last = REFUSED_STATUSES.len() - 1;
        let index = REFUSED_STATUSES
            .iter()
            .position(|&s| s == status.as_u16())
            .unwrap_or(last);
        self.refused[index].inc();
    }
}

impl Counter {
    /// One thread writes each counter (its worker's block, the main thread's reload counts,
    /// the trim thread's trims), so a relaxed load and store count it: no locked
    /// read-modify-write, which cost several per request (profiled: 2% of a small HTTP/2
    /// answer's CPU). Readers on other threads see each value whole, if a little late.
    pub fn inc(&self) {
        self.add(1);
    }

    pub fn add(&self, n: u64) {
        let value = self.0.load(Ordering::Relaxed);
        self.0.store(value.wrapping_add(n), Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker sees its own charges at once and another's once that one published; the
    /// totals come back to zero as every holder is released, whatever the order.
    #[test]
    fn buffered_bytes_are_published_per_worker() {
        let buffered = BufferedBytes::new(2);
        let (a, b) = (buffered.of(0), buffered.of(1));
        a.charge(0, 1000, true);
        a.set_responding(true);
        b.charge(0, 500, true);
        b.charge(0, 300, false);
        assert_eq!((a.sharers(), b.sharers()), (1, 1), "neither has published");
        assert_eq!(
            buffered.bytes(),
            1800,
            "the metric counts what is pending too"
        );
        a.publish();
        assert_eq!((a.sharers(), b.sharers()), (1, 2));
        b.publish();
        assert_eq!((a.sharers(), b.sharers()), (2, 2));
        b.charge(500, 0, true);
        b.charge(300, 0, false);
        a.charge(1000, 200, true);
        assert_eq!(b.sharers(), 1, "b's own release is seen at once");
        assert_eq!(buffered.bytes(), 200);
        b.publish();
        a.charge(200, 0, true);
        a.set_responding(false);
        a.publish();
        assert_eq!((a.sharers(), buffered.bytes()), (0, 0));
        assert_eq!(buffered.holders.load(Ordering::Relaxed), 0);
        assert_eq!(buffered.responders.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn histogram_buckets_are_cumulative() {
        let h = Histogram::default();
        h.observe(std::time::Duration::from_micros(300));
        h.observe(std::time::Duration::from_millis(3));
        h.observe(std::time::Duration::from_secs(60));
        let (buckets, count, sum) = h.snapshot();
        assert_eq!(count, 3);
        assert_eq!(buckets[0], 1, "0.3 ms <= 0.5 ms");
        assert_eq!(buckets[3], 2, "3 ms <= 5 ms");
        assert_eq!(
            buckets[DURATION_BUCKETS.len() - 1],
            2,
            "60 s is only in +Inf"
        );
        assert!((sum - 60.0033).abs() < 1e-6, "{sum}");
    }

    #[test]
    fn totals_sum_the_workers() {
        let metrics = Metrics::new(3);
        metrics.worker(0).count_response(http::StatusCode::OK);
        metrics
            .worker(2)
            .count_bad_request(http::StatusCode::BAD_REQUEST);
        assert_eq!(metrics.total(|w| &w.responses_2xx), 1);
        assert_eq!(metrics.total(|w| &w.responses_4xx), 1);
        assert_eq!(metrics.total(|w| &w.bad_requests), 1);
        assert_eq!(std::mem::align_of::<WorkerCounters>(), 128);
    }
}
