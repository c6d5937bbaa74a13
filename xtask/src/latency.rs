//! Latency percentiles (p50, p99, p99.9) from a per-request log in h2load's `--log-file`
//! format, which `cargo xtask h3load --log-file` writes too, so both load generators are read
//! by one parser: a line per request, tab-separated, the start time in microseconds since the
//! epoch, the status (`-1` for a stream that failed) and the microseconds until the end of the
//! response. More columns may follow (h2load reserves them) and are ignored.
//!
//! A run can log millions of lines, so the log is read a line at a time into a histogram of
//! constant size: exact below [`EXACT_BELOW_US`], and above it in buckets 1/128 of their value
//! wide, so a percentile is at most 0.8% above the true one (reported as its bucket's highest
//! value, never below the truth). The bench's verdicts need 5% to speak, far above that.
//!
//! Which requests count: those with a status, whatever it is, as h2load's "time for request"
//! counts every completed stream; failed streams (`-1`) have no response time and are left out.

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Serialize;

/// Sub-buckets per power of two: each bucket above [`EXACT_BELOW_US`] is 1/128 of its lowest
/// value wide.
const SUB_BUCKETS: u64 = 128;
/// Durations below this many microseconds have a bucket each.
const EXACT_BELOW_US: u64 = SUB_BUCKETS;
/// Powers of two above the exact range that a `u64` of microseconds can reach (2^7 to 2^63).
const OCTAVES: u64 = 64 - 7;
/// Buckets in all: the exact ones, then [`SUB_BUCKETS`] per octave.
const BUCKETS: usize = (EXACT_BELOW_US + OCTAVES * SUB_BUCKETS) as usize;
/// The fewest timed requests for a p99: with fewer, the "99th percentile" is the maximum.
pub const P99_REQUESTS_MIN: u64 = 100;
/// The fewest timed requests for a p99.9.
pub const P999_REQUESTS_MIN: u64 = 1_000;

/// One line of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLine {
    /// When the request started, in microseconds since the epoch.
    pub start_us: u64,
    /// The response's status; `None` for a stream that failed (`-1`).
    pub status: Option<u16>,
    /// From the request's start to the end of its response, in microseconds.
    pub duration_us: u64,
}

impl LogLine {
    /// Parses one line (without its newline); `None` if it is not `START\tSTATUS\tMICROS...`.
    pub fn parse(line: &str) -> Option<LogLine> {
        let mut fields = line.split('\t').map(str::trim);
        let start_us = fields.next()?.parse().ok()?;
        let status = match fields.next()? {
            "-1" => None,
            code => Some(code.parse().ok()?),
        };
        let duration_us = fields.next()?.parse().ok()?;
        Some(LogLine {
            start_us,
            status,
            duration_us,
        })
    }
}

/// The line as h2load writes it, without the newline.
impl fmt::Display for LogLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            Some(status) => write!(f, "{}\t{status}\t{}", self.start_us, self.duration_us),
            None => write!(f, "{}\t-1\t{}", self.start_us, self.duration_us),
        }
    }
}

/// Durations in microseconds, counted in buckets (see the module's note on precision).
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
        }
    }
}

impl Histogram {
    pub fn record(&mut self, us: u64) {
        self.counts[bucket(us)] += 1;
        self.total += 1;
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// The `q` quantile (0 < q ≤ 1) by nearest rank: the smallest recorded value (its bucket's
    /// highest) that at least `q` of the samples do not exceed. `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (index, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(bucket_high(index));
            }
        }
        None
    }
}

/// The bucket of a duration: itself below [`EXACT_BELOW_US`], else its octave and the next
/// seven bits below its highest one.
fn bucket(us: u64) -> usize {
    if us < EXACT_BELOW_US {
        return us as usize;
    }
    let octave = u64::from(63 - us.leading_zeros()) - 7;
    let sub = (us >> octave) - SUB_BUCKETS;
    (EXACT_BELOW_US + octave * SUB_BUCKETS + sub) as usize
}

/// The highest duration that falls in bucket `index`.
fn bucket_high(index: usize) -> u64 {
    let index = index as u64;
    if index < EXACT_BELOW_US {
        return index;
    }
    let octave = (index - EXACT_BELOW_US) / SUB_BUCKETS;
    let sub = (index - EXACT_BELOW_US) % SUB_BUCKETS;
    let low = (SUB_BUCKETS + sub) << octave;
    low.saturating_add((1u64 << octave) - 1)
}

/// The percentiles of one run, in milliseconds; a percentile the run had too few requests for
/// is `None` (see [`P99_REQUESTS_MIN`], [`P999_REQUESTS_MIN`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Tails {
    /// Requests with a response time (every logged one but the failed streams).
    pub timed: u64,
    /// Failed streams (`-1`), left out of the percentiles.
    pub failed: u64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p999_ms: Option<f64>,
}

impl Tails {
    pub fn of(histogram: &Histogram, failed: u64) -> Tails {
        let timed = histogram.total();
        let at = |q: f64, min: u64| {
            (timed >= min)
                .then(|| histogram.quantile(q))
                .flatten()
                .map(|us| us as f64 / 1e3)
        };
        Tails {
            timed,
            failed,
            p50_ms: at(0.50, 1),
            p99_ms: at(0.99, P99_REQUESTS_MIN),
            p999_ms: at(0.999, P999_REQUESTS_MIN),
        }
    }

    /// Which percentiles are missing and why, in words that do not depend on the run (so that a
    /// report says it once): `no p99.9 (fewer than 1,000 timed requests)`; `None` when none is.
    pub fn missing(&self) -> Option<String> {
        let needs = [
            ("p50", self.p50_ms, 1),
            ("p99", self.p99_ms, P99_REQUESTS_MIN),
            ("p99.9", self.p999_ms, P999_REQUESTS_MIN),
        ];
        let missing: Vec<(&str, u64)> = needs
            .into_iter()
            .filter(|(_, value, _)| value.is_none())
            .map(|(name, _, min)| (name, min))
            .collect();
        let (_, fewest) = missing.first()?;
        let names: Vec<&str> = missing.iter().map(|(name, _)| *name).collect();
        Some(format!(
            "no {} (fewer than {} timed request{})",
            names.join(", "),
            crate::report::number(*fewest as f64, 0),
            if *fewest == 1 { "" } else { "s" },
        ))
    }
}

/// Reads a log a line at a time into its percentiles; a line that is not a log line is an
/// error (a cut last line too: a run whose generator was killed has failed anyway).
pub fn read(reader: impl BufRead) -> Result<Tails> {
    let mut histogram = Histogram::default();
    let mut failed = 0;
    for (number, line) in reader.lines().enumerate() {
        let line = line.context("reading the request log")?;
        if line.is_empty() {
            continue;
        }
        let Some(parsed) = LogLine::parse(&line) else {
            bail!(
                "line {} is not START\\tSTATUS\\tMICROSECONDS: {line:?}",
                number + 1
            );
        };
        match parsed.status {
            Some(_) => histogram.record(parsed.duration_us),
            None => failed += 1,
        }
    }
    Ok(Tails::of(&histogram, failed))
}

/// [`read`] on a file.
pub fn read_file(path: &Path) -> Result<Tails> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    read(BufReader::new(file)).with_context(|| format!("in {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values: impl IntoIterator<Item = u64>) -> Histogram {
        let mut h = Histogram::default();
        for v in values {
            h.record(v);
        }
        h
    }

    #[test]
    fn log_lines_as_h2load_writes_them() {
        let line = LogLine::parse("1733390000123456\t200\t1234").expect("a log line");
        assert_eq!(
            line,
            LogLine {
                start_us: 1_733_390_000_123_456,
                status: Some(200),
                duration_us: 1_234
            }
        );
        assert_eq!(line.to_string(), "1733390000123456\t200\t1234");
        let failed = LogLine::parse("5\t-1\t70").expect("a failed stream");
        assert_eq!(failed.status, None);
        assert_eq!(failed.to_string(), "5\t-1\t70");
        // Columns h2load may add later are ignored.
        assert_eq!(
            LogLine::parse("5\t404\t7\tx").map(|l| l.duration_us),
            Some(7)
        );
        for bad in [
            "",
            "5\t200",
            "5\tok\t7",
            "-5\t200\t7",
            "5\t-2\t7",
            "5\t200\t7.5",
        ] {
            assert_eq!(LogLine::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn buckets_are_exact_below_128_us_then_within_one_128th() {
        for us in [0, 1, 127] {
            assert_eq!(bucket_high(bucket(us)), us);
        }
        assert_eq!(bucket(128), 128);
        assert_eq!(bucket_high(bucket(128)), 128);
        assert_eq!(bucket(255), 255);
        // From 256 on, two values per bucket, then four ...
        assert_eq!(bucket(256), bucket(257));
        assert_eq!(bucket_high(bucket(256)), 257);
        for us in [
            1_000,
            12_345,
            999_999,
            60_000_000,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let high = bucket_high(bucket(us));
            assert!(high >= us, "{us} -> {high}");
            assert!((high - us) as f64 <= us as f64 / 128.0, "{us} -> {high}");
            assert!(bucket(us) < BUCKETS);
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_by_nearest_rank() {
        let h = histogram(1..=100);
        assert_eq!(h.quantile(0.5), Some(50));
        assert_eq!(h.quantile(0.99), Some(99));
        assert_eq!(h.quantile(0.999), Some(100));
        assert_eq!(h.quantile(1.0), Some(100));
        assert_eq!(h.quantile(0.0), Some(1));
        assert_eq!(histogram([7]).quantile(0.5), Some(7));
        assert_eq!(Histogram::default().quantile(0.5), None);
        // A slow tail: 990 fast requests and 10 slow ones.
        let tail = histogram((0..990).map(|_| 100).chain((0..10).map(|_| 120)));
        assert_eq!(tail.quantile(0.99), Some(100));
        assert_eq!(tail.quantile(0.999), Some(120));
    }

    #[test]
    fn percentiles_need_enough_requests() {
        let tails = Tails::of(&histogram((1..=1_000).map(|ms| ms * 1_000)), 3);
        assert_eq!(tails.timed, 1_000);
        assert_eq!(tails.failed, 3);
        // 500 ms, 990 ms and 999 ms, each at most 1/128 above.
        let near = |got: Option<f64>, want: f64| {
            let got = got.expect("measured");
            assert!(
                got >= want && got <= want * (1.0 + 1.0 / 128.0),
                "{got} vs {want}"
            );
        };
        near(tails.p50_ms, 500.0);
        near(tails.p99_ms, 990.0);
        near(tails.p999_ms, 999.0);
        assert_eq!(tails.missing(), None);
        let few = Tails::of(&histogram(1..=500), 0);
        assert_eq!((few.p50_ms, few.p99_ms.is_some()), (Some(0.25), true));
        assert_eq!(few.p999_ms, None);
        assert_eq!(
            few.missing().as_deref(),
            Some("no p99.9 (fewer than 1,000 timed requests)")
        );
        let none = Tails::of(&Histogram::default(), 5);
        assert_eq!((none.p50_ms, none.p99_ms, none.p999_ms), (None, None, None));
        assert_eq!(
            none.missing().as_deref(),
            Some("no p50, p99, p99.9 (fewer than 1 timed request)")
        );
    }

    #[test]
    fn a_log_is_read_line_by_line() {
        let mut text = String::new();
        for i in 1..=2_000u64 {
            text.push_str(&format!("{}\t200\t{}\n", 1_700_000_000_000_000 + i, i));
        }
        text.push_str("1700000000009999\t-1\t5000000\n\n");
        let tails = read(text.as_bytes()).expect("a valid log");
        assert_eq!((tails.timed, tails.failed), (2_000, 1));
        assert_eq!(tails.p50_ms, Some(1.003));
        assert!(tails.p999_ms.expect("2,000 requests") >= 1.998);
        let cut = read("1\t200\t5\n2\t20".as_bytes()).expect_err("a cut line");
        assert!(format!("{cut}").starts_with("line 2 is not"), "{cut}");
        assert!(read_file(Path::new("/nonexistent/h2load.log")).is_err());
    }
}
