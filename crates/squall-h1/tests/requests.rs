//! Well-formed requests: what the decoder yields for them, fed at every split.

mod common;

use bytes::BytesMut;
use common::{Item, body, decode, decode_all_ways};
use http::{HeaderMap, HeaderValue, Method, Version};
use squall_h1::{BodyKind, Event, Limits, RequestDecoder, RequestFraming};

#[test]
fn simple_get() {
    let outcome =
        decode(b"GET /index.html?q=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n");
    let head = outcome.head();
    assert_eq!(head.method, Method::GET);
    assert_eq!(head.uri, "/index.html?q=1");
    assert_eq!(head.version, Version::HTTP_11);
    assert_eq!(head.headers.len(), 2);
    assert_eq!(head.headers.get("host").unwrap(), "example.com");
    assert_eq!(head.headers.get("accept").unwrap(), "*/*");
    assert!(head.keep_alive);
    assert!(!head.expect_continue);
    assert_eq!(head.body, BodyKind::Empty);
    assert_eq!(head.host(), Some("example.com"));
    assert_eq!(outcome.items.len(), 2);
    assert_eq!(outcome.items[1], Item::End(None));
    assert!(outcome.leftover.is_empty());
    assert!(outcome.between_messages);
}

#[test]
fn field_values_are_trimmed_and_case_kept() {
    let outcome = decode(b"GET / HTTP/1.1\r\nHost:ex.com\r\nX-A: \t Some Value \t\r\nX-Empty:\r\nX-Obs: caf\xc3\xa9\r\n\r\n");
    let head = outcome.head();
    assert_eq!(head.headers.get("host").unwrap(), "ex.com");
    assert_eq!(head.headers.get("x-a").unwrap(), "Some Value");
    assert_eq!(head.headers.get("x-empty").unwrap(), "");
    assert_eq!(
        head.headers.get("x-obs").unwrap().as_bytes(),
        b"caf\xc3\xa9"
    );
}

#[test]
fn repeated_fields_keep_their_order() {
    let outcome =
        decode(b"GET / HTTP/1.1\r\nHost: a\r\nCookie: a=1\r\nX: y\r\ncookie: b=2\r\n\r\n");
    let cookies: Vec<_> = outcome.head().headers.get_all("cookie").iter().collect();
    assert_eq!(cookies, ["a=1", "b=2"]);
}

#[test]
fn incomplete_head_waits_and_consumes_nothing() {
    let input = b"GET / HTTP/1.1\r\nHost: a\r\n";
    let outcome = decode(input);
    assert!(outcome.items.is_empty());
    assert_eq!(outcome.leftover, input);
    assert!(outcome.between_messages);
}

#[test]
fn keep_alive_matrix() {
    let cases: [(&str, &str, bool); 10] = [
        ("HTTP/1.1", "", true),
        ("HTTP/1.1", "Connection: close\r\n", false),
        ("HTTP/1.1", "Connection: CLOSE\r\n", false),
        ("HTTP/1.1", "Connection: keep-alive\r\n", true),
        ("HTTP/1.1", "Connection: keep-alive, close\r\n", false),
        (
            "HTTP/1.1",
            "Connection: Upgrade\r\nConnection: close\r\n",
            false,
        ),
        ("HTTP/1.0", "", false),
        ("HTTP/1.0", "Connection: keep-alive\r\n", true),
        ("HTTP/1.0", "Connection: TE,  Keep-Alive \r\n", true),
        ("HTTP/1.0", "Connection: keep-alive,close\r\n", false),
    ];
    for (version, connection, keep_alive) in cases {
        let input = format!("GET / {version}\r\nHost: a\r\n{connection}\r\n");
        let head = decode(input.as_bytes()).head().clone();
        assert_eq!(head.keep_alive, keep_alive, "{input:?}");
        let expected = if version == "HTTP/1.0" {
            Version::HTTP_10
        } else {
            Version::HTTP_11
        };
        assert_eq!(head.version, expected);
        let framing = head.framing();
        assert_eq!(
            framing,
            RequestFraming {
                version: expected,
                keep_alive,
                is_head: false
            }
        );
    }
}

#[test]
fn http10_needs_no_host() {
    let outcome = decode(b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(outcome.head().host(), None);
    assert!(!outcome.head().keep_alive);
}

#[test]
fn five_pipelined_requests() {
    let mut input = Vec::new();
    input.extend_from_slice(b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\n");
    input.extend_from_slice(b"POST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
    input.extend_from_slice(
        b"PUT /3 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    );
    input.extend_from_slice(b"HEAD /4 HTTP/1.1\r\nHost: a\r\n\r\n");
    input.extend_from_slice(b"GET /5 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    input.extend_from_slice(b"GET /6 HTTP/1.1\r\n");
    let outcome = decode(&input);
    let uris: Vec<_> = outcome.heads().iter().map(|h| h.uri.to_string()).collect();
    assert_eq!(uris, ["/1", "/2", "/3", "/4", "/5"]);
    let bodies: Vec<_> = outcome
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Body(b) => Some(b.as_slice()),
            _ => None,
        })
        .collect();
    assert_eq!(bodies, [&b"hello"[..], b"abc"]);
    let ends = outcome
        .items
        .iter()
        .filter(|i| matches!(i, Item::End(_)))
        .count();
    assert_eq!(ends, 5);
    assert_eq!(outcome.leftover, b"GET /6 HTTP/1.1\r\n");
    assert!(outcome.between_messages);
    assert!(outcome.heads()[3].framing().is_head);
    assert!(!outcome.heads()[4].keep_alive);
}

#[test]
fn content_length_body() {
    let outcome =
        decode(b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\nhello world");
    assert_eq!(outcome.head().body, BodyKind::Length(11));
    assert_eq!(body(&outcome), b"hello world");
    assert_eq!(outcome.items.last(), Some(&Item::End(None)));
    assert!(outcome.leftover.is_empty());
}

#[test]
fn content_length_body_in_progress() {
    let outcome = decode(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nhello");
    assert_eq!(body(&outcome), b"hello");
    assert!(!outcome.items.iter().any(|i| matches!(i, Item::End(_))));
    assert!(!outcome.between_messages);
}

#[test]
fn content_length_zero_and_identical_repeats() {
    let outcome = decode(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(outcome.head().body, BodyKind::Length(0));
    assert_eq!(outcome.items.len(), 2);
    for cl in [
        "Content-Length: 3, 3\r\n",
        "Content-Length: 3\r\nContent-Length: 3\r\n",
        "Content-Length: 003\r\n",
    ] {
        let input = format!("POST / HTTP/1.1\r\nHost: a\r\n{cl}\r\nabc");
        let outcome = decode(input.as_bytes());
        assert_eq!(outcome.head().body, BodyKind::Length(3), "{cl:?}");
        assert_eq!(body(&outcome), b"abc");
    }
}

#[test]
fn data_events_are_slices_of_the_receive_buffer() {
    let mut decoder = RequestDecoder::new(Limits::default());
    let mut buf =
        BytesMut::from(&b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nbody"[..]);
    let body_ptr = buf[buf.len() - 4..].as_ptr();
    assert!(matches!(decoder.decode(&mut buf), Ok(Some(Event::Head(_)))));
    let Ok(Some(Event::Data(data))) = decoder.decode(&mut buf) else {
        panic!("expected Data")
    };
    assert_eq!(data.as_ptr(), body_ptr, "zero-copy body");
    assert_eq!(
        decoder.decode(&mut buf),
        Ok(Some(Event::End { trailers: None }))
    );
    assert_eq!(decoder.decode(&mut buf), Ok(None));
}

#[test]
fn chunked_body_with_extensions_and_trailers() {
    let input = b"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
        5;name=value\r\nhello\r\n\
        6 ; a = \"quoted \\\" str\" ; b\r\n world\r\n\
        A;x;y=z\r\n0123456789\r\n\
        0;last\r\n\
        Checksum: abc\r\nX-Trailer: 1\r\nx-trailer: 2\r\n\r\n";
    let outcome = decode(input);
    assert_eq!(outcome.head().body, BodyKind::Chunked);
    assert_eq!(body(&outcome), b"hello world0123456789");
    let mut trailers = HeaderMap::new();
    trailers.append("checksum", HeaderValue::from_static("abc"));
    trailers.append("x-trailer", HeaderValue::from_static("1"));
    trailers.append("x-trailer", HeaderValue::from_static("2"));
    assert_eq!(outcome.items.last(), Some(&Item::End(Some(trailers))));
    assert!(outcome.leftover.is_empty());
    assert!(outcome.between_messages);
}

#[test]
fn chunked_sizes_are_case_insensitive_hex_with_leading_zeros() {
    let input = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n\
        0000a\r\n0123456789\r\nF\r\n0123456789abcde\r\n000\r\n\r\n";
    let outcome = decode(input);
    assert_eq!(body(&outcome).len(), 25);
    assert_eq!(outcome.items.last(), Some(&Item::End(None)));
}

#[test]
fn chunked_in_progress_consumes_framing() {
    let outcome =
        decode(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel");
    assert_eq!(body(&outcome), b"hel");
    assert!(outcome.leftover.is_empty());
    assert!(!outcome.between_messages);
    // Trailers wait for their blank line without being consumed.
    let outcome =
        decode(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: y\r\n");
    assert_eq!(outcome.leftover, b"X: y\r\n");
}

#[test]
fn transfer_encoding_with_ows_and_empty_elements() {
    // RFC 9110 §5.6.1 and §5.6.3: OWS around the value and empty list elements are fine.
    for te in ["  chunked", "chunked\t", ", chunked", "chunked ,"] {
        let input =
            format!("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:{te}\r\n\r\n0\r\n\r\n");
        assert_eq!(
            decode(input.as_bytes()).head().body,
            BodyKind::Chunked,
            "{te:?}"
        );
    }
}

#[test]
fn head_request_framing() {
    let outcome = decode(b"HEAD / HTTP/1.1\r\nHost: a\r\n\r\n");
    let framing = outcome.head().framing();
    assert!(framing.is_head);
    assert!(framing.keep_alive);
}

#[test]
fn expect_100_continue() {
    let with_body =
        b"PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\nok";
    let outcome = decode(with_body);
    assert!(outcome.head().expect_continue);
    assert_eq!(body(&outcome), b"ok");
    let chunked =
        b"PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert!(decode(chunked).head().expect_continue);
    // No body: nothing to wait for.
    let empty = b"GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n";
    assert!(!decode(empty).head().expect_continue);
    let zero = b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n";
    assert!(!decode(zero).head().expect_continue);
    // HTTP/1.0: ignored (RFC 9110 §10.1.1), whatever the value.
    let http10 = b"PUT / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok";
    assert!(!decode(http10).head().expect_continue);
    let http10 = b"PUT / HTTP/1.0\r\nExpect: teapot\r\nContent-Length: 2\r\n\r\nok";
    assert!(!decode(http10).head().expect_continue);
}

#[test]
fn leading_empty_lines_are_skipped() {
    let outcome = decode(b"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(outcome.head().uri, "/");
    // A stray CRLF after a body (old clients send one) is skipped the same way.
    let outcome = decode(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(outcome.heads()[1].uri, "/2");
}

#[test]
fn extension_methods_are_tokens() {
    for method in ["PURGE", "PROPFIND", "M-SEARCH", "get", "X!#$%&'*+-.^_`|~1"] {
        let input = format!("{method} / HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(decode(input.as_bytes()).head().method.as_str(), method);
    }
}

#[test]
fn request_target_forms() {
    let outcome = decode(b"GET http://Origin.example:8080/p?q HTTP/1.1\r\nHost: other\r\n\r\n");
    let head = outcome.head();
    assert_eq!(head.uri.path(), "/p");
    // RFC 9112 §3.2.2: the absolute-form authority overrides Host.
    assert_eq!(head.host(), Some("Origin.example"));
    let outcome = decode(b"GET https://[2001:db8::1]:443 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(outcome.head().host(), Some("[2001:db8::1]"));
    assert_eq!(outcome.head().uri.path(), "/");
    let outcome = decode(b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(outcome.head().uri, "*");
}

#[test]
fn host_strips_the_port() {
    for (host, expected) in [
        ("example.com", Some("example.com")),
        ("example.com:8080", Some("example.com")),
        ("127.0.0.1:80", Some("127.0.0.1")),
        ("[::1]:8443", Some("[::1]")),
        ("[::1]", Some("[::1]")),
        ("", None),
    ] {
        let input = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
        assert_eq!(decode(input.as_bytes()).head().host(), expected, "{host:?}");
    }
}

#[test]
fn between_messages_tracks_progress() {
    let mut decoder = RequestDecoder::new(Limits::default());
    let mut buf = BytesMut::new();
    assert!(decoder.is_between_messages());
    buf.extend_from_slice(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\n");
    assert!(matches!(decoder.decode(&mut buf), Ok(Some(Event::Head(_)))));
    assert!(!decoder.is_between_messages());
    assert_eq!(decoder.decode(&mut buf), Ok(None));
    buf.extend_from_slice(b"x");
    assert!(matches!(decoder.decode(&mut buf), Ok(Some(Event::Data(_)))));
    assert!(!decoder.is_between_messages());
    assert!(matches!(
        decoder.decode(&mut buf),
        Ok(Some(Event::End { .. }))
    ));
    assert!(decoder.is_between_messages());
    assert!(buf.is_empty());
}

#[test]
fn same_outcome_with_tight_limits() {
    // The head exactly at header_bytes_max, URI exactly at uri_bytes_max, body at its max.
    let input = b"POST /abc HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nxyz";
    let head_len = input.len() - 3;
    let limits = Limits {
        header_bytes_max: head_len,
        uri_bytes_max: 4,
        body_bytes_max: 3,
        headers_count_max: 2,
    };
    let outcome = decode_all_ways(input, limits);
    assert_eq!(outcome.error, None);
    assert_eq!(body(&outcome), b"xyz");
}

/// `take_end` gives a bodiless request whole with its head: the pipelined request after it
/// decodes next, split anywhere; after a head with a body, or between messages, it does
/// nothing.
#[test]
fn take_end_completes_a_bodiless_request_at_its_head() {
    let wire = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhiGET /c HTTP/1.1\r\nHost: x\r\n\r\n";
    for split in 0..=wire.len() {
        let mut decoder = RequestDecoder::new(Limits::default());
        assert!(!decoder.take_end(), "nothing to take before a head");
        let mut buf = BytesMut::from(&wire[..split]);
        let mut rest = &wire[split..];
        let (mut seen, mut received) = (Vec::new(), Vec::new());
        loop {
            match decoder.decode(&mut buf).expect("well-formed") {
                Some(Event::Head(head)) => {
                    let bodiless = head.body == BodyKind::Empty;
                    assert_eq!(decoder.take_end(), bodiless, "{}", head.uri);
                    assert!(!decoder.take_end(), "taken once");
                    seen.push(format!("{} {}", head.method, head.uri));
                    if bodiless {
                        assert!(decoder.is_between_messages());
                    }
                }
                Some(Event::Data(data)) => received.extend_from_slice(&data),
                Some(Event::End { .. }) => seen.push("end".to_owned()),
                None if rest.is_empty() => break,
                None => {
                    buf.extend_from_slice(rest);
                    rest = &[];
                }
            }
        }
        assert_eq!(
            seen,
            ["GET /a", "POST /b", "end", "GET /c"],
            "split at {split}"
        );
        assert_eq!(received, b"hi", "split at {split}");
    }
}
