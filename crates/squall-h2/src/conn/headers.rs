//! Header blocks from the peer: HEADERS and CONTINUATION joined (RFC 9113 §6.2, §6.10),
//! decoded with HPACK, then opening a stream with a request or ending one with trailers.

use bytes::{Bytes, BytesMut};
use squall_hpack::FieldSpan;

use super::priority::PriorityParams;
use super::recv::Step;
use super::send::NO_FIXED;
use super::stream::{Closed, Stream};
use super::types::FloodKind;
use super::{Connection, Lookup, Notify};
use crate::common::block::BlockFragments;
use crate::common::send::SendState;
use crate::decode::WholeBlock;
use crate::error::ErrorCode;
use crate::fields::HeaderFields;
use crate::frame::{Priority, StreamId};
use crate::head::{self, HeadError};

/// A header block whose END_HEADERS has not arrived yet.
#[derive(Debug)]
pub(crate) struct PartialBlock {
    pub start: BlockStart,
    /// The fragments so far.
    pub fragments: BlockFragments,
}

/// What the HEADERS frame that began a block said of it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockStart {
    pub stream_id: StreamId,
    end_stream: bool,
    /// §5.3.1: the HEADERS made the stream depend on itself.
    self_dependent: bool,
    /// The block opens a new stream (else: trailers, or a block to decode and ignore).
    new_stream: bool,
    /// A PRIORITY_UPDATE that arrived before the stream opened (RFC 9218 §7.1).
    priority_update: Option<PriorityParams>,
}

/// What a complete header block that opens a stream carried besides its fields.
#[derive(Debug, Clone, Copy)]
struct Opening {
    end_stream: bool,
    self_dependent: bool,
    priority_update: Option<PriorityParams>,
}

/// The request's `priority` field (RFC 9218 §5), `None` when absent or not a dictionary.
fn request_priority(headers: &HeaderFields) -> Option<PriorityParams> {
    let mut lines = headers.get_all("priority").peekable();
    lines.peek()?;
    PriorityParams::parse(lines)
}

/// A span list grown past this many entries by one large block is not kept for the next.
const FIELDS_KEPT_MAX: usize = 64;

/// A block is decoded into the connection's head chunk when at least the previous block's
/// size (most requests on a connection are alike), within these bounds, is left in it; it
/// grows if that is short.
const HEAD_BYTES_MIN: usize = 256;
const HEAD_BYTES_HINT_MAX: usize = 16 * 1024;
/// What the head chunk is renewed with: the decoded heads of many small requests. Each
/// request's bytes are split off it and shared, so a chunk is one allocation for all of
/// them, reclaimed in place when every request it held is gone.
const HEAD_CHUNK_BYTES: usize = 2048;

impl Connection {
    /// §6.2. Which stream states accept a header block is decided here, before the block
    /// is buffered; connection errors need not wait for the rest of it.
    pub(super) fn on_headers(
        &mut self,
        id: StreamId,
        block: Bytes,
        end_stream: bool,
        end_headers: bool,
        priority: Option<Priority>,
    ) -> Step {
        let start = self.begin_block(id, block.is_empty(), end_stream, priority)?;
        if end_headers {
            return self.finish_block(start, &block);
        }
        let fragments = BlockFragments::new(block);
        self.block = Some(PartialBlock { start, fragments });
        Ok(())
    }

    /// A HEADERS frame with its whole block, read where it lies in the input.
    pub(super) fn on_whole_block(&mut self, whole: WholeBlock, block: &[u8]) -> Step {
        let (id, end_stream) = (whole.stream_id, whole.end_stream);
        let start = self.begin_block(id, block.is_empty(), end_stream, whole.priority)?;
        self.finish_block(start, block)
    }

    fn begin_block(
        &mut self,
        id: StreamId,
        empty: bool,
        end_stream: bool,
        priority: Option<Priority>,
    ) -> Result<BlockStart, super::ConnError> {
        if empty {
            self.count(FloodKind::EmptyFrames)?;
        }
        let new_stream = id % 2 == 1 && id > self.highest_stream_id;
        let mut priority_update = None;
        if new_stream {
            self.highest_stream_id = id;
            priority_update = self.take_pending_priority(id);
        } else {
            self.check_block_stream(id)?;
        }
        Ok(BlockStart {
            stream_id: id,
            end_stream,
            self_dependent: priority.is_some_and(|p| p.dependency == id),
            new_stream,
            priority_update,
        })
    }

    /// A HEADERS on a stream that is not new: trailers on an open stream, or late on one
    /// we reset (decoded, then ignored); else a connection error.
    fn check_block_stream(&mut self, id: StreamId) -> Step {
        let (code, reason) = match self.lookup(id) {
            Lookup::Active | Lookup::Closed(Closed::ResetByUs) => return Ok(()),
            // §5.1.1: client streams are odd and each new one is higher than the last.
            Lookup::Idle | Lookup::Closed(Closed::Forgotten) => (
                ErrorCode::ProtocolError,
                "HEADERS on an even or decreasing stream id",
            ),
            Lookup::Closed(Closed::Normally | Closed::ResetByPeer) => {
                (ErrorCode::StreamClosed, "HEADERS on a closed stream")
            }
        };
        Err(self.fail(code, reason, None))
    }

    /// §6.10.
    pub(super) fn on_continuation(&mut self, id: StreamId, fragment: Bytes, end: bool) -> Step {
        let Some(block) = &self.block else {
            let reason = "CONTINUATION without a header block";
            return Err(self.fail(ErrorCode::ProtocolError, reason, None));
        };
        debug_assert_eq!(block.start.stream_id, id, "on_frame checks the stream");
        if fragment.is_empty() {
            self.count(FloodKind::EmptyFrames)?;
        }
        let frames_max = self.config.max_continuation_frames;
        let bytes_max = self.config.header_block_bytes_max();
        if let Some(block) = &mut self.block
            && let Err(reason) = (block.fragments).append_within(&fragment, frames_max, bytes_max)
        {
            return Err(self.flood(FloodKind::Continuation, reason));
        }
        if end {
            return self.end_block();
        }
        Ok(())
    }

    /// The block is complete: decode it (always, so the HPACK table stays in step with
    /// the peer's, §4.3), then act on it.
    fn end_block(&mut self) -> Step {
        let Some(partial) = self.block.take() else {
            return Ok(());
        };
        self.finish_block(partial.start, &partial.fragments.into_block())
    }

    /// Decodes a whole block, and opens its stream or ends it with trailers.
    fn finish_block(&mut self, start: BlockStart, block: &[u8]) -> Step {
        let (id, end_stream) = (start.stream_id, start.end_stream);
        let (new_stream, self_dependent) = (start.new_stream, start.self_dependent);
        let priority_update = start.priority_update;
        // The span list is a scratch vector kept across blocks: one allocation per
        // connection, not per request. The bytes go with the request.
        let mut fields = std::mem::take(&mut self.spans_buf);
        let mut chunk = std::mem::take(&mut self.head_chunk);
        if chunk.capacity() < self.head_bytes_hint {
            chunk.reserve(HEAD_CHUNK_BYTES.max(self.head_bytes_hint));
        }
        let complete = self.decode_block(block, &mut chunk, &mut fields);
        let bytes = chunk.split();
        self.head_chunk = chunk;
        let complete = complete?;
        self.head_bytes_hint = bytes.len().clamp(HEAD_BYTES_MIN, HEAD_BYTES_HINT_MAX);
        let decoded = complete.then_some((bytes, fields.as_slice()));
        let step = if new_stream {
            let opening = Opening {
                end_stream,
                self_dependent,
                priority_update,
            };
            self.open_stream(id, decoded, opening)
        } else {
            match self.streams.get(&id) {
                Some(stream) if stream.recv_open => self.on_trailers(id, decoded, end_stream),
                // §5.1 half-closed (remote).
                Some(_) => self.stream_error(id, ErrorCode::StreamClosed),
                // Reset by us: §5.1 says to ignore it.
                None => Ok(()),
            }
        };
        fields.clear();
        if fields.capacity() <= FIELDS_KEPT_MAX {
            self.spans_buf = fields;
        }
        step
    }

    /// Decodes the block's fields into `bytes` and `fields`; `false` when the list is over
    /// our SETTINGS_MAX_HEADER_LIST_SIZE (the decoder is still in step); other HPACK errors
    /// end the connection.
    fn decode_block(
        &mut self,
        block: &[u8],
        bytes: &mut BytesMut,
        fields: &mut Vec<FieldSpan>,
    ) -> Result<bool, super::ConnError> {
        let limit = self.config.max_header_list_size as usize;
        (self.settings.decode_block(block, limit, bytes, fields))
            .map_err(|reason| self.fail(ErrorCode::CompressionError, reason, None))
    }

    /// The PRIORITY_UPDATE kept for a stream that opens now. Ids below it can no longer
    /// open (§5.1.1): what was kept for them goes.
    fn take_pending_priority(&mut self, id: StreamId) -> Option<PriorityParams> {
        if self.pending_priorities.is_empty() {
            return None;
        }
        let mut later = self.pending_priorities.split_off(&id);
        let priority = later.remove(&id);
        self.pending_priorities = later;
        priority
    }

    fn open_stream(
        &mut self,
        id: StreamId,
        fields: Option<(BytesMut, &[FieldSpan])>,
        opening: Opening,
    ) -> Step {
        let Opening {
            end_stream,
            self_dependent,
            priority_update,
        } = opening;
        let full = self.streams.len() >= self.config.max_concurrent_streams as usize;
        if self.goaway_sent || self.peer_goaway || full {
            return self.refuse(id);
        }
        self.last_processed = id;
        self.stats.streams_opened += 1;
        if self_dependent {
            return self.stream_error(id, ErrorCode::ProtocolError);
        }
        // §8.2.2 allows a 431 for a list over the limit (the decoder kept its table).
        let Some((bytes, fields)) = fields else {
            return self.answer(id, 431, end_stream);
        };
        match head::parse_request(bytes, fields, end_stream, self.limits) {
            Ok(request) => {
                let recv_window = self.settings.local_initial_window();
                let send_window = i64::from(self.settings.peer_initial_window);
                let mut stream = Stream::new(!end_stream, recv_window, send_window);
                stream.length.expected = request.content_length;
                stream.tunnel = request.protocol.is_some();
                // RFC 9218 §7.1: a PRIORITY_UPDATE is newer than the request's field.
                stream.priority = (priority_update)
                    .or_else(|| request_priority(&request.headers))
                    .unwrap_or(PriorityParams::UNSIGNALLED);
                self.streams.insert(id, stream);
                self.push_request(id, request);
                Ok(())
            }
            Err(HeadError::Malformed(_)) => self.malformed(id),
            Err(HeadError::Answer(status)) => self.answer(id, status, end_stream),
        }
    }

    /// REFUSED_STREAM (§8.7): not processed, safe for the client to retry elsewhere.
    fn refuse(&mut self, id: StreamId) -> Step {
        self.stats.streams_refused += 1;
        self.send_rst(id, ErrorCode::RefusedStream);
        self.closed.insert(id, Closed::ResetByUs);
        self.count(FloodKind::RapidReset)
    }

    /// A request the connection answers itself, before the application ever sees it.
    /// If the client is still sending, RST_STREAM(NO_ERROR) asks it to stop (§8.1).
    fn answer(&mut self, id: StreamId, status: u16, end_stream: bool) -> Step {
        self.count_answer(status);
        self.encode_head(id, status, NO_FIXED, [], true);
        if end_stream {
            self.closed.insert(id, Closed::Normally);
        } else {
            self.send_rst(id, ErrorCode::NoError);
            self.closed.insert(id, Closed::ResetByUs);
        }
        Ok(())
    }

    /// §8.1: trailers end the stream, carry no pseudo-header field, and complete the body
    /// that content-length announced.
    fn on_trailers(
        &mut self,
        id: StreamId,
        fields: Option<(BytesMut, &[FieldSpan])>,
        end: bool,
    ) -> Step {
        if !end {
            return self.malformed(id);
        }
        let Some((bytes, fields)) = fields else {
            return self.reject_started(id, 431);
        };
        let headers = match head::parse_trailers(bytes, fields) {
            Ok(headers) => headers.to_header_map(),
            Err(HeadError::Malformed(_)) => return self.malformed(id),
            Err(HeadError::Answer(status)) => return self.reject_started(id, status),
        };
        let Some(stream) = self.streams.get_mut(&id) else {
            return Ok(());
        };
        if stream.length.ends_wrong() {
            return self.malformed(id);
        }
        stream.recv_open = false;
        self.push_trailers(id, headers);
        self.close_if_done(id);
        Ok(())
    }

    /// A request the application has (or has queued) that the connection must stop: a
    /// body or trailers over the limits. Answered with `status` if no response has begun,
    /// else reset with CANCEL; the application gets [`super::Event::Reset`] either way.
    pub(super) fn reject_started(&mut self, id: StreamId, status: u16) -> Step {
        let Some(stream) = self.streams.get(&id) else {
            return Ok(());
        };
        if stream.send.state != SendState::Idle {
            self.reset(id, ErrorCode::Cancel);
            return Ok(());
        }
        self.count_answer(status);
        self.encode_head(id, status, NO_FIXED, [], true);
        self.send_rst(id, ErrorCode::NoError);
        self.remove_stream(id, Closed::ResetByUs, Notify::App(ErrorCode::NoError));
        Ok(())
    }

    fn count_answer(&mut self, status: u16) {
        let counter = match status {
            413 => &mut self.stats.answered_413,
            414 => &mut self.stats.answered_414,
            431 => &mut self.stats.answered_431,
            _ => &mut self.stats.answered_501,
        };
        *counter += 1;
    }
}
