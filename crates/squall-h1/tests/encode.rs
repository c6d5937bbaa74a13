//! The response encoder, byte for byte.

use bytes::BytesMut;
use http::{HeaderMap, HeaderValue, StatusCode, Version};
use squall_h1::{
    RequestFraming, ResponseBody, ResponseFraming, ResponseHead, encode_chunk, encode_chunk_header,
    encode_continue, encode_error, encode_last_chunk, encode_response_head, response_framing,
};

const DATE: &[u8] = b"Sun, 06 Nov 1994 08:49:37 GMT";

const H11: RequestFraming = RequestFraming {
    version: Version::HTTP_11,
    keep_alive: true,
    is_head: false,
};
const H11_CLOSE: RequestFraming = RequestFraming {
    keep_alive: false,
    ..H11
};
const H10: RequestFraming = RequestFraming {
    version: Version::HTTP_10,
    keep_alive: false,
    is_head: false,
};
const H10_KEEP: RequestFraming = RequestFraming {
    keep_alive: true,
    ..H10
};
const HEAD11: RequestFraming = RequestFraming {
    is_head: true,
    ..H11
};

/// Encodes a head with the given status and length, no fields; returns (bytes, body?).
fn encode(status: StatusCode, body_len: Option<u64>, req: RequestFraming) -> (String, bool) {
    let headers = HeaderMap::new();
    let head = ResponseHead {
        status,
        headers: &headers,
        raw_headers: b"",
        body_len,
    };
    let mut out = BytesMut::new();
    let body = encode_response_head(&head, req, DATE, &mut out);
    (String::from_utf8(out.to_vec()).unwrap(), body)
}

#[test]
fn ok_with_length_and_fields() {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("text/plain"));
    headers.append("set-cookie", HeaderValue::from_static("a=1"));
    headers.append("set-cookie", HeaderValue::from_static("b=2"));
    let head = ResponseHead {
        status: StatusCode::OK,
        headers: &headers,
        raw_headers: b"Server: squall\r\nX-Cache: HIT\r\n",
        body_len: Some(13),
    };
    let mut out = BytesMut::from(&b"previous"[..]);
    assert!(encode_response_head(&head, H11, DATE, &mut out));
    assert_eq!(
        &out[..],
        b"previousHTTP/1.1 200 OK\r\n\
          date: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
          content-length: 13\r\n\
          content-type: text/plain\r\n\
          set-cookie: a=1\r\n\
          set-cookie: b=2\r\n\
          Server: squall\r\nX-Cache: HIT\r\n\
          \r\n"
    );
}

#[test]
fn chunked_for_http11_with_unknown_length() {
    let (bytes, body) = encode(StatusCode::OK, None, H11);
    assert_eq!(
        bytes,
        "HTTP/1.1 200 OK\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    assert!(body);
}

#[test]
fn close_delimited_for_http10_with_unknown_length() {
    let (bytes, body) = encode(StatusCode::OK, None, H10_KEEP);
    assert_eq!(
        bytes,
        "HTTP/1.1 200 OK\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\nconnection: close\r\n\r\n"
    );
    assert!(body);
    let framing = response_framing(StatusCode::OK, None, H10_KEEP);
    assert_eq!(
        framing,
        ResponseFraming {
            body: ResponseBody::Close,
            keep_alive: false
        }
    );
}

#[test]
fn connection_field_by_version_and_persistence() {
    let date = "date: Sun, 06 Nov 1994 08:49:37 GMT\r\n";
    let (bytes, _) = encode(StatusCode::OK, Some(0), H11_CLOSE);
    assert_eq!(
        bytes,
        format!("HTTP/1.1 200 OK\r\n{date}content-length: 0\r\nconnection: close\r\n\r\n")
    );
    let (bytes, _) = encode(StatusCode::OK, Some(0), H10);
    assert_eq!(
        bytes,
        format!("HTTP/1.1 200 OK\r\n{date}content-length: 0\r\nconnection: close\r\n\r\n")
    );
    let (bytes, _) = encode(StatusCode::OK, Some(0), H10_KEEP);
    assert_eq!(
        bytes,
        format!("HTTP/1.1 200 OK\r\n{date}content-length: 0\r\nconnection: keep-alive\r\n\r\n")
    );
    let (bytes, _) = encode(StatusCode::OK, Some(0), H11);
    assert_eq!(
        bytes,
        format!("HTTP/1.1 200 OK\r\n{date}content-length: 0\r\n\r\n")
    );
}

#[test]
fn head_responses_carry_the_get_length_but_no_body() {
    let (bytes, body) = encode(StatusCode::OK, Some(1234), HEAD11);
    assert_eq!(
        bytes,
        "HTTP/1.1 200 OK\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\ncontent-length: 1234\r\n\r\n"
    );
    assert!(!body);
    // Unknown length: no framing field, and the connection can stay open.
    let (bytes, body) = encode(StatusCode::OK, None, HEAD11);
    assert_eq!(
        bytes,
        "HTTP/1.1 200 OK\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n"
    );
    assert!(!body);
    let head10 = RequestFraming {
        is_head: true,
        ..H10_KEEP
    };
    assert_eq!(
        response_framing(StatusCode::OK, None, head10),
        ResponseFraming {
            body: ResponseBody::Absent,
            keep_alive: true
        }
    );
}

#[test]
fn not_modified_carries_the_length_but_no_body() {
    let (bytes, body) = encode(StatusCode::NOT_MODIFIED, Some(42), H11);
    assert_eq!(
        bytes,
        "HTTP/1.1 304 Not Modified\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\ncontent-length: 42\r\n\r\n"
    );
    assert!(!body);
    let (bytes, _) = encode(StatusCode::NOT_MODIFIED, None, H11);
    assert_eq!(
        bytes,
        "HTTP/1.1 304 Not Modified\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n"
    );
}

#[test]
fn no_content_and_informational_have_no_framing_fields() {
    let (bytes, body) = encode(StatusCode::NO_CONTENT, Some(10), H11_CLOSE);
    assert_eq!(
        bytes,
        "HTTP/1.1 204 No Content\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\nconnection: close\r\n\r\n"
    );
    assert!(!body);
    let (bytes, body) = encode(StatusCode::NO_CONTENT, None, H11);
    assert_eq!(
        bytes,
        "HTTP/1.1 204 No Content\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n"
    );
    assert!(!body);
    let (bytes, body) = encode(StatusCode::from_u16(103).unwrap(), Some(5), H11_CLOSE);
    assert_eq!(
        bytes,
        "HTTP/1.1 103 Early Hints\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n"
    );
    assert!(!body);
}

#[test]
fn unknown_status_has_an_empty_reason() {
    let (bytes, _) = encode(StatusCode::from_u16(599).unwrap(), Some(0), H11);
    assert!(bytes.starts_with("HTTP/1.1 599 \r\n"), "{bytes:?}");
}

#[test]
fn continue_line() {
    let mut out = BytesMut::new();
    encode_continue(&mut out);
    assert_eq!(&out[..], b"HTTP/1.1 100 Continue\r\n\r\n");
}

#[test]
fn chunks() {
    let mut out = BytesMut::new();
    encode_chunk(b"hello", &mut out);
    encode_chunk(b"", &mut out);
    encode_chunk(&[b'x'; 26], &mut out);
    encode_chunk_header(0x1234_abcd, &mut out);
    assert_eq!(
        &out[..],
        [
            &b"5\r\nhello\r\n1a\r\n"[..],
            &[b'x'; 26],
            b"\r\n1234abcd\r\n"
        ]
        .concat()
    );
}

#[test]
fn last_chunk_with_and_without_trailers() {
    let mut out = BytesMut::new();
    encode_last_chunk(None, &mut out);
    assert_eq!(&out[..], b"0\r\n\r\n");
    let mut trailers = HeaderMap::new();
    trailers.insert("checksum", HeaderValue::from_static("abc"));
    trailers.append("x-t", HeaderValue::from_static("1"));
    let mut out = BytesMut::new();
    encode_last_chunk(Some(&trailers), &mut out);
    assert_eq!(&out[..], b"0\r\nchecksum: abc\r\nx-t: 1\r\n\r\n");
}

#[test]
fn error_responses() {
    let mut out = BytesMut::new();
    encode_error(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, DATE, &mut out);
    assert_eq!(
        &out[..],
        b"HTTP/1.1 431 Request Header Fields Too Large\r\n\
          date: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
          content-type: text/plain\r\n\
          content-length: 36\r\n\
          connection: close\r\n\
          \r\n\
          431 Request Header Fields Too Large\n"
    );
    let mut out = BytesMut::new();
    encode_error(StatusCode::BAD_REQUEST, DATE, &mut out);
    assert_eq!(
        &out[..],
        b"HTTP/1.1 400 Bad Request\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
          content-type: text/plain\r\ncontent-length: 16\r\nconnection: close\r\n\r\n400 Bad Request\n"
    );
}

#[test]
fn error_responses_parse_back_with_their_length() {
    for code in [400, 408, 413, 414, 417, 431, 501, 505, 599] {
        let mut out = BytesMut::new();
        encode_error(StatusCode::from_u16(code).unwrap(), DATE, &mut out);
        let mut fields = [httparse::EMPTY_HEADER; 8];
        let mut response = httparse::Response::new(&mut fields);
        let httparse::Status::Complete(len) = response.parse(&out).unwrap() else {
            panic!("partial")
        };
        assert_eq!(response.code, Some(code));
        let length = response
            .headers
            .iter()
            .find(|f| f.name == "content-length")
            .unwrap();
        let length: usize = std::str::from_utf8(length.value).unwrap().parse().unwrap();
        assert_eq!(out.len() - len, length, "code {code}");
    }
}

#[test]
fn framing_decisions() {
    use ResponseBody::*;
    let cases = [
        (200, Some(5), H11, Length(5), true),
        (200, None, H11, Chunked, true),
        (200, None, H11_CLOSE, Chunked, false),
        (200, None, H10, Close, false),
        (200, Some(5), H10_KEEP, Length(5), true),
        (200, Some(5), HEAD11, Absent, true),
        (304, Some(5), H11, Absent, true),
        (204, None, H11, Absent, true),
        (101, None, H11, Absent, true),
    ];
    for (status, len, req, body, keep_alive) in cases {
        let status = StatusCode::from_u16(status).unwrap();
        assert_eq!(
            response_framing(status, len, req),
            ResponseFraming { body, keep_alive },
            "{status} {len:?} {req:?}"
        );
    }
}
