//! Response compression on the proxy path: gzip, brotli and zstd, as a sans-IO [`Compressor`]
//! the exchange feeds body pieces to, and the decision of whether and how to compress
//! ([`negotiate`]).
//!
//! Why in the exchange and streamed: a proxied response arrives piece by piece and may never
//! end on its own (server-sent events); compressing it whole would hold it back and buffer it
//! all. The compressor takes each decoded piece and hands back what the coding has ready, and
//! the exchange asks for a flush (the coding's sync flush: the bytes so far become decodable,
//! the stream goes on) whenever it has decoded everything the origin sent so far, so a pause
//! in the origin's output is a pause in the client's, never a stall. What the compressor holds
//! is bounded by the coding's window, set small for streaming (see [`Levels`]); what it hands
//! out counts against the client's room like any body bytes, so backpressure is unchanged.
//!
//! The crates: `flate2` on the zlib-rs backend (pure Rust, zlib's speed), `brotli` (pure
//! Rust), `zstd` (the reference C library). Their costs per KiB at the default levels are in
//! docs/PERFORMANCE.md.

mod negotiate;

use std::io::Write;

use bytes::Bytes;
use squall_config::Compress;

pub use negotiate::{Plan, Weights, edit_headers, negotiate, plan, plan_file};

/// The codings Squall compresses with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Coding {
    Brotli = 0,
    Zstd = 1,
    Gzip = 2,
}

impl Coding {
    /// Every coding, in the order ties are broken in (and the index of each in metrics).
    pub const PREFERENCE: [Coding; 3] = [Coding::Brotli, Coding::Zstd, Coding::Gzip];

    /// The content-coding token (RFC 9110 §8.4.1).
    pub fn token(self) -> &'static str {
        match self {
            Coding::Brotli => "br",
            Coding::Zstd => "zstd",
            Coding::Gzip => "gzip",
        }
    }

    /// The coding a token names, case-insensitively (`x-gzip` is gzip, RFC 9110 §8.4.1.3).
    pub fn from_token(token: &[u8]) -> Option<Coding> {
        if token.eq_ignore_ascii_case(b"x-gzip") {
            return Some(Coding::Gzip);
        }
        Coding::PREFERENCE
            .into_iter()
            .find(|c| token.eq_ignore_ascii_case(c.token().as_bytes()))
    }
}

/// How hard each coding works, and the windows that bound its memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Levels {
    pub gzip: u32,
    pub brotli: u32,
    pub zstd: u32,
}

/// brotli's window: 2^18 = 256 KiB (its default, 4 MiB, would be that much per response in
/// flight; text responses rarely gain from more).
pub const BROTLI_WINDOW_LOG: u32 = 18;
/// zstd's window: 2^19 = 512 KiB, for the same reason (level 3 would take 2 MiB).
pub const ZSTD_WINDOW_LOG: u32 = 19;
/// brotli's input buffer, copied through before compressing.
const BROTLI_BUFFER_BYTES: usize = 4096;

impl From<&Compress> for Levels {
    fn from(c: &Compress) -> Levels {
        Levels {
            gzip: c.gzip_level,
            brotli: c.brotli_level,
            zstd: c.zstd_level,
        }
    }
}

/// A coding failed (only zstd's C library can say so; it does not for valid parameters).
#[derive(Debug, thiserror::Error)]
#[error("{coding:?} compression failed: {source}")]
pub struct CompressError {
    pub coding: Coding,
    #[source]
    pub source: std::io::Error,
}

/// One response's compression stream. Feed it the body in order with [`Compressor::push`],
/// ask for [`Compressor::flush`] when the origin has nothing more for now, and end it with
/// [`Compressor::finish`]; each returns the compressed bytes ready to send (maybe none).
pub struct Compressor {
    coding: Coding,
    encoder: Encoder,
    /// Body bytes taken since the last flush: a flush with none is skipped.
    unflushed: bool,
    bytes_in: u64,
    bytes_out: u64,
}

enum Encoder {
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Brotli(Box<brotli::CompressorWriter<Vec<u8>>>),
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
}

/// What a finished (or running) compression did, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub coding: Coding,
    /// Body bytes taken in, and compressed bytes handed out.
    pub bytes_in: u64,
    pub bytes_out: u64,
}

impl Compressor {
    /// A stream for `coding` at `levels`.
    pub fn new(coding: Coding, levels: Levels) -> Result<Compressor, CompressError> {
        let encoder = match coding {
            Coding::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(
                Vec::new(),
                flate2::Compression::new(levels.gzip.min(9)),
            )),
            Coding::Brotli => Encoder::Brotli(Box::new(brotli::CompressorWriter::new(
                Vec::new(),
                BROTLI_BUFFER_BYTES,
                levels.brotli.min(11),
                BROTLI_WINDOW_LOG,
            ))),
            Coding::Zstd => {
                let fail = |source| CompressError { coding, source };
                let level = i32::try_from(levels.zstd).unwrap_or(3);
                let mut encoder =
                    zstd::stream::write::Encoder::new(Vec::new(), level).map_err(fail)?;
                encoder.window_log(ZSTD_WINDOW_LOG).map_err(fail)?;
                Encoder::Zstd(encoder)
            }
        };
        Ok(Compressor {
            coding,
            encoder,
            unflushed: false,
            bytes_in: 0,
            bytes_out: 0,
        })
    }

    pub fn coding(&self) -> Coding {
        self.coding
    }

    /// Compresses `input`; returns what is ready to send.
    pub fn push(&mut self, input: &[u8]) -> Result<Bytes, CompressError> {
        if input.is_empty() {
            return Ok(Bytes::new());
        }
        self.bytes_in += input.len() as u64;
        self.unflushed = true;
        let result = match &mut self.encoder {
            Encoder::Gzip(e) => e.write_all(input),
            Encoder::Brotli(e) => e.write_all(input),
            Encoder::Zstd(e) => e.write_all(input),
        };
        self.fail_or(result)?;
        Ok(self.take())
    }

    /// Makes everything pushed so far decodable by the client (gzip's sync flush, brotli's
    /// flush, zstd's end of block); returns what is ready. Nothing when nothing was pushed
    /// since the last flush, so flushing at every pause costs nothing while idle.
    pub fn flush(&mut self) -> Result<Bytes, CompressError> {
        if !self.unflushed {
            return Ok(Bytes::new());
        }
        self.unflushed = false;
        let result = match &mut self.encoder {
            Encoder::Gzip(e) => e.flush(),
            Encoder::Brotli(e) => e.flush(),
            Encoder::Zstd(e) => e.flush(),
        };
        self.fail_or(result)?;
        Ok(self.take())
    }

    /// Ends the stream; returns its last bytes and what the whole stream did.
    pub fn finish(self) -> Result<(Bytes, Stats), CompressError> {
        let coding = self.coding;
        let fail = |source| CompressError { coding, source };
        let rest = match self.encoder {
            Encoder::Gzip(e) => e.finish().map_err(fail)?,
            Encoder::Brotli(e) => e.into_inner(),
            Encoder::Zstd(e) => e.finish().map_err(fail)?,
        };
        let stats = Stats {
            coding,
            bytes_in: self.bytes_in,
            bytes_out: self.bytes_out + rest.len() as u64,
        };
        Ok((Bytes::from(rest), stats))
    }

    /// What the stream did so far.
    pub fn stats(&self) -> Stats {
        Stats {
            coding: self.coding,
            bytes_in: self.bytes_in,
            bytes_out: self.bytes_out,
        }
    }

    fn fail_or(&self, result: std::io::Result<()>) -> Result<(), CompressError> {
        result.map_err(|source| CompressError {
            coding: self.coding,
            source,
        })
    }

    /// The output so far, handed out whole: the compressor keeps none of it.
    fn take(&mut self) -> Bytes {
        let out = match &mut self.encoder {
            Encoder::Gzip(e) => std::mem::take(e.get_mut()),
            Encoder::Brotli(e) => std::mem::take(e.get_mut()),
            Encoder::Zstd(e) => std::mem::take(e.get_mut()),
        };
        self.bytes_out += out.len() as u64;
        Bytes::from(out)
    }
}

impl std::fmt::Debug for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compressor")
            .field("coding", &self.coding)
            .field("bytes_in", &self.bytes_in)
            .field("bytes_out", &self.bytes_out)
            .finish_non_exhaustive()
    }
}

/// Decodes `data` of `coding` with the crates' own decoders (for tests and benches).
pub fn decode(coding: Coding, data: &[u8]) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    match coding {
        Coding::Gzip => flate2::read::GzDecoder::new(data).read_to_end(&mut out)?,
        Coding::Brotli => brotli::Decompressor::new(data, 4096).read_to_end(&mut out)?,
        Coding::Zstd => zstd::stream::read::Decoder::new(data)?.read_to_end(&mut out)?,
    };
    Ok(out)
}

#[cfg(test)]
mod tests;
