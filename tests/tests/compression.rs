//! Response compression (a route's `compress`) against independent decoders: curl's own
//! (`--compressed`, gzip and brotli) and the flate2, brotli and zstd crates' on the raw bytes
//! curl saved, over HTTP/1.1 and HTTP/2, cleartext and TLS; a cached route storing one variant
//! per set of accepted codings; the responses that must go out as they are; an
//! `Accept-Encoding` of a thousand codings; and static files (`root` with `compress` and
//! `precompressed`): compressed as they are read (one stream over many reads), fresh siblings
//! served as they are, a stale one passed over, one that leads out of the root never opened,
//! HEAD as GET, ranges of the file's own bytes, and `squall check` on the new options.

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
    let listeners = listeners();
    let config = format!(
        r#"{listeners}
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

/// The server section, a cleartext listener (HTTP/1.1 and h2c), a TLS one (h2 and HTTP/1.1)
/// with a self-signed certificate, and the admin listener: each on a loopback address of its
/// own (Squall refuses a repeated one), its port the kernel's, which the harness finds in the
/// log (`Squall::tls_addr`, `admin_addr`).
fn listeners() -> String {
    r#"[server]
workers = 1

[[listen]]
address = "ADDR"
protocols = ["http1", "h2c"]

[[listen]]
address = "127.0.0.3:0"
tls = true
protocols = ["h2", "http1"]

[[certificate]]
hosts = ["localhost"]
self_signed = true

[admin]
listen = "127.0.0.2:0"
"#
    .to_owned()
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

/// A static site beside Squall: `page.html` (compressed as it is sent), `app.js` with fresh
/// `.br` and `.gz` siblings and a stale `.zst` one, `leak.css` whose `.gz` sibling is a link
/// out of the root, a PNG and a short text file. Held by the `TempDir`.
struct Site {
    squall: Squall,
    _dir: TempDir,
    js: Vec<u8>,
    br: Vec<u8>,
    gz: Vec<u8>,
    stale_zst: Vec<u8>,
}

/// The script the site serves: 12 KiB that compresses.
fn script() -> Vec<u8> {
    (0..300)
        .map(|i| format!("export const v{i:03} = \"value {i}\";\n"))
        .collect::<String>()
        .into_bytes()
}

fn encode(coding: &str, data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    match coding {
        "gzip" => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        "br" => {
            let mut out = Vec::new();
            let mut e = brotli::CompressorWriter::new(&mut out, 4096, 11, 22);
            e.write_all(data).unwrap();
            drop(e);
            out
        }
        "zstd" => zstd::stream::encode_all(data, 19).unwrap(),
        other => panic!("no encoder for {other}"),
    }
}

/// About 850 KiB of text: over ten reads of the file, compressed one after the other.
fn big_text() -> Vec<u8> {
    (0..32_768)
        .map(|i| format!("{i:08} lorem ipsum {}\n", i * 7919 % 10007))
        .collect::<String>()
        .into_bytes()
}

/// Writes `data` at `path` with the modification time `mtime`.
fn write_at(path: &std::path::Path, data: &[u8], mtime: std::time::SystemTime) {
    std::fs::write(path, data).unwrap();
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(mtime).unwrap();
}

/// Squall serving the site from a `root` route with `compress = {}` and `precompressed`.
fn site() -> Site {
    let dir = TempDir::new();
    let at = |p: &str| dir.path().join(p);
    std::fs::create_dir_all(at("site")).unwrap();
    let then = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let js = script();
    let (br, gz) = (encode("br", &js), encode("gzip", &js));
    let stale_zst = encode("zstd", b"STALE: an older app.js");
    std::fs::write(at("site/page.html"), page()).unwrap();
    // The siblings have the file's own time (as `gzip -k` leaves it): fresh. The .zst is a
    // minute older than the file: left behind by an older build.
    write_at(&at("site/app.js"), &js, then);
    write_at(&at("site/app.js.br"), &br, then);
    write_at(&at("site/app.js.gz"), &gz, then);
    let before = then - std::time::Duration::from_secs(60);
    write_at(&at("site/app.js.zst"), &stale_zst, before);
    std::fs::write(at("site/leak.css"), "body { color: red; }\n".repeat(40)).unwrap();
    std::fs::write(at("secret.gz"), encode("gzip", b"TOP SECRET")).unwrap();
    std::os::unix::fs::symlink("../secret.gz", at("site/leak.css.gz")).unwrap();
    std::fs::write(at("site/logo.png"), vec![7u8; 4096]).unwrap();
    std::fs::write(at("site/small.txt"), "short").unwrap();
    std::fs::write(at("site/big.txt"), big_text()).unwrap();
    let root = at("site");
    let config = format!(
        r#"{}
[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/"
root = "{}"
compress = {{}}
precompressed = ["br", "zstd", "gzip"]
"#,
        listeners(),
        root.display()
    );
    Site {
        squall: Squall::start(&config),
        _dir: dir,
        js,
        br,
        gz,
        stale_zst,
    }
}

#[test]
fn static_files_are_compressed_as_they_are_sent_over_http1_and_h2() {
    let site = site();
    let page = page();
    for (name, protocol, tls) in PROTOCOLS {
        let addr = (site.squall.tls_addr)
            .filter(|_| tls)
            .unwrap_or(site.squall.addr);
        let identity = curl(addr, tls, "/page.html", protocol);
        assert_eq!(identity.field("content-encoding"), None, "{name}");
        assert_eq!(identity.all("vary"), ["Accept-Encoding"], "{name}");
        let strong = identity.field("etag").expect("an etag").to_owned();
        assert!(strong.starts_with('"'), "{name}: {strong}");
        let weak = format!("W/{strong}");
        for coding in ["gzip", "br", "zstd"] {
            let accept = format!("Accept-Encoding: {coding}");
            let args = [&["-H", &accept][..], protocol].concat();
            let got = curl(addr, tls, "/page.html", &args);
            assert_eq!(got.status, 200, "{name} {coding}");
            assert_eq!(got.field("content-encoding"), Some(coding), "{name}");
            assert_eq!(
                got.field("content-length"),
                None,
                "{name} {coding}: streamed"
            );
            assert_eq!(got.field("accept-ranges"), None, "{name} {coding}");
            assert_eq!(got.field("etag"), Some(weak.as_str()), "{name} {coding}");
            assert_eq!(got.all("vary"), ["Accept-Encoding"], "{name} {coding}");
            assert!(
                got.body.len() < page.len() / 4,
                "{name} {coding}: compressed"
            );
            assert!(
                decode(coding, &got.body) == page.as_bytes(),
                "{name} {coding}"
            );
            // HEAD gets the GET's head.
            let head = curl(addr, tls, "/page.html", &[&args[..], &["-I"]].concat());
            assert_eq!(head.status, 200, "{name} {coding} HEAD");
            assert_eq!(head.field("content-encoding"), Some(coding), "{name} HEAD");
            assert_eq!(head.field("content-length"), None, "{name} HEAD");
            assert_eq!(head.field("etag"), Some(weak.as_str()), "{name} HEAD");
            assert_eq!(head.all("vary"), ["Accept-Encoding"], "{name} HEAD");
        }
        // curl's own decoding, and a revalidation of the compressed answer.
        let got = curl(
            addr,
            tls,
            "/page.html",
            &[&["--compressed"][..], protocol].concat(),
        );
        assert!(
            got.body == page.as_bytes(),
            "{name}: curl's decoding differs"
        );
        let none_match = format!("If-None-Match: {weak}");
        let args = [
            &["-H", "Accept-Encoding: gzip", "-H", &none_match][..],
            protocol,
        ]
        .concat();
        let got = curl(addr, tls, "/page.html", &args);
        assert_eq!((got.status, got.body.len()), (304, 0), "{name}");
        assert_eq!(got.field("etag"), Some(weak.as_str()), "{name} 304");
        assert_eq!(got.all("vary"), ["Accept-Encoding"], "{name} 304");
        // A range is of the file's own bytes.
        let args = [
            &["-H", "Accept-Encoding: gzip", "-H", "Range: bytes=0-8"][..],
            protocol,
        ];
        let got = curl(addr, tls, "/page.html", &args.concat());
        assert_eq!(
            (got.status, &got.body[..]),
            (206, &page.as_bytes()[..9]),
            "{name}"
        );
        assert_eq!(got.field("content-encoding"), None, "{name} range");
        assert_eq!(got.all("vary"), ["Accept-Encoding"], "{name} range");
    }
    // A file of many reads is one compressed stream, chunked on HTTP/1.1.
    let big = big_text();
    assert!(big.len() > 10 * 64 * 1024);
    for (coding, protocol) in [("gzip", "--http1.1"), ("br", "--http2-prior-knowledge")] {
        let accept = format!("Accept-Encoding: {coding}");
        let got = curl(
            site.squall.addr,
            false,
            "/big.txt",
            &["-H", &accept, protocol],
        );
        assert_eq!(got.field("content-encoding"), Some(coding), "{protocol}");
        assert!(
            decode(coding, &got.body) == big,
            "{protocol}: the whole file"
        );
        let chunked = got
            .field("transfer-encoding")
            .is_some_and(|v| v == "chunked");
        assert_eq!(chunked, protocol == "--http1.1", "{protocol}");
    }
    // HTTP/1.0 could take a body of unknown length only by a close: the file as it is.
    let mut stream = std::net::TcpStream::connect(site.squall.addr).unwrap();
    let request = "GET /page.html HTTP/1.0\r\nHost: localhost\r\nAccept-Encoding: gzip\r\n\r\n";
    std::io::Write::write_all(&mut stream, request.as_bytes()).unwrap();
    let old = squall_e2e::read_response(&mut stream).expect("a response");
    assert_eq!(old.header("content-encoding"), None, "HTTP/1.0");
    assert_eq!(old.header("vary"), Some("Accept-Encoding"), "HTTP/1.0");
    assert!(old.body == page.as_bytes(), "HTTP/1.0");
    // Left as they are: another type, and a file below min_bytes.
    let gzip = ["-H", "Accept-Encoding: gzip, br, zstd"];
    for (path, len) in [("/logo.png", "4096"), ("/small.txt", "5")] {
        let got = curl(site.squall.addr, false, path, &gzip);
        assert_eq!(got.field("content-encoding"), None, "{path}");
        assert_eq!(got.field("content-length"), Some(len), "{path}");
        // The route has `precompressed`: any file could have a sibling (as Caddy says).
        assert_eq!(got.all("vary"), ["Accept-Encoding"], "{path}");
    }
    let metrics = admin_get(admin_addr(&site.squall), "/metrics").1;
    let compressed = metric_sum(&metrics, "squall_compressed_responses_total");
    assert_eq!(compressed, 4.0 * 4.0 + 2.0, "{metrics}");
}

#[test]
fn fresh_precompressed_siblings_are_served_to_clients_that_accept_them() {
    let site = site();
    for (name, protocol, tls) in PROTOCOLS {
        let addr = (site.squall.tls_addr)
            .filter(|_| tls)
            .unwrap_or(site.squall.addr);
        let get = |accept: &str, extra: &[&str]| {
            let accept = format!("Accept-Encoding: {accept}");
            curl(
                addr,
                tls,
                "/app.js",
                &[&["-H", &accept][..], extra, protocol].concat(),
            )
        };
        let identity = get("identity", &[]);
        assert!(identity.body == site.js, "{name}");
        let js_len = site.js.len().to_string();
        assert_eq!(identity.field("content-length"), Some(js_len.as_str()));
        assert_eq!(identity.all("vary"), ["Accept-Encoding"], "{name}");
        let js_etag = identity.field("etag").unwrap().to_owned();
        let mut etags = vec![js_etag.clone()];
        let cases = [
            ("gzip, br", "br", &site.br),
            ("gzip, br;q=0.5", "gzip", &site.gz),
            ("br;q=0, *", "gzip", &site.gz),
            ("x-gzip", "gzip", &site.gz),
        ];
        for (accept, coding, sibling) in cases {
            let got = get(accept, &[]);
            assert_eq!(got.status, 200, "{name} {accept}");
            assert_eq!(
                got.field("content-encoding"),
                Some(coding),
                "{name} {accept}"
            );
            assert!(
                got.body == *sibling,
                "{name} {accept}: the sibling's own bytes"
            );
            let len = sibling.len().to_string();
            assert_eq!(
                got.field("content-length"),
                Some(len.as_str()),
                "{name} {accept}"
            );
            assert_eq!(got.all("vary"), ["Accept-Encoding"], "{name} {accept}");
            let etag = got.field("etag").unwrap().to_owned();
            assert!(etag.starts_with('"'), "{name} {accept}: strong, {etag}");
            // HEAD gets the GET's head, and the sibling's own validators revalidate it.
            let head = get(accept, &["-I"]);
            assert_eq!(
                head.field("content-length"),
                Some(len.as_str()),
                "{name} HEAD"
            );
            assert_eq!(head.field("content-encoding"), Some(coding), "{name} HEAD");
            assert_eq!(head.field("etag"), Some(etag.as_str()), "{name} HEAD");
            let none_match = format!("If-None-Match: {etag}");
            let revalidated = get(accept, &["-H", &none_match]);
            assert_eq!(revalidated.status, 304, "{name} {accept}");
            etags.push(etag);
        }
        etags.sort();
        etags.dedup();
        assert_eq!(
            etags.len(),
            3,
            "{name}: the file and each sibling, a tag each: {etags:?}"
        );
        // The .zst sibling is older than the file: compressed from the file instead.
        let zstd = get("zstd", &[]);
        assert_eq!(zstd.field("content-encoding"), Some("zstd"), "{name}");
        assert_eq!(
            zstd.field("content-length"),
            None,
            "{name}: not the sibling"
        );
        assert!(zstd.body != site.stale_zst, "{name}: the stale sibling");
        assert!(decode("zstd", &zstd.body) == site.js, "{name}");
        // A range is of the file's own bytes, whatever the client accepts.
        let ranged = get("br, gzip", &["-H", "Range: bytes=0-5"]);
        assert_eq!(
            (ranged.status, &ranged.body[..]),
            (206, &site.js[..6]),
            "{name}"
        );
        assert_eq!(ranged.field("content-encoding"), None, "{name} range");
        // A sibling that leads out of the root is never opened: the file, compressed.
        let leak = curl(
            addr,
            tls,
            "/leak.css",
            &[&["-H", "Accept-Encoding: gzip"][..], protocol].concat(),
        );
        assert_eq!(leak.field("content-encoding"), Some("gzip"), "{name}");
        assert_eq!(
            leak.field("content-length"),
            None,
            "{name}: not the link's file"
        );
        let css = decode("gzip", &leak.body);
        assert!(
            css.starts_with(b"body { color: red; }"),
            "{name}: {:?}",
            String::from_utf8_lossy(&css)
        );
    }
}

#[test]
fn check_takes_compress_on_a_root_route_and_names_a_bad_sibling_coding() {
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.path().join("site")).unwrap();
    let check = |route_lines: &str| {
        let text = format!(
            "[[listen]]\naddress = \"127.0.0.1:8080\"\n\n[[vhost]]\n\
             [[vhost.route]]\nprefix = \"/\"\nroot = \"site\"\n{route_lines}"
        );
        let path = dir.path().join("s.toml");
        std::fs::write(&path, text).unwrap();
        let out = std::process::Command::new(squall_e2e::squall_bin())
            .args(["check", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (
            out.status.success(),
            stderr.replace(&path.display().to_string(), "s.toml"),
        )
    };
    let (ok, stderr) = check("compress = {}\nprecompressed = [\"br\", \"zstd\", \"gzip\"]\n");
    assert!(ok, "{stderr}");
    let (ok, stderr) = check("precompressed = [\"br\", \"deflate\"]\n");
    assert!(!ok);
    let expected = "s.toml:8:24: unknown coding \"deflate\" in precompressed";
    assert!(stderr.contains(expected), "{stderr}");
}
