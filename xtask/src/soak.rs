//! `cargo xtask soak`: Squall under steady mixed traffic for minutes, with faults on a
//! schedule, sampled every second, judged at the end. A bench asks "how fast"; a soak asks
//! "does it stay well": no leak of memory or descriptors, no request lost to anything but a
//! dead origin, and the rate back soon after every fault.
//!
//! One run: build Squall in release (or take `--bin`), start a local nginx origin and Squall
//! with the soak config ([`config`]), start three h2load processes at fixed rates and an
//! upload client ([`traffic`]), run the faults ([`faults`]) on one thread while this one
//! samples RSS, descriptors and `/metrics` every second ([`sample`]), then turn the request
//! logs into per-second outcomes, judge them ([`verdict`]) and write `report.md`
//! ([`report`]), `soak.svg` ([`svg`]) and `samples.csv`. The exit status is the verdict.
//!
//! It never runs in CI or under `cargo test`: only its pure parts have unit tests.

mod config;
mod faults;
mod origin;
mod report;
mod sample;
mod svg;
mod traffic;
mod verdict;

use std::fmt::Write as _;
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::build::{self, Role, Target};
use crate::cli::SoakArgs;
use crate::layout::Layout;
use crate::server::{Server, Spec, StartError};
use crate::util::{free_port, last_line, utc_stamp, wait_bounded, which};
use config::Addrs;
use sample::Counters;
use verdict::{Fault, Second};

/// The CPU Squall is pinned to, and the one the generators and the origin share (as the bench).
const SERVER_CPU: usize = 1;
const LOAD_CPU: usize = 0;
/// How long h2load may run past the soak's end before it is killed.
const GENERATOR_SLACK: Duration = Duration::from_secs(30);
/// Bounds on `--duration`: long enough for a fault after warm-up, short enough to be bounded.
pub const DURATION_SECS_MIN: u64 = 60;
pub const DURATION_SECS_MAX: u64 = 24 * 3600;

/// One per-second sample of the process and its counters.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    rss_kib: u64,
    fds: u64,
    counters: Counters,
}

/// `10m`, `90s`, `1h`, `1h30m` or plain seconds, as `--duration` takes it.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let mut total = 0u64;
    let mut number = String::new();
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(format!("{text:?}: expected a number with h, m or s")),
        };
        let value: u64 = number
            .parse()
            .map_err(|_| format!("{text:?}: a unit without a number"))?;
        total = total.saturating_add(value.saturating_mul(unit));
        number.clear();
    }
    if !number.is_empty() {
        total = total.saturating_add(
            number
                .parse::<u64>()
                .map_err(|e| format!("{text:?}: {e}"))?,
        );
    }
    if !(DURATION_SECS_MIN..=DURATION_SECS_MAX).contains(&total) {
        return Err(format!(
            "{text:?}: a soak lasts from {DURATION_SECS_MIN} s to {DURATION_SECS_MAX} s"
        ));
    }
    Ok(Duration::from_secs(total))
}

pub fn main(args: &SoakArgs) -> Result<ExitCode> {
    for tool in ["h2load", "nginx", "taskset"] {
        if which(tool).is_none() {
            bail!(
                "the soak needs {tool} on PATH (apt-get install nghttp2-client nginx-light util-linux)"
            );
        }
    }
    let repo = crate::util::repo_root();
    let layout = Layout::from_env(&repo);
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| layout.target.join("soak").join(utc_stamp()));
    fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let bin = squall_binary(args, &repo, &layout)?;
    let secs = u32::try_from(args.duration.as_secs()).context("duration")?;
    let at = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let addrs = Addrs {
        plain: at(free_port()?),
        tls: at(free_port()?),
        admin: at(free_port()?),
        origin: at(free_port()?),
    };
    eprintln!(
        "soak: {secs} s at {} req/s with {}, results in {}",
        args.rate,
        bin.display(),
        out.display()
    );
    let mut origin = origin::Origin::start(&out.join("origin"), addrs.origin, LOAD_CPU)?;
    let config_path = out.join("squall.toml");
    fs::write(&config_path, config::squall(&addrs, 0))?;
    let server = start_squall(&bin, &config_path, &out, &addrs)?;
    for path in ["/cache/big", "/api/big"] {
        match traffic::fetch(addrs.plain, path)? {
            (200, bytes) if bytes > config::BIG_BYTES => {}
            (status, bytes) => bail!("GET {path} answered {status} with {bytes} bytes"),
        }
    }
    eprintln!("soak: primer (slowloris, slow readers and a flood at once, before the load)");
    let primer = faults::primer(&addrs).context("the primer")?;
    sleep(Duration::from_secs(2));
    let mut run = run_soak(
        &out,
        &addrs,
        &mut origin,
        &server,
        &config_path,
        args.rate,
        secs,
    )?;
    run.primer = primer;
    let stopped = match server.stop() {
        Ok(status) => format!("stopped by SIGTERM ({status})"),
        Err(err) => format!("**did not stop cleanly**: {err:#}"),
    };
    drop(origin);
    finish(&out, args, &bin, &addrs, run, &stopped)
}

/// The binary under test: `--bin`, or a release build of the working tree.
fn squall_binary(args: &SoakArgs, repo: &Path, layout: &Layout) -> Result<PathBuf> {
    let built = match &args.bin {
        Some(path) => build::prebuilt(Role::Head, path)?,
        None => build::working_tree(repo, layout, Role::Head)?,
    };
    match built.target {
        Ok(Target::Squall(path)) => Ok(path),
        Ok(Target::Peer(..)) => bail!("not a squall binary"),
        Err(why) => bail!("no squall binary: {why}"),
    }
}

/// Starts Squall and waits until its TLS and admin listeners answer too.
fn start_squall(bin: &Path, config: &Path, out: &Path, addrs: &Addrs) -> Result<Server> {
    let spec = Spec {
        program: bin.to_path_buf(),
        args: vec!["--config".into(), config.to_string_lossy().into_owned()],
        cpus: SERVER_CPU.to_string(),
        log: out.join("squall.log"),
        addr: addrs.plain,
    };
    let server = match Server::start(&spec) {
        Ok(server) => server,
        Err(StartError::Unsupported(why)) => bail!("squall did not start: {why}"),
        Err(StartError::Failed(err)) => return Err(err.context("starting squall")),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while sample::scrape(addrs.admin).is_err() || std::net::TcpStream::connect(addrs.tls).is_err() {
        if Instant::now() > deadline {
            bail!(
                "squall's admin or TLS listener did not answer: {}",
                server.log_tail()
            );
        }
        sleep(Duration::from_millis(50));
    }
    Ok(server)
}

/// What the run recorded.
struct Run {
    samples: Vec<Sample>,
    faults: Vec<Fault>,
    /// (succeeded, failed) per second, from every request log.
    outcomes: Vec<(u64, u64)>,
    generators: Vec<(String, String)>,
    /// Why sampling stopped early, if it did.
    aborted: Option<String>,
    /// What the primer saw, before the load.
    primer: String,
}

/// The soak proper: load, faults and sampling for `secs` seconds.
fn run_soak(
    out: &Path,
    addrs: &Addrs,
    origin: &mut origin::Origin,
    server: &Server,
    config_path: &Path,
    rate: f64,
    secs: u32,
) -> Result<Run> {
    let slots = faults::schedule(secs);
    let stop = AtomicBool::new(false);
    let uploads_log = out.join("requests-uploads.log");
    let t0_us = traffic::epoch_us();
    let t0 = Instant::now();
    let paths = config::load_paths();
    let mut generators =
        traffic::start(out, LOAD_CPU, (addrs.plain, addrs.tls), rate, secs, &paths)?;
    let (samples, aborted, fault_log, uploads) = std::thread::scope(|scope| {
        let uploads = scope.spawn(|| {
            traffic::uploads(
                addrs.plain,
                rate * traffic::UPLOAD_SHARE,
                &uploads_log,
                &stop,
            )
        });
        let fault_thread = scope.spawn(|| {
            let mut target = faults::Target {
                origin,
                squall_pid: server.pid(),
                config_path,
                addrs: *addrs,
            };
            faults::run(&slots, t0, &mut target, &stop)
        });
        let (samples, aborted) = sample_every_second(server.pid(), addrs.admin, t0, secs);
        stop.store(true, Ordering::Relaxed);
        let fault_log = fault_thread.join().unwrap_or_default();
        let uploads = uploads
            .join()
            .map_err(|_| anyhow::anyhow!("the upload thread panicked"));
        (samples, aborted, fault_log, uploads)
    });
    let mut summaries = Vec::new();
    let mut outcomes = vec![(0, 0); secs as usize];
    for generator in &mut generators {
        let status = wait_bounded(&mut generator.child, GENERATOR_SLACK)?;
        summaries.push((
            format!("h2load {}", generator.mix.name()),
            generator_summary(&generator.report, status),
        ));
        let log = fs::read_to_string(&generator.log).unwrap_or_default();
        traffic::per_second(&log, t0_us, secs, &mut outcomes);
    }
    let sent = uploads??;
    let log = fs::read_to_string(&uploads_log).unwrap_or_default();
    let mut upload_outcomes = vec![(0, 0); secs as usize];
    traffic::per_second(&log, t0_us, secs, &mut upload_outcomes);
    let (ok, failed) = upload_outcomes
        .iter()
        .fold((0, 0), |acc, o| (acc.0 + o.0, acc.1 + o.1));
    summaries.push((
        "uploads (POST /api/upload, 1-64 KiB)".into(),
        format!("{sent} sent: {ok} succeeded, {failed} failed"),
    ));
    for (total, upload) in outcomes.iter_mut().zip(&upload_outcomes) {
        total.0 += upload.0;
        total.1 += upload.1;
    }
    Ok(Run {
        samples,
        faults: fault_log,
        outcomes,
        generators: summaries,
        aborted,
        primer: String::new(),
    })
}

/// Samples the process and `/metrics` at the end of every second until `secs`, printing a line
/// every 30 s. Stops early, saying why, if Squall is gone.
fn sample_every_second(
    pid: u32,
    admin: SocketAddr,
    t0: Instant,
    secs: u32,
) -> (Vec<Sample>, Option<String>) {
    let mut samples = Vec::with_capacity(secs as usize);
    for t in 0..secs {
        let due = t0 + Duration::from_secs(u64::from(t) + 1);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            sleep(wait);
        }
        let (rss_kib, fds) = match sample::process(pid) {
            Ok(found) => found,
            Err(err) => return (samples, Some(format!("at {t} s: {err:#}"))),
        };
        let counters = sample::scrape(admin)
            .map(|text| Counters::from_text(&text))
            .unwrap_or_else(|err| {
                eprintln!("soak: {t} s: /metrics: {err:#}");
                samples
                    .last()
                    .map_or_else(Counters::default, |s: &Sample| s.counters)
            });
        if t % report::TABLE_EVERY_SECS == 0 {
            eprintln!(
                "soak: {t:5} s  RSS {:.1} MiB  fds {fds}  connections {}  requests {}",
                rss_kib as f64 / 1024.0,
                counters.connections_active,
                counters.requests_total
            );
        }
        samples.push(Sample {
            rss_kib,
            fds,
            counters,
        });
    }
    (samples, None)
}

/// One line from an h2load report: its totals, or why there are none.
fn generator_summary(report: &Path, status: Option<std::process::ExitStatus>) -> String {
    let text = fs::read_to_string(report).unwrap_or_default();
    match (status, crate::h2load::parse(&text)) {
        (None, _) => "did not finish and was killed".into(),
        (Some(status), _) if !status.success() => {
            let stderr =
                fs::read_to_string(report.with_extension("stderr.txt")).unwrap_or_default();
            format!("failed ({status}): {}", last_line(&stderr))
        }
        (Some(_), Ok(r)) => format!(
            "{} requests, {} succeeded, {} failed ({} without a response), {:.0} req/s, {}",
            r.done,
            r.succeeded,
            r.failed,
            r.errored,
            r.req_per_sec,
            r.application_protocol.as_deref().unwrap_or("?")
        ),
        (Some(_), Err(err)) => format!("unreadable report: {err:#}"),
    }
}

/// Judges the run, writes the report, the plot and the samples, and prints the verdict.
fn finish(
    out: &Path,
    args: &SoakArgs,
    bin: &Path,
    addrs: &Addrs,
    run: Run,
    stopped: &str,
) -> Result<ExitCode> {
    let secs = args.duration.as_secs() as u32;
    let seconds = seconds(&run);
    let warmup_secs = faults::warmup_secs(secs);
    let plan = verdict::Plan {
        rate: args.rate,
        warmup_secs,
    };
    let mut verdict = verdict::judge(plan, &seconds, &run.faults);
    if let Some(why) = &run.aborted {
        verdict.rules.push(verdict::Rule {
            name: "squall ran to the end",
            measured: format!("no: {why}"),
            threshold: "yes".into(),
            pass: false,
        });
    }
    let mut setup = String::new();
    let _ = writeln!(setup, "- binary: `{}`", bin.display());
    let _ = writeln!(
        setup,
        "- duration: {secs} s, planned rate: {} req/s (40% HTTP/1.1, 30% h2 over TLS, 25% h2c, 5% uploads)",
        args.rate
    );
    let _ = writeln!(setup, "- squall: {stopped}");
    let _ = writeln!(
        setup,
        "- primer, before the load: {}",
        run.primer.replace('|', "/")
    );
    setup.push_str(&config::describe(addrs));
    let text = report::markdown(&report::Summary {
        title: &format!("Squall soak, {}", utc_stamp()),
        setup: &setup,
        warmup_secs,
        verdict: &verdict,
        faults: &run.faults,
        generators: &run.generators,
        seconds: &seconds,
    });
    fs::write(out.join("report.md"), &text)?;
    fs::write(
        out.join("soak.svg"),
        svg::plot(&seconds, &run.faults, args.rate),
    )?;
    fs::write(out.join("samples.csv"), csv(&seconds))?;
    eprintln!(
        "\nsoak verdict: {}",
        if verdict.pass() { "PASS" } else { "FAIL" }
    );
    for rule in &verdict.rules {
        eprintln!(
            "  [{}] {}: {} (threshold {})",
            if rule.pass { "pass" } else { "FAIL" },
            rule.name,
            rule.measured,
            rule.threshold
        );
    }
    eprintln!("soak: report in {}", out.join("report.md").display());
    Ok(if verdict.pass() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Samples and outcomes joined second by second.
fn seconds(run: &Run) -> Vec<Second> {
    run.samples
        .iter()
        .zip(&run.outcomes)
        .enumerate()
        .map(|(t, (sample, &(ok, failed)))| Second {
            t: t as u32,
            rss_kib: sample.rss_kib,
            fds: sample.fds,
            connections: sample.counters.connections_active,
            ok,
            failed,
            requests_total: sample.counters.requests_total,
            cache_hits: sample.counters.cache_hits,
            cache_misses: sample.counters.cache_misses,
        })
        .collect()
}

/// Every second as CSV, for other tools.
fn csv(seconds: &[Second]) -> String {
    let mut text = String::from(
        "t,rss_kib,fds,connections,ok,failed,requests_total,cache_hits,cache_misses\n",
    );
    for s in seconds {
        let _ = writeln!(
            text,
            "{},{},{},{},{},{},{},{},{}",
            s.t,
            s.rss_kib,
            s.fds,
            s.connections,
            s.ok,
            s.failed,
            s.requests_total,
            s.cache_hits,
            s.cache_misses
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("120"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("30s").is_err());
        assert!(parse_duration("2d").is_err());
        assert!(parse_duration("m").is_err());
        assert!(parse_duration("25h").is_err());
    }

    #[test]
    fn the_csv_has_a_row_per_second() {
        let seconds: Vec<Second> = (0..3)
            .map(|t| Second {
                t,
                ok: 5,
                ..Second::default()
            })
            .collect();
        let text = csv(&seconds);
        assert_eq!(text.lines().count(), 4);
        assert!(text.lines().nth(2).unwrap().starts_with("1,0,0,0,5,0,"));
    }
}
