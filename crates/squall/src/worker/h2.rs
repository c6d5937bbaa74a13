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
//! An extended CONNECT (RFC 8441, WebSocket over HTTP/2) becomes the HTTP/1.1 upgrade request
//! a WebSocket client would have sent (`request_head`), and goes to a session only on a route
//! that allows the upgrade; elsewhere it is answered 501, as RFC 9220 §3 advises for a
//! `:protocol` the server does not take. Its stream's DATA then feeds the tunnel (`tunnel.rs`).

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode, Uri, Version};
use squall_h1::{BodyKind, RequestHead};
use squall_h2::{Event, Request, StreamId};
use tracing::debug;

use super::conn::{Conn, Phase};
use super::downstream::Downstream;
use super::downstream::heard::{Deferred, Heard};
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
    let (bytes, spans) = request.headers.into_parts();
    let spans = (spans.into_iter())
        .map(|s| [s.name, s.name_len, s.value, s.value_len])
        .collect();
    head_of(
        Parts {
            method: request.method,
            authority: request.authority,
            path: request.path,
            fields: (bytes, spans),
            content_length: request.content_length,
            end_stream: request.end_stream,
            protocol: request.protocol,
        },
        Version::HTTP_2,
    )
}

/// A validated request of a multiplexed protocol (HTTP/2 or HTTP/3: the same pseudo-header
/// fields, and regular fields as spans of one decoded block).
pub struct Parts {
    pub method: Method,
    pub authority: Option<Bytes>,
    pub path: Bytes,
    /// The block's bytes, and each field's `[name, name_len, value, value_len]` in them.
    pub fields: (Bytes, Vec<[u32; 4]>),
    pub content_length: Option<u64>,
    pub end_stream: bool,
    pub protocol: Option<Bytes>,
}

/// [`request_head`] for either protocol, `version` saying which.
pub fn head_of(parts: Parts, version: Version) -> Option<RequestHead> {
    let Parts {
        mut method,
        authority,
        path,
        fields: (bytes, spans),
        content_length,
        mut end_stream,
        protocol,
    } = parts;
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
                    Heard::Head { client, head, end }
                }
                Event::Data {
                    stream_id,
                    data,
                    end_stream,
                } => {
                    // A proxied body (or tunnel) moves on to the origin; its window is given
                    // back as it leaves (`ClientBodyConsumed`), so the client cannot outrun
                    // the origin.
                    if let Some(&id) = h2.streams.exchanges.get(&u64::from(stream_id)) {
                        let client = Client::H2(index, stream_id);
                        let end = end_stream;
                        return Some(Heard::Body {
                            client,
                            id,
                            data,
                            end,
                        });
                    }
                    h2.conn.release_capacity(stream_id, data.len());
                    let pending =
                        end_stream.then(|| h2.streams.pending.remove(&u64::from(stream_id)));
                    match pending.flatten() {
                        Some(pending) => complete(index, stream_id, pending),
                        None => continue,
                    }
                }
                Event::Trailers { stream_id, headers } => {
                    if let Some(&id) = h2.streams.exchanges.get(&u64::from(stream_id)) {
                        // Request trailers reach the origin in the last chunk; a body of
                        // declared length has no place for them in HTTP/1.1 (RFC 9112
                        // §7.1.2), so there they are dropped.
                        let trailers = Some(headers);
                        return Some(Heard::End { id, trailers });
                    }
                    match h2.streams.pending.remove(&u64::from(stream_id)) {
                        Some(pending) => complete(index, stream_id, pending),
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
                    let (session, file) = h2.streams.reset(u64::from(stream_id));
                    Heard::Reset { session, file }
                }
            };
            return Some(heard);
        }
    }
}

/// A stream's request, kept while its body arrived, read to its end.
fn complete(index: usize, stream: StreamId, (head, route): (RequestHead, Option<u32>)) -> Heard {
    Heard::Complete {
        client: Client::H2(index, stream),
        head,
        deferred: Deferred::Answer(route),
    }
}

/// Adds what the connection counted since the last call to the worker's counters.
pub(super) fn count_stats(counters: &crate::metrics::WorkerCounters, stats: squall_h2::Stats) {
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
