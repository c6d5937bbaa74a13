//! The descriptor reserve: under a descriptor limit far below the offered clients, Squall stops
//! accepting before it runs out, so every proxied request it took gets its origin connection
//! (no 502 for want of a descriptor), and the clients it has not taken wait in the kernel's
//! queue until connections close.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use squall_e2e::{Squall, admin_addr, admin_get, metric_sum};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[path = "support/h2_client.rs"]
mod h2_client;
#[path = "support/origin.rs"]
mod origin;

/// Concurrent clients, each on its own connection, and the requests each sends on it (fewer
/// where this process may not open four descriptors per client, but never under
/// `CLIENTS_MIN`).
const CLIENTS: usize = 5000;
const CLIENTS_MIN: usize = 600;
const REQUESTS_PER_CLIENT: usize = 3;
/// Squall's descriptor limit: far fewer than the clients.
const NOFILE: u32 = 1024;
/// The whole load must finish within this.
const LOAD_DEADLINE: Duration = Duration::from_secs(90);

/// A hyper origin that answers every request 200 "origin" after a short delay, so requests
/// (and their origin connections) overlap.
fn slow_origin() -> SocketAddr {
    origin::hyper_origin(answer)
}

async fn answer(_: http::Request<Incoming>) -> origin::Answer {
    tokio::time::sleep(Duration::from_millis(20)).await;
    Ok(http::Response::new(Full::new(Bytes::from_static(
        b"origin",
    ))))
}

fn config(origin: SocketAddr) -> String {
    format!(
        r#"[server]
workers = 2
drain_timeout = "5s"

[admin]
listen = "127.0.0.2:0"

[[listen]]
address = "ADDR"

[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]
connect_timeout = "5s"
response_timeout = "10s"

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/p/"
proxy = "app"

[[vhost.route]]
exact = "/local"
respond = {{ status = 200, body = "local" }}
"#
    )
}

/// Lifts this test process's own soft limit (it holds every client socket and the origin's)
/// and returns how many clients it can run: four descriptors each.
fn raise_own_nofile() -> usize {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit(RLIMIT_NOFILE)");
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).expect("setrlimit(RLIMIT_NOFILE)");
    let clients = CLIENTS.min(usize::try_from(hard / 4).unwrap_or(usize::MAX));
    assert!(
        clients >= CLIENTS_MIN,
        "the test needs {} descriptors (hard RLIMIT_NOFILE {hard})",
        4 * CLIENTS_MIN
    );
    if clients < CLIENTS {
        eprintln!("RLIMIT_NOFILE {hard}: {clients} clients instead of {CLIENTS}");
    }
    clients
}

/// The clients' runtime: two threads, as many as the machine's cores.
fn two_threads() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Squall under `prlimit --nofile=N:N` (both limits, so it cannot raise them back).
fn start_limited(config: &str, nofile: u32) -> Squall {
    Squall::start_with(config, |command| {
        let bin = command.get_program().to_owned();
        let args: Vec<_> = command.get_args().map(|a| a.to_owned()).collect();
        let mut wrapped = squall_e2e::tool("prlimit");
        wrapped
            .arg(format!("--nofile={nofile}:{nofile}"))
            .arg("--")
            .arg(bin)
            .args(args);
        wrapped.stdin(Stdio::null()).stdout(Stdio::null());
        wrapped.stderr(Stdio::piped());
        *command = wrapped;
    })
}

/// One HTTP/1.1 request on `stream`; returns the status (the body is read and checked).
async fn get(stream: &mut tokio::net::TcpStream, path: &str) -> std::io::Result<u16> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        head.push(byte[0]);
        if head.len() > 16 * 1024 {
            return Err(std::io::ErrorKind::InvalidData.into());
        }
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let status = head[9..12]
        .parse()
        .map_err(|_| std::io::ErrorKind::InvalidData)?;
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(std::io::ErrorKind::InvalidData)?;
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await?;
    Ok(status)
}

/// One client: connects, sends its requests one after another on the connection, closes.
async fn client(addr: SocketAddr, id: usize) -> Vec<Result<u16, String>> {
    let mut statuses = Vec::new();
    let mut stream = match tokio::net::TcpStream::connect(addr).await {
        Ok(stream) => stream,
        Err(e) => return vec![Err(format!("connect: {e}"))],
    };
    for n in 0..REQUESTS_PER_CLIENT {
        let path = format!("/p/{id}/{n}");
        match tokio::time::timeout(Duration::from_secs(60), get(&mut stream, &path)).await {
            Ok(Ok(status)) => statuses.push(Ok(status)),
            Ok(Err(e)) => return [statuses, vec![Err(format!("{path}: {e}"))]].concat(),
            Err(_) => return [statuses, vec![Err(format!("{path}: no answer in 60 s"))]].concat(),
        }
    }
    statuses
}

/// With RLIMIT_NOFILE 1024 and 5,000 clients at once, each sending 3 proxied requests, every
/// request gets 200: accepting pauses at the reserve's mark and the rest wait in the queue. A
/// `respond` route answers during the flood, the pause shows in /metrics and ends after it.
#[test]
fn many_more_clients_than_descriptors_get_no_502() {
    let clients = raise_own_nofile();
    let origin = slow_origin();
    let squall = start_limited(&config(origin), NOFILE);
    let log = squall.log();
    assert!(
        log.contains(&format!("(RLIMIT_NOFILE {NOFILE}, reserve ")),
        "the accept limit is logged at start-up:\n{log}"
    );
    let runtime = two_threads();
    let addr = squall.addr;
    let started = Instant::now();
    let (results, local) = runtime.block_on(async move {
        let clients: Vec<_> = (0..clients)
            .map(|id| tokio::spawn(client(addr, id)))
            .collect();
        // Once the flood is under way, a local route still answers (after its turn in the
        // accept queue).
        tokio::time::sleep(Duration::from_millis(200)).await;
        let local = async {
            let mut stream = tokio::net::TcpStream::connect(addr).await?;
            get(&mut stream, "/local").await
        };
        let local = tokio::time::timeout(Duration::from_secs(60), local).await;
        let mut results = Vec::new();
        for handle in clients {
            let done = tokio::time::timeout(LOAD_DEADLINE, handle).await;
            results.extend(done.expect("the load ends in time").expect("a client task"));
        }
        (results, local)
    });
    let elapsed = started.elapsed();
    assert!(
        matches!(local, Ok(Ok(200))),
        "the respond route during the flood: {local:?}"
    );
    let mut by_status = std::collections::BTreeMap::new();
    let mut failures = Vec::new();
    for result in &results {
        match result {
            Ok(status) => *by_status.entry(*status).or_insert(0usize) += 1,
            Err(e) => failures.push(e.clone()),
        }
    }
    failures.truncate(5);
    assert_eq!(
        by_status.get(&200).copied().unwrap_or(0),
        clients * REQUESTS_PER_CLIENT,
        "statuses {by_status:?}, failures (first 5) {failures:?}, in {elapsed:?}; log:\n{}",
        squall.log()
    );
    let admin = admin_addr(&squall);
    let (_, metrics) = admin_get(admin, "/metrics");
    assert!(
        metric_sum(&metrics, "squall_accept_pauses_total") >= 1.0,
        "accepting paused at the mark:\n{metrics}"
    );
    assert_eq!(
        metric_sum(&metrics, "squall_upstream_descriptor_failures_total"),
        0.0
    );
    let max = metric_sum(&metrics, "squall_client_connections_max");
    assert!(
        (1.0..f64::from(NOFILE)).contains(&max),
        "a mark below the limit: {max}"
    );
    // Every client has closed: the pause is over in both workers (bounded wait).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, metrics) = admin_get(admin, "/metrics");
        if metric_sum(&metrics, "squall_accept_paused") == 0.0
            && metric_sum(&metrics, "squall_client_connections_open") == 0.0
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still paused after the load:\n{metrics}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An origin that answers 200 "origin" after `delay`, so that a burst of requests holds that
/// many origin connections at once.
fn delayed_origin(delay: Duration) -> SocketAddr {
    origin::hyper_origin(move |_: http::Request<Incoming>| async move {
        tokio::time::sleep(delay).await;
        origin::Answer::Ok(http::Response::new(Full::new(Bytes::from_static(
            b"origin",
        ))))
    })
}

/// `config` with h2c beside HTTP/1.1 on the listener.
fn h2c_config(origin: SocketAddr) -> String {
    config(origin).replace(
        "address = \"ADDR\"\n",
        "address = \"ADDR\"\nprotocols = [\"http1\", \"h2c\"]\n",
    )
}

fn metric(admin: SocketAddr, name: &str) -> f64 {
    metric_sum(&admin_get(admin, "/metrics").1, name)
}

/// HTTP/2 clients' streams, each a proxied GET; their statuses (0: no response).
async fn h2_burst(addr: SocketAddr, connections: usize, streams: usize) -> Vec<u16> {
    let mut tasks = Vec::new();
    for c in 0..connections {
        let client = h2_client::h2c(addr).await;
        for s in 0..streams {
            let client = client.clone();
            let uri = format!("http://x/p/h2/{c}/{s}");
            tasks.push(tokio::spawn(async move {
                h2_client::fetch(&client, "GET", &uri, None).await.status
            }));
        }
    }
    let mut statuses = Vec::new();
    for task in tasks {
        statuses.push(task.await.unwrap_or(0));
    }
    statuses
}

/// Idle keep-alive clients are charged one descriptor each, not one more for an origin
/// connection they do not hold: more of them than half the room left after the reserve (what
/// charging each client its origin connection allowed) are all accepted. When they all send a
/// proxied request at once, with HTTP/2 clients' streams beside them (more origin connections
/// than RLIMIT_NOFILE has room for), every request gets 200: those that find no descriptor
/// wait for one instead of failing their connect.
#[test]
fn idle_clients_are_not_charged_an_origin_connection_and_requests_wait_for_one() {
    raise_own_nofile();
    let squall = start_limited(
        &h2c_config(delayed_origin(Duration::from_millis(300))),
        NOFILE,
    );
    let admin = admin_addr(&squall);
    let max = metric(admin, "squall_client_connections_max") as usize;
    // Charging each client its origin connection accepted at most half of what the automatic
    // reserve leaves (docs/CONFIG.md: the floor, 2 workers × 256 pooled, a reload, the admin);
    // a few more idle clients than that.
    let reserve = 64 + 2 * 256 + 2 + 16 + 4;
    let idle = (NOFILE as usize - reserve) / 2 + 30;
    let runtime = two_threads();
    let addr = squall.addr;
    runtime.block_on(async move {
        let mut clients = Vec::new();
        for _ in 0..idle {
            clients.push(tokio::net::TcpStream::connect(addr).await.expect("connect"));
        }
        // Every one is accepted (bounded wait): none waits in the kernel's queue.
        let deadline = Instant::now() + Duration::from_secs(20);
        while metric(admin, "squall_client_connections_open") < idle as f64 {
            let open = metric(admin, "squall_client_connections_open");
            assert!(
                Instant::now() < deadline,
                "{open} of {idle} idle clients accepted (mark {max})"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Now all at once: a GET on each idle connection and 6 × 100 HTTP/2 streams.
        let h1: Vec<_> = (clients.into_iter().enumerate())
            .map(|(id, mut stream)| {
                tokio::spawn(async move { get(&mut stream, &format!("/p/idle/{id}")).await })
            })
            .collect();
        let h2 = h2_burst(addr, 6, 100).await;
        let mut by_status = std::collections::BTreeMap::new();
        for task in h1 {
            let status = match tokio::time::timeout(LOAD_DEADLINE, task).await {
                Ok(Ok(Ok(status))) => status,
                _ => 0,
            };
            *by_status.entry(status).or_insert(0usize) += 1;
        }
        for status in h2 {
            *by_status.entry(status + 1000).or_insert(0usize) += 1;
        }
        let expected = [(200, idle), (1200, 600)].into_iter().collect();
        assert_eq!(
            by_status, expected,
            "HTTP/1.1 statuses, and HTTP/2 ones + 1000 (0: no answer)"
        );
    });
    let waits = metric(admin, "squall_descriptor_waits_total");
    assert!(waits >= 1.0, "some requests waited for a descriptor");
    assert_eq!(
        metric(admin, "squall_upstream_descriptor_failures_total"),
        0.0
    );
    assert_eq!(
        metric(admin, "squall_request_descriptors"),
        0.0,
        "every charge given back"
    );
}
