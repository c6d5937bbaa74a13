//! Answers made here rather than by an exchange, a cache entry or a file: a `respond` or
//! `redirect` route's answer to a complete request, a refusal at admission that ends an
//! HTTP/1.1 connection (its body is not read), a request the HTTP/1.1 decoder could not read,
//! and a head that did not arrive in time. With the rest of the downstream, the one place an answer is written.

use http::{Method, StatusCode};
use squall_h1::RequestHead;
use squall_proxy::Handler;

use super::super::entry::Field;
use super::super::ids::Client;
use super::Downstream;
use super::mux::Mux;
use super::write::send_reply;

impl Downstream<'_> {
    /// Answers a complete request on a `respond` or `redirect` route (`route`, as routed; the
    /// service's fallback when none): on HTTP/1.1 the answer the service encodes at once into
    /// the connection's output, on HTTP/2 its reply as a stream's HEADERS and DATA (fixed
    /// fields HPACK-encoded once, with the encoded date).
    pub fn respond(&mut self, client: Client, head: &RequestHead, route: Option<u32>) {
        let Some(conn) = self.conns.get_mut(client.conn()) else {
            return;
        };
        let scheme = crate::worker::scheme(conn);
        let (status, sent) = match client {
            Client::H1(_) => {
                let before = conn.out.len();
                let outcome = (self.service).respond_routed(
                    route,
                    head,
                    scheme,
                    self.date,
                    self.draining,
                    &mut conn.out,
                );
                conn.log_note.route = outcome.route;
                if !outcome.keep_alive {
                    conn.close_after = true;
                }
                conn.alt_svc_h1(before);
                (outcome.status, conn.out.len() - before)
            }
            Client::H2(..) | Client::H3(..) => {
                conn.log_note.route = route;
                // A fixed answer's fields are borrowed from its route, not cloned per request
                // (each clone and drop is a locked count).
                let mut reply;
                let (status, fields, hpack, body) = match self.service.answering(route, head) {
                    Handler::Static {
                        status,
                        fields,
                        hpack,
                        body,
                        ..
                    } => (*status, fields, Some(hpack), body.clone()),
                    handler => {
                        reply = handler.reply(head, scheme);
                        let body = std::mem::take(&mut reply.body);
                        (reply.status, &reply.fields, reply.hpack.as_ref(), body)
                    }
                };
                let encoded_date = self.h2_date.get(self.date);
                let (Some(mux), Some(stream)) = (Mux::of(conn), client.stream()) else {
                    return;
                };
                let sent = send_reply(
                    mux,
                    stream,
                    status,
                    fields.iter().map(|(n, v)| (&n[..], &v[..])),
                    hpack.map(|fields| (&fields[..], encoded_date)),
                    body,
                    head.method == Method::HEAD,
                    self.date,
                );
                (status, sent)
            }
        };
        self.log_answer(client.conn(), Some(head), status, sent);
    }

    /// An HTTP/1.1 request refused at admission, whose body is not read: the vhost's error
    /// page for `status` or a short text answer, with `field` (a `WWW-Authenticate`
    /// challenge, a `Retry-After`), and the connection closes after it.
    pub fn refuse_h1(
        &mut self,
        index: usize,
        head: &RequestHead,
        status: StatusCode,
        field: Option<Field>,
    ) {
        let Some(conn) = self.conns.get_mut(index) else {
            return;
        };
        let before = conn.out.len();
        let page = self.service.error_page(head, status);
        if field.is_none() && page.is_none() {
            squall_h1::encode_error(status, self.date, &mut conn.out);
        } else {
            let (content_type, body) = self.service.error_body(Some(head), status);
            let field = field.as_ref().map(|(name, value)| (*name, &value[..]));
            let content_type = ("content-type", content_type.as_bytes());
            encode_closing(
                head,
                status,
                content_type,
                field,
                &body,
                self.date,
                &mut conn.out,
            );
        }
        let sent = conn.out.len() - before;
        conn.close_after = true;
        self.log_answer(index, Some(head), status, sent);
    }

    /// A request the HTTP/1.1 decoder could not read (`status`: 400, 413, 414, 431, 501...):
    /// the vhost's error page when its head was read and has one, else a short answer; the
    /// connection closes after it, and the bad request is counted and logged.
    pub fn bad_request_h1(&mut self, index: usize, head: Option<&RequestHead>, status: StatusCode) {
        let Some(conn) = self.conns.get_mut(index) else {
            return;
        };
        let before = conn.out.len();
        // A body over the limit comes after a head, whose vhost may have a page.
        let page = head.and_then(|h| Some((h, self.service.error_page(h, status)?)));
        match page {
            Some((head, page)) => {
                let content_type = ("content-type", page.content_type.as_bytes());
                let body = &page.body;
                encode_closing(
                    head,
                    status,
                    content_type,
                    None,
                    body,
                    self.date,
                    &mut conn.out,
                );
            }
            None => squall_h1::encode_error(status, self.date, &mut conn.out),
        }
        conn.close_after = true;
        let sent = conn.out.len() - before;
        self.log_bad_request(index, head, status, sent);
    }

    /// A head that did not arrive whole within `header_timeout` (slowloris): whatever was
    /// queued is dropped for a 408, counted as a bad request, and the connection closes after
    /// it. No access log line: there is no request to name.
    pub fn head_timeout(&mut self, index: usize) {
        let Some(conn) = self.conns.get_mut(index) else {
            return;
        };
        let status = StatusCode::REQUEST_TIMEOUT;
        self.counters.count_bad_request(status);
        conn.out.clear();
        squall_h1::encode_error(status, self.date, &mut conn.out);
        conn.close_after = true;
    }
}

/// An HTTP/1.x answer written here that ends the connection: `content-type` (and one more
/// `field`, if given) and `body`, no body for HEAD.
pub(super) fn encode_closing(
    head: &RequestHead,
    status: StatusCode,
    content_type: (&str, &[u8]),
    field: Option<(&str, &[u8])>,
    body: &[u8],
    date: &[u8],
    out: &mut bytes::BytesMut,
) {
    let mut raw = bytes::BytesMut::from(&b"server: squall\r\n"[..]);
    super::put_line(&mut raw, content_type.0.as_bytes(), content_type.1);
    if let Some((name, value)) = field {
        super::put_line(&mut raw, name.as_bytes(), value);
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
        is_head: head.method == Method::HEAD,
    };
    if squall_h1::encode_response_head(&response, framing, date, out) {
        out.extend_from_slice(body);
    }
}
