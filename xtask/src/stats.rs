//! Statistics for a handful of runs: median and min–max, the spread (coefficient of
//! variation), the head/base ratio, and the verdict.
//!
//! Five runs on a shared two-core machine are too few for confidence intervals, so the rule is
//! the one Envoy's and Tempesta's reviews use by eye: if the two ranges overlap, the difference
//! is within noise; if they do not, the better range wins. A difference of the medians under
//! [`EFFECT_MIN`] is noise too: with one run per build the ranges are points that never
//! overlap, and a table saying "1.00×, faster" helps nobody.
//!
//! Overlapping ranges say nothing when the runs themselves scatter widely: a build whose runs
//! differ by 4× overlaps everything, and "within noise" would then hide a machine that was busy
//! with something else. So before any verdict, each build's runs must agree with each other:
//! a figure whose coefficient of variation (sample standard deviation over mean) exceeds
//! [`NOISE_CV_MAX`] for either build gets no verdict but "noisy: rerun".

use serde::Serialize;

/// The smallest relative difference of the medians that can earn a verdict other than noise:
/// quiet runs on a two-core machine scatter by 1–5% ([`NOISE_CV_MAX`]'s note), so with two or
/// three runs a build's range can miss the other's by chance when the medians are closer.
pub const EFFECT_MIN: f64 = 0.05;

/// The largest coefficient of variation of one build's runs that still earns a verdict: 10%.
/// Quiet runs on a two-core machine scatter by 1–5%; past 10% something else is competing for
/// the CPUs, and with five runs the median is then uncertain by about 5% (1.25 × CV / √5), the
/// size of the regressions `--fail-above 5` is meant to catch, so no verdict can be trusted.
pub const NOISE_CV_MAX: f64 = 0.10;

/// Median and range of one figure over the runs of one build.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub runs: usize,
    /// Coefficient of variation: sample standard deviation over mean. `None` with fewer than two
    /// runs or a zero mean, where it means nothing.
    pub cv: Option<f64>,
}

impl Summary {
    /// `None` for no samples; NaN samples are ignored (a figure h2load could not measure).
    pub fn of(samples: &[f64]) -> Option<Summary> {
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let mid = sorted.len() / 2;
        let median = if sorted.len() % 2 == 1 {
            sorted[mid]
        } else {
            (sorted[mid - 1] + sorted[mid]) / 2.0
        };
        Some(Summary {
            median,
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            runs: sorted.len(),
            cv: coefficient_of_variation(&sorted),
        })
    }

    /// Whether the runs scatter too much for a verdict ([`NOISE_CV_MAX`]).
    pub fn noisy(&self) -> bool {
        self.cv.is_some_and(|cv| cv > NOISE_CV_MAX)
    }

    fn overlaps(&self, other: &Summary) -> bool {
        self.min <= other.max && other.min <= self.max
    }
}

/// Which way a figure improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Higher,
    Lower,
}

/// The outcome of comparing head with base on one figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Faster,
    Slower,
    WithinNoise,
    /// Either build's runs scatter more than [`NOISE_CV_MAX`]: no verdict, rerun.
    Noisy,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::WithinNoise => "within noise",
            Verdict::Noisy => "noisy: rerun",
        }
    }
}

/// Head's median over base's; `None` when base's is zero (nothing to compare against).
pub fn ratio(base: &Summary, head: &Summary) -> Option<f64> {
    (base.median != 0.0).then(|| head.median / base.median)
}

/// Runs that scatter too much for either build are noisy, whatever the ranges say; then
/// overlapping ranges, or medians within [`EFFECT_MIN`] of each other, are noise; otherwise
/// head is faster when its whole range is better.
pub fn verdict(base: &Summary, head: &Summary, better: Better) -> Verdict {
    if base.noisy() || head.noisy() {
        return Verdict::Noisy;
    }
    let small = ratio(base, head).is_some_and(|r| (r - 1.0).abs() < EFFECT_MIN);
    if base.overlaps(head) || small {
        return Verdict::WithinNoise;
    }
    let head_is_higher = head.min > base.max;
    match (better, head_is_higher) {
        (Better::Higher, true) | (Better::Lower, false) => Verdict::Faster,
        (Better::Higher, false) | (Better::Lower, true) => Verdict::Slower,
    }
}

/// Whether head's median grew past base's by more than `percent` (for `--fail-above`).
pub fn regressed(base: &Summary, head: &Summary, percent: f64) -> bool {
    ratio(base, head).is_some_and(|r| r > 1.0 + percent / 100.0)
}

/// Sample standard deviation over mean, `None` for fewer than two samples or a zero mean.
fn coefficient_of_variation(samples: &[f64]) -> Option<f64> {
    if samples.len() < 2 {
        return None;
    }
    let n = samples.len() as f64;
    let mean = samples.iter().sum::<f64>() / n;
    if mean == 0.0 {
        return None;
    }
    let squares: f64 = samples.iter().map(|x| (x - mean).powi(2)).sum();
    Some((squares / (n - 1.0)).sqrt() / mean.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(samples: &[f64]) -> Summary {
        Summary::of(samples).expect("samples")
    }

    #[test]
    fn median_and_range() {
        let odd = summary(&[5.0, 1.0, 3.0]);
        assert_eq!((odd.median, odd.min, odd.max, odd.runs), (3.0, 1.0, 5.0, 3));
        assert_eq!(summary(&[4.0, 1.0, 2.0, 3.0]).median, 2.5);
        assert_eq!(summary(&[7.0]).median, 7.0);
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[f64::NAN]), None);
        assert_eq!(summary(&[f64::NAN, 2.0]).runs, 1);
    }

    #[test]
    fn verdicts() {
        let base = summary(&[100.0, 104.0, 102.0]);
        let overlapping = summary(&[103.0, 110.0, 108.0]);
        let above = summary(&[105.0, 110.0]);
        let below = summary(&[90.0, 95.0]);
        assert_eq!(
            verdict(&base, &overlapping, Better::Higher),
            Verdict::WithinNoise
        );
        assert_eq!(verdict(&base, &above, Better::Higher), Verdict::Faster);
        assert_eq!(verdict(&base, &above, Better::Lower), Verdict::Slower);
        assert_eq!(verdict(&base, &below, Better::Higher), Verdict::Slower);
        assert_eq!(verdict(&base, &below, Better::Lower), Verdict::Faster);
        // Single runs: a difference under 5% is noise, one above is not.
        let one = summary(&[100.0]);
        assert_eq!(
            verdict(&one, &summary(&[104.9]), Better::Higher),
            Verdict::WithinNoise
        );
        assert_eq!(
            verdict(&one, &summary(&[105.1]), Better::Higher),
            Verdict::Faster
        );
        // Two runs each whose ranges miss each other by 2%: what quiet runs scatter by.
        let two = summary(&[100.0, 100.5]);
        assert_eq!(
            verdict(&two, &summary(&[102.0, 102.5]), Better::Lower),
            Verdict::WithinNoise
        );
        // Touching ranges count as overlapping.
        assert_eq!(
            verdict(&base, &summary(&[104.0, 110.0]), Better::Higher),
            Verdict::WithinNoise
        );
    }

    #[test]
    fn spread() {
        // Mean 10, sample variance ((−1)² + 0 + 1²) / 2 = 1: CV 10%.
        let cv = summary(&[9.0, 10.0, 11.0]).cv.expect("three runs");
        assert!((cv - 0.1).abs() < 1e-12, "{cv}");
        assert_eq!(summary(&[7.0]).cv, None);
        assert_eq!(summary(&[0.0, 0.0]).cv, None);
        assert_eq!(summary(&[5.0, 5.0]).cv, Some(0.0));
        // Exactly at the threshold is not noisy; just past it is.
        assert!(!summary(&[9.0, 10.0, 11.0]).noisy());
        assert!(summary(&[8.9, 10.0, 11.1]).noisy());
        assert!(!summary(&[7.0]).noisy());
    }

    #[test]
    fn noisy_runs_get_no_verdict() {
        let quiet = summary(&[100.0, 101.0, 102.0]);
        // Runs 4× apart: their range overlaps anything, but that is not "within noise".
        let scattered = summary(&[40.0, 100.0, 160.0]);
        for better in [Better::Higher, Better::Lower] {
            assert_eq!(verdict(&quiet, &scattered, better), Verdict::Noisy);
            assert_eq!(verdict(&scattered, &quiet, better), Verdict::Noisy);
        }
        // Noisy wins over a clear difference too: the figure must be measured again.
        let far = summary(&[150.0, 200.0, 250.0]);
        assert_eq!(verdict(&quiet, &far, Better::Higher), Verdict::Noisy);
        let near_far = summary(&[150.0, 151.0, 152.0]);
        assert_eq!(verdict(&quiet, &near_far, Better::Higher), Verdict::Faster);
        assert_eq!(Verdict::Noisy.as_str(), "noisy: rerun");
    }

    #[test]
    fn ratios_and_regressions() {
        let base = summary(&[2.0]);
        let head = summary(&[2.2]);
        assert!((ratio(&base, &head).expect("nonzero base") - 1.1).abs() < 1e-12);
        assert_eq!(ratio(&summary(&[0.0]), &head), None);
        assert!(regressed(&base, &head, 5.0));
        assert!(!regressed(&base, &head, 15.0));
        assert!(!regressed(&head, &base, 0.0));
    }
}
