//! A corpus of malformed and ambiguous requests — the request-smuggling and desync attempts
//! catalogued against HTTP/1.1 proxies — each with the exact status and cause, fed at every
//! split.

mod common;

use common::{Item, decode, decode_all_ways};
use http::StatusCode;
use squall_h1::{BodyKind, ErrorKind, Limits};

const BAD: StatusCode = StatusCode::BAD_REQUEST;
const NOT_IMPLEMENTED: StatusCode = StatusCode::NOT_IMPLEMENTED;

/// Asserts each `(input, status, kind)` case, naming the failing one.
fn check(cases: &[(&[u8], StatusCode, ErrorKind)]) {
    for (input, status, kind) in cases {
        let outcome = decode_all_ways(input, Limits::default());
        let name = String::from_utf8_lossy(input);
        assert_eq!(outcome.error, Some(*kind), "{name:?}: {outcome:#?}");
        assert_eq!(outcome.status(), *status, "{name:?}");
    }
}

/// A POST with the given extra field lines and body.
fn post(fields: &str, body: &str) -> Vec<u8> {
    format!("POST / HTTP/1.1\r\nHost: a\r\n{fields}\r\n{body}").into_bytes()
}

/// A chunked POST with the given body bytes.
fn chunked(body: &[u8]) -> Vec<u8> {
    let mut input = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    input.extend_from_slice(body);
    input
}

#[test]
fn content_length_with_transfer_encoding() {
    use ErrorKind::ContentLengthAndTransferEncoding as Both;
    let cl_te = post(
        "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
        "0\r\n\r\n",
    );
    let te_cl = post(
        "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
        "0\r\n\r\n",
    );
    let te_gzip_cl = post(
        "Transfer-Encoding: gzip\r\nContent-Length: 5\r\n",
        "0\r\n\r\n",
    );
    check(&[
        (&cl_te, BAD, Both),
        (&te_cl, BAD, Both),
        (&te_gzip_cl, BAD, Both),
    ]);
}

#[test]
fn content_length_variants() {
    use ErrorKind::BadContentLength as CL;
    let cases: Vec<Vec<u8>> = [
        "Content-Length: 5\r\nContent-Length: 6\r\n",
        "Content-Length: 5, 6\r\n",
        "Content-Length: 5,\r\n",
        "Content-Length: ,5\r\n",
        "Content-Length: +5\r\n",
        "Content-Length: -5\r\n",
        "Content-Length: -0\r\n",
        "Content-Length:\r\n",
        "Content-Length:   \r\n",
        "Content-Length: 5 5\r\n",
        "Content-Length: 0x5\r\n",
        "Content-Length: 5.0\r\n",
        "Content-Length: 1e3\r\n",
        "Content-Length: \"5\"\r\n",
        "Content-Length: 18446744073709551616\r\n",
        "Content-Length: 99999999999999999999999999\r\n",
    ]
    .iter()
    .map(|cl| post(cl, "hello"))
    .collect();
    let cases: Vec<_> = cases.iter().map(|c| (c.as_slice(), BAD, CL)).collect();
    check(&cases);
}

#[test]
fn transfer_encoding_variants() {
    use ErrorKind::*;
    let te = |value: &[u8]| {
        let mut input = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:".to_vec();
        input.extend_from_slice(value);
        input.extend_from_slice(b"\r\n\r\n0\r\n\r\n");
        input
    };
    let cases = [
        (te(b" chunked\x0b"), BAD, BadHeaderValue),
        (te(b" chunked\x00"), BAD, BadHeaderValue),
        (te(b" \x0cchunked"), BAD, BadHeaderValue),
        (te(b" xchunked"), NOT_IMPLEMENTED, UnsupportedTransferCoding),
        (te(b" chunkedx"), NOT_IMPLEMENTED, UnsupportedTransferCoding),
        (te(b" identity"), NOT_IMPLEMENTED, UnsupportedTransferCoding),
        (te(b" gzip"), NOT_IMPLEMENTED, UnsupportedTransferCoding),
        (
            te(b" gzip, chunked"),
            NOT_IMPLEMENTED,
            UnsupportedTransferCoding,
        ),
        (te(b" chunked, identity"), BAD, BadTransferEncoding),
        (te(b" chunked, chunked"), BAD, BadTransferEncoding),
        (
            te(b" chunked\r\nTransfer-Encoding: chunked"),
            BAD,
            BadTransferEncoding,
        ),
        (
            te(b" chunked\r\nTransfer-Encoding: gzip"),
            BAD,
            BadTransferEncoding,
        ),
        (te(b" chunked;foo=bar"), BAD, BadTransferEncoding),
        (te(b" \"chunked\""), BAD, BadTransferEncoding),
        (te(b" chunked chunked"), BAD, BadTransferEncoding),
        (te(b" ch\xc3\xbcnked"), BAD, BadTransferEncoding),
        (te(b""), BAD, BadTransferEncoding),
        (te(b" ,"), BAD, BadTransferEncoding),
    ];
    let cases: Vec<_> = cases
        .iter()
        .map(|(i, s, k)| (i.as_slice(), *s, *k))
        .collect();
    check(&cases);
}

#[test]
fn transfer_encoding_hidden_from_us() {
    use ErrorKind::*;
    let cases: [(&[u8], StatusCode, ErrorKind); 5] = [
        // The field name with whitespace before the colon (RFC 9112 §5.1).
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
            BAD,
            BadHeaderName,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding\t: chunked\r\n\r\n0\r\n\r\n",
            BAD,
            BadHeaderName,
        ),
        // Leading whitespace on the line: obs-fold into the previous field (RFC 9112 §5.2).
        (
            b"POST / HTTP/1.1\r\nHost: a\r\n Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            BAD,
            BadHeaderName,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nX: y\r\n\tTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            BAD,
            BadHeaderName,
        ),
        // Bare CR or LF before the field, hoping one parser sees a new line and another not.
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nX: y\rTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            BAD,
            BareCr,
        ),
    ];
    check(&cases);
    let lf = b"POST / HTTP/1.1\r\nHost: a\r\nX: y\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    check(&[(lf, BAD, BareLf)]);
}

#[test]
fn transfer_encoding_on_http10() {
    let input = b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    check(&[(input, BAD, ErrorKind::TransferEncodingOnHttp10)]);
}

#[test]
fn look_alike_field_names_are_other_fields() {
    // Not Transfer-Encoding: the body is empty and the "chunk" is the next request, refused.
    let input = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer_Encoding: chunked\r\n\r\n0\r\n\r\n";
    let outcome = decode(input);
    assert_eq!(outcome.head().body, BodyKind::Empty);
    assert_eq!(outcome.error, Some(ErrorKind::BadRequestLine));
}

#[test]
fn field_syntax() {
    use ErrorKind::*;
    let cases: [(&[u8], StatusCode, ErrorKind); 14] = [
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n",
            BAD,
            BadHeaderName,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n\tb\r\n\r\n",
            BAD,
            BadHeaderName,
        ),
        (b"GET / HTTP/1.1\r\n Host: a\r\n\r\n", BAD, BadHeaderName),
        (b"GET / HTTP/1.1\r\nHost : a\r\n\r\n", BAD, BadHeaderName),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nX(y): z\r\n\r\n",
            BAD,
            BadHeaderName,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nX/Y: z\r\n\r\n",
            BAD,
            BadHeaderName,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\n: z\r\n\r\n",
            BAD,
            BadHeaderName,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nX\x00Y: z\r\n\r\n",
            BAD,
            BadHeaderName,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n",
            BAD,
            BadHeaderName,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n",
            BAD,
            BadHeaderValue,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n",
            BAD,
            BadHeaderValue,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x7fb\r\n\r\n",
            BAD,
            BadHeaderValue,
        ),
        (b"GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n", BAD, BareCr),
        (b"GET / HTTP/1.1\r\nHost: a\r\nX: ab\r\r\n\r\n", BAD, BareCr),
    ];
    check(&cases);
}

#[test]
fn bare_lf_anywhere_in_the_head() {
    use ErrorKind::BareLf;
    let cases: [(&[u8], StatusCode, ErrorKind); 5] = [
        (b"GET / HTTP/1.1\nHost: a\r\n\r\n", BAD, BareLf),
        (b"GET / HTTP/1.1\r\nHost: a\n\r\n", BAD, BareLf),
        (b"GET / HTTP/1.1\r\nHost: a\r\n\n", BAD, BareLf),
        (b"GET / HTTP/1.1\nHost: a\n\n", BAD, BareLf),
        (b"\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", BAD, BareLf),
    ];
    check(&cases);
}

#[test]
fn host_rules() {
    use ErrorKind::*;
    let cases: [(&[u8], StatusCode, ErrorKind); 8] = [
        (b"GET / HTTP/1.1\r\n\r\n", BAD, MissingHost),
        (b"GET / HTTP/1.1\r\nX-Host: a\r\n\r\n", BAD, MissingHost),
        (b"GET http://a/ HTTP/1.1\r\n\r\n", BAD, MissingHost),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n",
            BAD,
            DuplicateHost,
        ),
        (
            b"GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n",
            BAD,
            DuplicateHost,
        ),
        (b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", BAD, BadHost),
        (b"GET / HTTP/1.1\r\nHost: user@evil\r\n\r\n", BAD, BadHost),
        (b"GET / HTTP/1.1\r\nHost: a/../b\r\n\r\n", BAD, BadHost),
    ];
    check(&cases);
}

#[test]
fn request_line_syntax() {
    use ErrorKind::*;
    let cases: [(&[u8], StatusCode, ErrorKind); 15] = [
        (b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", BAD, BadRequestLine),
        (b"GET /  HTTP/1.1\r\nHost: a\r\n\r\n", BAD, BadRequestLine),
        (b"GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", BAD, BadRequestLine),
        (b"GET / HTTP/1.1 \r\nHost: a\r\n\r\n", BAD, BadRequestLine),
        (b" GET / HTTP/1.1\r\nHost: a\r\n\r\n", BAD, BadRequestLine),
        (b"GE(T / HTTP/1.1\r\nHost: a\r\n\r\n", BAD, BadRequestLine),
        (b"G\x00T / HTTP/1.1\r\nHost: a\r\n\r\n", BAD, BadRequestLine),
        (
            b"GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n",
            BAD,
            BadRequestLine,
        ),
        (b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", BAD, BadRequestLine),
        (b"GET /\r\n\r\n", BAD, BadRequestLine),
        (b"GET / http/1.1\r\nHost: a\r\n\r\n", BAD, BadRequestLine),
        (b"GET / HTTP/1.10\r\nHost: a\r\n\r\n", BAD, BadRequestLine),
        (b"GET / HTTP/2\r\nHost: a\r\n\r\n", BAD, BadRequestLine),
        (b"GET / HTTP/1.1\rHost: a\r\n\r\n", BAD, BareCr),
        (b"GET /\r HTTP/1.1\r\nHost: a\r\n\r\n", BAD, BareCr),
    ];
    check(&cases);
}

#[test]
fn request_targets() {
    use ErrorKind::*;
    let cases: [(&[u8], StatusCode, ErrorKind); 8] = [
        (b"GET example.com HTTP/1.1\r\nHost: a\r\n\r\n", BAD, BadUri),
        (b"GET * HTTP/1.1\r\nHost: a\r\n\r\n", BAD, BadUri),
        (b"GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n", BAD, BadUri),
        (
            b"GET http://user:pw@a/ HTTP/1.1\r\nHost: a\r\n\r\n",
            BAD,
            BadUri,
        ),
        (b"GET http:/a HTTP/1.1\r\nHost: a\r\n\r\n", BAD, BadUri),
        (b"GET /#frag HTTP/1.1\r\nHost: a\r\n\r\n", BAD, BadUri),
        (b"GET /a<b HTTP/1.1\r\nHost: a\r\n\r\n", BAD, BadUri),
        (
            b"GET /\xff HTTP/1.1\r\nHost: a\r\n\r\n",
            BAD,
            BadRequestLine,
        ),
    ];
    check(&cases);
}

#[test]
fn versions() {
    let v505 = StatusCode::HTTP_VERSION_NOT_SUPPORTED;
    let kind = ErrorKind::UnsupportedVersion;
    let cases: [(&[u8], StatusCode, ErrorKind); 5] = [
        (b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", v505, kind),
        (b"GET / HTTP/1.2\r\nHost: a\r\n\r\n", v505, kind),
        (b"GET / HTTP/0.9\r\nHost: a\r\n\r\n", v505, kind),
        (b"GET / HTTP/3.0\r\n\r\n", v505, kind),
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", v505, kind),
    ];
    check(&cases);
}

#[test]
fn connect_is_not_implemented() {
    let input = b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n";
    check(&[(input, NOT_IMPLEMENTED, ErrorKind::ConnectNotSupported)]);
}

#[test]
fn expectations() {
    let input =
        b"PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue, x\r\nContent-Length: 1\r\n\r\nx";
    check(&[(
        input,
        StatusCode::EXPECTATION_FAILED,
        ErrorKind::UnsupportedExpectation,
    )]);
    let input = b"GET / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n";
    check(&[(
        input,
        StatusCode::EXPECTATION_FAILED,
        ErrorKind::UnsupportedExpectation,
    )]);
}

#[test]
fn chunk_sizes() {
    use ErrorKind::*;
    let cases = [
        (chunked(b"0x5\r\nhello\r\n0\r\n\r\n"), BAD, BadChunkSize),
        (chunked(b"-1\r\nhello\r\n0\r\n\r\n"), BAD, BadChunkSize),
        (chunked(b"+5\r\nhello\r\n0\r\n\r\n"), BAD, BadChunkSize),
        (chunked(b" 5\r\nhello\r\n0\r\n\r\n"), BAD, BadChunkSize),
        (chunked(b"\r\nhello\r\n0\r\n\r\n"), BAD, BadChunkSize),
        (chunked(b";ext\r\nhello\r\n0\r\n\r\n"), BAD, BadChunkSize),
        (chunked(b"g\r\nhello\r\n0\r\n\r\n"), BAD, BadChunkSize),
        (chunked(b"5_0\r\nhello\r\n0\r\n\r\n"), BAD, BadChunkSize),
        // 2^64 and beyond: overflow is malformed, not merely large.
        (
            chunked(b"10000000000000000\r\nhello\r\n0\r\n\r\n"),
            BAD,
            BadChunkSize,
        ),
        (
            chunked(b"fffffffffffffffffffffffffff\r\nhello\r\n"),
            BAD,
            BadChunkSize,
        ),
        (chunked(b"5\rhello\r\n0\r\n\r\n"), BAD, BareCr),
    ];
    let cases: Vec<_> = cases
        .iter()
        .map(|(i, s, k)| (i.as_slice(), *s, *k))
        .collect();
    check(&cases);
}

#[test]
fn chunk_extensions() {
    use ErrorKind::*;
    let cases = [
        (chunked(b"5;\r\nhello\r\n0\r\n\r\n"), BAD, BadChunkExtension),
        (
            chunked(b"5;=x\r\nhello\r\n0\r\n\r\n"),
            BAD,
            BadChunkExtension,
        ),
        (
            chunked(b"5;a=\r\nhello\r\n0\r\n\r\n"),
            BAD,
            BadChunkExtension,
        ),
        (
            chunked(b"5;a=b c\r\nhello\r\n0\r\n\r\n"),
            BAD,
            BadChunkExtension,
        ),
        (
            chunked(b"5;a=\"open\r\nhello\r\n0\r\n\r\n"),
            BAD,
            BadChunkExtension,
        ),
        (
            chunked(b"5;a=\"x\x01\"\r\nhello\r\n0\r\n\r\n"),
            BAD,
            BadChunkExtension,
        ),
        (
            chunked(b"5;a=\"x\\\x01\"\r\nhello\r\n0\r\n\r\n"),
            BAD,
            BadChunkExtension,
        ),
        (
            chunked(b"5;a\x00\r\nhello\r\n0\r\n\r\n"),
            BAD,
            BadChunkExtension,
        ),
        (
            chunked(b"5;a(b)\r\nhello\r\n0\r\n\r\n"),
            BAD,
            BadChunkExtension,
        ),
        (
            chunked(b"5;a=\"x\"y\r\nhello\r\n0\r\n\r\n"),
            BAD,
            BadChunkExtension,
        ),
        (chunked(b"5 \r\nhello\r\n0\r\n\r\n"), BAD, BadChunkExtension),
        (
            chunked(b"5;a \r\nhello\r\n0\r\n\r\n"),
            BAD,
            BadChunkExtension,
        ),
        (chunked(b"0;bad ext\r\n\r\n"), BAD, BadChunkExtension),
    ];
    let cases: Vec<_> = cases
        .iter()
        .map(|(i, s, k)| (i.as_slice(), *s, *k))
        .collect();
    check(&cases);
}

#[test]
fn chunk_framing() {
    use ErrorKind::*;
    let cases = [
        // Data longer than declared: no CRLF where it must be.
        (chunked(b"5\r\nhelloX\r\n0\r\n\r\n"), BAD, BadChunkFraming),
        (chunked(b"5\r\nhello0\r\n\r\n"), BAD, BadChunkFraming),
        (chunked(b"5\r\nhello\rX0\r\n\r\n"), BAD, BadChunkFraming),
        // LF-only framing lines.
        (chunked(b"5\nhello\r\n0\r\n\r\n"), BAD, BareLf),
        (chunked(b"5;a=b\nhello\r\n0\r\n\r\n"), BAD, BareLf),
        (chunked(b"5\r\nhello\n0\r\n\r\n"), BAD, BareLf),
        (chunked(b"5\r\nhello\r\n0\n\r\n"), BAD, BareLf),
        (chunked(b"5\r\nhello\r\n0\r\n\n"), BAD, BareLf),
        (chunked(b"0\r\nX: y\n\r\n"), BAD, BareLf),
        // Trailers must be fields: a request glued after a last chunk without its final CRLF.
        (
            chunked(b"0\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"),
            BAD,
            BadTrailer,
        ),
        (chunked(b"0\r\nX: y\r\n z\r\n\r\n"), BAD, BadTrailer),
        (chunked(b"0\r\nX : y\r\n\r\n"), BAD, BadTrailer),
        (chunked(b"0\r\nX: a\x00b\r\n\r\n"), BAD, BadTrailer),
    ];
    let cases: Vec<_> = cases
        .iter()
        .map(|(i, s, k)| (i.as_slice(), *s, *k))
        .collect();
    check(&cases);
}

#[test]
fn missing_final_crlf_waits_for_it() {
    // Without the blank line after the last chunk the body is not over: no End, nothing
    // consumed of what may be trailers, and no next request taken from it.
    let outcome = decode(&chunked(b"5\r\nhello\r\n0\r\n"));
    assert_eq!(outcome.error, None);
    assert!(!outcome.items.iter().any(|i| matches!(i, Item::End(_))));
    assert!(!outcome.between_messages);
}

#[test]
fn invalid_bytes_after_a_body_are_the_next_request() {
    // CL.0-style desync: bytes beyond Content-Length are parsed as a new request, and refused.
    let input = post("Content-Length: 2\r\n", "okGET /admin HTTP/1.1\r\n\r\n");
    let outcome = decode(&input);
    assert_eq!(common::body(&outcome), b"ok");
    assert_eq!(outcome.error, Some(ErrorKind::MissingHost));
}
