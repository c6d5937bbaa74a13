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

use super::{Action, Exchange, Phase, ToClient};
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

    /// The origin connection is ready: `reused` when it came from the pool. The request head
    /// and whatever body has arrived go out now.
    pub fn on_origin_connected(&mut self, reused: bool, now: Instant) {
        if self.phase != Phase::Connecting {
            return;
        }
        self.phase = Phase::Exchanging;
        self.reused = reused;
        self.decoder = Some(ResponseDecoder::new(
            self.config.response_limits,
            &self.head.method,
        ));
        let peer = self.peer();
        let mut out = BytesMut::with_capacity(512 + self.body.len());
        forward::encode_request(&self.head, &self.route, peer, &mut out);
        self.put_upgrade(&mut out);
        out.extend_from_slice(&self.body);
        self.body.clear();
        self.request_sent = true;
        self.write_origin(out);
        self.arm_response_timeout(now);
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
            self.arm_response_timeout(now);
        }
        self.shut_origin_when_sent(now);
    }

    /// A piece of the request body, as the client's codec delivered it (de-chunked). It is
    /// framed for the origin as the request declared: as it is for a length, as a chunk
    /// otherwise.
    pub fn on_client_body(&mut self, data: &[u8]) {
        if self.phase == Phase::Done || self.request_complete || data.is_empty() {
            return;
        }
        if self.head.body == BodyKind::Chunked {
            squall_h1::encode_chunk(data, &mut self.body);
        } else {
            self.body.extend_from_slice(data);
        }
        self.body_unreleased += data.len();
        self.pump_body();
    }

    /// The request body ended. Trailers reach the origin in the last chunk, less the fields
    /// that may not cross a proxy as trailers (`forward::forwardable_trailers`); a body of
    /// declared length has no place for them in HTTP/1.1 (RFC 9112 §7.1.2), so there they are
    /// dropped.
    pub fn on_client_end(&mut self, trailers: Option<&HeaderMap>) {
        if self.phase == Phase::Done || self.request_complete {
            return;
        }
        if self.head.body == BodyKind::Chunked {
            let trailers = trailers.and_then(forward::forwardable_trailers);
            squall_h1::encode_last_chunk(trailers.as_ref(), &mut self.body);
        }
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
        self.origin_eof = false;
        self.deadline = Some(now + self.config.connect_timeout);
        self.actions.push_back(Action::Connect { server, pooled });
    }

    /// Moves buffered body bytes on to a connected origin.
    fn pump_body(&mut self) {
        if self.phase == Phase::Exchanging && !self.body.is_empty() {
            let out = self.body.split();
            self.write_origin(out);
        }
    }

    fn write_origin(&mut self, out: BytesMut) {
        self.origin_unsent += out.len();
        self.actions.push_back(Action::WriteOrigin(out.freeze()));
        let released = std::mem::take(&mut self.body_unreleased);
        if released > 0 {
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
