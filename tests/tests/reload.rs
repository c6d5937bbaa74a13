//! SIGHUP: a valid file replaces the routes for new requests without dropping connections; an
//! invalid one is refused, logged, and the running config stays.

use std::time::Duration;

use squall_e2e::{Squall, hello_config, roundtrip};

#[test]
fn sighup_swaps_routes_and_keeps_connections() {
    let squall = Squall::start(&hello_config(""));
    let mut kept = squall.connect();
    assert_eq!(
        roundtrip(&mut kept, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").body_text(),
        "A"
    );

    let changed = hello_config("").replace("body = \"A\"", "body = \"A2\"");
    squall.rewrite_config(&changed);
    squall.signal(libc::SIGHUP);
    assert!(
        squall.wait_log("configuration reloaded", 1, Duration::from_secs(5)),
        "{}",
        squall.log()
    );
    // The connection opened before the reload is still open and sees the new route.
    assert_eq!(
        roundtrip(&mut kept, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").body_text(),
        "A2"
    );

    squall.rewrite_config("[server]\nworkerz = 1\n");
    squall.signal(libc::SIGHUP);
    assert!(
        squall.wait_log("reload refused", 1, Duration::from_secs(5)),
        "{}",
        squall.log()
    );
    assert!(
        squall.log().contains(":2:1: "),
        "errors name their line: {}",
        squall.log()
    );
    let mut fresh = squall.connect();
    assert_eq!(
        roundtrip(&mut fresh, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").body_text(),
        "A2"
    );
    assert_eq!(
        roundtrip(&mut kept, "GET /b HTTP/1.1\r\nHost: x\r\n\r\n").body_text(),
        "B"
    );
}

/// Twenty reloads in a second under continuous keep-alive and new-connection load: no request
/// fails, and the last file wins.
#[test]
fn a_reload_storm_under_load_loses_nothing_and_ends_on_the_last_config() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    let config = |n: usize| hello_config("").replace("body = \"A\"", &format!("body = \"v{n}\""));
    let squall = Squall::start(&config(0));
    let addr = squall.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicUsize::new(0));
    let load: Vec<_> = (0..4)
        .map(|t| {
            let (stop, served) = (stop.clone(), served.clone());
            std::thread::spawn(move || {
                let mut stream = std::net::TcpStream::connect(addr).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .unwrap();
                let mut n = 0usize;
                while !stop.load(Ordering::Relaxed) && n < 200_000 {
                    // Every fourth request on a new connection, the rest keep-alive.
                    if t == 0 && n.is_multiple_of(4) {
                        stream = std::net::TcpStream::connect(addr).unwrap();
                        stream
                            .set_read_timeout(Some(Duration::from_secs(10)))
                            .unwrap();
                    }
                    let r = roundtrip(&mut stream, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
                    assert_eq!(r.status, 200, "request {n} of thread {t}");
                    assert!(r.body_text().starts_with('v'), "{}", r.body_text());
                    n += 1;
                }
                served.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    for n in 1..=20 {
        squall.rewrite_config(&config(n));
        squall.signal(libc::SIGHUP);
        std::thread::sleep(Duration::from_millis(50));
    }
    // Signals may coalesce; the last one read the last file.
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    for thread in load {
        thread.join().expect("no load thread saw a failure");
    }
    assert!(served.load(Ordering::Relaxed) > 100, "the load ran");
    let mut fresh = squall.connect();
    assert_eq!(
        roundtrip(&mut fresh, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").body_text(),
        "v20"
    );
    assert!(!squall.log().contains("reload refused"), "{}", squall.log());
}

/// The address the log last reported listening on for `host`.
fn logged_address(squall: &Squall, host: &str) -> std::net::SocketAddr {
    let log = squall.log();
    let needle = format!("listening on http://{host}:");
    let at = log
        .rfind(&needle)
        .unwrap_or_else(|| panic!("no {needle} in:\n{log}"));
    let rest = &log[at + "listening on http://".len()..];
    rest.lines().next().unwrap().trim().parse().unwrap()
}

#[test]
fn sighup_opens_added_listeners_and_closes_removed_ones() {
    let squall = Squall::start(&hello_config(""));
    let first = squall.addr;
    let mut kept = squall.connect();
    assert_eq!(
        roundtrip(&mut kept, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").status,
        200
    );

    let both = hello_config("[[listen]]\naddress = \"127.0.0.2:0\"").replace("ADDR", "127.0.0.1:0");
    squall.rewrite_config(&both);
    squall.signal(libc::SIGHUP);
    assert!(
        squall.wait_log("configuration reloaded", 1, Duration::from_secs(5)),
        "{}",
        squall.log()
    );
    let second = logged_address(&squall, "127.0.0.2");
    let mut added = std::net::TcpStream::connect(second).unwrap();
    assert_eq!(
        roundtrip(&mut added, "GET /b HTTP/1.1\r\nHost: x\r\n\r\n").body_text(),
        "B"
    );

    squall.rewrite_config(&hello_config("").replace("ADDR", "127.0.0.2:0"));
    squall.signal(libc::SIGHUP);
    assert!(
        squall.wait_log("configuration reloaded", 2, Duration::from_secs(5)),
        "{}",
        squall.log()
    );
    assert!(
        squall.log().contains("no longer listening on 127.0.0.1:0"),
        "{}",
        squall.log()
    );
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        std::net::TcpStream::connect(first).is_err(),
        "the removed listener is closed"
    );
    // A connection it accepted before goes on; the kept listener still serves.
    assert_eq!(
        roundtrip(&mut kept, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").status,
        200
    );
    let mut again = std::net::TcpStream::connect(second).unwrap();
    assert_eq!(
        roundtrip(&mut again, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").status,
        200
    );
}

/// Ten reloads that change routes and upstreams while h2load drives HTTP/1.1 and HTTP/2 load
/// at a local route and a proxied one: no request fails.
#[test]
fn reloads_under_http1_and_http2_load_fail_no_request() {
    let origins = [squall_e2e::tiny_origin("o1"), squall_e2e::tiny_origin("o2")];
    let config = |n: usize| {
        let origin = origins[n % 2];
        let upstream =
            format!("[[upstream]]\nname = \"app\"\nservers = [{{ address = \"{origin}\" }}]\n");
        let mut text = hello_config(&upstream)
            .replace(
                "address = \"ADDR\"",
                "address = \"ADDR\"\nprotocols = [\"http1\", \"h2c\"]",
            )
            .replace("body = \"A\"", &format!("body = \"v{n}\""));
        text.push_str("\n[[vhost.route]]\nprefix = \"/p/\"\nproxy = \"app\"\n");
        text
    };
    let squall = Squall::start(&config(0));
    let urls = [
        format!("http://{}/a", squall.addr),
        format!("http://{}/p/x", squall.addr),
    ];
    let h2load = |h1: bool| {
        let mut command = squall_e2e::tool("h2load");
        command.args(["-D", "3", "-c", "4", "-t", "1"]);
        if h1 {
            command.arg("--h1");
        } else {
            command.args(["-m", "8"]);
        }
        command
            .args(&urls)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("h2load (nghttp2-client)")
    };
    let runs = [h2load(true), h2load(false)];
    std::thread::sleep(Duration::from_millis(300));
    for n in 1..=10 {
        squall.rewrite_config(&config(n));
        squall.signal(libc::SIGHUP);
        std::thread::sleep(Duration::from_millis(200));
    }
    for mut run in runs {
        // -D 3 ends the load; a run still going long after is a stuck request.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while run.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                let _ = run.kill();
                panic!("h2load did not finish: a request hung\n{}", squall.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let output = run.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        let line = text
            .lines()
            .find(|l| l.starts_with("requests:"))
            .unwrap_or_else(|| panic!("h2load summary in:\n{text}"));
        assert!(line.contains(" 0 failed, 0 errored, 0 timeout"), "{line}");
        // h2load reports no failure against a port where nothing answers either: the load
        // must have been served, every request it sent.
        let count = |label: &str| -> u64 {
            let at = line
                .find(label)
                .unwrap_or_else(|| panic!("{label} in {line}"));
            let digits = line[..at].trim_end().rsplit(' ').next().unwrap();
            digits.parse().unwrap()
        };
        let succeeded = count(" succeeded");
        assert!(
            succeeded >= 100,
            "a load was served through the reloads: {line}"
        );
        assert_eq!(succeeded, count(" done"), "{line}");
        let status = text
            .lines()
            .find(|l| l.starts_with("status codes:"))
            .unwrap();
        assert!(status.contains(" 0 3xx, 0 4xx, 0 5xx"), "{status}");
    }
    assert!(
        squall.wait_log("configuration reloaded", 10, Duration::from_secs(5))
            || squall.log().matches("configuration reloaded").count() >= 5,
        "{}",
        squall.log()
    );
    assert!(!squall.log().contains("reload refused"), "{}", squall.log());
    // However the signals were coalesced, the last file written is the one in force: its
    // route body and its upstream (o1; the ninth config had o2).
    let mut stream = squall.connect();
    let local = squall_e2e::roundtrip(&mut stream, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(local.body_text(), "v10", "{}", squall.log());
    let proxied = squall_e2e::roundtrip(&mut stream, "GET /p/x HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(proxied.body_text(), "o1", "{}", squall.log());
}
