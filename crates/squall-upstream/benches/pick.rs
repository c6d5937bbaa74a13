//! What choosing a server costs a request, per policy, with 2 and 64 servers: one
//! `Group::pick` followed by the `Group::report` that ends it (the pair every proxied request
//! pays; `least_conn` needs the report to keep its counts level). Consistent hashing gets a
//! different key each time, so the ring lookups do not all hit one cache line; a second line
//! for it adds one server down, whose keys walk on to the next point.
//!
//! Run: `cargo bench -p squall-upstream` (add `-- consistent` to filter).

use std::hint::black_box;
use std::net::SocketAddr;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use squall_upstream::{Balance, Group, Outcome, ServerId, ServerSpec, UpstreamSpec};

const POLICIES: [(&str, Balance); 4] = [
    ("round_robin", Balance::RoundRobin),
    ("weighted", Balance::Weighted),
    ("least_conn", Balance::LeastConn),
    ("consistent_hash", Balance::ConsistentHash),
];

fn group(balance: Balance, servers: usize, now: Instant) -> Group {
    let servers = (0..servers)
        .map(|i| ServerSpec {
            address: SocketAddr::from(([10, 0, 0, i as u8], 8080)),
            // Uneven weights, so the weighted policies do real work.
            weight: 1 + (i % 3) as u32,
        })
        .collect();
    Group::new(&UpstreamSpec::new("bench", servers, balance), now, 0).expect("valid spec")
}

fn pick(c: &mut Criterion) {
    let now = Instant::now();
    let mut bench = c.benchmark_group("pick");
    for (name, balance) in POLICIES {
        for servers in [2, 64] {
            let mut g = group(balance, servers, now);
            let mut key = 0u64;
            bench.bench_function(BenchmarkId::new(name, servers), |b| {
                b.iter(|| {
                    key = key.wrapping_add(0x9e37_79b9_7f4a_7c15);
                    let s = g.pick(Some(black_box(key)), now, &[]).expect("a server");
                    g.report(s, Outcome::Success, now);
                    s
                })
            });
        }
    }
    for servers in [2, 64] {
        let mut g = group(Balance::ConsistentHash, servers, now);
        for _ in 0..squall_upstream::PASSIVE_FAILS_DEFAULT {
            g.report(ServerId::new(0), Outcome::Failure, now);
        }
        let mut key = 0u64;
        bench.bench_function(BenchmarkId::new("consistent_hash_one_down", servers), |b| {
            b.iter(|| {
                key = key.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let s = g.pick(Some(black_box(key)), now, &[]).expect("a server");
                g.report(s, Outcome::Success, now);
                s
            })
        });
    }
    bench.finish();
}

fn key_hash(c: &mut Criterion) {
    let uri = b"/assets/app.3f9a2c.js?v=3&lang=en-US";
    c.bench_function("key_hash/uri_36_bytes", |b| {
        b.iter(|| squall_upstream::key_hash(black_box(uri)))
    });
}

criterion_group!(benches, pick, key_hash);
criterion_main!(benches);
