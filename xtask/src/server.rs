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
    pub cpu: usize,
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
            .arg(spec.cpu.to_string())
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

    /// Sends one `GET path` over TLS with curl (`-k`: the certificates are self-signed) and
    /// returns the response status. curl, because xtask has no TLS client of its own and a
    /// second implementation is a better witness than Squall's own rustls.
    pub fn probe_tls(&self, path: &str) -> Result<u16> {
        let url = format!("https://{}{path}", self.addr);
        let output = Command::new("curl")
            .args(curl_probe_args(&url, PROBE_TIMEOUT))
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
        stdout
            .trim()
            .parse()
            .with_context(|| format!("curl printed {stdout:?}, not a status"))
    }

    /// The server's CPU time so far (all threads, user and system), in seconds.
    pub fn cpu_secs(&self, clock_ticks: f64) -> Result<f64> {
        let path = format!("/proc/{}/stat", self.pid());
        let stat = fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        let ticks = cpu_ticks(&stat).with_context(|| format!("parsing {path}"))?;
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
    fn drop(&mut self) {
        if self.running() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// curl's arguments for the TLS probe: no certificate check, HTTP/1.1 (ALPN `http/1.1`), no
/// proxy from the environment, a time limit, and only the status printed.
pub fn curl_probe_args(url: &str, timeout: Duration) -> Vec<String> {
    [
        "--silent",
        "--show-error",
        "--insecure",
        "--http1.1",
        "--noproxy",
        "*",
        "--max-time",
        &timeout.as_secs().to_string(),
        "--output",
        "/dev/null",
        "--write-out",
        "%{http_code}",
        url,
    ]
    .map(String::from)
    .to_vec()
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
    fn the_tls_probe_is_curl_without_verification() {
        let args = curl_probe_args("https://127.0.0.1:9/a", Duration::from_secs(5));
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
