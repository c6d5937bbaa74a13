//! The connection on well-behaved clients: the preface exchange, requests, responses,
//! flow control both ways, scheduling, trailers, graceful shutdown. Every client byte
//! sequence is also fed split at every boundary (see `conn_support`).

mod conn_support;

use bytes::Bytes;
use conn_support::*;
use squall_h2::{Connection, ErrorCode, Event, ServerConfig, SettingId};

#[test]
fn server_preface_is_settings_then_window_update() {
    let harness = Harness::new(ServerConfig::default());
    let mut harness = harness;
    let out = harness.flush();
    assert_eq!(
        out,
        [
            Out::Settings(vec![
                (SettingId::HeaderTableSize, 4096),
                (SettingId::MaxConcurrentStreams, 128),
                (SettingId::InitialWindowSize, 1 << 20),
                (SettingId::MaxFrameSize, 16_384),
                (SettingId::MaxHeaderListSize, 16 << 10),
                (SettingId::NoRfc7540Priorities, 1),
            ]),
            Out::WindowUpdate {
                stream_id: 0,
                increment: (16 << 20) - 65_535,
            },
        ]
    );
}

#[test]
fn client_settings_are_acknowledged() {
    let mut client = Client::new();
    client
        .settings(&[(SettingId::MaxFrameSize, 20_000)])
        .settings_ack();
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(outcome.replies(), [Out::SettingsAck, Out::SettingsAck]);
    assert_eq!(outcome.error, None);
}

#[test]
fn nothing_happens_before_the_whole_preface() {
    let mut harness = Harness::new(ServerConfig::default());
    harness.flush();
    harness.feed(&squall_h2::PREFACE[..10], &no_app);
    assert!(harness.flush().is_empty());
    assert_eq!(harness.input.len(), 10);
}

#[test]
fn get_becomes_a_request_event() {
    let mut client = Client::new();
    let mut fields = request("GET", "/index.html?q=1");
    fields.extend([
        ("user-agent", "test"),
        ("cookie", "a=1"),
        ("accept", "*/*"),
        ("cookie", "b=2"),
    ]);
    client.headers(1, &fields, true);
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    let [Event::Request { stream_id, request }] = &outcome.events[..] else {
        panic!("{:?}", outcome.events);
    };
    assert_eq!(*stream_id, 1);
    assert_eq!(request.method, http::Method::GET);
    assert_eq!(request.scheme, "https");
    assert_eq!(request.authority.as_deref(), Some(&b"example.com"[..]));
    assert_eq!(request.path, "/index.html?q=1");
    assert_eq!(request.headers.get("user-agent").unwrap(), b"test");
    assert_eq!(request.headers.get("cookie").unwrap(), b"a=1; b=2");
    assert_eq!(request.headers.len(), 3);
    assert!(request.end_stream);
    assert_eq!(request.content_length, None);
}

#[test]
fn host_stands_in_for_a_missing_authority() {
    let mut client = Client::new();
    let fields = [
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        ("host", "example.org"),
    ];
    client.headers(1, &fields, true);
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    let [Event::Request { request, .. }] = &outcome.events[..] else {
        panic!("{:?}", outcome.events);
    };
    assert_eq!(request.authority.as_deref(), Some(&b"example.org"[..]));
}

#[test]
fn response_goes_out_as_headers_then_data() {
    let mut client = Client::new();
    client.get(1, "/");
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &echo_app);
    assert_eq!(
        outcome.replies(),
        [
            Out::SettingsAck,
            Out::Headers {
                stream_id: 1,
                fields: head("200", &[("server", "squall")]),
                end_stream: false,
            },
            Out::Data {
                stream_id: 1,
                data: b"hello".to_vec(),
                end_stream: true,
            },
        ]
    );
}

#[test]
fn connection_specific_response_fields_are_dropped() {
    let mut harness = Harness::new(ServerConfig::default());
    let mut client = Client::new();
    client.get(1, "/");
    harness.step(&client.take());
    let fields: [(&[u8], &[u8]); 4] = [
        (b"connection", b"close"),
        (b"transfer-encoding", b"chunked"),
        (b"content-type", b"text/plain"),
        (b":status", b"500"),
    ];
    harness.conn.send_headers(1, 204, fields, true).unwrap();
    let out = harness.flush();
    assert_eq!(
        out,
        [Out::Headers {
            stream_id: 1,
            fields: head("204", &[("content-type", "text/plain")]),
            end_stream: true,
        }]
    );
    assert_eq!(harness.conn.open_streams(), 0);
    assert!(harness.conn.is_idle());
}

#[test]
fn informational_heads_come_before_the_final_one() {
    let mut harness = Harness::new(ServerConfig::default());
    let mut client = Client::new();
    client.get(1, "/");
    harness.step(&client.take());
    harness
        .conn
        .send_headers(1, 103, [(&b"link"[..], &b"</a.css>"[..])], true)
        .unwrap();
    harness.conn.send_headers(1, 200, [], true).unwrap();
    assert!(harness.conn.send_headers(1, 200, [], true).is_err());
    let statuses: Vec<_> = harness.flush().into_iter().collect();
    assert_eq!(statuses.len(), 2);
    assert!(matches!(
        &statuses[0],
        Out::Headers {
            end_stream: false,
            ..
        }
    ));
    assert!(matches!(
        &statuses[1],
        Out::Headers {
            end_stream: true,
            ..
        }
    ));
}

#[test]
fn sends_to_unknown_or_finished_streams_fail() {
    let mut harness = Harness::new(ServerConfig::default());
    let mut client = Client::new();
    client.get(1, "/");
    harness.feed(&client.take(), &no_app);
    assert!(harness.conn.send_headers(3, 200, [], true).is_err());
    assert!(
        harness
            .conn
            .send_data(1, Bytes::from_static(b"x"), false)
            .is_err()
    );
    harness.conn.send_headers(1, 200, [], false).unwrap();
    harness
        .conn
        .send_data(1, Bytes::from_static(b"x"), true)
        .unwrap();
    assert!(
        harness
            .conn
            .send_data(1, Bytes::from_static(b"x"), true)
            .is_err()
    );
    assert!(harness.conn.send_trailers(1, []).is_err());
}

#[test]
fn post_body_arrives_as_data_events_and_release_gives_window_back() {
    let config = ServerConfig {
        initial_window_size: 65_535,
        connection_window_size: 65_535,
        ..ServerConfig::default()
    };
    let mut client = Client::new();
    client.post(1, "/upload", Some(40_000));
    let body = vec![7u8; 40_000];
    for chunk in body.chunks(10_000) {
        client.data(1, chunk, false);
    }
    client.data(1, &[], true);
    let outcome = run_all_splits(&config, &client.take(), &echo_app);
    let received: Vec<u8> = outcome
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Data { data, .. } => Some(data.to_vec()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(received, body);
    assert!(matches!(
        outcome.events.last(),
        Some(Event::Data {
            end_stream: true,
            ..
        })
    ));
    // Half a window (32,767) owed: one WINDOW_UPDATE for the connection. None for the
    // stream: it had ended by the time the application released its data.
    let updates: Vec<_> = outcome
        .replies()
        .into_iter()
        .filter(|o| matches!(o, Out::WindowUpdate { .. }))
        .collect();
    assert_eq!(
        updates,
        [Out::WindowUpdate {
            stream_id: 0,
            increment: 40_000
        }]
    );
}

#[test]
fn release_capacity_batches_stream_window_updates() {
    let config = ServerConfig {
        initial_window_size: 65_535,
        ..ServerConfig::default()
    };
    let mut harness = Harness::new(config);
    let mut client = Client::new();
    client
        .post(1, "/", None)
        .data(1, &[1; 10_000], false)
        .data(1, &[1; 10_000], false);
    harness.feed(&client.take(), &no_app);
    harness.flush();
    harness.conn.release_capacity(1, 20_000);
    assert!(harness.flush().is_empty(), "below half a window");
    client
        .data(1, &[1; 10_000], false)
        .data(1, &[1; 10_000], false);
    harness.feed(&client.take(), &no_app);
    harness.conn.release_capacity(1, 1_000_000);
    assert_eq!(
        harness.flush(),
        [Out::WindowUpdate {
            stream_id: 1,
            increment: 40_000
        }]
    );
    // The window is back: another 65,535 bytes are accepted.
    client.data(1, &[1; 16_384], false);
    client.data(1, &[1; 16_384], false);
    client.data(1, &[1; 16_384], false);
    client.data(1, &[1; 16_383], false);
    harness.feed(&client.take(), &no_app);
    assert_eq!(harness.error, None);
}

#[test]
fn padding_is_given_back_at_once() {
    let config = ServerConfig {
        initial_window_size: 100,
        connection_window_size: 65_535,
        ..ServerConfig::default()
    };
    let mut client = Client::new();
    client.settings_ack().post(1, "/", None);
    // DATA, PADDED, 1 data byte, 60 bytes of padding: 62 bytes of window, 61 of them
    // the Pad Length field and the padding.
    let mut payload = vec![60u8, b'x'];
    payload.extend([0; 60]);
    client.raw(0x0, 0x8, 1, &payload);
    let outcome = run_all_splits(&config, &client.take(), &no_app);
    assert!(outcome.replies().contains(&Out::WindowUpdate {
        stream_id: 1,
        increment: 61
    }));
}

#[test]
fn send_window_of_zero_holds_data_until_window_update() {
    let mut harness = Harness::new(ServerConfig::default());
    let mut client = Client::new();
    client
        .settings(&[(SettingId::InitialWindowSize, 0)])
        .get(1, "/");
    harness.feed(&client.take(), &no_app);
    harness.flush();
    harness.conn.send_headers(1, 200, [], false).unwrap();
    harness
        .conn
        .send_data(1, Bytes::from(vec![9u8; 3000]), true)
        .unwrap();
    let out = harness.flush();
    assert!(matches!(&out[..], [Out::Headers { .. }]), "{out:?}");
    assert_eq!(harness.conn.queued_data(1), 3000);
    assert_eq!(harness.conn.queued_data_total(), 3000);
    assert_eq!(harness.conn.send_window(1), 0);
    client.window_update(1, 2000);
    harness.feed(&client.take(), &no_app);
    assert_eq!(
        harness.flush(),
        [Out::Data {
            stream_id: 1,
            data: vec![9; 2000],
            end_stream: false
        }]
    );
    assert_eq!(harness.conn.queued_data(1), 1000);
    assert_eq!(harness.conn.queued_data_total(), 1000);
    client.window_update(1, 5000);
    harness.feed(&client.take(), &no_app);
    assert_eq!(
        harness.flush(),
        [Out::Data {
            stream_id: 1,
            data: vec![9; 1000],
            end_stream: true
        }]
    );
    assert!(harness.conn.is_idle());
}

#[test]
fn connection_window_limits_all_streams() {
    let mut harness = Harness::new(ServerConfig::default());
    let mut client = Client::new();
    client.get(1, "/").get(3, "/");
    harness.feed(&client.take(), &no_app);
    harness.flush();
    for id in [1, 3] {
        harness.conn.send_headers(id, 200, [], false).unwrap();
        harness
            .conn
            .send_data(id, Bytes::from(vec![1u8; 50_000]), true)
            .unwrap();
    }
    let sent: usize = data_bytes(&harness.flush());
    assert_eq!(sent, 65_535);
    client.window_update(0, 100_000);
    harness.feed(&client.take(), &no_app);
    // The rest fits the stream windows (65,535 each).
    assert_eq!(data_bytes(&harness.flush()), 100_000 - 65_535);
    assert_eq!(harness.conn.open_streams(), 0);
}

fn data_bytes(out: &[Out]) -> usize {
    out.iter()
        .map(|o| match o {
            Out::Data { data, .. } => data.len(),
            _ => 0,
        })
        .sum()
}

#[test]
fn large_body_is_split_at_the_peer_max_frame_size() {
    let mut harness = Harness::new(ServerConfig::default());
    let mut client = Client::new();
    client
        .settings(&[
            (SettingId::MaxFrameSize, 20_000),
            (SettingId::InitialWindowSize, 1 << 20),
        ])
        .window_update(0, 1 << 20)
        .get(1, "/");
    harness.peer.max_frame_size = 20_000;
    harness.feed(&client.take(), &no_app);
    harness.conn.send_headers(1, 200, [], false).unwrap();
    let body = Bytes::from((0..100_000u32).map(|i| i as u8).collect::<Vec<_>>());
    harness.conn.send_data(1, body.clone(), true).unwrap();
    let out = harness.flush();
    let sizes: Vec<usize> = out
        .iter()
        .filter_map(|o| match o {
            Out::Data { data, .. } => Some(data.len()),
            _ => None,
        })
        .collect();
    assert_eq!(sizes, [20_000; 5]);
    let joined: Vec<u8> = out
        .iter()
        .filter_map(|o| match o {
            Out::Data { data, .. } => Some(data.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(joined, body);
}

#[test]
fn data_payloads_are_slices_of_the_application_buffer() {
    let (mut harness, _) = answering_a_get();
    let body = Bytes::from(vec![5u8; 10_000]);
    harness.conn.send_data(1, body.clone(), true).unwrap();
    let mut pieces = Vec::new();
    harness.conn.poll_output(usize::MAX, |b| pieces.push(b));
    let payload = pieces
        .iter()
        .find(|p| p.len() == 10_000)
        .expect("payload piece");
    assert_eq!(payload.as_ptr(), body.as_ptr(), "payload was copied");
}

#[test]
fn streams_share_the_output_round_robin() {
    let mut harness = Harness::new(ServerConfig::default());
    let mut client = Client::new();
    client
        .settings(&[(SettingId::InitialWindowSize, 1 << 20)])
        .window_update(0, 1 << 20);
    for id in [1, 3, 5] {
        client.get(id, "/");
    }
    harness.feed(&client.take(), &no_app);
    harness.flush();
    for id in [1, 3, 5] {
        harness.conn.send_headers(id, 200, [], false).unwrap();
        harness
            .conn
            .send_data(id, Bytes::from(vec![0u8; 40_000]), true)
            .unwrap();
    }
    let order: Vec<u32> = harness
        .flush()
        .iter()
        .filter_map(|o| match o {
            Out::Data { stream_id, .. } => Some(*stream_id),
            _ => None,
        })
        .collect();
    assert_eq!(order, [1, 3, 5, 1, 3, 5, 1, 3, 5]);
}

#[test]
fn poll_output_respects_its_budget() {
    let (mut harness, _) = answering_a_get();
    harness.flush();
    harness
        .conn
        .send_data(1, Bytes::from(vec![0u8; 60_000]), true)
        .unwrap();
    let mut pieces = Vec::new();
    harness.conn.poll_output(1, |b| pieces.push(b));
    // At least one frame: its header and its payload.
    assert_eq!(
        pieces.iter().map(Bytes::len).collect::<Vec<_>>(),
        [9, 16_384]
    );
}

#[test]
fn trailers_both_ways() {
    let app = |conn: &mut Connection, event: &Event| match event {
        Event::Trailers { stream_id, .. } => {
            conn.send_headers(*stream_id, 200, [], false).unwrap();
            conn.send_data(*stream_id, Bytes::from_static(b"ok"), false)
                .unwrap();
            conn.send_trailers(*stream_id, [(&b"grpc-status"[..], &b"0"[..])])
                .unwrap();
        }
        Event::Data {
            stream_id, data, ..
        } => conn.release_capacity(*stream_id, data.len()),
        _ => {}
    };
    let mut client = Client::new();
    client
        .post(1, "/rpc", Some(3))
        .data(1, b"abc", false)
        .headers(1, &[("x-checksum", "1")], true);
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &app);
    assert!(matches!(
        &outcome.events[..],
        [
            Event::Request { .. },
            Event::Data {
                end_stream: false,
                ..
            },
            Event::Trailers { headers, .. }
        ] if headers["x-checksum"] == "1"
    ));
    assert_eq!(
        outcome.replies()[1..],
        [
            Out::Headers {
                stream_id: 1,
                fields: head("200", &[]),
                end_stream: false
            },
            Out::Data {
                stream_id: 1,
                data: b"ok".to_vec(),
                end_stream: false
            },
            Out::Headers {
                stream_id: 1,
                fields: vec![("grpc-status".into(), "0".into())],
                end_stream: true
            },
        ]
    );
}

#[test]
fn trailers_wait_behind_blocked_data() {
    let (mut harness, mut client) = two_gets_with_window(10);
    harness.conn.send_headers(1, 200, [], false).unwrap();
    harness
        .conn
        .send_data(1, Bytes::from_static(b"0123456789abc"), false)
        .unwrap();
    harness
        .conn
        .send_trailers(1, [(&b"x-t"[..], &b"1"[..])])
        .unwrap();
    // Another stream's head, encoded after stream 1's trailers were queued.
    harness
        .conn
        .send_headers(3, 200, [(&b"x-t"[..], &b"1"[..])], true)
        .unwrap();
    let out = harness.flush();
    assert_eq!(out.len(), 3, "{out:?}");
    client.window_update(1, 100);
    harness.feed(&client.take(), &no_app);
    let out = harness.flush();
    assert!(
        matches!(&out[..], [Out::Data { end_stream: false, .. }, Out::Headers { end_stream: true, fields, .. }] if fields[0].0 == "x-t")
    );
    assert!(harness.conn.is_idle());
}

#[test]
fn ping_is_answered_with_its_data() {
    let mut client = Client::new();
    client.ping(*b"pingpong");
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(
        outcome.replies(),
        [Out::SettingsAck, Out::PingAck(*b"pingpong")]
    );
}

#[test]
fn priority_and_unknown_frames_are_ignored() {
    let mut client = Client::new();
    client
        .priority(3, 1)
        .raw(0xfa, 0, 0, b"whatever")
        .get(1, "/");
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(outcome.requests(), [1]);
    assert_eq!(outcome.error, None);
}

#[test]
fn header_blocks_in_continuation_frames_are_joined() {
    let mut client = Client::new();
    let mut fields = request("GET", "/");
    fields.push(("x-long", "0123456789abcdefghijklmnopqrstuvwxyz"));
    client.headers_split(1, &fields, true, 7);
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert!(matches!(
        &outcome.events[..],
        [Event::Request { request, .. }] if request.headers.get("x-long") == Some(&b"0123456789abcdefghijklmnopqrstuvwxyz"[..])
    ));
}

#[test]
fn streams_beyond_the_concurrency_limit_are_refused() {
    let config = ServerConfig {
        max_concurrent_streams: 2,
        ..ServerConfig::default()
    };
    let mut client = Client::new();
    client.get(1, "/").get(3, "/").get(5, "/");
    let outcome = run_all_splits(&config, &client.take(), &no_app);
    assert_eq!(outcome.requests(), [1, 3]);
    assert_eq!(outcome.resets(), [(5, ErrorCode::RefusedStream)]);
    assert_eq!(outcome.error, None);
    // Finished streams free their slot.
    let mut client = Client::new();
    client.get(1, "/").get(3, "/").get(5, "/").get(7, "/");
    let outcome = run(&config, [&client.take()[..]], &echo_app);
    assert_eq!(outcome.requests(), [1, 3]);
    let mut harness = Harness::new(config);
    let mut client = Client::new();
    for id in [1, 3, 5, 7] {
        client.get(id, "/");
        harness.feed(&client.take(), &echo_app);
        harness.flush();
    }
    assert_eq!(harness.outcome().requests(), [1, 3, 5, 7]);
}

#[test]
fn graceful_go_away_lets_open_streams_finish() {
    let mut harness = Harness::new(ServerConfig::default());
    let mut client = Client::new();
    client.get(1, "/").get(3, "/");
    harness.feed(&client.take(), &no_app);
    harness.flush();
    harness.conn.go_away(ErrorCode::NoError);
    assert_eq!(
        harness.flush(),
        [Out::GoAway {
            last_stream_id: 3,
            code: ErrorCode::NoError
        }]
    );
    client.get(5, "/");
    harness.feed(&client.take(), &no_app);
    assert_eq!(
        harness.flush(),
        [Out::Rst {
            stream_id: 5,
            code: ErrorCode::RefusedStream
        }]
    );
    assert!(!harness.conn.is_finished());
    harness.conn.send_headers(1, 200, [], true).unwrap();
    harness.flush();
    assert!(!harness.conn.is_finished());
    harness.conn.send_headers(3, 200, [], false).unwrap();
    harness
        .conn
        .send_data(3, Bytes::from_static(b"bye"), true)
        .unwrap();
    assert!(!harness.conn.is_finished(), "output pending");
    harness.flush();
    assert!(harness.conn.is_finished());
    assert_eq!(harness.conn.last_error(), None);
}

#[test]
fn peer_go_away_finishes_once_streams_end() {
    let mut harness = Harness::new(ServerConfig::default());
    let mut client = Client::new();
    client.get(1, "/").goaway(0, ErrorCode::NoError);
    harness.feed(&client.take(), &no_app);
    harness.flush();
    assert!(!harness.conn.is_finished());
    harness.conn.send_headers(1, 200, [], true).unwrap();
    harness.flush();
    assert!(harness.conn.is_finished());
}

#[test]
fn peer_reset_tells_the_application() {
    let mut harness = Harness::new(ServerConfig::default());
    let mut client = Client::new();
    client.get(1, "/");
    harness.feed(&client.take(), &no_app);
    client.rst(1, ErrorCode::Cancel);
    harness.feed(&client.take(), &no_app);
    assert!(matches!(
        harness.events[..],
        [
            Event::Request { .. },
            Event::Reset {
                stream_id: 1,
                code: ErrorCode::Cancel
            }
        ]
    ));
    assert!(harness.conn.send_headers(1, 200, [], true).is_err());
    assert_eq!(harness.conn.take_stats().resets_received, 1);
}

#[test]
fn reset_before_the_request_is_polled_leaves_no_trace() {
    let mut client = Client::new();
    client
        .post(1, "/", None)
        .data(1, b"abc", false)
        .rst(1, ErrorCode::Cancel);
    let outcome = run(&ServerConfig::default(), [&client.take()[..]], &no_app);
    assert_eq!(outcome.events, []);
}

#[test]
fn application_reset_sends_rst_stream() {
    let mut harness = Harness::new(ServerConfig::default());
    let mut client = Client::new();
    client.post(1, "/", None);
    harness.feed(&client.take(), &no_app);
    harness.flush();
    harness.conn.reset_stream(1, ErrorCode::Cancel);
    assert_eq!(
        harness.flush(),
        [Out::Rst {
            stream_id: 1,
            code: ErrorCode::Cancel
        }]
    );
    // Late DATA is dropped, but still counted and given back to the connection window.
    client.data(1, b"late", true);
    harness.feed(&client.take(), &no_app);
    assert_eq!(harness.error, None);
    assert!(harness.conn.is_idle());
}

#[test]
fn peer_initial_window_changes_apply_to_open_streams() {
    let (mut harness, mut client) = answering_a_get();
    // Queued (a small last piece would be framed at once: see `conn_answers.rs`).
    harness
        .conn
        .send_data(1, Bytes::from(vec![0u8; 2000]), true)
        .unwrap();
    client.settings(&[(SettingId::InitialWindowSize, 0)]);
    harness.feed(&client.take(), &no_app);
    // The SETTINGS came before the output was polled: nothing may go.
    let out = harness.flush();
    assert!(
        out.iter().all(|o| !matches!(o, Out::Data { .. })),
        "{out:?}"
    );
    client.settings(&[(SettingId::InitialWindowSize, 600)]);
    harness.feed(&client.take(), &no_app);
    assert_eq!(data_bytes(&harness.flush()), 600);
}

#[test]
fn stats_count_what_happened() {
    let mut client = Client::new();
    client.get(1, "/").rst(1, ErrorCode::Cancel).get(3, "/");
    let mut harness = Harness::new(ServerConfig::default());
    harness.feed(&client.take(), &no_app);
    let stats = harness.conn.take_stats();
    assert_eq!(stats.streams_opened, 2);
    assert_eq!(stats.resets_received, 1);
    assert_eq!(harness.conn.take_stats(), squall_h2::Stats::default());
}

/// A connection that received a GET on stream 1 and queued a 200 head for it, with the
/// output before the head taken; and the client that sent the GET.
fn answering_a_get() -> (Harness, Client) {
    let mut harness = Harness::new(ServerConfig::default());
    let mut client = Client::new();
    client.get(1, "/");
    harness.feed(&client.take(), &no_app);
    harness.flush();
    harness.conn.send_headers(1, 200, [], false).unwrap();
    (harness, client)
}
