//! The client role's response decoder on well-formed responses: every body framing of
//! RFC 9112 §6.3, interim responses, persistence, and keep-alive reuse, each fed at every
//! split.

mod common;

use common::response::{Item, Script, decode_all_ways};
use http::{HeaderMap, HeaderValue, Method, StatusCode, Version};
use squall_h1::{ResponseBody, ResponseErrorKind};

fn trailers(fields: &[(&'static str, &'static str)]) -> Option<HeaderMap> {
    let mut map = HeaderMap::new();
    for (name, value) in fields {
        map.append(*name, HeaderValue::from_static(value));
    }
    Some(map)
}

#[test]
fn content_length() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello";
    let outcome = decode_all_ways(input, &Script::get(1));
    let head = outcome.head();
    assert_eq!(head.status, StatusCode::OK);
    assert_eq!(head.version, Version::HTTP_11);
    assert_eq!(&head.reason[..], b"OK");
    assert_eq!(head.headers.get("content-type").unwrap(), "text/plain");
    assert_eq!(head.headers.get("content-length").unwrap(), "5");
    assert!(head.keep_alive && !head.transfer_coded);
    assert_eq!(head.body, ResponseBody::Length(5));
    assert_eq!(
        outcome.items[1..],
        [Item::Body(b"hello".to_vec()), Item::End(None)]
    );
    assert!(outcome.idle && outcome.leftover.is_empty() && outcome.error.is_none());
}

#[test]
fn zero_length_ends_with_the_head() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    let outcome = decode_all_ways(input, &Script::get(1));
    assert_eq!(outcome.head().body, ResponseBody::Length(0));
    assert_eq!(outcome.items.len(), 2);
    assert_eq!(outcome.items[1], Item::End(None));
    assert!(outcome.idle);
}

#[test]
fn chunked_with_extensions_and_trailers() {
    let input = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n\
        5;ext=1\r\nhello\r\n6 ; a ; b=\"q\\\"x\"\r\n world\r\n\
        A\r\n0123456789\r\n0;last\r\nX-Checksum: abc\r\nX-Other: 1\r\n\r\n";
    let outcome = decode_all_ways(input, &Script::get(1));
    assert_eq!(outcome.head().body, ResponseBody::Chunked);
    assert!(outcome.head().keep_alive);
    assert_eq!(outcome.body(0), b"hello world0123456789");
    assert_eq!(
        outcome.items.last(),
        Some(&Item::End(trailers(&[
            ("x-checksum", "abc"),
            ("x-other", "1")
        ])))
    );
    assert!(outcome.idle && outcome.leftover.is_empty());
}

#[test]
fn chunked_without_trailers() {
    let input = b"HTTP/1.1 200 OK\r\ntransfer-encoding: CHUNKED\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    let outcome = decode_all_ways(input, &Script::get(1));
    assert_eq!(outcome.body(0), b"abc");
    assert_eq!(outcome.items.last(), Some(&Item::End(None)));
}

#[test]
fn close_delimited_ends_at_eof() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<html>\r\n\r\nbody</html>";
    let outcome = decode_all_ways(input, &Script::get(1).then_eof());
    let head = outcome.head();
    assert_eq!(head.body, ResponseBody::Close);
    assert!(
        !head.keep_alive,
        "a close-delimited body ends the connection"
    );
    assert_eq!(outcome.body(0), b"<html>\r\n\r\nbody</html>");
    assert_eq!(outcome.items.last(), Some(&Item::End(None)));
    assert!(outcome.idle && outcome.error.is_none());

    // Without the close, the body is still running: no End.
    let outcome = decode_all_ways(input, &Script::get(1));
    assert_eq!(outcome.items.len(), 2, "{outcome:#?}");
    assert!(!outcome.idle);
}

#[test]
fn close_delimited_empty_body() {
    let outcome = decode_all_ways(b"HTTP/1.1 200 OK\r\n\r\n", &Script::get(1).then_eof());
    assert_eq!(outcome.items.len(), 2);
    assert_eq!(outcome.items[1], Item::End(None));
}

#[test]
fn response_to_head_has_no_body() {
    for fields in [
        "Content-Length: 1234\r\n",
        "Transfer-Encoding: chunked\r\n",
        "",
    ] {
        let input = format!("HTTP/1.1 200 OK\r\n{fields}\r\n");
        let outcome = decode_all_ways(input.as_bytes(), &Script::one(Method::HEAD));
        assert_eq!(outcome.head().body, ResponseBody::Absent, "{fields}");
        assert!(outcome.head().keep_alive, "{fields}");
        assert_eq!(outcome.items[1], Item::End(None));
        assert!(outcome.idle);
    }
    // The length a GET would have had is kept for the proxy to forward.
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n";
    let outcome = decode_all_ways(input, &Script::one(Method::HEAD));
    assert_eq!(
        outcome.head().headers.get("content-length").unwrap(),
        "1234"
    );
}

#[test]
fn no_content_and_not_modified_ignore_content_length() {
    for status in ["204 No Content", "304 Not Modified"] {
        let input = format!("HTTP/1.1 {status}\r\nContent-Length: 10\r\nETag: \"x\"\r\n\r\n");
        let outcome = decode_all_ways(input.as_bytes(), &Script::get(1));
        assert_eq!(outcome.head().body, ResponseBody::Absent, "{status}");
        assert_eq!(outcome.items[1], Item::End(None));
        assert!(outcome.idle && outcome.head().keep_alive);

        // A body sent anyway is not taken for the next response.
        let with_body = format!("{input}0123456789");
        let outcome = decode_all_ways(with_body.as_bytes(), &Script::get(1));
        assert_eq!(outcome.error_kind(), ResponseErrorKind::UnsolicitedResponse);
    }
}

#[test]
fn continue_then_ok() {
    let input = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let outcome = decode_all_ways(input, &Script::one(Method::POST));
    let Item::Interim(interim) = &outcome.items[0] else {
        panic!("{outcome:#?}");
    };
    assert_eq!(interim.status, StatusCode::CONTINUE);
    assert_eq!(interim.body, ResponseBody::Absent);
    assert_eq!(outcome.head().status, StatusCode::OK);
    assert_eq!(outcome.body(0), b"ok");
    assert_eq!(outcome.items.len(), 4);
    assert!(outcome.idle);
}

#[test]
fn early_hints_then_ok() {
    let input = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n\
        HTTP/1.1 103 Early Hints\r\nLink: </app.js>; rel=preload; as=script\r\n\r\n\
        HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n";
    let outcome = decode_all_ways(input, &Script::get(1));
    let links: Vec<_> = outcome
        .items
        .iter()
        .filter_map(|item| match item {
            Item::Interim(h) => Some(h.headers.get("link").unwrap().to_str().unwrap().to_owned()),
            _ => None,
        })
        .collect();
    assert_eq!(
        links,
        [
            "</style.css>; rel=preload; as=style",
            "</app.js>; rel=preload; as=script"
        ]
    );
    assert_eq!(outcome.head().status, StatusCode::OK);
    assert_eq!(outcome.body(0), b"hi");
    assert!(outcome.idle);
}

#[test]
fn interim_to_head_request_then_bodiless_final() {
    let input = b"HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n";
    let outcome = decode_all_ways(input, &Script::one(Method::HEAD));
    assert!(matches!(outcome.items[0], Item::Interim(_)));
    assert_eq!(outcome.head().body, ResponseBody::Absent);
    assert!(outcome.idle);
}

#[test]
fn interim_limit_is_inclusive() {
    let mut input = b"HTTP/1.1 103 Early Hints\r\n\r\n".repeat(8);
    input.extend_from_slice(b"HTTP/1.1 204 No Content\r\n\r\n");
    let outcome = decode_all_ways(&input, &Script::get(1));
    assert_eq!(outcome.items.len(), 10);
    assert!(outcome.idle);
}

#[test]
fn http10_persistence() {
    let plain = b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let outcome = decode_all_ways(plain, &Script::get(1));
    assert_eq!(outcome.head().version, Version::HTTP_10);
    assert!(!outcome.head().keep_alive, "HTTP/1.0 closes by default");
    assert_eq!(outcome.body(0), b"ok");

    let keep = b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok";
    let outcome = decode_all_ways(keep, &Script::get(1));
    assert!(outcome.head().keep_alive);

    // Without a length, the body runs until close whatever Connection says.
    let unframed = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\nbody";
    let outcome = decode_all_ways(unframed, &Script::get(1).then_eof());
    assert_eq!(outcome.head().body, ResponseBody::Close);
    assert!(!outcome.head().keep_alive);
    assert_eq!(outcome.body(0), b"body");
    assert!(outcome.idle);
}

#[test]
fn http11_connection_close() {
    let input = b"HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 1\r\n\r\nx";
    let outcome = decode_all_ways(input, &Script::get(1));
    assert!(!outcome.head().keep_alive);
    assert_eq!(outcome.head().body, ResponseBody::Length(1));
    assert!(outcome.idle);
}

#[test]
fn keep_alive_reuse() {
    // GET, HEAD, GET, GET on one connection: length, bodiless, chunked, then 304.
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst\
        HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n\
        HTTP/1.1 103 Early Hints\r\n\r\n\
        HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nthird\r\n0\r\n\r\n\
        HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n";
    let script = Script {
        methods: vec![Method::GET, Method::HEAD, Method::GET, Method::GET],
        ..Script::get(0)
    };
    let outcome = decode_all_ways(input, &script);
    let statuses: Vec<_> = outcome.heads().iter().map(|h| h.status.as_u16()).collect();
    assert_eq!(statuses, [200, 200, 404, 304]);
    assert_eq!(outcome.body(0), b"first");
    assert_eq!(outcome.body(1), b"");
    assert_eq!(outcome.body(2), b"third");
    assert_eq!(outcome.body(3), b"");
    assert!(outcome.heads().iter().all(|h| h.keep_alive));
    assert!(outcome.idle && outcome.leftover.is_empty() && outcome.error.is_none());
}

#[test]
fn eof_between_responses_is_clean() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx";
    let outcome = decode_all_ways(input, &Script::get(1).then_eof());
    assert!(outcome.idle && outcome.error.is_none());
    assert_eq!(outcome.items.len(), 3);
}

#[test]
fn transfer_codings_other_than_chunked() {
    // RFC 9112 §6.3 rule 4: chunked final → chunked, the rest still coded.
    let input =
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\n\x1f\x8b\r\n0\r\n\r\n";
    let outcome = decode_all_ways(input, &Script::get(1));
    assert_eq!(outcome.head().body, ResponseBody::Chunked);
    assert!(outcome.head().transfer_coded && outcome.head().keep_alive);
    assert_eq!(outcome.body(0), b"\x1f\x8b");

    // Chunked not final → until close.
    for te in ["gzip", "chunked, gzip", "identity"] {
        let input = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: {te}\r\n\r\nraw bytes");
        let outcome = decode_all_ways(input.as_bytes(), &Script::get(1).then_eof());
        let head = outcome.head();
        assert_eq!(head.body, ResponseBody::Close, "{te}");
        assert!(head.transfer_coded && !head.keep_alive, "{te}");
        assert_eq!(outcome.body(0), b"raw bytes");
        assert!(outcome.idle);
    }
}

#[test]
fn status_lines() {
    let cases: &[(&[u8], u16, &[u8])] = &[
        (b"HTTP/1.1 200\r\n", 200, b""),
        (b"HTTP/1.1 200 \r\n", 200, b""),
        (b"HTTP/1.1 404 Not  Found \r\n", 404, b"Not  Found "),
        (b"HTTP/1.1 599 Custom\tthing\r\n", 599, b"Custom\tthing"),
        (b"HTTP/1.1 999 x\r\n", 999, b"x"),
        (b"HTTP/1.1 200 Caf\xc3\xa9\r\n", 200, b"Caf\xc3\xa9"),
    ];
    for (line, status, reason) in cases {
        let mut input = line.to_vec();
        input.extend_from_slice(b"Content-Length: 0\r\n\r\n");
        let outcome = decode_all_ways(&input, &Script::get(1));
        assert_eq!(outcome.head().status.as_u16(), *status);
        assert_eq!(&outcome.head().reason[..], *reason);
        assert!(outcome.idle);
    }
}

#[test]
fn fields_are_kept_in_order_with_repeats() {
    let input = b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nVary: Accept\r\nSet-Cookie: b=2\r\n\
        X-Empty:\r\nX-Obs: caf\xe9\r\nContent-Length: 0\r\n\r\n";
    let outcome = decode_all_ways(input, &Script::get(1));
    let head = outcome.head();
    let cookies: Vec<_> = head.headers.get_all("set-cookie").iter().collect();
    assert_eq!(cookies, ["a=1", "b=2"]);
    assert_eq!(head.headers.get("x-empty").unwrap(), "");
    assert_eq!(head.headers.get("x-obs").unwrap().as_bytes(), b"caf\xe9");
}

#[test]
fn large_body_streams_through() {
    let body = vec![b'x'; 200_000];
    let mut input = b"HTTP/1.1 200 OK\r\nContent-Length: 200000\r\n\r\n".to_vec();
    input.extend_from_slice(&body);
    let outcome = decode_all_ways(&input, &Script::get(1));
    assert_eq!(outcome.body(0), body);
    assert!(outcome.idle);
}
