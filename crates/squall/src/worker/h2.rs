//! HTTP/2 connections in the worker: protocol selection, and the glue between `squall-h2`'s
//! connection (frames, streams, flow control, floods) and the same service that answers
//! HTTP/1.1.
//!
//! A connection becomes HTTP/2 in one of two ways: on a TLS listener, when ALPN chose `h2`; on a
//! cleartext listener that lists `h2c`, when its first bytes are the client preface ("prior
//! knowledge", RFC 9113 §3.3). From then on `process` hands its bytes to [`squall_h2::Connection`]
//! and answers each complete request (head, body, trailers) from the service. Output leaves
//! through the same `out` buffer and send path as HTTP/1.1, at most `OUT_HIGH_BYTES` at a time:
//! the h2 connection keeps the rest queued under its flow control until the send completes.
//!
//! An extended CONNECT (RFC 8441, WebSocket over HTTP/2) becomes the HTTP/1.1 upgrade request
//! a WebSocket client would have sent (`request_head`), and goes to a session only on a route
//! that allows the upgrade; elsewhere it is answered 501, as RFC 9220 §3 advises for a
//! `:protocol` the server does not take. Its stream's DATA then feeds the tunnel (`tunnel.rs`).

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode, Uri, Version};
use squall_h1::{BodyKind, RequestHead};
use squall_h2::{Connection, ErrorCode, Event, Request, StreamId};
use tracing::{debug, info};

use super::conn::{Conn, Phase};
use super::downstream::proto::H2;
use super::entry::Admission;
use super::ids::Client;
use super::tunnel::{is_h2_upgrade, upgrade_allowed};
use super::{OUT_HIGH_BYTES, Worker};
use crate::worker::downstream::proto::Proto;

/// Which protocol a new connection will speak, once known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Not decided yet: TLS still handshaking, or too few bytes to tell the preface apart.
    Undecided,
    Http1,
    H2,
    /// The client speaks a protocol this listener does not serve: close.
    Refused,
}

/// Decides the protocol from ALPN (TLS) or the first bytes (cleartext with `h2c`).
pub fn select(conn: &Conn) -> Selection {
    if let Some(tls) = &conn.tls {
        if tls.is_handshaking() {
            return Selection::Undecided;
        }
        return match tls.alpn() {
            Some(squall_tls::Alpn::H2) => Selection::H2,
            _ if conn.protocols.http1 => Selection::Http1,
            // No ALPN and no HTTP/1.1 here: only h2 was offered, so speak it.
            None if conn.protocols.h2 => Selection::H2,
            _ => Selection::Refused,
        };
    }
    if !conn.protocols.h2c {
        return Selection::Http1;
    }
    match squall_h2::match_preface(&conn.rbuf) {
        squall_h2::PrefaceState::Matched => Selection::H2,
        squall_h2::PrefaceState::Incomplete => Selection::Undecided,
        squall_h2::PrefaceState::Mismatch if conn.protocols.http1 => Selection::Http1,
        squall_h2::PrefaceState::Mismatch => Selection::Refused,
    }
}

/// Turns a validated HTTP/2 request into the head the router and the proxy know.
///
/// The target stays in origin-form (`:path`), as an HTTP/1.1 request's; `:authority` becomes
/// the Host field, where `host()`, the cache key and origins that speak HTTP/1.1 find it
/// (RFC 9113 §8.3.1 lets a proxy do that). A body of unknown length is `Chunked`: that is how
/// it goes on to HTTP/1.1. An extended CONNECT (RFC 8441 §4) becomes the `GET` with
/// `Connection: upgrade`, `Upgrade: <:protocol>` and, for a WebSocket, a `Sec-WebSocket-Key`
/// of our making (RFC 6455 §4.1; the HTTP/2 client sends none) that an HTTP/1.1 client would
/// have sent: no other HTTP/2 request can carry those fields, so only this one is taken for
/// an upgrade by the exchange.
pub fn request_head(request: Request) -> Option<RequestHead> {
    let Request {
        mut method,
        authority,
        path,
        headers,
        content_length,
        mut end_stream,
        protocol,
        ..
    } = request;
    // `:path` is read as an HTTP/1.1 origin-form target is: normalised once, here.
    let normal = match &path[..] {
        b"*" => None,
        _ => squall_h1::target::normalize(&path).ok()?,
    };
    let (uri, received_target) = match normal {
        None => (Uri::from_maybe_shared(path).ok()?, None),
        Some(normal) => (
            Uri::from_maybe_shared(Bytes::from(normal)).ok()?,
            Some(Box::new(path)),
        ),
    };
    // The decoded block's bytes and spans become the head's fields as they are: the span
    // vector is reused in place (same layout), so nothing is copied or allocated per field.
    let (bytes, spans) = headers.into_parts();
    let spans = (spans.into_iter())
        .map(|s| [s.name, s.name_len, s.value, s.value_len])
        .collect();
    let mut headers = squall_h1::Fields::from_parts(bytes, spans)?;
    if let Some(authority) = authority
        && !headers.contains_key(http::header::HOST)
    {
        headers.append(
            http::header::HOST,
            HeaderValue::from_maybe_shared(authority).ok()?,
        );
    }
    if let Some(protocol) = protocol {
        method = Method::GET;
        // The stream's DATA is the tunnel's, not a body.
        end_stream = true;
        let websocket = protocol.eq_ignore_ascii_case(b"websocket");
        let upgrade = HeaderValue::from_maybe_shared(protocol).ok()?;
        headers.append(http::header::UPGRADE, upgrade);
        headers.append(
            http::header::CONNECTION,
            HeaderValue::from_static("upgrade"),
        );
        if websocket {
            headers.remove(http::header::SEC_WEBSOCKET_KEY);
            let key = HeaderValue::from_str(&super::tunnel::websocket_key()).ok()?;
            headers.append(http::header::SEC_WEBSOCKET_KEY, key);
        }
    }
    let body = match (end_stream, content_length) {
        (true, _) => BodyKind::Empty,
        (false, Some(n)) => BodyKind::Length(n),
        (false, None) => BodyKind::Chunked,
    };
    Some(RequestHead {
        method,
        uri,
        received_target,
        version: Version::HTTP_2,
        headers,
        keep_alive: true,
        expect_continue: false,
        body,
    })
}

impl Worker {
    /// A request whose password was checked goes on as its protocol goes on with any
    /// admitted request (`h1.rs`, `h2.rs`).
    pub(super) fn resume_verified(
        &mut self,
        client: Client,
        head: RequestHead,
        admission: Admission,
    ) {
        match client {
            Client::H1(index) => self.resume_h1(index, head, admission),
            Client::H2(index, stream) => {
                if let Some(conn) = self.clients.conns.get_mut(index) {
                    super::downstream::set_verifying(conn, false);
                }
                self.resume_h2(index, stream, head, admission);
            }
        }
    }

    /// Makes connection `index` an HTTP/2 one; its buffered bytes are the client preface on.
    pub(super) fn start_h2(&mut self, index: usize) {
        let config = self.runtime.h2.clone();
        let conn = &mut self.clients.conns[index];
        conn.fresh = false;
        conn.proto = Proto::H2(Box::new(H2::new(Connection::new(config, self.now))));
        self.runtime.metrics.worker(self.id).h2_connections.inc();
    }

    /// Feeds received bytes to the HTTP/2 connection, answers the requests that completed, and
    /// hands as much output to the socket as the send path takes.
    pub(super) fn process_h2(&mut self, index: usize) {
        let counters = self.runtime.metrics.worker(self.id);
        let conn = &mut self.clients.conns[index];
        if conn.phase != Phase::Open {
            return;
        }
        let h2 = conn
            .proto
            .h2_mut()
            .expect("process_h2 runs on HTTP/2 connections");
        if !conn.rbuf.is_empty()
            && let Err(e) = h2.conn.recv(&mut conn.rbuf, self.now)
        {
            {
                debug!(
                    worker = self.id,
                    conn = index,
                    code = ?e.code,
                    flood = ?e.flood,
                    "h2: {}",
                    e.reason
                );
                if e.flood.is_some() {
                    counters.h2_floods.inc();
                } else {
                    counters.h2_protocol_errors.inc();
                }
                conn.rbuf.clear();
            }
        }
        while let Some(event) = self.clients.conns[index]
            .proto
            .h2_mut()
            .and_then(|h2| h2.conn.poll_event())
        {
            self.on_h2_event(index, event);
        }
        self.pump_h2(index);
    }

    fn on_h2_event(&mut self, index: usize, event: Event) {
        // The request that this event completes, if any.
        let complete = match event {
            Event::Request { stream_id, request } => {
                self.clients.conns[index].request_started = self.now;
                // An extended CONNECT's stream carries a tunnel, never a body.
                let end_stream = request.end_stream || request.protocol.is_some();
                let Some(head) = request_head(request) else {
                    let status = StatusCode::BAD_REQUEST;
                    self.downstream().refuse_h2(index, stream_id, status, None);
                    return;
                };
                let admission = self
                    .gate()
                    .admit(&self.clients.conns[index], &head, end_stream);
                self.admitted_h2(index, stream_id, head, end_stream, admission);
                return;
            }
            Event::Data {
                stream_id,
                data,
                end_stream,
            } => {
                if self.tunnel_h2_data(index, stream_id, &data, end_stream) {
                    return;
                }
                let h2 = self.h2_mut(index);
                if let Some(&id) = h2.exchanges.get(&stream_id) {
                    // A proxied body moves on to the origin; its window is given back as it
                    // leaves (`ClientBodyConsumed`), so the client cannot outrun the origin.
                    self.feed(id, |ex| {
                        ex.on_client_body(&data);
                        if end_stream {
                            ex.on_client_end(None);
                        }
                    });
                    return;
                }
                // `respond` routes do not read bodies: the bytes are dropped and their window
                // given back at once, so a client uploading to one is not stalled.
                h2.conn.release_capacity(stream_id, data.len());
                end_stream
                    .then(|| {
                        h2.pending
                            .remove(&stream_id)
                            .map(|pending| (stream_id, pending))
                    })
                    .flatten()
            }
            Event::Trailers { stream_id, headers } => {
                let h2 = self.h2_mut(index);
                if let Some(&id) = h2.exchanges.get(&stream_id) {
                    // Request trailers reach the origin in the last chunk; a body of declared
                    // length has no place for them in HTTP/1.1 (RFC 9112 §7.1.2), so there
                    // they are dropped.
                    self.feed(id, |ex| ex.on_client_end(Some(&headers)));
                    return;
                }
                h2.pending
                    .remove(&stream_id)
                    .map(|pending| (stream_id, pending))
            }
            Event::Reset { stream_id, code } => {
                debug!(
                    worker = self.id,
                    conn = index,
                    stream_id,
                    ?code,
                    "h2: stream reset"
                );
                let h2 = self.h2_mut(index);
                h2.pending.remove(&stream_id);
                h2.parked.remove(&stream_id);
                h2.early.remove(&stream_id);
                let file = h2.files.remove(&stream_id);
                if let Some(id) = h2.exchanges.get(&stream_id).copied() {
                    self.abort_session(id);
                }
                if let Some(id) = file {
                    self.with_files(|files, io, down| files.gone(io, down, id));
                }
                None
            }
        };
        if let Some((stream_id, (head, route))) = complete {
            self.answer_h2(index, stream_id, head, route);
        }
    }

    /// What an admitted request head on stream `stream_id` leads to: a refusal, an answer
    /// (now, or at the request's end), the cache, a session, or a wait for its credentials.
    fn admitted_h2(
        &mut self,
        index: usize,
        stream_id: StreamId,
        head: RequestHead,
        end_stream: bool,
        admission: Admission,
    ) {
        let client = Client::H2(index, stream_id);
        let Some(admission) = self.admit_tunnel_h2(index, stream_id, &head, admission) else {
            return;
        };
        match admission {
            Admission::Refused(status, None) => {
                (self.downstream()).refuse_h2(index, stream_id, status, Some(&head));
            }
            Admission::Refused(status, Some((name, value))) => {
                let field = Some((name, &value[..]));
                (self.downstream()).refuse_with(client, &head, status, field);
            }
            Admission::Verify(verify) => self.verify_parked(client, head, *verify),
            Admission::Cached(route) => {
                self.begin_cached(client, head, route);
            }
            Admission::Forward { route, invalidate } => {
                self.start_session(client, head, route, invalidate, None);
            }
            Admission::Answer { route } if end_stream => {
                self.answer_h2(index, stream_id, head, route);
            }
            Admission::Answer { route } => {
                self.h2_mut(index).pending.insert(stream_id, (head, route));
            }
        }
    }

    /// A request that waited for its credentials goes on as if just admitted (it had no
    /// body), unless its connection has stopped speaking HTTP/2 meanwhile.
    pub(super) fn resume_h2(
        &mut self,
        index: usize,
        stream_id: StreamId,
        head: RequestHead,
        admission: Admission,
    ) {
        let conn = &self.clients.conns[index];
        if conn.phase != Phase::Open || !matches!(conn.proto, Proto::H2(_)) {
            return;
        }
        self.admitted_h2(index, stream_id, head, true, admission);
        self.pump_h2(index);
    }

    fn h2_mut(&mut self, index: usize) -> &mut H2 {
        self.clients.conns[index]
            .proto
            .h2_mut()
            .expect("HTTP/2 events come from HTTP/2 connections")
    }

    /// Answers one complete request on stream `stream_id` from the service.
    /// `reply` is the route's answer when the caller has routed the request already.
    fn answer_h2(
        &mut self,
        index: usize,
        stream_id: StreamId,
        head: RequestHead,
        route: Option<u32>,
    ) {
        if let Some(root) = super::files::files_root(&self.runtime, route) {
            self.start_file(Client::H2(index, stream_id), head, root);
            return;
        }
        (self.downstream()).respond(Client::H2(index, stream_id), &head, route);
    }

    /// Moves the HTTP/2 connection's output into the send path, up to the output bound, and
    /// ends the connection once it has nothing more to do.
    pub(super) fn pump_h2(&mut self, index: usize) {
        let counters = self.runtime.metrics.worker(self.id);
        let conn = &mut self.clients.conns[index];
        let Some(h2) = conn.proto.h2_mut() else {
            return;
        };
        count_stats(counters, h2.conn.take_stats());
        let room =
            OUT_HIGH_BYTES.saturating_sub(conn.out.len() + conn.wire.len() + conn.chain.bytes);
        if room > 0 {
            let (out, chain, copy) = (&mut conn.out, &mut conn.chain, conn.tls.is_some());
            h2.conn
                .poll_output(room, |piece| chain.push(out, piece, copy));
        }
        if h2.conn.is_finished() {
            conn.close_after = true;
        }
        self.flush(index);
        self.update_deadline(index);
        // Proxied responses paused for a slow reader read on once their stream has drained.
        for id in super::downstream::sessions_of(&self.clients.conns[index]) {
            self.client_drained(id);
        }
        let files = self.clients.conns[index]
            .proto
            .h2()
            .map(|h2| h2.files.values().copied());
        for id in files.into_iter().flatten().collect::<Vec<_>>() {
            self.with_files(|files, io, down| files.drained(io, down, id));
        }
    }

    /// Begins a graceful stop of an HTTP/2 connection: GOAWAY, finish the streams it has.
    /// `idle`: the connection reached its idle limit, and is closed at the latest
    /// `IDLE_GOAWAY_GRACE` after the GOAWAY.
    pub(super) fn go_away_h2(&mut self, index: usize, idle: bool) {
        let now = self.now;
        if let Some(h2) = self.clients.conns[index].proto.h2_mut() {
            if idle {
                h2.idle_goaway = Some(now);
            }
            h2.conn.go_away(ErrorCode::NoError);
            self.pump_h2(index);
        }
    }

    /// Runs an HTTP/2 connection's own timers (a stream stalled on a zero window).
    pub(super) fn h2_timers(&mut self, index: usize) {
        let now = self.now;
        if let Some(h2) = self.clients.conns[index].proto.h2_mut() {
            h2.conn.on_timer(now);
            self.pump_h2(index);
        }
    }

    // ---- an HTTP/2 client's tunnels (RFC 8441) ----

    /// What an HTTP/2 extended CONNECT's admission leads to: a session on a route that allows
    /// its protocol (never the cache); a 501 on any other route (`None`: answered). Other
    /// requests, and refusals, pass as they are.
    pub(super) fn admit_tunnel_h2(
        &mut self,
        index: usize,
        stream_id: StreamId,
        head: &RequestHead,
        admission: Admission,
    ) -> Option<Admission> {
        if !is_h2_upgrade(head) {
            return Some(admission);
        }
        let route = match admission {
            Admission::Forward { route, .. } | Admission::Cached(route) => route,
            Admission::Answer { .. } => {
                self.refuse_h2_tunnel(index, stream_id, head);
                return None;
            }
            refused @ (Admission::Refused(..) | Admission::Verify(_)) => return Some(refused),
        };
        if !upgrade_allowed(&route, head) {
            self.refuse_h2_tunnel(index, stream_id, head);
            return None;
        }
        Some(Admission::Forward {
            route,
            invalidate: None,
        })
    }

    /// 501 to an extended CONNECT whose protocol the route does not take (RFC 9220 §3 says
    /// 501 for a `:protocol` the server does not support); the stream, which the client has
    /// not ended, is then reset with NO_ERROR (RFC 9113 §8.1).
    fn refuse_h2_tunnel(&mut self, index: usize, stream_id: StreamId, head: &RequestHead) {
        let counters = self.runtime.metrics.worker(self.id);
        counters.tunnel_refused[1].inc();
        info!(
            worker = self.id,
            conn = index,
            stream = stream_id,
            "extended CONNECT on a route that does not allow its upgrade: 501"
        );
        let status = http::StatusCode::NOT_IMPLEMENTED;
        (self.downstream()).refuse_h2(index, stream_id, status, Some(head));
        if let Some(h2) = self.clients.conns[index].proto.h2_mut() {
            h2.conn.reset_stream(stream_id, ErrorCode::NoError);
        }
    }

    /// DATA on an HTTP/2 tunnel's stream: to the exchange (its window given back as it reaches
    /// the origin), or kept until the tunnel begins. False when the stream is no tunnel's.
    pub(super) fn tunnel_h2_data(
        &mut self,
        index: usize,
        stream_id: StreamId,
        data: &bytes::Bytes,
        end_stream: bool,
    ) -> bool {
        let Some(h2) = self.clients.conns[index].proto.h2_mut() else {
            return false;
        };
        let Some(&id) = h2.exchanges.get(&stream_id) else {
            return false;
        };
        let Some(session) = self.sessions.get_mut(id) else {
            return false;
        };
        if !is_h2_upgrade(session.ex.head()) {
            return false;
        }
        if !session.ex.is_tunnel() {
            if let Some(h2) = self.clients.conns[index].proto.h2_mut() {
                let early = h2.early.entry(stream_id).or_default();
                early.push((data.clone(), end_stream));
            }
            return true;
        }
        let now = self.now;
        self.feed(id, |ex| {
            ex.on_tunnel_client_data(data, now);
            if end_stream {
                ex.on_tunnel_client_eof(now);
            }
        });
        true
    }
}

/// Adds what the connection counted since the last call to the worker's counters.
fn count_stats(counters: &crate::metrics::WorkerCounters, stats: squall_h2::Stats) {
    counters.h2_streams.add(stats.streams_opened);
    counters.h2_resets_received.add(stats.resets_received);
    counters.timeouts.add(stats.stalls);
    // Requests the connection refused itself: malformed ones (reset) and 413/414/431/501.
    counters.bad_requests.add(stats.malformed_requests);
    for (count, status) in [
        (stats.answered_413, StatusCode::PAYLOAD_TOO_LARGE),
        (stats.answered_414, StatusCode::URI_TOO_LONG),
        (
            stats.answered_431,
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        ),
        (stats.answered_501, StatusCode::NOT_IMPLEMENTED),
    ] {
        for _ in 0..count {
            counters.count_bad_request(status);
        }
    }
}

#[cfg(test)]
mod tests;
