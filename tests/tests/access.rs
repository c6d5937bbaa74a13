//! `allow` / `deny` on routes: clients are told apart by their address (the test connects
//! from 127.0.0.1 and from other loopback addresses), over HTTP/1.1 and HTTP/2.

use std::net::SocketAddr;

use bytes::Bytes;
use squall_e2e::{Squall, admin_addr, admin_get, metric_sum, roundtrip};

const CONFIG: &str = r#"[server]
workers = 1

[admin]
listen = "127.0.0.9:0"

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/office/"
respond = { status = 200, body = "office" }
allow = ["10.0.0.0/8", "127.0.0.1"]

[[vhost.route]]
prefix = "/public/"
respond = { status = 200, body = "public" }
deny = ["127.0.0.2"]

[[vhost.route]]
prefix = "/lab/"
respond = { status = 200, body = "lab" }
allow = ["127.0.0.0/8"]
deny = ["127.0.0.0/30", "127.0.0.3"]

[[vhost.route]]
prefix = "/"
respond = { status = 200, body = "home" }
"#;

/// A connection to Squall from the local address `from`.
async fn connect_from(squall: &Squall, from: &str) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket.connect(squall.addr).await.unwrap()
}

/// The status of `GET path` over HTTP/1.1 from `from`.
async fn h1_status(squall: &Squall, from: &str, path: &str) -> u16 {
    let stream = connect_from(squall, from).await.into_std().unwrap();
    stream.set_nonblocking(false).unwrap();
    let mut stream = stream;
    let request = format!("GET {path} HTTP/1.1\r\nHost: a.test\r\n\r\n");
    tokio::task::spawn_blocking(move || roundtrip(&mut stream, &request).status)
        .await
        .unwrap()
}

/// The status of `GET path` over HTTP/2 from `from`.
async fn h2_status(addr: SocketAddr, stream: tokio::net::TcpStream, path: &str) -> u16 {
    let (client, connection) = h2::client::handshake(stream).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut client = client.ready().await.unwrap();
    let request = http::Request::get(format!("http://{addr}{path}"))
        .body(())
        .unwrap();
    let (response, _) = client.send_request(request, true).unwrap();
    let response = response.await.unwrap();
    let status = response.status().as_u16();
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        let _: Bytes = chunk.unwrap();
    }
    status
}

#[tokio::test]
async fn routes_answer_only_the_networks_they_allow() {
    let squall = Squall::start(CONFIG);
    // (client address, path, expected status)
    let cases = [
        ("127.0.0.1", "/office/a", 200),
        ("127.0.0.2", "/office/a", 403),
        ("127.0.0.1", "/public/a", 200),
        ("127.0.0.2", "/public/a", 403),
        ("127.0.0.4", "/public/a", 200),
        // The most specific network decides: 127.0.0.0/30 is denied inside the allowed /8,
        // and 127.0.0.3 twice over; 127.0.0.4 is only in the /8.
        ("127.0.0.1", "/lab/a", 403),
        ("127.0.0.3", "/lab/a", 403),
        ("127.0.0.4", "/lab/a", 200),
        ("127.0.0.2", "/other", 200),
    ];
    for (from, path, expected) in cases {
        assert_eq!(
            h1_status(&squall, from, path).await,
            expected,
            "HTTP/1.1 {from} {path}"
        );
        let stream = connect_from(&squall, from).await;
        let status = h2_status(squall.addr, stream, path).await;
        assert_eq!(status, expected, "HTTP/2 {from} {path}");
    }
    let (_, metrics) = admin_get(admin_addr(&squall), "/metrics");
    let denied = cases.iter().filter(|c| c.2 == 403).count() * 2;
    assert_eq!(
        metric_sum(&metrics, "squall_access_denied_total"),
        denied as f64
    );
}

/// A refused HTTP/2 stream leaves the connection open for the next request.
#[tokio::test]
async fn a_refused_http2_stream_leaves_the_connection_usable() {
    let squall = Squall::start(CONFIG);
    let stream = connect_from(&squall, "127.0.0.2").await;
    let (client, connection) = h2::client::handshake(stream).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    for (path, expected) in [("/public/x", 403), ("/home", 200), ("/public/y", 403)] {
        let mut client = client.clone().ready().await.unwrap();
        let request = http::Request::get(format!("http://{}{path}", squall.addr))
            .body(())
            .unwrap();
        let (response, _) = client.send_request(request, true).unwrap();
        assert_eq!(response.await.unwrap().status(), expected, "{path}");
    }
}
