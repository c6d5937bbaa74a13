//! HTTP/1.x connections in the worker: choosing the protocol of a new connection, then decoding
//! pipelined requests in order and answering each: `respond` routes at once, cached routes
//! through the cache, proxied ones through a session, whose body is fed to it as it arrives.

use std::sync::Arc;

use squall_cache::Invalidation;
use squall_h1::{Event, RequestDecoder, RequestHead};
use squall_proxy::ProxyRoute;
use tracing::debug;

use super::conn::Phase;
use super::downstream::proto::H1;
use super::entry::Admission;
use super::ids::Client;
use super::{OUT_HIGH_BYTES, RBUF_BLOCKED_MAX_BYTES, Worker, cache, h2, part_io};
use crate::cache::Cache;
use crate::worker::downstream::proto::Proto;

impl Worker {
    /// Answers what the connection received, in the protocol it speaks.
    pub(super) fn process(&mut self, index: usize) {
        match self.clients.conns[index].proto {
            Proto::H1(_) => return self.process_h1(index),
            Proto::H2(_) => return self.process_h2(index),
            Proto::Undecided => {}
        }
        match h2::select(&self.clients.conns[index]) {
            h2::Selection::Undecided => {
                // The TLS handshake's records, or nothing yet.
                self.flush(index);
                self.update_deadline(index);
            }
            h2::Selection::H2 => {
                self.start_h2(index);
                self.process_h2(index);
            }
            h2::Selection::Http1 => {
                let decoder = RequestDecoder::new(self.runtime.h1_limits);
                self.clients.conns[index].proto = Proto::H1(Box::new(H1::new(decoder)));
                self.process_h1(index);
            }
            h2::Selection::Refused => {
                debug!(worker = self.id, conn = index, "protocol not served here");
                self.runtime.metrics.worker(self.id).bad_requests.inc();
                self.close_now(index);
            }
        }
    }

    /// A send completed whole: produce and send more, in the protocol the connection speaks,
    /// and let a proxied response or a file paused for this client go on.
    pub(super) fn sent(&mut self, index: usize) {
        let conn = &mut self.clients.conns[index];
        conn.last_activity = self.now;
        if matches!(conn.proto, Proto::H2(_)) {
            self.pump_h2(index);
        } else if conn.blocked {
            conn.blocked = false;
            self.process(index);
        } else {
            self.flush(index);
            self.update_deadline(index);
        }
        let Some(h1) = self.clients.conns[index].proto.h1() else {
            return;
        };
        let (exchange, file) = (h1.exchange, h1.file);
        if let Some(id) = exchange {
            self.client_drained(id);
        }
        if let Some(id) = file {
            self.with_files(|files, io, down| files.drained(io, down, id));
        }
    }

    /// Decodes and answers every complete HTTP/1.x request in the receive buffer, in order.
    pub(super) fn process_h1(&mut self, index: usize) {
        if self.tunnel_client(index) {
            return;
        }
        // A request for the cache stops the decoding loop when it parks or goes to the
        // origin; when the cache answered it, decoding goes on with the next pipelined
        // request. A proxied request's session starts at its head, and its body follows.
        while let Some(decoded) = self.decode_h1(index) {
            if !self.begin_decoded(index, decoded) {
                break;
            }
        }
        let exchange = self.clients.conns[index]
            .proto
            .h1()
            .and_then(|h1| h1.exchange);
        if let Some(id) = exchange {
            // Body bytes fed above wait in the exchange until they are written out.
            self.drive(id);
        }
        let body_full = exchange
            .and_then(|id| self.sessions.get(id))
            .is_some_and(|s| s.ex.request_body_room() == 0);
        let conn = &self.clients.conns[index];
        if conn.phase != Phase::Open {
            return;
        }
        // A request body the exchange takes no more of: the socket is not read on until the
        // origin takes some (`origin_sent`), so what the client sends waits in its kernel
        // buffers, not in ours.
        let forwarding = conn.proto.h1().is_some_and(|h1| h1.forwarding);
        let pause = conn.blocked && forwarding && body_full;
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
        self.flush(index);
        self.update_deadline(index);
    }

    /// Begins a request the decoding loop handed out; false when decoding must stop (the
    /// cache parked it or sent it to the origin).
    fn begin_decoded(&mut self, index: usize, decoded: Decoded) -> bool {
        match decoded {
            Decoded::Cached(head, route) => {
                let begun = self.begin_cached(Client::H1(index), head, route);
                begun == cache::Begun::Answered
            }
            Decoded::Forward(head, route, invalidate) => {
                if let Some(h1) = self.clients.conns[index].proto.h1_mut() {
                    h1.forwarding = true;
                }
                self.start_session(Client::H1(index), head, route, invalidate, None);
                true
            }
            Decoded::File(head, root) => self.start_file(Client::H1(index), head, root),
        }
    }

    /// A request that waited for its credentials goes on as if just admitted; decoding then
    /// resumes with its end (it had no body).
    pub(super) fn resume_h1(&mut self, index: usize, head: RequestHead, admission: Admission) {
        let conn = &mut self.clients.conns[index];
        let open = conn.phase == Phase::Open;
        match conn.proto.h1_mut() {
            Some(h1) if h1.verifying && open => h1.verifying = false,
            _ => return,
        }
        if let Some(decoded) = self.admitted_h1(index, head, admission) {
            self.begin_decoded(index, decoded);
        }
        self.process_h1(index);
    }

    /// What an admitted request head leads to: a refusal written, a route noted for the
    /// request's end, a wait for its credentials, or a request for the caller to begin.
    fn admitted_h1(
        &mut self,
        index: usize,
        head: RequestHead,
        admission: Admission,
    ) -> Option<Decoded> {
        let conn = &mut self.clients.conns[index];
        // A proxied request's exchange says 100 Continue itself.
        if head.expect_continue
            && matches!(admission, Admission::Cached(_) | Admission::Answer { .. })
        {
            squall_h1::encode_continue(&mut conn.out);
        }
        match admission {
            Admission::Refused(status, field) => {
                self.downstream().refuse_h1(index, &head, status, field);
            }
            // `verify_parked` marks the connection as waiting (it reads nothing meanwhile).
            Admission::Verify(verify) => self.verify_parked(Client::H1(index), head, *verify),
            // To the cache at the request's end (the next event).
            Admission::Cached(route) => {
                if let Some(h1) = conn.proto.h1_mut() {
                    h1.cached_route = Some(route);
                    h1.request = Some(head);
                }
            }
            Admission::Forward { route, invalidate } => {
                return Some(Decoded::Forward(head, route, invalidate));
            }
            Admission::Answer { route } => {
                if let Some(h1) = conn.proto.h1_mut() {
                    h1.answer_route = route;
                    h1.request = Some(head);
                }
            }
        }
        None
    }

    /// The decoding loop of `process_h1`: answers `respond` routes, feeds a proxied request's
    /// body to its session, and returns a request that needs more of the worker (a complete
    /// one for a cached route, the head of a proxied one), to be begun by the caller.
    fn decode_h1(&mut self, index: usize) -> Option<Decoded> {
        loop {
            let conn = &mut self.clients.conns[index];
            let unsent = conn.unsent_bytes();
            let h1 = conn.proto.h1_mut()?;
            if conn.close_after || conn.phase != Phase::Open || h1.verifying {
                return None;
            }
            // A proxied request is answered before the next pipelined one is read.
            if (h1.exchange.is_some() && !h1.forwarding) || h1.parked.is_some() || h1.file.is_some()
            {
                return None;
            }
            if unsent >= OUT_HIGH_BYTES {
                conn.blocked = true;
                return None;
            }
            if conn.head_started.is_none()
                && h1.request.is_none()
                && !h1.forwarding
                && !conn.rbuf.is_empty()
            {
                conn.head_started = Some(self.now);
                conn.fresh = false;
            }
            match h1.decoder.decode(&mut conn.rbuf) {
                Ok(Some(Event::Head(head))) => {
                    conn.request_started = conn.head_started.take().unwrap_or(self.now);
                    let bodiless = head.body == squall_h1::BodyKind::Empty;
                    let admission = self
                        .gate()
                        .admit(&self.clients.conns[index], &head, bodiless);
                    if let Some(decoded) = self.admitted_h1(index, head, admission) {
                        return Some(decoded);
                    }
                }
                // A proxied request's body goes to its session, which frames it for the
                // origin; `respond` routes do not read bodies, so the bytes are dropped.
                Ok(Some(Event::Data(data))) => {
                    let Some(id) = h1.exchange.filter(|_| h1.forwarding) else {
                        continue;
                    };
                    let room = self.sessions.feed_batched(id, |ex| {
                        ex.on_client_body(&data);
                        ex.request_body_room()
                    });
                    if room == Some(0) {
                        self.clients.conns[index].blocked = true;
                        return None;
                    }
                }
                // The end of a proxied request (whose session may have ended already: then
                // the connection closes after its answer).
                Ok(Some(Event::End { trailers })) if h1.forwarding => {
                    h1.forwarding = false;
                    if let Some(id) = h1.exchange {
                        // Trailers of a chunked request go on in the origin's last chunk.
                        self.sessions
                            .feed_batched(id, |ex| ex.on_client_end(trailers.as_ref()));
                    }
                }
                Ok(Some(Event::End { .. })) => {
                    let head = h1
                        .request
                        .take()
                        .expect("the codec ends only a started request");
                    if let Some(route) = h1.cached_route.take() {
                        return Some(Decoded::Cached(head, route));
                    }
                    let route = h1.answer_route.take();
                    if let Some(root) = super::files::files_root(&self.runtime, route) {
                        return Some(Decoded::File(head, root));
                    }
                    (self.downstream()).respond(Client::H1(index), &head, route);
                }
                Ok(None) => return None,
                Err(e) => {
                    let status = e.status();
                    debug!(
                        worker = self.id,
                        conn = index,
                        status = status.as_u16(),
                        "bad request: {e}"
                    );
                    let head = h1.request.take();
                    (self.downstream()).bad_request_h1(index, head.as_ref(), status);
                }
            }
        }
    }
}

/// A decoded request that needs more than the decoding loop can give it.
enum Decoded {
    /// A complete bodiless request on a cached route.
    Cached(RequestHead, Arc<ProxyRoute>),
    /// The head of a proxied request (its body, if any, follows), with the purge its success
    /// implies on a cached route.
    Forward(
        RequestHead,
        Arc<ProxyRoute>,
        Option<(Arc<Cache>, Invalidation)>,
    ),
    /// A complete request on a `root` route.
    File(RequestHead, Arc<crate::roots::Root>),
}
