//! Ten thousand concurrent idle keep-alive connections on one worker.

use std::io::Write;

use squall_e2e::{Squall, hello_config, read_response};

const CONNECTIONS: usize = 10_000;

/// Raises this test process's descriptor limit to its hard limit and returns it.
fn raise_own_nofile() -> usize {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit(RLIMIT_NOFILE)");
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).expect("setrlimit(RLIMIT_NOFILE)");
    usize::try_from(hard).unwrap_or(usize::MAX)
}

#[test]
fn ten_thousand_idle_keep_alive_connections() {
    let hard = raise_own_nofile();
    assert!(
        hard > CONNECTIONS + 100,
        "this test needs `ulimit -Hn` above {CONNECTIONS}, got {hard}"
    );
    let squall = Squall::start(&hello_config(""));
    let mut conns = Vec::with_capacity(CONNECTIONS);
    for i in 0..CONNECTIONS {
        let mut stream = squall.connect();
        stream
            .write_all(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let response =
            read_response(&mut stream).unwrap_or_else(|| panic!("connection {i} closed"));
        assert_eq!(response.status, 200, "connection {i}");
        conns.push(stream);
    }
    // Every one of them is still open: ask again on a spread of them, oldest first.
    for (i, stream) in conns.iter_mut().enumerate().step_by(97) {
        stream
            .write_all(b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let response =
            read_response(stream).unwrap_or_else(|| panic!("connection {i} was dropped"));
        assert_eq!(response.body_text(), "B");
    }
}
