//! `cargo xtask h3load`: an HTTP/3 load generator for the bench, since h2load 1.52 (Debian's
//! nghttp2) is built without HTTP/3.
//!
//! It works as h2load does, closed loop: `-c` connections, opened together at the start, each
//! with `-m` requests in flight (one stream each; a stream that ends starts the next request),
//! for `-D` seconds or until `-n` requests have been sent, or paced at `--rps` requests per
//! second per connection. One thread: a current-thread tokio runtime, which the harness pins to
//! the load CPU with `taskset` as it pins h2load. Each connection has its own UDP socket (a
//! quinn endpoint), as each h2load client has its own TCP socket; quinn sends with UDP GSO and
//! receives with GRO where the kernel has them. The client is hyperium's `h3` over `quinn` with
//! rustls (aws-lc-rs), the stack the e2e tests use: nothing shared with Squall's own QUIC.
//!
//! The report is h2load's (`tally.rs`): the same lines, so the bench reads both alike. ALPN is
//! `h3` only, so an established connection speaks HTTP/3 (the report's "Application protocol"),
//! and the statuses are counted by class (2xx and 3xx succeed). `--log-file` writes a line per
//! request as h2load's does (`log.rs`), from which the bench takes the latency percentiles.

use std::cell::{Cell, RefCell};
use std::fs::File;
use std::io::BufWriter;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, bail, ensure};
use bytes::{Buf, Bytes};
use clap::Args;
use tokio::time::{Instant, sleep_until, timeout, timeout_at};

mod log;
mod tally;
mod tls;

use log::RequestLog;

use tally::{Mode, Summary, Tally};

/// How long a handshake may take before its connection counts as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a closing connection may take to tell the server (QUIC's draining period).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

type Sender = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// h2load's options, spelled as h2load spells them.
#[derive(Debug, Clone, Args)]
pub struct H3loadArgs {
    /// Connections, all opened at the start.
    #[arg(short = 'c', long = "clients", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub connections: u32,
    /// Requests in flight per connection, each on its own stream.
    #[arg(short = 'm', long = "max-concurrent-streams", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub streams: u32,
    /// Seconds of load (timing-based); requests in flight at the end are not counted.
    #[arg(short = 'D', long = "duration", conflicts_with = "requests",
          value_parser = clap::value_parser!(u32).range(1..=3_600))]
    pub duration: Option<u32>,
    /// Requests to send in all (count-based; 1 if neither -D nor -n is given).
    #[arg(short = 'n', long = "requests", value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// Requests per second per connection at most (open loop, as h2load's --rps).
    #[arg(long, value_name = "N")]
    pub rps: Option<f64>,
    /// An extra request header, "Name: value"; repeat for more.
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,
    /// Write a line per request, as h2load's --log-file does: its start in microseconds since
    /// the epoch, its status (-1 when it failed), the microseconds it took.
    #[arg(long = "log-file", value_name = "PATH")]
    pub log_file: Option<PathBuf>,
    /// `https://HOST:PORT/PATH`: UDP to that address, SNI `localhost` when HOST is an address.
    pub url: String,
}

/// What every connection and stream of the run shares.
struct Job {
    addr: SocketAddr,
    server_name: String,
    uri: http::Uri,
    headers: http::HeaderMap,
    streams: u32,
    /// Per connection: the time between two request starts (`--rps`).
    pace: Option<Duration>,
    client: quinn::ClientConfig,
    /// The end of a timing-based run.
    deadline: Option<Instant>,
    /// Requests still to send (count-based runs; `u64::MAX` when timed).
    budget: Cell<u64>,
    start: Instant,
    /// `--log-file`
    log: Option<RefCell<RequestLog<BufWriter<File>>>>,
}

impl Job {
    /// Takes one request from the budget, if the run is not over.
    fn may_start(&self) -> bool {
        let left = self.budget.get();
        let in_time = self.deadline.is_none_or(|end| Instant::now() < end);
        if left == 0 || !in_time {
            return false;
        }
        self.budget.set(left - 1);
        true
    }

    /// Logs one request, with `--log-file`.
    fn log(&self, start: SystemTime, status: Option<u16>, took: Duration) {
        if let Some(log) = &self.log {
            log.borrow_mut().record(start, status, took);
        }
    }
}

/// Runs the load and prints h2load's report on stdout; errors (a bad URL) end it early.
pub fn main(args: &H3loadArgs) -> Result<ExitCode> {
    let (addr, server_name, uri) = target(&args.url)?;
    let headers = headers(&args.headers)?;
    if let Some(rps) = args.rps {
        ensure!(rps > 0.0 && rps.is_finite(), "--rps must be above 0");
    }
    let mode = match (args.duration, args.requests) {
        (Some(secs), _) => Mode::Timed(secs),
        (None, count) => Mode::Counted(count.unwrap_or(1)),
    };
    let log = match &args.log_file {
        Some(path) => Some(RefCell::new(RequestLog::create(path)?)),
        None => None,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("a tokio runtime")?;
    let local = tokio::task::LocalSet::new();
    let summary = local.block_on(&runtime, async {
        let start = Instant::now();
        let job = Rc::new(Job {
            addr,
            server_name,
            uri,
            headers,
            streams: args.streams,
            pace: args.rps.map(|rps| Duration::from_secs_f64(1.0 / rps)),
            client: tls::client_config()?,
            deadline: match mode {
                Mode::Timed(secs) => Some(start + Duration::from_secs(secs.into())),
                Mode::Counted(_) => None,
            },
            budget: Cell::new(match mode {
                Mode::Timed(_) => u64::MAX,
                Mode::Counted(count) => count,
            }),
            start,
            log,
        });
        println!(
            "starting benchmark... (HTTP/3 to {}, {} connection(s) × {} stream(s))",
            job.addr, args.connections, job.streams
        );
        let summary = run(job.clone(), args.connections, mode).await?;
        if let Some(log) = &job.log {
            log.borrow_mut().flush()?;
        }
        Ok::<_, anyhow::Error>(summary)
    })?;
    print!("{}", summary.text());
    let t = &summary.tally;
    if let Some(error) = &t.first_error {
        eprintln!(
            "h3load: {} connection(s) failed, {} request(s) errored; the first error: {error}",
            t.connect_errors, t.errored
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Every connection at once, then the merged tally.
async fn run(job: Rc<Job>, connections: u32, mode: Mode) -> Result<Summary> {
    let tasks: Vec<_> = (0..connections)
        .map(|_| tokio::task::spawn_local(connection(job.clone())))
        .collect();
    let mut tally = Tally::default();
    let mut protocol = None;
    let mut last = job.start;
    for task in tasks {
        let done = task.await.context("a connection task")?;
        tally.merge(done.tally);
        protocol = protocol.or(done.protocol);
        last = last.max(done.stopped);
    }
    // Counted requests never sent, because every connection failed, are errors (as h2load
    // counts a failed client's share).
    let unsent = job.budget.get();
    if matches!(mode, Mode::Counted(_)) && unsent > 0 {
        tally.errored += unsent;
    }
    // Timed, h2load reports its duration (requests in flight at the end are left out).
    let elapsed = match mode {
        Mode::Timed(secs) => Duration::from_secs(secs.into()),
        Mode::Counted(_) => last - job.start,
    };
    Ok(Summary {
        mode,
        connections,
        streams: job.streams,
        elapsed,
        protocol,
        tally,
    })
}

/// What one connection did.
struct Done {
    tally: Tally,
    protocol: Option<String>,
    /// When its last request ended.
    stopped: Instant,
}

/// One connection: its own endpoint (UDP socket), the handshake, `streams` workers, the close.
async fn connection(job: Rc<Job>) -> Done {
    let began = Instant::now();
    let mut tally = Tally::default();
    let failed = |mut tally: Tally, why: String| {
        tally.connect_errors += 1;
        tally.note(|| why);
        Done {
            tally,
            protocol: None,
            stopped: Instant::now(),
        }
    };
    let bind: SocketAddr = match job.addr {
        SocketAddr::V4(_) => ([127, 0, 0, 1], 0).into(),
        SocketAddr::V6(_) => (std::net::Ipv6Addr::LOCALHOST, 0).into(),
    };
    let mut endpoint = match quinn::Endpoint::client(bind) {
        Ok(endpoint) => endpoint,
        Err(err) => return failed(tally, format!("a UDP socket: {err}")),
    };
    endpoint.set_default_client_config(job.client.clone());
    let connecting = match endpoint.connect(job.addr, &job.server_name) {
        Ok(connecting) => connecting,
        Err(err) => return failed(tally, format!("connecting: {err}")),
    };
    let conn = match timeout(CONNECT_TIMEOUT, connecting).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(err)) => return failed(tally, format!("the QUIC handshake: {err}")),
        Err(_) => return failed(tally, "the QUIC handshake timed out".into()),
    };
    tally.connect_us.push(began.elapsed().as_secs_f64() * 1e6);
    let protocol = conn
        .handshake_data()
        .and_then(|data| data.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|data| data.protocol)
        .map(|alpn| String::from_utf8_lossy(&alpn).into_owned());
    let (mut driver, send) = match h3::client::new(h3_quinn::Connection::new(conn.clone())).await {
        Ok(pair) => pair,
        Err(err) => return failed(tally, format!("HTTP/3 set-up: {err}")),
    };
    let drive =
        tokio::task::spawn_local(
            async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await },
        );
    let shared = Rc::new(Stream {
        job: job.clone(),
        conn: conn.clone(),
        began,
        first_byte: Cell::new(None),
        next_start: Cell::new(Instant::now()),
    });
    let workers: Vec<_> = (0..job.streams)
        .map(|_| tokio::task::spawn_local(worker(shared.clone(), send.clone())))
        .collect();
    drop(send);
    for task in workers {
        match task.await {
            Ok(done) => tally.merge(done),
            Err(err) => tally.note(|| format!("a stream task: {err}")),
        }
    }
    let stopped = Instant::now();
    if let Some(first) = shared.first_byte.get() {
        tally.first_byte_us.push(first.as_secs_f64() * 1e6);
    }
    let secs = (stopped - job.start).as_secs_f64().max(1e-9);
    tally.client_rates.push(tally.done as f64 / secs);
    conn.close(0u32.into(), b"done");
    // The CONNECTION_CLOSE leaves before the endpoint goes, so the server forgets it now.
    let _ = timeout(CLOSE_TIMEOUT, endpoint.wait_idle()).await;
    drive.abort();
    Done {
        tally,
        protocol,
        stopped,
    }
}

/// What a connection's stream workers share.
struct Stream {
    job: Rc<Job>,
    conn: quinn::Connection,
    began: Instant,
    /// From `began` to the connection's first response head.
    first_byte: Cell<Option<Duration>>,
    /// With `--rps`: when the connection's next request may start.
    next_start: Cell<Instant>,
}

/// One stream at a time, request after request, until the run ends or the connection does.
async fn worker(shared: Rc<Stream>, mut send: Sender) -> Tally {
    let job = &shared.job;
    let mut tally = Tally::default();
    while job.may_start() {
        if let Some(pace) = job.pace {
            let slot = shared.next_start.get().max(Instant::now());
            shared.next_start.set(slot + pace);
            if job.deadline.is_some_and(|end| slot >= end) {
                break;
            }
            sleep_until(slot).await;
        }
        let mut request = http::Request::new(());
        *request.uri_mut() = job.uri.clone();
        *request.headers_mut() = job.headers.clone();
        tally.started += 1;
        let sent = Instant::now();
        let sent_at = SystemTime::now();
        let exchange = exchange(&mut send, request);
        let outcome = match job.deadline {
            Some(end) => match timeout_at(end, exchange).await {
                Ok(outcome) => outcome,
                // In flight at the end of the run: started, not done, as h2load counts it.
                Err(_) => break,
            },
            None => exchange.await,
        };
        if job.deadline.is_some_and(|end| Instant::now() >= end) {
            // Answered after the end (the timer fires late on a busy thread): not counted.
            break;
        }
        match outcome {
            Ok((status, bytes, head)) => {
                job.log(sent_at, Some(status), sent.elapsed());
                tally.response(status, bytes, sent.elapsed());
                if shared.first_byte.get().is_none() {
                    shared.first_byte.set(Some(head - shared.began));
                }
            }
            Err(err) => {
                job.log(sent_at, None, sent.elapsed());
                tally.error(|| format!("a request: {err}"));
                if shared.conn.close_reason().is_some() {
                    break;
                }
            }
        }
    }
    tally
}

/// One request without a body; its status, body bytes, and when its head came.
async fn exchange(
    send: &mut Sender,
    request: http::Request<()>,
) -> Result<(u16, u64, Instant), h3::error::StreamError> {
    let mut stream = send.send_request(request).await?;
    stream.finish().await?;
    let response = stream.recv_response().await?;
    let head = Instant::now();
    let mut bytes = 0;
    while let Some(chunk) = stream.recv_data().await? {
        bytes += chunk.remaining() as u64;
    }
    Ok((response.status().as_u16(), bytes, head))
}

/// The UDP address, the TLS server name and the request URI of an `https://` URL.
fn target(url: &str) -> Result<(SocketAddr, String, http::Uri)> {
    let uri: http::Uri = url
        .parse()
        .with_context(|| format!("{url:?} is not a URL"))?;
    ensure!(
        uri.scheme_str() == Some("https"),
        "{url:?}: HTTP/3 needs an https:// URL"
    );
    let authority = uri
        .authority()
        .with_context(|| format!("{url:?} has no host"))?;
    let port = authority.port_u16().unwrap_or(443);
    let host = authority.host();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addr = (bare, port)
        .to_socket_addrs()
        .with_context(|| format!("resolving {host}"))?
        .next()
        .with_context(|| format!("{host} has no address"))?;
    // SNI takes a name, not an address; the scenarios' certificates are for `localhost`.
    let server_name = if bare.parse::<std::net::IpAddr>().is_ok() {
        "localhost".to_owned()
    } else {
        bare.to_owned()
    };
    let uri = if uri.path_and_query().is_some() {
        uri
    } else {
        format!("{url}/").parse()?
    };
    Ok((addr, server_name, uri))
}

/// `-H "Name: value"` headers as a header map.
fn headers(lines: &[String]) -> Result<http::HeaderMap> {
    let mut map = http::HeaderMap::new();
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            bail!("-H {line:?}: expected \"Name: value\"");
        };
        let name: http::HeaderName = name
            .trim()
            .to_ascii_lowercase()
            .parse()
            .with_context(|| format!("-H {line:?}: not a header name"))?;
        let value: http::HeaderValue = value
            .trim()
            .parse()
            .with_context(|| format!("-H {line:?}: not a header value"))?;
        map.append(name, value);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_https_urls() {
        let (addr, name, uri) = target("https://127.0.0.1:8443/a?b=1").expect("valid");
        assert_eq!(addr, ([127, 0, 0, 1], 8443).into());
        assert_eq!(name, "localhost");
        assert_eq!(uri.path_and_query().map(|p| p.as_str()), Some("/a?b=1"));
        let (addr, _, uri) = target("https://[::1]:9").expect("valid");
        assert_eq!(addr, (std::net::Ipv6Addr::LOCALHOST, 9).into());
        assert_eq!(uri.path(), "/");
        assert_eq!(
            target("https://localhost:7/").expect("valid").1,
            "localhost"
        );
        assert!(target("http://127.0.0.1:1/").is_err());
        assert!(target("not a url").is_err());
    }

    #[test]
    fn headers_as_h2load_takes_them() {
        let map = headers(&["Accept-Encoding: gzip".into(), "x-a:  b ".into()]).expect("valid");
        assert_eq!(map["accept-encoding"], "gzip");
        assert_eq!(map["x-a"], "b");
        assert!(headers(&["no colon".into()]).is_err());
        assert!(headers(&["a b: c".into()]).is_err());
    }

    #[test]
    fn the_budget_counts_down_and_the_deadline_stops() {
        let job = |budget, deadline| Job {
            addr: ([127, 0, 0, 1], 1).into(),
            server_name: "localhost".into(),
            uri: "https://127.0.0.1:1/".parse().unwrap(),
            headers: http::HeaderMap::new(),
            streams: 1,
            pace: None,
            client: tls::client_config().unwrap(),
            deadline,
            budget: Cell::new(budget),
            start: Instant::now(),
            log: None,
        };
        let counted = job(2, None);
        assert!(counted.may_start() && counted.may_start());
        assert!(!counted.may_start());
        let over = job(u64::MAX, Some(Instant::now()));
        assert!(!over.may_start());
        let running = job(u64::MAX, Some(Instant::now() + Duration::from_secs(60)));
        assert!(running.may_start());
    }
}
