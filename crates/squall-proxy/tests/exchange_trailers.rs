//! Trailers through the exchange, both ways: the origin's chunked trailers reach HTTP/2
//! clients and HTTP/1.1 clients that sent `TE: trailers`, the client's request trailers reach
//! the origin in the last chunk, and neither way carries hop-by-hop or framing fields
//! (RFC 9110 §6.5.1). `TE: trailers` goes to the origin only when the client sent it.

mod exchange_support;

use exchange_support::{Pair, Server, head, splits};
use http::{HeaderMap, HeaderValue};
use squall_proxy::ClientProtocol;

const TRAILED: &[u8] =
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: grpc-status\r\n\r\n\
    2\r\nhi\r\n0\r\ngrpc-status: 0\r\nContent-Length: 9\r\nHost: elsewhere\r\n\
    Keep-Alive: timeout=1\r\nX-Sum: abc\r\n\r\n";

/// The trailers that may cross, as the harness records them.
const END: &str = "end [grpc-status: 0, x-sum: abc] unfinished=false";

#[test]
fn an_http11_client_that_asked_gets_the_trailers_less_the_hop_by_hop_ones() {
    let raw = "GET /t HTTP/1.1\r\nHost: x\r\nTE: trailers\r\n\r\n";
    for pieces in splits(TRAILED) {
        let mut pair = Pair::new(raw, &[Server::Accept]);
        pair.run();
        pair.origin_sends(&pieces);
        let head = "head 200 len=None Chunked keep_alive=true [trailer: grpc-status]";
        assert_eq!(pair.client, [head, "data hi", END], "{pieces:?}");
        assert_eq!(pair.conns[0].released, Some(true));
    }
}

#[test]
fn an_http11_client_that_did_not_ask_gets_none() {
    for te in ["", "TE: gzip\r\n"] {
        let raw = format!("GET /t HTTP/1.1\r\nHost: x\r\n{te}\r\n");
        let mut pair = Pair::new(&raw, &[Server::Accept]);
        pair.run();
        pair.origin_sends(&[TRAILED]);
        assert_eq!(pair.client[2], "end [] unfinished=false", "{te:?}");
    }
}

#[test]
fn an_http2_client_gets_the_trailers_whatever_its_te() {
    for pieces in splits(TRAILED) {
        let mut h2 = head("GET /t HTTP/1.1\r\nHost: x\r\n\r\n");
        h2.version = http::Version::HTTP_2;
        let mut pair = Pair::with(h2, ClientProtocol::H2, false, &[Server::Accept]);
        pair.run();
        pair.origin_sends(&pieces);
        assert_eq!(pair.client[2], END, "{pieces:?}");
    }
}

#[test]
fn trailers_of_nothing_but_framing_fields_are_no_trailers() {
    let response = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
        2\r\nhi\r\n0\r\nContent-Length: 2\r\n\r\n";
    let mut h2 = head("GET /t HTTP/1.1\r\nHost: x\r\n\r\n");
    h2.version = http::Version::HTTP_2;
    let mut pair = Pair::with(h2, ClientProtocol::H2, false, &[Server::Accept]);
    pair.run();
    pair.origin_sends(&[response]);
    assert_eq!(pair.client[2], "end [] unfinished=false");
}

#[test]
fn te_trailers_reaches_the_origin_only_when_the_client_sent_it() {
    let asked = ["TE: trailers\r\n", "TE: gzip, trailers;q=1\r\n"];
    for te in asked {
        let raw = format!("GET /t HTTP/1.1\r\nHost: x\r\n{te}\r\n");
        let mut pair = Pair::new(&raw, &[Server::Accept]);
        pair.run();
        let written = pair.written(0);
        assert!(
            written.ends_with("te: trailers\r\nconnection: te\r\n\r\n"),
            "{written}"
        );
        assert!(!written.contains("gzip"), "{written}");
    }
    for te in ["", "TE: gzip\r\n", "TE: trailersx\r\n"] {
        let raw = format!("GET /t HTTP/1.1\r\nHost: x\r\n{te}\r\n");
        let mut pair = Pair::new(&raw, &[Server::Accept]);
        pair.run();
        let written = pair.written(0).to_ascii_lowercase();
        assert!(!written.contains("te:"), "{written}");
        assert!(!written.contains("connection"), "{written}");
    }
    // An HTTP/2 client's `te` can only be `trailers` (gRPC sends it).
    let mut h2 = head("POST /t HTTP/1.1\r\nHost: x\r\nte: trailers\r\n\r\n");
    h2.version = http::Version::HTTP_2;
    h2.body = squall_h1::BodyKind::Chunked;
    let mut pair = Pair::with(h2, ClientProtocol::H2, false, &[Server::Accept]);
    pair.run();
    assert!(
        pair.written(0)
            .contains("\r\nte: trailers\r\nconnection: te\r\n")
    );
}

#[test]
fn request_trailers_reach_the_origin_less_the_hop_by_hop_ones() {
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-timeout", HeaderValue::from_static("1S"));
    trailers.insert("content-length", HeaderValue::from_static("4"));
    trailers.insert("transfer-encoding", HeaderValue::from_static("chunked"));
    trailers.insert("connection", HeaderValue::from_static("close"));
    trailers.insert("host", HeaderValue::from_static("elsewhere"));
    let raw = "POST /t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    let mut pair = Pair::new(raw, &[Server::Accept]);
    pair.run();
    pair.client_sends(&[b"data"]);
    pair.ex.on_client_end(Some(&trailers));
    pair.run();
    let written = pair.written(0);
    let end = "\r\n\r\n4\r\ndata\r\n0\r\ngrpc-timeout: 1S\r\n\r\n";
    assert!(written.ends_with(end), "{written}");
    // Nothing left to send: a bare last chunk.
    let mut only_framing = HeaderMap::new();
    only_framing.insert("content-length", HeaderValue::from_static("4"));
    let mut pair = Pair::new(raw, &[Server::Accept]);
    pair.run();
    pair.ex.on_client_end(Some(&only_framing));
    pair.run();
    assert!(pair.written(0).ends_with("\r\n\r\n0\r\n\r\n"));
}
