//! The exchange against an HTTP/2 origin: the request goes as a stream's messages (a head with
//! pseudo-fields and no connection-specific field, DATA, trailers), the response comes back as
//! the stream's events, received body is given back to the origin's window only as the client
//! takes it, and resets map to retries (refused streams go again, whatever the method), 502s
//! or a cut client.

mod exchange_support;

use bytes::Bytes;
use exchange_support::{Pair, Server, head};
use http::{HeaderMap, HeaderValue, StatusCode};
use squall_h1::{Fields, ResponseEvent};
use squall_proxy::ClientProtocol;
use squall_upstream::{Outcome, UpstreamErrorClass};

fn h2_pair(raw: &str, servers: &[Server]) -> Pair {
    let mut pair = Pair::new(raw, servers);
    pair.h2 = true;
    pair.run();
    pair
}

fn response(status: u16, fields: &[(&str, &str)], length: Option<u64>, end: bool) -> ResponseEvent {
    let mut map = HeaderMap::new();
    for (name, value) in fields {
        map.append(
            http::HeaderName::from_bytes(name.as_bytes()).expect("a name"),
            HeaderValue::from_str(value).expect("a value"),
        );
    }
    let status = StatusCode::from_u16(status).expect("a status");
    let head = squall_proxy::forward::h2_origin_head(
        status,
        Fields::from_header_map(&map),
        length,
        end,
        &http::Method::GET,
    );
    ResponseEvent::Head(head)
}

fn data(text: &str) -> ResponseEvent {
    ResponseEvent::Data(Bytes::copy_from_slice(text.as_bytes()))
}

#[test]
fn a_get_goes_as_one_head_that_ends_the_stream_and_the_response_streams_back() {
    let mut pair = h2_pair(
        "GET /a?b=1 HTTP/1.1\r\nHost: Example.com\r\nConnection: keep-alive, x-hop\r\n\
         X-Hop: 1\r\nKeep-Alive: 5\r\nTE: trailers\r\nAccept: */*\r\n\r\n",
        &[Server::Accept],
    );
    let written = pair.written(0);
    assert_eq!(
        written,
        "head [:method: GET, :scheme: http, :authority: Example.com, :path: /a?b=1, \
         accept: */*, x-forwarded-for: 192.0.2.7, x-forwarded-proto: http, \
         forwarded: for=192.0.2.7;proto=http, via: 1.1 squall, te: trailers] end\n"
    );
    pair.origin_event(response(
        200,
        &[("content-type", "text/plain")],
        None,
        false,
    ));
    pair.origin_event(data("hello "));
    pair.origin_event(data("world"));
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    pair.origin_event(ResponseEvent::End {
        trailers: Some(trailers),
    });
    assert_eq!(
        pair.client,
        [
            "head 200 len=None Chunked keep_alive=true [content-type: text/plain]",
            "data hello world",
            "end [grpc-status: 0] unfinished=false",
        ]
    );
    assert_eq!(pair.origin_consumed, 11, "every body byte given back");
    assert_eq!(pair.reports, [(0, Outcome::Success, None)]);
    assert_eq!(
        pair.conns[0].released,
        Some(false),
        "a stream is never pooled"
    );
}

#[test]
fn a_body_and_its_trailers_go_as_data_then_trailers_ending_the_stream() {
    let mut pair = h2_pair(
        "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
        &[Server::Accept],
    );
    pair.client_sends(&[b"abc", b"def"]);
    let mut trailers = HeaderMap::new();
    trailers.insert("x-sum", HeaderValue::from_static("6"));
    trailers.insert("content-length", HeaderValue::from_static("6"));
    pair.ex.on_client_end(Some(&trailers));
    pair.run();
    let written = pair.written(0);
    let lines: Vec<&str> = written.lines().collect();
    assert!(lines[0].starts_with("head [:method: POST, :scheme: http, :authority: x, :path: /up"));
    assert!(!lines[0].contains("transfer-encoding") && !lines[0].ends_with(" end"));
    assert_eq!(
        lines[1..],
        ["data abc", "data def", "trailers [x-sum: 6] end"]
    );
    assert_eq!(pair.body_consumed, 6);
}

#[test]
fn a_declared_length_is_sent_and_the_last_data_ends_the_stream() {
    let mut pair = h2_pair(
        "PUT /k HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n",
        &[Server::Accept],
    );
    pair.client_sends(&[b"wxyz"]);
    pair.ex.on_client_end(None);
    pair.run();
    let written = pair.written(0);
    let lines: Vec<&str> = written.lines().collect();
    assert!(lines[0].ends_with(", content-length: 4]"), "{}", lines[0]);
    assert_eq!(lines[1..], ["data wxyz", "data  end"]);
}

#[test]
fn a_slow_client_holds_the_origins_window_until_it_takes_the_bytes() {
    let mut pair = h2_pair("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &[Server::Accept]);
    pair.origin_event(response(200, &[], Some(2000), false));
    pair.client_room(0);
    pair.origin_event(data(&"a".repeat(600)));
    pair.origin_event(data(&"b".repeat(600)));
    assert_eq!(pair.origin_consumed, 0, "nothing taken, nothing given back");
    assert_eq!(pair.ex.buffered_bytes(), 1200);
    pair.client_room(500);
    assert_eq!(pair.origin_consumed, 600, "one piece taken");
    assert_eq!(pair.ex.buffered_bytes(), 600);
    pair.client_room(1024);
    assert_eq!(pair.origin_consumed, 1200);
    // The client goes: nothing more is held, the stream is let go.
    pair.origin_event(data(&"c".repeat(100)));
    pair.client_room(0);
    pair.origin_event(data(&"d".repeat(100)));
    pair.ex.on_client_gone(pair.now);
    pair.run();
    assert_eq!(
        pair.origin_consumed, 1400,
        "what was held is given back too"
    );
    assert_eq!(pair.conns[0].released, Some(false));
}

#[test]
fn a_refused_stream_goes_again_even_for_a_post() {
    let mut pair = h2_pair(
        "POST /once HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n",
        &[Server::Accept, Server::Accept],
    );
    pair.client_sends(&[b"hi"]);
    pair.ex.on_client_end(None);
    pair.run();
    pair.origin_reset(true);
    assert_eq!(pair.conns.len(), 2, "a second stream");
    assert_eq!(
        pair.conns[1].server, 0,
        "on the same server, a fresh connection"
    );
    assert!(!pair.conns[1].reused);
    pair.origin_event(response(201, &[], Some(0), true));
    pair.origin_event(ResponseEvent::End { trailers: None });
    assert_eq!(
        pair.client,
        [
            "head 201 len=Some(0) Length(0) keep_alive=true []",
            "end [] unfinished=false"
        ]
    );
}

#[test]
fn a_stream_reset_before_the_head_is_a_502_for_a_post_and_after_it_a_cut() {
    let mut pair = h2_pair(
        "POST /once HTTP/1.1\r\nHost: x\r\n\r\n",
        &[Server::Accept, Server::Accept],
    );
    pair.origin_reset(false);
    assert_eq!(pair.client, ["error 502 unfinished=false"]);
    assert_eq!(
        pair.reports,
        [(
            0,
            Outcome::Failure,
            Some(UpstreamErrorClass::InvalidResponse)
        )]
    );

    let mut pair = h2_pair("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &[Server::Accept]);
    pair.origin_event(response(200, &[], Some(10), false));
    pair.origin_event(data("01234"));
    pair.origin_reset(false);
    assert_eq!(pair.client.last().map(String::as_str), Some("abort"));
    assert_eq!(pair.origin_consumed, 5);
}

#[test]
fn an_http2_client_gets_frames_and_head_requests_no_body() {
    let mut h2 = head("GET /t HTTP/1.1\r\nHost: x\r\n\r\n");
    h2.version = http::Version::HTTP_2;
    let mut pair = Pair::with(h2, ClientProtocol::H2, false, &[Server::Accept]);
    pair.h2 = true;
    pair.run();
    pair.origin_event(response(200, &[], None, false));
    pair.origin_event(ResponseEvent::End { trailers: None });
    assert_eq!(
        pair.client,
        [
            "head 200 len=None Frames keep_alive=true []",
            "end [] unfinished=false"
        ]
    );
    let mut pair = h2_pair("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &[Server::Accept]);
    pair.origin_event(response(204, &[], None, true));
    pair.origin_event(ResponseEvent::End { trailers: None });
    assert_eq!(pair.client[0], "head 204 len=None Empty keep_alive=true []");
}
