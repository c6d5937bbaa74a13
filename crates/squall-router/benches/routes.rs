//! Routing cost per request with 10 vs 10,000 routes of each kind: a request hitting the 5th of
//! 10 routes, the 5,000th of 10,000 (the Easegress router benchmark's shape), and a miss.
//! The acceptance: the 10,000 column costs no more than the 10 column, for every kind.
//! A second group times building 10,000 routes of each kind (a reload's cost).
//!
//! Run: `cargo bench -p squall-router` (add `-- hit` or `-- build` to filter).

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use http::{HeaderMap, Method};
use squall_router::{Pattern, RouteRequest, RouteSpec, Router, VhostSpec};

/// One route kind: how route `i` is written, a path that hits it, and a path that hits none.
struct Kind {
    name: &'static str,
    pattern: fn(usize) -> Pattern,
    hit: fn(usize) -> String,
    miss: &'static str,
}

const KINDS: &[Kind] = &[
    Kind {
        name: "exact",
        pattern: |i| Pattern::Exact(format!("/api/v1/svc{i}/items")),
        hit: |i| format!("/api/v1/svc{i}/items"),
        miss: "/api/v1/nothing/here",
    },
    Kind {
        name: "prefix",
        pattern: |i| Pattern::Prefix(format!("/static/svc{i}/")),
        hit: |i| format!("/static/svc{i}/js/app.js"),
        miss: "/api/v1/nothing/here",
    },
    Kind {
        name: "template",
        pattern: |i| Pattern::Template(format!("/api/v1/svc{i}/items/{{id}}")),
        hit: |i| format!("/api/v1/svc{i}/items/42"),
        miss: "/api/v1/nothing/here",
    },
    Kind {
        name: "regex_anchored",
        pattern: |i| Pattern::Regex(format!("^/api/v1/svc{i}/items/[0-9]+$")),
        hit: |i| format!("/api/v1/svc{i}/items/42"),
        miss: "/api/v1/nothing/here",
    },
    Kind {
        name: "regex_unanchored",
        pattern: |i| Pattern::Regex(format!("/svc{i}/items/[0-9]+$")),
        hit: |i| format!("/api/v1/svc{i}/items/42"),
        miss: "/api/v1/nothing/here",
    },
];

fn router(kind: &Kind, count: usize) -> Router<usize> {
    let routes = (0..count)
        .map(|i| RouteSpec {
            pattern: (kind.pattern)(i),
            methods: None,
            headers: Vec::new(),
            action: i,
        })
        .collect();
    Router::new(vec![VhostSpec {
        hosts: vec!["*".into()],
        routes,
    }])
    .expect("bench routes compile")
}

fn route(router: &Router<usize>, path: &str, headers: &HeaderMap) -> Option<usize> {
    let req = RouteRequest {
        host: Some("example.com"),
        method: &Method::GET,
        path,
        headers,
    };
    router.route(&req).map(|m| *m.action)
}

fn per_request(c: &mut Criterion) {
    let headers = HeaderMap::new();
    for kind in KINDS {
        let mut group = c.benchmark_group(kind.name);
        for (count, target) in [(10, 5), (10_000, 5_000)] {
            let router = router(kind, count);
            let hit = (kind.hit)(target);
            assert_eq!(
                route(&router, &hit, &headers),
                Some(target),
                "{} {hit}",
                kind.name
            );
            assert_eq!(
                route(&router, kind.miss, &headers),
                None,
                "{} miss",
                kind.name
            );
            group.bench_function(
                BenchmarkId::new("hit", format!("{target}_of_{count}")),
                |b| b.iter(|| route(&router, black_box(&hit), &headers)),
            );
            group.bench_function(BenchmarkId::new("miss", count), |b| {
                b.iter(|| route(&router, black_box(kind.miss), &headers))
            });
        }
        group.finish();
    }
}

fn build(c: &mut Criterion) {
    let mut group = c.benchmark_group("build_10000");
    group.sample_size(10);
    for kind in KINDS {
        group.bench_function(kind.name, |b| b.iter(|| router(kind, 10_000)));
    }
    group.finish();
}

criterion_group! {
    name = benches;
    // Short runs: the shared machine has two cores and these numbers are tens of nanoseconds.
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = per_request, build
}
criterion_main!(benches);
