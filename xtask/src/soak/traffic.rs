//! The soak's load: three h2load processes at fixed rates (`--rps`), one per mix (HTTP/1.1 in
//! cleartext, h2 over TLS, h2c), each cycling through the same paths, and a small in-process
//! client that POSTs bodies of a few sizes. Every request is logged as h2load's `--log-file`
//! writes it (start time in microseconds since the epoch, status or -1, microseconds taken),
//! the uploads in the same format, so one parser turns all of them into per-second outcomes.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

use crate::h2load::{Plan, Stop};
use crate::scenario::Protocol;

/// Client connections per h2load process: a few, so one slow connection does not hold the
/// whole mix's rate.
const CONNECTIONS: u32 = 4;
/// The share of the rate each mix gets, uploads last.
const SHARES: [(Mix, f64); 3] = [(Mix::H1, 0.40), (Mix::H2Tls, 0.30), (Mix::H2c, 0.25)];
/// The share of the rate that uploads get.
pub const UPLOAD_SHARE: f64 = 0.05;
/// Sizes of the upload bodies, in turn.
const UPLOAD_BYTES: [usize; 3] = [1024, 16 * 1024, 64 * 1024];
/// How long one upload may take.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(5);

/// One traffic mix: what h2load speaks to which listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    H1,
    H2Tls,
    H2c,
}

impl Mix {
    pub fn name(self) -> &'static str {
        match self {
            Mix::H1 => "h1",
            Mix::H2Tls => "h2-tls",
            Mix::H2c => "h2c",
        }
    }
}

/// A running h2load and where its files go.
pub struct Generator {
    pub mix: Mix,
    pub child: Child,
    pub log: PathBuf,
    pub report: PathBuf,
}

impl Drop for Generator {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The h2load arguments of one mix: `rate` in total over its connections, for `secs`, every
/// request logged to `log`. The extra URIs after the first are cycled through by each client.
pub fn plan_args(
    mix: Mix,
    plain: SocketAddr,
    tls: SocketAddr,
    rate: f64,
    secs: u32,
    paths: &[String],
    log: &Path,
) -> Vec<String> {
    let (scheme, addr, protocol) = match mix {
        Mix::H1 => ("http", plain, Protocol::H1),
        Mix::H2Tls => ("https", tls, Protocol::H2),
        Mix::H2c => ("http", plain, Protocol::H2),
    };
    let plan = Plan {
        url: format!("{scheme}://{addr}{}", paths[0]),
        connections: CONNECTIONS,
        streams: 1,
        headers: Vec::new(),
        stop: Stop::Duration(secs),
        rate: Some(rate),
        connect_rate: None,
        protocol,
        threads: 1,
    };
    let mut args = vec![format!("--log-file={}", log.display())];
    args.extend(plan.args());
    args.extend(
        paths[1..]
            .iter()
            .map(|path| format!("{scheme}://{addr}{path}")),
    );
    args
}

/// Starts the three h2load processes, pinned to `cpu`, their files in `dir`.
pub fn start(
    dir: &Path,
    cpu: usize,
    addrs: (SocketAddr, SocketAddr),
    rate: f64,
    secs: u32,
    paths: &[String],
) -> Result<Vec<Generator>> {
    let mut generators = Vec::new();
    for (mix, share) in SHARES {
        let log = dir.join(format!("requests-{}.log", mix.name()));
        let report = dir.join(format!("h2load-{}.txt", mix.name()));
        let args = plan_args(mix, addrs.0, addrs.1, rate * share, secs, paths, &log);
        let child = Command::new("taskset")
            .arg("-c")
            .arg(cpu.to_string())
            .arg("h2load")
            .args(&args)
            .stdin(Stdio::null())
            .stdout(File::create(&report)?)
            .stderr(File::create(report.with_extension("stderr.txt"))?)
            .spawn()
            .context("starting h2load (apt-get install nghttp2-client)")?;
        generators.push(Generator {
            mix,
            child,
            log,
            report,
        });
    }
    Ok(generators)
}

/// One logged request: when it started (µs since the epoch) and its status (`-1`: none), read
/// by the parser the bench's latency percentiles use (`crate::latency`).
pub fn parse_log_line(line: &str) -> Option<(u64, i32)> {
    let line = crate::latency::LogLine::parse(line)?;
    Some((line.start_us, line.status.map_or(-1, i32::from)))
}

/// Counts logged requests per second since `t0_us`: (succeeded, failed) for each of `secs`
/// seconds. A success is a 2xx or 3xx, as h2load counts it; requests outside the range are
/// left out.
pub fn per_second(lines: &str, t0_us: u64, secs: u32, into: &mut [(u64, u64)]) {
    for (start, status) in lines.lines().filter_map(parse_log_line) {
        let Some(offset) = start.checked_sub(t0_us) else {
            continue;
        };
        let second = (offset / 1_000_000) as usize;
        if second >= secs as usize || second >= into.len() {
            continue;
        }
        if (200..400).contains(&status) {
            into[second].0 += 1;
        } else {
            into[second].1 += 1;
        }
    }
}

/// Microseconds since the epoch now, the clock h2load logs with.
pub fn epoch_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_micros() as u64)
}

/// POSTs to `/api/upload` on `addr` at `rate` a second until `stop`, one connection per
/// upload (`Connection: close`, so the answer is read to its end without parsing framing),
/// each logged to `log` as h2load logs. Returns how many were sent.
pub fn uploads(addr: SocketAddr, rate: f64, log: &Path, stop: &AtomicBool) -> Result<u64> {
    let mut out = BufWriter::new(File::create(log)?);
    let interval = Duration::from_secs_f64(1.0 / rate.max(0.1));
    let started = Instant::now();
    let mut sent = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let due = started + interval * u32::try_from(sent).unwrap_or(u32::MAX);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait.min(Duration::from_millis(200)));
            continue;
        }
        let bytes = UPLOAD_BYTES[(sent % UPLOAD_BYTES.len() as u64) as usize];
        let begun = epoch_us();
        let clock = Instant::now();
        let status = upload(addr, bytes);
        let line = crate::latency::LogLine {
            start_us: begun,
            status: status.ok(),
            duration_us: u64::try_from(clock.elapsed().as_micros()).unwrap_or(u64::MAX),
        };
        writeln!(out, "{line}")?;
        out.flush()?;
        sent += 1;
    }
    Ok(sent)
}

/// One `GET path` read to its end (`Connection: close`): the status and the bytes received.
/// The soak fetches the large objects once before the load, so that the cache holds the big
/// one before the verdict looks (storing it is growth, but not a leak).
pub fn fetch(addr: SocketAddr, path: &str) -> Result<(u16, usize)> {
    let mut stream = TcpStream::connect_timeout(&addr, UPLOAD_TIMEOUT)?;
    stream.set_read_timeout(Some(UPLOAD_TIMEOUT))?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes())?;
    let mut answer = Vec::new();
    stream.take(64 * 1024 * 1024).read_to_end(&mut answer)?;
    let status = crate::server::status_of(&answer).context("no HTTP/1.1 status line")?;
    Ok((status, answer.len()))
}

/// One POST of `bytes` and the status of its answer.
fn upload(addr: SocketAddr, bytes: usize) -> Result<u16> {
    let mut stream = TcpStream::connect_timeout(&addr, UPLOAD_TIMEOUT)?;
    stream.set_read_timeout(Some(UPLOAD_TIMEOUT))?;
    stream.set_write_timeout(Some(UPLOAD_TIMEOUT))?;
    let head = format!(
        "POST /api/upload HTTP/1.1\r\nHost: soak\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: {bytes}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(&super::config::body(bytes))?;
    let mut answer = Vec::new();
    stream.take(1024 * 1024).read_to_end(&mut answer)?;
    crate::server::status_of(&answer).context("no HTTP/1.1 status line")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mix_speaks_its_protocol_to_its_listener() {
        let plain: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let tls: SocketAddr = "127.0.0.1:2".parse().unwrap();
        let paths = ["/a".to_string(), "/b".to_string()];
        let log = Path::new("/tmp/x.log");
        let h1 = plan_args(Mix::H1, plain, tls, 200.0, 60, &paths, log);
        assert_eq!(h1[0], "--log-file=/tmp/x.log");
        assert!(h1.contains(&"--h1".to_string()));
        assert!(h1.contains(&"--rps=50.000".to_string()), "{h1:?}");
        assert!(h1.contains(&"-D".to_string()) && h1.contains(&"60".to_string()));
        assert_eq!(
            &h1[h1.len() - 2..],
            ["http://127.0.0.1:1/a", "http://127.0.0.1:1/b"]
        );
        let h2 = plan_args(Mix::H2Tls, plain, tls, 100.0, 60, &paths, log);
        assert!(!h2.contains(&"--h1".to_string()));
        assert_eq!(h2.last().unwrap(), "https://127.0.0.1:2/b");
        let h2c = plan_args(Mix::H2c, plain, tls, 100.0, 60, &paths, log);
        assert_eq!(h2c.last().unwrap(), "http://127.0.0.1:1/b");
        let total: f64 = SHARES.iter().map(|(_, share)| share).sum::<f64>() + UPLOAD_SHARE;
        assert!((total - 1.0).abs() < 1e-9);
    }

    #[test]
    fn log_lines_are_counted_per_second() {
        let t0 = 1_000_000_000;
        let log = format!(
            "{}\t200\t120\n{}\t502\t90\n{}\t-1\t5000\n{}\t304\t10\n{}\t200\t1\nnot a line\n{}\t200\t1\n",
            t0 + 10,
            t0 + 999_999,
            t0 + 1_000_000,
            t0 + 1_500_000,
            t0 + 5_000_000,
            t0 - 1
        );
        let mut seconds = vec![(0, 0); 3];
        per_second(&log, t0, 3, &mut seconds);
        assert_eq!(seconds, [(1, 1), (1, 1), (0, 0)]);
        assert_eq!(parse_log_line("12\t-1\t3"), Some((12, -1)));
        assert_eq!(parse_log_line("12"), None);
    }
}
