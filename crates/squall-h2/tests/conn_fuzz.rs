//! Deterministic fuzzing of the connection: random and mutated client frame sequences, fed
//! in random pieces, with an application answering, resetting and reading at random and a
//! clock that jumps. Nothing may panic, the invariants must hold after every step, the
//! input buffer never holds a whole frame, and everything the server sends must decode as
//! valid frames and HPACK blocks.

mod conn_support;
mod rng;

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use conn_support::{Client, Out, Peer, request};
use rng::Rng;
use squall_h2::{Connection, ErrorCode, Event, ServerConfig, SettingId, Stats};

impl Rng {
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn stream(&mut self) -> u32 {
        match self.below(10) {
            0 => self.next() as u32 & 0x7fff_ffff,
            1 => 2 * self.below(10) as u32,
            _ => 1 + 2 * self.below(12) as u32,
        }
    }
}

/// `priority` field values (RFC 9218): valid, partly ignored, and not dictionaries.
const PRIORITIES: [&str; 8] = [
    "u=0",
    "u=7, i",
    "i",
    "u=1, i=?0",
    "u=9, x=1",
    "",
    "u=1,",
    "?",
];

/// A random client byte sequence, mostly well-formed frames.
fn client_bytes(rng: &mut Rng) -> Vec<u8> {
    let mut client = Client::new();
    let ops = 1 + rng.below(40);
    let mut next_id = 1;
    client.get(1, "/");
    next_id += 2;
    for _ in 0..ops {
        client_op(rng, &mut client, &mut next_id);
    }
    let mut bytes = client.take();
    // Mutate a few bytes now and then, past the preface.
    if rng.chance(10) && bytes.len() > 24 {
        for _ in 0..1 + rng.below(4) {
            let at = 24 + rng.below(bytes.len() - 24);
            bytes[at] = rng.next() as u8;
        }
    }
    bytes
}

fn client_op(rng: &mut Rng, client: &mut Client, next_id: &mut u32) {
    // Mostly streams already opened; sometimes any id (idle, even, closed, huge).
    // Stream 0 only through `raw`: our encoders assert against it.
    let opened = (*next_id > 1).then(|| 1 + 2 * rng.below((*next_id / 2) as usize) as u32);
    let id = match opened {
        Some(id) if rng.chance(97) => id,
        _ => rng.stream().max(1),
    };
    match rng.below(100) {
        0..=29 => {
            let paths = if rng.chance(90) { 3 } else { 5 };
            let path = ["/", "/a", "/x?y", "*", ""][rng.below(paths)];
            let method = ["GET", "POST", "HEAD", "OPTIONS", "CONNECT"][rng.below(5)];
            let mut fields = request(method, path);
            if rng.chance(20) {
                fields.push(("content-length", ["0", "3", "10", "x"][rng.below(4)]));
            }
            if rng.chance(5) {
                fields.push(("Bad", "1"));
            }
            if rng.chance(30) {
                fields.push(("priority", PRIORITIES[rng.below(PRIORITIES.len())]));
            }
            let id = if rng.chance(95) { *next_id } else { id };
            if rng.chance(20) {
                client.headers_split(id, &fields, rng.chance(50), 1 + rng.below(20));
            } else {
                client.headers(id, &fields, rng.chance(50));
            }
            *next_id += 2;
        }
        30..=54 => {
            let len = [0, 1, 3, 100, 5000, 16_384][rng.below(6)];
            client.data(id, &vec![b'd'; len], rng.chance(30));
        }
        55..=59 => {
            client.rst(id, ErrorCode::from(rng.below(16) as u32));
        }
        60..=64 => {
            client.ping(rng.next().to_be_bytes());
        }
        65..=69 => {
            let setting = match rng.below(4) {
                0 => (SettingId::InitialWindowSize, rng.below(200_000) as u32),
                1 => (SettingId::MaxFrameSize, 16_384 + rng.below(100_000) as u32),
                2 => (SettingId::HeaderTableSize, rng.below(8192) as u32),
                _ => (SettingId::MaxConcurrentStreams, rng.below(10) as u32),
            };
            client.settings(&[setting]);
        }
        70..=79 => {
            let increment = match rng.below(20) {
                0 => 0x7fff_ffff,
                1 => 1,
                _ => [100, 65_535, 1 << 20][rng.below(3)],
            };
            let id = if rng.chance(40) { 0 } else { id };
            client.window_update(id, increment);
        }
        80 => {
            client.priority(id, rng.stream());
        }
        81..=82 => {
            // RFC 9218: on open, idle, closed and even streams alike.
            let id = if rng.chance(30) { *next_id } else { id };
            client.priority_update(id, PRIORITIES[rng.below(PRIORITIES.len())]);
        }
        83..=87 => {
            client.headers(id, &[("x-trailer", "1")], rng.chance(80));
        }
        88..=89 => {
            let ty = rng.below(12) as u8;
            let payload: Vec<u8> = (0..rng.below(20)).map(|_| rng.next() as u8).collect();
            let id = if rng.chance(20) { 0 } else { id };
            client.raw(ty, rng.next() as u8, id, &payload);
        }
        90..=93 => {
            client.settings_ack();
        }
        94 => {
            client.goaway(rng.stream(), ErrorCode::NoError);
        }
        95..=98 => {
            client.headers_split(*next_id, &request("GET", "/"), true, 1 + rng.below(9));
            *next_id += 2;
        }
        _ => {
            let block = client.block(&request("GET", "/"));
            client.raw(0x9, if rng.chance(50) { 0x4 } else { 0 }, id, &block);
        }
    }
}

/// What the application does with an event.
fn app(rng: &mut Rng, conn: &mut Connection, event: &Event) {
    match event {
        Event::Request { stream_id, .. } => match rng.below(5) {
            0 => {
                let _ = conn.send_headers(*stream_id, 200, [(&b"a"[..], &b"b"[..])], true);
            }
            1 => {
                let _ = conn.send_headers(*stream_id, 200, [], false);
                let body = Bytes::from(vec![b'r'; rng.below(70_000)]);
                let _ = conn.send_data(*stream_id, body, rng.chance(50));
                if rng.chance(30) {
                    let _ = conn.send_trailers(*stream_id, [(&b"t"[..], &b"1"[..])]);
                }
            }
            2 => conn.reset_stream(*stream_id, ErrorCode::Cancel),
            3 => {
                let _ = conn.send_headers(*stream_id, 103, [], false);
            }
            _ => {}
        },
        Event::Data {
            stream_id, data, ..
        } => {
            if rng.chance(80) {
                conn.release_capacity(*stream_id, data.len());
            }
        }
        Event::Trailers { stream_id, .. } => {
            let _ = conn.send_headers(*stream_id, 204, [], true);
        }
        Event::Reset { stream_id, .. } => {
            assert!(conn.send_headers(*stream_id, 200, [], true).is_err());
        }
    }
}

/// What a run of cases reached, summed over its connections, so that a generator that stops
/// getting requests through, or stops provoking errors, fails the test instead of passing it
/// vacuously.
#[derive(Debug, Default)]
struct Tally {
    /// Connections that ended with a connection error, and those that did not.
    failed: u64,
    survived: u64,
    /// Events handed to the application.
    requests: u64,
    data: u64,
    trailers: u64,
    resets: u64,
    /// The connection's own counters (`Stats`), summed.
    refused: u64,
    resets_received: u64,
    malformed: u64,
    protocol_errors: u64,
    floods: u64,
    answered_413: u64,
    answered_414: u64,
    answered_431: u64,
    stalls: u64,
    /// Response heads and DATA frames the client decoded.
    heads: u64,
    data_frames: u64,
}

impl Tally {
    fn add_stats(&mut self, stats: Stats) {
        self.refused += stats.streams_refused;
        self.resets_received += stats.resets_received;
        self.malformed += stats.malformed_requests;
        self.protocol_errors += stats.protocol_errors;
        self.floods += u64::from(stats.flood.is_some());
        self.answered_413 += stats.answered_413;
        self.answered_414 += stats.answered_414;
        self.answered_431 += stats.answered_431;
        self.stalls += stats.stalls;
    }

    fn read(&mut self, peer: &mut Peer, bytes: &[u8]) {
        for out in peer.read(bytes) {
            match out {
                Out::Headers { .. } => self.heads += 1,
                Out::Data { .. } => self.data_frames += 1,
                _ => {}
            }
        }
    }

    fn counts(&self) -> [(&'static str, u64); 17] {
        [
            ("failed", self.failed),
            ("survived", self.survived),
            ("requests", self.requests),
            ("data", self.data),
            ("trailers", self.trailers),
            ("resets", self.resets),
            ("refused", self.refused),
            ("resets_received", self.resets_received),
            ("malformed", self.malformed),
            ("protocol_errors", self.protocol_errors),
            ("floods", self.floods),
            ("answered_413", self.answered_413),
            ("answered_414", self.answered_414),
            ("answered_431", self.answered_431),
            ("stalls", self.stalls),
            ("heads", self.heads),
            ("data_frames", self.data_frames),
        ]
    }

    /// Panics naming every count below its minimum.
    fn assert_at_least(&self, minimums: &Tally) {
        eprintln!("{self:?}");
        let short: Vec<String> = self
            .counts()
            .iter()
            .zip(minimums.counts())
            .filter(|((_, seen), (_, min))| seen < min)
            .map(|((name, seen), (_, min))| format!("{name}: {seen} < {min}"))
            .collect();
        assert!(short.is_empty(), "outcomes below their minimum: {short:?}");
    }
}

/// Runs one random client against a connection, with random pieces and app behaviour.
fn run_case(rng: &mut Rng, config: &ServerConfig, tally: &mut Tally) {
    let input = client_bytes(rng);
    let start = Instant::now();
    let mut now = start;
    let mut conn = Connection::new(config.clone(), now);
    let mut peer = Peer::new(16_777_215);
    let mut buf = BytesMut::new();
    let mut rest = &input[..];
    let mut failed = false;
    while !rest.is_empty() && !failed {
        let (piece, tail) = rest.split_at(1 + rng.below(rest.len().min(200)));
        rest = tail;
        buf.extend_from_slice(piece);
        failed = conn.recv(&mut buf, now).is_err();
        conn.check_invariants();
        if !failed {
            assert!(
                buf.len() < 9 + config.max_frame_size as usize,
                "whole frame left"
            );
        }
        while let Some(event) = conn.poll_event() {
            match event {
                Event::Request { .. } => tally.requests += 1,
                Event::Data { .. } => tally.data += 1,
                Event::Trailers { .. } => tally.trailers += 1,
                Event::Reset { .. } => tally.resets += 1,
            }
            app(rng, &mut conn, &event);
            conn.check_invariants();
        }
        if rng.chance(70) {
            let budget = [1, 100, 16_384, usize::MAX][rng.below(4)];
            conn.poll_output(budget, |b| tally.read(&mut peer, &b));
            conn.check_invariants();
        }
        if rng.chance(10) {
            now += Duration::from_secs(rng.below(40) as u64);
            conn.on_timer(now);
            conn.check_invariants();
        }
    }
    // Whatever happened, the output drains and decodes.
    let mut rounds = 0;
    while conn.has_output() {
        conn.poll_output(65_536, |b| tally.read(&mut peer, &b));
        rounds += 1;
        assert!(rounds < 10_000);
    }
    conn.check_invariants();
    if failed {
        assert!(conn.is_finished());
        assert!(conn.recv(&mut buf, now).is_err());
    }
    let stats = conn.take_stats();
    if std::env::var_os("FUZZ_STATS").is_some() {
        let reason = conn.last_error().map(|e| e.reason);
        eprintln!("{} {failed} {reason:?} {stats:?}", input.len());
    }
    if failed {
        tally.failed += 1;
    } else {
        tally.survived += 1;
    }
    tally.add_stats(stats);
}

#[test]
fn random_clients_never_break_the_connection() {
    let mut rng = Rng(0x5eed_cafe_f00d_0001);
    let config = ServerConfig::default();
    let mut tally = Tally::default();
    for _ in 0..1500 {
        run_case(&mut rng, &config, &mut tally);
    }
    // The run is seeded, so the counts are the same every time; each minimum is about a third
    // of what was seen when it was written (in the comment). The default limits are too wide
    // for a random client to be answered 413, 414 or 431.
    tally.assert_at_least(&Tally {
        failed: 250,          // 843
        survived: 200,        // 657
        requests: 1300,       // 4079
        data: 90,             // 313
        trailers: 20,         // 78
        resets: 230,          // 741
        refused: 170,         // 535
        resets_received: 100, // 312
        malformed: 600,       // 1809
        protocol_errors: 800, // 2562
        floods: 15,           // 55
        stalls: 20,           // 79
        heads: 800,           // 2579
        data_frames: 450,     // 1481
        ..Tally::default()
    });
}

#[test]
fn random_clients_with_tight_limits() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let config = ServerConfig {
        max_concurrent_streams: 3,
        initial_window_size: 1000,
        connection_window_size: 70_000,
        max_header_list_size: 200,
        max_path_bytes: 3,
        max_body_bytes: 50,
        max_resets_per_window: 5,
        max_control_frames_per_window: 10,
        max_empty_frames_per_window: 3,
        max_continuation_frames: 2,
        max_queued_output_bytes: 200,
        ..ServerConfig::default()
    };
    let mut tally = Tally::default();
    for _ in 0..1500 {
        run_case(&mut rng, &config, &mut tally);
    }
    // About a third of what the seeded run saw when this was written (in the comment).
    tally.assert_at_least(&Tally {
        failed: 330,          // 1010
        survived: 160,        // 490
        requests: 790,        // 1956
        data: 17,             // 44
        trailers: 5,          // 11
        resets: 170,          // 447
        refused: 200,         // 445
        resets_received: 70,  // 210
        malformed: 220,       // 458
        protocol_errors: 780, // 2259
        floods: 90,           // 283
        answered_413: 13,     // 26
        answered_414: 220,    // 528
        answered_431: 290,    // 1714
        stalls: 10,           // 31
        heads: 1000,          // 3504
        data_frames: 270,     // 740
    });
}
