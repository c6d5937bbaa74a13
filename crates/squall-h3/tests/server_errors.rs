//! The server connection with misbehaving clients: every malformed request rule is a
//! stream error (both parts reset, counted), every frame or stream out of place a
//! connection error with its code, at every split of the offending stream.

mod server_support;

use std::time::Instant;

use bytes::Bytes;
use server_support::*;
use squall_h3::qpack::EncoderInstruction;
use squall_h3::server::{Command, Connection, ServerConfig};
use squall_h3::{ErrorCode, Frame, Settings, StreamType, encode_stream_type, kind, varint};

/// Every split of step `at` resets stream `id` with `code` (and nothing else), counts one
/// malformed request, and the application either never saw the request or was told.
fn assert_malformed(script: &[Chunk], at: usize, id: u64, code: ErrorCode) {
    let config = ServerConfig::default();
    let mut runs = vec![run(&config, script), run(&config, &bytewise(script, at))];
    for cut in 0..=script[at].data.len() {
        runs.push(run(&config, &split_at(script, at, cut)));
    }
    for (i, transcript) in runs.iter().enumerate() {
        assert_eq!(
            transcript.reset_codes(),
            [(id, code)],
            "run {i}: {transcript:?}"
        );
        assert_eq!(transcript.stats.malformed, 1, "run {i}");
        assert_eq!(transcript.error, None, "run {i}");
        if let Some(exchange) = transcript.exchanges.get(&id) {
            assert_eq!(exchange.reset, Some(code), "run {i}: told");
        }
    }
}

/// Every split of step `at` ends the connection with `code`.
fn assert_conn_error(script: &[Chunk], at: usize, code: ErrorCode) {
    let config = ServerConfig::default();
    let mut runs = vec![run(&config, script), run(&config, &bytewise(script, at))];
    for cut in 0..=script[at].data.len() {
        runs.push(run(&config, &split_at(script, at, cut)));
    }
    for (i, transcript) in runs.iter().enumerate() {
        assert_eq!(transcript.error, Some(code), "run {i}: {transcript:?}");
        assert_eq!(transcript.close(), Some(code), "run {i}");
        assert_eq!(transcript.stats.protocol_errors, 1, "run {i}");
    }
}

fn owned(list: Fields<'_>) -> Vec<(String, String)> {
    (list.iter())
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[test]
fn each_malformed_head_resets_its_stream_with_h3_message_error() {
    let get = |extra: Fields<'_>| get_with(extra);
    let cases: Vec<Vec<(String, String)>> = vec![
        get(&[("Accept", "*/*")]),
        get(&[("connection", "close")]),
        get(&[("keep-alive", "5")]),
        get(&[("proxy-connection", "x")]),
        get(&[("transfer-encoding", "chunked")]),
        get(&[("upgrade", "websocket")]),
        get(&[("te", "gzip")]),
        get(&[("x-a", "1"), (":extra", "after a regular field")]),
        get(&[(":status", "200")]),
        get(&[(":path", "/twice")]),
        get(&[("content-length", "abc")]),
        get(&[("content-length", "1"), ("content-length", "2")]),
        // A body announced on a request that ends with its head.
        get(&[("content-length", "5")]),
        get(&[("x-bad", "a\rb")]),
        get(&[("x-bad", " leading")]),
        get(&[("bad name", "v")]),
        get(&[("host", "other.example")]),
        owned(&[(":scheme", "https"), (":authority", "a"), (":path", "/")]),
        owned(&[(":method", "GET"), (":authority", "a"), (":path", "/")]),
        owned(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "a"),
        ]),
        owned(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "relative"),
        ]),
        owned(&[(":method", "GET"), (":scheme", "https"), (":path", "*")]),
        owned(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "u@a"),
            (":path", "/"),
        ]),
        owned(&[(":method", "G E T"), (":scheme", "https"), (":path", "/")]),
        owned(&[
            (":method", "CONNECT"),
            (":authority", "a:443"),
            (":path", "/"),
        ]),
        owned(&[(":method", "CONNECT"), (":scheme", "https")]),
        // :protocol without SETTINGS_ENABLE_CONNECT_PROTOCOL.
        owned(&[
            (":method", "CONNECT"),
            (":protocol", "websocket"),
            (":scheme", "https"),
            (":authority", "a"),
            (":path", "/"),
        ]),
    ];
    for fields in cases {
        let head = Client::new().headers(0, &fields);
        assert_malformed(&[chunk(0, &head, true)], 0, 0, ErrorCode::MessageError);
    }
}

#[test]
fn a_body_that_does_not_match_its_content_length_is_malformed() {
    let mut client = Client::new();
    let head = client.headers(0, &get_with(&[("content-length", "5")]));
    let short = concat(&[&head, &data_frame(b"1234")]);
    let long = concat(&[&head, &data_frame(b"123"), &data_frame(b"456")]);
    let trailers = client.headers(0, &[("x-t", "1")]);
    let short_then_trailers = concat(&[&head, &data_frame(b"1234"), &trailers]);
    for stream in [short, long, short_then_trailers] {
        assert_malformed(&[chunk(0, &stream, true)], 0, 0, ErrorCode::MessageError);
    }
    // Malformed trailers.
    for fields in [
        [(":path", "/")],
        [("X-Upper", "1")],
        [("connection", "close")],
    ] {
        let stream = concat(&[&head, &data_frame(b"12345"), &client.headers(0, &fields)]);
        assert_malformed(&[chunk(0, &stream, true)], 0, 0, ErrorCode::MessageError);
    }
}

#[test]
fn a_stream_that_ends_without_a_request_is_incomplete() {
    let grease = raw_frame(squall_h3::reserved(1), b"x");
    assert_malformed(
        &[chunk(0, &grease, true)],
        0,
        0,
        ErrorCode::RequestIncomplete,
    );
    assert_malformed(&[chunk(0, b"", true)], 0, 0, ErrorCode::RequestIncomplete);
}

#[test]
fn frames_out_of_order_on_a_request_stream_end_the_connection() {
    let mut client = Client::new();
    let head = client.headers(0, GET);
    let trailers = client.headers(0, &[("x-t", "1")]);
    let cases: Vec<(Vec<u8>, ErrorCode)> = vec![
        (data_frame(b"body first"), ErrorCode::FrameUnexpected),
        (
            concat(&[&head, &trailers, &data_frame(b"x")]),
            ErrorCode::FrameUnexpected,
        ),
        (
            concat(&[&head, &trailers, &trailers]),
            ErrorCode::FrameUnexpected,
        ),
        (
            concat(&[&head, &raw_frame(kind::SETTINGS, b"")]),
            ErrorCode::FrameUnexpected,
        ),
        (
            concat(&[&head, &raw_frame(kind::GOAWAY, &[0])]),
            ErrorCode::FrameUnexpected,
        ),
        (
            concat(&[&head, &raw_frame(kind::PUSH_PROMISE, &[0])]),
            ErrorCode::FrameUnexpected,
        ),
        // HTTP/2's PING.
        (
            concat(&[&head, &raw_frame(0x06, &[0; 8])]),
            ErrorCode::FrameUnexpected,
        ),
        // The stream ends inside a frame.
        (
            concat(&[&head, &data_frame(b"abc")[..3]]),
            ErrorCode::FrameError,
        ),
        // A section that is not QPACK.
        (
            raw_frame(kind::HEADERS, &[0xff, 0xff, 0xff]),
            ErrorCode::QpackDecompressionFailed,
        ),
        (
            raw_frame(kind::HEADERS, &[]),
            ErrorCode::QpackDecompressionFailed,
        ),
    ];
    for (stream, code) in cases {
        assert_conn_error(&[chunk(0, &stream, true)], 0, code);
    }
    // A HEADERS frame over the limit is refused from its length.
    let mut huge = Vec::new();
    varint::encode(kind::HEADERS, &mut huge);
    varint::encode(1 << 20, &mut huge);
    assert_conn_error(&[chunk(0, &huge, false)], 0, ErrorCode::ExcessiveLoad);
}

#[test]
fn control_stream_errors_end_the_connection() {
    let settings = control_stream(&Settings::default());
    let with = |frame: &[u8]| concat(&[&settings, frame]);
    let mut no_settings = Vec::new();
    encode_stream_type(StreamType::Control, &mut no_settings);
    no_settings.extend_from_slice(&raw_frame(kind::GOAWAY, &[0]));
    let goaway = |id: u64| {
        let mut out = Vec::new();
        Frame::GoAway(id).encode(&mut out);
        out
    };
    let max_push = |id: u64| {
        let mut out = Vec::new();
        Frame::MaxPushId(id).encode(&mut out);
        out
    };
    let cases: Vec<(Vec<u8>, bool, ErrorCode)> = vec![
        (no_settings, false, ErrorCode::MissingSettings),
        (settings.clone(), true, ErrorCode::ClosedCriticalStream),
        (with(&settings[1..]), false, ErrorCode::FrameUnexpected),
        (with(&data_frame(b"x")), false, ErrorCode::FrameUnexpected),
        (
            with(&raw_frame(kind::CANCEL_PUSH, &[1])),
            false,
            ErrorCode::IdError,
        ),
        (
            with(&concat(&[&goaway(4), &goaway(8)])),
            false,
            ErrorCode::IdError,
        ),
        (
            with(&concat(&[&max_push(8), &max_push(4)])),
            false,
            ErrorCode::IdError,
        ),
        // An HTTP/2 setting.
        (
            with(&raw_frame(kind::SETTINGS, &[0x02, 0x01])),
            false,
            ErrorCode::FrameUnexpected,
        ),
    ];
    for (stream, fin, code) in cases {
        assert_conn_error(&[chunk(CONTROL, &stream, fin)], 0, code);
    }
    let settings_error = concat(&[&[0x00], &raw_frame(kind::SETTINGS, &[0x02, 0x01])]);
    assert_conn_error(
        &[chunk(CONTROL, &settings_error, false)],
        0,
        ErrorCode::SettingsError,
    );
    // A GOAWAY that stays or shrinks, and a MAX_PUSH_ID that grows, are fine.
    let fine = with(&concat(&[
        &goaway(8),
        &goaway(8),
        &goaway(4),
        &max_push(1),
        &max_push(9),
    ]));
    let transcript = run(&ServerConfig::default(), &[chunk(CONTROL, &fine, false)]);
    assert_eq!(transcript.error, None);
}

#[test]
fn unidirectional_stream_errors_end_the_connection() {
    let control = control_stream(&Settings::default());
    let type_only = |ty: StreamType| {
        let mut out = Vec::new();
        encode_stream_type(ty, &mut out);
        out
    };
    // A second control, encoder or decoder stream.
    for ty in [
        StreamType::Control,
        StreamType::QpackEncoder,
        StreamType::QpackDecoder,
    ] {
        let first = if ty == StreamType::Control {
            control.clone()
        } else {
            type_only(ty)
        };
        let script = [
            chunk(CONTROL, &first, false),
            chunk(14, &type_only(ty), false),
        ];
        assert_conn_error(&script, 1, ErrorCode::StreamCreationError);
    }
    // A push stream from a client.
    let push = concat(&[&type_only(StreamType::Push), &[0x00]]);
    assert_conn_error(
        &[chunk(CONTROL, &push, false)],
        0,
        ErrorCode::StreamCreationError,
    );
    // A QPACK stream that ends.
    for ty in [StreamType::QpackEncoder, StreamType::QpackDecoder] {
        assert_conn_error(
            &[chunk(ENCODER, &type_only(ty), true)],
            0,
            ErrorCode::ClosedCriticalStream,
        );
    }
    // Bytes that are no encoder or decoder instruction our side can take.
    let mut bad_capacity = type_only(StreamType::QpackEncoder);
    EncoderInstruction::SetCapacity(1 << 20).encode(false, &mut bad_capacity);
    assert_conn_error(
        &[chunk(ENCODER, &bad_capacity, false)],
        0,
        ErrorCode::QpackEncoderStreamError,
    );
    let mut bad_ack = type_only(StreamType::QpackDecoder);
    bad_ack.push(0x80); // Section Acknowledgment of stream 0, which has none outstanding.
    assert_conn_error(
        &[chunk(DECODER, &bad_ack, false)],
        0,
        ErrorCode::QpackDecoderStreamError,
    );
    // Data on a stream only the server opens.
    for id in [1, 3, 5, 7] {
        assert_conn_error(&[chunk(id, b"x", false)], 0, ErrorCode::StreamCreationError);
    }
}

#[test]
fn resets_of_critical_streams_end_the_connection() {
    let now = Instant::now();
    for id in [CONTROL, ENCODER, DECODER] {
        let mut conn = connected(ServerConfig::default(), now);
        let error = conn.stream_reset(id, 0x100, now).unwrap_err();
        assert_eq!(error.code, ErrorCode::ClosedCriticalStream);
        conn.check_invariants();
    }
    let mut conn = connected(ServerConfig::default(), now);
    let error = conn.stop_sending(3, 0x100, now).unwrap_err();
    assert_eq!(error.code, ErrorCode::ClosedCriticalStream);
    // Resets of unknown unidirectional streams, or of our own, are nothing.
    let mut conn = connected(ServerConfig::default(), now);
    conn.stream_reset(14, 0x100, now).unwrap();
    conn.stream_reset(1, 0x100, now).unwrap();
    conn.stop_sending(2, 0x100, now).unwrap();
    assert!(conn.poll_command().is_none());
}

#[test]
fn after_an_error_the_connection_is_over() {
    let now = Instant::now();
    let mut conn = connected(ServerConfig::default(), now);
    let mut client = Client::new();
    conn.recv(0, Bytes::from(client.headers(0, GET)), false, now)
        .unwrap();
    expect_request(&mut conn, 0);
    conn.send_headers(0, 200, std::iter::empty(), false)
        .unwrap();
    let error = conn
        .recv(4, Bytes::from(data_frame(b"x")), false, now)
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::FrameUnexpected);
    conn.check_invariants();
    assert_eq!(conn.last_error(), Some(&error));
    assert_eq!(
        commands(&mut conn),
        [Command::Close {
            code: ErrorCode::FrameUnexpected,
            reason: error.reason
        }]
    );
    assert!(conn.is_finished());
    assert!(!conn.has_output() && conn.poll_event().is_none());
    assert!(conn.send_data(0, Bytes::from_static(b"x"), true).is_err());
    let again = conn.recv(0, Bytes::new(), true, now).unwrap_err();
    assert_eq!(again, error);
    assert_eq!(conn.stream_reset(0, 0, now).unwrap_err(), error);
    conn.go_away();
    assert!(conn.goaway_id().is_none());
    conn.check_invariants();
}

/// Unknown stream types are read and discarded, a few at a time; more are stopped.
#[test]
fn unknown_unidirectional_streams_beyond_a_few_are_stopped() {
    let now = Instant::now();
    let config = ServerConfig {
        max_unknown_uni_streams: 2,
        ..ServerConfig::default()
    };
    let mut conn = Connection::new(config, now);
    let unknown = [0x21u8, b'x'];
    for id in [2, 6, 10] {
        conn.recv(id, Bytes::copy_from_slice(&unknown), false, now)
            .unwrap();
        conn.check_invariants();
    }
    assert_eq!(
        commands(&mut conn),
        [Command::StopSending {
            stream_id: 10,
            code: ErrorCode::StreamCreationError
        }]
    );
    // One ends: room for another.
    conn.recv(2, Bytes::from_static(b"more"), true, now)
        .unwrap();
    conn.recv(14, Bytes::copy_from_slice(&unknown), false, now)
        .unwrap();
    conn.recv(10, Bytes::from_static(b"dropped"), false, now)
        .unwrap();
    assert!(conn.poll_command().is_none());
    conn.stream_reset(6, 0x103, now).unwrap();
    conn.stream_reset(10, 0x103, now).unwrap();
    conn.check_invariants();
    assert_eq!(conn.take_stats().uni_streams_stopped, 1);
    // A stream that ends before its type is complete is ignored.
    conn.recv(18, Bytes::from_static(&[0x40]), true, now)
        .unwrap();
    conn.check_invariants();
}

#[test]
fn too_many_blocked_streams_is_a_decompression_failure() {
    let config = ServerConfig {
        qpack_blocked_streams: 1,
        ..ServerConfig::default()
    };
    let mut client = Client::with_table();
    let a = client.headers(0, &get_with(&[("x-a", "1")]));
    let b = client.headers(4, &get_with(&[("x-b", "2")]));
    let transcript = run(&config, &[chunk(0, &a, true), chunk(4, &b, true)]);
    assert_eq!(transcript.error, Some(ErrorCode::QpackDecompressionFailed));

    // Within the limit, both wait; the encoder stream unblocks both.
    let config = ServerConfig {
        qpack_blocked_streams: 2,
        ..ServerConfig::default()
    };
    let encoder = client.encoder_stream();
    let script = [
        chunk(0, &a, true),
        chunk(4, &b, true),
        chunk(ENCODER, &encoder, false),
    ];
    let transcript = run(&config, &script);
    assert_eq!(transcript.error, None);
    assert!(transcript.exchange(0).ended && transcript.exchange(4).ended);
}
