//! Test helpers for the server connection: a client built from the crate's own encoders
//! (stream types, SETTINGS, HEADERS with a QPACK encoder, DATA), a driver that runs a
//! script of stream chunks through a connection and sums up what came out (events per
//! stream, commands, stats), and a reader of what the connection wrote, decoded with the
//! frame decoder and a QPACK decoder.
#![allow(dead_code)] // each test binary uses its own subset

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use squall_h3::qpack::{self, EncoderConfig, Indexing, Section};
use squall_h3::server::{
    Command, Connection, Event, OutStream, Request, ServerConfig, Stats, StreamOut, Uni,
};
use squall_h3::{
    ErrorCode, Frame, FrameDecoder, Settings, StreamKind, StreamType, StreamTypeDecoder,
    encode_data_header, encode_headers, encode_settings, encode_stream_type, varint,
};

/// The client's unidirectional streams: control, QPACK encoder, QPACK decoder.
pub const CONTROL: u64 = 2;
pub const ENCODER: u64 = 6;
pub const DECODER: u64 = 10;

pub type Fields<'a> = &'a [(&'a str, &'a str)];

pub const GET: Fields<'static> = &[
    (":method", "GET"),
    (":scheme", "https"),
    (":authority", "example.com"),
    (":path", "/"),
];

/// A GET with `extra` fields after the pseudo-header fields.
pub fn get_with(extra: Fields<'_>) -> Vec<(String, String)> {
    let mut list: Vec<(String, String)> = (GET.iter())
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    list.extend(extra.iter().map(|(n, v)| (n.to_string(), v.to_string())));
    list
}

/// The client: a QPACK encoder for its requests (and a decoder for our responses).
pub struct Client {
    pub encoder: qpack::Encoder,
    encoder_stream_started: bool,
}

impl Client {
    /// Static table and literals only.
    pub fn new() -> Self {
        Self {
            encoder: qpack::Encoder::default(),
            encoder_stream_started: false,
        }
    }

    /// A client that inserts every field into a dynamic table, as the server's defaults
    /// allow (4,096 bytes, 16 blocked streams), and references entries before they are
    /// acknowledged: its sections block until its encoder stream arrives.
    pub fn with_table() -> Self {
        let config = EncoderConfig {
            table_bytes_max: 4096,
            indexing: Indexing::All,
            huffman: true,
        };
        let mut encoder = qpack::Encoder::new(config);
        encoder.apply_peer_settings(4096, 16);
        Self {
            encoder,
            encoder_stream_started: false,
        }
    }

    /// A HEADERS frame with these fields, in order.
    pub fn headers<N: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        stream_id: u64,
        fields: &[(N, V)],
    ) -> Vec<u8> {
        let mut block = BytesMut::new();
        let lines = fields.iter().map(|(n, v)| (n.as_ref(), v.as_ref(), false));
        self.encoder.encode_section(stream_id, lines, &mut block);
        let mut frame = Vec::new();
        encode_headers(&block, &mut frame);
        frame
    }

    /// The encoder stream's type was sent already ([`connected`] opens the stream).
    pub fn encoder_stream_opened(mut self) -> Self {
        self.encoder_stream_started = true;
        self
    }

    /// The client's encoder stream bytes so far (its type first, the first time).
    pub fn encoder_stream(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if !std::mem::replace(&mut self.encoder_stream_started, true) {
            encode_stream_type(StreamType::QpackEncoder, &mut out);
        }
        if let Some(bytes) = self.encoder.take_encoder_stream() {
            out.extend_from_slice(&bytes);
        }
        out
    }
}

/// A client control stream: its type and SETTINGS.
pub fn control_stream(settings: &Settings) -> Vec<u8> {
    let mut out = Vec::new();
    encode_stream_type(StreamType::Control, &mut out);
    encode_settings(settings, &mut out);
    out
}

pub fn data_frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_data_header(body.len() as u64, &mut out);
    out.extend_from_slice(body);
    out
}

/// A frame of any type with a raw payload.
pub fn raw_frame(ty: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint::encode(ty, &mut out);
    varint::encode(payload.len() as u64, &mut out);
    out.extend_from_slice(payload);
    out
}

pub fn concat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// One step of a script: bytes on a stream, and whether the stream ends after them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub stream: u64,
    pub data: Vec<u8>,
    pub fin: bool,
}

pub fn chunk(stream: u64, data: &[u8], fin: bool) -> Chunk {
    Chunk {
        stream,
        data: data.to_vec(),
        fin,
    }
}

/// The script with step `at` cut in two at `cut` (the fin stays on the second half).
pub fn split_at(script: &[Chunk], at: usize, cut: usize) -> Vec<Chunk> {
    let mut out = script[..at].to_vec();
    let step = &script[at];
    out.push(chunk(step.stream, &step.data[..cut], false));
    out.push(chunk(step.stream, &step.data[cut..], step.fin));
    out.extend_from_slice(&script[at + 1..]);
    out
}

/// The script with step `at` in pieces of one byte (the fin on the last).
pub fn bytewise(script: &[Chunk], at: usize) -> Vec<Chunk> {
    let mut out = script[..at].to_vec();
    let step = &script[at];
    let len = step.data.len();
    for (i, byte) in step.data.iter().enumerate() {
        out.push(chunk(step.stream, &[*byte], step.fin && i + 1 == len));
    }
    if len == 0 {
        out.push(step.clone());
    }
    out.extend_from_slice(&script[at + 1..]);
    out
}

/// What the application saw of one request stream, independent of how the input was cut.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Exchange {
    /// The request, with `end_stream` cleared (it is in `ended`).
    pub request: Option<Request>,
    pub body: Vec<u8>,
    pub trailers: Option<http::HeaderMap>,
    /// The request ended: with its head, a Data end, or trailers.
    pub ended: bool,
    pub reset: Option<ErrorCode>,
}

/// What a run produced: the application's view per stream, the driver's commands (resets
/// of streams, and the close; STOP_SENDING apart, since whether the end of a stream came
/// before the connection stops reading depends on the cut), stats, and the error.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Transcript {
    pub exchanges: BTreeMap<u64, Exchange>,
    pub resets: Vec<Command>,
    pub stops: Vec<Command>,
    pub stats: Stats,
    pub error: Option<ErrorCode>,
}

impl Transcript {
    pub fn exchange(&self, id: u64) -> &Exchange {
        self.exchanges.get(&id).expect("an exchange on the stream")
    }

    /// The codes the driver was told to reset request streams with, by stream.
    pub fn reset_codes(&self) -> Vec<(u64, ErrorCode)> {
        (self.resets.iter())
            .filter_map(|c| match c {
                Command::ResetStream { stream_id, code } => Some((*stream_id, *code)),
                _ => None,
            })
            .collect()
    }

    /// The code of the connection close, if the connection failed.
    pub fn close(&self) -> Option<ErrorCode> {
        self.resets.iter().find_map(|c| match c {
            Command::Close { code, .. } => Some(*code),
            _ => None,
        })
    }
}

/// Takes the application's events into the transcript.
pub fn take_events(conn: &mut Connection, transcript: &mut Transcript) {
    while let Some(event) = conn.poll_event() {
        match event {
            Event::Request {
                stream_id,
                mut request,
            } => {
                let exchange = transcript.exchanges.entry(stream_id).or_default();
                assert!(exchange.request.is_none(), "two requests on {stream_id}");
                exchange.ended = request.end_stream;
                request.end_stream = false;
                exchange.request = Some(request);
            }
            Event::Data {
                stream_id,
                data,
                end_stream,
            } => {
                let exchange = transcript.exchanges.entry(stream_id).or_default();
                assert!(exchange.request.is_some() && !exchange.ended);
                exchange.body.extend_from_slice(&data);
                exchange.ended = end_stream;
            }
            Event::Trailers { stream_id, headers } => {
                let exchange = transcript.exchanges.entry(stream_id).or_default();
                assert!(exchange.request.is_some() && !exchange.ended);
                exchange.trailers = Some(headers);
                exchange.ended = true;
            }
            Event::Reset { stream_id, code } => {
                let exchange = transcript.exchanges.entry(stream_id).or_default();
                assert!(exchange.request.is_some() && exchange.reset.is_none());
                exchange.reset = Some(code);
            }
        }
    }
}

pub fn take_commands(conn: &mut Connection, transcript: &mut Transcript) {
    while let Some(command) = conn.poll_command() {
        match command {
            Command::StopSending { .. } => transcript.stops.push(command),
            _ => transcript.resets.push(command),
        }
    }
}

/// Runs `script` through a fresh connection, taking events and commands after every
/// chunk and checking the invariants.
pub fn run(config: &ServerConfig, script: &[Chunk]) -> Transcript {
    let now = Instant::now();
    let mut conn = Connection::new(config.clone(), now);
    run_on(&mut conn, now, script)
}

pub fn run_on(conn: &mut Connection, now: Instant, script: &[Chunk]) -> Transcript {
    let mut transcript = Transcript::default();
    for step in script {
        let result = conn.recv(step.stream, Bytes::from(step.data.clone()), step.fin, now);
        conn.check_invariants();
        take_events(conn, &mut transcript);
        take_commands(conn, &mut transcript);
        if let Err(error) = result {
            transcript.error = Some(error.code);
            break;
        }
    }
    transcript.stats = conn.take_stats();
    transcript
}

/// Runs the script whole, with step `at` cut at every byte boundary, and with it one byte at
/// a time; asserts every run gives the same transcript (STOP_SENDINGs apart) and returns it.
pub fn run_every_split(config: &ServerConfig, script: &[Chunk], at: usize) -> Transcript {
    let whole = run(config, script);
    let key = |t: &Transcript| (t.exchanges.clone(), t.resets.clone(), t.stats, t.error);
    for cut in 0..=script[at].data.len() {
        let split = run(config, &split_at(script, at, cut));
        assert_eq!(key(&split), key(&whole), "step {at} cut at {cut}");
    }
    let bytes = run(config, &bytewise(script, at));
    assert_eq!(key(&bytes), key(&whole), "step {at} one byte at a time");
    whole
}

/// Everything the connection wrote, per stream, and which streams it finished.
#[derive(Debug, Default)]
pub struct Wire {
    pub bytes: BTreeMap<OutStream, Vec<u8>>,
    pub fins: BTreeMap<OutStream, usize>,
}

impl Wire {
    /// Takes all output, `max` bytes per write call at most (`usize::MAX`: all), until the
    /// connection has nothing left; each stream's bytes arrive in order.
    pub fn drain(&mut self, conn: &mut Connection, max: usize) {
        let mut rounds = 0;
        while conn.has_output() {
            conn.poll_output(|out: StreamOut<'_>| self.take(out, max));
            conn.check_invariants();
            rounds += 1;
            assert!(rounds < 1_000_000, "output never drains");
        }
    }

    pub fn take(&mut self, out: StreamOut<'_>, max: usize) -> usize {
        assert!(!self.fins.contains_key(&out.stream), "bytes after the end");
        let n = out.data.len().min(max);
        self.bytes
            .entry(out.stream)
            .or_default()
            .extend_from_slice(&out.data[..n]);
        if n == out.data.len() && out.fin {
            self.fins.insert(out.stream, 1);
        }
        n
    }

    pub fn finished(&self, stream: OutStream) -> bool {
        self.fins.contains_key(&stream)
    }

    pub fn request(&self, id: u64) -> &[u8] {
        self.bytes
            .get(&OutStream::Request(id))
            .map_or(&[], Vec::as_slice)
    }

    /// Our control stream, decoded: its SETTINGS and the frames after them.
    pub fn control(&self) -> Vec<Frame> {
        let bytes = self.uni(Uni::Control, StreamType::Control);
        let mut frames = FrameDecoder::new(StreamKind::Control, 1 << 16);
        let mut input = Bytes::from(bytes);
        let mut out = Vec::new();
        while let Some(frame) = frames.decode(&mut input).expect("a valid control stream") {
            out.push(frame);
        }
        out
    }

    /// A unidirectional stream's bytes after its type, checked to be `ty`.
    pub fn uni(&self, uni: Uni, ty: StreamType) -> Vec<u8> {
        let bytes = self
            .bytes
            .get(&OutStream::Uni(uni))
            .cloned()
            .unwrap_or_default();
        let mut input = Bytes::from(bytes);
        let got = StreamTypeDecoder::new().decode(&mut input);
        assert_eq!(got, Some(ty), "{uni:?} starts with its type");
        input.to_vec()
    }
}

/// A response as the client reads it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Response {
    /// Each head: status and the other fields, in order (1xx first).
    pub heads: Vec<(u16, Vec<(String, String)>)>,
    pub body: Vec<u8>,
    pub trailers: Option<Vec<(String, String)>>,
    pub fin: bool,
}

/// A client's reader of our responses: a QPACK decoder that follows our encoder stream,
/// and per request stream the frames read so far. A section that references insertions
/// our encoder stream has not brought yet waits, as a client's would.
pub struct Reader {
    pub decoder: qpack::Decoder,
    encoder_fed: usize,
    streams: BTreeMap<u64, StreamReader>,
}

struct StreamReader {
    frames: FrameDecoder,
    /// Bytes of the stream consumed so far.
    fed: usize,
    blocked: Option<Bytes>,
    response: Response,
}

impl Reader {
    pub fn new() -> Self {
        // The client allows a table, so a server with one may use it.
        Self {
            decoder: qpack::Decoder::new(4096, 16),
            encoder_fed: 0,
            streams: BTreeMap::new(),
        }
    }

    /// The response on request stream `id` in what the connection wrote so far; panics if
    /// one of its sections waits for our encoder stream.
    pub fn response(&mut self, wire: &Wire, id: u64) -> Response {
        self.poll(wire, id)
            .expect("no section waits for the encoder stream")
    }

    /// Reads what is new on our encoder stream and on stream `id`: the response so far, or
    /// `None` while one of its sections waits for insertions.
    pub fn poll(&mut self, wire: &Wire, id: u64) -> Option<Response> {
        let encoder = wire.uni(Uni::QpackEncoder, StreamType::QpackEncoder);
        let unblocked = self
            .decoder
            .feed_encoder_stream(&encoder[self.encoder_fed..]);
        unblocked.expect("our encoder stream decodes");
        self.encoder_fed = encoder.len();
        let stream = self.streams.entry(id).or_insert_with(|| StreamReader {
            frames: FrameDecoder::new(StreamKind::Request, 1 << 20),
            fed: 0,
            blocked: None,
            response: Response::default(),
        });
        if let Some(section) = stream.blocked.take()
            && !read_section(&mut self.decoder, id, section, stream)
        {
            return None;
        }
        let bytes = wire.request(id);
        let mut input = Bytes::copy_from_slice(&bytes[stream.fed..]);
        loop {
            let before = input.len();
            let frame = stream
                .frames
                .decode(&mut input)
                .expect("a valid response stream");
            stream.fed += before - input.len();
            match frame {
                Some(Frame::Headers(section)) => {
                    if !read_section(&mut self.decoder, id, section, stream) {
                        return None;
                    }
                }
                Some(Frame::Data(piece)) => {
                    let response = &mut stream.response;
                    assert!(response.trailers.is_none(), "DATA after trailers");
                    assert!(!response.heads.is_empty(), "DATA before HEADERS");
                    response.body.extend_from_slice(&piece);
                }
                Some(other) => panic!("{other:?} on a request stream"),
                None => break,
            }
        }
        stream.response.fin = wire.finished(OutStream::Request(id));
        if stream.response.fin {
            assert!(
                stream.frames.is_between_frames(),
                "the stream ends between frames"
            );
        }
        Some(stream.response.clone())
    }
}

/// Decodes a section into the stream's response; false (and the section kept) when it
/// waits for insertions.
fn read_section(
    decoder: &mut qpack::Decoder,
    id: u64,
    section: Bytes,
    stream: &mut StreamReader,
) -> bool {
    let decoded = decoder.decode_section(id, &section, 1 << 20);
    let fields = match decoded.expect("our section decodes") {
        Section::Fields(fields) => fields,
        Section::Blocked => {
            stream.blocked = Some(section);
            return false;
        }
    };
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
    let mut list: Vec<(String, String)> = (fields.iter())
        .map(|f| (text(&f.name), text(&f.value)))
        .collect();
    let response = &mut stream.response;
    if list.first().is_some_and(|(n, _)| n == ":status") {
        let status = list.remove(0).1.parse().unwrap();
        assert!(response.body.is_empty() && response.trailers.is_none());
        assert!(
            response.heads.last().is_none_or(|(s, _)| *s < 200),
            "a head after the final one"
        );
        response.heads.push((status, list));
    } else {
        assert!(response.trailers.is_none());
        response.trailers = Some(list);
    }
    true
}

/// A connection with the client's control stream and QPACK streams open, its SETTINGS
/// (table 4,096, 16 blocked streams) applied.
pub fn connected(config: ServerConfig, now: Instant) -> Connection {
    let mut conn = Connection::new(config, now);
    let settings = Settings {
        qpack_max_table_capacity: 4096,
        qpack_blocked_streams: 16,
        ..Settings::default()
    };
    let control = control_stream(&settings);
    conn.recv(CONTROL, Bytes::from(control), false, now)
        .unwrap();
    let mut encoder = Vec::new();
    encode_stream_type(StreamType::QpackEncoder, &mut encoder);
    conn.recv(ENCODER, Bytes::from(encoder), false, now)
        .unwrap();
    let mut decoder = Vec::new();
    encode_stream_type(StreamType::QpackDecoder, &mut decoder);
    conn.recv(DECODER, Bytes::from(decoder), false, now)
        .unwrap();
    conn.check_invariants();
    conn
}

/// Polls events until a request on `id` comes; panics on anything else.
pub fn expect_request(conn: &mut Connection, id: u64) -> Request {
    match conn.poll_event() {
        Some(Event::Request { stream_id, request }) if stream_id == id => request,
        other => panic!("expected a request on {id}, got {other:?}"),
    }
}

/// Sends a request head of `fields` on stream `id` (`fin`: no body follows) and takes its
/// request event.
pub fn open_request<N: AsRef<[u8]>, V: AsRef<[u8]>>(
    conn: &mut Connection,
    client: &mut Client,
    id: u64,
    fields: &[(N, V)],
    fin: bool,
    now: Instant,
) -> Request {
    conn.recv(id, Bytes::from(client.headers(id, fields)), fin, now)
        .unwrap();
    expect_request(conn, id)
}

pub fn commands(conn: &mut Connection) -> Vec<Command> {
    std::iter::from_fn(|| conn.poll_command()).collect()
}

pub fn events(conn: &mut Connection) -> Vec<Event> {
    std::iter::from_fn(|| conn.poll_event()).collect()
}
