//! A server under test as an operating-system process: started pinned to one CPU, waited for
//! until it answers, probed with one real request, measured through `/proc/PID/stat`, and
//! stopped with SIGTERM — or killed by PID when anything goes wrong, so no run leaves a server
//! behind.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::scenario::Protocol;

/// How long a server may take to listen: generous, as 10,000 regexes take a while to compile.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a graceful stop may take before SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the probe request may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(20);

/// What to start.
#[derive(Debug, Clone)]
pub struct Spec {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The CPUs to pin it to, as taskset takes them: `1`, `0-3`.
    pub cpus: String,
    /// stdout and stderr of the server go here.
    pub log: PathBuf,
    pub addr: SocketAddr,
}

/// A running server. Dropping it kills the process, so an error anywhere cleans up.
#[derive(Debug)]
pub struct Server {
    child: Child,
    log: PathBuf,
    pub addr: SocketAddr,
}

/// Why a server did not come up: the build cannot serve this scenario, or something broke.
#[derive(Debug)]
pub enum StartError {
    Unsupported(String),
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for StartError {
    fn from(err: anyhow::Error) -> StartError {
        StartError::Failed(err)
    }
}

impl Server {
    /// Starts the server pinned with `taskset` (which execs, so the PID is the server's) and
    /// waits until it accepts connections.
    pub fn start(spec: &Spec) -> Result<Server, StartError> {
        let log =
            File::create(&spec.log).with_context(|| format!("creating {}", spec.log.display()))?;
        let child = Command::new("taskset")
            .arg("-c")
            .arg(&spec.cpus)
            .arg(&spec.program)
            .args(&spec.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().context("duplicating the log file")?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", spec.program.display()))?;
        let mut server = Server {
            child,
            log: spec.log.clone(),
            addr: spec.addr,
        };
        server.wait_listening()?;
        Ok(server)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn wait_listening(&mut self) -> Result<(), StartError> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().context("waiting for the server")? {
                return Err(StartError::Unsupported(format!(
                    "exited at start-up ({status}): {}",
                    self.log_tail()
                )));
            }
            if TcpStream::connect_timeout(&self.addr, POLL).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(StartError::Unsupported(format!(
                    "did not listen on {} within {}s",
                    self.addr,
                    START_TIMEOUT.as_secs()
                )));
            }
            sleep(POLL);
        }
    }

    /// The last line the server logged, for one-line reports.
    pub fn log_tail(&self) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let line = crate::util::last_line(&text);
        if line.is_empty() {
            "no output".into()
        } else {
            line.to_string()
        }
    }

    /// Sends one `GET path` and returns the response status.
    pub fn probe(&self, path: &str) -> Result<u16> {
        let mut stream = TcpStream::connect_timeout(&self.addr, PROBE_TIMEOUT)?;
        stream.set_read_timeout(Some(PROBE_TIMEOUT))?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes())?;
        let mut head = [0u8; 64];
        let mut len = 0;
        while len < head.len() {
            match stream.read(&mut head[len..])? {
                0 => break,
                n => len += n,
            }
        }
        status_of(&head[..len]).context("the probe got no HTTP/1.1 status line")
    }

    /// Sends one `GET path` with curl, over TLS (`-k`: the certificates are self-signed) or
    /// HTTP/2 or both, and returns the response status; a response in another HTTP version
    /// than `protocol` is an error. curl, because xtask has no TLS or HTTP/2 client of its own
    /// and a second implementation is a better witness than Squall's own.
    pub fn probe_curl(&self, path: &str, tls: bool, protocol: Protocol) -> Result<u16> {
        let scheme = if tls { "https" } else { "http" };
        let url = format!("{scheme}://{}{path}", self.addr);
        let output = Command::new("curl")
            .args(curl_probe_args(&url, tls, protocol, PROBE_TIMEOUT))
            .stdin(Stdio::null())
            .output()
            .context("running curl")?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            bail!(
                "curl failed ({}): {}",
                output.status,
                crate::util::last_line(&stderr)
            );
        }
        curl_status(&stdout, protocol)
    }

    /// The server's CPU time so far (all threads, user and system), in seconds, with that of
    /// its child processes while they run (varnish's cache process; Squall and nginx have none).
    pub fn cpu_secs(&self, clock_ticks: f64) -> Result<f64> {
        let mut ticks = 0;
        for pid in std::iter::once(self.pid()).chain(descendants(self.pid())) {
            let path = format!("/proc/{pid}/stat");
            match fs::read_to_string(&path) {
                Ok(stat) => ticks += cpu_ticks(&stat).with_context(|| format!("parsing {path}"))?,
                // A child may end between listing and reading; the server itself may not.
                Err(err) if pid == self.pid() => {
                    return Err(err).with_context(|| format!("reading {path}"));
                }
                Err(_) => {}
            }
        }
        Ok(ticks as f64 / clock_ticks)
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Graceful stop: SIGTERM (Squall and nginx both finish in-flight requests and exit), then
    /// SIGKILL if that takes longer than [`STOP_TIMEOUT`].
    pub fn stop(mut self) -> Result<ExitStatus> {
        let pid = self.pid().to_string();
        // `kill` the program, because the libc call would break xtask's `forbid(unsafe_code)`.
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            sleep(POLL);
        }
        self.child.kill()?;
        let status = self.child.wait()?;
        bail!(
            "did not stop within {}s of SIGTERM; killed ({status})",
            STOP_TIMEOUT.as_secs()
        )
    }
}

impl Drop for Server {
    /// Kills the server and then any child it left (by PID, listed before the kill, as the
    /// children are re-parented after it).
    fn drop(&mut self) {
        if self.running() {
            let children = descendants(self.pid());
            let _ = self.child.kill();
            let _ = self.child.wait();
            for pid in children {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}

/// curl's arguments for the probe: the HTTP version of `protocol` (over TLS, by ALPN: HTTP/1.1
/// offers only `http/1.1`, HTTP/2 `h2` first; in cleartext, HTTP/2 with prior knowledge), no
/// certificate check, no proxy from the environment, a time limit, and only the status and
/// the HTTP version printed.
pub fn curl_probe_args(url: &str, tls: bool, protocol: Protocol, timeout: Duration) -> Vec<String> {
    let version = match (protocol, tls) {
        (Protocol::H1, _) => "--http1.1",
        // HTTP/3 listeners are probed over HTTP/2 on their TCP side (no HTTP/3 in curl here).
        (Protocol::H2 | Protocol::H3, true) => "--http2",
        (Protocol::H2 | Protocol::H3, false) => "--http2-prior-knowledge",
    };
    [
        "--silent",
        "--show-error",
        "--insecure",
        version,
        "--noproxy",
        "*",
        "--max-time",
        &timeout.as_secs().to_string(),
        "--output",
        "/dev/null",
        "--write-out",
        "%{http_code} %{http_version}",
        url,
    ]
    .map(String::from)
    .to_vec()
}

/// The status from curl's `%{http_code} %{http_version}`, if the version is `protocol`'s.
pub fn curl_status(printed: &str, protocol: Protocol) -> Result<u16> {
    let mut words = printed.split_whitespace();
    let status: u16 = words
        .next()
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("curl printed {printed:?}, not a status"))?;
    let version = words.next().unwrap_or("");
    let expected = match protocol {
        Protocol::H1 => "1.1",
        Protocol::H2 | Protocol::H3 => "2",
    };
    if version != expected {
        bail!("the answer came in HTTP/{version}, not HTTP/{expected}");
    }
    Ok(status)
}

/// The PIDs of every descendant of `pid` (children, their children ...), from `/proc`. A peer
/// such as varnish serves from a child of the process the harness started.
pub fn descendants(pid: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let parents: Vec<(u32, u32)> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|child| {
            let stat = fs::read_to_string(format!("/proc/{child}/stat")).ok()?;
            Some((child, parent_pid(&stat)?))
        })
        .collect();
    descendants_in(pid, &parents)
}

/// The pure part of [`descendants`]: the descendants of `pid` in `(pid, parent)` pairs.
fn descendants_in(pid: u32, parents: &[(u32, u32)]) -> Vec<u32> {
    let mut found = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for &(child, _) in parents.iter().filter(|(_, p)| *p == parent) {
            if !found.contains(&child) && child != pid {
                found.push(child);
                frontier.push(child);
            }
        }
    }
    found
}

/// Field 4 (ppid) of `/proc/PID/stat`, the second after the command name.
fn parent_pid(stat: &str) -> Option<u32> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(1)?.parse().ok()
}

/// utime + stime from `/proc/PID/stat`: fields 14 and 15, counted after the command name,
/// which is in parentheses and may itself hold spaces or parentheses.
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    // Field 3 (state) is the first after the name, so fields 14 and 15 are at 11 and 12.
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The status code of an HTTP/1.x status line at the start of `head`.
pub fn status_of(head: &[u8]) -> Option<u16> {
    let line = head.split(|&b| b == b'\r' || b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split(' ');
    let version = parts.next()?;
    if !version.starts_with("HTTP/1.") {
        return None;
    }
    parts.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_from_proc_stat() {
        let stat = "5539 (nginx: worker) S 1 5539 5539 0 -1 4194624 530 0 0 0 1234 567 0 0 20 0 \
                    1 0 12345 0 0 18446744073709551615";
        assert_eq!(cpu_ticks(stat), Some(1234 + 567));
        assert_eq!(cpu_ticks("1 (a) b) S 0 0 0 0 0 0 0 0 0 0 7 8 0"), Some(15));
        assert_eq!(cpu_ticks("garbage"), None);
    }

    #[test]
    fn the_curl_probe_speaks_the_scenarios_protocol() {
        let args = |tls, protocol| curl_probe_args("http://x/", tls, protocol, PROBE_TIMEOUT);
        assert!(args(true, Protocol::H1).contains(&"--http1.1".to_string()));
        assert!(args(true, Protocol::H2).contains(&"--http2".to_string()));
        assert!(args(false, Protocol::H2).contains(&"--http2-prior-knowledge".to_string()));
        assert_eq!(curl_status("200 2", Protocol::H2).ok(), Some(200));
        assert_eq!(curl_status("404 1.1", Protocol::H1).ok(), Some(404));
        let fallback = curl_status("200 1.1", Protocol::H2).expect_err("not HTTP/2");
        assert!(
            format!("{fallback}").contains("HTTP/1.1, not HTTP/2"),
            "{fallback}"
        );
        assert!(curl_status("", Protocol::H1).is_err());
    }

    #[test]
    fn descendants_and_parents() {
        let stat = "22942 (cache-main) S 22926 22926 22926 0 -1 4194624 0 0 0 0 5 6 0 0";
        assert_eq!(parent_pid(stat), Some(22926));
        let parents = [(2, 1), (3, 2), (4, 1), (5, 9), (1, 0)];
        let mut found = descendants_in(1, &parents);
        found.sort_unstable();
        assert_eq!(found, [2, 3, 4]);
        assert!(descendants_in(5, &parents).is_empty());
        assert!(descendants(std::process::id()).len() < 1_000);
    }

    #[test]
    fn the_tls_probe_is_curl_without_verification() {
        let args = curl_probe_args(
            "https://127.0.0.1:9/a",
            true,
            Protocol::H1,
            Duration::from_secs(5),
        );
        assert_eq!(
            args.last().map(String::as_str),
            Some("https://127.0.0.1:9/a")
        );
        for flag in ["--insecure", "--http1.1", "--noproxy"] {
            assert!(args.iter().any(|a| a == flag), "{flag} in {args:?}");
        }
        let limit = args
            .iter()
            .position(|a| a == "--max-time")
            .expect("a time limit");
        assert_eq!(args[limit + 1], "5");
    }

    #[test]
    fn status_lines() {
        assert_eq!(status_of(b"HTTP/1.1 200 OK\r\nServer: x\r\n"), Some(200));
        assert_eq!(status_of(b"HTTP/1.0 404 Not Found\r\n"), Some(404));
        assert_eq!(status_of(b"HTTP/1.1 2"), Some(2));
        assert_eq!(status_of(b"SSH-2.0\r\n"), None);
        assert_eq!(status_of(b""), None);
    }
}
