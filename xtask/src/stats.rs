//! Statistics for a handful of runs: median and min–max, the head/base ratio, and the verdict.
//!
//! Five runs on a shared two-core machine are too few for confidence intervals, so the rule is
//! the one Envoy's and Tempesta's reviews use by eye: if the two ranges overlap, the difference
//! is within noise; if they do not, the better range wins. A difference of the medians under
//! [`EFFECT_MIN`] is noise too: with one run per build the ranges are points that never
//! overlap, and a table saying "1.00×, faster" helps nobody.

use serde::Serialize;

/// The smallest relative difference of the medians that can earn a verdict other than noise.
pub const EFFECT_MIN: f64 = 0.01;

/// Median and range of one figure over the runs of one build.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub runs: usize,
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
        })
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
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::WithinNoise => "within noise",
        }
    }
}

/// Head's median over base's; `None` when base's is zero (nothing to compare against).
pub fn ratio(base: &Summary, head: &Summary) -> Option<f64> {
    (base.median != 0.0).then(|| head.median / base.median)
}

/// Overlapping ranges, or medians within [`EFFECT_MIN`] of each other, are noise; otherwise
/// head is faster when its whole range is better.
pub fn verdict(base: &Summary, head: &Summary, better: Better) -> Verdict {
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
        // Single runs: a difference under 1% is noise, one above is not.
        let one = summary(&[100.0]);
        assert_eq!(
            verdict(&one, &summary(&[100.9]), Better::Higher),
            Verdict::WithinNoise
        );
        assert_eq!(
            verdict(&one, &summary(&[101.1]), Better::Higher),
            Verdict::Faster
        );
        // Touching ranges count as overlapping.
        assert_eq!(
            verdict(&base, &summary(&[104.0, 120.0]), Better::Higher),
            Verdict::WithinNoise
        );
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
