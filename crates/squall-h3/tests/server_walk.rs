//! Random walks: a client (with or without a QPACK dynamic table) opens requests and
//! delivers their bytes in random pieces interleaved across streams, resets and stops
//! some; the application answers, streams bodies, resets some; the driver writes output in
//! random amounts, QUIC streams sometimes taking nothing. The connection's invariants hold
//! after every step, every request arrives as sent, and every response the driver wrote
//! whole reads back as sent, ending with its fin.

mod common;
mod server_support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::Rng;
use server_support::*;
use squall_h3::qpack::EncoderConfig;
use squall_h3::server::{Command, Connection, Event, OutStream, ServerConfig, StreamOut, Uni};
use squall_h3::{ErrorCode, StreamType, reserved};

/// What the client sent on a request stream.
#[derive(Debug, Default)]
struct Sent {
    path: String,
    body: Vec<u8>,
    trailers: Option<(String, String)>,
    malformed: bool,
}

/// What the application received of a request.
#[derive(Debug, Default)]
struct Got {
    body: Vec<u8>,
    trailers: Option<http::HeaderMap>,
    ended: bool,
}

/// What the application sent of a response.
#[derive(Debug, Default, Clone)]
struct Answer {
    heads: Vec<(u16, Vec<(String, String)>)>,
    body: Vec<u8>,
    trailers: Option<Vec<(String, String)>>,
    ended: bool,
}

struct Walk {
    rng: Rng,
    seed: u64,
    now: Instant,
    conn: Connection,
    client: Client,
    table: bool,
    reader: Reader,
    /// Client bytes not yet delivered, per stream, and whether a fin follows them.
    pending: BTreeMap<u64, (Vec<u8>, bool)>,
    next_id: u64,
    sent: BTreeMap<u64, Sent>,
    got: BTreeMap<u64, Got>,
    /// Streams the application holds, and what it sent on each.
    app: BTreeMap<u64, Answer>,
    /// Responses the application ended and still counted on.
    answered: BTreeMap<u64, Answer>,
    /// Streams reset by either side: their responses are not checked.
    gone: BTreeSet<u64>,
    wire: Wire,
    read: BTreeSet<u64>,
    decoder_fed: usize,
    checked: usize,
    refused: usize,
}

impl Walk {
    fn new(seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let table = rng.percent(50);
        let server_table = rng.percent(50);
        let config = ServerConfig {
            qpack_encoder: EncoderConfig {
                table_bytes_max: if server_table { 1024 } else { 0 },
                ..EncoderConfig::default()
            },
            max_body_bytes: 2500,
            ..ServerConfig::default()
        };
        let now = Instant::now();
        let conn = connected(config, now);
        let client = if table {
            Client::with_table().encoder_stream_opened()
        } else {
            Client::new()
        };
        let mut pending = BTreeMap::new();
        if table {
            pending.insert(ENCODER, (Vec::new(), false));
        }
        Self {
            rng,
            seed,
            now,
            conn,
            client,
            table,
            reader: Reader::new(),
            pending,
            next_id: 0,
            sent: BTreeMap::new(),
            got: BTreeMap::new(),
            app: BTreeMap::new(),
            answered: BTreeMap::new(),
            gone: BTreeSet::new(),
            wire: Wire::default(),
            read: BTreeSet::new(),
            decoder_fed: 0,
            checked: 0,
            refused: 0,
        }
    }

    fn step(&mut self) {
        match self.rng.below(100) {
            0..=14 if self.sent.len() < 400 => self.new_request(),
            0..=49 => self.deliver(),
            50..=52 => self.peer_reset(),
            53..=54 => self.peer_stop(),
            55..=79 => self.app_step(),
            80..=97 => self.write_output(),
            98 => {
                self.now += Duration::from_secs(3);
            }
            _ => self.app_reset(),
        }
        self.conn.check_invariants();
        self.take_commands();
    }

    fn new_request(&mut self) {
        if self
            .conn
            .goaway_id()
            .is_some_and(|goaway| self.next_id >= goaway + 80)
        {
            return;
        }
        let id = self.next_id;
        self.next_id += 4;
        let rng = &mut self.rng;
        let post = rng.percent(50);
        let len = if post { rng.below(3000) } else { 0 };
        let body = rng.bytes(len);
        let path = format!("/r/{id}");
        let mut fields = vec![
            (
                ":method".to_string(),
                if post { "POST" } else { "GET" }.to_string(),
            ),
            (":scheme".into(), "https".into()),
            (":authority".into(), "example.com".into()),
            (":path".into(), path.clone()),
        ];
        for _ in 0..rng.below(4) {
            let k = rng.below(5);
            fields.push((format!("x-h{k}"), format!("value {}", rng.below(3))));
        }
        if post && rng.percent(50) {
            fields.push(("content-length".into(), body.len().to_string()));
        }
        let malformed = rng.percent(4);
        if malformed {
            fields.push(("X-Upper".into(), "1".into()));
        }
        let trailers = (post && rng.percent(30)).then(|| ("x-trailer".to_string(), id.to_string()));
        let mut bytes = self.client.headers(id, &fields);
        let mut at = 0;
        while at < body.len() {
            let n = 1 + self.rng.below(body.len() - at);
            bytes.extend_from_slice(&data_frame(&body[at..at + n]));
            at += n;
            if self.rng.percent(10) {
                bytes.extend_from_slice(&raw_frame(reserved(self.rng.below(4) as u64), b"g"));
            }
        }
        if let Some((name, value)) = &trailers {
            bytes.extend_from_slice(&self.client.headers(id, &[(name, value)]));
        }
        self.pending.insert(id, (bytes, true));
        if self.table {
            let encoder = self.client.encoder_stream();
            self.pending
                .entry(ENCODER)
                .or_default()
                .0
                .extend_from_slice(&encoder);
        }
        self.sent.insert(
            id,
            Sent {
                path,
                body,
                trailers,
                malformed,
            },
        );
    }

    /// A random piece of a random stream's pending bytes.
    fn deliver(&mut self) {
        let ready: Vec<u64> = (self.pending.iter())
            .filter(|(_, (bytes, fin))| !bytes.is_empty() || *fin)
            .map(|(&id, _)| id)
            .collect();
        if ready.is_empty() {
            return;
        }
        let id = *self.rng.pick(&ready);
        let (bytes, fin) = self.pending.get_mut(&id).unwrap();
        let n = if bytes.is_empty() {
            0
        } else {
            1 + self.rng.below(bytes.len())
        };
        let piece: Vec<u8> = bytes.drain(..n).collect();
        let fin = *fin && bytes.is_empty();
        if fin {
            self.pending.remove(&id);
        }
        let result = self.conn.recv(id, Bytes::from(piece), fin, self.now);
        result.unwrap_or_else(|e| panic!("seed {}: {e}", self.seed));
        self.take_events();
    }

    /// The client cancels a request it is still sending.
    fn peer_reset(&mut self) {
        let sending: Vec<u64> = self
            .pending
            .keys()
            .copied()
            .filter(|id| id % 4 == 0)
            .collect();
        if sending.is_empty() {
            return;
        }
        let id = *self.rng.pick(&sending);
        self.pending.remove(&id);
        self.client_forgets(id);
        self.conn.stream_reset(id, 0x10c, self.now).unwrap();
        self.take_events();
    }

    /// The client stops reading a response.
    fn peer_stop(&mut self) {
        let ids: Vec<u64> = self
            .sent
            .keys()
            .copied()
            .filter(|id| !self.read.contains(id))
            .collect();
        if ids.is_empty() {
            return;
        }
        let id = *self.rng.pick(&ids);
        self.client_forgets(id);
        self.conn.stop_sending(id, 0x10c, self.now).unwrap();
        self.take_events();
    }

    /// The client gives a stream up: nothing of it is checked, and its QPACK state goes.
    fn client_forgets(&mut self, id: u64) {
        if self.gone.insert(id) && !self.read.contains(&id) {
            self.reader.decoder.cancel_stream(id);
        }
    }

    fn take_events(&mut self) {
        while let Some(event) = self.conn.poll_event() {
            match event {
                Event::Request { stream_id, request } => {
                    let sent = &self.sent[&stream_id];
                    assert!(
                        !sent.malformed,
                        "seed {}: malformed {stream_id} got through",
                        self.seed
                    );
                    assert_eq!(request.path, sent.path.as_bytes());
                    assert!(self.app.insert(stream_id, Answer::default()).is_none());
                    self.got.insert(
                        stream_id,
                        Got {
                            ended: request.end_stream,
                            ..Got::default()
                        },
                    );
                }
                Event::Data {
                    stream_id,
                    data,
                    end_stream,
                } => {
                    let got = self.got.get_mut(&stream_id).expect("data of a request");
                    assert!(!got.ended);
                    got.body.extend_from_slice(&data);
                    got.ended = end_stream;
                }
                Event::Trailers { stream_id, headers } => {
                    let got = self.got.get_mut(&stream_id).expect("trailers of a request");
                    assert!(!got.ended);
                    got.trailers = Some(headers);
                    got.ended = true;
                }
                Event::Reset { stream_id, .. } => {
                    // The application had the request; its response may be over already
                    // (the request body was still arriving).
                    assert!(self.got.contains_key(&stream_id));
                    self.app.remove(&stream_id);
                    self.answered.remove(&stream_id);
                    self.gone.insert(stream_id);
                }
            }
        }
        self.check_requests();
    }

    /// Every request that ended arrived as sent.
    fn check_requests(&mut self) {
        for (id, got) in &self.got {
            if got.ended && !self.gone.contains(id) {
                let sent = &self.sent[id];
                assert_eq!(got.body, sent.body, "seed {}: body of {id}", self.seed);
                let trailer = (got.trailers.as_ref()).map(|t| {
                    (
                        t.keys().next().unwrap().to_string(),
                        t.values().next().unwrap().to_str().unwrap().to_string(),
                    )
                });
                assert_eq!(
                    trailer, sent.trailers,
                    "seed {}: trailers of {id}",
                    self.seed
                );
            }
        }
    }

    /// The application answers, streams a body, or ends a response.
    fn app_step(&mut self) {
        self.take_events();
        let ids: Vec<u64> = self.app.keys().copied().collect();
        if ids.is_empty() {
            return;
        }
        let id = *self.rng.pick(&ids);
        let answer = self.app.get_mut(&id).unwrap();
        let final_sent = answer.heads.iter().any(|(s, _)| *s >= 200);
        let conn = &mut self.conn;
        let rng = &mut self.rng;
        let result = if !final_sent {
            let status = if rng.percent(10) { 103 } else { 200 };
            let value = format!("v{}", rng.below(3));
            let end = rng.percent(30);
            let fields = vec![("x-answer".to_string(), value)];
            answer.heads.push((status, fields.clone()));
            answer.ended = end && status >= 200;
            conn.send_headers(
                id,
                status,
                fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
                end,
            )
        } else if rng.percent(15) {
            let fields = vec![("x-done".to_string(), "1".to_string())];
            answer.trailers = Some(fields.clone());
            answer.ended = true;
            conn.send_trailers(id, fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())))
        } else {
            let len = rng.below(2000);
            let data = rng.bytes(len);
            let end = rng.percent(30);
            answer.body.extend_from_slice(&data);
            answer.ended = end;
            conn.send_data(id, Bytes::from(data), end)
        };
        result.unwrap_or_else(|_| panic!("seed {}: send on {id}", self.seed));
        if self.app[&id].ended {
            let answer = self.app.remove(&id).unwrap();
            self.answered.insert(id, answer);
        }
    }

    fn app_reset(&mut self) {
        self.take_events();
        let ids: Vec<u64> = self.app.keys().copied().collect();
        if ids.is_empty() {
            return;
        }
        let id = *self.rng.pick(&ids);
        self.app.remove(&id);
        self.gone.insert(id);
        self.conn.reset_stream(id, ErrorCode::InternalError);
    }

    /// The driver writes: `k` bytes per call at most, some streams blocked this time.
    fn write_output(&mut self) {
        let k = match self.rng.below(3) {
            0 => 1 + self.rng.below(16),
            1 => 1 + self.rng.below(2000),
            _ => usize::MAX,
        };
        let blocked = self
            .rng
            .percent(30)
            .then(|| self.rng.below(self.next_id.max(4) as usize / 4) as u64 * 4);
        let wire = &mut self.wire;
        self.conn
            .poll_output(|out: StreamOut<'_>| match out.stream {
                OutStream::Request(id) if Some(id) == blocked => 0,
                _ => wire.take(out, k),
            });
        self.conn.check_invariants();
        self.read_finished();
    }

    /// Reads the responses the driver finished, and returns QPACK's acknowledgments both
    /// ways.
    fn read_finished(&mut self) {
        let decoder = self.wire.uni(Uni::QpackDecoder, StreamType::QpackDecoder);
        if self.table && decoder.len() > self.decoder_fed {
            let bytes = &decoder[self.decoder_fed..];
            self.client.encoder.feed_decoder_stream(bytes).unwrap();
            self.client.encoder.check_invariants();
            self.decoder_fed = decoder.len();
        }
        let finished: Vec<u64> = (self.wire.fins.keys())
            .filter_map(|s| match s {
                OutStream::Request(id) if !self.read.contains(id) => Some(*id),
                _ => None,
            })
            .collect();
        for id in finished {
            if self.gone.contains(&id) {
                self.read.insert(id);
                continue;
            }
            // A section may wait for our encoder stream, which was written in part.
            let Some(response) = self.reader.poll(&self.wire, id) else {
                continue;
            };
            self.read.insert(id);
            assert!(response.fin);
            if let Some(answer) = self.answered.remove(&id) {
                assert_eq!(
                    response.heads, answer.heads,
                    "seed {}: heads of {id}",
                    self.seed
                );
                assert_eq!(
                    response.body, answer.body,
                    "seed {}: body of {id}",
                    self.seed
                );
                assert_eq!(response.trailers, answer.trailers, "seed {}", self.seed);
                self.checked += 1;
            } else {
                // Answered by the connection itself.
                let status = response.heads[0].0;
                assert!(
                    matches!(status, 413 | 414 | 431),
                    "seed {}: {status}",
                    self.seed
                );
            }
        }
        if let Some(bytes) = self.reader.decoder.take_decoder_stream() {
            self.conn.recv(DECODER, bytes, false, self.now).unwrap();
        }
    }

    fn take_commands(&mut self) {
        while let Some(command) = self.conn.poll_command() {
            match command {
                Command::ResetStream { stream_id, code } => {
                    if code == ErrorCode::RequestRejected {
                        let goaway = self.conn.goaway_id();
                        assert!(goaway.is_some_and(|g| stream_id >= g), "seed {}", self.seed);
                        self.refused += 1;
                    }
                    if code == ErrorCode::MessageError {
                        assert!(self.sent[&stream_id].malformed, "seed {}", self.seed);
                    }
                    self.client_forgets(stream_id);
                }
                Command::StopSending { stream_id, code } => {
                    // The client stops sending and says so with RESET_STREAM.
                    if self.pending.remove(&stream_id).is_some() {
                        self.conn
                            .stream_reset(stream_id, u64::from(code), self.now)
                            .unwrap();
                    }
                    if code != ErrorCode::NoError {
                        self.client_forgets(stream_id);
                    }
                }
                Command::Close { code, reason } => {
                    panic!("seed {}: connection closed: {code:?} {reason}", self.seed)
                }
            }
        }
    }

    /// Delivers everything, answers everything, writes everything.
    fn finish(&mut self) {
        while self.pending.keys().any(|id| *id != ENCODER)
            || self.pending.get(&ENCODER).is_some_and(|p| !p.0.is_empty())
        {
            self.deliver();
            self.conn.check_invariants();
            self.take_commands();
        }
        for _ in 0..10_000 {
            if self.app.is_empty() {
                break;
            }
            self.app_step();
            self.take_commands();
        }
        for _ in 0..100_000 {
            self.take_commands();
            if !self.conn.has_output() {
                break;
            }
            self.write_output();
        }
        self.take_events();
        assert!(
            self.app.is_empty() && self.answered.is_empty(),
            "seed {}",
            self.seed
        );
        assert_eq!(self.conn.open_streams(), 0, "seed {}", self.seed);
        assert!(self.conn.is_idle(), "seed {}", self.seed);
    }
}

#[test]
fn random_walks_keep_the_invariants_and_deliver_what_was_sent() {
    let mut checked = 0;
    for seed in 1..=24 {
        let mut walk = Walk::new(seed);
        for i in 0..1500 {
            if seed % 2 == 0 && i == 1000 {
                walk.conn.go_away();
            }
            walk.step();
        }
        walk.finish();
        assert_eq!(walk.conn.is_finished(), seed % 2 == 0);
        assert_eq!(walk.refused > 0, seed % 2 == 0, "seed {seed}");
        checked += walk.checked;
        let stats = walk.conn.take_stats();
        assert!(stats.flood.is_none() && stats.protocol_errors == 0);
    }
    assert!(checked > 500, "only {checked} responses read back");
}
