//! The request head: parsing a complete head with httparse, then applying the rules of
//! RFC 9112 that decide framing, persistence and which requests we refuse.
//!
//! The head arrives here already cut from the receive buffer as one `Bytes`, so the URI and
//! every field are slices of that single allocation: the fields are kept as offsets into it
//! ([`Fields`]), with nothing allocated per field, and the Host field's host is found once,
//! here.

use std::mem::MaybeUninit;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Method, Uri, Version};

use crate::field_list::Fields;
use crate::fields::{self, ConnectionOptions, TransferCodings};
use crate::{ErrorKind, Limits};

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    pub method: Method,
    /// The request-target, normalised (`crate::target`): origin-form (`/path?q`), or `*` for
    /// OPTIONS. An absolute-form target (`http://host/path`) arrives here in origin-form, its
    /// authority in the Host field (RFC 9112 §3.2.2). Authority-form only comes with CONNECT,
    /// which is refused. Routing, access rules, files, the cache and the origin all read this.
    pub uri: Uri,
    /// The path and query as the client sent them (nginx's `$request_uri`), when they differ
    /// from `uri`'s: the target was normalised, or was in absolute-form.
    /// Boxed: it is rare, and the head moves by value through the decoder's results.
    pub received_target: Option<Box<Bytes>>,
    /// `HTTP_10` or `HTTP_11`.
    pub version: Version,
    /// Every field line, in order, with repeated names kept apart: spans into the received
    /// head, looked up as a `HeaderMap` is.
    pub headers: Fields,
    /// Whether the connection may carry another request after this one (RFC 9112 §9.3).
    pub keep_alive: bool,
    /// The client waits for `100 Continue` before sending the body (RFC 9110 §10.1.1); only
    /// set for HTTP/1.1 requests that have a body.
    pub expect_continue: bool,
    pub body: BodyKind,
}

/// How the request body is framed (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// Neither Content-Length nor Transfer-Encoding: no body.
    Empty,
    /// `Content-Length: n`. `Length(0)` is kept apart from `Empty` so that a proxy can forward
    /// the explicit zero (some origins want a length on every POST).
    Length(u64),
    /// `Transfer-Encoding: chunked`; the length is known at the end.
    Chunked,
}

/// What the response encoder needs to know about the request it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestFraming {
    pub version: Version,
    pub keep_alive: bool,
    /// A response to HEAD has no body (RFC 9110 §9.3.2).
    pub is_head: bool,
}

impl RequestHead {
    /// The host the request is for, without port: the authority of an absolute-form target
    /// when there is one (RFC 9112 §3.2.2: it overrides Host), else the Host field. An IPv6
    /// literal keeps its brackets (`[::1]`). None when neither names a host.
    ///
    /// The case is as received; hosts compare case-insensitively (RFC 3986 §3.2.2). The Host
    /// field's host was found during the parse and is not parsed again.
    pub fn host(&self) -> Option<&str> {
        if let Some(host) = self.uri.host() {
            return Some(host);
        }
        self.headers.host()
    }

    /// The path and query as the client sent them (`$request_uri`), `*` for OPTIONS `*`.
    pub fn request_uri(&self) -> &[u8] {
        match &self.received_target {
            Some(received) => &received[..],
            None => self
                .uri
                .path_and_query()
                .map_or(b"*", |pq| pq.as_str().as_bytes()),
        }
    }

    pub fn framing(&self) -> RequestFraming {
        RequestFraming {
            version: self.version,
            keep_alive: self.keep_alive,
            is_head: self.method == Method::HEAD,
        }
    }
}

/// Field lines parsed on the stack; with more allowed by the limits, a Vec per head.
pub(crate) const STACK_HEADERS: usize = 128;
const _: () = assert!(
    STACK_HEADERS >= 100,
    "the default headers_count_max must fit on the stack"
);

/// The slots httparse writes field lines into, for one head (both roles share this): the
/// caller's stack array up to [`STACK_HEADERS`], its `heap` Vec beyond. The caller owns both,
/// so that the 4 KiB array is never moved.
pub(crate) fn header_slots<'s, 'b>(
    stack: &'s mut [MaybeUninit<httparse::Header<'b>>; STACK_HEADERS],
    heap: &'s mut Vec<MaybeUninit<httparse::Header<'b>>>,
    count_max: usize,
    head_len: usize,
) -> &'s mut [MaybeUninit<httparse::Header<'b>>] {
    if count_max <= STACK_HEADERS {
        return &mut stack[..count_max];
    }
    // A field line takes at least 4 bytes ("a:\r\n"), so this many slots always suffice
    // however large the configured maximum.
    heap.resize_with(count_max.min(head_len / 4 + 1), MaybeUninit::uninit);
    &mut heap[..]
}

/// Whether a CR is not followed by LF. httparse reports such a CR as whatever token it
/// interrupted; both roles name it instead.
pub(crate) fn has_bare_cr(head: &[u8]) -> bool {
    memchr::memchr_iter(b'\r', head).any(|i| head.get(i + 1) != Some(&b'\n'))
}

/// Parses a complete head (`head` starts at the request line and ends with the blank line,
/// the scanner having checked line endings and sizes).
pub(crate) fn parse_head(head: &Bytes, limits: &Limits) -> Result<RequestHead, ErrorKind> {
    if u32::try_from(head.len()).is_err() {
        // Field offsets are u32 (`Fields`); only a header_bytes_max of 4 GiB lets one through.
        return Err(ErrorKind::HeaderTooLarge);
    }
    let mut stack = [const { MaybeUninit::uninit() }; STACK_HEADERS];
    let mut heap = Vec::new();
    let slots = header_slots(&mut stack, &mut heap, limits.headers_count_max, head.len());
    let mut req = httparse::Request::new(&mut []);
    match req.parse_with_uninit_headers(head, slots) {
        Ok(httparse::Status::Complete(len)) => debug_assert_eq!(len, head.len()),
        // The scanner saw the blank line, so httparse cannot want more; refuse defensively.
        Ok(httparse::Status::Partial) => return Err(ErrorKind::BadRequestLine),
        Err(e) => return Err(classify_httparse_error(e, head)),
    }
    // `Complete` sets method, path and version.
    let (Some(method), Some(path), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(ErrorKind::BadRequestLine);
    };
    let method = Method::from_bytes(method.as_bytes()).map_err(|_| ErrorKind::BadRequestLine)?;
    if method == Method::CONNECT {
        return Err(ErrorKind::ConnectNotSupported);
    }
    let version = if minor == 0 {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
    let mut uri = parse_target(head, path, &method, limits)?;
    let mut fields = FramingFields::default();
    let mut headers = Fields::with_capacity(head.clone(), req.headers.len());
    for field in req.headers.iter() {
        let name = field.name.as_bytes();
        // httparse checked names as tokens and values as field-value bytes, the sets `http`
        // checks too; a name `http` would refuse for its length is refused here, so that every
        // name converts to a HeaderName at the edges that want one.
        if name.len() > usize::from(u16::MAX) {
            return Err(ErrorKind::BadHeaderName);
        }
        debug_assert!(
            HeaderName::from_bytes(name).is_ok() && HeaderValue::from_bytes(field.value).is_ok()
        );
        if let Some(host) = fields.add(name, field.value, version)? {
            headers.set_host(host);
        }
        headers.push_received(name, field.value);
    }
    let body = fields.body_kind(version, limits)?;
    let received_target = read_target(head, path, &mut uri, &mut headers)?;
    Ok(RequestHead {
        method,
        uri,
        received_target,
        version,
        headers,
        keep_alive: fields.keep_alive(version),
        expect_continue: fields.expect_continue
            && body != BodyKind::Empty
            && body != BodyKind::Length(0),
        body,
    })
}

/// Parses trailer fields (a complete section ending in the blank line) into a map.
pub(crate) fn parse_trailers(section: &Bytes, limits: &Limits) -> Result<HeaderMap, ErrorKind> {
    // Trailers are rare: a Vec per section, sized as in `parse_head`.
    let mut slots =
        vec![httparse::EMPTY_HEADER; limits.headers_count_max.min(section.len() / 4 + 1)];
    let fields = match httparse::parse_headers(section, &mut slots) {
        Ok(httparse::Status::Complete((_, fields))) => fields,
        Ok(httparse::Status::Partial) => return Err(ErrorKind::BadTrailer),
        Err(httparse::Error::TooManyHeaders) => return Err(ErrorKind::TooManyHeaders),
        Err(_) => return Err(ErrorKind::BadTrailer),
    };
    let mut trailers = HeaderMap::with_capacity(fields.len());
    for field in fields {
        let name =
            HeaderName::from_bytes(field.name.as_bytes()).map_err(|_| ErrorKind::BadTrailer)?;
        let value = HeaderValue::from_maybe_shared(section.slice_ref(field.value))
            .map_err(|_| ErrorKind::BadTrailer)?;
        trailers.append(name, value);
    }
    Ok(trailers)
}

/// Maps an httparse error to our kind. A version httparse refuses is a 505 when it is
/// well-formed `HTTP/DIGIT.DIGIT` (RFC 9112 §2.3), a 400 otherwise.
fn classify_httparse_error(e: httparse::Error, head: &[u8]) -> ErrorKind {
    if has_bare_cr(head) {
        return ErrorKind::BareCr;
    }
    match e {
        httparse::Error::HeaderName => ErrorKind::BadHeaderName,
        httparse::Error::HeaderValue => ErrorKind::BadHeaderValue,
        httparse::Error::TooManyHeaders => ErrorKind::TooManyHeaders,
        httparse::Error::Version if is_other_version(head) => ErrorKind::UnsupportedVersion,
        _ => ErrorKind::BadRequestLine,
    }
}

/// Whether the request line is well-formed but for a version other than 1.0 and 1.1:
/// `method SP target SP HTTP/DIGIT.DIGIT` (RFC 9112 §2.3, §3).
fn is_other_version(head: &[u8]) -> bool {
    let line_end = memchr::memchr(b'\r', head).unwrap_or(head.len());
    let mut parts = head[..line_end].split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let well_formed = match version {
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor] => {
            major.is_ascii_digit() && minor.is_ascii_digit()
        }
        _ => false,
    };
    !method.is_empty()
        && !target.is_empty()
        && well_formed
        && version != b"HTTP/1.0"
        && version != b"HTTP/1.1"
}

/// Parses the request-target and checks its form against the method (RFC 9112 §3.2).
fn parse_target(
    head: &Bytes,
    path: &str,
    method: &Method,
    limits: &Limits,
) -> Result<Uri, ErrorKind> {
    // The scanner enforced uri_bytes_max already; http::Uri has its own cap (u16::MAX - 1)
    // which a large configured limit could exceed.
    const URI_BYTES_MAX_HTTP: usize = u16::MAX as usize - 1;
    if path.len() > limits.uri_bytes_max || path.len() > URI_BYTES_MAX_HTTP {
        return Err(ErrorKind::UriTooLong);
    }
    if path.contains('#') {
        // A fragment is never part of a request-target (RFC 9112 §3.2); http::Uri would drop it
        // silently, and a proxy must not forward something other than what it was sent.
        return Err(ErrorKind::BadUri);
    }
    let uri =
        Uri::from_maybe_shared(head.slice_ref(path.as_bytes())).map_err(|_| ErrorKind::BadUri)?;
    if path.starts_with('/') {
        return Ok(uri); // origin-form
    }
    if path == "*" {
        // asterisk-form, RFC 9112 §3.2.4: OPTIONS only.
        return if *method == Method::OPTIONS {
            Ok(uri)
        } else {
            Err(ErrorKind::BadUri)
        };
    }
    // absolute-form, RFC 9112 §3.2.2. We proxy http(s) only, and userinfo in the authority is
    // an error to the recipient (RFC 9110 §4.2.4) as it is a known phishing and confusion tool.
    let scheme_ok = uri
        .scheme_str()
        .is_some_and(|s| s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https"));
    let authority_ok = uri
        .authority()
        .is_some_and(|a| !a.as_str().contains('@') && !a.host().is_empty());
    if !scheme_ok || !authority_ok {
        return Err(ErrorKind::BadUri);
    }
    Ok(uri)
}

/// The target everything reads (see [`crate::target`]): an absolute-form one becomes
/// origin-form with its authority as the Host field (RFC 9112 §3.2.2: the target's authority
/// wins over Host, and the origin must be asked for the host that was routed); the path is
/// normalised. `raw` is the target as received, a slice of `head`. Also returns the path and
/// query as received when they differ from the result's. An origin-form target that is
/// normal already (almost every one) costs one scan and nothing else.
fn read_target(
    head: &Bytes,
    raw: &str,
    uri: &mut Uri,
    headers: &mut Fields,
) -> Result<Option<Box<Bytes>>, ErrorKind> {
    if raw == "*" {
        return Ok(None);
    }
    let Some(authority) = uri.authority() else {
        return match crate::target::normalize(raw.as_bytes()) {
            Ok(None) => Ok(None),
            Ok(Some(normal)) => {
                *uri =
                    Uri::from_maybe_shared(Bytes::from(normal)).map_err(|_| ErrorKind::BadUri)?;
                Ok(Some(Box::new(head.slice_ref(raw.as_bytes()))))
            }
            Err(_) => Err(ErrorKind::BadUri),
        };
    };
    let host = HeaderValue::from_str(authority.as_str()).map_err(|_| ErrorKind::BadUri)?;
    headers.insert(http::header::HOST, host);
    // `http://a` and `http://a?q` have an empty path, which is `/` (RFC 9112 §3.2.2).
    let pq = uri.path_and_query().map_or("", |pq| pq.as_str());
    let target = if pq.starts_with('/') {
        Bytes::copy_from_slice(pq.as_bytes())
    } else {
        Bytes::from(format!("/{pq}"))
    };
    let normal = match crate::target::normalize(&target) {
        Ok(None) => target.clone(),
        Ok(Some(normal)) => Bytes::from(normal),
        Err(_) => return Err(ErrorKind::BadUri),
    };
    *uri = Uri::from_maybe_shared(normal).map_err(|_| ErrorKind::BadUri)?;
    Ok(Some(Box::new(target)))
}

/// The fields that decide framing, persistence and expectations, as seen so far.
#[derive(Debug, Default)]
struct FramingFields {
    hosts: u32,
    content_length: Option<u64>,
    transfer_codings: TransferCodings,
    connection: ConnectionOptions,
    expect_continue: bool,
}

impl FramingFields {
    /// Looks at one field line (the name in any case); returns the host part of a Host line.
    /// Names are told apart by length first, so most lines cost one comparison of a length.
    fn add<'v>(
        &mut self,
        name: &[u8],
        value: &'v [u8],
        version: Version,
    ) -> Result<Option<&'v [u8]>, ErrorKind> {
        let is = |known: &str| name.eq_ignore_ascii_case(known.as_bytes());
        match name.len() {
            4 if is("host") => {
                self.hosts += 1;
                if self.hosts > 1 {
                    return Err(ErrorKind::DuplicateHost);
                }
                let (host, _port) = fields::split_host_port(value).ok_or(ErrorKind::BadHost)?;
                return Ok(Some(host));
            }
            14 if is("content-length") => {
                self.content_length =
                    Some(fields::merge_content_length(self.content_length, value)?);
            }
            17 if is("transfer-encoding") => self.transfer_codings.add(value)?,
            10 if is("connection") => self.connection.add(value),
            // RFC 9110 §10.1.1: a server MUST ignore 100-continue in an HTTP/1.0 request; we
            // ignore Expect there altogether, as HTTP/1.0 never defined it.
            6 if is("expect") && version == Version::HTTP_11 => {
                self.expect_continue |= fields::expect_continue(value)?;
            }
            _ => {}
        }
        Ok(None)
    }

    /// After all lines: the body framing, or why the request cannot be framed safely.
    fn body_kind(&self, version: Version, limits: &Limits) -> Result<BodyKind, ErrorKind> {
        if version == Version::HTTP_11 && self.hosts == 0 {
            return Err(ErrorKind::MissingHost); // RFC 9112 §3.2
        }
        if self.transfer_codings.present {
            if self.content_length.is_some() {
                // RFC 9112 §6.1 lets us process TE and drop CL; refusing is safer in a proxy,
                // since the pair is the classic CL.TE / TE.CL smuggling signature.
                return Err(ErrorKind::ContentLengthAndTransferEncoding);
            }
            if version == Version::HTTP_10 {
                // RFC 9112 §6.1: TE in HTTP/1.0 means the framing is faulty.
                return Err(ErrorKind::TransferEncodingOnHttp10);
            }
            self.transfer_codings.finish()?;
            return Ok(BodyKind::Chunked);
        }
        match self.content_length {
            None => Ok(BodyKind::Empty),
            Some(n) if n > limits.body_bytes_max => Err(ErrorKind::BodyTooLarge),
            Some(n) => Ok(BodyKind::Length(n)),
        }
    }

    /// RFC 9112 §9.3: HTTP/1.1 persists unless `close`; HTTP/1.0 only with `keep-alive`.
    fn keep_alive(&self, version: Version) -> bool {
        if self.connection.close {
            return false;
        }
        version == Version::HTTP_11 || self.connection.keep_alive
    }
}
