//! Per-upstream counters of what HTTP/2 origins did (`protocol = "h2" | "h2c" | "auto"`):
//! GOAWAYs received, streams that ended without a whole response, connections ended by a
//! protocol error. These are rare events, so shared atomics cost nothing worth a per-worker
//! block; the streams themselves (one per request) are counted per worker in
//! `squall_upstream_h2_streams_total`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// One upstream's HTTP/2 events, from every worker.
#[derive(Debug, Default)]
pub struct H2Counters {
    pub goaways: AtomicU64,
    pub resets: AtomicU64,
    pub errors: AtomicU64,
}

impl H2Counters {
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The counters of every upstream spoken to in HTTP/2, by name, kept across reloads.
#[derive(Debug, Default)]
pub struct OriginH2Metrics {
    upstreams: Mutex<BTreeMap<String, Arc<H2Counters>>>,
}

/// A family rendered: its name, its help, and which counter it shows.
type Family = (&'static str, &'static str, fn(&H2Counters) -> &AtomicU64);

const FAMILIES: [Family; 3] = [
    (
        "squall_upstream_h2_goaways_total",
        "GOAWAY frames received from HTTP/2 origins.",
        |c| &c.goaways,
    ),
    (
        "squall_upstream_h2_stream_resets_total",
        "HTTP/2 origin streams that ended without a whole response (reset by the origin, malformed, or their connection failed).",
        |c| &c.resets,
    ),
    (
        "squall_upstream_h2_errors_total",
        "HTTP/2 origin connections ended by a protocol error.",
        |c| &c.errors,
    ),
];

impl OriginH2Metrics {
    /// The counters of `upstream`, made on first use.
    pub fn counters(&self, upstream: &str) -> Arc<H2Counters> {
        let mut upstreams = self.upstreams.lock().unwrap_or_else(|e| e.into_inner());
        upstreams.entry(upstream.to_owned()).or_default().clone()
    }

    /// The families in the Prometheus text format (nothing without HTTP/2 upstreams).
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write;
        let upstreams = self.upstreams.lock().unwrap_or_else(|e| e.into_inner());
        if upstreams.is_empty() {
            return;
        }
        for (name, help, counter) in FAMILIES {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (upstream, c) in upstreams.iter() {
                let n = counter(c).load(Ordering::Relaxed);
                let _ = writeln!(out, "{name}{{upstream=\"{upstream}\"}} {n}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_each_family_per_upstream() {
        let metrics = OriginH2Metrics::default();
        H2Counters::inc(&metrics.counters("grpc").goaways);
        H2Counters::inc(&metrics.counters("grpc").resets);
        H2Counters::inc(&metrics.counters("grpc").resets);
        let _ = metrics.counters("api");
        let mut out = String::new();
        metrics.render(&mut out);
        assert!(out.contains("squall_upstream_h2_goaways_total{upstream=\"grpc\"} 1\n"));
        assert!(out.contains("squall_upstream_h2_stream_resets_total{upstream=\"grpc\"} 2\n"));
        assert!(out.contains("squall_upstream_h2_errors_total{upstream=\"api\"} 0\n"));
        let mut none = String::new();
        OriginH2Metrics::default().render(&mut none);
        assert!(none.is_empty());
    }
}
