//! Entries over time and validation: EntryState with a fake clock, request max-age, max-stale
//! and min-fresh, 304s for clients (`not_modified`), conditional headers for the origin, and
//! folding an origin 304 into a new entry (`freshen`).

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{at, fresh_for, headers, http_date, secs, stored, t0};
use http::header::{IF_MODIFIED_SINCE, IF_NONE_MATCH};
use http::{HeaderMap, StatusCode};
use squall_cache::{
    Entry, EntryState, Exchange, Freshness, NotStorable, RequestCacheControl, freshen,
    not_modified, revalidation_headers,
};

fn entry_with(freshness: Freshness) -> Entry {
    Entry::new(
        StatusCode::OK,
        HeaderMap::new(),
        Bytes::new(),
        Bytes::new(),
        freshness,
        &HeaderMap::new(),
    )
}

const STALE: fn(bool, bool) -> EntryState = |swr, sie| EntryState::Stale {
    can_serve_while_revalidate: swr,
    can_serve_if_error: sie,
};

#[test]
fn states_over_time() {
    let e = entry_with(Freshness {
        stale_while_revalidate: secs(30),
        stale_if_error: secs(60),
        ..fresh_for(100)
    });
    let any = RequestCacheControl::default();
    let rows = [
        (0, EntryState::Fresh),
        (99, EntryState::Fresh),
        (100, STALE(true, true)),
        (129, STALE(true, true)),
        (130, STALE(false, true)),
        (159, STALE(false, true)),
        (160, STALE(false, false)),
        (10_000, STALE(false, false)),
    ];
    for (now, want) in rows {
        assert_eq!(e.state(at(now), &any), want, "at +{now}s");
    }
    // A clock stepping back counts no resident time.
    assert_eq!(e.age(t0() - secs(50)), Duration::ZERO);
}

#[test]
fn initial_age_counts() {
    let e = entry_with(Freshness {
        corrected_initial_age: secs(20),
        ..fresh_for(100)
    });
    assert_eq!(e.age(at(30)), secs(50));
    assert_eq!(
        e.state(at(79), &RequestCacheControl::default()),
        EntryState::Fresh
    );
    assert_eq!(
        e.state(at(80), &RequestCacheControl::default()),
        STALE(false, false)
    );
}

#[test]
fn must_revalidate_and_no_cache() {
    let any = RequestCacheControl::default();
    let mr = entry_with(Freshness {
        must_revalidate: true,
        stale_while_revalidate: secs(30),
        stale_if_error: secs(30),
        ..fresh_for(100)
    });
    assert_eq!(mr.state(at(50), &any), EntryState::Fresh);
    assert_eq!(mr.state(at(100), &any), EntryState::MustRevalidate);
    let max_stale = RequestCacheControl {
        max_stale: Some(None),
        ..any
    };
    assert_eq!(mr.state(at(150), &max_stale), EntryState::MustRevalidate);

    let nc = entry_with(Freshness {
        no_cache: true,
        ..fresh_for(100)
    });
    assert_eq!(nc.state(at(0), &any), EntryState::MustRevalidate);
    assert_eq!(nc.state(at(500), &max_stale), EntryState::MustRevalidate);
}

#[test]
fn request_directives_against_an_entry() {
    let e = entry_with(Freshness {
        stale_while_revalidate: secs(30),
        ..fresh_for(100)
    });
    let req = |f: fn(&mut RequestCacheControl)| {
        let mut r = RequestCacheControl::default();
        f(&mut r);
        r
    };
    let no_cache = req(|r| r.no_cache = true);
    let max_age_10 = req(|r| r.max_age = Some(10));
    let max_age_0 = req(|r| r.max_age = Some(0));
    let min_fresh_60 = req(|r| r.min_fresh = Some(60));
    let min_fresh_40 = req(|r| r.min_fresh = Some(40));
    let max_stale_any = req(|r| r.max_stale = Some(None));
    let max_stale_60 = req(|r| r.max_stale = Some(Some(60)));
    let max_stale_10 = req(|r| r.max_stale = Some(Some(10)));
    #[rustfmt::skip]
    let rows = [
        ("no-cache, fresh", no_cache, 50, EntryState::MustRevalidate),
        ("max-age=10, age 50", max_age_10, 50, EntryState::MustRevalidate),
        ("max-age=10, age 10", max_age_10, 10, EntryState::Fresh),
        ("max-age=0, age 0", max_age_0, 0, EntryState::Fresh),
        ("max-age=0, age 1", max_age_0, 1, EntryState::MustRevalidate),
        ("min-fresh=60, 50 left", min_fresh_60, 50, EntryState::MustRevalidate),
        ("min-fresh=40, 50 left", min_fresh_40, 50, EntryState::Fresh),
        ("min-fresh, stale", min_fresh_40, 110, EntryState::MustRevalidate),
        ("stale, no max-stale", RequestCacheControl::default(), 150, STALE(false, false)),
        ("stale, max-stale", max_stale_any, 150, EntryState::Fresh),
        ("stale 50, max-stale=60", max_stale_60, 150, EntryState::Fresh),
        ("stale 50, max-stale=10", max_stale_10, 150, STALE(false, false)),
        ("stale 5, max-stale=10", max_stale_10, 105, EntryState::Fresh),
        ("stale 20, max-stale=10, swr", max_stale_10, 120, STALE(true, false)),
    ];
    for (name, request, now, want) in rows {
        assert_eq!(e.state(at(now), &request), want, "{name}");
    }
}

#[test]
fn immutable_ignores_reloads_while_fresh() {
    let e = entry_with(Freshness {
        immutable: true,
        ..fresh_for(100)
    });
    let reload = RequestCacheControl {
        no_cache: true,
        ..Default::default()
    };
    let max_age_0 = RequestCacheControl {
        max_age: Some(0),
        ..Default::default()
    };
    assert_eq!(e.state(at(50), &reload), EntryState::Fresh);
    assert_eq!(e.state(at(50), &max_age_0), EntryState::Fresh);
    assert_eq!(e.state(at(100), &reload), EntryState::MustRevalidate);
}

#[test]
fn vary_matching() {
    let e = stored(
        &[("accept-encoding", "GZIP,  br"), ("cookie", "s=A")],
        &[
            ("cache-control", "max-age=60"),
            ("vary", "Accept-Encoding, Cookie"),
        ],
        None,
    );
    assert_eq!(e.vary.len(), 2);
    let m = |pairs: &[(&str, &str)]| e.matches_vary(&headers(pairs));
    assert!(m(&[("accept-encoding", "gzip, br"), ("cookie", "s=A")]));
    assert!(m(&[
        ("accept-encoding", "gzip"),
        ("accept-encoding", "br"),
        ("cookie", "s=A")
    ]));
    assert!(!m(&[("accept-encoding", "gzip, br"), ("cookie", "s=a")]));
    // Accept-Encoding is the set of codings it accepts, in any order; another set is another
    // variant.
    assert!(m(&[("accept-encoding", "br, gzip"), ("cookie", "s=A")]));
    assert!(!m(&[("accept-encoding", "br"), ("cookie", "s=A")]));
    assert!(!m(&[("cookie", "s=A")]));
    // An absent header is a value too: it matches only absence.
    let absent = stored(
        &[],
        &[("cache-control", "max-age=60"), ("vary", "origin")],
        None,
    );
    assert!(absent.matches_vary(&HeaderMap::new()));
    assert!(!absent.matches_vary(&headers(&[("origin", "https://a")])));
    // Built without `storable`, a `Vary: *` entry matches nothing.
    let star = common::entry(&[("vary", "*")], &[], 0);
    assert!(!star.matches_vary(&HeaderMap::new()));
}

fn with_validators(etag: Option<&str>, last_modified: Option<u64>) -> Entry {
    let lm = last_modified.map(|s| http_date(t0() - secs(s)));
    let mut response = vec![("cache-control", "max-age=60")];
    if let Some(tag) = etag {
        response.push(("etag", tag));
    }
    if let Some(lm) = &lm {
        response.push(("last-modified", lm));
    }
    stored(&[], &response, None)
}

#[test]
fn client_conditionals() {
    let strong = with_validators(Some("\"v1\""), Some(100));
    let weak = with_validators(Some("W/\"v1\""), None);
    let none = with_validators(None, None);
    let ims = |s: i64| {
        http_date(if s < 0 {
            t0() - secs(s.unsigned_abs())
        } else {
            at(s as u64)
        })
    };
    let (before, equal, after) = (ims(-200), ims(-100), ims(0));
    type Row<'a> = (&'a str, &'a Entry, Vec<(&'a str, &'a str)>, bool);
    #[rustfmt::skip]
    let rows: Vec<Row<'_>> = vec![
        ("INM strong match", &strong, vec![("if-none-match", "\"v1\"")], true),
        ("INM weak vs strong", &strong, vec![("if-none-match", "W/\"v1\"")], true),
        ("INM strong vs weak", &weak, vec![("if-none-match", "\"v1\"")], true),
        ("INM other", &strong, vec![("if-none-match", "\"v2\"")], false),
        ("INM list", &strong, vec![("if-none-match", "\"v0\", W/\"v1\"")], true),
        ("INM lines", &strong, vec![("if-none-match", "\"v0\""), ("if-none-match", "\"v1\"")], true),
        ("INM comma inside tag", &strong, vec![("if-none-match", "\"v1,\"")], false),
        ("INM star", &none, vec![("if-none-match", "*")], true),
        ("INM no etag", &none, vec![("if-none-match", "\"v1\"")], false),
        ("INM malformed", &strong, vec![("if-none-match", "v1")], false),
        ("INM decides over IMS", &strong, vec![("if-none-match", "\"v2\""), ("if-modified-since", &after)], false),
        ("IMS after", &strong, vec![("if-modified-since", &after)], true),
        ("IMS equal", &strong, vec![("if-modified-since", &equal)], true),
        ("IMS before", &strong, vec![("if-modified-since", &before)], false),
        ("IMS invalid", &strong, vec![("if-modified-since", "yesterday")], false),
        ("IMS, no Last-Modified", &weak, vec![("if-modified-since", &after)], false),
        ("unconditional", &strong, vec![], false),
    ];
    for (name, entry, request, want) in rows {
        assert_eq!(not_modified(&headers(&request), entry), want, "{name}");
    }
    let mut not_found = with_validators(Some("\"v1\""), None);
    not_found.status = StatusCode::NOT_FOUND;
    assert!(!not_modified(
        &headers(&[("if-none-match", "*")]),
        &not_found
    ));
}

#[test]
fn origin_conditionals() {
    let e = with_validators(Some("W/\"v1\""), Some(100));
    let h = revalidation_headers(&e);
    assert_eq!(h.len(), 2);
    assert_eq!(h[0], (IF_NONE_MATCH, "W/\"v1\"".parse().unwrap()));
    assert_eq!(h[1].0, IF_MODIFIED_SINCE);
    assert_eq!(h[1].1, http_date(t0() - secs(100)).as_str());
    assert!(revalidation_headers(&with_validators(None, None)).is_empty());
}

fn exchange(request: &HeaderMap, time: u64) -> Exchange<'_> {
    Exchange {
        request_headers: request,
        default_ttl: None,
        request_time: at(time),
        response_time: at(time),
    }
}

#[test]
fn freshen_merges_a_304() {
    let old = stored(
        &[],
        &[
            ("cache-control", "max-age=60"),
            ("etag", "\"v1\""),
            ("content-length", "4"),
            ("content-encoding", "gzip"),
            ("x-a", "old"),
            ("x-keep", "k"),
            ("age", "50"),
        ],
        None,
    );
    assert_eq!(old.freshness.corrected_initial_age, secs(50));
    let date = http_date(at(200));
    let update = headers(&[
        ("etag", "\"v1\""),
        ("cache-control", "max-age=120"),
        ("x-a", "new"),
        ("x-a", "newer"),
        ("content-length", "0"),
        ("content-encoding", "br"),
        ("date", &date),
    ]);
    let request = HeaderMap::new();
    let mut seen = None;
    let f = freshen(&old, &update, &exchange(&request, 200), |status, h| {
        seen = Some((status, h.len()));
        Bytes::from_static(b"new head")
    })
    .expect("validator matches");
    assert_eq!(f.storable, Ok(()));
    let e = &f.entry;
    assert_eq!(e.headers["x-a"], "new");
    assert_eq!(e.headers.get_all("x-a").iter().count(), 2);
    assert_eq!(e.headers["x-keep"], "k");
    assert_eq!(e.headers["content-length"], "4");
    assert_eq!(e.headers["content-encoding"], "gzip");
    assert_eq!(e.headers["cache-control"], "max-age=120");
    assert!(!e.headers.contains_key("age"));
    assert_eq!(e.body, old.body);
    assert_eq!(e.wire_head, "new head");
    // The encoder sees the merged fields with the 304's Date, which the entry keeps apart.
    assert_eq!(seen, Some((StatusCode::OK, e.headers.len() + 1)));
    assert!(!e.headers.contains_key("date"));
    assert_eq!(e.date.as_ref().unwrap(), date.as_str());
    assert_eq!(e.freshness.lifetime, secs(120));
    assert_eq!(e.freshness.corrected_initial_age, Duration::ZERO);
    assert_eq!(
        e.state(at(300), &RequestCacheControl::default()),
        EntryState::Fresh
    );
    assert_eq!(e.etag.as_deref(), Some(&b"\"v1\""[..]));
}

#[test]
fn freshen_checks_the_validator() {
    let strong = stored(
        &[],
        &[("cache-control", "max-age=60"), ("etag", "\"v1\"")],
        None,
    );
    let weak = stored(
        &[],
        &[("cache-control", "max-age=60"), ("etag", "W/\"v1\"")],
        None,
    );
    let dated = with_validators(None, Some(100));
    let request = HeaderMap::new();
    let x = exchange(&request, 100);
    let try_ = |e: &Entry, pairs: &[(&str, &str)]| {
        freshen(e, &headers(pairs), &x, |_, _| Bytes::new()).is_some()
    };
    assert!(!try_(&strong, &[("etag", "\"v2\"")]));
    assert!(try_(&strong, &[("etag", "W/\"v1\"")]));
    assert!(!try_(&weak, &[("etag", "\"v1\"")]));
    assert!(try_(&weak, &[("etag", "W/\"v1\"")]));
    assert!(!try_(&dated, &[("etag", "\"v1\"")]));
    assert!(try_(&strong, &[]));
    let lm = http_date(t0() - secs(100));
    let other = http_date(t0() - secs(5));
    assert!(try_(&dated, &[("last-modified", &lm)]));
    assert!(!try_(&dated, &[("last-modified", &other)]));
}

#[test]
fn freshen_to_not_storable() {
    let old = stored(
        &[],
        &[("cache-control", "max-age=60"), ("etag", "\"v1\"")],
        None,
    );
    let request = HeaderMap::new();
    let f = freshen(
        &old,
        &headers(&[("cache-control", "no-store")]),
        &exchange(&request, 100),
        |_, _| Bytes::new(),
    )
    .unwrap();
    assert_eq!(f.storable, Err(NotStorable::NoStore));
    assert_eq!(
        f.entry.state(at(100), &RequestCacheControl::default()),
        EntryState::MustRevalidate
    );
    let f = freshen(
        &old,
        &headers(&[("set-cookie", "a=b")]),
        &exchange(&request, 100),
        |_, _| Bytes::new(),
    )
    .unwrap();
    assert_eq!(f.storable, Err(NotStorable::SetCookie));
    assert_eq!(f.entry.headers["set-cookie"], "a=b");
}
