//! Uploads to an origin that does not read: Squall takes a bounded part of the body and
//! pauses the client (an HTTP/1.1 connection is not read on; an HTTP/2 stream gets no more
//! window), then passes every byte on, in order, once the origin reads. For HTTP/1.1 and
//! HTTP/2 clients, to an HTTP/1.1 origin and to an HTTP/2 (h2c) one, whose stream window
//! the origin holds closed; and curl over TLS, both versions.

#[path = "support/h2_client.rs"]
mod h2_client;
#[path = "support/origin.rs"]
mod origin;

use std::io::Write;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use squall_e2e::{Squall, TempDir, digest, openssl_cert, read_response, stalled_origin, tool};

/// The upload: far more than Squall's buffers, the origin's small kernel buffers and the
/// test's own together.
const UPLOAD_BYTES: usize = 32 << 20;

/// The upload's bytes: a pattern, so a piece lost, doubled or moved changes the sum.
fn upload() -> Vec<u8> {
    (0..UPLOAD_BYTES).map(|i| (i % 251) as u8).collect()
}

/// As [`stalled_origin`], speaking HTTP/2 (h2c, the `h2` crate): the request's body is not
/// read, so its stream window stays closed, until the test sends on the channel.
fn stalled_h2_origin() -> (SocketAddr, mpsc::Sender<()>) {
    let (go, wait) = mpsc::channel::<()>();
    let wait = std::sync::Arc::new(std::sync::Mutex::new(wait));
    let addr = origin::tokio_origin(move |tcp| {
        let wait = wait.clone();
        async move {
            let Ok(mut connection) = h2::server::handshake(tcp).await else {
                return;
            };
            while let Some(Ok((request, mut respond))) = connection.accept().await {
                let wait = wait.clone();
                tokio::spawn(async move {
                    let waited = tokio::task::spawn_blocking(move || {
                        wait.lock().unwrap().recv_timeout(Duration::from_secs(30))
                    });
                    if !matches!(waited.await, Ok(Ok(()))) {
                        return;
                    }
                    let mut stream = request.into_body();
                    let mut body = Vec::new();
                    while let Some(Ok(chunk)) = stream.data().await {
                        let _ = stream.flow_control().release_capacity(chunk.len());
                        body.extend_from_slice(&chunk);
                    }
                    let response = http::Response::new(());
                    let Ok(mut send) = respond.send_response(response, false) else {
                        return;
                    };
                    let _ = send.send_data(Bytes::from(digest(&body)), true);
                });
            }
        }
    });
    (addr, go)
}

/// The origin's kind: what `config` tells Squall to speak to it.
#[derive(Clone, Copy)]
enum Origin {
    Http1,
    H2c,
}

/// Squall in front of a stalled origin of `kind`, and the origin's go channel.
fn start(kind: Origin) -> (Squall, mpsc::Sender<()>) {
    let (origin, go, protocol) = match kind {
        Origin::Http1 => {
            let (origin, go) = stalled_origin();
            (origin, go, "http1")
        }
        Origin::H2c => {
            let (origin, go) = stalled_h2_origin();
            (origin, go, "h2c")
        }
    };
    (Squall::start(&config(origin, protocol)), go)
}

fn config(origin: SocketAddr, protocol: &str) -> String {
    format!(
        r#"[limits]
body_bytes_max = "64MiB"

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]
protocol = "{protocol}"
response_timeout = "30s"

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/"
proxy = "app"
"#
    )
}

/// While the origin reads nothing for a second and a half, Squall must not have grown by
/// more than this (without backpressure it holds most of the 32 MiB).
const GROWTH_MAX: u64 = 8 << 20;

fn assert_bounded(squall: &Squall, before: u64) {
    std::thread::sleep(Duration::from_millis(1500));
    let during = squall.rss();
    eprintln!("RSS before {before}, while the origin does not read {during}");
    assert!(
        during.saturating_sub(before) < GROWTH_MAX,
        "Squall grew by {} bytes while its origin read nothing; log:\n{}",
        during.saturating_sub(before),
        squall.log()
    );
}

/// An HTTP/1.1 client sends 32 MiB while the origin reads nothing: its connection is not
/// read on, and everything arrives once the origin reads.
fn http1_upload(kind: Origin) {
    let (squall, go) = start(kind);
    let body = upload();
    let expected = digest(&body);
    let mut client = squall.connect();
    client
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let before = squall.rss();
    let mut writer = client.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let head = format!(
            "POST /up HTTP/1.1\r\nHost: u.test\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        writer.write_all(head.as_bytes())?;
        writer.write_all(&body)
    });
    assert_bounded(&squall, before);
    go.send(()).unwrap();
    sender
        .join()
        .unwrap()
        .expect("the whole upload is taken once the origin reads");
    let response = read_response(&mut client).expect("a response");
    assert_eq!(response.status, 200, "{}", squall.log());
    assert_eq!(String::from_utf8_lossy(&response.body), expected);
}

/// An HTTP/2 client sends 32 MiB while the origin reads nothing: its stream gets no more
/// window, and everything arrives once the origin reads.
async fn http2_upload(kind: Origin) {
    let (squall, go) = start(kind);
    let body = upload();
    let expected = digest(&body);
    let client = h2_client::h2c(squall.addr).await;
    let before = squall.rss();
    let call = tokio::spawn(async move {
        let mut client = client.ready().await.expect("connection ready");
        let request = http::Request::post("http://u.test/up")
            .header("content-length", body.len())
            .body(())
            .unwrap();
        let (response, mut send) = client.send_request(request, false).unwrap();
        h2_client::send_all(&mut send, Bytes::from(body)).await;
        let response = response.await.expect("a response");
        let status = response.status();
        let mut stream = response.into_body();
        let mut got = Vec::new();
        while let Some(chunk) = stream.data().await {
            let chunk = chunk.expect("body");
            stream.flow_control().release_capacity(chunk.len()).unwrap();
            got.extend_from_slice(&chunk);
        }
        (status, got)
    });
    tokio::task::block_in_place(|| assert_bounded(&squall, before));
    go.send(()).unwrap();
    let (status, got) = tokio::time::timeout(Duration::from_secs(60), call)
        .await
        .expect("the response in time")
        .unwrap();
    assert_eq!(status, 200, "{}", squall.log());
    assert_eq!(String::from_utf8_lossy(&got), expected);
}

#[test]
fn an_http1_upload_to_an_http1_origin_that_does_not_read_pauses_the_client() {
    http1_upload(Origin::Http1);
}

#[test]
fn an_http1_upload_to_an_h2_origin_that_does_not_read_pauses_the_client() {
    http1_upload(Origin::H2c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_upload_to_an_http1_origin_that_does_not_read_gets_no_more_window() {
    http2_upload(Origin::Http1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_upload_to_an_h2_origin_that_does_not_read_gets_no_more_window() {
    http2_upload(Origin::H2c).await;
}

/// curl (`--http1.1` or `--http2`) over TLS sends 32 MiB while the origin reads nothing.
fn curl_tls_upload(version: &str) {
    let dir = TempDir::new();
    let (cert, key) = openssl_cert(dir.path(), "u.test");
    let (origin, go) = stalled_origin();
    let config = format!(
        "{}\n[[listen]]\naddress = \"127.0.0.3:0\"\ntls = true\nprotocols = [\"h2\", \"http1\"]\n\n\
         [[certificate]]\nhosts = [\"u.test\"]\ncert = {cert:?}\nkey = {key:?}\n",
        config(origin, "http1")
    );
    let squall = Squall::start(&config);
    let tls = squall.tls_addr.expect("a TLS listener");
    let body = upload();
    let expected = digest(&body);
    let file = dir.path().join("upload");
    std::fs::write(&file, &body).unwrap();
    let before = squall.rss();
    let curl = tool("curl")
        .args([
            "-sS",
            "--fail",
            "--max-time",
            "60",
            version,
            "-H",
            "Expect:",
        ])
        .arg("--cacert")
        .arg(&cert)
        .arg("--resolve")
        .arg(format!("u.test:{}:{}", tls.port(), tls.ip()))
        .arg("--data-binary")
        .arg(format!("@{}", file.display()))
        .arg(format!("https://u.test:{}/up", tls.port()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run curl");
    assert_bounded(&squall, before);
    go.send(()).unwrap();
    let out = curl.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "curl: {stderr}\n{}", squall.log());
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
}

#[test]
fn an_http1_upload_over_tls_to_an_origin_that_does_not_read_pauses_curl() {
    curl_tls_upload("--http1.1");
}

#[test]
fn an_http2_upload_over_tls_to_an_origin_that_does_not_read_pauses_curl() {
    curl_tls_upload("--http2");
}
