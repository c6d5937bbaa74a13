//! Fuzz target: arbitrary bytes as a client talking to a server connection.
//!
//! The input is the client's byte stream after the preface (which is prepended, so the
//! fuzzer spends its time on frames). The first byte picks the piece length and the
//! application's behaviour; the application answers requests, sends bodies, resets and
//! releases capacity as told, and the clock jumps now and then. Nothing may panic, the
//! connection's invariants must hold after every step, a failed connection must keep
//! failing and finish once its output is taken, and output must always drain.
//!
//! (No `#![forbid(unsafe_code)]` here: `fuzz_target!` expands to a `#[no_mangle]` entry point,
//! which that lint counts against `unsafe_code`. This crate is outside the workspace and its tidy check.)
#![no_main]

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use squall_h2::{Connection, ErrorCode, Event, PREFACE, ServerConfig};

fuzz_target!(|data: &[u8]| {
    let [mode, rest @ ..] = data else {
        return;
    };
    let piece = 1 + usize::from(mode & 0x3f);
    let mut now = Instant::now();
    let mut conn = Connection::new(ServerConfig::default(), now);
    let mut input = BytesMut::from(&PREFACE[..]);
    for (i, chunk) in rest.chunks(piece).enumerate() {
        input.extend_from_slice(chunk);
        if conn.recv(&mut input, now).is_err() {
            conn.check_invariants();
            drain(&mut conn);
            assert!(conn.is_finished());
            assert!(conn.recv(&mut input, now).is_err());
            return;
        }
        conn.check_invariants();
        while let Some(event) = conn.poll_event() {
            act(&mut conn, &event, *mode);
            conn.check_invariants();
        }
        conn.poll_output(16_384, |_| {});
        conn.check_invariants();
        if i % 7 == 6 {
            now += Duration::from_secs(u64::from(mode >> 6) * 15);
            conn.on_timer(now);
            conn.check_invariants();
        }
    }
    drain(&mut conn);
    let _ = conn.take_stats();
});

fn act(conn: &mut Connection, event: &Event, mode: u8) {
    match event {
        Event::Request { stream_id, .. } => match mode % 4 {
            0 => {
                let _ = conn.send_headers(*stream_id, 200, [(&b"a"[..], &b"b"[..])], true);
            }
            1 => {
                let _ = conn.send_headers(*stream_id, 200, [], false);
                let _ = conn.send_data(*stream_id, Bytes::from(vec![0; 40_000]), false);
                let _ = conn.send_trailers(*stream_id, [(&b"t"[..], &b"1"[..])]);
            }
            2 => conn.reset_stream(*stream_id, ErrorCode::Cancel),
            _ => {}
        },
        Event::Data {
            stream_id, data, ..
        } => conn.release_capacity(*stream_id, data.len()),
        Event::Trailers { .. } | Event::Reset { .. } => {}
    }
}

/// Takes all output; it must end.
fn drain(conn: &mut Connection) {
    let mut rounds = 0;
    while conn.has_output() {
        conn.poll_output(65_536, |_| {});
        rounds += 1;
        assert!(rounds < 100_000, "output never ends");
    }
}
