//! RFC 9111 storage and freshness decisions as a table: request headers, status, response
//! headers and default TTL in; the decision, lifetime, initial age and flags out.

mod common;

use std::time::Duration;

use common::{at, headers, http_date, secs, t0};
use http::{Method, StatusCode};
use squall_cache::{
    Freshness, Lookup, NotStorable, RequestCacheControl, ResponseRules, invalidates, lookup_policy,
    request_cache_control, storable_with,
};

/// What a row expects.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    No(NotStorable),
    /// lifetime and corrected initial age in seconds, then flags: `mr` must_revalidate, `nc`
    /// no_cache, `im` immutable, `swr=N`, `sie=N`.
    Yes(u64, u64, &'static str),
}
use Expect::{No, Yes};

struct Row<'a> {
    name: &'a str,
    method: Method,
    request: Vec<(&'a str, &'a str)>,
    status: u16,
    response: Vec<(&'a str, &'a str)>,
    default_ttl: Option<u64>,
    /// `cache.heuristic_freshness_max` in seconds; 0: the Last-Modified heuristic is off.
    heuristic_max: u64,
    /// Seconds after t0 the response arrived (the request left at t0).
    delay: u64,
    expect: Expect,
}

fn row<'a>(name: &'a str, response: &[(&'a str, &'a str)], expect: Expect) -> Row<'a> {
    Row {
        name,
        method: Method::GET,
        request: Vec::new(),
        status: 200,
        response: response.to_vec(),
        default_ttl: None,
        heuristic_max: 0,
        delay: 0,
        expect,
    }
}

impl<'a> Row<'a> {
    fn req(mut self, request: &[(&'a str, &'a str)]) -> Self {
        self.request = request.to_vec();
        self
    }
    fn status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }
    fn ttl(mut self, ttl: u64) -> Self {
        self.default_ttl = Some(ttl);
        self
    }
    fn heuristic(mut self, max: u64) -> Self {
        self.heuristic_max = max;
        self
    }
    fn method(mut self, method: Method) -> Self {
        self.method = method;
        self
    }
    fn delay(mut self, delay: u64) -> Self {
        self.delay = delay;
        self
    }
}

fn expected(
    lifetime: u64,
    age: u64,
    flags: &str,
    response_time: std::time::SystemTime,
) -> Freshness {
    let mut f = Freshness {
        lifetime: secs(lifetime),
        corrected_initial_age: secs(age),
        response_time,
        stale_while_revalidate: Duration::ZERO,
        stale_if_error: Duration::ZERO,
        must_revalidate: false,
        no_cache: false,
        immutable: false,
    };
    for flag in flags.split_whitespace() {
        match flag.split_once('=') {
            Some(("swr", n)) => f.stale_while_revalidate = secs(n.parse().unwrap()),
            Some(("sie", n)) => f.stale_if_error = secs(n.parse().unwrap()),
            _ if flag == "mr" => f.must_revalidate = true,
            _ if flag == "nc" => f.no_cache = true,
            _ if flag == "im" => f.immutable = true,
            _ => panic!("unknown flag {flag}"),
        }
    }
    f
}

#[test]
fn storage_and_freshness_table() {
    let d0 = http_date(t0());
    let d_minus_10 = http_date(t0() - secs(10));
    let d_plus_2 = http_date(at(2));
    let d_plus_100 = http_date(at(100));
    let d_plus_300 = http_date(at(300));
    let d_minus_100 = http_date(t0() - secs(100));
    let d_minus_9 = http_date(t0() - secs(9));
    let d_minus_1000 = http_date(t0() - secs(1000));
    let d_minus_1009 = http_date(t0() - secs(1009));
    let d_minus_1010 = http_date(t0() - secs(1010));
    let d_minus_100_days = http_date(t0() - secs(100 * 86_400));
    let etag = ("etag", "\"v1\"");
    #[rustfmt::skip]
    let rows = vec![
        // Explicit freshness: s-maxage > max-age > Expires.
        row("max-age", &[("cache-control", "max-age=60")], Yes(60, 0, "")),
        row("s-maxage wins, implies proxy-revalidate", &[("cache-control", "max-age=60, s-maxage=120")], Yes(120, 0, "mr")),
        row("max-age beats Expires", &[("cache-control", "max-age=10"), ("date", &d0), ("expires", &d_plus_300)], Yes(10, 0, "")),
        row("Expires - Date", &[("date", &d0), ("expires", &d_plus_300)], Yes(300, 0, "")),
        row("Expires without Date uses arrival", &[("expires", &d_plus_300)], Yes(298, 2, "")).delay(2),
        row("Expires before Date", &[("date", &d0), ("expires", &d_minus_100), etag], Yes(0, 0, "")),
        row("invalid Expires = expired", &[("expires", "0"), etag], Yes(0, 0, "")),
        row("invalid Expires beats default ttl", &[("expires", "0"), etag], Yes(0, 0, "")).ttl(60),
        row("two Expires = expired", &[("date", &d0), ("expires", &d_plus_300), ("expires", &d_plus_100), etag], Yes(0, 0, "")),
        row("expired, no validator", &[("expires", "0")], No(NotStorable::Expired)),
        row("max-age=0, no validator", &[("cache-control", "max-age=0")], No(NotStorable::Expired)),
        row("max-age=0 with stale-if-error", &[("cache-control", "max-age=0, stale-if-error=60")], Yes(0, 0, "sie=60")),
        row("max-age=0 must-revalidate sie", &[("cache-control", "max-age=0, must-revalidate, stale-if-error=60")], No(NotStorable::Expired)),
        row("max-age=0 with Last-Modified", &[("cache-control", "max-age=0"), ("last-modified", &d_minus_100)], Yes(0, 0, "")),
        row("max-age invalid = stale", &[("cache-control", "max-age=abc"), etag], Yes(0, 0, "")),
        row("max-age quoted", &[("cache-control", "max-age=\"30\"")], Yes(30, 0, "")),
        row("max-age case-insensitive", &[("cache-control", "MAX-AGE=30")], Yes(30, 0, "")),
        row("max-age repeated: smallest", &[("cache-control", "max-age=60"), ("cache-control", "max-age=10")], Yes(10, 0, "")),
        row("max-age overflow: 2^31", &[("cache-control", "max-age=99999999999")], Yes(1 << 31, 0, "")),
        // Refusals.
        row("no-store", &[("cache-control", "max-age=60, no-store")], No(NotStorable::NoStore)),
        row("no-store beside must-understand", &[("cache-control", "no-store, must-understand, max-age=60")], No(NotStorable::NoStore)),
        row("private", &[("cache-control", "private, max-age=60")], No(NotStorable::Private)),
        row("private=field", &[("cache-control", "private=\"x-user\", max-age=60")], No(NotStorable::Private)),
        row("set-cookie", &[("cache-control", "max-age=60"), ("set-cookie", "a=b")], No(NotStorable::SetCookie)),
        row("vary *", &[("cache-control", "max-age=60"), ("vary", "accept-encoding, *")], No(NotStorable::VaryStar)),
        row("vary bad member", &[("cache-control", "max-age=60"), ("vary", "a b")], No(NotStorable::VaryStar)),
        row("vary ok", &[("cache-control", "max-age=60"), ("vary", "Accept-Encoding")], Yes(60, 0, "")),
        row("request no-store", &[("cache-control", "max-age=60")], No(NotStorable::RequestNoStore)).req(&[("cache-control", "no-store")]),
        row("POST", &[("cache-control", "max-age=60")], No(NotStorable::Method)).method(Method::POST),
        row("HEAD is not stored", &[("cache-control", "max-age=60")], No(NotStorable::Method)).method(Method::HEAD),
        // Authorization (§3.5).
        row("authorization, max-age", &[("cache-control", "max-age=60")], No(NotStorable::Authorization)).req(&[("authorization", "Basic x")]),
        row("authorization, public", &[("cache-control", "public, max-age=60")], Yes(60, 0, "")).req(&[("authorization", "Basic x")]),
        row("authorization, s-maxage", &[("cache-control", "s-maxage=60")], Yes(60, 0, "mr")).req(&[("authorization", "Basic x")]),
        row("authorization, must-revalidate", &[("cache-control", "must-revalidate, max-age=60")], Yes(60, 0, "mr")).req(&[("authorization", "Basic x")]),
        // Status codes.
        row("206", &[("cache-control", "max-age=60")], No(NotStorable::Status)).status(206),
        row("304", &[("cache-control", "max-age=60")], No(NotStorable::Status)).status(304),
        // §3: a final status unknown to the cache is stored with explicit freshness only.
        row("unregistered 299 max-age", &[("cache-control", "max-age=60")], Yes(60, 0, "")).status(299),
        row("unregistered 499 s-maxage", &[("cache-control", "s-maxage=60")], Yes(60, 0, "mr")).status(499),
        row("unregistered 599 Expires", &[("date", &d0), ("expires", &d_plus_300)], Yes(300, 0, "")).status(599),
        row("unregistered 299 heuristic", &[], No(NotStorable::Status)).status(299).ttl(60),
        row("unregistered 299 public heuristic", &[("cache-control", "public")], No(NotStorable::Status)).status(299).ttl(60),
        row("102 never", &[("cache-control", "max-age=60")], No(NotStorable::Status)).status(102),
        row("103 never", &[("cache-control", "max-age=60")], No(NotStorable::Status)).status(103),
        row("302 explicit", &[("cache-control", "max-age=60")], Yes(60, 0, "")).status(302),
        row("302 heuristic", &[], No(NotStorable::Status)).status(302).ttl(60),
        row("302 public heuristic", &[("cache-control", "public")], Yes(60, 0, "")).status(302).ttl(60),
        row("500 explicit", &[("cache-control", "max-age=5")], Yes(5, 0, "")).status(500),
        row("404 heuristic", &[], Yes(60, 0, "")).status(404).ttl(60),
        row("301 heuristic", &[], Yes(60, 0, "")).status(301).ttl(60),
        row("501 heuristic", &[], Yes(60, 0, "")).status(501).ttl(60),
        // Heuristic freshness only from the default ttl.
        row("no freshness", &[("last-modified", &d_minus_100)], No(NotStorable::NoFreshness)),
        row("public, no ttl", &[("cache-control", "public")], No(NotStorable::NoFreshness)),
        row("default ttl", &[], Yes(60, 0, "")).ttl(60),
        row("public with ttl", &[("cache-control", "public")], Yes(30, 0, "")).ttl(30),
        // Revalidation flags.
        row("no-cache with validator", &[("cache-control", "no-cache, max-age=60"), etag], Yes(60, 0, "nc")),
        row("no-cache=field", &[("cache-control", "no-cache=\"set-cookie\", max-age=60"), etag], Yes(60, 0, "nc")),
        row("no-cache without validator", &[("cache-control", "no-cache, max-age=60")], No(NotStorable::Expired)),
        row("pragma no-cache (no CC)", &[("pragma", "no-cache"), etag], Yes(60, 0, "nc")).ttl(60),
        row("pragma ignored beside CC", &[("pragma", "no-cache"), ("cache-control", "max-age=60")], Yes(60, 0, "")),
        row("must-revalidate", &[("cache-control", "max-age=60, must-revalidate")], Yes(60, 0, "mr")),
        row("proxy-revalidate", &[("cache-control", "max-age=60, proxy-revalidate")], Yes(60, 0, "mr")),
        row("immutable", &[("cache-control", "max-age=60, immutable")], Yes(60, 0, "im")),
        row("no-transform", &[("cache-control", "max-age=60, no-transform")], Yes(60, 0, "")),
        row("stale windows", &[("cache-control", "max-age=60, stale-while-revalidate=30, stale-if-error=600")], Yes(60, 0, "swr=30 sie=600")),
        row("stale windows invalid", &[("cache-control", "max-age=60, stale-while-revalidate=x")], Yes(60, 0, "")),
        // RFC 9111 §4.2.3 age arithmetic: request at t0, response at t0+2.
        row("apparent age wins", &[("cache-control", "max-age=60"), ("date", &d_minus_10), ("age", "5")], Yes(60, 12, "")).delay(2),
        row("age + delay wins", &[("cache-control", "max-age=60"), ("date", &d_plus_2), ("age", "30")], Yes(60, 32, "")).delay(2),
        row("date in the future", &[("cache-control", "max-age=60"), ("date", &d_plus_100)], Yes(60, 2, "")).delay(2),
        row("no date, no age: delay", &[("cache-control", "max-age=60")], Yes(60, 2, "")).delay(2),
        // §5.1: a list counts by its first member and parameters are dropped; an Age that is
        // still not a non-negative integer is ignored ("a cache SHOULD ignore the field"), so
        // the age comes from Date and the delay, and the response is as fresh as without it.
        row("age list: first member", &[("cache-control", "max-age=60"), ("age", "7200, 0"), etag], Yes(60, 7200, "")),
        row("age lines: first line", &[("cache-control", "max-age=60"), ("age", "7200"), ("age", "0"), etag], Yes(60, 7200, "")),
        row("age parameters dropped", &[("cache-control", "max-age=60"), ("age", "7200;foo=bar"), etag], Yes(60, 7200, "")),
        row("age spaces", &[("cache-control", "max-age=600"), ("age", " 30 , 1")], Yes(600, 30, "")),
        row("age abc ignored", &[("cache-control", "max-age=60"), ("age", "abc")], Yes(60, 0, "")),
        row("age -7200 ignored", &[("cache-control", "max-age=60"), ("age", "-7200")], Yes(60, 0, "")),
        row("age 7200.0 ignored", &[("cache-control", "max-age=60"), ("age", "7200.0")], Yes(60, 0, "")),
        row("age empty ignored", &[("cache-control", "max-age=60"), ("age", "")], Yes(60, 0, "")),
        row("age bad first member ignored", &[("cache-control", "max-age=60"), ("age", "soon, 7200")], Yes(60, 0, "")),
        row("age ignored: delay counts", &[("cache-control", "max-age=60"), ("age", "-7200")], Yes(60, 2, "")).delay(2),
        row("age ignored: date counts", &[("cache-control", "max-age=600"), ("date", &d_minus_100), ("age", "7200.0")], Yes(600, 100, "")),
        row("stale on arrival, no validator", &[("cache-control", "max-age=60"), ("age", "100")], No(NotStorable::Expired)),
        row("stale on arrival, validator", &[("cache-control", "max-age=60"), ("age", "100"), etag], Yes(60, 100, "")),
        // §4.2.2: with `heuristic_freshness_max`, a tenth of Date - Last-Modified, in whole
        // seconds, capped; anything explicit, and the route's cache_ttl, go first.
        row("heuristic: 10% of Date - LM", &[("date", &d0), ("last-modified", &d_minus_1000)], Yes(100, 0, "")).heuristic(3600),
        row("heuristic off: nothing", &[("date", &d0), ("last-modified", &d_minus_1000)], No(NotStorable::NoFreshness)),
        row("heuristic capped", &[("date", &d0), ("last-modified", &d_minus_100_days)], Yes(3600, 0, "")).heuristic(3600),
        row("heuristic: whole seconds", &[("date", &d0), ("last-modified", &d_minus_1009)], Yes(100, 0, "")).heuristic(3600),
        row("heuristic: LM 10s before Date", &[("date", &d0), ("last-modified", &d_minus_10)], Yes(1, 0, "")).heuristic(3600),
        row("heuristic: LM 9s before Date", &[("date", &d0), ("last-modified", &d_minus_9)], No(NotStorable::NoFreshness)).heuristic(3600),
        row("heuristic: LM = Date", &[("date", &d0), ("last-modified", &d0)], No(NotStorable::NoFreshness)).heuristic(3600),
        row("heuristic: LM after Date", &[("date", &d0), ("last-modified", &d_plus_100)], No(NotStorable::NoFreshness)).heuristic(3600),
        row("heuristic: LM invalid", &[("date", &d0), ("last-modified", "yesterday")], No(NotStorable::NoFreshness)).heuristic(3600),
        row("heuristic: no Date, arrival", &[("last-modified", &d_minus_1000)], Yes(100, 2, "")).heuristic(3600).delay(2),
        row("heuristic: old Date", &[("date", &d_minus_10), ("last-modified", &d_minus_1010)], Yes(100, 10, "")).heuristic(3600),
        row("heuristic: Age counts against it", &[("date", &d0), ("last-modified", &d_minus_1000), ("age", "30")], Yes(100, 30, "")).heuristic(3600),
        row("heuristic: stale on arrival, LM validates", &[("date", &d0), ("last-modified", &d_minus_1000), ("age", "200")], Yes(100, 200, "")).heuristic(3600),
        row("heuristic: cache_ttl first", &[("date", &d0), ("last-modified", &d_minus_1000)], Yes(60, 0, "")).heuristic(3600).ttl(60),
        row("heuristic: max-age first", &[("cache-control", "max-age=5"), ("date", &d0), ("last-modified", &d_minus_1000)], Yes(5, 0, "")).heuristic(3600),
        row("heuristic: Expires first", &[("date", &d0), ("expires", &d_plus_300), ("last-modified", &d_minus_1000)], Yes(300, 0, "")).heuristic(3600),
        row("heuristic: invalid Expires first", &[("date", &d0), ("expires", "0"), ("last-modified", &d_minus_1000)], Yes(0, 0, "")).heuristic(3600),
        row("heuristic: targeted field without max-age", &[("cdn-cache-control", "public"), ("date", &d0), ("expires", &d_plus_300), ("last-modified", &d_minus_1000)], Yes(100, 0, "")).heuristic(3600),
        row("heuristic: 404", &[("date", &d0), ("last-modified", &d_minus_1000)], Yes(100, 0, "")).heuristic(3600).status(404),
        row("heuristic: not for 302", &[("date", &d0), ("last-modified", &d_minus_1000)], No(NotStorable::Status)).heuristic(3600).status(302),
        row("heuristic: 302 public", &[("cache-control", "public"), ("date", &d0), ("last-modified", &d_minus_1000)], Yes(100, 0, "")).heuristic(3600).status(302),
        row("heuristic: not for 299", &[("date", &d0), ("last-modified", &d_minus_1000)], No(NotStorable::Status)).heuristic(3600).status(299),
        row("heuristic: private still refused", &[("cache-control", "private"), ("date", &d0), ("last-modified", &d_minus_1000)], No(NotStorable::Private)).heuristic(3600),
    ];
    let mut failures = Vec::new();
    for r in &rows {
        let response_time = at(r.delay);
        let rules = ResponseRules {
            heuristic_freshness_max: secs(r.heuristic_max),
            ..ResponseRules::default()
        };
        let got = storable_with(
            &r.method,
            &headers(&r.request),
            StatusCode::from_u16(r.status).unwrap(),
            &headers(&r.response),
            r.default_ttl.map(secs),
            &rules,
            t0(),
            response_time,
        );
        let want = match r.expect {
            No(why) => Err(why),
            Yes(lifetime, age, flags) => Ok(expected(lifetime, age, flags, response_time)),
        };
        if got != want {
            failures.push(format!("{}: got {got:?}, want {want:?}", r.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} rows failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    println!("{} storage rows", rows.len());
}

#[test]
fn request_directives_table() {
    let rcc = |pairs: &[(&str, &str)]| request_cache_control(&headers(pairs));
    let none = RequestCacheControl::default();
    #[rustfmt::skip]
    let rows: Vec<(&[(&str, &str)], RequestCacheControl)> = vec![
        (&[], none),
        (&[("cache-control", "no-store")], RequestCacheControl { no_store: true, ..none }),
        (&[("cache-control", "no-cache")], RequestCacheControl { no_cache: true, ..none }),
        (&[("pragma", "no-cache")], RequestCacheControl { no_cache: true, ..none }),
        (&[("pragma", "x, No-Cache")], RequestCacheControl { no_cache: true, ..none }),
        (&[("pragma", "no-cache"), ("cache-control", "max-age=5")], RequestCacheControl { max_age: Some(5), ..none }),
        (&[("cache-control", "max-age=0")], RequestCacheControl { max_age: Some(0), ..none }),
        (&[("cache-control", "max-age=x")], RequestCacheControl { max_age: Some(0), ..none }),
        (&[("cache-control", "max-stale")], RequestCacheControl { max_stale: Some(None), ..none }),
        (&[("cache-control", "max-stale=30")], RequestCacheControl { max_stale: Some(Some(30)), ..none }),
        (&[("cache-control", "max-stale=30, max-stale")], RequestCacheControl { max_stale: Some(Some(30)), ..none }),
        (&[("cache-control", "max-stale, max-stale=40, max-stale=30")], RequestCacheControl { max_stale: Some(Some(30)), ..none }),
        (&[("cache-control", "max-stale=bad")], RequestCacheControl { max_stale: Some(Some(0)), ..none }),
        (&[("cache-control", "min-fresh=20, min-fresh=30")], RequestCacheControl { min_fresh: Some(30), ..none }),
        (&[("cache-control", "min-fresh=bad")], none),
        (&[("cache-control", "only-if-cached")], RequestCacheControl { only_if_cached: true, ..none }),
        (&[("cache-control", "no-cache"), ("cache-control", "no-store, only-if-cached")], RequestCacheControl { no_cache: true, no_store: true, only_if_cached: true, ..none }),
    ];
    for (pairs, want) in rows {
        assert_eq!(rcc(pairs), want, "{pairs:?}");
    }
}

#[test]
fn methods_use_or_bypass() {
    let h = headers(&[("cache-control", "no-cache")]);
    let use_ = Lookup::Use(RequestCacheControl {
        no_cache: true,
        ..Default::default()
    });
    assert_eq!(lookup_policy(&Method::GET, &h), use_);
    assert_eq!(lookup_policy(&Method::HEAD, &h), use_);
    for m in [
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::OPTIONS,
        Method::PATCH,
    ] {
        assert_eq!(lookup_policy(&m, &h), Lookup::Bypass, "{m}");
    }
    let search = Method::from_bytes(b"M-SEARCH").unwrap();
    assert_eq!(lookup_policy(&search, &h), Lookup::Bypass);
}

#[test]
fn methods_that_are_not_safe_invalidate() {
    let rows = [
        (Method::POST, 200, true),
        (Method::POST, 303, true),
        (Method::PUT, 204, true),
        (Method::DELETE, 202, true),
        (Method::PATCH, 200, true),
        (Method::POST, 404, false),
        (Method::POST, 500, false),
        (Method::GET, 200, false),
        (Method::HEAD, 200, false),
        (Method::OPTIONS, 200, false),
        (Method::TRACE, 200, false),
        (Method::from_bytes(b"PURGEX").unwrap(), 200, true),
    ];
    for (m, status, want) in rows {
        assert_eq!(
            invalidates(&m, StatusCode::from_u16(status).unwrap()),
            want,
            "{m} {status}"
        );
    }
}

#[test]
fn not_storable_names() {
    let all = [
        NotStorable::Method,
        NotStorable::RequestNoStore,
        NotStorable::Status,
        NotStorable::NoStore,
        NotStorable::Private,
        NotStorable::Authorization,
        NotStorable::VaryStar,
        NotStorable::SetCookie,
        NotStorable::NoFreshness,
        NotStorable::Expired,
    ];
    let mut names: Vec<_> = all.iter().map(|n| n.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), all.len());
    assert!(
        names
            .iter()
            .all(|n| n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
    );
}
