//! The exchange streaming both ways: bodies larger than the high-water mark, a client that
//! pauses, the origin held back and let go, uploads held at the mark until the origin takes
//! them, and request trailers.

mod exchange_support;

use std::time::Duration;

use exchange_support::{HIGH, Pair, RESPONSE_TIMEOUT, Server, head, splits};
use http::{HeaderMap, HeaderValue};
use squall_proxy::ClientProtocol;

#[test]
fn a_download_pauses_the_origin_while_the_client_has_no_room() {
    let body = "y".repeat(3 * HIGH);
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    for size in [1, 100, HIGH, 3 * HIGH + 100] {
        let mut pair = Pair::new("GET /big HTTP/1.1\r\nHost: x\r\n\r\n", &[Server::Accept]);
        pair.run();
        let pieces: Vec<&[u8]> = response.as_bytes().chunks(size).collect();
        pair.origin_sends(&pieces);
        // Room for HIGH bytes, then the origin is paused and the rest waits undecoded.
        assert_eq!(pair.flow, ["pause"], "piece size {size}");
        let seen = pair.client[1].len() - "data ".len();
        assert!(
            (HIGH..HIGH + size).contains(&seen),
            "{seen} with pieces of {size}"
        );
        // Paused on the client, not silent: the response timeout does not fire.
        pair.advance(RESPONSE_TIMEOUT * 3);
        assert!(!pair.ex.is_finished());
        // A little room is not enough to resume (hysteresis) but lets a little more through.
        pair.client_room(HIGH / 4);
        assert_eq!(pair.flow, ["pause"]);
        while !pair.ex.is_finished() {
            pair.client_room(HIGH);
        }
        // Unless the whole body came in the first read, the origin was read again.
        if size < body.len() {
            assert_eq!(pair.flow[..2], ["pause", "resume"], "piece size {size}");
        } else {
            assert_eq!(pair.conns[0].released, Some(false), "ended while paused");
        }
        assert_eq!(pair.client[1], format!("data {body}"));
        assert_eq!(pair.client[2], "end [] unfinished=false");
    }
}

/// A client whose shared bound leaves it little room even when it has drained everything (an
/// HTTP/2 stream among many, a process over its buffer budget) still resumes its origin: any
/// room does, once nothing waits for it.
#[test]
fn a_drained_client_resumes_on_any_room() {
    let body = "z".repeat(3 * HIGH);
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut pair = Pair::new("GET /big HTTP/1.1\r\nHost: x\r\n\r\n", &[Server::Accept]);
    pair.run();
    let (head, rest) = response
        .as_bytes()
        .split_at(response.len() - body.len() + HIGH);
    pair.origin_sends(&[head]);
    assert_eq!(pair.flow, ["pause"]);
    assert_eq!(pair.ex.buffered_bytes(), 0, "all of it went to the client");
    // A small room does not resume (hysteresis) while bytes still wait for the client...
    pair.client_room(HIGH / 8);
    assert_eq!(pair.flow, ["pause"]);
    // ...but does once the client has drained.
    pair.ex.on_client_room_drained(HIGH / 8, pair.now);
    pair.run();
    assert_eq!(pair.flow, ["pause", "resume"]);
    // What comes while it has no room waits undecoded, and goes as rooms come.
    for piece in rest.chunks(HIGH / 8) {
        pair.origin_sends(&[piece]);
        assert!(pair.ex.buffered_bytes() <= piece.len());
        pair.ex.on_client_room_drained(HIGH / 8, pair.now);
        pair.run();
    }
    assert!(pair.ex.is_finished());
    assert_eq!(pair.client[1], format!("data {body}"));
    assert_eq!(pair.ex.buffered_bytes(), 0);
}

#[test]
fn a_streamed_upload_waits_for_the_origin_to_take_it() {
    let raw = "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    let mut pair = Pair::new(raw, &[Server::Accept]);
    pair.hold_sends = true;
    pair.run();
    let head_len = pair.conns[0].written.len();
    assert_eq!(
        pair.ex.request_body_room(),
        HIGH - head_len,
        "the head waits too"
    );
    let piece = vec![b'u'; 100];
    let mut taken = 0;
    while pair.ex.request_body_room() > 0 {
        pair.client_sends(&[&piece]);
        taken += piece.len();
    }
    // Each piece went on as a chunk the moment it came, but the client's window comes back
    // only as the origin's socket takes the bytes: none yet.
    let sent = pair.written(0);
    assert!(sent[head_len..].starts_with(&format!("64\r\n{}\r\n", "u".repeat(100))));
    assert_eq!(
        pair.body_consumed, 0,
        "given back before the origin took it"
    );
    pair.ack_sends();
    assert_eq!(pair.ex.request_body_room(), HIGH, "the origin took it all");
    assert_eq!(pair.body_consumed, taken, "all given back once taken");
    pair.client_sends(&[b"end"]);
    pair.ex.on_client_end(None);
    pair.run();
    assert_eq!(pair.body_consumed, taken);
    assert!(pair.written(0).ends_with("3\r\nend\r\n0\r\n\r\n"));
    // A long upload is progress, not a silent origin.
    pair.advance(RESPONSE_TIMEOUT - Duration::from_millis(1));
    pair.ack_sends();
    assert_eq!(pair.body_consumed, taken + 3);
    pair.advance(RESPONSE_TIMEOUT - Duration::from_millis(1));
    assert!(!pair.ex.is_finished());
    pair.origin_sends(&[b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"]);
    assert_eq!(
        pair.client.last().map(String::as_str),
        Some("end [] unfinished=false")
    );
    assert_eq!(pair.conns[0].released, Some(true));
}

#[test]
fn a_response_before_the_upload_ended_closes_both_sides() {
    let raw = "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n";
    let response = b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\n\r\n";
    for pieces in splits(response) {
        let mut pair = Pair::new(raw, &[Server::Accept]);
        pair.run();
        pair.client_sends(&[b"abc"]);
        pair.origin_sends(&pieces);
        assert_eq!(
            pair.client,
            [
                "head 413 len=Some(0) Length(0) keep_alive=true []",
                "end [] unfinished=true"
            ]
        );
        // The origin has part of a request: it cannot take another on this connection.
        assert_eq!(pair.conns[0].released, Some(false));
        pair.client_sends(&[b"defg"]);
        assert!(
            pair.written(0).ends_with("\r\n\r\nabc"),
            "nothing after the end"
        );
    }
}

#[test]
fn request_trailers_go_in_the_last_chunk() {
    let raw = "POST /t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    let mut trailers = HeaderMap::new();
    trailers.insert("x-checksum", HeaderValue::from_static("abc"));
    let mut pair = Pair::new(raw, &[Server::Accept]);
    pair.run();
    pair.client_sends(&[b"data"]);
    pair.ex.on_client_end(Some(&trailers));
    pair.run();
    assert!(
        pair.written(0)
            .ends_with("\r\n\r\n4\r\ndata\r\n0\r\nx-checksum: abc\r\n\r\n"),
        "{}",
        pair.written(0)
    );
    // A body of declared length has no place for them (RFC 9112 §7.1.2): dropped.
    let mut h2 = head("POST /t HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n");
    h2.version = http::Version::HTTP_2;
    let mut pair = Pair::with(h2, ClientProtocol::H2, false, &[Server::Accept]);
    pair.run();
    pair.client_sends(&[b"data"]);
    pair.ex.on_client_end(Some(&trailers));
    pair.run();
    assert!(pair.written(0).ends_with("\r\n\r\ndata"));
}

#[test]
fn a_cached_route_shows_the_fill_the_response_and_its_clean_end() {
    let response =
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nCache-Control: max-age=60\r\n\r\nhello";
    for pieces in splits(response) {
        let h = head("GET /c HTTP/1.1\r\nHost: x\r\n\r\n");
        let mut pair = Pair::with(h, ClientProtocol::Http11, true, &[Server::Accept]);
        pair.run();
        pair.origin_sends(&pieces);
        let data: usize = (pair.fills.iter())
            .filter_map(|f| f.strip_prefix("data "))
            .map(|n| n.parse::<usize>().unwrap_or(0))
            .sum();
        assert_eq!(
            pair.fills.first().map(String::as_str),
            Some("head 200 Some(5)")
        );
        assert_eq!(pair.fills.last().map(String::as_str), Some("end"));
        assert_eq!(data, 5);
    }
    // The cache answered the client itself at the head: the origin's body is read, dropped.
    let h = head("GET /c HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut pair = Pair::with(h, ClientProtocol::Http11, true, &[Server::Accept]);
    pair.run();
    pair.ex
        .on_origin_data(b"HTTP/1.1 304 Not Modified\r\n\r\n", pair.now);
    assert!(matches!(
        squall_proxy::Exchange::poll_action(&mut pair.ex),
        Some(squall_proxy::Action::Fill(_))
    ));
    pair.ex.on_answered_elsewhere();
    pair.run();
    assert!(pair.client.is_empty());
    assert_eq!(pair.conns[0].released, Some(true));
}

#[test]
fn a_refetch_resends_the_request_with_other_fields_and_drops_the_first_response() {
    let not_modified = b"HTTP/1.1 304 Not Modified\r\nETag: \"other\"\r\n\r\n";
    let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfresh";
    for pieces in splits(ok) {
        let raw = "GET /c HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"stored\"\r\n\r\n";
        let mut pair = Pair::with(head(raw), ClientProtocol::Http11, true, &[Server::Accept]);
        pair.run();
        pair.ex.on_origin_data(not_modified, pair.now);
        // The fill sees the 304's head first, before the client would.
        assert!(matches!(
            squall_proxy::Exchange::poll_action(&mut pair.ex),
            Some(squall_proxy::Action::Fill(
                squall_proxy::FillHook::Head { .. }
            ))
        ));
        let mut client_fields = http::HeaderMap::new();
        client_fields.insert(http::header::HOST, "x".parse().unwrap());
        pair.ex.refetch(client_fields, pair.now);
        pair.run();
        assert!(pair.client.is_empty(), "the 304 never reaches the client");
        // The 304 was read whole, so its connection went back to the pool and carries the
        // request again.
        assert_eq!(pair.conns[0].released, Some(true));
        assert_eq!(pair.conns.len(), 2, "sent again");
        assert!(pair.conns[1].reused);
        assert!(pair.written(1).starts_with("GET /c HTTP/1.1\r\n"));
        assert!(
            !pair.written(1).to_lowercase().contains("if-none-match"),
            "{}",
            pair.written(1)
        );
        pair.origin_sends(&pieces);
        assert_eq!(
            pair.client,
            [
                "head 200 len=Some(5) Length(5) keep_alive=true []",
                "data fresh",
                "end [] unfinished=false"
            ]
        );
        assert_eq!(pair.reports.len(), 2, "one report per pick");
        assert!(pair.ex.is_finished());
    }
}
