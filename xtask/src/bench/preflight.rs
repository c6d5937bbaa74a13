//! What the bench needs before it builds anything: the tools on `PATH` and the CPUs, each
//! missing one named in one line.

use std::path::Path;

use anyhow::{Result, bail, ensure};

use crate::cli::BenchArgs;
use crate::scenario::{Protocol, Scenario};
use crate::util::which;

/// One clear line for each thing missing, before anything is built.
pub fn preflight(args: &BenchArgs, scenarios: &[Scenario]) -> Result<()> {
    // HTTP/3 scenarios run `cargo xtask h3load`, this program, instead.
    if scenarios.iter().any(|s| s.load.protocol != Protocol::H3) && which("h2load").is_none() {
        bail!("h2load is not on PATH: install it with `apt-get install nghttp2-client`");
    }
    if which("taskset").is_none() {
        bail!("taskset is not on PATH: install it with `apt-get install util-linux`");
    }
    if let Some(peer) = args.vs
        && which(peer.program()).is_none()
    {
        bail!(
            "--vs {} needs {} on PATH: install it with `apt-get install {}`",
            peer.short(),
            peer.program(),
            peer.package()
        );
    }
    if let Some(proxy) = scenarios.iter().find(|s| s.origin.is_some())
        && which("nginx").is_none()
    {
        bail!(
            "{} needs nginx on PATH for its local origin: install it with `apt-get install nginx`",
            proxy.name
        );
    }
    if let Some(https) = scenarios
        .iter()
        .find(|s| s.origin.as_ref().is_some_and(|o| o.tls))
        && which("openssl").is_none()
    {
        bail!(
            "{} needs openssl on PATH for its https origin's certificate: install it with `apt-get install openssl`",
            https.name
        );
    }
    if let Some(probed) = scenarios
        .iter()
        .find(|s| s.load.tls || s.load.protocol == Protocol::H2)
        && which("curl").is_none()
    {
        bail!(
            "{} speaks TLS or HTTP/2 and its probe needs curl on PATH: install it with `apt-get install curl`",
            probed.name
        );
    }
    if let Some(tls) = scenarios.iter().find(|s| s.load.tls)
        && let Some(peer) = args.vs
        && which("openssl").is_none()
    {
        bail!(
            "{} speaks TLS and {}'s certificate needs openssl on PATH: install it with `apt-get install openssl`",
            tls.name,
            peer.short()
        );
    }
    // With `--workers`, the server and the load generator share CPUs where there are too few,
    // and the scaling table says so on those rows.
    if !args.workers.is_empty() {
        return Ok(());
    }
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    ensure!(
        cpus >= 2,
        "bench needs 2 CPUs (server and h2load each pinned to its own) and this process may use {cpus}"
    );
    ensure!(
        args.server_cpu != args.load_cpu,
        "--server-cpu and --load-cpu must differ"
    );
    for cpu in [args.server_cpu, args.load_cpu] {
        ensure!(
            Path::new(&format!("/sys/devices/system/cpu/cpu{cpu}")).exists(),
            "CPU {cpu} does not exist here: pick others with --server-cpu and --load-cpu"
        );
    }
    Ok(())
}
