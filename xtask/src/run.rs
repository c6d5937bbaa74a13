//! One run: a fresh server process for one build and one scenario, a warm-up, then a measured
//! h2load run with the server's CPU time read before and after it.
//!
//! Every file of the run (server config, server log, h2load's raw report) is kept in its own
//! folder under the output folder, so a surprising number can be traced back to its run; the
//! measured run's request log is read into latency percentiles and removed (`generator.rs`).

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use serde::Serialize;

use crate::build::Build;
use crate::h2load::{self, ConnectRate, Plan, Stop};
use crate::latency::Tails;
use crate::report::Figure;
use crate::scenario::{Protocol, Scenario};
use crate::server::{Server, StartError};
use crate::util::free_port;

mod cpu;
mod generator;
mod spec;

use cpu::{MachineTicks, user_secs};
pub use generator::run_h2load;
use generator::{check_protocol, report_name};

/// What every run of one bench shares.
#[derive(Debug, Clone)]
pub struct Settings {
    pub duration_secs: u32,
    pub warmup_secs: u32,
    pub connections: Option<u32>,
    pub streams: Option<u32>,
    /// Open-loop total rate (`--rate`).
    pub rate: Option<f64>,
    /// The CPUs the server is pinned to (`taskset`), and the load generator (h2load with a
    /// thread per CPU, up to one per connection; h3load has one thread).
    pub server_cpus: Vec<usize>,
    pub load_cpus: Vec<usize>,
    /// `--workers`: the server's worker count for these runs (Squall's `workers`, nginx's
    /// `worker_processes`, h2o's `num-threads`); the scenario's own when `None`.
    pub workers: Option<u32>,
    /// Whether the load generator logs every request for the latency percentiles (not with
    /// `--no-percentiles`).
    pub percentiles: bool,
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
    /// Latency percentiles from the load generator's request log, or why there are none.
    pub tails: Result<Tails, String>,
    /// The load generator's CPU use, in percent of the cores its threads could use: near 100,
    /// the client is the limit and requests/s measure it rather than the server.
    pub client_cpu_pct: f64,
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
                "{:.0} req/s, {:.3} CPU s per 100k requests, mean latency {:.2} ms, p99 {}, \
                 load generator at {:.0}% of its cores",
                m.h2load.req_per_sec,
                m.cpu_secs_per_100k,
                m.h2load.request.mean_us / 1e3,
                match m.tails.as_ref().map(|t| t.p99_ms) {
                    Ok(Some(p99)) => format!("{p99:.2} ms"),
                    _ => "n/a".into(),
                },
                m.client_cpu_pct
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
        let mut figures = vec![
            (Figure::ReqPerSec, r.req_per_sec),
            (Figure::CpuPer100k, self.cpu_secs_per_100k),
            (Figure::UserShare, self.user_share),
            (Figure::MachineCpuPer100k, self.machine_cpu_secs_per_100k),
            (Figure::SoftirqPer100k, self.softirq_secs_per_100k),
            (Figure::ClientCpuShare, self.client_cpu_pct),
            (Figure::LatencyMean, r.request.mean_us / 1e3),
            (Figure::LatencySd, r.request.sd_us / 1e3),
            (Figure::LatencyMax, r.request.max_us / 1e3),
            (Figure::ConnectMean, r.connect.mean_us / 1e3),
            (Figure::FirstByteMean, r.first_byte.mean_us / 1e3),
            (Figure::Succeeded, r.succeeded as f64),
            (Figure::Failed, r.http_failures() as f64),
            (Figure::Errored, r.errored as f64),
        ];
        // A percentile a run could not give is left out, never a zero (`report::notes` says
        // why).
        if let Ok(tails) = &self.tails {
            let percentiles = [
                (Figure::LatencyP50, tails.p50_ms),
                (Figure::LatencyP99, tails.p99_ms),
                (Figure::LatencyP999, tails.p999_ms),
            ];
            figures.extend(percentiles.into_iter().filter_map(|(f, v)| Some((f, v?))));
        }
        figures
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
            threads: load_threads(settings, load.protocol, count),
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
        threads: load_threads(settings, load.protocol, connections),
    }
}

/// The load generator's threads: h2load's `-t`, one per load CPU and at most one per client
/// (h2load refuses fewer clients than threads); h3load runs one.
fn load_threads(settings: &Settings, protocol: Protocol, clients: u32) -> u32 {
    match protocol {
        Protocol::H3 => 1,
        Protocol::H1 | Protocol::H2 => {
            let cpus = u32::try_from(settings.load_cpus.len()).unwrap_or(u32::MAX);
            cpus.clamp(1, clients.max(1))
        }
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
    let spec = spec::server_spec(target, scenario, settings, dir, port)?;
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
    let generated = generator::run_logged(&measured, settings, &dir.join(name));
    // Read the CPU time while the process still exists, before judging the report.
    let after = server.cpu_secs(settings.clock_ticks);
    let user_after = user_secs(server, settings.clock_ticks);
    let machine = MachineTicks::read()?.since(machine_before);
    let generated = generated?;
    let report = generated.report;
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
        tails: generated.tails,
        client_cpu_pct: generated.cpu_pct,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn scenario(load: &str) -> Scenario {
        let text = format!(
            "description = \"t\"\n[load]\n{load}\n[squall]\nconfig = '''\n[[listen]]\n\
             address = \"127.0.0.1:1\"\n[[vhost]]\nhosts = [\"*\"]\n'''\n"
        );
        Scenario::parse("t", &text, Path::new(".")).expect("valid scenario")
    }

    /// Settings tests of the bench start from: 10 s runs, the server on CPU 1, the load on 0.
    pub(crate) fn settings() -> Settings {
        Settings {
            duration_secs: 10,
            warmup_secs: 1,
            connections: None,
            streams: None,
            rate: None,
            server_cpus: vec![1],
            load_cpus: vec![0],
            workers: None,
            percentiles: true,
            clock_ticks: 100.0,
            h3load: None,
        }
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

    #[test]
    fn the_load_generator_gets_a_thread_per_load_cpu() {
        let s = scenario("path = \"/\"\nconnections = 4");
        let three = Settings {
            load_cpus: vec![1, 2, 3],
            ..settings()
        };
        assert_eq!(plan(&s, &settings(), 9, 10, None).threads, 1);
        assert_eq!(plan(&s, &three, 9, 10, None).threads, 3);
        // No more threads than clients.
        let eight = Settings {
            load_cpus: (0..8).collect(),
            ..settings()
        };
        assert_eq!(plan(&s, &eight, 9, 10, None).threads, 4);
        assert!(
            plan(&s, &eight, 9, 10, None)
                .args()
                .contains(&"-t".to_string())
        );
        let text = "description = \"t\"\n[load]\npath = \"/\"\nconnections = 20\ntls = true\n\
                    protocol = \"h3\"\n[squall]\nconfig = \"\"\"\n[[listen]]\n\
                    address = \"127.0.0.1:1\"\ntls = true\nprotocols = [\"h2\", \"h3\"]\n\"\"\"\n";
        let h3 = Scenario::parse("t", text, Path::new(".")).expect("valid scenario");
        assert_eq!(plan(&h3, &eight, 9, 10, None).threads, 1);
    }
}
