//! Request variables in header edits (`$remote_addr`, `$request_id`, `$host`, `$scheme`,
//! `$request_uri`) and `server.request_id_header`, over HTTP/1.1 and HTTP/2: what the origin
//! receives, what the client gets back, and the id the JSON access log writes for the request.

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use squall_e2e::{Squall, TempDir, roundtrip};

#[path = "support/origin.rs"]
mod origin;

/// The origin answers with the fields it received, one `name=value` per line.
fn echo_origin() -> std::net::SocketAddr {
    origin::raw_origin(|head| {
        let body: String = ["x-client", "x-request-id", "x-where"]
            .iter()
            .map(|name| format!("{name}={}\n", origin::field(head, name).unwrap_or("-")))
            .collect();
        origin::response("200 OK", &["content-type: text/plain"], body.as_bytes())
    })
}

fn config(log: &Path, origin: std::net::SocketAddr) -> String {
    format!(
        r#"[server]
workers = 1
request_id_header = "X-Request-Id"
real_ip = {{ header = "x-forwarded-for", from = ["127.0.0.1/32"] }}

[log]
access = "{}"
format = "json"

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[[upstream]]
name = "echo"
servers = [{{ address = "{origin}" }}]

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/"
proxy = "echo"
request_headers = {{ set = {{ "x-client" = "$remote_addr", "x-where" = "$scheme://$host$request_uri" }} }}
response_headers = {{ set = {{ "x-id" = "req-$request_id" }} }}
"#,
        log.display()
    )
}

/// The access log's lines once there are `n` (the logger writes them in batches).
fn wait_lines(path: &Path, n: usize) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().count() >= n || Instant::now() > deadline {
            return text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The origin's echo as (x-client, x-request-id, x-where), and the response's x-id.
fn parse(body: &str, x_id: Option<&str>) -> (String, String, String, String) {
    let value = |name: &str| {
        let line = body.lines().find(|l| l.starts_with(&format!("{name}=")));
        line.map_or("?", |l| &l[name.len() + 1..]).to_owned()
    };
    let x_id = x_id.unwrap_or("-").to_owned();
    (
        value("x-client"),
        value("x-request-id"),
        value("x-where"),
        x_id,
    )
}

async fn h2_get(addr: std::net::SocketAddr, path: &str) -> (String, String, String, String) {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, connection) = h2::client::handshake(stream).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut client = client.ready().await.unwrap();
    let request = http::Request::get(format!("http://v.test{path}"))
        .header("x-forwarded-for", "198.51.100.4")
        .header("x-request-id", "client-chosen")
        .body(())
        .unwrap();
    let (response, _) = client.send_request(request, true).unwrap();
    let response = response.await.unwrap();
    let x_id = (response.headers().get("x-id")).map(|v| v.to_str().unwrap().to_owned());
    let mut body = Vec::new();
    let mut stream = response.into_body();
    while let Some(chunk) = stream.data().await {
        let chunk: Bytes = chunk.unwrap();
        body.extend_from_slice(&chunk);
    }
    parse(&String::from_utf8(body).unwrap(), x_id.as_deref())
}

fn is_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[tokio::test]
async fn variables_reach_the_origin_and_the_client_and_the_id_is_the_logged_one() {
    let dir = TempDir::new();
    let log = dir.path().join("access.log");
    let squall = Squall::start(&config(&log, echo_origin()));

    let request = "GET /a/b?q=1 HTTP/1.1\r\nHost: V.Test\r\nX-Forwarded-For: 203.0.113.9\r\n\
                   X-Request-Id: client-chosen\r\n\r\n";
    let response = roundtrip(&mut squall.connect(), request);
    assert_eq!(response.status, 200);
    let (client, id, place, x_id) = parse(&response.body_text(), response.header("x-id"));
    // The client behind the trusted proxy, not the proxy's own address.
    assert_eq!(client, "203.0.113.9");
    assert_eq!(place, "http://v.test/a/b?q=1");
    // The client's own X-Request-Id is replaced by Squall's id, which the response names too.
    assert!(is_id(&id), "{id}");
    assert_eq!(x_id, format!("req-{id}"));

    let (client2, id2, place2, x_id2) = h2_get(squall.addr, "/c").await;
    assert_eq!(client2, "198.51.100.4");
    assert_eq!(place2, "http://v.test/c");
    assert!(is_id(&id2) && id2 != id, "{id2} after {id}");
    assert_eq!(x_id2, format!("req-{id2}"));

    let lines = wait_lines(&log, 2);
    let logged: Vec<_> = lines
        .iter()
        .map(|l| l["request_id"].as_str().unwrap())
        .collect();
    assert_eq!(logged, [id.as_str(), id2.as_str()], "{lines:?}");
    // Requests answered here get an id in the log as well.
    let response = roundtrip(&mut squall.connect(), "GET / HTTP/1.1\r\n\r\n");
    assert_eq!(response.status, 400);
    let lines = wait_lines(&log, 3);
    let third = lines[2]["request_id"].as_str().unwrap();
    assert!(is_id(third) && third != id && third != id2, "{third}");
}
