//! Bad and abusive clients: each gets its status and a close, and no other connection notices.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use squall_e2e::{
    Squall, admin_addr, admin_get, hello_config, is_closed, metric_sum, read_response, roundtrip,
};

/// Each malformed request, the status Squall must answer it with.
const BAD_REQUESTS: &[(&str, &str, u16)] = &[
    (
        "CL and TE",
        "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        400,
    ),
    (
        "differing CLs",
        "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        400,
    ),
    (
        "bad chunk size",
        "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
        400,
    ),
    (
        "bad chunk extension",
        "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;=\r\nabc\r\n0\r\n\r\n",
        400,
    ),
    (
        "obs-fold",
        "GET /a HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n",
        400,
    ),
    (
        "bare CR",
        "GET /a HTTP/1.1\r\nHost: x\r\nX-A: 1\r2\r\n\r\n",
        400,
    ),
    (
        "NUL in value",
        "GET /a HTTP/1.1\r\nHost: x\r\nX-A: 1\x002\r\n\r\n",
        400,
    ),
    (
        "space before colon",
        "GET /a HTTP/1.1\r\nHost : x\r\n\r\n",
        400,
    ),
    ("missing host", "GET /a HTTP/1.1\r\n\r\n", 400),
];

fn limits_config() -> String {
    hello_config(
        r#"[limits]
header_bytes_max = "2KiB"
uri_bytes_max = "256"
body_bytes_max = "1KiB"
header_timeout = "1s"
idle_timeout = "30s""#,
    )
}

#[test]
fn each_bad_request_gets_its_status_and_a_close_while_others_go_on() {
    let squall = Squall::start(&limits_config());
    let mut good = squall.connect();
    assert_eq!(
        roundtrip(&mut good, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").status,
        200
    );
    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "u".repeat(300));
    let big_head = format!(
        "GET /a HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "h".repeat(3000)
    );
    let big_body = "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2048\r\n\r\n".to_owned();
    let big_chunked = format!(
        "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n{}\r\n0\r\n\r\n",
        "b".repeat(2048)
    );
    let mut cases: Vec<(&str, String, u16)> = BAD_REQUESTS
        .iter()
        .map(|(name, req, status)| (*name, req.to_string(), *status))
        .collect();
    cases.push(("URI too long", long_uri, 414));
    cases.push(("head too large", big_head, 431));
    cases.push(("body too large", big_body, 413));
    cases.push(("chunked body too large", big_chunked, 413));
    for (name, request, status) in cases {
        let mut bad = squall.connect();
        let _ = bad.write_all(request.as_bytes());
        let response = read_response(&mut bad).unwrap_or_else(|| panic!("{name}: no response"));
        assert_eq!(response.status, status, "{name}");
        assert_eq!(response.header("connection"), Some("close"), "{name}");
        assert!(is_closed(&mut bad), "{name}: connection must close");
        // The parallel good connection is unaffected.
        let ok = roundtrip(&mut good, "GET /b HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(
            (ok.status, ok.body_text()),
            (200, "B".to_owned()),
            "after {name}"
        );
    }
}

#[test]
fn slowloris_gets_408_after_the_header_timeout() {
    let lateness = squall_e2e::Lateness::start();
    let squall = Squall::start(&limits_config());
    let mut slow = squall.connect();
    slow.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let started = Instant::now();
    // Trickle a head that never completes, a byte every ~20 ms, and keep trickling until the
    // answer comes: a timer that restarted on each byte would never fire (the loop gives up
    // after 5 s, far past the 1 s header_timeout).
    let head = b"GET /a HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    let mut sent = 0;
    let mut probe = [0u8; 1];
    loop {
        let byte = head.get(sent).copied().unwrap_or(b'z');
        if slow.write_all(&[byte]).is_err() {
            break;
        }
        sent += 1;
        if slow.peek(&mut probe).is_ok() {
            break;
        }
        assert!(
            started.elapsed() < lateness.allow(Duration::from_secs(5)),
            "no answer while trickling for 5 s ({sent} bytes sent; worst lateness {:?})",
            lateness.worst()
        );
    }
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let response = read_response(&mut slow).expect("a 408 response");
    let waited = started.elapsed();
    assert_eq!(response.status, 408);
    assert!(is_closed(&mut slow));
    assert!(
        waited >= Duration::from_millis(900),
        "cut too early: {waited:?}"
    );
    lateness.assert_within("the 408", waited, Duration::from_millis(2500));

    // A connection that never sends a byte is closed without a response.
    let mut silent = squall.connect();
    assert!(is_closed(&mut silent));
    let mut good = squall.connect();
    assert_eq!(
        roundtrip(&mut good, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").status,
        200
    );
}

#[test]
fn sigterm_drains_in_flight_requests_and_exits_zero() {
    let mut squall = Squall::start(&hello_config(""));
    let mut idle = squall.connect();
    assert_eq!(
        roundtrip(&mut idle, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").status,
        200
    );
    let mut busy = squall.connect();
    busy.write_all(b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    squall.signal(libc::SIGTERM);
    // The idle keep-alive connection is closed at once.
    assert!(is_closed(&mut idle), "idle connection closed by the drain");
    // The in-flight request completes, with Connection: close.
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        squall.is_running(),
        "squall waits for the in-flight request"
    );
    // While it drains, its listeners are closed: new connections are refused.
    assert!(
        std::net::TcpStream::connect(squall.addr).is_err(),
        "a new connection during the drain"
    );
    assert!(squall.is_running(), "still draining");
    busy.write_all(b"cd").unwrap();
    let response = read_response(&mut busy).expect("the in-flight request is answered");
    assert_eq!(
        (response.status, response.body_text()),
        (200, "B".to_owned())
    );
    assert_eq!(response.header("connection"), Some("close"));
    let status = squall
        .wait_exit(Duration::from_secs(5))
        .expect("exits within drain_timeout");
    assert!(status.success(), "exit status {status:?}");
}

#[test]
fn drain_timeout_bounds_the_stop() {
    let lateness = squall_e2e::Lateness::start();
    let config = hello_config("").replace("drain_timeout = \"5s\"", "drain_timeout = \"500ms\"");
    let mut squall = Squall::start(&config);
    let mut stuck = squall.connect();
    stuck
        .write_all(b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nab")
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    squall.signal(libc::SIGINT);
    let status = squall
        .wait_exit(Duration::from_secs(30))
        .expect("exits after drain_timeout");
    assert!(status.success());
    lateness.assert_within("the stop", started.elapsed(), Duration::from_secs(3));
    assert!(is_closed(&mut stuck));
}

/// With a descriptor limit far below the offered connections, Squall pauses accepting, logs it
/// once, keeps serving, and accepts again when descriptors free up.
#[test]
fn running_out_of_descriptors_pauses_accept_and_recovers() {
    let mut squall = Squall::start_with(&hello_config(""), |command| {
        // `prlimit` lowers both limits, so Squall cannot raise them back.
        let bin = command.get_program().to_owned();
        let args: Vec<_> = command.get_args().map(|a| a.to_owned()).collect();
        let mut wrapped = squall_e2e::tool("prlimit");
        wrapped.arg("--nofile=64:64").arg("--").arg(bin).args(args);
        wrapped.env("SQUALL_LOG", "info,squall=debug");
        wrapped
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null());
        wrapped.stderr(std::process::Stdio::piped());
        *command = wrapped;
    });
    let mut held = Vec::new();
    for _ in 0..120 {
        held.push(squall.connect());
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(squall.is_running());
    assert!(
        squall.log().contains("accept paused"),
        "log:\n{}",
        squall.log()
    );
    // Release them all; the backlog drains and service resumes.
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut stream = squall.connect();
        let _ = stream.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
        let mut buf = [0u8; 1];
        if matches!(stream.read(&mut buf), Ok(1)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "service did not resume; log:\n{}",
            squall.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        squall.log().matches("accept paused").count(),
        1,
        "logged once per episode"
    );
}

#[test]
fn a_client_pipelining_without_reading_is_cut_at_its_bound_and_others_go_on() {
    let config = hello_config("[admin]\nlisten = \"127.0.0.2:0\"");
    let squall = Squall::start(&config);
    let admin = admin_addr(&squall);
    let before = squall.rss();
    let client = squall.connect();
    // 32 MiB of pipelined GETs, written by a thread; the client reads none of the answers.
    let mut writer = client.try_clone().unwrap();
    let writes = std::thread::spawn(move || {
        let batch = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".repeat(4096);
        let mut sent = 0;
        while sent < 32 << 20 {
            if writer.write_all(&batch).is_err() {
                return (sent, false);
            }
            sent += batch.len();
        }
        (sent, true)
    });
    let (sent, all) = writes.join().unwrap();
    assert!(
        !all,
        "all 32 MiB were taken from a client that reads nothing"
    );
    eprintln!("cut after {sent} bytes were written");
    let grown = squall.rss().saturating_sub(before);
    assert!(grown < 8 << 20, "Squall grew by {grown} bytes");
    let (_, metrics) = admin_get(admin, "/metrics");
    assert_eq!(metric_sum(&metrics, "squall_input_overflows_total"), 1.0);
    assert!(
        squall
            .log()
            .contains("client sends without reading: closing")
    );
    // Another client is served.
    let mut other = squall.connect();
    let response = roundtrip(&mut other, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(
        (response.status, response.body_text()),
        (200, "A".to_owned())
    );
    drop(client);
}
