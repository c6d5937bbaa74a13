//! Response compression (a route's `compress`) against independent decoders: curl's own
//! (`--compressed`, gzip and brotli) and the flate2, brotli and zstd crates' on the raw bytes
//! curl saved, over HTTP/1.1 and HTTP/2, cleartext and TLS; a cached route storing one variant
//! per set of accepted codings; the responses that must go out as they are; and an
//! `Accept-Encoding` of a thousand codings.

use std::io::Read;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;

use squall_e2e::{PathCounts, Squall, TempDir, admin_addr, admin_get, metric_sum};

#[path = "support/origin.rs"]
mod origin;
use origin::hyper_origin;

/// The page the origin serves: 20 KiB of HTML that compresses.
fn page() -> String {
    (0..400)
        .map(|i| format!("<p>line {i:03}: the quick brown fox jumps</p>\n"))
        .collect()
}

/// Requests the origin saw, by path.
type Seen = PathCounts;

async fn handle(
    seen: Arc<Seen>,
    req: http::Request<Incoming>,
) -> Result<http::Response<Full<Bytes>>, std::io::Error> {
    let path = req.uri().path().to_owned();
    seen.hit(&path);
    let name = path.rsplit('/').next().unwrap_or_default();
    let media = if name == "image" {
        "image/png"
    } else {
        "text/html; charset=utf-8"
    };
    let response = http::Response::builder()
        .header("content-type", media)
        .header("etag", "\"p1\"");
    let response = match name {
        "page" => response,
        "cached" => response.header("cache-control", "max-age=60"),
        "encoded" => response.header("content-encoding", "gzip"),
        "no-transform" => response.header("cache-control", "no-transform"),
        "image" => response,
        "small" => return Ok(response.body(Full::new(Bytes::from("small"))).unwrap()),
        _ => response.status(404),
    };
    Ok(response.body(Full::new(Bytes::from(page()))).unwrap())
}

struct Setup {
    squall: Squall,
    seen: Arc<Seen>,
}

/// Squall with a compressing route `/p/` and a compressing cached route `/c/` to the origin,
/// on a cleartext listener (HTTP/1.1 and h2c) and a TLS one (h2 and HTTP/1.1).
fn setup() -> Setup {
    let seen = Arc::new(Seen::default());
    let shared = seen.clone();
    let origin = hyper_origin(move |req| handle(shared.clone(), req));
    let (tls, admin) = (free_port(), free_port());
    let config = format!(
        r#"[server]
workers = 1

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[[listen]]
address = "127.0.0.1:{tls}"
tls = true
protocols = ["h2", "http1"]

[[certificate]]
hosts = ["localhost"]
self_signed = true

[admin]
listen = "127.0.0.1:{admin}"

[cache]

[[upstream]]
name = "app"
servers = [{{ address = "{origin}" }}]

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/p/"
proxy = "app"
compress = {{}}

[[vhost.route]]
prefix = "/c/"
proxy = "app"
cache = true
compress = {{ types = ["text/*"], level = {{ gzip = 5, br = 5, zstd = 3 }} }}
"#
    );
    Setup {
        squall: Squall::start(&config),
        seen,
    }
}

/// A loopback port free a moment ago: a second listener and the admin one cannot both be on
/// `127.0.0.1:0` (Squall refuses a repeated address).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().unwrap().port()
}

/// What curl got: status, header fields (names lowercase) and the body as saved.
struct Got {
    status: u16,
    fields: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Got {
    fn field(&self, name: &str) -> Option<&str> {
        (self.fields.iter().find(|(n, _)| n == name)).map(|(_, v)| v.as_str())
    }

    fn all(&self, name: &str) -> Vec<&str> {
        (self.fields.iter().filter(|(n, _)| n == name))
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// Runs curl on `addr` for `path` with `args` (`--http2`, `--compressed`, `-H ...`); `tls`
/// picks the scheme.
fn curl(addr: SocketAddr, tls: bool, path: &str, args: &[&str]) -> Got {
    let dir = TempDir::new();
    let (head, body) = (dir.path().join("head"), dir.path().join("body"));
    let scheme = if tls { "https" } else { "http" };
    let url = format!("{scheme}://localhost:{}{path}", addr.port());
    let resolve = format!("localhost:{}:{}", addr.port(), addr.ip());
    let output = squall_e2e::tool("curl")
        .args(["-sS", "-k", "--max-time", "10", "--resolve", &resolve])
        .args(args)
        .arg("-D")
        .arg(&head)
        .arg("-o")
        .arg(&body)
        .arg(&url)
        .output()
        .expect("curl runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{url} {args:?}: {stderr}");
    let head = std::fs::read_to_string(&head).unwrap();
    let mut lines = head.lines();
    let status_line = lines.next().expect("a status line");
    let status = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let fields = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let body = std::fs::read(&body).unwrap_or_default();
    Got {
        status,
        fields,
        body,
    }
}

/// The protocols a client reaches Squall by: curl's arguments, and whether over TLS.
const PROTOCOLS: [(&str, &[&str], bool); 4] = [
    ("http/1.1", &["--http1.1"], false),
    ("h2c", &["--http2-prior-knowledge"], false),
    ("https http/1.1", &["--http1.1"], true),
    ("h2", &["--http2"], true),
];

fn decode(coding: &str, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match coding {
        "gzip" => flate2::read::GzDecoder::new(data).read_to_end(&mut out),
        "br" => brotli::Decompressor::new(data, 4096).read_to_end(&mut out),
        "zstd" => zstd::stream::read::Decoder::new(data)
            .unwrap()
            .read_to_end(&mut out),
        other => panic!("no decoder for {other}"),
    }
    .unwrap_or_else(|e| panic!("{coding} does not decode: {e}"));
    out
}

#[test]
fn curl_decodes_gzip_and_brotli_over_http1_and_h2() {
    let setup = setup();
    let page = page();
    for (name, protocol, tls) in PROTOCOLS {
        let addr = setup
            .squall
            .tls_addr
            .filter(|_| tls)
            .unwrap_or(setup.squall.addr);
        // curl's own list (deflate, gzip, br, zstd) gets brotli; a gzip-only one gets gzip.
        for (accept, coding) in [(None, "br"), (Some("Accept-Encoding: gzip"), "gzip")] {
            let mut args = vec!["--compressed"];
            args.extend_from_slice(protocol);
            if let Some(accept) = accept {
                args.extend_from_slice(&["-H", accept]);
            }
            let got = curl(addr, tls, "/p/page", &args);
            assert_eq!(got.status, 200, "{name}");
            assert_eq!(got.field("content-encoding"), Some(coding), "{name}");
            assert_eq!(got.field("content-length"), None, "{name}: streamed");
            assert_eq!(got.field("etag"), Some("W/\"p1\""), "{name}");
            assert_eq!(got.all("vary"), ["Accept-Encoding"], "{name}");
            assert!(
                got.body == page.as_bytes(),
                "{name} {coding}: curl's decoding differs"
            );
        }
    }
    let metrics = admin_get(admin_addr(&setup.squall), "/metrics").1;
    let compressed = metric_sum(&metrics, "squall_compressed_responses_total");
    assert_eq!(compressed, 8.0, "{metrics}");
    let bytes_in = metric_sum(&metrics, "squall_compress_bytes_in_total");
    assert_eq!(bytes_in, 8.0 * page.len() as f64);
    let bytes_out = metric_sum(&metrics, "squall_compress_bytes_out_total");
    assert!(bytes_out > 0.0 && bytes_out < bytes_in / 4.0, "{bytes_out}");
}

#[test]
fn each_coding_decodes_with_its_crate_over_http1_and_h2() {
    let setup = setup();
    let page = page();
    for (name, protocol, tls) in PROTOCOLS {
        let addr = setup
            .squall
            .tls_addr
            .filter(|_| tls)
            .unwrap_or(setup.squall.addr);
        for coding in ["gzip", "br", "zstd"] {
            let accept = format!("Accept-Encoding: {coding}");
            let mut args = vec!["-H", &accept];
            args.extend_from_slice(protocol);
            let got = curl(addr, tls, "/p/page", &args);
            assert_eq!(got.field("content-encoding"), Some(coding), "{name}");
            assert!(
                got.body.len() < page.len() / 4,
                "{name} {coding}: compressed"
            );
            assert!(
                decode(coding, &got.body) == page.as_bytes(),
                "{name} {coding}"
            );
        }
    }
}

#[test]
fn a_cached_route_stores_one_variant_per_coding_set() {
    let setup = setup();
    let page = page();
    let addr = setup.squall.addr;
    let requests = [
        ("gzip", Some("gzip"), "MISS"),
        ("br, gzip", Some("br"), "MISS"),
        ("gzip", Some("gzip"), "HIT"),
        ("gzip;q=1, br;q=0.5", Some("br"), "HIT"),
        ("GZIP ,br", Some("br"), "HIT"),
        ("identity", None, "MISS"),
        ("identity", None, "HIT"),
    ];
    for (i, (accept, coding, x_cache)) in requests.into_iter().enumerate() {
        let accept = format!("Accept-Encoding: {accept}");
        let protocol = if i % 2 == 0 {
            "--http1.1"
        } else {
            "--http2-prior-knowledge"
        };
        let got = curl(addr, false, "/c/cached", &["-H", &accept, protocol]);
        assert_eq!(
            got.field("x-cache"),
            Some(x_cache),
            "request {i} ({accept})"
        );
        assert_eq!(got.field("content-encoding"), coding, "request {i}");
        assert_eq!(got.all("vary"), ["Accept-Encoding"], "request {i}");
        let body = match coding {
            Some(coding) => decode(coding, &got.body),
            None => got.body,
        };
        assert!(
            body == page.as_bytes(),
            "request {i}: decodes once to the page"
        );
    }
    // One request per distinct set of accepted codings, whatever the weights.
    assert_eq!(setup.seen.count("/c/cached"), 3);
}

#[test]
fn responses_that_must_not_be_compressed_go_out_as_they_are() {
    let setup = setup();
    let page = page();
    let addr = setup.squall.addr;
    let gzip = ["-H", "Accept-Encoding: gzip, br, zstd"];
    for path in ["/p/encoded", "/p/no-transform", "/p/image"] {
        let got = curl(addr, false, path, &gzip);
        let origin_coding = (path == "/p/encoded").then_some("gzip");
        assert_eq!(got.field("content-encoding"), origin_coding, "{path}");
        assert_eq!(got.field("content-length"), Some("17200"), "{path}");
        assert_eq!(got.field("etag"), Some("\"p1\""), "{path}");
        assert!(got.body == page.as_bytes(), "{path}: the origin's bytes");
    }
    let small = curl(addr, false, "/p/small", &gzip);
    assert_eq!(small.field("content-encoding"), None);
    assert_eq!(small.body, b"small");
    let head = curl(addr, false, "/p/page", &[&gzip[..], &["-I"]].concat());
    assert_eq!(head.status, 200);
    assert_eq!(head.field("content-encoding"), None, "HEAD");
    assert_eq!(head.all("vary"), ["Accept-Encoding"], "HEAD");
    let range = curl(
        addr,
        false,
        "/p/page",
        &[&gzip[..], &["-H", "Range: bytes=0-9"]].concat(),
    );
    assert_eq!(range.field("content-encoding"), None, "Range");
    assert!(range.body == page.as_bytes(), "the origin ignores ranges");
}

#[test]
fn an_accept_encoding_of_a_thousand_codings_is_read_whole() {
    let setup = setup();
    let page = page();
    let mut value: String = (0..1000).map(|i| format!("c{i};q=0.9,")).collect();
    value.push_str("gzip;q=0.1");
    assert!(
        value.len() < 16 * 1024,
        "{} bytes fit the head limit",
        value.len()
    );
    let accept = format!("Accept-Encoding: {value}");
    for protocol in ["--http1.1", "--http2-prior-knowledge"] {
        let got = curl(
            setup.squall.addr,
            false,
            "/p/page",
            &["-H", &accept, protocol],
        );
        assert_eq!(got.status, 200, "{protocol}");
        assert_eq!(got.field("content-encoding"), Some("gzip"), "{protocol}");
        assert!(decode("gzip", &got.body) == page.as_bytes(), "{protocol}");
    }
    let refused = format!("{accept}, gzip;q=0");
    let got = curl(setup.squall.addr, false, "/p/page", &["-H", &refused]);
    assert_eq!(got.field("content-encoding"), None);
    assert!(got.body == page.as_bytes());
}
