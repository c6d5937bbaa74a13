//! Per-client-address limits: connections_per_ip_max and request_rate/request_burst.

use std::io::Write;
use std::time::Duration;

use squall_e2e::{Squall, hello_config, is_closed, read_response, roundtrip, tiny_origin};

#[path = "support/h2_client.rs"]
mod h2_client;

#[test]
fn connections_over_the_per_address_limit_are_refused() {
    let squall = Squall::start(&hello_config("[limits]\nconnections_per_ip_max = 3"));
    let mut open: Vec<_> = (0..3).map(|_| squall.connect()).collect();
    for stream in &mut open {
        assert_eq!(
            roundtrip(stream, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").status,
            200
        );
    }
    let mut fourth = squall.connect();
    let _ = fourth.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(is_closed(&mut fourth), "the fourth connection is refused");
    // Closing one frees a place (the close is noticed asynchronously: retry briefly).
    drop(open.pop());
    let mut served = false;
    for _ in 0..50 {
        let mut again = squall.connect();
        let _ = again.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
        if read_response_or_none(&mut again).is_some_and(|status| status == 200) {
            served = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        served,
        "a place freed by a close is given to a new connection"
    );
}

fn read_response_or_none(stream: &mut std::net::TcpStream) -> Option<u16> {
    let mut probe = [0u8; 1];
    match stream.peek(&mut probe) {
        Ok(1) => read_response(stream).map(|r| r.status),
        _ => None,
    }
}

#[test]
fn requests_over_the_rate_get_429() {
    let config = hello_config("[limits]\nrequest_rate = 1\nrequest_burst = 5");
    let squall = Squall::start(&config);
    let mut stream = squall.connect();
    for i in 0..5 {
        let r = roundtrip(&mut stream, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(r.status, 200, "request {i} is within the burst");
    }
    let r = roundtrip(&mut stream, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.status, 429);
    assert!(is_closed(&mut stream));
    // A new connection from the same address shares the same empty bucket.
    let mut again = squall.connect();
    assert_eq!(
        roundtrip(&mut again, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").status,
        429
    );
}

/// The rate limit holds for HTTP/2 streams on every kind of route: proxied, cached and
/// answered here (HTTP/2 streams on proxy and cache routes once bypassed it).
#[tokio::test]
async fn http2_streams_over_the_rate_get_429_on_every_kind_of_route() {
    let origin = tiny_origin("origin");
    let upstream = format!(
        "[limits]\nrequest_rate = 1\nrequest_burst = 3\n\n\
         [[upstream]]\nname = \"app\"\nservers = [{{ address = \"{origin}\" }}]\n"
    );
    let mut config = hello_config(&upstream).replace(
        "address = \"ADDR\"",
        "address = \"ADDR\"\nprotocols = [\"http1\", \"h2c\"]",
    );
    config.push_str(
        "\n[[vhost.route]]\nprefix = \"/p/\"\nproxy = \"app\"\n\
         \n[[vhost.route]]\nprefix = \"/cached/\"\nproxy = \"app\"\ncache = true\n\
         cache_ttl = \"60s\"\n",
    );
    let squall = Squall::start(&config);
    let client = h2_client::h2c(squall.addr).await;
    let url = |path: &str| format!("http://{}{path}", squall.addr);
    // The burst: one of each kind of route, all served.
    for path in ["/p/x", "/cached/x", "/a"] {
        let reply = h2_client::fetch(&client, "GET", &url(path), None).await;
        assert_eq!(reply.status, 200, "{path} is within the burst");
    }
    // Over the rate: each kind of route answers 429 without reaching the origin.
    for path in ["/p/x", "/cached/x", "/cached/y", "/a"] {
        let reply = h2_client::fetch(&client, "GET", &url(path), None).await;
        assert_eq!(reply.status, 429, "{path} over the rate");
    }
    // The same bucket holds for HTTP/1.1 from the same address.
    let mut stream = squall.connect();
    assert_eq!(
        roundtrip(&mut stream, "GET /p/x HTTP/1.1\r\nHost: x\r\n\r\n").status,
        429
    );
}

/// 1,000 requests pipelined to a group whose only server is down are each answered 502, in
/// order, on a worker thread given a small stack: a failure at server selection must let the
/// next request go on from the event loop, not from a call one level deeper each time.
#[test]
fn pipelined_requests_to_an_all_down_group_are_answered_without_growing_the_stack() {
    // A port nobody listens on: every connect is refused.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
    // Active checks mark it down, and then every request fails at server selection, at once.
    let upstream = format!(
        "[[upstream]]\nname = \"down\"\nservers = [{{ address = \"{dead_addr}\" }}]\n\
         health_check = {{ path = \"/healthz\", interval = \"100ms\", fails = 1, passes = 1 }}\n"
    );
    let mut config = hello_config(&upstream);
    config.push_str("\n[[vhost.route]]\nprefix = \"/p/\"\nproxy = \"down\"\n");
    // 256 KiB for every thread Squall starts without a stack size of its own (the workers).
    let squall = Squall::start_with(&config, |command| {
        command.env("RUST_MIN_STACK", "262144");
    });
    std::thread::sleep(Duration::from_millis(500));
    let mut stream = squall.connect();
    let count = 1_000;
    let request = "GET /p/x HTTP/1.1\r\nHost: x\r\n\r\n".repeat(count);
    let writer = {
        let mut stream = stream.try_clone().unwrap();
        std::thread::spawn(move || stream.write_all(request.as_bytes()))
    };
    for i in 0..count {
        let response = read_response(&mut stream)
            .unwrap_or_else(|| panic!("response {i} missing; log:\n{}", squall.log()));
        assert_eq!(response.status, 502, "response {i}");
    }
    writer.join().unwrap().unwrap();
    // Still serving: the worker did not overflow its stack.
    assert_eq!(
        roundtrip(&mut stream, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").status,
        200
    );
}
