//! `server.real_ip` (the client address from a trusted proxy's X-Forwarded-For) and the rate
//! limits that key on the client: 429 with `Retry-After`, a route's own `request_rate`.
//!
//! The test connects from 127.0.0.1 (the trusted proxy) and from 127.0.0.2 (anyone else), over
//! HTTP/1.1 and HTTP/2; what the client address decides is checked where it shows: `allow`,
//! the access log, the X-Forwarded-For the origin receives and the consistent-hash pick.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use squall_e2e::{Squall, TempDir, roundtrip};

#[path = "support/origin.rs"]
mod origin;

/// A connection to Squall from the local address `from`.
async fn connect_from(addr: SocketAddr, from: &str) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket.connect(addr).await.unwrap()
}

/// Status, body and `Retry-After` of `GET path` with `fields`, from `from`, over HTTP/1.1 (on
/// a new connection) or HTTP/2.
async fn get(
    addr: SocketAddr,
    from: &str,
    h2: bool,
    path: &str,
    fields: &[(&str, &str)],
) -> (u16, String, Option<String>) {
    let stream = connect_from(addr, from).await;
    if !h2 {
        let mut stream = stream.into_std().unwrap();
        stream.set_nonblocking(false).unwrap();
        let lines: String = fields
            .iter()
            .map(|(n, v)| format!("{n}: {v}\r\n"))
            .collect();
        let request = format!("GET {path} HTTP/1.1\r\nHost: a.test\r\n{lines}\r\n");
        let response = tokio::task::spawn_blocking(move || roundtrip(&mut stream, &request))
            .await
            .unwrap();
        let retry = response.header("retry-after").map(str::to_owned);
        return (response.status, response.body_text(), retry);
    }
    let (client, connection) = h2::client::handshake(stream).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut client = client.ready().await.unwrap();
    let mut request = http::Request::get(format!("http://{addr}{path}"));
    for (name, value) in fields {
        request = request.header(*name, *value);
    }
    let (response, _) = client
        .send_request(request.body(()).unwrap(), true)
        .unwrap();
    let response = response.await.unwrap();
    let status = response.status().as_u16();
    let retry = (response.headers().get("retry-after")).map(|v| v.to_str().unwrap().to_owned());
    let mut body = Vec::new();
    let mut stream = response.into_body();
    while let Some(chunk) = stream.data().await {
        let chunk: Bytes = chunk.unwrap();
        body.extend_from_slice(&chunk);
    }
    (status, String::from_utf8(body).unwrap(), retry)
}

/// The access log's lines once there are `n` (the logger writes them in batches).
fn wait_lines(path: &Path, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        if lines.len() >= n || Instant::now() > deadline {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An origin that answers with the X-Forwarded-For it received, and one that names itself.
fn echo_origin() -> SocketAddr {
    origin::raw_origin(|head| {
        let xff = origin::field(head, "x-forwarded-for")
            .unwrap_or("-")
            .to_owned();
        origin::response("200 OK", &[], xff.as_bytes())
    })
}

fn named_origin(name: &'static str) -> SocketAddr {
    origin::raw_origin(move |_| origin::response("200 OK", &[], name.as_bytes()))
}

fn config(log: &Path) -> String {
    let (echo, a, b) = (echo_origin(), named_origin("a"), named_origin("b"));
    format!(
        r#"[server]
workers = 1
real_ip = {{ header = "x-forwarded-for", from = ["127.0.0.1"] }}

[log]
access = {log:?}

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[[upstream]]
name = "echo"
servers = [{{ address = "{echo}" }}]

[[upstream]]
name = "pair"
balance = "consistent_hash"
hash_key = "client_ip"
servers = [{{ address = "{a}" }}, {{ address = "{b}" }}]

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/office/"
respond = {{ status = 200, body = "office" }}
allow = ["203.0.113.0/24"]

[[vhost.route]]
prefix = "/echo/"
proxy = "echo"

[[vhost.route]]
prefix = "/pair/"
proxy = "pair"
"#
    )
}

const XFF: (&str, &str) = ("x-forwarded-for", "6.6.6.6, 203.0.113.7");

#[tokio::test]
async fn the_client_is_taken_from_a_trusted_proxy_only() {
    let dir = TempDir::new();
    let log = dir.path().join("access.log");
    let squall = Squall::start(&config(&log));
    let addr = squall.addr;
    for h2 in [false, true] {
        // `allow` sees the address the trusted proxy vouches for, and only then.
        let trusted = get(addr, "127.0.0.1", h2, "/office/", &[XFF]).await;
        assert_eq!(trusted.0, 200, "h2: {h2}");
        let untrusted = get(addr, "127.0.0.2", h2, "/office/", &[XFF]).await;
        assert_eq!(
            untrusted.0, 403,
            "h2: {h2}: an untrusted peer's header is not believed"
        );
        // The origin gets the chain with the hop that reached us appended.
        let echoed = get(addr, "127.0.0.1", h2, "/echo/", &[XFF]).await;
        assert_eq!(echoed.1, "6.6.6.6, 203.0.113.7, 127.0.0.1", "h2: {h2}");
        let echoed = get(addr, "127.0.0.2", h2, "/echo/", &[XFF]).await;
        assert_eq!(echoed.1, "6.6.6.6, 203.0.113.7, 127.0.0.2", "h2: {h2}");
    }
    // The access log names the client: the vouched-for one, or the untrusted peer.
    let lines = wait_lines(&log, 8);
    let clients: Vec<&str> = lines.iter().map(|l| l.split(' ').next().unwrap()).collect();
    let expected = ["203.0.113.7", "127.0.0.2", "203.0.113.7", "127.0.0.2"];
    assert_eq!(clients, [expected, expected].concat(), "{lines:#?}");
}

/// Consistent hashing by `client_ip` spreads the clients of one proxy over the servers, and
/// keeps each on one.
#[tokio::test]
async fn the_balancing_key_is_the_real_client() {
    let dir = TempDir::new();
    let squall = Squall::start(&config(&dir.path().join("access.log")));
    let mut servers = std::collections::HashSet::new();
    for client in 0..20 {
        let xff = format!("198.51.100.{client}");
        let mut seen = std::collections::HashSet::new();
        for h2 in [false, true] {
            let fields = [("x-forwarded-for", xff.as_str())];
            seen.insert(
                get(squall.addr, "127.0.0.1", h2, "/pair/x", &fields)
                    .await
                    .1,
            );
        }
        assert_eq!(seen.len(), 1, "client {xff} went to {seen:?}");
        servers.extend(seen);
    }
    assert_eq!(
        servers.len(),
        2,
        "20 clients behind one proxy spread over both servers"
    );
}

const RATES: &str = r#"[server]
workers = 1
real_ip = { header = "x-forwarded-for", from = ["127.0.0.1"] }

[limits]
request_rate = 5
request_burst = 5

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/slow/"
respond = { status = 200, body = "slow" }
request_rate = "2/m"

[[vhost.route]]
prefix = "/keyed/"
respond = { status = 200, body = "keyed" }
request_rate = "1/h"
request_rate_key = "header:x-api-key"

[[vhost.route]]
prefix = "/shared/"
respond = { status = 200, body = "shared" }
request_rate = "1/h"
request_rate_key = "route"

[[vhost.route]]
prefix = "/"
respond = { status = 200, body = "home" }
"#;

/// A route's own rate, per client (after `real_ip`), per header value or for the route as a
/// whole; each refusal says when to come back.
#[tokio::test]
async fn routes_have_their_own_rates_and_429_says_when_to_retry() {
    let squall = Squall::start(RATES);
    let addr = squall.addr;
    let client = |n: u8| format!("198.51.100.{n}");
    // 2 a minute for each client: the third request of a client waits 30 s.
    for (n, h2) in [(1, false), (2, true)] {
        let xff = client(n);
        let fields = [("x-forwarded-for", xff.as_str())];
        assert_eq!(get(addr, "127.0.0.1", h2, "/slow/", &fields).await.0, 200);
        assert_eq!(get(addr, "127.0.0.1", !h2, "/slow/", &fields).await.0, 200);
        let (status, _, retry) = get(addr, "127.0.0.1", h2, "/slow/", &fields).await;
        assert_eq!(status, 429, "client {xff}");
        let wait: u64 = retry.expect("Retry-After").parse().unwrap();
        assert!((29..=30).contains(&wait), "Retry-After {wait}");
    }
    // Another route is not limited by this one's buckets.
    let fields = [("x-forwarded-for", "198.51.100.1")];
    assert_eq!(get(addr, "127.0.0.1", false, "/", &fields).await.0, 200);
    // By header: one key, one bucket, whoever sends it.
    let key = |k| [("x-api-key", k)];
    assert_eq!(
        get(addr, "127.0.0.2", false, "/keyed/", &key("k1")).await.0,
        200
    );
    let (status, _, retry) = get(addr, "127.0.0.3", true, "/keyed/", &key("k1")).await;
    assert_eq!((status, retry.as_deref()), (429, Some("3600")));
    assert_eq!(
        get(addr, "127.0.0.2", true, "/keyed/", &key("k2")).await.0,
        200
    );
    // The whole route: one bucket for everyone.
    assert_eq!(get(addr, "127.0.0.2", false, "/shared/", &[]).await.0, 200);
    assert_eq!(get(addr, "127.0.0.3", true, "/shared/", &[]).await.0, 429);
}

/// `limits.request_rate` (per client) answers 429 with a `Retry-After` of its refill.
#[tokio::test]
async fn the_global_rate_says_when_to_retry() {
    let squall = Squall::start(RATES);
    let fields = [("x-forwarded-for", "198.51.100.50")];
    for h2 in [false, true] {
        let mut refused = None;
        for _ in 0..8 {
            let answer = get(squall.addr, "127.0.0.1", h2, "/", &fields).await;
            if answer.0 == 429 {
                refused = Some(answer);
                break;
            }
        }
        let (_, _, retry) = refused.expect("the sixth request within a second is refused");
        assert_eq!(
            retry.as_deref(),
            Some("1"),
            "5/s: the next token within a second"
        );
    }
    // Another client behind the same proxy has its own bucket.
    let other = [("x-forwarded-for", "198.51.100.51")];
    assert_eq!(
        get(squall.addr, "127.0.0.1", false, "/", &other).await.0,
        200
    );
}
