//! The soak's verdict, computed from what was recorded and nothing else: the per-second samples,
//! the per-second request outcomes and the fault log. Pure, so every rule is unit-tested with
//! made-up series.
//!
//! The rules, each with its threshold in a constant so the report can print it:
//!
//! - **Errors explained.** A request that failed (no response, or a status of 400 and up) must
//!   fall in an origin-down window, widened by [`ORIGIN_GRACE_SECS`] for health checks to see
//!   the origin back. Nothing else a soak does (reloads, slowloris, slow readers, floods) may
//!   cost a legitimate request.
//! - **Memory and descriptors flat.** The least-squares slope of RSS and of the open
//!   descriptors over the quiet seconds after warm-up (those outside every fault window and the
//!   few seconds after it, since a fault's own connections are not a leak) stays under
//!   [`RSS_SLOPE_MAX_MIB_PER_MIN`] and [`FD_SLOPE_MAX_PER_MIN`].
//! - **Faults recovered.** Within [`RECOVERY_SECS`] of a fault's end, some second has at least
//!   [`RECOVERY_FRACTION`] of the planned rate in successful requests.
//! - **Rate held.** The median successful req/s over the quiet seconds is at least
//!   [`THROUGHPUT_FRACTION`] of the planned rate, so a generator that fell behind (or a server
//!   that could not keep up) is not mistaken for a calm soak.

/// Seconds after an origin restart during which failed requests are still the fault's.
pub const ORIGIN_GRACE_SECS: f64 = 5.0;
/// RSS may grow by less than this, in MiB per minute, after warm-up.
pub const RSS_SLOPE_MAX_MIB_PER_MIN: f64 = 1.0;
/// Open descriptors may grow by less than this per minute after warm-up.
pub const FD_SLOPE_MAX_PER_MIN: f64 = 1.0;
/// Seconds after a fault's end by which the rate must be back.
pub const RECOVERY_SECS: u32 = 10;
/// The share of the planned rate that counts as recovered.
pub const RECOVERY_FRACTION: f64 = 0.9;
/// The share of the planned rate the quiet seconds must hold (median).
pub const THROUGHPUT_FRACTION: f64 = 0.95;
/// Seconds after a fault's end that are still not quiet: the fault's connections closing, the
/// rate catching up.
pub const QUIET_AFTER_SECS: f64 = 5.0;
/// Fewer quiet samples than this make a slope meaningless.
const SLOPE_SAMPLES_MIN: usize = 10;

/// What a fault does, as the verdict and the report need to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The origin is killed, then restarted on the same port.
    OriginDown,
    /// The config is rewritten and Squall sent SIGHUP.
    Reload,
    /// Connections that send a request head one byte every few seconds.
    Slowloris,
    /// Connections that ask for a large response and never read it.
    SlowReaders,
    /// A burst of new connections.
    Flood,
}

impl FaultKind {
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::OriginDown => "origin down",
            FaultKind::Reload => "reload",
            FaultKind::Slowloris => "slowloris",
            FaultKind::SlowReaders => "slow readers",
            FaultKind::Flood => "flood",
        }
    }
}

/// One fault as it happened: seconds since the soak's start.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    pub kind: FaultKind,
    pub start: f64,
    pub end: f64,
    /// What the injector saw (connections closed by the server, the reload's result ...).
    pub note: String,
    /// Whether the injector itself worked (the origin came back, the reload was applied).
    pub ok: bool,
}

/// One second of the soak: the process as sampled, and the requests that started in it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Second {
    /// Seconds since the start (the sample was taken at the end of this second).
    pub t: u32,
    pub rss_kib: u64,
    pub fds: u64,
    /// `squall_connections_active`, all workers.
    pub connections: u64,
    /// Requests that started in this second and succeeded (2xx, 3xx).
    pub ok: u64,
    /// Requests that started in this second and failed (no response, or 4xx, 5xx).
    pub failed: u64,
    /// Counters from `/metrics` at the sample, for the report's table.
    pub requests_total: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
}

/// The plan the verdict judges against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    /// Requests per second asked of the generators, uploads included.
    pub rate: f64,
    /// Seconds of warm-up: no rule looks at them.
    pub warmup_secs: u32,
}

/// The outcome of one rule, for people.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub name: &'static str,
    pub measured: String,
    pub threshold: String,
    pub pass: bool,
}

/// How one fault recovered: seconds from its end to the first second back at the rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recovery {
    pub secs: Option<f64>,
}

/// Every rule's outcome, and each fault's recovery (in the fault log's order).
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub rules: Vec<Rule>,
    pub recoveries: Vec<Recovery>,
    pub unexplained_failures: u64,
    pub explained_failures: u64,
}

impl Verdict {
    pub fn pass(&self) -> bool {
        self.rules.iter().all(|rule| rule.pass)
    }
}

/// Judges a soak.
pub fn judge(plan: Plan, seconds: &[Second], faults: &[Fault]) -> Verdict {
    let (explained, unexplained) = failures(seconds, faults);
    let quiet: Vec<&Second> = seconds
        .iter()
        .filter(|s| s.t >= plan.warmup_secs && is_quiet(f64::from(s.t), faults))
        .collect();
    let recoveries: Vec<Recovery> = faults
        .iter()
        .map(|fault| recovery(fault, seconds, plan.rate))
        .collect();
    let rules = vec![
        Rule {
            name: "failed requests outside origin-down windows",
            measured: format!("{unexplained} ({explained} inside them)"),
            threshold: "0".into(),
            pass: unexplained == 0,
        },
        slope_rule(
            "RSS slope after warm-up",
            &quiet,
            |s| s.rss_kib as f64 / 1024.0,
            "MiB/min",
            RSS_SLOPE_MAX_MIB_PER_MIN,
        ),
        slope_rule(
            "open descriptors slope after warm-up",
            &quiet,
            |s| s.fds as f64,
            "fd/min",
            FD_SLOPE_MAX_PER_MIN,
        ),
        recovery_rule(faults, &recoveries),
        throughput_rule(&quiet, plan.rate),
    ];
    Verdict {
        rules,
        recoveries,
        unexplained_failures: unexplained,
        explained_failures: explained,
    }
}

/// The least-squares slope of `points` (x, y); `None` for fewer than two distinct x.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

/// Whether second `t` lies outside every fault's window, from a second before its start (for the
/// request that began just before it) to [`QUIET_AFTER_SECS`] after its end.
pub fn is_quiet(t: f64, faults: &[Fault]) -> bool {
    faults
        .iter()
        .all(|fault| t + 1.0 < fault.start || t > fault.end + QUIET_AFTER_SECS)
}

/// Failed requests inside origin-down windows (with grace) and outside them.
fn failures(seconds: &[Second], faults: &[Fault]) -> (u64, u64) {
    let mut explained = 0;
    let mut unexplained = 0;
    for second in seconds.iter().filter(|s| s.failed > 0) {
        let t = f64::from(second.t);
        let inside = faults.iter().any(|fault| {
            fault.kind == FaultKind::OriginDown
                && t + 1.0 >= fault.start
                && t <= fault.end + ORIGIN_GRACE_SECS
        });
        if inside {
            explained += second.failed;
        } else {
            unexplained += second.failed;
        }
    }
    (explained, unexplained)
}

fn recovery(fault: &Fault, seconds: &[Second], rate: f64) -> Recovery {
    let first = fault.end.ceil() as u32;
    let last = first + RECOVERY_SECS;
    let back = seconds
        .iter()
        .filter(|s| s.t >= first && s.t <= last)
        .find(|s| s.ok as f64 >= RECOVERY_FRACTION * rate);
    Recovery {
        secs: back.map(|s| (f64::from(s.t) + 1.0 - fault.end).max(0.0)),
    }
}

fn slope_rule(
    name: &'static str,
    quiet: &[&Second],
    value: impl Fn(&Second) -> f64,
    unit: &str,
    max: f64,
) -> Rule {
    let points: Vec<(f64, f64)> = quiet
        .iter()
        .map(|s| (f64::from(s.t) / 60.0, value(s)))
        .collect();
    let threshold = format!("< {max} {unit} over at least {SLOPE_SAMPLES_MIN} quiet samples");
    match slope(&points).filter(|_| points.len() >= SLOPE_SAMPLES_MIN) {
        Some(per_min) => Rule {
            name,
            measured: format!("{per_min:+.3} {unit} ({} samples)", points.len()),
            threshold,
            pass: per_min < max,
        },
        None => Rule {
            name,
            measured: format!("too few quiet samples ({})", points.len()),
            threshold,
            pass: false,
        },
    }
}

fn recovery_rule(faults: &[Fault], recoveries: &[Recovery]) -> Rule {
    let failed_injections = faults.iter().filter(|f| !f.ok).count();
    let late = recoveries.iter().filter(|r| r.secs.is_none()).count();
    let slowest = recoveries
        .iter()
        .filter_map(|r| r.secs)
        .fold(0.0_f64, f64::max);
    Rule {
        name: "faults recovered",
        measured: format!(
            "{} of {} (slowest {slowest:.0} s){}",
            faults.len() - late,
            faults.len(),
            if failed_injections > 0 {
                format!(", {failed_injections} injections failed")
            } else {
                String::new()
            }
        ),
        threshold: format!(
            "all, >= {:.0}% of the rate within {RECOVERY_SECS} s of the end",
            RECOVERY_FRACTION * 100.0
        ),
        pass: late == 0 && failed_injections == 0 && !faults.is_empty(),
    }
}

fn throughput_rule(quiet: &[&Second], rate: f64) -> Rule {
    let mut ok: Vec<u64> = quiet.iter().map(|s| s.ok).collect();
    ok.sort_unstable();
    let median = ok.get(ok.len() / 2).copied();
    Rule {
        name: "median successful req/s in quiet seconds",
        measured: median.map_or("no quiet seconds".into(), |m| m.to_string()),
        threshold: format!(">= {:.0}", THROUGHPUT_FRACTION * rate),
        pass: median.is_some_and(|m| m as f64 >= THROUGHPUT_FRACTION * rate),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steady(secs: u32, rss_kib: impl Fn(u32) -> u64, ok: u64) -> Vec<Second> {
        (0..secs)
            .map(|t| Second {
                t,
                rss_kib: rss_kib(t),
                fds: 40,
                ok,
                ..Second::default()
            })
            .collect()
    }

    fn fault(kind: FaultKind, start: f64, end: f64) -> Fault {
        Fault {
            kind,
            start,
            end,
            note: String::new(),
            ok: true,
        }
    }

    const PLAN: Plan = Plan {
        rate: 100.0,
        warmup_secs: 10,
    };

    fn rule<'a>(verdict: &'a Verdict, prefix: &str) -> &'a Rule {
        verdict
            .rules
            .iter()
            .find(|r| r.name.starts_with(prefix))
            .expect("the rule")
    }

    #[test]
    fn slopes_are_least_squares() {
        let line: Vec<(f64, f64)> = (0..10).map(|x| (x as f64, 3.0 * x as f64 + 1.0)).collect();
        assert!((slope(&line).unwrap() - 3.0).abs() < 1e-9);
        let noisy = [(0.0, 1.0), (1.0, 3.0), (2.0, 2.0), (3.0, 4.0)];
        assert!((slope(&noisy).unwrap() - 0.8).abs() < 1e-9);
        assert_eq!(slope(&[(1.0, 1.0)]), None);
        assert_eq!(slope(&[(1.0, 1.0), (1.0, 5.0)]), None);
    }

    #[test]
    fn a_calm_soak_passes() {
        let seconds = steady(120, |_| 50_000, 100);
        let faults = [fault(FaultKind::Reload, 30.0, 30.5)];
        let verdict = judge(PLAN, &seconds, &faults);
        assert!(verdict.pass(), "{verdict:#?}");
        // The first whole second after the end (31) ends 1.5 s after it.
        assert_eq!(verdict.recoveries[0].secs, Some(1.5));
    }

    #[test]
    fn a_leak_fails_the_slope_rules() {
        // 2 MiB a minute: 2048 KiB / 60 s.
        let seconds = steady(180, |t| 50_000 + u64::from(t) * 2048 / 60, 100);
        let verdict = judge(PLAN, &seconds, &[fault(FaultKind::Flood, 60.0, 61.0)]);
        let rss = rule(&verdict, "RSS");
        assert!(!rss.pass && rss.measured.starts_with("+2.0"), "{rss:?}");
        assert!(rule(&verdict, "open descriptors").pass);
        let mut fds = steady(180, |_| 50_000, 100);
        for s in &mut fds {
            s.fds = 40 + u64::from(s.t) / 30; // 2 per minute
        }
        let verdict = judge(PLAN, &fds, &[]);
        assert!(!rule(&verdict, "open descriptors").pass);
    }

    #[test]
    fn fault_windows_are_not_counted_as_leaks() {
        let mut seconds = steady(180, |_| 50_000, 100);
        for s in seconds.iter_mut().filter(|s| (100..112).contains(&s.t)) {
            s.fds += 500;
            s.rss_kib += 100_000;
        }
        let faults = [fault(FaultKind::Slowloris, 100.0, 112.0)];
        assert!(judge(PLAN, &seconds, &faults).pass());
        assert!(!judge(PLAN, &seconds, &[]).pass());
    }

    #[test]
    fn failures_count_only_inside_origin_down_windows() {
        let mut seconds = steady(120, |_| 50_000, 100);
        seconds[40].failed = 7; // inside 40..45
        seconds[49].failed = 3; // within the grace after 45
        let faults = [fault(FaultKind::OriginDown, 40.2, 45.0)];
        let verdict = judge(PLAN, &seconds, &faults);
        assert_eq!(
            (verdict.explained_failures, verdict.unexplained_failures),
            (10, 0)
        );
        assert!(verdict.pass());
        seconds[80].failed = 1;
        let verdict = judge(PLAN, &seconds, &faults);
        assert_eq!(verdict.unexplained_failures, 1);
        assert!(!rule(&verdict, "failed requests").pass);
        // A reload explains nothing.
        let verdict = judge(PLAN, &seconds, &[fault(FaultKind::Reload, 40.0, 46.0)]);
        assert_eq!(verdict.unexplained_failures, 11);
    }

    #[test]
    fn recovery_needs_the_rate_back_in_time() {
        let mut seconds = steady(120, |_| 50_000, 100);
        for s in seconds.iter_mut().filter(|s| (40..52).contains(&s.t)) {
            s.ok = 30;
        }
        seconds[52].ok = 89; // under 90%
        let faults = [fault(FaultKind::OriginDown, 40.0, 45.0)];
        let verdict = judge(PLAN, &seconds, &faults);
        assert_eq!(verdict.recoveries[0].secs, Some(9.0)); // second 53 ends at 54
        assert!(rule(&verdict, "faults recovered").pass);
        for s in seconds.iter_mut().filter(|s| (52..60).contains(&s.t)) {
            s.ok = 50;
        }
        let verdict = judge(PLAN, &seconds, &faults);
        assert_eq!(verdict.recoveries[0].secs, None);
        assert!(!rule(&verdict, "faults recovered").pass);
        let mut broken = fault(FaultKind::OriginDown, 40.0, 45.0);
        broken.ok = false;
        let verdict = judge(PLAN, &steady(120, |_| 50_000, 100), &[broken]);
        assert!(!rule(&verdict, "faults recovered").pass);
    }

    #[test]
    fn a_soak_without_faults_or_at_a_lower_rate_fails() {
        let verdict = judge(PLAN, &steady(120, |_| 50_000, 100), &[]);
        assert!(!rule(&verdict, "faults recovered").pass);
        let verdict = judge(
            PLAN,
            &steady(120, |_| 50_000, 90),
            &[fault(FaultKind::Reload, 30.0, 31.0)],
        );
        let rate = rule(&verdict, "median");
        assert!(!rate.pass && rate.measured == "90", "{rate:?}");
        let short = judge(PLAN, &steady(15, |_| 1, 100), &[]);
        assert!(rule(&short, "RSS").measured.starts_with("too few"));
    }
}
