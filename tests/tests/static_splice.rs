//! Large static files spliced to cleartext HTTP/1.1 clients (file → pipe → socket, no copy
//! through user memory) through the real binary: whole files of odd sizes, ranges, HEAD,
//! keep-alive and pipelined requests whose next answer follows the spliced body byte for
//! byte, a slow reader, clients that go away mid-file (no descriptor left behind, the worker
//! serving others meanwhile), and the same files over HTTP/2 and TLS (read, not spliced).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use squall_e2e::{Squall, TempDir, digest, read_response, read_response_head};

const ONE_MIB: usize = 1024 * 1024;
/// Odd: the last chunk is not a whole page.
const FIVE_MIB_ODD: usize = 5 * 1024 * 1024 + 7;

/// The byte at `i` of every file served here.
fn byte(i: usize) -> u8 {
    (i * 7 + i / 251) as u8
}

fn bytes(len: usize) -> Vec<u8> {
    (0..len).map(byte).collect()
}

fn start(dir: &TempDir) -> Squall {
    std::fs::create_dir_all(dir.path().join("site")).unwrap();
    std::fs::write(dir.path().join("site/one.bin"), bytes(ONE_MIB)).unwrap();
    std::fs::write(dir.path().join("site/five.bin"), bytes(FIVE_MIB_ODD)).unwrap();
    std::fs::write(dir.path().join("site/small.txt"), "small\n").unwrap();
    // One read's worth: read and sent, not spliced.
    std::fs::write(dir.path().join("site/read.bin"), bytes(64 * 1024)).unwrap();
    let root = dir.path().display();
    // The TLS listener on another loopback address, its port the kernel's (as `ADDR`'s):
    // Squall logs it and the harness finds it (`Squall::tls_addr`).
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
prefix = "/"
root = "{root}/site"
"#
    ))
}

fn connect(squall: &Squall) -> TcpStream {
    let stream = squall.connect();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
}

/// The body curl gets for `path` over HTTP/1.1 or HTTP/2, cleartext or TLS.
fn curl(squall: &Squall, tls: bool, version: &str, path: &str) -> Vec<u8> {
    let dir = TempDir::new();
    let body = dir.path().join("body");
    let (addr, scheme) = match tls {
        true => (squall.tls_addr.unwrap(), "https"),
        false => (squall.addr, "http"),
    };
    let url = format!("{scheme}://localhost:{}{path}", addr.port());
    let resolve = format!("localhost:{}:{}", addr.port(), addr.ip());
    let output = squall_e2e::tool("curl")
        .args([
            "-sS",
            "-k",
            "--max-time",
            "30",
            "--resolve",
            &resolve,
            version,
        ])
        .arg("-o")
        .arg(&body)
        .arg(&url)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{version} {url}: {stderr}");
    std::fs::read(&body).unwrap()
}

/// The process's open descriptors, and how many of them are pipes.
fn descriptors(squall: &Squall) -> (usize, usize) {
    let dir = format!("/proc/{}/fd", squall.pid());
    let links: Vec<String> = (std::fs::read_dir(dir).unwrap())
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|l| l.display().to_string())
        .collect();
    let pipes = links.iter().filter(|l| l.starts_with("pipe:")).count();
    (links.len(), pipes)
}

/// Waits (bounded) until the process holds `baseline` descriptors again.
fn wait_for_descriptors(squall: &Squall, baseline: (usize, usize)) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while descriptors(squall) != baseline && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(descriptors(squall), baseline, "descriptors left behind");
}

#[test]
fn large_files_arrive_whole_over_http1_cleartext_http2_and_tls() {
    let dir = TempDir::new();
    let squall = start(&dir);
    for (path, len) in [("/one.bin", ONE_MIB), ("/five.bin", FIVE_MIB_ODD)] {
        let want = digest(&bytes(len));
        for (tls, version) in [
            (false, "--http1.1"),
            (false, "--http2-prior-knowledge"),
            (true, "--http1.1"),
            (true, "--http2"),
        ] {
            let got = curl(&squall, tls, version, path);
            assert_eq!(digest(&got), want, "{path} tls={tls} {version}");
        }
    }
}

#[test]
fn ranges_and_head_on_a_spliced_file() {
    let dir = TempDir::new();
    let squall = start(&dir);
    let file = bytes(FIVE_MIB_ODD);
    let mut stream = connect(&squall);
    let cases = [
        ("bytes=0-99999", 0..100_000),
        ("bytes=1000000-3999998", 1_000_000..3_999_999),
        ("bytes=-300001", FIVE_MIB_ODD - 300_001..FIVE_MIB_ODD),
        ("bytes=5000000-", 5_000_000..FIVE_MIB_ODD),
    ];
    for (range, want) in cases {
        let request = format!("GET /five.bin HTTP/1.1\r\nHost: x\r\nRange: {range}\r\n\r\n");
        stream.write_all(request.as_bytes()).unwrap();
        let got = read_response(&mut stream).expect("a response");
        assert_eq!(got.status, 206, "{range}");
        let content_range = format!("bytes {}-{}/{FIVE_MIB_ODD}", want.start, want.end - 1);
        assert_eq!(got.header("content-range"), Some(&content_range[..]));
        assert!(got.body == file[want], "{range}: the bytes differ");
    }
    // HEAD: the length, no body; the connection goes on with the next answer right after.
    stream
        .write_all(
            b"HEAD /five.bin HTTP/1.1\r\nHost: x\r\n\r\nGET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n",
        )
        .unwrap();
    let head = read_response_head(&mut stream).expect("a head");
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("5242887"));
    let next = read_response(&mut stream).expect("the next answer");
    assert_eq!((next.status, &next.body[..]), (200, &b"small\n"[..]));
}

#[test]
fn keep_alive_and_pipelined_answers_follow_the_spliced_body_byte_exact() {
    let dir = TempDir::new();
    let squall = start(&dir);
    let (one, five) = (bytes(ONE_MIB), bytes(FIVE_MIB_ODD));
    let mut stream = connect(&squall);
    // Two keep-alive requests, one after the other.
    for _ in 0..2 {
        stream
            .write_all(b"GET /one.bin HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let got = read_response(&mut stream).expect("a response");
        assert_eq!(got.status, 200);
        assert!(got.body == one, "the bytes differ");
    }
    // Four pipelined at once: each answer starts right where the spliced body before it ends.
    stream
        .write_all(
            b"GET /five.bin HTTP/1.1\r\nHost: x\r\n\r\n\
              GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n\
              GET /one.bin HTTP/1.1\r\nHost: x\r\n\r\n\
              GET /five.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=65536-\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
    let got = read_response(&mut stream).expect("the first answer");
    assert!(
        got.status == 200 && got.body == five,
        "the first body differs"
    );
    let got = read_response(&mut stream).expect("the second answer");
    assert_eq!((got.status, &got.body[..]), (200, &b"small\n"[..]));
    let got = read_response(&mut stream).expect("the third answer");
    assert!(
        got.status == 200 && got.body == one,
        "the third body differs"
    );
    let got = read_response(&mut stream).expect("the fourth answer");
    assert!(
        got.status == 206 && got.body == five[65536..],
        "the fourth differs"
    );
    // Connection: close: nothing after it, and the connection ends.
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).unwrap();
    assert!(
        rest.is_empty(),
        "{} bytes after the last answer",
        rest.len()
    );
}

#[test]
fn a_slow_reader_through_a_small_buffer_gets_every_byte() {
    let dir = TempDir::new();
    let squall = start(&dir);
    // An 8 KiB receive buffer, set before the connect (the window is agreed on then).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(8 * 1024).unwrap();
        socket.connect(squall.addr).await.unwrap()
    });
    let stream = stream.into_std().unwrap();
    stream.set_nonblocking(false).unwrap();
    let mut stream = stream;
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
        .write_all(
            b"GET /five.bin HTTP/1.1\r\nHost: x\r\n\r\n\
              GET /read.bin HTTP/1.1\r\nHost: x\r\n\r\n\
              GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n",
        )
        .unwrap();
    let head = read_response_head(&mut stream).expect("a head");
    assert_eq!(head.header("content-length"), Some("5242887"));
    // The first half a little at a time: the server's socket fills again and again.
    let body = read_slowly(&mut stream, FIVE_MIB_ODD);
    assert!(body == bytes(FIVE_MIB_ODD), "the bytes differ");
    // Then a file sent from a buffer (a writev, not a splice) on the socket the splice made
    // nonblocking, to the same slow reader.
    let head = read_response_head(&mut stream).expect("a head");
    assert_eq!(head.header("content-length"), Some("65536"));
    let body = read_slowly(&mut stream, 64 * 1024);
    assert!(body == bytes(64 * 1024), "the read file's bytes differ");
    let next = read_response(&mut stream).expect("the next answer");
    assert_eq!((next.status, &next.body[..]), (200, &b"small\n"[..]));
}

/// Reads `len` bytes, the first half a little at a time (the sender's socket fills again and
/// again), then the rest at once.
fn read_slowly(stream: &mut TcpStream, len: usize) -> Vec<u8> {
    let mut body = Vec::with_capacity(len);
    let mut piece = vec![0; 16 * 1024];
    while body.len() < len / 2 {
        let want = piece.len().min(len / 2 - body.len()).max(1);
        let n = stream.read(&mut piece[..want]).unwrap();
        assert!(n > 0, "the connection ended early");
        body.extend_from_slice(&piece[..n]);
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut rest = vec![0; len - body.len()];
    stream.read_exact(&mut rest).unwrap();
    body.extend_from_slice(&rest);
    body
}

#[test]
fn clients_gone_mid_file_leave_no_descriptor_and_others_are_served_meanwhile() {
    let dir = TempDir::new();
    let squall = start(&dir);
    // Whatever the process opens once (its first file, the TLS listener's state) is open.
    assert_eq!(curl(&squall, false, "--http1.1", "/small.txt"), b"small\n");
    std::thread::sleep(Duration::from_millis(300));
    let baseline = descriptors(&squall);
    // Readers that take a little of the 5 MiB file and then stop reading.
    let mut stalled = Vec::new();
    for _ in 0..3 {
        let mut stream = connect(&squall);
        stream
            .write_all(b"GET /five.bin HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let head = read_response_head(&mut stream).expect("a head");
        assert_eq!(head.status, 200);
        let mut some = vec![0; 64 * 1024];
        stream.read_exact(&mut some).unwrap();
        assert!(some[..] == bytes(FIVE_MIB_ODD)[..64 * 1024]);
        stalled.push(stream);
    }
    // Their bodies are spliced: each holds a pipe (two descriptors).
    let (_, pipes) = descriptors(&squall);
    assert_eq!(
        pipes,
        baseline.1 + 2 * stalled.len(),
        "a pipe per stalled transfer"
    );
    // The worker serves others meanwhile, whole.
    let got = curl(&squall, false, "--http1.1", "/five.bin");
    assert_eq!(digest(&got), digest(&bytes(FIVE_MIB_ODD)));
    let got = curl(&squall, true, "--http2", "/one.bin");
    assert_eq!(digest(&got), digest(&bytes(ONE_MIB)));
    // They go away mid-file, with unread bytes (a reset): every descriptor is given back.
    drop(stalled);
    wait_for_descriptors(&squall, baseline);
    // One that goes away right after its request, before any byte.
    for _ in 0..3 {
        let mut stream = connect(&squall);
        stream
            .write_all(b"GET /five.bin HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
    }
    wait_for_descriptors(&squall, baseline);
    let got = curl(&squall, false, "--http1.1", "/one.bin");
    assert_eq!(digest(&got), digest(&bytes(ONE_MIB)));
}
