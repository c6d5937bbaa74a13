//! The connection on clients that break the rules: malformed requests (RFC 9113 §8.1.1),
//! stream state errors (§5.1), flow-control errors (§6.9), header block rules (§6.10),
//! HPACK errors (§4.3), and the requests the connection answers itself (413, 414, 431,
//! 501). Each client byte sequence is fed whole and split at every boundary.

mod conn_support;

use bytes::Bytes;
use conn_support::*;
use squall_h2::{Connection, ErrorCode, Event, ServerConfig, SettingId};

/// The fields, as a request on stream 1, make a malformed request: reset with
/// PROTOCOL_ERROR, never shown to the application; the connection carries on.
fn assert_malformed(fields: &[(&str, &str)], end_stream: bool) {
    assert_malformed_with(&ServerConfig::default(), fields, end_stream);
}

fn with<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut fields = request("GET", "/");
    fields.extend_from_slice(extra);
    fields
}

#[test]
fn field_names_must_be_lowercase_tokens() {
    assert_malformed(&with(&[("X-Upper", "1")]), true);
    assert_malformed(&with(&[("bad name", "1")]), true);
    assert_malformed(&with(&[("", "1")]), true);
}

#[test]
fn field_values_must_not_hold_nul_cr_lf_or_edge_whitespace() {
    for value in ["a\0b", "a\rb", "a\nb", " a", "a ", "\ta", "a\t"] {
        assert_malformed(&with(&[("x-v", value)]), true);
    }
    assert_malformed(&request("GET", "/a\nb"), true);
}

#[test]
fn pseudo_headers_are_known_unique_and_first() {
    assert_malformed(&with(&[(":foo", "bar")]), true);
    assert_malformed(&with(&[(":status", "200")]), true);
    assert_malformed(&with(&[(":protocol", "websocket")]), true);
    assert_malformed(&with(&[(":path", "/again")]), true);
    assert_malformed(&with(&[(":method", "GET")]), true);
    let late = [
        (":method", "GET"),
        ("accept", "*/*"),
        (":scheme", "https"),
        (":path", "/"),
    ];
    assert_malformed(&late, true);
}

#[test]
fn method_scheme_and_path_are_required_and_valid() {
    assert_malformed(&[(":scheme", "https"), (":path", "/")], true);
    assert_malformed(&[(":method", "GET"), (":path", "/")], true);
    assert_malformed(&[(":method", "GET"), (":scheme", "https")], true);
    assert_malformed(&request("GET", ""), true);
    assert_malformed(&request("GET", "index.html"), true);
    assert_malformed(&request("GET", "*"), true);
    assert_malformed(&request("GE T", "/"), true);
    let bad_scheme = [(":method", "GET"), (":scheme", "1http"), (":path", "/")];
    assert_malformed(&bad_scheme, true);
}

#[test]
fn authority_has_no_userinfo_and_agrees_with_host() {
    let userinfo = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "user@example.com"),
        (":path", "/"),
    ];
    assert_malformed(&userinfo, true);
    assert_malformed(&with(&[("host", "other.example")]), true);
}

#[test]
fn connection_specific_fields_are_malformed() {
    for name in [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
    ] {
        assert_malformed(&with(&[(name, "x")]), true);
    }
    assert_malformed(&with(&[("te", "gzip")]), true);
}

#[test]
fn te_trailers_and_server_wide_options_are_fine() {
    let mut client = Client::new();
    client
        .headers(1, &with(&[("te", "trailers")]), true)
        .get(3, "*");
    let mut options = request("OPTIONS", "*");
    options.push(("x", "y"));
    client.headers(5, &options, true);
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(outcome.requests(), [1, 5]);
    assert_eq!(outcome.resets(), [(3, ErrorCode::ProtocolError)]);
}

#[test]
fn content_length_must_be_digits_agree_and_be_zero_without_body() {
    assert_malformed(&with(&[("content-length", "abc")]), false);
    assert_malformed(&with(&[("content-length", "-1")]), false);
    assert_malformed(
        &with(&[("content-length", "5"), ("content-length", "6")]),
        false,
    );
    assert_malformed(&with(&[("content-length", "5")]), true);
    // Repeats that agree, and zero without a body, are fine.
    let mut client = Client::new();
    client
        .headers(1, &with(&[("content-length", "0")]), true)
        .headers(
            3,
            &with(&[("content-length", "2"), ("content-length", "2")]),
            false,
        )
        .data(3, b"ab", true);
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(outcome.requests(), [1, 3]);
    assert_eq!(outcome.resets(), []);
}

/// The body of stream 1 breaks a rule found after the request was queued: reset with
/// PROTOCOL_ERROR. An application that had not polled the request never sees it; one that
/// had gets a Reset.
fn assert_body_malformed(client: &mut Client) {
    let bytes = client.take();
    let outcome = run_all_splits(&ServerConfig::default(), &bytes, &no_app);
    assert_eq!(outcome.events, []);
    assert_eq!(outcome.resets(), [(1, ErrorCode::ProtocolError)]);
    assert_eq!(outcome.error, None);
    let (head, body) = bytes.split_at(first_frame_end(&bytes));
    let outcome = run_interleaved(&ServerConfig::default(), [head, body], &no_app);
    assert_eq!(outcome.requests(), [1]);
    assert_eq!(
        outcome.events.last(),
        Some(&Event::Reset {
            stream_id: 1,
            code: ErrorCode::ProtocolError
        })
    );
}

/// Where the client's first HEADERS frame ends (after the preface and SETTINGS).
fn first_frame_end(bytes: &[u8]) -> usize {
    let mut at = squall_h2::PREFACE.len();
    loop {
        let len = u32::from_be_bytes([0, bytes[at], bytes[at + 1], bytes[at + 2]]) as usize;
        let ty = bytes[at + 3];
        at += 9 + len;
        if ty == 0x1 {
            return at;
        }
    }
}

#[test]
fn body_must_match_content_length() {
    let mut client = Client::new();
    client.post(1, "/", Some(5)).data(1, b"abc", true);
    assert_body_malformed(&mut client);
    let mut client = Client::new();
    client.post(1, "/", Some(5)).data(1, b"abcdef", false);
    assert_body_malformed(&mut client);
    let mut client = Client::new();
    client
        .post(1, "/", Some(5))
        .data(1, b"abc", false)
        .headers(1, &[("x-t", "1")], true);
    assert_body_malformed(&mut client);
}

#[test]
fn trailers_must_end_the_stream_and_have_no_pseudo_headers() {
    let mut client = Client::new();
    client.post(1, "/", None).headers(1, &[("x-t", "1")], false);
    assert_body_malformed(&mut client);
    let mut client = Client::new();
    client
        .post(1, "/", None)
        .headers(1, &[(":path", "/"), ("x-t", "1")], true);
    assert_body_malformed(&mut client);
    let mut client = Client::new();
    client
        .post(1, "/", None)
        .headers(1, &[("connection", "close")], true);
    assert_body_malformed(&mut client);
}

#[test]
fn connect_is_answered_501_or_malformed() {
    let connect = [(":method", "CONNECT"), (":authority", "example.com:443")];
    let mut client = Client::new();
    client.headers(1, &connect, false);
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(outcome.statuses(), [(1, "501".to_string())]);
    assert_eq!(outcome.resets(), [(1, ErrorCode::NoError)]);
    assert_eq!(outcome.events, []);
    assert_malformed(&[(":method", "CONNECT"), (":path", "/")], false);
    assert_malformed(&[(":method", "CONNECT")], false);
}

/// Runs `client` and asserts it ends the connection with `code`.
fn assert_connection_error(client: &mut Client, code: ErrorCode) -> Outcome {
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(outcome.error.map(|e| e.code), Some(code), "{outcome:?}");
    assert_eq!(outcome.goaway(), Some(code));
    outcome
}

#[test]
fn bad_preface_or_first_frame_is_a_protocol_error() {
    let mut client = Client::bare();
    client.raw(0, 0, 0, b"GET / HTTP/1.1\r\n\r\n");
    assert_connection_error(&mut client, ErrorCode::ProtocolError);
    let mut client = Client::bare();
    client.bytes.extend_from_slice(squall_h2::PREFACE);
    client.ping(*b"12345678");
    assert_connection_error(&mut client, ErrorCode::ProtocolError);
    let mut client = Client::bare();
    client.bytes.extend_from_slice(squall_h2::PREFACE);
    client.settings_ack();
    assert_connection_error(&mut client, ErrorCode::ProtocolError);
}

#[test]
fn frames_on_idle_streams_are_protocol_errors() {
    let mut client = Client::new();
    client.data(1, b"x", false);
    assert_connection_error(&mut client, ErrorCode::ProtocolError);
    let mut client = Client::new();
    client.rst(1, ErrorCode::Cancel);
    assert_connection_error(&mut client, ErrorCode::ProtocolError);
    let mut client = Client::new();
    client.window_update(1, 100);
    assert_connection_error(&mut client, ErrorCode::ProtocolError);
    let mut client = Client::new();
    client.raw(0x9, 0x4, 1, b"");
    assert_connection_error(&mut client, ErrorCode::ProtocolError);
    // An idle stream may see PRIORITY, and it does not open it.
    let mut client = Client::new();
    client.priority(5, 0).get(3, "/");
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(outcome.requests(), [3]);
}

#[test]
fn stream_ids_are_odd_and_increasing() {
    let mut client = Client::new();
    client.get(2, "/");
    assert_connection_error(&mut client, ErrorCode::ProtocolError);
    let mut client = Client::new();
    client.get(5, "/").get(3, "/");
    let outcome = assert_connection_error(&mut client, ErrorCode::ProtocolError);
    // The connection is over: queued requests are dropped with it.
    assert_eq!(outcome.requests(), []);
    assert!(outcome.output.contains(&Out::GoAway {
        last_stream_id: 5,
        code: ErrorCode::ProtocolError
    }));
}

#[test]
fn frames_on_half_closed_remote_streams_are_stream_closed() {
    let mut client = Client::new();
    client.get(1, "/").data(1, b"x", false).get(3, "/");
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(outcome.resets(), [(1, ErrorCode::StreamClosed)]);
    // Reset before the application polled it: it never sees stream 1.
    assert_eq!(outcome.requests(), [3]);
    let mut client = Client::new();
    client.get(1, "/").headers(1, &[("x-t", "1")], true);
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(outcome.resets(), [(1, ErrorCode::StreamClosed)]);
}

#[test]
fn frames_on_closed_streams() {
    // Closed by END_STREAM both ways: DATA is a stream error, HEADERS a connection error.
    let respond = |conn: &mut Connection, event: &Event| {
        if let Event::Request { stream_id, .. } = event {
            conn.send_headers(*stream_id, 204, [], true).unwrap();
        }
    };
    let mut client = Client::new();
    client.get(1, "/");
    let opening = client.take();
    client.data(1, b"x", true);
    let late_data = client.take();
    let outcome = run_interleaved(
        &ServerConfig::default(),
        [&opening[..], &late_data],
        &respond,
    );
    assert_eq!(outcome.resets(), [(1, ErrorCode::StreamClosed)]);
    assert_eq!(outcome.error, None);
    client.get(1, "/");
    let late_headers = client.take();
    let outcome = run_interleaved(
        &ServerConfig::default(),
        [&opening[..], &late_headers],
        &respond,
    );
    assert_eq!(outcome.goaway(), Some(ErrorCode::StreamClosed));
    // WINDOW_UPDATE and RST_STREAM may cross our END_STREAM: ignored.
    client.window_update(1, 10).rst(1, ErrorCode::Cancel);
    let crossing = client.take();
    let outcome = run_interleaved(
        &ServerConfig::default(),
        [&opening[..], &crossing],
        &respond,
    );
    assert_eq!(outcome.error, None);
    assert_eq!(outcome.resets(), []);
}

#[test]
fn frames_after_a_peer_reset_are_stream_closed() {
    let mut client = Client::new();
    client
        .post(1, "/", None)
        .rst(1, ErrorCode::Cancel)
        .data(1, b"x", false);
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(outcome.resets(), [(1, ErrorCode::StreamClosed)]);
    let mut client = Client::new();
    client
        .post(1, "/", None)
        .rst(1, ErrorCode::Cancel)
        .headers(1, &[("x", "y")], true);
    assert_connection_error(&mut client, ErrorCode::StreamClosed);
}

#[test]
fn frames_after_our_reset_are_ignored() {
    let mut client = Client::new();
    // Stream 1 is malformed and reset; its DATA and trailers still come, and are dropped
    // (the trailers decoded all the same, so HPACK stays in step for stream 3).
    client
        .headers(1, &with(&[("X-Bad", "1")]), false)
        .data(1, b"abc", false)
        .headers(1, &[("x-late", "trailer")], true)
        .headers(3, &with(&[("x-late", "trailer")]), true);
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(outcome.resets(), [(1, ErrorCode::ProtocolError)]);
    assert_eq!(outcome.requests(), [3]);
    assert_eq!(outcome.error, None);
}

#[test]
fn zero_window_increments_are_protocol_errors() {
    let mut client = Client::new();
    client.get(1, "/").raw(0x8, 0, 1, &[0, 0, 0, 0]);
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(outcome.resets(), [(1, ErrorCode::ProtocolError)]);
    let mut client = Client::new();
    client.raw(0x8, 0, 0, &[0, 0, 0, 0]);
    assert_connection_error(&mut client, ErrorCode::ProtocolError);
}

#[test]
fn window_overflow_is_a_flow_control_error() {
    let mut client = Client::new();
    client.get(1, "/").window_update(1, (1 << 31) - 1);
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(outcome.resets(), [(1, ErrorCode::FlowControlError)]);
    let mut client = Client::new();
    client.window_update(0, (1 << 31) - 1);
    assert_connection_error(&mut client, ErrorCode::FlowControlError);
    let mut client = Client::new();
    client
        .get(1, "/")
        .window_update(1, (1 << 31) - 1 - 65_535)
        .settings(&[(SettingId::InitialWindowSize, 65_536)]);
    assert_connection_error(&mut client, ErrorCode::FlowControlError);
}

#[test]
fn data_beyond_our_windows_is_a_flow_control_error() {
    let mut config = ServerConfig {
        initial_window_size: 65_535,
        ..ServerConfig::default()
    };
    let mut client = Client::new();
    client.post(1, "/", None);
    for _ in 0..4 {
        client.data(1, &[0; 16_384], false);
    }
    let outcome = run_all_splits(&config, &client.take(), &no_app);
    assert_eq!(outcome.resets(), [(1, ErrorCode::FlowControlError)]);
    assert_eq!(outcome.error, None);
    // Past the connection window, over two streams.
    config.connection_window_size = 65_535;
    let mut client = Client::new();
    client.post(1, "/", None).post(3, "/", None);
    for _ in 0..2 {
        client
            .data(1, &[0; 16_384], false)
            .data(3, &[0; 16_384], false);
    }
    let outcome = run_all_splits(&config, &client.take(), &no_app);
    assert_eq!(
        outcome.error.map(|e| e.code),
        Some(ErrorCode::FlowControlError)
    );
}

#[test]
fn header_blocks_must_not_be_interleaved() {
    let mut client = Client::new();
    let block = client.block(&request("GET", "/"));
    client.raw(0x1, 0x1, 1, &block[..3]).ping(*b"12345678");
    assert_connection_error(&mut client, ErrorCode::ProtocolError);
    let mut client = Client::new();
    let block = client.block(&request("GET", "/"));
    client
        .raw(0x1, 0x1, 1, &block[..3])
        .raw(0x9, 0x4, 3, &block[3..]);
    assert_connection_error(&mut client, ErrorCode::ProtocolError);
    let mut client = Client::new();
    let block = client.block(&request("GET", "/"));
    client.raw(0x1, 0x1, 1, &block[..3]).get(3, "/");
    assert_connection_error(&mut client, ErrorCode::ProtocolError);
}

#[test]
fn hpack_errors_are_compression_errors() {
    let mut client = Client::new();
    // Indexed field 70: past the static table and an empty dynamic table.
    client.raw(0x1, 0x5, 1, &[0x80 | 70]);
    assert_connection_error(&mut client, ErrorCode::CompressionError);
    let mut client = Client::new();
    // A literal whose length runs past the block.
    client.raw(0x1, 0x5, 1, &[0x40, 0x0a, b'a']);
    assert_connection_error(&mut client, ErrorCode::CompressionError);
}

#[test]
fn push_promise_is_a_protocol_error() {
    let mut client = Client::new();
    client.get(1, "/").raw(0x5, 0x4, 1, &[0, 0, 0, 2]);
    assert_connection_error(&mut client, ErrorCode::ProtocolError);
}

#[test]
fn self_dependency_is_a_stream_error() {
    let mut client = Client::new();
    client.get(1, "/").priority(1, 1);
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(outcome.resets(), [(1, ErrorCode::ProtocolError)]);
    // HEADERS with the PRIORITY flag and itself as dependency.
    let mut client = Client::new();
    let mut payload = vec![0, 0, 0, 3, 15];
    payload.extend(client.block(&request("GET", "/")));
    client.raw(0x1, 0x25, 3, &payload).get(5, "/");
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(outcome.resets(), [(3, ErrorCode::ProtocolError)]);
    assert_eq!(outcome.requests(), [5]);
}

#[test]
fn header_list_over_the_limit_is_answered_431() {
    let config = small_config();
    let mut client = Client::new();
    let long = "v".repeat(2000);
    client
        .headers(1, &with(&[("x-big", &long)]), true)
        .post(3, "/", None)
        .headers(3, &[("x-big", &long)], true)
        .get(5, "/");
    let bytes = client.take();
    let outcome = run_all_splits(&config, &bytes, &no_app);
    assert_eq!(outcome.requests(), [5]);
    assert_eq!(outcome.error, None);
    assert_eq!(
        outcome.statuses(),
        [(1, "431".to_string()), (3, "431".to_string())]
    );
}

#[test]
fn hpack_bomb_is_answered_431_and_the_table_stays_in_step() {
    let config = small_config();
    let mut client = Client::new();
    // One 500-byte entry inserted, then named 1,000 times: half a megabyte decoded from
    // 1.5 KB, far over the 1 KiB list limit.
    // Literal with incremental indexing, new name "x", value of 500 bytes (an HPACK
    // integer: 127 in the prefix, then 373 in two continuation bytes).
    let mut block = vec![0x40, 0x01, b'x', 0x7f, 0xf5, 0x02];
    block.extend(std::iter::repeat_n(b'b', 500));
    block.extend(std::iter::repeat_n(0x80 | 62, 1000));
    client.raw(0x1, 0x5, 1, &block).get(3, "/");
    let outcome = run_all_splits(&config, &client.take(), &no_app);
    assert_eq!(outcome.statuses(), [(1, "431".to_string())]);
    assert_eq!(outcome.requests(), [3]);
    assert_eq!(outcome.error, None);
}

#[test]
fn long_path_is_answered_414() {
    let config = small_config();
    let long = format!("/{}", "p".repeat(100));
    let mut client = Client::new();
    client
        .get(1, &long)
        .post(3, &long, None)
        .data(3, b"x", true);
    let outcome = run_all_splits(&config, &client.take(), &no_app);
    assert_eq!(
        outcome.statuses(),
        [(1, "414".to_string()), (3, "414".to_string())]
    );
    assert_eq!(outcome.resets(), [(3, ErrorCode::NoError)]);
    assert_eq!(outcome.events, []);
    assert_eq!(outcome.error, None);
}

#[test]
fn large_body_is_answered_413() {
    let config = small_config();
    // Announced by content-length: answered before the application sees it.
    let mut client = Client::new();
    client.post(1, "/", Some(1001));
    let outcome = run_all_splits(&config, &client.take(), &no_app);
    assert_eq!(outcome.statuses(), [(1, "413".to_string())]);
    assert_eq!(outcome.events, []);
    // Counted: answered all the same; an application that had the request is told.
    let mut client = Client::new();
    client
        .post(1, "/", None)
        .data(1, &[0; 600], false)
        .data(1, &[0; 600], false);
    let bytes = client.take();
    let outcome = run_all_splits(&config, &bytes, &no_app);
    assert_eq!(outcome.statuses(), [(1, "413".to_string())]);
    assert_eq!(outcome.resets(), [(1, ErrorCode::NoError)]);
    assert_eq!(outcome.events, []);
    let (head, body) = bytes.split_at(first_frame_end(&bytes));
    let outcome = run_interleaved(&config, [head, body], &no_app);
    assert_eq!(outcome.statuses(), [(1, "413".to_string())]);
    assert_eq!(outcome.requests(), [1]);
    assert!(matches!(
        outcome.events.last(),
        Some(Event::Reset {
            stream_id: 1,
            code: ErrorCode::NoError
        })
    ));
    // The response had begun: only a reset.
    let respond = |conn: &mut Connection, event: &Event| {
        if let Event::Request { stream_id, .. } = event {
            conn.send_headers(*stream_id, 200, [], false).unwrap();
        }
    };
    let outcome = run_interleaved(&config, [head, body], &respond);
    assert_eq!(outcome.statuses(), [(1, "200".to_string())]);
    assert_eq!(outcome.resets(), [(1, ErrorCode::Cancel)]);
}

#[test]
fn errors_repeat_and_end_the_connection() {
    let mut harness = Harness::new(ServerConfig::default());
    let mut client = Client::new();
    client.get(1, "/").get(3, "/");
    harness.feed(&client.take(), &no_app);
    harness.conn.send_headers(1, 200, [], false).unwrap();
    harness
        .conn
        .send_data(1, Bytes::from_static(b"abc"), false)
        .unwrap();
    client.get(2, "/");
    harness.feed(&client.take(), &no_app);
    let error = harness.error.expect("error");
    assert_eq!(error.code, ErrorCode::ProtocolError);
    assert_eq!(harness.conn.last_error(), Some(&error));
    assert!(
        harness
            .conn
            .send_data(1, Bytes::from_static(b"x"), true)
            .is_err()
    );
    let out = harness.flush();
    assert!(matches!(
        out.last(),
        Some(Out::GoAway {
            last_stream_id: 3,
            ..
        })
    ));
    assert!(
        out.iter().all(|o| !matches!(o, Out::Data { .. })),
        "{out:?}"
    );
    assert!(harness.conn.is_finished());
    assert_eq!(harness.conn.next_deadline(), None);
    assert_eq!(harness.conn.take_stats().protocol_errors, 1);
}
