//! Fuzz target: a request and a response whose header values are the input (one line per
//! field, in a fixed order: request Cache-Control, Pragma, Range, If-Range, Accept-Encoding;
//! response Cache-Control, Age, Date, Expires, Last-Modified, Vary, ETag, Surrogate-Key,
//! CDN-Cache-Control), through the public policy: request directives, lookup, storability,
//! the corrected initial age, an entry's age, state and Vary match, the Range answer and the
//! surrogate keys. Nothing may panic; what holds cheaply is checked (ages never shrink as the
//! clock moves on, ranges lie inside the body, keys within their bounds).
//!
//! (No `#![forbid(unsafe_code)]` here: `fuzz_target!` expands to a `#[no_mangle]` entry point,
//! which that lint counts against `unsafe_code`. This crate is outside the workspace.)
#![no_main]

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use libfuzzer_sys::fuzz_target;
use squall_cache::{
    CDN_CACHE_CONTROL, Entry, RangeAnswer, SURROGATE_KEY, SURROGATE_KEY_BYTES_MAX,
    SURROGATE_KEYS_MAX, corrected_initial_age, lookup_policy, range_answer, request_cache_control,
    storable, surrogate_keys,
};

const REQUEST: [HeaderName; 5] = [
    header::CACHE_CONTROL,
    header::PRAGMA,
    header::RANGE,
    header::IF_RANGE,
    header::ACCEPT_ENCODING,
];
const RESPONSE: [HeaderName; 9] = [
    header::CACHE_CONTROL,
    header::AGE,
    header::DATE,
    header::EXPIRES,
    header::LAST_MODIFIED,
    header::VARY,
    header::ETAG,
    SURROGATE_KEY,
    HeaderName::from_static(CDN_CACHE_CONTROL),
];

/// Fills `map` with one value per name from `lines`, skipping those that are not valid
/// field values (the codecs refuse them before the cache sees them).
fn fill<'a>(map: &mut HeaderMap, names: &[HeaderName], lines: &mut impl Iterator<Item = &'a [u8]>) {
    for name in names {
        let Some(line) = lines.next() else { return };
        if let Ok(value) = HeaderValue::from_bytes(line) {
            map.append(name.clone(), value);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut lines = data.split(|&b| b == b'\n');
    let mut request = HeaderMap::new();
    let mut response = HeaderMap::new();
    fill(&mut request, &REQUEST, &mut lines);
    fill(&mut response, &RESPONSE, &mut lines);
    let body_len = data.len() % 4096;
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);

    let directives = request_cache_control(&request);
    let _ = lookup_policy(&Method::GET, &request);
    let _ = lookup_policy(&Method::POST, &request);
    let age = corrected_initial_age(&response, now, now + Duration::from_secs(1));
    assert!(
        age >= Duration::from_secs(1),
        "the response delay counts: {age:?}"
    );

    let tags = surrogate_keys(&response);
    assert!(tags.len() <= SURROGATE_KEYS_MAX);
    assert!(
        tags.iter()
            .all(|t| !t.is_empty() && t.len() <= SURROGATE_KEY_BYTES_MAX)
    );

    let Ok(freshness) = storable(
        &Method::GET,
        &request,
        StatusCode::OK,
        &response,
        Some(Duration::from_secs(60)),
        now,
        now,
    ) else {
        return;
    };
    let body = Bytes::from(vec![b'x'; body_len]);
    let entry = Entry::new(
        StatusCode::OK,
        response,
        body,
        Bytes::new(),
        freshness,
        &request,
    );
    let early = entry.age(now);
    let later = entry.age(now + Duration::from_secs(3600));
    assert!(
        later >= early,
        "an entry grew younger: {early:?} then {later:?}"
    );
    let _ = entry.state(now, &directives);
    let _ = entry.state(now + Duration::from_secs(86_400 * 365), &directives);
    let _ = entry.matches_vary(&request);
    if let RangeAnswer::Partial(ranges) = range_answer(&request, &entry) {
        assert!(!ranges.is_empty());
        for range in ranges {
            assert!(range.first <= range.last && range.last < body_len as u64);
        }
    }
});
