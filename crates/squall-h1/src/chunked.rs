//! The chunked transfer coding of request bodies (RFC 9112 §7.1), decoded incrementally.
//!
//! ```text
//! chunked-body = *chunk last-chunk trailer-section CRLF
//! chunk        = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//! chunk-ext    = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
//! ```
//!
//! Framing bytes (size lines, the CRLF after data) go through a byte-at-a-time state machine:
//! they are a few bytes per chunk, and a per-byte machine gives the same answer however the
//! input is split. Chunk data is never copied: it is cut from the receive buffer as it arrives,
//! without waiting for the whole chunk, so a large chunk streams through in buffer-sized
//! pieces.
//!
//! Since differing chunk parsers are how TE.TE smuggling works, the grammar is applied
//! strictly: a size is one or more hex digits and nothing else (`0x5`, `-1`, ` 5` are 400s), a
//! size over 64 bits is a 400, extensions must be `;token[=token|quoted-string]`, every line
//! ends in CRLF, and chunk data must be followed by exactly CRLF. Extensions are discarded
//! (RFC 9112 §7.1.1 lets a recipient ignore them) but their length is capped.

use bytes::{Buf, Bytes, BytesMut};
use http::HeaderMap;

use crate::fields::is_tchar;
use crate::head::parse_trailers;
use crate::scan::SectionScan;
use crate::{CHUNK_LINE_BYTES_MAX, ErrorKind, Limits};

/// What a chunked body yields.
#[derive(Debug)]
pub(crate) enum ChunkEvent {
    Data(Bytes),
    End(Option<HeaderMap>),
}

/// Where the decoder is within the chunked body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// In chunk-size; `digits` says whether a hex digit was seen.
    Size { digits: bool },
    /// After the size or an extension; `ws` when BWS was seen, which must lead to ";".
    ExtEnd { ws: bool },
    /// After ";", skipping BWS before the extension name.
    ExtBeforeName,
    /// In an extension name.
    ExtName,
    /// BWS after an extension name: "=" or ";" must follow.
    ExtAfterName,
    /// After "=", skipping BWS before the value.
    ExtBeforeValue,
    /// In a token value.
    ExtToken,
    /// In a quoted-string value.
    ExtQuoted,
    /// After a backslash in a quoted-string.
    ExtQuotedPair,
    /// After the CR ending the size line.
    LineLf,
    /// In chunk data; `remaining` bytes of it to go.
    Data,
    /// After chunk data: CR must follow.
    DataCr,
    /// After chunk data and CR: LF must follow.
    DataLf,
    /// After the last chunk: the trailer section.
    Trailers,
    /// End has been returned.
    Done,
}

/// Decoder state for one chunked body.
#[derive(Debug, Clone)]
pub(crate) struct ChunkedDecoder {
    step: Step,
    /// The size being read, then the size of the chunk being delivered.
    size: u64,
    /// Bytes of the current size line so far.
    line_bytes: usize,
    /// Data bytes of the current chunk still to deliver.
    remaining: u64,
    /// Sum of all chunk sizes read so far, bounded by `body_bytes_max`.
    body_bytes: u64,
    /// Bytes the trailer section may have: what the head left of `header_bytes_max`.
    trailer_budget: usize,
    trailers: SectionScan,
}

impl ChunkedDecoder {
    pub fn new(trailer_budget: usize) -> Self {
        Self {
            step: Step::Size { digits: false },
            size: 0,
            line_bytes: 0,
            remaining: 0,
            body_bytes: 0,
            trailer_budget,
            trailers: SectionScan::default(),
        }
    }

    /// Consumes framing from `buf` and returns the next piece of data or the end; None when
    /// more bytes are needed.
    pub fn decode(
        &mut self,
        buf: &mut BytesMut,
        limits: &Limits,
    ) -> Result<Option<ChunkEvent>, ErrorKind> {
        loop {
            match self.step {
                Step::Data => return Ok(self.data(buf)),
                Step::Trailers => return self.decode_trailers(buf, limits),
                Step::Done => return Ok(None),
                _ => {
                    let consumed = self.framing(buf, limits)?;
                    buf.advance(consumed);
                    if !matches!(self.step, Step::Data | Step::Trailers) {
                        debug_assert!(
                            buf.is_empty(),
                            "framing stops early only on a change of step"
                        );
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// Cuts as much of the current chunk's data as is buffered (zero-copy).
    fn data(&mut self, buf: &mut BytesMut) -> Option<ChunkEvent> {
        if buf.is_empty() {
            return None;
        }
        let n = usize::try_from(self.remaining).map_or(buf.len(), |r| r.min(buf.len()));
        let data = buf.split_to(n).freeze();
        // n <= remaining, so this cannot underflow.
        self.remaining -= n as u64;
        if self.remaining == 0 {
            self.step = Step::DataCr;
        }
        Some(ChunkEvent::Data(data))
    }

    fn decode_trailers(
        &mut self,
        buf: &mut BytesMut,
        limits: &Limits,
    ) -> Result<Option<ChunkEvent>, ErrorKind> {
        let Some(len) = self.trailers.scan_trailers(buf, self.trailer_budget)? else {
            return Ok(None);
        };
        self.step = Step::Done;
        if len == 2 {
            // Just the final CRLF: no trailer fields, nothing to keep.
            buf.advance(len);
            return Ok(Some(ChunkEvent::End(None)));
        }
        let section = buf.split_to(len).freeze();
        let trailers = parse_trailers(&section, limits)?;
        Ok(Some(ChunkEvent::End(Some(trailers))))
    }

    /// Runs framing bytes through the state machine; stops after the byte that leads into
    /// data or trailers. Returns how many bytes were consumed.
    fn framing(&mut self, bytes: &[u8], limits: &Limits) -> Result<usize, ErrorKind> {
        for (i, &b) in bytes.iter().enumerate() {
            self.step_byte(b, limits)?;
            if matches!(self.step, Step::Data | Step::Trailers) {
                return Ok(i + 1);
            }
        }
        Ok(bytes.len())
    }

    fn step_byte(&mut self, b: u8, limits: &Limits) -> Result<(), ErrorKind> {
        match self.step {
            Step::DataCr => {
                self.step = match b {
                    b'\r' => Step::DataLf,
                    b'\n' => return Err(ErrorKind::BareLf),
                    _ => return Err(ErrorKind::BadChunkFraming),
                };
            }
            Step::DataLf => {
                if b != b'\n' {
                    return Err(ErrorKind::BadChunkFraming);
                }
                self.step = Step::Size { digits: false };
            }
            Step::LineLf => {
                if b != b'\n' {
                    return Err(ErrorKind::BareCr);
                }
                self.end_size_line();
            }
            _ => {
                self.line_bytes += 1;
                if self.line_bytes > CHUNK_LINE_BYTES_MAX {
                    return Err(ErrorKind::ChunkLineTooLong);
                }
                if b == b'\n' {
                    return Err(ErrorKind::BareLf);
                }
                self.step = self.size_line_byte(b, limits)?;
            }
        }
        Ok(())
    }

    /// The next step after byte `b` of a size line (before its CR).
    fn size_line_byte(&mut self, b: u8, limits: &Limits) -> Result<Step, ErrorKind> {
        let is_ws = b == b' ' || b == b'\t';
        let next = match self.step {
            Step::Size { digits } => {
                if let Some(digit) = (b as char).to_digit(16) {
                    self.size = self
                        .size
                        .checked_mul(16)
                        .and_then(|s| s.checked_add(u64::from(digit)))
                        .ok_or(ErrorKind::BadChunkSize)?;
                    return Ok(Step::Size { digits: true });
                }
                if !digits || !(is_ws || b == b';' || b == b'\r') {
                    return Err(ErrorKind::BadChunkSize);
                }
                self.end_size(limits)?;
                return ext_end(b, false);
            }
            Step::ExtEnd { ws } => return ext_end(b, ws),
            Step::ExtBeforeName if is_ws => Some(Step::ExtBeforeName),
            Step::ExtBeforeName | Step::ExtName if is_tchar(b) => Some(Step::ExtName),
            Step::ExtName | Step::ExtAfterName if is_ws => Some(Step::ExtAfterName),
            Step::ExtName | Step::ExtAfterName if b == b'=' => Some(Step::ExtBeforeValue),
            Step::ExtName | Step::ExtAfterName if b == b';' => Some(Step::ExtBeforeName),
            Step::ExtName if b == b'\r' => Some(Step::LineLf),
            Step::ExtBeforeValue if is_ws => Some(Step::ExtBeforeValue),
            Step::ExtBeforeValue if b == b'"' => Some(Step::ExtQuoted),
            Step::ExtBeforeValue | Step::ExtToken if is_tchar(b) => Some(Step::ExtToken),
            Step::ExtToken => return ext_end(b, false),
            Step::ExtQuoted if b == b'"' => Some(Step::ExtEnd { ws: false }),
            Step::ExtQuoted if b == b'\\' => Some(Step::ExtQuotedPair),
            // qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text (RFC 9110 §5.6.4);
            // the backslash (%x5C) was taken by the arm above.
            Step::ExtQuoted
                if b == b'\t'
                    || b == b' '
                    || b == 0x21
                    || (0x23..=0x7e).contains(&b)
                    || b >= 0x80 =>
            {
                Some(Step::ExtQuoted)
            }
            // quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text )
            Step::ExtQuotedPair
                if b == b'\t' || b == b' ' || (0x21..=0x7e).contains(&b) || b >= 0x80 =>
            {
                Some(Step::ExtQuoted)
            }
            _ => None,
        };
        next.ok_or(ErrorKind::BadChunkExtension)
    }

    /// The size has been read: charge it against the body limit (RFC 9112 §7.1 leaves the
    /// total unbounded; we do not).
    fn end_size(&mut self, limits: &Limits) -> Result<(), ErrorKind> {
        let total = self
            .body_bytes
            .checked_add(self.size)
            .ok_or(ErrorKind::BodyTooLarge)?;
        if total > limits.body_bytes_max {
            return Err(ErrorKind::BodyTooLarge);
        }
        self.body_bytes = total;
        Ok(())
    }

    /// The size line's CRLF is in: data follows, or trailers after the last chunk.
    fn end_size_line(&mut self) {
        self.step = if self.size == 0 {
            Step::Trailers
        } else {
            Step::Data
        };
        self.remaining = self.size;
        self.size = 0;
        self.line_bytes = 0;
    }

    pub fn check_invariants(&self, limits: &Limits) {
        assert!(self.body_bytes <= limits.body_bytes_max);
        assert!(self.line_bytes <= CHUNK_LINE_BYTES_MAX);
        assert_eq!(self.step == Step::Data, self.remaining > 0);
        self.trailers.check_invariants();
    }
}

/// After a size, a token value or a closing quote (`ws`: and BWS): ";" starts an extension,
/// CR ends the line, and BWS may only lead to ";" (the grammar has no BWS before CRLF).
fn ext_end(b: u8, ws: bool) -> Result<Step, ErrorKind> {
    match b {
        b';' => Ok(Step::ExtBeforeName),
        b'\r' if !ws => Ok(Step::LineLf),
        b' ' | b'\t' => Ok(Step::ExtEnd { ws: true }),
        _ => Err(ErrorKind::BadChunkExtension),
    }
}
