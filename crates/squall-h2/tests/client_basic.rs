//! The client connection against a scripted origin, byte-exact: requests, responses,
//! bodies both ways with flow control, SETTINGS, GOAWAY, resets. Invariants are checked
//! after every step (see `client_support`).

mod client_support;

use bytes::Bytes;
use client_support::{Origin, Out, Pair, data_frames, fields, request, response_of};
use squall_h2::{ClientConfig, ClientEvent, ErrorCode, OpenError, SettingId};

#[test]
fn preface_announces_our_settings_and_raises_the_connection_window() {
    let mut pair = Pair::new(ClientConfig::default());
    assert_eq!(
        pair.output(),
        vec![
            Out::Settings(vec![
                (SettingId::HeaderTableSize, 4096),
                (SettingId::EnablePush, 0),
                (SettingId::InitialWindowSize, 256 << 10),
                (SettingId::MaxFrameSize, 16_384),
                (SettingId::MaxHeaderListSize, 64 << 10),
            ]),
            Out::WindowUpdate {
                stream_id: 0,
                increment: (4 << 20) - 65_535,
            },
        ]
    );
}

/// One GET: head, two DATA frames, trailers. Returns the events and the client's output.
fn get_exchange(chunk: Option<usize>) -> (Vec<ClientEvent>, Vec<Out>) {
    let mut pair = Pair::new(ClientConfig::default());
    let mut output = pair.output();
    let id = pair.request("GET", "/a", true);
    assert_eq!(id, 1);
    output.extend(pair.output());
    let mut origin = Origin::preface();
    origin
        .ping(*b"12345678")
        .response(
            1,
            "200",
            &[("content-type", "text/plain"), ("content-length", "11")],
            false,
        )
        .data(1, b"hello", false)
        .data_padded(1, b" world", 3, false)
        .headers(1, &[("grpc-status", "0")], true);
    let bytes = origin.take();
    match chunk {
        None => pair.feed(&bytes).unwrap(),
        Some(n) => pair.feed_split(&bytes, n).unwrap(),
    }
    let events = pair.events();
    output.extend(pair.output());
    assert!(pair.conn.is_idle());
    (events, output)
}

#[test]
fn get_with_head_data_and_trailers() {
    let (events, output) = get_exchange(None);
    let (id, status, list, end) = response_of(&events[0]);
    assert_eq!((id, status, end), (1, 200, false));
    assert_eq!(
        list,
        fields(&[("content-type", "text/plain"), ("content-length", "11")])
    );
    assert!(matches!(
        events[0],
        ClientEvent::Response {
            content_length: Some(11),
            ..
        }
    ));
    assert_eq!(
        events[1],
        ClientEvent::Data {
            stream_id: 1,
            data: Bytes::from_static(b"hello world"),
            end_stream: false,
        }
    );
    let ClientEvent::Trailers {
        stream_id: 1,
        fields: trailers,
    } = &events[2]
    else {
        panic!("{events:?}");
    };
    assert_eq!(trailers.get("grpc-status"), Some(&b"0"[..]));
    assert_eq!(events.len(), 3);
    // Preface, SETTINGS, WINDOW_UPDATE; the request; the answers to SETTINGS and PING.
    assert_eq!(
        output[2],
        Out::Headers {
            stream_id: 1,
            fields: fields(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":authority", "origin.test"),
                (":path", "/a"),
            ]),
            end_stream: true,
        }
    );
    assert_eq!(output[3..], [Out::SettingsAck, Out::PingAck(*b"12345678")]);
}

#[test]
fn get_split_at_every_boundary_gives_the_same_exchange() {
    let whole = get_exchange(None);
    for chunk in 1..=64 {
        assert_eq!(get_exchange(Some(chunk)), whole, "chunks of {chunk}");
    }
}

#[test]
fn post_body_waits_for_the_peers_stream_window() {
    let mut pair = Pair::ready(ClientConfig::default());
    let mut origin = Origin::new();
    origin.settings(&[(SettingId::InitialWindowSize, 10)]);
    pair.feed(&origin.take()).unwrap();
    assert_eq!(pair.output(), vec![Out::SettingsAck]);
    let id = pair.request("POST", "/up", false);
    pair.conn
        .send_data(id, Bytes::from_static(b"0123456789abcdefghijklmno"), false)
        .unwrap();
    pair.conn
        .send_trailers(id, [(&b"x-sum"[..], &b"1"[..])])
        .unwrap();
    let out = pair.output();
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(matches!(
        &out[0],
        Out::Headers {
            stream_id: 1,
            end_stream: false,
            ..
        }
    ));
    assert_eq!(
        out[1],
        Out::Data {
            stream_id: 1,
            data: b"0123456789".to_vec(),
            end_stream: false
        }
    );
    assert_eq!(pair.conn.queued_data(id), 15);
    assert!(!pair.conn.has_output());
    pair.feed(&Origin::new().window_update(1, 10).take())
        .unwrap();
    assert!(pair.conn.has_output());
    assert_eq!(
        pair.output(),
        vec![Out::Data {
            stream_id: 1,
            data: b"abcdefghij".to_vec(),
            end_stream: false
        }]
    );
    pair.feed(&Origin::new().window_update(1, 100).take())
        .unwrap();
    assert_eq!(
        pair.output(),
        vec![
            Out::Data {
                stream_id: 1,
                data: b"klmno".to_vec(),
                end_stream: false
            },
            Out::Headers {
                stream_id: 1,
                fields: fields(&[("x-sum", "1")]),
                end_stream: true
            },
        ]
    );
    assert_eq!(pair.conn.queued_data(id), 0);
    assert_eq!(
        pair.conn.send_data(id, Bytes::new(), true),
        Err(squall_h2::StreamClosed)
    );
}

#[test]
fn post_body_waits_for_the_connection_window_and_takes_turns() {
    let mut pair = Pair::ready(ClientConfig::default());
    let mut origin = Origin::new();
    origin.settings(&[(SettingId::InitialWindowSize, 1 << 20)]);
    pair.feed(&origin.take()).unwrap();
    pair.output();
    let a = pair.request("POST", "/a", false);
    let b = pair.request("POST", "/b", false);
    pair.conn
        .send_data(a, Bytes::from(vec![b'a'; 40_000]), true)
        .unwrap();
    pair.conn
        .send_data(b, Bytes::from(vec![b'b'; 40_000]), true)
        .unwrap();
    let out = pair.output();
    let data = data_frames(&out);
    // Round robin in frames of 16,384 until the 65,535 of the connection window are spent.
    assert_eq!(
        data,
        vec![
            (1, 16_384, false),
            (3, 16_384, false),
            (1, 16_384, false),
            (3, 16_383, false)
        ]
    );
    assert!(!pair.conn.has_output());
    pair.feed(&Origin::new().window_update(0, 100_000).take())
        .unwrap();
    let out = pair.output();
    let data = data_frames(&out);
    assert_eq!(data, vec![(1, 7_232, true), (3, 7_233, true)]);
}

#[test]
fn release_capacity_sends_window_updates_at_half_a_window() {
    let (mut pair, id) = get_with_stream_window(1000);
    let mut origin = Origin::new();
    origin
        .response(1, "200", &[], false)
        .data(1, &[b'x'; 600], false);
    pair.feed(&origin.take()).unwrap();
    assert_eq!(pair.events().len(), 2);
    // Nothing is given back until released: backpressure.
    assert_eq!(pair.output(), vec![]);
    pair.conn.release_capacity(id, 400);
    pair.conn.check_invariants();
    assert_eq!(pair.output(), vec![]);
    pair.conn.release_capacity(id, 300); // only 200 more were held
    pair.conn.check_invariants();
    assert_eq!(
        pair.output(),
        vec![Out::WindowUpdate {
            stream_id: 1,
            increment: 600
        }]
    );
    // The stream window is 1000 again: 1000 more pass, 1001 would not.
    origin.data(1, &[b'y'; 1000], false);
    pair.feed(&origin.take()).unwrap();
    pair.conn.release_capacity(id, 1000);
    pair.conn.check_invariants();
    assert_eq!(
        pair.output(),
        vec![Out::WindowUpdate {
            stream_id: 1,
            increment: 1000
        }]
    );
}

#[test]
fn body_of_a_completed_response_holds_connection_window_until_released() {
    let config = ClientConfig {
        stream_window: 40_000,
        connection_window: 65_535,
        ..ClientConfig::default()
    };
    let mut pair = Pair::ready(config);
    let id = pair.request("GET", "/", true);
    pair.output();
    let mut origin = Origin::new();
    origin.response(1, "200", &[], false);
    for _ in 0..3 {
        origin.data(1, &[b'x'; 10_000], false);
    }
    pair.feed(&origin.take()).unwrap();
    pair.conn.release_capacity(id, 30_000);
    // 30,000 owed on the connection: below half of 65,535.
    assert_eq!(
        pair.output(),
        vec![Out::WindowUpdate {
            stream_id: 1,
            increment: 30_000
        }]
    );
    origin.data(1, &[b'z'; 10_000], true);
    pair.feed(&origin.take()).unwrap();
    assert!(pair.conn.is_idle(), "the response is complete");
    assert_eq!(pair.output(), vec![]);
    // The stream is gone; its body still holds connection window until released.
    pair.conn.release_capacity(id, 10_000);
    pair.conn.check_invariants();
    assert_eq!(
        pair.output(),
        vec![Out::WindowUpdate {
            stream_id: 0,
            increment: 40_000
        }]
    );
    // Releasing more than was held gives nothing more.
    pair.conn.release_capacity(id, 10_000);
    pair.conn.check_invariants();
    assert_eq!(pair.output(), vec![]);
}

#[test]
fn data_over_the_stream_window_is_a_flow_control_error() {
    let (mut pair, id) = get_with_stream_window(1000);
    let mut origin = Origin::new();
    origin
        .response(1, "200", &[], false)
        .data(1, &[0; 600], false)
        .data(1, &[0; 401], false);
    pair.feed(&origin.take()).unwrap();
    assert_eq!(
        pair.output(),
        vec![Out::Rst {
            stream_id: 1,
            code: ErrorCode::FlowControlError
        }]
    );
    let events = pair.events();
    assert_eq!(
        events.last(),
        Some(&ClientEvent::Reset {
            stream_id: id,
            code: ErrorCode::FlowControlError,
            refused: false
        })
    );
    // Late frames on the reset stream are ignored.
    origin
        .data(1, &[0; 10], true)
        .headers(1, &[("x", "y")], true);
    pair.feed(&origin.take()).unwrap();
    assert_eq!(pair.output(), vec![]);
    assert_eq!(pair.events(), vec![]);
}

#[test]
fn settings_change_windows_frame_size_table_and_stream_limit() {
    let mut pair = Pair::ready(ClientConfig::default());
    assert_eq!(pair.conn.available_streams(), 100);
    let a = pair.request("POST", "/a", false);
    pair.conn
        .send_data(a, Bytes::from(vec![7; 50_000]), false)
        .unwrap();
    let out = pair.output();
    let sent: usize = (out.iter())
        .map(|o| match o {
            Out::Data { data, .. } => data.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(sent, 50_000);
    // The window is 15,535 now; a SETTINGS lowering the initial window by 20,000 makes it
    // -4,465, and a WINDOW_UPDATE of 4,465 is not yet enough to send a byte.
    // The rest of the body is queued while the window is still open.
    pair.conn
        .send_data(a, Bytes::from(vec![8; 30_000]), true)
        .unwrap();
    let mut origin = Origin::new();
    origin.settings(&[
        (SettingId::InitialWindowSize, 45_535),
        (SettingId::MaxFrameSize, 40_000),
        (SettingId::HeaderTableSize, 0),
        (SettingId::MaxConcurrentStreams, 3),
    ]);
    pair.feed(&origin.take()).unwrap();
    assert_eq!(pair.output(), vec![Out::SettingsAck]);
    assert_eq!(pair.conn.available_streams(), 2);
    pair.feed(
        &Origin::new()
            .window_update(1, 4_465)
            .window_update(0, 100_000)
            .take(),
    )
    .unwrap();
    assert_eq!(pair.output(), vec![]);
    pair.feed(&Origin::new().window_update(1, 30_000).take())
        .unwrap();
    pair.wire.max_frame_size = 40_000;
    // One frame of 30,000: the larger frame size is used.
    assert_eq!(
        pair.output(),
        vec![Out::Data {
            stream_id: 1,
            data: vec![8; 30_000],
            end_stream: true
        }]
    );
    // The next request's block starts with a table size update to 0 (the wire's HPACK
    // decoder would fail otherwise) and indexes nothing.
    let b = pair.request("GET", "/b", true);
    let c = pair.request("GET", "/c", true);
    assert_eq!((b, c), (3, 5));
    assert_eq!(pair.conn.available_streams(), 0);
    assert_eq!(
        pair.conn.send_request(request("GET", "/d"), true),
        Err(OpenError::NoCapacity)
    );
    let out = pair.output();
    assert_eq!(out.len(), 2);
    assert!(matches!(
        &out[1],
        Out::Headers {
            stream_id: 5,
            end_stream: true,
            ..
        }
    ));
}

#[test]
fn goaway_refuses_streams_above_its_last_id_and_lets_the_others_finish() {
    let mut pair = Pair::ready(ClientConfig::default());
    for _ in 0..4 {
        pair.request("GET", "/", true);
    }
    pair.output();
    let mut origin = Origin::new();
    origin.goaway(3, ErrorCode::NoError);
    pair.feed(&origin.take()).unwrap();
    assert_eq!(pair.conn.available_streams(), 0);
    assert_eq!(
        pair.conn.send_request(request("GET", "/"), true),
        Err(OpenError::GoingAway)
    );
    assert_eq!(
        pair.events(),
        vec![
            ClientEvent::GoAway {
                last_stream_id: 3,
                code: ErrorCode::NoError
            },
            ClientEvent::Reset {
                stream_id: 5,
                code: ErrorCode::RefusedStream,
                refused: true
            },
            ClientEvent::Reset {
                stream_id: 7,
                code: ErrorCode::RefusedStream,
                refused: true
            },
        ]
    );
    // A second GOAWAY lowers the last id; a higher one would not raise it.
    origin
        .goaway(1, ErrorCode::NoError)
        .goaway(7, ErrorCode::NoError);
    pair.feed(&origin.take()).unwrap();
    assert_eq!(
        pair.events(),
        vec![
            ClientEvent::GoAway {
                last_stream_id: 1,
                code: ErrorCode::NoError
            },
            ClientEvent::Reset {
                stream_id: 3,
                code: ErrorCode::RefusedStream,
                refused: true
            },
        ]
    );
    assert!(!pair.conn.is_finished());
    origin.response(1, "204", &[], true);
    // A late frame for a refused stream is ignored.
    origin.response(5, "200", &[], true);
    pair.feed(&origin.take()).unwrap();
    assert_eq!(response_of(&pair.events()[0]).1, 204);
    assert!(pair.conn.is_finished());
    assert_eq!(pair.output(), vec![]);
}

#[test]
fn refused_stream_reset_is_retryable_others_are_not() {
    let mut pair = Pair::ready(ClientConfig::default());
    let a = pair.request("GET", "/", true);
    let b = pair.request("GET", "/", true);
    pair.output();
    let mut origin = Origin::new();
    origin
        .rst(a, ErrorCode::RefusedStream)
        .rst(b, ErrorCode::InternalError);
    pair.feed(&origin.take()).unwrap();
    assert_eq!(
        pair.events(),
        vec![
            ClientEvent::Reset {
                stream_id: a,
                code: ErrorCode::RefusedStream,
                refused: true
            },
            ClientEvent::Reset {
                stream_id: b,
                code: ErrorCode::InternalError,
                refused: false
            },
        ]
    );
    assert!(pair.conn.is_idle());
    assert_eq!(pair.output(), vec![]);
}

#[test]
fn early_response_then_rst_no_error_stops_the_upload_and_keeps_the_response() {
    let mut pair = Pair::ready(ClientConfig::default());
    let id = pair.request("POST", "/", false);
    pair.conn
        .send_data(id, Bytes::from_static(b"part"), false)
        .unwrap();
    pair.output();
    let mut origin = Origin::new();
    origin
        .response(id, "413", &[], true)
        .rst(id, ErrorCode::NoError);
    pair.feed(&origin.take()).unwrap();
    let events = pair.events();
    assert_eq!(events.len(), 1);
    assert_eq!(response_of(&events[0]).1, 413);
    assert!(pair.conn.is_idle());
    assert!(
        pair.conn
            .send_data(id, Bytes::from_static(b"more"), true)
            .is_err()
    );
}

#[test]
fn interim_heads_come_before_the_final_one() {
    let mut pair = Pair::ready(ClientConfig::default());
    let id = pair.request("GET", "/", true);
    pair.output();
    let mut origin = Origin::new();
    origin
        .response(id, "103", &[("link", "</s.css>; rel=preload")], false)
        .response(id, "100", &[], false)
        .response(id, "200", &[], true);
    pair.feed(&origin.take()).unwrap();
    let events = pair.events();
    let ClientEvent::Interim {
        status: 103,
        fields: hints,
        ..
    } = &events[0]
    else {
        panic!("{events:?}");
    };
    assert_eq!(hints.get("link"), Some(&b"</s.css>; rel=preload"[..]));
    assert!(matches!(
        events[1],
        ClientEvent::Interim { status: 100, .. }
    ));
    assert_eq!(response_of(&events[2]), (id, 200, vec![], true));
}

#[test]
fn fail_resets_every_stream_refused_only_before_any_byte_left() {
    let mut pair = Pair::ready(ClientConfig::default());
    let a = pair.request("GET", "/", true);
    pair.output();
    let b = pair.request("GET", "/", true);
    pair.conn.fail();
    pair.conn.check_invariants();
    assert_eq!(
        pair.events(),
        vec![
            ClientEvent::Reset {
                stream_id: a,
                code: ErrorCode::Cancel,
                refused: false
            },
            ClientEvent::Reset {
                stream_id: b,
                code: ErrorCode::Cancel,
                refused: true
            },
        ]
    );
    assert!(pair.conn.is_finished());
    assert!(!pair.conn.has_output());
    assert!(pair.feed(b"").is_err());
    assert_eq!(pair.conn.available_streams(), 0);
}

#[test]
fn reset_stream_sends_rst_drops_queued_data_and_gives_window_back() {
    let config = ClientConfig {
        connection_window: 65_535,
        ..ClientConfig::default()
    };
    let mut pair = Pair::ready(config);
    let id = pair.request("POST", "/", false);
    pair.output();
    let mut origin = Origin::new();
    origin.response(id, "200", &[], false);
    for _ in 0..4 {
        origin.data(id, &[1; 10_000], false);
    }
    pair.feed(&origin.take()).unwrap();
    pair.conn
        .send_data(id, Bytes::from_static(b"queued"), false)
        .unwrap();
    // The response is queued, not polled: reset drops it, and no event follows.
    pair.conn.reset_stream(id, ErrorCode::Cancel);
    pair.conn.check_invariants();
    assert_eq!(pair.conn.queued_data(id), 0);
    assert_eq!(pair.events(), vec![]);
    assert_eq!(
        pair.output(),
        vec![
            Out::Rst {
                stream_id: id,
                code: ErrorCode::Cancel
            },
            Out::WindowUpdate {
                stream_id: 0,
                increment: 40_000
            },
        ]
    );
    // Late DATA is dropped and its window given back too.
    origin.data(id, &[2; 1000], true);
    pair.feed(&origin.take()).unwrap();
    assert_eq!(pair.events(), vec![]);
    pair.conn.reset_stream(id, ErrorCode::Cancel);
    assert_eq!(pair.output(), vec![]);
}

#[test]
fn go_away_sends_goaway_and_opens_no_more_streams() {
    let mut pair = Pair::ready(ClientConfig::default());
    let id = pair.request("GET", "/", true);
    pair.conn.go_away(ErrorCode::NoError);
    assert_eq!(
        pair.conn.send_request(request("GET", "/"), true),
        Err(OpenError::GoingAway)
    );
    let out = pair.output();
    assert_eq!(
        out[1],
        Out::GoAway {
            last_stream_id: 0,
            code: ErrorCode::NoError
        }
    );
    assert!(!pair.conn.is_finished());
    pair.feed(&Origin::new().response(id, "200", &[], true).take())
        .unwrap();
    pair.events();
    assert!(pair.conn.is_finished());
}

#[test]
fn response_without_body_passes_with_any_content_length() {
    let mut pair = Pair::ready(ClientConfig::default());
    let a = pair.request("HEAD", "/", true);
    let b = pair.request("GET", "/", true);
    pair.output();
    let mut origin = Origin::new();
    origin
        .response(a, "200", &[("content-length", "100")], true)
        .response(b, "304", &[("content-length", "100")], false)
        .data(b, b"", true);
    pair.feed(&origin.take()).unwrap();
    let events = pair.events();
    assert!(matches!(
        events[0],
        ClientEvent::Response {
            content_length: Some(100),
            end_stream: true,
            ..
        }
    ));
    assert!(matches!(
        events[1],
        ClientEvent::Response {
            status: 304,
            content_length: Some(100),
            ..
        }
    ));
    assert_eq!(
        events[2],
        ClientEvent::Data {
            stream_id: b,
            data: Bytes::new(),
            end_stream: true
        }
    );
    assert!(pair.conn.is_idle());
    assert_eq!(pair.output(), vec![]);
}

#[test]
fn extended_connect_is_noted_from_settings() {
    let mut pair = Pair::ready(ClientConfig::default());
    assert!(!pair.conn.peer_allows_extended_connect());
    let mut origin = Origin::new();
    origin.raw(0x4, 0, 0, &[0, 8, 0, 0, 0, 1]);
    pair.feed(&origin.take()).unwrap();
    assert!(pair.conn.peer_allows_extended_connect());
    origin.raw(0x4, 0, 0, &[0, 8, 0, 0, 0, 2]);
    let error = pair.feed(&origin.take()).unwrap_err();
    assert_eq!(error.code, ErrorCode::ProtocolError);
}

/// A ready connection with our stream window at `window`, and a GET sent on it.
fn get_with_stream_window(window: u32) -> (Pair, u32) {
    let config = ClientConfig {
        stream_window: window,
        ..ClientConfig::default()
    };
    let mut pair = Pair::ready(config);
    let id = pair.request("GET", "/", true);
    pair.output();
    (pair, id)
}
