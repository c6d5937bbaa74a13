//! Test support for the client connection: a scripted origin that writes frames with our
//! encoders and HPACK, a decoder of the client's output as an origin would read it, and a
//! runner that feeds the origin's bytes whole or split at every boundary, checking the
//! connection's invariants after every step.

#![allow(dead_code)]

use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use squall_h2::{
    ClientConfig, ClientConnection, ClientEvent, ErrorCode, Frame, FrameDecoder, PREFACE,
    SettingId, StreamId, encode_data_header, encode_goaway, encode_headers, encode_ping,
    encode_rst_stream, encode_settings, encode_settings_ack, encode_window_update,
};
use squall_hpack::{Decoder, Encoder};

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
        let chunks: Vec<&[u8]> = block.chunks(piece).collect();
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

    pub fn data(&mut self, id: StreamId, data: &[u8], end: bool) -> &mut Self {
        encode_data_header(&mut self.bytes, id, data.len() as u32, end);
        self.bytes.put_slice(data);
        self
    }

    /// DATA with `pad` bytes of padding (flow control counts them).
    pub fn data_padded(&mut self, id: StreamId, data: &[u8], pad: u8, end: bool) -> &mut Self {
        let mut payload = vec![pad];
        payload.extend_from_slice(data);
        payload.extend(std::iter::repeat_n(0, usize::from(pad)));
        self.raw(0x0, 0x8 | u8::from(end), id, &payload)
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

/// A frame the client sent, header blocks joined and decoded.
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
            } => write!(f, "WindowUpdate({stream_id}, {increment})"),
            Out::Rst { stream_id, code } => write!(f, "Rst({stream_id}, {code:?})"),
            Out::Headers {
                stream_id,
                fields,
                end_stream,
            } => write!(f, "Headers({stream_id}, {fields:?}, end={end_stream})"),
            Out::Data {
                stream_id,
                data,
                end_stream,
            } => {
                let shown = Bytes::copy_from_slice(&data[..data.len().min(16)]);
                let n = data.len();
                write!(
                    f,
                    "Data({stream_id}, {n} bytes {shown:?}, end={end_stream})"
                )
            }
        }
    }
}

/// Decodes what the client sends, as an origin would: the preface first.
pub struct Wire {
    frames: FrameDecoder,
    hpack: Decoder,
    buf: BytesMut,
    preface_seen: bool,
    block: Option<(StreamId, bool, Vec<u8>)>,
    /// The largest frame payload the client may send (the origin's SETTINGS_MAX_FRAME_SIZE).
    pub max_frame_size: usize,
}

impl Wire {
    pub fn new() -> Self {
        Self {
            frames: FrameDecoder::new(16_777_215),
            hpack: Decoder::new(4096),
            buf: BytesMut::new(),
            preface_seen: false,
            block: None,
            max_frame_size: 16_384,
        }
    }

    pub fn read(&mut self, bytes: &[u8]) -> Vec<Out> {
        self.buf.extend_from_slice(bytes);
        if !self.preface_seen {
            assert!(self.buf.starts_with(PREFACE), "client preface first");
            let _ = self.buf.split_to(PREFACE.len());
            self.preface_seen = true;
        }
        let mut out = Vec::new();
        loop {
            let before = self.buf.len();
            let frame = (self.frames.decode(&mut self.buf)).expect("client frames are valid");
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
                "client interleaved a header block"
            );
        }
        Some(match frame {
            Frame::Settings(s) if s.ack => Out::SettingsAck,
            Frame::Settings(s) => Out::Settings(s.params),
            Frame::Ping { ack, data } => {
                assert!(ack, "client pinged");
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
                (self.block.as_mut().expect("block").2).extend_from_slice(&block);
                return if end_headers { self.end_block() } else { None };
            }
            other => panic!("unexpected frame from the client: {other:?}"),
        })
    }

    fn end_block(&mut self) -> Option<Out> {
        let (stream_id, end_stream, block) = self.block.take()?;
        let fields = (self.hpack.decode_to_vec(&block, usize::MAX)).expect("client HPACK");
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
            wire: Wire::new(),
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
