//! HTTP/2 to origins (`protocol = "h2c" | "h2" | "auto"` upstreams) against real HTTP/2
//! servers: the `h2` crate's (cleartext, and over tokio-rustls with ALPN) and nghttpd. HTTP/1.1
//! and HTTP/2 clients reach them through Squall; many client streams share few origin
//! connections; bodies and trailers cross both ways; a refused stream goes again, a stream reset
//! mid-response cuts its client only; a GOAWAY moves new requests to a new connection; an
//! origin that does not speak HTTP/2 is a 502.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use squall_e2e::{
    PathCounts, Squall, TempDir, admin_addr, admin_get, metric_sum, read_response, roundtrip, tool,
};

#[path = "support/h2_client.rs"]
mod h2_client;
#[path = "support/origin.rs"]
mod origin;

/// What an HTTP/2 origin saw.
#[derive(Default)]
struct Seen {
    /// Connections accepted, and those that ended.
    connections: AtomicUsize,
    closed: AtomicUsize,
    /// Requests per path.
    requests: PathCounts,
    /// Streams open at once, at most.
    in_flight: AtomicUsize,
    in_flight_max: AtomicUsize,
}

/// An HTTP/2 origin (the `h2` crate) on a thread of its own: cleartext, or TLS with ALPN `alpn`.
/// `max_streams` is its SETTINGS_MAX_CONCURRENT_STREAMS.
fn h2_origin(max_streams: Option<u32>, tls: Option<Vec<&'static [u8]>>) -> (SocketAddr, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let shared = seen.clone();
    let acceptor = tls.map(|alpn| {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let key = rustls_pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
        let mut config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![cert.cert.der().clone()], key)
            .unwrap();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    });
    let addr = origin::tokio_origin_on("127.0.0.1:0", 2, move |tcp| {
        shared.connections.fetch_add(1, Ordering::SeqCst);
        let (seen, acceptor) = (shared.clone(), acceptor.clone());
        async move {
            match acceptor {
                Some(acceptor) => {
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        serve(tls, seen.clone(), max_streams).await;
                    }
                }
                None => serve(tcp, seen.clone(), max_streams).await,
            }
            seen.closed.fetch_add(1, Ordering::SeqCst);
        }
    });
    (addr, seen)
}

/// One origin connection: each stream answered by [`answer`]; `/goaway` makes the connection
/// send GOAWAY (graceful: streams in flight finish).
async fn serve<T>(io: T, seen: Arc<Seen>, max_streams: Option<u32>)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut builder = h2::server::Builder::new();
    if let Some(max) = max_streams {
        builder.max_concurrent_streams(max);
    }
    let Ok(mut conn) = builder.handshake::<_, Bytes>(io).await else {
        return;
    };
    let shutdown = Arc::new(tokio::sync::Notify::new());
    let mut shut = false;
    loop {
        tokio::select! {
            accepted = conn.accept() => {
                let Some(Ok((request, respond))) = accepted else { return };
                let (seen, shutdown) = (seen.clone(), shutdown.clone());
                tokio::spawn(answer(request, respond, seen, shutdown));
            }
            _ = shutdown.notified(), if !shut => {
                conn.graceful_shutdown();
                shut = true;
            }
        }
    }
}

async fn answer(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    seen: Arc<Seen>,
    shutdown: Arc<tokio::sync::Notify>,
) {
    // Routes keep their prefix (`/o/...`): the last segment says what to do.
    let path = format!("/{}", request.uri().path().rsplit('/').next().unwrap_or(""));
    let count = seen.requests.hit(&path);
    let now = seen.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    seen.in_flight_max.fetch_max(now, Ordering::SeqCst);
    let (parts, mut body) = request.into_parts();
    let mut received = Vec::new();
    while let Some(Ok(chunk)) = body.data().await {
        received.extend_from_slice(&chunk);
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let trailers = body.trailers().await.ok().flatten();
    let ok = http::Response::builder().status(200);
    match path.as_str() {
        // What arrived: the pseudo-fields and every field, one per line, then the body length.
        "/headers" => {
            let mut text = format!(
                "method {}\nscheme {}\nauthority {}\npath {}\n",
                parts.method,
                parts.uri.scheme_str().unwrap_or("-"),
                parts.uri.authority().map_or("-", |a| a.as_str()),
                parts.uri.path_and_query().map_or("-", |p| p.as_str()),
            );
            for (name, value) in &parts.headers {
                text.push_str(&format!("{name}: {}\n", value.to_str().unwrap_or("?")));
            }
            text.push_str(&format!("body {}\n", received.len()));
            let response = ok.body(()).unwrap();
            let mut send = respond.send_response(response, false).unwrap();
            h2_client::send_all(&mut send, Bytes::from(text)).await;
        }
        // The body back, with `x-echo` trailers carrying the request's `x-sum` trailer.
        "/echo" => {
            let response = ok
                .header("content-type", "application/octet-stream")
                .body(());
            let mut send = respond.send_response(response.unwrap(), false).unwrap();
            send_body(&mut send, Bytes::from(received)).await;
            let mut out = http::HeaderMap::new();
            let sum = trailers.as_ref().and_then(|t| t.get("x-sum").cloned());
            out.insert(
                "x-echo",
                sum.unwrap_or(http::HeaderValue::from_static("none")),
            );
            send.send_trailers(out).unwrap();
        }
        "/slow" => {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let response = ok.body(()).unwrap();
            let mut send = respond.send_response(response, false).unwrap();
            h2_client::send_all(&mut send, Bytes::from_static(b"slow")).await;
        }
        // The first request is refused (REFUSED_STREAM: not processed), later ones answered.
        "/refuse-once" if count == 1 => respond.send_reset(h2::Reason::REFUSED_STREAM),
        "/refuse-once" => {
            let response = ok.body(()).unwrap();
            let mut send = respond.send_response(response, false).unwrap();
            h2_client::send_all(&mut send, Bytes::from(received)).await;
        }
        // A head, ten of the twenty bytes it promises, then a reset.
        "/cut" => {
            let response = ok.header("content-length", "20").body(()).unwrap();
            let mut send = respond.send_response(response, false).unwrap();
            send.send_data(Bytes::from_static(b"0123456789"), false)
                .unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
            send.send_reset(h2::Reason::INTERNAL_ERROR);
        }
        "/goaway" => {
            shutdown.notify_one();
            let response = ok.body(()).unwrap();
            let mut send = respond.send_response(response, false).unwrap();
            h2_client::send_all(&mut send, Bytes::from_static(b"bye")).await;
        }
        // 4 MiB of a pattern.
        "/mib" => {
            let body: Vec<u8> = (0..4 << 20).map(|i| (i % 241) as u8).collect();
            let response = ok.header("content-length", "4194304").body(()).unwrap();
            let mut send = respond.send_response(response, false).unwrap();
            h2_client::send_all(&mut send, Bytes::from(body)).await;
        }
        // Cacheable for a minute, with a validator.
        "/cacheable" => {
            let response = ok
                .header("cache-control", "max-age=60")
                .header("etag", "\"v1\"")
                .body(())
                .unwrap();
            let mut send = respond.send_response(response, false).unwrap();
            h2_client::send_all(&mut send, Bytes::from_static(b"cached body")).await;
        }
        "/healthz" => {
            let response = ok.body(()).unwrap();
            let _ = respond.send_response(response, true);
        }
        _ => {
            let response = http::Response::builder().status(404).body(()).unwrap();
            let _ = respond.send_response(response, true);
        }
    }
    seen.in_flight.fetch_sub(1, Ordering::SeqCst);
}

/// Sends `body` within flow control, without ending the stream (trailers follow).
async fn send_body(send: &mut h2::SendStream<Bytes>, mut body: Bytes) {
    while !body.is_empty() {
        send.reserve_capacity(body.len());
        let granted = std::future::poll_fn(|cx| send.poll_capacity(cx)).await;
        let granted = granted.expect("capacity").expect("capacity granted");
        let chunk = body.split_to(granted.min(body.len()));
        send.send_data(chunk, false).unwrap();
    }
}

/// Squall with one worker, a cleartext listener (http1, h2c), the admin listener, and one route
/// per (name, `[[upstream]]` keys) at `/{name}/` (the origin sees the whole path).
fn squall(upstreams: &[(&str, String)]) -> Squall {
    // The admin listener's port is the kernel's, read from the log (`admin_addr`).
    let mut config = String::from(
        "[server]\nworkers = 1\n\n[[listen]]\naddress = \"ADDR\"\nprotocols = [\"http1\", \"h2c\"]\n\n\
         [admin]\nlisten = \"127.0.0.2:0\"\n\n[[vhost]]\nhosts = [\"*\"]\n\n",
    );
    for (name, _) in upstreams {
        config.push_str(&format!(
            "[[vhost.route]]\nprefix = \"/{name}/\"\nproxy = \"{name}\"\n\n"
        ));
    }
    for (name, keys) in upstreams {
        config.push_str(&format!("[[upstream]]\nname = \"{name}\"\n{keys}\n\n"));
    }
    Squall::start(&config)
}

fn h2c_upstream(addr: SocketAddr) -> String {
    format!("servers = [{{ address = \"{addr}\" }}]\nprotocol = \"h2c\"")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A line of the origin's `/headers` answer that starts with `prefix`.
fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.lines().find_map(|l| l.strip_prefix(prefix))
}

#[test]
fn http1_and_http2_clients_reach_an_h2c_origin_with_bodies_and_trailers() {
    let (origin, seen) = h2_origin(None, None);
    let squall = squall(&[("o", h2c_upstream(origin))]);
    // HTTP/1.1: the head becomes pseudo-fields; connection-specific fields stay behind.
    let mut stream = squall.connect();
    let response = roundtrip(
        &mut stream,
        "GET /o/headers?q=1 HTTP/1.1\r\nHost: app.example\r\nConnection: keep-alive, x-hop\r\n\
         X-Hop: 1\r\nKeep-Alive: 5\r\nX-Custom: yes\r\n\r\n",
    );
    assert_eq!(response.status, 200);
    let text = response.body_text();
    assert_eq!(line(&text, "method "), Some("GET"), "{text}");
    assert_eq!(line(&text, "scheme "), Some("http"), "{text}");
    assert_eq!(line(&text, "authority "), Some("app.example"), "{text}");
    assert_eq!(line(&text, "path "), Some("/o/headers?q=1"), "{text}");
    assert_eq!(line(&text, "x-custom: "), Some("yes"), "{text}");
    assert_eq!(
        line(&text, "x-forwarded-for: "),
        Some("127.0.0.1"),
        "{text}"
    );
    assert!(line(&text, "via: ").is_some(), "{text}");
    for gone in ["connection:", "keep-alive:", "x-hop:", "host:", "te:"] {
        assert!(line(&text, gone).is_none(), "{gone} crossed: {text}");
    }
    // A 1 MiB upload and its echo on the same connection, by length and chunked.
    let body: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
    let head = format!(
        "POST /o/echo HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    std::io::Write::write_all(&mut stream, head.as_bytes()).unwrap();
    std::io::Write::write_all(&mut stream, &body).unwrap();
    let response = read_response(&mut stream).expect("an echo");
    assert_eq!(response.status, 200);
    assert!(
        response.body == body,
        "the echo differs ({} bytes)",
        response.body.len()
    );
    let response = roundtrip(
        &mut stream,
        "POST /o/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTE: trailers\r\n\r\n\
         5\r\nhello\r\n0\r\nx-sum: 5\r\n\r\n",
    );
    assert_eq!(response.body_text(), "hello");
    // HTTP/2: trailers both ways, 4 MiB echoed.
    runtime().block_on(async {
        let client = h2_client::h2c(squall.addr).await;
        let mut sender = client.clone().ready().await.unwrap();
        let request = http::Request::post("http://x/o/echo").body(()).unwrap();
        let (response, mut send) = sender.send_request(request, false).unwrap();
        let big: Vec<u8> = (0..4 << 20).map(|i| (i % 253) as u8).collect();
        send_body(&mut send, Bytes::from(big.clone())).await;
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-sum", http::HeaderValue::from_static("42"));
        send.send_trailers(trailers).unwrap();
        let response = response.await.unwrap();
        assert_eq!(response.status(), 200);
        let mut body = response.into_body();
        let mut echoed = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.unwrap();
            echoed.extend_from_slice(&chunk);
            body.flow_control().release_capacity(chunk.len()).unwrap();
        }
        assert!(echoed == big, "the echo differs ({} bytes)", echoed.len());
        let trailers = body.trailers().await.unwrap().expect("trailers");
        assert_eq!(trailers.get("x-echo").unwrap(), "42");
    });
    assert_eq!(
        seen.connections.load(Ordering::SeqCst),
        1,
        "one origin connection for all"
    );
}

#[test]
fn a_hundred_client_streams_share_one_origin_connection() {
    let lateness = squall_e2e::Lateness::start();
    for max_streams in [None, Some(10)] {
        let (origin, seen) = h2_origin(max_streams, None);
        let squall = squall(&[("o", h2c_upstream(origin))]);
        let started = Instant::now();
        runtime().block_on(async {
            let client = h2_client::h2c(squall.addr).await;
            let calls = (0..100).map(|_| {
                let client = client.clone();
                tokio::spawn(async move {
                    h2_client::fetch(&client, "GET", "http://x/o/slow", None).await
                })
            });
            for call in calls.collect::<Vec<_>>() {
                let reply = call.await.unwrap();
                assert_eq!((reply.status, &reply.body[..]), (200, &b"slow"[..]));
            }
        });
        let (connections, most) = (
            seen.connections.load(Ordering::SeqCst),
            seen.in_flight_max.load(Ordering::SeqCst),
        );
        assert_eq!(connections, 1, "{max_streams:?}: origin connections");
        match max_streams {
            // All at once: the 100 answers took about one answer's time.
            None => {
                assert!(most >= 90, "streams in flight at most {most}");
                lateness.assert_within("100 streams", started.elapsed(), Duration::from_secs(3));
            }
            // Never more than the origin allows: the rest wait for a stream, none refused.
            Some(max) => assert!(most <= max as usize, "{most} streams at once, over {max}"),
        }
        let metrics = admin_get(admin_addr(&squall), "/metrics").1;
        assert_eq!(
            metric_sum(&metrics, "squall_upstream_h2_streams_total{upstream=\"o\"}"),
            100.0
        );
        assert_eq!(
            metric_sum(&metrics, "squall_upstream_h2_stream_resets_total"),
            0.0
        );
    }
}

#[test]
fn a_refused_stream_goes_again_and_a_reset_one_cuts_only_its_client() {
    let (origin, seen) = h2_origin(None, None);
    let squall = squall(&[("o", h2c_upstream(origin))]);
    // A POST refused (not processed) is sent again, body and all.
    let mut stream = squall.connect();
    let response = roundtrip(
        &mut stream,
        "POST /o/refuse-once HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody",
    );
    assert_eq!(
        (response.status, response.body_text().as_str()),
        (200, "body")
    );
    assert_eq!(seen.requests.count("/refuse-once"), 2);
    // A reset after the head: an HTTP/1.1 client gets the ten bytes, then the close.
    std::io::Write::write_all(&mut stream, b"GET /o/cut HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let _ = std::io::Read::read_to_end(&mut stream, &mut got);
    let got = String::from_utf8_lossy(&got);
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert!(
        got.ends_with("0123456789"),
        "cut after the ten bytes: {got}"
    );
    // An HTTP/2 client's stream is reset; another stream on its connection goes on.
    runtime().block_on(async {
        let client = h2_client::h2c(squall.addr).await;
        let mut sender = client.clone().ready().await.unwrap();
        let request = http::Request::get("http://x/o/cut").body(()).unwrap();
        let (response, _) = sender.send_request(request, true).unwrap();
        let mut body = response.await.unwrap().into_body();
        let mut data = Vec::new();
        let mut reset = None;
        while let Some(chunk) = body.data().await {
            match chunk {
                Ok(chunk) => data.extend_from_slice(&chunk),
                Err(e) => {
                    reset = e.reason();
                    break;
                }
            }
        }
        assert_eq!(reset, Some(h2::Reason::INTERNAL_ERROR), "got {data:?}");
        let reply = h2_client::fetch(&client, "GET", "http://x/o/headers", None).await;
        assert_eq!(reply.status, 200);
    });
    // The refused stream went again on a connection not yet used; the resets cost none.
    assert_eq!(
        seen.connections.load(Ordering::SeqCst),
        2,
        "origin connections"
    );
    let metrics = admin_get(admin_addr(&squall), "/metrics").1;
    assert!(metric_sum(&metrics, "squall_upstream_h2_stream_resets_total") >= 3.0);
}

#[test]
fn a_goaway_moves_new_requests_to_a_new_connection() {
    let (origin, seen) = h2_origin(None, None);
    let squall = squall(&[("o", h2c_upstream(origin))]);
    let mut stream = squall.connect();
    let response = roundtrip(&mut stream, "GET /o/goaway HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(response.body_text(), "bye");
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(50));
        let response = roundtrip(&mut stream, "GET /o/headers HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(response.status, 200);
    }
    assert_eq!(
        seen.connections.load(Ordering::SeqCst),
        2,
        "a second connection after GOAWAY"
    );
    let metrics = admin_get(admin_addr(&squall), "/metrics").1;
    let goaways = "squall_upstream_h2_goaways_total{upstream=\"o\"} 1";
    assert!(metrics.lines().any(|l| l == goaways), "{metrics}");
}

#[test]
fn tls_origins_speak_http2_by_alpn() {
    let (h2_only, seen) = h2_origin(None, Some(vec![b"h2"]));
    let (either, seen_either) = h2_origin(None, Some(vec![b"h2", b"http/1.1"]));
    let tls = |addr: SocketAddr, protocol: &str| {
        format!(
            "servers = [{{ address = \"{addr}\" }}]\ntls = true\ntls_verify = false\n\
             protocol = \"{protocol}\""
        )
    };
    let squall = squall(&[("h2", tls(h2_only, "h2")), ("auto", tls(either, "auto"))]);
    for name in ["h2", "auto"] {
        let mut stream = squall.connect();
        for _ in 0..3 {
            let request = format!("GET /{name}/headers HTTP/1.1\r\nHost: x\r\n\r\n");
            let response = roundtrip(&mut stream, &request);
            assert_eq!(response.status, 200, "{name}");
            assert_eq!(
                line(&response.body_text(), "scheme "),
                Some("https"),
                "{name}"
            );
        }
    }
    assert_eq!(seen.connections.load(Ordering::SeqCst), 1);
    assert_eq!(seen_either.connections.load(Ordering::SeqCst), 1);
}

#[test]
fn an_origin_that_does_not_speak_http2_is_a_502_and_others_go_on() {
    let http1 = origin::hyper_origin(|_| async {
        Ok(http::Response::new(http_body_util::Full::new(
            Bytes::from_static(b"h1"),
        )))
    });
    let (h2, _) = h2_origin(None, None);
    let squall = squall(&[("bad", h2c_upstream(http1)), ("good", h2c_upstream(h2))]);
    let mut stream = squall.connect();
    let response = roundtrip(&mut stream, "GET /bad/x HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(response.status, 502);
    let mut stream = squall.connect();
    let response = roundtrip(&mut stream, "GET /good/headers HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(response.status, 200);
}

#[test]
fn nghttpd_as_an_origin_serves_many_concurrent_streams() {
    let dir = TempDir::new();
    let file: Vec<u8> = (0..64 << 10).map(|i| (i % 249) as u8).collect();
    std::fs::create_dir(dir.path().join("n")).unwrap();
    std::fs::write(dir.path().join("n/file.bin"), &file).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut nghttpd = tool("nghttpd")
        .args(["--no-tls", "-a", "127.0.0.1", "-d"])
        .arg(dir.path())
        .arg(port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start nghttpd");
    let origin: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::net::TcpStream::connect(origin).is_err() {
        assert!(Instant::now() < deadline, "nghttpd did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    let squall = squall(&[("n", h2c_upstream(origin))]);
    runtime().block_on(async {
        let client = h2_client::h2c(squall.addr).await;
        let calls = (0..100).map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                h2_client::fetch(&client, "GET", "http://x/n/file.bin", None).await
            })
        });
        for call in calls.collect::<Vec<_>>() {
            let reply = call.await.unwrap();
            assert_eq!(reply.status, 200);
            assert!(
                reply.body == file,
                "a body differs ({} bytes)",
                reply.body.len()
            );
        }
    });
    let metrics = admin_get(admin_addr(&squall), "/metrics").1;
    assert_eq!(
        metric_sum(&metrics, "squall_upstream_h2_streams_total{upstream=\"n\"}"),
        100.0
    );
    assert!(metric_sum(&metrics, "squall_upstream_connects_total") <= 2.0);
    let _ = nghttpd.kill();
    let _ = nghttpd.wait();
}

#[test]
fn health_probes_speak_http2_to_http2_origins() {
    let (h2c, seen_h2c) = h2_origin(None, None);
    let (h2_tls, seen_tls) = h2_origin(None, Some(vec![b"h2"]));
    let (auto, seen_auto) = h2_origin(None, Some(vec![b"h2", b"http/1.1"]));
    let (sick, _) = h2_origin(None, None);
    let probe =
        |path: &str| format!("health_check = {{ path = \"{path}\", interval = \"100ms\" }}");
    let tls = |addr: SocketAddr, protocol: &str| {
        format!(
            "servers = [{{ address = \"{addr}\" }}]\ntls = true\ntls_verify = false\n\
             protocol = \"{protocol}\"\n{}",
            probe("/healthz")
        )
    };
    let squall = squall(&[
        ("c", format!("{}\n{}", h2c_upstream(h2c), probe("/healthz"))),
        ("t", tls(h2_tls, "h2")),
        ("a", tls(auto, "auto")),
        (
            "s",
            format!("{}\n{}", h2c_upstream(sick), probe("/missing")),
        ),
    ]);
    let deadline = Instant::now() + Duration::from_secs(5);
    let probed = || {
        [&seen_h2c, &seen_tls, &seen_auto]
            .iter()
            .all(|seen| seen.requests.count("/healthz") >= 2)
    };
    while !probed() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(probed(), "probes: {}", squall.log());
    for name in ["c", "t", "a"] {
        let mut stream = squall.connect();
        let request = format!("GET /{name}/headers HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(roundtrip(&mut stream, &request).status, 200, "{name}");
    }
    // A 404 to the probe takes the server out: its requests get 502 without reaching it.
    let metrics = || admin_get(admin_addr(&squall), "/metrics").1;
    let up = |text: &str| {
        text.lines()
            .filter(|l| l.starts_with("squall_upstream_server_up") && l.contains("upstream=\"s\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    while up(&metrics()) > 0.0 && Instant::now() < deadline + Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let text = metrics();
    assert!(
        text.contains("squall_upstream_server_up{upstream=\"s\""),
        "{text}"
    );
    assert_eq!(up(&text), 0.0, "the sick server is down");
}

#[test]
fn a_cached_route_stores_what_an_http2_origin_sends() {
    let (origin, seen) = h2_origin(None, None);
    let config = squall_e2e::cache_config(origin, "", "/c/", "").replace(
        "response_timeout = \"5s\"",
        "response_timeout = \"5s\"\nprotocol = \"h2c\"",
    );
    assert!(config.contains("protocol = \"h2c\""));
    let squall = Squall::start(&config);
    for round in 0..3 {
        let mut stream = squall.connect();
        let response = roundtrip(&mut stream, "GET /c/cacheable HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(response.status, 200, "round {round}");
        assert_eq!(response.body_text(), "cached body", "round {round}");
    }
    runtime().block_on(async {
        let client = h2_client::h2c(squall.addr).await;
        let reply = h2_client::fetch(&client, "GET", "http://x/c/cacheable", None).await;
        assert_eq!((reply.status, &reply.body[..]), (200, &b"cached body"[..]));
    });
    assert_eq!(seen.requests.count("/cacheable"), 1, "one fill, then hits");
}

#[test]
fn a_reload_moves_requests_to_connections_of_the_new_upstreams() {
    let (first, seen_first) = h2_origin(None, None);
    let (second, seen_second) = h2_origin(None, None);
    let squall = squall(&[("o", h2c_upstream(first))]);
    let get = |squall: &Squall| {
        let mut stream = squall.connect();
        roundtrip(&mut stream, "GET /o/headers HTTP/1.1\r\nHost: x\r\n\r\n").status
    };
    assert_eq!(get(&squall), 200);
    let config = std::fs::read_to_string(squall.config_path()).unwrap();
    squall.rewrite_config(&config.replace(&first.to_string(), &second.to_string()));
    squall.signal(libc::SIGHUP);
    let reloaded = squall.wait_log("configuration reloaded", 1, Duration::from_secs(5));
    assert!(reloaded, "{}", squall.log());
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen_second.requests.count("/headers") == 0 && Instant::now() < deadline {
        assert_eq!(get(&squall), 200);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        seen_second.requests.count("/headers") >= 1,
        "the new server was never reached"
    );
    let before = seen_first.requests.count("/headers");
    for _ in 0..5 {
        assert_eq!(get(&squall), 200);
    }
    assert_eq!(
        seen_first.requests.count("/headers"),
        before,
        "the old server got no more"
    );
    // The old connection, idle, was closed.
    while seen_first.closed.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let closed = seen_first.closed.load(Ordering::SeqCst);
    assert_eq!(closed, 1, "the old connection closed");
}

#[test]
fn slow_clients_give_the_origin_connection_its_window_back() {
    let (origin, seen) = h2_origin(None, None);
    let squall = squall(&[("o", h2c_upstream(origin))]);
    // Each response ends at the origin while the client has not read it yet: the window its
    // held bytes take must come back when they are passed on, or the connection's 4 MiB
    // runs out after a few of them and the origin stalls.
    let expected: Vec<u8> = (0..4 << 20).map(|i| (i % 241) as u8).collect();
    let mut stream = small_buffer_connect(squall.addr);
    for round in 0..24 {
        std::io::Write::write_all(&mut stream, b"GET /o/mib HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(150));
        let response = read_response(&mut stream).expect("a response");
        assert_eq!(response.status, 200, "round {round}");
        assert!(response.body == expected, "round {round}: the body differs");
    }
    assert_eq!(seen.connections.load(Ordering::SeqCst), 1);
}

/// A connection to `addr` whose receive buffer is 16 KiB, set before the connect (so the
/// kernel holds little of what the client does not read), blocking, with a 10 s read timeout.
fn small_buffer_connect(addr: SocketAddr) -> std::net::TcpStream {
    runtime().block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(16 * 1024).unwrap();
        let stream = socket.connect(addr).await.unwrap().into_std().unwrap();
        stream.set_nonblocking(false).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream
    })
}

#[test]
fn a_grpc_call_to_an_unreachable_origin_gets_grpc_status_14() {
    // A port nothing listens on: every connect is refused.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let squall = squall(&[("g", h2c_upstream(dead))]);
    runtime().block_on(async {
        let client = h2_client::h2c(squall.addr).await;
        let response = h2_client::grpc_empty_call(&client, "http://x/g/pkg.Service/Call").await;
        assert_eq!(response.status(), 200, "trailers-only");
        let fields = response.headers();
        assert_eq!(fields.get("grpc-status").unwrap(), "14");
        let message = fields.get("grpc-message").unwrap().to_str().unwrap();
        assert!(
            message.contains("\"g\"") && message.contains("502"),
            "{message}"
        );
    });
    // The counters see the 5xx it stands for.
    let metrics = admin_get(admin_addr(&squall), "/metrics").1;
    let errors = metric_sum(
        &metrics,
        "squall_responses_total{worker=\"0\",class=\"5xx\"}",
    );
    assert_eq!(errors, 1.0, "{metrics}");
}

#[path = "support/h3_client.rs"]
mod h3_client;

/// HTTP/3 clients to an HTTP/2 origin: a 1 MiB body echoed back with its trailer answered,
/// and 4 MiB downloaded, checked byte for byte.
#[test]
fn http3_clients_reach_an_h2c_origin() {
    let (origin, _seen) = h2_origin(None, None);
    let config = format!(
        "[server]\nworkers = 1\n\n[[certificate]]\nhosts = [\"localhost\"]\nself_signed = true\n\n\
         [[listen]]\naddress = \"ADDR\"\ntls = true\nprotocols = [\"h2\", \"http1\", \"h3\"]\n\n\
         [[vhost]]\nhosts = [\"*\"]\n\n[[vhost.route]]\nprefix = \"/o/\"\nproxy = \"o\"\n\n\
         [[upstream]]\nname = \"o\"\n{}\n",
        h2c_upstream(origin)
    );
    let squall = Squall::start(&config);
    runtime().block_on(async {
        let mut h3 = h3_client::connect(squall.addr).await;
        let base = format!("https://localhost:{}", squall.addr.port());
        let body: Vec<u8> = (0..1 << 20).map(|i| (i % 239) as u8).collect();
        let request = http::Request::post(format!("{base}/o/echo"))
            .body(())
            .unwrap();
        let mut stream = h3.send.send_request(request).await.unwrap();
        stream.send_data(Bytes::from(body.clone())).await.unwrap();
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-sum", http::HeaderValue::from_static("1234"));
        stream.send_trailers(trailers).await.unwrap();
        let response = stream.recv_response().await.unwrap();
        assert_eq!(response.status(), 200);
        let mut echoed = Vec::new();
        while let Some(chunk) = stream.recv_data().await.unwrap() {
            echoed.extend_from_slice(bytes::Buf::chunk(&chunk));
        }
        assert!(
            echoed == body,
            "{} bytes echoed of {}",
            echoed.len(),
            body.len()
        );
        let trailers = stream.recv_trailers().await.unwrap().expect("trailers");
        assert_eq!(trailers["x-echo"], "1234");
        let mib = h3_client::fetch(&mut h3, "GET", &format!("{base}/o/mib"), None).await;
        assert_eq!(mib.status, 200);
        let expected: Vec<u8> = (0..4 << 20).map(|i| (i % 241) as u8).collect();
        assert!(mib.body == expected, "{} bytes", mib.body.len());
    });
}
