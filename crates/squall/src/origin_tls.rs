//! `tls = true` upstreams: their squall-tls connectors, the name each server is verified
//! against, and the handshake counters per upstream.
//!
//! Loaded with the runtime (start-up, reload, `squall check`), so an unreadable `ca`,
//! `tls_certificate` or `tls_certificate_key`, or one without a usable PEM block, is a
//! `FILE:LINE:COL` problem at its key like any other. A reload that leaves an upstream's TLS
//! settings and files as they were keeps its connector, so origin sessions resume across it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use squall_config::{Config, Diagnostic, OriginProtocol, Site, Sites, UpstreamTls};
use squall_tls::{Alpn, CertField, ClientSpec, Connector, ServerName, TlsError};

/// One TLS upstream, shared by every worker.
pub struct OriginTls {
    pub connector: Connector,
    /// Per server (by `ServerId` index): the name sent as SNI and verified.
    pub names: Vec<ServerName<'static>>,
    /// The upstream's handshake counters (kept across reloads by name).
    pub counters: Arc<TlsCounters>,
}

impl OriginTls {
    /// The name to verify server `index` against (`None` for an id from another generation).
    pub fn name(&self, index: usize) -> Option<ServerName<'static>> {
        self.names.get(index).cloned()
    }
}

/// The protocols offered to an upstream's origins with ALPN, as its `protocol` allows.
fn origin_alpn(protocol: OriginProtocol) -> Vec<Alpn> {
    match protocol {
        OriginProtocol::H2 | OriginProtocol::H2c => vec![Alpn::H2],
        OriginProtocol::Auto => vec![Alpn::H2, Alpn::Http1],
        OriginProtocol::Http1 => vec![Alpn::Http1],
    }
}

/// The TLS state of every `[[upstream]]`, in config order (`None` for cleartext ones).
/// `servers[i]` are upstream `i`'s servers as `Runtime::new` expanded them: the address and
/// the host name it was resolved from. `previous` is the runtime's before a reload.
pub fn load(
    config: &Config,
    sites: &Sites,
    servers: &[Vec<(SocketAddr, Option<String>)>],
    previous: &[crate::upstream_records::UpstreamRecord],
    metrics: &OriginTlsMetrics,
) -> Result<Vec<Option<Arc<OriginTls>>>, Vec<Diagnostic>> {
    let mut loaded = Vec::new();
    let mut problems = Vec::new();
    for (index, upstream) in config.upstream.iter().enumerate() {
        let Some(tls) = &upstream.tls else {
            loaded.push(None);
            continue;
        };
        if !tls.verify {
            tracing::warn!(
                upstream = %upstream.name,
                "tls_verify = false: the certificates of upstream {:?} are not verified; anyone \
                 on the path to its servers can read and change its traffic",
                upstream.name
            );
        }
        let spec = spec(&upstream.name, tls, upstream.protocol);
        let before = crate::upstream_records::previous_tls(previous, &upstream.name);
        let connector = match Connector::load(&spec, before.map(|p| &p.connector)) {
            Ok(connector) => connector,
            Err(e) => {
                problems.push(diagnostic(sites, index, &e));
                loaded.push(None);
                continue;
            }
        };
        let names = servers.get(index).map_or(&[][..], Vec::as_slice);
        let names = names
            .iter()
            .map(|(address, name)| server_name(tls, *address, name));
        loaded.push(Some(Arc::new(OriginTls {
            connector,
            names: names.collect(),
            counters: metrics.counters(&upstream.name),
        })));
    }
    if problems.is_empty() {
        Ok(loaded)
    } else {
        Err(problems)
    }
}

fn spec(upstream: &str, tls: &UpstreamTls, protocol: OriginProtocol) -> ClientSpec {
    ClientSpec {
        name: format!("upstream {upstream:?}"),
        ca: tls.ca.clone(),
        verify: tls.verify,
        client_cert: tls.client_cert.clone(),
        alpn: origin_alpn(protocol),
    }
}

/// `tls_server_name`, else the host name the server was given by, else its IP literal.
fn server_name(
    tls: &UpstreamTls,
    address: SocketAddr,
    name: &Option<String>,
) -> ServerName<'static> {
    let host = name
        .as_deref()
        .and_then(|n| n.rsplit_once(':'))
        .map(|(host, _)| host);
    let text = tls.server_name.as_deref().or(host);
    text.and_then(|t| squall_tls::server_name(t).ok())
        .unwrap_or_else(|| ServerName::IpAddress(address.ip().into()))
}

fn diagnostic(sites: &Sites, upstream: usize, error: &TlsError) -> Diagnostic {
    let site = match error.entry() {
        Some((_, Some(CertField::Ca))) => Site::UpstreamCa(upstream),
        Some((_, Some(CertField::Cert))) => Site::UpstreamCert(upstream),
        Some((_, Some(CertField::Key))) => Site::UpstreamKey(upstream),
        _ => Site::UpstreamTls(upstream),
    };
    sites.diagnostic(site, error.to_string())
}

/// Why a handshake with an origin failed, as the metric's `reason` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandshakeFailure {
    /// The certificate did not verify (unknown issuer, wrong name, expired, ...).
    Certificate,
    /// The origin sent a fatal alert (e.g. it wanted a client certificate).
    Alert,
    /// Any other TLS error: no common version or cipher, garbage, a broken peer.
    Protocol,
    /// The origin closed or reset the connection during the handshake.
    Closed,
    /// `connect_timeout` passed during the handshake.
    Timeout,
}

impl HandshakeFailure {
    const ALL: [HandshakeFailure; 5] = [
        HandshakeFailure::Certificate,
        HandshakeFailure::Alert,
        HandshakeFailure::Protocol,
        HandshakeFailure::Closed,
        HandshakeFailure::Timeout,
    ];

    pub fn of(error: &TlsError) -> HandshakeFailure {
        match error.kind() {
            squall_tls::ErrorKind::InvalidCertificate => HandshakeFailure::Certificate,
            squall_tls::ErrorKind::AlertReceived => HandshakeFailure::Alert,
            _ => HandshakeFailure::Protocol,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            HandshakeFailure::Certificate => "certificate",
            HandshakeFailure::Alert => "alert",
            HandshakeFailure::Protocol => "protocol",
            HandshakeFailure::Closed => "closed",
            HandshakeFailure::Timeout => "timeout",
        }
    }
}

/// One upstream's handshakes with its origins, from every worker. Handshakes cost hundreds of
/// microseconds each, so shared atomics cost nothing worth a per-worker block.
#[derive(Debug, Default)]
pub struct TlsCounters {
    handshakes: AtomicU64,
    resumed: AtomicU64,
    failures: [AtomicU64; HandshakeFailure::ALL.len()],
    /// When a failure was last logged at warn (see [`TlsCounters::should_log`]).
    logged_at: Mutex<Option<Instant>>,
}

impl TlsCounters {
    pub fn handshake_done(&self, resumed: bool) {
        self.handshakes.fetch_add(1, Ordering::Relaxed);
        if resumed {
            self.resumed.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn handshake_failed(&self, why: HandshakeFailure) {
        self.failures[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Whether a failure may be logged at warn now: at most once per `interval` per upstream
    /// across workers, so an origin with a bad certificate cannot flood the log. The lock is
    /// taken only on a failed handshake.
    pub fn should_log(&self, now: Instant, interval: Duration) -> bool {
        let mut last = self.logged_at.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|at| now < at + interval) {
            return false;
        }
        *last = Some(now);
        true
    }
}

/// The counters of every TLS upstream by name, kept across reloads.
#[derive(Debug, Default)]
pub struct OriginTlsMetrics {
    upstreams: Mutex<BTreeMap<String, Arc<TlsCounters>>>,
}

impl OriginTlsMetrics {
    /// The counters of `upstream`, made on first use.
    pub fn counters(&self, upstream: &str) -> Arc<TlsCounters> {
        let mut upstreams = self.upstreams.lock().unwrap_or_else(|e| e.into_inner());
        upstreams.entry(upstream.to_owned()).or_default().clone()
    }

    /// The families in the Prometheus text format (nothing without TLS upstreams).
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write;
        let upstreams = self.upstreams.lock().unwrap_or_else(|e| e.into_inner());
        if upstreams.is_empty() {
            return;
        }
        let name = "squall_upstream_tls_handshakes_total";
        let help =
            "Completed TLS handshakes with origin servers, by whether a session was resumed.";
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (upstream, c) in upstreams.iter() {
            let all = c.handshakes.load(Ordering::Relaxed);
            let resumed = c.resumed.load(Ordering::Relaxed).min(all);
            for (label, n) in [("false", all - resumed), ("true", resumed)] {
                let _ = writeln!(
                    out,
                    "{name}{{upstream=\"{upstream}\",resumed=\"{label}\"}} {n}"
                );
            }
        }
        let name = "squall_upstream_tls_handshake_errors_total";
        let help = "Failed TLS handshakes with origin servers, by reason.";
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (upstream, c) in upstreams.iter() {
            for why in HandshakeFailure::ALL {
                let n = c.failures[why as usize].load(Ordering::Relaxed);
                let reason = why.as_str();
                let _ = writeln!(
                    out,
                    "{name}{{upstream=\"{upstream}\",reason=\"{reason}\"}} {n}"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_name_is_the_setting_then_the_host_then_the_address() {
        let address: SocketAddr = "10.0.0.1:443".parse().unwrap();
        let mut tls = UpstreamTls {
            server_name: None,
            ca: None,
            verify: true,
            client_cert: None,
        };
        let name = |tls: &UpstreamTls, host: Option<&str>| {
            server_name(tls, address, &host.map(str::to_owned))
        };
        let dns = |text: &str| squall_tls::server_name(text).unwrap();
        assert_eq!(name(&tls, None), ServerName::IpAddress(address.ip().into()));
        assert_eq!(name(&tls, Some("api.test:443")), dns("api.test"));
        tls.server_name = Some("origin.test".into());
        assert_eq!(name(&tls, Some("api.test:443")), dns("origin.test"));
        assert_eq!(name(&tls, None), dns("origin.test"));
    }

    #[test]
    fn renders_both_families_per_upstream() {
        let metrics = OriginTlsMetrics::default();
        let counters = metrics.counters("api");
        counters.handshake_done(false);
        counters.handshake_done(true);
        counters.handshake_done(true);
        counters.handshake_failed(HandshakeFailure::Certificate);
        let mut out = String::new();
        metrics.render(&mut out);
        for line in [
            "squall_upstream_tls_handshakes_total{upstream=\"api\",resumed=\"false\"} 1",
            "squall_upstream_tls_handshakes_total{upstream=\"api\",resumed=\"true\"} 2",
            "squall_upstream_tls_handshake_errors_total{upstream=\"api\",reason=\"certificate\"} 1",
            "squall_upstream_tls_handshake_errors_total{upstream=\"api\",reason=\"timeout\"} 0",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} in\n{out}");
        }
        assert!(Arc::ptr_eq(&counters, &metrics.counters("api")));
    }
}
