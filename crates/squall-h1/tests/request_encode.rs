//! The client role's request encoder, byte for byte, and the removal of hop-by-hop fields;
//! what the encoder writes is also fed back through the server role's strict decoder.

mod common;

use bytes::BytesMut;
use common::{Item, decode};
use http::header::{HeaderMap, HeaderValue};
use http::uri::PathAndQuery;
use http::{Method, Uri};
use squall_h1::{
    BodyKind, OutboundRequest, encode_chunk, encode_last_chunk, encode_request_head,
    strip_hop_by_hop,
};

fn map(fields: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in fields {
        map.append(*name, HeaderValue::from_static(value));
    }
    map
}

/// Encodes a request with the given parts and the host `origin.example`.
fn encode(method: &Method, target: &str, headers: &HeaderMap, body: BodyKind) -> String {
    let target = PathAndQuery::try_from(target).unwrap();
    let host = HeaderValue::from_static("origin.example");
    let req = OutboundRequest {
        method,
        target: &target,
        host: &host,
        headers,
        raw_headers: b"",
        body,
        keep_alive: true,
    };
    let mut out = BytesMut::new();
    encode_request_head(&req, &mut out);
    String::from_utf8(out.to_vec()).unwrap()
}

#[test]
fn get_without_body() {
    let headers = map(&[("accept", "*/*"), ("cookie", "a=1"), ("cookie", "b=2")]);
    assert_eq!(
        encode(&Method::GET, "/a/b?c=d", &headers, BodyKind::Empty),
        "GET /a/b?c=d HTTP/1.1\r\nHost: origin.example\r\n\
         accept: */*\r\ncookie: a=1\r\ncookie: b=2\r\n\r\n"
    );
}

#[test]
fn post_with_content_length() {
    let headers = map(&[("content-type", "application/json")]);
    assert_eq!(
        encode(&Method::POST, "/api", &headers, BodyKind::Length(13)),
        "POST /api HTTP/1.1\r\nHost: origin.example\r\nContent-Length: 13\r\n\
         content-type: application/json\r\n\r\n"
    );
    // The explicit zero is forwarded.
    assert_eq!(
        encode(&Method::POST, "/", &HeaderMap::new(), BodyKind::Length(0)),
        "POST / HTTP/1.1\r\nHost: origin.example\r\nContent-Length: 0\r\n\r\n"
    );
}

#[test]
fn put_chunked_with_raw_lines_and_close() {
    let target = PathAndQuery::from_static("/upload");
    let host = HeaderValue::from_static("[::1]:8080");
    let headers = map(&[("x-a", "1")]);
    let req = OutboundRequest {
        method: &Method::PUT,
        target: &target,
        host: &host,
        headers: &headers,
        raw_headers: b"X-Forwarded-For: 192.0.2.1\r\nVia: 1.1 squall\r\n",
        body: BodyKind::Chunked,
        keep_alive: false,
    };
    let mut out = BytesMut::from(&b"previous"[..]);
    encode_request_head(&req, &mut out);
    assert_eq!(
        &out[..],
        b"previousPUT /upload HTTP/1.1\r\nHost: [::1]:8080\r\nTransfer-Encoding: chunked\r\n\
          Connection: close\r\nx-a: 1\r\n\
          X-Forwarded-For: 192.0.2.1\r\nVia: 1.1 squall\r\n\r\n"
    );
}

#[test]
fn encoder_owns_host_framing_and_connection() {
    // Whatever the map holds, one Host and one framing go out: the encoder's.
    let headers = map(&[
        ("host", "evil.example"),
        ("content-length", "999"),
        ("transfer-encoding", "chunked"),
        ("connection", "keep-alive"),
        ("accept", "text/html"),
    ]);
    assert_eq!(
        encode(&Method::POST, "/", &headers, BodyKind::Length(3)),
        "POST / HTTP/1.1\r\nHost: origin.example\r\nContent-Length: 3\r\n\
         accept: text/html\r\n\r\n"
    );
}

#[test]
fn targets() {
    let empty = HeaderMap::new();
    let cases = [
        ("http://h.example", "GET / HTTP/1.1\r\n"),
        ("http://h.example?q=1", "GET /?q=1 HTTP/1.1\r\n"),
        ("http://h.example/x/y?z", "GET /x/y?z HTTP/1.1\r\n"),
        ("/%20space?a=%0d", "GET /%20space?a=%0d HTTP/1.1\r\n"),
    ];
    for (uri, line) in cases {
        let uri: Uri = uri.parse().unwrap();
        let target = uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static(""));
        let encoded = encode(&Method::GET, target.as_str(), &empty, BodyKind::Empty);
        assert!(encoded.starts_with(line), "{uri}: {encoded:?}");
    }
    let options = encode(&Method::OPTIONS, "*", &empty, BodyKind::Empty);
    assert!(options.starts_with("OPTIONS * HTTP/1.1\r\n"), "{options:?}");
    let custom = Method::from_bytes(b"PURGE").unwrap();
    let purge = encode(&custom, "/x", &empty, BodyKind::Empty);
    assert!(purge.starts_with("PURGE /x HTTP/1.1\r\n"));
}

#[test]
fn encoded_requests_pass_our_own_strict_decoder() {
    let headers = map(&[("accept", "*/*"), ("x-trace", "abc")]);
    let mut wire = encode(&Method::POST, "/p?q", &headers, BodyKind::Chunked).into_bytes();
    let mut body = BytesMut::new();
    encode_chunk(b"hello ", &mut body);
    encode_chunk(b"world", &mut body);
    encode_last_chunk(Some(&map(&[("x-sum", "1")])), &mut body);
    wire.extend_from_slice(&body);
    wire.extend_from_slice(encode(&Method::GET, "/next", &headers, BodyKind::Length(2)).as_bytes());
    wire.extend_from_slice(b"ok");
    let outcome = decode(&wire);
    assert_eq!(outcome.error, None);
    let heads = outcome.heads();
    assert_eq!(heads.len(), 2);
    assert_eq!(heads[0].method, Method::POST);
    assert_eq!(heads[0].uri, "/p?q");
    assert_eq!(heads[0].body, BodyKind::Chunked);
    assert_eq!(heads[0].host(), Some("origin.example"));
    assert_eq!(heads[1].body, BodyKind::Length(2));
    assert_eq!(outcome.items[1], Item::Body(b"hello world".to_vec()));
    assert!(outcome.between_messages && outcome.leftover.is_empty());
}

#[test]
fn strip_fixed_hop_by_hop_fields() {
    let mut headers = map(&[
        ("connection", "keep-alive"),
        ("keep-alive", "timeout=5"),
        ("proxy-connection", "keep-alive"),
        ("te", "trailers"),
        ("transfer-encoding", "chunked"),
        ("upgrade", "websocket"),
        ("proxy-authorization", "Basic eA=="),
        ("proxy-authenticate", "Basic"),
        ("accept", "*/*"),
        ("trailer", "x-sum"),
        ("content-length", "5"),
    ]);
    strip_hop_by_hop(&mut headers);
    assert_eq!(
        headers,
        map(&[
            ("accept", "*/*"),
            ("trailer", "x-sum"),
            ("content-length", "5")
        ])
    );
}

#[test]
fn strip_fields_named_by_connection() {
    let mut headers = map(&[
        ("connection", "X-Secret, close"),
        ("Connection", " x-other ,, Keep-Alive"),
        ("x-secret", "1"),
        ("x-secret", "2"),
        ("x-other", "3"),
        ("x-kept", "4"),
        ("cookie", "c=1"),
    ]);
    strip_hop_by_hop(&mut headers);
    assert_eq!(headers, map(&[("x-kept", "4"), ("cookie", "c=1")]));
}

#[test]
fn connection_cannot_strip_end_to_end_fields() {
    let mut headers = map(&[
        (
            "connection",
            "host, x-forwarded-for, X-Forwarded-Proto, x-forwarded-host",
        ),
        (
            "connection",
            "forwarded, via, not a token, \"quoted\", x-gone",
        ),
        ("host", "a.example"),
        ("x-forwarded-for", "192.0.2.1"),
        ("x-forwarded-proto", "https"),
        ("x-forwarded-host", "a.example"),
        ("forwarded", "for=192.0.2.1"),
        ("via", "1.1 front"),
        ("x-gone", "1"),
    ]);
    strip_hop_by_hop(&mut headers);
    assert_eq!(
        headers,
        map(&[
            ("host", "a.example"),
            ("x-forwarded-for", "192.0.2.1"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "a.example"),
            ("forwarded", "for=192.0.2.1"),
            ("via", "1.1 front"),
        ])
    );
}

#[test]
fn strip_without_connection_is_a_no_op_on_other_fields() {
    let original = map(&[
        ("accept", "*/*"),
        ("set-cookie", "a=1"),
        ("set-cookie", "b=2"),
    ]);
    let mut headers = original.clone();
    strip_hop_by_hop(&mut headers);
    assert_eq!(headers, original);
}
