//! The request side of an exchange: picking a server, connecting, writing the request and its
//! body, and what a failed attempt leads to (a retry, a failover, 502/504, or a cut).
//!
//! Why here and not in the driver: the retry rules (squall-upstream's [`RetryPolicy`]) need
//! facts only the exchange has at the moment of failure (was a byte of the request sent, had
//! the response started, was the connection pooled), and getting one of them wrong either
//! replays a POST (RFC 9110 §9.2.2 forbids it) or splices two responses together.
//!
//! [`RetryPolicy`]: squall_upstream::RetryPolicy

use std::time::Instant;

use bytes::BytesMut;
use http::{HeaderMap, StatusCode};
use squall_h1::{BodyKind, ResponseDecoder};
use squall_upstream::{AttemptFailure, NO_SERVER_STATUS, Retry, ServerId, UpstreamErrorClass};

use super::{Action, Exchange, OriginMessage, Phase, Replay, ToClient};

/// How many refused HTTP/2 streams an exchange retries on the same server before it takes a
/// refusal as the server's failure.
const REFUSALS_RETRIED: u8 = 2;

/// The most request body an exchange on an HTTP/2 origin keeps to send again if the stream is
/// refused; past it, a refused request with a body is a failure like any other.
const REPLAY_BYTES_MAX: usize = 64 * 1024;
use crate::forward::{self, Peer};

impl Exchange {
    /// The answer to `Action::Pick`: the server the balancer chose, or `None` when the group
    /// has none left to give (every server tried, or none to pick).
    pub fn on_pick(&mut self, server: Option<ServerId>, now: Instant) {
        if self.phase != Phase::Picking {
            debug_assert!(self.phase == Phase::Done, "a pick nobody asked for");
            return;
        }
        let Some(server) = server else {
            let status = StatusCode::from_u16(NO_SERVER_STATUS).unwrap_or(StatusCode::BAD_GATEWAY);
            self.give_up(status);
            return;
        };
        self.server = Some(server);
        self.tried.push(server);
        self.connect(server, true, now);
    }

    /// The answer to `Action::Pick` when the driver will send the request nowhere (a gRPC call
    /// for an upstream spoken to in HTTP/1.1, which cannot carry it): it is answered `status`.
    pub fn refuse(&mut self, status: StatusCode) {
        if self.phase == Phase::Picking {
            self.give_up(status);
        }
    }

    /// The origin connection is ready: `reused` when it came from the pool. The request head
    /// and whatever body has arrived go out now.
    pub fn on_origin_connected(&mut self, reused: bool, now: Instant) {
        if self.phase != Phase::Connecting {
            return;
        }
        self.phase = Phase::Exchanging;
        self.reused = reused;
        self.origin_h2 = false;
        self.decoder = Some(ResponseDecoder::new(
            self.config.response_limits,
            &self.head.method,
        ));
        let peer = self.peer();
        let mut out = BytesMut::with_capacity(512 + self.body.len());
        forward::encode_request(&self.head, &self.route, peer, &mut out);
        self.put_upgrade(&mut out);
        self.request_sent = true;
        self.write_origin(out);
        self.pump_body();
        self.arm_origin_timer(now);
    }

    /// As [`on_origin_connected`](Exchange::on_origin_connected), for an HTTP/2 origin: the
    /// driver has a stream for the exchange on a connection (`reused`: one that carried
    /// streams before; `tls`: the `:scheme` is `https`). The request goes out as `SendOrigin`
    /// messages and the response comes back as [`on_origin_response`] events. Upgrades do not
    /// cross an HTTP/2 origin: the request goes as a plain one.
    ///
    /// [`on_origin_response`]: Exchange::on_origin_response
    pub fn on_origin_stream(&mut self, reused: bool, tls: bool, now: Instant) {
        if self.phase != Phase::Connecting {
            return;
        }
        self.phase = Phase::Exchanging;
        self.reused = reused;
        self.origin_h2 = true;
        self.offered = None;
        self.replay = Some(Replay::default());
        let fields = forward::h2_request(&self.head, &self.route, self.peer(), tls);
        let end_stream =
            self.request_complete && self.body.is_empty() && self.body_trailers.is_none();
        self.body_end_sent = end_stream;
        self.actions
            .push_back(Action::SendOrigin(OriginMessage::Head {
                fields,
                end_stream,
            }));
        self.request_sent = true;
        self.pump_body();
        self.arm_origin_timer(now);
    }

    /// The HTTP/2 origin reset the exchange's stream, or its connection failed, before the
    /// response ended. `refused`: the origin did not process the request (REFUSED_STREAM, or a
    /// stream above a GOAWAY's last id, RFC 9113 §8.7), so it may go again whatever its method.
    pub fn on_origin_reset(&mut self, refused: bool, now: Instant) {
        if self.phase != Phase::Exchanging {
            return;
        }
        let replay = self.replay.take();
        if refused && !self.response_started {
            // Not processed: sent again whole, if what was sent is still here.
            if let Some(replay) = replay {
                let mut body = BytesMut::with_capacity(replay.bytes + self.body.len());
                replay.pieces.iter().for_each(|p| body.extend_from_slice(p));
                body.extend_from_slice(&self.body);
                self.body = body;
                self.body_trailers = self.body_trailers.take().or(replay.trailers);
                self.request_sent = false;
            }
            // Once or twice, the same server again on a connection not yet used (this one
            // refused, or is going away); an origin that keeps refusing is failing.
            self.refusals = self.refusals.saturating_add(1);
            self.reused = self.refusals <= REFUSALS_RETRIED;
            return self.fail(UpstreamErrorClass::ResetBeforeResponse, now);
        }
        self.fail(forward::early_end_class(self.reused), now);
    }

    /// Who the request came from, as the forwarding rules and header variables see it.
    pub(crate) fn peer(&self) -> Peer {
        Peer {
            addr: self.client.peer,
            tls: self.client.tls,
            client: self.client.client,
            request_id: self.client.request_id,
        }
    }

    /// The request's id (`$request_id`, the access log's `request_id`).
    pub fn request_id(&self) -> u128 {
        self.client.request_id
    }

    /// The connect failed (`ConnectFailed`; a socket that could not even be made is the same).
    pub fn on_connect_failed(&mut self, class: UpstreamErrorClass, now: Instant) {
        if self.phase == Phase::Connecting {
            self.fail(class, now);
        }
    }

    /// `n` bytes of what `WriteOrigin` handed out reached the origin's socket. Progress
    /// towards the origin also counts as the origin being alive: the response timeout starts
    /// again, so a long upload is not mistaken for a silent origin.
    pub fn on_origin_sent(&mut self, n: usize, now: Instant) {
        debug_assert!(n <= self.origin_unsent, "more sent than written");
        self.origin_unsent = self.origin_unsent.saturating_sub(n);
        if self.phase == Phase::Exchanging && n > 0 {
            self.arm_origin_timer(now);
            self.release_client_body();
        }
        self.shut_origin_when_sent(now);
    }

    /// A piece of the request body, as the client's codec delivered it (de-chunked). It is
    /// framed for the origin when it goes: as it is for a length, as a chunk otherwise, as
    /// DATA for an HTTP/2 origin.
    pub fn on_client_body(&mut self, data: &[u8]) {
        if self.phase == Phase::Done || self.request_complete || data.is_empty() {
            return;
        }
        self.body_received = self.body_received.saturating_add(data.len() as u64);
        if self.body_received > self.config.body_bytes_max {
            return self.refuse_body();
        }
        self.body.extend_from_slice(data);
        self.body_unreleased += data.len();
        self.pump_body();
    }

    /// The request body ended. Trailers reach the origin in the last chunk (or a trailing
    /// HEADERS frame for an HTTP/2 origin), less the fields that may not cross a proxy as
    /// trailers (`forward::forwardable_trailers`); a body of declared length has no place for
    /// them in HTTP/1.1 (RFC 9112 §7.1.2), so there they are dropped.
    pub fn on_client_end(&mut self, trailers: Option<&HeaderMap>) {
        if self.phase == Phase::Done || self.request_complete {
            return;
        }
        self.body_trailers = trailers.and_then(forward::forwardable_trailers);
        self.request_complete = true;
        self.pump_body();
    }

    /// Queues a connection to `server`; `pooled` lets the driver use the pool.
    pub(super) fn connect(&mut self, server: ServerId, pooled: bool, now: Instant) {
        self.phase = Phase::Connecting;
        self.holding_origin = true;
        self.reused = false;
        self.request_sent = false;
        self.origin_unsent = 0;
        self.decoder = None;
        self.rbuf.clear();
        self.clear_h2_events();
        self.origin_eof = false;
        self.body_end_sent = false;
        self.deadline = Some(now + self.config.connect_timeout);
        self.actions.push_back(Action::Connect { server, pooled });
    }

    /// Moves buffered body bytes (and the body's end) on to a connected origin, framed for it.
    fn pump_body(&mut self) {
        if self.phase != Phase::Exchanging {
            return;
        }
        let ending = self.request_complete && !self.body_end_sent;
        if self.body.is_empty() && !ending {
            return;
        }
        self.body_end_sent |= ending;
        if self.origin_h2 {
            let trailers = if ending {
                self.body_trailers.take()
            } else {
                None
            };
            let data = self.body.split().freeze();
            let sent = data.len();
            if let Some(kept) = &mut self.replay {
                if kept.bytes + sent <= REPLAY_BYTES_MAX {
                    kept.bytes += sent;
                    if sent > 0 {
                        kept.pieces.push(data.clone());
                    }
                    kept.trailers.clone_from(&trailers);
                } else {
                    self.replay = None;
                }
            }
            if sent > 0 || (ending && trailers.is_none()) {
                let end_stream = ending && trailers.is_none();
                self.origin_unsent += sent;
                let message = OriginMessage::Data { data, end_stream };
                self.actions.push_back(Action::SendOrigin(message));
            }
            if let Some(trailers) = trailers {
                self.actions
                    .push_back(Action::SendOrigin(OriginMessage::Trailers(trailers)));
            }
            return self.release_client_body();
        }
        let chunked = self.head.body == BodyKind::Chunked;
        let out = match (chunked, self.body.is_empty()) {
            (false, _) => self.body.split(),
            (true, empty) => {
                let mut out = BytesMut::with_capacity(self.body.len() + 24);
                if !empty {
                    squall_h1::encode_chunk(&self.body, &mut out);
                    self.body.clear();
                }
                if ending {
                    squall_h1::encode_last_chunk(self.body_trailers.take().as_ref(), &mut out);
                }
                out
            }
        };
        if !out.is_empty() {
            self.write_origin(out);
        }
    }

    fn write_origin(&mut self, out: BytesMut) {
        self.origin_unsent += out.len();
        self.actions.push_back(Action::WriteOrigin(out.freeze()));
        self.release_client_body();
    }

    /// Body bytes taken from the client that have left for the origin: its stream's window
    /// may be given back for them. Those still waiting here (unframed, or written and not yet
    /// taken by the origin's socket or HTTP/2 stream) are given back as they leave
    /// (`on_origin_sent`), so an HTTP/2 client never has more than its window in Squall.
    fn release_client_body(&mut self) {
        let waiting = self.body.len() + self.origin_unsent;
        let released = self.body_unreleased.saturating_sub(waiting);
        if released > 0 {
            self.body_unreleased -= released;
            self.actions.push_back(Action::ClientBodyConsumed(released));
        }
    }

    /// The current attempt failed with `class`: release the connection, report, then retry
    /// on the same server, fail over to another, or end with an error response or a cut.
    pub(super) fn fail(&mut self, class: UpstreamErrorClass, now: Instant) {
        let Some(server) = self.server else {
            debug_assert!(false, "a failure without a pick");
            return;
        };
        if self.holding_origin {
            self.release_origin(false);
        }
        self.decoder = None;
        self.paused = false;
        self.failure = Some(class);
        let failure = AttemptFailure {
            error: class,
            method_idempotent: forward::replayable(&self.head),
            attempts: u32::try_from(self.tried.len()).unwrap_or(u32::MAX),
            request_sent: self.request_sent,
            response_started: self.response_started,
            connection_reused: self.reused,
        };
        let decision = self.config.retry.decide(&failure);
        if decision != Retry::SameServer {
            self.report(class.outcome(self.reused), Some(class), now);
        }
        match decision {
            // A stale pooled connection: the same pick, on a fresh connection (so that it
            // cannot earn another free retry).
            Retry::SameServer => self.connect(server, false, now),
            Retry::OtherServer => {
                self.phase = Phase::Picking;
                self.actions.push_back(Action::Pick);
            }
            Retry::No if self.response_started => {
                self.tell_client(ToClient::Abort);
                self.phase = Phase::Done;
            }
            Retry::No => {
                let status =
                    StatusCode::from_u16(class.status()).unwrap_or(StatusCode::BAD_GATEWAY);
                self.give_up(status);
            }
        }
    }

    /// The request body went over `body_bytes_max`: the origin is let go (not reusable, its
    /// request unfinished; the server is not at fault), and the client gets a 413, or its
    /// response is cut when it had begun.
    fn refuse_body(&mut self) {
        self.over_limit = true;
        if self.holding_origin {
            self.release_origin(false);
        }
        // No clock here: the report's elapsed time is not what a neutral one is read for.
        self.report(squall_upstream::Outcome::Neutral, None, self.started);
        self.decoder = None;
        self.paused = false;
        self.body.clear();
        if self.response_started {
            self.tell_client(ToClient::Abort);
            self.phase = Phase::Done;
        } else {
            self.give_up(StatusCode::PAYLOAD_TOO_LARGE);
        }
    }

    /// Ends the exchange with an error response; nothing of the response went out yet.
    fn give_up(&mut self, status: StatusCode) {
        debug_assert!(!self.response_started && !self.holding_origin && self.server.is_none());
        self.status = status;
        self.tell_client(ToClient::Error {
            status,
            request_unfinished: !self.request_complete,
        });
        self.phase = Phase::Done;
    }
}
