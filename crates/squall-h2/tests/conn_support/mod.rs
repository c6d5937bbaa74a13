//! Test support for the connection: a scripted client that writes frames with our encoders
//! and HPACK, a decoder of the server's output, and runners that feed the same client
//! bytes whole and split at every boundary and check every run agrees (STYLE §10).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use squall_h2::{
    ConnError, Connection, ErrorCode, Event, Frame, FrameDecoder, PREFACE, Priority, ServerConfig,
    SettingId, StreamId, encode_data_header, encode_goaway, encode_headers, encode_ping,
    encode_priority, encode_priority_update, encode_rst_stream, encode_settings,
    encode_settings_ack, encode_window_update,
};
use squall_hpack::{Decoder, Encoder};

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

    pub fn take(&mut self) -> Vec<u8> {
        self.bytes.split().to_vec()
    }

    pub fn settings(&mut self, params: &[(SettingId, u32)]) -> &mut Self {
        encode_settings(&mut self.bytes, params);
        self
    }

    pub fn settings_ack(&mut self) -> &mut Self {
        encode_settings_ack(&mut self.bytes);
        self
    }

    /// An HPACK block for `fields`.
    pub fn block(&mut self, fields: &[(&str, &str)]) -> Vec<u8> {
        let mut block = BytesMut::new();
        self.encoder.encode(
            fields
                .iter()
                .map(|(n, v)| (n.as_bytes(), v.as_bytes(), false)),
            &mut block,
        );
        block.to_vec()
    }

    pub fn headers(&mut self, id: StreamId, fields: &[(&str, &str)], end: bool) -> &mut Self {
        let block = self.block(fields);
        encode_headers(&mut self.bytes, id, end, &block, 16_384);
        self
    }

    /// HEADERS and CONTINUATIONs of at most `piece` bytes of block each.
    pub fn headers_split(
        &mut self,
        id: StreamId,
        fields: &[(&str, &str)],
        end: bool,
        piece: usize,
    ) -> &mut Self {
        let block = self.block(fields);
        let mut chunks: Vec<&[u8]> = block.chunks(piece).collect();
        if chunks.is_empty() {
            chunks.push(&[]);
        }
        let last = chunks.len() - 1;
        for (i, chunk) in chunks.iter().enumerate() {
            let end_headers = if i == last { 0x4 } else { 0 };
            let (ty, flags) = match i {
                0 => (0x1, end_headers | u8::from(end)),
                _ => (0x9, end_headers),
            };
            self.raw(ty, flags, id, chunk);
        }
        self
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

    pub fn data(&mut self, id: StreamId, data: &[u8], end: bool) -> &mut Self {
        encode_data_header(&mut self.bytes, id, data.len() as u32, end);
        self.bytes.put_slice(data);
        self
    }

    pub fn rst(&mut self, id: StreamId, code: ErrorCode) -> &mut Self {
        encode_rst_stream(&mut self.bytes, id, code);
        self
    }

    pub fn ping(&mut self, data: [u8; 8]) -> &mut Self {
        encode_ping(&mut self.bytes, false, data);
        self
    }

    pub fn window_update(&mut self, id: StreamId, increment: u32) -> &mut Self {
        encode_window_update(&mut self.bytes, id, increment);
        self
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

    pub fn goaway(&mut self, last: StreamId, code: ErrorCode) -> &mut Self {
        encode_goaway(&mut self.bytes, last, code, b"");
        self
    }

    /// A raw frame.
    pub fn raw(&mut self, ty: u8, flags: u8, id: StreamId, payload: &[u8]) -> &mut Self {
        self.bytes.put_uint(payload.len() as u64, 3);
        self.bytes.put_u8(ty);
        self.bytes.put_u8(flags);
        self.bytes.put_u32(id);
        self.bytes.put_slice(payload);
        self
    }
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

/// A frame the server sent, header blocks joined and decoded.
#[derive(Clone, PartialEq, Eq)]
pub enum Out {
    Settings(Vec<(SettingId, u32)>),
    SettingsAck,
    PingAck([u8; 8]),
    GoAway {
        last_stream_id: StreamId,
        code: ErrorCode,
    },
    WindowUpdate {
        stream_id: StreamId,
        increment: u32,
    },
    Rst {
        stream_id: StreamId,
        code: ErrorCode,
    },
    Headers {
        stream_id: StreamId,
        fields: Vec<(String, String)>,
        end_stream: bool,
    },
    Data {
        stream_id: StreamId,
        data: Vec<u8>,
        end_stream: bool,
    },
}

/// Short: DATA payloads show their length and first bytes only.
impl std::fmt::Debug for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Out::Settings(p) => write!(f, "Settings({p:?})"),
            Out::SettingsAck => write!(f, "SettingsAck"),
            Out::PingAck(d) => write!(f, "PingAck({d:?})"),
            Out::GoAway {
                last_stream_id,
                code,
            } => write!(f, "GoAway({last_stream_id}, {code:?})"),
            Out::WindowUpdate {
                stream_id,
                increment,
            } => {
                write!(f, "WindowUpdate({stream_id}, {increment})")
            }
            Out::Rst { stream_id, code } => write!(f, "Rst({stream_id}, {code:?})"),
            Out::Headers {
                stream_id,
                fields,
                end_stream,
            } => {
                write!(f, "Headers({stream_id}, {fields:?}, end={end_stream})")
            }
            Out::Data {
                stream_id,
                data,
                end_stream,
            } => {
                let shown = Bytes::copy_from_slice(&data[..data.len().min(16)]);
                write!(
                    f,
                    "Data({stream_id}, {} bytes {shown:?}, end={end_stream})",
                    data.len()
                )
            }
        }
    }
}

impl Out {
    pub fn stream_id(&self) -> StreamId {
        match self {
            Out::WindowUpdate { stream_id, .. }
            | Out::Rst { stream_id, .. }
            | Out::Headers { stream_id, .. }
            | Out::Data { stream_id, .. } => *stream_id,
            _ => 0,
        }
    }
}

/// Decodes what the server sends, as a client would.
pub struct Peer {
    frames: FrameDecoder,
    hpack: Decoder,
    buf: BytesMut,
    block: Option<(StreamId, bool, Vec<u8>)>,
    /// The largest frame payload the server may send us.
    pub max_frame_size: usize,
}

impl Peer {
    pub fn new(max_frame_size: u32) -> Self {
        Self {
            frames: FrameDecoder::new(16_777_215),
            hpack: Decoder::new(4096),
            buf: BytesMut::new(),
            block: None,
            max_frame_size: max_frame_size as usize,
        }
    }

    pub fn read(&mut self, bytes: &[u8]) -> Vec<Out> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        loop {
            let before = self.buf.len();
            let frame = self
                .frames
                .decode(&mut self.buf)
                .expect("server frames are valid");
            let Some(frame) = frame else { break };
            let payload = before - self.buf.len() - 9;
            assert!(payload <= self.max_frame_size, "frame of {payload} bytes");
            if let Some(frame) = self.frame(frame) {
                out.push(frame);
            }
        }
        out
    }

    fn frame(&mut self, frame: Frame) -> Option<Out> {
        if let Some((id, _, _)) = &self.block {
            assert!(
                matches!(&frame, Frame::Continuation { stream_id, .. } if stream_id == id),
                "server interleaved a header block"
            );
        }
        Some(match frame {
            Frame::Settings(s) if s.ack => Out::SettingsAck,
            Frame::Settings(s) => Out::Settings(s.params),
            Frame::Ping { ack, data } => {
                assert!(ack, "server pinged");
                Out::PingAck(data)
            }
            Frame::GoAway {
                last_stream_id,
                code,
                ..
            } => Out::GoAway {
                last_stream_id,
                code,
            },
            Frame::WindowUpdate {
                stream_id,
                increment,
            } => Out::WindowUpdate {
                stream_id,
                increment,
            },
            Frame::RstStream { stream_id, code } => Out::Rst { stream_id, code },
            Frame::Data {
                stream_id,
                data,
                end_stream,
                ..
            } => Out::Data {
                stream_id,
                data: data.to_vec(),
                end_stream,
            },
            Frame::Headers {
                stream_id,
                block,
                end_stream,
                end_headers,
                ..
            } => {
                self.block = Some((stream_id, end_stream, block.to_vec()));
                return if end_headers { self.end_block() } else { None };
            }
            Frame::Continuation {
                block, end_headers, ..
            } => {
                self.block
                    .as_mut()
                    .expect("block")
                    .2
                    .extend_from_slice(&block);
                return if end_headers { self.end_block() } else { None };
            }
            other => panic!("unexpected frame from the server: {other:?}"),
        })
    }

    fn end_block(&mut self) -> Option<Out> {
        let (stream_id, end_stream, block) = self.block.take()?;
        let fields = self
            .hpack
            .decode_to_vec(&block, usize::MAX)
            .expect("server HPACK");
        let fields = fields
            .iter()
            .map(|f| {
                let name = String::from_utf8(f.name.to_vec()).unwrap();
                (name, String::from_utf8(f.value.to_vec()).unwrap())
            })
            .collect();
        Some(Out::Headers {
            stream_id,
            fields,
            end_stream,
        })
    }
}

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
    let mut harness = Harness::new(config.clone());
    harness.flush();
    for piece in pieces {
        harness.recv(piece);
        harness.flush();
    }
    harness.drain(app);
    harness.flush();
    harness.outcome()
}

/// Like [`run`], but the application sees events after every piece.
pub fn run_interleaved<'a>(
    config: &ServerConfig,
    pieces: impl IntoIterator<Item = &'a [u8]>,
    app: &App,
) -> Outcome {
    let mut harness = Harness::new(config.clone());
    harness.flush();
    for piece in pieces {
        harness.feed(piece, app);
        harness.flush();
    }
    harness.outcome()
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
