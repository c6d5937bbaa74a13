//! The request and response rewriting of a proxied exchange, as pure functions.
//!
//! Why apart from the state machine: these decide what crosses the proxy (which fields are
//! stripped, which are added, how a response is framed for the client) and are the same for
//! every attempt, retry and protocol; keeping them free of state makes each rule testable on its
//! own and lets the worker share them while it is being moved onto [`crate::Exchange`].

use std::net::{IpAddr, SocketAddr};

use bytes::{BufMut, BytesMut};
use http::StatusCode;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use squall_config::{Part, Template, Var};
use squall_h1::{BodyKind, Fields, OriginHead, RequestHead, ResponseBody};
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
///
/// The fields that pass are copied from the client's head straight into `out`, in the order
/// received and with lowercase names (as an `http` map would have written them); the route's
/// fields and the forwarding ones follow. Nothing is built per field.
pub fn encode_request(head: &RequestHead, route: &ProxyRoute, peer: Peer, out: &mut BytesMut) {
    let host = request_authority(head, route, peer);
    let root = http::uri::PathAndQuery::from_static("/");
    let rewritten = rewritten_target(head, route);
    let target = (rewritten.as_ref())
        .or(head.uri.path_and_query())
        .unwrap_or(&root);
    let no_fields = HeaderMap::new();
    let request = squall_h1::OutboundRequest {
        method: &head.method,
        target,
        host: &host,
        headers: &no_fields,
        raw_headers: &[],
        body: head.body,
        keep_alive: true,
    };
    out.reserve(head.headers.bytes_len() + 160);
    squall_h1::encode_request_start(&request, out);
    put_fields(head, route, peer, &mut H1Head(out));
    out.put_slice(b"\r\n");
}

/// The request head for an HTTP/2 origin (RFC 9113 §8.3.1): the same fields as
/// [`encode_request`] gives an HTTP/1.1 one, with `:method`, `:scheme` (`https` for a TLS
/// origin), `:authority` (the Host [`encode_request`] would send) and `:path` in front and no connection-specific
/// field (Host, Connection and the other hop-by-hop ones, the framing fields); `te: trailers`
/// is kept when the client sent it, the one TE value HTTP/2 allows.
pub fn h2_request(head: &RequestHead, route: &ProxyRoute, peer: Peer, tls: bool) -> OriginFields {
    let mut fields = OriginFields {
        bytes: BytesMut::with_capacity(head.headers.bytes_len() + 192),
        spans: Vec::with_capacity(head.headers.len() + 8),
    };
    let authority = request_authority(head, route, peer);
    let rewritten = rewritten_target(head, route);
    let path = match rewritten.as_ref().or(head.uri.path_and_query()) {
        Some(pq) => pq.as_str(),
        None if head.method == http::Method::OPTIONS && head.uri == "*" => "*",
        None => "/",
    };
    fields.push(b":method", head.method.as_str().as_bytes());
    fields.push(b":scheme", if tls { b"https" } else { b"http" });
    fields.push(b":authority", authority.as_bytes());
    fields.push(b":path", path.as_bytes());
    put_fields(head, route, peer, &mut fields);
    // A length the client declared goes on (RFC 9113 §8.1.1 lets the origin check it).
    if let BodyKind::Length(n) = head.body {
        let mut length = crate::digits::itoa_buf(n);
        fields.push(b"content-length", length.as_bytes());
    }
    fields
}

/// The route's rewrite of `head`'s target (`None` without one: the normalised target goes).
/// A request whose captures cannot be rewritten was refused when it was admitted
/// (`rewrite::origin_target` is asked there first), and its head does not change after.
fn rewritten_target(head: &RequestHead, route: &ProxyRoute) -> Option<http::uri::PathAndQuery> {
    route.rewrite.as_ref()?;
    let target = crate::rewrite::origin_target(head, route.rewrite.as_ref());
    debug_assert!(target.is_ok(), "admission refuses what cannot be rewritten");
    target.ok().flatten()
}

/// The head an HTTP/2 origin's response stands for, as the HTTP/1.1 decoder would have given
/// it: `content_length` and `end_stream` (END_STREAM on the HEADERS) decide the body — none
/// for HEAD, 204 and 304, as the fields say; else a length, or until the stream ends.
pub fn h2_origin_head(
    status: StatusCode,
    headers: Fields,
    content_length: Option<u64>,
    end_stream: bool,
    method: &http::Method,
) -> OriginHead {
    let bodiless = method == http::Method::HEAD
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let body = match (bodiless, end_stream, content_length) {
        (true, _, _) => ResponseBody::Absent,
        (false, true, _) => ResponseBody::Length(0),
        (false, false, Some(n)) => ResponseBody::Length(n),
        (false, false, None) => ResponseBody::Close,
    };
    OriginHead {
        status,
        version: http::Version::HTTP_2,
        reason: bytes::Bytes::new(),
        headers,
        keep_alive: true,
        body,
        transfer_coded: false,
    }
}

/// The Host an origin is asked for (the Host field, or `:authority` for HTTP/2): the one the
/// route's `request_headers` set, as nginx's `proxy_set_header Host`, else the client's. Host
/// is written here and not by [`put_fields`], which leaves it out with the framing fields:
/// both protocols put it at the front, and there is only ever one. A template that expands
/// to nothing (`$host` of a request without one) falls back to the client's, as a Host with
/// no value would name no origin.
fn request_authority(head: &RequestHead, route: &ProxyRoute, peer: Peer) -> HeaderValue {
    let edits = &route.request_headers;
    let set = (edits.set.iter()).find(|(name, _)| name == header::HOST);
    let templated = || {
        let (_, template) = (edits.templates.iter()).find(|(name, _)| name == header::HOST)?;
        expand(template, head, peer).filter(|value| !value.is_empty())
    };
    set.map(|(_, value)| value.clone())
        .or_else(templated)
        .unwrap_or_else(|| client_authority(head))
}

/// The client's Host field (sharing the received head's bytes: no copy), else its target's
/// authority, else `localhost`.
fn client_authority(head: &RequestHead) -> HeaderValue {
    head.headers
        .get(header::HOST)
        .map(|v| head.headers.shared_value(v))
        .or_else(|| {
            head.uri
                .authority()
                .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
        })
        .unwrap_or_else(|| HeaderValue::from_static("localhost"))
}

/// A request head's fields for an HTTP/2 origin, pseudo-fields first: one buffer and the spans
/// of each lowercase name and value in it, ready for HPACK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginFields {
    bytes: BytesMut,
    /// Name start, name length, value start, value length.
    spans: Vec<[u32; 4]>,
}

impl OriginFields {
    /// Every field as (name, value), pseudo-fields first.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        let at = |start: u32, len: u32| &self.bytes[start as usize..(start + len) as usize];
        (self.spans.iter()).map(move |s| (at(s[0], s[1]), at(s[2], s[3])))
    }

    /// The first value of `name` (lowercase).
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.iter()
            .find(|(n, _)| *n == name.as_bytes())
            .map(|(_, v)| v)
    }

    fn push(&mut self, name: &[u8], value: &[u8]) {
        self.push_with(name, |bytes| bytes.put_slice(value));
    }

    /// A field whose value `write` appends to the buffer.
    fn push_with(&mut self, name: &[u8], write: impl FnOnce(&mut BytesMut)) {
        let offset = |bytes: &BytesMut| u32::try_from(bytes.len()).unwrap_or(u32::MAX);
        let name_at = offset(&self.bytes);
        (name.iter()).for_each(|b| self.bytes.put_u8(b.to_ascii_lowercase()));
        let value_at = offset(&self.bytes);
        write(&mut self.bytes);
        let end = offset(&self.bytes);
        self.spans
            .push([name_at, value_at - name_at, value_at, end - value_at]);
    }
}

/// Where the forwarded request's fields are written: an HTTP/1.1 head or an HTTP/2 field list.
trait FieldSink {
    /// One field; the name is lowercased on the way.
    fn field(&mut self, name: &[u8], value: &[u8]);
    /// `name: prior, ours`, or `name: ours` without a prior value.
    fn list<'p>(&mut self, name: &[u8], prior: impl Iterator<Item = &'p [u8]>, ours: &[u8]);
    /// The client reads trailer fields: `TE: trailers` goes on (on HTTP/1.1 named in
    /// Connection, as RFC 9110 §7.6.1 asks of a hop-by-hop field).
    fn trailers_wanted(&mut self);
}

/// An HTTP/1.1 request head being written.
struct H1Head<'a>(&'a mut BytesMut);

impl FieldSink for H1Head<'_> {
    fn field(&mut self, name: &[u8], value: &[u8]) {
        put_field(self.0, name, value);
    }

    fn list<'p>(&mut self, name: &[u8], prior: impl Iterator<Item = &'p [u8]>, ours: &[u8]) {
        let out = &mut *self.0;
        out.put_slice(name);
        out.put_slice(b": ");
        put_list_value(out, prior, ours);
        out.put_slice(b"\r\n");
    }

    fn trailers_wanted(&mut self) {
        self.0.put_slice(b"te: trailers\r\nconnection: te\r\n");
    }
}

impl FieldSink for OriginFields {
    fn field(&mut self, name: &[u8], value: &[u8]) {
        self.push(name, value);
    }

    fn list<'p>(&mut self, name: &[u8], prior: impl Iterator<Item = &'p [u8]>, ours: &[u8]) {
        self.push_with(name, |out| put_list_value(out, prior, ours));
    }

    fn trailers_wanted(&mut self) {
        self.push(b"te", b"trailers");
    }
}

/// The fields that pass from the client's head, then the route's, then the forwarding ones.
fn put_fields(head: &RequestHead, route: &ProxyRoute, peer: Peer, sink: &mut impl FieldSink) {
    let edits = &route.request_headers;
    let templated: Vec<(&HeaderName, HeaderValue)> = edits
        .templates
        .iter()
        .filter_map(|(name, template)| Some((name, expand(template, head, peer)?)))
        .collect();
    let fields = Edited {
        head: &head.headers,
        hop_by_hop: squall_h1::HopByHop::of(&head.headers),
        edits,
        templated: &templated,
    };
    let forwarding = |name: &[u8]| is_forwarding_field(name, peer);
    for (name, value) in head.headers.iter() {
        let name = name.as_bytes();
        if !forwarding(name)
            && !squall_h1::is_framing_field(name)
            && fields.client_line_passes(name)
        {
            sink.field(name, value.as_bytes());
        }
    }
    let added = edits
        .set
        .iter()
        .map(|(n, v)| (n, v))
        .chain(templated.iter().map(|(n, v)| (*n, v)));
    for (name, value) in added {
        let name = name.as_str().as_bytes();
        if !forwarding(name) && !squall_h1::is_framing_field(name) {
            sink.field(name, value.as_bytes());
        }
    }
    forwarding_fields(&fields, peer, sink);
    // TE is hop-by-hop, but `trailers` says the client will read trailer fields, which an
    // origin may then send (RFC 9110 §10.1.4).
    if accepts_trailers(&head.headers) {
        sink.trailers_wanted();
    }
}

/// The request's fields as the route's edits leave them, before the forwarding fields.
struct Edited<'a> {
    head: &'a Fields,
    hop_by_hop: squall_h1::HopByHop<'a>,
    edits: &'a squall_config::HeaderEdits,
    /// The route's templated fields, expanded for this request.
    templated: &'a [(&'a HeaderName, HeaderValue)],
}

impl Edited<'_> {
    /// Whether the client's lines of `name` reach the origin: not hop-by-hop, not Expect (we
    /// answer `100-continue` ourselves and send the body regardless), not removed or replaced
    /// by the route.
    fn client_line_passes(&self, name: &[u8]) -> bool {
        let is = |n: &HeaderName| name.eq_ignore_ascii_case(n.as_str().as_bytes());
        !self.hop_by_hop.contains(name)
            && !is(&header::EXPECT)
            && !self.edits.remove.iter().any(is)
            && !self.edits.set.iter().any(|(n, _)| is(n))
            && !self.templated.iter().any(|(n, _)| is(n))
    }

    /// The values of `name` after the edits, in order.
    fn values<'s>(&'s self, name: &'s HeaderName) -> impl Iterator<Item = &'s [u8]> + 's {
        let set = self.edits.set.iter().filter(move |(n, _)| n == name);
        let templated = self.templated.iter().filter(move |(n, _)| *n == name);
        let route = set
            .map(|(_, v)| v.as_bytes())
            .chain(templated.map(|(_, v)| v.as_bytes()));
        let client = self
            .head
            .get_all(name)
            .map(|v| v.as_bytes())
            .filter(|_| self.client_line_passes(name.as_str().as_bytes()));
        route.chain(client)
    }
}

/// `X-Forwarded-For` and `Forwarded` (when the client's address is known) and `Via`: the
/// fields [`forwarding_fields`] writes as one list with the prior values.
fn is_forwarding_field(name: &[u8], peer: Peer) -> bool {
    let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
    (peer.addr.is_some() && (is(b"x-forwarded-for") || is(b"forwarded"))) || is(b"via")
}

/// `name: value\r\n` with the name lowercased.
fn put_field(out: &mut BytesMut, name: &[u8], value: &[u8]) {
    out.reserve(name.len() + value.len() + 4);
    name.iter().for_each(|b| out.put_u8(b.to_ascii_lowercase()));
    out.put_slice(b": ");
    out.put_slice(value);
    out.put_slice(b"\r\n");
}

/// The request's TE field lists `trailers`: the client reads trailer fields at the end of a
/// chunked response (RFC 9110 §10.1.4). An HTTP/2 client's `te` may only be `trailers`.
pub fn accepts_trailers(headers: &Fields) -> bool {
    let options = headers.get_all(header::TE);
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

/// Writes the forwarding fields, each with the prior values of the field it extends (all of
/// its lines, as one list), so that each is sent once.
fn forwarding_fields(fields: &Edited<'_>, peer: Peer, sink: &mut impl FieldSink) {
    let proto = if peer.tls { "https" } else { "http" };
    if let Some(addr) = peer.addr {
        let prior = fields.values(&X_FORWARDED_FOR);
        let ip = StackText::new(format_args!("{}", addr.ip()));
        sink.list(b"x-forwarded-for", prior, ip.as_bytes());
    }
    if fields.values(&X_FORWARDED_PROTO).next().is_none() {
        sink.field(b"x-forwarded-proto", proto.as_bytes());
    }
    if let Some(addr) = peer.addr {
        let prior = fields.values(&header::FORWARDED);
        // RFC 7239 §6: an IPv6 address is quoted and bracketed.
        let node = match addr.ip() {
            IpAddr::V4(ip) => StackText::new(format_args!("for={ip};proto={proto}")),
            IpAddr::V6(ip) => StackText::new(format_args!("for=\"[{ip}]\";proto={proto}")),
        };
        sink.list(b"forwarded", prior, node.as_bytes());
    }
    let prior = fields.values(&header::VIA);
    sink.list(b"via", prior, b"1.1 squall");
}

/// Text formatted on the stack: an address for a field value, without the allocation
/// `to_string` or `format!` would make for every proxied request (numbers: `digits`). Long enough for
/// a bracketed IPv6 `Forwarded` node with its proto; longer text would be cut (none is made).
struct StackText {
    buf: [u8; 80],
    len: usize,
}

impl StackText {
    fn new(args: std::fmt::Arguments<'_>) -> StackText {
        let mut text = StackText {
            buf: [0; 80],
            len: 0,
        };
        let _ = std::fmt::Write::write_fmt(&mut text, args);
        text
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl std::fmt::Write for StackText {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let room = self.buf.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        room.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// `prior, ours`, or `ours` without a prior value.
fn put_list_value<'p>(out: &mut BytesMut, prior: impl Iterator<Item = &'p [u8]>, ours: &[u8]) {
    for value in prior {
        out.put_slice(value);
        out.put_slice(b", ");
    }
    out.put_slice(ours);
}

/// The response head for the client: hop-by-hop fields stripped and route edits applied. The
/// framing fields and Date are the downstream codec's (from the framing the exchange decided).
///
/// Built in one pass over the origin head's spans: the fields that pass go into the map with
/// values that share the received bytes; nothing is cloned and then removed.
pub fn response_headers(
    origin: &Fields,
    route: &ProxyRoute,
    request: &RequestHead,
    peer: Peer,
) -> HeaderMap {
    let edits = &route.response_headers;
    let hop_by_hop = squall_h1::HopByHop::of(origin);
    let removed = |name: &[u8]| {
        hop_by_hop.contains(name)
            || name.eq_ignore_ascii_case(b"content-length")
            || name.eq_ignore_ascii_case(b"date")
            || (edits.remove.iter()).any(|r| name.eq_ignore_ascii_case(r.as_str().as_bytes()))
    };
    let capacity = origin.len() + edits.set.len() + edits.templates.len();
    let mut headers = HeaderMap::with_capacity(capacity);
    for (name, value) in origin {
        if !removed(name.as_bytes()) {
            headers.append(name.to_header_name(), origin.shared_value(value));
        }
    }
    for (name, value) in &edits.set {
        headers.insert(name.clone(), value.clone());
    }
    set_templates(&mut headers, &edits.templates, request, peer);
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
                    out.put_slice(StackText::new(format_args!("{}", client.ip())).as_bytes());
                }
            }
            Part::Var(Var::RequestId) => out.put_slice(&request_id_hex(peer.request_id)),
            // Lowercase, as nginx's `$host`.
            Part::Var(Var::Host) => {
                let host = head.host().unwrap_or("").bytes();
                host.for_each(|b| out.put_u8(b.to_ascii_lowercase()));
            }
            Part::Var(Var::Scheme) => out.put_slice(if peer.tls { b"https" } else { b"http" }),
            Part::Var(Var::RequestUri) => out.put_slice(head.request_uri()),
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use http::Method;
    use squall_h1::{Event, Limits, RequestDecoder};

    use super::*;

    #[test]
    fn stack_text_holds_the_widest_forwarded_node() {
        let widest: std::net::Ipv6Addr = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe".parse().unwrap();
        let node = format!("for=\"[{widest}]\";proto=https");
        let text = StackText::new(format_args!("for=\"[{widest}]\";proto=https"));
        assert_eq!(text.as_bytes(), node.as_bytes());
    }

    const CONFIG: &str = r#"
[[listen]]
address = "127.0.0.1:8080"

[[vhost]]
hosts = ["*"]

[[vhost.route]]
prefix = "/host-set/"
proxy = "app"
request_headers = { set = { "Host" = "origin.internal" } }

[[vhost.route]]
prefix = "/host-var/"
proxy = "app"
request_headers = { set = { "host" = "$host" } }

[[vhost.route]]
prefix = "/"
proxy = "app"
request_headers = { set = { "x-set" = "ours", "via" = "1.0 front" }, remove = ["x-drop"] }
response_headers = { set = { "x-set" = "ours" }, remove = ["x-drop"] }

[[upstream]]
name = "app"
servers = [{ address = "127.0.0.1:9000" }]
"#;

    fn route_for(raw: &str) -> (RequestHead, Arc<ProxyRoute>) {
        let config = squall_config::parse(CONFIG, "test.toml").expect("test config is valid");
        let service = crate::Service::new(&config).expect("routes compile");
        let mut decoder = RequestDecoder::new(Limits::default());
        let mut buf = BytesMut::from(raw.as_bytes());
        let Ok(Some(Event::Head(head))) = decoder.decode(&mut buf) else {
            panic!("not a request head");
        };
        let route = service.proxy_route(&head).expect("a proxy route").clone();
        (head, route)
    }

    fn encoded(raw: &str, addr: Option<SocketAddr>) -> String {
        let (head, route) = route_for(raw);
        let peer = Peer {
            addr,
            tls: false,
            client: addr,
            request_id: 0,
        };
        let mut out = BytesMut::new();
        encode_request(&head, &route, peer, &mut out);
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn fields_pass_in_order_lowercased_without_hop_by_hop_ones_and_with_the_edits() {
        let raw = "POST /a?b HTTP/1.1\r\nHost: Ex.test\r\nX-One: 1\r\nConnection: keep-alive, X-Hop\r\n\
                   X-Hop: h\r\nKeep-Alive: 5\r\nTE: trailers\r\nUpgrade: h2c\r\nExpect: 100-continue\r\n\
                   X-Drop: d\r\nX-Set: theirs\r\nContent-Length: 2\r\nX-Forwarded-For: 1.1.1.1\r\n\
                   x-one: 2\r\nX-Forwarded-For: 2.2.2.2\r\nVia: 1.1 client\r\n\r\n";
        let got = encoded(raw, Some("192.0.2.7:4000".parse().unwrap()));
        assert_eq!(
            got,
            "POST /a?b HTTP/1.1\r\nHost: Ex.test\r\nContent-Length: 2\r\n\
             x-one: 1\r\nx-one: 2\r\nx-set: ours\r\n\
             x-forwarded-for: 1.1.1.1, 2.2.2.2, 192.0.2.7\r\nx-forwarded-proto: http\r\n\
             forwarded: for=192.0.2.7;proto=http\r\nvia: 1.0 front, 1.1 squall\r\n\
             te: trailers\r\nconnection: te\r\n\r\n"
        );
    }

    #[test]
    fn the_client_response_keeps_the_origin_fields_but_hop_by_hop_framing_and_removed_ones() {
        let (request, route) = route_for("GET / HTTP/1.1\r\nHost: a\r\n\r\n");
        let raw = "HTTP/1.1 200 OK\r\nServer: o\r\nConnection: keep-alive, X-Hop\r\n\
                   X-Hop: h\r\nKeep-Alive: timeout=5\r\nSet-Cookie: a=1\r\nDate: x\r\n\
                   Content-Length: 0\r\nX-Drop: d\r\nX-Set: theirs\r\nset-cookie: b=2\r\n\
                   Proxy-Authenticate: Basic\r\n\r\n";
        let mut decoder = squall_h1::ResponseDecoder::new(Default::default(), &Method::GET);
        let mut buf = BytesMut::from(raw);
        let Ok(Some(squall_h1::ResponseEvent::Head(origin))) = decoder.decode(&mut buf) else {
            panic!("not a response head");
        };
        let peer = Peer {
            addr: None,
            tls: false,
            client: None,
            request_id: 0,
        };
        let headers = response_headers(&origin.headers, &route, &request, peer);
        let got: Vec<_> = (headers.iter())
            .map(|(n, v)| (n.as_str(), v.to_str().unwrap()))
            .collect();
        assert_eq!(
            got,
            [
                ("server", "o"),
                ("set-cookie", "a=1"),
                ("set-cookie", "b=2"),
                ("x-set", "ours"),
            ]
        );
        // The values are the received bytes, not copies.
        let server = headers.get(header::SERVER).unwrap().as_bytes().as_ptr();
        let received = origin
            .headers
            .get(header::SERVER)
            .unwrap()
            .as_bytes()
            .as_ptr();
        assert_eq!(server, received);
    }

    #[test]
    fn without_a_client_address_its_forwarding_fields_pass_as_they_are() {
        let raw = "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 1.1.1.1\r\n\
                   X-Forwarded-Proto: https\r\nForwarded: for=x\r\nConnection: Via, Host\r\n\r\n";
        assert_eq!(
            encoded(raw, None),
            "GET / HTTP/1.1\r\nHost: a\r\nx-forwarded-for: 1.1.1.1\r\n\
             x-forwarded-proto: https\r\nforwarded: for=x\r\nx-set: ours\r\n\
             via: 1.0 front, 1.1 squall\r\n\r\n"
        );
    }

    /// A route's `request_headers` Host replaces the client's (nginx's `proxy_set_header
    /// Host`), once, as the Host field of an HTTP/1.1 origin and the `:authority` of an
    /// HTTP/2 one; a value with `$host` is expanded (lowercase, as nginx's), and falls back to
    /// the client's when it would be empty.
    #[test]
    fn a_route_that_sets_host_names_the_origin_host_in_both_protocols() {
        let cases = [
            ("/host-set/x", "Client.test", "origin.internal"),
            ("/host-var/x", "Client.test", "client.test"),
            ("/other", "Client.test", "Client.test"),
        ];
        for (path, client_host, want) in cases {
            let raw = format!("GET {path} HTTP/1.1\r\nHost: {client_host}\r\nX-A: 1\r\n\r\n");
            let got = encoded(&raw, None);
            let hosts: Vec<&str> = (got.split("\r\n"))
                .filter(|line| line.to_ascii_lowercase().starts_with("host:"))
                .collect();
            assert_eq!(hosts, [format!("Host: {want}")], "{path}: {got}");
            let (head, route) = route_for(&raw);
            let fields = h2_request(&head, &route, no_peer(), false);
            assert_eq!(fields.get(":authority"), Some(want.as_bytes()), "{path}");
            assert_eq!(fields.get("host"), None, "{path}");
        }
        // HTTP/1.0 without Host: `$host` is empty, so the client's (none: localhost) stays.
        let got = encoded("GET /host-var/x HTTP/1.0\r\n\r\n", None);
        assert!(got.contains("\r\nHost: localhost\r\n"), "{got}");
    }

    fn no_peer() -> Peer {
        Peer {
            addr: None,
            tls: false,
            client: None,
            request_id: 0,
        }
    }
}
