//! The pair harness for the exchange: a scripted client and scripted origins around one
//! [`Exchange`], on a virtual clock.
//!
//! Why a harness: the exchange is sans-IO, so the whole life of a proxied request (picks,
//! connects, retries, timeouts, backpressure) runs here in microseconds and deterministically.
//! The harness is the driver: it runs every action the exchange queues, the way the worker
//! will (a pick from a scripted group, a connection from a scripted pool or a scripted
//! connect, writes recorded byte for byte), and calls `check_invariants` after every step.
//! Inputs are fed whole and split at every byte boundary ([`splits`]); what the client saw is
//! kept with adjacent data pieces merged, so that every split must give the same record.
//!
//! The exchange is held as the driver holds it, a [`CachedExchange`]: on a plain route its
//! actions pass through; `cache.rs` adds a real store and in-flight table (a [`cache::World`])
//! and records what the cache decides.
#![allow(dead_code)]

pub mod cache;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::BytesMut;
use squall_cache::InFlight;
use squall_config::HeaderEdits;
use squall_h1::{Event, Limits, RequestDecoder, RequestHead, ResponseLimits};
use squall_proxy::{
    Action, CachedAction, CachedExchange, ClientInfo, ClientProtocol, Exchange, ExchangeConfig,
    FillHook, OriginMessage, ProxyRoute, ToClient,
};
use squall_upstream::{Outcome, RetryPolicy, ServerId, UpstreamErrorClass};

pub const HIGH: usize = 1024;
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
/// Longer than the head's wait, so that a test tells which of the two ran.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
pub const PEER: &str = "192.0.2.7:5555";

/// What a server does when connected to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Accept,
    Refuse,
    /// The connect never completes.
    Hang,
    /// The balancer no longer gives it out (down, or no servers left).
    Down,
}

/// One origin connection the exchange asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conn {
    pub server: u32,
    pub reused: bool,
    /// Every byte the exchange wrote to it.
    pub written: Vec<u8>,
    /// `Some(reusable)` once released.
    pub released: Option<bool>,
}

pub struct Pair {
    pub ex: CachedExchange,
    pub now: Instant,
    /// The wall clock the cache reads, moved on with `now`.
    pub wall: SystemTime,
    pub servers: Vec<Server>,
    /// Idle pooled connections, by server.
    pub pool: Vec<u32>,
    pub conns: Vec<Conn>,
    current: Option<usize>,
    /// What the client was told, data pieces merged.
    pub client: Vec<String>,
    pub fills: Vec<String>,
    pub reports: Vec<(u32, Outcome, Option<UpstreamErrorClass>)>,
    /// Pause and resume actions, in order ("pause", "resume").
    pub flow: Vec<&'static str>,
    pub body_consumed: usize,
    /// Writes to the origin are acknowledged only by [`Pair::ack_sends`].
    pub hold_sends: bool,
    unacked: usize,
    /// The origins speak HTTP/2: connections become streams (`on_origin_stream`) and what
    /// the exchange sends is recorded as lines in `written`.
    pub h2: bool,
    /// Window given back to HTTP/2 origins (`OriginBodyConsumed`).
    pub origin_consumed: usize,
    /// What the cache decided, in order: `serve LABEL STATUS BODY [failed]`, `publish`
    /// (`pass` when it marks the key), `stored`, `invalidated N`.
    pub cache: Vec<String>,
    /// The in-flight table tickets are published to, and the waiters that woke.
    pub inflight: Option<Arc<InFlight<u32>>>,
    pub woken: Vec<u32>,
}

/// A request head as the client codec would decode it.
pub fn head(raw: &str) -> RequestHead {
    let mut decoder = RequestDecoder::new(Limits::default());
    let mut buf = BytesMut::from(raw.as_bytes());
    match decoder.decode(&mut buf) {
        Ok(Some(Event::Head(head))) => head,
        other => panic!("not a request head: {other:?}"),
    }
}

pub fn route(cache: bool) -> Arc<ProxyRoute> {
    Arc::new(ProxyRoute {
        id: 3,
        upstream: 0,
        request_headers: HeaderEdits::default(),
        response_headers: HeaderEdits::default(),
        cache,
        cache_ttl: None,
        compress: None,
        upgrade: None,
        rewrite: None,
        timeouts: Default::default(),
        body_bytes_max: None,
    })
}

pub fn config(servers: usize) -> ExchangeConfig {
    ExchangeConfig {
        retry: RetryPolicy::new(3, servers, false),
        connect_timeout: CONNECT_TIMEOUT,
        response_timeout: RESPONSE_TIMEOUT,
        read_timeout: READ_TIMEOUT,
        body_bytes_max: u64::MAX,
        high_water_bytes: HIGH,
        response_limits: ResponseLimits::default(),
    }
}

pub fn client(protocol: ClientProtocol) -> ClientInfo {
    ClientInfo {
        peer: Some(PEER.parse::<SocketAddr>().expect("a literal address")),
        client: Some(PEER.parse::<SocketAddr>().expect("a literal address")),
        request_id: 0x0123_4567_89ab_cdef_0000_0000_0000_002a,
        tls: false,
        protocol,
        keep_alive: true,
    }
}

impl Pair {
    /// An exchange for `raw` (an HTTP/1.x head) from an HTTP/1.1 client, servers as given.
    pub fn new(raw: &str, servers: &[Server]) -> Pair {
        Pair::with(head(raw), ClientProtocol::Http11, false, servers)
    }

    pub fn with(
        head: RequestHead,
        protocol: ClientProtocol,
        cache: bool,
        servers: &[Server],
    ) -> Pair {
        let now = Instant::now();
        let ex = Exchange::new(
            head,
            route(cache),
            client(protocol),
            config(servers.len()),
            now,
        );
        Pair::around(
            CachedExchange::new(ex, None, None),
            now,
            SystemTime::now(),
            servers,
        )
    }

    /// A pair around `ex`, made at `now` and `wall`.
    pub fn around(ex: CachedExchange, now: Instant, wall: SystemTime, servers: &[Server]) -> Pair {
        Pair {
            ex,
            now,
            wall,
            servers: servers.to_vec(),
            pool: Vec::new(),
            conns: Vec::new(),
            current: None,
            client: Vec::new(),
            fills: Vec::new(),
            reports: Vec::new(),
            flow: Vec::new(),
            body_consumed: 0,
            hold_sends: false,
            unacked: 0,
            h2: false,
            origin_consumed: 0,
            cache: Vec::new(),
            inflight: None,
            woken: Vec::new(),
        }
    }

    /// Runs every queued action, checking the invariants after each.
    pub fn run(&mut self) {
        self.ex.check_invariants();
        while let Some(action) = self.ex.poll_action(self.now, self.wall) {
            match action {
                CachedAction::Run(action) => self.perform(action),
                action => self.cache_action(action),
            }
            self.ex.check_invariants();
        }
    }

    fn cache_action(&mut self, action: CachedAction) {
        let line = match action {
            CachedAction::Run(_) => unreachable!("performed"),
            CachedAction::Serve {
                entry,
                served,
                request: _,
                origin_failed,
            } => {
                let failed = if origin_failed { " failed" } else { "" };
                let body = String::from_utf8_lossy(&entry.body);
                let status = entry.status.as_u16();
                format!("serve {} {status} {body}{failed}", served.as_str())
            }
            CachedAction::Publish { ticket, pass_for } => {
                let inflight = self.inflight.as_ref().expect("a leader has its table");
                let woken = match pass_for {
                    Some(hold) => inflight.finish_passing(ticket, self.wall, hold),
                    None => inflight.finish(ticket),
                };
                self.woken.extend(woken);
                if pass_for.is_some() {
                    "publish pass"
                } else {
                    "publish"
                }
                .to_owned()
            }
            CachedAction::Stored => "stored".to_owned(),
            CachedAction::Invalidated(n) => format!("invalidated {n}"),
        };
        self.cache.push(line);
    }

    fn perform(&mut self, action: Action) {
        match action {
            Action::Pick => {
                let tried = self.ex.tried().to_vec();
                let picked = (0..self.servers.len() as u32)
                    .map(ServerId::new)
                    .find(|s| !tried.contains(s) && self.servers[s.index()] != Server::Down);
                self.ex.on_pick(picked, self.now);
            }
            Action::Connect { server, pooled } => self.connect(server, pooled),
            Action::WriteOrigin(bytes) => {
                let index = self.current.expect("writes go to a held connection");
                self.conns[index].written.extend_from_slice(&bytes);
                self.unacked += bytes.len();
                if !self.hold_sends {
                    self.ack_sends();
                }
            }
            Action::SendOrigin(message) => {
                let index = self.current.expect("messages go to a held stream");
                let line = origin_line(&message);
                if let OriginMessage::Data { data, .. } = &message {
                    self.unacked += data.len();
                }
                self.conns[index].written.extend_from_slice(line.as_bytes());
                if !self.hold_sends {
                    self.ack_sends();
                }
            }
            Action::OriginBodyConsumed(n) => self.origin_consumed += n,
            Action::PauseOrigin => self.flow.push("pause"),
            Action::ResumeOrigin => self.flow.push("resume"),
            Action::ShutdownOrigin => self.flow.push("shutdown"),
            Action::ReleaseOrigin { reusable } => {
                let index = self.current.take().expect("a release follows a connect");
                let conn = &mut self.conns[index];
                assert_eq!(conn.released, None, "released twice");
                conn.released = Some(reusable);
                if reusable {
                    self.pool.push(conn.server);
                }
                self.unacked = 0;
            }
            Action::Report {
                server,
                outcome,
                error,
                elapsed,
            } => {
                assert_eq!(
                    elapsed,
                    self.now.saturating_duration_since(self.ex.started())
                );
                self.reports.push((server.index() as u32, outcome, error));
            }
            Action::ClientBodyConsumed(n) => self.body_consumed += n,
            Action::Client(message) => self.tell(message),
            Action::Fill(hook) => self.fills.push(fill_line(&hook)),
        }
    }

    fn connect(&mut self, server: ServerId, pooled: bool) {
        assert!(self.current.is_none(), "one connection at a time");
        let id = server.index() as u32;
        let reused = pooled && self.pool.contains(&id);
        if reused {
            let at = self
                .pool
                .iter()
                .position(|s| *s == id)
                .expect("checked above");
            self.pool.remove(at);
        }
        self.conns.push(Conn {
            server: id,
            reused,
            written: Vec::new(),
            released: None,
        });
        self.current = Some(self.conns.len() - 1);
        match (reused, self.servers[server.index()]) {
            (true, _) | (false, Server::Accept) if self.h2 => {
                self.ex.on_origin_stream(reused, false, self.now);
            }
            (true, _) | (false, Server::Accept) => self.ex.on_origin_connected(reused, self.now),
            (false, Server::Refuse) => {
                self.ex
                    .on_connect_failed(UpstreamErrorClass::ConnectFailed, self.now);
            }
            (false, Server::Hang | Server::Down) => {}
        }
    }

    fn tell(&mut self, message: ToClient) {
        if let ToClient::Data(data) = &message {
            assert!(!data.is_empty(), "data pieces are never empty");
            if let Some(last) = self.client.last_mut()
                && let Some(text) = last.strip_prefix("data ")
            {
                *last = format!("data {text}{}", String::from_utf8_lossy(data));
                return;
            }
        }
        self.client.push(client_line(&message));
    }

    /// Acknowledges every write to the origin as sent, and runs the actions that follow.
    pub fn ack_sends(&mut self) {
        let n = std::mem::take(&mut self.unacked);
        if n > 0 {
            self.ex.on_origin_sent(n, self.now);
            self.run();
        }
    }

    /// The origin sends `pieces`, one read each, with the actions run after each.
    pub fn origin_sends(&mut self, pieces: &[&[u8]]) {
        for piece in pieces {
            self.ex.on_origin_data(piece, self.now);
            self.run();
        }
    }

    /// The HTTP/2 origin's stream delivers `event`, with the actions run after it.
    pub fn origin_event(&mut self, event: squall_h1::ResponseEvent) {
        self.ex.on_origin_response(event, self.now);
        self.run();
    }

    /// The HTTP/2 origin reset the stream (`refused`: it did not process the request).
    pub fn origin_reset(&mut self, refused: bool) {
        self.ex.on_origin_reset(refused, self.now);
        self.run();
    }

    pub fn origin_eof(&mut self) {
        self.ex.on_origin_eof(self.now);
        self.run();
    }

    pub fn client_sends(&mut self, pieces: &[&[u8]]) {
        for piece in pieces {
            self.ex.on_client_body(piece);
            self.run();
        }
    }

    pub fn client_room(&mut self, room: usize) {
        self.ex.on_client_room(room, self.now);
        self.run();
    }

    /// Moves the virtual clock on by `by` and fires the timer if it is due.
    pub fn advance(&mut self, by: Duration) {
        self.now += by;
        self.wall += by;
        if self.ex.next_deadline().is_some_and(|d| d <= self.now) {
            self.ex.on_timer(self.now);
        }
        self.run();
    }

    /// What the current (or last) connection was sent, as text.
    pub fn written(&self, conn: usize) -> String {
        String::from_utf8_lossy(&self.conns[conn].written).into_owned()
    }
}

fn client_line(message: &ToClient) -> String {
    match message {
        ToClient::Continue => "continue".to_owned(),
        ToClient::Interim { status, headers } => {
            let mut fields: Vec<String> = headers
                .iter()
                .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap_or("?")))
                .collect();
            fields.sort();
            format!("interim {} {fields:?}", status.as_u16())
        }
        ToClient::Head(head) => {
            let mut fields: Vec<String> = head
                .headers
                .iter()
                .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap_or("?")))
                .collect();
            fields.sort();
            format!(
                "head {} len={:?} {:?} keep_alive={} [{}]",
                head.status.as_u16(),
                head.body_len,
                head.framing,
                head.keep_alive,
                fields.join(", ")
            )
        }
        ToClient::Data(data) => format!("data {}", String::from_utf8_lossy(data)),
        ToClient::End {
            trailers,
            request_unfinished,
        } => {
            let trailers: Vec<String> = trailers
                .iter()
                .flatten()
                .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap_or("?")))
                .collect();
            format!(
                "end [{}] unfinished={request_unfinished}",
                trailers.join(", ")
            )
        }
        ToClient::Error {
            status,
            request_unfinished,
        } => {
            format!("error {} unfinished={request_unfinished}", status.as_u16())
        }
        ToClient::Abort => "abort".to_owned(),
    }
}

/// One message to an HTTP/2 origin as a line: `head` with its fields, `data` with its text,
/// `trailers`; ` end` when it ends the stream.
fn origin_line(message: &OriginMessage) -> String {
    match message {
        OriginMessage::Head { fields, end_stream } => {
            let fields: Vec<String> = (fields.iter())
                .map(|(n, v)| {
                    format!(
                        "{}: {}",
                        String::from_utf8_lossy(n),
                        String::from_utf8_lossy(v)
                    )
                })
                .collect();
            let end = if *end_stream { " end" } else { "" };
            format!("head [{}]{end}\n", fields.join(", "))
        }
        OriginMessage::Data { data, end_stream } => {
            let end = if *end_stream { " end" } else { "" };
            format!("data {}{end}\n", String::from_utf8_lossy(data))
        }
        OriginMessage::Trailers(fields) => {
            let fields: Vec<String> = (fields.iter())
                .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap_or("?")))
                .collect();
            format!("trailers [{}] end\n", fields.join(", "))
        }
    }
}

fn fill_line(hook: &FillHook) -> String {
    match hook {
        FillHook::Head {
            status, body_len, ..
        } => format!("head {} {body_len:?}", status.as_u16()),
        FillHook::Data(data) => format!("data {}", data.len()),
        FillHook::End { .. } => "end".to_owned(),
    }
}

/// Every way to cut `input` for the tests: whole, in two at every byte boundary, and in
/// pieces of 1, 2, 3 and 7 bytes.
pub fn splits(input: &[u8]) -> Vec<Vec<&[u8]>> {
    let mut all = vec![vec![input]];
    for at in 1..input.len() {
        all.push(vec![&input[..at], &input[at..]]);
    }
    for size in [1, 2, 3, 7] {
        all.push(input.chunks(size).collect());
    }
    all
}
