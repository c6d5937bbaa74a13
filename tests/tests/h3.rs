//! HTTP/3 against an independent client (hyperium's `h3` over `quinn`, QUIC and TLS of their
//! own): the same routes, cache, origins and limits as HTTP/1.1 and HTTP/2, over QUIC on the
//! listener's UDP port; `Alt-Svc` on the TCP side; bad datagrams; Retry; a graceful stop.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use squall_e2e::{PathCounts, Squall, admin_addr, admin_get, metric_sum, tool};

#[path = "support/h3_client.rs"]
mod h3_client;
#[path = "support/origin.rs"]
mod origin;

/// Two workers (so that packets must reach the worker owning their connection), the admin
/// port, an h3 listener beside h2 and HTTP/1.1, `quic` as the `[quic]` lines, and routes:
/// fixed answers, and when `origin` is given a proxied and a cached prefix to it.
fn config(quic: &str, origin: Option<SocketAddr>) -> String {
    let upstream = origin.map_or(String::new(), |origin| {
        format!(
            r#"
[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]
response_timeout = "10s"

[[vhost.route]]
prefix = "/proxy/"
proxy = "app"

[[vhost.route]]
prefix = "/cached/"
proxy = "app"
cache = true
"#
        )
    });
    format!(
        r#"[server]
workers = 2
drain_timeout = "5s"

[admin]
listen = "127.0.0.2:0"

[[certificate]]
hosts = ["localhost"]
self_signed = true

[[listen]]
address = "ADDR"
tls = true
protocols = ["h2", "http1", "h3"]

[limits]
body_bytes_max = "32MiB"

[quic]
{quic}

[[vhost]]
hosts = ["*"]

[[vhost.route]]
exact = "/"
respond = {{ status = 200, body = "Hello over QUIC\n", headers = {{ "content-type" = "text/plain", "x-route" = "root" }} }}

[[vhost.route]]
exact = "/upload"
methods = ["POST"]
respond = {{ status = 201, body = "stored" }}

[[vhost.route]]
prefix = "/old/"
redirect = {{ status = 301, location = "$scheme://$host/new$uri" }}
{upstream}"#
    )
}

/// A client connection to `squall`, or the failure with squall's log.
async fn connect(squall: &Squall) -> h3_client::H3 {
    match h3_client::try_connect(squall.addr).await {
        Ok(h3) => h3,
        Err(e) => panic!("{e}; squall's log:\n{}", squall.log()),
    }
}

fn base(squall: &Squall) -> String {
    format!("https://localhost:{}", squall.addr.port())
}

/// A body whose every byte depends on its offset, so that a reordered, lost or repeated
/// piece shows.
fn pattern(len: usize) -> Bytes {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i >> 12) as u8)
        .collect::<Vec<u8>>()
        .into()
}

/// An origin for the proxied routes: `/proxy/echo` sends the request body back, `/proxy/big`
/// answers 16 MiB, `/proxy/slow` answers after 600 ms, `/cached/*` a cacheable body; each
/// request is counted by path.
fn origin(counts: Arc<PathCounts>) -> SocketAddr {
    origin::hyper_origin(move |request: http::Request<hyper::body::Incoming>| {
        let counts = counts.clone();
        async move {
            let path = request.uri().path().to_owned();
            counts.hit(&path);
            let body = request.into_body().collect().await.map(|b| b.to_bytes());
            let body = body.unwrap_or_default();
            let (status, cache, reply) = match path.as_str() {
                "/proxy/echo" => (200, "no-store", body),
                "/proxy/big" => (200, "no-store", pattern(16 << 20)),
                "/proxy/slow" => {
                    tokio::time::sleep(Duration::from_millis(600)).await;
                    (200, "no-store", Bytes::from_static(b"slow but whole"))
                }
                p if p.starts_with("/cached/") => (200, "max-age=60", Bytes::from(p.to_owned())),
                _ => (404, "no-store", Bytes::from_static(b"none")),
            };
            let response = http::Response::builder()
                .status(status)
                .header("cache-control", cache)
                .body(Full::new(reply))
                .unwrap();
            Ok(response)
        }
    })
}

#[tokio::test]
async fn routes_answer_over_http3() {
    let squall = Squall::start(&config("", None));
    let mut h3 = connect(&squall).await;
    let base = base(&squall);
    let reply = h3_client::fetch(&mut h3, "GET", &format!("{base}/"), None).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, b"Hello over QUIC\n");
    assert_eq!(reply.headers["x-route"], "root");
    assert_eq!(reply.headers["content-length"], "16");
    assert_eq!(reply.headers["server"], "squall");
    assert!(reply.headers.contains_key("date"));
    assert!(
        !reply.headers.contains_key("alt-svc"),
        "HTTP/3 answers need no advertisement of HTTP/3"
    );
    let head = h3_client::fetch(&mut h3, "HEAD", &format!("{base}/"), None).await;
    assert_eq!((head.status, head.body.len()), (200, 0));
    assert_eq!(head.headers["content-length"], "16");
    let missing = h3_client::fetch(&mut h3, "GET", &format!("{base}/nothing"), None).await;
    assert_eq!(missing.status, 404);
    // `$scheme` is https: QUIC is always encrypted.
    let moved = h3_client::fetch(&mut h3, "GET", &format!("{base}/old/a?b"), None).await;
    assert_eq!(moved.status, 301);
    let location = moved.headers["location"].to_str().unwrap();
    assert!(location.starts_with("https://localhost"), "{location}");
    assert!(location.ends_with("/new/old/a"), "{location}");
    let body = pattern(1 << 20);
    let stored = h3_client::fetch(&mut h3, "POST", &format!("{base}/upload"), Some(body)).await;
    assert_eq!((stored.status, &stored.body[..]), (201, &b"stored"[..]));
    let (_, metrics) = admin_get(admin_addr(&squall), "/metrics");
    assert!(metric_sum(&metrics, "squall_quic_handshakes_total") >= 1.0);
    assert!(metric_sum(&metrics, "squall_h3_streams_total") >= 5.0);
    let h3_requests = (metrics.lines())
        .filter(|l| l.starts_with("squall_requests_total") && l.contains("protocol=\"h3\""))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
        .sum::<f64>();
    assert_eq!(h3_requests, 5.0, "{metrics}");
}

/// HTTP/1.1 and HTTP/2 answers on a listener that also serves HTTP/3 say so (RFC 7838), with
/// the port and `alt_svc_max_age`; `"0s"` turns it off.
#[test]
fn tcp_answers_advertise_http3() {
    for (quic, expected) in [
        ("", Some("86400")),
        ("alt_svc_max_age = \"10m\"", Some("600")),
        ("alt_svc_max_age = \"0s\"", None),
    ] {
        let squall = Squall::start(&config(quic, None));
        let port = squall.addr.port();
        for version in ["--http1.1", "--http2"] {
            let out = tool("curl")
                .args(["-sk", "-o", "/dev/null", "-D", "-", version])
                .arg(format!("https://127.0.0.1:{port}/"))
                .output()
                .unwrap();
            let head = String::from_utf8_lossy(&out.stdout).to_lowercase();
            assert!(head.contains(" 200"), "{version}: {head}");
            match expected {
                Some(age) => {
                    let line = format!("alt-svc: h3=\":{port}\"; ma={age}");
                    assert!(head.contains(&line), "{version}: {head}");
                }
                None => assert!(!head.contains("alt-svc"), "{version}: {head}"),
            }
        }
    }
}

/// Proxied requests both ways with checksums (a 4 MiB upload echoed, a 16 MiB download), and a
/// cached route: a miss fetched once, then hits, over HTTP/3.
#[tokio::test]
async fn proxied_and_cached_over_http3() {
    let counts = Arc::new(PathCounts::default());
    let origin = origin(counts.clone());
    let squall = Squall::start(&config("", Some(origin)));
    let mut h3 = connect(&squall).await;
    let base = base(&squall);
    let upload = pattern(4 << 20);
    let echo = h3_client::fetch(
        &mut h3,
        "POST",
        &format!("{base}/proxy/echo"),
        Some(upload.clone()),
    )
    .await;
    assert_eq!(echo.status, 200);
    assert!(echo.body == upload[..], "the echoed body is the one sent");
    let big = h3_client::fetch(&mut h3, "GET", &format!("{base}/proxy/big"), None).await;
    assert_eq!(big.status, 200);
    assert_eq!(big.body.len(), 16 << 20);
    assert!(
        big.body == pattern(16 << 20)[..],
        "the download arrives whole, in order"
    );
    let first = h3_client::fetch(&mut h3, "GET", &format!("{base}/cached/a"), None).await;
    assert_eq!((first.status, &first.body[..]), (200, &b"/cached/a"[..]));
    assert_eq!(first.headers["x-cache"], "MISS");
    for _ in 0..3 {
        let hit = h3_client::fetch(&mut h3, "GET", &format!("{base}/cached/a"), None).await;
        assert_eq!((hit.status, &hit.body[..]), (200, &b"/cached/a"[..]));
        assert_eq!(hit.headers["x-cache"], "HIT");
    }
    assert_eq!(counts.count("/cached/a"), 1, "hits do not reach the origin");
    // A GET whose end (FIN) comes a while after its HEADERS is still a request without a
    // body, which the cache answers.
    let request = http::Request::get(format!("{base}/cached/a"))
        .body(())
        .unwrap();
    let mut stream = h3.send.send_request(request).await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    stream.finish().await.unwrap();
    let response = stream.recv_response().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-cache"], "HIT");
    assert_eq!(counts.count("/cached/a"), 1);
}

/// A hundred requests at once on one connection, each answered on its own stream.
#[tokio::test]
async fn a_hundred_concurrent_streams() {
    let squall = Squall::start(&config("", None));
    let h3 = connect(&squall).await;
    let base = base(&squall);
    let mut tasks = Vec::new();
    for i in 0..100 {
        let mut send = h3.send.clone();
        let uri = if i % 2 == 0 {
            format!("{base}/")
        } else {
            format!("{base}/missing/{i}")
        };
        tasks.push(tokio::spawn(async move {
            let request = http::Request::get(uri).body(()).unwrap();
            let mut stream = send.send_request(request).await.unwrap();
            stream.finish().await.unwrap();
            let response = stream.recv_response().await.unwrap();
            let mut len = 0;
            while let Some(chunk) = stream.recv_data().await.unwrap() {
                len += bytes::Buf::remaining(&chunk);
            }
            (response.status().as_u16(), len)
        }));
    }
    for (i, task) in tasks.into_iter().enumerate() {
        let (status, len) = tokio::time::timeout(Duration::from_secs(20), task)
            .await
            .expect("every stream answered in time")
            .unwrap();
        match i % 2 {
            0 => assert_eq!((status, len), (200, 16)),
            _ => assert_eq!(status, 404),
        }
    }
}

/// Datagrams that are not QUIC (random bytes, empty, oversized, an Initial's first byte
/// followed by junk) are dropped: Squall stays up and serves a real client afterwards.
#[tokio::test]
async fn junk_datagrams_are_dropped() {
    let squall = Squall::start(&config("", None));
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for i in 0..2000usize {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let len = [0, 1, 5, 20, 1200, 1500, 9000][i % 7];
        let mut datagram: Vec<u8> = (0..len).map(|j| (seed >> (j % 56)) as u8).collect();
        if i % 3 == 0 && !datagram.is_empty() {
            // A long header with QUIC v1, the rest junk.
            datagram[0] = 0xc0;
            if datagram.len() > 5 {
                datagram[1..5].copy_from_slice(&1u32.to_be_bytes());
            }
        }
        let _ = socket.send_to(&datagram, squall.addr);
    }
    let mut h3 = connect(&squall).await;
    let reply = h3_client::fetch(&mut h3, "GET", &format!("{}/", base(&squall)), None).await;
    assert_eq!(reply.status, 200);
}

/// `retry = "always"`: every new client proves its address first; the client library
/// follows the Retry and is served, and the metric counts it.
#[tokio::test]
async fn retry_validates_addresses() {
    let squall = Squall::start(&config("retry = \"always\"", None));
    let mut h3 = connect(&squall).await;
    let reply = h3_client::fetch(&mut h3, "GET", &format!("{}/", base(&squall)), None).await;
    assert_eq!(reply.status, 200);
    let (_, metrics) = admin_get(admin_addr(&squall), "/metrics");
    assert!(metric_sum(&metrics, "squall_quic_retries_total") >= 1.0);
}

/// A client that goes away in the middle of a 16 MiB response (its endpoint dropped, no
/// close) costs nothing lasting: other clients are served, and its connection ends by
/// itself.
#[tokio::test]
async fn a_client_that_vanishes_mid_response() {
    let counts = Arc::new(PathCounts::default());
    let origin = origin(counts.clone());
    let squall = Squall::start(&config("", Some(origin)));
    let base = base(&squall);
    {
        let h3 = connect(&squall).await;
        let mut send = h3.send.clone();
        let request = http::Request::get(format!("{base}/proxy/big"))
            .body(())
            .unwrap();
        let mut stream = send.send_request(request).await.unwrap();
        stream.finish().await.unwrap();
        let response = stream.recv_response().await.unwrap();
        assert_eq!(response.status(), 200);
        let _ = stream.recv_data().await.unwrap();
        h3.endpoint.set_server_config(None);
        drop(stream);
        drop(send);
        drop(h3);
    }
    let mut h3 = connect(&squall).await;
    let reply = h3_client::fetch(&mut h3, "GET", &format!("{base}/"), None).await;
    assert_eq!(reply.status, 200);
}

/// A graceful stop: a request in flight on HTTP/3 is answered whole, and the process exits.
#[tokio::test]
async fn a_graceful_stop_finishes_what_is_in_flight() {
    let counts = Arc::new(PathCounts::default());
    let origin = origin(counts.clone());
    let mut squall = Squall::start(&config("", Some(origin)));
    let mut h3 = connect(&squall).await;
    let uri = format!("{}/proxy/slow", base(&squall));
    let request = tokio::spawn(async move {
        let reply = h3_client::fetch(&mut h3, "GET", &uri, None).await;
        (reply.status, reply.body)
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    squall.signal(libc::SIGTERM);
    let (status, body) = request.await.unwrap();
    assert_eq!((status, &body[..]), (200, &b"slow but whole"[..]));
    assert!(
        squall.wait_exit(Duration::from_secs(10)).is_some(),
        "squall exits once its connections are done"
    );
}

/// A 16 MiB upload to an origin that does not read: QUIC's flow control holds the client
/// back (Squall reads a request stream only as far as its origin has taken, plus the stream
/// window), so the client cannot push the whole body into Squall's memory; once the origin
/// reads, the body arrives whole.
#[tokio::test]
async fn an_upload_to_a_stalled_origin_is_held_back_by_flow_control() {
    let (origin, go) = squall_e2e::stalled_origin();
    let squall = Squall::start(&config("", Some(origin)));
    let h3 = connect(&squall).await;
    let body = pattern(16 << 20);
    let expected = squall_e2e::digest(&body);
    let uri = format!("{}/proxy/upload", base(&squall));
    let mut send = h3.send.clone();
    let upload = tokio::spawn(async move {
        let request = http::Request::post(uri)
            .header("content-length", body.len())
            .body(())
            .unwrap();
        let mut stream = send.send_request(request).await.unwrap();
        stream.send_data(body).await.unwrap();
        stream.finish().await.unwrap();
        let response = stream.recv_response().await.unwrap();
        let mut text = Vec::new();
        while let Some(chunk) = stream.recv_data().await.unwrap() {
            text.extend_from_slice(bytes::Buf::chunk(&chunk));
        }
        (response.status().as_u16(), String::from_utf8(text).unwrap())
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    let sent = h3.conn.stats().udp_tx.bytes;
    assert!(
        sent < 8 << 20,
        "{sent} bytes left the client while its origin read nothing"
    );
    go.send(()).unwrap();
    let (status, text) = tokio::time::timeout(Duration::from_secs(30), upload)
        .await
        .expect("the upload ends in time")
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(text, expected);
}

/// 0-RTT with `early_data = true`: a resumed client's request with a method that is not safe, sent in early data (a
/// POST: an attacker could replay it) gets `425 Too Early`, counted; with the default (off),
/// a resumed client is offered no 0-RTT at all. The early request is written on a raw QUIC
/// stream the moment the connection is made, so that it cannot wait for the handshake: a
/// control stream with empty SETTINGS, and a HEADERS frame of QPACK static references and
/// literals (RFC 9204 Appendix A indexes 20 `:method POST`, 23 `:scheme https`, 0
/// `:authority`, 1 `:path`) followed by one byte of DATA.
#[tokio::test]
async fn early_data_refuses_requests_that_are_not_safe() {
    for early in [true, false] {
        let quic = format!("early_data = {early}");
        let squall = Squall::start(&config(&quic, None));
        let base = base(&squall);
        let endpoint = h3_client::endpoint(squall.addr);
        // A first connection, for the session ticket.
        let conn = endpoint
            .connect(squall.addr, "localhost")
            .unwrap()
            .await
            .unwrap();
        let mut first = h3_client::setup(endpoint.clone(), conn).await.unwrap();
        let reply = h3_client::fetch(&mut first, "GET", &format!("{base}/"), None).await;
        assert_eq!(reply.status, 200);
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(first);
        let connecting = endpoint.connect(squall.addr, "localhost").unwrap();
        let conn = match connecting.into_0rtt() {
            Ok((conn, _)) => {
                assert!(early, "0-RTT offered although early_data is off");
                conn
            }
            Err(_) => {
                assert!(!early, "no 0-RTT although early_data is on");
                continue;
            }
        };
        let mut control = conn.open_uni().await.unwrap();
        control.write_all(&[0x00, 0x04, 0x00]).await.unwrap();
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        let mut section = vec![0x00, 0x00, 0xd4, 0xd7, 0x50, 9];
        section.extend_from_slice(b"localhost");
        section.extend_from_slice(&[0x51, 7]);
        section.extend_from_slice(b"/upload");
        let mut request = vec![0x01, section.len() as u8];
        request.extend_from_slice(&section);
        request.extend_from_slice(&[0x00, 0x01, b'x']);
        send.write_all(&request).await.unwrap();
        send.finish().unwrap();
        let response = tokio::time::timeout(Duration::from_secs(10), recv.read_to_end(1 << 20))
            .await
            .expect("an answer in time")
            .expect("an answer");
        // HEADERS, then a field section whose first line is static entry 70, `:status 425`
        // (0xff 0x07: indexed, static, 63 + 7).
        assert_eq!(response[0], 0x01, "{response:02x?}");
        // The frame's length: a one- or two-byte QUIC varint (RFC 9000 §16).
        let section = match response[1] >> 6 {
            0 => 2,
            1 => 3,
            _ => panic!("a response head of over 16 KiB: {response:02x?}"),
        };
        let status = &response[section..section + 4];
        assert_eq!(status, [0x00, 0x00, 0xff, 0x07], "{response:02x?}");
        let (_, metrics) = admin_get(admin_addr(&squall), "/metrics");
        let refused = metric_sum(&metrics, "squall_quic_early_refused_total");
        assert_eq!(refused, 1.0, "the POST in 0-RTT was refused");
        // Counted when the handshake ends, which the early answer need not wait for.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let (_, metrics) = admin_get(admin_addr(&squall), "/metrics");
            if metric_sum(&metrics, "squall_quic_early_accepted_total") == 1.0 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "0-RTT not counted:\n{metrics}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // After a handshake the same request is served.
        drop(conn);
        let conn = endpoint
            .connect(squall.addr, "localhost")
            .unwrap()
            .await
            .unwrap();
        let mut after = h3_client::setup(endpoint.clone(), conn).await.unwrap();
        let body = Some(Bytes::from_static(b"x"));
        let reply = h3_client::fetch(&mut after, "POST", &format!("{base}/upload"), body).await;
        assert_eq!(reply.status, 201);
    }
}

/// A reload while HTTP/3 requests run, on a connection and on new ones: none fails, and the
/// requests after it see the new routes.
#[tokio::test]
async fn a_reload_under_http3_load_fails_nothing() {
    let squall = Squall::start(&config("", None));
    let base = base(&squall);
    let mut h3 = connect(&squall).await;
    // The TOML text has the escape `\n`, which the replace keeps.
    let next = config("", None).replace("Hello over QUIC", "Reloaded QUIC!!");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let (mut before, mut after) = (0, 0);
    let mut i = 0;
    // Requests before the reload, through it (until its routes answer) and 100 after.
    while after < 100 {
        if i == 50 {
            squall.rewrite_config(&next);
            squall.signal(libc::SIGHUP);
        }
        if i % 40 == 39 {
            h3 = connect(&squall).await;
        }
        let reply = h3_client::fetch(&mut h3, "GET", &format!("{base}/"), None).await;
        assert_eq!(reply.status, 200, "request {i}");
        match &reply.body[..] {
            b"Reloaded QUIC!!\n" => after += 1,
            b"Hello over QUIC\n" => {
                assert_eq!(after, 0, "request {i}: the old routes again");
                before += 1;
            }
            other => panic!("request {i}: {other:?}"),
        }
        assert!(std::time::Instant::now() < deadline, "{}", squall.log());
        i += 1;
    }
    assert!(before >= 50, "{before}");
}

/// The access log names HTTP/3 requests' protocol.
#[tokio::test]
async fn the_access_log_says_http3() {
    let dir = squall_e2e::TempDir::new();
    let log = dir.path().join("access.log");
    let text = config("", None).replace("[admin]", &format!("[log]\naccess = {log:?}\n\n[admin]"));
    let squall = Squall::start(&text);
    let mut h3 = connect(&squall).await;
    let reply = h3_client::fetch(&mut h3, "GET", &format!("{}/", base(&squall)), None).await;
    assert_eq!(reply.status, 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.contains("\"GET / HTTP/3.0\" 200 ")) {
            assert!(line.starts_with("127.0.0.1 "), "{line}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no HTTP/3 line in:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An HTTP/3 connection idle for `limits.idle_timeout` ends (QUIC's idle timeout), and its
/// slot is given back: the connection gauge returns to zero.
#[tokio::test]
async fn an_idle_connection_ends() {
    let text = config("", None).replace("[limits]", "[limits]\nidle_timeout = \"1s\"");
    let squall = Squall::start(&text);
    let mut h3 = connect(&squall).await;
    let reply = h3_client::fetch(&mut h3, "GET", &format!("{}/", base(&squall)), None).await;
    assert_eq!(reply.status, 200);
    let admin = admin_addr(&squall);
    let open = |metrics: &str| metric_sum(metrics, "squall_connections_active");
    let (_, metrics) = admin_get(admin, "/metrics");
    assert_eq!(open(&metrics), 1.0);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let (_, metrics) = admin_get(admin, "/metrics");
        if open(&metrics) == 0.0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still open:\n{metrics}"
        );
    }
}

/// What an idle HTTP/3 connection costs: 400 connections opened (each with one request
/// answered, then left idle) grow Squall's resident memory by under 64 KiB each. The
/// measured figure is printed (`--nocapture`) for docs/PERFORMANCE.md.
#[tokio::test]
async fn idle_connections_cost_little_memory() {
    const CONNECTIONS: usize = 400;
    let squall = Squall::start(&config("", None));
    let base = base(&squall);
    // One connection first, so that what every connection shares is counted before.
    let mut first = connect(&squall).await;
    let _ = h3_client::fetch(&mut first, "GET", &format!("{base}/"), None).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = squall.rss();
    let endpoint = h3_client::endpoint(squall.addr);
    let mut open = Vec::with_capacity(CONNECTIONS);
    for _ in 0..CONNECTIONS {
        let conn = endpoint
            .connect(squall.addr, "localhost")
            .unwrap()
            .await
            .unwrap();
        let mut h3 = h3_client::setup(endpoint.clone(), conn).await.unwrap();
        let reply = h3_client::fetch(&mut h3, "GET", &format!("{base}/"), None).await;
        assert_eq!(reply.status, 200);
        open.push(h3);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = squall.rss();
    let each = after.saturating_sub(before) / CONNECTIONS as u64;
    println!(
        "idle HTTP/3 connection: {each} bytes of resident memory each ({CONNECTIONS} connections, {before} -> {after})"
    );
    assert!(each < 64 * 1024, "{each} bytes per idle connection");
    drop(open);
}

/// Rapid reset (CVE-2023-44487) over HTTP/3: a client that opens request streams and resets
/// them at once is closed with H3_EXCESSIVE_LOAD after `h2_resets_max` of them, counted; a
/// well-behaved connection beside it is served.
#[tokio::test]
async fn rapid_reset_closes_the_connection() {
    let text = config("", None).replace("[limits]", "[limits]\nh2_resets_max = 50");
    let squall = Squall::start(&text);
    let endpoint = h3_client::endpoint(squall.addr);
    let conn = endpoint
        .connect(squall.addr, "localhost")
        .unwrap()
        .await
        .unwrap();
    let mut control = conn.open_uni().await.unwrap();
    control.write_all(&[0x00, 0x04, 0x00]).await.unwrap();
    // A GET of `/` in QPACK static references and a literal authority (see
    // early_data_refuses_requests_that_are_not_safe): `:method GET` is static entry 17.
    let mut section = vec![0x00, 0x00, 0xd1, 0xd7, 0xc1, 0x50, 9];
    section.extend_from_slice(b"localhost");
    let mut request = vec![0x01, section.len() as u8];
    request.extend_from_slice(&section);
    let attack = async {
        for _ in 0..2000 {
            let Ok((mut send, _recv)) = conn.open_bi().await else {
                return;
            };
            if send.write_all(&request).await.is_err() {
                return;
            }
            let _ = send.reset(quinn::VarInt::from_u32(0x10c));
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(20), attack).await;
    let reason = tokio::time::timeout(Duration::from_secs(10), conn.closed())
        .await
        .expect("the attacker's connection is closed");
    match reason {
        quinn::ConnectionError::ApplicationClosed(close) => {
            assert_eq!(
                close.error_code,
                quinn::VarInt::from_u32(0x107),
                "{close:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    let (_, metrics) = admin_get(admin_addr(&squall), "/metrics");
    assert_eq!(metric_sum(&metrics, "squall_h3_floods_total"), 1.0);
    let mut h3 = connect(&squall).await;
    let reply = h3_client::fetch(&mut h3, "GET", &format!("{}/", base(&squall)), None).await;
    assert_eq!(reply.status, 200);
}

/// A reload's certificates serve new QUIC handshakes at once; connections keep theirs.
#[tokio::test]
async fn a_reload_swaps_the_certificate_of_new_handshakes() {
    use base64::Engine;
    let dirs = [squall_e2e::TempDir::new(), squall_e2e::TempDir::new()];
    let certs: Vec<_> = dirs
        .iter()
        .map(|d| squall_e2e::openssl_cert(d.path(), "localhost"))
        .collect();
    let with = |(cert, key): &(std::path::PathBuf, std::path::PathBuf)| {
        config("", None).replace(
            "self_signed = true",
            &format!("cert = {cert:?}\nkey = {key:?}"),
        )
    };
    // The DER of a PEM file's first certificate.
    let der = |path: &std::path::Path| {
        let pem = std::fs::read_to_string(path).unwrap();
        let body: String = (pem.lines())
            .skip_while(|l| !l.starts_with("-----BEGIN CERTIFICATE"))
            .skip(1)
            .take_while(|l| !l.starts_with("-----END"))
            .collect();
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap()
    };
    let served = |h3: &h3_client::H3| {
        let identity = h3.conn.peer_identity().expect("a certificate");
        let chain = identity
            .downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>()
            .expect("rustls certificates");
        chain[0].to_vec()
    };
    let squall = Squall::start(&with(&certs[0]));
    let mut before = connect(&squall).await;
    assert_eq!(served(&before), der(&certs[0].0));
    squall.rewrite_config(&with(&certs[1]));
    squall.signal(libc::SIGHUP);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let after = connect(&squall).await;
        if served(&after) == der(&certs[1].0) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", squall.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The connection made before the reload goes on.
    let reply = h3_client::fetch(&mut before, "GET", &format!("{}/", base(&squall)), None).await;
    assert_eq!(reply.status, 200);
}
