//! `error_pages` and `intercept_errors`: Squall's own answers (the default 404, a 502 for a
//! dead origin, a 429 from a route's rate) with the configured page's body and content type,
//! their status and the fields they need kept, over HTTP/1.1 and HTTP/2; an origin's error
//! replaced by the page on a route that intercepts; HEAD gets the head only; a reload reads
//! the pages again.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use std::io::Write;

use squall_e2e::{Response, Squall, TempDir, read_response_head, roundtrip};

#[path = "support/origin.rs"]
mod origin;

/// Status, content type, Retry-After and body of one answer.
#[derive(Debug, PartialEq)]
struct Answer {
    status: u16,
    content_type: Option<String>,
    retry_after: Option<String>,
    body: String,
}

fn h1(squall: &Squall, method: &str, host: &str, path: &str) -> Answer {
    let request = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\n\r\n");
    let response = head_or_roundtrip(&mut squall.connect(), method, &request);
    Answer {
        status: response.status,
        content_type: response.header("content-type").map(str::to_owned),
        retry_after: response.header("retry-after").map(str::to_owned),
        body: response.body_text(),
    }
}

/// One request and its response: the head alone for HEAD.
fn head_or_roundtrip(stream: &mut std::net::TcpStream, method: &str, request: &str) -> Response {
    if method != "HEAD" {
        return roundtrip(stream, request);
    }
    stream.write_all(request.as_bytes()).unwrap();
    read_response_head(stream).unwrap()
}

async fn h2(addr: SocketAddr, method: &str, host: &str, path: &str) -> Answer {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, connection) = h2::client::handshake(stream).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut client = client.ready().await.unwrap();
    let request = http::Request::builder()
        .method(method)
        .uri(format!("http://{host}{path}"))
        .body(())
        .unwrap();
    let (response, _) = client.send_request(request, true).unwrap();
    let response = response.await.unwrap();
    let field = |name: &str| (response.headers().get(name)).map(|v| v.to_str().unwrap().to_owned());
    let (status, content_type, retry_after) = (
        response.status().as_u16(),
        field("content-type"),
        field("retry-after"),
    );
    let mut body = Vec::new();
    let mut stream = response.into_body();
    while let Some(chunk) = stream.data().await {
        let chunk: Bytes = chunk.unwrap();
        body.extend_from_slice(&chunk);
    }
    Answer {
        status,
        content_type,
        retry_after,
        body: String::from_utf8(body).unwrap(),
    }
}

fn answer(status: u16, content_type: &str, retry_after: Option<&str>, body: &str) -> Answer {
    Answer {
        status,
        content_type: Some(content_type.to_owned()),
        retry_after: retry_after.map(str::to_owned),
        body: body.to_owned(),
    }
}

const HTML: &str = "text/html; charset=utf-8";
const JSON: &str = "application/json";
const TEXT: &str = "text/plain; charset=utf-8";

/// Pages in `dir`: a.test's 404, the server's 404, 502 and 429, and the origin error page.
fn pages(dir: &TempDir) {
    let write = |name: &str, body: &str| std::fs::write(dir.path().join(name), body).unwrap();
    write("a404.html", "<h1>a.test has no such page</h1>");
    write("404.txt", "nothing here");
    write("502.json", "{\"error\":\"bad gateway\"}");
    write("429.txt", "slow down");
    write("503.html", "<h1>back soon</h1>");
    write("413.txt", "too big");
}

fn config(dir: &TempDir, origin: SocketAddr) -> String {
    let dir = dir.path().display();
    format!(
        r#"[server]
workers = 1
error_pages = {{ 404 = "{dir}/404.txt", 502 = "{dir}/502.json", 429 = "{dir}/429.txt", 413 = "{dir}/413.txt" }}

[limits]
body_bytes_max = "1KiB"

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[[upstream]]
name = "dead"
servers = [{{ address = "127.0.0.1:1" }}]

[[upstream]]
name = "origin"
servers = [{{ address = "{origin}" }}]

[[vhost]]
hosts = ["a.test"]
error_pages = {{ 404 = "{dir}/a404.html", 503 = "{dir}/503.html" }}

[[vhost.route]]
prefix = "/dead/"
proxy = "dead"

[[vhost.route]]
prefix = "/limited/"
respond = {{ status = 200, body = "ok" }}
request_rate = "1/m"
request_burst = 1

[[vhost.route]]
prefix = "/caught/"
proxy = "origin"
intercept_errors = true

[[vhost.route]]
prefix = "/plain/"
proxy = "origin"

[[vhost]]
hosts = ["b.test"]
"#
    )
}

/// The origin answers every request 503 with its own body and a Retry-After.
fn failing_origin() -> SocketAddr {
    origin::raw_origin(|_| {
        origin::response(
            "503 Service Unavailable",
            &["content-type: text/plain", "retry-after: 7"],
            b"origin is down",
        )
    })
}

#[tokio::test]
async fn squall_answers_with_the_vhost_page_or_the_server_default_over_both_protocols() {
    let dir = TempDir::new();
    pages(&dir);
    let squall = Squall::start(&config(&dir, failing_origin()));
    let cases = [
        // The vhost's own 404 page, and the server's for another vhost.
        (
            "a.test",
            "/none",
            answer(404, HTML, None, "<h1>a.test has no such page</h1>"),
        ),
        ("b.test", "/none", answer(404, TEXT, None, "nothing here")),
        // A dead origin: the server default 502 page, as the vhost lists no 502.
        (
            "a.test",
            "/dead/x",
            answer(502, JSON, None, "{\"error\":\"bad gateway\"}"),
        ),
    ];
    for (host, path, expected) in &cases {
        assert_eq!(
            &h1(&squall, "GET", host, path),
            expected,
            "HTTP/1.1 {host}{path}"
        );
        let got = h2(squall.addr, "GET", host, path).await;
        assert_eq!(&got, expected, "HTTP/2 {host}{path}");
    }
    // HEAD: the page's head (its type and length), no body.
    let request = "HEAD /none HTTP/1.1\r\nHost: a.test\r\n\r\n";
    let mut stream = squall.connect();
    let response = head_or_roundtrip(&mut stream, "HEAD", request);
    assert_eq!(response.status, 404);
    assert_eq!(response.header("content-type"), Some(HTML));
    assert_eq!(response.header("content-length"), Some("32"));
    assert_eq!(response.body_text(), "");
    // The connection goes on after the HEAD answer.
    let next = roundtrip(&mut stream, "GET /none HTTP/1.1\r\nHost: b.test\r\n\r\n");
    assert_eq!(next.body_text(), "nothing here");
    let head = h2(squall.addr, "HEAD", "a.test", "/none").await;
    assert_eq!(head, answer(404, HTML, None, ""));
    // A chunked body that grows over the limit, after the head has chosen the vhost: the
    // page. (A Content-Length over it is refused with the head, before any vhost is known.)
    let big = "x".repeat(2048);
    let request = format!(
        "POST /x HTTP/1.1\r\nHost: b.test\r\nTransfer-Encoding: chunked\r\n\r\n\
         800\r\n{big}\r\n0\r\n\r\n"
    );
    let response = roundtrip(&mut squall.connect(), &request);
    assert_eq!(response.status, 413);
    assert_eq!(response.header("content-type"), Some(TEXT));
    assert_eq!(response.body_text(), "too big");
}

#[tokio::test]
async fn a_429_page_keeps_retry_after() {
    let dir = TempDir::new();
    pages(&dir);
    let squall = Squall::start(&config(&dir, failing_origin()));
    assert_eq!(h1(&squall, "GET", "a.test", "/limited/").status, 200);
    let limited = h1(&squall, "GET", "a.test", "/limited/");
    assert_eq!((limited.status, &limited.body[..]), (429, "slow down"));
    assert_eq!(limited.content_type.as_deref(), Some(TEXT));
    assert!(limited.retry_after.is_some(), "{limited:?}");
    let limited = h2(squall.addr, "GET", "a.test", "/limited/").await;
    assert_eq!((limited.status, &limited.body[..]), (429, "slow down"));
    assert_eq!(limited.content_type.as_deref(), Some(TEXT));
    assert!(limited.retry_after.is_some(), "{limited:?}");
}

#[tokio::test]
async fn intercept_errors_replaces_an_origin_error_with_the_page() {
    let dir = TempDir::new();
    pages(&dir);
    let squall = Squall::start(&config(&dir, failing_origin()));
    let caught = answer(503, HTML, Some("7"), "<h1>back soon</h1>");
    let plain = answer(503, "text/plain", Some("7"), "origin is down");
    for _ in 0..2 {
        // Twice each: the origin connection, its body read and dropped, is used again.
        assert_eq!(h1(&squall, "GET", "a.test", "/caught/x"), caught);
        assert_eq!(h2(squall.addr, "GET", "a.test", "/caught/x").await, caught);
    }
    assert_eq!(h1(&squall, "GET", "a.test", "/plain/x"), plain);
    assert_eq!(h2(squall.addr, "GET", "a.test", "/plain/x").await, plain);
    let head = h1(&squall, "HEAD", "a.test", "/caught/x");
    assert_eq!(head, answer(503, HTML, Some("7"), ""));
}

#[test]
fn a_reload_reads_the_pages_again_and_a_missing_one_is_refused_at_its_key() {
    let dir = TempDir::new();
    pages(&dir);
    let squall = Squall::start(&config(&dir, failing_origin()));
    assert_eq!(h1(&squall, "GET", "b.test", "/x").body, "nothing here");
    std::fs::write(dir.path().join("404.txt"), "still nothing").unwrap();
    squall.signal(libc::SIGHUP);
    let reloaded = squall.wait_log("configuration reloaded", 1, Duration::from_secs(5));
    assert!(reloaded, "{}", squall.log());
    assert_eq!(h1(&squall, "GET", "b.test", "/x").body, "still nothing");
    // A page that cannot be read refuses the reload, naming the key; the old pages stay.
    std::fs::remove_file(dir.path().join("502.json")).unwrap();
    squall.signal(libc::SIGHUP);
    let refused = squall.wait_log("reload refused", 1, Duration::from_secs(5));
    assert!(refused, "{}", squall.log());
    assert!(squall.log().contains(":3:"), "{}", squall.log());
    assert!(squall.log().contains("502.json"), "{}", squall.log());
    assert_eq!(
        h1(&squall, "GET", "a.test", "/dead/").body,
        "{\"error\":\"bad gateway\"}"
    );
}
