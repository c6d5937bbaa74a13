//! Heads kept as spans of the bytes they arrived in, end to end: an HTTP/2 request's fields
//! (decoded by HPACK into one buffer, validated as spans) reach the origin as the client sent
//! them, cookie crumbs joined; an origin's response head (spans of its receive buffer) reaches
//! HTTP/1.1 and HTTP/2 clients with its hop-by-hop fields gone and the rest in order.

use std::net::SocketAddr;

use bytes::Bytes;
use squall_e2e::{Squall, roundtrip};

#[path = "support/h2_client.rs"]
mod h2_client;
#[path = "support/origin.rs"]
mod origin;

/// An origin that answers with the request head it saw as its body, and a response head
/// with hop-by-hop fields (one named by Connection), repeated fields and a route-edited one.
fn echo_origin() -> SocketAddr {
    origin::raw_origin(|head| {
        origin::response(
            "200 OK",
            &[
                "Server: echo",
                "Connection: keep-alive, X-Hop",
                "X-Hop: secret",
                "Keep-Alive: timeout=5",
                "Set-Cookie: a=1",
                "X-Kept: yes",
                "Set-Cookie: b=2",
                "Proxy-Authenticate: Basic",
                "X-Drop: gone",
            ],
            head.as_bytes(),
        )
    })
}

fn config(origin: SocketAddr) -> String {
    format!(
        r#"[server]
workers = 1

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/"
proxy = "app"
response_headers = {{ set = {{ "x-via" = "squall" }}, remove = ["x-drop"] }}
"#
    )
}

/// What every client must get of the origin's response head, in this order, and what not.
fn check_response_fields(fields: &[(String, String)]) {
    let kept: Vec<(&str, &str)> = (fields.iter())
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .filter(|(n, _)| ["server", "set-cookie", "x-kept", "x-via"].contains(n))
        .collect();
    assert_eq!(
        kept,
        [
            ("server", "echo"),
            ("set-cookie", "a=1"),
            ("set-cookie", "b=2"),
            ("x-kept", "yes"),
            ("x-via", "squall"),
        ],
        "{fields:?}"
    );
    for gone in ["x-hop", "keep-alive", "proxy-authenticate", "x-drop"] {
        assert!(
            fields.iter().all(|(n, _)| n != gone),
            "{gone} must not reach the client: {fields:?}"
        );
    }
}

#[tokio::test]
async fn http2_request_fields_reach_the_origin_and_the_response_fields_come_back() {
    let squall = Squall::start(&config(echo_origin()));
    let mut client = h2_client::h2c(squall.addr).await.ready().await.unwrap();
    let request = http::Request::builder()
        .uri("http://example.test:8080/h2?x=1")
        .header("x-one", "1")
        .header("cookie", "session=0123456789abcdef")
        .header("user-agent", "h2-test/1")
        .header("cookie", "theme=dark")
        .header("x-one", "2")
        .header("te", "trailers")
        .header("accept", "*/*")
        .body(())
        .unwrap();
    let (response, _) = client.send_request(request, true).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    let fields: Vec<(String, String)> = (response.headers().iter())
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
        .collect();
    check_response_fields(&fields);
    let mut body = response.into_body();
    let mut seen = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk: Bytes = chunk.unwrap();
        body.flow_control().release_capacity(chunk.len()).unwrap();
        seen.extend_from_slice(&chunk);
    }
    let seen = String::from_utf8(seen).unwrap();
    let lines: Vec<&str> = seen.lines().collect();
    assert_eq!(lines[0], "GET /h2?x=1 HTTP/1.1", "{seen}");
    // The client's fields in order, `:authority` as Host, the crumbs joined (RFC 9113
    // §8.2.3), after the others.
    let fields: Vec<&str> = (lines[1..].iter().copied())
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            ["host:", "x-one:", "user-agent:", "accept:", "cookie:"]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .collect();
    assert_eq!(
        fields,
        [
            "Host: example.test:8080",
            "x-one: 1",
            "x-one: 2",
            "user-agent: h2-test/1",
            "accept: */*",
            "cookie: session=0123456789abcdef; theme=dark",
        ],
        "{seen}"
    );
    assert!(lines.contains(&"te: trailers"), "{seen}");
}

#[test]
fn http1_clients_get_the_origin_fields_without_its_hop_by_hop_ones() {
    let squall = Squall::start(&config(echo_origin()));
    let mut client = squall.connect();
    for _ in 0..3 {
        let response = roundtrip(
            &mut client,
            "GET /h1 HTTP/1.1\r\nHost: example.test\r\n\r\n",
        );
        assert_eq!(response.status, 200);
        let fields: Vec<(String, String)> = (response.headers.iter())
            .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
            .collect();
        check_response_fields(&fields);
        assert!(response.body_text().starts_with("GET /h1 HTTP/1.1\r\n"));
    }
}
