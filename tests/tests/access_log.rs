//! The access log: a line for every request (good or refused), and reopening on SIGUSR1 after
//! the file was moved away, as logrotate does.

use std::io::Write;
use std::time::{Duration, Instant};

use squall_e2e::{Squall, TempDir, hello_config, read_response, roundtrip, tiny_origin};

#[path = "support/h2_client.rs"]
mod h2_client;
#[path = "support/origin.rs"]
mod origin;

/// Waits (bounded) until `path` holds `lines` lines, and returns them.
fn wait_lines(path: &std::path::Path, lines: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let got: Vec<String> = text.lines().map(str::to_owned).collect();
        if got.len() >= lines || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn every_request_is_logged_and_sigusr1_reopens() {
    let dir = TempDir::new();
    let log = dir.path().join("access.log");
    let config = hello_config(&format!("[log]\naccess = {:?}", log));
    let squall = Squall::start(&config);
    let mut stream = squall.connect();
    let request = "GET /a?x=1 HTTP/1.1\r\nHost: x\r\nUser-Agent: test \"agent\"\r\nReferer: http://r/\r\n\r\n";
    assert_eq!(roundtrip(&mut stream, request).status, 200);
    assert_eq!(
        roundtrip(&mut stream, "GET /missing HTTP/1.1\r\nHost: x\r\n\r\n").status,
        404
    );
    let mut bad = squall.connect();
    bad.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut bad).unwrap().status, 400);

    let lines = wait_lines(&log, 3);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].starts_with("127.0.0.1 - - ["), "{}", lines[0]);
    assert!(
        lines[0].contains("] \"GET /a?x=1 HTTP/1.1\" 200 ")
            && lines[0].contains(" \"http://r/\" \"test \\x22agent\\x22\" rt=")
            && lines[0].contains(" ut=- cs=- proto=HTTP/1.1 id="),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("\"GET /missing HTTP/1.1\" 404 "),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].contains(" \"-\" 400 ") && lines[2].contains("proto=-"),
        "{}",
        lines[2]
    );

    // logrotate: move the file away, signal, and the next lines go to a new file.
    let rotated = dir.path().join("access.log.1");
    std::fs::rename(&log, &rotated).unwrap();
    squall.signal(libc::SIGUSR1);
    assert!(
        squall.wait_log("reopened", 1, Duration::from_secs(5)),
        "{}",
        squall.log()
    );
    assert_eq!(
        roundtrip(&mut stream, "GET /b HTTP/1.1\r\nHost: x\r\n\r\n").status,
        200
    );
    let fresh = wait_lines(&log, 1);
    assert_eq!(fresh.len(), 1, "{fresh:?}");
    assert!(
        fresh[0].contains("\"GET /b HTTP/1.1\" 200 "),
        "{}",
        fresh[0]
    );
    assert_eq!(
        wait_lines(&rotated, 3).len(),
        3,
        "the rotated file keeps its lines"
    );
}

/// The BYTES field of a log line: the number after the status.
fn bytes_of(line: &str) -> usize {
    let after_request = &line[line.find("\" ").expect("a request line") + 2..];
    let mut fields = after_request.split(' ');
    let _status = fields.next();
    fields.next().and_then(|b| b.parse().ok()).expect("BYTES")
}

/// HTTP/2 lines count the response head (its HEADERS frames) as HTTP/1.1 lines do, not only
/// the body; a PURGE answered with a refetch is logged as the PURGE the client sent.
#[tokio::test]
async fn http2_bytes_include_the_head_and_a_refetching_purge_is_logged_as_purge() {
    let dir = TempDir::new();
    let log = dir.path().join("access.log");
    let origin = tiny_origin("fresh");
    let extra = format!(
        "[log]\naccess = {log:?}\n\n[[upstream]]\nname = \"app\"\n\
         servers = [{{ address = \"{origin}\" }}]\n"
    );
    let mut config = hello_config(&extra).replace(
        "address = \"ADDR\"",
        "address = \"ADDR\"\nprotocols = [\"http1\", \"h2c\"]",
    );
    config.push_str(
        "\n[[vhost.route]]\nprefix = \"/cached/\"\nproxy = \"app\"\ncache = true\n\
         cache_ttl = \"60s\"\n",
    );
    let squall = Squall::start(&config);
    let client = h2_client::h2c(squall.addr).await;
    let reply = h2_client::fetch(&client, "GET", "http://x/a", None).await;
    assert_eq!((reply.status, reply.body.as_slice()), (200, &b"A"[..]));
    let mut stream = squall.connect();
    let purge = "PURGE /cached/x HTTP/1.1\r\nHost: x\r\nX-Squall-Purge: refetch\r\n\r\n";
    let refetched = roundtrip(&mut stream, purge);
    assert_eq!(
        (refetched.status, refetched.body_text()),
        (200, "fresh".to_owned())
    );

    let lines = wait_lines(&log, 2);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let h2 = lines
        .iter()
        .find(|l| l.contains("proto=HTTP/2.0"))
        .expect("the HTTP/2 line");
    assert!(h2.contains("\"GET /a HTTP/2.0\" 200 "), "{h2}");
    // One body byte, and a HEADERS frame: a 9-byte frame header and at least `:status`.
    assert!(bytes_of(h2) > 1 + 9, "{h2}");
    let purged = lines
        .iter()
        .find(|l| l.contains("proto=HTTP/1.1"))
        .expect("the PURGE line");
    assert!(
        purged.contains("\"PURGE /cached/x HTTP/1.1\" 200 "),
        "{purged}"
    );
}

/// `format = "json"`: one object per line, every line parses, over HTTP/1.1 and HTTP/2, for
/// answered and refused requests alike.
#[tokio::test]
async fn json_lines_parse_one_object_per_request() {
    let dir = TempDir::new();
    let log = dir.path().join("access.json");
    let config = hello_config(&format!("[log]\naccess = {log:?}\nformat = \"json\""));
    let squall = Squall::start(&config);
    let mut stream = squall.connect();
    let request = "GET /a?x=1 HTTP/1.1\r\nHost: j.test\r\nUser-Agent: say \"hi\"\\\r\n\r\n";
    assert_eq!(roundtrip(&mut stream, request).status, 200);
    let client = h2_client::h2c(squall.addr).await;
    let url = format!("http://{}/h2", squall.addr);
    let reply = h2_client::fetch(&client, "GET", &url, None).await;
    let mut bad = squall.connect();
    bad.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut bad).unwrap().status, 400);

    let lines = wait_lines(&log, 3);
    assert_eq!(lines.len(), 3, "{lines:?}");
    let parsed: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let h1 = &parsed[0];
    assert_eq!(h1["remote_addr"], "127.0.0.1");
    assert_eq!(h1["request"], "GET /a?x=1 HTTP/1.1");
    assert_eq!(h1["host"], "j.test");
    assert_eq!(h1["status"], 200);
    assert_eq!(h1["user_agent"], "say \"hi\"\\");
    assert!(h1["bytes_sent"].as_u64().unwrap() > 0);
    assert!(h1["request_time"].is_f64());
    assert!(h1["time"].as_str().unwrap().ends_with('Z'));
    let h2 = &parsed[1];
    assert_eq!(
        (h2["method"].as_str(), h2["uri"].as_str()),
        (Some("GET"), Some("/h2"))
    );
    assert_eq!(h2["protocol"], "HTTP/2.0");
    assert_eq!(h2["status"], u64::from(reply.status));
    let refused = &parsed[2];
    assert_eq!(refused["status"], 400);
    assert_eq!(refused["request"], serde_json::Value::Null);
}

/// A proxied request whose client leaves before the origin answers still gets its line, with
/// status 499 as nginx logs it: an HTTP/1.1 connection reset, and an HTTP/2 stream cancelled,
/// each once its request reached the origin. (Two runtime threads: the HTTP/2 client's
/// connection task must send the reset while the test waits for the log.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_its_client_abandons_is_logged_499() {
    use tokio::io::AsyncWriteExt;
    let dir = TempDir::new();
    let log = dir.path().join("access.log");
    let (arrived, heads) = std::sync::mpsc::channel::<String>();
    let arrived = std::sync::Mutex::new(arrived);
    let origin = origin::raw_origin(move |head| {
        let line = head.lines().next().unwrap_or_default().to_owned();
        let _ = arrived.lock().unwrap().send(line);
        // No answer: the client leaves first (bounded, so that the thread ends).
        std::thread::sleep(Duration::from_secs(5));
        Vec::new()
    });
    let extra = format!(
        "[log]\naccess = {log:?}\n\n[[upstream]]\nname = \"app\"\n\
         servers = [{{ address = \"{origin}\" }}]\n"
    );
    let mut config = hello_config(&extra).replace(
        "address = \"ADDR\"",
        "address = \"ADDR\"\nprotocols = [\"http1\", \"h2c\"]",
    );
    config.push_str("\n[[vhost.route]]\nprefix = \"/slow/\"\nproxy = \"app\"\n");
    let squall = Squall::start(&config);

    let mut tcp = tokio::net::TcpStream::connect(squall.addr).await.unwrap();
    tcp.write_all(b"GET /slow/1 HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(arrival(&heads).await, "GET /slow/1 HTTP/1.1");
    // A reset, not a FIN (which may be a half-close that still waits for its answer).
    #[allow(deprecated)]
    tcp.set_linger(Some(Duration::ZERO)).unwrap();
    drop(tcp);

    let client = h2_client::h2c(squall.addr).await;
    let mut sender = client.clone().ready().await.unwrap();
    let request = http::Request::get("http://x/slow/2").body(()).unwrap();
    let (response, send) = sender.send_request(request, true).unwrap();
    assert_eq!(arrival(&heads).await, "GET /slow/2 HTTP/1.1");
    // Dropping both halves of the stream cancels it (RST_STREAM(CANCEL)).
    drop((response, send));

    let lines = wait_lines(&log, 2);
    assert_eq!(lines.len(), 2, "{lines:?}");
    for request in [
        "\"GET /slow/1 HTTP/1.1\" 499 0 ",
        "\"GET /slow/2 HTTP/2.0\" 499 0 ",
    ] {
        assert!(
            lines.iter().any(|l| l.contains(request)),
            "{request} in {lines:?}"
        );
    }
}

/// The first line of the next request head the origin received (bounded wait, without
/// blocking the runtime that drives the HTTP/2 client).
async fn arrival(heads: &std::sync::mpsc::Receiver<String>) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match heads.try_recv() {
            Ok(line) => return line,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("no request reached the origin: {e}"),
        }
    }
}
