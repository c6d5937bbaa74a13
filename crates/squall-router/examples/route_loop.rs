//! Routes one request N times, for counting instructions per request with callgrind. Wall-clock
//! benches on a shared two-core machine swing by ±50%; instruction counts do not, so this is how
//! "10,000 routes cost no more than 10" is checked exactly (the routes are those of
//! `benches/routes.rs`):
//!
//! ```text
//! cargo build --release -p squall-router --example route_loop
//! ir() { valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!        target/release/examples/route_loop "$@" 2>&1 | grep -oP 'Collected : \K[0-9]+'; }
//! echo $(( ($(ir prefix 10000 20000) - $(ir prefix 10000 0)) / 20000 ))   # per request
//! ```
//!
//! Arguments: KIND (exact, prefix, template, regex_anchored, regex_unanchored), ROUTES, N, and
//! `miss` to route a path that matches no route instead of route ROUTES/2.

use std::hint::black_box;

use http::{HeaderMap, Method};
use squall_router::{Pattern, RouteRequest, RouteSpec, Router, VhostSpec};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: route_loop KIND ROUTES N [miss]";
    let (Some(kind), Some(count), Some(iterations)) = (
        args.get(1),
        args.get(2).and_then(|a| a.parse::<usize>().ok()),
        args.get(3).and_then(|a| a.parse::<usize>().ok()),
    ) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let miss = args.get(4).is_some_and(|a| a == "miss");
    let target = count / 2;
    let (pattern, hit): (fn(usize) -> Pattern, String) = match kind.as_str() {
        "exact" => (
            |i| Pattern::Exact(format!("/api/v1/svc{i}/items")),
            format!("/api/v1/svc{target}/items"),
        ),
        "prefix" => (
            |i| Pattern::Prefix(format!("/static/svc{i}/")),
            format!("/static/svc{target}/js/app.js"),
        ),
        "template" => (
            |i| Pattern::Template(format!("/api/v1/svc{i}/items/{{id}}")),
            format!("/api/v1/svc{target}/items/42"),
        ),
        "regex_anchored" => (
            |i| Pattern::Regex(format!("^/api/v1/svc{i}/items/[0-9]+$")),
            format!("/api/v1/svc{target}/items/42"),
        ),
        "regex_unanchored" => (
            |i| Pattern::Regex(format!("/svc{i}/items/[0-9]+$")),
            format!("/api/v1/svc{target}/items/42"),
        ),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let path = if miss {
        "/api/v1/nothing/here".to_string()
    } else {
        hit
    };
    let routes = (0..count)
        .map(|i| RouteSpec {
            pattern: pattern(i),
            methods: None,
            headers: Vec::new(),
            action: i,
        })
        .collect();
    let router = Router::new(vec![VhostSpec {
        hosts: vec!["*".into()],
        routes,
    }])
    .expect("routes compile");
    let headers = HeaderMap::new();
    let req = RouteRequest {
        host: Some("example.com"),
        method: &Method::GET,
        path: &path,
        headers: &headers,
    };
    let want = (!miss).then_some(target);
    assert_eq!(router.route(&req).map(|m| *m.action), want, "{kind} {path}");
    let mut sum = 0;
    for _ in 0..iterations {
        sum += black_box(&router)
            .route(black_box(&req))
            .map_or(0, |m| *m.action);
    }
    black_box(sum);
}
