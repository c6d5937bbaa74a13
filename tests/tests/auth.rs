//! `auth_basic` on routes, over HTTP/1.1 and HTTP/2: the 401 challenge, good, bad and missing
//! passwords, the credential cache, the failure limit, and a worker that goes on answering
//! other connections while a password is being checked.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use squall_e2e::{Squall, TempDir, admin_addr, admin_get, metric_sum, roundtrip};

const CHALLENGE: &str = "Basic realm=\"Staff\", charset=\"UTF-8\"";

/// A config with a `/staff/` route behind `users` and an open `/`.
fn config(users: &std::path::Path, limits: &str) -> String {
    format!(
        r#"[server]
workers = 1

[admin]
listen = "127.0.0.9:0"

[limits]
{limits}

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/staff/"
respond = {{ status = 200, body = "staff only" }}
auth_basic = {{ realm = "Staff", users_file = "{}" }}

[[vhost.route]]
prefix = "/"
respond = {{ status = 200, body = "home" }}
"#,
        users.display()
    )
}

/// A users file in `dir` with each `(user, password)` hashed by bcrypt at `cost`.
fn users_file(dir: &TempDir, users: &[(&str, &str)], cost: u32) -> std::path::PathBuf {
    let path = dir.path().join("htpasswd");
    let lines: String = users
        .iter()
        .map(|(user, password)| format!("{user}:{}\n", bcrypt::hash(password, cost).unwrap()))
        .collect();
    std::fs::write(&path, lines).unwrap();
    path
}

fn basic(user: &str, password: &str) -> String {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}")
}

/// (status, WWW-Authenticate, Retry-After, body) of a GET over HTTP/1.1 on a new connection.
fn h1_get(squall: &Squall, path: &str, authorization: Option<&str>) -> Answer {
    let field = authorization.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    let request = format!("GET {path} HTTP/1.1\r\nHost: a.test\r\n{field}\r\n");
    let response = roundtrip(&mut squall.connect(), &request);
    Answer {
        status: response.status,
        challenge: response.header("www-authenticate").map(str::to_owned),
        retry_after: response.header("retry-after").map(str::to_owned),
        body: response.body_text(),
    }
}

#[derive(Debug, PartialEq)]
struct Answer {
    status: u16,
    challenge: Option<String>,
    retry_after: Option<String>,
    body: String,
}

/// The same over HTTP/2 (prior knowledge), with an optional request body.
async fn h2_request(
    addr: SocketAddr,
    path: &str,
    authorization: Option<&str>,
    body: Option<&'static [u8]>,
) -> Answer {
    let mut client = squall_e2e_h2(addr).await;
    let mut request = http::Request::builder()
        .method(if body.is_some() { "POST" } else { "GET" })
        .uri(format!("http://{addr}{path}"));
    if let Some(a) = authorization {
        request = request.header("authorization", a);
    }
    let request = request.body(()).unwrap();
    let (response, mut send) = client.send_request(request, body.is_none()).unwrap();
    if let Some(body) = body {
        send.send_data(Bytes::from_static(body), true).unwrap();
    }
    let response = response.await.unwrap();
    let field = |name: &str| (response.headers().get(name)).map(|v| v.to_str().unwrap().to_owned());
    let (status, challenge, retry_after) = (
        response.status().as_u16(),
        field("www-authenticate"),
        field("retry-after"),
    );
    let mut received = Vec::new();
    let mut stream = response.into_body();
    while let Some(chunk) = stream.data().await {
        received.extend_from_slice(&chunk.unwrap());
    }
    Answer {
        status,
        challenge,
        retry_after,
        body: String::from_utf8(received).unwrap(),
    }
}

async fn squall_e2e_h2(addr: SocketAddr) -> h2::client::SendRequest<Bytes> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, connection) = h2::client::handshake(stream).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client.ready().await.unwrap()
}

fn unauthorized() -> Answer {
    Answer {
        status: 401,
        challenge: Some(CHALLENGE.to_owned()),
        retry_after: None,
        body: "401 Unauthorized\n".to_owned(),
    }
}

fn staff() -> Answer {
    Answer {
        status: 200,
        challenge: None,
        retry_after: None,
        body: "staff only".to_owned(),
    }
}

#[tokio::test]
async fn good_bad_and_missing_passwords_over_both_protocols() {
    let dir = TempDir::new();
    let users = users_file(&dir, &[("alice", "correct horse"), ("bob", "s3cret")], 4);
    let squall = Squall::start(&config(&users, ""));
    let good = basic("alice", "correct horse");
    let cases = [
        (None, unauthorized()),
        (Some(basic("alice", "wrong")), unauthorized()),
        (Some(basic("mallory", "correct horse")), unauthorized()),
        (Some("Bearer abc".to_owned()), unauthorized()),
        (Some(good.clone()), staff()),
    ];
    for (authorization, expected) in &cases {
        let auth = authorization.as_deref();
        assert_eq!(
            &h1_get(&squall, "/staff/a", auth),
            expected,
            "HTTP/1.1 {auth:?}"
        );
        let answer = h2_request(squall.addr, "/staff/a", auth, None).await;
        assert_eq!(&answer, expected, "HTTP/2 {auth:?}");
    }
    // Other routes ask for nothing.
    assert_eq!(h1_get(&squall, "/", None).status, 200);
    // A request with a body is checked on the worker (within its budget), on both protocols.
    let posted = h2_request(
        squall.addr,
        "/staff/p",
        Some(&basic("bob", "s3cret")),
        Some(b"x"),
    )
    .await;
    assert_eq!(posted, staff());
    let posted = h2_request(
        squall.addr,
        "/staff/p",
        Some(&basic("bob", "nope")),
        Some(b"x"),
    )
    .await;
    assert_eq!(posted, unauthorized());
    let request = format!(
        "POST /staff/p HTTP/1.1\r\nHost: a.test\r\nAuthorization: {}\r\nContent-Length: 2\r\n\r\nhi",
        basic("bob", "wrong")
    );
    let response = roundtrip(&mut squall.connect(), &request);
    assert_eq!(response.status, 401);
    assert_eq!(response.header("www-authenticate"), Some(CHALLENGE));

    let (_, metrics) = admin_get(admin_addr(&squall), "/metrics");
    // Checked: the wrong, unknown and good ones once per protocol... except that the good
    // one, verified on HTTP/1.1, was a cache hit on HTTP/2; and the three posts.
    assert_eq!(metric_sum(&metrics, "squall_auth_verifications_total"), 8.0);
    assert_eq!(metric_sum(&metrics, "squall_auth_cache_hits_total"), 1.0);
    assert_eq!(metric_sum(&metrics, "squall_auth_failures_total"), 6.0);
}

#[tokio::test]
async fn too_many_failures_are_answered_429_without_a_check() {
    let dir = TempDir::new();
    let users = users_file(&dir, &[("alice", "pw")], 4);
    let squall = Squall::start(&config(&users, "auth_failures_max = 3"));
    for i in 0..3 {
        let answer = h1_get(
            &squall,
            "/staff/",
            Some(&basic("alice", &format!("guess{i}"))),
        );
        assert_eq!(answer.status, 401, "failure {i}");
    }
    // Even the right password is not checked now: one failure a 20 s (3 a minute) comes back.
    for answer in [
        h1_get(&squall, "/staff/", Some(&basic("alice", "pw"))),
        h2_request(squall.addr, "/staff/", Some(&basic("alice", "pw")), None).await,
    ] {
        assert_eq!(answer.status, 429);
        let wait: u64 = answer.retry_after.as_deref().unwrap().parse().unwrap();
        assert!((15..=20).contains(&wait), "Retry-After {wait}");
    }
    let (_, metrics) = admin_get(admin_addr(&squall), "/metrics");
    assert_eq!(metric_sum(&metrics, "squall_auth_verifications_total"), 3.0);
    assert_eq!(metric_sum(&metrics, "squall_auth_limited_total"), 2.0);
}

/// A slow hash is checked off the worker: with one worker, other connections are answered
/// while it runs, and the waiting request gets its answer after.
#[tokio::test]
async fn the_worker_answers_others_while_a_password_is_checked() {
    let dir = TempDir::new();
    // Cost 11: about 150 ms optimized, several times that in a debug build.
    let users = users_file(&dir, &[("alice", "pw")], 11);
    let squall = Squall::start(&config(&users, ""));
    for h2 in [false, true] {
        let password = if h2 { "wrong" } else { "pw" };
        let addr = squall.addr;
        let slow = tokio::spawn(async move {
            let started = Instant::now();
            let answer = if h2 {
                h2_request(addr, "/staff/", Some(&basic("alice", password)), None).await
            } else {
                let request = format!(
                    "GET /staff/ HTTP/1.1\r\nHost: a.test\r\nAuthorization: {}\r\n\r\n",
                    basic("alice", password)
                );
                let mut stream = std::net::TcpStream::connect(addr).unwrap();
                let response =
                    tokio::task::spawn_blocking(move || roundtrip(&mut stream, &request));
                let response = response.await.unwrap();
                Answer {
                    status: response.status,
                    challenge: None,
                    retry_after: None,
                    body: String::new(),
                }
            };
            (answer.status, started.elapsed(), Instant::now())
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut quick = Vec::new();
        for _ in 0..5 {
            let answer = h2_request(squall.addr, "/", None, None).await;
            assert_eq!(answer.status, 200);
            quick.push(Instant::now());
        }
        let (status, took, finished) = slow.await.unwrap();
        assert_eq!(status, if h2 { 401 } else { 200 }, "h2: {h2}");
        assert!(
            took > Duration::from_millis(100),
            "the check is slow ({took:?}), or this test proves nothing"
        );
        assert!(
            quick.iter().all(|&done| done < finished),
            "h2: {h2}: other requests waited for the password check ({took:?})"
        );
    }
}

/// `squall check` refuses a users file with a weak hash, naming the file and line; a reload
/// reads the file again.
#[tokio::test]
async fn check_names_a_weak_line_and_reload_rereads_the_file() {
    let dir = TempDir::new();
    let users = users_file(&dir, &[("alice", "old")], 4);
    let text = std::fs::read_to_string(&users).unwrap();
    std::fs::write(&users, format!("{text}bob:$apr1$salt$hash\n")).unwrap();
    let file = dir.path().join("squall.toml");
    std::fs::write(&file, config(&users, "").replace("ADDR", "127.0.0.1:1")).unwrap();
    let output = std::process::Command::new(squall_e2e::squall_bin())
        .args(["check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let expected = format!(
        "{}:2: an MD5 hash is refused: use bcrypt (htpasswd -B) or argon2\n",
        users.display()
    );
    assert_eq!(String::from_utf8_lossy(&output.stderr), expected);

    std::fs::write(&users, text).unwrap();
    let squall = Squall::start(&config(&users, ""));
    assert_eq!(
        h1_get(&squall, "/staff/", Some(&basic("alice", "old"))).status,
        200
    );
    users_file(&dir, &[("alice", "new")], 4);
    squall.signal(libc::SIGHUP);
    assert!(squall.wait_log("configuration reloaded", 1, Duration::from_secs(5)));
    // The old password was cached; the reload forgot it with the file it came from.
    assert_eq!(
        h1_get(&squall, "/staff/", Some(&basic("alice", "old"))).status,
        401
    );
    assert_eq!(
        h1_get(&squall, "/staff/", Some(&basic("alice", "new"))).status,
        200
    );
}

/// An HTTP/2 stream waiting for its password check keeps its connection from counting as idle:
/// with `idle_timeout` shorter than the check, the answer still arrives (the idle GOAWAY and
/// its one-second grace used to close the connection under the waiting stream).
#[tokio::test]
async fn a_stream_waiting_for_its_check_keeps_the_connection_open() {
    let dir = TempDir::new();
    // A check slower than the idle timeout and its grace together: measured, not assumed.
    let mut cost = 12;
    let (users, check) = loop {
        let users = users_file(&dir, &[("alice", "pw")], cost);
        let squall = Squall::start(&config(&users, ""));
        let started = Instant::now();
        let answer = h2_request(squall.addr, "/staff/", Some(&basic("alice", "pw")), None).await;
        assert_eq!(answer.status, 200);
        let check = started.elapsed();
        if check > Duration::from_millis(1800) || cost == 16 {
            break (users, check);
        }
        cost += 1;
    };
    assert!(
        check > Duration::from_millis(1800),
        "the check takes {check:?}: too fast for this test to prove anything"
    );
    let limits = "idle_timeout = \"300ms\"";
    let squall = Squall::start(&config(&users, limits));
    let answer = h2_request(squall.addr, "/staff/", Some(&basic("alice", "pw")), None).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "staff only"));
}
