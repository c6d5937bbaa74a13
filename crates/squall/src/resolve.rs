//! Origin servers named by host name (`address = "api.internal:8080"`): what each name last
//! resolved to, when it is due again, and the thread that looks names up in the background.
//!
//! Names are resolved with the OS resolver (getaddrinfo), which blocks: never on a worker. The
//! main thread resolves at start-up (a name that does not resolve is an error, as in nginx),
//! at `squall check` and on reload (a known name that fails keeps its last good addresses);
//! the resolver thread resolves each name again every `resolve_interval`. [`Resolver`] is the
//! state, sans-IO (`now` passed in, results handed to it), so that it is tested with made-up
//! lookups; the thread only runs it. When a name's set of addresses changes, the thread
//! raises SIGUSR2, which the main loop already waits on with the other signals; the loop then
//! compiles the config in force again with the new addresses and hands the runtime to the
//! workers as a reload would (`server.rs`). An unchanged set causes nothing.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::warn;

/// A host name and its port, as the config gives them.
pub type Name = (String, u16);

/// What a name resolves to, by name: what `Runtime::new` expands named servers with.
pub type Addresses = BTreeMap<Name, Vec<SocketAddr>>;

/// A background failure is logged at most this often per name.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// The resolution state of every name the config in force uses.
#[derive(Debug, Default, Clone)]
pub struct Resolver {
    names: BTreeMap<Name, Entry>,
    /// Bumped whenever a name's addresses change: the main loop compares it with the one its
    /// runtime was built from.
    generation: u64,
}

#[derive(Debug, Clone)]
struct Entry {
    /// The upstreams that name a server by it (for the metrics).
    upstreams: Vec<String>,
    /// The shortest `resolve_interval` of those upstreams.
    interval: Duration,
    /// The last good answer, sorted and without duplicates; empty before the first one.
    addresses: Vec<SocketAddr>,
    due: Instant,
    last_warning: Option<Instant>,
}

/// What one lookup result did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The name's set of addresses is new: a new runtime is needed.
    Changed,
    /// The same addresses as before.
    Same,
    /// The lookup failed; the last good addresses stay. `warn`: whether to log it now.
    Failed { warn: bool },
    /// The name is no longer in the config (a reload dropped it while it was looked up).
    Unknown,
}

impl Resolver {
    /// Tracks exactly `names` (name, interval, upstream): new names are due at once, names
    /// kept keep their addresses and due time, names gone are forgotten.
    pub fn set_names(&mut self, names: &[(Name, Duration, String)], now: Instant) {
        let mut next: BTreeMap<Name, Entry> = BTreeMap::new();
        for (name, interval, upstream) in names {
            let old = self.names.remove(name);
            let entry = next.entry(name.clone()).or_insert_with(|| match old {
                Some(mut old) => {
                    old.upstreams.clear();
                    old
                }
                None => Entry {
                    upstreams: Vec::new(),
                    interval: *interval,
                    addresses: Vec::new(),
                    due: now,
                    last_warning: None,
                },
            });
            if entry.upstreams.is_empty() {
                entry.interval = *interval;
            }
            entry.interval = entry.interval.min(*interval);
            entry.due = entry.due.min(now + entry.interval);
            if !entry.upstreams.contains(upstream) {
                entry.upstreams.push(upstream.clone());
            }
        }
        self.names = next;
    }

    /// A name due for a lookup at `now`, if any, else when the next one is due.
    pub fn due(&self, now: Instant) -> Result<Name, Option<Instant>> {
        let earliest = self.names.iter().min_by_key(|(_, e)| e.due);
        match earliest {
            Some((name, e)) if e.due <= now => Ok(name.clone()),
            Some((_, e)) => Err(Some(e.due)),
            None => Err(None),
        }
    }

    /// Takes the result of looking `name` up at `now`; the name is due again an interval on.
    pub fn on_result(
        &mut self,
        name: &Name,
        result: Result<Vec<SocketAddr>, String>,
        now: Instant,
    ) -> Verdict {
        let Some(entry) = self.names.get_mut(name) else {
            return Verdict::Unknown;
        };
        entry.due = now + entry.interval;
        match result {
            Ok(mut addresses) if !addresses.is_empty() => {
                addresses.sort();
                addresses.dedup();
                if addresses == entry.addresses {
                    return Verdict::Same;
                }
                entry.addresses = addresses;
                self.generation += 1;
                Verdict::Changed
            }
            _ => {
                let warn = entry
                    .last_warning
                    .is_none_or(|at| now.saturating_duration_since(at) >= WARN_EVERY);
                if warn {
                    entry.last_warning = Some(now);
                }
                Verdict::Failed { warn }
            }
        }
    }

    /// The last good addresses of `name`; empty when it never resolved.
    pub fn addresses(&self, name: &Name) -> &[SocketAddr] {
        self.names.get(name).map_or(&[], |e| &e.addresses)
    }

    /// Every name with its last good addresses (the ones that resolved).
    pub fn snapshot(&self) -> Addresses {
        (self.names.iter())
            .filter(|(_, e)| !e.addresses.is_empty())
            .map(|(name, e)| (name.clone(), e.addresses.clone()))
            .collect()
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The upstreams that use `name`.
    pub fn upstreams(&self, name: &Name) -> &[String] {
        self.names.get(name).map_or(&[], |e| &e.upstreams)
    }
}

/// The names `config` uses, with each upstream's interval: what [`Resolver::set_names`] takes.
pub fn names_of(config: &squall_config::Config) -> Vec<(Name, Duration, String)> {
    let mut names = Vec::new();
    for upstream in &config.upstream {
        for (host, port) in upstream.names() {
            let name = (host.to_owned(), port);
            names.push((name, upstream.resolve_interval, upstream.name.clone()));
        }
    }
    names
}

/// Asks the OS resolver (blocking: never call it on a worker).
pub fn lookup(name: &Name) -> Result<Vec<SocketAddr>, String> {
    let (host, port) = name;
    match (host.as_str(), *port).to_socket_addrs() {
        Ok(addresses) => {
            let addresses: Vec<SocketAddr> = addresses.collect();
            if addresses.is_empty() {
                Err("no addresses".to_owned())
            } else {
                Ok(addresses)
            }
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Looks up every name of `config` now, on this thread, recording the results (and the
/// metrics) in `resolver`; returns the names that failed with why.
pub fn resolve_all(
    resolver: &mut Resolver,
    config: &squall_config::Config,
    metrics: &crate::metrics::Metrics,
    now: Instant,
) -> Vec<(Name, String)> {
    resolver.set_names(&names_of(config), now);
    let mut names: Vec<Name> = names_of(config).into_iter().map(|(n, ..)| n).collect();
    names.sort();
    names.dedup();
    let mut failed: Vec<(Name, String)> = Vec::new();
    for name in names {
        let result = lookup(&name);
        let error = result.as_ref().err().cloned();
        resolver.on_result(&name, result, now);
        record(resolver, metrics, &name, error.is_none());
        if let Some(error) = error {
            failed.push((name, error));
        }
    }
    failed
}

/// Counts a lookup of `name` for each upstream using it and publishes its address count.
fn record(resolver: &Resolver, metrics: &crate::metrics::Metrics, name: &Name, ok: bool) {
    let count = resolver.addresses(name).len();
    for upstream in resolver.upstreams(name) {
        metrics.resolution.count(upstream, ok);
        metrics.resolution.set_addresses(upstream, name, count);
    }
}

/// Starts the thread that resolves each name again when it is due, raising SIGUSR2 when a
/// set of addresses changed. It runs until the process ends.
pub fn start(
    resolver: Arc<Mutex<Resolver>>,
    metrics: Arc<crate::metrics::Metrics>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("squall-resolve".into())
        .spawn(move || {
            loop {
                let due = lock(&resolver).due(Instant::now());
                let name = match due {
                    Ok(name) => name,
                    Err(next) => {
                        // Bounded, so that names a reload adds are looked up in time.
                        let wait = next.map_or(Duration::from_secs(1), |at| {
                            at.saturating_duration_since(Instant::now())
                        });
                        std::thread::sleep(wait.min(Duration::from_secs(1)));
                        continue;
                    }
                };
                let result = lookup(&name);
                let error = result.as_ref().err().cloned();
                let mut state = lock(&resolver);
                let verdict = state.on_result(&name, result, Instant::now());
                record(&state, &metrics, &name, error.is_none());
                drop(state);
                background(&name, verdict, error);
            }
        })?;
    Ok(())
}

/// Logs a background failure, or tells the main loop of a change.
fn background(name: &Name, verdict: Verdict, error: Option<String>) {
    let (host, port) = name;
    match verdict {
        Verdict::Changed => {
            tracing::info!("{host}:{port} resolves to a new set of addresses: rebuilding");
            let _ = signal_hook::low_level::raise(signal_hook::consts::SIGUSR2);
        }
        Verdict::Failed { warn: true } => warn!(
            "cannot resolve {host}:{port} ({}); keeping its last addresses",
            error.unwrap_or_default()
        ),
        _ => {}
    }
}

pub fn lock(resolver: &Mutex<Resolver>) -> std::sync::MutexGuard<'_, Resolver> {
    resolver.lock().unwrap_or_else(|e| e.into_inner())
}

/// `squall_upstream_resolutions_total{upstream,result}` and
/// `squall_upstream_resolved_addresses{upstream,name}`, shared by every runtime.
#[derive(Debug, Default)]
pub struct ResolveMetrics {
    lookups: Mutex<BTreeMap<(String, &'static str), u64>>,
    addresses: Mutex<BTreeMap<(String, String), u64>>,
}

impl ResolveMetrics {
    pub fn count(&self, upstream: &str, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        let mut lookups = self.lookups.lock().unwrap_or_else(|e| e.into_inner());
        *lookups.entry((upstream.to_owned(), result)).or_default() += 1;
    }

    pub fn set_addresses(&self, upstream: &str, name: &Name, count: usize) {
        let mut addresses = self.addresses.lock().unwrap_or_else(|e| e.into_inner());
        let key = (upstream.to_owned(), format!("{}:{}", name.0, name.1));
        addresses.insert(key, count as u64);
    }

    /// The two families in the Prometheus text format (nothing when no name is used).
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write;
        let lookups = self.lookups.lock().unwrap_or_else(|e| e.into_inner());
        if lookups.is_empty() {
            return;
        }
        let name = "squall_upstream_resolutions_total";
        let _ = writeln!(
            out,
            "# HELP {name} Lookups of servers' host names, by result."
        );
        let _ = writeln!(out, "# TYPE {name} counter");
        for ((upstream, result), n) in lookups.iter() {
            let _ = writeln!(
                out,
                "{name}{{upstream=\"{upstream}\",result=\"{result}\"}} {n}"
            );
        }
        let addresses = self.addresses.lock().unwrap_or_else(|e| e.into_inner());
        let name = "squall_upstream_resolved_addresses";
        let _ = writeln!(
            out,
            "# HELP {name} Addresses a server's host name last resolved to."
        );
        let _ = writeln!(out, "# TYPE {name} gauge");
        for ((upstream, host), n) in addresses.iter() {
            let _ = writeln!(out, "{name}{{upstream=\"{upstream}\",name=\"{host}\"}} {n}");
        }
    }
}

#[cfg(test)]
mod tests;
