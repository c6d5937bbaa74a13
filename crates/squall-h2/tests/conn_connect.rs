//! The extended CONNECT of RFC 8441 (WebSocket over HTTP/2): SETTINGS_ENABLE_CONNECT_PROTOCOL
//! in our SETTINGS when the config turns it on, `:protocol` accepted on CONNECT only then and
//! handed to the application, the stream's DATA carried both ways past the body limit with
//! flow control, and every misuse of `:protocol` a malformed request. Each client byte
//! sequence is fed whole and split at every boundary.

mod conn_support;

use conn_support::*;
use squall_h2::{ErrorCode, Event, ServerConfig, SettingId};

fn enabled() -> ServerConfig {
    ServerConfig {
        enable_connect_protocol: true,
        ..ServerConfig::default()
    }
}

/// An extended CONNECT for a WebSocket at `/chat` (RFC 8441 §5's example).
fn websocket() -> Vec<(&'static str, &'static str)> {
    vec![
        (":method", "CONNECT"),
        (":protocol", "websocket"),
        (":scheme", "https"),
        (":authority", "server.example.com"),
        (":path", "/chat"),
        ("sec-websocket-version", "13"),
        ("sec-websocket-protocol", "chat, superchat"),
    ]
}

/// The fields, as a request on stream 1 under `config`, make a malformed request: reset with
/// PROTOCOL_ERROR, never shown to the application; a GET on stream 3 is served.
fn assert_malformed(config: &ServerConfig, fields: &[(&str, &str)]) {
    assert_malformed_with(config, fields, false);
}

#[test]
fn the_setting_is_advertised_only_when_enabled() {
    let settings = |config: ServerConfig| match Harness::new(config).flush().first() {
        Some(Out::Settings(params)) => params.clone(),
        other => panic!("SETTINGS first, got {other:?}"),
    };
    let on = settings(enabled());
    assert_eq!(on.last(), Some(&(SettingId::EnableConnectProtocol, 1)));
    let off = settings(ServerConfig::default());
    assert!(
        !off.iter()
            .any(|(id, _)| *id == SettingId::EnableConnectProtocol)
    );
    assert_eq!(on.len(), off.len() + 1);
    assert_eq!(
        SettingId::from_u16(0x8),
        Some(SettingId::EnableConnectProtocol)
    );
    assert_eq!(SettingId::EnableConnectProtocol.to_u16(), 0x8);
}

#[test]
fn extended_connect_is_a_request_with_its_protocol() {
    let mut client = Client::new();
    client.headers(1, &websocket(), false);
    let outcome = run_all_splits(&enabled(), &client.take(), &no_app);
    assert_eq!(outcome.resets(), []);
    let [Event::Request { stream_id, request }] = &outcome.events[..] else {
        panic!("one request: {:?}", outcome.events);
    };
    assert_eq!(*stream_id, 1);
    assert_eq!(request.method, http::Method::CONNECT);
    assert_eq!(request.protocol.as_deref(), Some(&b"websocket"[..]));
    assert_eq!(request.path, "/chat");
    assert_eq!(request.scheme, "https");
    assert_eq!(
        request.authority.as_deref(),
        Some(&b"server.example.com"[..])
    );
    assert!(!request.end_stream);
    let version = request
        .headers
        .iter()
        .find(|(n, _)| *n == b"sec-websocket-version");
    assert_eq!(version.map(|(_, v)| v), Some(&b"13"[..]));
}

#[test]
fn a_plain_request_has_no_protocol() {
    let mut client = Client::new();
    client.get(1, "/");
    let outcome = run_all_splits(&enabled(), &client.take(), &no_app);
    let [Event::Request { request, .. }] = &outcome.events[..] else {
        panic!("one request");
    };
    assert_eq!(request.protocol, None);
}

#[test]
fn protocol_is_malformed_when_not_advertised() {
    assert_malformed(&ServerConfig::default(), &websocket());
}

#[test]
fn protocol_is_malformed_on_other_methods_or_without_the_other_fields() {
    let config = enabled();
    let mut get = websocket();
    get[0] = (":method", "GET");
    assert_malformed(&config, &get);
    for missing in [":scheme", ":path", ":authority"] {
        let fields: Vec<_> = websocket()
            .into_iter()
            .filter(|(n, _)| *n != missing)
            .collect();
        assert_malformed(&config, &fields);
    }
    let mut twice = websocket();
    twice.insert(2, (":protocol", "websocket"));
    assert_malformed(&config, &twice);
    for bad in ["", "web socket", "websocket/", "a,b"] {
        let mut fields = websocket();
        fields[1] = (":protocol", bad);
        assert_malformed(&config, &fields);
    }
    let mut versioned = websocket();
    versioned[1] = (":protocol", "websocket/13");
    let mut client = Client::new();
    client.headers(1, &versioned, false);
    let outcome = run_all_splits(&config, &client.take(), &no_app);
    assert_eq!(outcome.requests(), [1]);
}

#[test]
fn a_plain_connect_is_still_501() {
    let connect = [(":method", "CONNECT"), (":authority", "example.com:443")];
    let mut client = Client::new();
    client.headers(1, &connect, false);
    let outcome = run_all_splits(&enabled(), &client.take(), &no_app);
    assert_eq!(outcome.statuses(), [(1, "501".to_string())]);
    assert_eq!(outcome.events, []);
}

/// Answers an extended CONNECT with 200 and echoes its DATA back, releasing the window as
/// it goes; ends its side when the client does.
fn tunnel_echo(conn: &mut squall_h2::Connection, event: &Event) {
    match event {
        Event::Request { stream_id, .. } => {
            conn.send_headers(
                *stream_id,
                200,
                [(&b"sec-websocket-protocol"[..], &b"chat"[..])],
                false,
            )
            .unwrap();
        }
        Event::Data {
            stream_id,
            data,
            end_stream,
        } => {
            conn.release_capacity(*stream_id, data.len());
            conn.send_data(*stream_id, data.clone(), *end_stream)
                .unwrap();
        }
        _ => {}
    }
}

#[test]
fn the_tunnel_carries_more_than_the_body_limit_both_ways() {
    // small_config's body limit is 1,000 bytes and its windows 65,535: 200 KB through the
    // tunnel needs the window given back, and no 413.
    let config = ServerConfig {
        enable_connect_protocol: true,
        ..small_config()
    };
    let mut harness = Harness::new(config);
    harness.flush();
    let mut client = Client::new();
    client
        .headers(1, &websocket(), false)
        .window_update(0, 1 << 30)
        .window_update(1, 1 << 30);
    harness.feed(&client.take(), &tunnel_echo);
    let head = harness.flush();
    assert!(
        head.iter().any(|o| matches!(
            o,
            Out::Headers {
                stream_id: 1,
                end_stream: false,
                ..
            }
        )),
        "{head:?}"
    );
    let chunk = vec![0x5a; 10_000];
    let mut echoed = 0;
    for i in 0..20 {
        client.data(1, &chunk, i == 19);
        harness.feed(&client.take(), &tunnel_echo);
        for out in harness.flush() {
            match out {
                Out::Data {
                    stream_id: 1, data, ..
                } => echoed += data.len(),
                Out::Rst { .. } | Out::GoAway { .. } => panic!("tunnel cut: {out:?}"),
                Out::Headers { ref fields, .. } => panic!("a second head: {fields:?}"),
                _ => {}
            }
        }
    }
    assert_eq!(echoed, 200_000);
    assert_eq!(harness.error, None);
    let ended = harness.output.iter().any(|o| {
        matches!(
            o,
            Out::Data {
                stream_id: 1,
                end_stream: true,
                ..
            }
        )
    });
    assert!(ended, "END_STREAM echoed");
    assert_eq!(harness.conn.open_streams(), 0);
}

#[test]
fn a_tunnel_past_its_window_is_a_flow_control_error() {
    let config = ServerConfig {
        enable_connect_protocol: true,
        connection_window_size: 1 << 20,
        ..small_config()
    };
    let mut client = Client::new();
    client.headers(1, &websocket(), false);
    // Nothing is released (no_app): the 65,535-byte window is all the client may send.
    for _ in 0..7 {
        client.data(1, &[0; 10_000], false);
    }
    let outcome = run(&config, [&client.take()[..]], &no_app);
    assert_eq!(outcome.resets(), [(1, ErrorCode::FlowControlError)]);
}
