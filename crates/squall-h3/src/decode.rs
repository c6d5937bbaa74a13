//! The frame decoder: QUIC stream bytes in, in pieces of any size, frames out (RFC 9114 §7).
//!
//! # What is checked here, and what is the caller's
//!
//! The decoder checks what the frames of one stream can break by themselves:
//!
//! - the layout of each frame (§7.1: a payload must hold exactly its fields; a stream that
//!   ends inside a frame is H3_FRAME_ERROR, see [`FrameDecoder::finish`]);
//! - which frame types may appear on which stream (§7.2: DATA and HEADERS only on request
//!   streams, SETTINGS, GOAWAY, MAX_PUSH_ID and CANCEL_PUSH only on the control stream; a
//!   server refuses PUSH_PROMISE, §7.2.5; the HTTP/2-only types are H3_FRAME_UNEXPECTED,
//!   §7.2.8), all H3_FRAME_UNEXPECTED;
//! - on a control stream, SETTINGS first (§6.2.1: H3_MISSING_SETTINGS) and only once
//!   (§7.2.4: H3_FRAME_UNEXPECTED), its values (§7.2.4.1: an HTTP/2 setting id, a repeated
//!   id or a boolean setting other than 0 or 1 is H3_SETTINGS_ERROR), and that the stream
//!   never ends (§6.2.1: H3_CLOSED_CRITICAL_STREAM);
//! - our limit on a non-DATA frame's payload ([`FrameDecoder::new`]), checked as soon as its
//!   length is read, before any of it is buffered: H3_EXCESSIVE_LOAD (RFC 9114 §10.5: the
//!   peer exceeds a limit of ours; the frame itself is not malformed).
//!
//! Unknown and reserved frame types are skipped as their bytes arrive, never buffered
//! (§7.2.8, §9). DATA payloads are handed out in the pieces they arrived in, as slices of the
//! caller's `Bytes`: a body is never buffered whole here.
//!
//! The caller's, because they need more than one stream's frames:
//!
//! - the order of a message's frames (§4.1): DATA before HEADERS, HEADERS after trailers, or a
//!   stream that ends without HEADERS is a malformed message (H3_FRAME_UNEXPECTED for the
//!   frame order, H3_REQUEST_INCOMPLETE for the end);
//! - decoding HEADERS with QPACK ([`crate::qpack`]) and the message's rules (§4.2, §4.3);
//! - a GOAWAY id that grows, or is not a client-initiated bidirectional stream id (§5.2:
//!   H3_ID_ERROR); MAX_PUSH_ID and CANCEL_PUSH against the push ids (§7.2.3, §7.2.7);
//! - the unidirectional streams: one control stream and one of each QPACK stream (§6.2.1,
//!   RFC 9204 §4.2: a second is H3_STREAM_CREATION_ERROR), a push stream from a client
//!   (§6.2.2: H3_STREAM_CREATION_ERROR), and a QPACK stream that ends (RFC 9204 §4.2:
//!   H3_CLOSED_CRITICAL_STREAM).

use bytes::{Buf, Bytes, BytesMut};

use crate::error::{ErrorCode, FrameError};
use crate::frame::{Frame, Settings, StreamType, kind, setting};
use crate::varint::{self, VarintReader};

/// The default limit on a non-DATA frame's payload: room for a HEADERS frame carrying a
/// field section of 16 KiB even if the peer encodes it loosely.
pub const FRAME_PAYLOAD_BYTES_DEFAULT: u64 = 64 * 1024;

/// Which stream a [`FrameDecoder`] reads: the frames allowed differ (RFC 9114 §7.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamKind {
    /// A client-initiated bidirectional stream carrying a request (§4.1): HEADERS, DATA and
    /// unknown frames.
    Request,
    /// The peer's control stream (§6.2.1), after its stream type: SETTINGS first, then
    /// GOAWAY, MAX_PUSH_ID, CANCEL_PUSH and unknown frames.
    Control,
}

/// Where the decoder is in the current frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading the frame type.
    Type,
    /// Reading the length of a frame of this type.
    Length { ty: u64 },
    /// Buffering the payload of a frame of this type; `left` bytes to come.
    Payload { ty: u64, left: u64 },
    /// Handing out a DATA payload; `left` bytes to come.
    Data { left: u64 },
    /// Discarding the payload of an unknown frame; `left` bytes to come.
    Skip { left: u64 },
}

/// Cuts frames out of one QUIC stream's bytes, however they are split.
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    kind: StreamKind,
    max_payload: u64,
    state: State,
    varint: VarintReader,
    /// The payload of a non-DATA frame, while it arrives in pieces.
    payload: BytesMut,
    /// Control stream: a SETTINGS frame was received.
    settings_seen: bool,
    /// Whether any frame header was read (for SETTINGS first on a control stream).
    frames_seen: u64,
    /// Frames of unknown or reserved types whose header was read (and payload skipped).
    unknown_frames: u64,
    /// The error that ended the stream's decoding; every later call returns it.
    poisoned: Option<FrameError>,
}

impl FrameDecoder {
    /// A decoder for a stream of this kind, refusing a non-DATA frame whose payload is
    /// larger than `max_payload` bytes (DATA and unknown frames are never buffered, so they
    /// have no limit here). Set it at least as large as the field sections the connection
    /// accepts (SETTINGS_MAX_FIELD_SECTION_SIZE), since a HEADERS frame holds one whole.
    pub fn new(kind: StreamKind, max_payload: u64) -> Self {
        Self {
            kind,
            max_payload,
            state: State::Type,
            varint: VarintReader::new(),
            payload: BytesMut::new(),
            settings_seen: false,
            frames_seen: 0,
            unknown_frames: 0,
            poisoned: None,
        }
    }

    /// The kind of stream this decoder reads.
    pub fn kind(&self) -> StreamKind {
        self.kind
    }

    /// Decodes from the front of `input`, consuming what it uses.
    ///
    /// `Ok(Some(frame))`: a frame, or for DATA a piece of one's payload as
    /// [`Frame::Data`] (a slice of `input`; an empty DATA frame gives one empty piece, so
    /// that a caller can count them). Call again: `input` may hold more. `Ok(None)`: `input`
    /// is used up (all of it was consumed) and no frame is complete; call again when more
    /// arrives. `Err`: a connection error; the decoder keeps returning it.
    pub fn decode(&mut self, input: &mut Bytes) -> Result<Option<Frame>, FrameError> {
        if let Some(error) = self.poisoned {
            return Err(error);
        }
        let result = self.step(input);
        if let Err(error) = result {
            self.poisoned = Some(error);
        }
        result
    }

    /// Tells the decoder that the stream ended cleanly (a QUIC FIN) after the input so far.
    ///
    /// A request stream may end between frames, not inside one (RFC 9114 §7.1:
    /// H3_FRAME_ERROR). A control stream may not end at all (§6.2.1:
    /// H3_CLOSED_CRITICAL_STREAM). Whether the message was complete is the caller's concern.
    pub fn finish(&mut self) -> Result<(), FrameError> {
        if let Some(error) = self.poisoned {
            return Err(error);
        }
        let error = if self.kind == StreamKind::Control {
            FrameError::new(ErrorCode::ClosedCriticalStream, "control stream closed")
        } else if self.state != State::Type || self.varint.is_partial() {
            FrameError::new(ErrorCode::FrameError, "stream ends inside a frame")
        } else {
            return Ok(());
        };
        self.poisoned = Some(error);
        Err(error)
    }

    /// How many frames of unknown or reserved types (§7.2.8, §9) this decoder has skipped
    /// (counted when their length is read): they never reach the caller, who may still want
    /// to bound them (a peer sending nothing but grease makes work for nothing).
    pub fn unknown_frames(&self) -> u64 {
        self.unknown_frames
    }

    /// True when the decoder is between frames: the stream may end here.
    pub fn is_between_frames(&self) -> bool {
        self.state == State::Type && !self.varint.is_partial()
    }

    fn step(&mut self, input: &mut Bytes) -> Result<Option<Frame>, FrameError> {
        loop {
            match self.state {
                State::Type => {
                    let Some(ty) = read_varint(&mut self.varint, input) else {
                        return Ok(None);
                    };
                    self.check_type(ty)?;
                    self.frames_seen += 1;
                    self.state = State::Length { ty };
                }
                State::Length { ty } => {
                    let Some(len) = read_varint(&mut self.varint, input) else {
                        return Ok(None);
                    };
                    if let Some(frame) = self.start_payload(ty, len)? {
                        return Ok(Some(frame));
                    }
                }
                State::Data { left } => {
                    if input.is_empty() {
                        return Ok(None);
                    }
                    let take = left.min(input.len() as u64);
                    let piece = input.split_to(take as usize);
                    self.state = if take == left {
                        State::Type
                    } else {
                        State::Data { left: left - take }
                    };
                    return Ok(Some(Frame::Data(piece)));
                }
                State::Skip { left } => {
                    if input.is_empty() {
                        return Ok(None);
                    }
                    let take = left.min(input.len() as u64);
                    input.advance(take as usize);
                    self.state = if take == left {
                        State::Type
                    } else {
                        State::Skip { left: left - take }
                    };
                }
                State::Payload { ty, left } => {
                    if input.is_empty() {
                        return Ok(None);
                    }
                    let take = left.min(input.len() as u64) as usize;
                    if take as u64 == left && self.payload.is_empty() {
                        // The whole payload is here: a slice of the input, no copy.
                        let payload = input.split_to(take);
                        self.state = State::Type;
                        return parse_payload(ty, payload).map(Some);
                    }
                    self.payload.extend_from_slice(&input[..take]);
                    input.advance(take);
                    if take as u64 == left {
                        let payload = self.payload.split().freeze();
                        self.state = State::Type;
                        return parse_payload(ty, payload).map(Some);
                    }
                    self.state = State::Payload {
                        ty,
                        left: left - take as u64,
                    };
                }
            }
        }
    }

    /// The checks a frame's type allows before its length is read.
    fn check_type(&mut self, ty: u64) -> Result<(), FrameError> {
        let unexpected = |reason| Err(FrameError::new(ErrorCode::FrameUnexpected, reason));
        if self.kind == StreamKind::Control && self.frames_seen == 0 && ty != kind::SETTINGS {
            return Err(FrameError::new(
                ErrorCode::MissingSettings,
                "control stream does not start with SETTINGS",
            ));
        }
        if kind::HTTP2_ONLY.contains(&ty) {
            return unexpected("HTTP/2 frame type");
        }
        match (self.kind, ty) {
            (_, kind::PUSH_PROMISE) => unexpected("PUSH_PROMISE sent to a server"),
            (StreamKind::Control, kind::DATA) => unexpected("DATA on the control stream"),
            (StreamKind::Control, kind::HEADERS) => unexpected("HEADERS on the control stream"),
            (StreamKind::Control, kind::SETTINGS) if self.settings_seen => {
                unexpected("second SETTINGS")
            }
            (StreamKind::Control, kind::SETTINGS) => {
                self.settings_seen = true;
                Ok(())
            }
            (StreamKind::Request, kind::SETTINGS) => unexpected("SETTINGS on a request stream"),
            (StreamKind::Request, kind::GOAWAY) => unexpected("GOAWAY on a request stream"),
            (StreamKind::Request, kind::MAX_PUSH_ID) => {
                unexpected("MAX_PUSH_ID on a request stream")
            }
            (StreamKind::Request, kind::CANCEL_PUSH) => {
                unexpected("CANCEL_PUSH on a request stream")
            }
            _ => Ok(()),
        }
    }

    /// Moves to the payload of a frame of type `ty` and length `len`; an empty DATA frame or
    /// an empty known frame is complete at once.
    fn start_payload(&mut self, ty: u64, len: u64) -> Result<Option<Frame>, FrameError> {
        let known = matches!(
            ty,
            kind::HEADERS | kind::SETTINGS | kind::CANCEL_PUSH | kind::GOAWAY | kind::MAX_PUSH_ID
        );
        if ty == kind::DATA {
            if len == 0 {
                self.state = State::Type;
                return Ok(Some(Frame::Data(Bytes::new())));
            }
            self.state = State::Data { left: len };
        } else if !known {
            self.unknown_frames += 1;
            self.state = if len == 0 {
                State::Type
            } else {
                State::Skip { left: len }
            };
        } else if len > self.max_payload {
            return Err(FrameError::new(
                ErrorCode::ExcessiveLoad,
                "frame payload over our limit",
            ));
        } else if len == 0 {
            self.state = State::Type;
            return parse_payload(ty, Bytes::new()).map(Some);
        } else {
            self.state = State::Payload { ty, left: len };
        }
        Ok(None)
    }
}

/// Reads a variable-length integer from the front of `input`, across calls.
fn read_varint(reader: &mut VarintReader, input: &mut Bytes) -> Option<u64> {
    let mut src = &input[..];
    let value = reader.read(&mut src);
    let used = input.len() - src.len();
    input.advance(used);
    value
}

/// A whole non-DATA payload of a known type.
fn parse_payload(ty: u64, payload: Bytes) -> Result<Frame, FrameError> {
    match ty {
        kind::HEADERS => Ok(Frame::Headers(payload)),
        kind::SETTINGS => parse_settings(&payload).map(Frame::Settings),
        kind::CANCEL_PUSH => parse_id(&payload).map(Frame::CancelPush),
        kind::GOAWAY => parse_id(&payload).map(Frame::GoAway),
        kind::MAX_PUSH_ID => parse_id(&payload).map(Frame::MaxPushId),
        _ => unreachable!("start_payload buffers only known types"),
    }
}

/// CANCEL_PUSH, GOAWAY, MAX_PUSH_ID: exactly one variable-length integer (§7.1).
fn parse_id(payload: &[u8]) -> Result<u64, FrameError> {
    match varint::decode(payload) {
        Some((id, len)) if len == payload.len() => Ok(id),
        _ => Err(FrameError::new(
            ErrorCode::FrameError,
            "payload is not exactly one integer",
        )),
    }
}

/// SETTINGS (§7.2.4): pairs of identifier and value; unknown identifiers are ignored.
fn parse_settings(mut payload: &[u8]) -> Result<Settings, FrameError> {
    let settings_error = |reason| Err(FrameError::new(ErrorCode::SettingsError, reason));
    let mut settings = Settings::default();
    // One bit per known identifier, for §7.2.4's "MUST NOT occur more than once".
    let mut seen = 0u8;
    while !payload.is_empty() {
        let pair = varint::decode(payload).and_then(|(id, id_len)| {
            varint::decode(&payload[id_len..]).map(|(value, len)| (id, value, id_len + len))
        });
        let Some((id, value, len)) = pair else {
            return Err(FrameError::new(
                ErrorCode::FrameError,
                "SETTINGS ends inside a setting",
            ));
        };
        payload = &payload[len..];
        if setting::HTTP2_ONLY.contains(&id) {
            return settings_error("HTTP/2 setting identifier");
        }
        let bit = match id {
            setting::QPACK_MAX_TABLE_CAPACITY => {
                settings.qpack_max_table_capacity = value;
                1
            }
            setting::MAX_FIELD_SECTION_SIZE => {
                settings.max_field_section_size = Some(value);
                2
            }
            setting::QPACK_BLOCKED_STREAMS => {
                settings.qpack_blocked_streams = value;
                4
            }
            setting::ENABLE_CONNECT_PROTOCOL | setting::H3_DATAGRAM => {
                if value > 1 {
                    return settings_error("boolean setting other than 0 or 1");
                }
                if id == setting::ENABLE_CONNECT_PROTOCOL {
                    settings.enable_connect_protocol = value == 1;
                    8
                } else {
                    settings.h3_datagram = value == 1;
                    16
                }
            }
            _ => 0,
        };
        if seen & bit != 0 {
            return settings_error("setting identifier repeated");
        }
        seen |= bit;
    }
    Ok(settings)
}

/// Reads the stream type at the start of a unidirectional stream (RFC 9114 §6.2), however
/// its bytes are split.
#[derive(Debug, Clone, Default)]
pub struct StreamTypeDecoder {
    varint: VarintReader,
}

impl StreamTypeDecoder {
    /// A decoder with nothing read yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the stream type off the front of `input` once it is complete; `None` until then
    /// (all of `input` consumed). What follows it stays in `input`.
    pub fn decode(&mut self, input: &mut Bytes) -> Option<StreamType> {
        read_varint(&mut self.varint, input).map(StreamType::from)
    }
}
