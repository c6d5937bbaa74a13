//! Tunnels in the worker: an HTTP/1.1 connection whose proxied request was upgraded (the
//! origin's 101, `squall_proxy`'s `tunnel.rs`) carries bytes both ways as they are. This file
//! moves the client's side: its received bytes go to the exchange instead of the request
//! decoder, at most what the exchange has room for (the rest waits in the receive buffer, and
//! its receive is cancelled until the origin drains, and a client with more than
//! `TUNNEL_RBUF_MAX_BYTES` waiting is cut, as a pipelining
//! client that does not read is), and its FIN becomes the exchange's `on_tunnel_client_eof`.
//! The origin's side runs through the session as any response does (`session.rs`).

use squall_proxy::ToClient;
use tracing::debug;

use super::Worker;
use super::conn::Phase;
use super::session::SessionId;
use super::token::Token;

/// What a tunnel's client may have waiting in its receive buffer: its receive is cancelled at
/// the high-water mark, but the buffers the kernel filled before the cancellation landed still
/// arrive (measured on loopback: over 1 MiB), so the bound is wider than a request's.
const TUNNEL_RBUF_MAX_BYTES: usize = 8 * 1024 * 1024;

impl Worker {
    /// `process_h1`'s first step: a connection whose session is a tunnel hands what it
    /// received to the exchange. True when the connection is a tunnel's (nothing else of it is
    /// decoded).
    pub(super) fn tunnel_client(&mut self, index: usize) -> bool {
        let Some(id) = self.tunnel_of(index) else {
            return false;
        };
        let now = self.now;
        let room = self
            .session_mut(id)
            .map_or(0, |s| s.ex.tunnel_client_room());
        let conn = &mut self.conns[index];
        let data = conn.rbuf.split_to(room.min(conn.rbuf.len()));
        // The origin's send completion (`origin_sent`) reads on from here: the client's
        // receive is cancelled meanwhile, so what waits is bounded by what was in flight.
        conn.blocked = !conn.rbuf.is_empty() || room == 0;
        let token = Token::client(index, conn.generation);
        if conn.blocked && !conn.reads_paused {
            conn.reads_paused = true;
            conn.socket.cancel_recv(&mut self.ring, token);
        } else if !conn.blocked && conn.reads_paused {
            conn.reads_paused = false;
            conn.socket.arm_recv(&mut self.ring, token);
        }
        if conn.rbuf.len() > TUNNEL_RBUF_MAX_BYTES {
            debug!(
                worker = self.id,
                conn = index,
                "tunnel client sends faster than its origin takes: closing"
            );
            self.abort_session(id);
            self.close_now(index);
            return true;
        }
        if let Some(session) = self.session_mut(id) {
            session.ex.on_tunnel_client_data(&data, now);
        }
        self.drive(id);
        self.settle_tunnel_client(index);
        true
    }

    /// The client of a tunnel closed its side: what it sent before goes on to the origin,
    /// then the origin's write side is shut; its responses still reach the client. True when
    /// the connection is a tunnel's.
    pub(super) fn tunnel_client_eof(&mut self, index: usize) -> bool {
        let Some(id) = self.tunnel_of(index) else {
            return false;
        };
        let now = self.now;
        let data = self.conns[index].rbuf.split();
        self.conns[index].blocked = false;
        if let Some(session) = self.session_mut(id) {
            session.ex.on_tunnel_client_data(&data, now);
            session.ex.on_tunnel_client_eof(now);
        }
        self.drive(id);
        self.settle_tunnel_client(index);
        true
    }

    /// `Action::ShutdownOrigin`.
    pub(super) fn shutdown_origin(&mut self, index: usize) {
        if !self.origins[index].socket.shutdown_write() {
            debug!(worker = self.id, "tunnel: origin shutdown failed");
        }
    }

    /// Counts a tunnel begun, when the head `message` is its 101.
    pub(super) fn count_tunnel_start(&self, message: &ToClient) {
        if let ToClient::Head(head) = message
            && head.status == http::StatusCode::SWITCHING_PROTOCOLS
        {
            self.runtime.metrics.worker(self.id).tunnels.inc();
        }
    }

    /// Counts a tunnel's end, with its bytes, when the ending session was one.
    pub(super) fn count_tunnel_end(&self, stats: Option<squall_proxy::TunnelStats>) {
        if let Some(stats) = stats {
            let counters = self.runtime.metrics.worker(self.id);
            counters.tunnels_closed.inc();
            counters.tunnel_bytes_up.add(stats.bytes_up);
            counters.tunnel_bytes_down.add(stats.bytes_down);
        }
    }

    /// The session of connection `index`, if it is a tunnel.
    fn tunnel_of(&mut self, index: usize) -> Option<SessionId> {
        let conn = self.conns.get(index)?;
        let id = conn
            .exchange
            .filter(|_| conn.phase == Phase::Open && conn.h2.is_none())?;
        self.session_mut(id)
            .is_some_and(|s| s.ex.is_tunnel())
            .then_some(id)
    }

    /// After the client's bytes moved: sends what the connection has, and keeps it alive
    /// (its own idle timeout does not run while the tunnel moves bytes).
    fn settle_tunnel_client(&mut self, index: usize) {
        if self.conns.get(index).is_none_or(|c| c.phase != Phase::Open) {
            return;
        }
        self.conns[index].last_activity = self.now;
        self.flush(index);
        self.update_deadline(index);
    }
}
