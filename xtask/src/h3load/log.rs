//! h3load's `--log-file`: a line per request in h2load's format (`crate::latency`), so that the
//! bench reads HTTP/3 runs' percentiles with the parser it reads h2load's logs with.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

use crate::latency::LogLine;

/// Lines buffered before a write: a run logs hundreds of thousands of requests a second.
const BUFFER_BYTES: usize = 256 * 1024;

/// The log being written; the first write error is kept and reported at the end.
pub struct RequestLog<W: Write> {
    out: W,
    error: Option<io::Error>,
}

impl RequestLog<BufWriter<File>> {
    pub fn create(path: &Path) -> Result<Self> {
        let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        Ok(RequestLog::new(BufWriter::with_capacity(
            BUFFER_BYTES,
            file,
        )))
    }
}

impl<W: Write> RequestLog<W> {
    pub fn new(out: W) -> Self {
        RequestLog { out, error: None }
    }

    /// One request: when it started, its status (`None`: it failed), how long it took.
    pub fn record(&mut self, start: SystemTime, status: Option<u16>, took: Duration) {
        if self.error.is_some() {
            return;
        }
        if let Err(err) = writeln!(self.out, "{}", line(start, status, took)) {
            self.error = Some(err);
        }
    }

    /// Writes out what is buffered; the first error of the run, if any.
    pub fn flush(&mut self) -> Result<()> {
        if let Some(err) = self.error.take() {
            return Err(err).context("writing the request log");
        }
        self.out.flush().context("writing the request log")
    }
}

/// The log line of a request, as h2load would write it.
fn line(start: SystemTime, status: Option<u16>, took: Duration) -> LogLine {
    let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    LogLine {
        start_us: start.duration_since(UNIX_EPOCH).map_or(0, micros),
        status,
        duration_us: micros(took),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_as_h2load_writes_them() {
        let start = UNIX_EPOCH + Duration::from_micros(1_733_390_000_123_456);
        let mut log = RequestLog::new(Vec::new());
        log.record(start, Some(200), Duration::from_micros(1_234));
        log.record(start, None, Duration::from_millis(5));
        log.flush().expect("a vector takes every write");
        let text = String::from_utf8(log.out).expect("ASCII");
        assert_eq!(
            text,
            "1733390000123456\t200\t1234\n1733390000123456\t-1\t5000\n"
        );
        let tails = crate::latency::read(text.as_bytes()).expect("the bench reads it");
        assert_eq!((tails.timed, tails.failed), (1, 1));
        assert_eq!(tails.p50_ms, Some(1.239));
    }

    #[test]
    fn the_first_write_error_is_reported() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("disk full"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut log = RequestLog::new(Full);
        log.record(UNIX_EPOCH, Some(200), Duration::ZERO);
        let err = log.flush().expect_err("the write failed");
        assert!(format!("{err:#}").contains("disk full"), "{err:#}");
    }
}
