//! The client connection against a misbehaving origin: malformed response heads and bodies
//! (stream errors: RST_STREAM PROTOCOL_ERROR and a Reset event), and connection errors
//! (GOAWAY, a Reset event for every open stream, the error returned again later).

mod client_support;

use client_support::{Origin, Out, Pair, assert_reset_by_us, response_of};
use squall_h2::{ClientConfig, ClientEvent, ErrorCode, SettingId, StreamId};

/// Opens stream 1 (a GET) and stream 3 (a bystander), feeds `script` for stream 1, and
/// checks that stream 1 alone was reset with PROTOCOL_ERROR, then that the connection
/// still works on stream 3.
fn assert_malformed(script: impl FnOnce(&mut Origin)) {
    let mut pair = Pair::ready(ClientConfig::default());
    let id = pair.request("GET", "/", true);
    let other = pair.request("GET", "/", true);
    pair.output();
    let mut origin = Origin::new();
    script(&mut origin);
    pair.feed(&origin.take()).expect("a stream error only");
    assert_eq!(
        pair.output(),
        vec![Out::Rst {
            stream_id: id,
            code: ErrorCode::ProtocolError
        }]
    );
    let reset = ClientEvent::Reset {
        stream_id: id,
        code: ErrorCode::ProtocolError,
        refused: false,
    };
    assert_eq!(pair.events(), vec![reset]);
    assert_eq!(pair.conn.open_streams(), 1);
    origin.response(other, "200", &[], true);
    pair.feed(&origin.take()).unwrap();
    assert!(matches!(
        pair.events()[..],
        [ClientEvent::Response { status: 200, .. }]
    ));
    assert!(pair.conn.is_idle());
}

#[test]
fn uppercase_field_name_is_malformed() {
    assert_malformed(|o| {
        o.response(1, "200", &[("Content-Type", "text/plain")], true);
    });
}

#[test]
fn connection_specific_field_is_malformed() {
    assert_malformed(|o| {
        o.response(1, "200", &[("connection", "keep-alive")], true);
    });
    assert_malformed(|o| {
        o.response(1, "200", &[("transfer-encoding", "chunked")], false);
    });
}

#[test]
fn missing_or_bad_status_is_malformed() {
    assert_malformed(|o| {
        o.headers(1, &[("server", "x")], true);
    });
    assert_malformed(|o| {
        o.response(1, "20", &[], true);
    });
    assert_malformed(|o| {
        o.response(1, "2000", &[], true);
    });
    assert_malformed(|o| {
        o.headers(1, &[(":status", "200"), (":status", "200")], true);
    });
}

#[test]
fn request_pseudo_field_or_pseudo_after_regular_is_malformed() {
    assert_malformed(|o| {
        o.response(1, "200", &[(":path", "/")], true);
    });
    assert_malformed(|o| {
        o.headers(1, &[("server", "x"), (":status", "200")], true);
    });
}

#[test]
fn status_101_is_malformed() {
    assert_malformed(|o| {
        o.response(1, "101", &[("upgrade", "websocket")], false);
    });
    assert_malformed(|o| {
        o.response(1, "101", &[], false);
    });
}

#[test]
fn interim_head_with_end_stream_is_malformed() {
    assert_malformed(|o| {
        o.response(1, "103", &[], true);
    });
}

#[test]
fn data_before_the_final_head_is_malformed() {
    assert_malformed(|o| {
        o.data(1, b"early", false);
    });
    assert_malformed(|o| {
        o.response(1, "103", &[], false).data(1, b"early", true);
    });
}

#[test]
fn content_length_mismatch_is_malformed() {
    // More than announced.
    assert_malformed(|o| {
        o.response(1, "200", &[("content-length", "3")], false)
            .data(1, b"four", true);
    });
    // Less, at END_STREAM.
    assert_malformed(|o| {
        o.response(1, "200", &[("content-length", "5")], false)
            .data(1, b"four", true);
    });
    // Less, at the trailers.
    assert_malformed(|o| {
        o.response(1, "200", &[("content-length", "5")], false)
            .data(1, b"four", false)
            .headers(1, &[("x-t", "1")], true);
    });
    // Conflicting values, or not a number.
    assert_malformed(|o| {
        o.response(
            1,
            "200",
            &[("content-length", "5"), ("content-length", "6")],
            true,
        );
    });
    assert_malformed(|o| {
        o.response(1, "200", &[("content-length", "-1")], true);
    });
}

#[test]
fn bad_trailers_are_malformed() {
    assert_malformed(|o| {
        o.response(1, "200", &[], false)
            .headers(1, &[("x-t", "1")], false);
    });
    assert_malformed(|o| {
        o.response(1, "200", &[], false)
            .headers(1, &[(":status", "200")], true);
    });
}

#[test]
fn head_over_the_header_list_limit_resets_the_stream() {
    let config = ClientConfig {
        max_header_list_size: 1000,
        ..ClientConfig::default()
    };
    let mut pair = Pair::ready(config);
    let id = pair.request("GET", "/", true);
    pair.output();
    let big = "v".repeat(1000);
    let mut origin = Origin::new();
    origin.response(id, "200", &[("x-big", &big)], true);
    pair.feed(&origin.take()).unwrap();
    assert_reset_by_us(&mut pair, id, ErrorCode::ProtocolError);
}

/// Opens streams 1 and 3, feeds `bytes`, and checks for a connection error with `code`:
/// GOAWAY sent, both streams reset, the error returned again.
fn assert_connection_error(
    config: ClientConfig,
    script: impl FnOnce(&mut Origin),
    code: ErrorCode,
) {
    let mut pair = Pair::ready(config);
    let ids: Vec<StreamId> = (0..2).map(|_| pair.request("GET", "/", true)).collect();
    pair.output();
    let mut origin = Origin::new();
    script(&mut origin);
    let bytes = origin.take();
    let error = pair.feed(&bytes).expect_err("a connection error");
    assert_eq!(error.code, code, "{error}");
    let out = pair.output();
    assert_eq!(
        out.last(),
        Some(&Out::GoAway {
            last_stream_id: 0,
            code
        }),
        "{out:?}"
    );
    let resets: Vec<ClientEvent> = (ids.iter())
        .map(|&stream_id| ClientEvent::Reset {
            stream_id,
            code,
            refused: false,
        })
        .collect();
    assert_eq!(pair.events(), resets);
    assert_eq!(pair.feed(&bytes), Err(error));
    assert_eq!(pair.conn.available_streams(), 0);
    assert!(pair.conn.is_finished());
}

#[test]
fn push_promise_is_a_connection_error() {
    let script = |o: &mut Origin| {
        o.raw(0x5, 0x4, 1, &[0, 0, 0, 2, 0x82]);
    };
    assert_connection_error(ClientConfig::default(), script, ErrorCode::ProtocolError);
}

#[test]
fn headers_on_a_stream_we_did_not_open_is_a_connection_error() {
    let even = |o: &mut Origin| {
        o.response(2, "200", &[], true);
    };
    assert_connection_error(ClientConfig::default(), even, ErrorCode::ProtocolError);
    let unopened = |o: &mut Origin| {
        o.response(5, "200", &[], true);
    };
    assert_connection_error(ClientConfig::default(), unopened, ErrorCode::ProtocolError);
    let data = |o: &mut Origin| {
        o.data(7, b"x", true);
    };
    assert_connection_error(ClientConfig::default(), data, ErrorCode::ProtocolError);
}

#[test]
fn continuation_rules_are_connection_errors() {
    let alone = |o: &mut Origin| {
        o.raw(0x9, 0x4, 1, &[0x88]);
    };
    assert_connection_error(ClientConfig::default(), alone, ErrorCode::ProtocolError);
    let interleaved = |o: &mut Origin| {
        o.raw(0x1, 0, 1, &[0x88]).ping(*b"interlvd");
    };
    assert_connection_error(
        ClientConfig::default(),
        interleaved,
        ErrorCode::ProtocolError,
    );
    let other_stream = |o: &mut Origin| {
        o.raw(0x1, 0, 1, &[0x88]).raw(0x9, 0x4, 3, &[]);
    };
    assert_connection_error(
        ClientConfig::default(),
        other_stream,
        ErrorCode::ProtocolError,
    );
    let config = ClientConfig {
        max_header_list_size: 1000,
        ..ClientConfig::default()
    };
    let endless = |o: &mut Origin| {
        o.raw(0x1, 0, 1, &[0x88]);
        for _ in 0..100 {
            o.raw(0x9, 0, 1, &[0; 100]);
        }
    };
    assert_connection_error(config, endless, ErrorCode::EnhanceYourCalm);
}

#[test]
fn split_header_block_is_joined() {
    let mut pair = Pair::ready(ClientConfig::default());
    let id = pair.request("GET", "/", true);
    pair.output();
    let value = "w".repeat(300);
    let mut origin = Origin::new();
    origin.headers_split(id, &[(":status", "200"), ("x-long", &value)], true, 50);
    pair.feed_split(&origin.take(), 7).unwrap();
    let events = pair.events();
    let ClientEvent::Response { fields, .. } = &events[0] else {
        panic!("{events:?}");
    };
    assert_eq!(fields.get("x-long"), Some(value.as_bytes()));
}

#[test]
fn connection_window_exceeded_is_a_flow_control_error() {
    let config = ClientConfig {
        stream_window: 1 << 20,
        connection_window: 65_535,
        ..ClientConfig::default()
    };
    let script = |o: &mut Origin| {
        o.response(1, "200", &[], false);
        for _ in 0..4 {
            o.data(1, &[0; 16_384], false);
        }
    };
    assert_connection_error(config, script, ErrorCode::FlowControlError);
}

#[test]
fn bad_hpack_is_a_compression_error() {
    let script = |o: &mut Origin| {
        // Index 200 is in neither table.
        o.raw(0x1, 0x5, 1, &[0xff, 0x49]);
    };
    assert_connection_error(ClientConfig::default(), script, ErrorCode::CompressionError);
}

#[test]
fn enable_push_from_a_server_is_a_connection_error() {
    let script = |o: &mut Origin| {
        o.settings(&[(SettingId::EnablePush, 1)]);
    };
    assert_connection_error(ClientConfig::default(), script, ErrorCode::ProtocolError);
}

#[test]
fn first_frame_must_be_settings() {
    let mut pair = Pair::new(ClientConfig::default());
    pair.output();
    let error = pair
        .feed(&Origin::new().ping(*b"notfirst").take())
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::ProtocolError);
    assert_eq!(
        pair.output(),
        vec![Out::GoAway {
            last_stream_id: 0,
            code: ErrorCode::ProtocolError
        }]
    );
}

#[test]
fn unread_answers_are_bounded() {
    let mut pair = Pair::ready(ClientConfig::default());
    let mut origin = Origin::new();
    for _ in 0..10_000 {
        origin.ping(*b"flooding");
    }
    let error = pair.feed(&origin.take()).unwrap_err();
    assert_eq!(error.code, ErrorCode::EnhanceYourCalm);
    assert_eq!(error.flood, Some(squall_h2::FloodKind::OutputQueue));
}

#[test]
fn rst_stream_on_an_idle_stream_is_a_connection_error() {
    let script = |o: &mut Origin| {
        o.rst(9, ErrorCode::Cancel);
    };
    assert_connection_error(ClientConfig::default(), script, ErrorCode::ProtocolError);
}

#[test]
fn bad_frame_on_an_idle_stream_is_a_connection_error() {
    // PRIORITY of 4 bytes: a stream FRAME_SIZE_ERROR on an open stream, but stream 9 was
    // never opened.
    let script = |o: &mut Origin| {
        o.raw(0x2, 0, 9, &[0, 0, 0, 1]);
    };
    assert_connection_error(ClientConfig::default(), script, ErrorCode::ProtocolError);
}

#[test]
fn bad_frame_on_an_open_stream_resets_it() {
    let mut pair = Pair::ready(ClientConfig::default());
    let id = pair.request("GET", "/", true);
    pair.output();
    // A zero WINDOW_UPDATE increment on a stream (RFC 9113 §6.9) is a stream error.
    pair.feed(&Origin::new().raw(0x8, 0, id, &[0, 0, 0, 0]).take())
        .unwrap();
    assert_reset_by_us(&mut pair, id, ErrorCode::ProtocolError);
}

/// Found by the `client` fuzz target: a response whose body and END_STREAM came with its
/// head closes the stream at once, its events still waiting; the application, reading the
/// head, resets the stream (its client went away). No event may follow the reset, and the
/// waiting body must give its window back: the application never sees it, so never
/// releases it, and the connection window would shrink for good (a proxy's origin
/// connection stalls after a few such responses).
#[test]
fn a_reset_after_the_stream_closed_drops_its_waiting_events_and_returns_their_window() {
    let config = ClientConfig {
        connection_window: 65_535,
        stream_window: 65_535,
        ..ClientConfig::default()
    };
    let mut pair = Pair::ready(config);
    let id = pair.request("GET", "/", true);
    pair.output();
    let mut origin = Origin::new();
    origin.response(id, "200", &[], false);
    for size in [16_384, 16_384, 7_232] {
        origin.data(id, &vec![b'x'; size], size == 7_232);
    }
    pair.feed(&origin.take()).unwrap();
    let head = pair.conn.poll_event().expect("the head");
    assert_eq!(response_of(&head).1, 200);
    pair.conn.reset_stream(id, ErrorCode::Cancel);
    pair.conn.check_invariants();
    assert_eq!(pair.events(), vec![]);
    // Nothing to reset on the wire (the stream is closed); the window comes back.
    let update = Out::WindowUpdate {
        stream_id: 0,
        increment: 40_000,
    };
    assert_eq!(pair.output(), vec![update]);
    // The whole connection window again: a 65,535-byte body is within it.
    let next = pair.request("GET", "/", true);
    pair.output();
    origin.response(next, "200", &[], false);
    for size in [16_384, 16_384, 16_384, 16_383] {
        origin.data(next, &vec![b'y'; size], size == 16_383);
    }
    pair.feed(&origin.take()).expect("within the window");
    let events = pair.events();
    assert_eq!(events.len(), 2, "{events:?}");
    let ClientEvent::Data { data, .. } = &events[1] else {
        panic!("{events:?}");
    };
    assert_eq!(data.len(), 65_535);
}

/// The same after a connection error that came in the same read: the stream had closed
/// before it, so its events wait; a reset still drops them.
#[test]
fn a_reset_after_a_connection_error_drops_a_closed_streams_waiting_events() {
    let mut pair = Pair::ready(ClientConfig::default());
    let id = pair.request("GET", "/", true);
    pair.output();
    let mut origin = Origin::new();
    origin
        .response(id, "200", &[], false)
        .data(id, b"hello", true)
        .data(99, b"bad", true);
    assert!(pair.feed(&origin.take()).is_err());
    let head = pair.conn.poll_event().expect("the head");
    assert_eq!(response_of(&head).1, 200);
    pair.conn.reset_stream(id, ErrorCode::Cancel);
    pair.conn.check_invariants();
    assert_eq!(pair.events(), vec![]);
    assert!(pair.conn.is_finished() || pair.conn.has_output());
}

/// Found by the `client` fuzz target: the transport fails (`fail`) while a response head
/// waits for its CONTINUATION; the half block goes with the streams.
#[test]
fn a_transport_failure_inside_a_header_block_drops_the_block() {
    let mut pair = Pair::ready(ClientConfig::default());
    let id = pair.request("GET", "/", true);
    pair.output();
    let mut origin = Origin::new();
    let block = origin.block(&[(":status", "200"), ("server", "origin")]);
    origin.raw(0x1, 0, id, &block[..2]);
    pair.feed(&origin.take()).unwrap();
    pair.conn.fail();
    pair.conn.check_invariants();
    let reset = ClientEvent::Reset {
        stream_id: id,
        code: ErrorCode::Cancel,
        refused: false,
    };
    assert_eq!(pair.events(), vec![reset]);
    assert!(pair.conn.is_finished());
}
