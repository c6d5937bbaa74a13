//! The per-request costs of the cache on the hot path: building a key, a hit in a full store
//! (read lock, Vary match, Arc clone), an insert that evicts, and the storability decision for
//! a typical response.
//!
//! Run: `cargo bench -p squall-cache` (add `-- hit` etc. to filter).

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use squall_cache::{CacheKey, Entry, Store, storable};

const OBJECTS: usize = 100_000;

fn response_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        "cache-control",
        HeaderValue::from_static("public, max-age=300, stale-while-revalidate=30"),
    );
    h.insert(
        "content-type",
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert("etag", HeaderValue::from_static("\"5f3a-1b2c\""));
    h.insert("vary", HeaderValue::from_static("Accept-Encoding"));
    h.insert(
        "date",
        HeaderValue::from_static("Mon, 01 Jan 2024 00:00:00 GMT"),
    );
    h
}

fn request_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        "accept-encoding",
        HeaderValue::from_static("gzip, deflate, br"),
    );
    h.insert("user-agent", HeaderValue::from_static("bench/1.0"));
    h
}

fn entry(now: SystemTime) -> Arc<Entry> {
    let (req, resp) = (request_headers(), response_headers());
    let freshness = storable(&Method::GET, &req, StatusCode::OK, &resp, None, now, now).unwrap();
    let body = Bytes::from(vec![b'x'; 1024]);
    Arc::new(Entry::new(
        StatusCode::OK,
        resp,
        body,
        Bytes::new(),
        freshness,
        &req,
    ))
}

fn key(i: usize) -> CacheKey {
    CacheKey::new(
        "https",
        b"www.example.com",
        format!("/static/{i}/app.js").as_bytes(),
    )
}

fn bench(c: &mut Criterion) {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_704_067_200);
    let value = entry(now);
    let keys: Vec<CacheKey> = (0..OBJECTS).map(key).collect();
    let req = request_headers();
    let resp = response_headers();

    c.bench_function("key", |b| b.iter(|| black_box(key(black_box(4242)))));

    let store = Store::new(Store::charge(&keys[0], &value) * OBJECTS, 64, 0.1);
    for k in &keys {
        store.insert(k.clone(), Arc::clone(&value));
    }
    let mut i = 0;
    c.bench_function("hit", |b| {
        b.iter(|| {
            i = (i + 7919) % OBJECTS;
            black_box(store.lookup(&keys[i], &req))
        })
    });

    // The same with a working set that stays in the CPU caches: the cost of the code itself.
    let hot = Store::new(Store::charge(&keys[0], &value) * 1_000, 4, 0.1);
    for k in &keys[..1_000] {
        hot.insert(k.clone(), Arc::clone(&value));
    }
    c.bench_function("hit_hot", |b| {
        b.iter(|| {
            i = (i + 7) % 1_000;
            black_box(hot.lookup(&keys[i], &req))
        })
    });

    let small = Store::new(Store::charge(&keys[0], &value) * 1_000, 64, 1.0);
    c.bench_function("insert_evict", |b| {
        b.iter(|| {
            i = (i + 7919) % OBJECTS;
            black_box(small.insert(keys[i].clone(), Arc::clone(&value)))
        })
    });

    c.bench_function("storable", |b| {
        b.iter(|| {
            black_box(storable(
                &Method::GET,
                &req,
                StatusCode::OK,
                &resp,
                None,
                now,
                now,
            ))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
