//! Forwarding to origins: the worker's side of `proxy = "NAME"` routes.
//!
//! One exchange per client connection at a time: a pipelined request behind a proxied one waits
//! in the client's receive buffer until the response has been forwarded, which keeps responses
//! in order with no reordering buffer. An exchange picks a server from its group
//! (squall-upstream), takes a keep-alive connection from the worker's pool or connects a new
//! one over the ring, writes the request head (hop-by-hop fields stripped, route edits applied,
//! `X-Forwarded-For` added) and streams the request body, then decodes the response
//! (squall-h1's client role) and streams it to the client, re-framed for the client's protocol.
//!
//! Bounds: the origin's response is read only while the client has less than `OUT_HIGH_BYTES`
//! waiting to be sent (otherwise the origin's receive is cancelled and re-armed as the client
//! drains), and a request body is read from the client only while less than that waits for the
//! origin; neither side can make Squall buffer without bound.
//!
//! Not yet: 1xx forwarding (interim responses are dropped), and retries of requests whose body
//! was already sent.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Instant;

use bytes::{BufMut, BytesMut};
use http::StatusCode;
use http::header::{self, HeaderMap, HeaderValue};
use socket2::{Domain, Protocol, Socket, Type};
use squall_h1::{BodyKind, RequestHead, ResponseDecoder, ResponseLimits};
use squall_proxy::ProxyRoute;
use squall_upstream::{ServerId, Upstream, UpstreamErrorClass};
use squall_uring::OpId;

/// What an exchange is waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OriginState {
    /// The TCP connect is in flight.
    Connecting,
    /// Request going out and/or response coming in.
    Busy,
    /// In the pool, read only to notice a close.
    Idle,
    Closed,
}

/// One connection to an origin server.
pub struct Origin {
    pub fd: Option<OwnedFd>,
    pub generation: u32,
    pub upstream: usize,
    /// The worker's upstream generation this connection belongs to (a reload rebuilds pools).
    pub upstream_generation: u64,
    pub server: ServerId,
    pub address: SocketAddr,
    pub state: OriginState,
    pub decoder: ResponseDecoder,
    pub rbuf: BytesMut,
    pub out: BytesMut,
    pub recv: Option<OpId>,
    pub send: Option<OpId>,
    pub ops: u32,
    /// The client this origin works for, while busy.
    pub client: Option<ClientToken>,
    /// Came out of the pool (a close before any response byte is then a stale connection).
    pub reused: bool,
    /// The receive was cancelled because the client is slow to read.
    pub paused: bool,
    /// A health-check probe, not a proxied request (see `probe.rs`).
    pub probe: bool,
    pub deadline: Instant,
    pub timer_due: Option<Instant>,
}

impl Origin {
    pub fn raw_fd(&self) -> Option<RawFd> {
        self.fd.as_ref().map(AsRawFd::as_raw_fd)
    }
}

/// Whom an exchange answers: an HTTP/1.x connection (stream 0), or one stream of an HTTP/2
/// connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Client {
    pub index: usize,
    pub stream: u32,
}

impl Client {
    pub fn h1(index: usize) -> Client {
        Client { index, stream: 0 }
    }
}

/// A [`Client`] as an origin remembers it: with the connection's generation, so that a slot
/// freed and reused is never mistaken for the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientToken {
    pub token: super::token::Token,
    pub stream: u32,
}

/// A request being forwarded, owned by its client connection (HTTP/1.x) or stream (HTTP/2).
pub struct Exchange {
    pub head: RequestHead,
    pub route: Arc<ProxyRoute>,
    pub upstream: usize,
    pub server: Option<ServerId>,
    /// The origin connection token (index and generation), once one is assigned.
    pub origin: Option<super::token::Token>,
    pub tried: Vec<ServerId>,
    pub attempts: u32,
    /// Request body bytes, already framed for the origin, not yet handed to it.
    pub body: BytesMut,
    /// The client's request has ended (its last body byte was framed into `body`).
    pub request_complete: bool,
    /// Some byte of the request reached the origin connection's send.
    pub request_sent: bool,
    /// The response head went to the client: from here an error can only cut the connection.
    pub response_started: bool,
    /// The body goes to the client chunked.
    pub chunked_to_client: bool,
    /// The client connection stays open after this response.
    pub client_keep_alive: bool,
    pub status: StatusCode,
    pub bytes_to_client: usize,
    /// HTTP/2: the response ended with its HEADERS frame (no body follows).
    pub ended_at_head: bool,
    /// HTTP/2: request body bytes received and not yet given back to the client's window
    /// (given back as they move on to the origin, so the window bounds what waits here).
    pub unreleased: usize,
    /// On a cached route: the response may be stored (see `cache.rs`).
    pub fill: Option<Box<super::cache::Fill>>,
    /// On a cached route, for methods that are not safe: the URL to purge if the response succeeds.
    pub invalidate: Option<(std::sync::Arc<crate::cache::Cache>, squall_cache::CacheKey)>,
    /// The client was answered from the cache after all (a revalidation's 304, or a stale
    /// entry for an origin error): the origin's response is read and dropped.
    pub answered: bool,
    /// When the exchange began: the upstream latency, and the start of an HTTP/2 stream's
    /// request for its log line.
    pub started: Instant,
}

impl Exchange {
    pub fn new(head: RequestHead, route: Arc<ProxyRoute>, now: Instant) -> Exchange {
        Exchange {
            upstream: route.upstream,
            head,
            route,
            server: None,
            origin: None,
            tried: Vec::new(),
            attempts: 0,
            body: BytesMut::new(),
            request_complete: false,
            request_sent: false,
            response_started: false,
            chunked_to_client: false,
            client_keep_alive: true,
            status: StatusCode::BAD_GATEWAY,
            bytes_to_client: 0,
            ended_at_head: false,
            unreleased: 0,
            fill: None,
            invalidate: None,
            answered: false,
            started: now,
        }
    }

    /// Safe to send again from the start: idempotent (RFC 9110 §9.2.2) and no body bytes lost.
    pub fn replayable(&self) -> bool {
        self.head.method.is_idempotent()
            && matches!(self.head.body, BodyKind::Empty | BodyKind::Length(0))
    }
}

/// A new nonblocking TCP socket for `address`, with TCP_NODELAY (requests go out whole).
pub fn origin_socket(address: SocketAddr) -> std::io::Result<OwnedFd> {
    let socket = Socket::new(
        Domain::for_address(address),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    socket.set_tcp_nodelay(true)?;
    Ok(socket.into())
}

/// Encodes the request head for the origin: hop-by-hop fields stripped, route edits applied,
/// `X-Forwarded-For` extended with the client's address and `X-Forwarded-Proto` set.
pub fn encode_request(
    exchange: &Exchange,
    peer: Option<SocketAddr>,
    tls: bool,
    out: &mut BytesMut,
) {
    let head = &exchange.head;
    let mut headers: HeaderMap = head.headers.clone();
    squall_h1::strip_hop_by_hop(&mut headers);
    // We answer `Expect: 100-continue` ourselves and send the body regardless.
    headers.remove(header::EXPECT);
    let edits = &exchange.route.request_headers;
    for name in &edits.remove {
        headers.remove(name);
    }
    for (name, value) in &edits.set {
        headers.insert(name.clone(), value.clone());
    }
    let mut raw = BytesMut::with_capacity(96);
    if let Some(peer) = peer {
        let prior = headers.remove("x-forwarded-for");
        raw.put_slice(b"x-forwarded-for: ");
        if let Some(prior) = prior {
            raw.put_slice(prior.as_bytes());
            raw.put_slice(b", ");
        }
        raw.put_slice(peer.ip().to_string().as_bytes());
        raw.put_slice(b"\r\n");
    }
    let proto = if tls { "https" } else { "http" };
    if !headers.contains_key("x-forwarded-proto") {
        raw.put_slice(b"x-forwarded-proto: ");
        raw.put_slice(proto.as_bytes());
        raw.put_slice(b"\r\n");
    }
    // RFC 7239 `Forwarded` and RFC 9110 §7.6.3 `Via`, appended to what earlier proxies said.
    if let Some(peer) = peer {
        let prior = headers.remove(header::FORWARDED);
        raw.put_slice(b"forwarded: ");
        if let Some(prior) = prior {
            raw.put_slice(prior.as_bytes());
            raw.put_slice(b", ");
        }
        match peer.ip() {
            std::net::IpAddr::V4(ip) => raw.put_slice(format!("for={ip}").as_bytes()),
            std::net::IpAddr::V6(ip) => raw.put_slice(format!("for=\"[{ip}]\"").as_bytes()),
        }
        raw.put_slice(b";proto=");
        raw.put_slice(proto.as_bytes());
        raw.put_slice(b"\r\n");
    }
    let prior_via = headers.remove(header::VIA);
    raw.put_slice(b"via: ");
    if let Some(prior) = prior_via {
        raw.put_slice(prior.as_bytes());
        raw.put_slice(b", ");
    }
    raw.put_slice(b"1.1 squall\r\n");
    let host = head
        .headers
        .get(header::HOST)
        .cloned()
        .or_else(|| {
            head.uri
                .authority()
                .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
        })
        .unwrap_or_else(|| HeaderValue::from_static("localhost"));
    let root = http::uri::PathAndQuery::from_static("/");
    let target = head.uri.path_and_query().unwrap_or(&root);
    let body = head.body;
    let request = squall_h1::OutboundRequest {
        method: &head.method,
        target,
        host: &host,
        headers: &headers,
        raw_headers: &raw,
        body,
        keep_alive: true,
    };
    squall_h1::encode_request_head(&request, out);
}

/// The response head for the client: hop-by-hop fields stripped and route edits applied. The
/// framing fields come from the codec, from `body_len`.
pub fn response_headers(origin: &HeaderMap, route: &ProxyRoute) -> HeaderMap {
    let mut headers = origin.clone();
    squall_h1::strip_hop_by_hop(&mut headers);
    headers.remove(header::CONTENT_LENGTH);
    headers.remove(header::DATE);
    for name in &route.response_headers.remove {
        headers.remove(name);
    }
    for (name, value) in &route.response_headers.set {
        headers.insert(name.clone(), value.clone());
    }
    headers
}

/// The length to announce to the client: the origin's, when it framed by length (or, for a
/// bodiless response to HEAD or a 304, the length it stated).
pub fn client_body_len(head: &squall_h1::OriginHead) -> Option<u64> {
    match head.body {
        squall_h1::ResponseBody::Length(n) => Some(n),
        squall_h1::ResponseBody::Absent => head
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok()),
        squall_h1::ResponseBody::Chunked | squall_h1::ResponseBody::Close => None,
    }
}

/// Response decoder limits for origins.
pub fn response_limits() -> ResponseLimits {
    ResponseLimits::default()
}

/// The error class of an origin connection that ended before the response head.
pub fn early_end_class(reused: bool) -> UpstreamErrorClass {
    if reused {
        UpstreamErrorClass::ClosedBeforeResponse
    } else {
        UpstreamErrorClass::InvalidResponse
    }
}

/// One worker's upstream groups, rebuilt on reload (a generation tells old connections apart).
pub struct Upstreams {
    pub groups: Vec<Upstream>,
    pub generation: u64,
}
