//! Finds the end of a head or trailer section that arrives in pieces, enforcing the line and
//! size rules that must hold before any byte is parsed.
//!
//! httparse restarts from the first byte on every call, so feeding it a head one byte at a time
//! is quadratic. Instead the scanner remembers how far it got and looks at each byte once, with
//! `memchr` for LF; only a complete section goes to httparse. On the way it enforces what must
//! be decided as early as possible and in byte order, so that the outcome is the same however
//! the input is split into reads:
//!
//! - a line must end in CRLF: a bare LF is a 400 (a choice, see the crate docs);
//! - the section must fit in its byte budget: as soon as the budget is buffered without the
//!   blank line, it is a 431, without waiting for more bytes;
//! - the request-target must fit `uri_bytes_max`: checked on the request line so far, so a
//!   414 comes before the line ends (and before a 431 for the same bytes).
//!
//! Empty lines before the request line are skipped but count against the budget
//! (RFC 9112 §2.2 says a server SHOULD ignore at least one).

use memchr::{memchr, memchr_iter};

use crate::ErrorKind;

/// What the scanner has learnt of the section at the front of the buffer.
#[derive(Debug, Default, Clone)]
pub(crate) struct SectionScan {
    /// Bytes of the buffer already looked at; the next call starts here.
    scanned: usize,
    /// Where the line being scanned starts.
    line_start: usize,
    /// Where the request line starts (after leading empty lines); heads only.
    request_line_start: usize,
    /// The request line has ended: the next empty line ends the head.
    request_line_done: bool,
}

/// Where a complete head lies in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeadSpan {
    /// First byte of the request line.
    pub start: usize,
    /// One past the LF of the blank line: the whole head, leading empty lines included.
    pub end: usize,
}

impl SectionScan {
    /// Scans a request head at the front of `buf`; `Some` once its blank line is in.
    pub fn scan_head(
        &mut self,
        buf: &[u8],
        header_bytes_max: usize,
        uri_bytes_max: usize,
    ) -> Result<Option<HeadSpan>, ErrorKind> {
        let window = &buf[..buf.len().min(header_bytes_max)];
        let from = self.scanned;
        for rel in memchr_iter(b'\n', &window[from..]) {
            let lf = from + rel;
            let line = &window[self.line_start..lf];
            if !self.request_line_done && !is_empty_line(line) {
                // Before the bare-LF check: a partial line would have been a 414 already.
                check_uri_len(strip_cr(line), uri_bytes_max)?;
            }
            if line.last() != Some(&b'\r') {
                return Err(ErrorKind::BareLf);
            }
            if line.len() == 1 {
                if self.request_line_done {
                    return Ok(Some(HeadSpan {
                        start: self.request_line_start,
                        end: lf + 1,
                    }));
                }
                // RFC 9112 §2.2: ignore empty lines before the request line.
                self.request_line_start = lf + 1;
            } else {
                self.request_line_done = true;
            }
            self.line_start = lf + 1;
        }
        self.scanned = window.len();
        if !self.request_line_done {
            check_uri_len(strip_cr(&window[self.line_start..]), uri_bytes_max)?;
        }
        if buf.len() >= header_bytes_max {
            return Err(ErrorKind::HeaderTooLarge);
        }
        Ok(None)
    }

    /// Scans a trailer section (RFC 9112 §7.1.2) at the front of `buf`; `Some(len)` once its
    /// blank line is in. A section with no fields is just CRLF.
    pub fn scan_trailers(
        &mut self,
        buf: &[u8],
        budget_bytes: usize,
    ) -> Result<Option<usize>, ErrorKind> {
        self.scan_section(buf, budget_bytes, ErrorKind::TrailerTooLarge)
    }

    /// Scans lines up to and including the first empty one: a trailer section, or a response
    /// head (whose first line the client role has checked is a status line, so not empty).
    /// `Some(len)` once the empty line is in; `too_large` once `budget_bytes` are buffered
    /// without it.
    pub fn scan_section(
        &mut self,
        buf: &[u8],
        budget_bytes: usize,
        too_large: ErrorKind,
    ) -> Result<Option<usize>, ErrorKind> {
        let window = &buf[..buf.len().min(budget_bytes)];
        let from = self.scanned;
        for rel in memchr_iter(b'\n', &window[from..]) {
            let lf = from + rel;
            let line = &window[self.line_start..lf];
            if line.last() != Some(&b'\r') {
                return Err(ErrorKind::BareLf);
            }
            if line.len() == 1 {
                return Ok(Some(lf + 1));
            }
            self.line_start = lf + 1;
        }
        self.scanned = window.len();
        if buf.len() >= budget_bytes {
            return Err(too_large);
        }
        Ok(None)
    }

    /// Bytes of the section looked at so far: zero until a byte of it has arrived.
    pub fn scanned(&self) -> usize {
        self.scanned
    }

    pub fn check_invariants(&self) {
        assert!(self.line_start <= self.scanned);
        assert!(self.request_line_start <= self.line_start);
    }
}

/// An empty line so far: nothing, or a lone CR still waiting for its LF.
fn is_empty_line(line: &[u8]) -> bool {
    line.is_empty() || line == b"\r"
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// 414 when the request-target in (a prefix of) a request line is too long.
///
/// The target is what lies between the first and the second SP (RFC 9112 §3). On a prefix the
/// length only grows, so a check that fails on a prefix fails on the whole line too: the
/// outcome does not depend on how the line was split into reads.
fn check_uri_len(line: &[u8], uri_bytes_max: usize) -> Result<(), ErrorKind> {
    let Some(sp) = memchr(b' ', line) else {
        return Ok(());
    };
    let rest = &line[sp + 1..];
    let uri_len = memchr(b' ', rest).unwrap_or(rest.len());
    if uri_len > uri_bytes_max {
        return Err(ErrorKind::UriTooLong);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_found_after_leading_empty_lines() {
        let mut scan = SectionScan::default();
        let buf = b"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\nrest";
        let span = scan.scan_head(buf, 1000, 100).unwrap().unwrap();
        assert_eq!(
            span,
            HeadSpan {
                start: 4,
                end: buf.len() - 4
            }
        );
    }

    #[test]
    fn head_resumes_where_it_stopped() {
        let mut scan = SectionScan::default();
        let buf = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        for end in 0..buf.len() {
            assert_eq!(scan.scan_head(&buf[..end], 1000, 100), Ok(None));
            scan.check_invariants();
        }
        assert_eq!(
            scan.scan_head(buf, 1000, 100),
            Ok(Some(HeadSpan {
                start: 0,
                end: buf.len()
            }))
        );
    }

    #[test]
    fn head_of_exactly_the_limit_fits() {
        let buf = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        let mut scan = SectionScan::default();
        assert!(scan.scan_head(buf, buf.len(), 100).unwrap().is_some());
        let mut scan = SectionScan::default();
        assert_eq!(
            scan.scan_head(buf, buf.len() - 1, 100),
            Err(ErrorKind::HeaderTooLarge)
        );
    }

    #[test]
    fn uri_checked_on_a_partial_request_line() {
        let mut scan = SectionScan::default();
        assert_eq!(scan.scan_head(b"GET /1234", 1000, 5), Ok(None));
        assert_eq!(
            scan.scan_head(b"GET /12345", 1000, 5),
            Err(ErrorKind::UriTooLong)
        );
    }

    #[test]
    fn trailers_end_at_first_blank_line() {
        let mut scan = SectionScan::default();
        assert_eq!(scan.scan_trailers(b"\r\nX", 100), Ok(Some(2)));
        let mut scan = SectionScan::default();
        assert_eq!(scan.scan_trailers(b"A: b\r\n\r\n", 100), Ok(Some(8)));
        let mut scan = SectionScan::default();
        assert_eq!(
            scan.scan_trailers(b"A: b\n\r\n", 100),
            Err(ErrorKind::BareLf)
        );
    }
}
