//! The runtime: what every worker reads on the request path, compiled from the config (the
//! routes, upstream records, TLS, limits, the cache), shared read-only and swapped whole by a
//! reload.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use squall_config::{Config, Diagnostics, Site, Sites};

use crate::descriptors::POOL_IDLE_PER_SERVER_MAX;
use crate::metrics::Metrics;
use crate::route_rules::Service;
use crate::tls::Tls;

/// What every worker reads on the request path; swapped whole by a reload.
pub struct Runtime {
    /// The routes, each one record with its handler and rules (`route_rules.rs`).
    pub service: Service,
    pub h1_limits: squall_h1::Limits,
    pub limits: ConnLimits,
    /// Shared by every generation of the runtime, so counters survive reloads.
    pub metrics: Arc<Metrics>,
    /// The upstream groups, each one record (`upstream_records.rs`): the config's
    /// `[[upstream]]`s in order, then the cluster's peers. Each worker builds its own state
    /// (balancers, pools) from their specs.
    pub upstreams: Vec<crate::upstream_records::UpstreamRecord>,
    /// `[cluster]`: the nodes sharing the cache; their peers' groups end `upstreams`.
    pub cluster: Option<Arc<crate::cluster::Cluster>>,
    /// Per-client-address limits from `[limits]`.
    pub client_limits: crate::clients::ClientLimits,
    /// Certificates and one TLS acceptor per `[[listen]]`, in config order.
    pub tls: Tls,
    /// The protocols each `[[listen]]` address serves.
    pub protocols: Vec<(SocketAddr, crate::listener::Protocols)>,
    /// Settings and flood limits of every HTTP/2 connection.
    pub h2: squall_h2::ServerConfig,
    /// The response cache; kept across reloads that keep its size.
    pub cache: Arc<crate::cache::Cache>,
    /// FNV-1a of the validated config (comments and formatting do not change it).
    pub config_hash: u64,
    /// Where workers publish their view of each upstream server, in `upstreams` order.
    pub upstream_gauges: Arc<[crate::metrics::UpstreamGauges]>,
    /// Responses per route of this config.
    pub routes: Arc<crate::metrics::RouteCounters>,
    /// Whether any route has `allow` / `deny` (then every connection's peer is looked up).
    pub access_rules: bool,
    /// `server.real_ip`: whose header names the client (see `real_ip.rs`).
    pub real_ip: Option<Arc<squall_config::RealIp>>,
    /// `limits.auth_failures_max`, and the failed attempts per client address (kept across
    /// reloads, so a reload does not forgive a guesser).
    pub auth_failures_max: u32,
    pub auth_failures: Arc<crate::clients::KeyedBuckets>,
    /// The buckets of the routes' own `request_rate`s, kept across reloads.
    pub route_buckets: Arc<crate::clients::KeyedBuckets>,
    /// Whether a route's auth or rate, or `real_ip`, needs each connection's peer.
    pub needs_client: bool,
    /// The listeners that speak the PROXY protocol, with their trusted balancers.
    pub proxy_protocol: Vec<(SocketAddr, Arc<[squall_config::IpNet]>)>,
    /// `server.drain_timeout`: a graceful stop waits this long for in-flight requests.
    pub drain_timeout: Duration,
    /// `[tls] ticket_key_file`, watched for changes (`ticket_watch.rs`).
    pub ticket_key_file: Option<PathBuf>,
    /// The listeners that serve HTTP/3 and how each worker's QUIC endpoints on them are set
    /// up; `None` without one.
    pub quic: Option<QuicRuntime>,
    /// The TCP listeners (as configured) that also serve HTTP/3, whose HTTP/1.1 and HTTP/2
    /// responses advertise it (`Alt-Svc`), with the advertisement's lifetime in seconds.
    pub alt_svc: Vec<(SocketAddr, u64)>,
}

impl Runtime {
    /// The `Alt-Svc` field value for connections of the TCP listener configured as `address`
    /// and bound to `port`, if it advertises HTTP/3 (RFC 7838 §3: `h3=":PORT"; ma=SECONDS`).
    pub fn alt_svc(&self, address: SocketAddr, port: u16) -> Option<bytes::Bytes> {
        let (_, max_age) = self.alt_svc.iter().find(|(a, _)| *a == address)?;
        Some(format!("h3=\":{port}\"; ma={max_age}").into())
    }
}

/// What each worker's QUIC endpoints are made from (see `worker/quic.rs`).
#[derive(Clone)]
pub struct QuicRuntime {
    /// Their TLS config: the certificates of every TLS listener, ALPN `h3`.
    pub tls: Arc<squall_tls::rustls::ServerConfig>,
    /// The endpoint settings, for worker 0 of all (each worker puts in its own index).
    pub settings: squall_quic::Settings,
    /// The Retry token and stateless reset keys every worker shares, kept across reloads.
    pub keys: squall_quic::SharedKeys,
    /// `[quic] gro`: receive offload on the UDP sockets (and buffers to hold what it joins).
    pub gro: bool,
}

impl QuicRuntime {
    fn new(
        config: &squall_config::Config,
        tls: &Tls,
        h3_config: squall_h3::server::ServerConfig,
        workers: usize,
        previous: Option<&Runtime>,
    ) -> Option<QuicRuntime> {
        let mut h3 = config.listen.iter();
        let any = h3.any(|l| l.protocols.contains(&squall_config::Protocol::H3));
        let store = tls.store.as_ref().filter(|_| any)?;
        let quic = &config.quic;
        let retry = match quic.retry {
            squall_config::QuicRetry::Load => squall_quic::Retry::Load(quic.handshakes_max),
            squall_config::QuicRetry::Always => squall_quic::Retry::Always,
            squall_config::QuicRetry::Never => squall_quic::Retry::Never,
        };
        let keys = (previous.and_then(|r| r.quic.as_ref()))
            .map_or_else(squall_quic::SharedKeys::new, |q| q.keys.clone());
        Some(QuicRuntime {
            tls: store.quic_config(quic.early_data),
            settings: squall_quic::Settings {
                worker: 0,
                workers: u8::try_from(workers).unwrap_or(u8::MAX),
                retry,
                streams_max: quic.streams_max,
                stream_window: quic.stream_window,
                connection_window: quic.connection_window,
                idle_timeout: config.limits.idle_timeout,
                gso: quic.gso,
                h3: h3_config,
            },
            keys,
            gro: quic.gro,
        })
    }
}

/// Connection timeouts from `[limits]`.
#[derive(Clone, Copy, Debug)]
pub struct ConnLimits {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    /// `server.tcp_notsent_lowat`, set on each accepted connection; 0 leaves it unset.
    pub tcp_notsent_lowat: u32,
    /// `limits.buffer_memory_max`, resolved by each worker (`worker/budget.rs`).
    pub buffer_memory_max: squall_config::BufferMemory,
}

impl Runtime {
    /// Every upstream group's spec, in `upstreams` order.
    pub fn upstream_specs(&self) -> impl Iterator<Item = &squall_upstream::UpstreamSpec> {
        self.upstreams.iter().map(|u| &u.spec)
    }

    /// Compiles `config`; `previous` (on reload) hands over TLS resumption state. Every
    /// problem is reported at its place in the file (`sites`). Use it through
    /// [`crate::prepare::compile`], which start-up, reload and `squall check` share.
    pub(crate) fn new(
        config: &Config,
        sites: &Sites,
        metrics: Arc<Metrics>,
        previous: Option<&Runtime>,
        addresses: &crate::resolve::Addresses,
    ) -> Result<Runtime, Diagnostics> {
        let previous_store = previous.and_then(|r| r.tls.store.as_ref());
        let cache = crate::cache::Cache::new(
            &config.cache,
            &config.vhost,
            metrics.workers().len(),
            previous.map(|r| &r.cache),
        );
        metrics.set_cache_store(cache.store.clone());
        let (mut upstreams, names): (Vec<_>, Vec<_>) = (config.upstream.iter())
            .map(|u| upstream_spec(u, addresses))
            .unzip();
        // Each server's address and the host name it came from, for the name TLS verifies.
        let servers: Vec<Vec<_>> = (upstreams.iter().zip(&names))
            .map(|(spec, names)| {
                let addresses = spec.servers.iter().map(|s| s.address);
                addresses.zip(names.iter().cloned()).collect()
            })
            .collect();
        let cluster = (config.cluster.as_ref())
            .map(|c| Arc::new(crate::cluster::Cluster::new(c, upstreams.len())));
        if let Some(cluster) = &cluster {
            let peers = cluster.peer_specs();
            upstreams.extend(peers);
        }
        let mut upstream_gauges =
            crate::metrics::UpstreamGauges::for_specs(&upstreams, metrics.workers().len());
        if let Some(gauges) = Arc::get_mut(&mut upstream_gauges) {
            for (group, names) in gauges.iter_mut().zip(names) {
                for (server, name) in group.servers.iter_mut().zip(names) {
                    server.name = name;
                }
            }
        }
        let limits = &config.limits;
        let h1_limits = squall_h1::Limits {
            header_bytes_max: usize::try_from(limits.header_bytes_max).unwrap_or(usize::MAX),
            uri_bytes_max: usize::try_from(limits.uri_bytes_max).unwrap_or(usize::MAX),
            body_bytes_max: limits.body_bytes_max,
            ..squall_h1::Limits::default()
        };
        let service = squall_proxy::Service::new(config)
            .map_err(|e| sites.diagnostic(Site::File, e.to_string()));
        let tls = Tls::load(config, sites, previous_store);
        let auth = crate::auth::load_routes(config);
        let pages = crate::error_pages::load(config, sites);
        let roots = crate::roots::open(config, sites);
        let (service, tls) = match (service, tls, auth, pages, roots) {
            (Ok(service), Ok(tls), Ok(auth), Ok(pages), Ok(roots)) => {
                let rules = crate::route_rules::compile(config, auth, roots);
                let service = service.with_rules(rules);
                (service.with_error_pages(config, &pages), tls)
            }
            (service, tls, auth, pages, roots) => {
                let problems = (service.err().into_iter())
                    .chain(tls.err().into_iter().flatten())
                    .chain(auth.err().into_iter().flatten())
                    .chain(pages.err().into_iter().flatten())
                    .chain(roots.err().into_iter().flatten())
                    .collect();
                return Err(Diagnostics(problems));
            }
        };
        let previous_upstreams = previous.map_or(&[][..], |r| &r.upstreams[..]);
        let origin_tls = &metrics.origin_tls;
        let origin_tls =
            crate::origin_tls::load(config, sites, &servers, previous_upstreams, origin_tls)
                .map_err(Diagnostics)?;
        let upstreams = upstream_records(config, upstreams, origin_tls, &metrics);
        let routes =
            crate::metrics::RouteCounters::new(service.route_labels(), metrics.workers().len());
        let any_rule = |rule: fn(&crate::route_rules::RouteRules) -> bool| {
            (0..)
                .map_while(|id| service.route_by_id(id))
                .any(|r| rule(&r.rules))
        };
        let kept = |f: fn(&Runtime) -> &Arc<crate::clients::KeyedBuckets>| {
            previous.map_or_else(
                || Arc::new(crate::clients::KeyedBuckets::new()),
                |r| f(r).clone(),
            )
        };
        let workers = metrics.workers().len();
        let quic = QuicRuntime::new(config, &tls, h3_config(limits), workers, previous);
        Ok(Runtime {
            routes,
            needs_client: config.server.real_ip.is_some()
                || any_rule(|r| r.auth.is_some() || r.rate.is_some()),
            real_ip: config.server.real_ip.clone().map(Arc::new),
            auth_failures_max: config.limits.auth_failures_max,
            auth_failures: kept(|r| &r.auth_failures),
            route_buckets: kept(|r| &r.route_buckets),
            access_rules: any_rule(|r| r.access.is_some()),
            proxy_protocol: (config.listen.iter())
                .filter(|l| !l.proxy_protocol_from.is_empty())
                .map(|l| (l.address, l.proxy_protocol_from.clone().into()))
                .collect(),
            service,
            h1_limits,
            limits: ConnLimits {
                header_timeout: limits.header_timeout,
                idle_timeout: limits.idle_timeout,
                tcp_notsent_lowat: u32::try_from(config.server.tcp_notsent_lowat)
                    .unwrap_or(u32::MAX),
                buffer_memory_max: limits.buffer_memory_max,
            },
            metrics,
            client_limits: crate::clients::ClientLimits::from_config(&config.limits),
            upstreams,
            cluster,
            upstream_gauges,
            tls,
            protocols: config
                .listen
                .iter()
                .map(|l| {
                    (
                        l.address,
                        crate::listener::Protocols::from_config(&l.protocols),
                    )
                })
                .collect(),
            h2: h2_config(limits),
            quic,
            alt_svc: match config.quic.alt_svc_max_age.as_secs() {
                0 => Vec::new(),
                max_age => (config.listen.iter())
                    .filter(|l| l.tls && l.protocols.contains(&squall_config::Protocol::H3))
                    .map(|l| (l.address, max_age))
                    .collect(),
            },
            cache,
            config_hash: fnv1a(format!("{config:?}").as_bytes()),
            drain_timeout: config.server.drain_timeout,
            ticket_key_file: config.tls.ticket_key_file.clone(),
        })
    }
}

impl Runtime {
    /// The client address of a request on a connection from `peer` (see `real_ip.rs`).
    pub fn client_addr(
        &self,
        peer: Option<SocketAddr>,
        head: &squall_h1::RequestHead,
    ) -> Option<SocketAddr> {
        crate::real_ip::client(self.real_ip.as_deref(), peer, &head.headers)
    }
}

/// FNV-1a, 64 bits: stable across runs and builds of one version, unlike the std hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// HTTP/3 settings from `[limits]`, as HTTP/2's: the head, target and body bounds are
/// HTTP/1.1's, the reset flood limit HTTP/2's. QPACK: a 4 KiB table for the client's
/// encoder, none for ours (static table and literals: no state a client can make us keep).
fn h3_config(limits: &squall_config::Limits) -> squall_h3::server::ServerConfig {
    squall_h3::server::ServerConfig {
        max_field_section_size: limits.header_bytes_max,
        max_path_bytes: usize::try_from(limits.uri_bytes_max).unwrap_or(usize::MAX),
        max_body_bytes: limits.body_bytes_max,
        max_resets_per_window: limits.h2.resets_max,
        // RFC 9220: WebSocket over HTTP/3, tunnelled on routes that allow the upgrade.
        enable_connect_protocol: true,
        ..squall_h3::server::ServerConfig::default()
    }
}

/// HTTP/2 settings from `[limits]`: the head, target and body bounds are HTTP/1.1's.
fn h2_config(limits: &squall_config::Limits) -> squall_h2::ServerConfig {
    let h2 = &limits.h2;
    squall_h2::ServerConfig {
        max_header_list_size: u32::try_from(limits.header_bytes_max).unwrap_or(u32::MAX),
        max_path_bytes: usize::try_from(limits.uri_bytes_max).unwrap_or(usize::MAX),
        max_body_bytes: limits.body_bytes_max,
        max_concurrent_streams: h2.streams_max,
        max_resets_per_window: h2.resets_max,
        max_control_frames_per_window: h2.control_frames_max,
        max_empty_frames_per_window: h2.empty_frames_max,
        max_continuation_frames: h2.continuation_frames_max,
        flood_window: h2.flood_window,
        stall_timeout: h2.stall_timeout,
        // RFC 8441: WebSocket over HTTP/2, tunnelled on routes that allow the upgrade.
        enable_connect_protocol: true,
        ..squall_h2::ServerConfig::default()
    }
}

/// Each group's record: `specs` are the config's `[[upstream]]`s in order (`origin_tls` has
/// one item for each), then the cluster's peers.
fn upstream_records(
    config: &Config,
    specs: Vec<squall_upstream::UpstreamSpec>,
    origin_tls: Vec<Option<Arc<crate::origin_tls::OriginTls>>>,
    metrics: &Metrics,
) -> Vec<crate::upstream_records::UpstreamRecord> {
    let mut tls = origin_tls.into_iter();
    (specs.into_iter().enumerate())
        .map(|(index, spec)| match config.upstream.get(index) {
            Some(upstream) => crate::upstream_records::UpstreamRecord {
                spec,
                hash_key: upstream.hash_key.clone(),
                tls: tls.next().flatten(),
                proxy_protocol: upstream.proxy_protocol,
                protocol: upstream.protocol,
                events: Some(metrics.upstream_events.counters(&upstream.name)),
            },
            None => crate::upstream_records::UpstreamRecord::peer(spec),
        })
        .collect()
}

/// The upstream crate's view of one `[[upstream]]`, with a server for every address a named
/// server resolved to in `addresses` (each with the server's weight; an address listed
/// already is left out), and per server the `NAME:PORT` it came from.
fn upstream_spec(
    upstream: &squall_config::Upstream,
    addresses: &crate::resolve::Addresses,
) -> (squall_upstream::UpstreamSpec, Vec<Option<String>>) {
    use squall_config::Balance as C;
    use squall_upstream::Balance as U;
    let balance = match upstream.balance {
        C::RoundRobin => U::RoundRobin,
        C::Weighted => U::Weighted,
        C::ConsistentHash => U::ConsistentHash,
        C::LeastConn => U::LeastConn,
    };
    let mut servers: Vec<squall_upstream::ServerSpec> = Vec::new();
    let mut names = Vec::new();
    for server in &upstream.servers {
        let (resolved, name) = match &server.address {
            squall_config::ServerAddress::Ip(address) => (vec![*address], None),
            squall_config::ServerAddress::Name { host, port } => {
                let name = (host.clone(), *port);
                let resolved = addresses.get(&name).cloned().unwrap_or_default();
                (resolved, Some(server.address.to_string()))
            }
        };
        for address in resolved {
            if !servers.iter().any(|s| s.address == address) {
                servers.push(squall_upstream::ServerSpec {
                    address,
                    weight: server.weight,
                });
                names.push(name.clone());
            }
        }
    }
    let mut spec = squall_upstream::UpstreamSpec::new(upstream.name.clone(), servers, balance);
    spec.connect_timeout = upstream.connect_timeout;
    spec.response_timeout = upstream.response_timeout;
    spec.health_check = upstream
        .health_check
        .as_ref()
        .map(|c| squall_upstream::HealthCheckSpec {
            path: c.path.clone(),
            interval: c.interval,
            fails: c.fails,
            passes: c.passes,
        });
    // With probes, "all down" is a verdict the operator asked for: answer 502 at once. With
    // passive health only, it is more often a shared blip, and the least recently failed
    // server is tried (as nginx does; see `AllDown`).
    if spec.health_check.is_some() {
        spec.all_down = squall_upstream::AllDown::Fail;
    }
    // A worker needs one origin connection per request it has in flight to a server; keeping
    // fewer idle than that closes and reopens connections under steady load (measured: with
    // 32, 64 keep-alive clients through one worker cost 1.3× nginx's CPU per request).
    spec.pool.idle_max = POOL_IDLE_PER_SERVER_MAX;
    spec.pool.idle_timeout = upstream
        .pool_idle_timeout
        .min(squall_upstream::DURATION_MAX);
    spec.pool.unsafe_idle_timeout = upstream
        .pool_unsafe_idle_timeout
        .min(spec.pool.idle_timeout);
    (spec, names)
}
