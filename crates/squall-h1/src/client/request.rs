//! The request encoder towards origins, and the removal of hop-by-hop fields that a proxy owes
//! both directions (RFC 9110 §7.6.1).
//!
//! The encoder owns the fields that frame the message and route it: it writes `Host` first
//! (RFC 9110 §7.2: a client SHOULD), then `Content-Length` or `Transfer-Encoding: chunked`,
//! then `Connection: close` when asked, and skips those names in the proxy's map, so that a
//! forwarded request can never carry two Hosts or two framings, whatever the client sent. The
//! body itself goes out as is after a Content-Length, or through [`crate::encode_chunk`] and
//! [`crate::encode_last_chunk`] when chunked.

use bytes::{BufMut, BytesMut};
use http::Method;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::uri::PathAndQuery;

use crate::encoder::{put_length_field, put_line};
use crate::fields::{is_token, trim_ows};
use crate::{BodyKind, Fields};

/// A request head to send to an origin, always as HTTP/1.1.
#[derive(Debug, Clone, Copy)]
pub struct OutboundRequest<'a> {
    pub method: &'a Method,
    /// The request-target, sent in origin-form (RFC 9112 §3.2.1); an empty path is sent as
    /// `/`. `*` for `OPTIONS *`. Typed so that it cannot hold SP, CR or LF.
    pub target: &'a PathAndQuery,
    /// The `Host` value: the client's, or the route's rewrite.
    pub host: &'a HeaderValue,
    /// Fields to forward, already filtered by the proxy ([`strip_hop_by_hop`]); any Host,
    /// Content-Length, Transfer-Encoding or Connection among them is skipped.
    pub headers: &'a HeaderMap,
    /// Pre-encoded `name: value\r\n` lines appended verbatim (`X-Forwarded-For`, `Via`, ...).
    pub raw_headers: &'a [u8],
    /// How the body is framed: `Empty` (no field), `Length(n)` (`Content-Length: n`, also for
    /// an explicit 0) or `Chunked` (a body of unknown length, such as a chunked upload being
    /// streamed through). [`crate::RequestHead::body`] passes straight through.
    pub body: BodyKind,
    /// False: send `Connection: close` (the last request allowed on this connection).
    pub keep_alive: bool,
}

/// Writes the request line, Host, framing, Connection, the fields and the blank line.
pub fn encode_request_head(req: &OutboundRequest<'_>, out: &mut BytesMut) {
    encode_request_start(req, out);
    out.put_slice(req.raw_headers);
    out.put_slice(b"\r\n");
}

/// Writes what [`encode_request_head`] writes but `raw_headers` and the blank line, for a
/// proxy that then copies the fields it forwards straight from the client's head
/// ([`crate::Fields`]) and ends the head itself.
pub fn encode_request_start(req: &OutboundRequest<'_>, out: &mut BytesMut) {
    debug_assert!(
        req.raw_headers.is_empty() || req.raw_headers.ends_with(b"\r\n"),
        "raw_headers are whole lines"
    );
    debug_assert!(*req.method != Method::CONNECT, "we tunnel nothing");
    out.reserve(64 + req.target.as_str().len() + req.raw_headers.len() + 32 * req.headers.len());
    out.put_slice(req.method.as_str().as_bytes());
    out.put_u8(b' ');
    let target = req.target.as_str();
    if !target.starts_with('/') && target != "*" {
        // An empty path (`http://h` or `http://h?q`) is sent as "/" (RFC 9112 §3.2.1).
        out.put_u8(b'/');
    }
    out.put_slice(target.as_bytes());
    out.put_slice(b" HTTP/1.1\r\n");
    put_line(out, b"Host", req.host.as_bytes());
    match req.body {
        BodyKind::Empty => {}
        BodyKind::Length(n) => put_length_field(b"Content-Length: ", n, out),
        BodyKind::Chunked => out.put_slice(b"Transfer-Encoding: chunked\r\n"),
    }
    if !req.keep_alive {
        out.put_slice(b"Connection: close\r\n");
    }
    for (name, value) in req.headers {
        if is_owned_by_encoder(name) {
            continue;
        }
        put_line(out, name.as_str().as_bytes(), value.as_bytes());
    }
}

/// Whether the encoder writes a field of this name itself ([`encode_request_start`]), so that
/// a proxy copying fields skips it; `name` in any case.
pub fn is_framing_field(name: &[u8]) -> bool {
    [
        header::HOST,
        header::CONTENT_LENGTH,
        header::TRANSFER_ENCODING,
        header::CONNECTION,
    ]
    .iter()
    .any(|n| name.eq_ignore_ascii_case(n.as_str().as_bytes()))
}

/// The fields the encoder writes itself; standard names compare as enum tags.
fn is_owned_by_encoder(name: &HeaderName) -> bool {
    *name == header::HOST
        || *name == header::CONTENT_LENGTH
        || *name == header::TRANSFER_ENCODING
        || *name == header::CONNECTION
}

/// Fields that concern one connection only, which a proxy must not forward (RFC 9110 §7.6.1),
/// besides those the Connection field names. `Proxy-Connection` is a pre-standard alias of
/// Connection still sent by some clients; the `Proxy-Auth*` pair is addressed to a proxy,
/// which we are not in the credential sense, and must not leak to the next hop (§11.7).
static HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::PROXY_AUTHORIZATION,
    header::PROXY_AUTHENTICATE,
];

/// Fields a Connection option may not remove. RFC 9110 §7.6.1 says to remove every field the
/// Connection field names, but a sender MUST NOT name end-to-end fields; a client that names
/// `Host` would make the route differ from what the origin sees, and one that names the
/// forwarding fields would erase the chain a front proxy vouched for (Apache's CVE-2022-31813).
static NOT_HOP_BY_HOP: [HeaderName; 6] = [
    header::HOST,
    header::FORWARDED,
    header::VIA,
    HeaderName::from_static("x-forwarded-for"),
    HeaderName::from_static("x-forwarded-host"),
    HeaderName::from_static("x-forwarded-proto"),
];

/// The hop-by-hop fields of a request head, the ones [`strip_hop_by_hop`] would remove, for a
/// proxy that copies the others from the head's spans without building a map.
#[derive(Debug, Clone, Copy)]
pub struct HopByHop<'a> {
    fields: &'a Fields,
    /// Some Connection option may name a field (anything but `close` and `keep-alive`);
    /// nearly every request has none, and then only the fixed names are compared.
    names_fields: bool,
}

impl<'a> HopByHop<'a> {
    pub fn of(fields: &'a Fields) -> HopByHop<'a> {
        let names_fields = connection_options(fields).any(|option| {
            !option.eq_ignore_ascii_case(b"close") && !option.eq_ignore_ascii_case(b"keep-alive")
        });
        HopByHop {
            fields,
            names_fields,
        }
    }

    /// Whether a field `name` (any case) is hop-by-hop in this head.
    pub fn contains(&self, name: &[u8]) -> bool {
        let is = |n: &HeaderName| name.eq_ignore_ascii_case(n.as_str().as_bytes());
        if HOP_BY_HOP.iter().any(is) {
            return true;
        }
        self.names_fields
            && !name.eq_ignore_ascii_case(b"close")
            && !NOT_HOP_BY_HOP.iter().any(is)
            && connection_options(self.fields).any(|option| option.eq_ignore_ascii_case(name))
    }
}

/// The token options of a head's Connection lines.
fn connection_options(fields: &Fields) -> impl Iterator<Item = &[u8]> {
    fields
        .get_all(header::CONNECTION)
        .flat_map(|value| value.as_bytes().split(|&b| b == b',').map(trim_ows))
        .filter(|option| is_token(option))
}

/// Removes hop-by-hop fields from a request or response head before it is forwarded: those
/// named by Connection (except the few in `NOT_HOP_BY_HOP`), then Connection, Keep-Alive,
/// Proxy-Connection, TE, Transfer-Encoding, Upgrade, Proxy-Authorization and
/// Proxy-Authenticate (RFC 9110 §7.6.1).
///
/// The proxy calls it before adding its own fields, and re-frames the body itself
/// (`OutboundRequest::body`, `ResponseHead::body_len`).
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // `close` and `keep-alive` are the options nearly every Connection field carries; they
    // name no field that HOP_BY_HOP misses, so the common case allocates nothing.
    let mut named = Vec::new();
    for value in headers.get_all(header::CONNECTION) {
        for option in value.as_bytes().split(|&b| b == b',').map(trim_ows) {
            if !is_token(option)
                || option.eq_ignore_ascii_case(b"close")
                || option.eq_ignore_ascii_case(b"keep-alive")
            {
                continue;
            }
            // A token is always a valid field name; `from_bytes` lower-cases it.
            let Ok(name) = HeaderName::from_bytes(option) else {
                continue;
            };
            if !NOT_HOP_BY_HOP.contains(&name) {
                named.push(name);
            }
        }
    }
    for name in named.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(name);
    }
}
