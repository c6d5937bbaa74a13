//! The results as people read them: one markdown table per scenario with the median and
//! min–max of each figure for base and head, the head/base ratio of the medians and a verdict,
//! as in Envoy's published parser comparisons.

use std::fmt::Write as _;

use serde::Serialize;

use crate::run::Outcome;
use crate::stats::{self, Better, Summary};

/// A figure measured per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    ReqPerSec,
    CpuPer100k,
    UserShare,
    MachineCpuPer100k,
    SoftirqPer100k,
    ClientCpuShare,
    LatencyMean,
    LatencyP50,
    LatencyP99,
    LatencyP999,
    LatencySd,
    LatencyMax,
    ConnectMean,
    FirstByteMean,
    Succeeded,
    Failed,
    Errored,
    MaxRate,
}

impl Figure {
    pub fn label(self) -> &'static str {
        match self {
            Figure::ReqPerSec => "requests/s",
            Figure::CpuPer100k => "server CPU s per 100k requests",
            Figure::UserShare => "user share (% of server CPU)",
            Figure::MachineCpuPer100k => "machine CPU s per 100k requests (every core)",
            Figure::SoftirqPer100k => "softirq s per 100k requests (every core)",
            Figure::ClientCpuShare => "load generator CPU (% of its cores)",
            Figure::LatencyMean => "latency mean (ms)",
            Figure::LatencyP50 => "latency p50 (ms)",
            Figure::LatencyP99 => "latency p99 (ms)",
            Figure::LatencyP999 => "latency p99.9 (ms)",
            Figure::LatencySd => "latency sd (ms)",
            Figure::LatencyMax => "latency max (ms)",
            Figure::ConnectMean => "time for connect mean (ms)",
            Figure::FirstByteMean => "time to 1st byte mean (ms)",
            Figure::Succeeded => "succeeded",
            Figure::Failed => "answered 4xx or 5xx",
            Figure::Errored => "errored (no response)",
            Figure::MaxRate => "max rate (req/s) at mean latency < 5 ms, ≥ 95% ok",
        }
    }

    /// Which way is better; `None` for counts, which depend on the run's length and get no
    /// verdict.
    pub fn better(self) -> Option<Better> {
        match self {
            Figure::ReqPerSec | Figure::MaxRate => Some(Better::Higher),
            Figure::CpuPer100k
            | Figure::MachineCpuPer100k
            | Figure::SoftirqPer100k
            | Figure::LatencyMean
            | Figure::LatencyP50
            | Figure::LatencyP99
            | Figure::LatencyP999
            | Figure::LatencySd
            | Figure::LatencyMax
            | Figure::ConnectMean
            | Figure::FirstByteMean => Some(Better::Lower),
            // A share moves either way when the total shrinks: CPU per request judges. The
            // client's share says whether it was the limit, not which build is better.
            Figure::Succeeded
            | Figure::Failed
            | Figure::Errored
            | Figure::UserShare
            | Figure::ClientCpuShare => None,
        }
    }

    fn decimals(self) -> usize {
        match self {
            Figure::CpuPer100k | Figure::MachineCpuPer100k | Figure::SoftirqPer100k => 3,
            Figure::LatencyMean
            | Figure::LatencyP50
            | Figure::LatencyP99
            | Figure::LatencyP999
            | Figure::LatencySd
            | Figure::LatencyMax
            | Figure::ConnectMean
            | Figure::FirstByteMean => 2,
            Figure::UserShare => 1,
            _ => 0,
        }
    }
}

/// One build's summary of one figure.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub figure: Figure,
    pub base: Option<Summary>,
    pub head: Option<Summary>,
    pub ratio: Option<f64>,
    pub verdict: Option<stats::Verdict>,
}

/// Every figure that either build measured, summarised and compared, in table order.
pub fn rows(base: &[Outcome], head: &[Outcome]) -> Vec<Row> {
    let mut figures: Vec<Figure> = base
        .iter()
        .chain(head)
        .flat_map(|o| o.figures())
        .map(|(f, _)| f)
        .collect();
    figures.sort();
    figures.dedup();
    figures
        .into_iter()
        .map(|figure| {
            let base = summarize(base, figure);
            let head = summarize(head, figure);
            let (ratio, verdict) = match (&base, &head) {
                (Some(b), Some(h)) => (
                    stats::ratio(b, h),
                    figure.better().map(|d| stats::verdict(b, h, d)),
                ),
                _ => (None, None),
            };
            Row {
                figure,
                base,
                head,
                ratio,
                verdict,
            }
        })
        .collect()
}

/// One build's summary of one figure over its runs; `None` if no run measured it.
pub fn summarize(outcomes: &[Outcome], figure: Figure) -> Option<Summary> {
    let samples: Vec<f64> = outcomes
        .iter()
        .flat_map(Outcome::figures)
        .filter(|(f, _)| *f == figure)
        .map(|(_, value)| value)
        .collect();
    Summary::of(&samples)
}

/// What the table of one scenario needs.
pub struct ScenarioReport<'a> {
    pub name: &'a str,
    pub description: &'a str,
    /// The load in a few words: `64 connections × 1 stream, GET /`.
    pub load: String,
    pub base_name: &'a str,
    pub head_name: &'a str,
    pub base: &'a [Outcome],
    pub head: &'a [Outcome],
}

/// The markdown section of one scenario: heading, table, and a line per build that could not
/// run it, saying why.
pub fn scenario_markdown(report: &ScenarioReport) -> String {
    let mut out = format!(
        "## {}\n\n{} ({})\n\n",
        report.name, report.description, report.load
    );
    if let Some(line) = tls_line(report.base, report.head) {
        out.push_str(&line);
    }
    let rows = rows(report.base, report.head);
    if !rows.is_empty() {
        out.push_str(
            "| figure | base median (min–max) | head median (min–max) | head/base | verdict |\n",
        );
        out.push_str("|---|---:|---:|---:|---|\n");
        for row in &rows {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                row.figure.label(),
                cell(row.base.as_ref(), row.figure),
                cell(row.head.as_ref(), row.figure),
                row.ratio.map_or("—".into(), ratio_text),
                verdict_text(row),
            );
        }
        out.push('\n');
    }
    for (role, name, outcomes) in [
        ("base", report.base_name, report.base),
        ("head", report.head_name, report.head),
    ] {
        for note in notes(outcomes) {
            let _ = writeln!(out, "- {role}: {note}", note = note.replace("{REF}", name));
        }
    }
    out
}

/// What h2load says the TLS connections negotiated with each build, when they spoke TLS: the
/// evidence of which protocol version, cipher and key exchange the figures are for.
fn tls_line(base: &[Outcome], head: &[Outcome]) -> Option<String> {
    let negotiated = |outcomes: &[Outcome]| {
        let mut seen: Vec<String> = Vec::new();
        for outcome in outcomes {
            if let Outcome::Measured(m) = outcome
                && let Some(tls) = &m.h2load.tls
            {
                let summary = tls.summary();
                if !seen.contains(&summary) {
                    seen.push(summary);
                }
            }
        }
        (!seen.is_empty()).then(|| seen.join(" / "))
    };
    let parts: Vec<String> = [("base", negotiated(base)), ("head", negotiated(head))]
        .into_iter()
        .filter_map(|(role, text)| text.map(|text| format!("{role} {text}")))
        .collect();
    (!parts.is_empty()).then(|| format!("TLS as h2load negotiated it: {}.\n\n", parts.join("; ")))
}

/// One line for each distinct reason a build's runs did not measure.
fn notes(outcomes: &[Outcome]) -> Vec<String> {
    let mut notes: Vec<String> = Vec::new();
    for (run, outcome) in outcomes.iter().enumerate() {
        let note = match outcome {
            Outcome::Unsupported { reason } => format!("not supported by {{REF}}: {reason}"),
            Outcome::Failed { reason } => format!("run {} failed: {reason}", run + 1),
            Outcome::MaxRate(max) if max.max_rate.is_none() => {
                format!("run {}: no rate met the bounds", run + 1)
            }
            Outcome::Measured(m) => match &m.tails {
                Ok(tails) => match tails.missing() {
                    Some(why) => format!("latency percentiles: {why} in some runs"),
                    None => continue,
                },
                Err(why) => format!("no latency percentiles: {why}"),
            },
            _ => continue,
        };
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    notes
}

/// The verdict, and for a noisy figure the spread of the build (or builds) that made it so:
/// `noisy: rerun (head CV 23%)`.
fn verdict_text(row: &Row) -> String {
    let Some(verdict) = row.verdict else {
        return "—".into();
    };
    if verdict != stats::Verdict::Noisy {
        return verdict.as_str().into();
    }
    let spreads: Vec<String> = [("base", &row.base), ("head", &row.head)]
        .into_iter()
        .filter_map(|(role, summary)| {
            let s = summary.as_ref().filter(|s| s.noisy())?;
            Some(format!("{role} CV {:.0}%", s.cv? * 100.0))
        })
        .collect();
    format!("{} ({})", verdict.as_str(), spreads.join(", "))
}

/// How many figures of these rows are too noisy for a verdict.
pub fn noisy_count(rows: &[Row]) -> usize {
    rows.iter()
        .filter(|row| row.verdict == Some(stats::Verdict::Noisy))
        .count()
}

fn cell(summary: Option<&Summary>, figure: Figure) -> String {
    let Some(s) = summary else {
        return "n/a".into();
    };
    let d = figure.decimals();
    if s.runs == 1 || s.min == s.max {
        return number(s.median, d);
    }
    format!(
        "{} ({}–{})",
        number(s.median, d),
        number(s.min, d),
        number(s.max, d)
    )
}

/// A ratio with enough decimals that a large difference does not print as `0.00×`.
fn ratio_text(ratio: f64) -> String {
    let decimals = match ratio {
        r if r >= 10.0 => 1,
        r if r >= 0.1 => 2,
        r if r >= 0.01 => 3,
        _ => 4,
    };
    format!("{ratio:.decimals$}×")
}

/// A number with `decimals` places and thousands separators in the integer part.
pub fn number(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    let (sign, digits) = text
        .strip_prefix('-')
        .map_or(("", text.as_str()), |rest| ("-", rest));
    let (int, frac) = digits
        .split_once('.')
        .map_or((digits, None), |(i, f)| (i, Some(f)));
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    match frac {
        Some(frac) => format!("{sign}{grouped}.{frac}"),
        None => format!("{sign}{grouped}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h2load::{Report, TimeRow};
    use crate::run::Measured;

    fn measured(rps: f64, cpu: f64, mean_ms: f64) -> Outcome {
        Outcome::Measured(Box::new(Measured {
            h2load: Report {
                req_per_sec: rps,
                succeeded: 1_000,
                request: TimeRow {
                    mean_us: mean_ms * 1e3,
                    ..TimeRow::default()
                },
                ..Report::default()
            },
            cpu_secs: cpu,
            responses: 1_000,
            cpu_secs_per_100k: cpu,
            machine_cpu_secs_per_100k: 2.0,
            softirq_secs_per_100k: 0.1,
            user_share: 50.0,
            tails: Ok(crate::latency::Tails {
                timed: 1_000,
                failed: 0,
                p50_ms: Some(mean_ms),
                p99_ms: Some(mean_ms * 3.0),
                p999_ms: Some(mean_ms * 5.0),
            }),
            client_cpu_pct: 97.0,
        }))
    }

    #[test]
    fn numbers() {
        assert_eq!(number(1234567.891, 0), "1,234,568");
        assert_eq!(number(999.5, 2), "999.50");
        assert_eq!(number(-1234.0, 1), "-1,234.0");
        assert_eq!(number(0.0123, 3), "0.012");
        assert_eq!(ratio_text(138.64), "138.6×");
        assert_eq!(ratio_text(1.034), "1.03×");
        assert_eq!(ratio_text(0.0029), "0.0029×");
    }

    #[test]
    fn a_table_with_both_builds_a_ratio_and_verdicts() {
        let base = [
            measured(60_000.0, 1.60, 1.0),
            measured(62_000.0, 1.50, 1.1),
            measured(61_000.0, 1.55, 1.2),
        ];
        let head = [
            measured(61_500.0, 1.20, 1.0),
            measured(64_000.0, 1.25, 1.0),
            measured(63_000.0, 1.22, 1.0),
        ];
        let text = scenario_markdown(&ScenarioReport {
            name: "h1-small",
            description: "13-byte body",
            load: "64 connections".into(),
            base_name: "main (abc)",
            head_name: "working tree",
            base: &base,
            head: &head,
        });
        assert!(text.starts_with("## h1-small\n\n13-byte body (64 connections)\n\n| figure |"));
        assert!(text.contains("| requests/s | 61,000 (60,000–62,000) | 63,000 (61,500–64,000) | 1.03× | within noise |"), "{text}");
        assert!(text.contains("| server CPU s per 100k requests | 1.550 (1.500–1.600) | 1.220 (1.200–1.250) | 0.79× | faster |"), "{text}");
        assert!(
            text.contains("| latency mean (ms) | 1.10 (1.00–1.20) | 1.00 | 0.91× | within noise |"),
            "{text}"
        );
        assert!(
            text.contains("| succeeded | 1,000 | 1,000 | 1.00× | — |"),
            "{text}"
        );
        assert!(
            text.contains("| latency p99 (ms) | 3.30 (3.00–3.60) | 3.00 | 0.91× | within noise |"),
            "{text}"
        );
        assert!(
            text.contains(
                "| latency p99.9 (ms) | 5.50 (5.00–6.00) | 5.00 | 0.91× | within noise |"
            ),
            "{text}"
        );
        assert!(
            text.contains("| load generator CPU (% of its cores) | 97 | 97 | 1.00× | — |"),
            "{text}"
        );
        // Table order: the mean, then the percentiles, then the spread.
        let at = |label: &str| text.find(label).expect(label);
        assert!(at("latency mean") < at("latency p50") && at("latency p99.9") < at("latency sd"));
        assert!(!text.contains("not supported") && !text.contains("percentiles"));
    }

    #[test]
    fn missing_percentiles_are_said_not_zeroed() {
        let few = |timed: u64| {
            let mut outcome = measured(1_000.0, 1.0, 1.0);
            if let Outcome::Measured(m) = &mut outcome {
                let mut histogram = crate::latency::Histogram::default();
                (0..timed).for_each(|_| histogram.record(500));
                m.tails = Ok(crate::latency::Tails::of(&histogram, 0));
            }
            outcome
        };
        let mut unlogged = measured(1_000.0, 1.0, 1.0);
        if let Outcome::Measured(m) = &mut unlogged {
            m.tails = Err("opening h2load.log: No such file or directory".into());
        }
        let base = [few(500), few(500)];
        let head = [unlogged];
        let text = scenario_markdown(&ScenarioReport {
            name: "s",
            description: "d",
            load: "l".into(),
            base_name: "nginx",
            head_name: "working tree",
            base: &base,
            head: &head,
        });
        assert!(
            text.contains("| latency p99 (ms) | 0.50 | n/a | — | — |"),
            "{text}"
        );
        assert!(!text.contains("latency p99.9"), "{text}");
        assert!(
            text.contains(
                "\n- base: latency percentiles: no p99.9 (fewer than 1,000 timed requests) in \
                 some runs\n- head: no latency percentiles: opening h2load.log: No such \
                 file or directory\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn noisy_figures_get_no_verdict_and_say_why() {
        // requests/s 4× apart in head; CPU spread 20% in base and in head.
        let base = [measured(60_000.0, 1.0, 1.0), measured(61_000.0, 1.4, 1.0)];
        let head = [measured(20_000.0, 1.0, 1.0), measured(80_000.0, 1.4, 1.0)];
        let text = scenario_markdown(&ScenarioReport {
            name: "s",
            description: "d",
            load: "l".into(),
            base_name: "main",
            head_name: "working tree",
            base: &base,
            head: &head,
        });
        assert!(
            text.contains(
                "| requests/s | 60,500 (60,000–61,000) | 50,000 (20,000–80,000) | 0.83× | \
                 noisy: rerun (head CV 85%) |"
            ),
            "{text}"
        );
        assert!(
            text.contains("| 1.00× | noisy: rerun (base CV 24%, head CV 24%) |"),
            "{text}"
        );
        assert!(text.contains("| latency mean (ms) | 1.00 | 1.00 | 1.00× | within noise |"));
        assert_eq!(noisy_count(&rows(&base, &head)), 2);
    }

    #[test]
    fn tls_scenarios_say_what_was_negotiated() {
        let tls = |key: &str| {
            let mut outcome = measured(1.0, 1.0, 1.0);
            if let Outcome::Measured(m) = &mut outcome {
                m.h2load.tls = Some(crate::h2load::TlsInfo {
                    protocol: "TLSv1.3".into(),
                    cipher: "TLS_AES_128_GCM_SHA256".into(),
                    server_temp_key: key.into(),
                });
            }
            outcome
        };
        let base = [tls("X25519 253 bits"), tls("X25519 253 bits")];
        let head = [tls("X25519 253 bits"), tls("ECDH prime256v1 256 bits")];
        let report = |base, head| {
            scenario_markdown(&ScenarioReport {
                name: "s",
                description: "d",
                load: "l".into(),
                base_name: "nginx",
                head_name: "working tree",
                base,
                head,
            })
        };
        let text = report(&base, &head);
        assert!(
            text.contains(
                "\n\nTLS as h2load negotiated it: base TLSv1.3, TLS_AES_128_GCM_SHA256, \
                 X25519 253 bits; head TLSv1.3, TLS_AES_128_GCM_SHA256, X25519 253 bits / \
                 TLSv1.3, TLS_AES_128_GCM_SHA256, ECDH prime256v1 256 bits.\n\n| figure |"
            ),
            "{text}"
        );
        let cleartext = [measured(1.0, 1.0, 1.0)];
        assert!(!report(&cleartext, &cleartext).contains("TLS"));
    }

    #[test]
    fn unsupported_and_failed_builds_are_explained_not_zeroed() {
        let base = [Outcome::Unsupported {
            reason: "it has no squall binary crate".into(),
        }];
        let head = [
            measured(1.0, 1.0, 1.0),
            Outcome::Failed {
                reason: "crashed".into(),
            },
        ];
        let text = scenario_markdown(&ScenarioReport {
            name: "s",
            description: "d",
            load: "l".into(),
            base_name: "main",
            head_name: "working tree",
            base: &base,
            head: &head,
        });
        assert!(text.contains("| requests/s | n/a | 1 | — | — |"), "{text}");
        assert!(text.contains("- base: not supported by main: it has no squall binary crate\n"));
        assert!(text.contains("- head: run 2 failed: crashed\n"));
    }
}
