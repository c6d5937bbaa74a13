//! A stored response and what it is worth at a given `now`: its age (RFC 9111 §4.2.3), its
//! state for a request's directives (§4.2, §5.2.1, RFC 5861), and which request header values
//! it was selected by (§4.1, Vary).

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{ACCEPT_ENCODING, DATE, ETAG, HeaderName, HeaderValue, LAST_MODIFIED, VARY};
use http::{HeaderMap, StatusCode};

use crate::RequestFields;
use crate::directives::{self, is_ows, secs};
use crate::policy::{Freshness, RequestCacheControl};

/// Bytes charged per entry beyond its headers, body and wire head: the `Entry` itself, its
/// `Arc`, the header map's table. An estimate; it keeps many tiny entries from overrunning the
/// memory limit in real terms.
pub const ENTRY_OVERHEAD_BYTES: usize = 256;
/// Bytes charged per header field beyond name and value (the HPACK estimate, RFC 7541 §4.1).
pub const HEADER_OVERHEAD_BYTES: usize = 32;

/// One stored response. Immutable once built: a revalidation makes a new one ([`crate::freshen`]),
/// so a worker holding an `Arc<Entry>` can send it while the store replaces it.
#[derive(Clone, Debug)]
pub struct Entry {
    pub status: StatusCode,
    /// The stored response headers (hop-by-hop fields already removed by the caller), less
    /// Date, which is [`Entry::date`].
    pub headers: HeaderMap,
    /// The stored response's own Date, as an IMF-fixdate: a hit carries it, with Age beside
    /// it (RFC 9111 §4), rather than the time of the hit. `None` only for an entry built from
    /// fields that had no valid Date (the fill always supplies one, RFC 9110 §6.6.1).
    pub date: Option<HeaderValue>,
    pub body: Bytes,
    /// The caller's pre-encoded form of status line and headers (e.g. HTTP/1.1 lines); opaque
    /// here, counted in the size.
    pub wire_head: Bytes,
    pub freshness: Freshness,
    /// For each field named by the response's Vary, the request's normalised value (`None`:
    /// absent), in Vary order without duplicates.
    pub vary: Vec<(HeaderName, Option<Bytes>)>,
    pub etag: Option<Bytes>,
    pub last_modified: Option<SystemTime>,
    /// The response's Vary had a member that is not a field name: matches no request.
    /// ([`crate::storable`] refuses such responses; this guards callers that skip it.)
    vary_unmatchable: bool,
    size: usize,
}

/// What a stored entry may be used for, for one request at one `now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryState {
    /// Serve it: fresh, or stale by no more than the request's max-stale allows.
    Fresh,
    /// Revalidate. Meanwhile it may be served if `can_serve_while_revalidate` (RFC 5861 §3),
    /// and if the origin fails, if `can_serve_if_error` (RFC 5861 §4).
    Stale {
        can_serve_while_revalidate: bool,
        can_serve_if_error: bool,
    },
    /// Revalidate before serving, and never serve it stale: response no-cache, stale with
    /// must-revalidate (on an origin failure, 504 per RFC 9111 §5.2.2.2), or the request's
    /// no-cache, max-age or min-fresh rules this entry out.
    MustRevalidate,
}

impl Entry {
    /// Builds an entry from a response [`crate::storable`] accepted, and the headers of the
    /// request it answered (for the Vary values). A Date among `headers` becomes
    /// [`Entry::date`] (re-formatted as an IMF-fixdate) and leaves the map, so that the
    /// wire head and the fields a hit writes never repeat it.
    pub fn new(
        status: StatusCode,
        mut headers: HeaderMap,
        body: Bytes,
        wire_head: Bytes,
        freshness: Freshness,
        request_headers: &HeaderMap,
    ) -> Entry {
        let (vary, vary_unmatchable) = match vary_names(&headers) {
            Some(names) => (vary_values(&names, request_headers), false),
            None => (Vec::new(), true),
        };
        let etag = headers
            .get(ETAG)
            .map(|v| Bytes::copy_from_slice(v.as_bytes().trim_ascii()));
        let last_modified = directives::date(&headers, LAST_MODIFIED);
        let date = directives::date(&headers, DATE).map(directives::imf_fixdate);
        headers.remove(DATE);
        let mut entry = Entry {
            status,
            headers,
            date,
            body,
            wire_head,
            freshness,
            vary,
            etag,
            last_modified,
            vary_unmatchable,
            size: 0,
        };
        entry.size = entry.compute_size();
        entry
    }

    fn compute_size(&self) -> usize {
        let headers: usize = self
            .headers
            .iter()
            .map(|(n, v)| n.as_str().len() + v.len() + HEADER_OVERHEAD_BYTES)
            .sum();
        let vary: usize = self
            .vary
            .iter()
            .map(|(n, v)| {
                n.as_str().len() + v.as_ref().map_or(0, Bytes::len) + HEADER_OVERHEAD_BYTES
            })
            .sum();
        let validators = self.etag.as_ref().map_or(0, Bytes::len);
        let validators = validators + self.date.as_ref().map_or(0, HeaderValue::len);
        ENTRY_OVERHEAD_BYTES + headers + vary + validators + self.body.len() + self.wire_head.len()
    }

    /// The bytes this entry is charged in the store: headers, body, wire head, Vary values,
    /// validators and [`ENTRY_OVERHEAD_BYTES`].
    pub fn size(&self) -> usize {
        self.size
    }

    /// RFC 9111 §4.2.3 current_age = corrected_initial_age + resident_time. A `now` before
    /// the arrival (a clock step back) counts as no resident time.
    pub fn age(&self, now: SystemTime) -> Duration {
        let resident = now
            .duration_since(self.freshness.response_time)
            .unwrap_or(Duration::ZERO);
        self.freshness
            .corrected_initial_age
            .saturating_add(resident)
    }

    /// Whether this entry can answer `request` at `now` (RFC 9111 §4.2, §5.2.1; RFC 5861).
    pub fn state(&self, now: SystemTime, request: &RequestCacheControl) -> EntryState {
        let f = &self.freshness;
        if f.no_cache {
            return EntryState::MustRevalidate;
        }
        let age = self.age(now);
        let fresh = f.lifetime > age;
        // RFC 8246: an immutable response is not revalidated during its lifetime, even when
        // the client asks (a browser reload sends no-cache or max-age=0).
        let asks_revalidation = request.no_cache || request.max_age.is_some_and(|m| age > secs(m));
        if asks_revalidation && !(fresh && f.immutable) {
            return EntryState::MustRevalidate;
        }
        if fresh {
            let left = f.lifetime - age;
            return match request.min_fresh {
                Some(m) if left < secs(m) => EntryState::MustRevalidate,
                _ => EntryState::Fresh,
            };
        }
        // A stale entry cannot be fresh for min-fresh more seconds either.
        if f.must_revalidate || request.min_fresh.is_some() {
            return EntryState::MustRevalidate;
        }
        let staleness = age - f.lifetime;
        let stale_ok = match request.max_stale {
            Some(None) => true,
            Some(Some(n)) => staleness <= secs(n),
            None => false,
        };
        if stale_ok {
            return EntryState::Fresh;
        }
        EntryState::Stale {
            can_serve_while_revalidate: staleness < f.stale_while_revalidate,
            can_serve_if_error: staleness < f.stale_if_error,
        }
    }

    /// Whether this variant was selected by the same values of the Vary'd request headers
    /// (RFC 9111 §4.1), after [`normalize_header`].
    pub fn matches_vary<F: RequestFields + ?Sized>(&self, request_headers: &F) -> bool {
        !self.vary_unmatchable
            && self
                .vary
                .iter()
                .all(|(name, value)| vary_value_matches(request_headers, name, value.as_deref()))
    }

    /// Whether `other` selects the same variant: same Vary names and values.
    pub(crate) fn same_variant(&self, other: &Entry) -> bool {
        self.vary_unmatchable == other.vary_unmatchable && self.vary == other.vary
    }

    /// Whether `other` was stored under the same Vary field names (in any order).
    pub(crate) fn same_vary_names(&self, other: &Entry) -> bool {
        self.vary.len() == other.vary.len()
            && self
                .vary
                .iter()
                .all(|(n, _)| other.vary.iter().any(|(m, _)| m == n))
    }
}

/// The field names of every Vary line, lowercased, deduplicated, in order; `None` for `*` or a
/// member that is not a valid field name (both match no later request, RFC 9111 §4.1).
pub(crate) fn vary_names(headers: &HeaderMap) -> Option<Vec<HeaderName>> {
    let mut names: Vec<HeaderName> = Vec::new();
    for line in headers.get_all(VARY) {
        for member in line.as_bytes().split(|&b| b == b',') {
            let member = member.trim_ascii();
            if member.is_empty() {
                continue;
            }
            if member == b"*" {
                return None;
            }
            let name = HeaderName::from_bytes(member).ok()?;
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    Some(names)
}

fn vary_values(names: &[HeaderName], request: &HeaderMap) -> Vec<(HeaderName, Option<Bytes>)> {
    names
        .iter()
        .map(|n| (n.clone(), normalize_header(request, n)))
        .collect()
}

/// Whether the request's value of `name` normalises to `stored`. Fast path without allocating:
/// one line equal byte for byte to the stored value (normalisation is idempotent, so it would
/// normalise to itself), which is what a given client sends every time.
fn vary_value_matches<F: RequestFields + ?Sized>(
    request: &F,
    name: &HeaderName,
    stored: Option<&[u8]>,
) -> bool {
    let mut lines = request.values(name);
    match (lines.next(), lines.next(), stored) {
        (None, _, stored) => stored.is_none(),
        (Some(_), _, None) => false,
        (Some(line), None, Some(stored)) if line == stored => true,
        // The hit path for the commonest Vary: no allocation either.
        (Some(_), _, Some(stored)) if name == ACCEPT_ENCODING => {
            let lines = request.values(name);
            CodingList::of(accepted_codings(lines)).as_bytes() == stored
        }
        _ => normalize_header(request, name).as_deref() == stored,
    }
}

/// Headers whose value is a list of case-insensitive tokens, so lowercasing and respacing
/// cannot merge two values that mean different things.
const TOKEN_LIST_HEADERS: &[&str] = &[
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
];

/// The normalised value of a Vary'd request header (RFC 9111 §4.1 allows normalising values
/// known to be equivalent): all lines joined with `", "` and trimmed. For the `Accept*` token
/// lists also lowercased, with each member trimmed, inner whitespace runs collapsed to one
/// space, and empty members dropped. `Accept-Encoding` goes further: it becomes the set of
/// codings it accepts ([`normalize_accept_encoding`]). Other headers keep their case and inner
/// spacing: for `Cookie` or `Authorization`, `a=B` and `a=b` are different users.
pub fn normalize_header<F: RequestFields + ?Sized>(
    headers: &F,
    name: &HeaderName,
) -> Option<Bytes> {
    let mut lines = headers.values(name).peekable();
    lines.peek()?;
    if name == ACCEPT_ENCODING {
        return Some(normalize_accept_encoding(lines));
    }
    let token_list = TOKEN_LIST_HEADERS.contains(&name.as_str());
    let mut out = Vec::new();
    for line in lines {
        if token_list {
            for member in line.split(|&b| b == b',') {
                push_member(&mut out, member);
            }
        } else {
            let value = line.trim_ascii();
            if !out.is_empty() {
                out.extend_from_slice(b", ");
            }
            out.extend_from_slice(value);
        }
    }
    Some(Bytes::from(out))
}

/// The content codings Squall knows, in the order a normalised `Accept-Encoding` lists them.
const CODINGS: [&[u8]; 5] = [b"br", b"deflate", b"gzip", b"identity", b"zstd"];
const IDENTITY: u8 = 1 << 3;
/// The normalised value that accepts nothing, not even identity: an empty string would mean
/// "identity only" when read again.
const ACCEPTS_NOTHING: &[u8] = b"identity;q=0";

/// An `Accept-Encoding` value (all its lines) as the codings of [`CODINGS`] it accepts (RFC
/// 9110 §12.5.3), sorted and joined with `", "`: `gzip, deflate, br` and `br;q=1, GZIP;q=0.9,
/// deflate` are both `br, deflate, gzip, identity`. What is accepted, not the order of
/// preference, is what decides whether a stored response may answer, so the weights only
/// count as zero or not:
/// - a coding is accepted when listed with a weight above 0, excluded when listed with
///   `q=0` (anywhere: a client that refuses a coding once never gets it);
/// - `*` stands for every coding not listed by name, with its weight;
/// - `identity` is accepted unless excluded by name or by `*;q=0` (an empty value accepts
///   identity only);
/// - `x-gzip` is `gzip` (RFC 9110 §8.4.1.3); other codings are dropped, and so is a member
///   with an unreadable weight.
///
/// The empty set is written `identity;q=0`, so that normalising is idempotent.
pub fn normalize_accept_encoding<'a>(lines: impl Iterator<Item = &'a [u8]>) -> Bytes {
    Bytes::copy_from_slice(CodingList::of(accepted_codings(lines)).as_bytes())
}

/// The codings an `Accept-Encoding` value accepts, as bits of [`CODINGS`] (see
/// [`normalize_accept_encoding`]).
fn accepted_codings<'a>(lines: impl Iterator<Item = &'a [u8]>) -> u8 {
    let (mut accepted, mut refused, mut star) = (0u8, 0u8, None);
    for member in lines.flat_map(|l| l.split(|&b| b == b',')) {
        let mut parts = member.split(|&b| b == b';');
        let coding = parts.next().unwrap_or_default().trim_ascii();
        if coding.is_empty() {
            continue;
        }
        let Some(positive) = weight_is_positive(parts) else {
            continue;
        };
        if coding == b"*" {
            star = Some(star.unwrap_or(true) && positive);
            continue;
        }
        let bits = coding_bit(coding);
        if positive {
            accepted |= bits;
        } else {
            refused |= bits;
        }
    }
    let listed = accepted | refused;
    let mut set = accepted & !refused;
    match star {
        Some(true) => set |= !listed,
        Some(false) => {}
        None => set |= IDENTITY & !listed,
    }
    set & ((1 << CODINGS.len()) - 1)
}

/// A set of codings written out on the stack: the names joined with `", "`, or
/// [`ACCEPTS_NOTHING`].
struct CodingList {
    bytes: [u8; 40],
    len: usize,
}

impl CodingList {
    fn of(set: u8) -> CodingList {
        let mut list = CodingList {
            bytes: [0; 40],
            len: 0,
        };
        if set == 0 {
            list.push(ACCEPTS_NOTHING);
        }
        for (i, coding) in CODINGS.iter().enumerate() {
            if set & (1 << i) != 0 {
                if list.len > 0 {
                    list.push(b", ");
                }
                list.push(coding);
            }
        }
        list
    }

    fn push(&mut self, bytes: &[u8]) {
        self.bytes[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

// Every coding with its separator fits, and so does the empty set's spelling.
const _: () = {
    let mut total = 0;
    let mut i = 0;
    while i < CODINGS.len() {
        total += CODINGS[i].len() + 2;
        i += 1;
    }
    assert!(total <= 40 && ACCEPTS_NOTHING.len() <= 40);
};

/// The bit of a coding in [`CODINGS`] (case-insensitive); 0 for one Squall does not know.
fn coding_bit(coding: &[u8]) -> u8 {
    let coding = if coding.eq_ignore_ascii_case(b"x-gzip") {
        &b"gzip"[..]
    } else {
        coding
    };
    (CODINGS.iter().position(|c| c.eq_ignore_ascii_case(coding))).map_or(0, |i| 1 << i)
}

/// Whether a member's parameters give it a weight above 0 (no `q` is 1); `None` for a weight
/// that is not a qvalue (RFC 9110 §12.4.2).
fn weight_is_positive<'a>(params: impl Iterator<Item = &'a [u8]>) -> Option<bool> {
    let mut positive = true;
    for param in params {
        let param = param.trim_ascii();
        let Some(value) = param
            .strip_prefix(b"q=")
            .or_else(|| param.strip_prefix(b"Q="))
        else {
            continue;
        };
        positive = match value {
            [b'0'] | [b'0', b'.'] => false,
            [b'0', b'.', digits @ ..] if digits.len() <= 3 => {
                if !digits.iter().all(u8::is_ascii_digit) {
                    return None;
                }
                digits.iter().any(|&d| d != b'0')
            }
            [b'1'] | [b'1', b'.'] => true,
            [b'1', b'.', zeros @ ..] if zeros.len() <= 3 && zeros.iter().all(|&d| d == b'0') => {
                true
            }
            _ => return None,
        };
    }
    Some(positive)
}

fn push_member(out: &mut Vec<u8>, member: &[u8]) {
    let member = member.trim_ascii();
    if member.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.extend_from_slice(b", ");
    }
    let mut in_space = false;
    for &b in member {
        if is_ows(b) {
            in_space = true;
            continue;
        }
        if in_space {
            out.push(b' ');
            in_space = false;
        }
        out.push(b.to_ascii_lowercase());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn normalisation() {
        let al = HeaderName::from_static("accept-language");
        let h = map(&[
            ("accept-language", " EN ,  De;q=0.5 , "),
            ("accept-language", "x"),
        ]);
        assert_eq!(normalize_header(&h, &al).unwrap(), "en, de;q=0.5, x");
        let h = map(&[("accept-language", "en,  fr")]);
        assert_eq!(normalize_header(&h, &al).unwrap(), "en, fr");
        let h = map(&[("accept-language", "en;  q=1")]);
        assert_eq!(normalize_header(&h, &al).unwrap(), "en; q=1");
        assert_eq!(normalize_header(&HeaderMap::new(), &al), None);
        let cookie = HeaderName::from_static("cookie");
        let h = map(&[("cookie", " a=B "), ("cookie", "c=D")]);
        assert_eq!(normalize_header(&h, &cookie).unwrap(), "a=B, c=D");
    }

    /// Byte-exact `Accept-Encoding` values and the set each one normalises to.
    #[test]
    fn accept_encoding_becomes_the_sorted_set_of_known_codings_it_accepts() {
        let ae = HeaderName::from_static("accept-encoding");
        let norm = |lines: &[&str]| {
            let pairs: Vec<_> = lines.iter().map(|l| ("accept-encoding", *l)).collect();
            normalize_header(&map(&pairs), &ae).unwrap()
        };
        let all = "br, deflate, gzip, identity";
        for value in [
            "gzip, deflate, br",
            "br, gzip;q=0.9, deflate",
            "GZIP,DEFLATE,BR",
            " br ;q=1.000 , x-gzip;q=0.001,deflate;Q=0.5,,",
            "gzip, deflate, br, compress",
            "gzip, deflate, br;q=1., foo;q=0",
        ] {
            assert_eq!(norm(&[value]), all, "{value:?}");
            let request = map(&[("accept-encoding", value)]);
            assert!(vary_value_matches(&request, &ae, Some(all.as_bytes())));
            assert!(!vary_value_matches(&request, &ae, Some(b"gzip, identity")));
        }
        let nothing = map(&[("accept-encoding", "*;q=0")]);
        assert!(vary_value_matches(&nothing, &ae, Some(ACCEPTS_NOTHING)));
        assert_eq!(norm(&["gzip", "deflate, br"]), all, "lines join");
        // Absent is not empty: an empty value accepts identity only.
        assert_eq!(normalize_header(&HeaderMap::new(), &ae), None);
        assert_eq!(norm(&[""]), "identity");
        assert_eq!(norm(&["compress"]), "identity");
        // q=0 excludes, wherever the coding is listed.
        assert_eq!(norm(&["gzip, br;q=0"]), "gzip, identity");
        assert_eq!(norm(&["gzip;q=0.000, br, gzip"]), "br, identity");
        assert_eq!(norm(&["gzip, identity;q=0"]), "gzip");
        // `*` stands for what is not listed, with its weight.
        assert_eq!(norm(&["*"]), "br, deflate, gzip, identity, zstd");
        assert_eq!(norm(&["gzip;q=0, *"]), "br, deflate, identity, zstd");
        assert_eq!(norm(&["br, *;q=0"]), "br");
        assert_eq!(norm(&["br, identity, *;q=0"]), "br, identity");
        assert_eq!(norm(&["*;q=0"]), ACCEPTS_NOTHING);
        assert_eq!(norm(&["identity;q=0"]), ACCEPTS_NOTHING);
        // A weight that is no qvalue drops its member (here gzip; identity stays implied).
        for bad in [
            "gzip;q=2",
            "gzip;q=0.5000",
            "gzip;q=abc",
            "gzip;q=",
            "gzip;q=1.5",
        ] {
            assert_eq!(norm(&[bad]), "identity", "{bad:?}");
        }
        assert_eq!(norm(&["zstd;q=0.1;level=3"]), "identity, zstd");
        assert_eq!(norm(&["gzip;foo=bar"]), "gzip, identity");
    }

    #[test]
    fn normalisation_is_idempotent() {
        for (name, value) in [
            ("accept-encoding", " GZIP ,  Br;q=0.5 ,, x "),
            ("accept-encoding", "identity;q=0"),
            ("accept-encoding", ""),
            ("accept-language", " EN ,  De;q=0.5 ,, x "),
            ("accept-language", "en-US,en;q=0.9"),
            ("cookie", "  a=B;  c=D "),
            ("origin", "https://a.example"),
        ] {
            let name = HeaderName::from_static(name);
            let once = normalize_header(&map(&[(name.as_str(), value)]), &name).unwrap();
            let mut h = HeaderMap::new();
            h.insert(
                name.clone(),
                HeaderValue::from_maybe_shared(once.clone()).unwrap(),
            );
            assert_eq!(normalize_header(&h, &name).unwrap(), once, "{name}");
            assert!(vary_value_matches(&h, &name, Some(&once)));
        }
    }

    #[test]
    fn vary_name_lists() {
        let names = vary_names(&map(&[
            ("vary", "Accept-Encoding, accept-encoding"),
            ("vary", "Origin"),
        ]));
        assert_eq!(names.unwrap(), ["accept-encoding", "origin"]);
        assert_eq!(vary_names(&map(&[("vary", "a, *")])), None);
        assert_eq!(vary_names(&map(&[("vary", "a b")])), None);
        assert_eq!(vary_names(&map(&[("vary", " , ")])).unwrap().len(), 0);
    }
}
