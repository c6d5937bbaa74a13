//! RFC 9218 extensible priorities on the connection: the `priority` request field and
//! PRIORITY_UPDATE frames decide the order of response DATA (lower urgency first,
//! non-incremental streams one after another, incremental ones in turn), streams that say
//! nothing keep round robin, and PRIORITY_UPDATE's errors and limits. Client bytes are fed
//! whole and split at every boundary (see `conn_support`).

mod conn_support;

use bytes::Bytes;
use conn_support::*;
use squall_h2::{Connection, ErrorCode, Event, FloodKind, ServerConfig, SettingId, StreamId};

/// Bytes of every response body: three DATA frames at the default max frame size.
const BODY_BYTES: usize = 40_000;

/// Answers every request with 200 and a body of [`BODY_BYTES`].
fn body_app(conn: &mut Connection, event: &Event) {
    if let Event::Request { stream_id, .. } = event {
        conn.send_headers(*stream_id, 200, [], false).unwrap();
        let body = Bytes::from(vec![b'x'; BODY_BYTES]);
        conn.send_data(*stream_id, body, true).unwrap();
    }
}

/// A client whose windows never hold the server back.
fn open_client() -> Client {
    let mut client = Client::new();
    client
        .settings(&[(SettingId::InitialWindowSize, 1 << 20)])
        .window_update(0, 1 << 24);
    client
}

/// A GET with a `priority` field when `priority` is given.
fn get(client: &mut Client, id: StreamId, priority: Option<&str>) {
    let mut fields = request("GET", "/");
    if let Some(priority) = priority {
        fields.push(("priority", priority));
    }
    client.headers(id, &fields, true);
}

/// The stream of each DATA frame, in the order sent.
fn data_order(output: &[Out]) -> Vec<StreamId> {
    (output.iter())
        .filter_map(|o| match o {
            Out::Data { stream_id, .. } => Some(*stream_id),
            _ => None,
        })
        .collect()
}

/// Runs `client` whole and split with [`body_app`]; the order of its DATA frames.
fn order_of(config: &ServerConfig, client: &mut Client) -> Vec<StreamId> {
    let outcome = run_all_splits(config, &client.take(), &body_app);
    assert_eq!(outcome.error, None);
    data_order(&outcome.output)
}

/// Answers `/small` with a 5-byte body, anything else as [`body_app`] does.
fn mixed_app(conn: &mut Connection, event: &Event) {
    match event {
        Event::Request { stream_id, request } if &request.path[..] == b"/small" => {
            conn.send_headers(*stream_id, 200, [], false).unwrap();
            (conn.send_data(*stream_id, Bytes::from_static(b"small"), true)).unwrap();
        }
        _ => body_app(conn, event),
    }
}

/// A small last piece with no stream waiting for a turn leaves at once, right behind its
/// own head; behind a stream that waits, it takes its turn by priority like any other.
#[test]
fn a_small_answer_leaves_at_once_unless_a_stream_waits_for_its_turn() {
    let mut client = open_client();
    for id in [1, 3] {
        client.headers(id, &request("GET", "/small"), true);
    }
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &mixed_app);
    let frames: Vec<_> = (outcome.replies().into_iter())
        .filter_map(|out| match out {
            Out::Headers { stream_id, .. } => Some(("HEADERS", stream_id)),
            Out::Data {
                stream_id,
                end_stream: true,
                ..
            } => Some(("DATA END", stream_id)),
            Out::SettingsAck => None,
            other => panic!("{other:?}"),
        })
        .collect();
    let expected = [
        ("HEADERS", 1),
        ("DATA END", 1),
        ("HEADERS", 3),
        ("DATA END", 3),
    ];
    assert_eq!(frames, expected);
    // Stream 1's large body waits for its turns; stream 3's small one comes after it, as
    // its lower urgency says, not ahead of it.
    let mut client = open_client();
    get(&mut client, 1, Some("u=0"));
    let mut fields = request("GET", "/small");
    fields.push(("priority", "u=5"));
    client.headers(3, &fields, true);
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &mixed_app);
    assert_eq!(data_order(&outcome.output), [1, 1, 1, 3]);
}

#[test]
fn our_settings_say_rfc7540_priorities_are_not_used() {
    let mut harness = Harness::new(ServerConfig::default());
    let out = harness.flush();
    let Some(Out::Settings(params)) = out.first() else {
        panic!("SETTINGS first: {out:?}");
    };
    assert!(params.contains(&(SettingId::NoRfc7540Priorities, 1)));
}

#[test]
fn a_peer_setting_no_rfc7540_priorities_other_than_0_or_1_is_a_protocol_error() {
    let mut client = Client::new();
    client.raw(0x4, 0, 0, &[0, 0x9, 0, 0, 0, 1]);
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(outcome.error, None);
    let mut client = Client::new();
    client.raw(0x4, 0, 0, &[0, 0x9, 0, 0, 0, 2]);
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(outcome.goaway(), Some(ErrorCode::ProtocolError));
}

#[test]
fn urgency_then_incremental_order() {
    let mut client = open_client();
    get(&mut client, 1, None);
    get(&mut client, 3, Some("u=5"));
    get(&mut client, 5, Some("u=0"));
    get(&mut client, 7, Some("u=1, i"));
    get(&mut client, 9, Some("i, u=1"));
    get(&mut client, 11, Some("u=1"));
    get(&mut client, 13, Some("u=1, i=?0"));
    let order = order_of(&ServerConfig::default(), &mut client);
    assert_eq!(
        order,
        [
            // Urgency 0 alone.
            5, 5, 5,
            // Urgency 1: 11 then 13 one after the other (not incremental), and as a group
            // one turn among the incremental 7 and 9, which take theirs in round robin.
            11, 7, 11, 9, 11, 7, 13, 9, 13, 7, 13, 9, // Urgency 3: no signal.
            1, 1, 1, // Urgency 5.
            3, 3, 3,
        ]
    );
}

#[test]
fn without_priorities_streams_keep_round_robin() {
    let mut client = open_client();
    for id in [1, 3, 5] {
        get(&mut client, id, None);
    }
    let order = order_of(&ServerConfig::default(), &mut client);
    assert_eq!(order, [1, 3, 5, 1, 3, 5, 1, 3, 5]);
    // A field that is not a dictionary is ignored whole (RFC 8941 §4.2): no signal either.
    let mut client = open_client();
    get(&mut client, 1, None);
    get(&mut client, 3, Some("u=0,"));
    get(&mut client, 5, Some("U=0"));
    let order = order_of(&ServerConfig::default(), &mut client);
    assert_eq!(order, [1, 3, 5, 1, 3, 5, 1, 3, 5]);
}

#[test]
fn unknown_and_out_of_range_parameters_keep_their_defaults() {
    let mut client = open_client();
    // u=3 (the default, as u=9 is out of range), not incremental: ahead of nothing, after 3.
    get(&mut client, 1, Some("u=9, foo=bar"));
    get(&mut client, 3, Some("u=2, i=1"));
    get(&mut client, 5, Some("u=4"));
    let order = order_of(&ServerConfig::default(), &mut client);
    assert_eq!(order, [3, 3, 3, 1, 1, 1, 5, 5, 5]);
}

#[test]
fn a_stream_blocked_on_its_window_does_not_hold_back_the_others() {
    let mut client = Client::new();
    client
        .settings(&[(SettingId::InitialWindowSize, 16_384)])
        .window_update(0, 1 << 24);
    get(&mut client, 1, Some("u=0"));
    get(&mut client, 3, Some("u=7"));
    client.window_update(3, 40_000);
    let order = order_of(&ServerConfig::default(), &mut client);
    assert_eq!(order, [1, 3, 3, 3]);
}

#[test]
fn priority_holds_across_a_closed_connection_window() {
    let mut harness = Harness::new(ServerConfig::default());
    harness.flush();
    let mut client = Client::new();
    client.settings(&[(SettingId::InitialWindowSize, 1 << 20)]);
    get(&mut client, 1, Some("u=7"));
    get(&mut client, 3, Some("u=0"));
    get(&mut client, 5, None);
    harness.feed(&client.take(), &body_app);
    // The connection window (65,535) takes all of urgency 0 and 25,535 bytes of urgency 3;
    // then both streams left wait for it, and keep their order when it opens.
    let first = data_order(&harness.flush());
    assert_eq!(first, [3, 3, 3, 5, 5]);
    assert!(!harness.conn.has_output(), "window closed");
    client.window_update(0, 1 << 20);
    let rest = data_order(&harness.step(&client.take()));
    assert_eq!(rest, [5, 1, 1, 1]);
}

#[test]
fn priority_update_moves_an_open_stream() {
    let mut client = open_client();
    for id in [1, 3, 5] {
        get(&mut client, id, None);
    }
    client
        .priority_update(5, "u=0")
        .priority_update(3, "u=6, i");
    let order = order_of(&ServerConfig::default(), &mut client);
    assert_eq!(order, [5, 5, 5, 1, 1, 1, 3, 3, 3]);
}

#[test]
fn priority_update_moves_a_stream_already_sending() {
    let mut harness = Harness::new(ServerConfig::default());
    harness.budget = 1;
    harness.flush();
    let mut client = open_client();
    for id in [1, 3] {
        get(&mut client, id, None);
    }
    harness.feed(&client.take(), &body_app);
    let mut sent = Vec::new();
    harness
        .conn
        .poll_output(1, |b| sent.extend(harness.peer.read(&b)));
    harness
        .conn
        .poll_output(1, |b| sent.extend(harness.peer.read(&b)));
    assert_eq!(data_order(&sent), [1], "stream 1's first frame");
    client.priority_update(3, "u=0");
    let rest = data_order(&harness.step(&client.take()));
    assert_eq!(rest, [3, 3, 3, 1, 1]);
}

#[test]
fn priority_update_before_the_stream_opens_applies_when_it_does() {
    let mut client = open_client();
    // Kept for 5 and 7; 7's is newer than its field (RFC 9218 §7.1). 3 never opens: what
    // was kept for it goes when 5 opens.
    client
        .priority_update(5, "u=0")
        .priority_update(3, "u=0")
        .priority_update(7, "u=1");
    get(&mut client, 1, None);
    get(&mut client, 5, None);
    get(&mut client, 7, Some("u=6"));
    let order = order_of(&ServerConfig::default(), &mut client);
    assert_eq!(order, [5, 5, 5, 7, 7, 7, 1, 1, 1]);
}

#[test]
fn priority_update_on_a_closed_stream_is_ignored() {
    let mut client = open_client();
    get(&mut client, 1, None);
    get(&mut client, 3, None);
    client.rst(1, ErrorCode::Cancel).priority_update(1, "u=0");
    // Even ids are push streams Squall never opens: ignored too.
    client.priority_update(4, "u=0");
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &body_app);
    assert_eq!(outcome.error, None);
    assert_eq!(data_order(&outcome.output), [3, 3, 3]);
}

#[test]
fn priority_update_with_a_bad_value_is_ignored() {
    let mut client = open_client();
    for id in [1, 3] {
        get(&mut client, id, None);
    }
    client
        .priority_update(3, "u=0, ")
        .priority_update(3, "u=\"0\"")
        .priority_update(1, "\u{7f}");
    let order = order_of(&ServerConfig::default(), &mut client);
    // 3's second update parsed: u kept its default (3), not incremental, so it takes turns
    // with 1, which still has no signal.
    assert_eq!(order, [3, 1, 3, 1, 3, 1]);
}

#[test]
fn priority_update_on_a_stream_is_a_protocol_error() {
    let mut client = Client::new();
    get(&mut client, 1, None);
    client.raw(0x10, 0, 1, b"\0\0\0\x01u=0");
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    let error = outcome.error.expect("a connection error");
    assert_eq!(error.code, ErrorCode::ProtocolError);
    assert_eq!(outcome.goaway(), Some(ErrorCode::ProtocolError));
}

#[test]
fn priority_update_for_stream_0_is_a_protocol_error() {
    let mut client = Client::new();
    client.raw(0x10, 0, 0, b"\0\0\0\0u=0");
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(outcome.goaway(), Some(ErrorCode::ProtocolError));
}

#[test]
fn priority_update_shorter_than_4_is_a_frame_size_error() {
    for payload in [&b""[..], b"\0", b"\0\0\x01"] {
        let mut client = Client::new();
        client.raw(0x10, 0, 0, payload);
        let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
        assert_eq!(outcome.goaway(), Some(ErrorCode::FrameSizeError));
    }
    // Four bytes and no value: all defaults, fine.
    let mut client = Client::new();
    client.raw(0x10, 0, 0, b"\0\0\0\x01");
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(outcome.error, None);
}

#[test]
fn priority_updates_for_unopened_streams_are_bounded_by_the_stream_limit() {
    let config = ServerConfig {
        max_concurrent_streams: 2,
        ..ServerConfig::default()
    };
    let mut client = Client::new();
    // The same stream twice holds one place.
    client
        .priority_update(3, "u=1")
        .priority_update(3, "u=2")
        .priority_update(5, "u=1");
    let outcome = run_all_splits(&config, &client.take(), &no_app);
    assert_eq!(outcome.error, None);
    let mut client = Client::new();
    get(&mut client, 1, None);
    client.priority_update(3, "u=1").priority_update(5, "u=1");
    let outcome = run_all_splits(&config, &client.take(), &no_app);
    assert_eq!(outcome.goaway(), Some(ErrorCode::ProtocolError));
}

#[test]
fn priority_update_counts_against_the_control_frame_limit() {
    let config = ServerConfig {
        max_control_frames_per_window: 30,
        ..ServerConfig::default()
    };
    let mut client = Client::new();
    get(&mut client, 1, None);
    // With the client's SETTINGS, 30 control frames: at the limit.
    for _ in 0..29 {
        client.priority_update(1, "u=1");
    }
    let outcome = run_all_splits(&config, &client.take(), &no_app);
    assert_eq!(outcome.error, None);
    let mut client = Client::new();
    get(&mut client, 1, None);
    for _ in 0..30 {
        client.priority_update(1, "u=1");
    }
    let outcome = run_all_splits(&config, &client.take(), &no_app);
    let error = outcome.error.expect("a flood");
    assert_eq!(error.flood, Some(FloodKind::Control));
}
