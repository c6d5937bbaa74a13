//! The downstream: how any answer reaches the client, whatever protocol it came on.
//!
//! A request is answered through one interface (a proxied response's head, data, end, error
//! or reset; a cache entry; a short status response) and this file is the one place that
//! knows whether the client is an HTTP/1.1 connection or a stream of an HTTP/2 connection
//! ([`Client`]). It writes the bytes (status line, Date, framing, chunks, or HPACK and DATA
//! frames), counts the response and writes the access log line, so that a feature written
//! against it is written once for both protocols.
//!
//! Why a struct of borrowed parts and not methods of the worker: a session's driver holds
//! its session (in the worker's session slab) while it writes to the client, and the
//! downstream needs only the connections, the log and the clock, never the sessions, the
//! origins or the ring. `part_downstream!` builds it from the worker beside any other part.

use std::collections::VecDeque;
use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName};
use http::{Method, StatusCode};
use slab::Slab;
use squall_cache::{ContentRange, Entry, Multipart, RangeAnswer};
use squall_h1::RequestHead;
use squall_proxy::{ClientFraming, ClientProtocol, ToClient};

use super::conn::Conn;
use super::ids::Label;
use super::ids::{Client, ClientToken};
use super::session::Session;
use super::token::Token;
use crate::metrics::WorkerCounters;
use proto::Proto;

mod file;
mod grpc;
pub(super) mod heard;
mod hit;
mod log;
pub(super) mod mux;
pub(super) mod proto;
mod respond;
mod slots;
mod write;

pub(super) use file::FileAnswered;
pub(super) use log::RequestLog;
use mux::Mux;
pub(super) use proto::Due;
pub(super) use slots::{
    Answering, answering, awaits_origin, files_of, h1_session, lift_body_limit, park, parked_due,
    sessions_of, set_file, set_session, set_verifying, take_early, take_parked,
};
pub(super) use write::EncodedDate;
use write::{write_h1, write_mux};

/// The status logged for a request whose client left before any response head was written to
/// it (nginx's 499: not a status any client sees).
const CLIENT_CLOSED_REQUEST: StatusCode = match StatusCode::from_u16(499) {
    Ok(status) => status,
    Err(_) => panic!("499 is a valid status code"),
};

impl Client {
    /// The client connection's slot.
    pub fn conn(self) -> usize {
        match self {
            Client::H1(index) | Client::H2(index, _) | Client::H3(index, _) => index,
        }
    }

    pub fn token(self, generation: u32) -> ClientToken {
        ClientToken {
            token: Token::client(self.conn(), generation),
            client: self,
        }
    }

    /// The client a token names, on the connection in slot `index` (the token's own).
    pub fn of(index: usize, token: ClientToken) -> Client {
        debug_assert_eq!(index, token.client.conn());
        token.client
    }

    /// The stream a multiplexed connection's client is, as the stream maps key it.
    pub fn stream(self) -> Option<u64> {
        match self {
            Client::H1(_) => None,
            Client::H2(_, stream) => Some(u64::from(stream)),
            Client::H3(_, stream) => Some(stream),
        }
    }

    /// Whether an answer to this client can end with trailers of its own (an HTTP/2 or
    /// HTTP/3 stream): what a gRPC error without a response needs (`grpc-status` in a
    /// trailers-only answer).
    pub fn ends_with_trailers(self) -> bool {
        matches!(self, Client::H2(..) | Client::H3(..))
    }

    /// How the exchange must frame a response for this client: HTTP/3 frames a body as
    /// HTTP/2 does (DATA frames, the stream's end; no chunking, no connection fields).
    pub fn protocol(self, head: &RequestHead) -> ClientProtocol {
        match self {
            Client::H2(..) | Client::H3(..) => ClientProtocol::H2,
            Client::H1(_) if head.version == http::Version::HTTP_10 => ClientProtocol::Http10,
            Client::H1(_) => ClientProtocol::Http11,
        }
    }
}

/// The downstream's state for one proxied response.
#[derive(Debug, Default)]
pub struct Reply {
    framing: Option<ClientFraming>,
    /// HTTP/1.x: the connection stays open after the response.
    keep_alive: bool,
    /// Bytes written for the access log.
    sent: usize,
    /// An `X-Cache: MISS` goes into the head (a cached route with `x_cache`).
    x_cache: bool,
    /// The origin's error response was replaced by an error page: its body is dropped.
    intercepted: bool,
    /// The response's log line was written (it ended, was cut, or its client left).
    logged: bool,
}

impl Reply {
    /// A reply not begun; `x_cache` adds `X-Cache: MISS` to its head.
    pub fn new(x_cache: bool) -> Reply {
        Reply {
            x_cache,
            ..Reply::default()
        }
    }
}

/// What writing a proxied response's piece asks of the connection afterwards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Something was queued for the client: its connection must send (or pump) it.
    pub queued: bool,
}

/// The parts of the worker that write to clients (see the module docs).
pub(super) struct Downstream<'a> {
    pub conns: &'a mut Slab<Conn>,
    pub log: &'a mut RequestLog,
    pub counters: &'a WorkerCounters,
    /// This worker's handle on the process's count of buffered response bytes, and its
    /// limit for this machine (`limits.buffer_memory_max`; 0: none): what `client_room`
    /// shares out.
    pub buffered: crate::metrics::WorkerBuffered<'a>,
    pub buffer_limit: usize,
    /// The current IMF-fixdate.
    pub date: &'a [u8],
    /// Reused to assemble a cache hit's head, so that a hit allocates nothing.
    pub scratch: &'a mut BytesMut,
    pub now: Instant,
    /// The wall clock of this loop turn (cache ages).
    pub wall: std::time::SystemTime,
    pub draining: bool,
    /// The worker's ready queue: clients that may go on, processed at the end of the turn.
    pub ready: &'a mut VecDeque<Token>,
    /// The error pages Squall's own answers use.
    pub service: &'a crate::route_rules::Service,
    /// The Date field HPACK-encoded for HTTP/2 answers, re-encoded when the second changes.
    pub h2_date: &'a mut write::EncodedDate,
    /// What a new connection's protocol is set up with: HTTP/1.1's decoder limits, HTTP/2's
    /// settings.
    pub h1_limits: squall_h1::Limits,
    pub h2: &'a squall_h2::ServerConfig,
}

/// The worker's `Downstream`, borrowing only the fields it names, so that a part (another
/// field) can be borrowed beside it.
macro_rules! part_downstream {
    ($worker:expr) => {
        $crate::worker::downstream::Downstream {
            conns: &mut $worker.clients.conns,
            log: &mut $worker.log,
            counters: $worker.runtime.metrics.worker($worker.id),
            buffered: $worker.runtime.metrics.buffered.of($worker.id),
            buffer_limit: $worker.buffer_limit,
            date: $worker.date.get(),
            scratch: &mut $worker.scratch,
            now: $worker.now,
            wall: $worker.wall,
            draining: $worker.drain_deadline.is_some(),
            ready: &mut $worker.clients.ready,
            service: &$worker.runtime.service,
            h2_date: &mut $worker.h2_date,
            h1_limits: $worker.runtime.h1_limits,
            h2: &$worker.runtime.h2,
        }
    };
}
pub(super) use part_downstream;

impl Downstream<'_> {
    /// Queues connection `index` to be processed at the end of this turn (see the worker's
    /// `ready`), once however many events ask for it.
    pub fn schedule(&mut self, index: usize) {
        let conn = &mut self.conns[index];
        if !conn.scheduled {
            conn.scheduled = true;
            self.ready.push_back(Token::client(index, conn.generation));
        }
    }

    /// Lets a client go on after its exchange or cached request ended or wrote something: an
    /// HTTP/1.x connection sends and reads its next request, an HTTP/2 connection sends what
    /// its streams have. Queued, never re-entrant.
    pub fn resume(&mut self, client: Client) {
        self.schedule(client.conn());
    }

    pub fn client_token(&self, client: Client) -> ClientToken {
        client.token(self.conns[client.conn()].generation)
    }

    /// Gives back HTTP/2 window for `n` request body bytes that moved on to the origin, so the
    /// client may send more; HTTP/1.x reads on by itself.
    pub fn body_consumed(&mut self, client: Client, n: usize) {
        let Some(conn) = self.conns.get_mut(client.conn()) else {
            return;
        };
        match (client, &mut conn.proto) {
            (Client::H2(_, stream), Proto::H2(h2)) => h2.conn.release_capacity(stream, n),
            // QUIC reads on, and the connection sends the client its credit when flushed.
            (Client::H3(index, stream), Proto::H3(h3)) => {
                h3.quic.release(stream, n);
                self.schedule(index);
            }
            _ => {}
        }
    }

    /// Brings connection `index`'s charge in the process's count of buffered response bytes
    /// (`limits.buffer_memory_max`) up to date with what it holds now.
    pub fn account(&mut self, index: usize) {
        if let Some(conn) = self.conns.get_mut(index) {
            conn.account(self.buffered);
        }
    }

    /// How many more response bytes the client takes before its origin should pause, under
    /// the client's own bound, its HTTP/2 connection's and the process's buffer budget (see
    /// `budget.rs`).
    pub fn client_room(&self, client: Client) -> super::budget::Room {
        use super::budget::{Held, Process, Room, room};
        let Some(conn) = self.conns.get(client.conn()) else {
            return Room {
                bytes: 0,
                drained: false,
                budget_paused: false,
            };
        };
        let held = match (client, &conn.proto) {
            (Client::H2(_, stream), Proto::H2(h2)) => Held {
                own: h2.conn.queued_data(stream),
                streams: h2.streams.exchanges.len() + h2.streams.files.len(),
                window: h2.conn.send_window(stream),
                connection: conn.held_bytes() + conn.session_bytes,
            },
            // QUIC keeps what its flow control lets a stream send; what is still queued in the
            // HTTP/3 connection after the last flush is what it could not take (no window).
            (Client::H3(_, stream), Proto::H3(h3)) => {
                let own = h3.quic.h3_ref().queued_data(stream);
                Held {
                    own,
                    streams: h3.streams.exchanges.len() + h3.streams.files.len(),
                    window: usize::from(own == 0),
                    connection: conn.held_bytes() + conn.session_bytes,
                }
            }
            _ => Held {
                own: conn.unsent_bytes() + conn.in_flight,
                streams: 0,
                window: 0,
                connection: conn.held_bytes() + conn.session_bytes,
            },
        };
        let process = Process {
            limit: self.buffer_limit,
            holders: usize::try_from(self.buffered.sharers()).unwrap_or(usize::MAX),
        };
        room(held, process)
    }

    /// Writes one piece of a proxied response for `session`'s client; an origin's error on a
    /// route that intercepts it becomes the error page (its body dropped).
    pub fn write(&mut self, session: &mut Session, message: ToClient) -> Written {
        let service = self.service;
        let message = match message {
            ToClient::Head(head) => {
                let route = session.ex.route().id;
                let Some(page) = service.intercept_page(route, head.status) else {
                    return self.put(session, ToClient::Head(head));
                };
                session.reply.intercepted = true;
                let h2 = matches!(session.client, Client::H2(..));
                let (head, body) = squall_proxy::intercepted(head, page, h2);
                let written = self.put(session, ToClient::Head(head));
                match body {
                    Some(body) => ToClient::Data(body),
                    None => return written,
                }
            }
            ToClient::Data(_) if session.reply.intercepted => return Written::default(),
            // The page replaced the origin's body, and the trailers that went with it.
            ToClient::End {
                request_unfinished, ..
            } if session.reply.intercepted => ToClient::End {
                trailers: None,
                request_unfinished,
            },
            message => message,
        };
        self.put(session, message)
    }

    /// [`Downstream::write`], as the piece is.
    fn put(&mut self, session: &mut Session, message: ToClient) -> Written {
        let written = Written { queued: true };
        let Some(conn) = self.conns.get_mut(session.client.conn()) else {
            return Written::default();
        };
        // Ended whole, or cut: either way the response is over and is logged (a cut one with
        // the status it began with and the bytes the client got).
        let ended = match (session.client, message) {
            (_, ToClient::Error { .. }) => {
                debug_assert!(false, "errors are answered by the session");
                false
            }
            (Client::H1(_), ToClient::Abort) => {
                // The client has part of a response: the only honest end is a cut connection,
                // once what it was sent so far has left.
                conn.close_after = true;
                conn.cut = true;
                true
            }
            (client, ToClient::Abort) => {
                if let (Some(mut mux), Some(stream)) = (Mux::of(conn), client.stream()) {
                    mux.cut(stream);
                }
                true
            }
            (Client::H1(_), message) => {
                let head = session.ex.head();
                let keep_alive = !self.draining;
                write_h1(
                    conn,
                    &mut session.reply,
                    head,
                    message,
                    self.date,
                    keep_alive,
                )
            }
            (client, message) => {
                let (Some(mux), Some(stream)) = (Mux::of(conn), client.stream()) else {
                    return Written::default();
                };
                write_mux(mux, stream, &mut session.reply, message, self.date)
            }
        };
        if ended {
            self.log_session(session, false);
        }
        written
    }

    /// Logs a proxied request whose client went away before its response ended: with status
    /// 499 (as nginx) when no response head had been written to it, else with the status it
    /// began with and the bytes sent. Once per request: not if already logged, nor if it was
    /// answered from the cache instead.
    pub fn log_abandoned(&mut self, session: &mut Session) {
        if !session.ex.answered() {
            self.log_session(session, true);
        }
    }

    /// Counts and logs a proxied response that ended (whole or cut), or whose client left
    /// (`abandoned`), unless it was logged already.
    fn log_session(&mut self, session: &mut Session, abandoned: bool) {
        if std::mem::replace(&mut session.reply.logged, true) {
            return;
        }
        let Some(conn) = self.conns.get_mut(session.client.conn()) else {
            return;
        };
        let started = session.ex.started();
        let upstream = self.now.saturating_duration_since(started);
        self.counters.upstream_duration.observe(upstream);
        conn.log_note.route = Some(session.ex.route().id);
        conn.log_note.request_id = Some(session.ex.request_id());
        conn.log_note.upstream = Some(upstream);
        if session.ex.filling() {
            conn.log_note.cache = Some(Label::Miss.as_str());
        }
        let status = match session.reply.framing {
            None if abandoned => CLIENT_CLOSED_REQUEST,
            _ => session.ex.status(),
        };
        if session.client.stream().is_some() {
            // Streams interleave: the connection's request clock is this stream's.
            conn.request_started = started;
        }
        // A PURGE refetched as a GET is logged as the PURGE the client sent (a copy of the
        // head, on that rare path only).
        let relabeled = (session.logged_method.clone()).map(|method| RequestHead {
            method,
            ..session.ex.head().clone()
        });
        let head = Some(relabeled.as_ref().unwrap_or(session.ex.head()));
        self.log_answer(session.client.conn(), head, status, session.reply.sent);
    }

    /// Answers with a short text response generated here (PURGE results, 403, 502, 504), as
    /// the request's framing allows (keep-alive, no body for HEAD).
    pub fn answer_status(&mut self, client: Client, head: &RequestHead, status: StatusCode) {
        if client.stream().is_some() {
            self.refuse_stream(client, status, Some(head));
            return;
        }
        let (content_type, body) = self.service.error_body(Some(head), status);
        self.answer_body(client, head, status, content_type, None, body);
    }

    /// The error of a gRPC call (`content-type: application/grpc...`) from an HTTP/2 (or
    /// HTTP/3) client: a
    /// trailers-only response (HTTP 200, `grpc-status: 14` UNAVAILABLE, or 8 RESOURCE_EXHAUSTED
    /// for a 413, and `message` as
    /// `grpc-message`, gRPC over HTTP/2 §Responses), which gRPC clients report with its message,
    /// where an HTTP 502 page reaches them as a protocol error. Logged and counted as `status`,
    /// the error it stands for. Other clients get `status` as any request does.
    pub fn answer_grpc_error(
        &mut self,
        client: Client,
        head: &RequestHead,
        status: StatusCode,
        message: &str,
    ) {
        let Some(stream) = client.stream() else {
            return self.answer_status(client, head, status);
        };
        let Some(conn) = self.conns.get_mut(client.conn()) else {
            return;
        };
        let Some(mux) = Mux::of(conn) else {
            return;
        };
        // A body over its limit is RESOURCE_EXHAUSTED (8); every other failure UNAVAILABLE.
        let too_large = status == StatusCode::PAYLOAD_TOO_LARGE;
        let fields = [
            (&b"server"[..], &b"squall"[..]),
            (b"content-type", b"application/grpc"),
            (b"grpc-status", if too_large { &b"8"[..] } else { b"14" }),
            (b"grpc-message", message.as_bytes()),
        ];
        let date = self.date;
        let body = Bytes::new();
        let sent = write::send_reply(mux, stream, StatusCode::OK, fields, None, body, false, date);
        if too_large && let Some(mut mux) = Mux::of(conn) {
            // The rest of the body is not wanted: the client stops sending (RFC 9113 §8.1).
            mux.request_unwanted(stream);
        }
        self.log_answer(client.conn(), Some(head), status, sent);
    }

    /// A refusal with one field the answer needs (a 429's `Retry-After`, a 401's
    /// `WWW-Authenticate`), with the vhost's error page if it has one.
    pub fn refuse_with(
        &mut self,
        client: Client,
        head: &RequestHead,
        status: StatusCode,
        field: Option<(&str, &[u8])>,
    ) {
        let (content_type, body) = self.service.error_body(Some(head), status);
        self.answer_body(client, head, status, content_type, field, body);
    }

    /// A short `text/plain` answer written here, with one `extra` field if given (a PURGE's
    /// count, say), for HTTP/1.1 and HTTP/2 alike; the connection goes on (unless draining).
    pub fn answer_text(
        &mut self,
        client: Client,
        head: &RequestHead,
        status: StatusCode,
        extra: Option<(&str, &[u8])>,
        body: Bytes,
    ) {
        self.answer_body(client, head, status, "text/plain", extra, body);
    }

    /// [`Downstream::answer_text`] with its content type.
    fn answer_body(
        &mut self,
        client: Client,
        head: &RequestHead,
        status: StatusCode,
        content_type: &str,
        extra: Option<(&str, &[u8])>,
        body: Bytes,
    ) {
        let Some(conn) = self.conns.get_mut(client.conn()) else {
            return;
        };
        let sent = match client {
            Client::H2(..) | Client::H3(..) => {
                let (Some(mux), Some(stream)) = (Mux::of(conn), client.stream()) else {
                    return;
                };
                let fields = [
                    (&b"server"[..], &b"squall"[..]),
                    (&b"content-type"[..], content_type.as_bytes()),
                ]
                .into_iter()
                .chain(extra.map(|(name, value)| (name.as_bytes(), value)));
                let is_head = head.method == Method::HEAD;
                let date = self.date;
                write::send_reply(mux, stream, status, fields, None, body, is_head, date)
            }
            Client::H1(_) => {
                let mut raw = BytesMut::from(&b"server: squall\r\n"[..]);
                put_line(&mut raw, b"content-type", content_type.as_bytes());
                if let Some((name, value)) = extra {
                    raw.extend_from_slice(name.as_bytes());
                    raw.extend_from_slice(b": ");
                    raw.extend_from_slice(value);
                    raw.extend_from_slice(b"\r\n");
                }
                let response = squall_h1::ResponseHead {
                    status,
                    headers: &HeaderMap::new(),
                    raw_headers: &raw,
                    body_len: Some(body.len() as u64),
                };
                let before = conn.out.len();
                let mut framing = head.framing();
                framing.keep_alive &= !self.draining;
                let whole =
                    squall_h1::encode_response_head(&response, framing, self.date, &mut conn.out);
                conn.alt_svc_h1(before);
                if whole {
                    conn.out.extend_from_slice(&body);
                }
                // `Connection: close` from the client (or HTTP/1.0 without keep-alive): the
                // answer says so, and the connection ends once it has left.
                if !framing.keep_alive {
                    conn.close_after = true;
                }
                conn.out.len() - before
            }
        };
        self.log_answer(client.conn(), Some(head), status, sent);
    }

    /// An error response that ends the HTTP/1.x connection: the request was not read to its
    /// end, so the next bytes are not a request.
    pub fn answer_error_and_close(
        &mut self,
        client: Client,
        head: &RequestHead,
        status: StatusCode,
    ) {
        let Client::H1(index) = client else {
            self.answer_status(client, head, status);
            return;
        };
        let Some(conn) = self.conns.get_mut(index) else {
            return;
        };
        let before = conn.out.len();
        match self.service.error_page(head, status) {
            Some(page) => {
                let field = ("content-type", page.content_type.as_bytes());
                respond::encode_closing(
                    head,
                    status,
                    field,
                    None,
                    &page.body,
                    self.date,
                    &mut conn.out,
                );
            }
            None => squall_h1::encode_error(status, self.date, &mut conn.out),
        }
        let sent = conn.out.len() - before;
        conn.close_after = true;
        self.log_answer(index, Some(head), status, sent);
    }

    /// Answers a request Squall refuses itself (400, 429, 502, ...) on an HTTP/2 or HTTP/3
    /// stream, with a short text body.
    pub fn refuse_stream(
        &mut self,
        client: Client,
        status: StatusCode,
        head: Option<&RequestHead>,
    ) {
        let index = client.conn();
        let Some(conn) = self.conns.get_mut(index) else {
            return;
        };
        let (Some(mux), Some(stream)) = (Mux::of(conn), client.stream()) else {
            return;
        };
        let (content_type, body) = self.service.error_body(head, status);
        let fields = [
            (&b"server"[..], &b"squall"[..]),
            (&b"content-type"[..], content_type.as_bytes()),
        ];
        let is_head = head.is_some_and(|h| h.method == Method::HEAD);
        let sent = write::send_reply(mux, stream, status, fields, None, body, is_head, self.date);
        if status.is_client_error() && status != StatusCode::TOO_MANY_REQUESTS {
            self.log_bad_request(index, head, status, sent);
        } else {
            self.log_answer(index, head, status, sent);
        }
    }
}

/// The scheme requests on `conn` arrived with: HTTP/3's TLS is QUIC's own (no `tls` on the
/// connection), so an HTTP/3 connection's is `https` too.
pub(in crate::worker) fn scheme(conn: &Conn) -> &'static str {
    if conn.tls.is_some() || matches!(conn.proto, Proto::H3(_)) {
        "https"
    } else {
        "http"
    }
}

pub(super) fn put_line(out: &mut BytesMut, name: &[u8], value: &[u8]) {
    out.put_slice(name);
    out.put_slice(b": ");
    out.put_slice(value);
    out.put_slice(b"\r\n");
}
