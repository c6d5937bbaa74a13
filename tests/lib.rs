//! End-to-end test support: start the real `squall` binary on an ephemeral loopback port with a
//! temporary config, find the port it bound from its log, and stop it by PID.
//!
//! The binary is built on first use with the cargo that runs the tests (same profile), or taken
//! from `SQUALL_BIN` when that is set.
#![forbid(unsafe_code)]

mod lateness;

pub use lateness::Lateness;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long to wait for Squall to report its listening address.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// The squall binary, built once per test process.
pub fn squall_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("SQUALL_BIN") {
            return PathBuf::from(bin);
        }
        // target/<profile>/deps/<test exe>: the binary sits in target/<profile>/.
        let exe = std::env::current_exe().expect("test executable path");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>");
        let release = profile_dir.file_name().is_some_and(|n| n == "release");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut build = Command::new(cargo);
        build.args(["build", "--quiet", "-p", "squall", "--bin", "squall"]);
        if release {
            build.arg("--release");
        }
        let status = build
            .status()
            .expect("run cargo build for the squall binary");
        assert!(status.success(), "cargo build -p squall failed");
        profile_dir.join("squall")
    })
}

/// A running squall process, stopped (SIGKILL) on drop unless already stopped.
pub struct Squall {
    child: Child,
    /// The first cleartext listener (or the first TLS one if there is none).
    pub addr: SocketAddr,
    /// The first TLS listener, if any.
    pub tls_addr: Option<SocketAddr>,
    log: Arc<Mutex<String>>,
    config_path: PathBuf,
    _dir: TempDir,
}

impl Squall {
    /// Starts squall on `config`, in which the string `ADDR` is replaced by `127.0.0.1:0`.
    pub fn start(config: &str) -> Squall {
        Squall::start_with(config, |_| {})
    }

    /// As [`Squall::start`], letting the caller adjust the command (environment, limits).
    pub fn start_with(config: &str, adjust: impl FnOnce(&mut Command)) -> Squall {
        let dir = TempDir::new();
        let path = dir.path().join("squall.toml");
        std::fs::write(&path, config.replace("ADDR", "127.0.0.1:0")).expect("write config");
        let mut command = Command::new(squall_bin());
        command
            .arg("--config")
            .arg(&path)
            .env("SQUALL_LOG", "info,squall=debug")
            // Under a systemd unit with RuntimeDirectory=, every instance would default to the
            // same control socket; a test that wants one sets [server] control.
            .env_remove("RUNTIME_DIRECTORY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        adjust(&mut command);
        let mut child = command.spawn().expect("spawn squall");
        let (log, listening) = watch_log(&mut child);
        // A process that ended while starting (a listener it could not bind) may have logged
        // the address of one it bound before: connecting there would be refused, far from
        // the cause.
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "squall exited while starting ({status}); log:\n{}",
                log.lock().unwrap()
            );
        }
        let find = |scheme: &str| listening.iter().find(|(s, _)| s == scheme).map(|(_, a)| *a);
        let tls_addr = find("https");
        let Some(addr) = find("http").or(tls_addr) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "squall did not report a listening address; log:\n{}",
                log.lock().unwrap()
            );
        };
        Squall {
            child,
            addr,
            tls_addr,
            log,
            config_path: path,
            _dir: dir,
        }
    }

    /// Replaces the config file (for reload tests); `ADDR` is replaced by the bound address.
    pub fn rewrite_config(&self, config: &str) {
        let text = config.replace("ADDR", &self.addr.to_string());
        // Write then rename, as an operator's deploy does: a reload never reads half a file.
        let staging = self.config_path.with_extension("toml.new");
        std::fs::write(&staging, text).expect("write config");
        std::fs::rename(&staging, &self.config_path).expect("replace config");
    }

    /// Waits up to `timeout` for `needle` to appear in the log `count` times in all.
    pub fn wait_log(&self, needle: &str, count: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.log().matches(needle).count() >= count {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// The config file it runs (which `rewrite_config` replaces).
    pub fn config_path(&self) -> &Path {
        &self.config_path
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its resident memory, in bytes (VmRSS from /proc).
    pub fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kib * 1024
    }

    /// Everything squall logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Sends `signal` (e.g. `libc::SIGTERM`) to this process only.
    pub fn signal(&self, signal: i32) {
        let signal = nix::sys::signal::Signal::try_from(signal).expect("a signal number");
        let pid = i32::try_from(self.pid()).expect("a pid fits in pid_t");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal)
            .unwrap_or_else(|e| panic!("kill({pid}, {signal}): {e}"));
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// Opens a plain TCP connection with read/write timeouts.
    pub fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(self.addr).expect("connect to squall");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream
            .set_write_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        stream
    }
}

impl Drop for Squall {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Reads squall's stderr on a thread into a shared log; returns once every worker listens (or
/// the process ended, or START_TIMEOUT passed), with the addresses it logged, in order.
fn watch_log(child: &mut Child) -> (Arc<Mutex<String>>, Vec<(String, SocketAddr)>) {
    let stderr = child.stderr.take().expect("piped stderr");
    let log = Arc::new(Mutex::new(String::new()));
    let (tx, rx) = mpsc::channel();
    let shared = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let ready = line.contains("all workers listening");
            let mut log = shared.lock().unwrap();
            log.push_str(&line);
            log.push('\n');
            drop(log);
            if ready {
                let _ = tx.send(());
            }
        }
    });
    let _ = rx.recv_timeout(START_TIMEOUT);
    let listening = log
        .lock()
        .unwrap()
        .lines()
        .filter_map(|line| {
            let rest = &line[line.find("listening on ")? + "listening on ".len()..];
            let (scheme, addr) = rest.trim().split_once("://")?;
            Some((scheme.to_owned(), addr.parse().ok()?))
        })
        .collect();
    (log, listening)
}

/// Sends `request` and reads one response (head and Content-Length body) from `stream`.
pub fn roundtrip(stream: &mut TcpStream, request: &str) -> Response {
    stream.write_all(request.as_bytes()).expect("write request");
    read_response(stream).expect("a response")
}

/// A parsed HTTP/1.1 response, as read off the wire by hand.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Reads one response with a Content-Length body (none for 204 and 304, which carry no body
/// whatever their length says). `None` on a clean EOF before any byte.
pub fn read_response(stream: &mut impl Read) -> Option<Response> {
    let mut response = read_response_head(stream)?;
    if response.status == 204 || response.status == 304 {
        return Some(response);
    }
    let chunked =
        (response.header("transfer-encoding")).is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    if chunked {
        response.body = read_chunked(stream);
        return Some(response);
    }
    let len: usize = response
        .header("content-length")
        .map_or(0, |v| v.parse().unwrap());
    response.body = vec![0; len];
    stream.read_exact(&mut response.body).expect("read body");
    Some(response)
}

/// A chunked body, de-chunked (trailers, if any, are read and dropped).
fn read_chunked(stream: &mut impl Read) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let size_line = read_line(stream);
        let size = size_line.split(';').next().unwrap().trim();
        let size = usize::from_str_radix(size, 16).expect("a chunk size");
        if size == 0 {
            while !read_line(stream).is_empty() {}
            return body;
        }
        let start = body.len();
        body.resize(start + size, 0);
        stream.read_exact(&mut body[start..]).expect("a chunk");
        assert!(read_line(stream).is_empty(), "CRLF after a chunk");
    }
}

/// One CRLF-ended line, without its CRLF.
fn read_line(stream: &mut impl Read) -> String {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        stream.read_exact(&mut byte).expect("a chunked body line");
        line.push(byte[0]);
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line).expect("ASCII chunk line")
}

/// Reads one request head (an origin's side); returns it as sent and the bytes that followed
/// it in the same reads. `None` if the stream ends or fails first.
pub fn read_request_head(stream: &mut impl Read) -> Option<(String, Vec<u8>)> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).into_owned();
            return Some((head, got[end + 4..].to_vec()));
        }
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        got.extend_from_slice(&buf[..n]);
    }
}

/// Reads one response head, and no body: for responses to HEAD.
pub fn read_response_head(stream: &mut impl Read) -> Option<Response> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(0) if head.is_empty() => return None,
            Ok(0) => panic!(
                "EOF inside a response head: {:?}",
                String::from_utf8_lossy(&head)
            ),
            Ok(_) => head.push(byte[0]),
            Err(e) if head.is_empty() => {
                panic!("reading a response: {e}")
            }
            Err(e) => panic!("reading a response head: {e}"),
        }
    }
    let text = String::from_utf8(head).expect("ASCII head");
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status");
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (n, v) = l.split_once(':').expect("header line");
            (n.trim().to_owned(), v.trim().to_owned())
        })
        .collect();
    Some(Response {
        status,
        headers,
        body: Vec::new(),
    })
}

/// True when the peer closed the connection (EOF, or RST) within the stream's read timeout
/// without sending anything more; panics on any byte, so a connection that was served and then
/// closed never passes for one that was refused or cut.
pub fn is_closed(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 512];
    match stream.read(&mut buf) {
        Ok(0) => true,
        Ok(n) => panic!(
            "expected a close with nothing more, got {n} bytes: {:?}",
            String::from_utf8_lossy(&buf[..n])
        ),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => true,
        Err(_) => false,
    }
}

/// A temporary directory removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("squall-e2e-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Default for TempDir {
    fn default() -> Self {
        TempDir::new()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Requests per path, as a test origin saw them.
#[derive(Default)]
pub struct PathCounts(Mutex<HashMap<String, usize>>);

impl PathCounts {
    /// Counts one request for `path`; returns how many there have been, this one included.
    pub fn hit(&self, path: &str) -> usize {
        let mut counts = self.0.lock().unwrap();
        let n = counts.entry(path.to_owned()).or_default();
        *n += 1;
        *n
    }

    /// How many requests for `path` there have been.
    pub fn count(&self, path: &str) -> usize {
        self.0.lock().unwrap().get(path).copied().unwrap_or(0)
    }

    /// How many requests there have been, all paths together.
    pub fn total(&self) -> usize {
        self.0.lock().unwrap().values().sum()
    }
}

/// A config for cache tests: two workers, HTTP/1.1 and h2c on `ADDR`, the admin port on
/// 127.0.0.2, `cache` as the `[cache]` lines, one upstream `app` at `origin` (5 s response
/// timeout), and a cached route `[[vhost.route]]` with `prefix` and `route` as extra lines.
pub fn cache_config(origin: SocketAddr, cache: &str, prefix: &str, route: &str) -> String {
    format!(
        r#"[server]
workers = 2

[admin]
listen = "127.0.0.2:0"

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[cache]
{cache}

[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]
response_timeout = "5s"

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "{prefix}"
proxy = "app"
cache = true
{route}
"#
    )
}

/// One worker on a clear-text listener (HTTP/1.1 and h2c), an upstream `app` of `origin`, and
/// the default vhost with `routes` (its `[[vhost.route]]` tables, written as in a config file).
pub fn proxy_config(origin: SocketAddr, routes: &str) -> String {
    format!(
        r#"[server]
workers = 1

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]

[[vhost]]
hosts = ["*"]

{routes}"#
    )
}

/// One worker on a clear-text listener (HTTP/1.1 and h2c), `limits` lines in `[limits]`, an
/// upstream `app` of `origin` with `upstream` lines added, and one proxy route on `/` with
/// `route` lines added: for tests of a proxied request's timers and limits.
pub fn proxy_route_config(origin: SocketAddr, limits: &str, upstream: &str, route: &str) -> String {
    format!(
        r#"[server]
workers = 1

[limits]
{limits}

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]
{upstream}

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/"
proxy = "app"
{route}
"#
    )
}

/// A minimal valid config with one listener and a 13-byte `respond` route on `/`, plus `extra`.
pub fn hello_config(extra: &str) -> String {
    format!(
        r#"[server]
workers = 1
drain_timeout = "5s"

[[listen]]
address = "ADDR"

{extra}

[[vhost]]
hosts = ["*"]

[[vhost.route]]
exact = "/"
respond = {{ status = 200, body = "Hello, world!" }}

[[vhost.route]]
exact = "/a"
respond = {{ status = 200, body = "A" }}

[[vhost.route]]
exact = "/b"
respond = {{ status = 200, body = "B" }}

[[vhost.route]]
prefix = "/c"
respond = {{ status = 201, body = "C" }}
"#
    )
}

/// Every program the end-to-end tests run, with the Debian package `.ci/run` installs it from.
/// The README's test section names each; a test enforces both.
pub const TOOLS: &[(&str, &str)] = &[
    ("chromium", "chromium"),
    ("curl", "curl"),
    ("h2load", "nghttp2-client"),
    ("haproxy", "haproxy"),
    ("ip", "iproute2"),
    ("nghttp", "nghttp2-client"),
    ("nghttpd", "nghttp2-server"),
    ("nginx", "nginx-light"),
    ("openssl", "openssl"),
    ("prlimit", "util-linux"),
    ("sh", "dash"),
];

/// Where [`tool`] looks after PATH. Debian installs daemons (nginx, nghttpd, haproxy) in
/// `/usr/sbin`, which a non-root user's PATH lacks, so the packages a missing tool names would
/// already be installed.
pub const TOOL_DIRS_AFTER_PATH: &[&str] = &["/usr/sbin", "/sbin"];

/// A command for the external program `name`, one of [`TOOLS`], found on PATH or else in
/// [`TOOL_DIRS_AFTER_PATH`] and run by its full path. Panics, naming the program and its
/// package, when it is in neither: a missing tool fails the test (tests never skip), and says
/// what to install.
pub fn tool(name: &str) -> Command {
    let package = TOOLS
        .iter()
        .find(|(tool, _)| *tool == name)
        .map(|(_, package)| *package)
        .unwrap_or_else(|| {
            panic!(
                "{name} is not in squall_e2e::TOOLS: list it there, in .ci/run and in the README"
            )
        });
    let after_path: Vec<&Path> = TOOL_DIRS_AFTER_PATH.iter().map(Path::new).collect();
    let path = std::env::var_os("PATH");
    let Some(program) = find_program(name, path.as_deref(), &after_path) else {
        panic!(
            "this test runs `{name}`, which is neither on PATH nor in {}: install the Debian \
             package {package} (.ci/run does; see the README's test section)",
            TOOL_DIRS_AFTER_PATH.join(" or ")
        )
    };
    Command::new(program)
}

/// The first executable file called `name` in the directories of `path` (a PATH value), then
/// in `after_path`. The directories are a parameter so that a test can put a program where
/// only the fallback finds it.
fn find_program(
    name: &str,
    path: Option<&std::ffi::OsStr>,
    after_path: &[&Path],
) -> Option<PathBuf> {
    let on_path = path.into_iter().flat_map(std::env::split_paths);
    on_path
        .chain(after_path.iter().map(|dir| dir.to_path_buf()))
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable_file(candidate))
}

/// A file someone may run: a directory or a non-executable file of the same name earlier in
/// the search must not hide the program.
fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Makes a self-signed leaf certificate for `name` with the openssl CLI.
pub fn openssl_cert(dir: &std::path::Path, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    let status = tool("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "2", "-subj", &format!("/CN={name}")])
        .args(["-addext", &format!("subjectAltName=DNS:{name}")])
        .args(["-addext", "basicConstraints=critical,CA:FALSE", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .expect("openssl req");
    assert!(status.success());
    (cert, key)
}

/// The admin address Squall logged.
pub fn admin_addr(squall: &Squall) -> SocketAddr {
    let log = squall.log();
    let at = log
        .find("admin endpoint on http://")
        .expect("admin address in the log");
    let rest = &log[at + "admin endpoint on http://".len()..];
    rest.lines().next().unwrap().trim().parse().unwrap()
}

pub fn admin_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: admin\r\n\r\n").unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").unwrap().1.to_owned();
    (status, body)
}

/// The sum of every sample of the series `name` (all label sets) in Prometheus text; panics
/// when there is none, so a renamed metric cannot pass as zero.
pub fn metric_sum(text: &str, name: &str) -> f64 {
    let values: Vec<f64> = text
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            let value = match rest.chars().next()? {
                '{' => rest.rsplit_once(' ')?.1,
                ' ' => rest.trim(),
                _ => return None,
            };
            Some(value.parse().expect("a numeric sample"))
        })
        .collect();
    assert!(!values.is_empty(), "no sample of {name} in:\n{text}");
    values.iter().sum()
}

/// A loopback listener whose connections keep kernel buffers of `bytes` each way (autotuned
/// ones grow to several MiB on loopback): what a peer that stops reading can park in this
/// side's kernel stays small, so a test sees the backpressure it means to.
pub fn listener_with_buffers(bytes: usize) -> std::net::TcpListener {
    use nix::sys::socket::{setsockopt, sockopt};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a listener");
    setsockopt(&listener, sockopt::RcvBuf, &bytes).expect("SO_RCVBUF");
    setsockopt(&listener, sockopt::SndBuf, &bytes).expect("SO_SNDBUF");
    listener
}

/// A tiny keep-alive HTTP/1.1 origin on a loopback port, a thread per connection, that
/// answers every request `200` with `name` as the body (request bodies are not expected).
/// It stops accepting after 10,000 connections.
pub fn tiny_origin(name: &'static str) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an origin");
    let addr = listener.local_addr().expect("origin address");
    std::thread::spawn(move || {
        for stream in listener.incoming().take(10_000) {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{name}",
                    name.len()
                );
                let mut pending = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let Ok(n) = stream.read(&mut buf) else { return };
                    if n == 0 {
                        return;
                    }
                    pending.extend_from_slice(&buf[..n]);
                    // Answer every complete head received (pipelining included).
                    while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        pending.drain(..end + 4);
                        if stream.write_all(response.as_bytes()).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

/// One TLS 1.3 handshake with `openssl s_client` to `addr` (SNI `servername`), sending
/// `request` and saving the session to a file (`("-sess_out", path)`) or resuming one
/// (`("-sess_in", path)`); returns what s_client printed (the response included) and whether
/// the session was resumed ("Reused, TLSv1.3").
pub fn s_client_tls13(
    addr: SocketAddr,
    servername: &str,
    sess: (&str, &Path),
    request: &[u8],
) -> (String, bool) {
    let mut child = tool("openssl")
        .args([
            "s_client",
            "-connect",
            &addr.to_string(),
            "-ign_eof",
            "-tls1_3",
        ])
        .args(["-servername", servername, sess.0])
        .arg(sess.1)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl s_client (package openssl)");
    child.stdin.take().unwrap().write_all(request).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "s_client did not finish in 20 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    let text = String::from_utf8_lossy(&child.wait_with_output().unwrap().stdout).into_owned();
    let resumed = text.contains("Reused, TLSv1.3");
    (text, resumed)
}

/// What the origin answers for `body`: its length and a position-weighted sum.
pub fn digest(body: &[u8]) -> String {
    let sum = (body.iter().enumerate()).fold(0u64, |s, (i, &b)| {
        s.wrapping_add((i as u64 % 1_000_003).wrapping_mul(u64::from(b)))
    });
    format!("len={} sum={sum}", body.len())
}

/// An origin, one request per connection, that reads a request head with a content-length,
/// then reads nothing more until the test sends on the channel it returns, then reads the
/// body and answers its [`digest`]. Its sockets keep 64 KiB kernel buffers.
pub fn stalled_origin() -> (SocketAddr, std::sync::mpsc::Sender<()>) {
    let listener = listener_with_buffers(64 << 10);
    let addr = listener.local_addr().unwrap();
    let (go, wait) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(30)));
            let mut got = Vec::new();
            let mut buf = vec![0u8; 64 << 10];
            let end = loop {
                if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                    break end + 4;
                }
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            };
            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
            let length: usize = (head.lines())
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .expect("the request's content-length");
            if wait
                .recv_timeout(std::time::Duration::from_secs(30))
                .is_err()
            {
                return;
            }
            let mut body = got.split_off(end);
            while body.len() < length {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => body.extend_from_slice(&buf[..n]),
                }
            }
            let answer = digest(&body);
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{answer}",
                answer.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    (addr, go)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Writes an executable (or not) file `name` in `dir`.
    fn program(dir: &Path, name: &str, mode: u32) -> PathBuf {
        let file = dir.join(name);
        std::fs::write(&file, "#!/bin/sh\n").expect("write program");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).expect("chmod");
        file
    }

    /// A program only in a fallback directory (as nginx is in /usr/sbin for a non-root Debian
    /// user) is found, by its full path; one on PATH wins over the fallback; a file that is not
    /// executable, or a directory, is passed over; a program in neither is not found.
    #[test]
    fn programs_are_found_on_path_then_in_the_fallback_directories() {
        let (on_path, sbin, empty) = (TempDir::new(), TempDir::new(), TempDir::new());
        let path = std::env::join_paths([empty.path(), on_path.path()]).expect("PATH value");
        let fallback = [sbin.path()];

        let daemon = program(sbin.path(), "daemon", 0o755);
        assert_eq!(
            find_program("daemon", Some(&path), &fallback),
            Some(daemon.clone())
        );
        assert_eq!(find_program("daemon", None, &fallback), Some(daemon));
        assert_eq!(find_program("daemon", Some(&path), &[]), None);

        let client = program(on_path.path(), "client", 0o755);
        program(sbin.path(), "client", 0o755);
        assert_eq!(find_program("client", Some(&path), &fallback), Some(client));

        program(on_path.path(), "plain", 0o644);
        let plain = program(sbin.path(), "plain", 0o755);
        std::fs::create_dir(empty.path().join("plain")).expect("mkdir");
        assert_eq!(find_program("plain", Some(&path), &fallback), Some(plain));

        assert_eq!(find_program("absent", Some(&path), &fallback), None);
    }
}
