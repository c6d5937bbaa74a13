//! The lookup decision as a table of (entry, request directives, now), and the invalidation
//! rule for methods that are not safe (RFC 9111 §4.4).

mod common;

use std::sync::Arc;

use common::{at, headers, t0};
use http::{HeaderMap, Method, StatusCode};
use squall_cache::{
    CacheKey, Decision, Entry, Invalidation, Store, decide, request_cache_control, storable,
};

/// An entry stored at t0 from a 200 with these response fields.
fn entry(response: &[(&str, &str)]) -> Arc<Entry> {
    let request = HeaderMap::new();
    let response = headers(response);
    let fresh = storable(
        &Method::GET,
        &request,
        StatusCode::OK,
        &response,
        None,
        t0(),
        t0(),
    );
    Arc::new(Entry::new(
        StatusCode::OK,
        response,
        "x".into(),
        "".into(),
        fresh.expect("storable"),
        &request,
    ))
}

/// A stored entry (if any), the request's fields, seconds after t0, the expected decision.
type Case<'a> = (
    Option<&'a Arc<Entry>>,
    &'a [(&'a str, &'a str)],
    u64,
    &'a str,
);

fn decision(entry: Option<Arc<Entry>>, request: &[(&str, &str)], secs: u64) -> &'static str {
    let control = request_cache_control(&headers(request));
    match decide(entry, &control, at(secs)) {
        Decision::Hit(_) => "hit",
        Decision::StaleWhileRevalidate(_) => "swr",
        Decision::Revalidate(_) => "revalidate",
        Decision::Miss => "miss",
        Decision::GatewayTimeout => "504",
    }
}

#[test]
fn the_lookup_decision() {
    let plain = entry(&[("cache-control", "max-age=60"), ("etag", "\"v\"")]);
    let swr = entry(&[("cache-control", "max-age=60, stale-while-revalidate=30")]);
    let no_cache = entry(&[
        ("cache-control", "no-cache, max-age=600"),
        ("etag", "\"v\""),
    ]);
    let strict = entry(&[(
        "cache-control",
        "max-age=60, must-revalidate, stale-while-revalidate=30",
    )]);
    let only = [("cache-control", "only-if-cached")];
    let cases: &[Case<'_>] = &[
        (None, &[], 0, "miss"),
        (None, &only, 0, "504"),
        (Some(&plain), &[], 59, "hit"),
        (Some(&plain), &[], 60, "revalidate"),
        (
            Some(&plain),
            &[("cache-control", "max-stale=10")],
            70,
            "hit",
        ),
        (
            Some(&plain),
            &[("cache-control", "max-stale=10")],
            71,
            "revalidate",
        ),
        (
            Some(&plain),
            &[("cache-control", "no-cache")],
            1,
            "revalidate",
        ),
        (Some(&plain), &[("pragma", "no-cache")], 1, "revalidate"),
        (
            Some(&plain),
            &[("cache-control", "max-age=0")],
            1,
            "revalidate",
        ),
        (Some(&plain), &only, 59, "hit"),
        (Some(&plain), &only, 61, "504"),
        (Some(&swr), &[], 59, "hit"),
        (Some(&swr), &[], 61, "swr"),
        (Some(&swr), &[], 89, "swr"),
        (Some(&swr), &[], 90, "revalidate"),
        (Some(&swr), &only, 61, "504"),
        (Some(&strict), &[], 61, "revalidate"),
        (Some(&no_cache), &[], 0, "revalidate"),
        (Some(&no_cache), &only, 0, "504"),
    ];
    for (i, (stored, request, secs, expected)) in cases.iter().enumerate() {
        let got = decision(stored.cloned(), request, *secs);
        assert_eq!(got, *expected, "case {i}: {request:?} at {secs} s");
    }
}

fn key(path: &str) -> CacheKey {
    CacheKey::new("http", b"example.com", path.as_bytes())
}

#[test]
fn only_methods_that_are_not_safe_invalidate_when_they_succeed() {
    for method in [Method::GET, Method::HEAD, Method::OPTIONS, Method::TRACE] {
        let made = Invalidation::for_request(&method, || panic!("{method}: no key needed"));
        assert!(made.is_none(), "{method} is safe");
    }
    let purge = Method::from_bytes(b"PURGE").unwrap();
    let not_safe = [
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::PATCH,
        purge,
    ];
    for method in not_safe {
        for (status, purges) in [
            (200, true),
            (201, true),
            (204, true),
            (301, true),
            (303, true),
            (304, true),
            (400, false),
            (404, false),
            (500, false),
            (503, false),
        ] {
            let store = Store::new(1 << 20, 2, 1.0);
            let stored = entry(&[("cache-control", "max-age=60")]);
            assert!(store.insert(key("/a"), stored.clone()));
            assert!(store.insert(key("/b"), stored));
            let invalidation = Invalidation::for_request(&method, || key("/a")).unwrap();
            assert_eq!(invalidation.key(), &key("/a"));
            let status = StatusCode::from_u16(status).unwrap();
            assert_eq!(invalidation.applies(status), purges, "{method} {status}");
            let removed = invalidation.on_response(status, &store);
            assert_eq!(removed, usize::from(purges), "{method} {status}");
            let left = store.lookup(&key("/a"), &HeaderMap::new()).is_some();
            assert_eq!(left, !purges, "{method} {status}");
            assert!(
                store.lookup(&key("/b"), &HeaderMap::new()).is_some(),
                "other URLs stay"
            );
        }
    }
}

#[test]
fn reload_directives_can_be_ignored_and_a_waited_for_fetch_satisfies_them() {
    use squall_cache::decide_after_wait;
    let plain = entry(&[("cache-control", "max-age=60"), ("etag", "\"v\"")]);
    let show = |d: Decision| match d {
        Decision::Hit(_) => "hit",
        Decision::Revalidate(_) => "revalidate",
        _ => "other",
    };
    for reload in [
        &[("cache-control", "no-cache")][..],
        &[("cache-control", "max-age=0")][..],
        &[("pragma", "no-cache")][..],
    ] {
        let control = request_cache_control(&headers(reload));
        assert_eq!(decision(Some(plain.clone()), reload, 10), "revalidate");
        let ignored = control.without_reload();
        assert_eq!(show(decide(Some(plain.clone()), &ignored, at(10))), "hit");
        // Stored at t0: a request that parked at t0 or before is answered by it, one that
        // parked later is not.
        let waited = |since| {
            show(decide_after_wait(
                Some(plain.clone()),
                &control,
                at(10),
                since,
            ))
        };
        assert_eq!(waited(t0()), "hit", "{reload:?}");
        assert_eq!(waited(at(1)), "revalidate", "{reload:?}");
    }
    // Other directives keep their meaning: a stale entry is still revalidated.
    let control = request_cache_control(&headers(&[("cache-control", "no-cache")]));
    assert_eq!(
        show(decide(
            Some(plain.clone()),
            &control.without_reload(),
            at(61)
        )),
        "revalidate"
    );
}
