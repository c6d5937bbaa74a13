//! Test support for the connection: a scripted client that writes frames with our encoders
//! and HPACK, a decoder of the server's output, and runners that feed the same client
//! bytes whole and split at every boundary and check every run agrees.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use squall_h2::{
    ConnError, Connection, ErrorCode, Event, PREFACE, Priority, ServerConfig, SettingId, StreamId,
    encode_priority, encode_priority_update,
};
use squall_hpack::Encoder;
pub use wire::{FrameReader, Out};

#[path = "../wire/mod.rs"]
mod wire;

/// Builds the bytes a client sends.
pub struct Client {
    encoder: Encoder,
    pub bytes: BytesMut,
}

impl Client {
    /// Preface and an empty SETTINGS.
    pub fn new() -> Self {
        let mut client = Self::bare();
        client.bytes.put_slice(PREFACE);
        client.settings(&[]);
        client
    }

    /// Nothing sent yet.
    pub fn bare() -> Self {
        Self {
            encoder: Encoder::new(),
            bytes: BytesMut::new(),
        }
    }

    pub fn get(&mut self, id: StreamId, path: &str) -> &mut Self {
        self.headers(id, &request("GET", path), true)
    }

    pub fn post(&mut self, id: StreamId, path: &str, length: Option<usize>) -> &mut Self {
        let length = length.map(|n| n.to_string());
        let mut fields = request("POST", path);
        if let Some(length) = &length {
            fields.push(("content-length", length));
        }
        self.headers(id, &fields, false)
    }

    pub fn priority(&mut self, id: StreamId, dependency: StreamId) -> &mut Self {
        let priority = Priority {
            exclusive: false,
            dependency,
            weight: 15,
        };
        encode_priority(&mut self.bytes, id, priority);
        self
    }

    /// PRIORITY_UPDATE (RFC 9218 §7.1) for `prioritized`, on stream 0.
    pub fn priority_update(&mut self, prioritized: StreamId, value: &str) -> &mut Self {
        encode_priority_update(&mut self.bytes, prioritized, value.as_bytes());
        self
    }

    wire::frame_writer_methods!();
}

/// The pseudo-header fields of a request to https://example.com.
pub fn request<'a>(method: &'a str, path: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        (":method", method),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", path),
    ]
}

/// Decodes what the server sends, as a client would.
pub type Peer = FrameReader;

/// The fields of a response head, for comparisons.
pub fn head(status: &str, fields: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut all = vec![(":status".to_string(), status.to_string())];
    all.extend(fields.iter().map(|(n, v)| (n.to_string(), v.to_string())));
    all
}

/// The application side of a run: what it does with each event.
pub type App = dyn Fn(&mut Connection, &Event);

/// An application that does nothing.
pub fn no_app(_: &mut Connection, _: &Event) {}

/// Answers every request with 200, a fixed body and END_STREAM; releases body data.
pub fn echo_app(conn: &mut Connection, event: &Event) {
    match event {
        Event::Request { stream_id, .. } => {
            conn.send_headers(*stream_id, 200, [(&b"server"[..], &b"squall"[..])], false)
                .unwrap();
            conn.send_data(*stream_id, Bytes::from_static(b"hello"), true)
                .unwrap();
        }
        Event::Data {
            stream_id, data, ..
        } => conn.release_capacity(*stream_id, data.len()),
        _ => {}
    }
}

/// What a run gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub events: Vec<Event>,
    pub output: Vec<Out>,
    pub error: Option<ConnError>,
}

impl Outcome {
    /// The server frames after its SETTINGS and connection WINDOW_UPDATE.
    pub fn replies(&self) -> Vec<Out> {
        self.output
            .iter()
            .skip_while(|o| matches!(o, Out::Settings(_)))
            .skip_while(|o| matches!(o, Out::WindowUpdate { stream_id: 0, .. }))
            .cloned()
            .collect()
    }

    /// The GOAWAY code, if the server sent one.
    pub fn goaway(&self) -> Option<ErrorCode> {
        self.output.iter().find_map(|o| match o {
            Out::GoAway { code, .. } => Some(*code),
            _ => None,
        })
    }

    /// The RST_STREAM frames sent.
    pub fn resets(&self) -> Vec<(StreamId, ErrorCode)> {
        self.output
            .iter()
            .filter_map(|o| match o {
                Out::Rst { stream_id, code } => Some((*stream_id, *code)),
                _ => None,
            })
            .collect()
    }

    /// The request events' stream ids.
    pub fn requests(&self) -> Vec<StreamId> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Request { stream_id, .. } => Some(*stream_id),
                _ => None,
            })
            .collect()
    }

    /// Statuses the server sent per stream.
    pub fn statuses(&self) -> Vec<(StreamId, String)> {
        self.output
            .iter()
            .filter_map(|o| match o {
                Out::Headers {
                    stream_id, fields, ..
                } => fields
                    .iter()
                    .find(|(n, _)| n == ":status")
                    .map(|(_, v)| (*stream_id, v.clone())),
                _ => None,
            })
            .collect()
    }
}

/// A connection, a peer decoding its output, and a clock.
pub struct Harness {
    pub conn: Connection,
    pub peer: Peer,
    pub now: Instant,
    pub input: BytesMut,
    pub events: Vec<Event>,
    pub output: Vec<Out>,
    pub error: Option<ConnError>,
    pub budget: usize,
}

impl Harness {
    pub fn new(config: ServerConfig) -> Self {
        let now = Instant::now();
        let conn = Connection::new(config, now);
        conn.check_invariants();
        Self {
            conn,
            peer: Peer::new(16_384),
            now,
            input: BytesMut::new(),
            events: Vec::new(),
            output: Vec::new(),
            error: None,
            budget: 64 * 1024,
        }
    }

    /// Feeds bytes and hands every event to `app`; output stays for [`Harness::flush`].
    pub fn feed(&mut self, bytes: &[u8], app: &App) {
        self.recv(bytes);
        self.drain(app);
    }

    /// Feeds bytes; events stay queued.
    pub fn recv(&mut self, bytes: &[u8]) {
        if self.error.is_some() {
            return;
        }
        self.input.extend_from_slice(bytes);
        let result = self.conn.recv(&mut self.input, self.now);
        self.conn.check_invariants();
        if let Err(error) = result {
            assert_eq!(self.conn.recv(&mut self.input, self.now), Err(error));
            self.error = Some(error);
        }
    }

    /// Hands queued events to `app`.
    pub fn drain(&mut self, app: &App) {
        while let Some(event) = self.conn.poll_event() {
            app(&mut self.conn, &event);
            self.conn.check_invariants();
            self.events.push(event);
        }
    }

    /// Feeds bytes with no application, and returns the output.
    pub fn step(&mut self, bytes: &[u8]) -> Vec<Out> {
        self.feed(bytes, &no_app);
        self.flush()
    }

    /// Reads output until there is none.
    pub fn flush(&mut self) -> Vec<Out> {
        let mut new = Vec::new();
        let mut guard = 0;
        while self.conn.has_output() {
            let mut pieces = Vec::new();
            self.conn.poll_output(self.budget, |b| pieces.push(b));
            assert!(!pieces.is_empty(), "has_output but nothing emitted");
            for piece in pieces {
                new.extend(self.peer.read(&piece));
            }
            self.conn.check_invariants();
            guard += 1;
            assert!(guard < 100_000, "output never ends");
        }
        // Nothing left to emit, whatever the budget.
        let mut extra = 0;
        self.conn.poll_output(usize::MAX, |_| extra += 1);
        assert_eq!(extra, 0, "poll_output emitted after has_output said no");
        self.output.extend(new.iter().cloned());
        new
    }

    pub fn advance(&mut self, by: Duration) {
        self.now += by;
    }

    pub fn outcome(&self) -> Outcome {
        Outcome {
            events: self.events.clone(),
            output: self.output.clone(),
            error: self.error,
        }
    }
}

/// Runs `pieces` through a fresh connection, all at the same instant, taking output after
/// each piece; the application sees the events once all input is in, so every split of the
/// same input gives the application the same events (a stream reset before its request is
/// polled is never shown, so draining between pieces would make runs differ).
pub fn run<'a>(
    config: &ServerConfig,
    pieces: impl IntoIterator<Item = &'a [u8]>,
    app: &App,
) -> Outcome {
    run_pieces(config, pieces, app, false)
}

/// Like [`run`], but the application sees events after every piece.
pub fn run_interleaved<'a>(
    config: &ServerConfig,
    pieces: impl IntoIterator<Item = &'a [u8]>,
    app: &App,
) -> Outcome {
    run_pieces(config, pieces, app, true)
}

/// [`run`] and [`run_interleaved`]: `interleaved`, the application sees events after every
/// piece; else once all input is in.
fn run_pieces<'a>(
    config: &ServerConfig,
    pieces: impl IntoIterator<Item = &'a [u8]>,
    app: &App,
    interleaved: bool,
) -> Outcome {
    let mut harness = Harness::new(config.clone());
    harness.flush();
    for piece in pieces {
        harness.recv(piece);
        if interleaved {
            harness.drain(app);
        }
        harness.flush();
    }
    if !interleaved {
        harness.drain(app);
        harness.flush();
    }
    harness.outcome()
}

/// A connection that received GETs on streams 1 and 3 from a client whose
/// SETTINGS_INITIAL_WINDOW_SIZE is `window`, its output so far taken; and that client.
pub fn two_gets_with_window(window: u32) -> (Harness, Client) {
    let mut harness = Harness::new(ServerConfig::default());
    let mut client = Client::new();
    client
        .settings(&[(SettingId::InitialWindowSize, window)])
        .get(1, "/")
        .get(3, "/");
    harness.feed(&client.take(), &no_app);
    harness.flush();
    (harness, client)
}

/// The fields, as a request on stream 1 under `config` (END_STREAM when `end_stream`),
/// make a malformed request: reset with PROTOCOL_ERROR, never shown to the application;
/// the connection carries on, and a GET on stream 3 is served.
pub fn assert_malformed_with(config: &ServerConfig, fields: &[(&str, &str)], end_stream: bool) {
    let mut client = Client::new();
    client.headers(1, fields, end_stream).get(3, "/");
    let outcome = run_all_splits(config, &client.take(), &no_app);
    assert_eq!(outcome.requests(), [3], "{fields:?}");
    assert_eq!(
        outcome.resets(),
        [(1, ErrorCode::ProtocolError)],
        "{fields:?}"
    );
    assert_eq!(outcome.error, None);
}

/// Runs `input` whole, split once at every point, and in pieces of 1 to 8 bytes; asserts
/// every run gives the same normalized outcome, and returns the whole run's.
pub fn run_all_splits(config: &ServerConfig, input: &[u8], app: &App) -> Outcome {
    let whole = run(config, [input], app);
    let expected = normalize(&whole);
    // Long inputs are split at a sample of points, to keep the run quadratic in a bound.
    let step = (input.len() / 2048).max(1);
    for at in (0..=input.len()).step_by(step) {
        let (a, b) = input.split_at(at);
        let outcome = run(config, [a, b], app);
        assert_eq!(normalize(&outcome), expected, "split at {at}");
    }
    for size in 1..=8 {
        let outcome = run(config, input.chunks(size), app);
        assert_eq!(normalize(&outcome), expected, "pieces of {size}");
    }
    whole
}

/// An outcome with what depends on how input was split taken out: body data is
/// concatenated per stream (events and frames), WINDOW_UPDATE increments summed per stream.
#[derive(Debug, PartialEq)]
pub struct Normalized {
    events: BTreeMap<StreamId, Vec<Item>>,
    frames: BTreeMap<StreamId, Vec<Item>>,
    window_updates: BTreeMap<StreamId, u64>,
    error: Option<ConnError>,
}

/// A normalized event or frame: body data, or anything else as text.
#[derive(PartialEq)]
enum Item {
    Data(Vec<u8>, bool),
    Other(String),
}

impl std::fmt::Debug for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Item::Data(data, end) => {
                let hash = data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                    (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
                });
                write!(f, "Data({} bytes, hash {hash:x}, end={end})", data.len())
            }
            Item::Other(text) => f.write_str(text),
        }
    }
}

pub fn normalize(outcome: &Outcome) -> Normalized {
    let mut events: BTreeMap<StreamId, Vec<Item>> = BTreeMap::new();
    for event in &outcome.events {
        let (id, item) = match event {
            Event::Data {
                stream_id,
                data,
                end_stream,
            } => (*stream_id, Item::Data(data.to_vec(), *end_stream)),
            Event::Request { stream_id, request } => {
                (*stream_id, Item::Other(format!("{request:?}")))
            }
            Event::Trailers { stream_id, headers } => {
                (*stream_id, Item::Other(format!("{headers:?}")))
            }
            Event::Reset { stream_id, code } => (*stream_id, Item::Other(format!("{code:?}"))),
        };
        push_merged(events.entry(id).or_default(), item);
    }
    let mut frames: BTreeMap<StreamId, Vec<Item>> = BTreeMap::new();
    let mut window_updates = BTreeMap::new();
    for out in &outcome.output {
        let item = match out {
            // When a stream's window is given back depends on when the application
            // released it, which depends on the split; the connection's total does not.
            Out::WindowUpdate { stream_id, .. } if *stream_id != 0 => continue,
            Out::WindowUpdate { increment, .. } => {
                *window_updates.entry(0).or_insert(0) += u64::from(*increment);
                continue;
            }
            Out::Data {
                data, end_stream, ..
            } => Item::Data(data.clone(), *end_stream),
            other => Item::Other(format!("{other:?}")),
        };
        push_merged(frames.entry(out.stream_id()).or_default(), item);
    }
    Normalized {
        events,
        frames,
        window_updates,
        error: outcome.error,
    }
}

/// Appends `item`, joining body data to the body data before it.
fn push_merged(list: &mut Vec<Item>, item: Item) {
    if let (Some(Item::Data(old, old_end)), Item::Data(new, new_end)) = (list.last_mut(), &item)
        && !*old_end
    {
        old.extend_from_slice(new);
        *old_end = *new_end;
        return;
    }
    list.push(item);
}

/// A config with small windows and limits, quick to exercise.
pub fn small_config() -> ServerConfig {
    ServerConfig {
        max_concurrent_streams: 4,
        initial_window_size: 65_535,
        connection_window_size: 65_535,
        max_header_list_size: 1024,
        max_path_bytes: 64,
        max_body_bytes: 1000,
        ..ServerConfig::default()
    }
}
