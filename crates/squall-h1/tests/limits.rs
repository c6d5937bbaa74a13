//! Every limit, at its edge and beyond, fed at every split; and the early detection that keeps
//! a slow or endless head from holding a buffer.

mod common;

use bytes::BytesMut;
use common::{Item, body, decode, decode_all_ways, error_kind};
use http::StatusCode;
use squall_h1::{BodyKind, CHUNK_LINE_BYTES_MAX, ErrorKind, Limits, RequestDecoder};

fn limits(header_bytes_max: usize, uri_bytes_max: usize, body_bytes_max: u64) -> Limits {
    Limits {
        header_bytes_max,
        uri_bytes_max,
        body_bytes_max,
        headers_count_max: 100,
    }
}

#[test]
fn defaults() {
    let limits = Limits::default();
    assert_eq!(limits.header_bytes_max, 16 * 1024);
    assert_eq!(limits.uri_bytes_max, 8 * 1024);
    assert_eq!(limits.body_bytes_max, 16 * 1024 * 1024);
    assert_eq!(limits.headers_count_max, 100);
}

#[test]
fn head_at_the_limit_fits_and_one_more_byte_does_not() {
    let input = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    let fits = decode_all_ways(input, limits(input.len(), 100, 0));
    assert_eq!(fits.error, None);
    assert_eq!(fits.heads().len(), 1);
    assert_eq!(
        error_kind(input, limits(input.len() - 1, 100, 0)),
        ErrorKind::HeaderTooLarge
    );
}

#[test]
fn oversized_head_is_refused_without_waiting_for_its_end() {
    // No blank line ever comes: the decoder must not wait for one.
    let mut input = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
    input.extend(b"X-Filler: 0123456789\r\n".repeat(10));
    assert_eq!(
        error_kind(&input, limits(64, 32, 0)),
        ErrorKind::HeaderTooLarge
    );

    let mut decoder = RequestDecoder::new(limits(64, 32, 0));
    let mut buf = BytesMut::from(&input[..63]);
    assert_eq!(decoder.decode(&mut buf), Ok(None));
    buf.extend_from_slice(&input[63..64]);
    let err = decoder.decode(&mut buf).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::HeaderTooLarge);
    assert_eq!(err.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    assert_eq!(err.kind().as_str(), "header_too_large");
}

#[test]
fn default_header_limit() {
    let mut input = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
    input.extend(format!("Cookie: {}\r\n\r\n", "c".repeat(16 * 1024)).as_bytes());
    assert_eq!(
        common::status(&input),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
    );
}

#[test]
fn leading_empty_lines_count_against_the_head() {
    let input = b"\r\n".repeat(40);
    assert_eq!(
        error_kind(&input, limits(64, 32, 0)),
        ErrorKind::HeaderTooLarge
    );
    let mut input = b"\r\n".repeat(3);
    input.extend_from_slice(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(
        error_kind(&input, limits(input.len() - 1, 32, 0)),
        ErrorKind::HeaderTooLarge
    );
    assert_eq!(
        decode_all_ways(&input, limits(input.len(), 32, 0)).error,
        None
    );
}

#[test]
fn too_many_headers() {
    let few = Limits {
        headers_count_max: 3,
        ..Limits::default()
    };
    let three = b"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n";
    assert_eq!(decode_all_ways(three, few).head().headers.len(), 3);
    let four = b"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    assert_eq!(error_kind(four, few), ErrorKind::TooManyHeaders);
    assert_eq!(
        ErrorKind::TooManyHeaders.status(),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
    );
}

#[test]
fn many_headers_beyond_the_stack_array() {
    let many = Limits {
        headers_count_max: 200,
        ..Limits::default()
    };
    let mut input = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
    for i in 0..199 {
        input.extend(format!("X-{i}: {i}\r\n").as_bytes());
    }
    let mut over = input.clone();
    input.extend_from_slice(b"\r\n");
    assert_eq!(
        common::run_pieces([&input[..]], many).head().headers.len(),
        200
    );
    over.extend_from_slice(b"X-Over: 1\r\n\r\n");
    assert_eq!(
        common::run_pieces([&over[..]], many).error,
        Some(ErrorKind::TooManyHeaders)
    );
}

#[test]
fn uri_at_the_limit_fits_and_one_more_byte_does_not() {
    let fits = b"GET /0123456789abcde HTTP/1.1\r\nHost: a\r\n\r\n";
    assert_eq!(
        decode_all_ways(fits, limits(1024, 16, 0)).head().uri,
        "/0123456789abcde"
    );
    let over = b"GET /0123456789abcdef HTTP/1.1\r\nHost: a\r\n\r\n";
    assert_eq!(error_kind(over, limits(1024, 16, 0)), ErrorKind::UriTooLong);
    assert_eq!(ErrorKind::UriTooLong.status(), StatusCode::URI_TOO_LONG);
    let absolute = b"GET http://a.example/0123456 HTTP/1.1\r\nHost: a\r\n\r\n";
    assert_eq!(
        error_kind(absolute, limits(1024, 16, 0)),
        ErrorKind::UriTooLong
    );
}

#[test]
fn long_uri_is_refused_before_the_request_line_ends() {
    let partial = b"GET /0123456789abcdef";
    assert_eq!(
        error_kind(partial, limits(1024, 16, 0)),
        ErrorKind::UriTooLong
    );
    let mut decoder = RequestDecoder::new(limits(1024, 16, 0));
    let mut buf = BytesMut::from(&partial[..partial.len() - 1]);
    assert_eq!(decoder.decode(&mut buf), Ok(None));
    buf.extend_from_slice(b"f");
    assert_eq!(
        decoder.decode(&mut buf).unwrap_err().kind(),
        ErrorKind::UriTooLong
    );
}

#[test]
fn default_uri_limit() {
    let input = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "u".repeat(8 * 1024));
    assert_eq!(common::status(input.as_bytes()), StatusCode::URI_TOO_LONG);
    let input = format!(
        "GET /{} HTTP/1.1\r\nHost: a\r\n\r\n",
        "u".repeat(8 * 1024 - 1)
    );
    assert_eq!(decode(input.as_bytes()).error, None);
}

#[test]
fn head_limit_wins_when_it_is_the_smaller() {
    // The URI never exceeds its limit within the head's budget, so this is a 431.
    let input = b"GET /0123456789abcdefghijklmnopqrstuvwxyz HTTP/1.1\r\n";
    assert_eq!(
        error_kind(input, limits(20, 64, 0)),
        ErrorKind::HeaderTooLarge
    );
}

#[test]
fn content_length_over_the_body_limit() {
    let at = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n0123456789";
    assert_eq!(
        body(&decode_all_ways(at, limits(1024, 64, 10))),
        b"0123456789"
    );
    // Refused at the head, before any body byte arrives.
    let over = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n";
    assert_eq!(
        error_kind(over, limits(1024, 64, 10)),
        ErrorKind::BodyTooLarge
    );
    assert_eq!(
        ErrorKind::BodyTooLarge.status(),
        StatusCode::PAYLOAD_TOO_LARGE
    );
    let huge = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551615\r\n\r\n";
    assert_eq!(common::status(huge), StatusCode::PAYLOAD_TOO_LARGE);
}

#[test]
fn content_length_up_to_u64_max_when_allowed() {
    let unlimited = limits(1024, 64, u64::MAX);
    let input = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551615\r\n\r\nabc";
    let outcome = decode_all_ways(input, unlimited);
    assert_eq!(outcome.head().body, BodyKind::Length(u64::MAX));
    assert_eq!(body(&outcome), b"abc");
}

#[test]
fn chunked_total_over_the_body_limit() {
    let head = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    let at = format!("{head}4\r\n0123\r\n6\r\n456789\r\n0\r\n\r\n");
    let outcome = decode_all_ways(at.as_bytes(), limits(1024, 64, 10));
    assert_eq!(body(&outcome), b"0123456789");
    // The second size line takes the total over: refused there, after the first chunk.
    let over = format!("{head}4\r\n0123\r\n7\r\n4567890\r\n0\r\n\r\n");
    let outcome = decode_all_ways(over.as_bytes(), limits(1024, 64, 10));
    assert_eq!(outcome.error, Some(ErrorKind::BodyTooLarge));
    assert_eq!(outcome.items.get(1), Some(&Item::Body(b"0123".to_vec())));
    // One huge chunk: refused at its size line.
    let huge = format!("{head}ffffffffffffffff\r\n");
    assert_eq!(
        common::status(huge.as_bytes()),
        StatusCode::PAYLOAD_TOO_LARGE
    );
}

#[test]
fn chunk_line_length_is_capped() {
    let head = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    let at = format!(
        "{head}5;{}\r\nhello\r\n0\r\n\r\n",
        "e".repeat(CHUNK_LINE_BYTES_MAX - 3)
    );
    assert_eq!(body(&decode(at.as_bytes())), b"hello");
    let ext = format!("{head}5;{}", "e".repeat(CHUNK_LINE_BYTES_MAX - 1));
    assert_eq!(
        error_kind(ext.as_bytes(), Limits::default()),
        ErrorKind::ChunkLineTooLong
    );
    let zeros = format!(
        "{head}{}5\r\nhello\r\n0\r\n\r\n",
        "0".repeat(CHUNK_LINE_BYTES_MAX)
    );
    assert_eq!(
        error_kind(zeros.as_bytes(), Limits::default()),
        ErrorKind::ChunkLineTooLong
    );
}

#[test]
fn trailers_share_the_head_budget() {
    let head = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    let trailers = b"0\r\nX-Checksum: 0123456789\r\n\r\n";
    let input = [&head[..], trailers].concat();
    // head + trailer fields (after "0\r\n", less the final CRLF) exactly at the limit.
    let at = head.len() + trailers.len() - 5;
    let outcome = decode_all_ways(&input, limits(at, 64, 10));
    assert!(matches!(outcome.items.last(), Some(Item::End(Some(_)))));
    let outcome = decode_all_ways(&input, limits(at - 1, 64, 10));
    assert_eq!(outcome.error, Some(ErrorKind::TrailerTooLarge));
    assert_eq!(
        outcome.status(),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
    );
    // A head that used the whole budget still gets its body's final CRLF.
    let outcome = decode_all_ways(
        &[&head[..], b"0\r\n\r\n"].concat(),
        limits(head.len(), 64, 10),
    );
    assert_eq!(outcome.items.last(), Some(&Item::End(None)));
    // An endless trailer section is refused without waiting for its end.
    let endless = [&head[..], b"0\r\n", &b"X: y\r\n".repeat(100)].concat();
    assert_eq!(
        error_kind(&endless, limits(256, 64, 10)),
        ErrorKind::TrailerTooLarge
    );
}

#[test]
fn too_many_trailers() {
    let few = Limits {
        headers_count_max: 2,
        ..Limits::default()
    };
    let input = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    assert_eq!(error_kind(input, few), ErrorKind::TooManyHeaders);
}
