//! Flood limits and timers: each exceeded limit ends the connection with
//! GOAWAY(ENHANCE_YOUR_CALM), and the state stays bounded on the way (CVE-2019-9511 to
//! -9518, CVE-2023-44487, CONTINUATION floods); stalled send windows are reset or end the
//! connection on the timer.

mod conn_support;

use std::time::Duration;

use bytes::Bytes;
use conn_support::*;
use squall_h2::{ErrorCode, Event, FloodKind, ServerConfig, SettingId};

fn assert_flood(config: &ServerConfig, client: &mut Client, kind: FloodKind) -> Outcome {
    let outcome = run_all_splits(config, &client.take(), &no_app);
    let error = outcome.error.expect("a flood");
    assert_eq!(
        (error.code, error.flood),
        (ErrorCode::EnhanceYourCalm, Some(kind))
    );
    assert_eq!(outcome.goaway(), Some(ErrorCode::EnhanceYourCalm));
    outcome
}

fn flood_config() -> ServerConfig {
    ServerConfig {
        max_resets_per_window: 20,
        max_control_frames_per_window: 30,
        max_empty_frames_per_window: 10,
        max_continuation_frames: 8,
        ..ServerConfig::default()
    }
}

#[test]
fn rapid_reset_ends_the_connection() {
    let config = flood_config();
    let mut client = Client::new();
    for i in 0..21 {
        let id = 1 + 2 * i;
        client.get(id, "/").rst(id, ErrorCode::Cancel);
    }
    let outcome = assert_flood(&config, &mut client, FloodKind::RapidReset);
    // None of the reset requests reached the application.
    assert_eq!(outcome.events, []);
}

#[test]
fn resets_spread_over_time_are_fine() {
    let config = flood_config();
    let mut harness = Harness::new(config);
    let mut client = Client::new();
    for i in 0..60 {
        let id = 1 + 2 * i;
        client.get(id, "/").rst(id, ErrorCode::Cancel);
        harness.feed(&client.take(), &no_app);
        harness.advance(Duration::from_millis(600));
    }
    assert_eq!(harness.error, None);
    assert_eq!(harness.conn.take_stats().resets_received, 60);
}

#[test]
fn refused_and_malformed_streams_count_as_resets() {
    let config = ServerConfig {
        max_concurrent_streams: 1,
        ..flood_config()
    };
    let mut client = Client::new();
    client.post(1, "/", None);
    for i in 0..21 {
        client.get(3 + 2 * i, "/");
    }
    let outcome = assert_flood(&config, &mut client, FloodKind::RapidReset);
    assert_eq!(outcome.resets().len(), 21);
    let mut client = Client::new();
    for i in 0..21 {
        client.headers(1 + 2 * i, &[(":method", "GET")], true);
    }
    assert_flood(&flood_config(), &mut client, FloodKind::RapidReset);
}

#[test]
fn continuation_flood_ends_the_connection() {
    let config = flood_config();
    let mut client = Client::new();
    let block = client.block(&request("GET", "/"));
    client.raw(0x1, 0x1, 1, &block[..1]);
    for _ in 0..9 {
        client.raw(0x9, 0, 1, b"a");
    }
    assert_flood(&config, &mut client, FloodKind::Continuation);
    // A block too large in bytes, in few frames.
    let mut client = Client::new();
    client.raw(0x1, 0x1, 1, &block[..1]);
    for _ in 0..3 {
        client.raw(0x9, 0, 1, &[b'a'; 16_000]);
    }
    assert_flood(&config, &mut client, FloodKind::Continuation);
}

#[test]
fn ping_and_settings_floods_end_the_connection() {
    let config = flood_config();
    let mut client = Client::new();
    for i in 0..30u8 {
        client.ping([i; 8]);
    }
    let outcome = assert_flood(&config, &mut client, FloodKind::Control);
    assert_eq!(
        outcome
            .replies()
            .iter()
            .filter(|o| matches!(o, Out::PingAck(_)))
            .count(),
        29
    );
    let mut client = Client::new();
    for _ in 0..30 {
        client.settings(&[]);
    }
    assert_flood(&config, &mut client, FloodKind::Control);
    let mut client = Client::new();
    for _ in 0..31 {
        client.priority(3, 0);
    }
    assert_flood(&config, &mut client, FloodKind::Control);
}

#[test]
fn empty_frame_flood_ends_the_connection() {
    let config = flood_config();
    let mut client = Client::new();
    client.post(1, "/", None);
    for _ in 0..11 {
        client.data(1, b"", false);
    }
    assert_flood(&config, &mut client, FloodKind::EmptyFrames);
    let mut client = Client::new();
    let block = client.block(&request("GET", "/"));
    client.raw(0x1, 0x1, 1, &block);
    for _ in 0..7 {
        client.raw(0x9, 0, 1, b"");
    }
    let mut harness = Harness::new(config.clone());
    harness.feed(&client.take(), &no_app);
    assert_eq!(harness.error, None, "7 are allowed");
}

#[test]
fn tiny_window_updates_end_the_connection() {
    let config = flood_config();
    let mut client = Client::new();
    for _ in 0..31 {
        client.window_update(0, 1);
    }
    assert_flood(&config, &mut client, FloodKind::WindowUpdate);
    // Large increments are how windows normally move: not counted.
    let mut client = Client::new();
    for _ in 0..100 {
        client.window_update(0, 100_000);
    }
    let outcome = run_all_splits(&config, &client.take(), &no_app);
    assert_eq!(outcome.error, None);
}

#[test]
fn unread_answers_end_the_connection() {
    let config = ServerConfig {
        max_queued_output_bytes: 1000,
        ..ServerConfig::default()
    };
    let mut harness = Harness::new(config);
    let mut client = Client::new();
    for i in 0..50u8 {
        client.ping([i; 8]);
    }
    // Read in between: fine.
    harness.recv(&client.take());
    harness.flush();
    assert_eq!(harness.error, None);
    for i in 0..60u8 {
        client.ping([i; 8]);
    }
    harness.recv(&client.take());
    let error = harness.error.expect("flood");
    assert_eq!(error.flood, Some(FloodKind::OutputQueue));
}

#[test]
fn stalled_stream_is_reset_on_the_timer() {
    let (mut harness, _) = two_gets_with_window(0);
    assert_eq!(harness.conn.next_deadline(), None);
    harness.conn.send_headers(1, 200, [], false).unwrap();
    harness
        .conn
        .send_data(1, Bytes::from_static(b"stuck"), true)
        .unwrap();
    harness.conn.send_headers(3, 200, [], true).unwrap();
    harness.flush();
    let deadline = harness.conn.next_deadline().expect("a stall deadline");
    assert_eq!(deadline, harness.now + Duration::from_secs(30));
    harness.conn.on_timer(harness.now + Duration::from_secs(29));
    assert!(harness.flush().is_empty());
    harness.conn.on_timer(deadline);
    harness.conn.check_invariants();
    assert_eq!(
        harness.flush(),
        [Out::Rst {
            stream_id: 1,
            code: ErrorCode::Cancel
        }]
    );
    assert_eq!(
        harness.conn.poll_event(),
        Some(Event::Reset {
            stream_id: 1,
            code: ErrorCode::Cancel
        })
    );
    assert_eq!(harness.conn.next_deadline(), None);
    assert_eq!(harness.conn.take_stats().stalls, 1);
    assert_eq!(harness.error, None);
}

#[test]
fn window_update_clears_a_stall() {
    let mut harness = Harness::new(ServerConfig::default());
    let mut client = Client::new();
    client
        .settings(&[(SettingId::InitialWindowSize, 0)])
        .get(1, "/");
    harness.feed(&client.take(), &no_app);
    harness.conn.send_headers(1, 200, [], false).unwrap();
    harness
        .conn
        .send_data(1, Bytes::from_static(b"stuck"), true)
        .unwrap();
    assert!(harness.conn.next_deadline().is_some());
    harness.advance(Duration::from_secs(20));
    client.window_update(1, 100);
    harness.feed(&client.take(), &no_app);
    harness.flush();
    assert_eq!(harness.conn.next_deadline(), None);
    assert!(harness.conn.is_idle());
}

#[test]
fn stalled_connection_window_ends_the_connection() {
    let mut harness = Harness::new(ServerConfig::default());
    let mut client = Client::new();
    client
        .settings(&[(SettingId::InitialWindowSize, 1 << 20)])
        .get(1, "/");
    harness.feed(&client.take(), &no_app);
    harness.conn.send_headers(1, 200, [], false).unwrap();
    harness
        .conn
        .send_data(1, Bytes::from(vec![0u8; 100_000]), true)
        .unwrap();
    harness.flush();
    assert_eq!(harness.conn.queued_data(1), 100_000 - 65_535);
    let deadline = harness.conn.next_deadline().expect("deadline");
    harness.conn.on_timer(deadline);
    let error = *harness.conn.last_error().expect("error");
    assert_eq!(
        (error.code, error.flood),
        (ErrorCode::EnhanceYourCalm, Some(FloodKind::Stall))
    );
    assert!(matches!(harness.flush()[..], [Out::GoAway { .. }]));
    assert!(harness.conn.is_finished());
}
