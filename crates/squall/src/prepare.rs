//! What start-up, a reload and `squall check` do with a config file short of binding sockets
//! and starting workers: read and validate it, compile the runtime (routes, certificates and
//! their keys, limits) and open the access log for append.
//!
//! One path for the three, so that `squall check` accepts exactly the files start-up accepts,
//! and says what is wrong in the same words. Every problem is a diagnostic at the key it is
//! about (`FILE:LINE:COL: message`), whether validation found it or opening a file did.

use std::fs::File;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use squall_config::{Config, Diagnostics, Site, Sites};

use crate::DEFAULT_CONFIG;
use crate::metrics::Metrics;
use crate::runtime::Runtime;

/// The name diagnostics give the embedded default config.
pub const EMBEDDED_NAME: &str = "<embedded config/squall.toml>";

/// Reads and validates the file at `path`, or the embedded default config. Under systemd with
/// `LoadCredential=`, relative `cert` and `key` paths name files in `$CREDENTIALS_DIRECTORY`.
pub fn read(path: Option<&Path>) -> Result<(Config, Sites), Diagnostics> {
    let credentials = std::env::var_os("CREDENTIALS_DIRECTORY").filter(|d| !d.is_empty());
    match path {
        Some(path) => squall_config::load_with_sites(path, credentials.as_deref().map(Path::new)),
        None => squall_config::parse_with_sites(DEFAULT_CONFIG, EMBEDDED_NAME),
    }
}

/// A config made ready to run: its runtime, and the access log opened when asked for.
pub struct Prepared {
    pub runtime: Runtime,
    /// The `[log] access` file, opened for append; `None` without one, or on reload (a reload
    /// keeps the running log: `[log]` needs a restart).
    pub access_log: Option<File>,
}

/// Compiles `config` and, with `open_log`, opens its access log; every problem at its key.
/// `previous` (on reload) hands over the TLS resumption state and the cache; `addresses` are
/// what the servers named by host name resolved to.
pub fn compile(
    config: &Config,
    sites: &Sites,
    metrics: Arc<Metrics>,
    previous: Option<&Runtime>,
    open_log: bool,
    addresses: &crate::resolve::Addresses,
) -> Result<Prepared, Diagnostics> {
    let runtime = Runtime::new(config, sites, metrics, previous, addresses);
    let access_log = match (&config.log.access, open_log) {
        (Some(path), true) => crate::access_log::open(path).map(Some).map_err(|e| {
            let message = format!("cannot open access log {}: {e}", path.display());
            sites.diagnostic(Site::AccessLog, message)
        }),
        _ => Ok(None),
    };
    match (runtime, access_log) {
        (Ok(runtime), Ok(access_log)) => Ok(Prepared {
            runtime,
            access_log,
        }),
        (runtime, access_log) => {
            let mut problems = runtime.err().map_or_else(Vec::new, |d| d.0);
            problems.extend(access_log.err());
            problems.sort_by_key(|d| (d.line, d.col));
            Err(Diagnostics(problems))
        }
    }
}

/// `squall check --config FILE`: `ok` on stdout, or every problem on stderr, one per line.
pub fn check(path: &Path) -> ExitCode {
    // Warnings (an expired certificate, a ticket key file others may read) go to stderr as
    // `WARN message` lines; they do not fail the check.
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .without_time()
        .with_target(false)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .try_init();
    let checked = read(Some(path)).and_then(|(config, sites)| {
        let workers = crate::server::worker_count(&config);
        let metrics = Arc::new(Metrics::new(workers));
        // An access log that check had to create is removed again: run as root (by hand), it
        // would leave a file the service's user may not be able to append to.
        let created = (config.log.access.as_ref()).filter(|path| !path.exists());
        let missing = config.log.access.as_deref().and_then(missing_directory);
        if let Some(dir) = missing {
            tracing::warn!(
                "the access log's directory {} does not exist yet: start-up fails unless it is \
                 made first (the systemd unit's LogsDirectory=squall makes /var/log/squall when \
                 the service starts)",
                dir.display()
            );
        }
        // A server name that does not resolve fails the check, as it fails start-up.
        let resolver = resolve(&config, &sites, &metrics, None)?;
        let addresses = resolver.snapshot();
        let open_log = missing.is_none();
        let prepared = compile(&config, &sites, metrics, None, open_log, &addresses);
        if let (
            Some(path),
            Ok(Prepared {
                access_log: Some(_),
                ..
            }),
        ) = (created, &prepared)
        {
            let _ = std::fs::remove_file(path);
        }
        prepared.map(|_| ())
    });
    match checked {
        Ok(()) => {
            println!("ok");
            ExitCode::SUCCESS
        }
        Err(diagnostics) => {
            eprintln!("{diagnostics}");
            ExitCode::FAILURE
        }
    }
}

/// The directory of the access log at `path` when it does not exist. `check` warns about it
/// rather than refusing the file: under systemd the directory is the unit's `LogsDirectory=`,
/// which exists only once the service has started, while an operator checks a new file before
/// the first start. Any other failure to open the log (no permission, a file in the way) is
/// still refused, as start-up refuses it.
fn missing_directory(path: &Path) -> Option<&Path> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty())?;
    let missing =
        matches!(std::fs::metadata(dir), Err(e) if e.kind() == std::io::ErrorKind::NotFound);
    missing.then_some(dir)
}

/// Resolves every server host name of `config` now (blocking; start-up, reload and `check`).
/// `previous` (on reload) holds the last good addresses: a known name that fails keeps them,
/// with a warning. A name with no addresses at all is an error naming its upstream.
pub fn resolve(
    config: &Config,
    sites: &Sites,
    metrics: &Metrics,
    previous: Option<crate::resolve::Resolver>,
) -> Result<crate::resolve::Resolver, Diagnostics> {
    let mut resolver = previous.unwrap_or_default();
    let now = std::time::Instant::now();
    let failed = crate::resolve::resolve_all(&mut resolver, config, metrics, now);
    let mut problems = Vec::new();
    for ((host, port), error) in failed {
        let name = (host.clone(), port);
        if !resolver.addresses(&name).is_empty() {
            tracing::warn!("cannot resolve {host}:{port} ({error}); keeping its last addresses");
            continue;
        }
        for upstream in resolver.upstreams(&name) {
            let message =
                format!("upstream {upstream:?}: cannot resolve server \"{host}:{port}\": {error}");
            problems.push(sites.diagnostic(Site::File, message));
        }
    }
    if problems.is_empty() {
        Ok(resolver)
    } else {
        Err(Diagnostics(problems))
    }
}
