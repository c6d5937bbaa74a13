//! Static files (`root` routes) through the real binary: content and fields, 304s, 412, HEAD,
//! ranges and 416 over HTTP/1.1 and HTTP/2, cleartext and TLS (curl, the `h2` crate and raw
//! sockets as clients); a range from the middle of a 256 MiB sparse file; a path-traversal
//! corpus refused; index files and the directory redirect; a slow reader of a large file
//! holding little memory while another client is served; `squall check` on a missing root.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use squall_e2e::{Squall, TempDir, read_response, read_response_head, squall_bin};

#[path = "support/h2_client.rs"]
mod h2_client;

const TEXT: &[u8] = b"hello, static world\n";
const MARKER: &[u8] = b"<<MIDDLE OF THE BIG FILE>>";
const BIG_BYTES: u64 = 256 * 1024 * 1024;
const MID_BYTES: usize = 4 * 1024 * 1024;

/// The files served, beside a secret outside every root.
fn tree(dir: &TempDir) {
    let at = |path: &str| dir.path().join(path);
    for d in ["site/dir", "site/empty", "tree/f"] {
        std::fs::create_dir_all(at(d)).unwrap();
    }
    std::fs::write(at("secret.txt"), "TOP SECRET").unwrap();
    std::fs::write(at("site/a.txt"), TEXT).unwrap();
    std::fs::write(at("site/index.html"), "<h1>home</h1>").unwrap();
    std::fs::write(at("site/dir/index.htm"), "dir index").unwrap();
    std::fs::write(at("site/style.css"), "body{}").unwrap();
    let mid: Vec<u8> = (0..MID_BYTES).map(|i| (i % 251) as u8).collect();
    std::fs::write(at("site/mid.bin"), mid).unwrap();
    // 256 MiB, sparse: set_len, then a marker in the middle.
    let big = std::fs::File::create(at("site/big.bin")).unwrap();
    big.set_len(BIG_BYTES).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&big, MARKER, BIG_BYTES / 2).unwrap();
    std::os::unix::fs::symlink("a.txt", at("site/in-link")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", at("site/out-link")).unwrap();
    std::fs::write(at("tree/f/target.txt"), "followed").unwrap();
    std::os::unix::fs::symlink("target.txt", at("tree/f/in-link")).unwrap();
    std::os::unix::fs::symlink("../../secret.txt", at("tree/f/out-link")).unwrap();
}

fn start(dir: &TempDir) -> Squall {
    tree(dir);
    let root = dir.path().display();
    Squall::start(&format!(
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

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/f/"
root = "{root}/tree"
root_follow_symlinks = true

[[vhost.route]]
prefix = "/"
root = "{root}/site"
index = ["index.html", "index.htm"]
"#
    ))
}

/// What a client got: status, fields (names lowercase) and body.
#[derive(Debug)]
struct Got {
    status: u16,
    fields: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Got {
    fn field(&self, name: &str) -> Option<&str> {
        (self.fields.iter().find(|(n, _)| n == name)).map(|(_, v)| v.as_str())
    }
}

/// The four ways in: HTTP/1.1 and HTTP/2, cleartext and TLS.
#[derive(Clone, Copy, Debug)]
enum Way {
    H1,
    H2c,
    H1Tls,
    H2Tls,
}

const WAYS: [Way; 4] = [Way::H1, Way::H2c, Way::H1Tls, Way::H2Tls];

/// Runs curl for `method` `path` with extra fields, over `way`.
fn curl(squall: &Squall, way: Way, method: &str, path: &str, fields: &[&str]) -> Got {
    let dir = TempDir::new();
    let (head, body) = (dir.path().join("head"), dir.path().join("body"));
    let (addr, scheme, version) = match way {
        Way::H1 => (squall.addr, "http", "--http1.1"),
        Way::H2c => (squall.addr, "http", "--http2-prior-knowledge"),
        Way::H1Tls => (squall.tls_addr.unwrap(), "https", "--http1.1"),
        Way::H2Tls => (squall.tls_addr.unwrap(), "https", "--http2"),
    };
    let url = format!("{scheme}://localhost:{}{path}", addr.port());
    let resolve = format!("localhost:{}:{}", addr.port(), addr.ip());
    let mut command = squall_e2e::tool("curl");
    command.args([
        "-sS",
        "-k",
        "--max-time",
        "20",
        "--resolve",
        &resolve,
        version,
    ]);
    match method {
        "HEAD" => command.arg("-I"),
        _ => command.args(["-X", method]),
    };
    for field in fields {
        command.args(["-H", field]);
    }
    let output = command
        .arg("-D")
        .arg(&head)
        .arg("-o")
        .arg(&body)
        .arg(&url)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{way:?} {url}: {stderr}");
    let head = std::fs::read_to_string(&head).unwrap();
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let fields = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let body = if method == "HEAD" {
        Vec::new()
    } else {
        std::fs::read(&body).unwrap_or_default()
    };
    Got {
        status,
        fields,
        body,
    }
}

/// One HTTP/1.1 request written as is (a traversal curl would normalise) on a new connection.
fn raw_h1(addr: SocketAddr, request: &str) -> Got {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let response = read_response(&mut stream).expect("a response");
    Got {
        status: response.status,
        fields: (response.headers.iter())
            .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
            .collect(),
        body: response.body,
    }
}

fn get(addr: SocketAddr, target: &str, fields: &str) -> Got {
    raw_h1(
        addr,
        &format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n{fields}\r\n"),
    )
}

#[test]
fn files_come_with_validators_conditions_head_and_ranges_over_every_protocol() {
    let dir = TempDir::new();
    let squall = start(&dir);
    let len = TEXT.len().to_string();
    for way in WAYS {
        let got = curl(&squall, way, "GET", "/a.txt", &[]);
        assert_eq!((got.status, &got.body[..]), (200, TEXT), "{way:?}");
        assert_eq!(got.field("content-type"), Some("text/plain; charset=utf-8"));
        assert_eq!(got.field("content-length"), Some(len.as_str()), "{way:?}");
        assert_eq!(got.field("accept-ranges"), Some("bytes"), "{way:?}");
        // As every other answer of Squall's own.
        assert_eq!(got.field("server"), Some("squall"), "{way:?}");
        let etag = got.field("etag").expect("an etag").to_owned();
        let modified = got
            .field("last-modified")
            .expect("last-modified")
            .to_owned();
        assert!(
            etag.starts_with('"') && etag.matches('-').count() == 2,
            "{etag}"
        );
        let css = curl(&squall, way, "GET", "/style.css", &[]);
        assert_eq!(css.field("content-type"), Some("text/css; charset=utf-8"));

        let none_match = format!("If-None-Match: {etag}");
        let got = curl(&squall, way, "GET", "/a.txt", &[&none_match]);
        assert_eq!((got.status, got.body.len()), (304, 0), "{way:?}");
        assert_eq!(got.field("etag"), Some(etag.as_str()), "{way:?}");
        let since = format!("If-Modified-Since: {modified}");
        assert_eq!(curl(&squall, way, "GET", "/a.txt", &[&since]).status, 304);
        let old = "If-Modified-Since: Mon, 01 Jan 2001 00:00:00 GMT";
        assert_eq!(curl(&squall, way, "GET", "/a.txt", &[old]).status, 200);
        let other = "If-Match: \"other\"";
        assert_eq!(curl(&squall, way, "GET", "/a.txt", &[other]).status, 412);
        let unmodified = "If-Unmodified-Since: Mon, 01 Jan 2001 00:00:00 GMT";
        assert_eq!(
            curl(&squall, way, "GET", "/a.txt", &[unmodified]).status,
            412
        );

        let head = curl(&squall, way, "HEAD", "/a.txt", &[]);
        assert_eq!(head.status, 200, "{way:?}");
        assert_eq!(head.field("content-length"), Some(len.as_str()), "{way:?}");
        assert_eq!(head.field("etag"), Some(etag.as_str()), "{way:?}");

        let got = curl(&squall, way, "GET", "/a.txt", &["Range: bytes=7-12"]);
        assert_eq!(
            (got.status, &got.body[..]),
            (206, &b"static"[..]),
            "{way:?}"
        );
        let whole = format!("bytes 7-12/{len}");
        assert_eq!(got.field("content-range"), Some(whole.as_str()), "{way:?}");
        let if_range = format!("If-Range: {etag}");
        let got = curl(
            &squall,
            way,
            "GET",
            "/a.txt",
            &["Range: bytes=-6", &if_range],
        );
        assert_eq!(
            (got.status, &got.body[..]),
            (206, &b"world\n"[..]),
            "{way:?}"
        );
        let stale = "If-Range: \"old\"";
        let got = curl(&squall, way, "GET", "/a.txt", &["Range: bytes=0-4", stale]);
        assert_eq!((got.status, &got.body[..]), (200, TEXT), "{way:?}");
        let got = curl(&squall, way, "GET", "/a.txt", &["Range: bytes=500-"]);
        assert_eq!(got.status, 416, "{way:?}");
        let star = format!("bytes */{len}");
        assert_eq!(got.field("content-range"), Some(star.as_str()), "{way:?}");
        // Several ranges get the whole file (docs/CONFIG.md).
        let got = curl(&squall, way, "GET", "/a.txt", &["Range: bytes=0-1,4-5"]);
        assert_eq!((got.status, &got.body[..]), (200, TEXT), "{way:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_h2_crate_gets_files_and_ranges() {
    let dir = TempDir::new();
    let squall = start(&dir);
    let client = h2_client::h2c(squall.addr).await;
    let base = format!("http://localhost:{}", squall.addr.port());
    let got = h2_client::fetch(&client, "GET", &format!("{base}/a.txt"), None).await;
    assert_eq!((got.status, &got.body[..]), (200, TEXT));
    let mid = h2_client::fetch(&client, "GET", &format!("{base}/mid.bin"), None).await;
    assert_eq!(mid.status, 200);
    assert_eq!(mid.body.len(), MID_BYTES);
    assert!(
        mid.body
            .iter()
            .enumerate()
            .all(|(i, &b)| b == (i % 251) as u8)
    );
    let mut ready = client.clone().ready().await.unwrap();
    let request = http::Request::get(format!("{base}/big.bin"))
        .header("range", middle_range())
        .body(())
        .unwrap();
    let (response, _) = ready.send_request(request, true).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 206);
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk: Bytes = chunk.unwrap();
        body.flow_control().release_capacity(chunk.len()).unwrap();
        bytes.extend_from_slice(&chunk);
    }
    assert_middle(&bytes);
    // The traversal corpus's HTTP/2 forms are refused too.
    for path in [
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/..%2fsecret.txt",
        "/a.txt%00.html",
        "/out-link",
        "/in-link",
        "/f/out-link",
    ] {
        let got = h2_client::fetch(&client, "GET", &format!("{base}{path}"), None).await;
        // 400 for a target that is malformed once read (a `..` above the root, a NUL), 404
        // from the file handler for the rest.
        assert!([400, 404].contains(&got.status), "{path}: {}", got.status);
        assert!(
            !String::from_utf8_lossy(&got.body).contains("SECRET"),
            "{path}"
        );
    }
}

/// 16 bytes before the marker to 16 after it.
fn middle_range() -> String {
    let first = BIG_BYTES / 2 - 16;
    let last = BIG_BYTES / 2 + MARKER.len() as u64 + 15;
    format!("bytes={first}-{last}")
}

fn assert_middle(bytes: &[u8]) {
    let mut expected = vec![0u8; 16];
    expected.extend_from_slice(MARKER);
    expected.extend_from_slice(&[0; 16]);
    assert_eq!(bytes, expected);
}

#[test]
fn a_range_from_the_middle_of_a_256_mib_file() {
    let dir = TempDir::new();
    let squall = start(&dir);
    let range = format!("Range: {}", middle_range());
    let got = get(squall.addr, "/big.bin", &format!("{range}\r\n"));
    assert_eq!(got.status, 206);
    let first = BIG_BYTES / 2 - 16;
    let last = first + 32 + MARKER.len() as u64 - 1;
    let content_range = format!("bytes {first}-{last}/{BIG_BYTES}");
    assert_eq!(got.field("content-range"), Some(content_range.as_str()));
    assert_middle(&got.body);
    for way in [Way::H2Tls, Way::H1Tls] {
        let got = curl(&squall, way, "GET", "/big.bin", &[&range]);
        assert_eq!(got.status, 206, "{way:?}");
        assert_middle(&got.body);
    }
}

#[test]
fn every_path_out_of_the_root_is_refused() {
    let dir = TempDir::new();
    let squall = start(&dir);
    // Sanity: the corpus's neighbours are served.
    assert_eq!(get(squall.addr, "/a.txt", "").status, 200);
    assert_eq!(get(squall.addr, "/f/in-link", "").body, b"followed");
    let corpus = [
        "/../etc/passwd",
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E/%2e%2e/etc/passwd",
        "/..%2fsecret.txt",
        "/a/..%2F..%2Fsecret.txt",
        "/%2Fetc%2Fpasswd",
        "/dir%5c..%5c..%5csecret.txt",
        "/a.txt%00.html",
        "/%00",
        "/..\\secret.txt",
        "/dir/../../secret.txt",
        "/./../secret.txt",
        "/out-link",
        "/in-link",
        "/f/out-link",
        "/f/%2e%2e/%2e%2e/secret.txt",
        "http://localhost/../secret.txt",
        "http://localhost/%2e%2e/secret.txt",
        "http://localhost/out-link",
    ];
    for target in corpus {
        let got = get(squall.addr, target, "");
        // 400 for a target that is malformed once read (a `..` above the root, a NUL), 404
        // from the file handler for the rest.
        assert!(
            got.status == 404 || got.status == 400,
            "{target}: {} {:?}",
            got.status,
            String::from_utf8_lossy(&got.body)
        );
        let body = String::from_utf8_lossy(&got.body);
        assert!(
            !body.contains("SECRET") && !body.contains("root:"),
            "{target}: {body}"
        );
    }
}

#[test]
fn index_files_and_the_directory_redirect() {
    let dir = TempDir::new();
    let squall = start(&dir);
    for way in WAYS {
        let got = curl(&squall, way, "GET", "/", &[]);
        assert_eq!(
            (got.status, &got.body[..]),
            (200, &b"<h1>home</h1>"[..]),
            "{way:?}"
        );
        assert_eq!(got.field("content-type"), Some("text/html; charset=utf-8"));
        let got = curl(&squall, way, "GET", "/dir", &[]);
        assert_eq!(
            (got.status, got.field("location")),
            (301, Some("/dir/")),
            "{way:?}"
        );
        let got = curl(&squall, way, "GET", "/dir?x=1", &[]);
        assert_eq!(got.field("location"), Some("/dir/?x=1"), "{way:?}");
        // The second index name is tried when the first is missing.
        let got = curl(&squall, way, "GET", "/dir/", &[]);
        assert_eq!(
            (got.status, &got.body[..]),
            (200, &b"dir index"[..]),
            "{way:?}"
        );
        assert_eq!(curl(&squall, way, "GET", "/empty/", &[]).status, 404);
        assert_eq!(curl(&squall, way, "GET", "/nothing.txt", &[]).status, 404);
        let got = curl(&squall, way, "POST", "/a.txt", &[]);
        assert_eq!((got.status, got.field("allow")), (405, Some("GET, HEAD")));
    }
    // Pipelined requests on one HTTP/1.1 connection are answered in order.
    let mut stream = squall.connect();
    let request = "GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /style.css HTTP/1.1\r\nHost: x\r\n\r\n\
                   HEAD /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /dir/ HTTP/1.1\r\nHost: x\r\n\r\n";
    stream.write_all(request.as_bytes()).unwrap();
    assert_eq!(read_response(&mut stream).unwrap().body, TEXT);
    assert_eq!(read_response(&mut stream).unwrap().body, b"body{}");
    assert_eq!(read_response_head(&mut stream).unwrap().status, 200);
    assert_eq!(read_response(&mut stream).unwrap().body, b"dir index");
}

#[test]
fn a_request_that_asks_to_close_gets_the_whole_file_first() {
    let dir = TempDir::new();
    let squall = start(&dir);
    for (version, close) in [("HTTP/1.1", "Connection: close\r\n"), ("HTTP/1.0", "")] {
        let mut stream = squall.connect();
        let request = format!("GET /mid.bin {version}\r\nHost: x\r\n{close}\r\n");
        stream.write_all(request.as_bytes()).unwrap();
        let response = read_response(&mut stream).expect("a response");
        assert_eq!(
            (response.status, response.body.len()),
            (200, MID_BYTES),
            "{version}"
        );
        assert_eq!(response.header("connection"), Some("close"), "{version}");
        assert!(squall_e2e::is_closed(&mut stream), "{version}");
    }
    // Over TLS too, where the close_notify must come after the body.
    let got = curl(
        &squall,
        Way::H1Tls,
        "GET",
        "/mid.bin",
        &["Connection: close"],
    );
    assert_eq!((got.status, got.body.len()), (200, MID_BYTES));
}

/// The descriptors the process holds.
fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_go_away_mid_file_leave_no_descriptor_open() {
    let dir = TempDir::new();
    let squall = start(&dir);
    assert_eq!(get(squall.addr, "/a.txt", "").body, TEXT);
    let before = descriptors(squall.pid());
    let client = h2_client::h2c(squall.addr).await;
    let base = format!("http://localhost:{}", squall.addr.port());
    for round in 0..40 {
        // An HTTP/1.1 reader that takes a little of the 256 MiB file and hangs up.
        let mut stream = squall.connect();
        stream
            .write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut some = vec![0; 1 + round * 1000];
        stream.read_exact(&mut some).unwrap();
        drop(stream);
        // An HTTP/2 stream whose body is dropped unread (RST_STREAM), the connection kept.
        let mut ready = client.clone().ready().await.unwrap();
        let request = http::Request::get(format!("{base}/big.bin"))
            .body(())
            .unwrap();
        let (response, _) = ready.send_request(request, true).unwrap();
        drop(response.await.unwrap());
        // Meanwhile other requests are answered as ever, on new slots.
        assert_eq!(get(squall.addr, "/a.txt", "").body, TEXT, "round {round}");
    }
    let got = h2_client::fetch(&client, "GET", &format!("{base}/style.css"), None).await;
    assert_eq!(got.body, b"body{}");
    // Every file's descriptor was closed (the h2 connection and a moment's sockets aside).
    let deadline = Instant::now() + Duration::from_secs(5);
    while descriptors(squall.pid()) > before + 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let after = descriptors(squall.pid());
    assert!(
        after <= before + 2,
        "{before} descriptors before, {after} after"
    );
}

#[test]
fn a_slow_reader_of_a_large_file_holds_little_while_another_client_is_served() {
    let lateness = squall_e2e::Lateness::start();
    let dir = TempDir::new();
    let squall = start(&dir);
    let before = squall.rss();
    // Slow readers: each takes 64 KiB of the 256 MiB file, then stops reading.
    let mut slow = Vec::new();
    for _ in 0..4 {
        let mut stream = squall.connect();
        stream
            .write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut taken = vec![0; 64 * 1024];
        stream.read_exact(&mut taken).unwrap();
        slow.push(stream);
    }
    // Meanwhile another client gets its whole 4 MiB, byte for byte, over both protocols.
    let started = Instant::now();
    let got = get(squall.addr, "/mid.bin", "");
    assert_eq!((got.status, got.body.len()), (200, MID_BYTES));
    assert!(
        got.body
            .iter()
            .enumerate()
            .all(|(i, &b)| b == (i % 251) as u8)
    );
    let got = curl(&squall, Way::H2c, "GET", "/mid.bin", &[]);
    assert_eq!(got.body.len(), MID_BYTES);
    lateness.assert_within("4 MiB twice", started.elapsed(), Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(500));
    // Four readers of 256 MiB hold their bounds (a few hundred KiB each, plus what the
    // kernel's socket buffers take), not their files.
    let grown = squall.rss().saturating_sub(before);
    assert!(grown < 48 * 1024 * 1024, "RSS grew by {} MiB", grown >> 20);
    drop(slow);
}

#[test]
fn check_refuses_a_root_that_is_missing_or_not_a_directory() {
    let dir = TempDir::new();
    std::fs::write(dir.path().join("file.txt"), "x").unwrap();
    let text = "[[listen]]\naddress = \"127.0.0.1:8080\"\n\n[[vhost]]\n\
                [[vhost.route]]\nprefix = \"/a/\"\nroot = \"no-such-dir\"\n\
                [[vhost.route]]\nprefix = \"/b/\"\nroot = \"file.txt\"\n";
    let path = dir.path().join("s.toml");
    std::fs::write(&path, text).unwrap();
    let out = Command::new(squall_bin())
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let shown = path.display();
    assert!(
        stderr.contains(&format!("{shown}:7:8: cannot open root")),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("{shown}:10:8: root ")), "{stderr}");
    assert!(stderr.contains("is not a directory"), "{stderr}");
}
