//! HTTP/2 connections in the protocol layer: protocol selection, and the glue between
//! `squall-h2`'s connection (frames, streams, flow control, floods) and the same service that
//! answers HTTP/1.1.
//!
//! A connection becomes HTTP/2 in one of two ways: on a TLS listener, when ALPN chose `h2`; on a
//! cleartext listener that lists `h2c`, when its first bytes are the client preface ("prior
//! knowledge", RFC 9113 §3.3). From then on its bytes go to [`squall_h2::Connection`], whose
//! events become the loop's request events ([`Heard`]: a head, body, trailers, a reset), as
//! HTTP/1.1's do. Output leaves
//! through the same `out` buffer and send path as HTTP/1.1, at most `OUT_HIGH_BYTES` at a time:
//! the h2 connection keeps the rest queued under its flow control until the send completes.
//!
//! An extended CONNECT (RFC 8441, WebSocket over HTTP/2; RFC 9220 over HTTP/3, whose requests
//! are made here too) becomes the HTTP/1.1 upgrade request a WebSocket client would have sent
//! (`head_of`), and goes to a session only on a route that allows the upgrade; elsewhere it is
//! answered 501, as RFC 9220 §3 advises for a `:protocol` the server does not take. Its
//! stream's DATA then feeds the tunnel (`tunnel.rs`).

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode, Uri, Version};
use squall_h1::{BodyKind, RequestHead};
use squall_h2::{Event, Request};
use tracing::debug;

use super::conn::{Conn, Phase};
use super::downstream::Downstream;
use super::downstream::heard::{Deferred, Heard};
use super::downstream::proto::Streams;
use super::ids::Client;

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
    head_of(request, Version::HTTP_2)
}

/// [`request_head`] for either multiplexed protocol, `version` saying which: an HTTP/3
/// request is validated by `squall-h2` too (`squall_h3::server::Request` is
/// `squall_h2::Request`), and differs only in the version its head carries.
pub fn head_of(request: Request, version: Version) -> Option<RequestHead> {
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
    let (bytes, spans) = headers.into_parts();
    let spans = (spans.into_iter())
        .map(|s| [s.name, s.name_len, s.value, s.value_len])
        .collect();
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
    let mut headers = squall_h1::Fields::from_parts(bytes, spans)?;
    if let Some(authority) = authority {
        headers.add_authority(authority)?;
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
        version,
        headers,
        keep_alive: true,
        expect_continue: false,
        body,
    })
}

impl Downstream<'_> {
    /// Hands an HTTP/2 connection's received bytes to it (frames, streams, flow control,
    /// floods); an error ends the connection (its GOAWAY is queued) and is counted. Nothing on
    /// other connections.
    pub(super) fn receive_h2(&mut self, index: usize) {
        let conn = &mut self.conns[index];
        let Some(h2) = conn.proto.h2_mut() else {
            return;
        };
        if conn.phase != Phase::Open || conn.rbuf.is_empty() {
            return;
        }
        if let Err(e) = h2.conn.recv(&mut conn.rbuf, self.now) {
            debug!(
                worker = self.log.worker,
                conn = index,
                code = ?e.code,
                flood = ?e.flood,
                "h2: {}",
                e.reason
            );
            if e.flood.is_some() {
                self.counters.h2_floods.inc();
            } else {
                self.counters.h2_protocol_errors.inc();
            }
            conn.rbuf.clear();
        }
    }

    /// The next request event of HTTP/2 connection `index` (see [`Heard`]); a request that
    /// cannot be made a head is answered 400 on the way, and a `respond` route's body is
    /// dropped (its window given back at once, so a client uploading to one is not stalled).
    pub(super) fn next_h2(&mut self, index: usize) -> Option<Heard> {
        loop {
            let conn = &mut self.conns[index];
            if conn.phase != Phase::Open {
                return None;
            }
            let h2 = conn.proto.h2_mut()?;
            let heard = match h2.conn.poll_event()? {
                Event::Request { stream_id, request } => {
                    conn.request_started = self.now;
                    // An extended CONNECT's stream carries a tunnel, never a body.
                    let end = request.end_stream || request.protocol.is_some();
                    let Some(head) = request_head(request) else {
                        self.refuse_stream(
                            Client::H2(index, stream_id),
                            StatusCode::BAD_REQUEST,
                            None,
                        );
                        continue;
                    };
                    let client = Client::H2(index, stream_id);
                    // Returned from here, not through `heard`: a head is some 250 bytes, and
                    // the extra move showed in profiles.
                    return Some(Heard::Head { client, head, end });
                }
                Event::Data {
                    stream_id,
                    data,
                    end_stream,
                } => {
                    // A proxied body (or tunnel) moves on to the origin; its window is given
                    // back as it leaves (`ClientBodyConsumed`), so the client cannot outrun
                    // the origin.
                    let (client, len) = (Client::H2(index, stream_id), data.len());
                    let stream = u64::from(stream_id);
                    match body(&mut h2.streams, client, stream, data, end_stream) {
                        Body::Exchange(heard) => return Some(heard),
                        Body::Dropped(complete) => {
                            h2.conn.release_capacity(stream_id, len);
                            let Some(heard) = complete else { continue };
                            heard
                        }
                    }
                }
                Event::Trailers { stream_id, headers } => {
                    let client = Client::H2(index, stream_id);
                    match trailers(&mut h2.streams, client, u64::from(stream_id), headers) {
                        Some(heard) => heard,
                        None => continue,
                    }
                }
                Event::Reset { stream_id, code } => {
                    debug!(
                        worker = self.log.worker,
                        conn = index,
                        stream_id,
                        ?code,
                        "h2: stream reset"
                    );
                    reset(&mut h2.streams, u64::from(stream_id))
                }
            };
            return Some(heard);
        }
    }
}

/// What body bytes on a stream of a multiplexed connection are to the loop ([`body`]).
pub(super) enum Body {
    /// The stream's exchange's (a proxied body or a tunnel): their window is given back as
    /// they leave.
    Exchange(Heard),
    /// Dropped (their window is the caller's to give back); if they end a request kept while
    /// its body arrived, that request, now complete.
    Dropped(Option<Heard>),
}

/// Body bytes on `stream` of a multiplexed connection (HTTP/2 or HTTP/3), its `client`;
/// `end`: the request ends with them.
pub(super) fn body(
    streams: &mut Streams,
    client: Client,
    stream: u64,
    data: Bytes,
    end: bool,
) -> Body {
    if let Some(&id) = streams.exchanges.get(&stream) {
        return Body::Exchange(Heard::Body {
            client,
            id,
            data,
            end,
        });
    }
    let pending = end.then(|| streams.pending.remove(&stream)).flatten();
    Body::Dropped(pending.map(|pending| complete(client, pending)))
}

/// Request trailers on `stream` of a multiplexed connection: the end of its exchange's body,
/// or of a request kept while its body arrived; `None` when nothing waits for them.
pub(super) fn trailers(
    streams: &mut Streams,
    client: Client,
    stream: u64,
    headers: http::HeaderMap,
) -> Option<Heard> {
    if let Some(&id) = streams.exchanges.get(&stream) {
        // Request trailers reach the origin in the last chunk; a body of declared length
        // has no place for them in HTTP/1.1 (RFC 9112 §7.1.2), so there they are dropped.
        let trailers = Some(headers);
        return Some(Heard::End { id, trailers });
    }
    let pending = streams.pending.remove(&stream)?;
    Some(complete(client, pending))
}

/// A stream the client reset: what answered it ends.
pub(super) fn reset(streams: &mut Streams, stream: u64) -> Heard {
    let (session, file) = streams.reset(stream);
    Heard::Reset { session, file }
}

/// A stream's request, kept while its body arrived, read to its end.
fn complete(client: Client, (head, route): (RequestHead, Option<u32>)) -> Heard {
    Heard::Complete {
        client,
        head,
        deferred: Deferred::Answer(route),
    }
}

/// Adds what the connection counted since the last call to the worker's counters.
pub(super) fn count_stats(counters: &crate::metrics::WorkerCounters, stats: squall_h2::Stats) {
    counters.h2_streams.add(stats.streams_opened);
    counters.h2_resets_received.add(stats.resets_received);
    counters.timeouts.add(stats.stalls);
    let answered = [
        stats.answered_413,
        stats.answered_414,
        stats.answered_431,
        stats.answered_501,
    ];
    count_refused(counters, stats.malformed_requests, answered);
}

/// Counts the requests a multiplexed connection (HTTP/2 or HTTP/3) refused itself:
/// `malformed` ones (reset), and those it `answered` 413, 414, 431 and 501, in that order.
pub(super) fn count_refused(
    counters: &crate::metrics::WorkerCounters,
    malformed: u64,
    answered: [u64; 4],
) {
    counters.bad_requests.add(malformed);
    let statuses = [
        StatusCode::PAYLOAD_TOO_LARGE,
        StatusCode::URI_TOO_LONG,
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        StatusCode::NOT_IMPLEMENTED,
    ];
    for (count, status) in answered.into_iter().zip(statuses) {
        for _ in 0..count {
            counters.count_bad_request(status);
        }
    }
}

#[cfg(test)]
mod tests;
