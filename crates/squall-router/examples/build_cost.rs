//! Build time and resident memory of 10,000 routes of each kind: what a reload costs and what a
//! router holds. Criterion times builds too (`benches/routes.rs`, group `build_10000`); memory
//! needs a process of its own, hence this example. Linux only (reads `/proc/self/status`).
//!
//! Run: `cargo run --release -p squall-router --example build_cost [KIND]`

use std::time::Instant;

use squall_router::{Pattern, RouteSpec, Router, VhostSpec};

const ROUTES: usize = 10_000;

/// A kind's name and how its route `i` is written.
type Kind = (&'static str, fn(usize) -> Pattern);

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let kinds: [Kind; 6] = [
        ("exact", |i| Pattern::Exact(format!("/api/v1/svc{i}/items"))),
        ("prefix", |i| Pattern::Prefix(format!("/static/svc{i}/"))),
        ("template", |i| {
            Pattern::Template(format!("/api/v1/svc{i}/items/{{id}}"))
        }),
        ("regex_anchored", |i| {
            Pattern::Regex(format!("^/api/v1/svc{i}/items/[0-9]+$"))
        }),
        ("regex_unanchored", |i| {
            Pattern::Regex(format!("/svc{i}/items/[0-9]+$"))
        }),
        ("regex_one_bucket", |i| {
            Pattern::Regex(format!("^/[a-z]+/{i}$"))
        }),
    ];
    println!(
        "{:<18} {:>10} {:>12}",
        "10,000 routes", "build ms", "memory MiB"
    );
    // Every router stays alive to the end, so one's freed memory is not reused by the next
    // and each line's growth is its own.
    let mut alive = Vec::new();
    let only = std::env::args().nth(1);
    for (name, pattern) in kinds {
        if only.as_deref().is_some_and(|only| only != name) {
            continue;
        }
        let routes = (0..ROUTES)
            .map(|i| RouteSpec {
                pattern: pattern(i),
                methods: None,
                headers: Vec::new(),
                action: i,
            })
            .collect();
        let specs = vec![VhostSpec {
            hosts: vec!["*".into()],
            routes,
        }];
        let before = rss_kib();
        let start = Instant::now();
        let router = Router::new(specs).expect("routes compile");
        let elapsed = start.elapsed();
        let grown = rss_kib().saturating_sub(before);
        println!(
            "{name:<18} {:>10.1} {:>12.1}",
            elapsed.as_secs_f64() * 1e3,
            grown as f64 / 1024.0
        );
        alive.push(router);
    }
}
