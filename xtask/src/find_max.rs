//! `--find-max`: the highest open-loop rate a build sustains with mean latency under 5 ms and at
//! least 95% of the requests answered successfully, in the manner of Nighthawk's adaptive load
//! controller: double the rate until a step fails, then bisect between the last pass and the
//! first failure until they are within 5%.

use std::path::Path;

use serde::Serialize;

use crate::build::Build;
use crate::h2load::Report;
use crate::report::Figure;
use crate::run::{self, Outcome, Settings};
use crate::scenario::Scenario;

/// Mean latency a passing step must stay under, in microseconds.
pub const LATENCY_MEAN_US_MAX: f64 = 5_000.0;
/// Share of the planned requests that must succeed.
pub const SUCCESS_RATIO_MIN: f64 = 0.95;
const RATE_START: f64 = 1_000.0;
const RATE_MIN: f64 = 50.0;
/// Far above what one h2load thread can send; a search reaching it stops there.
const RATE_MAX: f64 = 2_000_000.0;
/// When the bracket is this tight, stop.
const BRACKET_RATIO_MIN: f64 = 1.05;
const STEPS_MAX: usize = 16;

/// The result of one search.
#[derive(Debug, Clone, Serialize)]
pub struct MaxRate {
    /// The highest passing rate in requests/s, or none if even the lowest failed.
    pub max_rate: Option<f64>,
    pub steps: Vec<Step>,
}

/// One probe of the search.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub rate: f64,
    pub latency_mean_ms: f64,
    pub success_ratio: f64,
    pub pass: bool,
}

impl MaxRate {
    pub fn figures(&self) -> Vec<(Figure, f64)> {
        self.max_rate
            .map(|rate| (Figure::MaxRate, rate))
            .into_iter()
            .collect()
    }
}

/// The state of the search: the best passing and the worst failing rate so far.
#[derive(Debug, Default, Clone)]
pub struct Search {
    pass: Option<f64>,
    fail: Option<f64>,
    steps: usize,
}

impl Search {
    /// The next rate to try, or `None` when the search is over.
    pub fn next(&self) -> Option<f64> {
        if self.steps >= STEPS_MAX {
            return None;
        }
        let rate = match (self.pass, self.fail) {
            (None, None) => RATE_START,
            (Some(pass), None) => pass * 2.0,
            (None, Some(fail)) => fail / 2.0,
            (Some(pass), Some(fail)) if fail / pass <= BRACKET_RATIO_MIN => return None,
            (Some(pass), Some(fail)) => (pass + fail) / 2.0,
        };
        (RATE_MIN..=RATE_MAX).contains(&rate).then(|| rate.round())
    }

    pub fn record(&mut self, rate: f64, pass: bool) {
        self.steps += 1;
        if pass {
            self.pass = Some(self.pass.map_or(rate, |p| p.max(rate)));
        } else {
            self.fail = Some(self.fail.map_or(rate, |f| f.min(rate)));
        }
    }

    pub fn best(&self) -> Option<f64> {
        self.pass
    }
}

/// Whether a step at `rate` for `secs` met the bounds; the ratio counts successes against the
/// requests the rate asked for, so a server that falls behind the schedule fails too.
pub fn judge(report: &Report, rate: f64, secs: u32) -> Step {
    let planned = rate * f64::from(secs);
    let success_ratio = if planned > 0.0 {
        report.succeeded as f64 / planned
    } else {
        0.0
    };
    let latency_mean_ms = report.request.mean_us / 1e3;
    Step {
        rate,
        latency_mean_ms,
        success_ratio,
        pass: report.request.mean_us < LATENCY_MEAN_US_MAX && success_ratio >= SUCCESS_RATIO_MIN,
    }
}

/// One search on one fresh server.
pub fn search(build: &Build, scenario: &Scenario, settings: &Settings, dir: &Path) -> Outcome {
    let started = match run::start(build, scenario, settings, dir) {
        Ok(started) => started,
        Err(outcome) => return outcome,
    };
    let mut search = Search::default();
    let mut steps = Vec::new();
    while let Some(rate) = search.next() {
        let secs = settings.duration_secs;
        let plan = run::plan(scenario, settings, started.port, secs, Some(rate));
        let output = dir.join(format!("find-max-{rate:.0}.{}.txt", plan.tool()));
        let step = match run::run_h2load(&plan, settings, &output) {
            Ok(report) => judge(&report, rate, secs),
            Err(err) => {
                return Outcome::Failed {
                    reason: format!("at {rate:.0} req/s: {err:#}"),
                };
            }
        };
        eprintln!(
            "bench:   {rate:.0} req/s: mean {:.2} ms, {:.1}% ok: {}",
            step.latency_mean_ms,
            step.success_ratio * 100.0,
            if step.pass { "pass" } else { "fail" }
        );
        search.record(rate, step.pass);
        steps.push(step);
    }
    if let Err(err) = started.server.stop() {
        eprintln!("bench: warning: {err:#}");
    }
    Outcome::MaxRate(MaxRate {
        max_rate: search.best(),
        steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h2load::TimeRow;

    /// Runs a search against a server that passes every rate up to `capacity`.
    fn converge(capacity: f64) -> (Option<f64>, usize) {
        let mut search = Search::default();
        while let Some(rate) = search.next() {
            search.record(rate, rate <= capacity);
        }
        (search.best(), search.steps)
    }

    #[test]
    fn finds_the_capacity_within_five_percent() {
        for capacity in [120.0, 999.0, 1_000.0, 37_000.0, 150_000.0] {
            let (best, steps) = converge(capacity);
            let best = best.expect("some rate passes");
            assert!(
                best <= capacity && best >= capacity / 1.06,
                "{capacity}: {best}"
            );
            assert!(steps <= STEPS_MAX);
        }
    }

    #[test]
    fn stops_at_the_ends() {
        assert_eq!(converge(10.0).0, None);
        assert!(converge(1e9).0.is_some_and(|best| best >= RATE_MAX / 2.0));
    }

    #[test]
    fn judging_a_step() {
        let report = |succeeded, mean_us| Report {
            succeeded,
            request: TimeRow {
                mean_us,
                ..TimeRow::default()
            },
            ..Report::default()
        };
        assert!(judge(&report(9_500, 4_999.0), 1_000.0, 10).pass);
        assert!(!judge(&report(9_499, 100.0), 1_000.0, 10).pass);
        assert!(!judge(&report(10_000, 5_000.0), 1_000.0, 10).pass);
        assert_eq!(judge(&report(500, 1.0), 100.0, 10).success_ratio, 0.5);
    }
}
