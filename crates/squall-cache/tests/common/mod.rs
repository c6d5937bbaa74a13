//! Helpers shared by the integration tests: a seeded PRNG (no dependency), header maps from
//! string pairs, a fixed epoch, and entries built the way the proxy builds them.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use squall_cache::{Entry, Freshness, storable};

/// SplitMix64: small, fast, and good enough for test traces.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), up to a negligible bias.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

pub fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    map
}

/// A fixed instant on a whole second: 2024-01-01T00:00:00Z.
pub fn t0() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_704_067_200)
}

pub fn at(secs: u64) -> SystemTime {
    t0() + Duration::from_secs(secs)
}

pub fn http_date(time: SystemTime) -> String {
    httpdate::fmt_http_date(time)
}

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A plain fresh-for-an-hour freshness arriving at t0.
pub fn fresh_for(lifetime: u64) -> Freshness {
    Freshness {
        lifetime: secs(lifetime),
        corrected_initial_age: Duration::ZERO,
        response_time: t0(),
        stale_while_revalidate: Duration::ZERO,
        stale_if_error: Duration::ZERO,
        must_revalidate: false,
        no_cache: false,
        immutable: false,
    }
}

/// A 200 entry with `body_len` bytes of body, built from response headers and request headers.
pub fn entry(response: &[(&str, &str)], request: &[(&str, &str)], body_len: usize) -> Arc<Entry> {
    Arc::new(Entry::new(
        StatusCode::OK,
        headers(response),
        Bytes::from(vec![b'x'; body_len]),
        Bytes::from_static(b"HTTP/1.1 200 OK\r\n"),
        fresh_for(3600),
        &headers(request),
    ))
}

/// The entry the proxy would store for this exchange at t0 (storable must accept it).
pub fn stored(
    request: &[(&str, &str)],
    response: &[(&str, &str)],
    default_ttl: Option<u64>,
) -> Entry {
    let req = headers(request);
    let resp = headers(response);
    let freshness = storable(
        &Method::GET,
        &req,
        StatusCode::OK,
        &resp,
        default_ttl.map(secs),
        t0(),
        t0(),
    )
    .expect("storable");
    Entry::new(
        StatusCode::OK,
        resp,
        Bytes::from_static(b"body"),
        Bytes::new(),
        freshness,
        &req,
    )
}
