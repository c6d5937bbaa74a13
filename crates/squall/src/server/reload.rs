//! Applying a new configuration while running: SIGHUP reloads and SIGUSR2 re-resolution.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use squall_config::{Config, Diagnostics, Sites};
use tracing::{error, info, warn};

use super::{Control, Listening, PerWorker, Runtime, WorkerHandle, bind_listeners, one_line};
use crate::control::Outcome;

/// SIGHUP: validate the file again and hand the workers a new runtime, or keep the old one.
/// Returns what it did, for `squall reload` (see [`crate::control`]); `started` is the config
/// the process started with, whose restart-only settings stay in force.
pub(super) fn reload(
    path: Option<&Path>,
    started: &Config,
    workers: &[WorkerHandle],
    current: &mut Arc<Runtime>,
    listening: &mut Listening,
    resolution: &mut Resolution,
) -> Outcome {
    crate::notify::reloading();
    let metrics = current.metrics.clone();
    let resolver = crate::resolve::lock(&resolution.resolver).clone();
    match prepare_reload(path, workers.len(), current, listening, resolver) {
        Ok((next, resolver)) => {
            resolution.generation = resolver.generation();
            *crate::resolve::lock(&resolution.resolver) = resolver;
            resolution.config = next.config.clone();
            resolution.sites = next.sites.clone();
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let restart = crate::control::restart_only_changes(started, &next.config, cores);
            apply(next, workers, current, listening);
            metrics.reloads_ok.inc();
            let pending = !restart.is_empty();
            metrics.restart_required.store(pending, Ordering::Relaxed);
            if pending {
                let settings = restart.join(", ");
                warn!(
                    "reload: new configuration applied to new requests, except what needs a restart: {settings}"
                );
                crate::notify::ready(
                    "serving; configuration reloaded; a restart is needed (see the log)",
                );
                Outcome::RestartNeeded(restart)
            } else {
                info!("reload: new configuration applied to new requests");
                crate::notify::ready("serving; configuration reloaded");
                Outcome::Applied
            }
        }
        Err(e) => {
            let reasons = if e.is::<Diagnostics>() {
                e.to_string()
            } else {
                one_line(&e)
            };
            // Counted before it is logged: whoever reads the log line finds the count.
            metrics.reloads_failed.inc();
            error!("reload refused, keeping the running configuration:\n{reasons}");
            crate::notify::ready("serving; last reload refused (see the log)");
            Outcome::Refused(reasons)
        }
    }
}

/// A reload made ready: nothing has changed yet.
struct NextConfig {
    config: Config,
    sites: Sites,
    runtime: Runtime,
    /// Per worker, the sockets of added listeners.
    add: PerWorker,
    remove: Vec<SocketAddr>,
    /// What is listened on once the reload is applied.
    listening: Listening,
}

/// Reads and compiles the file, and binds its added listeners.
fn prepare_reload(
    path: Option<&Path>,
    workers: usize,
    current: &Runtime,
    listening: &[(SocketAddr, SocketAddr)],
    resolver: crate::resolve::Resolver,
) -> anyhow::Result<(NextConfig, crate::resolve::Resolver)> {
    let (config, sites) = crate::prepare::read(path)?;
    let metrics = current.metrics.clone();
    // A known name that fails keeps its last good addresses; a new one refuses the reload.
    let resolver = crate::prepare::resolve(&config, &sites, &metrics, Some(resolver))?;
    let addresses = resolver.snapshot();
    let prepared =
        crate::prepare::compile(&config, &sites, metrics, Some(current), false, &addresses)?;
    // Bind the new listeners before anything changes: a port in use refuses the reload.
    let is_new = |l: &&squall_config::Listen| !listening.iter().any(|(a, _)| *a == l.address);
    let held: Vec<SocketAddr> = listening.iter().map(|(_, local)| *local).collect();
    let (add, added) = bind_listeners(config.listen.iter().filter(is_new), workers, &held)?;
    let remove: Vec<SocketAddr> = listening
        .iter()
        .map(|(a, _)| *a)
        .filter(|a| !config.listen.iter().any(|l| l.address == *a))
        .collect();
    let kept = listening.iter().filter(|(a, _)| !remove.contains(a));
    let listening = kept.copied().chain(added).collect();
    let next = NextConfig {
        config,
        sites,
        runtime: prepared.runtime,
        add,
        remove,
        listening,
    };
    Ok((next, resolver))
}

/// The config in force and the host names its servers use, for [`refresh`].
pub(super) struct Resolution {
    pub(super) resolver: Arc<std::sync::Mutex<crate::resolve::Resolver>>,
    /// The resolver's generation the running runtime was built from.
    pub(super) generation: u64,
    pub(super) config: Config,
    pub(super) sites: Sites,
}

/// SIGUSR2: when a host name resolves to a new set of addresses, compiles the config in
/// force again with them and hands the runtime to the workers as a reload of the same file
/// would (listeners unchanged). Nothing happens when the sets are the ones in force.
pub(super) fn refresh(
    resolution: &mut Resolution,
    workers: &[WorkerHandle],
    current: &mut Arc<Runtime>,
    listening: &mut Listening,
) {
    let (addresses, generation) = {
        let resolver = crate::resolve::lock(&resolution.resolver);
        (resolver.snapshot(), resolver.generation())
    };
    if generation == resolution.generation {
        return;
    }
    let (config, sites) = (&resolution.config, &resolution.sites);
    let metrics = current.metrics.clone();
    match crate::prepare::compile(config, sites, metrics, Some(current), false, &addresses) {
        Ok(prepared) => {
            resolution.generation = generation;
            let next = NextConfig {
                config: config.clone(),
                sites: sites.clone(),
                runtime: prepared.runtime,
                add: workers.iter().map(|_| Vec::new()).collect(),
                remove: Vec::new(),
                listening: listening.clone(),
            };
            apply(next, workers, current, listening);
            info!("upstream host names resolved to new addresses: applied to new requests");
        }
        Err(e) => warn!("upstream host names resolved to new addresses, not applied: {e}"),
    }
}

/// Hands the new runtime and listeners to every worker.
fn apply(
    next: NextConfig,
    workers: &[WorkerHandle],
    current: &mut Arc<Runtime>,
    listening: &mut Listening,
) {
    let inputs =
        crate::descriptors::inputs(&next.config, next.runtime.upstream_specs(), workers.len());
    let reserve = next.config.limits.descriptor_reserve;
    (next.runtime.metrics.descriptors).apply(reserve, &inputs);
    let runtime = Arc::new(next.runtime);
    *current = runtime.clone();
    *listening = next.listening;
    (current.metrics.config_hash).store(current.config_hash, Ordering::Relaxed);
    (current.metrics).set_upstreams(current.upstream_gauges.clone());
    (current.metrics).set_routes(current.routes.clone());
    for address in &next.remove {
        info!("reload: no longer listening on {address}");
    }
    for (w, add) in workers.iter().zip(next.add) {
        let message = Control::Reload {
            runtime: runtime.clone(),
            add,
            remove: next.remove.clone(),
        };
        let _ = w.control.send(message);
        w.waker.wake();
    }
}
