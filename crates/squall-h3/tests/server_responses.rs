//! The server connection's responses: read back with the frame decoder and a QPACK
//! decoder, bodies by reference, partial and blocked writes, GOAWAY, the answers the
//! connection gives itself, and resets from either side.

mod server_support;

use std::time::Instant;

use bytes::Bytes;
use server_support::*;
use squall_h3::server::{Command, Connection, Event, OutStream, ServerConfig, StreamOut, Uni};
use squall_h3::{ErrorCode, Frame, StreamType};

fn config() -> ServerConfig {
    ServerConfig::default()
}

/// A connection with the client's streams open, and the client.
fn start() -> (Instant, Connection, Client) {
    let now = Instant::now();
    (now, connected(config(), now), Client::new())
}

/// Reads back a response: head (connection-specific fields dropped, names lowercased),
/// body, trailers, and the end of the stream.
#[test]
fn a_response_reads_back_whole() {
    let (now, mut conn, mut client) = start();
    open_request(&mut conn, &mut client, 0, GET, true, now);
    let fields = [
        (&b"content-type"[..], &b"text/plain"[..]),
        (b"X-Mixed-Case", b"v"),
        (b"connection", b"close"),
        (b":status", b"500"),
    ];
    conn.send_headers(0, 103, [(&b"link"[..], &b"</a>"[..])], true)
        .unwrap();
    conn.send_headers(0, 200, fields, false).unwrap();
    conn.send_data(0, Bytes::from_static(b"hello "), false)
        .unwrap();
    conn.send_data(0, Bytes::from_static(b"world"), false)
        .unwrap();
    conn.send_trailers(0, [(&b"grpc-status"[..], &b"0"[..])])
        .unwrap();
    assert!(conn.queued_data(0) > 11);
    assert_eq!(conn.queued_data(0), conn.queued_data_total());
    conn.check_invariants();
    // The end is queued: nothing more goes.
    assert!(conn.send_data(0, Bytes::from_static(b"x"), true).is_err());
    let mut wire = Wire::default();
    wire.drain(&mut conn, usize::MAX);
    let response = Reader::new().response(&wire, 0);
    let pair = |n: &str, v: &str| (n.to_string(), v.to_string());
    assert_eq!(
        response.heads,
        [
            (103, vec![pair("link", "</a>")]),
            (
                200,
                vec![
                    pair("content-type", "text/plain"),
                    pair("x-mixed-case", "v")
                ]
            ),
        ]
    );
    assert_eq!(response.body, b"hello world");
    assert_eq!(response.trailers, Some(vec![pair("grpc-status", "0")]));
    assert!(response.fin);
    assert_eq!(conn.open_streams(), 0);
    assert_eq!(conn.queued_data_total(), 0);
    assert!(conn.is_idle());
    assert!(conn.send_data(0, Bytes::from_static(b"x"), true).is_err());
}

#[test]
fn a_response_head_may_end_the_stream_and_a_body_may_end_empty() {
    let (now, mut conn, mut client) = start();
    conn.recv(0, Bytes::from(client.headers(0, GET)), true, now)
        .unwrap();
    conn.recv(4, Bytes::from(client.headers(4, GET)), true, now)
        .unwrap();
    expect_request(&mut conn, 0);
    expect_request(&mut conn, 4);
    conn.send_headers(0, 204, std::iter::empty(), true).unwrap();
    conn.send_headers(4, 200, std::iter::empty(), false)
        .unwrap();
    let mut wire = Wire::default();
    wire.drain(&mut conn, usize::MAX);
    assert!(wire.finished(OutStream::Request(0)));
    assert!(!wire.finished(OutStream::Request(4)));
    assert_eq!(conn.open_streams(), 1);
    conn.send_data(4, Bytes::new(), true).unwrap();
    wire.drain(&mut conn, usize::MAX);
    let mut reader = Reader::new();
    let response = reader.response(&wire, 4);
    assert_eq!(response.heads[0].0, 200);
    assert!(response.body.is_empty() && response.fin);
    assert_eq!(reader.response(&wire, 0).heads[0].0, 204);
    assert!(conn.is_idle());
}

#[test]
fn a_body_leaves_as_the_applications_own_bytes() {
    let (now, mut conn, mut client) = start();
    open_request(&mut conn, &mut client, 0, GET, true, now);
    conn.send_headers(0, 200, std::iter::empty(), false)
        .unwrap();
    let body = Bytes::from(vec![7u8; 100_000]);
    conn.send_data(0, body.clone(), true).unwrap();
    let mut same_buffer = false;
    conn.poll_output(|out: StreamOut<'_>| {
        same_buffer |= out.data.as_ptr() == body.as_ptr() && out.data.len() == body.len();
        out.data.len()
    });
    assert!(same_buffer, "the body was not copied");
}

/// A driver whose QUIC streams take `k` bytes per write: every stream's bytes arrive in
/// order and end with their fin, whatever `k`; and a stream that takes nothing keeps its
/// output until it takes again.
#[test]
fn partial_writes_arrive_in_order_with_fin() {
    let expected = |reader: &mut Reader, wire: &Wire| {
        (0..3)
            .map(|i| reader.response(wire, i * 4))
            .collect::<Vec<_>>()
    };
    let respond = |conn: &mut Connection| {
        let mut client = Client::new();
        let now = Instant::now();
        for i in 0..3u64 {
            let id = i * 4;
            open_request(conn, &mut client, id, GET, true, now);
            let value = format!("value-{i}");
            conn.send_headers(id, 200, [(&b"x-i"[..], value.as_bytes())], false)
                .unwrap();
            let body: Vec<u8> = (0..1000 * (i as usize + 1)).map(|b| b as u8).collect();
            conn.send_data(id, Bytes::from(body), false).unwrap();
            conn.send_trailers(id, [(&b"x-end"[..], value.as_bytes())])
                .unwrap();
        }
    };
    let now = Instant::now();
    let mut whole = connected(config(), now);
    respond(&mut whole);
    let mut wire = Wire::default();
    wire.drain(&mut whole, usize::MAX);
    let reference = expected(&mut Reader::new(), &wire);
    assert!(reference.iter().all(|r| r.fin && r.trailers.is_some()));
    for k in [1, 2, 3, 5, 64, 1000] {
        let mut conn = connected(config(), now);
        respond(&mut conn);
        let mut wire = Wire::default();
        wire.drain(&mut conn, k);
        assert_eq!(expected(&mut Reader::new(), &wire), reference, "k = {k}");
        assert!(conn.is_idle());
    }

    // Stream 4 is blocked (takes nothing) while the others drain; then it takes all.
    let mut conn = connected(config(), now);
    respond(&mut conn);
    let mut wire = Wire::default();
    while !(wire.finished(OutStream::Request(0)) && wire.finished(OutStream::Request(8))) {
        conn.poll_output(|out: StreamOut<'_>| match out.stream {
            OutStream::Request(4) => 0,
            _ => wire.take(out, 7),
        });
        conn.check_invariants();
    }
    assert!(conn.queued_data(4) > 2000 && conn.queued_data(0) == 0);
    assert_eq!(conn.queued_data_total(), conn.queued_data(4));
    assert_eq!(conn.open_streams(), 1);
    wire.drain(&mut conn, usize::MAX);
    assert_eq!(expected(&mut Reader::new(), &wire), reference);
}

#[test]
fn goaway_refuses_later_streams_and_lets_earlier_ones_finish() {
    let (now, mut conn, mut client) = start();
    open_request(&mut conn, &mut client, 4, GET, true, now);
    conn.go_away();
    conn.go_away();
    assert_eq!(conn.goaway_id(), Some(8));
    // Stream 0's bytes come late, below the GOAWAY id: processed.
    open_request(&mut conn, &mut client, 0, GET, true, now);
    conn.recv(8, Bytes::from(client.headers(8, GET)), true, now)
        .unwrap();
    assert!(conn.poll_event().is_none());
    assert_eq!(
        commands(&mut conn),
        [
            Command::ResetStream {
                stream_id: 8,
                code: ErrorCode::RequestRejected
            },
            Command::StopSending {
                stream_id: 8,
                code: ErrorCode::RequestRejected
            },
        ]
    );
    // Later bytes of the refused stream are dropped.
    conn.recv(8, Bytes::from_static(b"\x00\x01x"), false, now)
        .unwrap();
    let mut wire = Wire::default();
    wire.drain(&mut conn, usize::MAX);
    let control = wire.control();
    assert_eq!(control.last(), Some(&Frame::GoAway(8)));
    assert_eq!(control.len(), 2, "one GOAWAY");
    assert!(!conn.is_finished());
    for id in [0, 4] {
        conn.send_headers(id, 200, std::iter::empty(), true)
            .unwrap();
    }
    wire.drain(&mut conn, usize::MAX);
    assert!(conn.is_finished(), "{conn:?}");
    let stats = conn.take_stats();
    assert_eq!((stats.requests, stats.refused), (2, 1));
    conn.check_invariants();

    // With no request yet, GOAWAY says 0.
    let mut conn = connected(config(), now);
    conn.go_away();
    assert_eq!(conn.goaway_id(), Some(0));
    assert!(!conn.is_finished(), "the GOAWAY is not written yet");
    Wire::default().drain(&mut conn, usize::MAX);
    assert!(conn.is_finished());
}

/// 413 (content-length, or DATA past the limit), 414, 431 and 501 are answered by the
/// connection itself; a request still arriving is stopped with H3_NO_ERROR.
#[test]
fn the_connection_answers_what_it_refuses() {
    let small = ServerConfig {
        max_body_bytes: 10,
        max_path_bytes: 20,
        max_field_section_size: 300,
        ..config()
    };
    let now = Instant::now();
    let mut conn = connected(small.clone(), now);
    let mut client = Client::new();
    let post = |length: &str| {
        vec![
            (":method".to_string(), "POST".to_string()),
            (":scheme".into(), "https".into()),
            (":authority".into(), "a".into()),
            (":path".into(), "/".into()),
            ("content-length".into(), length.to_string()),
        ]
    };
    let long_path = format!("/{}", "p".repeat(20));
    let big_field = "v".repeat(400);
    let connect = [(":method", "CONNECT"), (":authority", "a:443")];
    let streams: [(u64, Vec<u8>, bool, u16); 4] = [
        (0, client.headers(0, &post("11")), false, 413),
        (
            4,
            client.headers(
                4,
                &[
                    (":method", "GET"),
                    (":scheme", "https"),
                    (":path", &long_path),
                ],
            ),
            true,
            414,
        ),
        (
            8,
            client.headers(8, &get_with(&[("x-big", &big_field)])),
            true,
            431,
        ),
        (12, client.headers(12, &connect), false, 501),
    ];
    let mut wire = Wire::default();
    let mut reader = Reader::new();
    for (id, head, fin, status) in &streams {
        conn.recv(*id, Bytes::from(head.clone()), *fin, now)
            .unwrap();
        conn.check_invariants();
        assert!(
            conn.poll_event().is_none(),
            "the application never sees {status}"
        );
        let expected_stop = (!fin).then_some(Command::StopSending {
            stream_id: *id,
            code: ErrorCode::NoError,
        });
        assert_eq!(
            commands(&mut conn),
            expected_stop.into_iter().collect::<Vec<_>>()
        );
        wire.drain(&mut conn, usize::MAX);
        let response = reader.response(&wire, *id);
        assert_eq!(response.heads, [(*status, vec![])]);
        assert!(response.fin && response.body.is_empty());
    }
    // What the stopped streams still deliver is dropped, and their reset is no news.
    conn.recv(0, Bytes::from(data_frame(b"0123456789a")), true, now)
        .unwrap();
    conn.stream_reset(12, 0x100, now).unwrap();
    assert!(conn.poll_event().is_none() && conn.poll_command().is_none());
    let stats = conn.take_stats();
    assert_eq!(
        (
            stats.answered_413,
            stats.answered_414,
            stats.answered_431,
            stats.answered_501
        ),
        (1, 1, 1, 1)
    );
    assert_eq!(stats.requests, 4);
    assert!(conn.is_idle());

    // DATA past the limit after the application has the request: 413 if no response has
    // begun, and the application is told the stream is gone.
    let mut conn = connected(small.clone(), now);
    open_request(&mut conn, &mut client, 0, &get_with(&[]), false, now);
    conn.recv(0, Bytes::from(data_frame(b"0123456789")), false, now)
        .unwrap();
    assert!(matches!(conn.poll_event(), Some(Event::Data { .. })));
    conn.recv(0, Bytes::from(data_frame(b"!")), false, now)
        .unwrap();
    assert_eq!(
        events(&mut conn),
        [Event::Reset {
            stream_id: 0,
            code: ErrorCode::NoError
        }]
    );
    assert!(conn.send_headers(0, 200, std::iter::empty(), true).is_err());
    let mut wire = Wire::default();
    wire.drain(&mut conn, usize::MAX);
    assert_eq!(Reader::new().response(&wire, 0).heads, [(413, vec![])]);
    assert_eq!(conn.take_stats().answered_413, 1);

    // Once the response began, the stream is reset instead.
    let mut conn = connected(small, now);
    open_request(&mut conn, &mut client, 0, &get_with(&[]), false, now);
    conn.send_headers(0, 200, std::iter::empty(), false)
        .unwrap();
    conn.recv(0, Bytes::from(data_frame(&[0; 11])), false, now)
        .unwrap();
    assert_eq!(
        events(&mut conn),
        [Event::Reset {
            stream_id: 0,
            code: ErrorCode::RequestCancelled
        }]
    );
    let cancelled = ErrorCode::RequestCancelled;
    assert_eq!(
        commands(&mut conn),
        [
            Command::ResetStream {
                stream_id: 0,
                code: cancelled
            },
            Command::StopSending {
                stream_id: 0,
                code: cancelled
            },
        ]
    );
    Wire::default().drain(&mut conn, usize::MAX);
    assert!(conn.is_idle());
}

#[test]
fn the_peer_resetting_or_stopping_a_request_ends_it() {
    let now = Instant::now();
    let mut client = Client::new();
    let post = get_with(&[]);

    // Reset while the body arrives: the application is told; our sending part is reset.
    let mut conn = connected(config(), now);
    open_request(&mut conn, &mut client, 0, &post, false, now);
    conn.send_headers(0, 200, std::iter::empty(), false)
        .unwrap();
    conn.send_data(0, Bytes::from_static(b"partial"), false)
        .unwrap();
    conn.stream_reset(0, 0x10c, now).unwrap();
    conn.check_invariants();
    assert_eq!(
        events(&mut conn),
        [Event::Reset {
            stream_id: 0,
            code: ErrorCode::RequestCancelled
        }]
    );
    assert_eq!(
        commands(&mut conn),
        [Command::ResetStream {
            stream_id: 0,
            code: ErrorCode::RequestCancelled
        }]
    );
    assert_eq!(conn.queued_data_total(), 0);
    assert!(conn.send_data(0, Bytes::from_static(b"x"), false).is_err());
    assert_eq!(conn.take_stats().resets_received, 1);
    Wire::default().drain(&mut conn, usize::MAX);
    assert!(conn.is_idle());

    // Reset before the application polled the request: it never hears of it.
    conn.recv(4, Bytes::from(client.headers(4, &post)), false, now)
        .unwrap();
    conn.stream_reset(4, 0x10c, now).unwrap();
    assert!(conn.poll_event().is_none());
    // A reset of a request already whole changes nothing: the response goes on.
    open_request(&mut conn, &mut client, 8, GET, true, now);
    conn.stream_reset(8, 0x100, now).unwrap();
    assert!(conn.send_headers(8, 200, std::iter::empty(), true).is_ok());

    // STOP_SENDING: the response is dropped (the driver resets the QUIC stream), and a
    // request still arriving is stopped.
    commands(&mut conn);
    open_request(&mut conn, &mut client, 12, &post, false, now);
    conn.send_headers(12, 200, std::iter::empty(), false)
        .unwrap();
    conn.stop_sending(12, 0x10c, now).unwrap();
    conn.check_invariants();
    assert_eq!(conn.queued_data(12), 0);
    assert_eq!(
        commands(&mut conn),
        [Command::StopSending {
            stream_id: 12,
            code: ErrorCode::RequestCancelled
        }]
    );
    assert_eq!(
        events(&mut conn),
        [Event::Reset {
            stream_id: 12,
            code: ErrorCode::RequestCancelled
        }]
    );
    // Its late bytes and its RESET_STREAM are dropped.
    conn.recv(12, Bytes::from(data_frame(b"late")), true, now)
        .unwrap();
    conn.stream_reset(12, 0x10c, now).unwrap();
    assert!(conn.poll_event().is_none() && conn.poll_command().is_none());
    let mut wire = Wire::default();
    wire.drain(&mut conn, usize::MAX);
    assert!(wire.finished(OutStream::Request(8)));
    assert!(!wire.bytes.contains_key(&OutStream::Request(12)));
    assert!(conn.is_idle());

    // A stream reset before any byte of it came: our sending part is reset too.
    conn.stream_reset(16, 0x10c, now).unwrap();
    assert_eq!(
        commands(&mut conn),
        [Command::ResetStream {
            stream_id: 16,
            code: ErrorCode::RequestCancelled
        }]
    );
    conn.recv(16, Bytes::from(client.headers(16, GET)), true, now)
        .unwrap();
    assert!(conn.poll_event().is_none());
}

#[test]
fn the_application_resets_a_stream() {
    let (now, mut conn, mut client) = start();
    open_request(&mut conn, &mut client, 0, &get_with(&[]), false, now);
    conn.recv(0, Bytes::from(data_frame(b"unread")), false, now)
        .unwrap();
    conn.send_headers(0, 200, std::iter::empty(), false)
        .unwrap();
    conn.reset_stream(0, ErrorCode::InternalError);
    conn.check_invariants();
    assert!(conn.poll_event().is_none(), "its events go with it");
    let code = ErrorCode::InternalError;
    assert_eq!(
        commands(&mut conn),
        [
            Command::ResetStream { stream_id: 0, code },
            Command::StopSending { stream_id: 0, code },
        ]
    );
    // Left: our decoder's Stream Cancellation (RFC 9204 §4.4.2).
    assert!(!conn.is_idle());
    let mut wire = Wire::default();
    wire.drain(&mut conn, usize::MAX);
    assert_eq!(
        wire.uni(Uni::QpackDecoder, StreamType::QpackDecoder),
        [0x40],
        "Stream Cancellation of stream 0"
    );
    assert!(conn.is_idle());
    assert_eq!(conn.take_stats().resets_sent, 1);
}
