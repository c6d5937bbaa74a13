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
        /// The same headers as name/value pairs, for codecs that encode their own (HTTP/2).
        fields: Fields,
        /// The fields and the content-length as an HPACK fragment that needs no dynamic table
        /// (`squall_hpack::encode_static`): HTTP/2 sends it as it is with every response.
        hpack: Bytes,
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

/// The methods Squall's routes answer, for `Allow` on `OPTIONS *` and on the 405 a TRACE
/// gets: routes forward other methods too, but these are the ones every route takes.
pub const SERVER_METHODS: &str = "GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS";

/// What a `proxy = "NAME"` route needs at request time.
#[derive(Debug)]
pub struct ProxyRoute {
    /// The route's id: its place among all routes of the config, in file order (what
    /// per-route metrics are kept by).
    pub id: u32,
    /// Index of the group in the config's `[[upstream]]` list.
    pub upstream: usize,
    /// Header edits on the way to the origin and on the way back.
    pub request_headers: HeaderEdits,
    pub response_headers: HeaderEdits,
    /// `cache = true`: responses are stored and served per RFC 9111.
    pub cache: bool,
    /// `cache_ttl`: freshness for responses that state none.
    pub cache_ttl: Option<std::time::Duration>,
    /// `compress`: which responses are compressed, and how hard.
    pub compress: Option<squall_config::Compress>,
    /// `upgrade` and `tunnel_idle_timeout`: the upgrades forwarded, as tunnels (`None`:
    /// `Upgrade` is stripped).
    pub upgrade: Option<squall_config::Upgrade>,
    /// `strip_prefix`, `upstream_prefix` or `rewrite`: the path the origin is sent (`None`:
    /// the normalised one, at no cost).
    pub rewrite: Option<crate::rewrite::Rewrite>,
    /// `response_timeout` and `read_timeout` on the route (`None`: the upstream's).
    pub timeouts: squall_config::ProxyTimeouts,
    /// `body_bytes_max` on the route (`None`: `limits.body_bytes_max`).
    pub body_bytes_max: Option<u64>,
}

/// A piece of a redirect target: literal text or a variable filled from the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocationPart {
    Literal(String),
    /// `$host`: the request's host, without port.
    Host,
    /// `$request_uri`: path and query as received.
    RequestUri,
    /// `$uri`: the normalised path, without the query.
    Uri,
    /// `$scheme`: `http`, or `https` on a TLS listener.
    Scheme,
}

impl Handler {
    /// The default handler when no route matches.
    pub fn not_found() -> Handler {
        static_text(StatusCode::NOT_FOUND, "404 Not Found\n")
    }

    /// The answer to `OPTIONS *` (RFC 9110 §9.3.7): what the server as a whole allows.
    pub fn server_options() -> Handler {
        let allow = HeaderValue::from_static(SERVER_METHODS);
        static_handler(StatusCode::OK, &[(http::header::ALLOW, allow)], "")
    }

    /// Writes the whole HTTP/1.x response and returns its status.
    pub(crate) fn write(
        &self,
        head: &RequestHead,
        scheme: &str,
        framing: RequestFraming,
        date: &[u8],
        out: &mut BytesMut,
    ) -> StatusCode {
        match self {
            Handler::Static {
                status,
                raw_headers,
                body,
                ..
            } => {
                write_response(*status, raw_headers, body, framing, date, out);
                *status
            }
            Handler::Redirect { status, location } => {
                let mut headers = BytesMut::with_capacity(256);
                headers.put_slice(SERVER_LINE);
                headers.put_slice(b"content-type: text/plain\r\nlocation: ");
                expand_location(location, head, scheme, &mut headers);
                headers.put_slice(b"\r\n");
                let body = redirect_body(*status);
                write_response(*status, &headers, body.as_bytes(), framing, date, out);
                *status
            }
            // The worker forwards these; answering one here is a routing bug, so say 502.
            Handler::Proxy(_) => {
                let status = StatusCode::BAD_GATEWAY;
                let headers = text_headers(&[]);
                write_response(status, &headers, BAD_GATEWAY_BODY, framing, date, out);
                status
            }
        }
    }

    /// The response as status, fields and body, for a codec that encodes its own head.
    pub fn reply(&self, head: &RequestHead, scheme: &str) -> Reply {
        match self {
            Handler::Static {
                status,
                fields,
                hpack,
                body,
                ..
            } => Reply {
                status: *status,
                fields: fields.clone(),
                hpack: Some(hpack.clone()),
                body: body.clone(),
            },
            Handler::Redirect { status, location } => {
                let mut target = BytesMut::with_capacity(128);
                expand_location(location, head, scheme, &mut target);
                let mut fields = text_fields(&[]).to_vec();
                fields.push((Bytes::from_static(b"location"), target.freeze()));
                Reply {
                    status: *status,
                    fields: fields.into(),
                    hpack: None,
                    body: Bytes::from_static(redirect_body(*status).as_bytes()),
                }
            }
            Handler::Proxy(_) => Reply {
                status: StatusCode::BAD_GATEWAY,
                fields: text_fields(&[]),
                hpack: None,
                body: Bytes::from_static(BAD_GATEWAY_BODY),
            },
        }
    }
}

const BAD_GATEWAY_BODY: &[u8] = b"502 Bad Gateway\n";

fn redirect_body(status: StatusCode) -> &'static str {
    status.canonical_reason().unwrap_or("Redirect")
}

fn expand_location(
    location: &[LocationPart],
    head: &RequestHead,
    scheme: &str,
    out: &mut BytesMut,
) {
    for part in location {
        expand(part, head, scheme, out);
    }
}

/// A response as status, header fields and body (see [`Handler::reply`]).
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: StatusCode,
    /// Without Date and Content-Length, which the codec adds.
    pub fields: Fields,
    /// For a fixed response: `fields` and the content-length, HPACK-encoded once
    /// (`squall_hpack::encode_static`); an HTTP/2 codec may send these bytes instead.
    pub hpack: Option<Bytes>,
    pub body: Bytes,
}

/// Turns one configured vhost into the router's spec, whose actions are route ids; each
/// route's handler is pushed onto `handlers`, at its id.
pub(crate) fn vhost_spec(
    vhost: &Vhost,
    upstreams: &[Upstream],
    handlers: &mut Vec<Handler>,
) -> VhostSpec<u32> {
    VhostSpec {
        hosts: vhost.hosts.clone(),
        routes: vhost
            .routes
            .iter()
            .map(|r| {
                let id = u32::try_from(handlers.len()).expect("fewer than 2^32 routes");
                handlers.push(handler(r, upstreams, id));
                route_spec(r, id)
            })
            .collect(),
    }
}

/// A route as metrics name it: the vhost's first host and the pattern, e.g. `* prefix:/p/`.
pub(crate) fn route_label(vhost: &Vhost, route: &Route) -> String {
    let host = vhost.hosts.first().map_or("*", String::as_str);
    let pattern = match &route.matcher {
        RouteMatch::Exact(p) => format!("exact:{p}"),
        RouteMatch::Prefix(p) => format!("prefix:{p}"),
        RouteMatch::Regex(p) => format!("regex:{p}"),
        RouteMatch::Template(p) => format!("template:{p}"),
    };
    format!("{host} {pattern}")
}

fn route_spec(route: &Route, id: u32) -> RouteSpec<u32> {
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
        action: id,
    }
}

fn handler(route: &Route, upstreams: &[Upstream], id: u32) -> Handler {
    let action = &route.action;
    match action {
        Action::Respond {
            status,
            body,
            headers,
        } => static_handler(*status, headers, body),
        Action::Block { status } => {
            let reason = status.canonical_reason().unwrap_or("Blocked");
            static_text(*status, &format!("{} {reason}\n", status.as_u16()))
        }
        Action::Redirect { status, location } => Handler::Redirect {
            status: *status,
            location: parse_location(location),
        },
        // The worker serves `root` routes itself (it owns the directory descriptors and the
        // ring that reads the files); this answer is only what a route would say without it.
        Action::Files(_) => Handler::not_found(),
        Action::Proxy { upstream } => Handler::Proxy(Arc::new(ProxyRoute {
            id,
            // Validation guarantees the name exists; 0 is never reached for a valid config.
            upstream: upstreams
                .iter()
                .position(|u| &u.name == upstream)
                .unwrap_or(0),
            request_headers: route.request_headers.clone(),
            response_headers: route.response_headers.clone(),
            cache: route.cache,
            cache_ttl: route.cache_ttl,
            compress: route.compress.clone(),
            upgrade: route.upgrade.clone(),
            rewrite: (route.rewrite.as_ref())
                .map(|r| crate::rewrite::Rewrite::new(r, &route.matcher)),
            timeouts: route.timeouts,
            body_bytes_max: route.body_bytes_max,
        })),
    }
}

fn static_text(status: StatusCode, body: &str) -> Handler {
    static_handler(status, &[], body)
}

/// A fixed response with an error page's body and content type.
pub(crate) fn page_handler(status: StatusCode, page: &crate::Page) -> Handler {
    let content_type = HeaderValue::from_static(page.content_type);
    let headers = [(http::header::CONTENT_TYPE, content_type)];
    static_bytes(status, &headers, page.body.clone())
}

/// A fixed response, its headers encoded for HTTP/1.1 lines and for HPACK once.
fn static_handler(
    status: StatusCode,
    headers: &[(HeaderName, HeaderValue)],
    body: &str,
) -> Handler {
    static_bytes(status, headers, Bytes::copy_from_slice(body.as_bytes()))
}

fn static_bytes(status: StatusCode, headers: &[(HeaderName, HeaderValue)], body: Bytes) -> Handler {
    let fields = text_fields(headers);
    let length = body.len().to_string();
    let mut hpack = BytesMut::new();
    squall_hpack::encode_static(
        fields
            .iter()
            .map(|(n, v)| (&n[..], &v[..]))
            .chain([(&b"content-length"[..], length.as_bytes())]),
        &mut hpack,
    );
    Handler::Static {
        status,
        raw_headers: text_headers(headers),
        fields,
        hpack: hpack.freeze(),
        body,
    }
}

/// Header fields as (lowercase name, value) pairs, shared by every response that uses them.
pub type Fields = Arc<[(Bytes, Bytes)]>;

/// [`text_headers`] as pairs: the Server field, a text content-type unless configured, and the
/// configured headers.
fn text_fields(headers: &[(HeaderName, HeaderValue)]) -> Fields {
    let mut fields = vec![(Bytes::from_static(b"server"), Bytes::from_static(b"squall"))];
    if !headers.iter().any(|(n, _)| n == http::header::CONTENT_TYPE) {
        fields.push((
            Bytes::from_static(b"content-type"),
            Bytes::from_static(b"text/plain"),
        ));
    }
    for (name, value) in headers {
        fields.push((
            Bytes::copy_from_slice(name.as_str().as_bytes()),
            Bytes::copy_from_slice(value.as_bytes()),
        ));
    }
    fields.into()
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

fn expand(part: &LocationPart, head: &RequestHead, scheme: &str, out: &mut BytesMut) {
    match part {
        LocationPart::Literal(s) => out.put_slice(s.as_bytes()),
        LocationPart::Host => out.put_slice(head.host().unwrap_or("").as_bytes()),
        LocationPart::RequestUri => out.put_slice(head.request_uri()),
        LocationPart::Uri => out.put_slice(head.uri.path().as_bytes()),
        LocationPart::Scheme => out.put_slice(scheme.as_bytes()),
    }
}
