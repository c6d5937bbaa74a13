//! HTTP/3 connections in the protocol layer: the glue between `squall-quic`'s connection
//! (QUIC and `squall-h3` together) and the same service that answers HTTP/1.1 and HTTP/2.
//!
//! A connection is HTTP/3 from its first packet: QUIC's handshake chose ALPN `h3`, and the
//! worker's `Quic` part (`quic.rs`) accepted it into a client slot with no socket of its own.
//! Its packets reach it through [`Downstream::receive_h3`]; the bytes they carry become
//! request events ([`Heard`]) in the vocabulary of the other two protocols: its requests are
//! `squall-h2`'s, validated by the same code, and become heads as HTTP/2's do (`h2::head_of`),
//! with version HTTP/3; body, trailers and resets are met as HTTP/2's (`h2::body`,
//! `h2::trailers`, `h2::reset`). Answers are written on its streams through the same
//! [`Mux`](super::downstream::mux::Mux) as HTTP/2's, and leave as datagrams when the loop
//! flushes the connection through the `Quic` part.
//!
//! 0-RTT: a request that arrives while the handshake is still running came in early data,
//! which an attacker may replay; unless its method is safe (GET, HEAD, OPTIONS, TRACE) it
//! is answered `425 Too Early` (RFC 8470 §5.2), which clients retry after the handshake.

use http::{StatusCode, Version};
use squall_h1::BodyKind;
use squall_h3::server::Event;
use squall_quic::ConnectionEvent;
use tracing::debug;

use super::conn::Phase;
use super::downstream::Downstream;
use super::downstream::heard::Heard;
use super::h2::{Body, body, count_refused, head_of, reset, trailers};
use super::ids::Client;

impl Downstream<'_> {
    /// A packet (or an endpoint's answer) for HTTP/3 connection `index`: QUIC takes it, and
    /// what its streams delivered moves into the HTTP/3 connection; the connection is then
    /// processed at the end of the turn.
    pub(super) fn receive_h3(&mut self, index: usize, event: ConnectionEvent) {
        let conn = &mut self.conns[index];
        let Some(h3) = conn.proto.h3_mut() else {
            return;
        };
        h3.quic.handle(event);
        h3.quic.drive(self.now);
        conn.last_activity = self.now;
        self.schedule(index);
    }

    /// The next request event of HTTP/3 connection `index` (see [`Heard`]); a request that
    /// cannot be made a head is answered 400 on the way, one in 0-RTT whose method is not safe 425, and a
    /// `respond` route's body is dropped as it arrives.
    pub(super) fn next_h3(&mut self, index: usize) -> Option<Heard> {
        loop {
            let conn = &mut self.conns[index];
            if conn.phase != Phase::Open {
                return None;
            }
            let h3 = conn.proto.h3_mut()?;
            let early = h3.quic.is_handshaking();
            let event = match h3.stash.take() {
                Some(event) => event,
                None => h3.quic.h3().poll_event()?,
            };
            let heard = match event {
                Event::Request { stream_id, request } => {
                    conn.request_started = self.now;
                    let client = Client::H3(index, stream_id);
                    let end = request.end_stream;
                    let Some(head) = head_of(request, Version::HTTP_3) else {
                        self.refuse_stream(client, StatusCode::BAD_REQUEST, None);
                        continue;
                    };
                    if early && !head.method.is_safe() {
                        debug!(
                            worker = self.log.worker,
                            conn = index,
                            "h3: 0-RTT request, method not safe: 425"
                        );
                        self.counters.quic_early_refused.inc();
                        self.refuse_stream(client, StatusCode::TOO_EARLY, Some(&head));
                        continue;
                    }
                    let h3 = self.conns[index].proto.h3_mut()?;
                    if !end && head.method.is_safe() && head.body == BodyKind::Chunked {
                        // Most likely a GET whose FIN is on its way: whether it has a body
                        // decides whether the cache may answer it.
                        h3.held.insert(stream_id, head);
                        continue;
                    }
                    Heard::Head { client, head, end }
                }
                Event::Data {
                    stream_id,
                    data,
                    end_stream,
                } if h3.held.contains_key(&stream_id) => {
                    let mut head = h3.held.remove(&stream_id)?;
                    let client = Client::H3(index, stream_id);
                    if data.is_empty() && end_stream {
                        head.body = BodyKind::Empty;
                        Heard::Head {
                            client,
                            head,
                            end: true,
                        }
                    } else {
                        // It has a body after all: its head first, then these bytes.
                        h3.stash = Some(Event::Data {
                            stream_id,
                            data,
                            end_stream,
                        });
                        Heard::Head {
                            client,
                            head,
                            end: false,
                        }
                    }
                }
                Event::Trailers { stream_id, headers } if h3.held.contains_key(&stream_id) => {
                    let head = h3.held.remove(&stream_id)?;
                    let client = Client::H3(index, stream_id);
                    h3.stash = Some(Event::Trailers { stream_id, headers });
                    Heard::Head {
                        client,
                        head,
                        end: false,
                    }
                }
                Event::Data {
                    stream_id,
                    data,
                    end_stream,
                } => {
                    let client = Client::H3(index, stream_id);
                    let len = data.len();
                    match body(&mut h3.streams, client, stream_id, data, end_stream) {
                        Body::Exchange(heard) => heard,
                        // A body nothing takes (a `respond` route's) is dropped as it comes,
                        // and QUIC reads on.
                        Body::Dropped(heard) => {
                            h3.quic.release(stream_id, len);
                            match heard {
                                Some(heard) => heard,
                                None => continue,
                            }
                        }
                    }
                }
                Event::Trailers { stream_id, headers } => {
                    let client = Client::H3(index, stream_id);
                    match trailers(&mut h3.streams, client, stream_id, headers) {
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
                        "h3: stream reset"
                    );
                    h3.held.remove(&stream_id);
                    reset(&mut h3.streams, stream_id)
                }
            };
            return Some(heard);
        }
    }
}

/// Adds what the connection counted since the last call to the worker's counters.
pub(super) fn count_stats(
    counters: &crate::metrics::WorkerCounters,
    stats: squall_h3::server::Stats,
) {
    counters.h3_streams.add(stats.requests);
    counters.h2_resets_received.add(stats.resets_received);
    let answered = [
        stats.answered_413,
        stats.answered_414,
        stats.answered_431,
        stats.answered_501,
    ];
    count_refused(counters, stats.malformed, answered);
    if stats.flood.is_some() {
        counters.h3_floods.inc();
    } else if stats.protocol_errors > 0 {
        counters.h3_protocol_errors.add(stats.protocol_errors);
    }
}
