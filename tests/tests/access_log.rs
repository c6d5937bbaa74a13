//! The access log: a line for every request (good or refused), and reopening on SIGUSR1 after
//! the file was moved away, as logrotate does.

use std::io::Write;
use std::time::{Duration, Instant};

use squall_e2e::{Squall, TempDir, hello_config, read_response, roundtrip};

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
            && lines[0].ends_with(" ut=- cs=- proto=HTTP/1.1"),
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
