//! Responses from the application, and the output to the driver.
//!
//! A response is a HEADERS frame (QPACK-encoded by our encoder), DATA frames and optional
//! trailers, queued on its request stream as `Bytes` chunks: a DATA frame's header is a chunk
//! of its own and the body is the application's `Bytes`, never copied. HEADERS frames and
//! DATA headers are cut from one per-connection arena, so an answer allocates nothing of its
//! own for them, and QUIC's references to them cost a count, not a copy. Our unidirectional
//! streams have queues of their own. [`Connection::poll_output`] offers the chunks to the
//! driver, which writes what QUIC takes and leaves the rest queued.

use std::borrow::Cow;

use bytes::{Bytes, BytesMut};
use squall_h2::head::{response_fields, status_digits};

use super::Connection;
use super::stream::{Send, Stream};
use super::types::{OutStream, StreamClosed, StreamOut, Uni};
use crate::encode::{encode_data_header, encode_headers};
use crate::error::ErrorCode;

impl Connection {
    /// Sends the response head: `status` (100..=999) and regular fields. Names are sent
    /// lowercase (RFC 9114 §4.2; uppercase letters are lowered); connection-specific fields
    /// and pseudo-header names are dropped. 1xx heads may come first and never end the
    /// stream.
    pub fn send_headers<'a>(
        &mut self,
        stream_id: u64,
        status: u16,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        end_stream: bool,
    ) -> Result<(), StreamClosed> {
        self.sending_stream(stream_id, Send::Idle)?;
        let informational = (100..200).contains(&status);
        let frame = self.head_frame(stream_id, Some(status), fields);
        let stream = self.sending_stream(stream_id, Send::Idle)?;
        let len = frame.len();
        stream.out.push(frame);
        if !informational {
            stream.send = Send::Open;
            if end_stream {
                stream.send = Send::Ended;
                stream.out.finish();
            }
        }
        self.queued_total += len;
        self.flush_encoder_stream();
        Ok(())
    }

    /// Queues response body bytes as one DATA frame: its header, then `data` itself.
    pub fn send_data(
        &mut self,
        stream_id: u64,
        data: Bytes,
        end_stream: bool,
    ) -> Result<(), StreamClosed> {
        self.sending_stream(stream_id, Send::Open)?;
        let header = match data.is_empty() {
            true => Bytes::new(),
            false => self.piece(DATA_HEADER_BYTES_MAX, |arena| {
                encode_data_header(data.len() as u64, arena);
            }),
        };
        let stream = self.sending_stream(stream_id, Send::Open)?;
        let queued = header.len() + data.len();
        stream.out.push(header);
        stream.out.push(data);
        if end_stream {
            stream.send = Send::Ended;
            stream.out.finish();
        }
        self.queued_total += queued;
        Ok(())
    }

    /// Sends trailers, which end the stream, after the DATA queued so far.
    pub fn send_trailers<'a>(
        &mut self,
        stream_id: u64,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Result<(), StreamClosed> {
        self.sending_stream(stream_id, Send::Open)?;
        let frame = self.head_frame(stream_id, None, fields);
        let stream = self.sending_stream(stream_id, Send::Open)?;
        let len = frame.len();
        stream.out.push(frame);
        stream.send = Send::Ended;
        stream.out.finish();
        self.queued_total += len;
        self.flush_encoder_stream();
        Ok(())
    }

    /// Resets a request stream at the application's request: our sending part
    /// ([`super::Command::ResetStream`]) unless all of it was written, and the peer's
    /// ([`super::Command::StopSending`]) if still arriving, both with `code`. Its queued
    /// output and undelivered events go. Unknown streams are left alone.
    pub fn reset_stream(&mut self, stream_id: u64, code: ErrorCode) {
        if self.error.is_some() || !self.streams.contains_key(&stream_id) {
            return;
        }
        self.stats.resets_sent += 1;
        self.end_exchange(stream_id, Some(code), Some(code), None);
        self.flush_decoder_stream();
    }

    /// Bytes queued on a request stream and not yet taken by the driver (frame headers
    /// included).
    pub fn queued_data(&self, stream_id: u64) -> usize {
        self.streams.get(&stream_id).map_or(0, |s| s.out.bytes())
    }

    /// Bytes queued on every request stream and not yet taken by the driver: what the
    /// connection holds for a client that does not read (or whose flow control is closed).
    pub fn queued_data_total(&self) -> usize {
        self.queued_total
    }

    /// Offers queued output to `write`, stream by stream: our unidirectional streams first
    /// (so QPACK instructions lead the sections that use them), then request streams round
    /// robin. For each stream, chunks in order until `write` takes one only in part (QUIC
    /// flow control: the stream is blocked, its rest waits for the next call) or the stream
    /// has nothing left.
    ///
    /// `write` returns how many bytes of [`StreamOut::data`] it took. When it takes all of
    /// them and [`StreamOut::fin`] is set, it has finished the QUIC stream too.
    pub fn poll_output(&mut self, mut write: impl FnMut(StreamOut<'_>) -> usize) {
        if self.error.is_some() {
            return;
        }
        for uni in Uni::ALL {
            self.uni_out[uni.index()].write(OutStream::Uni(uni), &mut write);
        }
        let cursor = self.cursor;
        // The streams with output, in turn from the cursor, in a list kept from call to call
        // (a call per flush: no allocation each time).
        let mut ids = std::mem::take(&mut self.writable);
        ids.extend(
            (self.streams.range(cursor..))
                .chain(self.streams.range(..cursor))
                .filter(|(_, s)| !s.out.is_empty())
                .map(|(&id, _)| id),
        );
        if let Some(&first) = ids.first() {
            self.cursor = first + 4;
        }
        for id in ids.drain(..) {
            let Some(stream) = self.streams.get_mut(&id) else {
                continue;
            };
            let wrote = stream.out.write(OutStream::Request(id), &mut write);
            self.queued_total -= wrote.bytes;
            if wrote.fin {
                stream.send = Send::Finished;
                self.close_if_done(id);
            }
        }
        self.writable = ids;
    }

    /// Whether [`Connection::poll_output`] has something to offer.
    pub fn has_output(&self) -> bool {
        self.uni_out.iter().any(|q| !q.is_empty())
            || self.streams.values().any(|s| !s.out.is_empty())
    }

    /// The stream, if the application may send on it in state `expected`.
    fn sending_stream(&mut self, id: u64, expected: Send) -> Result<&mut Stream, StreamClosed> {
        if self.error.is_some() {
            return Err(StreamClosed);
        }
        match self.streams.get_mut(&id) {
            Some(s) if s.app == super::stream::App::Delivered && s.send == expected => Ok(s),
            _ => Err(StreamClosed),
        }
    }

    /// A HEADERS frame carrying `:status` (when given) and the regular `fields`, encoded by
    /// our QPACK encoder for stream `id`.
    pub(super) fn head_frame<'a>(
        &mut self,
        id: u64,
        status: Option<u16>,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Bytes {
        let status = status.map(|status| (Cow::Borrowed(&b":status"[..]), status_digits(status)));
        let lines = (status.into_iter())
            .chain(response_fields(fields).map(|(name, value)| (lowercase(name), value)))
            .map(|(name, value)| (name, value, false));
        let mut block = std::mem::take(&mut self.block);
        block.clear();
        self.encoder.encode_section(id, lines, &mut block);
        let frame = self.piece(block.len() + FRAME_HEADER_BYTES_MAX, |arena| {
            encode_headers(&block, arena);
        });
        self.block = block;
        frame
    }

    /// `write`'s output (at most `len` bytes) as a `Bytes` of its own, cut from the
    /// connection's arena, which takes a new allocation only when the one it has is used up.
    fn piece(&mut self, len: usize, write: impl FnOnce(&mut BytesMut)) -> Bytes {
        if self.arena.capacity() < len {
            self.arena = BytesMut::with_capacity(len.max(ARENA_BYTES));
        }
        write(&mut self.arena);
        debug_assert!(self.arena.len() <= len, "a piece longer than announced");
        self.arena.split().freeze()
    }

    /// Moves our encoder's instructions to our QPACK encoder stream.
    pub(super) fn flush_encoder_stream(&mut self) {
        if self.error.is_none()
            && let Some(bytes) = self.encoder.take_encoder_stream()
        {
            self.uni_out[Uni::QpackEncoder.index()].push(bytes);
        }
    }

    /// Moves our decoder's acknowledgments to our QPACK decoder stream.
    pub(super) fn flush_decoder_stream(&mut self) {
        if self.error.is_none()
            && let Some(bytes) = self.decoder.take_decoder_stream()
        {
            self.uni_out[Uni::QpackDecoder.index()].push(bytes);
        }
    }
}

/// The allocation response heads and DATA frame headers are cut from: enough for dozens of
/// answers, small beside what an idle connection holds.
const ARENA_BYTES: usize = 4096;

/// The most a frame's type and length take (two QUIC variable-length integers).
const FRAME_HEADER_BYTES_MAX: usize = 16;

/// A DATA frame's header: its type and length.
const DATA_HEADER_BYTES_MAX: usize = FRAME_HEADER_BYTES_MAX;

/// The name lowercase, copied only if it was not.
fn lowercase(name: &[u8]) -> Cow<'_, [u8]> {
    match name.iter().any(u8::is_ascii_uppercase) {
        true => Cow::Owned(name.to_ascii_lowercase()),
        false => Cow::Borrowed(name),
    }
}
