//! A real browser over HTTP/3: headless Chromium (its own QUIC, TLS and QPACK, Google's)
//! loads a page and its scripts from Squall over HTTP/3, and learns HTTP/3 from `Alt-Svc`.
//!
//! Chromium trusts the test certificate by its key's hash (`--ignore-certificate-errors-spki-
//! list`) and is told that `localhost` is 127.0.0.1, where Squall listens. What it used is read
//! from the page itself (`nextHopProtocol` of the navigation and of every resource, written
//! into the DOM that `--dump-dom` prints) and from its net log.

use std::process::Stdio;
use std::time::Duration;

use squall_e2e::{Squall, TempDir, openssl_cert, tool};

/// A page whose second script writes the protocol of the page and of each resource into it.
const PAGE: &str = "<html><body><div id=p>none</div><script src=/a.js></script><script src=/b.js></script></body></html>";
const REPORT: &str = "document.getElementById('p').textContent = performance.getEntriesByType('navigation')[0].nextHopProtocol + ' ' + performance.getEntriesByType('resource').map(function (r) { return r.nextHopProtocol; }).join(',');";

fn config(dir: &TempDir) -> String {
    let (cert, key) = openssl_cert(dir.path(), "localhost");
    format!(
        r#"[server]
workers = 2

[[certificate]]
hosts = ["localhost"]
cert = {cert:?}
key = {key:?}

[[listen]]
address = "ADDR"
tls = true
protocols = ["h2", "http1", "h3"]

[[vhost]]
hosts = ["*"]

[[vhost.route]]
exact = "/"
respond = {{ status = 200, body = "{PAGE}", headers = {{ "content-type" = "text/html" }} }}

[[vhost.route]]
exact = "/a.js"
respond = {{ status = 200, body = "window.a = 1;", headers = {{ "content-type" = "application/javascript" }} }}

[[vhost.route]]
exact = "/b.js"
respond = {{ status = 200, body = "{REPORT}", headers = {{ "content-type" = "application/javascript" }} }}
"#
    )
}

/// The base64 SHA-256 of the certificate's public key, as Chromium's SPKI list takes it.
fn spki_hash(dir: &TempDir) -> String {
    let cert = dir.path().join("localhost.pem");
    let script = format!(
        "openssl x509 -in {} -pubkey -noout | openssl pkey -pubin -outform der | \
         openssl dgst -sha256 -binary | openssl base64",
        cert.display()
    );
    let out = tool("sh").args(["-c", &script]).output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Runs headless Chromium on `url` with `extra` flags; its `--dump-dom` output.
fn chromium(dir: &TempDir, url: &str, extra: &[String]) -> String {
    let profile = dir.path().join(format!("profile-{}", extra.len()));
    let mut child = tool("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-quic",
        ])
        .args(["--host-resolver-rules=MAP localhost 127.0.0.1"])
        .arg(format!(
            "--ignore-certificate-errors-spki-list={}",
            spki_hash(dir)
        ))
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--virtual-time-budget=5000", "--dump-dom"])
        .args(extra)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish in 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The page and both scripts come over HTTP/3 when the origin is known to speak it.
#[test]
fn chromium_loads_a_page_over_http3() {
    let dir = TempDir::new();
    let squall = Squall::start(&config(&dir));
    let origin = format!("localhost:{}", squall.addr.port());
    let force = vec![format!("--origin-to-force-quic-on={origin}")];
    let dom = chromium(&dir, &format!("https://{origin}/"), &force);
    assert!(dom.contains("<div id=\"p\">h3 h3,h3</div>"), "{dom}");
    let log = squall.log();
    assert!(!log.contains("panicked"), "{log}");
}

/// Loaded over TCP, the page's answer carries `Alt-Svc: h3=":PORT"`: Chromium records the
/// alternative service and starts a QUIC job for the page's next request (its net log says
/// so). Chromium then uses it only with a certificate from a publicly trusted root (its rule
/// for QUIC found by Alt-Svc), which a test certificate is not, so what this checks is that
/// the advertisement is one a browser takes.
#[test]
fn chromium_learns_http3_from_alt_svc() {
    let dir = TempDir::new();
    let squall = Squall::start(&config(&dir));
    let origin = format!("localhost:{}", squall.addr.port());
    let net_log = dir.path().join("net.json");
    let flags = vec![format!("--log-net-log={}", net_log.display())];
    let dom = chromium(&dir, &format!("https://{origin}/"), &flags);
    assert!(dom.contains("<div id=\"p\">h2 h2,h2</div>"), "{dom}");
    let log = std::fs::read_to_string(&net_log).expect("the net log");
    let found = format!("quic localhost:{}", squall.addr.port());
    assert!(
        log.contains(&found),
        "Chromium recorded no alternative service {found:?}"
    );
}
