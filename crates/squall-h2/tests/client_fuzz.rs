//! A deterministic random walk: an origin sending a mix of sensible and broken frames,
//! and an application opening, feeding, releasing and resetting streams. Nothing may panic,
//! the invariants hold after every step, and a failed connection keeps failing.

mod client_support;
mod rng;

use bytes::Bytes;
use client_support::{Origin, Pair, request};
use rng::Rng;
use squall_h2::{ClientConfig, ClientEvent, ErrorCode, SettingId};

/// One origin frame, on one of the first few streams (some never opened, some even).
/// `highest`: the highest stream id opened so far (0: none); now and then a frame goes to
/// the next one, not opened yet.
fn origin_frame(rng: &mut Rng, origin: &mut Origin, highest: u32) {
    if highest == 0 {
        origin.ping(*b"no-strm!");
        return;
    }
    let id = match rng.below_u64(50) {
        0 => highest + 2,
        _ => 1 + 2 * rng.below_u64(u64::from(highest / 2) + 1) as u32,
    };
    let statuses = ["200", "204", "103", "101", "404", "20x"];
    let status = statuses[rng.below_u64(statuses.len() as u64) as usize];
    let end = rng.below_u64(2) == 0;
    match rng.below_u64(14) {
        0..=2 => {
            let length = rng.below_u64(40).to_string();
            let mut fields = vec![("server", "fuzz")];
            if rng.below_u64(3) == 0 {
                fields.push(("content-length", &length));
            }
            origin.response(id, status, &fields, end);
        }
        3..=5 => {
            let len = rng.below_u64(3000) as usize;
            origin.data(id, &vec![7; len], end);
        }
        6 => {
            origin.headers(id, &[("x-trailer", "1")], end);
        }
        7 => {
            let code = [
                ErrorCode::RefusedStream,
                ErrorCode::NoError,
                ErrorCode::Cancel,
            ][rng.below_u64(3) as usize];
            origin.rst(id, code);
        }
        8 => {
            origin.window_update(id, rng.below_u64(70_000) as u32 + 1);
        }
        9 => {
            let window = rng.below_u64(100_000) as u32;
            origin.settings(&[
                (SettingId::InitialWindowSize, window),
                (SettingId::MaxConcurrentStreams, rng.below_u64(8) as u32),
            ]);
        }
        10 => {
            origin.ping(*b"fuzzping");
        }
        11 => {
            origin.goaway(rng.below_u64(12) as u32, ErrorCode::NoError);
        }
        12 if rng.below_u64(4) == 0 => {
            let ty = rng.below_u64(11) as u8;
            let flags = rng.below_u64(256) as u8;
            let len = rng.below_u64(20) as usize;
            let payload: Vec<u8> = (0..len).map(|_| rng.below_u64(256) as u8).collect();
            origin.raw(ty, flags, rng.below_u64(12) as u32, &payload);
        }
        _ => {
            origin.data_padded(id, b"pad", rng.below_u64(10) as u8, end);
        }
    }
}

/// One thing the application does.
/// Returns the stream it opened, if it did.
fn app_step(rng: &mut Rng, pair: &mut Pair) -> Option<u32> {
    let id = (rng.below_u64(6) * 2 + 1) as u32;
    match rng.below_u64(8) {
        0 | 1 => {
            let end = rng.below_u64(2) == 0;
            let opened = pair.conn.send_request(request("POST", "/"), end);
            pair.conn.check_invariants();
            return opened.ok();
        }
        2 => {
            let len = rng.below_u64(40_000) as usize;
            let _ = pair
                .conn
                .send_data(id, Bytes::from(vec![1; len]), rng.below_u64(2) == 0);
        }
        3 => {
            let _ = pair.conn.send_trailers(id, [(&b"x-t"[..], &b"1"[..])]);
        }
        4 => pair.conn.reset_stream(id, ErrorCode::Cancel),
        5 => {
            while let Some(event) = pair.conn.poll_event() {
                if let ClientEvent::Data {
                    stream_id, data, ..
                } = event
                {
                    pair.conn.release_capacity(stream_id, data.len());
                }
            }
        }
        6 => {
            let budget = rng.below_u64(50_000) as usize;
            pair.conn.poll_output(budget, |_| {});
        }
        _ => pair.conn.release_capacity(id, rng.below_u64(5000) as usize),
    }
    pair.conn.check_invariants();
    None
}

#[test]
fn random_walks_keep_the_invariants() {
    let mut connection_errors = 0;
    let mut reasons = Vec::new();
    let mut live_steps = 0;
    for seed in 1..=300u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let config = ClientConfig {
            stream_window: 1 + rng.below_u64(70_000) as u32,
            max_concurrent_streams: 1 + rng.below_u64(6) as u32,
            ..ClientConfig::default()
        };
        let mut pair = Pair::ready(config);
        let mut failed = None;
        let mut highest = 0;
        for _ in 0..200 {
            if let Some(id) = app_step(&mut rng, &mut pair) {
                highest = id;
            }
            let mut origin = Origin::new();
            origin_frame(&mut rng, &mut origin, highest);
            let bytes = origin.take();
            let chunk = 1 + rng.below_u64(bytes.len() as u64 + 1) as usize;
            let result = pair.feed_split(&bytes, chunk);
            match (failed, result) {
                (Some(error), result) => assert_eq!(result, Err(error)),
                (None, Err(error)) => {
                    reasons.push(error.reason);
                    failed = Some(error);
                }
                (None, Ok(())) => live_steps += 1,
            }
        }
        if failed.is_some() {
            connection_errors += 1;
            pair.events();
            assert_eq!(pair.conn.open_streams(), 0);
        }
    }
    eprintln!("{connection_errors} of 300 walks failed after {live_steps} steps in all");
    eprintln!("first reasons: {:?}", &reasons[..reasons.len().min(10)]);
    // The walks reach connection errors, and live long enough before them to matter.
    assert!(connection_errors > 0, "no walk failed");
    assert!(live_steps > 300 * 20, "{live_steps} steps before failing");
}
