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

use super::cache;
use super::proxy::{self, Client, ClientToken, Exchange, Origin, OriginState};
use super::token::{self, Token};
use super::{OUT_HIGH_BYTES, Worker};

/// The hash `consistent_hash` balances a request by.
fn hash_key(
    key: &squall_config::HashKey,
    head: &squall_h1::RequestHead,
    peer: Option<std::net::SocketAddr>,
) -> u64 {
    use squall_config::HashKey;
    let hash = squall_upstream::key_hash;
    match key {
        HashKey::Uri => hash(
            head.uri
                .path_and_query()
                .map_or("/", |pq| pq.as_str())
                .as_bytes(),
        ),
        HashKey::Host => hash(head.host().unwrap_or("").as_bytes()),
        HashKey::ClientIp => match peer.map(|p| p.ip()) {
            Some(std::net::IpAddr::V4(ip)) => hash(&ip.octets()),
            Some(std::net::IpAddr::V6(ip)) => hash(&ip.octets()),
            None => hash(b""),
        },
        HashKey::Header(name) => hash(head.headers.get(name).map_or(&b""[..], |v| v.as_bytes())),
    }
}

/// Which server of which group an origin connection goes to.
#[derive(Clone, Copy, Debug)]
pub(super) struct OriginTarget {
    pub upstream: usize,
    pub server: squall_upstream::ServerId,
    pub address: std::net::SocketAddr,
}

/// The exchange of `client` in the connection slab (a free function, so that the origins can
/// be borrowed beside it).
fn exchange_in(conns: &mut slab::Slab<super::conn::Conn>, client: Client) -> Option<&mut Exchange> {
    let conn = conns.get_mut(client.index)?;
    if client.stream == 0 {
        conn.exchange.as_deref_mut()
    } else {
        conn.h2
            .as_mut()?
            .exchanges
            .get_mut(&client.stream)
            .map(|e| &mut **e)
    }
}

impl Worker {
    pub(super) fn origin_index(&self, token: Token) -> Option<usize> {
        debug_assert_eq!(token.kind(), token::Kind::Origin);
        let index = token.index();
        let origin = self.origins.get(index)?;
        token.names(origin.generation).then_some(index)
    }

    /// The client an origin connection works for, if it is still there.
    pub(super) fn origin_client(&self, index: usize) -> Option<Client> {
        let client = self.origins[index].client?;
        let conn = self.conn_index(client.token)?;
        Some(Client {
            index: conn,
            stream: client.stream,
        })
    }

    pub(super) fn client_token(&self, client: Client) -> ClientToken {
        ClientToken {
            token: Token::client(client.index, self.conns[client.index].generation),
            stream: client.stream,
        }
    }

    /// The exchange of `client`: the connection's, or its HTTP/2 stream's.
    pub(super) fn exchange_mut(&mut self, client: Client) -> Option<&mut Exchange> {
        exchange_in(&mut self.conns, client)
    }

    fn take_exchange(&mut self, client: Client) -> Option<Box<Exchange>> {
        let conn = &mut self.conns[client.index];
        if client.stream == 0 {
            conn.exchange.take()
        } else {
            conn.h2.as_mut()?.exchanges.remove(&client.stream)
        }
    }

    /// Gives the client's current exchange an origin connection: pooled, or a new connect.
    pub(super) fn assign_origin(&mut self, client: Client) {
        let now = self.now;
        let peer = self.conns[client.index].peer;
        let (upstream, key, tried) = match exchange_in(&mut self.conns, client) {
            Some(e) => {
                let key = (self.runtime.hash_keys)
                    .get(e.upstream)
                    .map(|k| hash_key(k, &e.head, peer));
                (e.upstream, key, e.tried.clone())
            }
            None => return,
        };
        let picked = self
            .upstreams
            .groups
            .get_mut(upstream)
            .and_then(|u| u.group.pick(key, now, &tried));
        let Some(server) = picked else {
            self.fail_exchange(client, UpstreamErrorClass::ConnectFailed, false);
            return;
        };
        if let Some(e) = self.exchange_mut(client) {
            e.server = Some(server);
            e.attempts += 1;
            e.tried.push(server);
        }
        let client_token = self.client_token(client);
        // A pooled connection is ready to use (LIFO: the one most likely still open).
        while let Some(ConnId(raw)) = self.upstreams.groups[upstream].pool.checkout(server, now) {
            let token = Token::from_raw(raw);
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
            if let Some(e) = self.exchange_mut(client) {
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
        client: Client,
        upstream: usize,
        server: squall_upstream::ServerId,
        address: std::net::SocketAddr,
        fd: std::os::fd::OwnedFd,
    ) {
        let method = self.exchange_mut(client).map(|e| e.head.method.clone());
        let client_token = self.client_token(client);
        let method = method.unwrap_or(http::Method::GET);
        let target = OriginTarget {
            upstream,
            server,
            address,
        };
        let token = self.open_origin(fd, target, &method, Some(client_token));
        self.runtime.metrics.worker(self.id).upstream_connects.inc();
        if let Some(e) = self.exchange_mut(client) {
            e.origin = Some(token);
        }
    }

    /// Puts a new origin connection in the slab and starts its connect, with the group's
    /// connect timeout: for an exchange (`client`) or, with `client` `None`, a health probe.
    /// Returns its token.
    pub(super) fn open_origin(
        &mut self,
        fd: std::os::fd::OwnedFd,
        target: OriginTarget,
        method: &http::Method,
        client: Option<ClientToken>,
    ) -> Token {
        self.next_generation = token::next_generation(self.next_generation);
        let generation = self.next_generation;
        let connect_timeout = self.upstreams.groups[target.upstream].connect_timeout;
        let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
        let index = self.origins.insert(Origin {
            fd: Some(fd),
            generation,
            upstream: target.upstream,
            upstream_generation: self.upstreams.generation,
            server: target.server,
            address: target.address,
            state: OriginState::Connecting,
            decoder: squall_h1::ResponseDecoder::new(proxy::response_limits(), method),
            rbuf: bytes::BytesMut::new(),
            out: bytes::BytesMut::new(),
            recv: None,
            send: None,
            ops: 1,
            client,
            reused: false,
            paused: false,
            probe: client.is_none(),
            deadline: self.now + connect_timeout,
            timer_due: None,
        });
        let token = Token::origin(index, generation);
        self.ring.connect(raw, target.address, token.raw());
        self.arm_origin_timer(index);
        token
    }

    pub(super) fn on_origin_connect(&mut self, token: Token, result: io::Result<()>) {
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
                self.origins[index].recv = Some(self.ring.recv_multi(raw, token.raw()));
                self.origins[index].ops += 1;
                if self.origins[index].probe {
                    self.write_probe(index);
                } else {
                    self.write_request(index);
                }
            }
            Err(e) => {
                debug!(worker = self.id, address = %self.origins[index].address, "connect: {e}");
                self.origin_failed(index, UpstreamErrorClass::ConnectFailed);
            }
        }
    }

    /// Writes the request head and whatever body is buffered to a ready origin connection.
    fn write_request(&mut self, index: usize) {
        let Some(client) = self.origin_client(index) else {
            self.close_origin(index);
            return;
        };
        let response_timeout = self.upstreams.groups[self.origins[index].upstream].response_timeout;
        let conn = &self.conns[client.index];
        let (tls, peer) = (conn.tls.is_some(), conn.peer);
        let Some(exchange) = exchange_in(&mut self.conns, client) else {
            self.close_origin(index);
            return;
        };
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
        self.release_body(client);
        self.arm_origin_timer(index);
        self.flush_origin(index);
    }

    /// Moves buffered request body bytes of the client's exchange to its origin.
    pub(super) fn pump_body(&mut self, client: Client) {
        let token = self.exchange_mut(client).and_then(|e| e.origin);
        // The generation check matters: a slot freed and reused must not get this body.
        let Some(index) = token.and_then(|t| self.origin_index(t)) else {
            return;
        };
        let Some(exchange) = exchange_in(&mut self.conns, client) else {
            return;
        };
        if exchange.body.is_empty() {
            return;
        }
        let origin = &mut self.origins[index];
        if origin.state != OriginState::Busy {
            return;
        }
        origin.out.extend_from_slice(&exchange.body);
        exchange.body.clear();
        self.release_body(client);
        self.flush_origin(index);
    }

    /// HTTP/2: gives the window of request body bytes that moved on to the origin back to the
    /// client, so it may send more.
    fn release_body(&mut self, client: Client) {
        if client.stream == 0 {
            return;
        }
        let Some(exchange) = self.exchange_mut(client) else {
            return;
        };
        let released = std::mem::take(&mut exchange.unreleased);
        if released > 0
            && let Some(h2) = self.conns[client.index].h2.as_mut()
        {
            h2.conn.release_capacity(client.stream, released);
        }
    }

    pub(super) fn flush_origin(&mut self, index: usize) {
        let origin = &mut self.origins[index];
        if origin.send.is_some() || origin.out.is_empty() || origin.state == OriginState::Closed {
            return;
        }
        let raw = origin.raw_fd().expect("an open origin has a socket");
        let token = Token::origin(index, origin.generation);
        let buf = origin.out.split().freeze();
        origin.send = Some(self.ring.send(raw, buf, token.raw()));
        origin.ops += 1;
    }

    pub(super) fn on_origin_send(&mut self, token: Token, result: io::Result<usize>, buf: Bytes) {
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
                origin.send = Some(self.ring.send(raw, buf.slice(sent..), token.raw()));
                origin.ops += 1;
            }
            Ok(_) => {
                self.flush_origin(index);
                // The client may have been paused on a full upload buffer.
                if let Some(client) = self.origin_client(index)
                    && client.stream == 0
                    && self.conns[client.index].blocked
                {
                    self.conns[client.index].blocked = false;
                    self.schedule(client.index);
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
        token: Token,
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
                        origin.recv = Some(self.ring.recv_multi(raw, token.raw()));
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
                    origin.recv = Some(self.ring.recv_multi(raw, token.raw()));
                    origin.ops += 1;
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::ECANCELED) => {
                // Cancelled to pause; if the client caught up meanwhile, read again.
                let origin = &mut self.origins[index];
                if origin.recv.is_none() && !origin.paused && origin.state == OriginState::Busy {
                    let raw = origin.raw_fd().expect("a busy origin has a socket");
                    origin.recv = Some(self.ring.recv_multi(raw, token.raw()));
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
        if self.origins[index].probe {
            self.read_probe(index, eof);
            return;
        }
        let Some(client) = self.origin_client(index) else {
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
                Ok(Some(ResponseEvent::Data(data))) => self.forward_data(client, data),
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
        let waiting = if client.stream == 0 {
            self.flush(client.index);
            self.conns[client.index].unsent_bytes()
        } else {
            self.pump_h2(client.index);
            self.conns[client.index]
                .h2
                .as_ref()
                .map_or(0, |h2| h2.conn.queued_data(client.stream))
        };
        // A client slow to read: stop reading the origin until it catches up.
        if waiting >= OUT_HIGH_BYTES && self.origins[index].state == OriginState::Busy {
            let origin = &mut self.origins[index];
            if !origin.paused {
                debug!(
                    worker = self.id,
                    conn = client.index,
                    stream = client.stream,
                    "client reads slowly: origin paused"
                );
                origin.paused = true;
                // `recv` stays set until the cancelled receive's final completion arrives.
                if let Some(op) = origin.recv {
                    self.ring
                        .cancel(op, Token::origin(index, origin.generation).raw());
                }
            }
        }
    }

    fn forward_head(&mut self, client: Client, head: &squall_h1::OriginHead) {
        let may_keep_alive = self.drain_deadline.is_none();
        let date = self.date.get();
        let Some(exchange) = exchange_in(&mut self.conns, client) else {
            return;
        };
        let mut headers = proxy::response_headers(&head.headers, &exchange.route);
        let body_len = proxy::client_body_len(head);
        exchange.response_started = true;
        exchange.status = head.status;
        if let Some(fill) = exchange.fill.as_mut() {
            let action = cache::on_head(
                fill,
                &exchange.head.method,
                &exchange.head.headers,
                head.status,
                &head.headers,
                &mut headers,
                body_len,
            );
            if let cache::HeadAction::Answered(entry, label) = action {
                exchange.answered = true;
                exchange.ended_at_head = true;
                let request = cache::client_request(&exchange.head, fill);
                let cache = fill.cache.clone();
                let route = exchange.route.id;
                self.serve_entry(client, &request, &entry, label, &cache, route);
                return;
            }
        }
        let conn = &mut self.conns[client.index];
        if client.stream != 0 {
            let Some(h2) = conn.h2.as_mut() else { return };
            let Some(exchange) = h2.exchanges.get_mut(&client.stream) else {
                return;
            };
            let no_body = exchange.head.method == http::Method::HEAD
                || matches!(head.body, squall_h1::ResponseBody::Absent)
                || matches!(head.body, squall_h1::ResponseBody::Length(0));
            exchange.ended_at_head = no_body;
            let length = body_len.map(|n| n.to_string());
            let fields = headers
                .iter()
                .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
                .chain([(&b"date"[..], date)])
                .chain(
                    length
                        .as_deref()
                        .map(|l| (&b"content-length"[..], l.as_bytes())),
                );
            let _ = h2
                .conn
                .send_headers(client.stream, head.status.as_u16(), fields, no_body);
            return;
        }
        let Some(exchange) = conn.exchange.as_mut() else {
            return;
        };
        let mut framing = exchange.head.framing();
        framing.keep_alive &= may_keep_alive;
        let decided = squall_h1::response_framing(head.status, body_len, framing);
        let response = squall_h1::ResponseHead {
            status: head.status,
            headers: &headers,
            raw_headers: b"",
            body_len,
        };
        let before = conn.out.len();
        squall_h1::encode_response_head(&response, framing, date, &mut conn.out);
        exchange.bytes_to_client += conn.out.len() - before;
        exchange.chunked_to_client = decided.body == squall_h1::ResponseBody::Chunked;
        exchange.client_keep_alive = decided.keep_alive;
    }

    fn forward_data(&mut self, client: Client, data: Bytes) {
        let Some(exchange) = self.exchange_mut(client) else {
            return;
        };
        if exchange.answered {
            return;
        }
        if let Some(fill) = exchange.fill.as_mut() {
            cache::on_data(fill, &data);
        }
        let conn = &mut self.conns[client.index];
        if client.stream != 0 {
            let Some(h2) = conn.h2.as_mut() else { return };
            let Some(exchange) = h2.exchanges.get_mut(&client.stream) else {
                return;
            };
            if exchange.ended_at_head {
                return;
            }
            exchange.bytes_to_client += data.len();
            let _ = h2.conn.send_data(client.stream, data, false);
            return;
        }
        let Some(exchange) = conn.exchange.as_mut() else {
            return;
        };
        if exchange.chunked_to_client {
            let before = conn.out.len();
            squall_h1::encode_chunk(&data, &mut conn.out);
            exchange.bytes_to_client += conn.out.len() - before;
        } else if exchange.head.method != http::Method::HEAD {
            exchange.bytes_to_client += data.len();
            let copy = conn.tls.is_some();
            conn.chain.push(&mut conn.out, data, copy);
        }
    }

    /// The response ended: pool the origin, log, and let the client go on.
    fn finish_exchange(&mut self, client: Client, index: usize) {
        let Some(mut exchange) = self.take_exchange(client) else {
            return;
        };
        let filled = exchange.fill.is_some();
        self.settle_cache(&mut exchange);
        let conn = &mut self.conns[client.index];
        if exchange.answered {
            // Answered (and logged) from the cache already; the origin's body was dropped.
        } else if client.stream != 0 {
            if !exchange.ended_at_head
                && let Some(h2) = conn.h2.as_mut()
            {
                let _ = h2.conn.send_data(client.stream, Bytes::new(), true);
            }
            if !exchange.request_complete
                && let Some(h2) = conn.h2.as_mut()
            {
                // The response is whole; the rest of the request is not needed (RFC 9113 §8.1).
                h2.conn
                    .reset_stream(client.stream, squall_h2::ErrorCode::NoError);
            }
        } else {
            if exchange.chunked_to_client {
                squall_h1::encode_last_chunk(None, &mut conn.out);
            }
            if !exchange.client_keep_alive || !exchange.request_complete {
                conn.close_after = true;
            }
        }
        let counters = self.runtime.metrics.worker(self.id);
        counters
            .upstream_duration
            .observe(self.now.saturating_duration_since(exchange.started));
        if client.stream != 0 {
            // Streams interleave: the connection's request clock is the last stream's.
            conn.request_started = exchange.started;
        }
        if !exchange.answered {
            conn.log_note.route = Some(exchange.route.id);
            conn.log_note.upstream = Some(self.now.saturating_duration_since(exchange.started));
            if filled {
                conn.log_note.cache = Some(cache::Label::Miss.as_str());
            }
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
        }
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
            let id = ConnId(Token::origin(index, origin.generation).raw());
            if group.pool.checkin(origin.server, id, self.now) == Checkin::Keep {
                origin.state = OriginState::Idle;
                origin.reused = false;
            } else {
                self.close_origin(index);
            }
        } else {
            self.close_origin(index);
        }
        self.resume_client(client);
    }

    /// Stores a completed response, and purges the URL after a method that is not safe succeeds.
    fn settle_cache(&mut self, exchange: &mut Exchange) {
        if let Some(fill) = exchange.fill.as_mut()
            && !exchange.answered
            && cache::on_end(fill, &exchange.head.headers)
        {
            self.runtime.metrics.worker(self.id).cache_stores.inc();
        }
        if let Some((cache, key)) = exchange.invalidate.take()
            && squall_cache::invalidates(&exchange.head.method, exchange.status)
        {
            cache.store.purge(&key);
        }
        // Dropping the fill ends its leadership and wakes the requests parked behind it.
        exchange.fill = None;
    }

    /// An origin connection failed before or during a response: retry, answer 502/504, or
    /// cut the client connection if the response had started.
    fn origin_failed(&mut self, index: usize, class: UpstreamErrorClass) {
        if self.origins[index].probe {
            debug!(worker = self.id, address = %self.origins[index].address, ?class, "probe");
            self.end_probe(index, false);
            return;
        }
        let client = self.origin_client(index);
        let reused = self.origins[index].reused;
        let current = self.origins[index].upstream_generation == self.upstreams.generation;
        let (upstream, server) = (self.origins[index].upstream, self.origins[index].server);
        self.origins[index].client = None;
        self.close_origin(index);
        let Some(client) = client else { return };
        let Some(exchange) = self.exchange_mut(client) else {
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
            Retry::SameServer | Retry::OtherServer if !failure.response_started => {
                let Some(exchange) = self.exchange_mut(client) else {
                    return;
                };
                if decision == Retry::SameServer {
                    // A stale pooled connection: same server, fresh connection, same attempt.
                    exchange.tried.retain(|s| *s != server);
                    exchange.attempts -= 1;
                }
                exchange.request_sent = false;
                self.assign_origin(client);
            }
            _ => self.fail_exchange(client, class, failure.response_started),
        }
    }

    /// Ends the exchange with an error response (or cuts the response off mid-way: the whole
    /// HTTP/1.x connection, or the one HTTP/2 stream).
    pub(super) fn fail_exchange(
        &mut self,
        client: Client,
        class: UpstreamErrorClass,
        response_started: bool,
    ) {
        let Some(exchange) = self.take_exchange(client) else {
            return;
        };
        if let Some(token) = exchange.origin
            && let Some(index) = self.origin_index(token)
        {
            self.origins[index].client = None;
            self.close_origin(index);
        }
        // stale-if-error: a stored entry may answer instead of the error.
        if !response_started
            && let Some(fill) = exchange.fill.as_ref()
            && let Some(stale) = cache::stale_for_error(fill, &exchange.head.headers)
        {
            let cache = fill.cache.clone();
            let request = cache::client_request(&exchange.head, fill);
            self.runtime.metrics.worker(self.id).cache_stale.inc();
            self.serve_entry(
                client,
                &request,
                &stale,
                cache::Label::Stale,
                &cache,
                exchange.route.id,
            );
            self.resume_client(client);
            return;
        }
        let status = StatusCode::from_u16(class.status()).unwrap_or(StatusCode::BAD_GATEWAY);
        if client.stream != 0 {
            if response_started {
                if let Some(h2) = self.conns[client.index].h2.as_mut() {
                    h2.conn
                        .reset_stream(client.stream, squall_h2::ErrorCode::InternalError);
                }
            } else {
                self.answer_h2_error(client.index, client.stream, status, Some(&exchange.head));
            }
            self.pump_h2(client.index);
            return;
        }
        if response_started {
            // The client has part of a response: the only honest end is a cut connection.
            self.close_now(client.index);
            return;
        }
        if exchange.request_complete {
            // The request was read whole: the connection may go on (as nginx keeps it), so an
            // origin outage does not turn into a storm of reconnects and TLS handshakes.
            self.answer_status(client, &exchange.head, status);
            self.schedule(client.index);
            return;
        }
        let conn = &mut self.conns[client.index];
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
        self.flush(client.index);
    }

    /// The client (or its HTTP/2 stream) went away mid-exchange: the origin connection cannot
    /// be reused.
    pub(super) fn abort_exchange(&mut self, client: Client) {
        let Some(exchange) = self.take_exchange(client) else {
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
    pub(super) fn resume_origin(&mut self, client: Client) {
        let Some(token) = self.exchange_mut(client).and_then(|e| e.origin) else {
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
            origin.recv = Some(self.ring.recv_multi(raw, token.raw()));
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
            let id = ConnId(Token::origin(index, origin.generation).raw());
            self.upstreams.groups[origin.upstream].pool.remove(id);
        }
        origin.state = OriginState::Closed;
        let token = Token::origin(index, origin.generation);
        for op in [origin.recv.take(), origin.send].into_iter().flatten() {
            self.ring.cancel(op, token.raw());
        }
        if let Some(fd) = origin.fd.take() {
            self.ring.close(fd, token.raw());
            origin.ops += 1;
        }
        self.origin_op_done(index);
    }

    pub(super) fn on_origin_close(&mut self, token: Token) {
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

    pub(super) fn arm_origin_timer(&mut self, index: usize) {
        let origin = &mut self.origins[index];
        if origin.timer_due.is_none_or(|due| origin.deadline < due) {
            origin.timer_due = Some(origin.deadline);
            self.timers.insert(
                Token::origin(index, origin.generation).raw(),
                origin.deadline,
            );
        }
    }

    /// A timer entry for an origin came due.
    pub(super) fn on_origin_timer(&mut self, token: Token, due: Instant) {
        let Some(index) = self.origin_index(token) else {
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
                self.timers.insert(token.raw(), origin.deadline);
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
        for ConnId(raw) in expired {
            if let Some(index) = self.origin_index(Token::from_raw(raw)) {
                // Already forgotten by the pool: mark busy-less and close.
                self.origins[index].state = OriginState::Busy;
                self.close_origin(index);
            }
        }
    }
}
