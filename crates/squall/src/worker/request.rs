//! The loop's side of client requests: what each request event a connection's protocol layer
//! hands out ([`Heard`]) leads to — admission, then the cache, a session, a static file or an
//! answer — and what a connection does once its bytes were read or sent. Written once for
//! every protocol: where they differ, the protocol layer is asked.

use squall_h1::RequestHead;
use tracing::debug;

use super::conn::Phase;
use super::downstream::heard::{Began, Deferred, Heard};
use super::downstream::{self, Answering, part_downstream};
use super::entry::{Admission, verify_parked};
use super::ids::{Client, ClientToken};
use super::session::Told;
use super::tunnel::is_stream_upgrade;
use super::{RBUF_BLOCKED_MAX_BYTES, Worker, part_io};
use crate::auth::Verdict;

impl Worker {
    /// Reads what connection `index` received, in the protocol it speaks (chosen here if it
    /// has none yet), hands every request event on, and sends what that produced.
    pub(super) fn process(&mut self, index: usize) {
        match part_downstream!(self).begin(index) {
            Began::Speaking => {}
            Began::Undecided => {
                // The TLS handshake's records, or nothing yet.
                self.flush(index);
                self.update_deadline(index);
                return;
            }
            Began::Refused => return self.close_now(index),
        }
        if self.tunnel_client(index, false) {
            return;
        }
        while let Some(heard) = part_downstream!(self).next(index) {
            if !self.heard(index, heard) {
                break;
            }
        }
        // Body bytes fed above wait in their exchanges until they are written out.
        let mut fed = std::mem::take(&mut self.fed);
        for id in fed.drain(..) {
            self.drive(id);
        }
        self.fed = fed;
        let conn = &self.clients.conns[index];
        if conn.phase != Phase::Open {
            return;
        }
        // A request body the exchange takes no more of: the socket is not read on until the
        // origin takes some (`origin_sent`), so what the client sends waits in its kernel
        // buffers, not in ours.
        let body_full = (part_downstream!(self).reading_body_of(index))
            .and_then(|id| self.sessions.get(id))
            .is_some_and(|s| s.ex.request_body_room() == 0);
        let pause = self.clients.conns[index].blocked && body_full;
        (self.clients).pause_reads(&mut part_io!(self), index, pause);
        let conn = &mut self.clients.conns[index];
        if conn.blocked && conn.rbuf.len() > RBUF_BLOCKED_MAX_BYTES {
            debug!(
                worker = self.id,
                conn = index,
                "client sends without reading: closing"
            );
            self.runtime.metrics.worker(self.id).input_overflows.inc();
            self.close_now(index);
            return;
        }
        self.pump(index);
    }

    /// What one request event of connection `index` leads to. False when the connection
    /// reads no further for now (a request body its exchange has no room for).
    fn heard(&mut self, index: usize, heard: Heard) -> bool {
        match heard {
            Heard::Head { client, head, end } => {
                let conn = &self.clients.conns[index];
                let admission = self.gate().admit(conn, &head, end);
                self.admitted(client, head, end, admission);
            }
            Heard::Body {
                client,
                id,
                data,
                end,
            } => {
                let Some(session) = self.sessions.get(id) else {
                    return true;
                };
                if is_stream_upgrade(session.ex.head()) && !session.ex.is_tunnel() {
                    // An HTTP/2 or HTTP/3 tunnel's bytes: kept until the origin said yes.
                    part_downstream!(self).keep_early(client, data, end);
                    return true;
                }
                self.fed.push(id);
                if is_stream_upgrade(session.ex.head()) {
                    let told = Told::TunnelData { data, eof: end };
                    self.with_sessions(|sessions, cx| sessions.tell(cx, id, told));
                    return true;
                }
                let room = self.sessions.feed_batched(id, |ex| {
                    ex.on_client_body(&data);
                    if end {
                        ex.on_client_end(None);
                    }
                    ex.request_body_room()
                });
                if room == Some(0) {
                    return !part_downstream!(self).body_full(client);
                }
            }
            Heard::End { id, trailers } => {
                let fed = self.sessions.feed_batched(id, |ex| {
                    ex.on_client_end(trailers.as_ref());
                });
                if fed.is_some() {
                    self.fed.push(id);
                }
            }
            Heard::Complete {
                client,
                head,
                deferred,
            } => self.complete(client, head, deferred),
            Heard::Reset { session, file } => {
                if let Some(id) = session {
                    self.tell(id, Told::ClientGone);
                }
                if let Some(id) = file {
                    self.with_files(|files, io, down| files.gone(io, down, id));
                }
            }
        }
        true
    }

    /// What an admitted request head leads to: a refusal, a wait for its credentials, a
    /// session, or an answer now or at the request's end (the cache's or its route's).
    fn admitted(&mut self, client: Client, head: RequestHead, end: bool, admission: Admission) {
        let mut down = part_downstream!(self);
        let Some(admission) = down.admit_tunnel(client, &head, admission) else {
            return;
        };
        let deferred = match admission {
            Admission::Refused(status, field) => return down.refuse(client, &head, status, field),
            Admission::Verify(verify) => {
                let peer = self.peers.get(self.id);
                return verify_parked(&mut down, peer, client, head, *verify);
            }
            Admission::Forward { route, invalidate } => {
                if !end {
                    down.forwarding(client);
                }
                return self.start_session(client, head, route, invalidate, None);
            }
            Admission::Cached(route) => Deferred::Cached(route),
            Admission::Answer { route } => Deferred::Answer(route),
        };
        let mut down = part_downstream!(self);
        match down.waits(client, &head, &deferred, end) {
            Some(true) => down.defer(client, head, deferred),
            Some(false) => self.complete(client, head, deferred),
            None => {}
        }
    }

    /// Answers a request read to its end, the way its admission chose: from the cache, a
    /// static file, or its route.
    fn complete(&mut self, client: Client, head: RequestHead, deferred: Deferred) {
        match deferred {
            Deferred::Cached(route) => self.begin_cached(client, head, route),
            Deferred::Answer(route) => match super::files::files_root(&self.runtime, route) {
                Some(root) => {
                    self.with_files(|files, io, down| files.start(io, down, client, head, root));
                }
                None => part_downstream!(self).respond(client, &head, route),
            },
        }
    }

    /// A parked request's verdict: admitted again (routing, `allow` / `deny`), then it goes
    /// on as any admitted request does (it had no body), unless its connection has closed
    /// meanwhile.
    pub(super) fn verified(&mut self, token: ClientToken, head: RequestHead, verdict: Verdict) {
        let Some(index) = self.clients.index(token.token) else {
            return;
        };
        let conn = &self.clients.conns[index];
        let admission = self.gate().admit_with(conn, &head, true, Some(verdict));
        let client = Client::of(index, token);
        if !part_downstream!(self).verified(client) {
            return;
        }
        self.admitted(client, head, true, admission);
        self.process(index);
    }

    /// A send completed whole: the connection produces and sends more (or, blocked on its
    /// output, reads on), and what was paused for this client goes on.
    pub(super) fn sent(&mut self, index: usize) {
        let conn = &mut self.clients.conns[index];
        conn.last_activity = self.now;
        let drained = match std::mem::take(&mut conn.blocked) {
            true => {
                self.process(index);
                false
            }
            false => self.pump(index),
        };
        if !drained {
            self.drained(index);
        }
    }

    /// Moves what the connection's protocol has to say into its output, sends it, and
    /// computes its deadline again. True when its streams may have drained and were told so.
    pub(super) fn pump(&mut self, index: usize) -> bool {
        let drained = part_downstream!(self).pump(index);
        self.flush(index);
        self.update_deadline(index);
        if drained {
            self.drained(index);
        }
        drained
    }

    /// The client of connection `index` took some output: the proxied responses and files
    /// paused for it go on.
    fn drained(&mut self, index: usize) {
        let mut answering = std::mem::take(&mut self.answering);
        downstream::answering(&self.clients.conns[index], &mut answering);
        for answer in answering.drain(..) {
            match answer {
                Answering::Session(id) => self.tell(id, Told::ClientDrained),
                Answering::File(id) => {
                    self.with_files(|files, io, down| files.drained(io, down, id));
                }
            }
        }
        self.answering = answering;
    }
}
