//! The fast local origin that proxy and cache scenarios forward to: one nginx process answering
//! every request with a fixed body (and fixed headers, such as `Cache-Control: max-age=3600`
//! for the cache scenarios), started once per bench for each distinct `[origin]` section and
//! shared by both builds, so the origin costs the same whichever proxy is measured. It runs on
//! the load generator's CPU. With `tls = true` it serves https with a self-signed ECDSA P-256
//! certificate made by openssl (for `tls = true` upstreams, which then need `tls_verify =
//! false`), with nginx's session cache so that Squall's reconnects resume. With `h2 = true` it
//! speaks HTTP/2: h2c with prior knowledge in cleartext (for `protocol = "h2c"` upstreams), ALPN
//! h2 beside http/1.1 over TLS (for `protocol = "h2"`).

use std::fs;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::scenario::OriginSection;
use crate::util::free_port;

/// How long the origin may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(5);

/// A running origin; killed (by PID) on drop.
pub struct Origin {
    child: Child,
    pub addr: SocketAddr,
}

impl Drop for Origin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts nginx answering as `section` says on a free loopback port, pinned to `cpu`, with its
/// files in `dir`.
pub fn start(section: &OriginSection, cpu: usize, dir: &Path) -> Result<Origin> {
    let port = free_port()?;
    fs::create_dir_all(dir)?;
    let generated = match (section.body_bytes, section.text_bytes) {
        (Some(bytes), _) => Some(generated_body(bytes)),
        (None, Some(bytes)) => Some(generated_text(bytes)),
        (None, None) => None,
    };
    if let Some(body) = generated {
        fs::write(dir.join("body"), body).context("writing the origin body")?;
    }
    if section.tls {
        certificate(dir)?;
    }
    let path = dir.join("nginx.conf");
    fs::write(&path, config(section, dir, port))?;
    let child = Command::new("taskset")
        .arg("-c")
        .arg(cpu.to_string())
        .arg("nginx")
        .arg("-c")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the nginx origin (apt install nginx-light)")?;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let origin = Origin { child, addr };
    let deadline = Instant::now() + START_TIMEOUT;
    while std::net::TcpStream::connect(addr).is_err() {
        if Instant::now() > deadline {
            bail!("the nginx origin did not listen on {addr}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(origin)
}

/// The origin's nginx.conf. A written-out `body` is a `return` (as it always was, so `h1-proxy`
/// keeps its origin); a generated one is the file `dir/body`, served for every path (nginx's
/// config tokens cannot hold 64 KiB), without an ETag so that only the body differs.
fn config(section: &OriginSection, dir: &Path, port: u16) -> String {
    let d = dir.display();
    let headers: String = section
        .headers
        .iter()
        .map(|(name, value)| format!("add_header {name} {value:?} always; "))
        .collect();
    let answer = match &section.body {
        Some(body) => format!("return 200 {body:?};"),
        None => format!("etag off; root {d}; try_files /body =404;"),
    };
    // `http2` in cleartext is h2c with prior knowledge only (nginx 1.22 then refuses HTTP/1.1
    // on that port); with `ssl` it is offered by ALPN beside http/1.1.
    let http2 = if section.h2 { " http2" } else { "" };
    let tls = match section.tls {
        true => format!(
            " ssl{http2}; ssl_certificate {d}/origin.pem; ssl_certificate_key {d}/origin.key; \
             ssl_session_cache shared:origin:1m"
        ),
        false => http2.to_string(),
    };
    format!(
        "worker_processes 1; daemon off; master_process off; pid {d}/nginx.pid; \
         error_log {d}/error.log;\nevents {{ worker_connections 4096; }}\n\
         http {{ access_log off; keepalive_requests 10000000; client_body_temp_path {d}; \
         proxy_temp_path {d}; fastcgi_temp_path {d}; uwsgi_temp_path {d}; scgi_temp_path {d};\n\
         server {{ listen 127.0.0.1:{port}{tls}; location / {{ default_type text/plain; \
         {headers}{answer} }} }} }}\n"
    )
}

/// A self-signed certificate for `localhost` and 127.0.0.1, `dir/origin.pem` and `.key`.
fn certificate(dir: &Path) -> Result<()> {
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "2", "-subj", "/CN=localhost"])
        .args([
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout",
        ])
        .arg(dir.join("origin.key"))
        .arg("-out")
        .arg(dir.join("origin.pem"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("running openssl req for the https origin")?;
    if !status.success() {
        bail!("openssl req failed for the https origin ({status})");
    }
    Ok(())
}

/// `bytes` of printable ASCII, a line of the alphabet after another, so a body seen in a capture
/// is recognisable and its length obvious. It repeats every 64 bytes, so gzip shrinks 64 KiB of
/// it to 325 bytes almost for free: not a body to measure compression with (`generated_text`).
fn generated_body(bytes: usize) -> Vec<u8> {
    const LINE: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_\n";
    LINE.iter().copied().cycle().take(bytes).collect()
}

/// `bytes` of English-like text: words drawn from 64 by a fixed xorshift sequence, twelve to a
/// line. Like prose, it gives gzip matches of a few words at most: 64 KiB of it becomes 18.9 KiB
/// at level 6 (3.5:1; English prose is about 3:1, HTML 4-5:1), so the compressor does real work.
fn generated_text(bytes: usize) -> Vec<u8> {
    const WORDS: &str = "the of and to in a is that for it as was with be by on not he this are \
        or his from at which but have an had they you were their one all we can her has there \
        been if more when will would who so no server request response origin cache client \
        connection header body proxy worker buffer ring bytes time";
    let words: Vec<&str> = WORDS.split_whitespace().collect();
    let mut out = Vec::with_capacity(bytes + 16);
    let mut state: u32 = 0x9e37_79b9;
    let mut on_line = 0;
    while out.len() < bytes {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        out.extend_from_slice(words[state as usize % words.len()].as_bytes());
        on_line += 1;
        if on_line == 12 {
            on_line = 0;
            out.push(b'\n');
        } else {
            out.push(b' ');
        }
    }
    out.truncate(bytes);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(
        body: Option<&str>,
        body_bytes: Option<usize>,
        headers: &[(&str, &str)],
    ) -> OriginSection {
        OriginSection {
            body: body.map(String::from),
            body_bytes,
            text_bytes: None,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            tls: false,
            h2: false,
        }
    }

    #[test]
    fn an_http2_origin_listens_with_http2() {
        let mut h2c = section(Some("Hello, world!"), None, &[]);
        h2c.h2 = true;
        let text = config(&h2c, Path::new("/o"), 9);
        assert!(
            text.contains("server { listen 127.0.0.1:9 http2; location / {"),
            "{text}"
        );
        h2c.tls = true;
        let text = config(&h2c, Path::new("/o"), 9);
        assert!(
            text.contains("listen 127.0.0.1:9 ssl http2; ssl_certificate /o/origin.pem;"),
            "{text}"
        );
    }

    #[test]
    fn an_https_origin_listens_with_its_certificate_and_a_session_cache() {
        let mut https = section(Some("Hello, world!"), None, &[]);
        https.tls = true;
        let text = config(&https, Path::new("/o"), 9);
        assert!(
            text.contains(
                "listen 127.0.0.1:9 ssl; ssl_certificate /o/origin.pem; \
                 ssl_certificate_key /o/origin.key; ssl_session_cache shared:origin:1m;"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_written_body_is_returned_as_before() {
        let text = config(
            &section(Some("Hello, world!"), None, &[]),
            Path::new("/o"),
            9,
        );
        assert!(
            text.contains(
                "server { listen 127.0.0.1:9; location / { default_type text/plain; \
                 return 200 \"Hello, world!\"; } } }"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_generated_body_is_a_file_with_the_headers() {
        let headers = [("cache-control", "max-age=3600")];
        let text = config(&section(None, Some(1024), &headers), Path::new("/o"), 9);
        assert!(
            text.contains(
                "location / { default_type text/plain; add_header cache-control \
                 \"max-age=3600\" always; etag off; root /o; try_files /body =404; }"
            ),
            "{text}"
        );
        let body = generated_body(65_536);
        assert_eq!(body.len(), 65_536);
        assert!(body.starts_with(b"abc") && body.iter().all(u8::is_ascii));
        assert!(generated_body(0).is_empty());
    }

    #[test]
    fn generated_text_is_words() {
        let text = generated_text(65_536);
        assert_eq!(text.len(), 65_536);
        assert!(text.starts_with(b"but bytes proxy cache were connection not time body header"));
        let lines = String::from_utf8(text).expect("ASCII");
        assert!(lines.lines().take(100).all(|l| l.split(' ').count() == 12));
        assert!(generated_text(0).is_empty());
        assert_eq!(generated_text(5).len(), 5);
    }
}
