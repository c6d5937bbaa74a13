//! TLS to origins (`tls = true` upstreams) against a real https origin: hyper over
//! tokio-rustls, with certificates from a test CA made by rcgen. Verified and proxied for
//! HTTP/1.1 and HTTP/2 clients over cleartext and TLS listeners; refused (502, a log line
//! naming the server and rustls's reason, the error metric) for an unknown CA, a wrong name and
//! an expired certificate, unless `tls_verify = false`; a client certificate for an origin that
//! requires one; keep-alive reuse of one TLS connection, session resumption on a new one; large
//! bodies both ways; health probes over TLS.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use squall_e2e::{Squall, TempDir, admin_addr, admin_get, metric_sum, roundtrip, tool};

#[path = "support/h2_client.rs"]
mod h2_client;
#[path = "support/origin.rs"]
mod origin;

/// The 8 MiB body of `/big`: a pattern that shows any lost, repeated or reordered byte.
const BIG_BYTES: usize = 8 << 20;

fn big_body() -> Vec<u8> {
    (0..BIG_BYTES).map(|i| (i % 251) as u8).collect()
}

/// A test CA and the files made from it.
struct Pki {
    dir: TempDir,
    ca: Issuer<'static, KeyPair>,
}

impl Pki {
    fn new() -> Pki {
        let dir = TempDir::new();
        let (ca, pem) = make_ca("squall test CA");
        std::fs::write(dir.path().join("ca.pem"), pem).unwrap();
        let (_, other) = make_ca("another CA");
        std::fs::write(dir.path().join("other-ca.pem"), other).unwrap();
        Pki { dir, ca }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    /// A certificate for `localhost` and 127.0.0.1 signed by the CA (expired: valid in 2020
    /// only), as PEM files `{name}.pem` and `{name}.key`.
    fn leaf(&self, name: &str, expired: bool) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.subject_alt_names = vec![
            SanType::DnsName("localhost".try_into().unwrap()),
            SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        ];
        params.distinguished_name.push(DnType::CommonName, name);
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2020, 12, 31);
        }
        let cert = params.signed_by(&key, &self.ca).unwrap();
        let (cert_path, key_path) = (
            self.path(&format!("{name}.pem")),
            self.path(&format!("{name}.key")),
        );
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }

    /// A rustls server config for the certificate `name`; with `client_ca`, clients must
    /// present a certificate from it.
    fn server_config(&self, name: &str, expired: bool, client_ca: bool) -> rustls::ServerConfig {
        let (cert, key) = self.leaf(name, expired);
        let chain = vec![CertificateDer::from_pem_file(&cert).unwrap()];
        let key = PrivateKeyDer::from_pem_file(&key).unwrap();
        let builder = rustls::ServerConfig::builder();
        let builder = if client_ca {
            let mut roots = rustls::RootCertStore::empty();
            roots
                .add(CertificateDer::from_pem_file(self.path("ca.pem")).unwrap())
                .unwrap();
            let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
                .build()
                .unwrap();
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let mut config = builder.with_single_cert(chain, key).unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        config
    }
}

fn make_ca(name: &str) -> (Issuer<'static, KeyPair>, String) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let cert = params.self_signed(&key).unwrap();
    (Issuer::new(params, key), cert.pem())
}

/// What an https origin saw.
#[derive(Default)]
struct Seen {
    /// TCP connections accepted.
    accepted: AtomicUsize,
    /// Handshakes that resumed a session.
    resumed: AtomicUsize,
    /// Handshakes in which the client sent a certificate.
    client_certs: AtomicUsize,
    /// Requests answered.
    requests: AtomicUsize,
    /// Health probes answered (`/health`).
    probes: AtomicUsize,
}

/// An https origin: hyper's HTTP/1.1 server over tokio-rustls, on a thread of its own.
fn https_origin(config: rustls::ServerConfig) -> (SocketAddr, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let shared = seen.clone();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let addr = origin::tokio_origin(move |stream| {
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        let (acceptor, seen) = (acceptor.clone(), shared.clone());
        async move {
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let conn = tls.get_ref().1;
            if conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                seen.resumed.fetch_add(1, Ordering::SeqCst);
            }
            if conn.peer_certificates().is_some() {
                seen.client_certs.fetch_add(1, Ordering::SeqCst);
            }
            let service = hyper::service::service_fn(move |req| handle(seen.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service)
                .await;
        }
    });
    (addr, seen)
}

async fn handle(
    seen: Arc<Seen>,
    req: http::Request<Incoming>,
) -> Result<http::Response<Full<Bytes>>, std::io::Error> {
    let path = req.uri().path().to_owned();
    if path == "/health" {
        seen.probes.fetch_add(1, Ordering::SeqCst);
    } else {
        seen.requests.fetch_add(1, Ordering::SeqCst);
    }
    let response = http::Response::builder();
    // The last segment decides: routes forward the whole path (`/app/big`).
    let (response, body) = match path.rsplit('/').next().unwrap_or_default() {
        "big" => (response, big_body()),
        "upload" => {
            let body = req
                .into_body()
                .collect()
                .await
                .map_err(std::io::Error::other)?
                .to_bytes();
            let sum: u64 = body.iter().map(|&b| u64::from(b)).sum();
            (
                response,
                format!("len={} sum={sum}", body.len()).into_bytes(),
            )
        }
        // The origin closes after answering, so the next request needs a new connection.
        "close" => (response.header("connection", "close"), b"closing".to_vec()),
        _ => (response, format!("tls origin: {path}").into_bytes()),
    };
    Ok(response.body(Full::new(Bytes::from(body))).unwrap())
}

/// Squall with one worker, a cleartext (http1, h2c) and a TLS (h2, http1) listener, the admin
/// listener, and `upstreams`: (name, `[[upstream]]` keys) pairs, each routed at `/{name}/`.
fn squall(upstreams: &[(&str, String)]) -> Squall {
    Squall::start(&config(upstreams))
}

/// The config [`squall`] starts with.
fn config(upstreams: &[(&str, String)]) -> String {
    // Each listener on a loopback address of its own, its port the kernel's: the harness finds
    // them in the log (`Squall::tls_addr`, `admin_addr`).
    let mut config = String::from(
        "[server]\nworkers = 1\n\n[[listen]]\naddress = \"ADDR\"\nprotocols = [\"http1\", \"h2c\"]\n\n\
         [[listen]]\naddress = \"127.0.0.3:0\"\ntls = true\nprotocols = [\"h2\", \"http1\"]\n\n\
         [[certificate]]\nhosts = [\"localhost\"]\nself_signed = true\n\n\
         [admin]\nlisten = \"127.0.0.2:0\"\n\n",
    );
    for (name, keys) in upstreams {
        config.push_str(&format!("[[upstream]]\nname = \"{name}\"\n{keys}\n\n"));
    }
    config.push_str("[[vhost]]\nhosts = [\"*\"]\n\n");
    for (name, _) in upstreams {
        config.push_str(&format!(
            "[[vhost.route]]\nprefix = \"/{name}/\"\nproxy = \"{name}\"\n\n"
        ));
    }
    config
}

/// `[[upstream]]` keys for a TLS origin at `addr` trusting `ca`, plus `extra`.
fn tls_upstream(addr: SocketAddr, ca: &PathBuf, extra: &str) -> String {
    format!("servers = [{{ address = \"{addr}\" }}]\ntls = true\nca = {ca:?}\n{extra}")
}

fn get(squall: &Squall, path: &str) -> squall_e2e::Response {
    let mut stream = squall.connect();
    roundtrip(
        &mut stream,
        &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n"),
    )
}

/// curl against the TLS listener (`-k`: Squall's own certificate is self-signed), over
/// `--http1.1` or `--http2`: the status, the HTTP version and the body.
fn curl_tls(squall: &Squall, version: &str, path: &str) -> (String, String) {
    let url = format!(
        "https://localhost:{}{path}",
        squall.tls_addr.unwrap().port()
    );
    let out = tool("curl")
        .args(["-sk", version, "--resolve"])
        .arg(format!(
            "localhost:{}:{}",
            squall.tls_addr.unwrap().port(),
            squall.tls_addr.unwrap().ip()
        ))
        .args(["-w", "\n%{http_code} %{http_version}", &url])
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or_default();
    (status.to_owned(), body.to_owned())
}

fn metrics(squall: &Squall) -> String {
    admin_get(admin_addr(squall), "/metrics").1
}

/// A sample's value, exactly as rendered (`name{labels}`), or 0 when absent.
fn sample(text: &str, series: &str) -> f64 {
    (text.lines())
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread")]
async fn verified_and_proxied_for_every_client_protocol() {
    let pki = Pki::new();
    let (origin, seen) = https_origin(pki.server_config("origin", false, false));
    // By IP address, without tls_server_name: the certificate's IP subjectAltName is checked.
    let squall = squall(&[("app", tls_upstream(origin, &pki.path("ca.pem"), ""))]);

    let response = get(&squall, "/app/h1");
    assert_eq!(response.status, 200, "{}", squall.log());
    assert_eq!(response.body_text(), "tls origin: /app/h1");

    let client = h2_client::h2c(squall.addr).await;
    let reply = h2_client::fetch(&client, "GET", "http://localhost/app/h2c", None).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, b"tls origin: /app/h2c");

    for (version, shown) in [("--http1.1", "1.1"), ("--http2", "2")] {
        let (status, body) = curl_tls(&squall, version, "/app/curl");
        assert_eq!(status, format!("200 {shown}"), "{body}");
        assert_eq!(body, "tls origin: /app/curl");
    }
    assert_eq!(seen.requests.load(Ordering::SeqCst), 4);
    let text = metrics(&squall);
    let handshakes = metric_sum(&text, "squall_upstream_tls_handshakes_total");
    assert!(handshakes >= 1.0, "{text}");
    assert_eq!(
        metric_sum(&text, "squall_upstream_tls_handshake_errors_total"),
        0.0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn keep_alive_reuses_one_tls_connection_and_a_new_one_resumes() {
    let pki = Pki::new();
    let (origin, seen) = https_origin(pki.server_config("origin", false, false));
    let squall = squall(&[("app", tls_upstream(origin, &pki.path("ca.pem"), ""))]);
    for i in 0..5 {
        let response = get(&squall, &format!("/app/{i}"));
        assert_eq!(response.status, 200);
        assert_eq!(response.body_text(), format!("tls origin: /app/{i}"));
    }
    assert_eq!(
        seen.accepted.load(Ordering::SeqCst),
        1,
        "one pooled TLS connection"
    );
    assert_eq!(seen.resumed.load(Ordering::SeqCst), 0);

    // The origin closes after `/close`: the next request connects again, and resumes.
    assert_eq!(get(&squall, "/app/close").status, 200);
    let response = get(&squall, "/app/after");
    assert_eq!(response.body_text(), "tls origin: /app/after");
    assert_eq!(seen.accepted.load(Ordering::SeqCst), 2, "{}", squall.log());
    assert_eq!(
        seen.resumed.load(Ordering::SeqCst),
        1,
        "the second handshake resumed"
    );
    let text = metrics(&squall);
    let series = "squall_upstream_tls_handshakes_total{upstream=\"app\",resumed=";
    assert_eq!(
        sample(&text, &format!("{series}\"false\"}}")),
        1.0,
        "{text}"
    );
    assert_eq!(sample(&text, &format!("{series}\"true\"}}")), 1.0, "{text}");
}

#[test]
fn certificates_that_fail_verification_are_refused_with_a_502() {
    let pki = Pki::new();
    let (good, good_seen) = https_origin(pki.server_config("good", false, false));
    let (expired, expired_seen) = https_origin(pki.server_config("expired", true, false));
    let squall = squall(&[
        ("unknown", tls_upstream(good, &pki.path("other-ca.pem"), "")),
        (
            "wrongname",
            tls_upstream(
                good,
                &pki.path("ca.pem"),
                "tls_server_name = \"other.test\"",
            ),
        ),
        ("expired", tls_upstream(expired, &pki.path("ca.pem"), "")),
        (
            "unverified",
            format!("servers = [{{ address = \"{expired}\" }}]\ntls = true\ntls_verify = false\n"),
        ),
    ]);
    assert!(
        squall
            .log()
            .contains("tls_verify = false: the certificates of upstream \"unverified\""),
        "the opt-out is warned about at start:\n{}",
        squall.log()
    );
    let cases = [
        ("unknown", "UnknownIssuer"),
        ("wrongname", "not valid for name \"other.test\""),
        ("expired", "certificate expired"),
    ];
    for (i, (upstream, reason)) in cases.into_iter().enumerate() {
        let response = get(&squall, &format!("/{upstream}/x"));
        assert_eq!(response.status, 502, "{upstream}");
        // The warning is written before the 502, but read off stderr by another thread.
        let needle = "TLS handshake with origin";
        assert!(
            squall.wait_log(needle, i + 1, Duration::from_secs(5)),
            "{}",
            squall.log()
        );
        let log = squall.log();
        let line = (log.lines())
            .filter(|l| l.contains(needle))
            .nth(i)
            .unwrap_or_else(|| panic!("no log line for {upstream}:\n{log}"));
        assert!(line.contains(&format!("upstream=\"{upstream}\"")), "{line}");
        assert!(line.contains(reason), "{line}");
        let server = if upstream == "expired" { expired } else { good };
        assert!(line.contains(&server.to_string()), "{line}");
        let text = metrics(&squall);
        let series = format!(
            "squall_upstream_tls_handshake_errors_total{{upstream=\"{upstream}\",reason=\"certificate\"}}"
        );
        assert!(sample(&text, &series) >= 1.0, "{series} in\n{text}");
    }
    assert_eq!(good_seen.requests.load(Ordering::SeqCst), 0);
    assert_eq!(expired_seen.requests.load(Ordering::SeqCst), 0);

    // tls_verify = false takes the expired certificate.
    let response = get(&squall, "/unverified/x");
    assert_eq!(response.status, 200, "{}", squall.log());
    assert_eq!(response.body_text(), "tls origin: /unverified/x");
}

#[test]
fn a_client_certificate_reaches_an_origin_that_requires_one() {
    let pki = Pki::new();
    let (origin, seen) = https_origin(pki.server_config("mtls", false, true));
    let (cert, key) = pki.leaf("client", false);
    let client = format!("tls_certificate = {cert:?}\ntls_certificate_key = {key:?}\n");
    let squall = squall(&[
        ("with", tls_upstream(origin, &pki.path("ca.pem"), &client)),
        ("without", tls_upstream(origin, &pki.path("ca.pem"), "")),
    ]);
    let response = get(&squall, "/with/x");
    assert_eq!(response.status, 200, "{}", squall.log());
    assert_eq!(response.body_text(), "tls origin: /with/x");
    assert_eq!(seen.client_certs.load(Ordering::SeqCst), 1);
    assert_eq!(get(&squall, "/without/x").status, 502);
    assert_eq!(seen.requests.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn large_bodies_both_ways() {
    let pki = Pki::new();
    let (origin, _) = https_origin(pki.server_config("origin", false, false));
    let squall = squall(&[("app", tls_upstream(origin, &pki.path("ca.pem"), ""))]);

    let response = get(&squall, "/app/big");
    assert_eq!(response.status, 200);
    assert!(
        response.body == big_body(),
        "8 MiB over HTTP/1.1, byte for byte: {} bytes, {:?}",
        response.body.len(),
        response.headers
    );
    let client = h2_client::h2c(squall.addr).await;
    let reply = h2_client::fetch(&client, "GET", "http://localhost/app/big", None).await;
    assert!(reply.body == big_body(), "8 MiB over h2c, byte for byte");

    let upload: Vec<u8> = (0..1 << 20).map(|i| (i % 253) as u8).collect();
    let sum: u64 = upload.iter().map(|&b| u64::from(b)).sum();
    let mut stream = squall.connect();
    let head = format!(
        "POST /app/upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n",
        upload.len()
    );
    std::io::Write::write_all(&mut stream, head.as_bytes()).unwrap();
    std::io::Write::write_all(&mut stream, &upload).unwrap();
    let response = squall_e2e::read_response(&mut stream).unwrap();
    assert_eq!(
        response.body_text(),
        format!("len={} sum={sum}", upload.len())
    );
    let reply = h2_client::fetch(
        &client,
        "POST",
        "http://localhost/app/upload",
        Some(upload.into()),
    )
    .await;
    assert_eq!(
        String::from_utf8_lossy(&reply.body),
        format!("len={} sum={sum}", 1 << 20)
    );
}

#[test]
fn health_probes_run_over_tls() {
    let pki = Pki::new();
    let (origin, seen) = https_origin(pki.server_config("origin", false, false));
    let probe = "health_check = { path = \"/health\", interval = \"100ms\" }";
    let squall = squall(&[("app", tls_upstream(origin, &pki.path("ca.pem"), probe))]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen.probes.load(Ordering::SeqCst) < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(seen.probes.load(Ordering::SeqCst) >= 2, "{}", squall.log());
    assert_eq!(get(&squall, "/app/x").status, 200);
}

#[test]
fn check_reports_unusable_files_at_their_keys() {
    let pki = Pki::new();
    let dir = TempDir::new();
    let file = dir.path().join("squall.toml");
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not PEM at all\n").unwrap();
    let config = format!(
        "[[listen]]\naddress = \"127.0.0.1:1\"\n\n\
         [[upstream]]\nname = \"a\"\nservers = [{{ address = \"127.0.0.1:9\" }}]\ntls = true\n\
         ca = \"missing.pem\"\n\n\
         [[upstream]]\nname = \"b\"\nservers = [{{ address = \"127.0.0.1:9\" }}]\ntls = true\n\
         tls_certificate = {garbage:?}\ntls_certificate_key = {:?}\n",
        pki.path("ca.pem")
    );
    std::fs::write(&file, config).unwrap();
    let output = std::process::Command::new(squall_e2e::squall_bin())
        .args(["check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    let at = format!(
        "{}:8:6: upstream \"a\": cannot read ca file ",
        file.display()
    );
    assert!(lines[0].starts_with(&at), "{stderr}");
    let at = format!(
        "{}:14:19: upstream \"b\": no usable certificate in ",
        file.display()
    );
    assert!(lines[1].starts_with(&at), "{stderr}");
    assert_eq!(lines.len(), 2, "{stderr}");
}

#[test]
fn a_reload_rereads_the_files_and_warns_about_tls_verify_again() {
    let pki = Pki::new();
    let (origin, _) = https_origin(pki.server_config("origin", false, false));
    let ca = format!("ca = {:?}\n", pki.path("ca.pem"));
    let text = config(&[("app", tls_upstream(origin, &pki.path("ca.pem"), ""))]);
    let squall = Squall::start(&text);
    assert_eq!(get(&squall, "/app/a").status, 200);

    // A CA file that is not there refuses the reload; the running config serves on.
    squall.rewrite_config(&text.replace("ca.pem", "missing.pem"));
    squall.signal(libc::SIGHUP);
    assert!(
        squall.wait_log("reload refused", 1, Duration::from_secs(5)),
        "{}",
        squall.log()
    );
    assert!(
        squall.log().contains("cannot read ca file"),
        "{}",
        squall.log()
    );
    assert_eq!(get(&squall, "/app/b").status, 200);

    // tls_verify = false is warned about on the reload that brings it.
    let warning = "tls_verify = false: the certificates of upstream \"app\"";
    assert!(!squall.log().contains(warning));
    squall.rewrite_config(&text.replace(&ca, "tls_verify = false\n"));
    squall.signal(libc::SIGHUP);
    let reloaded = squall.wait_log("configuration reloaded", 1, Duration::from_secs(5));
    assert!(reloaded, "{}", squall.log());
    assert!(
        squall.wait_log(warning, 1, Duration::from_secs(5)),
        "{}",
        squall.log()
    );
    assert_eq!(get(&squall, "/app/c").status, 200);
}

#[test]
fn an_origin_that_speaks_no_tls_or_stays_silent_fails_the_connect() {
    let lateness = squall_e2e::Lateness::start();
    // A plain HTTP origin answers the ClientHello with text; a silent one never answers.
    let plain_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let plain = plain_listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut stream in plain_listener.incoming().flatten() {
            let answer = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n";
            let _ = std::io::Write::write_all(&mut stream, answer);
            std::thread::sleep(Duration::from_millis(500));
        }
    });
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let held = std::thread::spawn(move || {
        let held: Vec<_> = silent.incoming().take(1).collect();
        std::thread::sleep(Duration::from_secs(3));
        drop(held);
    });
    let keys = |addr: SocketAddr| {
        format!("servers = [{{ address = \"{addr}\" }}]\ntls = true\nconnect_timeout = \"500ms\"\n")
    };
    let squall = squall(&[("plain", keys(plain)), ("silent", keys(silent_addr))]);
    assert_eq!(get(&squall, "/plain/x").status, 502);
    let started = Instant::now();
    let status = get(&squall, "/silent/x").status;
    assert!(status == 502 || status == 504, "{status}");
    // The connect timeout covers the handshake.
    lateness.assert_within(
        "the failed connect",
        started.elapsed(),
        Duration::from_secs(2),
    );
    let text = metrics(&squall);
    let errors = "squall_upstream_tls_handshake_errors_total";
    let plain = format!("{errors}{{upstream=\"plain\",reason=\"protocol\"}}");
    assert_eq!(sample(&text, &plain), 1.0, "{text}");
    let silent = format!("{errors}{{upstream=\"silent\",reason=\"timeout\"}}");
    assert_eq!(sample(&text, &silent), 1.0, "{text}");
    let _ = held.join();
}

/// An https origin on raw tokio-rustls that answers every request on a connection with a small
/// keep-alive response, and records how each connection ended: `true` for the client's
/// close_notify (a read of 0), `false` for a TCP close without it (rustls's unexpected EOF).
fn close_watching_origin(
    config: rustls::ServerConfig,
) -> (SocketAddr, Arc<std::sync::Mutex<Vec<bool>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ends = Arc::new(std::sync::Mutex::new(Vec::new()));
    let shared = ends.clone();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let addr = origin::tokio_origin(move |stream| {
        let (acceptor, ends) = (acceptor.clone(), shared.clone());
        async move {
            let Ok(mut tls) = acceptor.accept(stream).await else {
                return;
            };
            let mut pending = Vec::new();
            let mut buf = [0u8; 4096];
            let clean = loop {
                match tls.read(&mut buf).await {
                    Ok(0) => break true,
                    Ok(n) => pending.extend_from_slice(&buf[..n]),
                    Err(_) => break false,
                }
                while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                    pending.drain(..end + 4);
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                    if tls.write_all(answer).await.is_err() {
                        return;
                    }
                }
            };
            ends.lock().unwrap().push(clean);
        }
    });
    (addr, ends)
}

#[test]
fn squall_sends_close_notify_before_closing_an_origin_connection() {
    let pki = Pki::new();
    let (origin, ends) = close_watching_origin(pki.server_config("origin", false, false));
    let ca = pki.path("ca.pem");
    let text = config(&[("app", tls_upstream(origin, &ca, ""))]);
    let squall = Squall::start(&text);
    assert_eq!(get(&squall, "/app/x").status, 200);
    // A reload that changes the upstream closes its idle pooled connection.
    let changed = config(&[(
        "app",
        tls_upstream(origin, &ca, "response_timeout = \"30s\""),
    )]);
    let listen = squall.addr.to_string();
    squall.rewrite_config(&changed.replace("ADDR", &listen));
    squall.signal(libc::SIGHUP);
    let reloaded = squall.wait_log("configuration reloaded", 1, Duration::from_secs(5));
    assert!(reloaded, "{}", squall.log());
    let deadline = Instant::now() + Duration::from_secs(5);
    while ends.lock().unwrap().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(*ends.lock().unwrap(), [true], "ended with close_notify");
}
