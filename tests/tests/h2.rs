//! HTTP/2 against independent peers: the `h2` crate (h2c with prior knowledge, and over TLS with
//! ALPN), curl, nghttp and h2load; and floods scripted as raw frames, each of which must end in
//! GOAWAY while a well-behaved connection alongside keeps its streams.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use squall_e2e::{Squall, TempDir, openssl_cert};

#[path = "support/h2_client.rs"]
mod h2_client;
#[path = "support/origin.rs"]
mod origin;
#[path = "support/raw_h2.rs"]
mod raw_h2;
use h2_client::{fetch, h2c};
use raw_h2::*;

/// A 256 KiB body: four times the default stream window, so flow control must work to send it.
const BIG_BYTES: usize = 256 * 1024;

fn config(extra_listen: &str) -> String {
    format!(
        r#"[server]
workers = 1
drain_timeout = "5s"

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]
{extra_listen}
[limits]
body_bytes_max = "4MiB"

[[vhost]]
hosts = ["*"]

[[vhost.route]]
exact = "/"
respond = {{ status = 200, body = "Hello, world!", headers = {{ "x-route" = "root" }} }}

[[vhost.route]]
exact = "/big"
respond = {{ status = 200, body = "{big}" }}

[[vhost.route]]
exact = "/upload"
methods = ["POST", "PUT"]
respond = {{ status = 201, body = "stored" }}

[[vhost.route]]
prefix = "/old/"
redirect = {{ status = 301, location = "$scheme://$host/new$uri" }}
"#,
        big = "x".repeat(BIG_BYTES)
    )
}

#[tokio::test]
async fn h2c_prior_knowledge_answers_like_http1() {
    let squall = Squall::start(&config(""));
    let client = h2c(squall.addr).await;
    let base = format!("http://{}", squall.addr);

    let reply = fetch(&client, "GET", &format!("{base}/"), None).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, b"Hello, world!");
    assert_eq!(reply.headers["x-route"], "root");
    assert_eq!(reply.headers["content-length"], "13");
    assert_eq!(reply.headers["server"], "squall");
    assert!(reply.headers.contains_key("date"));

    let reply = fetch(&client, "GET", &format!("{base}/missing"), None).await;
    assert_eq!(reply.status, 404);

    let reply = fetch(&client, "GET", &format!("{base}/old/page"), None).await;
    assert_eq!(reply.status, 301);
    let location = reply.headers["location"].to_str().unwrap().to_owned();
    assert_eq!(location, format!("http://127.0.0.1/new/old/page"));

    let reply = fetch(&client, "HEAD", &format!("{base}/"), None).await;
    assert_eq!(reply.status, 200);
    assert!(reply.body.is_empty());
    assert_eq!(reply.headers["content-length"], "13");

    // The same listener still speaks HTTP/1.1.
    let mut stream = squall.connect();
    let response = squall_e2e::roundtrip(&mut stream, "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(response.status, 200);
    assert_eq!(response.body, b"Hello, world!");
}

#[tokio::test]
async fn many_concurrent_streams_and_large_bodies_with_flow_control() {
    let squall = Squall::start(&config(""));
    let client = h2c(squall.addr).await;
    let base = format!("http://{}", squall.addr);
    // One exchange first, so the client has our SETTINGS (128 concurrent streams) before it
    // opens 300: until then it may open any number, and those beyond 128 are refused
    // (REFUSED_STREAM, which a browser retries and this test would not).
    assert_eq!(
        fetch(&client, "GET", &format!("{base}/"), None)
            .await
            .status,
        200
    );
    let mut tasks = Vec::new();
    for i in 0..300 {
        let client = client.clone();
        let uri = if i % 10 == 0 {
            format!("{base}/big")
        } else {
            format!("{base}/")
        };
        tasks.push(tokio::spawn(async move {
            let reply = fetch(&client, "GET", &uri, None).await;
            (uri, reply.status, reply.body.len())
        }));
    }
    for task in tasks {
        let (uri, status, len) = task.await.unwrap();
        assert_eq!(status, 200, "{uri}");
        let expected = if uri.ends_with("/big") { BIG_BYTES } else { 13 };
        assert_eq!(len, expected, "{uri}");
    }
}

#[tokio::test]
async fn request_bodies_and_trailers_are_received_under_flow_control() {
    let origin = echo_origin();
    let mut config = config(&format!(
        "\n[[upstream]]\nname = \"echo\"\nservers = [{{ address = \"{origin}\" }}]\n"
    ));
    config.push_str("\n[[vhost.route]]\nprefix = \"/echo/\"\nproxy = \"echo\"\n");
    let squall = Squall::start(&config);
    let client = h2c(squall.addr).await;
    let base = format!("http://{}", squall.addr);
    // 1 MiB: beyond the connection's initial window, so Squall must send WINDOW_UPDATEs.
    let body = Bytes::from(vec![b'u'; 1024 * 1024]);
    let reply = fetch(&client, "POST", &format!("{base}/upload"), Some(body)).await;
    assert_eq!(reply.status, 201);
    assert_eq!(reply.body, b"stored");

    // A body that ends with trailers, proxied to an origin that echoes what it received: the
    // trailers arrive, after the body.
    let mut ready = client.clone().ready().await.unwrap();
    let request = http::Request::post(format!("{base}/echo/trailers"))
        .body(())
        .unwrap();
    let (response, mut send) = ready.send_request(request, false).unwrap();
    send.send_data(Bytes::from_static(b"part"), false).unwrap();
    let mut trailers = http::HeaderMap::new();
    trailers.insert("x-checksum", "abc".parse().unwrap());
    send.send_trailers(trailers).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut echoed = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        echoed.extend_from_slice(&chunk);
    }
    assert_eq!(
        String::from_utf8_lossy(&echoed),
        "body=part trailers=x-checksum:abc"
    );

    // A declared body larger than body_bytes_max is refused with 413.
    let mut ready = client.clone().ready().await.unwrap();
    let request = http::Request::post(format!("{base}/upload"))
        .header("content-length", (8u64 << 20).to_string())
        .body(())
        .unwrap();
    let (response, _send) = ready.send_request(request, false).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 413);
}

/// An HTTP/1.1 origin (hyper) that answers each request with the body and trailers it
/// received, as `body=... trailers=name:value,...`.
fn echo_origin() -> SocketAddr {
    use http_body_util::{BodyExt, Full};

    origin::tokio_origin(|stream| async move {
        let service = hyper::service::service_fn(
            |request: http::Request<hyper::body::Incoming>| async move {
                let collected = request.into_body().collect().await?;
                let trailers: Vec<String> = collected
                    .trailers()
                    .into_iter()
                    .flatten()
                    .map(|(n, v)| format!("{n}:{}", v.to_str().unwrap_or("?")))
                    .collect();
                let text = format!(
                    "body={} trailers={}",
                    String::from_utf8_lossy(&collected.to_bytes()),
                    trailers.join(",")
                );
                Ok::<_, hyper::Error>(http::Response::new(Full::new(Bytes::from(text))))
            },
        );
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
            .await;
    })
}

#[tokio::test]
async fn tls_alpn_h2_and_http1_share_a_listener() {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, ServerName};

    let dir = TempDir::new();
    let (cert, key) = openssl_cert(dir.path(), "h2.test");
    let tls_listen = format!(
        "\n[[listen]]\naddress = \"127.0.0.2:0\"\ntls = true\nprotocols = [\"h2\", \"http1\"]\n\n\
         [[certificate]]\nhosts = [\"h2.test\"]\ncert = {cert:?}\nkey = {key:?}\n"
    );
    let squall = Squall::start(&config(&tls_listen));
    let tls_addr = squall.tls_addr.expect("a TLS listener");

    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(&cert).unwrap())
        .unwrap();
    for (alpn, expect_h2) in [(vec![b"h2".to_vec()], true), (vec![], false)] {
        let mut client = rustls::ClientConfig::builder()
            .with_root_certificates(roots.clone())
            .with_no_client_auth();
        client.alpn_protocols = alpn;
        let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(client));
        let tcp = tokio::net::TcpStream::connect(tls_addr).await.unwrap();
        let name = ServerName::try_from("h2.test").unwrap();
        let tls = connector.connect(name, tcp).await.expect("handshake");
        let negotiated = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        if expect_h2 {
            assert_eq!(negotiated.as_deref(), Some(&b"h2"[..]));
            let (client, connection) = h2::client::handshake(tls).await.unwrap();
            tokio::spawn(async move {
                let _ = connection.await;
            });
            let reply = fetch(&client, "GET", "https://h2.test/old/x", None).await;
            assert_eq!(reply.status, 301);
            assert_eq!(reply.headers["location"], "https://h2.test/new/old/x");
            let reply = fetch(&client, "GET", "https://h2.test/big", None).await;
            assert_eq!(reply.body.len(), BIG_BYTES);
        } else {
            // No ALPN: HTTP/1.1, as before HTTP/2 existed.
            assert_eq!(negotiated, None);
            let io = hyper_util::rt::TokioIo::new(tls);
            let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await.unwrap();
            tokio::spawn(connection);
            let request = http::Request::get("/")
                .header("host", "h2.test")
                .body(http_body_util::Empty::<Bytes>::new())
                .unwrap();
            let response = sender.send_request(request).await.unwrap();
            assert_eq!(response.status(), 200);
        }
    }
}

#[test]
fn sigterm_sends_goaway_and_the_connection_ends_cleanly() {
    let mut squall = Squall::start(&config(""));
    // A raw connection: the h2 client would send a GOAWAY of its own when dropped and end `Ok`
    // whether or not Squall sent one.
    let mut stream = raw_h2(squall.addr);
    stream
        .write_all(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &get_block()))
        .unwrap();
    let answered = read_frames_until(&mut stream, |f| f.kind == DATA && f.flags & END_STREAM != 0);
    assert!(
        answered.iter().any(|f| f.kind == HEADERS && f.stream == 1),
        "stream 1 is answered before the stop: {answered:?}"
    );
    squall.signal(libc::SIGTERM);
    let (frames, closed) = frames_until_close(&mut stream);
    assert!(closed, "Squall closes the connection after its GOAWAY");
    let goaway = frames
        .iter()
        .find(|f| f.kind == GOAWAY)
        .unwrap_or_else(|| panic!("a GOAWAY before the close: {frames:?}"));
    assert_eq!(goaway_error(goaway), 0, "GOAWAY(NO_ERROR)");
    assert_eq!(
        goaway_last_stream(goaway),
        1,
        "the last stream Squall processed"
    );
    let status = squall
        .wait_exit(Duration::from_secs(10))
        .expect("squall exits");
    assert!(status.success());
}

/// Runs a command; returns (success, stdout + stderr).
fn run(command: &mut Command) -> (bool, String) {
    let output = command
        .output()
        .expect("the tool is installed (see .ci/run)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[test]
fn curl_nghttp_and_h2load_speak_http2() {
    let squall = Squall::start(&config(
        "\n[[listen]]\naddress = \"127.0.0.2:0\"\ntls = true\nprotocols = [\"h2\", \"http1\"]\n\n\
         [[certificate]]\nhosts = [\"localhost\"]\nself_signed = true\n",
    ));
    let url = format!("http://{}/", squall.addr);
    let (ok, text) = run(squall_e2e::tool("curl")
        .args(["-sS", "--max-time", "10", "--http2-prior-knowledge"])
        .args(["-w", "\n%{http_version} %{http_code}"])
        .arg(&url));
    assert!(ok, "{text}");
    assert!(text.ends_with("Hello, world!\n2 200"), "{text}");

    let tls_url = format!("https://{}/big", squall.tls_addr.unwrap());
    let (ok, text) = run(squall_e2e::tool("curl")
        .args([
            "-sS",
            "-k",
            "--max-time",
            "10",
            "--http2",
            "-o",
            "/dev/null",
        ])
        .args(["-w", "%{http_version} %{http_code} %{size_download}"])
        .arg(&tls_url));
    assert!(ok, "{text}");
    assert_eq!(text, format!("2 200 {BIG_BYTES}"));

    let (ok, text) = run(squall_e2e::tool("nghttp")
        .args(["-nv", "-t", "10"])
        .arg(&url));
    assert!(ok, "{text}");
    assert!(text.contains("recv SETTINGS frame"), "{text}");
    assert!(text.contains(":status: 200"), "{text}");
    // Our SETTINGS as nghttp decoded them: the stream limit of `h2_streams_max`'s default.
    assert!(
        text.contains("[SETTINGS_MAX_CONCURRENT_STREAMS(0x03):128]"),
        "{text}"
    );

    let (ok, text) = run(squall_e2e::tool("h2load")
        .args(["-n", "100000", "-c", "10", "-m", "100", "-t", "1"])
        .arg(&url));
    assert!(ok, "{text}");
    assert!(
        text.contains("100000 succeeded, 0 failed, 0 errored"),
        "{text}"
    );
}

// ---- floods, as raw frames (support/raw_h2.rs) ----

/// Sends `attack` on a raw connection and expects GOAWAY(ENHANCE_YOUR_CALM), while a good h2
/// client on another connection completes requests before and after.
async fn flood_ends_in_goaway(attack: Vec<u8>) {
    flood_ends_in_goaway_with(attack, "").await;
}

/// [`flood_ends_in_goaway`] with more `[limits]` lines.
async fn flood_ends_in_goaway_with(attack: Vec<u8>, limits: &str) {
    let config = config("").replace(
        "body_bytes_max = \"4MiB\"",
        &format!("body_bytes_max = \"4MiB\"\n{limits}"),
    );
    let squall = Squall::start(&config);
    let good = h2c(squall.addr).await;
    let url = format!("http://{}/", squall.addr);
    assert_eq!(fetch(&good, "GET", &url, None).await.status, 200);

    let addr = squall.addr;
    let code = tokio::task::spawn_blocking(move || {
        let mut stream = raw_h2(addr);
        // The server may stop reading part-way: a failed write is part of the outcome.
        let _ = stream.write_all(&attack);
        goaway_code(&mut stream)
    })
    .await
    .unwrap();
    assert_eq!(code, Some(ENHANCE_YOUR_CALM));

    for _ in 0..10 {
        assert_eq!(fetch(&good, "GET", &url, None).await.status, 200);
    }
    assert!(
        squall.wait_log("h2:", 1, Duration::from_secs(5)),
        "{}",
        squall.log()
    );
}

#[tokio::test]
async fn rapid_reset_flood() {
    let mut attack = Vec::new();
    for i in 0..20_000u32 {
        let stream = 2 * i + 1;
        attack.extend(frame(
            HEADERS,
            END_STREAM | END_HEADERS,
            stream,
            &get_block(),
        ));
        attack.extend(frame(RST_STREAM, 0, stream, &8u32.to_be_bytes()));
    }
    flood_ends_in_goaway(attack).await;
}

/// `[limits] h2_resets_max` sets the rapid-reset limit: 30 resets are a flood at 10, though
/// far below the default.
#[tokio::test]
async fn the_reset_limit_comes_from_the_config() {
    let mut attack = Vec::new();
    for i in 0..30u32 {
        let stream = 2 * i + 1;
        attack.extend(frame(
            HEADERS,
            END_STREAM | END_HEADERS,
            stream,
            &get_block(),
        ));
        attack.extend(frame(RST_STREAM, 0, stream, &8u32.to_be_bytes()));
    }
    flood_ends_in_goaway_with(attack, "h2_resets_max = 10").await;
}

#[tokio::test]
async fn continuation_flood() {
    // One header block that never ends: empty CONTINUATION frames, forever.
    let mut attack = frame(HEADERS, 0, 1, &get_block());
    for _ in 0..50_000 {
        attack.extend(frame(CONTINUATION, 0, 1, &[0x84]));
    }
    flood_ends_in_goaway(attack).await;
}

#[tokio::test]
async fn ping_flood() {
    let mut attack = Vec::new();
    for i in 0..100_000u64 {
        attack.extend(frame(PING, 0, 0, &i.to_be_bytes()));
    }
    flood_ends_in_goaway(attack).await;
}

#[tokio::test]
async fn settings_flood() {
    let mut attack = Vec::new();
    for _ in 0..100_000 {
        attack.extend(frame(SETTINGS, 0, 0, &[]));
    }
    flood_ends_in_goaway(attack).await;
}

#[tokio::test]
async fn empty_data_flood() {
    let mut attack = frame(HEADERS, END_HEADERS, 1, &get_block());
    for _ in 0..100_000 {
        attack.extend(frame(DATA, 0, 1, &[]));
    }
    flood_ends_in_goaway(attack).await;
}

const WINDOW_UPDATE: u8 = 0x8;
const FLOW_CONTROL_ERROR: u32 = 0x3;

/// WINDOW_UPDATE that pushes the connection window past 2^31-1 is a connection
/// FLOW_CONTROL_ERROR (RFC 9113 §6.9.1): GOAWAY, and other connections go on.
#[tokio::test]
async fn window_update_overflow_ends_the_connection() {
    let squall = Squall::start(&config(""));
    let mut stream = raw_h2(squall.addr);
    let increment = 0x7fff_ffffu32.to_be_bytes();
    stream
        .write_all(&frame(WINDOW_UPDATE, 0, 0, &increment))
        .unwrap();
    stream
        .write_all(&frame(WINDOW_UPDATE, 0, 0, &increment))
        .unwrap();
    assert_eq!(goaway_code(&mut stream), Some(FLOW_CONTROL_ERROR));
    let good = h2c(squall.addr).await;
    let url = format!("http://{}/", squall.addr);
    assert_eq!(fetch(&good, "GET", &url, None).await.status, 200);
}

/// A client that asks for a large body and never opens its window (SETTINGS_INITIAL_WINDOW_SIZE
/// 0) holds the response only for `h2_stall_timeout`: the stream is then reset, and a good
/// connection alongside is served throughout.
#[tokio::test]
async fn a_zero_window_stall_is_reset_after_the_stall_timeout() {
    let lateness = squall_e2e::Lateness::start();
    let config = config("").replace(
        "body_bytes_max = \"4MiB\"",
        "body_bytes_max = \"4MiB\"\nh2_stall_timeout = \"1s\"",
    );
    let squall = Squall::start(&config);
    let addr = squall.addr;
    let stalled = tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream
            .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .unwrap();
        // SETTINGS_INITIAL_WINDOW_SIZE (0x4) = 0.
        stream
            .write_all(&frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 0]))
            .unwrap();
        // GET /big: :method GET, :scheme http, :path literal "/big", :authority "a".
        let block = [
            0x82, 0x86, 0x04, 0x04, b'/', b'b', b'i', b'g', 0x01, 0x01, b'a',
        ];
        stream
            .write_all(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &block))
            .unwrap();
        let started = Instant::now();
        let mut bytes = Vec::new();
        let mut buf = [0u8; 4096];
        // Read frames until RST_STREAM on stream 1.
        loop {
            let n = stream
                .read(&mut buf)
                .expect("the server answers within the timeout");
            assert!(n > 0, "closed before the reset");
            bytes.extend_from_slice(&buf[..n]);
            let mut rest = &bytes[..];
            while rest.len() >= 9 {
                let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
                if rest.len() < 9 + len {
                    break;
                }
                let id = u32::from_be_bytes(rest[5..9].try_into().unwrap()) & 0x7fff_ffff;
                if rest[3] == RST_STREAM && id == 1 {
                    return started.elapsed();
                }
                rest = &rest[9 + len..];
            }
        }
    });
    let good = h2c(squall.addr).await;
    let url = format!("http://{}/", squall.addr);
    for _ in 0..5 {
        assert_eq!(fetch(&good, "GET", &url, None).await.status, 200);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let waited = stalled.await.unwrap();
    assert!(
        waited >= Duration::from_millis(900),
        "reset after {waited:?}"
    );
    lateness.assert_within("the reset", waited, Duration::from_secs(5));
}

#[tokio::test]
async fn garbage_after_the_preface_is_a_protocol_error_not_a_crash() {
    let squall = Squall::start(&config(""));
    let mut stream = raw_h2(squall.addr);
    // A frame header announcing 0xffffff bytes, far above the 16,384 Squall advertises.
    stream.write_all(&[0xff; 64]).unwrap();
    let code = goaway_code(&mut stream);
    assert_eq!(
        code,
        Some(FRAME_SIZE_ERROR),
        "RFC 9113 §4.2: FRAME_SIZE_ERROR"
    );
    let good = h2c(squall.addr).await;
    let url = format!("http://{}/", squall.addr);
    assert_eq!(fetch(&good, "GET", &url, None).await.status, 200);
}
