//! Test support for the client connection: a scripted origin that writes frames with our
//! encoders and HPACK, a decoder of the client's output as an origin would read it, and a
//! runner that feeds the origin's bytes whole or split at every boundary, checking the
//! connection's invariants after every step.

#![allow(dead_code)]

use std::time::Instant;

use bytes::BytesMut;
use squall_h2::{ClientConfig, ClientConnection, ClientEvent, ErrorCode, StreamId};
use squall_hpack::Encoder;
pub use wire::{FrameReader, Out};

#[path = "../wire/mod.rs"]
mod wire;

/// Builds the bytes an origin sends.
pub struct Origin {
    encoder: Encoder,
    pub bytes: BytesMut,
}

impl Origin {
    /// Nothing sent yet.
    pub fn new() -> Self {
        Self {
            encoder: Encoder::new(),
            bytes: BytesMut::new(),
        }
    }

    /// The server preface: an empty SETTINGS, and the ACK of the client's.
    pub fn preface() -> Self {
        let mut origin = Self::new();
        origin.settings(&[]).settings_ack();
        origin
    }

    /// A response head: `:status` and `fields`.
    pub fn response(
        &mut self,
        id: StreamId,
        status: &str,
        fields: &[(&str, &str)],
        end: bool,
    ) -> &mut Self {
        let mut all = vec![(":status", status)];
        all.extend_from_slice(fields);
        self.headers(id, &all, end)
    }

    /// DATA with `pad` bytes of padding (flow control counts them).
    pub fn data_padded(&mut self, id: StreamId, data: &[u8], pad: u8, end: bool) -> &mut Self {
        let mut payload = vec![pad];
        payload.extend_from_slice(data);
        payload.extend(std::iter::repeat_n(0, usize::from(pad)));
        self.raw(0x0, 0x8 | u8::from(end), id, &payload)
    }

    wire::frame_writer_methods!();
}

/// Decodes what the client sends, as an origin would: the preface first.
pub type Wire = FrameReader;

/// Owned fields, for comparisons.
pub fn fields(list: &[(&str, &str)]) -> Vec<(String, String)> {
    (list.iter())
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

/// The pseudo-fields of a request to https://origin.test.
pub fn request<'a>(method: &'a str, path: &'a str) -> Vec<(&'a [u8], &'a [u8])> {
    vec![
        (&b":method"[..], method.as_bytes()),
        (b":scheme", b"https"),
        (b":authority", b"origin.test"),
        (b":path", path.as_bytes()),
    ]
}

/// A client connection and the origin's view of it.
pub struct Pair {
    pub conn: ClientConnection,
    pub wire: Wire,
    pub now: Instant,
    /// The origin's bytes not yet taken by `recv` (a partial frame).
    pub input: BytesMut,
}

impl Pair {
    pub fn new(config: ClientConfig) -> Self {
        let now = Instant::now();
        let conn = ClientConnection::new(config, now);
        conn.check_invariants();
        Self {
            conn,
            wire: FrameReader::of_client(),
            now,
            input: BytesMut::new(),
        }
    }

    /// A connection past the preface both ways: what the client sent first is read.
    pub fn ready(config: ClientConfig) -> Self {
        let mut pair = Self::new(config);
        let first = pair.output();
        assert!(matches!(first.first(), Some(Out::Settings(_))), "{first:?}");
        pair.feed(&Origin::preface().take()).expect("preface");
        assert_eq!(pair.output(), vec![Out::SettingsAck]);
        pair
    }

    /// Feeds the origin's bytes whole.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), squall_h2::ConnError> {
        self.input.extend_from_slice(bytes);
        let result = self.conn.recv(&mut self.input, self.now);
        self.conn.check_invariants();
        result
    }

    /// Feeds the origin's bytes `chunk` bytes at a time; the first error stops it.
    pub fn feed_split(&mut self, bytes: &[u8], chunk: usize) -> Result<(), squall_h2::ConnError> {
        for piece in bytes.chunks(chunk.max(1)) {
            self.feed(piece)?;
        }
        Ok(())
    }

    /// Everything the client would send now, decoded.
    pub fn output(&mut self) -> Vec<Out> {
        let mut bytes = Vec::new();
        self.conn
            .poll_output(usize::MAX, |piece| bytes.extend_from_slice(&piece));
        self.conn.check_invariants();
        assert!(
            !self.conn.has_output(),
            "output left after an unbounded poll"
        );
        self.wire.read(&bytes)
    }

    /// Every event now, with consecutive body pieces of a stream joined.
    pub fn events(&mut self) -> Vec<ClientEvent> {
        let mut events: Vec<ClientEvent> = Vec::new();
        while let Some(event) = self.conn.poll_event() {
            self.conn.check_invariants();
            if let (
                Some(ClientEvent::Data {
                    stream_id: last_id,
                    data: last,
                    end_stream: last_end,
                }),
                ClientEvent::Data {
                    stream_id,
                    data,
                    end_stream,
                },
            ) = (events.last_mut(), &event)
                && *last_id == *stream_id
                && !*last_end
            {
                let mut joined = BytesMut::from(&last[..]);
                joined.extend_from_slice(data);
                *last = joined.freeze();
                *last_end = *end_stream;
                continue;
            }
            events.push(event);
        }
        events
    }

    pub fn request(&mut self, method: &str, path: &str, end: bool) -> StreamId {
        let id = (self.conn)
            .send_request(request(method, path), end)
            .expect("stream available");
        self.conn.check_invariants();
        id
    }
}

/// A Response event's fields as owned pairs, and its other parts.
pub fn response_of(event: &ClientEvent) -> (StreamId, u16, Vec<(String, String)>, bool) {
    let ClientEvent::Response {
        stream_id,
        status,
        fields,
        end_stream,
        ..
    } = event
    else {
        panic!("not a response: {event:?}");
    };
    let list = (fields.iter())
        .map(|(n, v)| {
            let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
            (text(n), text(v))
        })
        .collect();
    (*stream_id, *status, list, *end_stream)
}

/// The stream was reset by us with `code`: RST_STREAM on the wire, and a Reset event, not
/// a refusal, for the application.
pub fn assert_reset_by_us(pair: &mut Pair, id: StreamId, code: ErrorCode) {
    assert_eq!(
        pair.output(),
        vec![Out::Rst {
            stream_id: id,
            code
        }]
    );
    assert_eq!(
        pair.events(),
        vec![ClientEvent::Reset {
            stream_id: id,
            code,
            refused: false
        }]
    );
}

/// The DATA frames in `out`: stream, payload length, END_STREAM.
pub fn data_frames(out: &[Out]) -> Vec<(StreamId, usize, bool)> {
    (out.iter())
        .filter_map(|o| match o {
            Out::Data {
                stream_id,
                data,
                end_stream,
            } => Some((*stream_id, data.len(), *end_stream)),
            _ => None,
        })
        .collect()
}
