//! Origin servers named by host name: `localhost:PORT` is resolved at start-up and its
//! addresses become the group's servers (over HTTP/1.1 and HTTP/2); a name that does not
//! resolve fails `squall check` and start-up, naming the server; a reload follows a changed
//! name, and refuses a new name that does not resolve. Background re-resolution is tested on
//! the sans-IO state (`crates/squall/src/resolve`), as changing what a name resolves to would
//! mean editing the system's resolver files.
//!
//! The origins listen on 127.0.0.1 only. Where `localhost` also resolves to ::1, that server
//! refuses connections and requests still succeed by failing over to 127.0.0.1.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use squall_e2e::{
    Squall, TempDir, admin_addr, admin_get, hello_config, roundtrip, squall_bin, tiny_origin,
};

#[path = "support/h2_client.rs"]
mod h2_client;

/// Squall with h2c, an admin port, and `/p/` proxied to upstream `app` at `address`.
fn config(address: &str) -> String {
    let extra = format!(
        "[admin]\nlisten = \"127.0.0.2:0\"\n\n[[upstream]]\nname = \"app\"\n\
         servers = [{{ address = \"{address}\" }}]\nresolve_interval = \"1s\"\n"
    );
    let mut config = hello_config(&extra).replace(
        "address = \"ADDR\"",
        "address = \"ADDR\"\nprotocols = [\"http1\", \"h2c\"]",
    );
    config.push_str("\n[[vhost.route]]\nprefix = \"/p/\"\nproxy = \"app\"\n");
    config
}

fn localhost(origin: SocketAddr) -> String {
    format!("localhost:{}", origin.port())
}

fn get(squall: &Squall, path: &str) -> (u16, String) {
    let mut stream = squall.connect();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
    let response = roundtrip(&mut stream, &request);
    (response.status, response.body_text())
}

#[tokio::test]
async fn a_server_named_localhost_serves_over_both_protocols() {
    let origin = tiny_origin("named");
    let squall = Squall::start(&config(&localhost(origin)));
    for _ in 0..4 {
        assert_eq!(get(&squall, "/p/a"), (200, "named".to_owned()));
    }
    let client = h2_client::h2c(squall.addr).await;
    for _ in 0..4 {
        let reply = h2_client::fetch(&client, "GET", "http://x/p/b", None).await;
        assert_eq!((reply.status, reply.body.as_slice()), (200, &b"named"[..]));
    }
    // The resolved address is a server of the group, labelled with the name it came from.
    let (_, metrics) = admin_get(admin_addr(&squall), "/metrics");
    let name = localhost(origin);
    let server = format!(
        "squall_upstream_server_picks_total{{upstream=\"app\",server=\"{origin}\",name=\"{name}\""
    );
    assert!(metrics.contains(&server), "{metrics}");
    let count = format!("squall_upstream_resolved_addresses{{upstream=\"app\",name=\"{name}\"}} ");
    assert!(metrics.contains(&count), "{metrics}");
    assert!(
        metrics.contains("squall_upstream_resolutions_total{upstream=\"app\",result=\"ok\"}"),
        "{metrics}"
    );
}

#[test]
fn a_name_that_does_not_resolve_fails_check_and_start_up() {
    let dir = TempDir::new();
    let path = dir.path().join("c.toml");
    let text = config("no-such-host.invalid:80").replace("ADDR", "127.0.0.1:0");
    std::fs::write(&path, text).unwrap();
    let expected = "upstream \"app\": cannot resolve server \"no-such-host.invalid:80\"";
    for args in [&["check", "--config"][..], &["--config"][..]] {
        let out = Command::new(squall_bin())
            .args(args)
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn a_reload_follows_a_changed_name_and_refuses_one_that_does_not_resolve() {
    let first = tiny_origin("first");
    let second = tiny_origin("second");
    let squall = Squall::start(&config(&localhost(first)));
    assert_eq!(get(&squall, "/p/a"), (200, "first".to_owned()));

    squall.rewrite_config(&config(&localhost(second)));
    squall.signal(libc::SIGHUP);
    let wait = Duration::from_secs(5);
    assert!(
        squall.wait_log("configuration reloaded", 1, wait),
        "{}",
        squall.log()
    );
    assert_eq!(get(&squall, "/p/a"), (200, "second".to_owned()));

    squall.rewrite_config(&config("no-such-host.invalid:80"));
    squall.signal(libc::SIGHUP);
    assert!(
        squall.wait_log("reload refused", 1, wait),
        "{}",
        squall.log()
    );
    assert!(
        squall
            .log()
            .contains("cannot resolve server \"no-such-host.invalid:80\""),
        "{}",
        squall.log()
    );
    assert_eq!(get(&squall, "/p/a"), (200, "second".to_owned()));
}
