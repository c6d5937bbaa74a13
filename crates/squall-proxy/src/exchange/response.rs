//! The response side of an exchange: decoding what the origin sends (squall-h1's client role),
//! re-framing it for the client's protocol, holding the origin back while the client is slow,
//! and ending: whether the origin connection may be kept, and what the balancer hears.
//!
//! Why the framing is decided here and written by the downstream: the choice (a length, chunks
//! for HTTP/1.1, until close for HTTP/1.0, DATA frames for HTTP/2) follows from the response
//! and the request (RFC 9112 §6.3), which the exchange knows; the bytes that carry it (status
//! line, Date, chunk sizes, HPACK) are the client codec's, which the downstream owns.

use std::time::Instant;

use http::{HeaderMap, Method, StatusCode, Version};
use squall_h1::{OriginHead, RequestFraming, ResponseBody, ResponseEvent};

use squall_upstream::{Outcome, UpstreamErrorClass};

use super::{
    Action, ClientFraming, ClientHead, ClientProtocol, Exchange, FillHook, Phase, ToClient,
};
use crate::compress::{self, Compressor, Plan};
use crate::forward;

impl Exchange {
    /// Bytes the origin sent. They are decoded as far as the client has room for.
    pub fn on_origin_data(&mut self, data: &[u8], now: Instant) {
        if self.phase == Phase::Tunnel {
            return self.tunnel_origin_data(data, now);
        }
        if self.phase != Phase::Exchanging || data.is_empty() {
            return;
        }
        self.rbuf.extend_from_slice(data);
        self.pump_response(now);
        if self.phase == Phase::Exchanging {
            self.arm_origin_timer(now);
        }
    }

    /// The origin closed its side (a read returned 0). A close-delimited body ends here; any
    /// other unfinished response is a failure.
    pub fn on_origin_eof(&mut self, now: Instant) {
        if self.phase == Phase::Tunnel {
            return self.tunnel_origin_eof(now);
        }
        if self.phase != Phase::Exchanging {
            return;
        }
        self.origin_eof = true;
        self.pump_response(now);
    }

    /// What an HTTP/2 origin sent on the exchange's stream, as the driver read it from its
    /// connection: the events an HTTP/1.1 origin's bytes decode to. Taken as far as the client
    /// has room; the rest waits, and its window with it (`OriginBodyConsumed` gives it back).
    pub fn on_origin_response(&mut self, event: ResponseEvent, now: Instant) {
        if self.phase != Phase::Exchanging || !self.origin_h2 {
            return;
        }
        if let ResponseEvent::Data(data) = &event {
            self.h2_held += data.len();
        }
        self.h2_events.push_back(event);
        self.pump_response(now);
        if self.phase == Phase::Exchanging {
            self.arm_origin_timer(now);
        }
    }

    /// Reading from or writing to the origin failed (a reset, say).
    pub fn on_origin_error(&mut self, now: Instant) {
        if self.phase == Phase::Tunnel {
            return self.tunnel_failed();
        }
        if self.phase == Phase::Exchanging {
            self.fail(forward::early_end_class(self.reused), now);
        }
    }

    /// Decodes and forwards what is buffered, while the client has room for body bytes.
    pub(super) fn pump_response(&mut self, now: Instant) {
        self.pump_events(now);
        if self.h2_unreleased > 0 && self.holding_origin {
            let taken = std::mem::take(&mut self.h2_unreleased);
            self.actions.push_back(Action::OriginBodyConsumed(taken));
        }
    }

    /// The next response event of the current attempt: decoded from an HTTP/1.1 origin's
    /// bytes, or the next one an HTTP/2 origin's stream delivered. `None` without a decoder.
    fn next_event(&mut self) -> Option<Result<Option<ResponseEvent>, squall_h1::ResponseError>> {
        if self.origin_h2 {
            let event = self.h2_events.pop_front();
            if let Some(ResponseEvent::Data(data)) = &event {
                self.h2_held -= data.len();
                self.h2_unreleased += data.len();
            }
            return Some(Ok(event));
        }
        let decoder = self.decoder.as_mut()?;
        Some(if self.origin_eof && self.rbuf.is_empty() {
            decoder.eof()
        } else {
            decoder.decode(&mut self.rbuf)
        })
    }

    /// Drops what an HTTP/2 origin's stream delivered and was not taken; its window is given
    /// back with the rest (the connection's window is shared by every stream).
    pub(super) fn clear_h2_events(&mut self) {
        self.h2_unreleased += std::mem::take(&mut self.h2_held);
        self.h2_events.clear();
        if self.h2_unreleased > 0 {
            let taken = std::mem::take(&mut self.h2_unreleased);
            self.actions.push_back(Action::OriginBodyConsumed(taken));
        }
    }

    fn pump_events(&mut self, now: Instant) {
        while self.phase == Phase::Exchanging {
            if self.response_started && self.room == 0 && !self.answered_elsewhere {
                self.pause();
                return;
            }
            match self.take_switch(now) {
                Some(true) => continue,
                Some(false) => return,
                None => {}
            }
            let Some(event) = self.next_event() else {
                return;
            };
            match event {
                Ok(Some(ResponseEvent::Interim(head))) => self.forward_interim(head),
                Ok(Some(ResponseEvent::Head(head))) => self.forward_head(head),
                Ok(Some(ResponseEvent::Data(data))) => self.forward_data(data, now),
                Ok(Some(ResponseEvent::End { trailers })) => self.finish(trailers, now),
                Ok(None) if self.origin_eof => {
                    self.fail(UpstreamErrorClass::ClosedBeforeResponse, now);
                }
                Ok(None) => {
                    // All the origin sent so far is decoded: what the compressor holds goes
                    // out now, so a pause at the origin is not a stall at the client.
                    self.flush_compressor(now);
                    return;
                }
                Err(e) => {
                    let class = if e.head_received() || !self.reused {
                        UpstreamErrorClass::InvalidResponse
                    } else {
                        UpstreamErrorClass::ClosedBeforeResponse
                    };
                    self.fail(class, now);
                }
            }
        }
    }

    fn pause(&mut self) {
        if !self.paused {
            self.paused = true;
            self.actions.push_back(Action::PauseOrigin);
        }
    }

    /// An origin's 1xx goes on to the client (RFC 9110 §15.2), except `100 Continue`, which the
    /// exchange said to the client itself, and except to an HTTP/1.0 client. The decoder
    /// refuses 101, since no upgrade was asked for.
    fn forward_interim(&mut self, head: OriginHead) {
        if head.status == StatusCode::CONTINUE || self.client.protocol == ClientProtocol::Http10 {
            return;
        }
        let headers =
            forward::response_headers(&head.headers, &self.route, &self.head, self.peer());
        self.tell_client(ToClient::Interim {
            status: head.status,
            headers,
        });
    }

    fn forward_head(&mut self, head: OriginHead) {
        let mut headers =
            forward::response_headers(&head.headers, &self.route, &self.head, self.peer());
        let mut body_len = forward::client_body_len(&head);
        let (mut framing, mut keep_alive) = self.client_framing(&head, body_len);
        if self.start_compressing(&head, &mut headers, body_len, framing) {
            body_len = None;
            (framing, keep_alive) = self.client_framing(&head, None);
        }
        self.status = head.status;
        self.origin_keep_alive = head.keep_alive;
        self.response_started = true;
        self.framing = Some(framing);
        if self.route.cache {
            self.actions.push_back(Action::Fill(FillHook::Head {
                status: head.status,
                // The cache stores a map: built here, once per fill, not per response.
                headers: head.headers.to_header_map(),
                client_headers: headers.clone(),
                body_len,
            }));
        }
        self.tell_client(ToClient::Head(ClientHead {
            status: self.status,
            headers,
            body_len,
            framing,
            keep_alive,
        }));
    }

    /// The framing for the client and whether its connection persists after the response.
    fn client_framing(&self, head: &OriginHead, body_len: Option<u64>) -> (ClientFraming, bool) {
        let is_head = self.head.method == Method::HEAD;
        let version = match self.client.protocol {
            ClientProtocol::H2 => {
                let no_body =
                    is_head || matches!(head.body, ResponseBody::Absent | ResponseBody::Length(0));
                let framing = if no_body {
                    ClientFraming::Empty
                } else {
                    ClientFraming::Frames
                };
                return (framing, true);
            }
            ClientProtocol::Http10 => Version::HTTP_10,
            ClientProtocol::Http11 => Version::HTTP_11,
        };
        let request = RequestFraming {
            version,
            keep_alive: self.head.keep_alive && self.client.keep_alive,
            is_head,
        };
        let decided = squall_h1::response_framing(head.status, body_len, request);
        let framing = match decided.body {
            ResponseBody::Absent => ClientFraming::Empty,
            ResponseBody::Length(n) => ClientFraming::Length(n),
            ResponseBody::Chunked => ClientFraming::Chunked,
            ResponseBody::Close => ClientFraming::UntilClose,
        };
        (framing, decided.keep_alive)
    }

    /// On a route that compresses: plans the response (`crate::compress::plan`, judged on the
    /// client-bound `headers`, so route edits count), edits `headers` to match, and starts
    /// the compressor. Returns whether the body is compressed.
    fn start_compressing(
        &mut self,
        head: &OriginHead,
        headers: &mut HeaderMap,
        body_len: Option<u64>,
        framing: ClientFraming,
    ) -> bool {
        let Some(rules) = &self.route.compress else {
            return false;
        };
        // Chunked on HTTP/1.1 or DATA frames on HTTP/2: a body whose length is unknown.
        let can_stream =
            framing != ClientFraming::Empty && self.client.protocol.frames_unknown_length();
        let mut plan = compress::plan(
            rules,
            &self.head,
            head.status,
            headers,
            body_len,
            can_stream,
        );
        // Nobody takes the body (the cache answered the client, and this is no fill): it is
        // not worth compressing.
        if self.answered_elsewhere && !self.route.cache {
            plan = Plan::Vary;
        }
        if let Plan::Encode(coding) = plan {
            match Compressor::new(coding, rules.into()) {
                Ok(compressor) => self.compressor = Some(Box::new(compressor)),
                Err(_) => plan = Plan::Vary,
            }
        }
        compress::edit_headers(headers, plan);
        self.compressor.is_some()
    }

    fn forward_data(&mut self, data: bytes::Bytes, now: Instant) {
        let data = match self.compressor.as_mut().map(|c| c.push(&data)) {
            None => data,
            Some(Ok(compressed)) => compressed,
            Some(Err(_)) => return self.compression_failed(now),
        };
        self.send_body(data);
    }

    /// Sends what the compressor holds (see `pump_response`).
    fn flush_compressor(&mut self, now: Instant) {
        match self.compressor.as_mut().map(|c| c.flush()) {
            None => {}
            Some(Ok(compressed)) => self.send_body(compressed),
            Some(Err(_)) => self.compression_failed(now),
        }
    }

    /// Ends the compression of a complete body: its last bytes go out. False when it failed
    /// (and the exchange with it).
    fn finish_compressing(&mut self, now: Instant) -> bool {
        let Some(compressor) = self.compressor.take() else {
            return true;
        };
        match compressor.finish() {
            Ok((rest, stats)) => {
                self.compressed = Some(stats);
                self.send_body(rest);
                true
            }
            Err(_) => {
                self.compression_failed(now);
                false
            }
        }
    }

    /// The compressor failed mid-body (it does not for valid levels): the response is cut,
    /// as a truncated body must be, and the origin, not at fault, is let go unreported.
    fn compression_failed(&mut self, now: Instant) {
        self.compressor = None;
        if self.holding_origin {
            self.release_origin(false);
        }
        self.report(squall_upstream::Outcome::Neutral, None, now);
        self.decoder = None;
        self.paused = false;
        self.tell_client(ToClient::Abort);
        self.phase = Phase::Done;
    }

    /// A piece of the body as the client gets it: to the fill, and to the client unless it
    /// was answered elsewhere or takes no body.
    fn send_body(&mut self, data: bytes::Bytes) {
        if data.is_empty() {
            return;
        }
        if self.route.cache {
            self.actions
                .push_back(Action::Fill(FillHook::Data(data.clone())));
        }
        if self.answered_elsewhere || self.framing == Some(ClientFraming::Empty) {
            return;
        }
        self.room = self.room.saturating_sub(data.len());
        self.tell_client(ToClient::Data(data));
    }

    /// The response ended cleanly: tell the client and the fill, report, release.
    fn finish(&mut self, trailers: Option<HeaderMap>, now: Instant) {
        if !self.finish_compressing(now) {
            return;
        }
        if self.route.cache {
            let trailers = trailers.clone();
            self.actions
                .push_back(Action::Fill(FillHook::End { trailers }));
        }
        // Trailers have a place only in an HTTP/2 stream or a chunked body, and an HTTP/1.1
        // client that did not ask for them with `TE: trailers` may go without (RFC 9112
        // §7.1.2). Hop-by-hop and framing fields never cross.
        let carries_trailers = match self.framing {
            Some(ClientFraming::Frames) => true,
            Some(ClientFraming::Chunked) => forward::accepts_trailers(&self.head.headers),
            _ => false,
        };
        let trailers = trailers.filter(|_| carries_trailers);
        self.tell_client(ToClient::End {
            trailers: trailers.as_ref().and_then(forward::forwardable_trailers),
            request_unfinished: !self.request_complete,
        });
        // Reusable only between messages (RFC 9112 §9.3): the response read whole with
        // nothing after it, the origin willing, and the whole request sent.
        let reusable = self.decoder.as_ref().is_some_and(|d| d.is_idle())
            && self.rbuf.is_empty()
            && !self.origin_eof
            && !self.paused
            && self.origin_keep_alive
            && self.request_complete
            && self.body.is_empty()
            && self.origin_unsent == 0;
        self.report(Outcome::from_status(self.status.as_u16()), None, now);
        self.release_origin(reusable);
        self.decoder = None;
        self.paused = false;
        self.phase = Phase::Done;
    }
}
