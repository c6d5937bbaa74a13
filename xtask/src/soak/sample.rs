//! What the soak samples every second: the Squall process's resident memory and open
//! descriptors (from `/proc/PID/status` and `/proc/PID/fd`, as `ps` and `ls` would see them)
//! and a few counters from `/metrics` on the admin listener. The parsers are pure; the readers
//! are thin.

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// How long a scrape of `/metrics` may take; the admin listener answers in well under that.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);
/// A bound on the scraped text, so a runaway label set cannot eat the sampler's memory.
const SCRAPE_BYTES_MAX: u64 = 16 * 1024 * 1024;

/// The counters the soak keeps from one scrape (each summed over workers and labels).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counters {
    pub connections_active: u64,
    pub requests_total: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub reloads_ok: u64,
    pub responses_5xx: u64,
    pub timeouts: u64,
    pub bad_requests: u64,
}

impl Counters {
    /// Picks the counters out of a Prometheus text page. A missing series reads as 0: every
    /// counter the soak uses is always rendered by Squall, and a scrape that failed outright is
    /// an error before this.
    pub fn from_text(text: &str) -> Counters {
        let get = |name: &str, label: Option<&str>| metric_sum(text, name, label).unwrap_or(0.0);
        Counters {
            connections_active: get("squall_connections_active", None) as u64,
            requests_total: get("squall_requests_total", None) as u64,
            cache_hits: get("squall_cache_hits_total", None) as u64,
            cache_misses: get("squall_cache_misses_total", None) as u64,
            reloads_ok: get("squall_reloads_total", Some("result=\"ok\"")) as u64,
            responses_5xx: get("squall_responses_total", Some("class=\"5xx\"")) as u64,
            timeouts: get("squall_timeouts_total", None) as u64,
            bad_requests: get("squall_bad_requests_total", None) as u64,
        }
    }
}

/// The sum of every series of metric `name` (exactly that name, so `_total` and `_bucket`
/// series of a longer name are not mixed in) whose labels contain `label`, or `None` if there
/// is none.
pub fn metric_sum(text: &str, name: &str, label: Option<&str>) -> Option<f64> {
    let mut sum = None;
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let (labels, value) = match rest.chars().next() {
            Some('{') => match rest.rsplit_once('}') {
                Some((labels, value)) => (labels, value),
                None => continue,
            },
            Some(' ') => ("", rest),
            _ => continue,
        };
        if label.is_some_and(|wanted| !labels.contains(wanted)) {
            continue;
        }
        if let Some(number) = value
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        {
            sum = Some(sum.unwrap_or(0.0) + number);
        }
    }
    sum
}

/// `VmRSS` from `/proc/PID/status`, in KiB.
pub fn rss_kib(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

/// The process's resident memory (KiB) and open descriptors.
pub fn process(pid: u32) -> Result<(u64, u64)> {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status (has Squall exited?)"))?;
    let rss = rss_kib(&status).context("no VmRSS in /proc/PID/status")?;
    let fds = fs::read_dir(format!("/proc/{pid}/fd"))
        .with_context(|| format!("listing /proc/{pid}/fd"))?
        .count() as u64;
    Ok((rss, fds))
}

/// `GET /metrics` on the admin listener, the body as text.
pub fn scrape(admin: SocketAddr) -> Result<String> {
    let mut stream = TcpStream::connect_timeout(&admin, SCRAPE_TIMEOUT)
        .with_context(|| format!("connecting to the admin listener {admin}"))?;
    stream.set_read_timeout(Some(SCRAPE_TIMEOUT))?;
    stream.set_write_timeout(Some(SCRAPE_TIMEOUT))?;
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n")?;
    let mut text = String::new();
    stream
        .take(SCRAPE_BYTES_MAX)
        .read_to_string(&mut text)
        .context("reading /metrics")?;
    match text.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_string()),
        _ => bail!(
            "/metrics answered {:?}",
            crate::util::last_line(&text[..text.len().min(80)])
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "# HELP squall_requests_total Requests.\n\
        # TYPE squall_requests_total counter\n\
        squall_requests_total{protocol=\"http1\",worker=\"0\"} 120\n\
        squall_requests_total{protocol=\"h2\",worker=\"0\"} 30\n\
        squall_requests_total_extra 999\n\
        squall_reloads_total{result=\"ok\"} 2\n\
        squall_reloads_total{result=\"failed\"} 1\n\
        squall_connections_active{worker=\"0\"} 7\n\
        squall_connections_active{worker=\"1\"} 5\n\
        squall_cache_hits_total 1e3\n\
        squall_responses_total{class=\"5xx\",worker=\"0\"} 4\n\
        squall_responses_total{class=\"2xx\",worker=\"0\"} 146\n";

    #[test]
    fn series_are_summed_by_exact_name_and_label() {
        assert_eq!(metric_sum(PAGE, "squall_requests_total", None), Some(150.0));
        assert_eq!(
            metric_sum(PAGE, "squall_reloads_total", Some("result=\"ok\"")),
            Some(2.0)
        );
        assert_eq!(
            metric_sum(PAGE, "squall_cache_hits_total", None),
            Some(1000.0)
        );
        assert_eq!(metric_sum(PAGE, "squall_nothing", None), None);
        assert_eq!(metric_sum(PAGE, "squall_requests", None), None);
        let counters = Counters::from_text(PAGE);
        assert_eq!(counters.connections_active, 12);
        assert_eq!(counters.requests_total, 150);
        assert_eq!(counters.reloads_ok, 2);
        assert_eq!(counters.responses_5xx, 4);
        assert_eq!(counters.cache_misses, 0);
    }

    #[test]
    fn rss_from_proc_status() {
        let status = "Name:\tsquall\nVmPeak:\t  99999 kB\nVmRSS:\t   41234 kB\nThreads:\t3\n";
        assert_eq!(rss_kib(status), Some(41_234));
        assert_eq!(rss_kib("Name:\tx\n"), None);
        let (rss, fds) = process(std::process::id()).expect("our own process");
        assert!(rss > 0 && fds >= 3);
    }
}
