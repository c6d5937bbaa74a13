//! One reading of every request target, probed as an attacker would: every equivalent
//! spelling of a protected path (escapes, dot segments, doubled slashes, encoded slashes and
//! backslashes, `;params`, trailing dots and spaces, overlong UTF-8, NUL, absolute-form),
//! over HTTP/1.1 and HTTP/2, in clear text and over TLS, against a `root` route behind
//! `auth_basic`, a proxy route behind `allow` and one behind `auth_basic`, in front of an
//! origin that reads paths as leniently as common frameworks do. Every spelling must get the
//! protected route's answer (401, 403) or a 400, and the origin must never see it.
//!
//! The spellings are checked first against the origin's own reading: each one names the
//! protected path there, so a Squall that routed the raw target (or forwarded it to a route
//! without the rules) would let it through and fail these tests.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use base64::Engine;
use squall_e2e::{Squall, TempDir, admin_addr, admin_get, metric_sum, roundtrip, tool};

#[path = "support/origin.rs"]
mod origin;
use origin::{field, raw_origin, response};

/// Spellings of `/admin/panel` (only 127.0.0.2 may see it). The first is the canonical one.
const ADMIN: &[&str] = &[
    "/admin/panel",
    "//admin/panel",
    "/./admin/panel",
    "/%2e/admin/panel",
    "/admin/./panel",
    "/admin//panel",
    "/admin/x/../panel",
    "/%61dmin/panel",
    "/adm%69n/panel",
    "/%61dmin/panel/../panel",
    "/x/../admin/panel",
    "/x/%2e%2e/admin/panel",
    "/x/%2E%2E/admin/panel",
    "/x/.%2e/admin/panel",
    "/x/%2e./admin/panel",
    "/admin%2Fpanel",
    "/admin%2fpanel",
    "/%2Fadmin/panel",
    "/x%2F..%2Fadmin/panel",
    "/x/..%2Fadmin/panel",
    "/x/%2e%2e%2fadmin/panel",
    "/admin%5Cpanel",
    "/x%5C..%5Cadmin/panel",
    "/admin\\panel",
    "/x\\..\\admin/panel",
    "/admin;x/panel",
    "/admin;/panel",
    "/x/..;/admin/panel",
    "/admin%3Bx/panel",
    "/admin./panel",
    "/admin%2e/panel",
    "/admin%20/panel",
    "/admin.%20/panel",
    "/x/%C0%AE%C0%AE/admin/panel",
    "/x/%c0%ae%c0%ae/admin/panel",
    "/admin%C0%AFpanel",
    "/admin/panel%00",
    "/admin/panel%00.png",
];

/// Spellings of `/api/x` (Basic authentication).
const API: &[&str] = &[
    "/api/x",
    "//api/x",
    "/./api/x",
    "/%61pi/x",
    "/ap%69/x",
    "/x/../api/x",
    "/x/%2e%2e/api/x",
    "/api%2Fx",
    "/api;jsessionid=1/x",
    "/api./x",
    "/api%5Cx",
];

/// Spellings of `/private/secret.txt` (a `root` route behind Basic authentication, beside a
/// `root` route for `/` on the same directory).
const PRIVATE: &[&str] = &[
    "/private/secret.txt",
    "//private/secret.txt",
    "/./private/secret.txt",
    "/%70rivate/secret.txt",
    "/x/../private/secret.txt",
    "/x/%2e%2e/private/secret.txt",
    "/private%2Fsecret.txt",
    "/%2Fprivate/secret.txt",
    "/private;x/secret.txt",
    "/private./secret.txt",
    "/private%5Csecret.txt",
];

const SECRET: &str = "the secret file\n";

/// How a lenient origin framework reads a target's path: the query dropped, escapes decoded
/// once (`%2F` and `%5C` too, and overlong two-byte UTF-8 as the ASCII byte it spells), the
/// path cut at a NUL, `\` read as `/`, each segment's `;params` dropped, then its trailing
/// dots and spaces, then empty and dot segments removed (clamped at the root). Written here
/// independently of Squall's own code.
fn lenient_read(target: &str) -> String {
    let path = target.split('?').next().unwrap_or("");
    let bytes = path.as_bytes();
    let mut decoded = Vec::new();
    let mut i = 0;
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let escape = |at: usize| -> Option<u8> {
        if bytes.get(at) != Some(&b'%') {
            return None;
        }
        Some(hex(*bytes.get(at + 1)?)? * 16 + hex(*bytes.get(at + 2)?)?)
    };
    while i < bytes.len() {
        match escape(i) {
            Some(lead @ (0xC0 | 0xC1)) if escape(i + 3).is_some_and(|b| b & 0xC0 == 0x80) => {
                decoded.push(((lead & 1) << 6) | (escape(i + 3).unwrap() & 0x3F));
                i += 6;
            }
            Some(byte) => {
                decoded.push(byte);
                i += 3;
            }
            None => {
                decoded.push(bytes[i]);
                i += 1;
            }
        }
    }
    if let Some(nul) = decoded.iter().position(|&b| b == 0) {
        decoded.truncate(nul);
    }
    let text = String::from_utf8_lossy(&decoded).replace('\\', "/");
    let mut segments: Vec<String> = Vec::new();
    for segment in text.split('/') {
        let segment = segment.split(';').next().unwrap_or("");
        let segment = match segment.trim_end_matches(' ') {
            dots @ ("." | "..") => dots,
            other => other.trim_end_matches(['.', ' ']),
        };
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            name => segments.push(name.to_owned()),
        }
    }
    format!("/{}", segments.join("/"))
}

/// What the origin was asked for: (its reading of the target, the Host it was sent).
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// The lenient origin: every request is recorded as it reads it, and answered 200 with that
/// reading (so `/admin/panel` by any spelling would be served the admin page).
fn lenient_origin() -> (SocketAddr, Seen) {
    let seen: Seen = Arc::default();
    let record = seen.clone();
    let addr = raw_origin(move |head| {
        let target = head.split(' ').nth(1).unwrap_or("");
        let read = lenient_read(target);
        let host = field(head, "host").unwrap_or("").to_owned();
        record.lock().unwrap().push((read.clone(), host));
        response("200 OK", &["content-type: text/plain"], read.as_bytes())
    });
    (addr, seen)
}

fn users_file(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("htpasswd");
    let hash = bcrypt::hash("pw", 4).unwrap();
    std::fs::write(&path, format!("staff:{hash}\n")).unwrap();
    path
}

fn basic() -> String {
    let token = base64::engine::general_purpose::STANDARD.encode("staff:pw");
    format!("Basic {token}")
}

fn config(origin: SocketAddr, users: &Path, root: &Path) -> String {
    let auth = format!(
        "auth_basic = {{ realm = \"Staff\", users_file = \"{}\" }}",
        users.display()
    );
    let root = root.display();
    format!(
        r#"[server]
workers = 1

[admin]
listen = "127.0.0.9:0"

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[[listen]]
address = "127.0.0.3:0"
tls = true
protocols = ["h2", "http1"]

[[certificate]]
hosts = ["app.test", "files.test", "public.test"]
self_signed = true

[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]

[[vhost]]
hosts = ["app.test"]

[[vhost.route]]
prefix = "/admin/"
proxy = "app"
allow = ["127.0.0.2"]

[[vhost.route]]
prefix = "/api/"
proxy = "app"
{auth}

[[vhost.route]]
prefix = "/"
proxy = "app"

[[vhost]]
hosts = ["public.test"]

[[vhost.route]]
prefix = "/"
proxy = "app"

[[vhost]]
hosts = ["files.test"]

[[vhost.route]]
prefix = "/private/"
root = "{root}"
{auth}

[[vhost.route]]
prefix = "/"
root = "{root}"
"#
    )
}

/// How a spelling is sent.
#[derive(Clone, Copy, Debug)]
enum Protocol {
    H1,
    H2c,
    H1Tls,
    H2Tls,
}

const PROTOCOLS: [Protocol; 4] = [
    Protocol::H1,
    Protocol::H2c,
    Protocol::H1Tls,
    Protocol::H2Tls,
];

/// A curl command that speaks `protocol` to `host` on Squall's listener for it, and the
/// URL of its root.
fn curl_to(squall: &Squall, protocol: Protocol, host: &str) -> (std::process::Command, String) {
    let (scheme, addr, flags): (_, _, &[&str]) = match protocol {
        Protocol::H1 => ("http", squall.addr, &["--http1.1"]),
        Protocol::H2c => ("http", squall.addr, &["--http2-prior-knowledge"]),
        Protocol::H1Tls => ("https", squall.tls_addr.unwrap(), &["--http1.1", "-k"]),
        Protocol::H2Tls => ("https", squall.tls_addr.unwrap(), &["--http2", "-k"]),
    };
    let port = addr.port();
    let mut command = tool("curl");
    command
        .args(["-s", "--max-time", "10"])
        .args(flags)
        .args(["--resolve", &format!("{host}:{port}:{}", addr.ip())])
        .stderr(Stdio::inherit());
    (command, format!("{scheme}://{host}:{port}"))
}

/// Sends `target` as it is (curl's `--request-target`) to `host` over `protocol`, from
/// local address `from`, with `fields`; returns the status and the body.
fn curl(
    squall: &Squall,
    protocol: Protocol,
    host: &str,
    target: &str,
    from: &str,
    fields: &[String],
) -> (u16, String) {
    let (mut command, url) = curl_to(squall, protocol, host);
    command
        .args(["-w", "\n%{http_code}", "--interface", from])
        .args(["--request-target", target]);
    for field in fields {
        command.args(["-H", field]);
    }
    let output = command.arg(format!("{url}/")).output().expect("run curl");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

struct Setup {
    squall: Squall,
    seen: Seen,
    _dir: TempDir,
}

fn setup() -> Setup {
    let dir = TempDir::new();
    let root = dir.path().join("www");
    std::fs::create_dir_all(root.join("private")).unwrap();
    std::fs::write(root.join("private/secret.txt"), SECRET).unwrap();
    std::fs::write(root.join("public.txt"), "public\n").unwrap();
    let users = users_file(dir.path());
    let (origin, seen) = lenient_origin();
    let squall = Squall::start(&config(origin, &users, &root));
    assert!(squall.tls_addr.is_some(), "a TLS listener");
    Setup {
        squall,
        seen,
        _dir: dir,
    }
}

#[test]
fn every_spelling_names_the_protected_path_to_a_lenient_origin() {
    for (paths, protected) in [
        (ADMIN, "/admin/panel"),
        (API, "/api/x"),
        (PRIVATE, "/private/secret.txt"),
    ] {
        for path in paths {
            let read = lenient_read(path);
            assert!(
                read == protected || read.starts_with(&format!("{protected}.")),
                "{path} reads as {read}, not {protected}: not an attack on this origin"
            );
        }
    }
    assert!(ADMIN.len() + API.len() + PRIVATE.len() >= 40);
}

#[test]
fn protected_paths_refuse_every_spelling_over_every_protocol() {
    let Setup { squall, seen, _dir } = setup();
    let mut refused = 0;
    for protocol in PROTOCOLS {
        let cases = [
            (ADMIN, "app.test", &[403, 400][..]),
            (API, "app.test", &[401, 400][..]),
            (PRIVATE, "files.test", &[401, 400][..]),
        ];
        for (paths, host, allowed) in cases {
            for path in paths {
                let (status, body) = curl(&squall, protocol, host, path, "127.0.0.1", &[]);
                assert!(
                    allowed.contains(&status),
                    "{protocol:?} {host}{path}: {status} {body:?}, expected one of {allowed:?}"
                );
                assert!(!body.contains(SECRET.trim()), "{protocol:?} {path}: {body}");
                refused += 1;
            }
        }
    }
    let seen = seen.lock().unwrap();
    assert!(
        seen.is_empty(),
        "the origin saw protected paths: {:?}",
        &seen[..seen.len().min(10)]
    );
    drop(seen);
    // Each refusal is counted: 400s as ambiguous targets or bad requests, the others by the
    // rule that refused them.
    let metrics = admin_get(admin_addr(&squall), "/metrics").1;
    let counted = metric_sum(&metrics, "squall_access_denied_total")
        + metric_sum(&metrics, "squall_refused_total");
    assert!(counted >= f64::from(refused), "{counted} < {refused}");
    assert!(metric_sum(&metrics, "squall_request_target_ambiguous_total") > 0.0);
}

#[test]
fn canonical_spellings_still_work_and_reach_the_origin_normalised() {
    let Setup { squall, seen, _dir } = setup();
    let auth = [format!("Authorization: {}", basic())];
    for protocol in PROTOCOLS {
        // The allowed address sees the admin page, by its plain spelling and by an
        // equivalent one, which reaches the origin normalised.
        for path in [
            "/admin/panel",
            "//admin/./x/../panel",
            "/%61dmin/panel?q=%2e",
        ] {
            let (status, body) = curl(&squall, protocol, "app.test", path, "127.0.0.2", &[]);
            assert_eq!(
                (status, body.as_str()),
                (200, "/admin/panel"),
                "{protocol:?} {path}"
            );
        }
        let (status, body) = curl(&squall, protocol, "app.test", "/api/x", "127.0.0.1", &auth);
        assert_eq!((status, body.as_str()), (200, "/api/x"), "{protocol:?}");
        for path in ["/private/secret.txt", "//private/./secret.txt"] {
            let (status, body) = curl(&squall, protocol, "files.test", path, "127.0.0.1", &auth);
            assert_eq!(
                (status, body.as_str()),
                (200, SECRET),
                "{protocol:?} {path}"
            );
        }
        let (status, body) = curl(
            &squall,
            protocol,
            "files.test",
            "/%70ublic.txt",
            "127.0.0.1",
            &[],
        );
        assert_eq!((status, body.as_str()), (200, "public\n"), "{protocol:?}");
        // `;` and an encoded slash that stay within one route are not refused.
        let (status, body) = curl(
            &squall,
            protocol,
            "app.test",
            "/x;v=1/a%2Fb",
            "127.0.0.1",
            &[],
        );
        assert_eq!((status, body.as_str()), (200, "/x/a/b"), "{protocol:?}");
    }
    assert_eq!(seen.lock().unwrap().len(), 4 * 5);
}

/// An absolute-form target is routed and forwarded by its own authority (RFC 9112 §3.2.2):
/// `Host` cannot send a protected path to another vhost, nor a public one to the origin
/// under another name.
#[test]
fn absolute_form_is_routed_and_forwarded_by_its_authority() {
    let Setup { squall, seen, _dir } = setup();
    for protocol in [Protocol::H1, Protocol::H1Tls] {
        let host = ["Host: public.test".to_owned()];
        let target = "http://app.test/admin/panel";
        let (status, _) = curl(&squall, protocol, "public.test", target, "127.0.0.1", &host);
        assert_eq!(
            status, 403,
            "{protocol:?}: routed by the target's authority"
        );
        // `https://` on a clear-text listener, as nginx does, is read for its authority only.
        for target in [
            "http://public.test/admin/panel",
            "https://public.test/admin/panel",
        ] {
            let host = ["Host: app.test".to_owned()];
            let (status, body) = curl(&squall, protocol, "app.test", target, "127.0.0.1", &host);
            assert_eq!(
                (status, body.as_str()),
                (200, "/admin/panel"),
                "{protocol:?}"
            );
        }
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 4);
    for (read, host) in seen.iter() {
        assert_eq!(
            (read.as_str(), host.as_str()),
            ("/admin/panel", "public.test")
        );
    }
}

/// Two `Authorization` fields on a route with `auth_basic` are a 400, not a choice.
#[test]
fn two_authorization_fields_are_refused() {
    let Setup { squall, seen, _dir } = setup();
    let auth = format!("Authorization: {}", basic());
    let wrong = "Authorization: Basic c3RhZmY6bm8=".to_owned();
    for protocol in PROTOCOLS {
        for fields in [[auth.clone(), wrong.clone()], [wrong.clone(), auth.clone()]] {
            let (status, _) = curl(
                &squall,
                protocol,
                "app.test",
                "/api/x",
                "127.0.0.1",
                &fields,
            );
            assert_eq!(status, 400, "{protocol:?} {fields:?}");
        }
    }
    assert!(seen.lock().unwrap().is_empty());
}

/// TRACE gets 405 with `Allow` unless the route has `allow_trace`; `OPTIONS *` gets the
/// server's 200 with `Allow`.
#[test]
fn trace_is_refused_and_options_asterisk_answered() {
    let Setup { squall, seen, _dir } = setup();
    let mut stream = squall.connect();
    let response = roundtrip(
        &mut stream,
        "TRACE /x HTTP/1.1\r\nHost: public.test\r\nCookie: session=1\r\n\r\n",
    );
    assert_eq!(response.status, 405);
    assert!(response.header("allow").is_some_and(|a| a.contains("GET")));
    assert!(!response.body_text().contains("session=1"));

    let mut stream = squall.connect();
    let response = roundtrip(
        &mut stream,
        "OPTIONS * HTTP/1.1\r\nHost: public.test\r\n\r\n",
    );
    assert_eq!(response.status, 200);
    assert!(
        response
            .header("allow")
            .is_some_and(|a| a.contains("OPTIONS"))
    );
    assert_eq!(response.header("content-length"), Some("0"));
    // The connection goes on.
    let response = roundtrip(&mut stream, "GET /y HTTP/1.1\r\nHost: public.test\r\n\r\n");
    assert_eq!(response.status, 200);

    for protocol in [Protocol::H2c, Protocol::H2Tls, Protocol::H1Tls] {
        let output = curl_method(&squall, protocol, "TRACE", "/x");
        assert_eq!(output, 405, "{protocol:?}");
    }
    for protocol in PROTOCOLS {
        let (mut command, url) = curl_to(&squall, protocol, "public.test");
        let output = command
            .args(["-i", "-X", "OPTIONS", "--request-target", "*"])
            .arg(format!("{url}/"))
            .output()
            .expect("run curl");
        let text = String::from_utf8_lossy(&output.stdout).to_ascii_lowercase();
        assert!(
            text.starts_with("http/") && text.contains(" 200"),
            "{protocol:?}: {text}"
        );
        assert!(text.contains("allow: get, head"), "{protocol:?}: {text}");
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "only GET /y reached the origin: {seen:?}");
    drop(seen);
    let metrics = admin_get(admin_addr(&squall), "/metrics").1;
    assert_eq!(metric_sum(&metrics, "squall_trace_refused_total"), 4.0);
    assert!(
        metrics.contains("squall_refused_total{worker=\"0\",status=\"405\"} 4\n"),
        "{metrics}"
    );
}

/// `allow_trace = true` lets TRACE through to the origin.
#[test]
fn allow_trace_forwards_trace() {
    let (origin, seen) = lenient_origin();
    let routes = r#"
[[vhost.route]]
prefix = "/debug/"
proxy = "app"
allow_trace = true

[[vhost.route]]
prefix = "/"
proxy = "app"
"#;
    let config = squall_e2e::proxy_config(origin, routes);
    let squall = Squall::start(&config);
    let mut stream = squall.connect();
    let response = roundtrip(&mut stream, "TRACE /debug/x HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(response.status, 200);
    let response = roundtrip(&mut stream, "TRACE /x HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(response.status, 405);
    assert_eq!(seen.lock().unwrap().len(), 1);
}

/// The status of `method path` to `public.test` over `protocol`.
fn curl_method(squall: &Squall, protocol: Protocol, method: &str, path: &str) -> u16 {
    let (mut command, url) = curl_to(squall, protocol, "public.test");
    let output = command
        .args(["-o", "/dev/null", "-w", "%{http_code}", "-X", method])
        .arg(format!("{url}{path}"))
        .output()
        .expect("run curl");
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}
