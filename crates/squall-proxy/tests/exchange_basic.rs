//! The exchange on the happy paths: a plain GET, re-framing for each client protocol, HEAD,
//! and keep-alive reuse of the origin connection after a clean end.

mod exchange_support;

use exchange_support::{Pair, Server, head, splits};
use squall_proxy::ClientProtocol;
use squall_upstream::Outcome;

const GET: &str = "GET /p/x?q=1 HTTP/1.1\r\nHost: example.test\r\nAccept: */*\r\n\r\n";

/// What the origin is sent for [`GET`]: the client's fields, then the forwarding fields.
const GET_TO_ORIGIN: &str = "GET /p/x?q=1 HTTP/1.1\r\nHost: example.test\r\naccept: */*\r\n\
    x-forwarded-for: 192.0.2.7\r\nx-forwarded-proto: http\r\n\
    forwarded: for=192.0.2.7;proto=http\r\nvia: 1.1 squall\r\n\r\n";

#[test]
fn a_plain_get_is_forwarded_and_answered() {
    let response = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: o\r\nDate: x\r\n\r\nhello";
    for pieces in splits(response) {
        let mut pair = Pair::new(GET, &[Server::Accept]);
        pair.run();
        assert_eq!(pair.written(0), GET_TO_ORIGIN);
        assert!(pair.client.is_empty(), "nothing before the origin answers");
        pair.origin_sends(&pieces);
        assert_eq!(
            pair.client,
            [
                "head 200 len=Some(5) Length(5) keep_alive=true [server: o]",
                "data hello",
                "end [] unfinished=false",
            ],
            "{pieces:?}"
        );
        assert_eq!(pair.reports, [(0, Outcome::Success, None)]);
        assert_eq!(
            pair.conns[0].released,
            Some(true),
            "a clean end keeps the connection"
        );
        assert!(pair.ex.is_finished() && pair.ex.next_deadline().is_none());
    }
}

#[test]
fn a_chunked_response_is_reframed_for_an_http10_client() {
    let response = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n";
    let raw = "GET /p/c HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
    for pieces in splits(response) {
        let mut pair = Pair::with(head(raw), ClientProtocol::Http10, false, &[Server::Accept]);
        pair.run();
        pair.origin_sends(&pieces);
        // No length: HTTP/1.0 gets the body until close, so its connection cannot persist,
        // and the response trailers have nowhere to go.
        assert_eq!(
            pair.client,
            [
                "head 200 len=None UntilClose keep_alive=false []",
                "data hello world",
                "end [] unfinished=false",
            ]
        );
        // The origin connection is fine, whatever the client's framing.
        assert_eq!(pair.conns[0].released, Some(true));
    }
}

#[test]
fn a_chunked_response_stays_chunked_for_http11_with_its_trailers() {
    let response =
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-T: 1\r\n\r\n";
    // Trailers for a client that reads them (exchange_trailers.rs has the others).
    let get = GET.replace("Accept", "TE: trailers\r\nAccept");
    for pieces in splits(response) {
        let mut pair = Pair::new(&get, &[Server::Accept]);
        pair.run();
        pair.origin_sends(&pieces);
        assert_eq!(
            pair.client,
            [
                "head 200 len=None Chunked keep_alive=true []",
                "data hi",
                "end [x-t: 1] unfinished=false",
            ]
        );
    }
}

#[test]
fn a_close_delimited_response_ends_at_eof_and_is_not_reused() {
    let response = b"HTTP/1.0 200 OK\r\n\r\nuntil close";
    for pieces in splits(response) {
        let mut pair = Pair::new(GET, &[Server::Accept]);
        pair.run();
        pair.origin_sends(&pieces);
        assert_eq!(pair.client.len(), 2, "no end before the close");
        pair.origin_eof();
        assert_eq!(
            pair.client,
            [
                "head 200 len=None Chunked keep_alive=true []",
                "data until close",
                "end [] unfinished=false",
            ]
        );
        assert_eq!(pair.conns[0].released, Some(false));
        assert_eq!(pair.reports, [(0, Outcome::Success, None)]);
    }
}

#[test]
fn http2_clients_get_frames_and_a_bodiless_response_ends_at_its_head() {
    let mut h2 = head(GET);
    h2.version = http::Version::HTTP_2;
    let mut pair = Pair::with(h2.clone(), ClientProtocol::H2, false, &[Server::Accept]);
    pair.run();
    pair.origin_sends(&[
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
    ]);
    assert_eq!(
        pair.client,
        [
            "head 200 len=None Frames keep_alive=true []",
            "data hi",
            "end [] unfinished=false"
        ]
    );
    let mut pair = Pair::with(h2, ClientProtocol::H2, false, &[Server::Accept]);
    pair.run();
    pair.origin_sends(&[b"HTTP/1.1 204 No Content\r\n\r\n"]);
    assert_eq!(
        pair.client,
        [
            "head 204 len=None Empty keep_alive=true []",
            "end [] unfinished=false"
        ]
    );
}

#[test]
fn head_keeps_the_stated_length_and_sends_no_body() {
    let raw = "HEAD /p/h HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut pair = Pair::new(raw, &[Server::Accept]);
    pair.run();
    assert!(pair.written(0).starts_with("HEAD /p/h HTTP/1.1\r\n"));
    pair.origin_sends(&[b"HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n"]);
    assert_eq!(
        pair.client,
        [
            "head 200 len=Some(42) Empty keep_alive=true []",
            "end [] unfinished=false"
        ]
    );
    assert_eq!(pair.conns[0].released, Some(true));
}

#[test]
fn the_origin_connection_is_reused_after_a_clean_end_and_not_after_close() {
    let mut first = Pair::new(GET, &[Server::Accept]);
    first.run();
    first.origin_sends(&[b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"]);
    assert_eq!(first.pool, [0], "kept");
    // The next request finds it in the pool and says so to the exchange.
    let mut second = Pair::new(GET, &[Server::Refuse]);
    second.pool = first.pool.clone();
    second.run();
    assert!(
        second.conns[0].reused,
        "pooled, not connected (the server refuses connects)"
    );
    assert_eq!(second.written(0), GET_TO_ORIGIN);
    second.origin_sends(&[b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"]);
    assert_eq!(
        second.client.last().map(String::as_str),
        Some("end [] unfinished=false")
    );
    // The origin said it closes: the connection does not go back (RFC 9112 §9.6).
    assert_eq!(second.conns[0].released, Some(false));
    assert!(second.pool.is_empty());
}

#[test]
fn interim_responses_are_forwarded_and_continue_is_said_at_once() {
    let raw = "PUT /p/u HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n";
    let mut pair = Pair::new(raw, &[Server::Accept]);
    pair.run();
    assert_eq!(pair.client, ["continue"]);
    assert!(
        !pair.written(0).to_lowercase().contains("expect"),
        "{}",
        pair.written(0)
    );
    pair.client_sends(&[b"ab"]);
    pair.ex.on_client_end(None);
    pair.run();
    assert!(pair.written(0).ends_with("\r\n\r\nab"));
    let response = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
    for pieces in splits(response) {
        let mut pair = Pair::new(raw, &[Server::Accept]);
        pair.run();
        pair.client_sends(&[b"ab"]);
        pair.ex.on_client_end(None);
        pair.run();
        pair.origin_sends(&pieces);
        assert_eq!(
            pair.client,
            [
                "continue",
                // The origin's 100 is not said twice; its 103 goes on (RFC 9110 §15.2).
                "interim 103 [\"link: </a>\"]",
                "head 201 len=Some(0) Length(0) keep_alive=true []",
                "end [] unfinished=false"
            ]
        );
    }
    // An HTTP/1.0 client knows no 1xx: it gets none.
    let raw = "GET /p/u HTTP/1.0\r\nHost: x\r\n\r\n";
    let response = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
    let mut pair = Pair::with(head(raw), ClientProtocol::Http10, false, &[Server::Accept]);
    pair.run();
    pair.origin_sends(&[response]);
    assert!(
        pair.client.iter().all(|m| !m.starts_with("interim")),
        "{:?}",
        pair.client
    );
    assert!(pair.client[0].starts_with("head 204"), "{:?}", pair.client);
}
