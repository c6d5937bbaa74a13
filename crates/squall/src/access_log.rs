//! The access log (`[log] access = "PATH"`): one line per request, formatted by the worker that
//! answered it, written by a logger thread, reopened on SIGUSR1.
//!
//! Why a thread: a write to a file can block (a slow or full disk), and a worker must never
//! block. Workers batch lines in a buffer and hand whole batches over a bounded channel; when
//! the logger falls behind and the channel is full, the batch is dropped and counted
//! (`squall_access_log_dropped_total`) rather than waited for, as the issue asks: serving
//! never waits for the log.
//!
//! `format = "combined"` (the default): nginx's "combined" plus Squall's fields, space separated:
//! `ADDR - - [TIME] "REQUEST" STATUS BYTES "REFERER" "USER-AGENT" rt=SECONDS ut=SECONDS|- cs=CACHE|- proto=PROTO`
//! where BYTES counts the whole response (head and body, as nginx's `$bytes_sent`), `rt` is the
//! time from the first byte of the request head to the response being queued, and `ut` (upstream
//! time) and `cs` (cache status) are `-` until the proxy and the cache land. Quotes, backslashes,
//! control and non-ASCII bytes inside quoted fields are written as `\xHH`, so a client cannot
//! forge a line.
//!
//! `format = "json"`: one JSON object per line with the same facts as named fields
//! (`time` in RFC 3339 with milliseconds, `remote_addr`, `request`, `method`, `uri`,
//! `protocol`, `host`, `status`, `bytes_sent`, `referer`, `user_agent`, `request_time`,
//! `upstream_time`, `cache`); a missing value is `null`. Field values are JSON strings: control
//! characters, quotes and backslashes escaped, and bytes that are not UTF-8 written as U+FFFD,
//! so every line parses.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, Sender, TrySendError};
use squall_config::LogFormat;
use tracing::{info, warn};

use crate::metrics::WorkerCounters;

/// Batches in flight to the logger before workers start dropping.
const BATCHES_MAX: usize = 256;
/// A worker hands its batch over when it reaches this size...
const BATCH_BYTES: usize = 32 * 1024;
/// ...or when it is this old.
pub const BATCH_AGE: Duration = Duration::from_millis(100);

/// What the logger thread is asked to do.
pub enum Message {
    Lines(Vec<u8>),
    Reopen,
}

/// The way to the logger thread, and the format its lines are written in (set at start).
#[derive(Clone)]
pub struct Logger {
    pub tx: Sender<Message>,
    pub format: LogFormat,
}

/// Starts the logger thread on `file`, opened by [`open`] at `path` (where SIGUSR1 reopens it).
pub fn start(path: &Path, file: File, format: LogFormat) -> anyhow::Result<Logger> {
    let (tx, rx) = crossbeam_channel::bounded(BATCHES_MAX);
    let path = path.to_owned();
    std::thread::Builder::new()
        .name("squall-log".into())
        .spawn(move || write_loop(file, &path, &rx))?;
    Ok(Logger { tx, format })
}

/// Opens (or creates) the access log for append: a start-up error if it cannot be.
pub fn open(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

fn write_loop(mut file: File, path: &Path, rx: &Receiver<Message>) {
    for message in rx {
        match message {
            Message::Lines(lines) => {
                if let Err(e) = file.write_all(&lines) {
                    warn!("access log {}: {e}; lines lost", path.display());
                }
            }
            Message::Reopen => match open(path) {
                Ok(new) => {
                    file = new;
                    info!("access log {} reopened", path.display());
                }
                Err(e) => warn!(
                    "access log {}: cannot reopen ({e}); keeping the old file",
                    path.display()
                ),
            },
        }
    }
}

/// One worker's side: the batch being filled.
pub struct Batch {
    tx: Sender<Message>,
    format: LogFormat,
    buf: Vec<u8>,
    lines: u64,
    since: Instant,
    /// The CLF time of the current second, re-formatted when the second changes.
    clock: (u64, String),
}

/// What one line says about one request.
pub struct Entry<'a> {
    pub peer: Option<SocketAddr>,
    pub head: Option<&'a squall_h1::RequestHead>,
    pub status: u16,
    pub bytes: usize,
    pub elapsed: Duration,
    /// Time spent on the origin, for proxied requests.
    pub upstream: Option<Duration>,
    /// `HIT`, `MISS`, `STALE` or `REVALIDATED` on cached routes.
    pub cache: Option<&'static str>,
    /// The request's id (`$request_id`).
    pub request_id: u128,
}

impl Batch {
    pub fn new(logger: Logger, now: Instant) -> Batch {
        Batch {
            tx: logger.tx,
            format: logger.format,
            buf: Vec::with_capacity(BATCH_BYTES),
            lines: 0,
            since: now,
            clock: (u64::MAX, String::new()),
        }
    }

    /// Formats one line into the batch, handing the batch over when it is full.
    pub fn push(&mut self, entry: &Entry<'_>, wall: SystemTime, counters: &WorkerCounters) {
        let since_epoch = wall.duration_since(UNIX_EPOCH).unwrap_or_default();
        let second = since_epoch.as_secs();
        match self.format {
            LogFormat::Combined => {
                if self.clock.0 != second {
                    self.clock = (second, clf_time(second));
                }
                format_line(&mut self.buf, entry, &self.clock.1);
            }
            LogFormat::Json => json_line(&mut self.buf, entry, since_epoch),
        }
        self.lines += 1;
        if self.buf.len() >= BATCH_BYTES {
            self.flush(counters);
        }
    }

    /// Hands the batch over if it is older than `BATCH_AGE` (called once per loop turn).
    pub fn tick(&mut self, now: Instant, counters: &WorkerCounters) {
        if self.lines > 0 && now.duration_since(self.since) >= BATCH_AGE {
            self.flush(counters);
        }
        if self.lines == 0 {
            self.since = now;
        }
    }

    /// Hands the batch to the logger without waiting; a full channel drops it, counted.
    pub fn flush(&mut self, counters: &WorkerCounters) {
        if self.lines == 0 {
            return;
        }
        let batch = std::mem::replace(&mut self.buf, Vec::with_capacity(BATCH_BYTES));
        match self.tx.try_send(Message::Lines(batch)) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                counters.access_log_dropped.add(self.lines);
            }
        }
        self.lines = 0;
    }
}

fn format_line(out: &mut Vec<u8>, entry: &Entry<'_>, time: &str) {
    match entry.peer {
        Some(peer) => {
            let _ = write!(out, "{}", peer.ip());
        }
        None => out.push(b'-'),
    }
    let _ = write!(out, " - - [{time}] \"");
    match entry.head {
        Some(head) => {
            // The request line as received (nginx's `$request`).
            escaped(out, head.method.as_str().as_bytes());
            out.push(b' ');
            escaped(out, head.request_uri());
            let _ = write!(out, " {:?}", head.version);
        }
        None => out.push(b'-'),
    }
    let _ = write!(out, "\" {} {} \"", entry.status, entry.bytes);
    header(out, entry.head, http::header::REFERER);
    out.extend_from_slice(b"\" \"");
    header(out, entry.head, http::header::USER_AGENT);
    let proto = entry
        .head
        .map_or("-".to_owned(), |h| format!("{:?}", h.version));
    let _ = write!(out, "\" rt={:.3} ut=", entry.elapsed.as_secs_f64());
    match entry.upstream {
        Some(upstream) => {
            let _ = write!(out, "{:.3}", upstream.as_secs_f64());
        }
        None => out.push(b'-'),
    }
    let _ = write!(out, " cs={} proto={proto} id=", entry.cache.unwrap_or("-"));
    out.extend_from_slice(&squall_proxy::forward::request_id_hex(entry.request_id));
    out.push(b'\n');
}

fn header(out: &mut Vec<u8>, head: Option<&squall_h1::RequestHead>, name: http::HeaderName) {
    match head.and_then(|h| h.headers.get(name)) {
        Some(value) => escaped(out, value.as_bytes()),
        None => out.push(b'-'),
    }
}

/// One JSON object for `entry`, ended by a newline; `since_epoch` is the wall time.
fn json_line(out: &mut Vec<u8>, entry: &Entry<'_>, since_epoch: Duration) {
    let secs = since_epoch.as_secs();
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    let _ = write!(
        out,
        "{{\"time\":\"{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z\",\"remote_addr\":",
        secs % 86_400 / 3600,
        secs / 60 % 60,
        secs % 60,
        since_epoch.subsec_millis()
    );
    json_opt(
        out,
        entry
            .peer
            .map(|p| p.ip().to_string())
            .as_deref()
            .map(str::as_bytes),
    );
    let head = entry.head;
    // `request` is the request line as received; `uri` the normalised target that was
    // routed (nginx's `$request` and `$uri`, with the query).
    let target = head.map(|h| h.uri.path_and_query().map_or("*", |pq| pq.as_str()));
    let method = head.map(|h| h.method.as_str());
    let protocol = head.map(|h| format!("{:?}", h.version));
    out.extend_from_slice(b",\"request\":");
    match (head, &protocol) {
        (Some(h), Some(p)) => {
            let mut line = Vec::with_capacity(h.request_uri().len() + 24);
            line.extend_from_slice(h.method.as_str().as_bytes());
            line.push(b' ');
            line.extend_from_slice(h.request_uri());
            line.push(b' ');
            line.extend_from_slice(p.as_bytes());
            json_str(out, &line);
        }
        _ => out.extend_from_slice(b"null"),
    }
    for (name, value) in [
        ("method", method.map(str::as_bytes)),
        ("uri", target.map(str::as_bytes)),
        ("protocol", protocol.as_deref().map(str::as_bytes)),
        ("host", field(head, http::header::HOST)),
    ] {
        let _ = write!(out, ",\"{name}\":");
        json_opt(out, value);
    }
    let _ = write!(
        out,
        ",\"status\":{},\"bytes_sent\":{},\"referer\":",
        entry.status, entry.bytes
    );
    json_opt(out, field(head, http::header::REFERER));
    out.extend_from_slice(b",\"user_agent\":");
    json_opt(out, field(head, http::header::USER_AGENT));
    let _ = write!(
        out,
        ",\"request_time\":{:.3},\"upstream_time\":",
        entry.elapsed.as_secs_f64()
    );
    match entry.upstream {
        Some(upstream) => {
            let _ = write!(out, "{:.3}", upstream.as_secs_f64());
        }
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"cache\":");
    json_opt(out, entry.cache.map(str::as_bytes));
    out.extend_from_slice(b",\"request_id\":\"");
    out.extend_from_slice(&squall_proxy::forward::request_id_hex(entry.request_id));
    out.extend_from_slice(b"\"}\n");
}

fn field(head: Option<&squall_h1::RequestHead>, name: http::HeaderName) -> Option<&[u8]> {
    head.and_then(|h| h.headers.get(name)).map(|v| v.as_bytes())
}

fn json_opt(out: &mut Vec<u8>, value: Option<&[u8]>) {
    match value {
        Some(value) => json_str(out, value),
        None => out.extend_from_slice(b"null"),
    }
}

/// `bytes` as a JSON string: `"`, `\` and controls escaped, invalid UTF-8 as U+FFFD.
fn json_str(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    for c in String::from_utf8_lossy(bytes).chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// Copies `bytes`, writing `"`, `\`, controls and non-ASCII as `\xHH`.
fn escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
            let _ = write!(out, "\\x{b:02X}");
        } else {
            out.push(b);
        }
    }
}

/// `30/Nov/2026:03:55:00 +0000` for a Unix time (UTC).
fn clf_time(unix: u64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (days, secs) = (unix / 86_400, unix % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{day:02}/{}/{year}:{:02}:{:02}:{:02} +0000",
        MONTHS[(month - 1) as usize],
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), Howard Hinnant's `civil_from_days`.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The request line is the target as received (nginx's `$request`); the JSON `uri` is
    /// the normalised one that was routed.
    #[test]
    fn the_request_line_is_as_received_and_uri_normalised() {
        let mut decoder = squall_h1::RequestDecoder::new(squall_h1::Limits::default());
        let raw = b"GET //a/./%62?c=%2e HTTP/1.1\r\nHost: x.test\r\n\r\n";
        let mut buf = bytes::BytesMut::from(&raw[..]);
        let Ok(Some(squall_h1::Event::Head(head))) = decoder.decode(&mut buf) else {
            panic!("a head");
        };
        let entry = Entry {
            peer: None,
            head: Some(&head),
            status: 200,
            bytes: 1,
            elapsed: Duration::ZERO,
            upstream: None,
            cache: None,
            request_id: 1,
        };
        let mut out = Vec::new();
        json_line(&mut out, &entry, Duration::ZERO);
        let line: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(line["request"], "GET //a/./%62?c=%2e HTTP/1.1");
        assert_eq!(line["uri"], "/a/b?c=%2e");
        let mut out = Vec::new();
        format_line(&mut out, &entry, "-");
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("\"GET //a/./%62?c=%2e HTTP/1.1\""), "{text}");
    }

    #[test]
    fn a_json_line_parses_with_every_field() {
        let mut decoder = squall_h1::RequestDecoder::new(squall_h1::Limits::default());
        let raw = b"GET /a?b=1 HTTP/1.1\r\nHost: x.test\r\nUser-Agent: \"q\"\there \xff\\\r\n\r\n";
        let mut buf = bytes::BytesMut::from(&raw[..]);
        let Ok(Some(squall_h1::Event::Head(head))) = decoder.decode(&mut buf) else {
            panic!("a head");
        };
        let entry = Entry {
            peer: Some("[::1]:5000".parse().unwrap()),
            head: Some(&head),
            status: 200,
            bytes: 120,
            elapsed: Duration::from_micros(1500),
            upstream: Some(Duration::from_micros(1200)),
            cache: Some("MISS"),
            request_id: 0x2a,
        };
        let mut out = Vec::new();
        json_line(&mut out, &entry, Duration::from_millis(784_111_777_042));
        assert_eq!(out.last(), Some(&b'\n'));
        let line: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(line["time"], "1994-11-06T08:49:37.042Z");
        assert_eq!(line["remote_addr"], "::1");
        assert_eq!(line["request"], "GET /a?b=1 HTTP/1.1");
        assert_eq!(line["method"], "GET");
        assert_eq!(line["uri"], "/a?b=1");
        assert_eq!(line["protocol"], "HTTP/1.1");
        assert_eq!(line["host"], "x.test");
        assert_eq!(line["status"], 200);
        assert_eq!(line["bytes_sent"], 120);
        assert_eq!(line["referer"], serde_json::Value::Null);
        assert_eq!(line["user_agent"], "\"q\"\there \u{fffd}\\");
        assert_eq!(line["request_time"], 0.002);
        assert_eq!(line["upstream_time"], 0.001);
        assert_eq!(line["cache"], "MISS");
        assert_eq!(line["request_id"], "0000000000000000000000000000002a");
        // A refused request: nothing but the peer, status and size.
        let refused = Entry {
            peer: None,
            head: None,
            upstream: None,
            cache: None,
            ..entry
        };
        let mut out = Vec::new();
        json_line(&mut out, &refused, Duration::ZERO);
        let line: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(line["time"], "1970-01-01T00:00:00.000Z");
        for name in ["remote_addr", "request", "method", "uri", "host", "cache"] {
            assert_eq!(line[name], serde_json::Value::Null, "{name}");
        }
    }

    #[test]
    fn clf_time_of_known_instants() {
        assert_eq!(clf_time(0), "01/Jan/1970:00:00:00 +0000");
        assert_eq!(clf_time(784_111_777), "06/Nov/1994:08:49:37 +0000");
        assert_eq!(clf_time(1_709_164_800), "29/Feb/2024:00:00:00 +0000");
    }

    #[test]
    fn a_line_is_combined_format_with_escaped_fields() {
        let mut decoder = squall_h1::RequestDecoder::new(squall_h1::Limits::default());
        let raw = "GET /a?b=1 HTTP/1.1\r\nHost: x\r\nUser-Agent: evil\" agent\r\n\r\n";
        let mut buf = bytes::BytesMut::from(raw);
        let Ok(Some(squall_h1::Event::Head(head))) = decoder.decode(&mut buf) else {
            panic!("a head");
        };
        let entry = Entry {
            peer: Some("127.0.0.1:5000".parse().unwrap()),
            head: Some(&head),
            status: 200,
            bytes: 120,
            elapsed: Duration::from_micros(1500),
            upstream: None,
            cache: None,
            request_id: 0xff,
        };
        let mut out = Vec::new();
        format_line(&mut out, &entry, "30/Nov/2026:03:55:00 +0000");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "127.0.0.1 - - [30/Nov/2026:03:55:00 +0000] \"GET /a?b=1 HTTP/1.1\" 200 120 \"-\" \
             \"evil\\x22 agent\" rt=0.002 ut=- cs=- proto=HTTP/1.1 \
             id=000000000000000000000000000000ff\n"
        );
        let proxied = Entry {
            upstream: Some(Duration::from_micros(1200)),
            cache: Some("MISS"),
            ..entry
        };
        let mut out = Vec::new();
        format_line(&mut out, &proxied, "30/Nov/2026:03:55:00 +0000");
        let line = String::from_utf8(out).unwrap();
        assert!(
            line.ends_with(
                " rt=0.002 ut=0.001 cs=MISS proto=HTTP/1.1 id=000000000000000000000000000000ff\n"
            ),
            "{line}"
        );
    }
}
