//! Response header blocks: HEADERS and CONTINUATION joined (RFC 9113 §6.2, §6.10), decoded
//! with HPACK, then validated (§8.2, §8.3.2) into an interim head, the final head, or
//! trailers. Regular fields and trailers are checked by the server side's request rules
//! (`conn/request.rs`): the field rules of §8.2 are the same both ways.

use bytes::{Bytes, BytesMut};
use squall_hpack::FieldSpan;

use super::ClientConnection;
use super::recv::{Lookup, Step};
use super::stream::{INTERIM_HEADS_MAX, RecvState};
use super::types::ClientEvent;
use crate::common::block::BlockFragments;
use crate::conn::stream::Closed;
use crate::error::ErrorCode;
use crate::fields::HeaderFields;
use crate::frame::StreamId;
use crate::head::{parse_decimal, parse_trailers};

/// CONTINUATION frames one block may take: a 64 KiB list in 16 KiB frames takes a few; an
/// origin that sends a block in a thousand pieces is broken or hostile.
const CONTINUATION_FRAMES_MAX: u32 = 64;

/// A header block whose END_HEADERS has not arrived yet.
#[derive(Debug)]
pub(crate) struct PartialBlock {
    pub stream_id: StreamId,
    end_stream: bool,
    /// The fragments so far.
    pub fragments: BlockFragments,
}

/// A validated response head.
struct Head {
    status: u16,
    fields: HeaderFields,
    content_length: Option<u64>,
}

impl ClientConnection {
    /// §6.2. Which streams may carry a header block is decided before it is buffered.
    pub(super) fn on_headers(
        &mut self,
        id: StreamId,
        block: Bytes,
        end_stream: bool,
        end_headers: bool,
    ) -> Step {
        let (code, reason) = match self.lookup(id) {
            // Decoded (HPACK must stay in step) and, if the stream is gone, ignored: the
            // peer sent it before our RST_STREAM reached it (§5.1).
            Lookup::Active | Lookup::Closed(Closed::ResetByUs | Closed::Forgotten) => {
                self.block = Some(PartialBlock {
                    stream_id: id,
                    end_stream,
                    fragments: BlockFragments::new(block),
                });
                if end_headers {
                    return self.end_block();
                }
                return Ok(());
            }
            // §5.1.1, §8.4: the server opens no stream (we take no pushes).
            Lookup::Idle => (
                ErrorCode::ProtocolError,
                "HEADERS on a stream we did not open",
            ),
            Lookup::Closed(Closed::Normally | Closed::ResetByPeer) => {
                (ErrorCode::StreamClosed, "HEADERS on a closed stream")
            }
        };
        Err(self.conn_error(code, reason))
    }

    /// §6.10.
    pub(super) fn on_continuation(&mut self, id: StreamId, fragment: Bytes, end: bool) -> Step {
        let Some(block) = &mut self.block else {
            let reason = "CONTINUATION without a header block";
            return Err(self.conn_error(ErrorCode::ProtocolError, reason));
        };
        debug_assert_eq!(block.stream_id, id, "on_frame checks the stream");
        let bytes_max = self.config.header_block_bytes_max();
        let appended =
            (block.fragments).append_within(&fragment, CONTINUATION_FRAMES_MAX, bytes_max);
        if let Err(reason) = appended {
            return Err(self.conn_error(ErrorCode::EnhanceYourCalm, reason));
        }
        if end {
            return self.end_block();
        }
        Ok(())
    }

    /// The block is complete: decode it (always, so the HPACK table stays in step with the
    /// peer's, §4.3), then act on it.
    fn end_block(&mut self) -> Step {
        let Some(partial) = self.block.take() else {
            return Ok(());
        };
        let (id, end_stream) = (partial.stream_id, partial.end_stream);
        let mut spans = std::mem::take(&mut self.spans_buf);
        let mut bytes = BytesMut::new();
        let limit = self.config.max_header_list_size as usize;
        let block = partial.fragments.into_block();
        let decoded = (self.settings).decode_block(&block, limit, &mut bytes, &mut spans);
        let step = match decoded {
            Err(reason) => Err(self.conn_error(ErrorCode::CompressionError, reason)),
            // §6.5.2: over our SETTINGS_MAX_HEADER_LIST_SIZE; the decoder is still in step.
            Ok(false) => {
                if self.streams.contains_key(&id) {
                    self.stream_error(id, ErrorCode::ProtocolError);
                }
                Ok(())
            }
            Ok(true) => {
                self.on_block(id, bytes, &spans, end_stream);
                Ok(())
            }
        };
        spans.clear();
        self.spans_buf = spans;
        step
    }

    /// A decoded block on stream `id`: a head or trailers if the stream is open, else
    /// nothing (it was reset).
    fn on_block(&mut self, id: StreamId, bytes: BytesMut, spans: &[FieldSpan], end: bool) {
        let Some(stream) = self.streams.get(&id) else {
            return;
        };
        match stream.recv {
            RecvState::AwaitingHead => self.on_head(id, bytes, spans, end),
            RecvState::Body => self.on_trailers(id, bytes, spans, end),
            // §5.1 half-closed (remote).
            RecvState::Done => self.stream_error(id, ErrorCode::StreamClosed),
        }
    }

    /// An interim or final response head.
    fn on_head(&mut self, id: StreamId, bytes: BytesMut, spans: &[FieldSpan], end: bool) {
        let Some(head) = parse_head(bytes, spans) else {
            return self.stream_error(id, ErrorCode::ProtocolError);
        };
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        match head.status {
            // §8.6: a 101 is not for HTTP/2; §8.1.1: an interim head never ends a stream.
            101 => return self.stream_error(id, ErrorCode::ProtocolError),
            100..=199 if end => return self.stream_error(id, ErrorCode::ProtocolError),
            100..=199 => {
                stream.interim += 1;
                if stream.interim <= INTERIM_HEADS_MAX {
                    self.push_event(ClientEvent::Interim {
                        stream_id: id,
                        status: head.status,
                        fields: head.fields,
                    });
                }
                return;
            }
            // §8.1.1: these have no content whatever content-length says.
            204 | 304 => stream.length.expected = None,
            _ => stream.length.expected = head.content_length,
        }
        // A response that ends here passes with any content-length: it may answer HEAD.
        stream.recv = match end {
            true => RecvState::Done,
            false => RecvState::Body,
        };
        self.push_event(ClientEvent::Response {
            stream_id: id,
            status: head.status,
            fields: head.fields,
            content_length: head.content_length,
            end_stream: end,
        });
        self.close_if_done(id);
    }

    /// §8.1: trailers end the stream, carry no pseudo-field, and complete the body that
    /// content-length announced.
    fn on_trailers(&mut self, id: StreamId, bytes: BytesMut, spans: &[FieldSpan], end: bool) {
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        let length_wrong = stream.length.ends_wrong();
        let fields = match parse_trailers(bytes, spans) {
            Ok(fields) if end && !length_wrong => fields,
            _ => return self.stream_error(id, ErrorCode::ProtocolError),
        };
        stream.recv = RecvState::Done;
        self.push_event(ClientEvent::Trailers {
            stream_id: id,
            fields,
        });
        self.close_if_done(id);
    }
}

/// §8.3.2: exactly one `:status` of three digits, first; then regular fields as §8.2 wants
/// them (checked as trailers are: a pseudo-field among them is refused there). `None`:
/// malformed.
fn parse_head(bytes: BytesMut, spans: &[FieldSpan]) -> Option<Head> {
    let (first, rest) = spans.split_first()?;
    if first.name(&bytes) != b":status" {
        return None;
    }
    let status = parse_status(first.value(&bytes))?;
    let fields = parse_trailers(bytes, rest).ok()?;
    let content_length = content_length(&fields)?;
    Some(Head {
        status,
        fields,
        content_length,
    })
}

/// Three digits, 100..=999 (RFC 9110 §15).
fn parse_status(value: &[u8]) -> Option<u16> {
    let [a, b, c] = *value else {
        return None;
    };
    if !(b'1'..=b'9').contains(&a) || !b.is_ascii_digit() || !c.is_ascii_digit() {
        return None;
    }
    Some(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
}

/// §8.1.1, RFC 9110 §8.6: digits only; several values must agree. `Some(None)`: absent;
/// `None`: invalid.
fn content_length(fields: &HeaderFields) -> Option<Option<u64>> {
    let mut length = None;
    for value in fields.get_all("content-length") {
        let parsed = parse_decimal(value)?;
        if length.is_some_and(|old| old != parsed) {
            return None;
        }
        length = Some(parsed);
    }
    Some(length)
}
