//! 10,000 routes of each kind build, route a request to the 5,000th route, and route a request
//! matching none of them to nothing (the shape of the Easegress router benchmark). Timing lives
//! in `benches/routes.rs`; these check correctness at scale and that one vhost's index does
//! not lose routes among its neighbours.

use http::{HeaderMap, Method};
use squall_router::{Pattern, RouteRequest, RouteSpec, Router, VhostSpec};

const ROUTES: usize = 10_000;

fn router(make: impl Fn(usize) -> Pattern) -> Router<usize> {
    let routes = (0..ROUTES)
        .map(|i| RouteSpec {
            pattern: make(i),
            methods: None,
            headers: Vec::new(),
            action: i,
        })
        .collect();
    Router::new(vec![VhostSpec {
        hosts: vec!["*".into()],
        routes,
    }])
    .unwrap()
}

fn hit(router: &Router<usize>, path: &str) -> Option<usize> {
    let headers = HeaderMap::new();
    let req = RouteRequest {
        host: Some("example.com"),
        method: &Method::GET,
        path,
        headers: &headers,
    };
    router.route(&req).map(|m| {
        assert_eq!(*m.action, m.route_index);
        m.route_index
    })
}

/// Checks the 5,000th route, a few others, and a miss.
fn check(router: &Router<usize>, path_of: impl Fn(usize) -> String, miss: &str) {
    for i in [0, 1, 9, 10, 99, 4_999, 5_000, 5_001, ROUTES - 1] {
        assert_eq!(hit(router, &path_of(i)), Some(i), "{}", path_of(i));
    }
    assert_eq!(hit(router, miss), None, "{miss}");
}

#[test]
fn ten_thousand_exact() {
    let r = router(|i| Pattern::Exact(format!("/api/v1/svc{i}/items")));
    check(
        &r,
        |i| format!("/api/v1/svc{i}/items"),
        "/api/v1/svc5000/items/",
    );
}

#[test]
fn ten_thousand_prefixes() {
    let r = router(|i| Pattern::Prefix(format!("/static/svc{i}/")));
    check(&r, |i| format!("/static/svc{i}/app.js"), "/static/svc5000");
}

#[test]
fn ten_thousand_templates() {
    let r = router(|i| Pattern::Template(format!("/api/v1/svc{i}/items/{{id}}")));
    check(
        &r,
        |i| format!("/api/v1/svc{i}/items/42"),
        "/api/v1/svc5000/items/",
    );
    let headers = HeaderMap::new();
    let path = "/api/v1/svc5000/items/abc";
    let req = RouteRequest {
        host: None,
        method: &Method::GET,
        path,
        headers: &headers,
    };
    assert_eq!(r.route(&req).unwrap().params.value("id", path), Some("abc"));
}

#[test]
fn ten_thousand_anchored_regexes() {
    let r = router(|i| Pattern::Regex(format!("^/api/v1/svc{i}/items/[0-9]+$")));
    check(
        &r,
        |i| format!("/api/v1/svc{i}/items/42"),
        "/api/v1/svc5000/items/x",
    );
}

#[test]
fn ten_thousand_unanchored_regexes() {
    let r = router(|i| Pattern::Regex(format!("/svc{i}/items/[0-9]+$")));
    check(
        &r,
        |i| format!("/api/v1/svc{i}/items/42"),
        "/api/v1/svc5000/items/x",
    );
}

/// Regexes without a distinguishing literal all land in one bucket, scanned through its
/// `RegexSet`; slower than the literal-indexed kinds but still correct, and the earliest route
/// in file order still wins.
#[test]
fn one_thousand_regexes_sharing_a_bucket() {
    let routes = (0..1_000)
        .map(|i| RouteSpec {
            pattern: Pattern::Regex(format!("^/[a-z]+/{i}$")),
            methods: None,
            headers: Vec::new(),
            action: i,
        })
        .chain(std::iter::once(RouteSpec {
            pattern: Pattern::Regex("^/[a-z]+/500$".into()),
            methods: None,
            headers: Vec::new(),
            action: 1_000,
        }))
        .collect();
    let r = Router::new(vec![VhostSpec {
        hosts: vec!["*".into()],
        routes,
    }])
    .unwrap();
    assert_eq!(hit(&r, "/abc/500"), Some(500));
    assert_eq!(hit(&r, "/abc/999"), Some(999));
    assert_eq!(hit(&r, "/abc/1000"), None);
    assert_eq!(hit(&r, "/ABC/5"), None);
}

#[test]
fn mixed_kinds_at_scale_keep_the_order() {
    let mut routes: Vec<RouteSpec<usize>> = Vec::new();
    for i in 0..2_500 {
        let n = routes.len();
        let spec = |pattern, action| RouteSpec {
            pattern,
            methods: None,
            headers: Vec::new(),
            action,
        };
        routes.push(spec(Pattern::Prefix(format!("/m/{i}/")), n));
        routes.push(spec(Pattern::Template(format!("/m/{i}/{{x}}")), n + 1));
        routes.push(spec(Pattern::Regex(format!("^/m/{i}/[a-z]+$")), n + 2));
        routes.push(spec(Pattern::Exact(format!("/m/{i}/exact")), n + 3));
    }
    let r = Router::new(vec![VhostSpec {
        hosts: vec!["*".into()],
        routes,
    }])
    .unwrap();
    // For i = 1250: prefix 5000, template 5001, regex 5002, exact 5003.
    assert_eq!(hit(&r, "/m/1250/exact"), Some(5_003));
    assert_eq!(
        hit(&r, "/m/1250/abc"),
        Some(5_001),
        "template precedes regex in file order"
    );
    assert_eq!(hit(&r, "/m/1250/a/b"), Some(5_000));
    assert_eq!(hit(&r, "/m/99999/abc"), None);
}
