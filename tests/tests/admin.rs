//! The admin listener: Prometheus metrics that count what clients did, and a health check.

use std::io::Write;

use squall_e2e::{
    Squall, admin_addr, admin_get, hello_config, is_closed, read_response, roundtrip,
};

#[test]
fn metrics_count_good_and_bad_requests() {
    let squall = Squall::start(&hello_config("[admin]\nlisten = \"127.0.0.2:0\""));
    let admin = admin_addr(&squall);
    let mut good = squall.connect();
    for _ in 0..3 {
        assert_eq!(
            roundtrip(&mut good, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").status,
            200
        );
    }
    let mut bad = squall.connect();
    bad.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\nX: a\x00b\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut bad).unwrap().status, 400);
    assert!(is_closed(&mut bad));

    let (status, metrics) = admin_get(admin, "/metrics");
    assert_eq!(status, 200);
    assert!(
        metrics.contains("squall_responses_total{worker=\"0\",class=\"2xx\"} 3\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("squall_responses_total{worker=\"0\",class=\"4xx\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("squall_bad_requests_total{worker=\"0\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("squall_connections_accepted_total{worker=\"0\"} 2\n"),
        "{metrics}"
    );
    assert_eq!(admin_get(admin, "/healthz"), (200, "ok\n".to_owned()));
    assert_eq!(admin_get(admin, "/nope").0, 404);
}

#[test]
fn reloads_are_counted_and_healthz_fails_while_draining() {
    let mut squall = Squall::start(&hello_config("[admin]\nlisten = \"127.0.0.2:0\""));
    let admin = admin_addr(&squall);
    squall.rewrite_config("[server]\nworkerz = 1\n");
    squall.signal(libc::SIGHUP);
    assert!(squall.wait_log("reload refused", 1, std::time::Duration::from_secs(5)));
    let (_, metrics) = admin_get(admin, "/metrics");
    assert!(
        metrics.contains("squall_reloads_total{result=\"failed\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("squall_reloads_total{result=\"ok\"} 0\n"),
        "{metrics}"
    );

    // An in-flight request keeps the drain going while the health check is asked.
    let mut busy = squall.connect();
    busy.write_all(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n")
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(admin_get(admin, "/healthz").0, 200);
    squall.signal(libc::SIGTERM);
    assert!(squall.wait_log("stopping", 1, std::time::Duration::from_secs(5)));
    assert_eq!(admin_get(admin, "/healthz"), (503, "draining\n".to_owned()));
    busy.write_all(b"ok").unwrap();
    assert_eq!(read_response(&mut busy).unwrap().status, 200);
    assert!(
        squall
            .wait_exit(std::time::Duration::from_secs(5))
            .unwrap()
            .success()
    );
}
