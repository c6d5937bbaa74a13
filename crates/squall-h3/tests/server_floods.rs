//! Flood limits: each ends the connection with H3_EXCESSIVE_LOAD once over its budget in
//! a window, and not before; a new window starts the count again.

mod server_support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use server_support::*;
use squall_h3::qpack::EncoderInstruction;
use squall_h3::server::{Command, Connection, FloodKind, ServerConfig};
use squall_h3::{ErrorCode, Frame, Settings, reserved};

fn small() -> ServerConfig {
    ServerConfig {
        max_resets_per_window: 5,
        max_empty_frames_per_window: 5,
        max_unknown_frames_per_window: 5,
        max_control_frames_per_window: 5,
        max_qpack_inserts_per_window: 5,
        ..ServerConfig::default()
    }
}

/// Runs `action` for rounds 0, 1, …: every round up to `budget` passes, the next ends the
/// connection with `kind`.
fn assert_flood(
    kind: FloodKind,
    budget: usize,
    mut action: impl FnMut(&mut Connection, usize, Instant) -> Result<(), squall_h3::server::ConnError>,
) {
    let now = Instant::now();
    let mut conn = connected(small(), now);
    for round in 0..budget {
        action(&mut conn, round, now).unwrap_or_else(|e| panic!("round {round}: {e}"));
        conn.check_invariants();
    }
    let error = action(&mut conn, budget, now).unwrap_err();
    assert_eq!(error.code, ErrorCode::ExcessiveLoad);
    assert_eq!(error.flood, Some(kind));
    assert_eq!(conn.take_stats().flood, Some(kind));
    conn.check_invariants();
    assert!(matches!(
        conn.poll_command(),
        Some(Command::Close {
            code: ErrorCode::ExcessiveLoad,
            ..
        })
    ));
}

#[test]
fn rapid_reset() {
    let mut client = Client::new();
    assert_flood(FloodKind::RapidReset, 5, |conn, round, now| {
        let id = round as u64 * 4;
        conn.recv(id, Bytes::from(client.headers(id, GET)), false, now)?;
        conn.stream_reset(id, 0x10c, now)
    });
    // STOP_SENDING counts alike, and streams reset before any byte.
    assert_flood(FloodKind::RapidReset, 5, |conn, round, now| {
        conn.stop_sending(round as u64 * 4, 0x10c, now)
    });
    // Malformed requests count too.
    let mut client = Client::new();
    assert_flood(FloodKind::RapidReset, 5, |conn, round, now| {
        let id = round as u64 * 4;
        let head = client.headers(id, &get_with(&[("connection", "close")]));
        conn.recv(id, Bytes::from(head), true, now)
    });
}

#[test]
fn a_new_window_starts_the_count_again() {
    let start = Instant::now();
    let mut conn = connected(small(), start);
    let mut client = Client::new();
    for round in 0..50u64 {
        // Five per window, at a pace that starts a new window every five.
        let now = start + Duration::from_secs(10 * (round / 5 + 1));
        let id = round * 4;
        conn.recv(id, Bytes::from(client.headers(id, GET)), false, now)
            .unwrap();
        conn.stream_reset(id, 0x10c, now).unwrap();
        conn.check_invariants();
    }
    assert_eq!(conn.take_stats().resets_received, 50);
}

#[test]
fn empty_data_frames() {
    let mut client = Client::new();
    let now = Instant::now();
    let mut conn = connected(small(), now);
    conn.recv(0, Bytes::from(client.headers(0, GET)), false, now)
        .unwrap();
    let empties = data_frame(b"").repeat(5);
    conn.recv(0, Bytes::from(empties), false, now).unwrap();
    let error = conn
        .recv(0, Bytes::from(data_frame(b"")), false, now)
        .unwrap_err();
    assert_eq!(error.flood, Some(FloodKind::EmptyFrames));
}

#[test]
fn unknown_frames_on_request_and_control_streams() {
    let mut client = Client::new();
    let grease = raw_frame(reserved(9), b"g");
    let now = Instant::now();
    let mut conn = connected(small(), now);
    let head = concat(&[&grease, &client.headers(0, GET), &grease, &grease]);
    conn.recv(0, Bytes::from(head), false, now).unwrap();
    conn.recv(CONTROL, Bytes::from(grease.repeat(2)), false, now)
        .unwrap();
    let error = conn
        .recv(0, Bytes::from(grease.clone()), false, now)
        .unwrap_err();
    assert_eq!(error.flood, Some(FloodKind::UnknownFrames));

    // The default budget takes the grease clients send.
    let mut conn = connected(ServerConfig::default(), now);
    for id in (0..400).step_by(4) {
        let stream = concat(&[&grease, &client.headers(id, GET), &grease]);
        conn.recv(id, Bytes::from(stream), true, now).unwrap();
    }
    let requests = events(&mut conn)
        .into_iter()
        .filter(|e| matches!(e, squall_h3::server::Event::Request { .. }))
        .count();
    assert_eq!(requests, 100);
    assert_eq!(conn.take_stats().flood, None);
}

#[test]
fn control_frames() {
    assert_flood(FloodKind::ControlFrames, 5, |conn, round, now| {
        let mut frame = Vec::new();
        Frame::MaxPushId(round as u64).encode(&mut frame);
        conn.recv(CONTROL, Bytes::from(frame), false, now)
    });
}

#[test]
fn qpack_insertions() {
    let insert = |value: &'static [u8]| {
        let mut out = Vec::new();
        EncoderInstruction::InsertWithLiteralName {
            name: Bytes::from_static(b"x-name"),
            value: Bytes::from_static(value),
        }
        .encode(false, &mut out);
        out
    };
    let mut capacity = Vec::new();
    EncoderInstruction::SetCapacity(4096).encode(false, &mut capacity);
    let now = Instant::now();
    let mut conn = connected(small(), now);
    conn.recv(ENCODER, Bytes::from(capacity.clone()), false, now)
        .unwrap();
    conn.recv(ENCODER, Bytes::from(insert(b"v").repeat(5)), false, now)
        .unwrap();
    let error = conn
        .recv(ENCODER, Bytes::from(insert(b"w")), false, now)
        .unwrap_err();
    assert_eq!(error.flood, Some(FloodKind::QpackEncoder));

    // Entries with an empty name serve no field: they count against the empty budget.
    let empty = {
        let mut out = Vec::new();
        EncoderInstruction::InsertWithLiteralName {
            name: Bytes::new(),
            value: Bytes::new(),
        }
        .encode(false, &mut out);
        out
    };
    let config = ServerConfig {
        max_empty_frames_per_window: 3,
        ..ServerConfig::default()
    };
    let mut conn = connected(config, now);
    conn.recv(ENCODER, Bytes::from(capacity), false, now)
        .unwrap();
    conn.recv(ENCODER, Bytes::from(empty.repeat(3)), false, now)
        .unwrap();
    conn.check_invariants();
    let error = conn
        .recv(ENCODER, Bytes::from(empty), false, now)
        .unwrap_err();
    assert_eq!(error.flood, Some(FloodKind::QpackEncoder));
    assert_eq!(error.reason, "QPACK insertions of empty names");
}

/// A blocked stream keeps what follows its section within a bound; past it the stream is
/// reset with H3_EXCESSIVE_LOAD and QPACK told.
#[test]
fn a_blocked_stream_buffers_within_its_bound() {
    let config = ServerConfig {
        max_blocked_stream_bytes: 100,
        ..ServerConfig::default()
    };
    let now = Instant::now();
    let mut conn = Connection::new(config, now);
    conn.recv(
        CONTROL,
        Bytes::from(control_stream(&Settings::default())),
        false,
        now,
    )
    .unwrap();
    let mut client = Client::with_table();
    let head = client.headers(0, &get_with(&[("x-wait", "for the encoder stream")]));
    conn.recv(0, Bytes::from(head), false, now).unwrap();
    conn.recv(0, Bytes::from(data_frame(&[1; 90])), false, now)
        .unwrap();
    conn.check_invariants();
    assert!(conn.poll_command().is_none());
    conn.recv(0, Bytes::from(data_frame(&[2; 20])), false, now)
        .unwrap();
    conn.check_invariants();
    let code = ErrorCode::ExcessiveLoad;
    assert_eq!(
        commands(&mut conn),
        [
            Command::ResetStream { stream_id: 0, code },
            Command::StopSending { stream_id: 0, code },
        ]
    );
    // The late encoder stream unblocks nothing; the stream stays gone.
    conn.recv(ENCODER, Bytes::from(client.encoder_stream()), false, now)
        .unwrap();
    conn.recv(0, Bytes::from(data_frame(b"late")), true, now)
        .unwrap();
    assert!(conn.poll_event().is_none());
    conn.check_invariants();
}
