//! The cache fill on a virtual clock: storable or not, the object limit at every body split,
//! 304 freshening with a matching and a foreign validator, stale-if-error, and when the
//! leader's ticket comes free.

mod common;

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use common::{at, headers, secs, t0};
use http::{HeaderMap, Method, StatusCode};
use squall_cache::{
    CacheKey, Entry, EntryState, Fill, FillLimits, FillRequest, HeadAction, InFlight, Join,
    NotStorable, OriginHead, Outcome, RequestCacheControl, ResponseRules, Served, Store,
    header_lines,
};

const LIMIT: usize = 16;

/// Header fields as name-value pairs.
type Fields<'a> = &'a [(&'a str, &'a str)];

fn key() -> CacheKey {
    CacheKey::new("http", b"example.com", b"/a")
}

fn new_store() -> Arc<Store> {
    Arc::new(Store::new(1 << 20, 1, 1.0))
}

fn limits() -> FillLimits {
    FillLimits {
        object_bytes_max: LIMIT,
        default_ttl: None,
        encode_head: header_lines,
    }
}

fn get(request: &[(&str, &str)]) -> FillRequest {
    FillRequest {
        key: key(),
        method: Method::GET,
        headers: headers(request),
    }
}

fn fill(store: &Arc<Store>, request: FillRequest, stale: Option<Arc<Entry>>) -> Fill {
    Fill::new(store.clone(), limits(), request, stale, None, t0())
}

/// A response head whose client-bound fields are the origin's.
fn head(status: u16, fields: &HeaderMap, length: Option<u64>) -> OriginHead<'_> {
    OriginHead {
        status: StatusCode::from_u16(status).unwrap(),
        origin_headers: fields,
        client_headers: fields,
        content_length: length,
    }
}

/// Every way to cut `body` into pieces that matters: whole, each single cut, and byte by byte.
fn splits(body: &[u8]) -> Vec<Vec<&[u8]>> {
    let mut out = vec![vec![body]];
    for cut in 0..=body.len() {
        out.push(vec![&body[..cut], &body[cut..]]);
    }
    out.push(body.chunks(1).collect());
    out
}

/// Stores, at `at(0)`, what a plain fill of a 200 with these fields and body stores.
fn stored_entry(store: &Arc<Store>, fields: &[(&str, &str)], body: &[u8]) -> Arc<Entry> {
    let mut f = fill(store, get(&[]), None);
    let fields = headers(fields);
    assert!(matches!(
        f.on_head(head(200, &fields, None), t0()),
        HeadAction::Forward
    ));
    f.on_body(body);
    assert_eq!(f.on_end(), Some(Outcome::Stored));
    store.lookup(&key(), &HeaderMap::new()).unwrap()
}

#[test]
fn a_storable_response_is_stored_at_its_clean_end_whatever_the_split() {
    let body = b"0123456789abcdef";
    let fields = headers(&[
        ("cache-control", "max-age=60"),
        ("content-type", "text/plain"),
        ("date", &common::http_date(t0())),
        ("content-length", "16"),
        ("age", "10"),
    ]);
    for pieces in splits(body) {
        let store = new_store();
        let table = InFlight::<u32>::new(1);
        let Join::Leader(ticket) = table.join(&key(), 0, std::time::UNIX_EPOCH) else {
            panic!("first is leader")
        };
        let mut f = Fill::new(store.clone(), limits(), get(&[]), None, Some(ticket), t0());
        let now = at(2);
        assert!(matches!(
            f.on_head(head(200, &fields, Some(16)), now),
            HeadAction::Forward
        ));
        assert!(f.collecting());
        for piece in &pieces {
            f.on_body(piece);
            f.check_invariants();
            assert!(f.release().is_none(), "the ticket waits for the end");
        }
        assert!(
            store.lookup(&key(), &HeaderMap::new()).is_none(),
            "not before the end"
        );
        assert_eq!(f.on_end(), Some(Outcome::Stored));
        f.check_invariants();
        let entry = store.lookup(&key(), &HeaderMap::new()).expect("stored");
        assert_eq!(entry.body, Bytes::from_static(body));
        assert_eq!(entry.status, StatusCode::OK);
        // Per-response fields are written fresh on every hit, so they are not kept; the
        // origin's Date is, apart from the fields (RFC 9111 §4).
        for gone in ["date", "content-length", "age"] {
            assert!(!entry.headers.contains_key(gone), "{gone} kept");
        }
        assert_eq!(entry.date.as_ref().unwrap(), &common::http_date(t0()));
        assert_eq!(
            &entry.wire_head[..],
            b"cache-control: max-age=60\r\ncontent-type: text/plain\r\n"
        );
        // Age 10 on arrival plus 2 s on the way (request sent at t0, RFC 9111 §4.2.3).
        assert_eq!(entry.freshness.corrected_initial_age, secs(12));
        assert_eq!(entry.freshness.response_time, now);
        let ticket = f.release().expect("fate known");
        assert!(table.finish(ticket).is_empty());
        assert!(f.release().is_none(), "released once");
    }
}

#[test]
fn a_response_that_may_not_be_stored_releases_the_ticket_at_its_head() {
    let cases: &[(Fields<'_>, Fields<'_>, u16, NotStorable)] = &[
        (
            &[],
            &[("cache-control", "no-store, max-age=60")],
            200,
            NotStorable::NoStore,
        ),
        (
            &[],
            &[("cache-control", "private, max-age=60")],
            200,
            NotStorable::Private,
        ),
        (
            &[],
            &[("cache-control", "max-age=60"), ("set-cookie", "a=b")],
            200,
            NotStorable::SetCookie,
        ),
        (
            &[],
            &[("cache-control", "max-age=60"), ("vary", "*")],
            200,
            NotStorable::VaryStar,
        ),
        (&[], &[], 200, NotStorable::NoFreshness),
        (
            &[],
            &[("cache-control", "max-age=60")],
            206,
            NotStorable::Status,
        ),
        (
            &[("cache-control", "no-store")],
            &[("cache-control", "max-age=60")],
            200,
            NotStorable::RequestNoStore,
        ),
        (
            &[("authorization", "Basic eDp5")],
            &[("cache-control", "max-age=60")],
            200,
            NotStorable::Authorization,
        ),
    ];
    for (request, response, status, why) in cases {
        let store = new_store();
        let table = InFlight::<u32>::new(1);
        let Join::Leader(ticket) = table.join(&key(), 0, std::time::UNIX_EPOCH) else {
            panic!("first is leader")
        };
        assert!(matches!(
            table.join(&key(), 1, std::time::UNIX_EPOCH),
            Join::Follower
        ));
        let mut f = Fill::new(
            store.clone(),
            limits(),
            get(request),
            None,
            Some(ticket),
            t0(),
        );
        let fields = headers(response);
        assert!(matches!(
            f.on_head(head(*status, &fields, None), t0()),
            HeadAction::Forward
        ));
        f.check_invariants();
        assert!(!f.collecting());
        assert_eq!(
            f.outcome(),
            Some(Outcome::NotStorable(*why)),
            "{response:?}"
        );
        // Followers go to the origin themselves now, not after this body.
        assert_eq!(table.finish(f.release().expect("released at head")), [1]);
        f.on_body(b"body");
        assert_eq!(f.on_end(), Some(Outcome::NotStorable(*why)));
        assert_eq!(store.stats().entries, 0, "{response:?}");
    }
    // A HEAD is answered from a stored GET but its own response is not stored.
    let store = new_store();
    let request = FillRequest {
        method: Method::HEAD,
        ..get(&[])
    };
    let mut f = fill(&store, request, None);
    let fields = headers(&[("cache-control", "max-age=60")]);
    f.on_head(head(200, &fields, Some(0)), t0());
    assert_eq!(f.on_end(), Some(Outcome::NotStorable(NotStorable::Method)));
}

#[test]
fn a_body_over_the_object_limit_is_forwarded_but_not_stored_at_every_split() {
    let fields = headers(&[("cache-control", "max-age=60")]);
    // Declared too large: decided at the head.
    let store = new_store();
    let mut f = fill(&store, get(&[]), None);
    f.on_head(head(200, &fields, Some(LIMIT as u64 + 1)), t0());
    assert_eq!(f.outcome(), Some(Outcome::TooLarge));
    assert!(!f.collecting());
    // Undeclared (chunked or close-delimited): decided by the piece that passes the limit.
    let exact = [b'x'; LIMIT];
    let over = [b'x'; LIMIT + 1];
    for (body, stored) in [(&exact[..], true), (&over[..], false)] {
        for pieces in splits(body) {
            let store = new_store();
            let mut f = fill(&store, get(&[]), None);
            f.on_head(head(200, &fields, None), t0());
            for piece in &pieces {
                f.on_body(piece);
                f.check_invariants();
            }
            let outcome = f.on_end();
            assert_eq!(store.stats().entries, usize::from(stored), "{pieces:?}");
            let expected = if stored {
                Outcome::Stored
            } else {
                Outcome::TooLarge
            };
            assert_eq!(outcome, Some(expected), "{pieces:?}");
        }
    }
}

#[test]
fn a_body_cut_short_is_not_stored() {
    let fields = headers(&[("cache-control", "max-age=60")]);
    let store = new_store();
    let mut f = fill(&store, get(&[]), None);
    f.on_head(head(200, &fields, Some(10)), t0());
    f.on_body(b"01234");
    assert!(
        f.on_failed(at(1)).is_none(),
        "the head went out: nothing to serve instead"
    );
    assert_eq!(f.outcome(), Some(Outcome::Failed));
    assert_eq!(
        f.on_end(),
        Some(Outcome::Failed),
        "an end after the failure changes nothing"
    );
    assert_eq!(store.stats().entries, 0);
}

/// RFC 9111 §4: a hit carries the stored response's own Date. The fill keeps the origin's
/// (as an IMF-fixdate), the arrival time when the origin sent none, an invalid one or two
/// (RFC 9110 §6.6.1), and a matching 304's Date replaces it (§3.2).
#[test]
fn the_stored_date_is_the_origins_or_the_arrival_time() {
    let d_minus_30 = common::http_date(t0() - secs(30));
    let rfc850 = "Sunday, 31-Dec-23 23:59:30 GMT";
    let d_plus_5 = common::http_date(at(5));
    let cases: [(Fields, SystemTime); 5] = [
        (&[("date", &d_minus_30)], t0() - secs(30)),
        (&[("date", rfc850)], t0() - secs(30)),
        (&[], at(2)),
        (&[("date", "yesterday")], at(2)),
        (&[("date", &d_minus_30), ("date", &d_plus_5)], at(2)),
    ];
    for (date, want) in cases {
        let store = new_store();
        let mut fields = headers(&[("cache-control", "max-age=60"), ("etag", "\"v1\"")]);
        for (_, value) in date {
            fields.append(http::header::DATE, value.parse().unwrap());
        }
        let mut f = fill(&store, get(&[]), None);
        f.on_head(head(200, &fields, None), at(2));
        assert_eq!(f.on_end(), Some(Outcome::Stored));
        let entry = store.lookup(&key(), &HeaderMap::new()).unwrap();
        assert_eq!(
            entry.date.as_ref().unwrap(),
            &common::http_date(want),
            "{date:?}"
        );
        assert!(!entry.headers.contains_key("date"));
        assert!(
            !entry
                .wire_head
                .windows(5)
                .any(|w| w.eq_ignore_ascii_case(b"date:"))
        );
    }
    // A 304 with its own Date brings it; one without leaves the time it arrived.
    for (update, want) in [(Some(d_plus_5.as_str()), at(5)), (None, at(100))] {
        let store = new_store();
        let old = stored_entry(
            &store,
            &[("cache-control", "max-age=1"), ("etag", "\"v1\"")],
            b"x",
        );
        let mut f = fill(&store, get(&[]), Some(old));
        let mut fields = headers(&[("etag", "\"v1\"")]);
        if let Some(date) = update {
            fields.insert(http::header::DATE, date.parse().unwrap());
        }
        let HeadAction::Answer(entry, _) = f.on_head(head(304, &fields, None), at(100)) else {
            panic!("a matching 304 answers from the entry")
        };
        assert_eq!(entry.date.as_ref().unwrap(), &common::http_date(want));
    }
}

#[test]
fn a_matching_304_freshens_the_stale_entry() {
    let store = new_store();
    let old = stored_entry(
        &store,
        &[
            ("cache-control", "max-age=60"),
            ("etag", "\"v1\""),
            ("x-a", "1"),
        ],
        b"payload",
    );
    // The client's own conditional is replaced by the entry's validator.
    let mut f = fill(
        &store,
        get(&[("if-none-match", "\"mine\"")]),
        Some(old.clone()),
    );
    assert!(f.revalidating());
    let mut sent = f.client_headers().clone();
    f.origin_request_headers(&mut sent);
    assert_eq!(sent.get("if-none-match").unwrap(), "\"v1\"");
    assert_eq!(f.client_headers().get("if-none-match").unwrap(), "\"mine\"");
    let fields = headers(&[
        ("cache-control", "max-age=120"),
        ("etag", "\"v1\""),
        ("x-a", "2"),
    ]);
    let HeadAction::Answer(entry, Served::Revalidated) =
        f.on_head(head(304, &fields, None), at(100))
    else {
        panic!("a matching 304 answers from the entry")
    };
    f.check_invariants();
    assert_eq!(f.outcome(), Some(Outcome::Freshened));
    assert_eq!(entry.status, StatusCode::OK);
    assert_eq!(entry.body, Bytes::from_static(b"payload"));
    assert_eq!(entry.headers.get("x-a").unwrap(), "2");
    assert_eq!(entry.freshness.lifetime, secs(120));
    assert_eq!(
        entry.age(at(100)),
        secs(100),
        "request sent at t0, 304 at 100 s"
    );
    let now = store.lookup(&key(), &HeaderMap::new()).unwrap();
    assert!(
        Arc::ptr_eq(&now, &entry),
        "the freshened entry replaced the old one"
    );
    assert!(
        f.release().is_none(),
        "a fill without a ticket has none to release"
    );
}

#[test]
fn a_304_for_another_validator_freshens_nothing_and_refetches() {
    let store = new_store();
    let old = stored_entry(
        &store,
        &[("cache-control", "max-age=60"), ("etag", "\"v1\"")],
        b"payload",
    );
    let table = InFlight::<u32>::new(1);
    let Join::Leader(ticket) = table.join(&key(), 0, std::time::UNIX_EPOCH) else {
        panic!("first is leader")
    };
    let mut f = Fill::new(
        store.clone(),
        limits(),
        get(&[]),
        Some(old.clone()),
        Some(ticket),
        t0(),
    );
    for etag in ["\"v2\"", "W/\"v2\"", "garbage"] {
        let mut f2 = fill(&store, get(&[]), Some(old.clone()));
        let fields = headers(&[("cache-control", "max-age=120"), ("etag", etag)]);
        assert!(matches!(
            f2.on_head(head(304, &fields, None), at(100)),
            HeadAction::Refetch
        ));
    }
    let fields = headers(&[("cache-control", "max-age=120"), ("etag", "\"v2\"")]);
    assert!(matches!(
        f.on_head(head(304, &fields, None), at(100)),
        HeadAction::Refetch
    ));
    f.check_invariants();
    let still = store.lookup(&key(), &HeaderMap::new()).unwrap();
    assert!(Arc::ptr_eq(&still, &old), "the entry was not touched");
    assert_eq!(still.freshness.lifetime, secs(60));
    assert!(!f.revalidating() && f.stale().is_none());
    assert!(
        f.release().is_none(),
        "still leading: the refetch may store"
    );
    let mut sent = f.client_headers().clone();
    f.origin_request_headers(&mut sent);
    assert!(
        !sent.contains_key("if-none-match"),
        "the refetch is unconditional"
    );
    // The refetch's answer is stored as on a miss.
    let fields = headers(&[("cache-control", "max-age=60"), ("etag", "\"v2\"")]);
    assert!(matches!(
        f.on_head(head(200, &fields, Some(3)), at(101)),
        HeadAction::Forward
    ));
    f.on_body(b"new");
    assert_eq!(f.on_end(), Some(Outcome::Stored));
    assert_eq!(store.lookup(&key(), &HeaderMap::new()).unwrap().body, "new");
    assert!(table.finish(f.release().unwrap()).is_empty());
}

#[test]
fn a_304_to_the_clients_own_conditional_is_forwarded() {
    // The stale entry has no validator, so the client's If-None-Match went to the origin: its
    // 304 (naming an ETag the entry does not have) is the client's answer, not the cache's.
    let store = new_store();
    let old = stored_entry(&store, &[("cache-control", "max-age=60")], b"payload");
    let mut f = fill(
        &store,
        get(&[("if-none-match", "\"c\"")]),
        Some(old.clone()),
    );
    assert!(!f.revalidating());
    let mut sent = f.client_headers().clone();
    f.origin_request_headers(&mut sent);
    assert_eq!(sent.get("if-none-match").unwrap(), "\"c\"");
    let fields = headers(&[("etag", "\"c\"")]);
    assert!(matches!(
        f.on_head(head(304, &fields, None), at(100)),
        HeadAction::Forward
    ));
    assert_eq!(f.outcome(), Some(Outcome::NotStorable(NotStorable::Status)));
    assert!(Arc::ptr_eq(
        &store.lookup(&key(), &HeaderMap::new()).unwrap(),
        &old
    ));
}

#[test]
fn a_304_that_makes_the_response_unstorable_removes_the_entry() {
    let store = new_store();
    let old = stored_entry(
        &store,
        &[("cache-control", "max-age=60"), ("etag", "\"v1\"")],
        b"payload",
    );
    let mut f = fill(&store, get(&[]), Some(old));
    let fields = headers(&[("cache-control", "no-store"), ("etag", "\"v1\"")]);
    let HeadAction::Answer(entry, Served::Revalidated) =
        f.on_head(head(304, &fields, None), at(100))
    else {
        panic!("served once")
    };
    assert_eq!(entry.body, "payload");
    assert_eq!(
        f.outcome(),
        Some(Outcome::NotStorable(NotStorable::NoStore))
    );
    assert_eq!(store.stats().entries, 0);
}

#[test]
fn stale_if_error_serves_the_stale_entry_inside_its_window_only() {
    let store = new_store();
    let old = stored_entry(
        &store,
        &[
            ("cache-control", "max-age=60, stale-if-error=300"),
            ("etag", "\"v1\""),
        ],
        b"payload",
    );
    // No response at all, 40 s stale: served.
    let mut f = fill(&store, get(&[]), Some(old.clone()));
    let served = f.on_failed(at(100)).expect("inside stale-if-error");
    assert!(Arc::ptr_eq(&served, &old));
    assert_eq!(f.outcome(), Some(Outcome::StaleOnError));
    // A 5xx head: answered from the entry, the origin's body dropped.
    let fields = headers(&[]);
    let mut f = fill(&store, get(&[]), Some(old.clone()));
    let HeadAction::Answer(served, Served::Stale) = f.on_head(head(503, &fields, None), at(100))
    else {
        panic!("a 503 inside stale-if-error serves stale")
    };
    assert!(Arc::ptr_eq(&served, &old));
    f.on_body(b"origin error page");
    assert_eq!(f.on_end(), Some(Outcome::StaleOnError));
    assert!(f.on_failed(at(101)).is_none(), "answered already");
    // A 4xx is the origin's answer, not an error of the cache's to hide.
    let mut f = fill(&store, get(&[]), Some(old.clone()));
    assert!(matches!(
        f.on_head(head(404, &fields, None), at(100)),
        HeadAction::Forward
    ));
    // Past the window (60 + 300 s): the error goes through.
    let mut f = fill(&store, get(&[]), Some(old.clone()));
    assert!(f.on_failed(at(360)).is_none());
    assert_eq!(f.outcome(), Some(Outcome::Failed));
    let mut f = fill(&store, get(&[]), Some(old.clone()));
    assert!(matches!(
        f.on_head(head(502, &fields, None), at(360)),
        HeadAction::Forward
    ));
    // The client may refuse staleness (max-age=0 asks for a revalidated response).
    let mut f = fill(
        &store,
        get(&[("cache-control", "max-age=0")]),
        Some(old.clone()),
    );
    assert!(f.on_failed(at(100)).is_none());
    // A miss has nothing to serve.
    let mut f = fill(&store, get(&[]), None);
    assert!(f.on_failed(at(100)).is_none());
    // must-revalidate: never served stale (RFC 9111 §5.2.2.2).
    let store = new_store();
    let strict = stored_entry(
        &store,
        &[
            (
                "cache-control",
                "max-age=60, must-revalidate, stale-if-error=300",
            ),
            ("etag", "\"v\""),
        ],
        b"x",
    );
    let mut f = fill(&store, get(&[]), Some(strict));
    assert!(f.on_failed(at(100)).is_none());
}

/// RFC 9111 §4.2.2 through a fill with `heuristic_freshness_max`: a 200 with only
/// Last-Modified, 1,000 s old by its Date and 30 s old by its Age, is stored fresh for 100 s
/// of age, so it is a hit until 70 s after it arrived and stale from then; a matching 304 at
/// 200 s with a later Date gives it a lifetime from the new interval. Without the setting the
/// same response is not stored.
#[test]
fn a_response_with_only_last_modified_is_fresh_for_a_tenth_of_its_age() {
    let d0 = common::http_date(t0());
    let lm = common::http_date(t0() - secs(1000));
    let fields: Fields = &[("date", &d0), ("last-modified", &lm), ("age", "30")];
    let on = ResponseRules {
        heuristic_freshness_max: secs(3600),
        ..ResponseRules::default()
    };
    let store = new_store();
    let mut f = fill(&store, get(&[]), None).with_rules(on.clone());
    f.on_head(head(200, &headers(fields), None), t0());
    f.on_body(b"x");
    assert_eq!(f.on_end(), Some(Outcome::Stored));
    let entry = store.lookup(&key(), &HeaderMap::new()).expect("stored");
    assert_eq!(entry.freshness.lifetime, secs(100));
    let any = RequestCacheControl::default();
    let state = |entry: &Entry, now| entry.state(now, &any);
    assert_eq!(entry.age(at(69)), secs(99));
    assert_eq!(state(&entry, at(69)), EntryState::Fresh);
    assert!(matches!(state(&entry, at(70)), EntryState::Stale { .. }));

    // The 304 says Date = t0 + 200 and Last-Modified unchanged: 1,200 s, so 120 s.
    let d200 = common::http_date(at(200));
    let mut f = fill(&store, get(&[]), Some(entry)).with_rules(on);
    assert!(f.revalidating());
    let update = headers(&[("date", &d200), ("last-modified", &lm)]);
    let HeadAction::Answer(entry, Served::Revalidated) =
        f.on_head(head(304, &update, None), at(200))
    else {
        panic!("a matching 304 answers from the entry")
    };
    assert_eq!(f.outcome(), Some(Outcome::Freshened));
    assert_eq!(entry.freshness.lifetime, secs(120));
    assert_eq!(
        entry.age(at(200)),
        secs(200),
        "request sent at t0, 304 at 200 s"
    );

    let store = new_store();
    let mut f = fill(&store, get(&[]), None);
    f.on_head(head(200, &headers(fields), None), t0());
    f.on_body(b"x");
    assert_eq!(
        f.on_end(),
        Some(Outcome::NotStorable(NotStorable::NoFreshness))
    );
}
