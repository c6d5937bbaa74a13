//! h2load, the load generator: the command line for one run, and the parser of its text report.
//! HTTP/3 runs use `cargo xtask h3load` (`h3load.rs`), which takes the same arguments and
//! writes the same report.
//!
//! h2load (nghttp2) speaks HTTP/1.1 and HTTP/2 with one client thread, pipelines with `-m`,
//! and paces an open loop with `--rps`. Its report is text meant for people, so the parser
//! takes only the lines it needs and fails loudly when they are missing.

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::scenario::Protocol;

/// How a run ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// Timing-based: `-D SECS`. Warm-up is a separate, earlier run, so that the server's CPU
    /// time can be read between the two (h2load's `--warm-up-time` would hide that boundary).
    Duration(u32),
    /// Count-based: `-n N`. h2load 1.52 never finishes a timing-based run when the server closes
    /// every connection (`Connection: close`), so such scenarios count requests instead.
    Count(u64),
}

/// h2load's rate mode (`-r N --rate-period P`): N new clients every period, up to `-c` clients
/// in all, each making `-n / -c` requests on a connection of its own and never reconnecting.
/// With one request per client, every request comes with a new connection and, over TLS, a
/// full handshake (a reconnecting client would resume its session instead).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConnectRate {
    pub per_period: u32,
    pub period_ms: u32,
}

impl ConnectRate {
    /// The pacing closest to `per_sec` new connections per second. h2load takes whole clients
    /// per period, so the shortest period of 10, 20, 50 or 100 ms that hits the rate within 1%
    /// is used; below 10/s, one client every P ms.
    pub fn per_sec(per_sec: f64) -> ConnectRate {
        let per_sec = per_sec.max(0.001);
        let fit = |period_ms: u32| {
            let per_period = (per_sec * f64::from(period_ms) / 1_000.0).round().max(1.0);
            ConnectRate {
                per_period: per_period.min(f64::from(u32::MAX)) as u32,
                period_ms,
            }
        };
        for period_ms in [10, 20, 50] {
            let pace = fit(period_ms);
            if (pace.actual_per_sec() - per_sec).abs() <= per_sec * 0.01 {
                return pace;
            }
        }
        if per_sec >= 10.0 {
            return fit(100);
        }
        ConnectRate {
            per_period: 1,
            period_ms: (1_000.0 / per_sec).round().min(1e9) as u32,
        }
    }

    /// The rate it really asks for, in connections per second.
    pub fn actual_per_sec(&self) -> f64 {
        f64::from(self.per_period) * 1_000.0 / f64::from(self.period_ms)
    }
}

/// One h2load invocation.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub url: String,
    /// Clients; with `connect_rate`, the total number of clients (one connection each).
    pub connections: u32,
    pub streams: u32,
    pub headers: Vec<String>,
    pub stop: Stop,
    /// Total open-loop rate; h2load's `--rps` is per client, so it is divided by `connections`.
    pub rate: Option<f64>,
    /// Rate mode: new clients at a fixed pace instead of `connections` clients from the start.
    pub connect_rate: Option<ConnectRate>,
    /// HTTP/1.1 (`--h1`), or HTTP/2: h2load's default, h2c with prior knowledge for `http://`
    /// and ALPN `h2` for `https://`; or HTTP/3, which `cargo xtask h3load` speaks with the
    /// same arguments (h2load 1.52 has none).
    pub protocol: Protocol,
    /// h2load's threads (`-t`, given only above 1); h3load has one and takes no `-t`.
    pub threads: u32,
}

impl Plan {
    /// The load generator that runs this plan: `h2load`, or `h3load` (an xtask subcommand)
    /// for HTTP/3. Its report is h2load's either way.
    pub fn tool(&self) -> &'static str {
        match self.protocol {
            Protocol::H1 | Protocol::H2 => "h2load",
            Protocol::H3 => "h3load",
        }
    }

    /// h2load's arguments (h3load takes the same), program name excluded.
    pub fn args(&self) -> Vec<String> {
        let mut args = match self.protocol {
            Protocol::H1 => vec!["--h1".to_string()],
            Protocol::H2 | Protocol::H3 => Vec::new(),
        };
        args.extend(["-c".into(), self.connections.to_string()]);
        args.extend(["-m".into(), self.streams.to_string()]);
        if self.threads > 1 && self.protocol != Protocol::H3 {
            args.extend(["-t".into(), self.threads.to_string()]);
        }
        match self.stop {
            Stop::Duration(secs) => args.extend(["-D".into(), secs.to_string()]),
            Stop::Count(requests) => args.extend(["-n".into(), requests.to_string()]),
        }
        if let Some(pace) = self.connect_rate {
            args.extend(["-r".into(), pace.per_period.to_string()]);
            args.push(format!("--rate-period={}ms", pace.period_ms));
        } else if let Some(rate) = self.rate {
            let per_client = rate / f64::from(self.connections.max(1));
            args.push(format!("--rps={per_client:.3}"));
        }
        for header in &self.headers {
            args.extend(["-H".into(), header.clone()]);
        }
        args.push(self.url.clone());
        args
    }

    /// How long to let h2load run before killing it: the planned time plus slack for start-up
    /// and draining. Count-based runs have no planned time, so they get a generous ceiling,
    /// and paced ones at least the time their pace takes.
    pub fn deadline_secs(&self, count_secs_max: u64) -> u64 {
        match self.stop {
            Stop::Duration(secs) => u64::from(secs) + 30,
            Stop::Count(count) => {
                let per_sec = match (self.connect_rate, self.rate) {
                    (Some(pace), _) => Some(pace.actual_per_sec()),
                    (None, rate) => rate,
                };
                let paced = per_sec.map_or(0, |r| (count as f64 / r.max(0.001)).ceil() as u64);
                count_secs_max.max(paced + 10) + 30
            }
        }
    }
}

/// The figures of one h2load report. Times are in microseconds. As h2load counts them,
/// `failed` includes `errored` (no response: reset, refused) and `errored` includes `timeout`;
/// `succeeded` is a 2xx or 3xx status.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Report {
    pub finished_secs: f64,
    pub req_per_sec: f64,
    pub total: u64,
    pub started: u64,
    pub done: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub errored: u64,
    pub timeout: u64,
    pub status_2xx: u64,
    pub status_3xx: u64,
    pub status_4xx: u64,
    pub status_5xx: u64,
    pub request: TimeRow,
    pub connect: TimeRow,
    pub first_byte: TimeRow,
    /// What the first TLS connection negotiated, as h2load prints it; `None` in cleartext.
    pub tls: Option<TlsInfo>,
    /// What h2load spoke: `http/1.1`, `h2c`, `h2` ("Application protocol:").
    pub application_protocol: Option<String>,
}

/// h2load's lines about the first TLS connection of its first thread.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TlsInfo {
    /// `TLSv1.3`
    pub protocol: String,
    /// `TLS_AES_128_GCM_SHA256`
    pub cipher: String,
    /// The key exchange: `X25519 253 bits`, `ECDH prime256v1 256 bits`.
    pub server_temp_key: String,
}

impl TlsInfo {
    /// `TLSv1.3, TLS_AES_128_GCM_SHA256, X25519 253 bits`
    pub fn summary(&self) -> String {
        [&self.protocol, &self.cipher, &self.server_temp_key]
            .into_iter()
            .filter(|part| !part.is_empty())
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Report {
    /// Responses with a status that is not a success (4xx, 5xx).
    pub fn http_failures(&self) -> u64 {
        self.failed.saturating_sub(self.errored)
    }
}

/// One "time for ..." row: min, max, mean and standard deviation, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct TimeRow {
    pub min_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
    pub sd_us: f64,
}

/// Parses h2load's text report (stdout; progress lines are skipped).
pub fn parse(text: &str) -> Result<Report> {
    let mut report = Report::default();
    let (mut finished, mut requests) = (false, false);
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("finished in ") {
            parse_finished(rest, &mut report).with_context(|| format!("in {line:?}"))?;
            finished = true;
        } else if let Some(rest) = line.strip_prefix("requests:") {
            parse_requests(rest, &mut report).with_context(|| format!("in {line:?}"))?;
            requests = true;
        } else if let Some(rest) = line.strip_prefix("status codes:") {
            parse_status(rest, &mut report).with_context(|| format!("in {line:?}"))?;
        } else if let Some(rest) = line.strip_prefix("TLS Protocol:") {
            report.tls.get_or_insert_default().protocol = rest.trim().into();
        } else if let Some(rest) = line.strip_prefix("Cipher:") {
            report.tls.get_or_insert_default().cipher = rest.trim().into();
        } else if let Some(rest) = line.strip_prefix("Server Temp Key:") {
            report.tls.get_or_insert_default().server_temp_key = rest.trim().into();
        } else if let Some(rest) = line.strip_prefix("Application protocol:") {
            report.application_protocol = Some(rest.trim().into());
        } else if let Some((name, rest)) = line.split_once(':') {
            let row = match name.trim() {
                "time for request" => &mut report.request,
                "time for connect" => &mut report.connect,
                "time to 1st byte" => &mut report.first_byte,
                _ => continue,
            };
            *row = parse_time_row(rest).with_context(|| format!("in {line:?}"))?;
        }
    }
    if !finished || !requests {
        bail!("no \"finished in\" or \"requests:\" line: h2load did not complete its report");
    }
    Ok(report)
}

/// `3.00s, 62889.33 req/s, 9.66MB/s`
fn parse_finished(rest: &str, report: &mut Report) -> Result<()> {
    let mut parts = rest.split(',').map(str::trim);
    let elapsed = parts.next().context("no elapsed time")?;
    report.finished_secs = parse_duration_us(elapsed)? / 1e6;
    let rate = parts.next().context("no req/s")?;
    let rate = rate.strip_suffix("req/s").context("no req/s")?;
    report.req_per_sec = rate.trim().parse().context("req/s is not a number")?;
    Ok(())
}

/// `188668 total, 188732 started, 188668 done, 188668 succeeded, 0 failed, 0 errored, 0 timeout`
fn parse_requests(rest: &str, report: &mut Report) -> Result<()> {
    for (count, word) in counted_words(rest)? {
        match word {
            "total" => report.total = count,
            "started" => report.started = count,
            "done" => report.done = count,
            "succeeded" => report.succeeded = count,
            "failed" => report.failed = count,
            "errored" => report.errored = count,
            "timeout" => report.timeout = count,
            _ => {}
        }
    }
    Ok(())
}

/// `188668 2xx, 0 3xx, 0 4xx, 0 5xx`
fn parse_status(rest: &str, report: &mut Report) -> Result<()> {
    for (count, word) in counted_words(rest)? {
        match word {
            "2xx" => report.status_2xx = count,
            "3xx" => report.status_3xx = count,
            "4xx" => report.status_4xx = count,
            "5xx" => report.status_5xx = count,
            _ => {}
        }
    }
    Ok(())
}

/// Splits `N word, N word, ...` into pairs.
fn counted_words(rest: &str) -> Result<Vec<(u64, &str)>> {
    rest.split(',')
        .map(|item| {
            let (count, word) = item.trim().split_once(' ').context("expected \"N word\"")?;
            Ok((count.parse().context("count is not a number")?, word.trim()))
        })
        .collect()
}

/// `     410us     12.98ms      1.02ms       333us    83.58%` (min, max, mean, sd, +/- sd)
fn parse_time_row(rest: &str) -> Result<TimeRow> {
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if fields.len() < 4 {
        bail!("expected min, max, mean and sd");
    }
    Ok(TimeRow {
        min_us: parse_duration_us(fields[0])?,
        max_us: parse_duration_us(fields[1])?,
        mean_us: parse_duration_us(fields[2])?,
        sd_us: parse_duration_us(fields[3])?,
    })
}

/// h2load prints `123us`, `1.02ms` or `3.00s`; returns microseconds.
fn parse_duration_us(text: &str) -> Result<f64> {
    let (number, scale) = if let Some(n) = text.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1e6)
    } else {
        bail!("{text:?} has no time unit");
    };
    let value: f64 = number
        .parse()
        .with_context(|| format!("{text:?} is not a time"))?;
    Ok(value * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEEPALIVE: &str = include_str!("../tests/fixtures/h2load-h1-keepalive.txt");
    const PIPELINED: &str = include_str!("../tests/fixtures/h2load-h1-pipelined.txt");
    const CLOSE: &str = include_str!("../tests/fixtures/h2load-h1-close.txt");
    const NOT_FOUND: &str = include_str!("../tests/fixtures/h2load-h1-404.txt");
    const RPS: &str = include_str!("../tests/fixtures/h2load-h1-rps.txt");
    /// Squall itself, `h1-pipelined`.
    const SQUALL: &str = include_str!("../tests/fixtures/h2load-h1-pipelined-squall.txt");
    /// nginx over TLS, keep-alive and a new client per request.
    const TLS: &str = include_str!("../tests/fixtures/h2load-h1-tls-keepalive.txt");
    const TLS_HANDSHAKES: &str = include_str!("../tests/fixtures/h2load-h1-tls-handshake.txt");
    /// Squall, `h2c-small` (h2c with prior knowledge, 100 × 10 streams).
    const H2C: &str = include_str!("../tests/fixtures/h2load-h2c.txt");
    /// nginx, `h2-tls-small` (ALPN h2, 100 × 10 streams).
    const H2_TLS: &str = include_str!("../tests/fixtures/h2load-h2-tls.txt");

    #[test]
    fn parses_a_keepalive_run() {
        let report = parse(KEEPALIVE).expect("fixture parses");
        assert_eq!(report.finished_secs, 3.0);
        assert_eq!(report.req_per_sec, 62889.33);
        assert_eq!(report.total, 188_668);
        assert_eq!(report.started, 188_732);
        assert_eq!(report.done, 188_668);
        assert_eq!(report.succeeded, 188_668);
        assert_eq!((report.failed, report.errored, report.timeout), (0, 0, 0));
        assert_eq!(report.status_2xx, 188_668);
        let request = TimeRow {
            min_us: 410.0,
            max_us: 12_980.0,
            mean_us: 1_020.0,
            sd_us: 333.0,
        };
        assert_eq!(report.request, request);
        assert_eq!(report.first_byte.mean_us, 2_050.0);
        assert_eq!(report.connect.max_us, 787.0);
    }

    #[test]
    fn parses_pipelined_close_rps_and_failing_runs() {
        let pipelined = parse(PIPELINED).expect("fixture parses");
        assert!(pipelined.succeeded > 0 && pipelined.request.mean_us > 1_000.0);
        let close = parse(CLOSE).expect("fixture parses");
        assert_eq!((close.succeeded, close.finished_secs), (20_000, 6.35));
        let not_found = parse(NOT_FOUND).expect("fixture parses");
        assert_eq!((not_found.succeeded, not_found.failed), (0, 1_000));
        assert_eq!(not_found.status_4xx, 1_000);
        assert!((not_found.finished_secs - 0.15821).abs() < 1e-9);
        let rps = parse(RPS).expect("fixture parses");
        assert_eq!(rps.req_per_sec, 1596.67);
        let squall = parse(SQUALL).expect("fixture parses");
        assert!(squall.succeeded > 500_000 && squall.succeeded == squall.status_2xx);
    }

    #[test]
    fn parses_http2_runs_and_their_protocol() {
        let h2c = parse(H2C).expect("fixture parses");
        assert_eq!(h2c.application_protocol.as_deref(), Some("h2c"));
        assert_eq!(h2c.tls, None);
        assert!(h2c.succeeded > 100_000 && h2c.succeeded == h2c.status_2xx);
        let h2 = parse(H2_TLS).expect("fixture parses");
        assert_eq!(h2.application_protocol.as_deref(), Some("h2"));
        assert_eq!(h2.req_per_sec, 42_840.0);
        assert_eq!(h2.succeeded, 85_680);
        assert_eq!(
            h2.tls.expect("TLS lines").summary(),
            "TLSv1.3, TLS_AES_128_GCM_SHA256, X25519 253 bits"
        );
    }

    #[test]
    fn parses_what_tls_negotiated() {
        let cleartext = parse(KEEPALIVE).expect("fixture parses");
        assert_eq!(cleartext.tls, None);
        assert_eq!(cleartext.application_protocol.as_deref(), Some("http/1.1"));
        for text in [TLS, TLS_HANDSHAKES] {
            let report = parse(text).expect("fixture parses");
            let tls = report.tls.expect("TLS lines");
            assert_eq!(
                tls.summary(),
                "TLSv1.3, TLS_AES_128_GCM_SHA256, X25519 253 bits"
            );
            assert!(report.succeeded > 0 && report.connect.mean_us > 0.0);
        }
    }

    #[test]
    fn an_unfinished_report_is_an_error() {
        let cut = &KEEPALIVE[..KEEPALIVE.find("finished in").expect("fixture has it")];
        assert!(parse(cut).is_err());
        assert!(parse("").is_err());
        assert!(parse_duration_us("12.5xs").is_err());
    }

    #[test]
    fn durations_in_every_unit() {
        assert_eq!(parse_duration_us("333us").ok(), Some(333.0));
        assert_eq!(parse_duration_us("1.5ms").ok(), Some(1_500.0));
        assert_eq!(parse_duration_us("2.00s").ok(), Some(2_000_000.0));
    }

    #[test]
    fn command_lines() {
        let mut plan = Plan {
            url: "http://127.0.0.1:1/".into(),
            connections: 64,
            streams: 16,
            headers: vec![],
            stop: Stop::Duration(10),
            rate: None,
            connect_rate: None,
            protocol: Protocol::H1,
            threads: 1,
        };
        assert_eq!(
            plan.args().join(" "),
            "--h1 -c 64 -m 16 -D 10 http://127.0.0.1:1/"
        );
        plan.threads = 3;
        assert_eq!(
            plan.args().join(" "),
            "--h1 -c 64 -m 16 -t 3 -D 10 http://127.0.0.1:1/"
        );
        // h3load has one thread and no -t.
        let h3 = Plan {
            protocol: Protocol::H3,
            ..plan.clone()
        };
        assert!(!h3.args().contains(&"-t".to_string()));
        plan.threads = 1;
        plan.stop = Stop::Count(5_000);
        plan.rate = Some(6_400.0);
        plan.headers = vec!["Connection: close".into()];
        assert_eq!(
            plan.args(),
            [
                "--h1",
                "-c",
                "64",
                "-m",
                "16",
                "-n",
                "5000",
                "--rps=100.000",
                "-H",
                "Connection: close",
                "http://127.0.0.1:1/"
            ]
        );
        assert_eq!(plan.deadline_secs(90), 120);
        // Paced at 6,400/s, 5,000 requests take a second: the ceiling is the larger.
        assert_eq!(plan.deadline_secs(20), 50);
        plan.rate = Some(100.0);
        assert_eq!(plan.deadline_secs(20), 90);
    }

    #[test]
    fn http2_drops_h1() {
        let plan = Plan {
            url: "http://127.0.0.1:1/".into(),
            connections: 100,
            streams: 10,
            headers: vec![],
            stop: Stop::Duration(10),
            rate: None,
            connect_rate: None,
            protocol: Protocol::H2,
            threads: 1,
        };
        assert_eq!(
            plan.args().join(" "),
            "-c 100 -m 10 -D 10 http://127.0.0.1:1/"
        );
    }

    #[test]
    fn http3_plans_run_h3load_with_h2loads_arguments() {
        let plan = Plan {
            url: "https://127.0.0.1:1/".into(),
            connections: 20,
            streams: 10,
            headers: vec!["Accept: */*".into()],
            stop: Stop::Duration(5),
            rate: Some(2_000.0),
            connect_rate: None,
            protocol: Protocol::H3,
            threads: 1,
        };
        assert_eq!(plan.tool(), "h3load");
        assert_eq!(
            plan.args().join(" "),
            "-c 20 -m 10 -D 5 --rps=100.000 -H Accept: */* https://127.0.0.1:1/"
        );
        assert_eq!(
            Plan {
                protocol: Protocol::H2,
                ..plan
            }
            .tool(),
            "h2load"
        );
    }

    #[test]
    fn rate_mode_command_lines() {
        let plan = Plan {
            url: "https://127.0.0.1:1/".into(),
            connections: 3_000,
            streams: 1,
            headers: vec!["Connection: close".into()],
            stop: Stop::Count(3_000),
            rate: None,
            connect_rate: Some(ConnectRate::per_sec(1_000.0)),
            protocol: Protocol::H1,
            threads: 1,
        };
        assert_eq!(
            plan.args().join(" "),
            "--h1 -c 3000 -m 1 -n 3000 -r 10 --rate-period=10ms -H Connection: close \
             https://127.0.0.1:1/"
        );
        // Three seconds at 1,000/s, plus slack.
        assert_eq!(plan.deadline_secs(0), 43);
    }

    #[test]
    fn connect_rates_are_whole_clients_per_period() {
        let pace = |rate| {
            let p = ConnectRate::per_sec(rate);
            (p.per_period, p.period_ms)
        };
        assert_eq!(pace(1_000.0), (10, 10));
        assert_eq!(pace(1_250.0), (25, 20));
        assert_eq!(pace(4_321.0), (43, 10));
        assert_eq!(pace(150.0), (3, 20));
        assert_eq!(pace(33.0), (3, 100));
        assert_eq!(pace(2.0), (1, 500));
        assert_eq!(ConnectRate::per_sec(1_250.0).actual_per_sec(), 1_250.0);
    }
}
