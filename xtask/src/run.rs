//! One run: a fresh server process for one build and one scenario, a warm-up, then a measured
//! h2load run with the server's CPU time read before and after it.
//!
//! Every file of the run (server config, server log, h2load's raw report) is kept in its own
//! folder under the output folder, so a surprising number can be traced back to its run.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::build::{Build, Target};
use crate::h2load::{self, ConnectRate, Plan, Stop};
use crate::report::Figure;
use crate::scenario::{Load, Protocol, Scenario};
use crate::server::{Server, Spec, StartError};
use crate::util::{free_port, last_line, wait_bounded};

/// How long `squall check` may take; it only parses a file, but an old build might not know
/// `check` and start serving instead.
const CHECK_TIMEOUT: Duration = Duration::from_secs(60);

/// What every run of one bench shares.
#[derive(Debug, Clone)]
pub struct Settings {
    pub duration_secs: u32,
    pub warmup_secs: u32,
    pub connections: Option<u32>,
    pub streams: Option<u32>,
    /// Open-loop total rate (`--rate`).
    pub rate: Option<f64>,
    pub server_cpu: usize,
    pub load_cpu: usize,
    pub clock_ticks: f64,
    /// The xtask binary whose `h3load` runs HTTP/3 loads (an optimized one, see
    /// `build::h3load`); this program itself when `None`.
    pub h3load: Option<PathBuf>,
}

/// What a run produced.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    Measured(Box<Measured>),
    MaxRate(crate::find_max::MaxRate),
    /// The build cannot serve this scenario: reported as "not supported by REF".
    Unsupported {
        reason: String,
    },
    /// The build can serve it but the run broke (crash, h2load failure, no success at all).
    Failed {
        reason: String,
    },
}

impl From<StartError> for Outcome {
    fn from(err: StartError) -> Outcome {
        match err {
            StartError::Unsupported(reason) => Outcome::Unsupported { reason },
            StartError::Failed(err) => Outcome::Failed {
                reason: format!("{err:#}"),
            },
        }
    }
}

/// The figures of one measured run.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    pub h2load: h2load::Report,
    /// Server CPU seconds (user + system, all threads) during the measured run only.
    pub cpu_secs: f64,
    /// Responses the server sent in the measured run, successful or not.
    pub responses: u64,
    pub cpu_secs_per_100k: f64,
    /// The part of `cpu_secs` spent in user space (utime over utime + stime), in percent: what
    /// is left to Squall's own code once the kernel's share (TCP, io_uring) is taken out.
    pub user_share: f64,
    /// CPU seconds of the whole machine (every core: the server, the load generator, the
    /// origin, and the kernel's softirq work wherever it is booked) per 100k responses: the
    /// honest total when the kernel books a server's work on the client's core (large
    /// responses drained by the receiver's ACKs), which the server's own figure misses.
    pub machine_cpu_secs_per_100k: f64,
    /// Of that, the softirq seconds (network receive and transmit processing) per 100k.
    pub softirq_secs_per_100k: f64,
}

impl Outcome {
    /// The figures this outcome contributes to the table, in table order.
    pub fn figures(&self) -> Vec<(Figure, f64)> {
        match self {
            Outcome::Measured(m) => m.figures(),
            Outcome::MaxRate(max) => max.figures(),
            Outcome::Unsupported { .. } | Outcome::Failed { .. } => Vec::new(),
        }
    }

    /// A few words for the progress line.
    pub fn brief(&self) -> String {
        match self {
            Outcome::Measured(m) => format!(
                "{:.0} req/s, {:.3} CPU s per 100k requests, mean latency {:.2} ms",
                m.h2load.req_per_sec,
                m.cpu_secs_per_100k,
                m.h2load.request.mean_us / 1e3
            ),
            Outcome::MaxRate(max) => match max.max_rate {
                Some(rate) => format!("max rate {rate:.0} req/s"),
                None => "no rate met the latency and success bounds".into(),
            },
            Outcome::Unsupported { reason } => format!("not supported: {reason}"),
            Outcome::Failed { reason } => format!("failed: {reason}"),
        }
    }
}

impl Measured {
    fn figures(&self) -> Vec<(Figure, f64)> {
        let r = &self.h2load;
        vec![
            (Figure::ReqPerSec, r.req_per_sec),
            (Figure::CpuPer100k, self.cpu_secs_per_100k),
            (Figure::UserShare, self.user_share),
            (Figure::MachineCpuPer100k, self.machine_cpu_secs_per_100k),
            (Figure::SoftirqPer100k, self.softirq_secs_per_100k),
            (Figure::LatencyMean, r.request.mean_us / 1e3),
            (Figure::LatencySd, r.request.sd_us / 1e3),
            (Figure::LatencyMax, r.request.max_us / 1e3),
            (Figure::ConnectMean, r.connect.mean_us / 1e3),
            (Figure::FirstByteMean, r.first_byte.mean_us / 1e3),
            (Figure::Succeeded, r.succeeded as f64),
            (Figure::Failed, r.http_failures() as f64),
            (Figure::Errored, r.errored as f64),
        ]
    }
}

/// The h2load plan for a scenario: `secs` of load (or its request count, for `close`
/// scenarios), at `rate` in total when open-loop.
pub fn plan(
    scenario: &Scenario,
    settings: &Settings,
    port: u16,
    secs: u32,
    rate: Option<f64>,
) -> Plan {
    let load = &scenario.load;
    let url = format!("{}://127.0.0.1:{port}{}", load.scheme(), load.path);
    let connections = settings.connections.unwrap_or(load.connections).max(1);
    let mut headers = load.headers.clone();
    if load.close {
        headers.push("Connection: close".into());
    }
    if load.new_client_per_request() {
        // Rate mode: a new h2load client (with no TLS session to resume) for every request,
        // paced at `rate` or `close_rate` new connections per second.
        let pace = ConnectRate::per_sec(rate.unwrap_or(f64::from(load.close_rate)));
        let count = (pace.actual_per_sec() * f64::from(secs)).round().max(1.0);
        let count = count.min(f64::from(u32::MAX)) as u32;
        return Plan {
            url,
            connections: count,
            streams: 1,
            headers,
            stop: Stop::Count(u64::from(count)),
            rate: None,
            connect_rate: Some(pace),
            protocol: load.protocol,
        };
    }
    let (streams, stop) = if load.close {
        let per_sec = rate.unwrap_or(f64::from(load.close_rate));
        // h2load refuses fewer requests than clients.
        let count = (per_sec * f64::from(secs))
            .round()
            .max(f64::from(connections)) as u64;
        (1, Stop::Count(count))
    } else {
        (
            settings.streams.unwrap_or(load.streams).max(1),
            Stop::Duration(secs),
        )
    };
    Plan {
        url,
        connections,
        streams,
        headers,
        stop,
        rate,
        connect_rate: None,
        protocol: load.protocol,
    }
}

/// A started, probed server for one build and scenario, with its run folder.
pub struct Started {
    pub server: Server,
    pub port: u16,
    pub dir: PathBuf,
}

/// Starts `build` on `scenario` in `dir` and checks that it answers the scenario's request
/// with the expected status. Anything short of that is `Unsupported` or `Failed`.
pub fn start(
    build: &Build,
    scenario: &Scenario,
    settings: &Settings,
    dir: &Path,
) -> Result<Started, Outcome> {
    let unsupported = |reason: String| Outcome::Unsupported { reason };
    let failed = |err: anyhow::Error| Outcome::Failed {
        reason: format!("{err:#}"),
    };
    let target = build
        .target
        .as_ref()
        .map_err(|reason| unsupported(reason.clone()))?;
    fs::create_dir_all(dir).map_err(|err| failed(err.into()))?;
    let port = free_port().map_err(failed)?;
    let spec = server_spec(target, scenario, settings, dir, port)?;
    let server = Server::start(&spec)?;
    let load = &scenario.load;
    let path = &load.path;
    let probe = match (load.tls, load.protocol) {
        (false, Protocol::H1) => server.probe(path),
        // curl has no HTTP/3 here: HTTP/2 on the same listener's TCP side, and h3load checks
        // the QUIC side itself (ALPN h3, statuses counted).
        (tls, Protocol::H3) => server.probe_curl(path, tls, Protocol::H2),
        (tls, protocol) => server.probe_curl(path, tls, protocol),
    };
    let over = match load.protocol {
        Protocol::H3 => " over TLS (h2) on the TCP side of the h3 listener",
        _ => load.over(),
    };
    match probe {
        Ok(status) if status == scenario.load.expect_status => Ok(Started {
            server,
            port,
            dir: dir.into(),
        }),
        Ok(status) => Err(unsupported(format!(
            "it answered GET {path}{over} with {status}, not {}",
            scenario.load.expect_status
        ))),
        Err(err) => Err(unsupported(format!(
            "it did not answer GET {path}{over}: {err:#}"
        ))),
    }
}

/// One measured run on a fresh server.
pub fn measure(build: &Build, scenario: &Scenario, settings: &Settings, dir: &Path) -> Outcome {
    let mut started = match start(build, scenario, settings, dir) {
        Ok(started) => started,
        Err(outcome) => return outcome,
    };
    match measure_started(&mut started, scenario, settings) {
        Ok(measured) => {
            if let Err(err) = started.server.stop() {
                eprintln!("bench: warning: {err:#}");
            }
            Outcome::Measured(Box::new(measured))
        }
        // Dropping the server kills it.
        Err(err) => Outcome::Failed {
            reason: format!("{err:#}"),
        },
    }
}

fn measure_started(
    started: &mut Started,
    scenario: &Scenario,
    settings: &Settings,
) -> Result<Measured> {
    let Started { server, port, dir } = started;
    if settings.warmup_secs > 0 {
        let warmup = plan(
            scenario,
            settings,
            *port,
            settings.warmup_secs,
            settings.rate,
        );
        let name = report_name("warmup.", &warmup);
        run_h2load(&warmup, settings, &dir.join(name))?;
    }
    let before = server.cpu_secs(settings.clock_ticks)?;
    let user_before = user_secs(server, settings.clock_ticks)?;
    let machine_before = MachineTicks::read()?;
    let measured = plan(
        scenario,
        settings,
        *port,
        settings.duration_secs,
        settings.rate,
    );
    let name = report_name("", &measured);
    let report = run_h2load(&measured, settings, &dir.join(name));
    // Read the CPU time while the process still exists, before judging the report.
    let after = server.cpu_secs(settings.clock_ticks);
    let user_after = user_secs(server, settings.clock_ticks);
    let machine = MachineTicks::read()?.since(machine_before);
    let report = report?;
    if !server.running() {
        bail!("the server exited during the run: {}", server.log_tail());
    }
    let after = after?;
    let user = user_after? - user_before;
    check_protocol(&report, &scenario.load)?;
    let responses = report.succeeded + report.http_failures();
    if report.succeeded == 0 {
        bail!(
            "no successful response: {} failed, {} errored, {} timed out",
            report.failed,
            report.errored,
            report.timeout
        );
    }
    let cpu_secs = after - before;
    let per_100k = |ticks: u64| ticks as f64 / settings.clock_ticks / responses as f64 * 1e5;
    Ok(Measured {
        cpu_secs_per_100k: cpu_secs / responses as f64 * 1e5,
        machine_cpu_secs_per_100k: per_100k(machine.busy),
        softirq_secs_per_100k: per_100k(machine.softirq),
        user_share: if cpu_secs > 0.0 {
            (user / cpu_secs * 100.0).clamp(0.0, 100.0)
        } else {
            f64::NAN
        },
        cpu_secs,
        responses,
        h2load: report,
    })
}

/// The user-space CPU seconds (utime) of the server and its descendants so far: read next to
/// [`Server::cpu_secs`] (utime + stime) for the user/kernel split of a run.
fn user_secs(server: &Server, clock_ticks: f64) -> Result<f64> {
    let pid = server.pid();
    let mut ticks = 0;
    for pid in std::iter::once(pid).chain(crate::server::descendants(pid)) {
        let path = format!("/proc/{pid}/stat");
        match fs::read_to_string(&path) {
            Ok(stat) => ticks += utime_ticks(&stat).with_context(|| format!("parsing {path}"))?,
            Err(err) if pid == server.pid() => {
                return Err(err).with_context(|| format!("reading {path}"));
            }
            // A child may end between listing and reading.
            Err(_) => {}
        }
    }
    Ok(ticks as f64 / clock_ticks)
}

/// The machine's CPU time so far, from the `cpu` line of `/proc/stat` (every core), in
/// clock ticks: what was busy (user, nice, system, irq, softirq, steal; guest time is inside
/// user already) and, of that, softirq.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MachineTicks {
    busy: u64,
    softirq: u64,
}

impl MachineTicks {
    fn read() -> Result<MachineTicks> {
        let stat = fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
        MachineTicks::parse(&stat).context("parsing the cpu line of /proc/stat")
    }

    fn parse(stat: &str) -> Option<MachineTicks> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let fields: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        // user nice system idle iowait irq softirq steal ...
        let at = |i: usize| fields.get(i).copied().unwrap_or(0);
        (fields.len() >= 7).then(|| MachineTicks {
            busy: at(0) + at(1) + at(2) + at(5) + at(6) + at(7),
            softirq: at(6),
        })
    }

    /// What was spent since `earlier`.
    fn since(self, earlier: MachineTicks) -> MachineTicks {
        MachineTicks {
            busy: self.busy.saturating_sub(earlier.busy),
            softirq: self.softirq.saturating_sub(earlier.softirq),
        }
    }
}

/// utime, field 14 of `/proc/PID/stat`, counted after the parenthesised command name.
fn utime_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(11)?.parse().ok()
}

/// Fails a run in which h2load spoke another protocol than the scenario's, as h2load over TLS
/// does when a server offers only `http/1.1` by ALPN. h3load always says what it spoke (ALPN
/// `h3` is all it offers); a report without it had no connection established.
fn check_protocol(report: &h2load::Report, load: &Load) -> Result<()> {
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

/// Runs the plan's load generator (h2load, or h3load for HTTP/3) pinned to the load CPU, its
/// report saved to `output`, and parses the report.
pub fn run_h2load(plan: &Plan, settings: &Settings, output: &Path) -> Result<h2load::Report> {
    let cpu = settings.load_cpu;
    let tool = plan.tool();
    let file = File::create(output).with_context(|| format!("creating {}", output.display()))?;
    let errors = output.with_extension("stderr.txt");
    let mut command = Command::new("taskset");
    command.arg("-c").arg(cpu.to_string());
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
fn report_name(prefix: &str, plan: &Plan) -> String {
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

/// What to start for `target`: writes the config into `dir` and, for Squall, validates it with
/// `squall check` first, so that a build lacking a feature says so in its own words.
fn server_spec(
    target: &Target,
    scenario: &Scenario,
    settings: &Settings,
    dir: &Path,
    port: u16,
) -> Result<Spec, StartError> {
    let addr = ([127, 0, 0, 1], port).into();
    let log = dir.join("server.log");
    match target {
        Target::Squall(bin) => {
            let config = dir.join("squall.toml");
            fs::write(&config, scenario.squall_config(port)?).context("writing squall.toml")?;
            squall_check(bin, &config)?;
            let args = vec!["--config".into(), config.to_string_lossy().into_owned()];
            Ok(Spec {
                program: bin.clone(),
                args,
                cpu: settings.server_cpu,
                log,
                addr,
            })
        }
        Target::Peer(peer, bin) => {
            let layout = crate::peer::Layout {
                dir,
                port,
                protocol: scenario.load.protocol,
                root: running_as_root(),
            };
            let launch = crate::peer::launch(*peer, &scenario.squall_table(port), &layout)
                .map_err(StartError::Unsupported)?;
            if let Some(certificate) = &launch.self_signed {
                self_signed_certificate(certificate)?;
            }
            for (path, contents) in &launch.files {
                fs::write(path, contents).with_context(|| format!("writing {}", path.display()))?;
            }
            Ok(Spec {
                program: bin.clone(),
                args: launch.args,
                cpu: settings.server_cpu,
                log,
                addr,
            })
        }
    }
}

/// Whether this process runs as root (`Uid:` in `/proc/self/status`, real uid first), which
/// h2o needs to be told.
fn running_as_root() -> bool {
    fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|line| line.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().next())
            == Some("0")
    })
}

/// Generates the certificate and key a peer serves, as Squall's `self_signed = true` does in
/// memory: ECDSA P-256, signed with SHA-256.
fn self_signed_certificate(certificate: &crate::peer::SelfSigned) -> Result<()> {
    let log_path = certificate.cert.with_file_name("openssl.txt");
    let log = File::create(&log_path).context("creating openssl.txt")?;
    let mut child = Command::new("openssl")
        .args(certificate.openssl_args())
        .stdin(Stdio::null())
        .stdout(log.try_clone().context("duplicating openssl.txt")?)
        .stderr(log)
        .spawn()
        .context("running openssl req")?;
    match wait_bounded(&mut child, CHECK_TIMEOUT)? {
        Some(status) if status.success() => Ok(()),
        Some(status) => {
            let text = fs::read_to_string(&log_path).unwrap_or_default();
            bail!("openssl req failed ({status}): {}", last_line(&text))
        }
        None => bail!("openssl req did not finish"),
    }
}

fn squall_check(bin: &Path, config: &Path) -> Result<(), StartError> {
    let output_path = config.with_file_name("check.txt");
    let output = File::create(&output_path).context("creating check.txt")?;
    let mut child = Command::new(bin)
        .arg("check")
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(output.try_clone().context("duplicating check.txt")?)
        .stderr(output)
        .spawn()
        .with_context(|| format!("running {} check", bin.display()))?;
    let status = wait_bounded(&mut child, CHECK_TIMEOUT)?;
    let text = fs::read_to_string(&output_path).unwrap_or_default();
    match status {
        Some(status) if status.success() => Ok(()),
        Some(status) => Err(StartError::Unsupported(format!(
            "`squall check` rejected the config ({status}): {}",
            text.lines().next().unwrap_or("no output")
        ))),
        None => Err(StartError::Unsupported(
            "`squall check` did not finish".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(load: &str) -> Scenario {
        let text = format!(
            "description = \"t\"\n[load]\n{load}\n[squall]\nconfig = '''\n[[listen]]\n\
             address = \"127.0.0.1:1\"\n[[vhost]]\nhosts = [\"*\"]\n'''\n"
        );
        Scenario::parse("t", &text, Path::new(".")).expect("valid scenario")
    }

    fn settings() -> Settings {
        Settings {
            duration_secs: 10,
            warmup_secs: 1,
            connections: None,
            streams: None,
            rate: None,
            server_cpu: 1,
            load_cpu: 0,
            clock_ticks: 100.0,
            h3load: None,
        }
    }

    #[test]
    fn machine_ticks_from_proc_stat() {
        let stat = "cpu  100 5 50 9000 7 3 40 2 0 0\ncpu0 50 2 25 4500 3 1 20 1 0 0\nintr 1 2\n";
        let ticks = MachineTicks::parse(stat).unwrap();
        assert_eq!(
            ticks,
            MachineTicks {
                busy: 200,
                softirq: 40
            }
        );
        let later = MachineTicks {
            busy: 260,
            softirq: 55,
        };
        assert_eq!(
            later.since(ticks),
            MachineTicks {
                busy: 60,
                softirq: 15
            }
        );
        assert_eq!(MachineTicks::parse("cpu0 1 2 3\n"), None);
        assert_eq!(MachineTicks::parse("cpu  1 2 x 4 5 6 7\n"), None);
    }

    #[test]
    fn utime_from_proc_stat() {
        let stat = "5539 (nginx: worker) S 1 5539 5539 0 -1 4194624 530 0 0 0 1234 567 0 0 20 0 \
                    1 0 12345 0 0 18446744073709551615";
        assert_eq!(utime_ticks(stat), Some(1234));
        assert_eq!(utime_ticks("1 (a) b) S 0 0 0 0 0 0 0 0 0 0 7 8 0"), Some(7));
        assert_eq!(utime_ticks("garbage"), None);
    }

    #[test]
    fn a_run_in_another_protocol_fails() {
        let report = |spoken: Option<&str>| h2load::Report {
            application_protocol: spoken.map(String::from),
            ..h2load::Report::default()
        };
        let h1 = scenario("path = \"/\"\nconnections = 1");
        let h2 = scenario("path = \"/\"\nconnections = 1\nprotocol = \"h2\"");
        assert!(check_protocol(&report(Some("http/1.1")), &h1.load).is_ok());
        assert!(check_protocol(&report(None), &h1.load).is_ok());
        assert!(check_protocol(&report(Some("h2c")), &h2.load).is_ok());
        assert!(check_protocol(&report(Some("h2")), &h2.load).is_ok());
        let err = check_protocol(&report(Some("http/1.1")), &h2.load).expect_err("fell back");
        assert_eq!(format!("{err}"), "h2load spoke http/1.1, not h2 or h2c");
        assert!(check_protocol(&report(Some("h2")), &h1.load).is_err());
        let plan = plan(&h2, &settings(), 9, 10, None);
        assert_eq!(plan.protocol, Protocol::H2);
        assert!(!plan.args().contains(&"--h1".to_string()));
    }

    #[test]
    fn http3_runs_are_h3loads_and_must_speak_h3() {
        let text = "description = \"t\"\n[load]\npath = \"/\"\nconnections = 20\nstreams = 10\n\
                    tls = true\nprotocol = \"h3\"\n[squall]\nconfig = \"\"\"\n[[listen]]\n\
                    address = \"127.0.0.1:1\"\ntls = true\nprotocols = [\"h2\", \"http1\", \"h3\"]\n\
                    \"\"\"\n";
        let h3 = Scenario::parse("t", text, Path::new(".")).expect("valid scenario");
        let report = |spoken: Option<&str>| h2load::Report {
            application_protocol: spoken.map(String::from),
            ..h2load::Report::default()
        };
        assert!(check_protocol(&report(Some("h3")), &h3.load).is_ok());
        let err = check_protocol(&report(None), &h3.load).expect_err("no connection");
        assert_eq!(format!("{err}"), "h3load established no HTTP/3 connection");
        let err = check_protocol(&report(Some("h2")), &h3.load).expect_err("not h3");
        assert_eq!(format!("{err}"), "h3load spoke h2, not h3");
        let plan = plan(&h3, &settings(), 9, 10, None);
        assert_eq!((plan.protocol, plan.tool()), (Protocol::H3, "h3load"));
        assert_eq!(
            plan.args().join(" "),
            "-c 20 -m 10 -D 10 https://127.0.0.1:9/"
        );
        assert_eq!(report_name("warmup.", &plan), "warmup.h3load.txt");
        assert_eq!(report_name("", &plan), "h3load.txt");
    }

    #[test]
    fn keepalive_plans_follow_the_scenario_then_the_flags() {
        let s = scenario("path = \"/a\"\nconnections = 64\nstreams = 16");
        let p = plan(&s, &settings(), 9, 10, None);
        assert_eq!(
            (p.connections, p.streams, p.stop),
            (64, 16, Stop::Duration(10))
        );
        assert_eq!(p.url, "http://127.0.0.1:9/a");
        let flags = Settings {
            connections: Some(8),
            streams: Some(2),
            ..settings()
        };
        let p = plan(&s, &flags, 9, 3, Some(800.0));
        assert_eq!(
            (p.connections, p.streams, p.stop, p.rate),
            (8, 2, Stop::Duration(3), Some(800.0))
        );
    }

    fn tls_scenario(load: &str) -> Scenario {
        let text = format!(
            "description = \"t\"\n[load]\ntls = true\n{load}\n[squall]\nconfig = '''\n\
             [[listen]]\naddress = \"127.0.0.1:1\"\ntls = true\n[[vhost]]\nhosts = [\"*\"]\n'''\n"
        );
        Scenario::parse("t", &text, Path::new(".")).expect("valid scenario")
    }

    #[test]
    fn tls_plans_use_https() {
        let s = tls_scenario("path = \"/a\"\nconnections = 64");
        let p = plan(&s, &settings(), 9, 10, None);
        assert_eq!(p.url, "https://127.0.0.1:9/a");
        assert_eq!(
            (p.connections, p.stop, p.connect_rate),
            (64, Stop::Duration(10), None)
        );
        assert!(p.args().contains(&"--h1".to_string()));
        // Resumed handshakes: the h1-close plan, over https.
        let s = tls_scenario("path = \"/\"\nconnections = 16\nclose = true\nclose_rate = 3000");
        let p = plan(&s, &settings(), 9, 2, None);
        assert_eq!(
            (p.connections, p.stop, p.connect_rate),
            (16, Stop::Count(6_000), None)
        );
        assert_eq!(p.url, "https://127.0.0.1:9/");
    }

    #[test]
    fn full_handshake_plans_start_a_client_per_request() {
        let s = tls_scenario(
            "path = \"/\"\nconnections = 16\nclose = true\nclose_rate = 1000\n\
             tls_resumption = false",
        );
        let p = plan(&s, &settings(), 9, 3, None);
        assert_eq!(p.url, "https://127.0.0.1:9/");
        let pace = ConnectRate {
            per_period: 10,
            period_ms: 10,
        };
        assert_eq!(p.connect_rate, Some(pace));
        // One request per client: as many clients as requests.
        assert_eq!(
            (p.connections, p.streams, p.stop),
            (3_000, 1, Stop::Count(3_000))
        );
        assert_eq!(p.rate, None);
        assert_eq!(p.headers, ["Connection: close"]);
        // --rate (and --find-max) set the pace; --connections does not apply.
        let flags = Settings {
            connections: Some(4),
            ..settings()
        };
        let p = plan(&s, &flags, 9, 2, Some(250.0));
        assert_eq!(p.connect_rate.map(|r| r.actual_per_sec()), Some(250.0));
        assert_eq!((p.connections, p.stop), (500, Stop::Count(500)));
    }

    #[test]
    fn close_plans_count_requests() {
        let s = scenario("path = \"/\"\nconnections = 16\nclose = true\nclose_rate = 3000");
        let p = plan(
            &s,
            &Settings {
                streams: Some(8),
                ..settings()
            },
            9,
            2,
            None,
        );
        assert_eq!((p.streams, p.stop), (1, Stop::Count(6_000)));
        assert_eq!(p.headers, ["Connection: close"]);
        assert_eq!(
            plan(&s, &settings(), 9, 2, Some(100.0)).stop,
            Stop::Count(200)
        );
        assert_eq!(plan(&s, &settings(), 9, 1, Some(1.0)).stop, Stop::Count(16));
    }
}
