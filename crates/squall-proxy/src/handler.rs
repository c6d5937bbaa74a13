//! Route actions compiled for speed: each [`Handler`] keeps its header lines pre-encoded.
//!
//! Why pre-encode: a `respond` route answers the same headers every time, so the per-request work
//! is the status line, Date and Content-Length (written by the codec) plus one copy of these
//! bytes, as nginx's `return` does with its static header buffer.

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use std::sync::Arc;

use squall_config::{Action, HeaderEdits, Route, RouteMatch, Upstream, Vhost};
use squall_h1::{RequestFraming, RequestHead, ResponseHead, encode_response_head};
use squall_router::{Pattern, RouteSpec, VhostSpec};

/// Identifies Squall in responses it generates itself, as nginx's `server: nginx`.
const SERVER_LINE: &[u8] = b"server: squall\r\n";

/// What a matched route does.
#[derive(Debug)]
pub enum Handler {
    /// A fixed response: `respond`, `block` and the default 404.
    Static {
        status: StatusCode,
        raw_headers: Bytes,
        body: Bytes,
    },
    /// A redirect whose Location may name request variables.
    Redirect {
        status: StatusCode,
        location: Vec<LocationPart>,
    },
    /// Forward to an upstream group; the worker runs the exchange.
    Proxy(Arc<ProxyRoute>),
}

/// What a `proxy = "NAME"` route needs at request time.
#[derive(Debug)]
pub struct ProxyRoute {
    /// Index of the group in the config's `[[upstream]]` list.
    pub upstream: usize,
    /// Header edits on the way to the origin and on the way back.
    pub request_headers: HeaderEdits,
    pub response_headers: HeaderEdits,
}

/// A piece of a redirect target: literal text or a variable filled from the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocationPart {
    Literal(String),
    /// `$host`: the request's host, without port.
    Host,
    /// `$request_uri`: path and query as received.
    RequestUri,
    /// `$uri`: the path alone.
    Uri,
    /// `$scheme`: `http` (TLS listeners arrive with the TLS work).
    Scheme,
}

impl Handler {
    /// The default handler when no route matches.
    pub fn not_found() -> Handler {
        static_text(StatusCode::NOT_FOUND, "404 Not Found\n")
    }

    /// Writes the whole response and returns its status.
    pub(crate) fn write(
        &self,
        head: &RequestHead,
        framing: RequestFraming,
        date: &[u8],
        out: &mut BytesMut,
    ) -> StatusCode {
        match self {
            Handler::Static {
                status,
                raw_headers,
                body,
            } => {
                write_response(*status, raw_headers, body, framing, date, out);
                *status
            }
            Handler::Redirect { status, location } => {
                let mut headers = BytesMut::with_capacity(256);
                headers.put_slice(SERVER_LINE);
                headers.put_slice(b"content-type: text/plain\r\nlocation: ");
                for part in location {
                    expand(part, head, &mut headers);
                }
                headers.put_slice(b"\r\n");
                let body = status.canonical_reason().unwrap_or("Redirect");
                write_response(*status, &headers, body.as_bytes(), framing, date, out);
                *status
            }
            // The worker forwards these; answering one here is a routing bug, so say 502.
            Handler::Proxy(_) => {
                let status = StatusCode::BAD_GATEWAY;
                let headers = text_headers(&[]);
                write_response(status, &headers, b"502 Bad Gateway\n", framing, date, out);
                status
            }
        }
    }
}

/// Turns one configured vhost into the router's spec.
pub(crate) fn vhost_spec(vhost: &Vhost, upstreams: &[Upstream]) -> VhostSpec<Handler> {
    VhostSpec {
        hosts: vhost.hosts.clone(),
        routes: vhost
            .routes
            .iter()
            .map(|r| route_spec(r, upstreams))
            .collect(),
    }
}

fn route_spec(route: &Route, upstreams: &[Upstream]) -> RouteSpec<Handler> {
    let pattern = match &route.matcher {
        RouteMatch::Exact(p) => Pattern::Exact(p.clone()),
        RouteMatch::Prefix(p) => Pattern::Prefix(p.clone()),
        RouteMatch::Regex(p) => Pattern::Regex(p.clone()),
        RouteMatch::Template(p) => Pattern::Template(p.clone()),
    };
    RouteSpec {
        pattern,
        methods: route.methods.clone(),
        headers: route.headers.clone(),
        action: handler(route, upstreams),
    }
}

fn handler(route: &Route, upstreams: &[Upstream]) -> Handler {
    let action = &route.action;
    match action {
        Action::Respond {
            status,
            body,
            headers,
        } => Handler::Static {
            status: *status,
            raw_headers: text_headers(headers),
            body: Bytes::copy_from_slice(body.as_bytes()),
        },
        Action::Block { status } => {
            let reason = status.canonical_reason().unwrap_or("Blocked");
            static_text(*status, &format!("{} {reason}\n", status.as_u16()))
        }
        Action::Redirect { status, location } => Handler::Redirect {
            status: *status,
            location: parse_location(location),
        },
        Action::Proxy { upstream } => Handler::Proxy(Arc::new(ProxyRoute {
            // Validation guarantees the name exists; 0 is never reached for a valid config.
            upstream: upstreams
                .iter()
                .position(|u| &u.name == upstream)
                .unwrap_or(0),
            request_headers: route.request_headers.clone(),
            response_headers: route.response_headers.clone(),
        })),
    }
}

fn static_text(status: StatusCode, body: &str) -> Handler {
    Handler::Static {
        status,
        raw_headers: text_headers(&[]),
        body: Bytes::copy_from_slice(body.as_bytes()),
    }
}

/// Encodes the Server line, the configured headers, and a text content-type unless configured.
fn text_headers(headers: &[(HeaderName, HeaderValue)]) -> Bytes {
    let mut out = BytesMut::with_capacity(64);
    out.put_slice(SERVER_LINE);
    let has_type = headers.iter().any(|(n, _)| n == http::header::CONTENT_TYPE);
    if !has_type {
        out.put_slice(b"content-type: text/plain\r\n");
    }
    for (name, value) in headers {
        out.put_slice(name.as_str().as_bytes());
        out.put_slice(b": ");
        out.put_slice(value.as_bytes());
        out.put_slice(b"\r\n");
    }
    out.freeze()
}

fn write_response(
    status: StatusCode,
    raw_headers: &[u8],
    body: &[u8],
    framing: RequestFraming,
    date: &[u8],
    out: &mut BytesMut,
) {
    // Response headers come only from the pre-encoded lines; the map stays empty.
    static NO_HEADERS: std::sync::LazyLock<HeaderMap> = std::sync::LazyLock::new(HeaderMap::new);
    let response = ResponseHead {
        status,
        headers: &NO_HEADERS,
        raw_headers,
        body_len: Some(body.len() as u64),
    };
    if encode_response_head(&response, framing, date, out) {
        out.put_slice(body);
    }
}

/// Splits a redirect target into literals and `$variables`, longest variable name first.
pub(crate) fn parse_location(location: &str) -> Vec<LocationPart> {
    const VARIABLES: [(&str, LocationPart); 4] = [
        ("$request_uri", LocationPart::RequestUri),
        ("$scheme", LocationPart::Scheme),
        ("$host", LocationPart::Host),
        ("$uri", LocationPart::Uri),
    ];
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut rest = location;
    'scan: while let Some(c) = rest.chars().next() {
        if c == '$' {
            for (name, part) in &VARIABLES {
                if let Some(after) = rest.strip_prefix(name) {
                    if !literal.is_empty() {
                        parts.push(LocationPart::Literal(std::mem::take(&mut literal)));
                    }
                    parts.push(part.clone());
                    rest = after;
                    continue 'scan;
                }
            }
        }
        literal.push(c);
        rest = &rest[c.len_utf8()..];
    }
    if !literal.is_empty() {
        parts.push(LocationPart::Literal(literal));
    }
    parts
}

fn expand(part: &LocationPart, head: &RequestHead, out: &mut BytesMut) {
    match part {
        LocationPart::Literal(s) => out.put_slice(s.as_bytes()),
        LocationPart::Host => out.put_slice(head.host().unwrap_or("").as_bytes()),
        LocationPart::RequestUri => {
            let uri = head.uri.path_and_query().map_or("/", |pq| pq.as_str());
            out.put_slice(uri.as_bytes());
        }
        LocationPart::Uri => out.put_slice(head.uri.path().as_bytes()),
        LocationPart::Scheme => out.put_slice(b"http"),
    }
}
