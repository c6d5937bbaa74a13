//! The loop's side of the client connections: what a completion on a client socket leads to
//! beyond the socket (the protocol processing the bytes, a send's completion letting the
//! protocol go on), closing a connection (its sessions and file transfers end first), its
//! deadline (whether it waits on an origin is the sessions' to say) and what is due then.

use std::io;

use squall_uring::RecvBuf;
use tracing::debug;

use super::super::conn::Phase;
use super::super::downstream::{self, Due, part_downstream};
use super::super::session::Sessions;
use super::super::session::Told;
use super::super::token::{Kind, Token};
use super::super::{Worker, part_io};
use super::{After, Clients, SendDone};

impl Worker {
    pub(in crate::worker) fn on_recv(
        &mut self,
        token: Token,
        result: io::Result<Option<RecvBuf>>,
        more: bool,
    ) {
        let Some(index) = self.clients.index(token) else {
            if let Ok(Some(buf)) = result {
                self.ring.recycle(buf);
            }
            return;
        };
        self.clients.conns[index].socket.on_recv(more);
        // A tunnel's client closed its side: the tunnel runs on, the other way.
        if matches!(result, Ok(None)) && self.tunnel_client(index, true) {
            self.op_done_at(index);
            return;
        }
        let conn = &mut self.clients.conns[index];
        match result {
            Ok(Some(buf)) => {
                if conn.phase == Phase::Open {
                    let io = part_io!(self);
                    if !self.clients.receive(&io, index, io.ring.recv_bytes(&buf)) {
                        self.ring.recycle(buf);
                        self.close_now(index);
                        self.op_done_at(index);
                        return;
                    }
                }
                let conn = &mut self.clients.conns[index];
                if conn.phase == Phase::Open {
                    conn.last_activity = self.now;
                }
                self.ring.recycle(buf);
                // A multishot receive ends when the ring runs short of buffers: re-armed
                // unless the connection is closing (or a tunnel's origin is full).
                if !conn.reads_paused {
                    conn.socket.arm_recv(&mut self.ring, token);
                }
                if conn.phase == Phase::Open {
                    self.process(index);
                }
            }
            // End of stream: answer what was received, then close (`flush_out`).
            Ok(None) => {
                if conn.phase == Phase::Open {
                    conn.peer_finished();
                    self.process(index);
                } else {
                    self.close_now(index);
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                // Every receive buffer is in use for a moment: ask again.
                conn.socket.arm_recv(&mut self.ring, token);
            }
            // A receive cancelled to pause reading (a tunnel's origin or a request body's
            // exchange full) whose pause was lifted before the cancel landed: read on.
            Err(e) if e.raw_os_error() == Some(libc::ECANCELED) => {
                if !conn.reads_paused && conn.phase == Phase::Open {
                    conn.socket.arm_recv(&mut self.ring, token);
                }
            }
            Err(e) => {
                debug!(worker = self.id, conn = index, "recv: {e}");
                self.close_now(index);
            }
        }
        self.op_done_at(index);
    }

    /// Hands what the connection has to the ring (one send or writev at a time), charges what
    /// it holds to the process's count of buffered response bytes, and closes or lingers a
    /// connection whose last bytes have left.
    pub(in crate::worker) fn flush(&mut self, index: usize) {
        // HTTP/3: the QUIC connection sends through its listener's socket, and a connection
        // QUIC ended closes its slot.
        let io = &mut part_io!(self);
        if let Some(flushed) = self.quic.flush(io, &mut self.clients.conns[index]) {
            if flushed.closed {
                self.close_now(index);
                return;
            }
            if flushed.delivered {
                part_downstream!(self).schedule(index);
            }
            self.clients.conns[index].account(self.runtime.metrics.buffered.of(self.id));
            return;
        }
        match self.clients.flush_out(&mut part_io!(self), index) {
            After::Nothing => {}
            After::Close => self.close_now(index),
            After::Linger => {
                if !self.clients.linger(&mut part_io!(self), index) {
                    self.close_now(index);
                }
            }
        }
        if let Some(conn) = self.clients.conns.get_mut(index) {
            // The conn's own accounting: no downstream to build on this path.
            conn.account(self.runtime.metrics.buffered.of(self.id));
        }
    }

    /// A send or writev on client connection `index` completed (`done`, from
    /// `Clients::on_send` or `on_writev`): the protocol goes on, the rest is sent, or the
    /// connection closes.
    pub(in crate::worker) fn after_send(&mut self, index: usize, done: SendDone) {
        match done {
            SendDone::Sent => self.sent(index),
            SendDone::Flush => self.flush(index),
            SendDone::Close => self.close_now(index),
            SendDone::Nothing => {}
        }
        self.op_done_at(index);
    }

    /// Ends connection `index`: its sessions are aborted and its file transfers end, then its
    /// operations are cancelled and the close of its socket queued.
    pub(in crate::worker) fn close_now(&mut self, index: usize) {
        for id in downstream::sessions_of(&self.clients.conns[index]) {
            self.tell(id, Told::ClientGone);
        }
        self.with_files(|files, io, down| files.gone_all(io, down, index));
        self.clients.close(&mut part_io!(self), index);
        // An HTTP/3 connection finishes QUIC's close in the `Quic` part. Its slot, which has
        // no socket to wait for, is freed at the end of the turn (`run_ready`), when nothing
        // of this turn holds its index any more.
        let io = &mut part_io!(self);
        if self.quic.retire(io, &mut self.clients.conns[index].proto) {
            part_downstream!(self).schedule(index);
        }
    }

    /// Frees a closed connection's slot once the kernel has reported all its operations; a
    /// listener paused for want of descriptors may resume.
    pub(in crate::worker) fn op_done_at(&mut self, index: usize) {
        let freed = self.clients.op_done_at(&part_io!(self), index);
        if freed && self.admission.any_paused() && self.drain_deadline.is_none() {
            self.admission.resume(&mut part_io!(self));
        }
    }

    /// Recomputes when this connection must next be looked at, and files a timer if needed.
    pub(in crate::worker) fn update_deadline(&mut self, index: usize) {
        let origin_wait = awaits_origin(&self.clients, &self.sessions, index);
        self.clients
            .deadline(&mut part_io!(self), index, origin_wait);
    }

    pub(in crate::worker) fn expire_timers(&mut self) {
        let mut fired = std::mem::take(&mut self.fired);
        self.timers.expire(self.now, &mut fired);
        for entry in fired.drain(..) {
            let token = Token::from_raw(entry.key);
            if token.kind() == Kind::Origin {
                self.origins
                    .on_origin_timer(&mut part_io!(self), token, entry.due);
                continue;
            }
            if token.kind() == Kind::Session {
                let due = self.with_sessions(|s, cx| s.on_timer(cx, token, entry.due));
                if let Some(id) = due {
                    self.tell(id, Told::Timer);
                }
                continue;
            }
            let Some(index) = self.clients.index(token) else {
                continue;
            };
            let conn = &mut self.clients.conns[index];
            if conn.timer_due == Some(entry.due) {
                conn.timer_due = None;
            }
            if conn.phase == Phase::Closed {
                continue;
            }
            if conn.deadline <= self.now {
                self.on_deadline(index);
            } else if conn.timer_due.is_none() {
                conn.timer_due = Some(conn.deadline);
                self.timers.insert(entry.key, conn.deadline);
            }
        }
        self.fired = fired;
    }

    pub(in crate::worker) fn on_deadline(&mut self, index: usize) {
        // The moment an idle connection gives its buffers back may be all that was due.
        if self.clients.shrink_if_due(index, self.now) {
            self.update_deadline(index);
            if self.clients.conns[index].deadline > self.now {
                return;
            }
        }
        if self.clients.conns[index].phase == Phase::Open {
            // Parked requests whose wait has run out go to the origin.
            for client in downstream::parked_due(&self.clients.conns[index], index, self.now) {
                debug!(
                    worker = self.id,
                    conn = index,
                    "coalesce_timeout: to the origin"
                );
                self.unpark(client);
            }
        }
        let origin_wait = awaits_origin(&self.clients, &self.sessions, index);
        let conn = &mut self.clients.conns[index];
        let metrics = self.runtime.metrics.worker(self.id);
        let active = conn.last_activity + self.runtime.limits.idle_timeout > self.now;
        let due = match conn.phase {
            Phase::Open => conn.proto.at_deadline(self.now, active, origin_wait),
            Phase::Lingering | Phase::Closed => Due::Idle,
        };
        match due {
            Due::Cut => self.close_now(index),
            Due::Later => self.update_deadline(index),
            Due::Timers { again } => {
                if part_downstream!(self).run_timers(index) {
                    self.pump(index);
                }
                if again {
                    self.update_deadline(index);
                }
            }
            Due::Idle
                if conn.phase == Phase::Open
                    && !conn.socket.sending()
                    && conn.head_in_progress() =>
            {
                // Slowloris: part of a head arrived, the rest did not come in time.
                debug!(worker = self.id, conn = index, "request header timeout");
                part_downstream!(self).head_timeout(index);
                self.flush(index);
                self.update_deadline(index);
            }
            Due::GoAway => {
                // RFC 9113 §9.1: an idle HTTP/2 connection is ended with GOAWAY(NO_ERROR) and
                // the last stream processed, not a bare close, so the client knows which of
                // its requests were not seen and may send them again. The connection closes
                // once the GOAWAY has left (then lingers), or after the grace.
                metrics.timeouts.inc();
                if part_downstream!(self).go_away(index, true) {
                    self.pump(index);
                }
            }
            Due::Idle => {
                // Idle keep-alive, a client that stopped reading, or the end of a linger.
                metrics.timeouts.inc();
                self.close_now(index);
            }
        }
    }
}

/// A request on connection `index` waits on its origin, and the connection has nothing unsent
/// for its client (a client that stops reading is idle, whatever it waits for).
fn awaits_origin(clients: &Clients, sessions: &Sessions, index: usize) -> bool {
    let conn = &clients.conns[index];
    conn.unsent_bytes() == 0 && !conn.socket.sending() && downstream::awaits_origin(conn, sessions)
}
