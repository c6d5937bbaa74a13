//! Validation: answering a client's conditional request from an entry (RFC 9110 §13.2.2),
//! revalidating an entry with the origin (RFC 9111 §4.3.1), and folding the origin's 304 into
//! a new entry (RFC 9111 §4.3.4, §3.2).

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{
    AGE, CONNECTION, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE, DATE, ETAG, HeaderName,
    HeaderValue, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED, PROXY_AUTHENTICATE, TE, TRAILER,
    TRANSFER_ENCODING, UPGRADE,
};
use http::{HeaderMap, Method, StatusCode};

use crate::RequestFields;
use crate::directives::{self, EntityTag, TagList, tag_list};
use crate::entry::Entry;
use crate::policy::{Freshness, NotStorable, storable};

/// Whether the client's conditional GET/HEAD can be answered 304 from `entry`
/// (RFC 9110 §13.2.2 steps 3 and 4). If-None-Match, when present, decides alone (weak
/// comparison, `*` matches any entry); If-Modified-Since is read only without it, and only
/// against the entry's Last-Modified. Only 2xx entries are ever 304'd (§13.2.1). A malformed
/// precondition is ignored: the cost is a full response instead of a 304.
///
/// If-Match and If-Unmodified-Since (steps 1 and 2) are the caller's: a request with either
/// should go to the origin, which answers 412 if they fail.
pub fn not_modified<F: RequestFields + ?Sized>(request_headers: &F, entry: &Entry) -> bool {
    if !entry.status.is_success() {
        return false;
    }
    if request_headers.has(&IF_NONE_MATCH) {
        return match tag_list(request_headers.values(&IF_NONE_MATCH)) {
            Some(TagList::Any) => true,
            Some(TagList::Tags(tags)) => entry
                .etag
                .as_deref()
                .and_then(EntityTag::parse)
                .is_some_and(|current| tags.iter().any(|t| t.weak_eq(&current))),
            None => false,
        };
    }
    match (
        request_headers
            .first(&IF_MODIFIED_SINCE)
            .and_then(directives::parse_date_bytes),
        entry.last_modified,
    ) {
        (Some(since), Some(modified)) => modified <= since,
        _ => false,
    }
}

/// Conditional headers for revalidating `entry` with the origin (RFC 9111 §4.3.1): the stored
/// ETag as If-None-Match and the stored Last-Modified as If-Modified-Since, whichever exist.
pub fn revalidation_headers(entry: &Entry) -> Vec<(HeaderName, HeaderValue)> {
    let mut out = Vec::with_capacity(2);
    if let Some(tag) = entry.etag.as_deref()
        && let Ok(value) = HeaderValue::from_bytes(tag)
    {
        out.push((IF_NONE_MATCH, value));
    }
    if let Some(modified) = entry.last_modified
        && let Ok(value) = HeaderValue::from_str(&httpdate::fmt_http_date(modified))
    {
        out.push((IF_MODIFIED_SINCE, value));
    }
    out
}

/// The revalidating exchange that produced a 304, for [`freshen`]. `request_headers` are the
/// headers of the client request being served (they matched the entry's Vary);
/// `request_time` and `response_time` are those of the conditional request to the origin.
#[derive(Clone, Copy, Debug)]
pub struct Exchange<'a> {
    pub request_headers: &'a HeaderMap,
    pub default_ttl: Option<Duration>,
    pub request_time: SystemTime,
    pub response_time: SystemTime,
}

/// A 304 folded into a stored response.
#[derive(Debug)]
pub struct Freshened {
    /// The updated response, to serve now.
    pub entry: Entry,
    /// `Ok`: store `entry` in place of the old one. `Err`: the merged response may no longer
    /// be stored (the 304 brought no-store, private, Set-Cookie, ...); serve `entry` to this
    /// client, whose freshness then says "revalidate", and remove the old variant.
    pub storable: Result<(), NotStorable>,
}

/// Header fields a 304 does not overwrite in the stored response (RFC 9111 §3.2): framing and
/// content coding describe the stored body, not the 304; hop-by-hop fields are not stored.
const NOT_UPDATED: &[HeaderName] = &[
    CONTENT_LENGTH,
    CONTENT_ENCODING,
    CONTENT_RANGE,
    TRANSFER_ENCODING,
    CONNECTION,
    TE,
    TRAILER,
    UPGRADE,
    PROXY_AUTHENTICATE,
];

/// RFC 9111 §4.3.4: the origin answered `entry`'s revalidation with 304. Returns `None` when
/// the 304 names a different validator than the entry's (it then does not update this entry,
/// and the caller should fetch the resource unconditionally). Otherwise the 304's header fields
/// replace the stored ones (except [`NOT_UPDATED`]; the stored Age is dropped, since the age
/// now comes from the 304), the freshness is recomputed from the merged fields as if a GET
/// response with the stored status had just arrived, and `encode_head` builds the new wire
/// head from the status and merged headers.
pub fn freshen(
    entry: &Entry,
    response_304_headers: &HeaderMap,
    exchange: &Exchange<'_>,
    encode_head: impl FnOnce(StatusCode, &HeaderMap) -> Bytes,
) -> Option<Freshened> {
    if !validator_selects(entry, response_304_headers) {
        return None;
    }
    let mut headers = merge_headers(&entry.headers, response_304_headers);
    // The stored Date stays unless the 304 brought its own (§3.2).
    if let Some(date) = entry.date.as_ref().filter(|_| !headers.contains_key(DATE)) {
        headers.insert(DATE, date.clone());
    }
    let result = storable(
        &Method::GET,
        exchange.request_headers,
        entry.status,
        &headers,
        exchange.default_ttl,
        exchange.request_time,
        exchange.response_time,
    );
    let (freshness, storable) = match result {
        Ok(f) => (f, Ok(())),
        Err(why) => (revalidate_always(exchange.response_time), Err(why)),
    };
    let wire_head = encode_head(entry.status, &headers);
    let entry = Entry::new(
        entry.status,
        headers,
        entry.body.clone(),
        wire_head,
        freshness,
        exchange.request_headers,
    );
    Some(Freshened { entry, storable })
}

/// §4.3.4: a strong ETag in the 304 must strongly match the entry's; a weak one weakly; without
/// an ETag, a Last-Modified must equal the entry's; with neither, the 304 is for the entry the
/// request was built from.
fn validator_selects(entry: &Entry, headers: &HeaderMap) -> bool {
    let stored = entry.etag.as_deref().and_then(EntityTag::parse);
    if let Some(new) = headers.get(ETAG) {
        let Some(new) = EntityTag::parse(new.as_bytes()) else {
            return false;
        };
        return stored.is_some_and(|s| {
            if new.weak {
                s.weak_eq(&new)
            } else {
                s.strong_eq(&new)
            }
        });
    }
    match headers.get(LAST_MODIFIED) {
        Some(value) => {
            directives::parse_date(value).is_some_and(|new| Some(new) == entry.last_modified)
        }
        None => true,
    }
}

fn merge_headers(stored: &HeaderMap, update: &HeaderMap) -> HeaderMap {
    let mut merged = stored.clone();
    merged.remove(AGE);
    for name in update.keys() {
        if NOT_UPDATED.contains(name) {
            continue;
        }
        merged.remove(name);
        for value in update.get_all(name) {
            merged.append(name.clone(), value.clone());
        }
    }
    merged
}

/// The freshness of a response served once but not stored: stale at once, never served again
/// without revalidation.
pub(crate) fn revalidate_always(response_time: SystemTime) -> Freshness {
    Freshness {
        lifetime: Duration::ZERO,
        corrected_initial_age: Duration::ZERO,
        response_time,
        stale_while_revalidate: Duration::ZERO,
        stale_if_error: Duration::ZERO,
        must_revalidate: true,
        no_cache: true,
        immutable: false,
    }
}
