//! Start-up, the control thread and signals: load the config, bind, start the workers, then turn
//! SIGHUP into a reload and SIGTERM/SIGINT into a graceful drain.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::Sender;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
use signal_hook::iterator::Signals;
use squall_config::{Config, Diagnostics, Protocol, Workers};
use squall_uring::Waker;
use tracing::{info, warn};

use crate::metrics::Metrics;
use crate::{listener, worker};

mod reload;

use crate::runtime::Runtime;
use crate::worker::Control;

use reload::{Resolution, refresh, reload};

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
    let udp = bind_quic(&config, count, &listening)?;
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
    let workers = spawn_workers(
        count,
        (listeners, udp),
        &runtime,
        access_log.as_ref(),
        &clients,
    )?;
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
    // An HTTP/3-only listener has no TCP socket (its UDP ones are `bind_quic`'s).
    for listen in listens.filter(|l| l.protocols.iter().any(|p| p.is_tcp())) {
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

/// Binds a UDP socket per worker for each listener that serves HTTP/3, on its TCP
/// listener's port when it has one (so `:0` gives both the same port), and steers each
/// packet of a group to the worker its connection ID names (see `worker/quic.rs`): sockets
/// join a reuseport group in worker order, so socket `i` is worker `i`'s.
fn bind_quic(config: &Config, workers: usize, listening: &Listening) -> anyhow::Result<PerWorker> {
    let mut per_worker: PerWorker = (0..workers).map(|_| Vec::new()).collect();
    let h3 = config
        .listen
        .iter()
        .filter(|l| l.protocols.contains(&Protocol::H3));
    for listen in h3 {
        let tcp = listening.iter().find(|(a, _)| *a == listen.address);
        let address = tcp.map_or(listen.address, |(_, local)| *local);
        let local = listener::claim_udp(address)
            .map_err(|e| anyhow::anyhow!("cannot listen on {address} (UDP, h3): {e}"))?;
        info!("listening on https://{local} (HTTP/3 over QUIC, UDP)");
        let mut group = Vec::with_capacity(workers);
        for sockets in per_worker.iter_mut() {
            let fd = listener::bind_udp(local, config.quic.gro)
                .map_err(|e| anyhow::anyhow!("cannot listen on {local} (UDP, h3): {e}"))?;
            group.push(fd.try_clone()?);
            sockets.push((listen.address, fd));
        }
        // Without the program the kernel spreads packets by address: a connection's packets
        // reach another worker when its client's address changes, which hands them over.
        let program = squall_uring::quic_steering_program(u16::try_from(workers).unwrap_or(1));
        if !config.quic.steering {
            info!("{local}: QUIC packets spread by address (quic.steering = false)");
        } else if let Some(first) = group.first()
            && let Err(e) = squall_uring::attach_reuseport_cbpf(first, &program)
        {
            warn!("{local}: cannot steer QUIC packets to their workers ({e}): by address instead");
        }
    }
    Ok(per_worker)
}

fn spawn_workers(
    count: usize,
    (listeners, udp): (PerWorker, PerWorker),
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
    let sockets = listeners.into_iter().zip(udp);
    for ((id, (sockets, udp)), (control, receiver, waker)) in sockets.enumerate().zip(channels) {
        let setup = worker::Setup {
            id,
            core: (!cores.is_empty()).then(|| cores[id % cores.len()]),
            listeners: sockets,
            udp,
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
