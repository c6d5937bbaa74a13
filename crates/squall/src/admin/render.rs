//! `/metrics` as Prometheus text (version 0.0.4): every counter family per worker, the
//! histograms, the per-route and per-upstream series. The counters are written by hand rather
//! than through `prometheus-client`: they already live in per-worker padded atomics, and
//! encoding them is a loop.

use std::fmt::Write as _;

use crate::metrics::{
    Counter, DURATION_BUCKETS, Histogram, Metrics, REFUSED_STATUSES, WorkerCounters,
};

/// Reads one counter out of a worker's block.
type Read = fn(&WorkerCounters) -> &Counter;

/// One counter family: name, help text, and how to read it from a worker's block.
type Family = (&'static str, &'static str, Read);

const FAMILIES: &[Family] = &[
    (
        "squall_connections_accepted_total",
        "Client connections accepted.",
        |w| &w.connections_accepted,
    ),
    (
        "squall_bad_requests_total",
        "Requests refused as malformed, too large or too slow.",
        |w| &w.bad_requests,
    ),
    (
        "squall_timeouts_total",
        "Connections closed by an idle, send or linger timeout.",
        |w| &w.timeouts,
    ),
    (
        "squall_accept_pauses_total",
        "Times accepting paused: at the descriptor reserve's mark, or when accept failed for lack of descriptors.",
        |w| &w.accept_pauses,
    ),
    (
        "squall_upstream_descriptor_failures_total",
        "Origin connections that could not be opened for lack of descriptors (EMFILE, ENFILE); retried as a connect failure.",
        |w| &w.upstream_descriptor_failures,
    ),
    (
        "squall_descriptor_waits_total",
        "Proxied requests and file transfers that waited for a descriptor: client connections and requests in flight held what the descriptor reserve leaves.",
        |w| &w.descriptor_waits,
    ),
    (
        "squall_buffer_budget_pauses_total",
        "Proxied responses whose origin paused because the process held more buffered response bytes than limits.buffer_memory_max.",
        |w| &w.buffer_budget_pauses,
    ),
    (
        "squall_tunnels_total",
        "HTTP/1.1 upgrades (WebSocket) that became tunnels between a client and an origin.",
        |w| &w.tunnels,
    ),
    (
        "squall_tunnels_closed_total",
        "Tunnels that ended (both sides done, the idle timeout, or a failure).",
        |w| &w.tunnels_closed,
    ),
    (
        "squall_tunnel_bytes_up_total",
        "Bytes tunnels carried from clients to origins.",
        |w| &w.tunnel_bytes_up,
    ),
    (
        "squall_tunnel_bytes_down_total",
        "Bytes tunnels carried from origins to clients.",
        |w| &w.tunnel_bytes_down,
    ),
    (
        "squall_tls_errors_total",
        "TLS connections ended by a TLS error.",
        |w| &w.tls_errors,
    ),
    (
        "squall_tls_handshakes_full_total",
        "TLS handshakes completed in full (no resumption).",
        |w| &w.tls_handshakes_full,
    ),
    (
        "squall_tls_handshakes_resumed_total",
        "TLS handshakes that resumed a session (ticket or session id).",
        |w| &w.tls_handshakes_resumed,
    ),
    (
        "squall_upstream_connects_total",
        "Connections opened to origin servers.",
        |w| &w.upstream_connects,
    ),
    (
        "squall_upstream_reuses_total",
        "Proxied requests sent on a pooled keep-alive origin connection.",
        |w| &w.upstream_reuses,
    ),
    (
        "squall_upstream_unsafe_fresh_total",
        "Proxied requests that could not be sent again (not idempotent, or with a body) sent on a new origin connection because the pooled ones had been idle for pool_unsafe_idle_timeout or more.",
        |w| &w.upstream_unsafe_fresh,
    ),
    (
        "squall_upstream_grpc_refused_total",
        "gRPC calls answered 502 because their upstream is spoken to in HTTP/1.1 (set protocol = \"h2c\" or \"h2\").",
        |w| &w.upstream_grpc_refused,
    ),
    (
        "squall_limit_connections_total",
        "Connections refused by limits.connections_per_ip_max.",
        |w| &w.limit_connections,
    ),
    (
        "squall_limit_requests_total",
        "Requests refused with 429 by limits.request_rate or a route's request_rate.",
        |w| &w.limit_requests,
    ),
    (
        "squall_access_denied_total",
        "Requests refused with 403 by a route's allow / deny.",
        |w| &w.access_denied,
    ),
    (
        "squall_request_target_ambiguous_total",
        "Requests refused with 400 because an origin that reads paths leniently could take the target for a path of another route.",
        |w| &w.target_ambiguous,
    ),
    (
        "squall_trace_refused_total",
        "TRACE requests refused with 405 on routes without allow_trace.",
        |w| &w.trace_refused,
    ),
    (
        "squall_auth_cache_hits_total",
        "Requests on auth_basic routes let through by the credential cache, with no password check.",
        |w| &w.auth_cache_hits,
    ),
    (
        "squall_auth_verifications_total",
        "Passwords checked against the users file (bcrypt or argon2).",
        |w| &w.auth_verifications,
    ),
    (
        "squall_auth_failures_total",
        "Passwords checked and found wrong (or for an unknown user): answered 401.",
        |w| &w.auth_failures,
    ),
    (
        "squall_auth_limited_total",
        "Requests answered 429 without a password check: their address failed limits.auth_failures_max times.",
        |w| &w.auth_limited,
    ),
    (
        "squall_auth_busy_total",
        "Requests answered 503 because no password could be checked then (verifier queue full, or the worker's inline budget spent).",
        |w| &w.auth_busy,
    ),
    (
        "squall_proxy_protocol_refused_total",
        "Connections closed on a PROXY protocol listener: not from a trusted balancer, or a malformed header.",
        |w| &w.proxy_protocol_refused,
    ),
    (
        "squall_h2_connections_total",
        "Client connections that speak HTTP/2 (ALPN h2 or h2c prior knowledge).",
        |w| &w.h2_connections,
    ),
    (
        "squall_h2_streams_total",
        "HTTP/2 streams opened by clients.",
        |w| &w.h2_streams,
    ),
    (
        "squall_h2_resets_received_total",
        "HTTP/2 streams reset by clients (RST_STREAM).",
        |w| &w.h2_resets_received,
    ),
    (
        "squall_h2_floods_total",
        "HTTP/2 connections ended with GOAWAY(ENHANCE_YOUR_CALM) by a flood limit.",
        |w| &w.h2_floods,
    ),
    (
        "squall_quic_connections_total",
        "QUIC connections accepted on h3 listeners (handshakes begun).",
        |w| &w.quic_connections,
    ),
    (
        "squall_quic_handshakes_total",
        "QUIC handshakes completed.",
        |w| &w.quic_handshakes,
    ),
    (
        "squall_quic_retries_total",
        "QUIC Retry packets sent to validate a new client's address ([quic] retry).",
        |w| &w.quic_retries,
    ),
    (
        "squall_quic_refused_total",
        "New QUIC connections the endpoint refused (CONNECTION_REFUSED, or an invalid token).",
        |w| &w.quic_refused,
    ),
    (
        "squall_quic_misrouted_total",
        "QUIC packets that reached a worker other than their connection's and were handed over.",
        |w| &w.quic_misrouted,
    ),
    (
        "squall_h3_streams_total",
        "HTTP/3 request streams opened by clients.",
        |w| &w.h3_streams,
    ),
    (
        "squall_quic_early_refused_total",
        "HTTP/3 requests in 0-RTT data with a method that is not safe, answered 425 Too Early.",
        |w| &w.quic_early_refused,
    ),
    (
        "squall_quic_early_accepted_total",
        "QUIC connections whose 0-RTT data was accepted (quic.early_data).",
        |w| &w.quic_early_accepted,
    ),
    (
        "squall_h3_floods_total",
        "HTTP/3 connections closed with H3_EXCESSIVE_LOAD by a flood limit.",
        |w| &w.h3_floods,
    ),
    (
        "squall_h3_protocol_errors_total",
        "HTTP/3 connections closed for a protocol error of the client's.",
        |w| &w.h3_protocol_errors,
    ),
    (
        "squall_quic_lost_packets_total",
        "QUIC packets declared lost (counted when each connection ends).",
        |w| &w.quic_lost_packets,
    ),
    (
        "squall_quic_congestion_events_total",
        "QUIC congestion events: a loss or an ECN mark that shrank a connection's window (counted when each connection ends).",
        |w| &w.quic_congestion_events,
    ),
    (
        "squall_input_overflows_total",
        "Connections cut for sending far ahead: an HTTP/1.1 client 1 MiB of requests past answers it does not read, a tunnel's client 8 MiB past what its origin takes.",
        |w| &w.input_overflows,
    ),
    (
        "squall_h2_protocol_errors_total",
        "HTTP/2 connections ended with GOAWAY for a protocol error.",
        |w| &w.h2_protocol_errors,
    ),
    (
        "squall_cache_hits_total",
        "Requests answered from a fresh cache entry (or 304 from one).",
        |w| &w.cache_hits,
    ),
    (
        "squall_cache_misses_total",
        "Requests on cached routes fetched from the origin (misses and revalidations).",
        |w| &w.cache_misses,
    ),
    (
        "squall_cache_stale_total",
        "Requests answered with a stale entry (stale-while-revalidate, stale-if-error).",
        |w| &w.cache_stale,
    ),
    (
        "squall_cache_coalesced_total",
        "Requests that waited for another request's fetch of the same object.",
        |w| &w.cache_coalesced,
    ),
    (
        "squall_cache_background_fetches_total",
        "Revalidations run in the background while the stale entry was served (stale-while-revalidate).",
        |w| &w.cache_background_fetches,
    ),
    (
        "squall_cache_hit_for_pass_total",
        "Requests sent to the origin without coalescing because their object's last response was not storable (cache.hit_for_pass).",
        |w| &w.cache_passes,
    ),
    (
        "squall_cache_stores_total",
        "Responses stored in the cache.",
        |w| &w.cache_stores,
    ),
    (
        "squall_cache_purged_total",
        "Cache entries removed by PURGE.",
        |w| &w.cache_purges,
    ),
    (
        "squall_cluster_forwarded_total",
        "Requests on cached routes sent to the cluster node that owns their key.",
        |w| &w.cluster_forwarded,
    ),
    (
        "squall_cluster_served_for_peers_total",
        "Requests on cached routes served for another cluster node (with its hop field).",
        |w| &w.cluster_served_for_peers,
    ),
    (
        "squall_cluster_owner_failures_total",
        "Forwards whose owner could not answer; each was served by this node instead.",
        |w| &w.cluster_owner_failures,
    ),
    (
        "squall_cluster_purge_confirmed_total",
        "Peers that confirmed a PURGE this node sent them.",
        |w| &w.cluster_purge_confirmed,
    ),
    (
        "squall_cluster_purge_failed_total",
        "Peers that did not confirm a PURGE this node sent them (after a retry).",
        |w| &w.cluster_purge_failed,
    ),
    (
        "squall_compress_bytes_in_total",
        "Body bytes of compressed responses, before compression (a route's compress).",
        |w| &w.compress_bytes_in,
    ),
    (
        "squall_compress_bytes_out_total",
        "Body bytes of compressed responses, after compression.",
        |w| &w.compress_bytes_out,
    ),
    (
        "squall_access_log_dropped_total",
        "Access log lines dropped because the logger fell behind.",
        |w| &w.access_log_dropped,
    ),
];

/// `squall_compressed_responses_total{coding}`: responses compressed, by coding.
fn render_compressed(out: &mut String, metrics: &Metrics) {
    let _ = writeln!(
        out,
        "# HELP squall_compressed_responses_total Responses compressed by a route's compress, by coding."
    );
    let _ = writeln!(out, "# TYPE squall_compressed_responses_total counter");
    for (id, worker) in metrics.workers().iter().enumerate() {
        for coding in squall_proxy::compress::Coding::PREFERENCE {
            let _ = writeln!(
                out,
                "squall_compressed_responses_total{{worker=\"{id}\",coding=\"{}\"}} {}",
                coding.token(),
                worker.compressed[coding as usize].get()
            );
        }
    }
}

/// Latency histograms: name, help text, and how to read one from a worker's block.
type ReadHistogram = fn(&WorkerCounters) -> &Histogram;

const HISTOGRAMS: &[(&str, &str, ReadHistogram)] = &[
    (
        "squall_request_duration_seconds",
        "Time from a request's first byte to its whole response queued for sending.",
        |w| &w.request_duration,
    ),
    (
        "squall_upstream_duration_seconds",
        "Time from sending a proxied request to an origin to the end of its response.",
        |w| &w.upstream_duration,
    ),
];

/// Whether each worker's accepting is paused now, and the process's client connections against
/// the mark the descriptor reserve sets (`descriptors.rs`).
fn render_accept_gauges(out: &mut String, metrics: &Metrics) {
    use std::sync::atomic::Ordering::Relaxed;
    let _ = writeln!(
        out,
        "# HELP squall_accept_paused 1 while the worker has stopped accepting (descriptor reserve reached, or out of descriptors)."
    );
    let _ = writeln!(out, "# TYPE squall_accept_paused gauge");
    for (id, worker) in metrics.workers().iter().enumerate() {
        let value = worker.accept_paused.load(Relaxed);
        let _ = writeln!(out, "squall_accept_paused{{worker=\"{id}\"}} {value}");
    }
    let _ = writeln!(
        out,
        "# HELP squall_tunnels_open Tunnels (upgraded HTTP/1.1 connections) open now."
    );
    let _ = writeln!(out, "# TYPE squall_tunnels_open gauge");
    let open: u64 = (metrics.workers().iter())
        .map(|w| w.tunnels.get().saturating_sub(w.tunnels_closed.get()))
        .sum();
    let _ = writeln!(out, "squall_tunnels_open {open}");
    let _ = writeln!(
        out,
        "# HELP squall_tunnel_refused_total Upgrades that did not become tunnels: the origin's 101 malformed or mismatched (reason=\"bad_101\", a 502), or not allowed on the route (reason=\"not_allowed\")."
    );
    let _ = writeln!(out, "# TYPE squall_tunnel_refused_total counter");
    for (id, worker) in metrics.workers().iter().enumerate() {
        let reasons = crate::metrics::TUNNEL_REFUSALS.iter();
        for (reason, counter) in reasons.zip(&worker.tunnel_refused) {
            let value = counter.get();
            let _ = writeln!(
                out,
                "squall_tunnel_refused_total{{worker=\"{id}\",reason=\"{reason}\"}} {value}"
            );
        }
    }
    let budget = &metrics.descriptors;
    let max = budget.max().min(i64::MAX as usize);
    for (name, help, value) in [
        (
            "squall_client_connections_open",
            "Client connections open in the whole process.",
            budget.open(),
        ),
        (
            "squall_client_connections_max",
            "Client connections (with requests holding an origin connection or file) accepting pauses at: RLIMIT_NOFILE less the descriptor reserve.",
            max,
        ),
        (
            "squall_request_descriptors",
            "Requests in flight holding an origin connection or a file, as the descriptor reserve counts them.",
            budget.held(),
        ),
        (
            "squall_buffered_response_bytes",
            "Response bytes buffered for clients in the whole process (unsent, in flight, queued on HTTP/2 streams, undecoded from origins).",
            metrics.buffered.bytes() as usize,
        ),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        let _ = writeln!(out, "{name} {value}");
    }
}

/// Responses by route and status class, all workers summed; routes that answered nothing are
/// left out, so 10,000 routes cost only the lines of those in use.
fn render_routes(out: &mut String, metrics: &Metrics) {
    let Some(routes) = metrics.routes() else {
        return;
    };
    let name = "squall_route_responses_total";
    let _ = writeln!(
        out,
        "# HELP {name} Responses by route (vhost's first host and pattern) and status class."
    );
    let _ = writeln!(out, "# TYPE {name} counter");
    for (index, label) in routes.labels.iter().enumerate() {
        let totals = routes.totals(index);
        if totals.iter().all(|&n| n == 0) {
            continue;
        }
        let label = escape_label(label);
        for (class, value) in ["2xx", "3xx", "4xx", "5xx"].iter().zip(totals) {
            let _ = writeln!(out, "{name}{{route=\"{label}\",class=\"{class}\"}} {value}");
        }
    }
}

/// A label value as the text format wants it: `\`, `"` and newlines escaped.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Each upstream server as each worker sees it (health is per worker).
fn render_upstreams(out: &mut String, metrics: &Metrics) {
    use std::sync::atomic::Ordering::Relaxed;
    type Read = fn(&crate::metrics::ServerGauges) -> &[std::sync::atomic::AtomicU64];
    let families: [(&str, &str, &str, Read); 4] = [
        (
            "squall_upstream_server_up",
            "gauge",
            "1 while a worker sends the server traffic, 0 while it holds it down.",
            |s| &s.up,
        ),
        (
            "squall_upstream_server_in_flight",
            "gauge",
            "Requests a worker has in flight to the server.",
            |s| &s.in_flight,
        ),
        (
            "squall_upstream_server_picks_total",
            "counter",
            "Requests a worker sent to the server since its group was built (start or reload).",
            |s| &s.picks,
        ),
        (
            "squall_upstream_server_failures_total",
            "counter",
            "Failed attempts (connect, reset, timeout, 5xx) since the group was built.",
            |s| &s.failures,
        ),
    ];
    let upstreams = metrics.upstreams();
    for (name, kind, help, read) in families {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for group in upstreams.iter() {
            for server in group.servers.iter() {
                // A server resolved from a host name says which (`resolve.rs`).
                let host = (server.name.as_deref())
                    .map_or_else(String::new, |n| format!(",name=\"{}\"", escape_label(n)));
                for (worker, value) in read(server).iter().enumerate() {
                    let _ = writeln!(
                        out,
                        "{name}{{upstream=\"{}\",server=\"{}\"{host},worker=\"{worker}\"}} {}",
                        group.name,
                        server.address,
                        value.load(Relaxed)
                    );
                }
            }
        }
    }
}

/// One histogram, summed over the workers (per-worker series would multiply the buckets).
fn render_histogram(
    out: &mut String,
    metrics: &Metrics,
    name: &str,
    help: &str,
    read: ReadHistogram,
) {
    let mut buckets = [0u64; DURATION_BUCKETS.len()];
    let (mut count, mut sum) = (0, 0.0);
    for worker in metrics.workers() {
        let (b, c, s) = read(worker).snapshot();
        for (total, value) in buckets.iter_mut().zip(b) {
            *total += value;
        }
        count += c;
        sum += s;
    }
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} histogram");
    for (le, value) in DURATION_BUCKETS.iter().zip(buckets) {
        let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {value}");
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
    let _ = writeln!(out, "{name}_sum {sum}");
    let _ = writeln!(out, "{name}_count {count}");
}

/// Response classes and their counters.
const CLASSES: &[(&str, Read)] = &[
    ("2xx", |w| &w.responses_2xx),
    ("3xx", |w| &w.responses_3xx),
    ("4xx", |w| &w.responses_4xx),
    ("5xx", |w| &w.responses_5xx),
];

/// The Prometheus text exposition of every counter, one series per worker.
pub fn render(metrics: &Metrics) -> String {
    let mut out = String::with_capacity(2048);
    let _ = writeln!(
        out,
        "# HELP squall_build_info Version and commit of this build."
    );
    let _ = writeln!(out, "# TYPE squall_build_info gauge");
    let _ = writeln!(
        out,
        "squall_build_info{{version=\"{}\",commit=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION"),
        env!("SQUALL_COMMIT")
    );
    if let Some(store) = metrics.cache_store() {
        let stats = store.stats();
        for (name, kind, help, value) in [
            (
                "squall_cache_bytes",
                "gauge",
                "Bytes held by cache entries (headers, bodies, bookkeeping).",
                stats.bytes as u64,
            ),
            (
                "squall_cache_memory_limit_bytes",
                "gauge",
                "cache.memory: the bound on squall_cache_bytes.",
                store.memory_limit() as u64,
            ),
            (
                "squall_cache_entries",
                "gauge",
                "Responses (variants) in the cache.",
                stats.entries as u64,
            ),
            (
                "squall_cache_evictions_total",
                "counter",
                "Entries evicted to stay within cache.memory.",
                stats.evictions,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            let _ = writeln!(out, "{name} {value}");
        }
    }
    let _ = writeln!(out, "# HELP squall_workers Worker threads.");
    let _ = writeln!(out, "# TYPE squall_workers gauge");
    let _ = writeln!(out, "squall_workers {}", metrics.workers().len());
    let _ = writeln!(
        out,
        "# HELP squall_reloads_total Configuration reloads by result."
    );
    let _ = writeln!(out, "# TYPE squall_reloads_total counter");
    let (ok, failed) = (metrics.reloads_ok.get(), metrics.reloads_failed.get());
    let _ = writeln!(out, "squall_reloads_total{{result=\"ok\"}} {ok}");
    let _ = writeln!(out, "squall_reloads_total{{result=\"failed\"}} {failed}");
    let _ = writeln!(
        out,
        "# HELP squall_memory_trims_total Times free allocator memory was returned to the system after a burst of buffered bytes or connections."
    );
    let _ = writeln!(out, "# TYPE squall_memory_trims_total counter");
    let _ = writeln!(
        out,
        "squall_memory_trims_total {}",
        metrics.memory_trims.get()
    );
    let _ = writeln!(
        out,
        "# HELP squall_restart_required 1 when the last applied reload changed a setting only a \
         restart applies (workers, [admin], [log], control); the log names them."
    );
    let _ = writeln!(out, "# TYPE squall_restart_required gauge");
    let pending = metrics
        .restart_required
        .load(std::sync::atomic::Ordering::Relaxed);
    let _ = writeln!(out, "squall_restart_required {}", u8::from(pending));
    let _ = writeln!(
        out,
        "# HELP squall_responses_total Responses sent, by status class."
    );
    let _ = writeln!(out, "# TYPE squall_responses_total counter");
    for (id, worker) in metrics.workers().iter().enumerate() {
        for (class, counter) in CLASSES {
            let value = counter(worker).get();
            let _ = writeln!(
                out,
                "squall_responses_total{{worker=\"{id}\",class=\"{class}\"}} {value}"
            );
        }
    }
    let _ = writeln!(
        out,
        "# HELP squall_config_info A hash (FNV-1a 64) of the config file in force."
    );
    let _ = writeln!(out, "# TYPE squall_config_info gauge");
    let _ = writeln!(
        out,
        "squall_config_info{{hash=\"{:016x}\"}} 1",
        metrics
            .config_hash
            .load(std::sync::atomic::Ordering::Relaxed)
    );
    let _ = writeln!(
        out,
        "# HELP squall_requests_total Requests answered, by protocol."
    );
    let _ = writeln!(out, "# TYPE squall_requests_total counter");
    for (id, worker) in metrics.workers().iter().enumerate() {
        let protocols = [
            ("http1", &worker.requests_h1),
            ("h2", &worker.requests_h2),
            ("h3", &worker.requests_h3),
        ];
        for (protocol, counter) in protocols {
            let _ = writeln!(
                out,
                "squall_requests_total{{worker=\"{id}\",protocol=\"{protocol}\"}} {}",
                counter.get()
            );
        }
    }
    render_compressed(&mut out, metrics);
    let _ = writeln!(
        out,
        "# HELP squall_connections_active Client connections open now."
    );
    let _ = writeln!(out, "# TYPE squall_connections_active gauge");
    for (id, worker) in metrics.workers().iter().enumerate() {
        let value = worker
            .connections_active
            .load(std::sync::atomic::Ordering::Relaxed);
        let _ = writeln!(out, "squall_connections_active{{worker=\"{id}\"}} {value}");
    }
    render_accept_gauges(&mut out, metrics);
    let _ = writeln!(
        out,
        "# HELP squall_refused_total Requests refused by Squall, by the status they got (limits, malformed input; status=\"other\" for the rest)."
    );
    let _ = writeln!(out, "# TYPE squall_refused_total counter");
    for (id, worker) in metrics.workers().iter().enumerate() {
        for (status, counter) in REFUSED_STATUSES.iter().zip(&worker.refused) {
            let status = match status {
                0 => "other".to_owned(),
                s => s.to_string(),
            };
            let _ = writeln!(
                out,
                "squall_refused_total{{worker=\"{id}\",status=\"{status}\"}} {}",
                counter.get()
            );
        }
    }
    render_upstreams(&mut out, metrics);
    metrics.resolution.render(&mut out);
    metrics.origin_tls.render(&mut out);
    metrics.upstream_events.render(&mut out);
    render_routes(&mut out, metrics);
    for (name, help, histogram) in HISTOGRAMS {
        render_histogram(&mut out, metrics, name, help, *histogram);
    }
    for (name, help, counter) in FAMILIES {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} counter");
        for (id, worker) in metrics.workers().iter().enumerate() {
            let _ = writeln!(out, "{name}{{worker=\"{id}\"}} {}", counter(worker).get());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label(r#"* regex:^/a"b\d$"#), r#"* regex:^/a\"b\\d$"#);
        assert_eq!(escape_label("a\nb"), "a\\nb");
    }

    #[test]
    fn renders_every_family_per_worker() {
        let metrics = Metrics::new(2);
        metrics
            .worker(1)
            .count_bad_request(http::StatusCode::BAD_REQUEST);
        metrics.worker(0).connections_accepted.inc();
        let text = render(&metrics);
        assert!(text.contains("squall_workers 2\n"));
        assert!(text.contains("squall_responses_total{worker=\"1\",class=\"4xx\"} 1\n"));
        assert!(text.contains("squall_bad_requests_total{worker=\"1\"} 1\n"));
        assert!(text.contains("squall_connections_accepted_total{worker=\"0\"} 1\n"));
        assert!(text.contains("# TYPE squall_tls_errors_total counter\n"));
        assert!(text.contains("# TYPE squall_request_duration_seconds histogram\n"));
        assert!(text.contains("squall_request_duration_seconds_bucket{le=\"+Inf\"} 0\n"));
        // Every sample line is `name{labels} value` or `name value`.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }
}
