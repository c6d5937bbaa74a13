//! A stored response and what it is worth at a given `now`: its age (RFC 9111 §4.2.3), its
//! state for a request's directives (§4.2, §5.2.1, RFC 5861), and which request header values
//! it was selected by (§4.1, Vary).

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{DATE, ETAG, HeaderName, HeaderValue, LAST_MODIFIED, VARY};
use http::{HeaderMap, StatusCode};

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
    pub fn matches_vary(&self, request_headers: &HeaderMap) -> bool {
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
fn vary_value_matches(request: &HeaderMap, name: &HeaderName, stored: Option<&[u8]>) -> bool {
    let mut lines = request.get_all(name).iter();
    match (lines.next(), lines.next(), stored) {
        (None, _, stored) => stored.is_none(),
        (Some(_), _, None) => false,
        (Some(line), None, Some(stored)) if line.as_bytes() == stored => true,
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
/// space, and empty members dropped. Other headers keep their case and inner spacing: for
/// `Cookie` or `Authorization`, `a=B` and `a=b` are different users.
pub fn normalize_header(headers: &HeaderMap, name: &HeaderName) -> Option<Bytes> {
    let mut lines = headers.get_all(name).iter().peekable();
    lines.peek()?;
    let token_list = TOKEN_LIST_HEADERS.contains(&name.as_str());
    let mut out = Vec::new();
    for line in lines {
        if token_list {
            for member in line.as_bytes().split(|&b| b == b',') {
                push_member(&mut out, member);
            }
        } else {
            let value = line.as_bytes().trim_ascii();
            if !out.is_empty() {
                out.extend_from_slice(b", ");
            }
            out.extend_from_slice(value);
        }
    }
    Some(Bytes::from(out))
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
        let ae = HeaderName::from_static("accept-encoding");
        let h = map(&[
            ("accept-encoding", " GZIP ,  Br;q=0.5 , "),
            ("accept-encoding", "x"),
        ]);
        assert_eq!(normalize_header(&h, &ae).unwrap(), "gzip, br;q=0.5, x");
        let h = map(&[("accept-encoding", "gzip,  deflate")]);
        assert_eq!(normalize_header(&h, &ae).unwrap(), "gzip, deflate");
        let h = map(&[("accept-encoding", "gzip;  q=1")]);
        assert_eq!(normalize_header(&h, &ae).unwrap(), "gzip; q=1");
        assert_eq!(normalize_header(&HeaderMap::new(), &ae), None);
        let cookie = HeaderName::from_static("cookie");
        let h = map(&[("cookie", " a=B "), ("cookie", "c=D")]);
        assert_eq!(normalize_header(&h, &cookie).unwrap(), "a=B, c=D");
    }

    #[test]
    fn normalisation_is_idempotent() {
        for (name, value) in [
            ("accept-encoding", " GZIP ,  Br;q=0.5 ,, x "),
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
