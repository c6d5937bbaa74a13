//! The load generator of one run: h2load, or h3load for HTTP/3, pinned to the load CPUs, its
//! report parsed, and for measured runs its per-request log (`--log-file`) read into latency
//! percentiles and its own CPU time read (to tell when the client, not the server, is the
//! limit).

use std::fs::{self, File};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::Settings;
use super::cpu::reaped_children_secs;
use crate::h2load::{self, Plan, Stop};
use crate::latency::{self, Tails};
use crate::scaling::cpu_ranges;
use crate::scenario::{Load, Protocol};
use crate::util::{last_line, wait_bounded};

/// What a measured load generator run gave besides its report.
#[derive(Debug)]
pub struct Generated {
    pub report: h2load::Report,
    /// Percentiles from its request log, or why there are none.
    pub tails: Result<Tails, String>,
    /// Its CPU time (user + system) over its wall time and the cores it could use (its
    /// threads), in percent: near 100, the client is the limit.
    pub cpu_pct: f64,
}

/// Fails a run in which h2load spoke another protocol than the scenario's, as h2load over TLS
/// does when a server offers only `http/1.1` by ALPN. h3load always says what it spoke (ALPN
/// `h3` is all it offers); a report without it had no connection established.
pub fn check_protocol(report: &h2load::Report, load: &Load) -> Result<()> {
    let tool = match load.protocol {
        Protocol::H3 => "h3load",
        Protocol::H1 | Protocol::H2 => "h2load",
    };
    match &report.application_protocol {
        Some(spoken) if !load.application_protocols().contains(&spoken.as_str()) => bail!(
            "{tool} spoke {spoken}, not {}",
            load.application_protocols().join(" or ")
        ),
        None if load.protocol == Protocol::H3 => {
            bail!("h3load established no HTTP/3 connection")
        }
        _ => Ok(()),
    }
}

/// Runs the plan's load generator, its report saved to `output`, and parses the report: for
/// warm-ups and `--find-max` steps, which need no percentiles.
pub fn run_h2load(plan: &Plan, settings: &Settings, output: &Path) -> Result<h2load::Report> {
    run(plan, settings, output, None)
}

/// [`run_h2load`] with the generator's CPU use and, unless `--no-percentiles`, a request log
/// (`OUTPUT` with the extension `log`) read into percentiles and then removed (a line per
/// request: hundreds of MB in a long run).
pub fn run_logged(plan: &Plan, settings: &Settings, output: &Path) -> Result<Generated> {
    let log = settings.percentiles.then(|| output.with_extension("log"));
    let before = reaped_children_secs(settings.clock_ticks)?;
    let started = Instant::now();
    let report = run(plan, settings, output, log.as_deref());
    let wall = started.elapsed().as_secs_f64();
    let cpu = reaped_children_secs(settings.clock_ticks)? - before;
    // Read and removed whatever became of the run, so no failed run leaves its log behind.
    let tails = match &log {
        Some(log) => {
            let tails = latency::read_file(log).map_err(|err| format!("{err:#}"));
            if let Err(err) = fs::remove_file(log) {
                eprintln!("bench: warning: removing {}: {err}", log.display());
            }
            tails
        }
        None => Err("--no-percentiles".into()),
    };
    let report = report?;
    Ok(Generated {
        report,
        tails,
        cpu_pct: cpu_pct(cpu, wall, plan.threads),
    })
}

/// CPU seconds over the wall time of `threads` cores, in percent; NaN without a wall time.
fn cpu_pct(cpu_secs: f64, wall_secs: f64, threads: u32) -> f64 {
    if wall_secs <= 0.0 {
        return f64::NAN;
    }
    cpu_secs / wall_secs / f64::from(threads.max(1)) * 100.0
}

/// The generator pinned to the load CPUs, its stdout the report in `output`, logging each
/// request to `log` if given.
fn run(
    plan: &Plan,
    settings: &Settings,
    output: &Path,
    log: Option<&Path>,
) -> Result<h2load::Report> {
    let tool = plan.tool();
    let file = File::create(output).with_context(|| format!("creating {}", output.display()))?;
    let errors = output.with_extension("stderr.txt");
    let mut command = Command::new("taskset");
    command.arg("-c").arg(cpu_ranges(&settings.load_cpus));
    match plan.protocol {
        // This very program, whose `h3load` subcommand is the HTTP/3 load generator.
        Protocol::H3 => {
            let xtask = match &settings.h3load {
                Some(bin) => bin.clone(),
                None => std::env::current_exe().context("finding the xtask binary")?,
            };
            command.arg(xtask).arg("h3load")
        }
        Protocol::H1 | Protocol::H2 => command.arg("h2load"),
    };
    if let Some(log) = log {
        command.arg(format!("--log-file={}", log.display()));
    }
    let mut child = command
        .args(plan.args())
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(File::create(&errors)?)
        .spawn()
        .with_context(|| format!("starting {tool}"))?;
    let limit = plan.deadline_secs(count_secs_max(plan));
    let status = wait_bounded(&mut child, Duration::from_secs(limit))?;
    let text = fs::read_to_string(output)?;
    match status {
        None => bail!("{tool} did not finish within {limit}s and was killed"),
        Some(status) if !status.success() => {
            let stderr = fs::read_to_string(&errors).unwrap_or_default();
            bail!("{tool} failed ({status}): {}", last_line(&stderr))
        }
        Some(_) => h2load::parse(&text).with_context(|| format!("reading {}", output.display())),
    }
}

/// The file a run's report goes to: `h2load.txt`, or `h3load.txt` for HTTP/3 (with a prefix
/// for the warm-up, `warmup.h3load.txt`).
pub fn report_name(prefix: &str, plan: &Plan) -> String {
    format!("{prefix}{}.txt", plan.tool())
}

/// A ceiling for count-based runs: the count at a slow 500 requests/s (paced runs get at least
/// their pace's time, see `Plan::deadline_secs`).
fn count_secs_max(plan: &Plan) -> u64 {
    match plan.stop {
        Stop::Count(count) => count / 500 + 10,
        Stop::Duration(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_cpu_is_a_share_of_its_threads() {
        assert_eq!(cpu_pct(9.0, 10.0, 1), 90.0);
        assert_eq!(cpu_pct(9.0, 10.0, 3), 30.0);
        assert_eq!(cpu_pct(1.0, 1.0, 0), 100.0);
        assert!(cpu_pct(1.0, 0.0, 1).is_nan());
    }
}
