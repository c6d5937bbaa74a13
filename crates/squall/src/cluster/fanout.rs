//! PURGE across the fleet: a PURGE one node accepted is sent to every other node, marked
//! with the hop field so that they apply it without sending it on, and retried once.
//!
//! Purges are rare operator actions, so each fan-out runs on a thread of its own with
//! blocking sockets (one per peer, all at once) rather than on a worker's ring: the worker
//! parks the PURGE like a request waiting for a fetch, and this thread wakes it when every
//! peer has answered or given up. At most [`FANOUTS_MAX`] run at once; past that the peers
//! are reported as not reached. Each attempt is a fresh connection with `Connection: close`:
//! nothing is pooled for so rare a request.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Fan-outs running at once, process-wide.
pub const FANOUTS_MAX: usize = 16;
/// Attempts per peer (the first and one retry).
const ATTEMPTS: u32 = 2;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
const IO_TIMEOUT: Duration = Duration::from_secs(2);
const RETRY_DELAY: Duration = Duration::from_millis(200);
/// The most of a peer's answer read (its body is one line).
const ANSWER_BYTES_MAX: u64 = 16 * 1024;
/// How long the worker waits for a fan-out before answering with what it has: every attempt
/// of every peer timing out, plus margin.
pub const FANOUT_WAIT: Duration = Duration::from_secs(12);

static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// A peer's answer to the forwarded PURGE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// It applied the purge and removed this many objects (200 or 404).
    Purged(usize),
    /// No answer, or not one that says it purged: why.
    Failed(String),
}

/// The fan-out of one PURGE: each peer's name and its answer once it has one.
#[derive(Debug)]
pub struct FanOut {
    replies: Mutex<Vec<(String, Option<Reply>)>>,
}

impl FanOut {
    /// Every peer's answer so far; `None` for one still being tried.
    pub fn replies(&self) -> Vec<(String, Option<Reply>)> {
        self.replies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set(&self, index: usize, reply: Reply) {
        let mut replies = self.replies.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = replies.get_mut(index) {
            slot.1 = Some(reply);
        }
    }
}

/// Sends `request` (a whole HTTP/1.1 PURGE) to every peer on a new thread, and calls `done`
/// when all have answered or failed. `None` when [`FANOUTS_MAX`] fan-outs already run (or
/// no thread could be started): nothing was sent.
pub fn spawn(
    request: Vec<u8>,
    peers: Vec<(String, SocketAddr)>,
    done: impl FnOnce() + Send + 'static,
) -> Option<Arc<FanOut>> {
    if RUNNING.fetch_add(1, Ordering::AcqRel) >= FANOUTS_MAX {
        RUNNING.fetch_sub(1, Ordering::AcqRel);
        return None;
    }
    let fanout = Arc::new(FanOut {
        replies: Mutex::new(peers.iter().map(|(name, _)| (name.clone(), None)).collect()),
    });
    let shared = fanout.clone();
    let started = std::thread::Builder::new()
        .name("squall-purge".into())
        .spawn(move || {
            std::thread::scope(|scope| {
                for (index, (_, address)) in peers.iter().enumerate() {
                    let (shared, request) = (&shared, &request);
                    scope.spawn(move || shared.set(index, purge_peer(*address, request)));
                }
            });
            RUNNING.fetch_sub(1, Ordering::AcqRel);
            done();
        });
    if started.is_err() {
        RUNNING.fetch_sub(1, Ordering::AcqRel);
        return None;
    }
    Some(fanout)
}

/// Sends the PURGE to one peer, with a retry.
fn purge_peer(address: SocketAddr, request: &[u8]) -> Reply {
    let mut last = String::new();
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            std::thread::sleep(RETRY_DELAY);
        }
        match exchange(address, request).map_err(|e| e.to_string()) {
            Ok(answer) => match parse_answer(&answer) {
                Ok(removed) => return Reply::Purged(removed),
                Err(why) => last = why,
            },
            Err(why) => last = why,
        }
    }
    Reply::Failed(last)
}

fn exchange(address: SocketAddr, request: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect_timeout(&address, CONNECT_TIMEOUT)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    stream.write_all(request)?;
    // Read until the answer is whole (its head and `Content-Length` body): the peer may
    // linger before it closes.
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !is_whole(&answer) && (answer.len() as u64) < ANSWER_BYTES_MAX {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
    }
    Ok(answer)
}

/// Whether `answer` holds a whole head and as many body bytes as its `Content-Length` says.
fn is_whole(answer: &[u8]) -> bool {
    let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&answer[..end]);
    let length = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse::<usize>().ok())?
    });
    length.is_some_and(|length| answer.len() >= end + 4 + length)
}

/// A peer's answer: `200` or `404` with `purged N` as the body's first line is a purge
/// applied (404 only says it had nothing to remove); anything else is a failure.
pub fn parse_answer(answer: &[u8]) -> Result<usize, String> {
    let text = String::from_utf8_lossy(answer);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return Err("no complete answer".into());
    };
    let status = head.split(' ').nth(1).unwrap_or("");
    if status != "200" && status != "404" {
        let line = head.lines().next().unwrap_or("");
        return Err(format!("answered {line:?}"));
    }
    body.lines()
        .next()
        .and_then(|l| l.strip_prefix("purged "))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| "no purged count in the answer".into())
}

/// The PURGE sent to peers: the client's target, host, scheme and mode fields, the hop field
/// with this node's name, and `Connection: close`.
pub fn request_bytes(
    target: &str,
    host: &[u8],
    scheme: &[u8],
    hop: &[u8],
    fields: &[(&str, &[u8])],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"PURGE ");
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(host);
    out.extend_from_slice(b"\r\nx-forwarded-proto: ");
    out.extend_from_slice(scheme);
    out.extend_from_slice(b"\r\nsquall-cluster-hop: ");
    out.extend_from_slice(hop);
    for (name, value) in fields {
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
    }
    out.extend_from_slice(b"\r\nconnection: close\r\n\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_that_confirm_a_purge() {
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\npurged 3\n";
        assert_eq!(parse_answer(ok), Ok(3));
        let none = b"HTTP/1.1 404 Not Found\r\n\r\npurged 0\n";
        assert_eq!(parse_answer(none), Ok(0));
        assert!(is_whole(ok));
        assert!(!is_whole(&ok[..ok.len() - 1]));
        for bad in [
            &b"HTTP/1.1 403 Forbidden\r\n\r\nforbidden\n"[..],
            b"HTTP/1.1 200 OK\r\n\r\nhello\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n",
            b"",
        ] {
            assert!(parse_answer(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_request_carries_the_hop_and_the_mode() {
        let bytes = request_bytes(
            "/a?b",
            b"example.com",
            b"https",
            b"n1",
            &[("surrogate-key", b"t1 t2")],
        );
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.starts_with("PURGE /a?b HTTP/1.1\r\nhost: example.com\r\n"));
        assert!(text.contains("\r\nsquall-cluster-hop: n1\r\n"));
        assert!(text.contains("\r\nx-forwarded-proto: https\r\n"));
        assert!(text.contains("\r\nsurrogate-key: t1 t2\r\n"));
        assert!(text.ends_with("\r\nconnection: close\r\n\r\n"));
    }

    #[test]
    fn an_unreachable_peer_fails_after_its_retry() {
        // A port nothing listens on (bound, then closed): refused at once.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let reply = purge_peer(port, b"PURGE / HTTP/1.1\r\n\r\n");
        assert!(matches!(reply, Reply::Failed(_)), "{reply:?}");
    }
}
