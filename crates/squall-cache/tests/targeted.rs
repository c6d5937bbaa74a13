//! Targeted cache control (RFC 9213) and `cache_set_cookie` on a virtual clock: which field
//! decides (the configured one, CDN-Cache-Control, Surrogate-Control, Cache-Control), an
//! invalid targeted field falling back, targeted directives beating Cache-Control's no-store
//! and private, Expires ignored beside a targeted field; and in the fill, what an entry keeps
//! of the targeted fields and of Set-Cookie, and a 304 judged by the targeted field it brings.

mod common;

use std::sync::Arc;

use common::{at, headers, secs, t0};
use http::header::HeaderName;
use http::{HeaderMap, Method, StatusCode};
use squall_cache::{
    CacheKey, Fill, FillLimits, FillRequest, Freshness, HeadAction, NotStorable, OriginHead,
    Outcome, ResponseRules, Served, SetCookie, Store, header_lines, storable_with,
};

const OURS: &str = "squall-cache-control";

fn rules(target: bool, set_cookie: SetCookie) -> ResponseRules {
    ResponseRules {
        target_header: target.then(|| HeaderName::from_static(OURS)),
        set_cookie,
        ..ResponseRules::default()
    }
}

/// The policy's verdict on a 200 to a plain GET, sent and received at t0, without a default
/// TTL, under `rules`.
fn judge(rules: &ResponseRules, response: &[(&str, &str)]) -> Result<Freshness, NotStorable> {
    let request = HeaderMap::new();
    let response = headers(response);
    storable_with(
        &Method::GET,
        &request,
        StatusCode::OK,
        &response,
        None,
        rules,
        t0(),
        t0(),
    )
}

fn lifetime(rules: &ResponseRules, response: &[(&str, &str)]) -> u64 {
    judge(rules, response).expect("storable").lifetime.as_secs()
}

#[test]
fn the_target_list_decides_in_order() {
    let all = [
        (OURS, "max-age=10"),
        ("cdn-cache-control", "max-age=20"),
        ("surrogate-control", "max-age=30"),
        ("cache-control", "max-age=40"),
    ];
    let ours = rules(true, SetCookie::Pass);
    let standard = rules(false, SetCookie::Pass);
    assert_eq!(lifetime(&ours, &all), 10);
    // Without the setting, our field is just another header.
    assert_eq!(lifetime(&standard, &all), 20);
    assert_eq!(lifetime(&ours, &all[1..]), 20);
    assert_eq!(lifetime(&ours, &all[2..]), 30);
    assert_eq!(lifetime(&ours, &all[3..]), 40);
}

#[test]
fn an_invalid_or_empty_targeted_field_falls_back() {
    let ours = rules(true, SetCookie::Pass);
    // Uppercase keys, a trailing comma, an unclosed string: not a Dictionary (RFC 8941).
    for bad in ["Max-Age=60", "max-age=60,", "max-age=\"60", ""] {
        let fields = [("cdn-cache-control", bad), ("cache-control", "max-age=5")];
        assert_eq!(lifetime(&ours, &fields), 5, "{bad:?}");
    }
    let fields = [
        (OURS, "no-store;"),
        ("cdn-cache-control", "max-age=60"),
        ("cache-control", "no-store"),
    ];
    assert_eq!(lifetime(&ours, &fields), 60);
}

#[test]
fn targeted_no_store_beats_cache_control_max_age() {
    let fields = [
        ("cdn-cache-control", "no-store"),
        ("cache-control", "max-age=60"),
    ];
    assert_eq!(
        judge(&ResponseRules::default(), &fields).unwrap_err(),
        NotStorable::NoStore
    );
    let fields = [
        ("cdn-cache-control", "private=\"x-user\""),
        ("cache-control", "public, max-age=60"),
    ];
    assert_eq!(
        judge(&ResponseRules::default(), &fields).unwrap_err(),
        NotStorable::Private
    );
}

#[test]
fn targeted_max_age_beats_cache_control_private_and_no_store() {
    for cc in [
        "private",
        "no-store",
        "no-cache",
        "max-age=0, must-revalidate",
    ] {
        let fields = [("cdn-cache-control", "max-age=60"), ("cache-control", cc)];
        let fresh = judge(&ResponseRules::default(), &fields).expect(cc);
        assert_eq!(fresh.lifetime, secs(60), "{cc}");
        assert!(!fresh.no_cache && !fresh.must_revalidate, "{cc}");
    }
    // Pragma, like Cache-Control, is not read beside a targeted field.
    let fields = [("cdn-cache-control", "max-age=60"), ("pragma", "no-cache")];
    assert!(!judge(&ResponseRules::default(), &fields).unwrap().no_cache);
}

#[test]
fn surrogate_control_max_age_and_no_store() {
    let any = ResponseRules::default();
    let fields = [
        ("surrogate-control", "max-age=300+60"),
        ("cache-control", "no-store"),
    ];
    assert_eq!(lifetime(&any, &fields), 300);
    let fields = [
        ("surrogate-control", "no-store"),
        ("cache-control", "max-age=60"),
    ];
    assert_eq!(judge(&any, &fields).unwrap_err(), NotStorable::NoStore);
    // Only ESI instructions: not a caching policy, so Cache-Control decides.
    let fields = [
        ("surrogate-control", "content=\"ESI/1.0\""),
        ("cache-control", "max-age=60"),
    ];
    assert_eq!(lifetime(&any, &fields), 60);
}

#[test]
fn expires_counts_only_without_a_targeted_field() {
    let any = ResponseRules::default();
    let date = common::http_date(t0());
    let later = common::http_date(at(100));
    let earlier = common::http_date(at(0) - secs(100));
    let fields = [
        ("date", date.as_str()),
        ("expires", earlier.as_str()),
        ("cdn-cache-control", "max-age=60"),
    ];
    assert_eq!(lifetime(&any, &fields), 60);
    let fields = [("date", date.as_str()), ("expires", later.as_str())];
    assert_eq!(lifetime(&any, &fields), 100);
    // A targeted field without max-age decides alone too (RFC 9213 §2.2): no Expires, and
    // without a route TTL no freshness at all.
    let fields = [
        ("date", date.as_str()),
        ("expires", later.as_str()),
        ("cdn-cache-control", "public"),
    ];
    assert_eq!(judge(&any, &fields).unwrap_err(), NotStorable::NoFreshness);
}

#[test]
fn values_of_the_wrong_type_are_not_consumed() {
    let any = ResponseRules::default();
    // A Decimal or String max-age is no max-age: no freshness at all (Cache-Control is not
    // read, the field itself is valid).
    for value in ["max-age=1.5", "max-age=\"60\"", "max-age=-1"] {
        let fields = [
            ("cdn-cache-control", value),
            ("cache-control", "max-age=60"),
        ];
        assert_eq!(
            judge(&any, &fields).unwrap_err(),
            NotStorable::NoFreshness,
            "{value}"
        );
    }
    // `no-store=?0` is no no-store; parameters are ignored.
    let fields = [("cdn-cache-control", "no-store=?0, max-age=60;x=1")];
    assert_eq!(lifetime(&any, &fields), 60);
}

#[test]
fn set_cookie_blocks_storing_only_under_pass() {
    let fields = [("cache-control", "max-age=60"), ("set-cookie", "a=1")];
    let verdict = |mode| judge(&rules(false, mode), &fields).map(|f| f.lifetime);
    assert_eq!(verdict(SetCookie::Pass), Err(NotStorable::SetCookie));
    assert_eq!(verdict(SetCookie::Strip), Ok(secs(60)));
    assert_eq!(verdict(SetCookie::Store), Ok(secs(60)));
}

// The fill.

fn key() -> CacheKey {
    CacheKey::new("http", b"example.com", b"/t")
}

fn new_store() -> Arc<Store> {
    Arc::new(Store::new(1 << 20, 1, 1.0))
}

fn limits() -> FillLimits {
    FillLimits {
        object_bytes_max: 1024,
        default_ttl: None,
        encode_head: header_lines,
    }
}

fn fill(store: &Arc<Store>, rules: ResponseRules, stale: Option<Arc<squall_cache::Entry>>) -> Fill {
    let request = FillRequest {
        key: key(),
        method: Method::GET,
        headers: HeaderMap::new(),
    };
    Fill::new(store.clone(), limits(), request, stale, None, t0()).with_rules(rules)
}

/// Runs a 200 with these origin fields (the client-bound ones alike) through a fill at t0.
fn fetch(store: &Arc<Store>, rules: ResponseRules, fields: &[(&str, &str)]) -> Option<Outcome> {
    let mut f = fill(store, rules, None);
    let fields = headers(fields);
    let head = OriginHead {
        status: StatusCode::OK,
        origin_headers: &fields,
        client_headers: &fields,
        content_length: Some(2),
    };
    assert!(matches!(f.on_head(head, t0()), HeadAction::Forward));
    f.on_body(b"ok");
    f.on_end()
}

#[test]
fn set_cookie_modes_in_the_fill() {
    let fields = [
        ("cache-control", "max-age=60"),
        ("set-cookie", "a=1"),
        ("set-cookie", "b=2"),
    ];
    let store = new_store();
    assert_eq!(
        fetch(&store, rules(false, SetCookie::Pass), &fields),
        Some(Outcome::NotStorable(NotStorable::SetCookie))
    );
    assert!(store.lookup(&key(), &HeaderMap::new()).is_none());

    let store = new_store();
    let outcome = fetch(&store, rules(false, SetCookie::Strip), &fields);
    assert_eq!(outcome, Some(Outcome::Stored));
    let entry = store.lookup(&key(), &HeaderMap::new()).unwrap();
    assert!(!entry.headers.contains_key("set-cookie"));
    assert!(!entry.wire_head.windows(10).any(|w| w == b"set-cookie"));

    let store = new_store();
    let outcome = fetch(&store, rules(false, SetCookie::Store), &fields);
    assert_eq!(outcome, Some(Outcome::Stored));
    let entry = store.lookup(&key(), &HeaderMap::new()).unwrap();
    assert_eq!(entry.headers.get_all("set-cookie").iter().count(), 2);
}

/// An entry never keeps the fields meant for this cache alone (the target header,
/// Surrogate-Control); it keeps `CDN-Cache-Control` for the next CDN (RFC 9213 §3) unless
/// `strip_cdn_cache_control` says otherwise.
#[test]
fn an_entry_keeps_only_cdn_cache_control_of_the_targeted_fields_unless_told_to_strip() {
    let fields = [
        (OURS, "max-age=30"),
        ("cdn-cache-control", "max-age=60"),
        ("surrogate-control", "max-age=90"),
        ("cache-control", "no-store"),
    ];
    for (strip, cdn) in [(false, Some("max-age=60")), (true, None)] {
        let store = new_store();
        let rules = ResponseRules {
            strip_cdn_cache_control: strip,
            ..rules(true, SetCookie::Pass)
        };
        assert_eq!(fetch(&store, rules, &fields), Some(Outcome::Stored));
        let entry = store.lookup(&key(), &HeaderMap::new()).unwrap();
        assert_eq!(entry.freshness.lifetime, secs(30));
        let kept = entry.headers.get("cdn-cache-control");
        assert_eq!(kept.map(|v| v.to_str().unwrap()), cdn, "strip {strip}");
        for gone in [OURS, "surrogate-control"] {
            assert!(!entry.headers.contains_key(gone), "{gone} kept");
        }
        assert_eq!(entry.headers["cache-control"], "no-store");
    }
}

/// A 304 at `at(100)` for the stored entry of `first`, with `update` fields.
fn revalidate(
    first: &[(&str, &str)],
    update: &[(&str, &str)],
) -> (Outcome, Arc<squall_cache::Entry>) {
    let store = new_store();
    let rules = rules(false, SetCookie::Pass);
    assert_eq!(fetch(&store, rules.clone(), first), Some(Outcome::Stored));
    let stale = store.lookup(&key(), &HeaderMap::new()).unwrap();
    let mut f = fill(&store, rules, Some(stale));
    let update = headers(update);
    let head = OriginHead {
        status: StatusCode::NOT_MODIFIED,
        origin_headers: &update,
        client_headers: &update,
        content_length: None,
    };
    let HeadAction::Answer(entry, Served::Revalidated) = f.on_head(head, at(100)) else {
        panic!("a matching 304 answers from the entry");
    };
    (f.outcome().unwrap(), entry)
}

#[test]
fn a_304_is_judged_by_the_targeted_field_it_brings() {
    let first = [
        ("cdn-cache-control", "max-age=60"),
        ("cache-control", "no-store"),
        ("etag", "\"v1\""),
    ];
    let (outcome, entry) = revalidate(
        &first,
        &[("cdn-cache-control", "max-age=600"), ("etag", "\"v1\"")],
    );
    assert_eq!(outcome, Outcome::Freshened);
    assert_eq!(entry.freshness.lifetime, secs(600));
    assert_eq!(entry.freshness.response_time, at(100));
    assert_eq!(entry.headers["cdn-cache-control"], "max-age=600");
    // Without one, the stored Cache-Control decides (not the CDN-Cache-Control the entry keeps
    // for clients): no-store, so the entry goes.
    let (outcome, _) = revalidate(&first, &[("etag", "\"v1\"")]);
    assert_eq!(outcome, Outcome::NotStorable(NotStorable::NoStore));
    let (outcome, _) = revalidate(&first, &[("cdn-cache-control", "no-store")]);
    assert_eq!(outcome, Outcome::NotStorable(NotStorable::NoStore));
}
