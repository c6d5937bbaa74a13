//! `report.md`: the verdict with each rule's measure and threshold, the fault log with each
//! fault's recovery, what each generator reported, and the samples every 30 s. Pure text from
//! what the soak recorded, so its shape is tested.

use std::fmt::Write;

use super::verdict::{Fault, Second, Verdict};

/// Seconds between two rows of the samples table.
pub const TABLE_EVERY_SECS: u32 = 30;

/// Everything the report shows.
pub struct Summary<'a> {
    pub title: &'a str,
    /// Lines about the run (binary, rate, duration, addresses), already markdown.
    pub setup: &'a str,
    pub warmup_secs: u32,
    pub verdict: &'a Verdict,
    pub faults: &'a [Fault],
    /// One line per generator: its name and its own summary.
    pub generators: &'a [(String, String)],
    pub seconds: &'a [Second],
}

pub fn markdown(summary: &Summary) -> String {
    let mut out = String::new();
    let verdict = summary.verdict;
    let _ = writeln!(out, "# {}\n\n{}", summary.title, summary.setup);
    let _ = writeln!(
        out,
        "## Verdict: {}\n\nRules look at the seconds after the {} s warm-up; the slopes and the \
         rate only at quiet seconds (outside every fault window and the 5 s after it).\n",
        if verdict.pass() { "PASS" } else { "FAIL" },
        summary.warmup_secs
    );
    let _ = writeln!(out, "| rule | measured | threshold | |\n|---|---|---|---|");
    for rule in &verdict.rules {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            rule.name,
            rule.measured,
            rule.threshold,
            if rule.pass { "pass" } else { "**FAIL**" }
        );
    }
    fault_log(&mut out, summary);
    let _ = writeln!(out, "\n## Generators\n");
    for (name, line) in summary.generators {
        let _ = writeln!(out, "- {name}: {line}");
    }
    samples(&mut out, summary.seconds);
    let _ = writeln!(
        out,
        "\n![RSS, descriptors and req/s over time, faults shaded](soak.svg)"
    );
    out
}

fn fault_log(out: &mut String, summary: &Summary) {
    let _ = writeln!(
        out,
        "\n## Faults\n\n| # | fault | start s | end s | back to 90% after | what happened |\n\
         |---|---|---|---|---|---|"
    );
    for (i, fault) in summary.faults.iter().enumerate() {
        let recovery = summary
            .verdict
            .recoveries
            .get(i)
            .and_then(|r| r.secs)
            .map_or("**not within the limit**".to_string(), |s| {
                format!("{s:.1} s")
            });
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} | {:.1} | {recovery} | {} |",
            i + 1,
            fault.kind.name(),
            fault.start,
            fault.end,
            fault.note.replace('|', "/")
        );
    }
    if summary.faults.is_empty() {
        let _ = writeln!(out, "| | none | | | | |");
    }
}

fn samples(out: &mut String, seconds: &[Second]) {
    let _ = writeln!(
        out,
        "\n## Samples every {TABLE_EVERY_SECS} s\n\n\
         | t s | RSS MiB | fds | connections | ok req/s | failed | requests (metrics) | cache hits | cache misses |\n\
         |---|---|---|---|---|---|---|---|---|"
    );
    let rows = seconds
        .iter()
        .filter(|s| s.t % TABLE_EVERY_SECS == 0)
        .chain(seconds.last().filter(|s| s.t % TABLE_EVERY_SECS != 0));
    for s in rows {
        let _ = writeln!(
            out,
            "| {} | {:.1} | {} | {} | {} | {} | {} | {} | {} |",
            s.t,
            s.rss_kib as f64 / 1024.0,
            s.fds,
            s.connections,
            s.ok,
            s.failed,
            s.requests_total,
            s.cache_hits,
            s.cache_misses
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::verdict::{FaultKind, Plan, judge};
    use super::*;

    #[test]
    fn the_report_has_the_verdict_the_faults_and_a_row_every_30_s() {
        let seconds: Vec<Second> = (0..95)
            .map(|t| Second {
                t,
                rss_kib: 10_240,
                fds: 30,
                ok: 100,
                ..Second::default()
            })
            .collect();
        let faults = [Fault {
            kind: FaultKind::Reload,
            start: 40.0,
            end: 40.3,
            note: "generation 1 | applied".into(),
            ok: true,
        }];
        let plan = Plan {
            rate: 100.0,
            warmup_secs: 15,
        };
        let verdict = judge(plan, &seconds, &faults);
        let text = markdown(&Summary {
            title: "Soak",
            setup: "- rate: 100 req/s\n",
            warmup_secs: 15,
            verdict: &verdict,
            faults: &faults,
            generators: &[("h1".into(), "9500 requests".into())],
            seconds: &seconds,
        });
        assert!(text.contains("## Verdict: PASS"), "{text}");
        assert_eq!(text.matches("| pass |").count(), verdict.rules.len());
        assert!(text.contains("| 1 | reload | 40.0 | 40.3 | 1.7 s | generation 1 / applied |"));
        // 0, 30, 60, 90 and the last second.
        let rows = text
            .lines()
            .filter(|l| l.starts_with("| ") && l.contains(" | 10.0 | 30 |"));
        assert_eq!(rows.count(), 5);
        assert!(text.contains("- h1: 9500 requests"));
        assert!(text.contains("(soak.svg)"));
    }
}
