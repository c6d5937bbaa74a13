//! Start-up, the control thread and signals: load the config, bind, start the workers, then turn
//! SIGHUP into a reload and SIGTERM/SIGINT into a graceful drain.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::route_rules::Service;
use crossbeam_channel::Sender;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
use signal_hook::iterator::Signals;
use squall_config::{Config, Diagnostics, Site, Sites, Workers};
use squall_uring::Waker;
use tracing::{info, warn};

use crate::metrics::Metrics;
use crate::tls::Tls;
use crate::{listener, worker};

mod reload;

use reload::{Resolution, refresh, reload};

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
    pub protocols: Vec<(SocketAddr, crate::worker::Protocols)>,
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

/// Messages from the control thread to a worker.
pub enum Control {
    /// A new runtime for new requests, and the listeners to open and to close.
    Reload {
        runtime: Arc<Runtime>,
        add: Vec<(SocketAddr, std::os::fd::OwnedFd)>,
        remove: Vec<SocketAddr>,
    },
    Drain {
        deadline: Instant,
    },
    /// A fetch that a request of this worker waited for has ended.
    CacheReady(crate::worker::ClientToken),
    /// The verdict on the Basic credentials of a request of this worker, parked meanwhile.
    Verified {
        client: crate::worker::ClientToken,
        head: Box<squall_h1::RequestHead>,
        verdict: crate::auth::Verdict,
    },
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
                        crate::worker::Protocols::from_config(&l.protocols),
                    )
                })
                .collect(),
            h2: h2_config(limits),
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

/// Idle keep-alive origin connections a worker keeps per upstream server (docs/CONFIG.md,
/// `[[upstream]]`, and the `descriptor_reserve` that counts them).
pub const POOL_IDLE_PER_SERVER_MAX: u32 = 256;

struct WorkerHandle {
    control: Sender<Control>,
    waker: Waker,
    thread: JoinHandle<()>,
}

/// Runs Squall in the foreground until a stop signal; the exit code of the process.
pub fn run(path: Option<&Path>) -> ExitCode {
    init_logging();
    match start(path) {
        Ok(code) => code,
        // Problems with the file are `FILE:LINE:COL: message` lines, as `squall check` prints.
        Err(e) if e.is::<Diagnostics>() => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            // One clear line naming the cause (docs/CONFIG.md: start-up failures).
            eprintln!("squall: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line, leaving out a cause whose text the line already has
/// (most of our messages end with the OS error they wrap: it would be printed twice).
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !line.contains(&text) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&text);
        }
    }
    line
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SQUALL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

fn start(path: Option<&Path>) -> anyhow::Result<ExitCode> {
    if path.is_none() {
        info!(
            "no --config FILE: running the embedded default config (config/squall.toml of the \
             source); `squall --help` shows the commands"
        );
    }
    let (config, sites) = crate::prepare::read(path)?;
    let count = worker_count(&config);
    let metrics = Arc::new(Metrics::new(count));
    let resolver = crate::prepare::resolve(&config, &sites, &metrics, None)?;
    let addresses = resolver.snapshot();
    let prepared =
        crate::prepare::compile(&config, &sites, metrics.clone(), None, true, &addresses)?;
    let mut runtime = Arc::new(prepared.runtime);
    let mut resolution = Resolution {
        generation: resolver.generation(),
        resolver: Arc::new(std::sync::Mutex::new(resolver)),
        config: config.clone(),
        sites,
    };
    (metrics.config_hash).store(runtime.config_hash, Ordering::Relaxed);
    metrics.set_upstreams(runtime.upstream_gauges.clone());
    metrics.set_routes(runtime.routes.clone());
    let nofile = raise_nofile_limit();
    // Registered before any worker starts, so a stop signal arriving during start-up is kept.
    let mut signals = Signals::new([SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2])?;
    let (listeners, mut listening) = bind_listeners(config.listen.iter(), count, &[])?;
    if let Some(admin) = &config.admin {
        crate::admin::start(admin.listen, metrics.clone())?;
    }
    let access_log = match (&config.log.access, prepared.access_log) {
        (Some(path), Some(file)) => Some(crate::access_log::start(path, file, config.log.format)?),
        _ => None,
    };
    let base = crate::descriptors::count_open()
        .saturating_add(count.saturating_mul(crate::descriptors::WORKER_DESCRIPTORS));
    let inputs = crate::descriptors::inputs(&config, runtime.upstream_specs(), count);
    let reserve = config.limits.descriptor_reserve;
    (metrics.descriptors).start(nofile, base, reserve, &inputs);
    // Bound before any worker answers, so a client that was served can also reach the socket.
    let control_socket = crate::control::socket_path(&config);
    let control = match &control_socket {
        Some(socket) => Some(crate::control::start(socket)?),
        None => None,
    };
    let clients = Arc::new(crate::clients::ClientTable::new());
    let workers = spawn_workers(count, listeners, &runtime, access_log.as_ref(), &clients)?;
    info!(
        workers = count,
        "squall {} ready: all workers listening",
        env!("CARGO_PKG_VERSION")
    );
    crate::notify::ready(&format!("serving with {count} workers"));
    crate::notify::start_watchdog(metrics.clone());
    crate::resolve::start(resolution.resolver.clone(), metrics.clone())?;
    crate::trim::start(metrics.clone());
    let ticket_watch = crate::ticket_watch::TicketWatch::start(runtime.ticket_key_file.clone());

    let config_path = path.map(PathBuf::from);
    for signal in signals.forever() {
        match signal {
            SIGHUP => {
                // Taken before the file is read: each `squall reload` waiting is answered by a
                // reload that began after it asked.
                let waiting: Vec<_> = control.iter().flat_map(|rx| rx.try_iter()).collect();
                let path = config_path.as_deref();
                let outcome = reload(
                    path,
                    &config,
                    &workers,
                    &mut runtime,
                    &mut listening,
                    &mut resolution,
                );
                for waiter in waiting {
                    let _ = waiter.send(outcome.clone());
                }
                // The file as this reload read it is the one in force: only a later change
                // reloads again.
                ticket_watch.follow(runtime.ticket_key_file.clone());
            }
            // Raised by the resolver thread when a host name's addresses changed.
            SIGUSR2 => refresh(&mut resolution, &workers, &mut runtime, &mut listening),
            SIGUSR1 => match &access_log {
                Some(logger) => {
                    let _ = logger.tx.send(crate::access_log::Message::Reopen);
                }
                None => info!("SIGUSR1: no access log file is configured; nothing to reopen"),
            },
            _ => break,
        }
    }
    if let Some(socket) = &control_socket {
        let _ = std::fs::remove_file(socket);
    }
    let drain = runtime.drain_timeout;
    // The health check fails before the line is logged: whoever reads the log then asks
    // /healthz must see the drain.
    metrics
        .draining
        .store(true, std::sync::atomic::Ordering::Relaxed);
    info!("stopping: draining connections for up to {drain:?}");
    crate::notify::stopping("draining connections");
    let deadline = Instant::now() + drain;
    for w in &workers {
        let _ = w.control.send(Control::Drain { deadline });
        w.waker.wake();
    }
    for w in workers {
        let _ = w.thread.join();
    }
    info!(
        accepted = metrics.total(|w| &w.connections_accepted),
        bad_requests = metrics.total(|w| &w.bad_requests),
        "stopped"
    );
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn worker_count(config: &Config) -> usize {
    match config.server.workers {
        Workers::Auto => std::thread::available_parallelism().map_or(1, |n| n.get()),
        Workers::Count(n) => n.get(),
    }
}

/// Sockets for each worker, each with the address it was configured as.
type PerWorker = Vec<Vec<(SocketAddr, std::os::fd::OwnedFd)>>;
/// Each address listened on: as configured, and as bound (they differ for port 0).
type Listening = Vec<(SocketAddr, SocketAddr)>;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit, as nginx's `worker_rlimit_nofile`
/// would be set to, and returns the soft limit in force.
fn raise_nofile_limit() -> u64 {
    match squall_uring::raise_nofile_limit() {
        Ok((before, after)) if after > before => {
            info!("raised the RLIMIT_NOFILE soft limit from {before} to the hard limit, {after}");
            after
        }
        Ok((_, limit)) => {
            info!("file descriptor limit: {limit}");
            limit
        }
        Err(e) => {
            warn!("cannot raise the file descriptor limit: {e}");
            u64::MAX
        }
    }
}

/// Binds `listens` once per worker, after [`listener::claim`] checked that no other process
/// holds the address and fixed the port (so `:0`, in tests, gives every worker the same
/// ephemeral port, which is logged). Addresses in `held` are this process's own already: they
/// are not claimed.
fn bind_listeners<'a>(
    listens: impl Iterator<Item = &'a squall_config::Listen>,
    workers: usize,
    held: &[SocketAddr],
) -> anyhow::Result<(PerWorker, Listening)> {
    let mut per_worker: PerWorker = (0..workers).map(|_| Vec::new()).collect();
    let mut listening = Vec::new();
    for listen in listens {
        let local = if held.contains(&listen.address) {
            Ok(listen.address)
        } else {
            listener::claim(listen.address)
        };
        let local =
            local.map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", listen.address))?;
        listening.push((listen.address, local));
        let scheme = if listen.tls { "https" } else { "http" };
        info!("listening on {scheme}://{local}");
        for sockets in per_worker.iter_mut() {
            let fd = listener::bind(local)
                .map_err(|e| anyhow::anyhow!("cannot listen on {local}: {e}"))?;
            sockets.push((listen.address, fd));
        }
    }
    Ok((per_worker, listening))
}

fn spawn_workers(
    count: usize,
    listeners: PerWorker,
    runtime: &Arc<Runtime>,
    access_log: Option<&crate::access_log::Logger>,
    clients: &Arc<crate::clients::ClientTable>,
) -> anyhow::Result<Vec<WorkerHandle>> {
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let (ready_tx, ready_rx) = crossbeam_channel::bounded(count);
    let mut workers = Vec::with_capacity(count);
    // Every worker's channel and waker first: each worker may wake requests on any other.
    let mut channels = Vec::with_capacity(count);
    for _ in 0..count {
        let (control, receiver) = crossbeam_channel::unbounded();
        channels.push((control, receiver, Waker::new()?));
    }
    let peers: Arc<[crate::cache::Peer]> = channels
        .iter()
        .map(|(control, _, waker)| crate::cache::Peer {
            control: control.clone(),
            waker: waker.clone(),
        })
        .collect();
    for ((id, sockets), (control, receiver, waker)) in
        listeners.into_iter().enumerate().zip(channels)
    {
        let setup = worker::Setup {
            id,
            core: (!cores.is_empty()).then(|| cores[id % cores.len()]),
            listeners: sockets,
            runtime: runtime.clone(),
            control: receiver,
            waker: waker.clone(),
            ready: ready_tx.clone(),
            access_log: access_log.cloned(),
            clients: clients.clone(),
            peers: peers.clone(),
        };
        let thread = std::thread::Builder::new()
            .name(format!("squall-w{id}"))
            .spawn(move || worker::run(setup))?;
        workers.push(WorkerHandle {
            control,
            waker,
            thread,
        });
    }
    for _ in 0..count {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(reason)) => anyhow::bail!(reason),
            Err(_) => anyhow::bail!("a worker exited during start-up"),
        }
    }
    Ok(workers)
}
