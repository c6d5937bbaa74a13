//! Test support shared by both roles' harnesses (`conn_support`, `client_support`): a reader
//! of what a connection sends, frames decoded and header blocks joined and decoded as its
//! peer would, into [`Out`] for comparisons.

#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use squall_h2::{ErrorCode, Frame, FrameDecoder, PREFACE, SettingId, StreamId};
use squall_hpack::Decoder;

/// A frame the connection sent, header blocks joined and decoded.
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

/// Decodes what one side sends, as its peer would.
pub struct FrameReader {
    /// Who sends, for the messages of failed checks: "client" or "server".
    sender: &'static str,
    frames: FrameDecoder,
    hpack: Decoder,
    buf: BytesMut,
    /// Whether the client preface is still to come (a client's output starts with it).
    preface_due: bool,
    block: Option<(StreamId, bool, Vec<u8>)>,
    /// The largest frame payload the sender may send (its peer's SETTINGS_MAX_FRAME_SIZE).
    pub max_frame_size: usize,
}

impl FrameReader {
    /// A reader of a server's output.
    pub fn new(max_frame_size: u32) -> Self {
        Self::with("server", false, max_frame_size as usize)
    }

    /// A reader of a client's output, which starts with the preface.
    pub fn of_client() -> Self {
        Self::with("client", true, 16_384)
    }

    fn with(sender: &'static str, preface_due: bool, max_frame_size: usize) -> Self {
        Self {
            sender,
            frames: FrameDecoder::new(16_777_215),
            hpack: Decoder::new(4096),
            buf: BytesMut::new(),
            preface_due,
            block: None,
            max_frame_size,
        }
    }

    pub fn read(&mut self, bytes: &[u8]) -> Vec<Out> {
        self.buf.extend_from_slice(bytes);
        if self.preface_due {
            assert!(self.buf.starts_with(PREFACE), "client preface first");
            let _ = self.buf.split_to(PREFACE.len());
            self.preface_due = false;
        }
        let mut out = Vec::new();
        loop {
            let before = self.buf.len();
            let frame = self.frames.decode(&mut self.buf);
            let frame = frame.unwrap_or_else(|e| panic!("{} frames are valid: {e:?}", self.sender));
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
                "{} interleaved a header block",
                self.sender
            );
        }
        Some(match frame {
            Frame::Settings(s) if s.ack => Out::SettingsAck,
            Frame::Settings(s) => Out::Settings(s.params),
            Frame::Ping { ack, data } => {
                assert!(ack, "{} pinged", self.sender);
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
            other => panic!("unexpected frame from the {}: {other:?}", self.sender),
        })
    }

    fn end_block(&mut self) -> Option<Out> {
        let (stream_id, end_stream, block) = self.block.take()?;
        let fields = self.hpack.decode_to_vec(&block, usize::MAX);
        let fields = fields.unwrap_or_else(|e| panic!("{} HPACK: {e:?}", self.sender));
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

/// The frame-writing methods both scripted peers share (`Client` in `conn_support`, `Origin`
/// in `client_support`), written into each one's `impl` so that chains mixing them with the
/// role's own methods keep their type. The type has an `encoder: Encoder` and the
/// `bytes: BytesMut` it writes to.
macro_rules! frame_writer_methods {
    () => {
        pub fn take(&mut self) -> Vec<u8> {
            self.bytes.split().to_vec()
        }

        pub fn settings(&mut self, params: &[(squall_h2::SettingId, u32)]) -> &mut Self {
            squall_h2::encode_settings(&mut self.bytes, params);
            self
        }

        pub fn settings_ack(&mut self) -> &mut Self {
            squall_h2::encode_settings_ack(&mut self.bytes);
            self
        }

        /// An HPACK block for `fields`.
        pub fn block(&mut self, fields: &[(&str, &str)]) -> Vec<u8> {
            let mut block = bytes::BytesMut::new();
            self.encoder.encode(
                fields
                    .iter()
                    .map(|(n, v)| (n.as_bytes(), v.as_bytes(), false)),
                &mut block,
            );
            block.to_vec()
        }

        pub fn headers(
            &mut self,
            id: squall_h2::StreamId,
            fields: &[(&str, &str)],
            end: bool,
        ) -> &mut Self {
            let block = self.block(fields);
            squall_h2::encode_headers(&mut self.bytes, id, end, &block, 16_384);
            self
        }

        /// HEADERS and CONTINUATIONs of at most `piece` bytes of block each.
        pub fn headers_split(
            &mut self,
            id: squall_h2::StreamId,
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

        pub fn data(&mut self, id: squall_h2::StreamId, data: &[u8], end: bool) -> &mut Self {
            squall_h2::encode_data_header(&mut self.bytes, id, data.len() as u32, end);
            bytes::BufMut::put_slice(&mut self.bytes, data);
            self
        }

        pub fn rst(&mut self, id: squall_h2::StreamId, code: squall_h2::ErrorCode) -> &mut Self {
            squall_h2::encode_rst_stream(&mut self.bytes, id, code);
            self
        }

        pub fn ping(&mut self, data: [u8; 8]) -> &mut Self {
            squall_h2::encode_ping(&mut self.bytes, false, data);
            self
        }

        pub fn window_update(&mut self, id: squall_h2::StreamId, increment: u32) -> &mut Self {
            squall_h2::encode_window_update(&mut self.bytes, id, increment);
            self
        }

        pub fn goaway(
            &mut self,
            last: squall_h2::StreamId,
            code: squall_h2::ErrorCode,
        ) -> &mut Self {
            squall_h2::encode_goaway(&mut self.bytes, last, code, b"");
            self
        }

        /// A raw frame.
        pub fn raw(
            &mut self,
            ty: u8,
            flags: u8,
            id: squall_h2::StreamId,
            payload: &[u8],
        ) -> &mut Self {
            bytes::BufMut::put_uint(&mut self.bytes, payload.len() as u64, 3);
            bytes::BufMut::put_u8(&mut self.bytes, ty);
            bytes::BufMut::put_u8(&mut self.bytes, flags);
            bytes::BufMut::put_u32(&mut self.bytes, id);
            bytes::BufMut::put_slice(&mut self.bytes, payload);
            self
        }
    };
}
pub(crate) use frame_writer_methods;
