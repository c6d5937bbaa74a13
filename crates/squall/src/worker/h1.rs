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
use super::downstream::log_request;
use super::entry::Admission;
use super::{OUT_HIGH_BYTES, RBUF_BLOCKED_MAX_BYTES, Worker, cache, h2, scheme};
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
        if let Some(id) = self.conns[index].exchange {
            // Body bytes fed above wait in the exchange until they are written out.
            self.drive(id);
        }
        let body_full = (self.conns[index].exchange)
            .and_then(|id| self.sessions.get(id.index).filter(|s| s.is(id)))
            .is_some_and(|s| s.ex.request_body_room() == 0);
        let conn = &self.conns[index];
        if conn.phase != Phase::Open {
            return;
        }
        // A request body the exchange takes no more of: the socket is not read on until the
        // origin takes some (`origin_sent`), so what the client sends waits in its kernel
        // buffers, not in ours.
        let pause = conn.blocked && conn.forwarding && body_full;
        self.pause_reads(index, pause);
        let conn = &mut self.conns[index];
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
                self.conns[index].forwarding = true;
                self.start_session(Client::H1(index), head, route, invalidate, None);
                true
            }
            Decoded::File(head, root) => self.start_file(Client::H1(index), head, root),
        }
    }

    /// A request that waited for its credentials goes on as if just admitted; decoding then
    /// resumes with its end (it had no body).
    pub(super) fn resume_h1(&mut self, index: usize, head: RequestHead, admission: Admission) {
        let conn = &mut self.conns[index];
        if !conn.verifying || conn.phase != Phase::Open {
            return;
        }
        conn.verifying = false;
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
        let counters = self.runtime.metrics.worker(self.id);
        let date = self.date.get();
        let conn = &mut self.conns[index];
        // A proxied request's exchange says 100 Continue itself.
        if head.expect_continue
            && matches!(admission, Admission::Cached(_) | Admission::Answer { .. })
        {
            squall_h1::encode_continue(&mut conn.out);
        }
        match admission {
            Admission::Refused(status, field) => {
                counters.count_response(status);
                let before = conn.out.len();
                let service = &self.runtime.service;
                encode_refusal(service, &head, status, field, date, &mut conn.out);
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
            // `verify_parked` marks the connection as waiting (it reads nothing meanwhile).
            Admission::Verify(verify) => self.verify_parked(Client::H1(index), head, *verify),
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
        None
    }

    /// The decoding loop of `process_h1`: answers `respond` routes, feeds a proxied request's
    /// body to its session, and returns a request that needs more of the worker (a complete
    /// one for a cached route, the head of a proxied one), to be begun by the caller.
    fn decode_h1(&mut self, index: usize) -> Option<Decoded> {
        let draining = self.drain_deadline.is_some();
        loop {
            let conn = &mut self.conns[index];
            if conn.close_after || conn.phase != Phase::Open || conn.verifying {
                return None;
            }
            // A proxied request is answered before the next pipelined one is read.
            if (conn.exchange.is_some() && !conn.forwarding)
                || conn.parked.is_some()
                || conn.file.is_some()
            {
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
                    if let Some(decoded) = self.admitted_h1(index, head, admission) {
                        return Some(decoded);
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
                Ok(Some(Event::End { trailers })) if conn.forwarding => {
                    conn.forwarding = false;
                    let session = conn
                        .exchange
                        .and_then(|id| self.sessions.get_mut(id.index).filter(|s| s.is(id)));
                    if let Some(session) = session {
                        // Trailers of a chunked request go on in the origin's last chunk.
                        session.ex.on_client_end(trailers.as_ref());
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
                    let route = conn.answer_route;
                    if let Some(root) = self.files_root(route) {
                        self.conns[index].answer_route = None;
                        return Some(Decoded::File(head, root));
                    }
                    let conn = &mut self.conns[index];
                    let before = conn.out.len();
                    let (runtime, counters) = (&self.runtime, self.runtime.metrics.worker(self.id));
                    let outcome = runtime.service.respond_routed(
                        conn.answer_route.take(),
                        &head,
                        scheme(conn),
                        self.date.get(),
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
                    let counters = self.runtime.metrics.worker(self.id);
                    counters.count_bad_request(status);
                    let before = conn.out.len();
                    let head = conn.request.take();
                    // A body over the limit comes after a head, whose vhost may have a page.
                    let page = (head.as_ref())
                        .and_then(|h| Some((h, self.runtime.service.error_page(h, status)?)));
                    match page {
                        Some((head, page)) => {
                            let content_type = ("content-type", page.content_type.as_bytes());
                            let (body, date) = (&page.body, self.date.get());
                            encode_closing(
                                head,
                                status,
                                content_type,
                                None,
                                body,
                                date,
                                &mut conn.out,
                            );
                        }
                        None => squall_h1::encode_error(status, self.date.get(), &mut conn.out),
                    }
                    conn.close_after = true;
                    let sent = conn.out.len() - before;
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
    /// A complete request on a `root` route.
    File(RequestHead, Arc<crate::roots::Root>),
}

/// A refusal of a request whose body is not read: the vhost's error page for `status` or a
/// short text answer, with `field` (a `WWW-Authenticate` challenge, a `Retry-After`), and
/// `Connection: close`.
fn encode_refusal(
    service: &crate::route_rules::Service,
    head: &RequestHead,
    status: http::StatusCode,
    field: Option<super::entry::Field>,
    date: &[u8],
    out: &mut bytes::BytesMut,
) {
    let page = service.error_page(head, status);
    if field.is_none() && page.is_none() {
        squall_h1::encode_error(status, date, out);
        return;
    }
    let (content_type, body) = service.error_body(Some(head), status);
    let field = field.as_ref().map(|(name, value)| (*name, &value[..]));
    let content_type = ("content-type", content_type.as_bytes());
    encode_closing(head, status, content_type, field, &body, date, out);
}

/// An HTTP/1.x answer written here that ends the connection: `content-type` (and one more
/// `field`, if given) and `body`, no body for HEAD.
pub(super) fn encode_closing(
    head: &RequestHead,
    status: http::StatusCode,
    content_type: (&str, &[u8]),
    field: Option<(&str, &[u8])>,
    body: &[u8],
    date: &[u8],
    out: &mut bytes::BytesMut,
) {
    let mut raw = bytes::BytesMut::from(&b"server: squall\r\n"[..]);
    super::downstream::put_line(&mut raw, content_type.0.as_bytes(), content_type.1);
    if let Some((name, value)) = field {
        super::downstream::put_line(&mut raw, name.as_bytes(), value);
    }
    let response = squall_h1::ResponseHead {
        status,
        headers: &http::HeaderMap::new(),
        raw_headers: &raw,
        body_len: Some(body.len() as u64),
    };
    let framing = squall_h1::RequestFraming {
        version: head.version,
        keep_alive: false,
        is_head: head.method == http::Method::HEAD,
    };
    if squall_h1::encode_response_head(&response, framing, date, out) {
        out.extend_from_slice(body);
    }
}
