//! The grammars of the fields that decide framing and connection handling: Content-Length,
//! Transfer-Encoding, Connection, Expect and Host.
//!
//! They are pure functions over the raw value bytes, fed one field line at a time in order, so
//! that several lines of one field combine as one comma-separated list (RFC 9110 §5.3).
//! httparse has already refused CR, LF and other control characters in values and trimmed
//! surrounding whitespace.

use crate::ErrorKind;

/// Combines the Content-Length lines seen so far (`current`) with one more.
///
/// RFC 9112 §6.3: a list of identical values (`5, 5`, or two lines of `5`) may be taken as one
/// value; anything else — differing values, an empty element, a sign, a non-digit — makes the
/// length unreliable, which is a 400. Values that do not fit in u64 are a 400 as well.
pub(crate) fn merge_content_length(current: Option<u64>, value: &[u8]) -> Result<u64, ErrorKind> {
    let mut length = current;
    for element in value.split(|&b| b == b',') {
        let n = parse_decimal(trim_ows(element)).ok_or(ErrorKind::BadContentLength)?;
        if length.is_some_and(|l| l != n) {
            return Err(ErrorKind::BadContentLength);
        }
        length = Some(n);
    }
    // `split` yields at least one element, so `length` was set or we returned.
    length.ok_or(ErrorKind::BadContentLength)
}

/// `1*DIGIT` as u64; None when empty, not all digits, or too large.
fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// The transfer codings of a request, accumulated over its Transfer-Encoding lines in order.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TransferCodings {
    /// A Transfer-Encoding field was present at all.
    pub present: bool,
    chunked: bool,
    other: bool,
}

impl TransferCodings {
    /// Adds the codings of one field line.
    ///
    /// `chunked` must be the final coding and appear once (RFC 9112 §6.3, §7), so any coding
    /// after it is a 400. A coding with parameters or other non-token syntax is malformed
    /// (400); we keep the grammar to bare tokens because no client sends parameters.
    pub fn add(&mut self, value: &[u8]) -> Result<(), ErrorKind> {
        self.present = true;
        for element in value.split(|&b| b == b',').map(trim_ows) {
            if element.is_empty() {
                // RFC 9110 §5.6.1: empty list elements are ignored.
                continue;
            }
            if !is_token(element) || self.chunked {
                return Err(ErrorKind::BadTransferEncoding);
            }
            if element.eq_ignore_ascii_case(b"chunked") {
                self.chunked = true;
            } else {
                self.other = true;
            }
        }
        Ok(())
    }

    /// After all lines: Ok when the body is plainly chunked.
    ///
    /// A well-formed coding we do not implement (`gzip`, `identity`, `xchunked`) is a 501
    /// (RFC 9112 §6.1), as nginx answers; a field with no coding at all is a 400.
    pub fn finish(self) -> Result<(), ErrorKind> {
        if self.other {
            return Err(ErrorKind::UnsupportedTransferCoding);
        }
        if !self.chunked {
            return Err(ErrorKind::BadTransferEncoding);
        }
        Ok(())
    }
}

/// The transfer codings of a response, accumulated over its Transfer-Encoding lines in order.
///
/// Responses follow RFC 9112 §6.3 rules 3 and 4, which differ from requests: a final `chunked`
/// frames the body, and any other list is legal framing too, the body then running until the
/// origin closes the connection. What stays an error is what cannot be framed at all: a
/// coding that is not a token (or has parameters, which no origin sends), `chunked` applied
/// twice (RFC 9112 §7: "MUST NOT apply chunked more than once"), or an empty field.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ResponseCodings {
    /// A Transfer-Encoding field was present at all.
    pub present: bool,
    chunked_seen: bool,
    chunked_last: bool,
    /// A coding other than `chunked` was listed.
    pub other: bool,
}

/// How a response's transfer codings frame its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CodedBody {
    /// `chunked` is the final coding (RFC 9112 §6.3 rule 3).
    Chunked,
    /// It is not: read until the connection closes (RFC 9112 §6.3 rule 4).
    Close,
}

impl ResponseCodings {
    /// Adds the codings of one field line.
    pub fn add(&mut self, value: &[u8]) -> Result<(), ErrorKind> {
        self.present = true;
        for element in value.split(|&b| b == b',').map(trim_ows) {
            if element.is_empty() {
                continue; // RFC 9110 §5.6.1
            }
            if !is_token(element) {
                return Err(ErrorKind::BadTransferEncoding);
            }
            let chunked = element.eq_ignore_ascii_case(b"chunked");
            if chunked && self.chunked_seen {
                return Err(ErrorKind::BadTransferEncoding);
            }
            self.chunked_seen |= chunked;
            self.chunked_last = chunked;
            self.other |= !chunked;
        }
        Ok(())
    }

    /// After all lines, with `present` set: how the body is framed.
    pub fn finish(self) -> Result<CodedBody, ErrorKind> {
        match (self.chunked_last, self.chunked_seen || self.other) {
            (true, _) => Ok(CodedBody::Chunked),
            (false, true) => Ok(CodedBody::Close),
            (false, false) => Err(ErrorKind::BadTransferEncoding),
        }
    }
}

/// The connection options (RFC 9112 §9.3) that decide persistence.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ConnectionOptions {
    pub close: bool,
    pub keep_alive: bool,
}

impl ConnectionOptions {
    /// Adds the options of one Connection line; option names are case-insensitive.
    pub fn add(&mut self, value: &[u8]) {
        for option in value.split(|&b| b == b',').map(trim_ows) {
            if option.eq_ignore_ascii_case(b"close") {
                self.close = true;
            } else if option.eq_ignore_ascii_case(b"keep-alive") {
                self.keep_alive = true;
            }
        }
    }
}

/// Whether one Expect line asks for 100-continue; any other expectation is a 417
/// (RFC 9110 §10.1.1).
pub(crate) fn expect_continue(value: &[u8]) -> Result<bool, ErrorKind> {
    let mut found = false;
    for element in value.split(|&b| b == b',').map(trim_ows) {
        if element.eq_ignore_ascii_case(b"100-continue") {
            found = true;
        } else if !element.is_empty() {
            return Err(ErrorKind::UnsupportedExpectation);
        }
    }
    Ok(found)
}

/// Splits a Host value (`uri-host [":" port]`, RFC 9110 §7.2 and RFC 3986 §3.2.2) into host and
/// port; None when it is not that syntax. The host may be empty (RFC 9112 §3.2 lets a client
/// send an empty Host when the target has no authority). An IPv6 literal keeps its brackets,
/// as `http::Uri::host` does.
pub(crate) fn split_host_port(value: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    let host_len = if value.first() == Some(&b'[') {
        let close = value.iter().position(|&b| b == b']')?;
        let inner = &value[1..close];
        let ipv6 = |b: &u8| b.is_ascii_hexdigit() || *b == b':' || *b == b'.';
        if inner.is_empty() || !inner.iter().all(ipv6) {
            return None;
        }
        close + 1
    } else {
        // The reg-name runs to the first byte it may not hold, which must be the port's
        // colon or the end.
        let len = reg_name_len(value);
        if len < value.len() && value[len] != b':' {
            return None;
        }
        len
    };
    let (host, rest) = value.split_at(host_len);
    match rest {
        [] => Some((host, None)),
        [b':', port @ ..] if port.len() <= 5 && port.iter().all(u8::is_ascii_digit) => {
            Some((host, Some(port)))
        }
        _ => None,
    }
}

/// Bytes an RFC 3986 `reg-name` holds as themselves: unreserved and sub-delims (`%` begins
/// an escape). One lookup per byte: the host of every request is split here.
const REG_NAME_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
            );
        b += 1;
    }
    table
};

/// How long the RFC 3986 `reg-name` (which covers IPv4 literals) at the start of `value`
/// is: unreserved, sub-delims and pct-encoded bytes.
fn reg_name_len(value: &[u8]) -> usize {
    let mut i = 0;
    while let Some(&b) = value.get(i) {
        if REG_NAME_BYTES[b as usize] {
            i += 1;
        } else if b == b'%'
            && value
                .get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
        {
            i += 3;
        } else {
            break;
        }
    }
    i
}

/// `token` (RFC 9110 §5.6.2): one or more tchar.
pub(crate) fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

/// `tchar` (RFC 9110 §5.6.2): any VCHAR except delimiters.
pub(crate) fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'.'
                | b'^'
                | b'_'
                | b'`'
                | b'|'
                | b'~'
        )
}

/// Trims optional whitespace (SP, HTAB; RFC 9110 §5.6.3) from both ends.
pub(crate) fn trim_ows(s: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = s.iter().position(|b| !is_ows(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|b| !is_ows(b)).map_or(start, |i| i + 1);
    &s[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_grammar() {
        assert_eq!(merge_content_length(None, b"0"), Ok(0));
        assert_eq!(merge_content_length(None, b"5, 5"), Ok(5));
        assert_eq!(merge_content_length(Some(5), b"5"), Ok(5));
        assert_eq!(
            merge_content_length(None, b"18446744073709551615"),
            Ok(u64::MAX)
        );
        for bad in [
            &b""[..],
            b"+5",
            b"-5",
            b"5a",
            b"0x5",
            b"5,",
            b",5",
            b"5, 6",
            b"5 5",
        ] {
            assert_eq!(
                merge_content_length(None, bad),
                Err(ErrorKind::BadContentLength),
                "{bad:?}"
            );
        }
        assert_eq!(
            merge_content_length(Some(4), b"5"),
            Err(ErrorKind::BadContentLength)
        );
        assert_eq!(
            merge_content_length(None, b"18446744073709551616"),
            Err(ErrorKind::BadContentLength)
        );
    }

    fn codings(lines: &[&[u8]]) -> Result<(), ErrorKind> {
        let mut te = TransferCodings::default();
        for line in lines {
            te.add(line)?;
        }
        te.finish()
    }

    #[test]
    fn transfer_coding_grammar() {
        assert_eq!(codings(&[b"chunked"]), Ok(()));
        assert_eq!(codings(&[b"CHUNKED"]), Ok(()));
        assert_eq!(codings(&[b"chunked, "]), Ok(()));
        assert_eq!(
            codings(&[b"gzip"]),
            Err(ErrorKind::UnsupportedTransferCoding)
        );
        assert_eq!(
            codings(&[b"gzip, chunked"]),
            Err(ErrorKind::UnsupportedTransferCoding)
        );
        assert_eq!(
            codings(&[b"gzip", b"chunked"]),
            Err(ErrorKind::UnsupportedTransferCoding)
        );
        assert_eq!(
            codings(&[b"chunked", b"chunked"]),
            Err(ErrorKind::BadTransferEncoding)
        );
        assert_eq!(
            codings(&[b"chunked, gzip"]),
            Err(ErrorKind::BadTransferEncoding)
        );
        assert_eq!(
            codings(&[b"chunked;q=1"]),
            Err(ErrorKind::BadTransferEncoding)
        );
        assert_eq!(codings(&[b""]), Err(ErrorKind::BadTransferEncoding));
        assert_eq!(
            codings(&[b"\"chunked\""]),
            Err(ErrorKind::BadTransferEncoding)
        );
    }

    fn response_codings(lines: &[&[u8]]) -> Result<CodedBody, ErrorKind> {
        let mut te = ResponseCodings::default();
        for line in lines {
            te.add(line)?;
        }
        te.finish()
    }

    #[test]
    fn response_transfer_coding_grammar() {
        use CodedBody::*;
        assert_eq!(response_codings(&[b"chunked"]), Ok(Chunked));
        assert_eq!(response_codings(&[b"gzip, Chunked"]), Ok(Chunked));
        assert_eq!(response_codings(&[b"gzip", b"chunked"]), Ok(Chunked));
        assert_eq!(response_codings(&[b"gzip"]), Ok(Close));
        assert_eq!(response_codings(&[b"chunked, gzip"]), Ok(Close));
        assert_eq!(response_codings(&[b"chunked", b"identity"]), Ok(Close));
        for bad in [
            &[&b"chunked, chunked"[..]][..],
            &[b"chunked", b"gzip, chunked"],
            &[b""],
            &[b" , "],
            &[b"chunked;q=1"],
            &[b"\"chunked\""],
        ] {
            assert_eq!(
                response_codings(bad),
                Err(ErrorKind::BadTransferEncoding),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn connection_options() {
        let mut options = ConnectionOptions::default();
        options.add(b"Upgrade, KEEP-ALIVE");
        assert!(options.keep_alive && !options.close);
        options.add(b"te,close");
        assert!(options.close);
        let mut options = ConnectionOptions::default();
        options.add(b"closed, keep-alive-ish");
        assert!(!options.keep_alive && !options.close);
    }

    #[test]
    fn expectations() {
        assert_eq!(expect_continue(b"100-Continue"), Ok(true));
        assert_eq!(expect_continue(b""), Ok(false));
        assert_eq!(
            expect_continue(b"100-continue, foo"),
            Err(ErrorKind::UnsupportedExpectation)
        );
    }

    #[test]
    fn host_syntax() {
        let split = |v: &'static [u8]| split_host_port(v);
        assert_eq!(split(b"example.com"), Some((&b"example.com"[..], None)));
        assert_eq!(
            split(b"example.com:8080"),
            Some((&b"example.com"[..], Some(&b"8080"[..])))
        );
        assert_eq!(
            split(b"[::1]:443"),
            Some((&b"[::1]"[..], Some(&b"443"[..])))
        );
        assert_eq!(split(b"[::1]"), Some((&b"[::1]"[..], None)));
        assert_eq!(split(b"a%2Db:"), Some((&b"a%2Db"[..], Some(&b""[..]))));
        assert_eq!(split(b""), Some((&b""[..], None)));
        for bad in [
            &b"a b"[..],
            b"a/b",
            b"user@a",
            b"a:b",
            b"a:1:2",
            b"[::1",
            b"[]",
            b"[::1]x",
            b"a%2",
            b"a:123456",
        ] {
            assert_eq!(split_host_port(bad), None, "{bad:?}");
        }
    }

    /// Every byte, inside a host and right before its port, against RFC 3986's list of what
    /// a reg-name holds (escapes apart).
    #[test]
    fn each_byte_of_a_host_is_judged_by_the_rfc() {
        const ALLOWED: &[u8] =
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=";
        for b in 0..=255u8 {
            let allowed = ALLOWED.contains(&b);
            for (value, host_len) in [(vec![b'a', b, b'z'], 3), (vec![b'a', b, b':', b'8'], 2)] {
                // A colon ends the host too early: `a:z` and `a::8` have bad ports.
                let expected = allowed.then(|| &value[..host_len]);
                let got = split_host_port(&value).map(|(host, _)| host);
                assert_eq!(got, expected, "{value:?}");
            }
        }
        assert_eq!(
            split_host_port(b"%41%7e:1"),
            Some((&b"%41%7e"[..], Some(&b"1"[..])))
        );
        assert_eq!(split_host_port(b"a%4g"), None);
    }
}
