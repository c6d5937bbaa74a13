//! `cargo xtask bench --workers 1,2,4`: where each worker count's server and load generator
//! run, and the table of how a build scales over worker counts.
//!
//! The server gets the first N CPUs this process may use and the load generator the rest (h2load
//! with a thread per CPU, `-t`). Where there are not N + 1 CPUs, the two share: the server gets
//! them all (up to N) and the load generator the last one, and the table marks the row "shared
//! cores: rough check only", since the client then takes CPU from the server it measures.
//!
//! The table compares each worker count with one worker of the same build: requests/s per
//! worker and server CPU per request, both as ratios, so 1.00× is linear scaling. A row whose
//! load generator used [`CLIENT_BOUND_PCT`] or more of its cores is marked "client-bound": its
//! requests/s say what the client could send, not what the server could answer.

use std::fmt::Write as _;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::report::{Figure, number, summarize};
use crate::run::Outcome;

/// The load generator's CPU use, in percent of the cores it was given, from which a run counts
/// as limited by the client rather than the server: a thread near a full core waits for
/// nothing but itself.
pub const CLIENT_BOUND_PCT: f64 = 90.0;
/// The most workers `--workers` takes, as Squall's `workers` option (1–1024).
pub const WORKERS_MAX: u32 = 1_024;

/// The CPUs of one worker count: the server's, the load generator's, and whether they share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pinning {
    pub server: Vec<usize>,
    pub load: Vec<usize>,
    /// The server and the load generator share a CPU: a rough check only.
    pub shared: bool,
}

/// The server on the first `workers` of `cpus`, the load generator on the rest; with no CPU
/// left over, the server on up to `workers` of them and the load generator on the last.
/// `None` without CPUs.
pub fn pinning(cpus: &[usize], workers: u32) -> Option<Pinning> {
    let last = *cpus.last()?;
    let wanted = usize::try_from(workers).unwrap_or(usize::MAX).max(1);
    if wanted < cpus.len() {
        return Some(Pinning {
            server: cpus[..wanted].to_vec(),
            load: cpus[wanted..].to_vec(),
            shared: false,
        });
    }
    Some(Pinning {
        server: cpus.to_vec(),
        load: vec![last],
        shared: true,
    })
}

/// A CPU list as taskset and the kernel write it: `0-3,8,10-11`.
pub fn cpu_ranges(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            end += 1;
            i += 1;
        }
        parts.push(match end == start {
            true => start.to_string(),
            false => format!("{start}-{end}"),
        });
        i += 1;
    }
    parts.join(",")
}

/// `CPU 3` or `CPUs 0-2`, for people.
pub fn cpus_words(cpus: &[usize]) -> String {
    match cpus.len() {
        1 => format!("CPU {}", cpu_ranges(cpus)),
        _ => format!("CPUs {}", cpu_ranges(cpus)),
    }
}

/// Parses a kernel CPU list (`0-3,8,10-11`), sorted and without repeats; `None` if malformed.
pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((low, high)) => {
                let (low, high): (usize, usize) = (low.parse().ok()?, high.parse().ok()?);
                if high < low {
                    return None;
                }
                cpus.extend(low..=high);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    (!cpus.is_empty()).then_some(cpus)
}

/// The CPUs this process may run on (`Cpus_allowed_list` in `/proc/self/status`).
pub fn allowed_cpus() -> Result<Vec<usize>> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .and_then(parse_cpu_list)
        .context("no Cpus_allowed_list in /proc/self/status")
}

/// Parses `--workers 1,2,4`: counts from 1 to [`WORKERS_MAX`].
pub fn parse_workers(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=WORKERS_MAX).contains(&n) => Ok(n),
        _ => Err(format!("{text:?}: a worker count from 1 to {WORKERS_MAX}")),
    }
}

/// One build's runs at one worker count.
pub struct Point<'a> {
    pub workers: u32,
    pub pinning: &'a Pinning,
    pub outcomes: &'a [Outcome],
}

/// One build over every worker count.
pub struct Curve<'a> {
    /// `base main (abc1234)`
    pub build: String,
    pub points: Vec<Point<'a>>,
}

/// The medians of one point, and its ratios to one worker.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Row {
    req_per_sec: Option<f64>,
    cpu_per_100k: Option<f64>,
    machine_per_100k: Option<f64>,
    client_pct: Option<f64>,
    /// Requests/s per worker over one worker's requests/s.
    per_worker_vs_1: Option<f64>,
    /// Server CPU per request over one worker's.
    cpu_vs_1: Option<f64>,
}

fn median(outcomes: &[Outcome], figure: Figure) -> Option<f64> {
    summarize(outcomes, figure).map(|s| s.median)
}

fn row(point: &Point, one: Option<&Point>) -> Row {
    let rps = median(point.outcomes, Figure::ReqPerSec);
    let cpu = median(point.outcomes, Figure::CpuPer100k);
    let one_rps = one.and_then(|p| median(p.outcomes, Figure::ReqPerSec));
    let one_cpu = one.and_then(|p| median(p.outcomes, Figure::CpuPer100k));
    let ratio = |value: Option<f64>, base: Option<f64>| match (value, base) {
        (Some(v), Some(b)) if b > 0.0 => Some(v / b),
        _ => None,
    };
    Row {
        req_per_sec: rps,
        cpu_per_100k: cpu,
        machine_per_100k: median(point.outcomes, Figure::MachineCpuPer100k),
        client_pct: median(point.outcomes, Figure::ClientCpuShare),
        per_worker_vs_1: ratio(rps.map(|r| r / f64::from(point.workers)), one_rps),
        cpu_vs_1: ratio(cpu, one_cpu),
    }
}

/// What to flag about a row: a client at its limit, shared cores, nothing measured.
fn marks(row: &Row, pinning: &Pinning) -> String {
    let mut marks = Vec::new();
    if row.req_per_sec.is_none() {
        marks.push("not measured (see its table)".to_string());
    }
    if let Some(pct) = row.client_pct.filter(|pct| *pct >= CLIENT_BOUND_PCT) {
        marks.push(format!(
            "client-bound (load generator at {pct:.0}% of its cores)"
        ));
    }
    if pinning.shared {
        marks.push("shared cores: rough check only".into());
    }
    marks.join("; ")
}

/// The scaling table of one scenario: a row per build and worker count.
pub fn table(scenario: &str, curves: &[Curve]) -> String {
    let mut out = format!("### {scenario}: scaling over workers\n\n");
    out.push_str(
        "| workers | build | server CPUs | load CPUs | requests/s | req/s per worker vs 1 | \
         server CPU s per 100k | vs 1 | machine CPU s per 100k | load generator CPU | marks |\n",
    );
    out.push_str("|---:|---|---|---|---:|---:|---:|---:|---:|---:|---|\n");
    for curve in curves {
        let one = curve.points.iter().find(|p| p.workers == 1);
        for point in &curve.points {
            let r = row(point, one);
            let cell =
                |value: Option<f64>, decimals| value.map_or("n/a".into(), |v| number(v, decimals));
            let times = |value: Option<f64>| value.map_or("—".into(), |v| format!("{v:.2}×"));
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                point.workers,
                curve.build,
                cpu_ranges(&point.pinning.server),
                cpu_ranges(&point.pinning.load),
                cell(r.req_per_sec, 0),
                times(r.per_worker_vs_1),
                cell(r.cpu_per_100k, 3),
                times(r.cpu_vs_1),
                cell(r.machine_per_100k, 3),
                r.client_pct
                    .map_or("n/a".into(), |pct| format!("{pct:.0}%")),
                marks(&r, point.pinning),
            );
        }
    }
    out.push_str(
        "\nMedians over the runs. *req/s per worker vs 1*: requests/s divided by the workers, over \
         one worker's (1.00× scales linearly); *vs 1*: server CPU per request over one worker's \
         (1.00×: no cost added per request). A client-bound row measures the load generator.\n\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h2load::Report;
    use crate::run::Measured;

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list("1"), Some(vec![1]));
        assert_eq!(parse_cpu_list("3,1,1"), Some(vec![1, 3]));
        for bad in ["", "a", "3-1", "1-", "-1"] {
            assert_eq!(parse_cpu_list(bad), None, "{bad:?}");
        }
        assert_eq!(cpu_ranges(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(cpu_ranges(&[5]), "5");
        assert_eq!(cpu_ranges(&[]), "");
        assert_eq!(cpus_words(&[1]), "CPU 1");
        assert_eq!(cpus_words(&[0, 1, 3]), "CPUs 0-1,3");
        assert!(allowed_cpus().is_ok_and(|cpus| !cpus.is_empty()));
    }

    #[test]
    fn the_server_gets_the_first_cpus_and_the_client_the_rest() {
        let four = [0, 1, 2, 3];
        let p = pinning(&four, 1).expect("cpus");
        assert_eq!(
            (p.server, p.load, p.shared),
            (vec![0], vec![1, 2, 3], false)
        );
        let p = pinning(&four, 3).expect("cpus");
        assert_eq!(
            (p.server, p.load, p.shared),
            (vec![0, 1, 2], vec![3], false)
        );
        // No CPU left for the client: it shares the last one.
        let p = pinning(&four, 4).expect("cpus");
        assert_eq!(
            (p.server, p.load, p.shared),
            (vec![0, 1, 2, 3], vec![3], true)
        );
        let p = pinning(&[0, 1], 8).expect("cpus");
        assert_eq!((p.server, p.load, p.shared), (vec![0, 1], vec![1], true));
        let p = pinning(&[4], 1).expect("cpus");
        assert_eq!((p.server, p.load, p.shared), (vec![4], vec![4], true));
        assert_eq!(pinning(&[], 1), None);
    }

    #[test]
    fn worker_counts_are_squalls() {
        assert_eq!(parse_workers("4"), Ok(4));
        assert!(parse_workers("0").is_err());
        assert!(parse_workers("1025").is_err());
        assert!(parse_workers("two").is_err());
    }

    fn measured(rps: f64, cpu: f64, client: f64) -> Outcome {
        Outcome::Measured(Box::new(Measured {
            h2load: Report {
                req_per_sec: rps,
                succeeded: 1,
                ..Report::default()
            },
            cpu_secs: cpu,
            responses: 100_000,
            cpu_secs_per_100k: cpu,
            user_share: 50.0,
            machine_cpu_secs_per_100k: 2.0 * cpu,
            softirq_secs_per_100k: 0.1,
            tails: Err("not logged".into()),
            client_cpu_pct: client,
        }))
    }

    #[test]
    fn a_table_of_ratios_to_one_worker() {
        let alone = |server: Vec<usize>, load: Vec<usize>| Pinning {
            server,
            load,
            shared: false,
        };
        let (p1, p2) = (alone(vec![0], vec![1, 2, 3]), alone(vec![0, 1], vec![2, 3]));
        let shared = Pinning {
            server: vec![0, 1, 2, 3],
            load: vec![3],
            shared: true,
        };
        let one = [measured(50_000.0, 1.0, 40.0), measured(52_000.0, 1.0, 40.0)];
        let two = [measured(90_000.0, 1.1, 95.0)];
        let four = [Outcome::Failed { reason: "x".into() }];
        let curve = Curve {
            build: "head working tree".into(),
            points: vec![
                Point {
                    workers: 1,
                    pinning: &p1,
                    outcomes: &one,
                },
                Point {
                    workers: 2,
                    pinning: &p2,
                    outcomes: &two,
                },
                Point {
                    workers: 4,
                    pinning: &shared,
                    outcomes: &four,
                },
            ],
        };
        let text = table("h1-small", &[curve]);
        assert!(
            text.starts_with("### h1-small: scaling over workers\n\n| workers |"),
            "{text}"
        );
        assert!(
            text.contains(
                "| 1 | head working tree | 0 | 1-3 | 51,000 | 1.00× | 1.000 | 1.00× | 2.000 | 40% |  |"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "| 2 | head working tree | 0-1 | 2-3 | 90,000 | 0.88× | 1.100 | 1.10× | 2.200 | 95% | \
                 client-bound (load generator at 95% of its cores) |"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "| 4 | head working tree | 0-3 | 3 | n/a | — | n/a | — | n/a | n/a | not measured \
                 (see its table); shared cores: rough check only |"
            ),
            "{text}"
        );
    }

    #[test]
    fn without_one_worker_there_are_no_ratios() {
        let p = pinning(&[0, 1, 2], 2).expect("cpus");
        let two = [measured(90_000.0, 1.1, 50.0)];
        let curve = Curve {
            build: "base nginx".into(),
            points: vec![Point {
                workers: 2,
                pinning: &p,
                outcomes: &two,
            }],
        };
        let text = table("s", &[curve]);
        assert!(
            text.contains("| 2 | base nginx | 0-1 | 2 | 90,000 | — | 1.100 | — |"),
            "{text}"
        );
    }
}
