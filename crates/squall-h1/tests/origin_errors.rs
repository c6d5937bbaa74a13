//! Malformed, ambiguous and truncated responses from an origin — response splitting and
//! desync attempts, broken origins, connections closed early — each with the exact cause and
//! whether the request could still be retried, fed at every split.

mod common;

use common::response::{Script, decode_all_ways, error};
use http::StatusCode;
use squall_h1::{Fault, ResponseErrorKind, ResponseLimits};

use ResponseErrorKind::*;

/// Asserts that each input is refused with `kind` before the final head was received (so an
/// idempotent request could be retried), naming the failing case.
fn refused_before_head(cases: &[&[u8]], kind: ResponseErrorKind, script: &Script) {
    for input in cases {
        let e = error(input, script);
        let name = String::from_utf8_lossy(input);
        assert_eq!(e.kind(), kind, "{name:?}");
        assert!(
            !e.head_received() && e.retryable_if_idempotent(),
            "{name:?}"
        );
        assert_eq!(e.fault(), Fault::Origin);
        assert_eq!(e.status(), StatusCode::BAD_GATEWAY);
    }
}

/// A response head with the given field lines (each ending in CRLF) and what follows.
fn response(fields: &str, rest: &str) -> Vec<u8> {
    format!("HTTP/1.1 200 OK\r\n{fields}\r\n{rest}").into_bytes()
}

#[test]
fn content_length_with_transfer_encoding() {
    let cl_te = response(
        "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
        "0\r\n\r\n",
    );
    let te_cl = response(
        "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
        "hello",
    );
    let gzip_cl = response("Transfer-Encoding: gzip\r\nContent-Length: 5\r\n", "hello");
    let cases = [&cl_te[..], &te_cl, &gzip_cl];
    refused_before_head(&cases, ContentLengthAndTransferEncoding, &Script::get(1));
    // Also where the status says there is no body: the origin frames differently from us.
    let not_modified = b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\
        Transfer-Encoding: chunked\r\n\r\n";
    refused_before_head(
        &[not_modified],
        ContentLengthAndTransferEncoding,
        &Script::get(1),
    );
}

#[test]
fn content_length_variants() {
    let cases: Vec<Vec<u8>> = [
        "Content-Length: 5\r\nContent-Length: 6\r\n",
        "Content-Length: 5, 6\r\n",
        "Content-Length: 5,\r\n",
        "Content-Length: +5\r\n",
        "Content-Length: -1\r\n",
        "Content-Length:\r\n",
        "Content-Length: 0x5\r\n",
        "Content-Length: 18446744073709551616\r\n",
    ]
    .iter()
    .map(|cl| response(cl, "hello"))
    .collect();
    let cases: Vec<&[u8]> = cases.iter().map(Vec::as_slice).collect();
    refused_before_head(&cases, BadContentLength, &Script::get(1));
    // Identical repeats are one value (RFC 9112 §6.3).
    let input = response("Content-Length: 5, 5\r\nContent-Length: 5\r\n", "hello");
    let outcome = decode_all_ways(&input, &Script::get(1));
    assert_eq!(outcome.body(0), b"hello");
}

#[test]
fn transfer_encoding_variants() {
    let cases: Vec<Vec<u8>> = [
        "Transfer-Encoding: chunked, chunked\r\n",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: chunked;q=1\r\n",
        "Transfer-Encoding: \"chunked\"\r\n",
        "Transfer-Encoding:\r\n",
        "Transfer-Encoding: ,\r\n",
    ]
    .iter()
    .map(|te| response(te, "0\r\n\r\n"))
    .collect();
    let cases: Vec<&[u8]> = cases.iter().map(Vec::as_slice).collect();
    refused_before_head(&cases, BadTransferEncoding, &Script::get(1));
    let http10 = b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    refused_before_head(&[http10], TransferEncodingOnHttp10, &Script::get(1));
}

#[test]
fn bad_chunks_after_the_head() {
    let cases: &[(&str, ResponseErrorKind)] = &[
        ("zz\r\n", BadChunkSize),
        ("0x5\r\nhello\r\n", BadChunkSize),
        ("-1\r\n", BadChunkSize),
        (" 5\r\nhello\r\n", BadChunkSize),
        ("\r\n", BadChunkSize),
        ("10000000000000000\r\n", BadChunkSize),
        ("5 \r\nhello\r\n", BadChunkExtension),
        ("5;\r\nhello\r\n", BadChunkExtension),
        ("5;a=\"x\r\n", BadChunkExtension),
        ("5\r\nhelloX\r\n", BadChunkFraming),
        ("5\r\nhello\r\r\n", BadChunkFraming),
        ("5\nhello\r\n", BareLf),
        ("5\r\nhello\n", BareLf),
        ("5\rhello", BareCr),
        ("0\r\nX: 1\n\r\n", BareLf),
        ("0\r\nbad trailer\r\n\r\n", BadTrailer),
    ];
    for (body, kind) in cases {
        let input = response("Transfer-Encoding: chunked\r\n", body);
        let e = error(&input, &Script::get(1));
        assert_eq!(e.kind(), *kind, "{body:?}");
        assert!(
            e.head_received() && !e.retryable_if_idempotent(),
            "{body:?}"
        );
    }
    let long_extension = format!("5;{}\r\nhello\r\n0\r\n\r\n", "a".repeat(5000));
    let input = response("Transfer-Encoding: chunked\r\n", &long_extension);
    assert_eq!(error(&input, &Script::get(1)).kind(), ChunkLineTooLong);
}

#[test]
fn line_endings_and_field_syntax() {
    refused_before_head(
        &[
            b"HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\n",
        ],
        BareLf,
        &Script::get(1),
    );
    refused_before_head(
        &[
            b"HTTP/1.1 200 OK\r\nX: a\rb\r\nContent-Length: 0\r\n\r\n",
            b"HTTP/1.1 200 OK\rContent-Length: 0\r\n\r\n",
        ],
        BareCr,
        &Script::get(1),
    );
    refused_before_head(
        &[
            // obs-fold: a continuation line (RFC 9112 §5.2)
            b"HTTP/1.1 200 OK\r\nX-Long: a\r\n b\r\nContent-Length: 0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nX-Long: a\r\n\tb\r\nContent-Length: 0\r\n\r\n",
            // whitespace between name and colon (RFC 9112 §5.1)
            b"HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding\t: chunked\r\n\r\n0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nBad[name]: 1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n: no name\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n Leading: space\r\n\r\n",
        ],
        BadHeaderName,
        &Script::get(1),
    );
    refused_before_head(
        &[
            b"HTTP/1.1 200 OK\r\nX: a\x00b\r\nContent-Length: 0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nX: \x01\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nX: a\x7fb\r\n\r\n",
        ],
        BadHeaderValue,
        &Script::get(1),
    );
}

#[test]
fn bad_status_lines() {
    refused_before_head(
        &[
            b"HTTP/1.1 20 OK\r\n\r\n",
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 099 Low\r\n\r\n",
            b"HTTP/1.1 000 Zero\r\n\r\n",
            b"HTTP/1.1 abc OK\r\n\r\n",
            b"HTTP/1.1  200 OK\r\n\r\n",
            b"HTTP/1.1 -200 OK\r\n\r\n",
            b"HTTP/1.1 200 O\x00K\r\n\r\n",
            b"HTTP/1.1 200 O\x7fK\r\n\r\n",
            b"HTTP/1.1\r\n\r\n",
            b"HTTP/1.1 200OK\r\n\r\n",
            b"HTTP/1.10 200 OK\r\n\r\n",
            b"HTTP/11 200 OK\r\n\r\n",
            b"http/1.1 200 OK\r\n\r\n",
            b"\r\nHTTP/1.1 200 OK\r\n\r\n",
            b" HTTP/1.1 200 OK\r\n\r\n",
            b"<html><body>hello</body></html>",
            b"ICY 200 OK\r\n\r\n",
            b"\x16\x03\x01\x00",
            b"HTTP\r\n",
        ],
        BadStatusLine,
        &Script::get(1),
    );
    refused_before_head(
        &[
            b"HTTP/1.2 200 OK\r\n\r\n",
            b"HTTP/2.0 200 OK\r\n\r\n",
            b"HTTP/0.9 200 OK\r\n\r\n",
        ],
        UnsupportedVersion,
        &Script::get(1),
    );
}

#[test]
fn switching_protocols_is_refused() {
    let input =
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
    refused_before_head(&[input], SwitchingProtocols, &Script::get(1));
}

#[test]
fn too_many_interim_responses() {
    let input = b"HTTP/1.1 103 Early Hints\r\n\r\n".repeat(9);
    refused_before_head(&[&input], TooManyInterim, &Script::get(1));
    let limits = ResponseLimits {
        interim_count_max: 0,
        ..ResponseLimits::default()
    };
    let input = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n";
    refused_before_head(
        &[input],
        TooManyInterim,
        &Script::get(1).with_limits(limits),
    );
}

#[test]
fn truncated_at_eof() {
    let script = Script::get(1).then_eof();
    refused_before_head(&[b""], ClosedBeforeResponse, &script);
    refused_before_head(
        &[
            b"H",
            b"HTTP/1.1 200 OK\r\nContent-Le",
            b"HTTP/1.1 200 OK\r\n\r",
            b"HTTP/1.1 100 Continue\r\n\r\n",
        ],
        TruncatedHead,
        &script,
    );
    for input in [
        &b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello"[..],
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: 1\r\n",
    ] {
        let e = error(input, &script);
        assert_eq!(
            e.kind(),
            TruncatedBody,
            "{:?}",
            String::from_utf8_lossy(input)
        );
        assert!(e.head_received() && !e.retryable_if_idempotent());
    }
}

#[test]
fn eof_on_a_reused_connection_before_the_second_response() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx";
    let e = error(input, &Script::get(2).then_eof());
    assert_eq!(e.kind(), ClosedBeforeResponse);
    assert!(e.retryable_if_idempotent());
}

#[test]
fn unsolicited_bytes() {
    // An origin that sends more than the response (a second response, a stray CRLF after the
    // body) is out of step: refuse rather than keep the bytes for the next client.
    for extra in [
        &b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"[..],
        b"\r\n",
        b"x",
    ] {
        let mut input = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec();
        input.extend_from_slice(extra);
        let outcome = decode_all_ways(&input, &Script::get(1));
        assert_eq!(outcome.error_kind(), UnsolicitedResponse);
        assert_eq!(outcome.body(0), b"ok");
    }
}

#[test]
fn head_over_the_limit() {
    let limits = ResponseLimits {
        header_bytes_max: 64,
        ..ResponseLimits::default()
    };
    let script = Script::get(1).with_limits(limits);
    let fits = format!(
        "HTTP/1.1 200 OK\r\nX: {}\r\nContent-Length: 0\r\n\r\n",
        "a".repeat(21)
    );
    assert_eq!(fits.len(), 64);
    assert!(decode_all_ways(fits.as_bytes(), &script).idle);
    let over = format!(
        "HTTP/1.1 200 OK\r\nX: {}\r\nContent-Length: 0\r\n\r\n",
        "a".repeat(22)
    );
    refused_before_head(&[over.as_bytes()], HeaderTooLarge, &script);
    // Refused as soon as the limit is buffered, without waiting for the end of the head.
    let endless = format!("HTTP/1.1 200 OK\r\nX: {}", "a".repeat(100));
    refused_before_head(&[endless.as_bytes()], HeaderTooLarge, &script);
    // The default is 64 KiB.
    let big = format!("HTTP/1.1 200 OK\r\nX: {}\r\n\r\n", "a".repeat(64 * 1024));
    refused_before_head(&[big.as_bytes()], HeaderTooLarge, &Script::get(1));
}

#[test]
fn too_many_fields() {
    let limits = ResponseLimits {
        headers_count_max: 3,
        ..ResponseLimits::default()
    };
    let script = Script::get(1).with_limits(limits);
    let three = b"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nContent-Length: 0\r\n\r\n";
    assert!(decode_all_ways(three, &script).idle);
    let four = b"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\nContent-Length: 0\r\n\r\n";
    refused_before_head(&[four], TooManyHeaders, &script);
}

#[test]
fn trailers_share_the_head_budget() {
    let limits = ResponseLimits {
        header_bytes_max: 80,
        ..ResponseLimits::default()
    };
    let head = "Transfer-Encoding: chunked\r\n";
    let input = response(head, &format!("0\r\nX: {}\r\n\r\n", "a".repeat(40)));
    let e = error(&input, &Script::get(1).with_limits(limits));
    assert_eq!(e.kind(), TrailerTooLarge);
    assert!(e.head_received());
}
