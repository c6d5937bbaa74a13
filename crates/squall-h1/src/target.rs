//! The request target read once: the one normalised path that routing, the access rules,
//! authentication, static files, the cache key, the access log and the origin all see.
//!
//! Before this module the target was read in three places, each its own way: the router
//! matched the raw bytes, the static file handler decoded escapes and dropped empty and `.`
//! segments, and the origin normalised it however its framework does. `//private/x`,
//! `/%70rivate/x` or `/x/../admin/` then matched an unprotected route while naming a protected
//! resource. Now a target is normalised once, when its head is decoded (HTTP/1.1) or turned
//! into a head (HTTP/2), and nothing downstream reads another spelling:
//!
//! - escapes of unreserved characters are decoded (RFC 3986 §2.3, §6.2.2.2: `%41` is `A`,
//!   `%2E` is `.`), the escapes that remain get uppercase hex (§6.2.2.1: `%2f` is `%2F`);
//! - empty segments are merged (`//` is `/`, as nginx's default `merge_slashes on`);
//! - dot segments are removed (§5.2.4), after the decoding, so `%2e%2e` is `..`; a `..` that
//!   would climb above the root is refused rather than clamped;
//! - `%00`, a `%` not followed by two hex digits and overlong UTF-8 escapes (`%C0%AE`, an old
//!   spelling of `.`) are refused;
//! - the query is kept as it came.
//!
//! What the origin makes of the normalised path is a second question: a lenient framework
//! decodes `%2F` into `/`, reads `\` as `/`, drops `;params` or trailing dots. [`lenient`]
//! gives that reading, and the proxy refuses a target whose lenient reading routes elsewhere
//! than its normalised one.
//!
//! Pure functions over bytes, no allocation when the target is already normal (the common
//! case, checked by one scan).

/// Why a request target is refused: each is a 400.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetError {
    /// Not origin-form: the path does not start with `/`.
    NotAbsolute,
    /// A `%` not followed by two hex digits.
    BadEscape,
    /// `%00`: no file, route or origin means a NUL.
    Nul,
    /// An overlong UTF-8 sequence in escapes (`%C0%AE`, `%E0%80%AF`): a second spelling of an
    /// ASCII byte that some decoders accept.
    Overlong,
    /// A `..` segment above the root.
    AboveRoot,
}

/// Normalises an origin-form `target` (`/path?query`): `Ok(None)` when it is normal already,
/// else the normal form (see the module's list). The query is kept as it came.
pub fn normalize(target: &[u8]) -> Result<Option<Vec<u8>>, TargetError> {
    if target.first() != Some(&b'/') {
        return Err(TargetError::NotAbsolute);
    }
    if is_normal(target) {
        return Ok(None);
    }
    let (path, query) = match memchr::memchr(b'?', target) {
        Some(at) => target.split_at(at),
        None => (target, &[][..]),
    };
    let decoded = decode_unreserved(path)?;
    let mut out = Vec::with_capacity(target.len());
    remove_dot_segments(&decoded, &mut out, Climb::Refuse)?;
    out.extend_from_slice(query);
    Ok(if out == target { None } else { Some(out) })
}

/// How a lenient origin framework could read the normalised `path` (no query): escapes of
/// ASCII decoded once, `%2F` and `%5C` included; `\` as `/`; each segment's `;params`
/// dropped, then its trailing dots and spaces (as Windows file systems do); then empty and
/// dot segments removed again, clamped at the root. `None` when that reading is `path`
/// itself, which one scan tells for almost every path.
pub fn lenient(path: &[u8]) -> Option<String> {
    if !may_read_differently(path) {
        return None;
    }
    let mut decoded = Vec::with_capacity(path.len());
    let mut i = 0;
    while i < path.len() {
        let byte = match path[i] {
            b'%' => match escape_at(path, i) {
                Some(b) if b.is_ascii() => {
                    i += 3;
                    b
                }
                _ => {
                    i += 1;
                    b'%'
                }
            },
            b => {
                i += 1;
                b
            }
        };
        decoded.push(if byte == b'\\' { b'/' } else { byte });
    }
    let mut trimmed = Vec::with_capacity(decoded.len());
    for (n, segment) in decoded.split(|&b| b == b'/').enumerate() {
        if n > 0 {
            trimmed.push(b'/');
        }
        trimmed.extend_from_slice(lenient_segment(segment));
    }
    if trimmed.first() != Some(&b'/') {
        trimmed.insert(0, b'/');
    }
    let mut out = Vec::with_capacity(trimmed.len());
    // Clamping never fails.
    let _ = remove_dot_segments(&trimmed, &mut out, Climb::Clamp);
    if out == path {
        return None;
    }
    // Only ASCII escapes were decoded and the input came from a URI, so this is ASCII; a
    // non-UTF-8 input reads as itself.
    String::from_utf8(out).ok()
}

/// Whether the path of `target` (starting with `/`, up to the query) has no escape, no empty
/// segment and no dot segment. Request paths are short, so this is no vectorised search but
/// eight bytes at a time in a `u64` (SWAR): a window with no `%` or `?` and no `/` followed
/// by `/` or `.` is skipped whole; one that may have one (the test can say yes wrongly, never
/// no) is read byte by byte from there.
fn is_normal(target: &[u8]) -> bool {
    let mut at = 0;
    while let Some(window) = target.get(at..at + 8) {
        let word = u64::from_le_bytes(window.try_into().unwrap_or_default());
        // Bytes 0 to 6: byte 7 is the first of the next window.
        let stop = (has_byte(word, b'%') | has_byte(word, b'?')) & !HIGH_BYTE;
        let slash = has_byte(word, b'/');
        let odd_next = (has_byte(word, b'/') | has_byte(word, b'.')) >> 8;
        if stop | (slash & odd_next) != 0 {
            return is_normal_from(target, at);
        }
        at += 7;
    }
    is_normal_from(target, at)
}

/// [`is_normal`] one byte at a time, from `start` (which is never inside a segment that an
/// earlier `/` began and this one would misjudge: a window is left at its seventh byte at the
/// latest, and the test looks at the byte after each `/`).
fn is_normal_from(target: &[u8], start: usize) -> bool {
    for (at, &byte) in target.iter().enumerate().skip(start) {
        match byte {
            b'?' => return true,
            b'%' => return false,
            b'/' if starts_odd_segment(&target[at + 1..]) => return false,
            _ => {}
        }
    }
    true
}

const LOW_BITS: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
/// The high bit of the eighth byte.
const HIGH_BYTE: u64 = 0x8000_0000_0000_0000;

/// The high bit of each byte of `word` that may equal `byte`: set for every byte that does,
/// and perhaps for a byte above one that does (the borrow), never for one below all matches.
fn has_byte(word: u64, byte: u8) -> u64 {
    let x = word ^ (LOW_BITS * u64::from(byte));
    x.wrapping_sub(LOW_BITS) & !x & HIGH_BITS
}

/// Whether `rest`, what follows a `/`, starts with an empty, `.` or `..` segment (a segment
/// ends at `/`, at the query's `?` or at the end).
fn starts_odd_segment(rest: &[u8]) -> bool {
    let ends = |at: usize| matches!(rest.get(at), None | Some(b'/' | b'?'));
    match rest.first() {
        Some(b'/') => true,
        Some(b'.') => ends(1) || (rest.get(1) == Some(&b'.') && ends(2)),
        _ => false,
    }
}

/// Whether a lenient reading of normalised `path` may differ from it: an escape, a
/// backslash, a `;`, or a segment that ends in a dot.
fn may_read_differently(path: &[u8]) -> bool {
    memchr::memchr3(b'%', b'\\', b';', path).is_some()
        || memchr::memchr_iter(b'.', path).any(|at| matches!(path.get(at + 1), None | Some(b'/')))
}

/// A segment as a lenient reader takes it: up to its first `;`, without trailing spaces,
/// and then, unless it is all dots (`..` stays a dot segment), without trailing dots.
fn lenient_segment(segment: &[u8]) -> &[u8] {
    let end = memchr::memchr(b';', segment).unwrap_or(segment.len());
    let segment = trim_end(&segment[..end], |b| b == b' ');
    if !segment.is_empty() && segment.iter().all(|&b| b == b'.') {
        // `...` is read as `..` by some (IIS), as a name by others: take the reading that
        // climbs.
        return &segment[..segment.len().min(2)];
    }
    trim_end(segment, |b| b == b' ' || b == b'.')
}

fn trim_end(bytes: &[u8], strip: impl Fn(u8) -> bool) -> &[u8] {
    let end = bytes
        .iter()
        .rposition(|&b| !strip(b))
        .map_or(0, |at| at + 1);
    &bytes[..end]
}

/// `path` with the escapes of unreserved characters decoded and the others' hex uppercase.
fn decode_unreserved(path: &[u8]) -> Result<Vec<u8>, TargetError> {
    let mut out = Vec::with_capacity(path.len());
    let mut i = 0;
    while i < path.len() {
        if path[i] != b'%' {
            out.push(path[i]);
            i += 1;
            continue;
        }
        let byte = escape_at(path, i).ok_or(TargetError::BadEscape)?;
        if byte == 0 {
            return Err(TargetError::Nul);
        }
        if is_overlong(byte, escape_at(path, i + 3)) {
            return Err(TargetError::Overlong);
        }
        if is_unreserved(byte) {
            out.push(byte);
        } else {
            out.extend_from_slice(&[
                b'%',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 15)],
            ]);
        }
        i += 3;
    }
    Ok(out)
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// The byte the escape at `at` (`%XY`) stands for; `None` if there is none or it is malformed.
fn escape_at(bytes: &[u8], at: usize) -> Option<u8> {
    let hex = |b: u8| (b as char).to_digit(16);
    match bytes.get(at..at + 3)? {
        [b'%', high, low] => Some((hex(*high)? * 16 + hex(*low)?) as u8),
        _ => None,
    }
}

/// RFC 3986 §2.3: ALPHA / DIGIT / "-" / "." / "_" / "~".
fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

/// Whether a UTF-8 lead byte and the escaped byte after it start an overlong sequence
/// (RFC 3629 §3: `C0`/`C1` then a continuation, `E0` then `80`–`9F`, `F0` then `80`–`8F`).
/// A lone `C0` or `C1` is left alone: it is `À` or `Á` in Latin-1 paths.
fn is_overlong(lead: u8, next: Option<u8>) -> bool {
    let Some(next) = next else {
        return false;
    };
    match lead {
        0xC0 | 0xC1 => (0x80..=0xBF).contains(&next),
        0xE0 => (0x80..=0x9F).contains(&next),
        0xF0 => (0x80..=0x8F).contains(&next),
        _ => false,
    }
}

/// What a `..` above the root does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Climb {
    Refuse,
    /// Stays at the root, as RFC 3986 §5.2.4 does and most servers.
    Clamp,
}

/// RFC 3986 §5.2.4 over `path` (starting with `/`), with empty segments merged: appends the
/// result to `out`, which ends with `/` where `path` ends with a `/`, `.` or `..` segment.
fn remove_dot_segments(path: &[u8], out: &mut Vec<u8>, climb: Climb) -> Result<(), TargetError> {
    debug_assert_eq!(path.first(), Some(&b'/'));
    let start = out.len();
    out.push(b'/');
    let mut last_named = false;
    for segment in path[1..].split(|&b| b == b'/') {
        last_named = false;
        match segment {
            b"" | b"." => {}
            b".." => {
                if out.len() == start + 1 {
                    if climb == Climb::Refuse {
                        return Err(TargetError::AboveRoot);
                    }
                    continue;
                }
                // `out` ends with `/` here: drop the segment before it.
                let before = out[start..out.len() - 1]
                    .iter()
                    .rposition(|&b| b == b'/')
                    .map_or(0, |at| at + 1);
                out.truncate(start + before);
            }
            _ => {
                out.extend_from_slice(segment);
                out.push(b'/');
                last_named = true;
            }
        }
    }
    if last_named {
        out.pop();
    }
    Ok(())
}

#[cfg(test)]
mod tests;
