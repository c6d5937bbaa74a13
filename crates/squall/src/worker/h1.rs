//! HTTP/1.x connections in the worker: choosing the protocol of a new connection, then decoding
//! pipelined requests in order and answering each: `respond` routes at once, cached routes
//! through the cache, proxied ones through a session, whose body is fed to it as it arrives.

use std::sync::Arc;

use squall_cache::Invalidation;
use squall_h1::{Event, RequestHead};
use squall_proxy::ProxyRoute;
use tracing::debug;

use super::conn::Phase;
use super::downstream::Client;
use super::entry::Admission;
use super::{OUT_HIGH_BYTES, RBUF_BLOCKED_MAX_BYTES, Worker, cache, h2, log_request, scheme};
use crate::cache::Cache;

impl Worker {
    /// Answers what the connection received, in the protocol it speaks.
    pub(super) fn process(&mut self, index: usize) {
        if self.conns[index].h2.is_some() {
            self.process_h2(index);
            return;
        }
        if !self.conns[index].selected {
            match h2::select(&self.conns[index]) {
                h2::Selection::Undecided => {
                    // The TLS handshake's records, or nothing yet.
                    self.flush(index);
                    self.update_deadline(index);
                    return;
                }
                h2::Selection::H2 => {
                    self.conns[index].selected = true;
                    self.start_h2(index);
                    self.process_h2(index);
                    return;
                }
                h2::Selection::Http1 => self.conns[index].selected = true,
                h2::Selection::Refused => {
                    debug!(worker = self.id, conn = index, "protocol not served here");
                    self.runtime.metrics.worker(self.id).bad_requests.inc();
                    self.close_now(index);
                    return;
                }
            }
        }
        self.process_h1(index);
    }

    /// Decodes and answers every complete HTTP/1.x request in the receive buffer, in order.
    pub(super) fn process_h1(&mut self, index: usize) {
        // A request for the cache stops the decoding loop when it parks or goes to the
        // origin; when the cache answered it, decoding goes on with the next pipelined
        // request. A proxied request's session starts at its head, and its body follows.
        while let Some(decoded) = self.decode_h1(index) {
            match decoded {
                Decoded::Cached(head, route) => {
                    let begun = self.begin_cached(Client::H1(index), head, route);
                    if begun != cache::Begun::Answered {
                        break;
                    }
                }
                Decoded::Forward(head, route, invalidate) => {
                    self.conns[index].forwarding = true;
                    self.start_session(Client::H1(index), head, route, invalidate, None);
                }
            }
        }
        if let Some(id) = self.conns[index].exchange {
            // Body bytes fed above wait in the exchange until they are written out.
            self.drive(id);
        }
        let conn = &mut self.conns[index];
        if conn.phase != Phase::Open {
            return;
        }
        if conn.blocked && conn.rbuf.len() > RBUF_BLOCKED_MAX_BYTES {
            debug!(
                worker = self.id,
                conn = index,
                "client sends without reading: closing"
            );
            self.close_now(index);
            return;
        }
        self.flush(index);
        self.update_deadline(index);
    }

    /// The decoding loop of `process_h1`: answers `respond` routes, feeds a proxied request's
    /// body to its session, and returns a request that needs more of the worker (a complete
    /// one for a cached route, the head of a proxied one), to be begun by the caller.
    fn decode_h1(&mut self, index: usize) -> Option<Decoded> {
        let runtime = &self.runtime;
        let counters = runtime.metrics.worker(self.id);
        let date = self.date.get();
        let draining = self.drain_deadline.is_some();
        loop {
            let conn = &mut self.conns[index];
            if conn.close_after || conn.phase != Phase::Open {
                return None;
            }
            // A proxied request is answered before the next pipelined one is read.
            if (conn.exchange.is_some() && !conn.forwarding) || conn.parked.is_some() {
                return None;
            }
            if conn.unsent_bytes() >= OUT_HIGH_BYTES {
                conn.blocked = true;
                return None;
            }
            if conn.head_started.is_none()
                && conn.request.is_none()
                && !conn.forwarding
                && !conn.rbuf.is_empty()
            {
                conn.head_started = Some(self.now);
                conn.fresh = false;
            }
            match conn.decoder.decode(&mut conn.rbuf) {
                Ok(Some(Event::Head(head))) => {
                    conn.request_started = conn.head_started.take().unwrap_or(self.now);
                    let bodiless = head.body == squall_h1::BodyKind::Empty;
                    let admission = self.admit(index, &head, bodiless);
                    let conn = &mut self.conns[index];
                    // A proxied request's exchange says 100 Continue itself.
                    if head.expect_continue
                        && matches!(admission, Admission::Cached(_) | Admission::Answer { .. })
                    {
                        squall_h1::encode_continue(&mut conn.out);
                    }
                    match admission {
                        Admission::Refused(status) => {
                            counters.count_response(status);
                            let before = conn.out.len();
                            squall_h1::encode_error(status, date, &mut conn.out);
                            let sent = conn.out.len() - before;
                            log_request(
                                &mut self.log,
                                conn,
                                Some(&head),
                                status,
                                sent,
                                self.now,
                                counters,
                            );
                            conn.close_after = true;
                        }
                        // To the cache at the request's end (the next event).
                        Admission::Cached(route) => {
                            conn.cached_route = Some(route);
                            conn.request = Some(head);
                        }
                        Admission::Forward { route, invalidate } => {
                            return Some(Decoded::Forward(head, route, invalidate));
                        }
                        Admission::Answer { route } => {
                            conn.answer_route = route;
                            conn.request = Some(head);
                        }
                    }
                }
                // A proxied request's body goes to its session, which frames it for the
                // origin; `respond` routes do not read bodies, so the bytes are dropped.
                Ok(Some(Event::Data(data))) => {
                    let session = conn
                        .exchange
                        .and_then(|id| self.sessions.get_mut(id.index).filter(|s| s.is(id)));
                    if conn.forwarding
                        && let Some(session) = session
                    {
                        session.ex.on_client_body(&data);
                        if session.ex.request_body_room() == 0 {
                            conn.blocked = true;
                            return None;
                        }
                    }
                }
                // The end of a proxied request (whose session may have ended already: then
                // the connection closes after its answer).
                Ok(Some(Event::End { .. })) if conn.forwarding => {
                    conn.forwarding = false;
                    let session = conn
                        .exchange
                        .and_then(|id| self.sessions.get_mut(id.index).filter(|s| s.is(id)));
                    if let Some(session) = session {
                        // Request trailers are not forwarded from HTTP/1.x clients, as before.
                        session.ex.on_client_end(None);
                    }
                }
                Ok(Some(Event::End { .. })) => {
                    let head = conn
                        .request
                        .take()
                        .expect("the codec ends only a started request");
                    if let Some(route) = conn.cached_route.take() {
                        return Some(Decoded::Cached(head, route));
                    }
                    let before = conn.out.len();
                    let outcome = runtime.service.respond_routed(
                        conn.answer_route.take(),
                        &head,
                        scheme(conn),
                        date,
                        draining,
                        &mut conn.out,
                    );
                    counters.count_response(outcome.status);
                    conn.log_note.route = outcome.route;
                    let sent = conn.out.len() - before;
                    log_request(
                        &mut self.log,
                        conn,
                        Some(&head),
                        outcome.status,
                        sent,
                        self.now,
                        counters,
                    );
                    if !outcome.keep_alive {
                        conn.close_after = true;
                    }
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
                    counters.count_bad_request(status);
                    let before = conn.out.len();
                    squall_h1::encode_error(status, date, &mut conn.out);
                    conn.close_after = true;
                    let sent = conn.out.len() - before;
                    let head = conn.request.take();
                    log_request(
                        &mut self.log,
                        conn,
                        head.as_ref(),
                        status,
                        sent,
                        self.now,
                        counters,
                    );
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
}
