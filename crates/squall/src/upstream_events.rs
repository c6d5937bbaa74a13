//! Per-upstream counters of what happens on origin connections, by upstream name, kept across
//! reloads: HTTP/2 streams opened, GOAWAYs received, streams that ended without a whole
//! response, connections ended by a protocol error (`protocol = "h2" | "h2c" | "auto"`), and
//! tunnels (upgrades) opened and closed.
//!
//! The rare events are shared atomics. Streams and tunnels are counted per request, so each
//! worker has its own slot, alone on its cache lines, and `/metrics` sums them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A counter a worker writes alone: 128 bytes covers adjacent-line prefetch.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Slot(AtomicU64);

/// One counter with a slot per worker.
#[derive(Debug)]
pub struct PerWorker(Box<[Slot]>);

impl PerWorker {
    fn new(workers: usize) -> PerWorker {
        PerWorker((0..workers.max(1)).map(|_| Slot::default()).collect())
    }

    /// Counts one on `worker`'s slot (a worker beyond the slots counts on the last).
    pub fn inc(&self, worker: usize) {
        let slot = &self.0[worker.min(self.0.len() - 1)];
        slot.0.fetch_add(1, Ordering::Relaxed);
    }

    fn sum(&self) -> u64 {
        self.0.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
    }
}

/// One upstream's events, from every worker.
#[derive(Debug)]
pub struct UpstreamEvents {
    pub h2_streams: PerWorker,
    pub h2_goaways: AtomicU64,
    pub h2_resets: AtomicU64,
    pub h2_errors: AtomicU64,
    pub tunnels: PerWorker,
    pub tunnels_closed: PerWorker,
}

impl UpstreamEvents {
    fn new(workers: usize) -> UpstreamEvents {
        UpstreamEvents {
            h2_streams: PerWorker::new(workers),
            h2_goaways: AtomicU64::new(0),
            h2_resets: AtomicU64::new(0),
            h2_errors: AtomicU64::new(0),
            tunnels: PerWorker::new(workers),
            tunnels_closed: PerWorker::new(workers),
        }
    }

    /// Counts one rare event.
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The events of every upstream, by name.
#[derive(Debug)]
pub struct UpstreamEventMetrics {
    workers: usize,
    upstreams: Mutex<BTreeMap<String, Arc<UpstreamEvents>>>,
}

/// A family rendered: its name, its type, its help, and how its value is read.
type Family = (
    &'static str,
    &'static str,
    &'static str,
    fn(&UpstreamEvents) -> u64,
);

const FAMILIES: [Family; 5] = [
    (
        "squall_upstream_h2_streams_total",
        "counter",
        "Streams opened on HTTP/2 origin connections (each a proxied request).",
        |c| c.h2_streams.sum(),
    ),
    (
        "squall_upstream_h2_goaways_total",
        "counter",
        "GOAWAY frames received from HTTP/2 origins.",
        |c| c.h2_goaways.load(Ordering::Relaxed),
    ),
    (
        "squall_upstream_h2_stream_resets_total",
        "counter",
        "HTTP/2 origin streams that ended without a whole response (reset by the origin, malformed, or their connection failed).",
        |c| c.h2_resets.load(Ordering::Relaxed),
    ),
    (
        "squall_upstream_h2_errors_total",
        "counter",
        "HTTP/2 origin connections ended by a protocol error.",
        |c| c.h2_errors.load(Ordering::Relaxed),
    ),
    (
        "squall_upstream_tunnels_open",
        "gauge",
        "Tunnels (upgrades that the origin switched) open now to the upstream's servers.",
        |c| c.tunnels.sum().saturating_sub(c.tunnels_closed.sum()),
    ),
];

impl UpstreamEventMetrics {
    /// Counters for a process of `workers` workers.
    pub fn new(workers: usize) -> UpstreamEventMetrics {
        UpstreamEventMetrics {
            workers,
            upstreams: Mutex::default(),
        }
    }

    /// The counters of `upstream`, made on first use.
    pub fn counters(&self, upstream: &str) -> Arc<UpstreamEvents> {
        let mut upstreams = self.upstreams.lock().unwrap_or_else(|e| e.into_inner());
        let made = upstreams.entry(upstream.to_owned());
        made.or_insert_with(|| Arc::new(UpstreamEvents::new(self.workers)))
            .clone()
    }

    /// The families in the Prometheus text format (nothing before any upstream is known).
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write;
        let upstreams = self.upstreams.lock().unwrap_or_else(|e| e.into_inner());
        if upstreams.is_empty() {
            return;
        }
        for (name, kind, help, value) in FAMILIES {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (upstream, c) in upstreams.iter() {
                let _ = writeln!(out, "{name}{{upstream=\"{upstream}\"}} {}", value(c));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_each_family_per_upstream_summing_workers() {
        let metrics = UpstreamEventMetrics::new(2);
        let grpc = metrics.counters("grpc");
        UpstreamEvents::inc(&grpc.h2_goaways);
        UpstreamEvents::inc(&grpc.h2_resets);
        UpstreamEvents::inc(&metrics.counters("grpc").h2_resets);
        grpc.h2_streams.inc(0);
        grpc.h2_streams.inc(1);
        grpc.h2_streams.inc(7);
        let ws = metrics.counters("ws");
        ws.tunnels.inc(0);
        ws.tunnels.inc(1);
        ws.tunnels_closed.inc(0);
        let mut out = String::new();
        metrics.render(&mut out);
        for line in [
            "# TYPE squall_upstream_h2_streams_total counter",
            "squall_upstream_h2_streams_total{upstream=\"grpc\"} 3",
            "squall_upstream_h2_goaways_total{upstream=\"grpc\"} 1",
            "squall_upstream_h2_stream_resets_total{upstream=\"grpc\"} 2",
            "squall_upstream_h2_errors_total{upstream=\"ws\"} 0",
            "# TYPE squall_upstream_tunnels_open gauge",
            "squall_upstream_tunnels_open{upstream=\"ws\"} 1",
            "squall_upstream_tunnels_open{upstream=\"grpc\"} 0",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} not in\n{out}");
        }
        let mut none = String::new();
        UpstreamEventMetrics::new(1).render(&mut none);
        assert!(none.is_empty());
    }
}
