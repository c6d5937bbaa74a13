//! Static files, sans-IO: what a `root` route makes of a request before and after the file is
//! opened. The request path becomes a path relative to the root (or a refusal), the file's
//! metadata becomes validators (ETag, Last-Modified), and the request's conditions and Range
//! become the answer's status and the bytes to send. The worker (`worker/files.rs`) opens,
//! reads and writes; nothing here touches a file or a clock.
//!
//! The path checks come on top of the kernel's: the worker opens with `openat2` and
//! `RESOLVE_BENEATH` relative to the root's descriptor, so even a path these checks let
//! through cannot leave the root. They exist so that such a path is refused the same way
//! (404) whatever the file system holds, and early.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{Method, StatusCode, header};
use squall_cache::{ByteRange, RangeAnswer};
use squall_h1::RequestHead;
use squall_uring::FileStat;

pub mod encoding;

/// The most bytes a decoded request path may have (Linux's PATH_MAX).
pub const PATH_BYTES_MAX: usize = 4096;

/// Where a request path leads beneath the root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Decoded, relative to the root, segments joined by `/`, no `.` or empty segment; empty
    /// for the root itself.
    pub relative: Vec<u8>,
    /// The path ended with `/`: a directory, answered with its index file.
    pub directory: bool,
}

/// Why a path is refused: always answered 404, whichever it is, so a client learns nothing
/// about the checks; the variants are for tests and debug logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Not an origin-form path starting with `/`.
    NotAbsolute,
    /// `%2F` or `%5C`: a slash that the file system would see and the router did not.
    EncodedSlash,
    /// A `%` not followed by two hex digits.
    BadEscape,
    /// A NUL byte, raw or encoded.
    Nul,
    /// A backslash, raw or encoded.
    Backslash,
    /// A `..` segment.
    DotDot,
    /// Longer than [`PATH_BYTES_MAX`] once decoded.
    TooLong,
}

/// The target of a request `path` (the URI path, without the query): percent-decoded once,
/// then checked segment by segment.
pub fn target(path: &str) -> Result<Target, Refused> {
    let raw = path.as_bytes();
    if raw.first() != Some(&b'/') {
        return Err(Refused::NotAbsolute);
    }
    let decoded = percent_decode(raw)?;
    if decoded.len() > PATH_BYTES_MAX {
        return Err(Refused::TooLong);
    }
    let mut relative = Vec::with_capacity(decoded.len());
    for segment in decoded.split(|&b| b == b'/') {
        match segment {
            b"" | b"." => continue,
            b".." => return Err(Refused::DotDot),
            _ => {}
        }
        if !relative.is_empty() {
            relative.push(b'/');
        }
        relative.extend_from_slice(segment);
    }
    Ok(Target {
        relative,
        directory: decoded.ends_with(b"/"),
    })
}

/// Decodes `%XX` escapes once; encoded slashes and backslashes, NUL and raw backslashes are
/// refused.
fn percent_decode(raw: &[u8]) -> Result<Vec<u8>, Refused> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let byte = match raw[i] {
            b'%' => {
                let hex = |b: u8| (b as char).to_digit(16);
                let (Some(high), Some(low)) = (
                    raw.get(i + 1).copied().and_then(hex),
                    raw.get(i + 2).copied().and_then(hex),
                ) else {
                    return Err(Refused::BadEscape);
                };
                i += 3;
                match (high * 16 + low) as u8 {
                    b'/' => return Err(Refused::EncodedSlash),
                    b'\\' => return Err(Refused::EncodedSlash),
                    b => b,
                }
            }
            b => {
                i += 1;
                b
            }
        };
        match byte {
            0 => return Err(Refused::Nul),
            b'\\' => return Err(Refused::Backslash),
            _ => out.push(byte),
        }
    }
    Ok(out)
}

/// The media type of a file, from its name's extension (case-insensitive); files without a
/// known one are `application/octet-stream`, which a browser downloads rather than renders.
pub fn content_type(name: &[u8]) -> &'static str {
    let base = name.rsplit(|&b| b == b'/').next().unwrap_or(name);
    let Some(dot) = base.iter().rposition(|&b| b == b'.') else {
        return OCTET_STREAM;
    };
    let extension = &base[dot + 1..];
    TYPES
        .iter()
        .find(|(e, _)| e.as_bytes().eq_ignore_ascii_case(extension))
        .map_or(OCTET_STREAM, |(_, t)| t)
}

const OCTET_STREAM: &str = "application/octet-stream";

/// The usual web types (nginx's `mime.types`, the part a site serves); text types say UTF-8.
const TYPES: &[(&str, &str)] = &[
    ("html", "text/html; charset=utf-8"),
    ("htm", "text/html; charset=utf-8"),
    ("css", "text/css; charset=utf-8"),
    ("js", "text/javascript; charset=utf-8"),
    ("mjs", "text/javascript; charset=utf-8"),
    ("json", "application/json"),
    ("map", "application/json"),
    ("webmanifest", "application/manifest+json"),
    ("txt", "text/plain; charset=utf-8"),
    ("md", "text/markdown; charset=utf-8"),
    ("csv", "text/csv; charset=utf-8"),
    ("xml", "application/xml"),
    ("rss", "application/rss+xml"),
    ("atom", "application/atom+xml"),
    ("svg", "image/svg+xml"),
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("webp", "image/webp"),
    ("avif", "image/avif"),
    ("ico", "image/x-icon"),
    ("bmp", "image/bmp"),
    ("woff", "font/woff"),
    ("woff2", "font/woff2"),
    ("ttf", "font/ttf"),
    ("otf", "font/otf"),
    ("wasm", "application/wasm"),
    ("pdf", "application/pdf"),
    ("zip", "application/zip"),
    ("gz", "application/gzip"),
    ("tar", "application/x-tar"),
    ("mp4", "video/mp4"),
    ("webm", "video/webm"),
    ("mp3", "audio/mpeg"),
    ("ogg", "audio/ogg"),
    ("wav", "audio/wav"),
];

/// A file's validators, as its response carries them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validators {
    /// `"MTIME-SIZE-INODE"` in hex: nginx's `"mtime-size"` with the inode, so that a file
    /// replaced by another of the same size within a second still changes tag. Strong: the
    /// bytes only change with one of the three.
    pub etag: String,
    /// The modification time as an IMF-fixdate.
    pub last_modified: String,
    /// The modification time in whole seconds (what HTTP dates compare at).
    pub modified: SystemTime,
}

impl Validators {
    pub fn of(stat: &FileStat) -> Validators {
        let seconds = u64::try_from(stat.mtime_sec).unwrap_or(0);
        let modified = UNIX_EPOCH + Duration::from_secs(seconds);
        Validators {
            etag: format!("\"{seconds:x}-{:x}-{:x}\"", stat.size, stat.inode),
            last_modified: httpdate::fmt_http_date(modified),
            modified,
        }
    }
}

/// What a request's preconditions make of the file (RFC 9110 §13.2.2, in its order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precondition {
    /// Answer the request.
    Proceed,
    /// 304: the client's copy is current (GET and HEAD).
    NotModified,
    /// 412: a precondition failed.
    Failed,
}

/// Evaluates If-Match, If-Unmodified-Since, If-None-Match and If-Modified-Since against the
/// file's validators. A malformed date is ignored (§13.1.3, §13.1.4).
pub fn precondition(head: &RequestHead, v: &Validators) -> Precondition {
    let headers = &head.headers;
    // Step 1 and 2: If-Match (strong comparison), else If-Unmodified-Since.
    if headers.contains_key(header::IF_MATCH) {
        let values = headers.get_all(header::IF_MATCH).iter();
        if !tag_list_matches(values.map(|v| v.as_bytes()), &v.etag, false) {
            return Precondition::Failed;
        }
    } else if let Some(since) = date(head, header::IF_UNMODIFIED_SINCE)
        && v.modified > since
    {
        return Precondition::Failed;
    }
    let get_or_head = head.method == Method::GET || head.method == Method::HEAD;
    // Step 3 and 4: If-None-Match (weak comparison), else If-Modified-Since for GET/HEAD.
    if headers.contains_key(header::IF_NONE_MATCH) {
        let values = headers.get_all(header::IF_NONE_MATCH).iter();
        if tag_list_matches(values.map(|v| v.as_bytes()), &v.etag, true) {
            return match get_or_head {
                true => Precondition::NotModified,
                false => Precondition::Failed,
            };
        }
    } else if get_or_head
        && let Some(since) = date(head, header::IF_MODIFIED_SINCE)
        && v.modified <= since
    {
        return Precondition::NotModified;
    }
    Precondition::Proceed
}

/// Whether a list of entity tags (or `*`) in `values` names `etag`: weakly (`W/` ignored on
/// either side) or strongly (a weak tag never matches).
fn tag_list_matches<'a>(values: impl Iterator<Item = &'a [u8]>, etag: &str, weak: bool) -> bool {
    for value in values {
        for tag in value.split(|&b| b == b',') {
            let tag = tag.trim_ascii();
            if tag == b"*" {
                return true;
            }
            let (is_weak, opaque) = match tag.strip_prefix(b"W/") {
                Some(rest) => (true, rest),
                None => (false, tag),
            };
            if (weak || !is_weak) && opaque == etag.as_bytes() {
                return true;
            }
        }
    }
    false
}

/// An HTTP-date field, when it is there once and well formed.
fn date(head: &RequestHead, name: header::HeaderName) -> Option<SystemTime> {
    let value = head.headers.get(name)?;
    let text = std::str::from_utf8(value.as_bytes()).ok()?;
    httpdate::parse_http_date(text.trim()).ok()
}

/// Which bytes of a file of `len` bytes a request gets (RFC 9110 §14).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extent {
    /// 200, the whole file.
    Whole,
    /// 206 with one range.
    Part(ByteRange),
    /// 416.
    Unsatisfiable,
}

/// The extent a GET's Range asks for. Several ranges are answered with the whole file, as
/// RFC 9110 §14.2 allows (a server may ignore Range): a multipart body would be streamed
/// from several places of the file for a use (download resumption, media seeking) that asks
/// for one. An If-Range that does not name the file (strongly, by ETag, or by a date equal to
/// Last-Modified) also means the whole file (§13.1.5).
pub fn extent(head: &RequestHead, v: &Validators, len: u64) -> Extent {
    if head.method != Method::GET && head.method != Method::HEAD {
        return Extent::Whole;
    }
    let mut ranges = head.headers.get_all(header::RANGE).iter();
    let (Some(range), None) = (ranges.next(), ranges.next()) else {
        return Extent::Whole;
    };
    if let Some(if_range) = head.headers.get(header::IF_RANGE)
        && !if_range_matches(if_range.as_bytes(), v)
    {
        return Extent::Whole;
    }
    match squall_cache::parse_range(range.as_bytes(), len) {
        RangeAnswer::Partial(parts) if parts.len() == 1 => Extent::Part(parts[0]),
        RangeAnswer::Partial(_) | RangeAnswer::Full => Extent::Whole,
        RangeAnswer::Unsatisfiable => Extent::Unsatisfiable,
    }
}

/// Whether an If-Range value names the file: its ETag by strong comparison, or its
/// Last-Modified date exactly.
fn if_range_matches(value: &[u8], v: &Validators) -> bool {
    let value = value.trim_ascii();
    if value.starts_with(b"\"") || value.starts_with(b"W/") {
        return value == v.etag.as_bytes();
    }
    let date = std::str::from_utf8(value)
        .ok()
        .and_then(|text| httpdate::parse_http_date(text).ok());
    date == Some(v.modified)
}

/// The status a method gets on a `root` route before anything is opened: `None` for GET and
/// HEAD, else 405 (with `Allow: GET, HEAD`).
pub fn method_refusal(method: &Method) -> Option<StatusCode> {
    (method != Method::GET && method != Method::HEAD).then_some(StatusCode::METHOD_NOT_ALLOWED)
}

#[cfg(test)]
mod tests;
