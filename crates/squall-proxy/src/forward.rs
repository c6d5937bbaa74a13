//! The request and response rewriting of a proxied exchange, as pure functions.
//!
//! Why apart from the state machine: these decide what crosses the proxy (which fields are
//! stripped, which are added, how a response is framed for the client) and are the same for
//! every attempt, retry and protocol; keeping them free of state makes each rule testable on its
//! own and lets the worker share them while it is being moved onto [`crate::Exchange`].

use std::net::{IpAddr, SocketAddr};

use bytes::{BufMut, BytesMut};
use http::header::{self, HeaderMap, HeaderValue};
use squall_config::{Part, Template, Var};
use squall_h1::{BodyKind, OriginHead, RequestHead, ResponseBody};
use squall_upstream::UpstreamErrorClass;

use crate::ProxyRoute;

/// Who the request came from, as the forwarding fields describe it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// The client's address; `None` for a client whose address is unknown (a Unix socket).
    pub addr: Option<SocketAddr>,
    /// The client connection is TLS (`X-Forwarded-Proto: https`).
    pub tls: bool,
    /// The client as Squall sees it (PROXY protocol and `real_ip` applied): `$remote_addr`.
    pub client: Option<SocketAddr>,
    /// The request's id: `$request_id`.
    pub request_id: u128,
}

/// Encodes the request head for the origin: hop-by-hop fields stripped (RFC 9110 §7.6.1),
/// route edits applied, `X-Forwarded-For` extended with the client's address, and
/// `X-Forwarded-Proto`, `Forwarded` (RFC 7239) and `Via` (RFC 9110 §7.6.3) added.
pub fn encode_request(head: &RequestHead, route: &ProxyRoute, peer: Peer, out: &mut BytesMut) {
    let mut headers: HeaderMap = head.headers.clone();
    squall_h1::strip_hop_by_hop(&mut headers);
    // We answer `Expect: 100-continue` ourselves and send the body regardless.
    headers.remove(header::EXPECT);
    let edits = &route.request_headers;
    for name in &edits.remove {
        headers.remove(name);
    }
    for (name, value) in &edits.set {
        headers.insert(name.clone(), value.clone());
    }
    set_templates(&mut headers, &edits.templates, head, peer);
    let mut raw = BytesMut::with_capacity(96);
    forwarding_fields(&mut headers, peer, &mut raw);
    // TE is hop-by-hop, but `trailers` says the client will read trailer fields, which an
    // origin may then send (RFC 9110 §10.1.4); TE is named in Connection as that section asks.
    if accepts_trailers(&head.headers) {
        raw.put_slice(b"te: trailers\r\nconnection: te\r\n");
    }
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
    let request = squall_h1::OutboundRequest {
        method: &head.method,
        target,
        host: &host,
        headers: &headers,
        raw_headers: &raw,
        body: head.body,
        keep_alive: true,
    };
    squall_h1::encode_request_head(&request, out);
}

/// The request's TE field lists `trailers`: the client reads trailer fields at the end of a
/// chunked response (RFC 9110 §10.1.4). An HTTP/2 client's `te` may only be `trailers`.
pub fn accepts_trailers(headers: &HeaderMap) -> bool {
    let options = headers.get_all(header::TE).into_iter();
    options
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .map(|option| option.split(|&b| b == b';').next().unwrap_or_default())
        .any(|name| name.trim_ascii().eq_ignore_ascii_case(b"trailers"))
}

/// Fields that may not travel as trailers, besides the hop-by-hop ones: framing and routing
/// (RFC 9110 §6.5.1), and what says how to read the content or may not change after the head.
static NOT_TRAILERS: [header::HeaderName; 16] = [
    header::CONTENT_LENGTH,
    header::TRANSFER_ENCODING,
    header::HOST,
    header::TRAILER,
    header::CONTENT_ENCODING,
    header::CONTENT_TYPE,
    header::CONTENT_RANGE,
    header::CACHE_CONTROL,
    header::EXPECT,
    header::MAX_FORWARDS,
    header::RANGE,
    header::AUTHORIZATION,
    header::WWW_AUTHENTICATE,
    header::SET_COOKIE,
    header::COOKIE,
    header::LOCATION,
];

/// The trailer fields that cross the proxy, either way: hop-by-hop fields and those in
/// `NOT_TRAILERS` removed. `None` when nothing is left.
pub fn forwardable_trailers(fields: &HeaderMap) -> Option<HeaderMap> {
    let mut fields = fields.clone();
    squall_h1::strip_hop_by_hop(&mut fields);
    for name in &NOT_TRAILERS {
        fields.remove(name);
    }
    (!fields.is_empty()).then_some(fields)
}

/// Appends the forwarding lines to `raw`, taking the prior values of the fields they extend
/// out of `headers` so that each is sent once, as one list.
fn forwarding_fields(headers: &mut HeaderMap, peer: Peer, raw: &mut BytesMut) {
    let proto = if peer.tls { "https" } else { "http" };
    if let Some(addr) = peer.addr {
        let prior = headers.remove("x-forwarded-for");
        put_list(
            raw,
            b"x-forwarded-for",
            prior,
            addr.ip().to_string().as_bytes(),
        );
    }
    if !headers.contains_key("x-forwarded-proto") {
        raw.put_slice(b"x-forwarded-proto: ");
        raw.put_slice(proto.as_bytes());
        raw.put_slice(b"\r\n");
    }
    if let Some(addr) = peer.addr {
        let prior = headers.remove(header::FORWARDED);
        // RFC 7239 §6: an IPv6 address is quoted and bracketed.
        let node = match addr.ip() {
            IpAddr::V4(ip) => format!("for={ip};proto={proto}"),
            IpAddr::V6(ip) => format!("for=\"[{ip}]\";proto={proto}"),
        };
        put_list(raw, b"forwarded", prior, node.as_bytes());
    }
    let prior = headers.remove(header::VIA);
    put_list(raw, b"via", prior, b"1.1 squall");
}

/// `name: prior, ours\r\n`, or `name: ours\r\n` without a prior value.
fn put_list(raw: &mut BytesMut, name: &[u8], prior: Option<HeaderValue>, ours: &[u8]) {
    raw.put_slice(name);
    raw.put_slice(b": ");
    if let Some(prior) = prior {
        raw.put_slice(prior.as_bytes());
        raw.put_slice(b", ");
    }
    raw.put_slice(ours);
    raw.put_slice(b"\r\n");
}

/// The response head for the client: hop-by-hop fields stripped and route edits applied. The
/// framing fields and Date are the downstream codec's (from the framing the exchange decided).
pub fn response_headers(
    origin: &HeaderMap,
    route: &ProxyRoute,
    request: &RequestHead,
    peer: Peer,
) -> HeaderMap {
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
    set_templates(
        &mut headers,
        &route.response_headers.templates,
        request,
        peer,
    );
    headers
}

/// Sets each templated field to its value for this request.
fn set_templates(
    headers: &mut HeaderMap,
    templates: &[(header::HeaderName, Template)],
    head: &RequestHead,
    peer: Peer,
) {
    for (name, template) in templates {
        if let Some(value) = expand(template, head, peer) {
            headers.insert(name.clone(), value);
        }
    }
}

/// A template's value for `head` from `peer`: `None` only if it would not be a valid field
/// value (every variable is made of valid bytes, so never in practice).
pub fn expand(template: &Template, head: &RequestHead, peer: Peer) -> Option<HeaderValue> {
    let mut out = BytesMut::with_capacity(64);
    for part in &template.0 {
        match part {
            Part::Literal(text) => out.put_slice(text.as_bytes()),
            Part::Var(Var::RemoteAddr) => {
                if let Some(client) = peer.client {
                    out.put_slice(client.ip().to_string().as_bytes());
                }
            }
            Part::Var(Var::RequestId) => out.put_slice(&request_id_hex(peer.request_id)),
            // Lowercase, as nginx's `$host`.
            Part::Var(Var::Host) => {
                let host = head.host().unwrap_or("").bytes();
                host.for_each(|b| out.put_u8(b.to_ascii_lowercase()));
            }
            Part::Var(Var::Scheme) => out.put_slice(if peer.tls { b"https" } else { b"http" }),
            Part::Var(Var::RequestUri) => {
                let uri = head.uri.path_and_query().map_or("/", |pq| pq.as_str());
                out.put_slice(uri.as_bytes());
            }
        }
    }
    HeaderValue::from_maybe_shared(out.freeze()).ok()
}

/// A request id as Squall writes it: 32 lowercase hex digits.
pub fn request_id_hex(id: u128) -> [u8; 32] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        let shift = 4 * (31 - i);
        *byte = DIGITS[((id >> shift) & 0xf) as usize];
    }
    out
}

/// The length to announce to the client: the origin's, when it framed by length (or, for a
/// bodiless response to HEAD or a 304, the length it stated, RFC 9110 §8.6).
pub fn client_body_len(head: &OriginHead) -> Option<u64> {
    match head.body {
        ResponseBody::Length(n) => Some(n),
        ResponseBody::Absent => head
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok()),
        ResponseBody::Chunked | ResponseBody::Close => None,
    }
}

/// The error class of an origin connection that ended (or failed) before the response head:
/// on a pooled connection it is the keep-alive race (RFC 9112 §9.3.1), on a fresh one the
/// origin misbehaved.
pub fn early_end_class(reused: bool) -> UpstreamErrorClass {
    if reused {
        UpstreamErrorClass::ClosedBeforeResponse
    } else {
        UpstreamErrorClass::InvalidResponse
    }
}

/// Safe to send again from the start: idempotent (RFC 9110 §9.2.2) and no body bytes that
/// would have to be kept for a replay.
pub fn replayable(head: &RequestHead) -> bool {
    head.method.is_idempotent() && matches!(head.body, BodyKind::Empty | BodyKind::Length(0))
}

/// The hash `consistent_hash` balances a request by.
pub fn balance_key(
    key: &squall_config::HashKey,
    head: &RequestHead,
    peer: Option<SocketAddr>,
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
            Some(IpAddr::V4(ip)) => hash(&ip.octets()),
            Some(IpAddr::V6(ip)) => hash(&ip.octets()),
            None => hash(b""),
        },
        HashKey::Header(name) => hash(head.headers.get(name).map_or(&b""[..], |v| v.as_bytes())),
    }
}
