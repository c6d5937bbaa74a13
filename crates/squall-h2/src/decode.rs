//! The frame decoder: bytes in, one [`Frame`] out at a time (RFC 9113 §4, §6).
//!
//! It checks everything a single frame can break on its own: lengths, stream identifiers,
//! padding, flags and SETTINGS values. What needs the connection's history (CONTINUATION
//! following HEADERS, stream states, windows) is the connection's job, not this one's.

use std::ops::Range;

use bytes::{Buf, Bytes, BytesMut};

use crate::error::{ErrorCode, FrameError};
use crate::frame::{
    FRAME_HEADER_BYTES, FRAME_PAYLOAD_BYTES_DEFAULT, FRAME_PAYLOAD_BYTES_LIMIT, Frame, Priority,
    STREAM_ID_MASK, SettingId, Settings, StreamId, WINDOW_BYTES_MAX, flag, kind,
};

/// Cuts frames off the front of a receive buffer.
///
/// The only state is our SETTINGS_MAX_FRAME_SIZE, so the caller never holds more than
/// `9 + max_frame_size` bytes of a frame: a longer length is refused as soon as the 9-byte
/// header is in, before its payload arrives.
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    max_frame_size: u32,
}

impl FrameDecoder {
    /// A decoder accepting payloads of up to `max_frame_size` bytes, clamped to
    /// 16,384..=16,777,215 (RFC 9113 §6.5.2).
    pub fn new(max_frame_size: u32) -> Self {
        let mut decoder = Self {
            max_frame_size: FRAME_PAYLOAD_BYTES_DEFAULT,
        };
        decoder.set_max_frame_size(max_frame_size);
        decoder
    }

    /// The largest payload accepted.
    pub fn max_frame_size(&self) -> u32 {
        self.max_frame_size
    }

    /// Changes the largest payload accepted, clamped to 16,384..=16,777,215 (RFC 9113
    /// §6.5.2). Raise it once the peer has acknowledged our new SETTINGS_MAX_FRAME_SIZE,
    /// not before: until then the peer may still use the old limit (§6.5.3).
    pub fn set_max_frame_size(&mut self, max_frame_size: u32) {
        debug_assert!(
            (FRAME_PAYLOAD_BYTES_DEFAULT..=FRAME_PAYLOAD_BYTES_LIMIT).contains(&max_frame_size),
            "max_frame_size {max_frame_size} out of range"
        );
        self.max_frame_size =
            max_frame_size.clamp(FRAME_PAYLOAD_BYTES_DEFAULT, FRAME_PAYLOAD_BYTES_LIMIT);
    }

    /// Takes one frame off the front of `buf`.
    ///
    /// `Ok(None)`: the frame is not complete; read more and call again. `Err`: the frame broke
    /// RFC 9113. Its bytes are consumed (so after a stream error the next frame can be
    /// decoded), except for a length above `max_frame_size`, whose payload is never waited
    /// for: that is a connection error and the connection must close.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        let Some(head) = Head::parse(buf) else {
            return Ok(None);
        };
        // RFC 9113 §4.2: a frame above SETTINGS_MAX_FRAME_SIZE is a FRAME_SIZE_ERROR. We
        // cannot tell which stream it belongs to for sure, so it ends the connection.
        if head.len > self.max_frame_size {
            return Err(FrameError::connection(
                ErrorCode::FrameSizeError,
                "frame longer than SETTINGS_MAX_FRAME_SIZE",
            ));
        }
        let len = head.len as usize;
        if buf.len() < FRAME_HEADER_BYTES + len {
            return Ok(None);
        }
        buf.advance(FRAME_HEADER_BYTES);
        // Zero-copy: the payload shares the receive buffer's allocation.
        let payload = buf.split_to(len).freeze();
        parse_payload(&head, payload).map(Some)
    }
}

impl FrameDecoder {
    /// The HEADERS frame at the front of `buf` when it is whole, well formed and carries a
    /// whole header block (END_HEADERS): the common request, decoded where it lies in the
    /// receive buffer, not split off it (a split and its drop are two locked counts). `None`
    /// for anything else, which [`FrameDecoder::decode`] takes and judges.
    pub(crate) fn whole_block(&self, buf: &[u8]) -> Option<WholeBlock> {
        let head = Head::parse(buf)?;
        let headers = head.ty == kind::HEADERS && head.has(flag::END_HEADERS);
        if !headers || head.stream_id == 0 || head.len > self.max_frame_size {
            return None;
        }
        let frame_len = FRAME_HEADER_BYTES + head.len as usize;
        let payload = buf.get(FRAME_HEADER_BYTES..frame_len)?;
        let (block, priority) = headers_layout(&head, payload).ok()?;
        Some(WholeBlock {
            stream_id: head.stream_id,
            end_stream: head.has(flag::END_STREAM),
            priority,
            block: (
                FRAME_HEADER_BYTES + block.start,
                FRAME_HEADER_BYTES + block.end,
            ),
            frame_len,
        })
    }
}

/// A HEADERS frame with a whole header block, as it lies at the front of a receive buffer
/// ([`FrameDecoder::whole_block`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WholeBlock {
    pub stream_id: StreamId,
    pub end_stream: bool,
    pub priority: Option<Priority>,
    /// Where the block's bytes lie in the buffer: start and end.
    pub block: (usize, usize),
    /// The frame's length, header included: what to consume once it is handled.
    pub frame_len: usize,
}

/// The fixed 9-byte frame header (RFC 9113 §4.1).
#[derive(Debug, Clone, Copy)]
struct Head {
    len: u32,
    ty: u8,
    flags: u8,
    stream_id: StreamId,
}

impl Head {
    /// Reads the header without consuming it; `None` until 9 bytes are in.
    fn parse(buf: &[u8]) -> Option<Self> {
        let b: &[u8; FRAME_HEADER_BYTES] = buf.get(..FRAME_HEADER_BYTES)?.try_into().ok()?;
        Some(Self {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]),
            ty: b[3],
            flags: b[4],
            // RFC 9113 §4.1: the reserved bit "MUST be ignored when receiving".
            stream_id: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & STREAM_ID_MASK,
        })
    }

    fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// RFC 9113 §6: frames that belong to a stream are a PROTOCOL_ERROR on stream 0.
    fn require_stream(&self, reason: &'static str) -> Result<(), FrameError> {
        if self.stream_id == 0 {
            return Err(FrameError::connection(ErrorCode::ProtocolError, reason));
        }
        Ok(())
    }

    /// RFC 9113 §6: frames that concern the connection are a PROTOCOL_ERROR on a stream.
    fn require_connection(&self, reason: &'static str) -> Result<(), FrameError> {
        if self.stream_id != 0 {
            return Err(FrameError::connection(ErrorCode::ProtocolError, reason));
        }
        Ok(())
    }

    /// A fixed payload length, else a connection FRAME_SIZE_ERROR.
    fn require_len(&self, len: u32, reason: &'static str) -> Result<(), FrameError> {
        if self.len != len {
            return Err(FrameError::connection(ErrorCode::FrameSizeError, reason));
        }
        Ok(())
    }
}

fn parse_payload(head: &Head, payload: Bytes) -> Result<Frame, FrameError> {
    match head.ty {
        kind::DATA => parse_data(head, payload),
        kind::HEADERS => parse_headers(head, payload),
        kind::PRIORITY => parse_priority(head, &payload),
        kind::RST_STREAM => parse_rst_stream(head, &payload),
        kind::SETTINGS => parse_settings(head, &payload),
        kind::PUSH_PROMISE => parse_push_promise(head),
        kind::PING => parse_ping(head, &payload),
        kind::GOAWAY => parse_goaway(head, payload),
        kind::WINDOW_UPDATE => parse_window_update(head, &payload),
        kind::CONTINUATION => parse_continuation(head, payload),
        kind::PRIORITY_UPDATE => parse_priority_update(head, payload),
        // RFC 9113 §4.1, §5.5: unknown types "MUST be ignored and discarded".
        ty => Ok(Frame::Unknown {
            ty,
            stream_id: head.stream_id,
        }),
    }
}

/// RFC 9113 §6.1.
fn parse_data(head: &Head, mut payload: Bytes) -> Result<Frame, FrameError> {
    head.require_stream("DATA on stream 0")?;
    let (pad_len, start) = pad_len(head, &payload)?;
    let end = content_end(payload.len(), start, pad_len)?;
    payload.truncate(end);
    payload.advance(start);
    Ok(Frame::Data {
        stream_id: head.stream_id,
        data: payload,
        end_stream: head.has(flag::END_STREAM),
        flow_len: head.len,
    })
}

/// RFC 9113 §6.2.
fn parse_headers(head: &Head, mut payload: Bytes) -> Result<Frame, FrameError> {
    head.require_stream("HEADERS on stream 0")?;
    let (block, priority) = headers_layout(head, &payload)?;
    payload.truncate(block.end);
    payload.advance(block.start);
    Ok(Frame::Headers {
        stream_id: head.stream_id,
        block: payload,
        end_stream: head.has(flag::END_STREAM),
        end_headers: head.has(flag::END_HEADERS),
        priority,
    })
}

/// RFC 9113 §6.2: Pad Length, then priority fields, fragment, Padding. Where the fragment
/// lies in `payload`, and the priority fields. Both ways of reading a HEADERS frame
/// ([`FrameDecoder::decode`], [`FrameDecoder::whole_block`]) lay it out here.
fn headers_layout(
    head: &Head,
    payload: &[u8],
) -> Result<(Range<usize>, Option<Priority>), FrameError> {
    let (pad_len, mut start) = pad_len(head, payload)?;
    let priority = if head.has(flag::PRIORITY) {
        // RFC 9113 §4.2: too small for mandatory fields; a field block frame, so the
        // whole connection.
        let Some(fields) = payload.get(start..start + 5) else {
            return Err(FrameError::connection(
                ErrorCode::FrameSizeError,
                "HEADERS too short for its priority fields",
            ));
        };
        start += 5;
        Some(read_priority(fields))
    } else {
        None
    };
    let end = content_end(payload.len(), start, pad_len)?;
    Ok((start..end, priority))
}

/// RFC 9113 §6.3.
fn parse_priority(head: &Head, payload: &[u8]) -> Result<Frame, FrameError> {
    head.require_stream("PRIORITY on stream 0")?;
    if payload.len() != 5 {
        // §6.3: a length other than 5 is a *stream* error.
        return Err(FrameError::stream(
            head.stream_id,
            ErrorCode::FrameSizeError,
            "PRIORITY length is not 5",
        ));
    }
    Ok(Frame::Priority {
        stream_id: head.stream_id,
        priority: read_priority(payload),
    })
}

/// RFC 9113 §6.4.
fn parse_rst_stream(head: &Head, payload: &[u8]) -> Result<Frame, FrameError> {
    head.require_stream("RST_STREAM on stream 0")?;
    head.require_len(4, "RST_STREAM length is not 4")?;
    Ok(Frame::RstStream {
        stream_id: head.stream_id,
        code: read_u32(payload).into(),
    })
}

/// RFC 9113 §6.5.
fn parse_settings(head: &Head, payload: &[u8]) -> Result<Frame, FrameError> {
    head.require_connection("SETTINGS on a stream")?;
    if head.has(flag::ACK) {
        head.require_len(0, "SETTINGS ACK with a payload")?;
        return Ok(Frame::Settings(Settings {
            ack: true,
            params: Vec::new(),
        }));
    }
    if !payload.len().is_multiple_of(6) {
        return Err(FrameError::connection(
            ErrorCode::FrameSizeError,
            "SETTINGS length is not a multiple of 6",
        ));
    }
    let mut params = Vec::with_capacity(payload.len() / 6);
    for entry in payload.chunks_exact(6) {
        let id = u16::from_be_bytes([entry[0], entry[1]]);
        let value = read_u32(&entry[2..]);
        // §6.5.2: "An endpoint that receives a SETTINGS frame with any unknown or
        // unsupported identifier MUST ignore that setting."
        let Some(id) = SettingId::from_u16(id) else {
            continue;
        };
        validate_setting(id, value)?;
        params.push((id, value));
    }
    Ok(Frame::Settings(Settings { ack: false, params }))
}

/// The value rules of RFC 9113 §6.5.2.
fn validate_setting(id: SettingId, value: u32) -> Result<(), FrameError> {
    let (code, reason) = match id {
        SettingId::EnablePush if value > 1 => (
            ErrorCode::ProtocolError,
            "SETTINGS_ENABLE_PUSH is not 0 or 1",
        ),
        SettingId::InitialWindowSize if value > WINDOW_BYTES_MAX => (
            ErrorCode::FlowControlError,
            "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1",
        ),
        SettingId::EnableConnectProtocol if value > 1 => (
            ErrorCode::ProtocolError,
            "SETTINGS_ENABLE_CONNECT_PROTOCOL is not 0 or 1",
        ),
        SettingId::NoRfc7540Priorities if value > 1 => (
            ErrorCode::ProtocolError,
            "SETTINGS_NO_RFC7540_PRIORITIES is not 0 or 1",
        ),
        SettingId::MaxFrameSize
            if !(FRAME_PAYLOAD_BYTES_DEFAULT..=FRAME_PAYLOAD_BYTES_LIMIT).contains(&value) =>
        {
            (
                ErrorCode::ProtocolError,
                "SETTINGS_MAX_FRAME_SIZE out of range",
            )
        }
        _ => return Ok(()),
    };
    Err(FrameError::connection(code, reason))
}

/// RFC 9113 §6.6, §8.4: clients never push, so a server treats PUSH_PROMISE as a connection
/// PROTOCOL_ERROR. The frame is consumed first, like any other.
fn parse_push_promise(head: &Head) -> Result<Frame, FrameError> {
    head.require_stream("PUSH_PROMISE on stream 0")?;
    Err(FrameError::connection(
        ErrorCode::ProtocolError,
        "PUSH_PROMISE received by a server",
    ))
}

/// RFC 9113 §6.7.
fn parse_ping(head: &Head, payload: &[u8]) -> Result<Frame, FrameError> {
    head.require_connection("PING on a stream")?;
    let Ok(data) = <[u8; 8]>::try_from(payload) else {
        return Err(FrameError::connection(
            ErrorCode::FrameSizeError,
            "PING length is not 8",
        ));
    };
    Ok(Frame::Ping {
        ack: head.has(flag::ACK),
        data,
    })
}

/// RFC 9113 §6.8.
fn parse_goaway(head: &Head, mut payload: Bytes) -> Result<Frame, FrameError> {
    head.require_connection("GOAWAY on a stream")?;
    if payload.len() < 8 {
        return Err(FrameError::connection(
            ErrorCode::FrameSizeError,
            "GOAWAY shorter than 8",
        ));
    }
    let last_stream_id = read_u32(&payload) & STREAM_ID_MASK;
    let code = read_u32(&payload[4..]).into();
    payload.advance(8);
    Ok(Frame::GoAway {
        last_stream_id,
        code,
        debug: payload,
    })
}

/// RFC 9113 §6.9.
fn parse_window_update(head: &Head, payload: &[u8]) -> Result<Frame, FrameError> {
    head.require_len(4, "WINDOW_UPDATE length is not 4")?;
    let increment = read_u32(payload) & STREAM_ID_MASK;
    if increment == 0 {
        // §6.9: a zero increment is a stream error on a stream, a connection error on the
        // connection's window.
        let reason = "WINDOW_UPDATE increment of 0";
        return Err(match head.stream_id {
            0 => FrameError::connection(ErrorCode::ProtocolError, reason),
            id => FrameError::stream(id, ErrorCode::ProtocolError, reason),
        });
    }
    Ok(Frame::WindowUpdate {
        stream_id: head.stream_id,
        increment,
    })
}

/// RFC 9113 §6.10.
fn parse_continuation(head: &Head, payload: Bytes) -> Result<Frame, FrameError> {
    head.require_stream("CONTINUATION on stream 0")?;
    Ok(Frame::Continuation {
        stream_id: head.stream_id,
        block: payload,
        end_headers: head.has(flag::END_HEADERS),
    })
}

/// RFC 9218 §7.1: on stream 0, at least the 4-byte prioritized stream id, which is not 0.
/// The field value is left to the connection: one it cannot parse is ignored, not an error.
fn parse_priority_update(head: &Head, mut payload: Bytes) -> Result<Frame, FrameError> {
    head.require_connection("PRIORITY_UPDATE on a stream")?;
    if payload.len() < 4 {
        return Err(FrameError::connection(
            ErrorCode::FrameSizeError,
            "PRIORITY_UPDATE shorter than 4",
        ));
    }
    let prioritized_stream_id = read_u32(&payload) & STREAM_ID_MASK;
    if prioritized_stream_id == 0 {
        return Err(FrameError::connection(
            ErrorCode::ProtocolError,
            "PRIORITY_UPDATE for stream 0",
        ));
    }
    payload.advance(4);
    Ok(Frame::PriorityUpdate {
        prioritized_stream_id,
        value: payload,
    })
}

/// The Pad Length when the PADDED flag is set, and the bytes it takes at the payload's start
/// (RFC 9113 §6.1, §6.2); 0 and 0 without the flag.
fn pad_len(head: &Head, payload: &[u8]) -> Result<(usize, usize), FrameError> {
    if !head.has(flag::PADDED) {
        return Ok((0, 0));
    }
    // RFC 9113 §4.2: too small to hold its mandatory Pad Length field.
    let Some(&pad_len) = payload.first() else {
        return Err(FrameError::connection(
            ErrorCode::FrameSizeError,
            "PADDED frame without a Pad Length",
        ));
    };
    Ok((usize::from(pad_len), 1))
}

/// Where the content that starts at `start` ends, `pad_len` bytes of Padding before the
/// payload's `len`. RFC 9113 §6.1, §6.2: padding as long as the rest of the payload or longer
/// is a connection PROTOCOL_ERROR. Padding content is not checked: "MAY treat ... as a
/// connection error", and nobody gains from it.
fn content_end(len: usize, start: usize, pad_len: usize) -> Result<usize, FrameError> {
    if pad_len > len - start {
        return Err(FrameError::connection(
            ErrorCode::ProtocolError,
            "padding longer than the payload",
        ));
    }
    Ok(len - pad_len)
}

/// E flag, 31-bit dependency, weight (RFC 9113 §6.3). `fields` is at least 5 bytes.
fn read_priority(fields: &[u8]) -> Priority {
    let word = read_u32(fields);
    Priority {
        exclusive: word & !STREAM_ID_MASK != 0,
        dependency: word & STREAM_ID_MASK,
        weight: fields[4],
    }
}

/// A big-endian u32 from the first four bytes; callers checked the length.
fn read_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every HEADERS frame the in-place reading takes is one `decode` reads alike, with the
    /// same block, flags and length; every one it leaves (not whole, malformed, not a whole
    /// block, on stream 0, over the size limit) is left to `decode`.
    #[test]
    fn a_whole_block_is_read_in_place_as_decode_reads_it() {
        let decoder = FrameDecoder::new(FRAME_PAYLOAD_BYTES_DEFAULT);
        let flags = [
            flag::END_STREAM,
            flag::END_HEADERS,
            flag::PADDED,
            flag::PRIORITY,
        ];
        let mut taken = 0;
        for bits in 0..16u8 {
            let flags = (0..4).filter(|i| bits & (1 << i) != 0).map(|i| flags[i]);
            let flags = flags.fold(0, |all, f| all | f);
            for stream_id in [0u32, 1, 0x7fff_ffff] {
                for payload_len in 0..12usize {
                    // The first byte is a Pad Length when PADDED; every length of padding,
                    // fitting or not, comes up as the payload grows.
                    let payload: Vec<u8> = (0..payload_len as u8).map(|b| b % 7).collect();
                    let mut frame = (payload_len as u32).to_be_bytes()[1..].to_vec();
                    frame.extend([kind::HEADERS, flags]);
                    frame.extend(stream_id.to_be_bytes());
                    frame.extend(&payload);
                    frame.extend(b"next");
                    for cut in [FRAME_HEADER_BYTES - 1, frame.len() - 5, frame.len()] {
                        let bytes = &frame[..cut];
                        let whole = decoder.whole_block(bytes);
                        let decoded = decoder.clone().decode(&mut BytesMut::from(bytes));
                        match (whole, decoded) {
                            (None, Ok(Some(Frame::Headers { end_headers, .. }))) => {
                                assert!(!end_headers, "{bytes:?} left, but whole");
                            }
                            (None, _) => {}
                            (Some(whole), decoded) => {
                                let Ok(Some(Frame::Headers {
                                    stream_id,
                                    block,
                                    end_stream,
                                    end_headers: true,
                                    priority,
                                })) = decoded
                                else {
                                    panic!("{bytes:?} taken, but decoded as {decoded:?}");
                                };
                                let (start, end) = whole.block;
                                assert_eq!(&bytes[start..end], &block[..], "{bytes:?}");
                                assert_eq!(whole.stream_id, stream_id);
                                assert_eq!(whole.end_stream, end_stream);
                                assert_eq!(whole.priority, priority);
                                assert_eq!(whole.frame_len, FRAME_HEADER_BYTES + payload_len);
                                taken += 1;
                            }
                        }
                    }
                }
            }
        }
        // Each combination of END_STREAM, PADDED and PRIORITY has lengths that fit.
        assert!(taken > 8 * 2, "only {taken} frames taken");
        // A length over the limit is left to `decode`, which refuses it before its payload.
        let mut big = (FRAME_PAYLOAD_BYTES_DEFAULT + 1).to_be_bytes()[1..].to_vec();
        big.extend([kind::HEADERS, flag::END_HEADERS, 0, 0, 0, 1]);
        big.resize(
            FRAME_HEADER_BYTES + FRAME_PAYLOAD_BYTES_DEFAULT as usize + 1,
            0,
        );
        assert_eq!(decoder.whole_block(&big), None);
    }
}
