//! Proxy routes against real origins: tiny hyper servers started by the test.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use squall_e2e::{Squall, read_response, roundtrip};

#[path = "support/h2_client.rs"]
mod h2_client;
#[path = "support/origin.rs"]
mod origin;

/// A hyper origin on a loopback port, counting the connections it accepted.
struct Origin {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
}

async fn handle(name: &'static str, req: http::Request<Incoming>) -> origin::Answer {
    let path = req.uri().path().to_owned();
    if req.uri().path() == "/p/headers" {
        let mut seen: Vec<String> = req
            .headers()
            .iter()
            .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap_or("?")))
            .collect();
        seen.sort();
        return Ok(http::Response::new(Full::new(Bytes::from(seen.join("\n")))));
    }
    let forwarded = req
        .headers()
        .get("x-forwarded-for")
        .map(|v| v.to_str().unwrap().to_owned());
    let method = req.method().clone();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let text = match path.as_str() {
        "/p/slow" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            "slow".to_owned()
        }
        "/p/big" => {
            return Ok(http::Response::new(Full::new(Bytes::from(vec![
                b'x';
                1 << 20
            ]))));
        }
        "/p/huge" => {
            let body = Bytes::from(vec![b'y'; 16 << 20]);
            return Ok(http::Response::new(Full::new(body)));
        }
        _ => format!(
            "{name} {method} {path} body={} xff={}",
            body.len(),
            forwarded.unwrap_or_default()
        ),
    };
    Ok(http::Response::builder()
        .header("x-origin", name)
        .body(Full::new(Bytes::from(text)))
        .unwrap())
}

fn start_origin(name: &'static str) -> Origin {
    let connections = Arc::new(AtomicUsize::new(0));
    let counter = connections.clone();
    let accept = move || {
        counter.fetch_add(1, Ordering::Relaxed);
        true
    };
    let addr = origin::hyper_origin_with(accept, move |req| handle(name, req));
    Origin { addr, connections }
}

fn proxy_config(servers: &[SocketAddr]) -> String {
    let servers: Vec<String> = servers
        .iter()
        .map(|a| format!("{{ address = \"{a}\" }}"))
        .collect();
    format!(
        r#"[server]
workers = 1

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[[upstream]]
name = "app"
servers = [{}]
connect_timeout = "1s"
response_timeout = "1s"

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/p/"
proxy = "app"
response_headers = {{ set = {{ "x-via" = "squall" }} }}

[[vhost.route]]
exact = "/local"
respond = {{ status = 200, body = "local" }}
"#,
        servers.join(", ")
    )
}

#[test]
fn get_and_post_are_forwarded_with_keep_alive_to_the_origin() {
    let origin = start_origin("o1");
    let squall = Squall::start(&proxy_config(&[origin.addr]));
    let mut client = squall.connect();
    for i in 0..10 {
        let r = roundtrip(
            &mut client,
            &format!("GET /p/a{i}?q=1 HTTP/1.1\r\nHost: x\r\n\r\n"),
        );
        assert_eq!(r.status, 200, "request {i}");
        assert_eq!(
            r.body_text(),
            format!("o1 GET /p/a{i} body=0 xff=127.0.0.1")
        );
        assert_eq!(r.header("x-origin"), Some("o1"));
        assert_eq!(
            r.header("x-via"),
            Some("squall"),
            "route response edits apply"
        );
    }
    let post = "POST /p/up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
    assert_eq!(
        roundtrip(&mut client, post).body_text(),
        "o1 POST /p/up body=5 xff=127.0.0.1"
    );
    let chunked = "PUT /p/up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n";
    assert_eq!(
        roundtrip(&mut client, chunked).body_text(),
        "o1 PUT /p/up body=7 xff=127.0.0.1"
    );
    // Local routes still answer locally on the same connection.
    assert_eq!(
        roundtrip(&mut client, "GET /local HTTP/1.1\r\nHost: x\r\n\r\n").body_text(),
        "local"
    );
    assert_eq!(
        origin.connections.load(Ordering::Relaxed),
        1,
        "one pooled origin connection"
    );
}

#[test]
fn pipelined_proxied_requests_come_back_in_order() {
    let origin = start_origin("o1");
    let squall = Squall::start(&proxy_config(&[origin.addr]));
    let mut client = squall.connect();
    let batch = "GET /p/1 HTTP/1.1\r\nHost: x\r\n\r\nGET /local HTTP/1.1\r\nHost: x\r\n\r\nGET /p/2 HTTP/1.1\r\nHost: x\r\n\r\n";
    client.write_all(batch.as_bytes()).unwrap();
    let bodies: Vec<String> = (0..3)
        .map(|_| read_response(&mut client).unwrap().body_text())
        .collect();
    assert_eq!(
        bodies,
        [
            "o1 GET /p/1 body=0 xff=127.0.0.1",
            "local",
            "o1 GET /p/2 body=0 xff=127.0.0.1"
        ]
    );
}

#[test]
fn a_large_body_streams_through_intact() {
    let origin = start_origin("o1");
    let squall = Squall::start(&proxy_config(&[origin.addr]));
    let mut client = squall.connect();
    let r = roundtrip(&mut client, "GET /p/big HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 1 << 20);
    assert!(r.body.iter().all(|b| *b == b'x'));
}

#[test]
fn two_servers_share_the_load() {
    let (a, b) = (start_origin("a"), start_origin("b"));
    let squall = Squall::start(&proxy_config(&[a.addr, b.addr]));
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..6 {
        let mut client = squall.connect();
        let r = roundtrip(
            &mut client,
            "GET /p/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        seen.insert(r.header("x-origin").unwrap().to_owned());
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), ["a", "b"]);
}

#[test]
fn an_origin_that_refuses_gets_502_and_a_slow_one_504() {
    let lateness = squall_e2e::Lateness::start();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = closed.local_addr().unwrap();
    drop(closed);
    let squall = Squall::start(&proxy_config(&[dead]));
    let mut client = squall.connect();
    let started = Instant::now();
    assert_eq!(
        roundtrip(&mut client, "GET /p/x HTTP/1.1\r\nHost: x\r\n\r\n").status,
        502
    );
    // Refused is answered at once.
    lateness.assert_within("the 502", started.elapsed(), Duration::from_secs(1));
    // The request was read whole, so the connection goes on (no reconnect storm).
    let response = roundtrip(&mut client, "GET /local HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(response.body_text(), "local");

    let origin = start_origin("o1");
    let squall = Squall::start(&proxy_config(&[origin.addr]));
    let mut client = squall.connect();
    let started = Instant::now();
    assert_eq!(
        roundtrip(&mut client, "GET /p/slow HTTP/1.1\r\nHost: x\r\n\r\n").status,
        504
    );
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(900), "{waited:?}");
    lateness.assert_within("the 504", waited, Duration::from_millis(2900));
    let response = roundtrip(&mut client, "GET /local HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(response.body_text(), "local");
}

/// An origin written by hand, for framings and failures hyper would not produce: each
/// connection answers requests with `respond(request_head)` and closes after `close_after`.
fn raw_origin(respond: fn(&str) -> String, close_after: usize) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(64) {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                use std::io::Read;
                stream
                    .set_read_timeout(Some(Duration::from_secs(5)))
                    .unwrap();
                for _ in 0..close_after {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        if stream.read(&mut byte).unwrap_or(0) == 0 {
                            return;
                        }
                        head.push(byte[0]);
                    }
                    let text = String::from_utf8_lossy(&head).into_owned();
                    if stream.write_all(respond(&text).as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn chunked_and_bodiless_responses_are_reframed_for_the_client() {
    let origin = raw_origin(
        |head| {
            if head.starts_with("HEAD") {
                "HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n".to_owned()
            } else if head.contains("/p/empty") {
                "HTTP/1.1 204 No Content\r\n\r\n".to_owned()
            } else {
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n".to_owned()
            }
        },
        100,
    );
    let squall = Squall::start(&proxy_config(&[origin]));
    let mut client = squall.connect();
    // Chunked from the origin, chunked to the client; our reader needs a length, so ask 1.0.
    client
        .write_all(b"GET /p/c HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .unwrap();
    let mut text = Vec::new();
    std::io::Read::read_to_end(&mut client, &mut text).unwrap();
    let text = String::from_utf8_lossy(&text);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(
        text.ends_with("\r\n\r\nhello world"),
        "HTTP/1.0 gets the body until close: {text}"
    );

    let mut client = squall.connect();
    client
        .write_all(b"HEAD /p/h HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        std::io::Read::read_exact(&mut client, &mut byte).unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_lowercase();
    assert!(head.contains("content-length: 42\r\n"), "{head}");
    // No body followed the HEAD response: the next response starts right away.
    assert_eq!(
        roundtrip(&mut client, "GET /p/empty HTTP/1.1\r\nHost: x\r\n\r\n").status,
        204
    );
    assert_eq!(
        roundtrip(&mut client, "GET /local HTTP/1.1\r\nHost: x\r\n\r\n").body_text(),
        "local"
    );
}

#[test]
fn a_slow_reader_gets_a_large_body_intact() {
    let origin = start_origin("o1");
    let squall = Squall::start(&proxy_config(&[origin.addr]));
    let mut client = squall.connect();
    client
        .write_all(b"GET /p/huge HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    // Read slowly, so that Squall must pause the origin rather than buffer the whole body.
    let mut reader = SlowReader {
        inner: client,
        chunk: 64 * 1024,
    };
    let r = read_response(&mut reader).unwrap();
    assert_eq!(
        r.body.len(),
        16 << 20,
        "status {} {}",
        r.status,
        squall.log()
    );
    assert!(r.body.iter().all(|b| *b == b'y'));
    assert!(
        squall.log().contains("origin paused"),
        "the origin was paused: {}",
        squall.log()
    );
}

struct SlowReader {
    inner: std::net::TcpStream,
    chunk: usize,
}

impl std::io::Read for SlowReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        std::thread::sleep(Duration::from_micros(500));
        let n = buf.len().min(self.chunk);
        self.inner.read(&mut buf[..n])
    }
}

#[test]
fn origins_closing_keep_alive_connections_and_clients_leaving_early_are_survived() {
    // The origin closes every connection after one response: pooled connections go stale.
    let origin = raw_origin(
        |_| "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_owned(),
        1,
    );
    let squall = Squall::start(&proxy_config(&[origin]));
    let mut client = squall.connect();
    for i in 0..5 {
        let r = roundtrip(&mut client, "GET /p/x HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(
            (r.status, r.body_text()),
            (200, "ok".to_owned()),
            "request {i}"
        );
    }
    // A client that leaves in the middle of a large response.
    let big = start_origin("o1");
    let squall = Squall::start(&proxy_config(&[big.addr]));
    for _ in 0..3 {
        let mut early = squall.connect();
        early
            .write_all(b"GET /p/big HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut some = [0u8; 1000];
        std::io::Read::read_exact(&mut early, &mut some).unwrap();
        drop(early);
    }
    let mut client = squall.connect();
    let r = roundtrip(&mut client, "GET /p/after HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.body_text(), "o1 GET /p/after body=0 xff=127.0.0.1");
}

#[test]
fn hop_by_hop_fields_are_dropped_and_forwarding_fields_added() {
    let origin = start_origin("o1");
    let squall = Squall::start(&proxy_config(&[origin.addr]));
    let mut client = squall.connect();
    let request = "GET /p/headers HTTP/1.1\r\nHost: example.test\r\nConnection: keep-alive, x-secret\r\n\
                   X-Secret: 1\r\nKeep-Alive: timeout=5\r\nTE: gzip\r\nX-Forwarded-For: 10.0.0.9\r\n\
                   Via: 1.0 edge\r\nX-Kept: yes\r\n\r\n";
    let seen = roundtrip(&mut client, request).body_text();
    for absent in ["x-secret:", "keep-alive:", "te:", "upgrade:"] {
        assert!(
            !seen.contains(absent),
            "{absent} must not reach the origin:\n{seen}"
        );
    }
    for present in [
        "host: example.test",
        "x-kept: yes",
        "x-forwarded-for: 10.0.0.9, 127.0.0.1",
        "x-forwarded-proto: http",
        "forwarded: for=127.0.0.1;proto=http",
        "via: 1.0 edge, 1.1 squall",
    ] {
        assert!(
            seen.lines().any(|l| l == present),
            "{present} missing:\n{seen}"
        );
    }
}

#[test]
fn a_refusing_server_fails_over_to_the_other() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = closed.local_addr().unwrap();
    drop(closed);
    let live = start_origin("live");
    let squall = Squall::start(&proxy_config(&[dead, live.addr]));
    for i in 0..6 {
        let mut client = squall.connect();
        let r = roundtrip(
            &mut client,
            "POST /p/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi",
        );
        assert_eq!(r.status, 200, "request {i} fails over");
        assert_eq!(r.header("x-origin"), Some("live"));
    }
}

/// HTTP/2 clients reach the same origins: one connection's streams fan out over several origin
/// connections, request bodies and large responses flow under HTTP/2 flow control, and origin
/// failures become 502/504 on their stream only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_clients_are_proxied_stream_by_stream() {
    let origin = start_origin("o1");
    let squall = Squall::start(&proxy_config(&[origin.addr]));
    let client = h2_client::h2c(squall.addr).await;
    let base = format!("http://{}", squall.addr);

    let reply = h2_client::fetch(&client, "GET", &format!("{base}/p/x?q=1"), None).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["x-origin"], "o1");
    assert_eq!(reply.headers["x-via"], "squall");
    let text = String::from_utf8(reply.body).unwrap();
    assert!(
        text.starts_with("o1 GET /p/x body=0 xff=127.0.0.1"),
        "{text}"
    );

    // A body of unknown length goes to the HTTP/1.1 origin chunked, and arrives whole.
    let upload = Bytes::from(vec![b'u'; 3 << 20]);
    let reply = h2_client::fetch(&client, "POST", &format!("{base}/p/up"), Some(upload)).await;
    assert_eq!(reply.status, 200);
    let text = String::from_utf8(reply.body).unwrap();
    assert!(
        text.starts_with(&format!("o1 POST /p/up body={}", 3 << 20)),
        "{text}"
    );

    let reply = h2_client::fetch(&client, "GET", &format!("{base}/p/big"), None).await;
    assert_eq!(reply.body.len(), 1 << 20);
    let reply = h2_client::fetch(&client, "HEAD", &format!("{base}/p/x"), None).await;
    assert_eq!(reply.status, 200);
    assert!(reply.body.is_empty());

    // Many streams at once, mixed with local routes.
    let mut tasks = Vec::new();
    for i in 0..64 {
        let client = client.clone();
        let uri = match i % 3 {
            0 => format!("{base}/p/n{i}"),
            1 => format!("{base}/local"),
            _ => format!("{base}/p/big"),
        };
        tasks.push(tokio::spawn(async move {
            let reply = h2_client::fetch(&client, "GET", &uri, None).await;
            (i, reply.status, reply.body)
        }));
    }
    for task in tasks {
        let (i, status, body) = task.await.unwrap();
        assert_eq!(status, 200, "stream {i}");
        match i % 3 {
            0 => assert!(body.starts_with(format!("o1 GET /p/n{i} ").as_bytes())),
            1 => assert_eq!(body, b"local"),
            _ => assert_eq!(body.len(), 1 << 20),
        }
    }

    // A slow origin: 504 on that stream; the connection goes on.
    let reply = h2_client::fetch(&client, "GET", &format!("{base}/p/slow"), None).await;
    assert_eq!(reply.status, 504);
    let reply = h2_client::fetch(&client, "GET", &format!("{base}/local"), None).await;
    assert_eq!(reply.status, 200);
}

#[tokio::test]
async fn http2_gets_502_when_the_origin_refuses() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let squall = Squall::start(&proxy_config(&[addr]));
    let client = h2_client::h2c(squall.addr).await;
    let reply =
        h2_client::fetch(&client, "GET", &format!("http://{}/p/x", squall.addr), None).await;
    assert_eq!(reply.status, 502);
    let reply = h2_client::fetch(
        &client,
        "GET",
        &format!("http://{}/local", squall.addr),
        None,
    )
    .await;
    assert_eq!(reply.status, 200);
}

/// An origin whose `/healthz` answers 503 while `sick` is set; every other path answers its
/// name, so only health probes can tell that it is "sick".
fn health_origin(name: &'static str, sick: &'static std::sync::atomic::AtomicBool) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(1000) {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                use std::io::Read;
                stream
                    .set_read_timeout(Some(Duration::from_secs(5)))
                    .unwrap();
                loop {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        if stream.read(&mut byte).unwrap_or(0) == 0 {
                            return;
                        }
                        head.push(byte[0]);
                    }
                    let text = String::from_utf8_lossy(&head).into_owned();
                    let response = if text.starts_with("GET /healthz ")
                        && sick.load(Ordering::Relaxed)
                    {
                        "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n".to_owned()
                    } else {
                        format!("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{name}")
                    };
                    if stream.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// Active health checks take a server out of rotation on failed probes alone (its real traffic
/// would succeed), and bring it back on good ones.
#[test]
fn health_probes_take_a_server_out_and_bring_it_back() {
    static SICK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let a = health_origin("a1", &SICK);
    static HEALTHY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let b = health_origin("b1", &HEALTHY);
    let config = proxy_config(&[a, b])
        .replace(
            "response_timeout = \"1s\"",
            "response_timeout = \"1s\"\nhealth_check = { path = \"/healthz\", interval = \"100ms\", fails = 1, passes = 1 }",
        )
        .replace("[[upstream]]", "[admin]\nlisten = \"127.0.0.2:0\"\n\n[[upstream]]");
    let squall = Squall::start(&config);
    let admin = squall_e2e::admin_addr(&squall);
    let up = |server: SocketAddr| {
        let (_, metrics) = squall_e2e::admin_get(admin, "/metrics");
        let series = format!(
            "squall_upstream_server_up{{upstream=\"app\",server=\"{server}\",worker=\"0\"}} "
        );
        let line = metrics
            .lines()
            .find(|l| l.starts_with(&series))
            .unwrap_or_else(|| panic!("{series} in {metrics}"));
        line.rsplit(' ').next().unwrap().to_owned()
    };
    let served = |count: usize| -> (usize, usize) {
        let mut stream = squall.connect();
        let mut seen = (0, 0);
        for _ in 0..count {
            let response = roundtrip(&mut stream, "GET /p/x HTTP/1.1\r\nHost: x\r\n\r\n");
            assert_eq!(response.status, 200);
            match response.body_text().as_str() {
                "a1" => seen.0 += 1,
                _ => seen.1 += 1,
            }
        }
        seen
    };
    let (to_a, to_b) = served(20);
    assert!(to_a > 0 && to_b > 0, "both serve: {to_a} {to_b}");

    SICK.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(served(20), (0, 20), "a1 is out after a failed probe");
    assert_eq!(
        (up(a), up(b)),
        ("0".to_owned(), "1".to_owned()),
        "/metrics shows it"
    );

    SICK.store(false, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(600));
    let (to_a, _) = served(20);
    assert!(to_a > 0, "a1 is back after a good probe");
    assert_eq!(up(a), "1");
}

/// An origin that promises 100,000 bytes, sends 10 and closes.
fn dying_origin() -> SocketAddr {
    raw_origin(
        |_| "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n0123456789".to_owned(),
        1,
    )
}

/// An origin dying mid-response never becomes a complete-looking response: HTTP/1.1 clients
/// see their connection cut short of the promised length.
#[test]
fn an_origin_dying_mid_response_cuts_the_http1_client() {
    let lateness = squall_e2e::Lateness::start();
    let squall = Squall::start(&proxy_config(&[dying_origin()]));
    let mut client = squall.connect();
    client
        .write_all(b"GET /p/x HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let head = squall_e2e::read_response_head(&mut client).unwrap();
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("100000"));
    // The cut must come from Squall as soon as the origin dies, not from this client's 10 s
    // read timeout.
    let started = Instant::now();
    let mut body = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match std::io::Read::read(&mut client, &mut buf) {
            Ok(0) => break,
            Ok(n) => body.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the client was never cut ({e}) after {} bytes", body.len()),
        }
    }
    let elapsed = started.elapsed();
    lateness.assert_within("the cut", elapsed, Duration::from_secs(3));
    assert_eq!(
        body, b"0123456789",
        "exactly what the origin sent, then the cut"
    );
    // Squall goes on serving.
    let mut other = squall.connect();
    assert_eq!(
        roundtrip(&mut other, "GET /local HTTP/1.1\r\nHost: x\r\n\r\n").status,
        200
    );
}

/// Over HTTP/2 the same failure resets only that stream.
#[tokio::test]
async fn an_origin_dying_mid_response_resets_the_http2_stream() {
    let squall = Squall::start(&proxy_config(&[dying_origin()]));
    let client = h2_client::h2c(squall.addr).await;
    let mut ready = client.clone().ready().await.unwrap();
    let request = http::Request::get(format!("http://{}/p/x", squall.addr))
        .body(())
        .unwrap();
    let (response, _) = ready.send_request(request, true).unwrap();
    let response = response.await.expect("the head arrived");
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut received = 0;
    let mut failed = false;
    while let Some(chunk) = body.data().await {
        match chunk {
            Ok(chunk) => {
                received += chunk.len();
                let _ = body.flow_control().release_capacity(chunk.len());
            }
            Err(e) => {
                assert!(e.is_reset(), "{e}");
                failed = true;
                break;
            }
        }
    }
    assert!(failed, "the stream was reset after {received} bytes");
    let local = format!("http://{}/local", squall.addr);
    assert_eq!(
        h2_client::fetch(&client, "GET", &local, None).await.status,
        200
    );
}

/// nginx as the origin (installed by .ci/run): a static file of 1 MiB arrives byte for byte
/// over HTTP/1.1 and HTTP/2, on reused keep-alive connections.
#[tokio::test]
async fn nginx_as_origin_serves_files_through_squall() {
    let dir = squall_e2e::TempDir::new();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("p")).unwrap();
    let file: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
    std::fs::write(root.join("p/file.bin"), &file).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let conf = dir.path().join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\npid {dir}/nginx.pid;\n\
             error_log stderr error;\nevents {{ worker_connections 256; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {dir};\n\
               server {{\n    listen 127.0.0.1:{port};\n    root {root};\n\
                 location = /p/hello {{ return 200 \"hello from nginx\"; }}\n  }}\n}}\n",
            dir = dir.path().display(),
            root = root.display(),
        ),
    )
    .unwrap();
    let mut nginx = squall_e2e::tool("nginx")
        .arg("-c")
        .arg(&conf)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("nginx (installed by .ci/run)");
    let origin: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(origin).is_err() {
        assert!(Instant::now() < deadline, "nginx did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let squall = Squall::start(&proxy_config(&[origin]));

    let mut stream = squall.connect();
    for _ in 0..3 {
        let response = roundtrip(&mut stream, "GET /p/file.bin HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(response.status, 200);
        assert!(response.body == file, "HTTP/1.1 body differs");
        let hello = roundtrip(&mut stream, "GET /p/hello HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(hello.body_text(), "hello from nginx");
    }
    let client = h2_client::h2c(squall.addr).await;
    let url = format!("http://{}/p/file.bin", squall.addr);
    for _ in 0..3 {
        let reply = h2_client::fetch(&client, "GET", &url, None).await;
        assert_eq!(reply.status, 200);
        assert!(reply.body == file, "HTTP/2 body differs");
    }
    let _ = nginx.kill();
    let _ = nginx.wait();
}

/// With active checks, a group whose every server fails its probes answers 502 at once,
/// without trying the origin.
#[test]
fn with_health_checks_an_all_down_group_answers_502_at_once() {
    static SICK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);
    let a = health_origin("a1", &SICK);
    let config = proxy_config(&[a]).replace(
        "response_timeout = \"1s\"",
        "response_timeout = \"1s\"\nhealth_check = { path = \"/healthz\", interval = \"100ms\", fails = 1, passes = 1 }",
    );
    let squall = Squall::start(&config);
    std::thread::sleep(Duration::from_millis(500));
    let mut stream = squall.connect();
    assert_eq!(
        roundtrip(&mut stream, "GET /p/x HTTP/1.1\r\nHost: x\r\n\r\n").status,
        502
    );
    SICK.store(false, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(500));
    let mut stream = squall.connect();
    assert_eq!(
        roundtrip(&mut stream, "GET /p/x HTTP/1.1\r\nHost: x\r\n\r\n").body_text(),
        "a1"
    );
}

/// `consistent_hash` by a header: one user, one origin; several users spread over both.
#[test]
fn consistent_hash_by_header_keeps_a_user_on_one_server() {
    let a = start_origin("o1");
    let b = start_origin("o2");
    let config = proxy_config(&[a.addr, b.addr]).replace(
        "response_timeout = \"1s\"",
        "response_timeout = \"1s\"\nbalance = \"consistent_hash\"\nhash_key = \"header:x-user\"",
    );
    let squall = Squall::start(&config);
    let mut stream = squall.connect();
    let mut servers = std::collections::HashSet::new();
    for user in 0..20 {
        let mut seen = std::collections::HashSet::new();
        for path in ["/p/a", "/p/b", "/p/c?q=1"] {
            let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nX-User: u{user}\r\n\r\n");
            let response = roundtrip(&mut stream, &request);
            seen.insert(response.header("x-origin").unwrap().to_owned());
        }
        assert_eq!(seen.len(), 1, "user {user} went to {seen:?}");
        servers.extend(seen);
    }
    assert_eq!(servers.len(), 2, "20 users spread over both servers");
}

/// An error Squall writes itself (a 502 for an origin that refuses, a PURGE's answer) to a
/// request that asked to close (`Connection: close`, or HTTP/1.0 without keep-alive) says
/// `connection: close` and does close: the client reads to the end instead of waiting.
#[test]
fn answers_written_here_close_when_the_request_asked() {
    // A port nothing listens on: every connect is refused.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = dead.local_addr().unwrap();
    drop(dead);
    let config = proxy_config(&[addr]).replace(
        "[[vhost.route]]\nexact = \"/local\"",
        "[[vhost.route]]\nprefix = \"/c/\"\nproxy = \"app\"\ncache = true\n\n[[vhost.route]]\nexact = \"/local\"",
    );
    let squall = Squall::start(&config);
    for (request, status) in [
        (
            "GET /p/x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            "502",
        ),
        ("GET /p/x HTTP/1.0\r\nHost: a\r\n\r\n", "502"),
        (
            "PURGE /c/x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            "404",
        ),
    ] {
        let mut stream = squall.connect();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut all = Vec::new();
        std::io::Read::read_to_end(&mut stream, &mut all)
            .unwrap_or_else(|e| panic!("{request:?}: not closed ({e})"));
        let text = String::from_utf8_lossy(&all).to_ascii_lowercase();
        assert!(text.starts_with(&format!("http/1.1 {status}")), "{text}");
        assert!(text.contains("connection: close"), "{text}");
    }
}
