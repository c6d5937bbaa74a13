//! TLS termination against independent peers: openssl s_client, curl and hyper over rustls.

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use squall_e2e::{Squall, TempDir, is_closed, openssl_cert};

/// Two self-signed certificates chosen by SNI (the first is the default) and a TLS listener.
fn tls_config() -> String {
    r#"[server]
workers = 1

[[listen]]
address = "ADDR"
tls = true
protocols = ["http1"]

[[certificate]]
hosts = ["a.test"]
self_signed = true

[[certificate]]
hosts = ["b.test", "*.b.test"]
self_signed = true

[limits]
header_timeout = "2s"

[[vhost]]
hosts = ["*"]

[[vhost.route]]
exact = "/"
respond = { status = 200, body = "Hello, world!" }
"#
    .to_owned()
}

/// Runs `openssl s_client` with `args`, sending one request; returns its stdout and stderr.
fn s_client(squall: &Squall, args: &[&str]) -> String {
    let addr = squall.tls_addr.expect("a TLS listener").to_string();
    let mut child = squall_e2e::tool("openssl")
        .args(["s_client", "-connect", &addr, "-ign_eof"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl s_client (package openssl)");
    let request = "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.as_bytes())
        .unwrap();
    let out = wait_output(child);
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Waits for a child, bounded: a stuck client is killed after 20 s.
fn wait_output(mut child: std::process::Child) -> std::process::Output {
    for _ in 0..2000 {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    panic!("client did not finish within 20 s");
}

/// The PEM of the server's leaf certificate in s_client output.
fn leaf_pem(output: &str) -> String {
    let start = output
        .find("-----BEGIN CERTIFICATE-----")
        .expect("a certificate");
    let end = output
        .find("-----END CERTIFICATE-----")
        .expect("end of certificate");
    output[start..end].to_owned()
}

#[test]
fn tls13_and_tls12_with_alpn_serve_http1() {
    let squall = Squall::start(&tls_config());
    let v13 = s_client(
        &squall,
        &["-tls1_3", "-alpn", "http/1.1", "-servername", "a.test"],
    );
    assert!(v13.contains("TLSv1.3"), "{v13}");
    assert!(v13.contains("ALPN protocol: http/1.1"), "{v13}");
    assert!(
        v13.contains("HTTP/1.1 200 OK") && v13.contains("Hello, world!"),
        "{v13}"
    );

    let v12 = s_client(
        &squall,
        &["-tls1_2", "-alpn", "http/1.1", "-servername", "a.test"],
    );
    assert!(v12.contains("Protocol  : TLSv1.2"), "{v12}");
    assert!(v12.contains("Hello, world!"), "{v12}");

    // No ALPN at all: HTTP/1.1.
    let none = s_client(&squall, &["-servername", "a.test"]);
    assert!(none.contains("No ALPN negotiated"), "{none}");
    assert!(none.contains("Hello, world!"), "{none}");
}

#[test]
fn alpn_without_a_common_protocol_gets_the_alert() {
    let squall = Squall::start(&tls_config());
    let out = s_client(&squall, &["-alpn", "h2", "-servername", "a.test"]);
    assert!(out.contains("no application protocol"), "{out}");
    assert!(!out.contains("Hello, world!"), "{out}");
}

#[test]
fn sni_chooses_the_certificate_and_the_first_is_the_default() {
    let squall = Squall::start(&tls_config());
    let a = leaf_pem(&s_client(&squall, &["-servername", "a.test"]));
    let b = leaf_pem(&s_client(&squall, &["-servername", "b.test"]));
    let wildcard = leaf_pem(&s_client(&squall, &["-servername", "x.b.test"]));
    let unknown = leaf_pem(&s_client(&squall, &["-servername", "other.test"]));
    let absent = leaf_pem(&s_client(&squall, &["-noservername"]));
    assert_ne!(a, b, "two names get two certificates");
    assert_eq!(b, wildcard);
    assert_eq!(a, unknown, "unknown SNI gets the first certificate");
    assert_eq!(a, absent, "absent SNI gets the first certificate");
}

#[test]
fn sessions_resume_with_tickets_and_session_ids() {
    let config = tls_config().replace("[limits]", "[admin]\nlisten = \"127.0.0.2:0\"\n\n[limits]");
    let squall = Squall::start(&config);
    let dir = TempDir::new();
    // TLS 1.3 and 1.2 by ticket, then TLS 1.2 by session id alone: with `-no_ticket` the
    // client offers no ticket, so only the server's session cache can resume it.
    for (version, ticket) in [("-tls1_3", true), ("-tls1_2", true), ("-tls1_2", false)] {
        let file = dir.path().join(format!("session{version}{ticket}"));
        let file = file.to_str().unwrap();
        let mut args = vec![version, "-servername", "a.test"];
        if !ticket {
            args.push("-no_ticket");
        }
        let first = s_client(&squall, &[&args[..], &["-sess_out", file]].concat());
        assert!(first.contains("New, TLSv1."), "{version} first: {first}");
        if version == "-tls1_2" {
            // TLS 1.2 prints the ticket with the session, if it was given one.
            assert_eq!(
                first.contains("TLS session ticket:"),
                ticket,
                "{version} ticket {ticket}: {first}"
            );
        }
        let second = s_client(&squall, &[&args[..], &["-sess_in", file]].concat());
        assert!(
            second.contains("Reused, TLSv1."),
            "{version} ticket {ticket} resumed: {second}"
        );
        assert!(second.contains("Hello, world!"), "{second}");
    }
    // Three full handshakes and three resumptions, as /metrics counts them.
    let (_, metrics) = squall_e2e::admin_get(squall_e2e::admin_addr(&squall), "/metrics");
    for line in [
        "squall_tls_handshakes_full_total{worker=\"0\"} 3\n",
        "squall_tls_handshakes_resumed_total{worker=\"0\"} 3\n",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
}

#[test]
fn curl_over_https() {
    let squall = Squall::start(&tls_config());
    let port = squall.tls_addr.unwrap().port();
    let out = squall_e2e::tool("curl")
        .args([
            "-sk",
            "--max-time",
            "10",
            "--resolve",
            &format!("b.test:{port}:127.0.0.1"),
        ])
        .arg(format!("https://b.test:{port}/"))
        .output()
        .expect("curl");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Hello, world!");
}

#[test]
fn garbage_instead_of_a_client_hello_is_dropped_while_others_are_served() {
    let squall = Squall::start(&tls_config());
    let addr = squall.tls_addr.unwrap();
    let mut garbage = std::net::TcpStream::connect(addr).unwrap();
    garbage
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // 1 MB of pseudo-random bytes (xorshift), in 64 KiB writes; the server may cut us off.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let chunk: Vec<u8> = (0..65_536)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    for _ in 0..16 {
        if garbage.write_all(&chunk).is_err() {
            break;
        }
    }
    // A fatal alert (RFC 8446 §6: one record of level 2), then the close, and nothing else.
    let mut alert = [0u8; 7];
    std::io::Read::read_exact(&mut garbage, &mut alert).expect("an alert record");
    assert_eq!(
        alert[..6],
        [0x15, 0x03, 0x03, 0x00, 0x02, 0x02],
        "{alert:?}"
    );
    assert!(is_closed(&mut garbage), "garbage connection is closed");
    let good = s_client(&squall, &["-servername", "a.test"]);
    assert!(good.contains("Hello, world!"), "{good}");
}

#[test]
fn a_stalled_handshake_is_cut_at_the_header_timeout() {
    let lateness = squall_e2e::Lateness::start();
    let squall = Squall::start(&tls_config());
    let mut stalled = std::net::TcpStream::connect(squall.tls_addr.unwrap()).unwrap();
    stalled
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // The first bytes of a TLS record header, then nothing.
    stalled.write_all(&[0x16, 0x03, 0x01]).unwrap();
    let started = std::time::Instant::now();
    assert!(is_closed(&mut stalled));
    let waited = started.elapsed();
    // header_timeout is 2 s: cut near it, not at the client's own 10 s read timeout.
    assert!(
        waited >= Duration::from_millis(1500),
        "cut too early: {waited:?}"
    );
    lateness.assert_within("the cut", waited, Duration::from_millis(4000));
}

/// A PEM certificate made by openssl, loaded from files by Squall, verified by hyper over
/// rustls against that certificate as its only root.
#[tokio::test]
async fn hyper_over_rustls_with_pem_files() {
    use http_body_util::{BodyExt, Empty};
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, ServerName};

    let dir = TempDir::new();
    let (cert, key) = openssl_cert(dir.path(), "pem.test");
    let config = tls_config().replace(
        "[[certificate]]\nhosts = [\"a.test\"]\nself_signed = true",
        &format!(
            "[[certificate]]\nhosts = [\"pem.test\"]\ncert = {:?}\nkey = {:?}",
            cert, key
        ),
    );
    let squall = Squall::start(&config);

    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(&cert).unwrap())
        .unwrap();
    let mut client = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = vec![b"http/1.1".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(client));
    let tcp = tokio::net::TcpStream::connect(squall.tls_addr.unwrap())
        .await
        .unwrap();
    let name = ServerName::try_from("pem.test").unwrap();
    let tls = connector
        .connect(name, tcp)
        .await
        .expect("handshake verifies the PEM certificate");
    let io = hyper_util::rt::TokioIo::new(tls);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
    tokio::spawn(conn);
    for _ in 0..3 {
        let request = http::Request::get("/")
            .header("host", "pem.test")
            .body(Empty::<bytes::Bytes>::new())
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), 200);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"Hello, world!");
    }
}

/// SIGHUP with new certificate files: new handshakes get the new certificate, a connection
/// established before keeps working.
#[test]
fn sighup_reloads_certificates_for_new_handshakes() {
    let dir = TempDir::new();
    let (cert, key) = openssl_cert(dir.path(), "reload.test");
    let live_cert = dir.path().join("live.pem");
    let live_key = dir.path().join("live.key");
    std::fs::copy(&cert, &live_cert).unwrap();
    std::fs::copy(&key, &live_key).unwrap();
    let config = tls_config().replace(
        "[[certificate]]\nhosts = [\"a.test\"]\nself_signed = true",
        &format!(
            "[[certificate]]\nhosts = [\"reload.test\"]\ncert = {live_cert:?}\nkey = {live_key:?}"
        ),
    );
    let squall = Squall::start(&config);
    let before = leaf_pem(&s_client(&squall, &["-servername", "reload.test"]));
    assert_eq!(before, leaf_pem(&std::fs::read_to_string(&cert).unwrap()));

    // A connection opened before the reload, kept open across it.
    let addr = squall.tls_addr.unwrap().to_string();
    let mut kept = squall_e2e::tool("openssl")
        .args([
            "s_client",
            "-connect",
            &addr,
            "-servername",
            "reload.test",
            "-quiet",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut kept_in = kept.stdin.take().unwrap();
    kept_in
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();

    let (new_cert, new_key) = openssl_cert(dir.path(), "reload.test");
    std::fs::copy(&new_cert, &live_cert).unwrap();
    std::fs::copy(&new_key, &live_key).unwrap();
    squall.signal(libc::SIGHUP);
    assert!(
        squall.wait_log("configuration reloaded", 1, Duration::from_secs(5)),
        "{}",
        squall.log()
    );
    let after = leaf_pem(&s_client(&squall, &["-servername", "reload.test"]));
    assert_eq!(
        after,
        leaf_pem(&std::fs::read_to_string(&new_cert).unwrap())
    );
    assert_ne!(before, after);

    // The old connection still answers, then closes on request.
    kept_in
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    drop(kept_in);
    let out = wait_output(kept);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("Hello, world!").count(), 2, "{text}");
}

/// Bytes of the `/big` answer of [`engine_config`]: three TLS records and a bit.
const BIG_BYTES: usize = 50_000;

/// [`tls_config`] with `[tls] engine = engine`, a listener offering h2 before http/1.1, and a
/// `/big` answer of several TLS records beside `/`.
fn engine_config(engine: &str) -> String {
    let big = format!(
        "[[vhost.route]]\nexact = \"/big\"\nrespond = {{ status = 200, body = \"{}\" }}\n\n\
         [[vhost.route]]\nexact = \"/\"",
        "x".repeat(BIG_BYTES)
    );
    tls_config()
        .replace("protocols = [\"http1\"]", "protocols = [\"h2\", \"http1\"]")
        .replace("[[vhost.route]]\nexact = \"/\"", &big)
        .replace(
            "[limits]",
            &format!("[tls]\nengine = \"{engine}\"\n\n[limits]"),
        )
}

/// curl fetching `/` then `/big` on one connection, with `args` choosing the HTTP and TLS
/// versions; per answer, its status, body size, HTTP version and new connections, one per line.
fn curl_both(squall: &Squall, args: &[&str]) -> Vec<String> {
    let port = squall.tls_addr.expect("a TLS listener").port();
    let out = squall_e2e::tool("curl")
        .args([
            "-sk",
            "--max-time",
            "10",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
        ])
        .args([
            "-w",
            "%{http_code} %{size_download} %{http_version} %{num_connects}\\n",
        ])
        .args(["--resolve", &format!("a.test:{port}:127.0.0.1")])
        .args(args)
        .arg(format!("https://a.test:{port}/"))
        .arg(format!("https://a.test:{port}/big"))
        .output()
        .expect("curl");
    assert!(out.status.success(), "curl {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Both `[tls] engine`s serve HTTP/1.1 and HTTP/2 over TLS 1.3 and 1.2, small and multi-record
/// answers; a reload that changes the engine keeps serving (new connections take the new one).
#[test]
fn each_tls_engine_serves_http1_and_http2() {
    for (engine, other) in [("buffered", "unbuffered"), ("unbuffered", "buffered")] {
        let squall = Squall::start(&engine_config(engine));
        let chosen = |engine: &str| format!("new TLS connections on the {engine} engine");
        assert!(squall.log().contains(&chosen(engine)), "{}", squall.log());
        let exchanges = |squall: &Squall| {
            for (http, version, tls) in [
                ("--http1.1", "1.1", "1.3"),
                ("--http2", "2", "1.3"),
                ("--http2", "2", "1.2"),
            ] {
                let lines = curl_both(squall, &[http, &format!("--tlsv{tls}"), "--tls-max", tls]);
                let expected = [
                    format!("200 13 {version} 1"),
                    format!("200 {BIG_BYTES} {version} 0"),
                ];
                assert_eq!(lines, expected, "{engine} {http} {tls}");
            }
        };
        exchanges(&squall);
        squall.rewrite_config(&engine_config(other));
        squall.signal(libc::SIGHUP);
        assert!(
            squall.wait_log("configuration reloaded", 1, Duration::from_secs(5)),
            "{}",
            squall.log()
        );
        assert!(squall.log().contains(&chosen(other)), "{}", squall.log());
        exchanges(&squall);
    }
}
