//! HTTP/1.1 clients that half-close: they send their requests, shut their writing side
//! (`shutdown(SHUT_WR)`, as `nc -N` does, or a health check may), and read the answers. Every
//! request received before the end of stream that Squall answers itself is answered whole (a
//! fixed response, a small static file, a spliced large one), and then the connection
//! closes. A proxied request in progress when the end of stream arrives is given up, as
//! nginx gives it up (a client that closed may be gone altogether, and its origin may hold
//! buffers for long): the connection closes without its answer.

#[path = "support/origin.rs"]
mod origin;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use squall_e2e::{Squall, TempDir};

const SMALL: usize = 1024;
const LARGE: usize = (1 << 20) + 7;

fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 253) as u8 ^ (i >> 10) as u8)
        .collect()
}

/// Squall with a fixed answer at `/fixed`, files under `/files/`, and `/slow/` proxied to an
/// origin that answers after 300 ms.
fn start(dir: &TempDir) -> Squall {
    let files = dir.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("small.bin"), pattern(SMALL)).unwrap();
    std::fs::write(files.join("large.bin"), pattern(LARGE)).unwrap();
    let origin = origin::hyper_origin(|_request: http::Request<hyper::body::Incoming>| async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(http::Response::new(Full::new(Bytes::from_static(
            b"late but whole",
        ))))
    });
    Squall::start(&format!(
        r#"[server]
workers = 1

[[listen]]
address = "ADDR"
protocols = ["http1"]

[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]

[[vhost]]
hosts = ["*"]

[[vhost.route]]
exact = "/fixed"
respond = {{ status = 200, body = "fixed" }}

[[vhost.route]]
prefix = "/files/"
root = "{}"

[[vhost.route]]
prefix = "/slow/"
proxy = "app"
"#,
        dir.path().display()
    ))
}

/// Sends requests for `paths` on one connection, half-closes it, and reads until Squall
/// closes: everything it answered.
fn half_closed(squall: &Squall, paths: &[&str]) -> Vec<u8> {
    half_closed_after(squall, paths, "")
}

/// As [`half_closed`], with `tail` sent after the requests.
fn half_closed_after(squall: &Squall, paths: &[&str], tail: &str) -> Vec<u8> {
    let mut stream = TcpStream::connect(squall.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut requests = String::new();
    for path in paths {
        requests += &format!("GET {path} HTTP/1.1\r\nHost: example.test\r\n\r\n");
    }
    requests += tail;
    stream.write_all(requests.as_bytes()).unwrap();
    stream.shutdown(Shutdown::Write).unwrap();
    let mut got = Vec::new();
    stream
        .read_to_end(&mut got)
        .unwrap_or_else(|e| panic!("reading after a half-close: {e}; log:\n{}", squall.log()));
    got
}

/// The bodies of the 200 responses in `got`, in order (each with a content-length).
fn bodies(got: &[u8]) -> Vec<Vec<u8>> {
    let mut rest = got;
    let mut found = Vec::new();
    while !rest.is_empty() {
        let end = rest
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a head");
        let head = String::from_utf8_lossy(&rest[..end]).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200 "), "{head}");
        let length: usize = (head.lines())
            .find_map(|l| l.strip_prefix("content-length:"))
            .expect("a length")
            .trim()
            .parse()
            .unwrap();
        let body = &rest[end + 4..];
        assert!(
            body.len() >= length,
            "a body cut short: {} of {length}",
            body.len()
        );
        found.push(body[..length].to_vec());
        rest = &body[length..];
    }
    found
}

#[test]
fn each_kind_of_answer_reaches_a_client_that_half_closed() {
    let dir = TempDir::new();
    let squall = start(&dir);
    let cases: [(&str, Vec<u8>); 3] = [
        ("/fixed", b"fixed".to_vec()),
        ("/files/small.bin", pattern(SMALL)),
        ("/files/large.bin", pattern(LARGE)),
    ];
    for (path, body) in &cases {
        let got = bodies(&half_closed(&squall, &[path]));
        assert_eq!(got.len(), 1, "{path}: one answer");
        assert!(got[0] == *body, "{path}: the body whole");
    }
    // The origin answers after 300 ms, long after the end of stream: given up, no answer.
    assert!(half_closed(&squall, &["/slow/x"]).is_empty());
}

/// Pipelined requests, then the end of stream: all are answered in order, then Squall
/// closes.
#[test]
fn pipelined_requests_before_a_half_close_are_all_answered() {
    let dir = TempDir::new();
    let squall = start(&dir);
    let paths = ["/files/small.bin", "/fixed", "/files/large.bin", "/fixed"];
    let got = bodies(&half_closed(&squall, &paths));
    let want = [
        pattern(SMALL),
        b"fixed".to_vec(),
        pattern(LARGE),
        b"fixed".to_vec(),
    ];
    assert_eq!(got.len(), want.len(), "every request answered");
    for (i, (got, want)) in got.iter().zip(&want).enumerate() {
        assert!(got == want, "answer {i} whole and in order");
    }
}

/// The start of a request that can never be completed, then the end of stream: the requests
/// before it are answered and the connection closes at once (not at the header timeout,
/// whose 408 would show here).
#[test]
fn an_incomplete_request_before_a_half_close_ends_the_connection() {
    let dir = TempDir::new();
    let squall = start(&dir);
    let got = half_closed_after(&squall, &["/files/small.bin"], "GET /fix");
    assert_eq!(bodies(&got), [pattern(SMALL)]);
}

/// A request whose body stops short of its length, then the end of stream: the body can
/// never be whole, so the connection closes at once without an answer (it was kept open
/// until a timeout).
#[test]
fn a_body_cut_short_by_a_half_close_ends_the_connection() {
    let dir = TempDir::new();
    let squall = start(&dir);
    let tail =
        "POST /fixed HTTP/1.1\r\nHost: example.test\r\nContent-Length: 100\r\n\r\n0123456789";
    let got = half_closed_after(&squall, &["/files/small.bin"], tail);
    assert_eq!(bodies(&got), [pattern(SMALL)]);
}
