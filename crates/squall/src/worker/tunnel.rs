//! Tunnels in the worker: an HTTP/1.1 connection whose proxied request was upgraded (the
//! origin's 101, `squall_proxy`'s `tunnel.rs`) carries bytes both ways as they are. This file
//! moves the client's side: its received bytes go to the exchange instead of the request
//! decoder, at most what the exchange has room for (the rest waits in the receive buffer, and
//! its receive is cancelled until the origin drains, and a client with more than
//! `TUNNEL_RBUF_MAX_BYTES` waiting is cut, as a pipelining
//! client that does not read is), and its FIN becomes the exchange's `on_tunnel_client_eof`.
//! The origin's side runs through the session as any response does (`session.rs`).
//!
//! An HTTP/2 or HTTP/3 client's tunnel (RFC 8441, RFC 9220) is one stream: its DATA goes to
//! the exchange, whose `ClientBodyConsumed` gives the window (QUIC's stream credit) back once
//! the bytes are written to the origin, so the stream's flow control is the backpressure; the
//! stream's end is the FIN, and a reset aborts the session (its origin connection is closed).
//! The origin's side needs nothing more: the downstream sends its bytes as DATA, paused as any
//! response over the stream's bound is.
//!
//! Refusals are counted (`squall_tunnel_refused_total`) and logged here: a bad 101 from the
//! origin (a 502 to the client), and an upgrade the route does not allow (forwarded without it
//! on HTTP/1.1, 501 to an extended CONNECT on HTTP/2 and HTTP/3).

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};

use squall_h1::RequestHead;
use squall_proxy::ProxyRoute;
use tracing::debug;

use super::Worker;
use super::client::Clients;
use super::conn::Phase;
use super::downstream;
use super::ids::SessionId;
use super::session::{Sessions, Told};

/// A fresh `Sec-WebSocket-Key` (RFC 6455 §4.1): 16 random bytes, base64. Random per process
/// (std seeds `RandomState` from the OS) and per call; it need not be secret, only new.
pub fn websocket_key() -> String {
    use base64::Engine;
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let n = CALLS.fetch_add(1, Ordering::Relaxed);
    let state = RandomState::new();
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&state.hash_one(n).to_le_bytes());
    bytes[8..].copy_from_slice(&state.hash_one(!n).to_le_bytes());
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// An HTTP/2 or HTTP/3 request made from an extended CONNECT (`h2::head_of`, RFC 8441 and
/// RFC 9220): the only such requests that carry `Upgrade`. Its tunnel is its stream.
pub fn is_stream_upgrade(head: &RequestHead) -> bool {
    let version = head.version;
    (version == http::Version::HTTP_2 || version == http::Version::HTTP_3)
        && head.headers.contains_key(http::header::UPGRADE)
}

/// Whether `route` allows the protocol `head` asks to upgrade to.
pub(super) fn upgrade_allowed(route: &ProxyRoute, head: &RequestHead) -> bool {
    let Some(upgrade) = route.upgrade.as_ref() else {
        return false;
    };
    let asked = head.headers.get(http::header::UPGRADE);
    let asked = asked.and_then(|v| v.to_str().ok()).unwrap_or_default();
    let name = asked.split('/').next().unwrap_or_default().trim();
    upgrade
        .protocols
        .iter()
        .any(|p| p.eq_ignore_ascii_case(name))
}

/// What a tunnel's client may have waiting in its receive buffer: its receive is cancelled at
/// the high-water mark, but the buffers the kernel filled before the cancellation landed still
/// arrive (measured on loopback: over 1 MiB), so the bound is wider than a request's.
const TUNNEL_RBUF_MAX_BYTES: usize = 8 * 1024 * 1024;

impl Worker {
    /// `process`'s first step, and a receive's end of stream (`eof`): a connection whose
    /// session is a tunnel hands what it received to the exchange, at most what the exchange
    /// has room for (the rest waits, the receive cancelled until the origin drains), and its
    /// FIN after the rest. True when the connection is a tunnel's (nothing else of it is
    /// decoded).
    pub(super) fn tunnel_client(&mut self, index: usize, eof: bool) -> bool {
        let Some(id) = tunnel_of(&self.clients, &self.sessions, index) else {
            return false;
        };
        let data = match eof {
            true => {
                let conn = &mut self.clients.conns[index];
                conn.blocked = false;
                conn.rbuf.split()
            }
            false => {
                let room = (self.sessions.get(id)).map_or(0, |s| s.ex.tunnel_client_room());
                let conn = &mut self.clients.conns[index];
                let data = conn.rbuf.split_to(room.min(conn.rbuf.len()));
                // The origin's send completion (`origin_sent`) reads on from here: the
                // client's receive is cancelled meanwhile, so what waits is bounded by what
                // was in flight.
                conn.blocked = !conn.rbuf.is_empty() || room == 0;
                let blocked = conn.blocked;
                (self.clients).pause_reads(&mut super::part_io!(self), index, blocked);
                if self.clients.conns[index].rbuf.len() > TUNNEL_RBUF_MAX_BYTES {
                    debug!(
                        worker = self.id,
                        conn = index,
                        "tunnel client sends faster than its origin takes: closing"
                    );
                    self.runtime.metrics.worker(self.id).input_overflows.inc();
                    self.tell(id, Told::ClientGone);
                    self.close_now(index);
                    return true;
                }
                data
            }
        };
        let data = data.freeze();
        self.tell(id, Told::TunnelData { data, eof });
        // Sends what the connection has, and keeps it alive (its own idle timeout does not
        // run while the tunnel moves bytes).
        let Some(conn) = (self.clients.conns.get_mut(index)).filter(|c| c.phase == Phase::Open)
        else {
            return true;
        };
        conn.last_activity = self.now;
        self.flush(index);
        self.update_deadline(index);
        true
    }
}

/// The session of client connection `index`, if it is a tunnel.
fn tunnel_of(clients: &Clients, sessions: &Sessions, index: usize) -> Option<SessionId> {
    let conn = clients.conns.get(index)?;
    let id = downstream::h1_session(conn).filter(|_| conn.phase == Phase::Open)?;
    (sessions.get(id))
        .is_some_and(|s| s.ex.is_tunnel())
        .then_some(id)
}
