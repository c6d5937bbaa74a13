//! The worker's event handling for proxied requests: origin connections on the ring, and the
//! exchange between a client connection and one origin connection (see `proxy.rs`).

use std::io;
use std::time::Instant;

use bytes::Bytes;
use http::StatusCode;
use squall_h1::ResponseEvent;
use squall_upstream::{AttemptFailure, Checkin, ConnId, Outcome, Retry, UpstreamErrorClass};
use squall_uring::RecvBuf;
use tracing::debug;

use super::proxy::{self, Origin, OriginState};
use super::{KIND_ORIGIN, KIND_SHIFT, OUT_HIGH_BYTES, Worker, conn_token};

/// Token of an origin connection: kind bits, 30 bits of generation, the slab index.
pub(super) fn origin_token(index: usize, generation: u32) -> u64 {
    (KIND_ORIGIN << KIND_SHIFT) | (u64::from(generation & 0x3FFF_FFFF) << 32) | index as u64
}

impl Worker {
    pub(super) fn origin_index(&self, token: u64) -> Option<usize> {
        let index = (token & 0xFFFF_FFFF) as usize;
        let generation = ((token >> 32) & 0x3FFF_FFFF) as u32;
        let origin = self.origins.get(index)?;
        (origin.generation & 0x3FFF_FFFF == generation).then_some(index)
    }

    /// Gives the client's current exchange an origin connection: pooled, or a new connect.
    pub(super) fn assign_origin(&mut self, client: usize) {
        let now = self.now;
        let (upstream, key, tried) = match self.conns[client].exchange.as_ref() {
            Some(e) => {
                let key = squall_upstream::key_hash(e.head.uri.path().as_bytes());
                (e.upstream, key, e.tried.clone())
            }
            None => return,
        };
        let picked = self
            .upstreams
            .groups
            .get_mut(upstream)
            .and_then(|u| u.group.pick(Some(key), now, &tried));
        let Some(server) = picked else {
            self.fail_exchange(client, UpstreamErrorClass::ConnectFailed, false);
            return;
        };
        if let Some(e) = self.conns[client].exchange.as_mut() {
            e.server = Some(server);
            e.attempts += 1;
            e.tried.push(server);
        }
        let client_token = conn_token(client, self.conns[client].generation);
        // A pooled connection is ready to use (LIFO: the one most likely still open).
        while let Some(ConnId(token)) = self.upstreams.groups[upstream].pool.checkout(server, now) {
            let Some(index) = self.origin_index(token) else {
                continue;
            };
            if self.origins[index].state != OriginState::Idle {
                continue;
            }
            let origin = &mut self.origins[index];
            origin.state = OriginState::Busy;
            origin.reused = true;
            origin.client = Some(client_token);
            if let Some(e) = self.conns[client].exchange.as_mut() {
                e.origin = Some(token);
            }
            self.runtime.metrics.worker(self.id).upstream_reuses.inc();
            self.write_request(index);
            return;
        }
        let address = self.upstreams.groups[upstream]
            .group
            .address(server)
            .expect("picked servers exist");
        match proxy::origin_socket(address) {
            Ok(fd) => self.connect_origin(client, upstream, server, address, fd),
            Err(e) => {
                debug!(worker = self.id, %address, "origin socket: {e}");
                self.fail_exchange(client, UpstreamErrorClass::ConnectFailed, false);
            }
        }
    }

    fn connect_origin(
        &mut self,
        client: usize,
        upstream: usize,
        server: squall_upstream::ServerId,
        address: std::net::SocketAddr,
        fd: std::os::fd::OwnedFd,
    ) {
        self.next_generation = (self.next_generation + 1) & 0x3FFF_FFFF;
        let generation = self.next_generation;
        let connect_timeout = self.upstreams.groups[upstream].connect_timeout;
        let method = self.conns[client]
            .exchange
            .as_ref()
            .map(|e| e.head.method.clone());
        let decoder = squall_h1::ResponseDecoder::new(
            proxy::response_limits(),
            &method.unwrap_or(http::Method::GET),
        );
        let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
        let index = self.origins.insert(Origin {
            fd: Some(fd),
            generation,
            upstream,
            upstream_generation: self.upstreams.generation,
            server,
            address,
            state: OriginState::Connecting,
            decoder,
            rbuf: bytes::BytesMut::new(),
            out: bytes::BytesMut::new(),
            recv: None,
            send: None,
            ops: 1,
            client: Some(conn_token(client, self.conns[client].generation)),
            reused: false,
            paused: false,
            deadline: self.now + connect_timeout,
            timer_due: None,
        });
        let token = origin_token(index, generation);
        self.ring.connect(raw, address, token);
        self.runtime.metrics.worker(self.id).upstream_connects.inc();
        self.conns[client]
            .exchange
            .as_mut()
            .expect("assigned")
            .origin = Some(token);
        self.arm_origin_timer(index);
    }

    pub(super) fn on_origin_connect(&mut self, token: u64, result: io::Result<()>) {
        let Some(index) = self.origin_index(token) else {
            return;
        };
        self.origins[index].ops -= 1;
        if self.origins[index].state != OriginState::Connecting {
            self.origin_op_done(index);
            return;
        }
        match result {
            Ok(()) => {
                self.origins[index].state = OriginState::Busy;
                let raw = self.origins[index]
                    .raw_fd()
                    .expect("a connecting origin has a socket");
                self.origins[index].recv = Some(self.ring.recv_multi(raw, token));
                self.origins[index].ops += 1;
                self.write_request(index);
            }
            Err(e) => {
                debug!(worker = self.id, address = %self.origins[index].address, "connect: {e}");
                self.origin_failed(index, UpstreamErrorClass::ConnectFailed);
            }
        }
    }

    /// Writes the request head and whatever body is buffered to a ready origin connection.
    fn write_request(&mut self, index: usize) {
        let Some(client) = self.origins[index].client.and_then(|t| self.conn_index(t)) else {
            self.close_origin(index);
            return;
        };
        let response_timeout = self.upstreams.groups[self.origins[index].upstream].response_timeout;
        let conn = &mut self.conns[client];
        let tls = conn.tls.is_some();
        let peer = conn.peer;
        let exchange = conn
            .exchange
            .as_mut()
            .expect("a busy origin serves an exchange");
        let origin = &mut self.origins[index];
        // A new connection's decoder was armed when it was made; a pooled one is re-armed.
        if origin.decoder.is_idle() {
            origin.decoder.expect(&exchange.head.method);
        }
        proxy::encode_request(exchange, peer, tls, &mut origin.out);
        origin.out.extend_from_slice(&exchange.body);
        exchange.body.clear();
        exchange.request_sent = true;
        origin.deadline = self.now + response_timeout;
        self.arm_origin_timer(index);
        self.flush_origin(index);
    }

    /// Moves buffered request body bytes of the client's exchange to its origin.
    pub(super) fn pump_body(&mut self, client: usize) {
        let token = self.conns[client].exchange.as_ref().and_then(|e| e.origin);
        // The generation check matters: a slot freed and reused must not get this body.
        let Some(index) = token.and_then(|t| self.origin_index(t)) else {
            return;
        };
        let Some(exchange) = self.conns[client].exchange.as_mut() else {
            return;
        };
        let origin = &mut self.origins[index];
        if origin.state != OriginState::Busy || exchange.body.is_empty() {
            return;
        }
        origin.out.extend_from_slice(&exchange.body);
        exchange.body.clear();
        self.flush_origin(index);
    }

    fn flush_origin(&mut self, index: usize) {
        let origin = &mut self.origins[index];
        if origin.send.is_some() || origin.out.is_empty() || origin.state == OriginState::Closed {
            return;
        }
        let raw = origin.raw_fd().expect("an open origin has a socket");
        let token = origin_token(index, origin.generation);
        let buf = origin.out.split().freeze();
        origin.send = Some(self.ring.send(raw, buf, token));
        origin.ops += 1;
    }

    pub(super) fn on_origin_send(&mut self, token: u64, result: io::Result<usize>, buf: Bytes) {
        let Some(index) = self.origin_index(token) else {
            return;
        };
        let origin = &mut self.origins[index];
        origin.send = None;
        origin.ops -= 1;
        match result {
            _ if origin.state == OriginState::Closed => {}
            Ok(sent) if sent < buf.len() => {
                let raw = origin.raw_fd().expect("an open origin has a socket");
                origin.send = Some(self.ring.send(raw, buf.slice(sent..), token));
                origin.ops += 1;
            }
            Ok(_) => {
                self.flush_origin(index);
                // The client may have been paused on a full upload buffer.
                if let Some(client) = self.origins[index].client.and_then(|t| self.conn_index(t))
                    && self.conns[client].blocked
                {
                    self.conns[client].blocked = false;
                    self.process(client);
                }
            }
            Err(e) => {
                debug!(worker = self.id, "origin send: {e}");
                let reused = self.origins[index].reused;
                self.origin_failed(index, proxy::early_end_class(reused));
            }
        }
        self.origin_op_done(index);
    }

    pub(super) fn on_origin_recv(
        &mut self,
        token: u64,
        result: io::Result<Option<RecvBuf>>,
        more: bool,
    ) {
        let Some(index) = self.origin_index(token) else {
            if let Ok(Some(buf)) = result {
                self.ring.recycle(buf);
            }
            return;
        };
        if !more {
            self.origins[index].recv = None;
            self.origins[index].ops -= 1;
        }
        match result {
            Ok(Some(buf)) => {
                let origin = &mut self.origins[index];
                origin.rbuf.extend_from_slice(self.ring.recv_bytes(&buf));
                self.ring.recycle(buf);
                if origin.state == OriginState::Idle {
                    // An idle origin has nothing to say: a stray byte desyncs it. Close.
                    self.close_origin(index);
                } else {
                    if !more && !origin.paused && origin.state == OriginState::Busy {
                        let raw = origin.raw_fd().expect("an open origin has a socket");
                        origin.recv = Some(self.ring.recv_multi(raw, token));
                        origin.ops += 1;
                    }
                    self.forward_response(index, false);
                }
            }
            Ok(None) => match self.origins[index].state {
                OriginState::Busy => self.forward_response(index, true),
                _ => self.close_origin(index),
            },
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                let origin = &mut self.origins[index];
                if origin.state != OriginState::Closed && !origin.paused {
                    let raw = origin.raw_fd().expect("an open origin has a socket");
                    origin.recv = Some(self.ring.recv_multi(raw, token));
                    origin.ops += 1;
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::ECANCELED) => {
                // Cancelled to pause; if the client caught up meanwhile, read again.
                let origin = &mut self.origins[index];
                if origin.recv.is_none() && !origin.paused && origin.state == OriginState::Busy {
                    let raw = origin.raw_fd().expect("a busy origin has a socket");
                    origin.recv = Some(self.ring.recv_multi(raw, token));
                    origin.ops += 1;
                }
            }
            Err(e) => {
                debug!(worker = self.id, "origin recv: {e}");
                match self.origins[index].state {
                    OriginState::Busy => {
                        let reused = self.origins[index].reused;
                        self.origin_failed(index, proxy::early_end_class(reused));
                    }
                    _ => self.close_origin(index),
                }
            }
        }
        self.origin_op_done(index);
    }

    /// Decodes what the origin sent and writes it to the client, re-framed.
    fn forward_response(&mut self, index: usize, eof: bool) {
        let Some(client) = self.origins[index].client.and_then(|t| self.conn_index(t)) else {
            self.close_origin(index);
            return;
        };
        loop {
            let origin = &mut self.origins[index];
            let event = if eof && origin.rbuf.is_empty() {
                origin.decoder.eof()
            } else {
                origin.decoder.decode(&mut origin.rbuf)
            };
            match event {
                Ok(Some(ResponseEvent::Interim(_))) => {}
                Ok(Some(ResponseEvent::Head(head))) => self.forward_head(client, &head),
                Ok(Some(ResponseEvent::Data(data))) => self.forward_data(client, &data),
                Ok(Some(ResponseEvent::End { .. })) => {
                    self.finish_exchange(client, index);
                    return;
                }
                Ok(None) if eof => {
                    self.origin_failed(index, UpstreamErrorClass::ClosedBeforeResponse);
                    return;
                }
                Ok(None) => break,
                Err(e) => {
                    debug!(worker = self.id, "origin response: {e}");
                    let class = if e.head_received() || !self.origins[index].reused {
                        UpstreamErrorClass::InvalidResponse
                    } else {
                        UpstreamErrorClass::ClosedBeforeResponse
                    };
                    self.origin_failed(index, class);
                    return;
                }
            }
        }
        let response_timeout = self.upstreams.groups[self.origins[index].upstream].response_timeout;
        self.origins[index].deadline = self.now + response_timeout;
        self.arm_origin_timer(index);
        self.flush(client);
        // A client slow to read: stop reading the origin until it catches up.
        if self.conns[client].unsent_bytes() >= OUT_HIGH_BYTES {
            let origin = &mut self.origins[index];
            if !origin.paused {
                debug!(
                    worker = self.id,
                    conn = client,
                    "client reads slowly: origin paused"
                );
                origin.paused = true;
                // `recv` stays set until the cancelled receive's final completion arrives.
                if let Some(op) = origin.recv {
                    self.ring.cancel(op, origin_token(index, origin.generation));
                }
            }
        }
    }

    fn forward_head(&mut self, client: usize, head: &squall_h1::OriginHead) {
        let conn = &mut self.conns[client];
        let Some(exchange) = conn.exchange.as_mut() else {
            return;
        };
        let headers = proxy::response_headers(&head.headers, &exchange.route);
        let body_len = proxy::client_body_len(head);
        let mut framing = exchange.head.framing();
        framing.keep_alive &= self.drain_deadline.is_none();
        let decided = squall_h1::response_framing(head.status, body_len, framing);
        let response = squall_h1::ResponseHead {
            status: head.status,
            headers: &headers,
            raw_headers: b"",
            body_len,
        };
        let before = conn.out.len();
        squall_h1::encode_response_head(&response, framing, self.date.get(), &mut conn.out);
        exchange.bytes_to_client += conn.out.len() - before;
        exchange.response_started = true;
        exchange.status = head.status;
        exchange.chunked_to_client = decided.body == squall_h1::ResponseBody::Chunked;
        exchange.client_keep_alive = decided.keep_alive;
    }

    fn forward_data(&mut self, client: usize, data: &[u8]) {
        let conn = &mut self.conns[client];
        let Some(exchange) = conn.exchange.as_mut() else {
            return;
        };
        let before = conn.out.len();
        if exchange.chunked_to_client {
            squall_h1::encode_chunk(data, &mut conn.out);
        } else if exchange.head.method != http::Method::HEAD {
            conn.out.extend_from_slice(data);
        }
        exchange.bytes_to_client += conn.out.len() - before;
    }

    /// The response ended: pool the origin, log, and let the client go on.
    fn finish_exchange(&mut self, client: usize, index: usize) {
        let conn = &mut self.conns[client];
        let Some(mut exchange) = conn.exchange.take() else {
            return;
        };
        if exchange.chunked_to_client {
            squall_h1::encode_last_chunk(None, &mut conn.out);
        }
        if !exchange.client_keep_alive || !exchange.request_complete {
            conn.close_after = true;
        }
        let counters = self.runtime.metrics.worker(self.id);
        counters.count_response(exchange.status);
        let bytes = std::mem::take(&mut exchange.bytes_to_client);
        super::log_request(
            &mut self.log,
            conn,
            Some(&exchange.head),
            exchange.status,
            bytes,
            self.now,
            counters,
        );
        let origin = &mut self.origins[index];
        origin.client = None;
        let reusable = origin.decoder.is_idle() && origin.rbuf.is_empty() && !origin.paused;
        let current = origin.upstream_generation == self.upstreams.generation;
        if current {
            let group = &mut self.upstreams.groups[origin.upstream];
            group.group.report(
                origin.server,
                Outcome::from_status(exchange.status.as_u16()),
                self.now,
            );
        }
        if reusable && current && origin.recv.is_some() {
            let group = &mut self.upstreams.groups[origin.upstream];
            let id = ConnId(origin_token(index, origin.generation));
            if group.pool.checkin(origin.server, id, self.now) == Checkin::Keep {
                origin.state = OriginState::Idle;
                origin.reused = false;
            } else {
                self.close_origin(index);
            }
        } else {
            self.close_origin(index);
        }
        self.process(client);
    }

    /// An origin connection failed before or during a response: retry, answer 502/504, or
    /// cut the client connection if the response had started.
    fn origin_failed(&mut self, index: usize, class: UpstreamErrorClass) {
        let client = self.origins[index].client.and_then(|t| self.conn_index(t));
        let reused = self.origins[index].reused;
        let current = self.origins[index].upstream_generation == self.upstreams.generation;
        let (upstream, server) = (self.origins[index].upstream, self.origins[index].server);
        self.origins[index].client = None;
        self.close_origin(index);
        let Some(client) = client else { return };
        let Some(exchange) = self.conns[client].exchange.as_mut() else {
            return;
        };
        exchange.origin = None;
        let failure = AttemptFailure {
            error: class,
            method_idempotent: exchange.replayable(),
            attempts: exchange.attempts,
            request_sent: exchange.request_sent,
            response_started: exchange.response_started,
            connection_reused: reused,
        };
        let decision = self.upstreams.groups[upstream].retry.decide(&failure);
        if current && decision != Retry::SameServer {
            self.upstreams.groups[upstream]
                .group
                .report(server, class.outcome(reused), self.now);
        }
        match decision {
            Retry::SameServer | Retry::OtherServer if !exchange.response_started => {
                if decision == Retry::SameServer {
                    // A stale pooled connection: same server, fresh connection, same attempt.
                    exchange.tried.retain(|s| *s != server);
                    exchange.attempts -= 1;
                }
                exchange.request_sent = false;
                self.assign_origin(client);
            }
            _ => {
                let started = exchange.response_started;
                self.fail_exchange(client, class, started);
            }
        }
    }

    /// Ends the exchange with an error response (or cuts the connection mid-response).
    pub(super) fn fail_exchange(
        &mut self,
        client: usize,
        class: UpstreamErrorClass,
        response_started: bool,
    ) {
        let conn = &mut self.conns[client];
        let Some(exchange) = conn.exchange.take() else {
            return;
        };
        if let Some(token) = exchange.origin
            && let Some(index) = self.origin_index(token)
        {
            self.origins[index].client = None;
            self.close_origin(index);
        }
        let conn = &mut self.conns[client];
        if response_started {
            // The client has part of a response: the only honest end is a cut connection.
            self.close_now(client);
            return;
        }
        let status = StatusCode::from_u16(class.status()).unwrap_or(StatusCode::BAD_GATEWAY);
        let counters = self.runtime.metrics.worker(self.id);
        counters.count_response(status);
        let before = conn.out.len();
        squall_h1::encode_error(status, self.date.get(), &mut conn.out);
        let sent = conn.out.len() - before;
        conn.close_after = true;
        super::log_request(
            &mut self.log,
            conn,
            Some(&exchange.head),
            status,
            sent,
            self.now,
            counters,
        );
        self.flush(client);
    }

    /// The client went away mid-exchange: the origin connection cannot be reused.
    pub(super) fn abort_exchange(&mut self, client: usize) {
        let Some(exchange) = self.conns[client].exchange.take() else {
            return;
        };
        if let Some(token) = exchange.origin
            && let Some(index) = self.origin_index(token)
        {
            let origin = &self.origins[index];
            if origin.upstream_generation == self.upstreams.generation {
                let (upstream, server) = (origin.upstream, origin.server);
                self.upstreams.groups[upstream]
                    .group
                    .report(server, Outcome::Neutral, self.now);
            }
            self.origins[index].client = None;
            self.close_origin(index);
        }
    }

    /// Resumes reading a paused origin once its client has drained.
    pub(super) fn resume_origin(&mut self, client: usize) {
        let Some(token) = self.conns[client].exchange.as_ref().and_then(|e| e.origin) else {
            return;
        };
        let Some(index) = self.origin_index(token) else {
            return;
        };
        let origin = &mut self.origins[index];
        if !origin.paused || origin.state != OriginState::Busy {
            return;
        }
        origin.paused = false;
        if origin.recv.is_none() {
            let raw = origin.raw_fd().expect("a busy origin has a socket");
            origin.recv = Some(self.ring.recv_multi(raw, token));
            origin.ops += 1;
        }
        if !origin.rbuf.is_empty() {
            self.forward_response(index, false);
        }
    }

    pub(super) fn close_origin(&mut self, index: usize) {
        let origin = &mut self.origins[index];
        if origin.state == OriginState::Closed {
            return;
        }
        if origin.state == OriginState::Idle
            && origin.upstream_generation == self.upstreams.generation
        {
            let id = ConnId(origin_token(index, origin.generation));
            self.upstreams.groups[origin.upstream].pool.remove(id);
        }
        origin.state = OriginState::Closed;
        let token = origin_token(index, origin.generation);
        for op in [origin.recv.take(), origin.send].into_iter().flatten() {
            self.ring.cancel(op, token);
        }
        if let Some(fd) = origin.fd.take() {
            self.ring.close(fd, token);
            origin.ops += 1;
        }
        self.origin_op_done(index);
    }

    pub(super) fn on_origin_close(&mut self, token: u64) {
        if let Some(index) = self.origin_index(token) {
            self.origins[index].ops -= 1;
            self.origin_op_done(index);
        }
    }

    /// Frees a closed origin's slot once every operation has reported.
    fn origin_op_done(&mut self, index: usize) {
        let Some(origin) = self.origins.get(index) else {
            return;
        };
        if origin.state == OriginState::Closed && origin.ops == 0 && origin.recv.is_none() {
            self.origins.remove(index);
        }
    }

    fn arm_origin_timer(&mut self, index: usize) {
        let origin = &mut self.origins[index];
        if origin.timer_due.is_none_or(|due| origin.deadline < due) {
            origin.timer_due = Some(origin.deadline);
            self.timers
                .insert(origin_token(index, origin.generation), origin.deadline);
        }
    }

    /// A timer entry for an origin came due.
    pub(super) fn on_origin_timer(&mut self, key: u64, due: Instant) {
        let Some(index) = self.origin_index(key) else {
            return;
        };
        let origin = &mut self.origins[index];
        if origin.timer_due == Some(due) {
            origin.timer_due = None;
        }
        if origin.state != OriginState::Connecting && origin.state != OriginState::Busy {
            return;
        }
        if origin.deadline > self.now {
            if origin.timer_due.is_none() {
                origin.timer_due = Some(origin.deadline);
                self.timers.insert(key, origin.deadline);
            }
            return;
        }
        if origin.paused {
            // Waiting on the client, not the origin: the client's own timers bound this.
            origin.deadline = self.now + self.upstreams.groups[origin.upstream].response_timeout;
            self.arm_origin_timer(index);
            return;
        }
        let class = match origin.state {
            OriginState::Connecting => UpstreamErrorClass::ConnectTimeout,
            _ => UpstreamErrorClass::ResponseTimeout,
        };
        debug!(worker = self.id, address = %origin.address, ?class, "origin timeout");
        self.origin_failed(index, class);
    }

    /// Closes pooled connections that sat idle too long (once per loop turn).
    pub(super) fn expire_pools(&mut self) {
        let now = self.now;
        let mut expired = Vec::new();
        for group in &mut self.upstreams.groups {
            if group.pool.next_expiry().is_some_and(|at| at <= now) {
                expired.extend(group.pool.expire(now));
            }
        }
        for ConnId(token) in expired {
            if let Some(index) = self.origin_index(token) {
                // Already forgotten by the pool: mark busy-less and close.
                self.origins[index].state = OriginState::Busy;
                self.close_origin(index);
            }
        }
    }
}
