//! `cargo xtask bench`: the orchestration. Checks the tools, prepares both builds, runs every
//! scenario A B A B ... on fresh server processes, and writes the tables and raw results.
//!
//! Everything that decides a number lives in the modules it calls (`run`, `h2load`, `stats`,
//! `report`); this one only sequences them and talks to the person waiting.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::build::{self, Build, Role};
use crate::cli::BenchArgs;
use crate::h2load::Plan;
use crate::layout::Layout;
use crate::origin::Origin;
use crate::report::{self, Figure, ScenarioReport};
use crate::run::{self, Outcome, Settings};
use crate::scaling::{self, Pinning};
use crate::scenario::{self, OriginSection, Protocol, Scenario};
use crate::stats;
use crate::util::{clock_ticks, congestion_control, load_average, repo_root, utc_stamp};

mod preflight;

use preflight::preflight;

/// Raw results, written as `results.json`.
#[derive(Serialize)]
struct Results<'a> {
    command: Vec<String>,
    date_utc: &'a str,
    base: &'a str,
    head: &'a str,
    mode: &'a str,
    runs_per_build: u32,
    duration_secs: u32,
    warmup_secs: u32,
    /// Without `--workers`: the one CPU of each.
    server_cpu: usize,
    load_cpu: usize,
    /// `--workers`: the worker counts, each scenario run at each.
    workers: Vec<u32>,
    /// `/proc/loadavg` (1, 5, 15 min) before the first run and after the last.
    load_average_start: &'a str,
    load_average_end: &'a str,
    /// Figures whose runs scatter more than `NOISE_CV_MAX` for a build: no verdict.
    noise_cv_max: f64,
    noisy_figures: usize,
    scenarios: Vec<ScenarioResults<'a>>,
}

#[derive(Serialize)]
struct ScenarioResults<'a> {
    name: &'a str,
    /// `--workers`: this point's worker count and CPUs.
    workers: Option<u32>,
    pinning: Option<&'a Pinning>,
    summary: Vec<report::Row>,
    base_runs: &'a [Outcome],
    head_runs: &'a [Outcome],
    load_averages: &'a [RunLoad],
}

/// The load average before and after one run, so a noisy figure can be traced to a busy
/// machine.
#[derive(Serialize)]
struct RunLoad {
    role: &'static str,
    run: u32,
    before: String,
    after: String,
}

/// The load averages of the whole measurement and of each scenario's runs.
struct Loads {
    start: String,
    end: String,
    runs: Vec<Vec<RunLoad>>,
}

/// One invocation: what it compares, how, and where it writes.
struct Session<'a> {
    args: &'a BenchArgs,
    stamp: String,
    out: PathBuf,
    builds: [Build; 2],
    scenarios: Vec<Scenario>,
    /// What is measured, in order: each scenario, at each `--workers` count.
    points: Vec<Point>,
}

/// One scenario at one worker count (without `--workers`: at the scenario's own).
struct Point {
    /// Its index in `Session::scenarios`.
    scenario: usize,
    workers: Option<u32>,
    pinning: Option<Pinning>,
    settings: Settings,
}

/// The outcomes of one scenario: base's runs, then head's.
type ScenarioOutcomes = [Vec<Outcome>; 2];

/// Runs the bench; the exit code is 1 only for `--fail-above`.
pub fn main(args: &BenchArgs) -> Result<ExitCode> {
    let repo = repo_root();
    let all = scenario::load_all(&repo.join("bench/scenarios"))?;
    let mut scenarios = scenario::select(all, &args.scenarios)?;
    if args.list {
        for s in &scenarios {
            println!(
                "{:<24} {:>6} routes  {}",
                s.name,
                s.route_count(),
                s.description
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    preflight(args, &scenarios)?;
    let stamp = utc_stamp();
    let layout = Layout::from_env(&repo);
    let builds = builds(args, &repo, &layout)?;
    // Only now: a bench that cannot even resolve its builds leaves no empty results folder.
    let out = args.out.clone().unwrap_or_else(|| layout.results(&stamp));
    fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let workers = worker_counts(args);
    let cpus = match workers.is_empty() {
        true => Vec::new(),
        false => scaling::allowed_cpus()?,
    };
    // Origins are started before any run and stopped (dropped) on return; with `--workers`, on
    // the last CPU, which the load generator has (or shares with the server).
    let origin_cpu = cpus.last().copied().unwrap_or(args.load_cpu);
    let _origins = start_origins(&mut scenarios, origin_cpu, &out)?;
    write_sites(&mut scenarios, &out)?;
    let h3load = match scenarios.iter().any(|s| s.load.protocol == Protocol::H3) {
        true => Some(build::h3load(&repo, &layout)?),
        false => None,
    };
    let settings = Settings {
        duration_secs: args.duration,
        warmup_secs: args.warmup,
        connections: args.connections,
        streams: args.streams,
        rate: args.rate,
        server_cpus: vec![args.server_cpu],
        load_cpus: vec![args.load_cpu],
        workers: None,
        percentiles: !args.no_percentiles,
        clock_ticks: clock_ticks()?,
        h3load,
    };
    let points = points(scenarios.len(), &settings, &workers, &cpus)?;
    let session = Session {
        args,
        stamp,
        out,
        builds,
        scenarios,
        points,
    };
    let start = load_average();
    eprintln!("bench: load average (1, 5, 15 min) before the first run: {start}");
    let (outcomes, runs): (Vec<ScenarioOutcomes>, Vec<Vec<RunLoad>>) = session
        .points
        .iter()
        .map(|point| session.run_point(point))
        .unzip();
    let end = load_average();
    eprintln!("bench: load average (1, 5, 15 min) after the last run: {end}");
    let loads = Loads { start, end, runs };
    let markdown = session.markdown(&outcomes, &loads);
    session.write(&outcomes, &loads, &markdown)?;
    print!("{markdown}");
    let noisy = noisy_figures(&outcomes);
    if noisy > 0 {
        eprintln!("bench: {}", noisy_words(noisy));
    }
    eprintln!("bench: results in {}", session.out.display());
    Ok(session.fail_above(&outcomes))
}

/// The worker counts of `--workers`, smallest first, each once.
fn worker_counts(args: &BenchArgs) -> Vec<u32> {
    let mut workers = args.workers.clone();
    workers.sort_unstable();
    workers.dedup();
    workers
}

/// What to measure: each scenario once with `settings`; with `--workers`, each scenario at each
/// worker count, the server and the load generator pinned as `scaling::pinning` says.
fn points(
    scenarios: usize,
    settings: &Settings,
    workers: &[u32],
    cpus: &[usize],
) -> Result<Vec<Point>> {
    let mut points = Vec::new();
    for scenario in 0..scenarios {
        if workers.is_empty() {
            points.push(Point {
                scenario,
                workers: None,
                pinning: None,
                settings: settings.clone(),
            });
        }
        for &count in workers {
            let pinning = scaling::pinning(cpus, count).context("no CPU to run on")?;
            points.push(Point {
                scenario,
                workers: Some(count),
                settings: Settings {
                    server_cpus: pinning.server.clone(),
                    load_cpus: pinning.load.clone(),
                    workers: Some(count),
                    ..settings.clone()
                },
                pinning: Some(pinning),
            });
        }
    }
    Ok(points)
}

/// How many figures, over all scenarios, are too noisy for a verdict.
fn noisy_figures(outcomes: &[ScenarioOutcomes]) -> usize {
    outcomes
        .iter()
        .map(|[b, h]| report::noisy_count(&report::rows(b, h)))
        .sum()
}

fn noisy_words(noisy: usize) -> String {
    format!(
        "{noisy} figure{s} noisy (a build's runs scatter by a coefficient of variation over \
         {cv:.0}%): no verdict for {them}; rerun on a quieter machine (see the load averages)",
        s = if noisy == 1 { " is" } else { "s are" },
        cv = stats::NOISE_CV_MAX * 100.0,
        them = if noisy == 1 { "it" } else { "them" },
    )
}

/// One origin for each distinct `[origin]` section, shared by the scenarios that have the same
/// one, each scenario pointed at its own.
fn start_origins(scenarios: &mut [Scenario], cpu: usize, out: &Path) -> Result<Vec<Origin>> {
    let mut started: Vec<(OriginSection, Origin)> = Vec::new();
    for scenario in scenarios.iter_mut() {
        let Some(section) = scenario.origin.clone() else {
            continue;
        };
        let addr = match started.iter().find(|(s, _)| *s == section) {
            Some((_, origin)) => origin.addr,
            None => {
                let dir = out.join("origins").join(&scenario.name);
                let origin = crate::origin::start(&section, cpu, &dir)
                    .with_context(|| format!("the origin of {}", scenario.name))?;
                let addr = origin.addr;
                started.push((section, origin));
                addr
            }
        };
        scenario.set_origin_addr(addr);
    }
    Ok(started.into_iter().map(|(_, origin)| origin).collect())
}

/// The files of each scenario's `[files]`, in `OUT/sites/SCENARIO/`: bytes of a repeating
/// pattern (not zeros, which a file system may store sparse and a compressor would flatter).
fn write_sites(scenarios: &mut [Scenario], out: &Path) -> Result<()> {
    for scenario in scenarios.iter_mut().filter(|s| !s.files.is_empty()) {
        let dir = out.join("sites").join(&scenario.name);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for (name, &bytes) in &scenario.files {
            let body: Vec<u8> = (0..bytes).map(|i| b'a' + (i % 26) as u8).collect();
            let path = dir.join(name);
            std::fs::write(&path, body).with_context(|| format!("writing {}", path.display()))?;
        }
        let dir = dir.canonicalize().context("the site folder")?;
        scenario.set_site_dir(dir);
    }
    Ok(())
}

fn builds(args: &BenchArgs, repo: &Path, layout: &Layout) -> Result<[Build; 2]> {
    let base = match (args.vs, &args.base_bin) {
        (Some(peer), _) => build::peer(peer)?,
        (None, Some(bin)) => build::prebuilt(Role::Base, bin)?,
        (None, None) => build::at_ref(repo, layout, Role::Base, &args.base)?,
    };
    let head = match (&args.head_bin, &args.head) {
        (Some(bin), _) => build::prebuilt(Role::Head, bin)?,
        (None, Some(refname)) => build::at_ref(repo, layout, Role::Head, refname)?,
        (None, None) => build::working_tree(repo, layout, Role::Head)?,
    };
    for b in [&base, &head] {
        if let Err(reason) = &b.target {
            eprintln!(
                "bench: {} {}: not available: {reason}",
                b.role.as_str(),
                b.name
            );
        }
    }
    Ok([base, head])
}

impl Session<'_> {
    /// All runs of one scenario (at one worker count), interleaved base, head, base, head ...
    /// A build that cannot run the scenario is asked once, not once per run.
    fn run_point(&self, point: &Point) -> (ScenarioOutcomes, Vec<RunLoad>) {
        let scenario = &self.scenarios[point.scenario];
        let label = point_label(scenario, point);
        let runs = self.args.runs;
        let mut outcomes: ScenarioOutcomes = [Vec::new(), Vec::new()];
        let mut loads = Vec::new();
        for run in 1..=runs {
            for (build, outcomes) in self.builds.iter().zip(outcomes.iter_mut()) {
                if matches!(outcomes.last(), Some(Outcome::Unsupported { .. })) {
                    continue;
                }
                let role = build.role.as_str();
                eprintln!("bench: {label}: {role} {}: run {run} of {runs}", build.name);
                let mut dir = self.out.join("runs").join(&scenario.name);
                if let Some(workers) = point.workers {
                    dir.push(format!("workers-{workers}"));
                }
                let dir = dir.join(format!("{role}-{run}"));
                let before = load_average();
                let outcome = if self.args.find_max {
                    crate::find_max::search(build, scenario, &point.settings, &dir)
                } else {
                    run::measure(build, scenario, &point.settings, &dir)
                };
                let after = load_average();
                eprintln!("bench:   {}", outcome.brief());
                eprintln!("bench:   load average {before} before, {after} after");
                outcomes.push(outcome);
                loads.push(RunLoad {
                    role,
                    run,
                    before,
                    after,
                });
            }
        }
        (outcomes, loads)
    }

    fn mode(&self) -> String {
        match (self.args.find_max, self.args.rate) {
            (true, _) => "find-max".into(),
            (false, Some(rate)) => format!("open loop at {rate} req/s"),
            (false, None) => "closed loop".into(),
        }
    }

    /// The load of a scenario at a point in a few words, after the command-line overrides, and
    /// with `--workers` where the server and the load generator run.
    fn load_words(&self, scenario: &Scenario, point: &Point) -> String {
        let settings = &point.settings;
        let plan = run::plan(scenario, settings, 0, settings.duration_secs, settings.rate);
        let words = load_words(scenario, &plan);
        let Some(pinning) = &point.pinning else {
            return words;
        };
        format!(
            "{words}; server on {}, {} on {}{}{}",
            scaling::cpus_words(&pinning.server),
            plan.tool(),
            scaling::cpus_words(&pinning.load),
            match plan.threads {
                1 => String::new(),
                threads => format!(" with {threads} threads"),
            },
            if pinning.shared {
                ": shared cores, a rough check only"
            } else {
                ""
            }
        )
    }

    /// Where the server and the load generator run, for the heading.
    fn pinning_words(&self) -> String {
        let args = self.args;
        if args.workers.is_empty() {
            return format!(
                "server on CPU {}, h2load on CPU {}",
                args.server_cpu, args.load_cpu
            );
        }
        let counts: Vec<String> = worker_counts(args).iter().map(u32::to_string).collect();
        format!(
            "at {} workers: the server on the first N CPUs with N workers, the load generator on \
             the rest (h2load with a thread per CPU; h3load has one), sharing the last CPU where \
             none is left",
            counts.join(", ")
        )
    }

    fn markdown(&self, outcomes: &[ScenarioOutcomes], loads: &Loads) -> String {
        let args = self.args;
        let [base, head] = &self.builds;
        let mut out = format!(
            "# Squall bench {} UTC\n\n`{}`\n\n- base: {}\n- head: {}\n- {} run{} per build, \
             interleaved; {} s measured after {} s warm-up; {}; {}\n\
             - load average (1, 5, 15 min): {} before the first run, {} after the last\n\
             - TCP congestion control: {}\n\n",
            self.stamp,
            command_line().join(" "),
            base.name,
            head.name,
            args.runs,
            if args.runs == 1 { "" } else { "s" },
            args.duration,
            args.warmup,
            self.mode(),
            self.pinning_words(),
            loads.start,
            loads.end,
            congestion_control(),
        );
        for (index, scenario) in self.scenarios.iter().enumerate() {
            let mine: Vec<(&Point, &ScenarioOutcomes)> = (self.points.iter().zip(outcomes))
                .filter(|(point, _)| point.scenario == index)
                .collect();
            for (point, [b, h]) in &mine {
                out.push_str(&report::scenario_markdown(&ScenarioReport {
                    name: &point_label(scenario, point),
                    description: &scenario.description,
                    load: self.load_words(scenario, point),
                    base_name: &base.short,
                    head_name: &head.short,
                    base: b,
                    head: h,
                }));
            }
            if !args.workers.is_empty() {
                out.push_str(&self.scaling_table(scenario, &mine));
            }
        }
        let noisy = noisy_figures(outcomes);
        if noisy > 0 {
            out.push_str(&format!("**{}.**\n", noisy_words(noisy)));
        }
        out
    }

    /// The scaling table of one scenario's points: base's curve, then head's.
    fn scaling_table(&self, scenario: &Scenario, points: &[(&Point, &ScenarioOutcomes)]) -> String {
        let curves: Vec<scaling::Curve> = (self.builds.iter().enumerate())
            .map(|(side, build)| scaling::Curve {
                build: format!("{} {}", build.role.as_str(), build.short),
                points: (points.iter())
                    .filter_map(|(point, outcomes)| {
                        Some(scaling::Point {
                            workers: point.workers?,
                            pinning: point.pinning.as_ref()?,
                            outcomes: &outcomes[side],
                        })
                    })
                    .collect(),
            })
            .collect();
        scaling::table(&scenario.name, &curves)
    }

    /// `results.json` (raw runs and summaries) and `results.md` (the tables).
    fn write(&self, outcomes: &[ScenarioOutcomes], loads: &Loads, markdown: &str) -> Result<()> {
        let mode = self.mode();
        let results = Results {
            command: command_line(),
            date_utc: &self.stamp,
            base: &self.builds[0].name,
            head: &self.builds[1].name,
            mode: &mode,
            runs_per_build: self.args.runs,
            duration_secs: self.args.duration,
            warmup_secs: self.args.warmup,
            server_cpu: self.args.server_cpu,
            load_cpu: self.args.load_cpu,
            workers: worker_counts(self.args),
            load_average_start: &loads.start,
            load_average_end: &loads.end,
            noise_cv_max: stats::NOISE_CV_MAX,
            noisy_figures: noisy_figures(outcomes),
            scenarios: (self.points.iter())
                .zip(outcomes)
                .zip(&loads.runs)
                .map(|((point, [b, h]), runs)| ScenarioResults {
                    name: &self.scenarios[point.scenario].name,
                    workers: point.workers,
                    pinning: point.pinning.as_ref(),
                    summary: report::rows(b, h),
                    base_runs: b,
                    head_runs: h,
                    load_averages: runs,
                })
                .collect(),
        };
        let json = serde_json::to_string_pretty(&results)?;
        fs::write(self.out.join("results.json"), json)?;
        fs::write(self.out.join("results.md"), markdown)?;
        Ok(())
    }

    /// `--fail-above PCT`: exit 1 if any scenario's median CPU per request grew by more than
    /// PCT (at any worker count).
    fn fail_above(&self, outcomes: &[ScenarioOutcomes]) -> ExitCode {
        let Some(percent) = self.args.fail_above else {
            return ExitCode::SUCCESS;
        };
        let names: Vec<String> = (self.points.iter())
            .map(|point| point_label(&self.scenarios[point.scenario], point))
            .collect();
        let regressions = cpu_regressions(names.iter().map(String::as_str).zip(outcomes), percent);
        for line in &regressions {
            eprintln!("bench: {line}");
        }
        if regressions.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }
}

/// A point's name in the tables and progress lines: the scenario's, and its worker count.
fn point_label(scenario: &Scenario, point: &Point) -> String {
    match point.workers {
        None => scenario.name.clone(),
        Some(1) => format!("{}, 1 worker", scenario.name),
        Some(n) => format!("{}, {n} workers", scenario.name),
    }
}

/// One line per scenario whose median CPU per request, head over base, grew by more than
/// `percent`, or whose CPU per request is too noisy to tell (a gate that cannot see must not
/// pass). Scenarios where a build measured nothing have no ratio and do not count.
fn cpu_regressions<'a>(
    scenarios: impl Iterator<Item = (&'a str, &'a ScenarioOutcomes)>,
    percent: f64,
) -> Vec<String> {
    let mut lines = Vec::new();
    for (name, [b, h]) in scenarios {
        let row = report::rows(b, h)
            .into_iter()
            .find(|row| row.figure == Figure::CpuPer100k);
        let Some(report::Row {
            base: Some(base),
            head: Some(head),
            verdict,
            ..
        }) = row
        else {
            continue;
        };
        if verdict == Some(stats::Verdict::Noisy) {
            lines.push(format!(
                "{name}: CPU per request is noisy (coefficient of variation over {:.0}%), so \
                 --fail-above cannot tell: rerun",
                stats::NOISE_CV_MAX * 100.0
            ));
        } else if stats::regressed(&base, &head, percent) {
            let grown = (head.median / base.median - 1.0) * 100.0;
            lines.push(format!(
                "{name}: CPU per request grew by {grown:.1}%, more than {percent}%"
            ));
        }
    }
    lines
}

/// `64 connections × 1 in flight, GET /`, with what TLS and `close` change.
fn load_words(scenario: &Scenario, plan: &Plan) -> String {
    let load = &scenario.load;
    let get = format!("GET {}{}", load.path, load.over());
    if let Some(pace) = plan.connect_rate {
        return format!(
            "{get}, a new h2load client, connection and full TLS handshake per request, at {} \
             new connections/s",
            crate::report::number(pace.actual_per_sec(), 0)
        );
    }
    let close = match (load.close, load.tls) {
        (false, _) => "",
        (true, false) => ", a new connection per request",
        (true, true) => {
            ", a new connection per request: a client's first TLS handshake is full, the \
             next ones resume its session"
        }
    };
    format!(
        "{} connections × {} in flight, {get}{close}",
        plan.connections, plan.streams
    )
}

fn command_line() -> Vec<String> {
    let mut words = vec!["cargo".to_string(), "xtask".to_string()];
    words.extend(std::env::args().skip(1));
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h2load::Report;
    use crate::run::Measured;

    fn cpu(per_100k: f64) -> Outcome {
        Outcome::Measured(Box::new(Measured {
            h2load: Report {
                succeeded: 1,
                ..Report::default()
            },
            cpu_secs: per_100k,
            responses: 100_000,
            cpu_secs_per_100k: per_100k,
            user_share: 50.0,
            machine_cpu_secs_per_100k: 2.0,
            softirq_secs_per_100k: 0.1,
            tails: Err("not logged".into()),
            client_cpu_pct: 50.0,
        }))
    }

    #[test]
    fn load_words_say_what_tls_does() {
        let all = scenario::load_all(&repo_root().join("bench/scenarios")).expect("scenarios");
        let settings = crate::run::tests::settings();
        let words = |name: &str| {
            let s = all.iter().find(|s| s.name == name).expect("shipped");
            load_words(s, &run::plan(s, &settings, 1, 10, None))
        };
        assert_eq!(words("h1-small"), "64 connections × 1 in flight, GET /");
        assert_eq!(
            words("h1-close"),
            "16 connections × 1 in flight, GET /, a new connection per request"
        );
        assert_eq!(
            words("h1-tls-small"),
            "64 connections × 1 in flight, GET / over TLS"
        );
        assert_eq!(
            words("h2c-small"),
            "100 connections × 10 in flight, GET / over h2c"
        );
        assert_eq!(
            words("h2-tls-small-m100"),
            "100 connections × 100 in flight, GET / over TLS (h2)"
        );
        assert_eq!(
            words("h3-small"),
            "100 connections × 10 in flight, GET / over QUIC (h3)"
        );
        let handshake = words("h1-tls-handshake");
        assert!(
            handshake.starts_with("GET / over TLS, a new h2load client, connection and full TLS")
                && handshake.ends_with("at 500 new connections/s"),
            "{handshake}"
        );
        let text = "description = \"d\"\n[load]\npath = \"/\"\nconnections = 16\nclose = true\n\
                    tls = true\n[squall]\nconfig = \"[[listen]]\\naddress = 'x'\\ntls = true\"\n";
        let resumed = Scenario::parse("t", text, Path::new(".")).expect("valid");
        let words = load_words(&resumed, &run::plan(&resumed, &settings, 1, 10, None));
        assert_eq!(
            words,
            "16 connections × 1 in flight, GET / over TLS, a new connection per request: a \
             client's first TLS handshake is full, the next ones resume its session"
        );
    }

    #[test]
    fn fail_above_looks_at_median_cpu_per_request() {
        let regressed: ScenarioOutcomes = [vec![cpu(1.0), cpu(1.1)], vec![cpu(1.2), cpu(1.2)]];
        let improved: ScenarioOutcomes = [vec![cpu(1.0)], vec![cpu(0.5)]];
        let unsupported: ScenarioOutcomes = [
            vec![Outcome::Unsupported { reason: "x".into() }],
            vec![cpu(9.0)],
        ];
        let all = [("a", &regressed), ("b", &improved), ("c", &unsupported)];
        let lines = cpu_regressions(all.into_iter(), 10.0);
        assert_eq!(lines, ["a: CPU per request grew by 14.3%, more than 10%"]);
        assert!(cpu_regressions(all.into_iter(), 15.0).is_empty());
        let noisy: ScenarioOutcomes = [vec![cpu(1.0), cpu(1.0)], vec![cpu(0.5), cpu(1.0)]];
        assert_eq!(
            cpu_regressions([("n", &noisy)].into_iter(), 10.0),
            [
                "n: CPU per request is noisy (coefficient of variation over 10%), so \
                 --fail-above cannot tell: rerun"
            ]
        );
    }

    #[test]
    fn noisy_figures_are_counted_and_explained() {
        let quiet: ScenarioOutcomes = [vec![cpu(1.0), cpu(1.01)], vec![cpu(1.0), cpu(1.01)]];
        let noisy: ScenarioOutcomes = [vec![cpu(1.0), cpu(1.0)], vec![cpu(0.5), cpu(1.0)]];
        assert_eq!(noisy_figures(&[quiet.clone(), quiet.clone()]), 0);
        assert_eq!(noisy_figures(&[quiet, noisy]), 1);
        assert!(noisy_words(1).starts_with(
            "1 figure is noisy (a build's runs scatter by a \
                                            coefficient of variation over 10%): no verdict for it;"
        ));
        assert!(noisy_words(3).starts_with("3 figures are noisy"));
    }

    #[test]
    fn points_are_each_scenario_at_each_worker_count() {
        let settings = crate::run::tests::settings();
        let once = points(2, &settings, &[], &[]).expect("no CPUs needed");
        let once: Vec<_> = once.iter().map(|p| (p.scenario, p.workers)).collect();
        assert_eq!(once, [(0, None), (1, None)]);
        let scaled = points(2, &settings, &[1, 2], &[0, 1, 2]).expect("CPUs");
        let summary: Vec<_> = (scaled.iter())
            .map(|p| {
                (
                    p.scenario,
                    p.workers,
                    p.settings.server_cpus.clone(),
                    p.settings.load_cpus.clone(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (0, Some(1), vec![0], vec![1, 2]),
                (0, Some(2), vec![0, 1], vec![2]),
                (1, Some(1), vec![0], vec![1, 2]),
                (1, Some(2), vec![0, 1], vec![2]),
            ]
        );
        assert_eq!(scaled[1].settings.workers, Some(2));
        assert!(points(1, &settings, &[1], &[]).is_err());
    }
}
