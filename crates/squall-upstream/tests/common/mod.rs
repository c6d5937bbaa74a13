//! Shared helpers of the integration tests: specs, a virtual clock and a fixed-seed PRNG.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use squall_upstream::{Balance, Group, ServerId, ServerSpec, UpstreamSpec};

/// Server `i` of a test group: 10.0.x.y:8080.
pub fn address(i: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, (i / 256) as u8, (i % 256) as u8], 8080))
}

pub fn servers(weights: &[u32]) -> Vec<ServerSpec> {
    weights
        .iter()
        .enumerate()
        .map(|(i, &weight)| ServerSpec {
            address: address(i),
            weight,
        })
        .collect()
}

pub fn spec(balance: Balance, weights: &[u32]) -> UpstreamSpec {
    UpstreamSpec::new("app", servers(weights), balance)
}

pub fn group(balance: Balance, weights: &[u32], t0: Instant) -> Group {
    Group::new(&spec(balance, weights), t0, 0).expect("valid spec")
}

pub fn id(i: u32) -> ServerId {
    ServerId::new(i)
}

/// `t0 + ms` milliseconds: the virtual clock.
pub fn at(t0: Instant, ms: u64) -> Instant {
    t0 + Duration::from_millis(ms)
}

/// xorshift64*: a fixed-seed PRNG, so every run of a randomized test is the same run.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform-enough in `0..n` for tests (n is small).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// `picks` picks, each reported as a success at once; how often each server was chosen.
pub fn counts(
    group: &mut Group,
    picks: usize,
    mut key: impl FnMut(usize) -> Option<u64>,
    now: Instant,
) -> Vec<usize> {
    let mut counts = vec![0; group.len()];
    for i in 0..picks {
        let server = group.pick(key(i), now, &[]).expect("a server");
        group.report(server, squall_upstream::Outcome::Success, now);
        counts[server.index()] += 1;
    }
    counts
}

/// Asserts each server's share of `counts` is within `tolerance` (relative) of its weight share.
pub fn assert_shares(counts: &[usize], weights: &[u32], tolerance: f64) {
    let total: usize = counts.iter().sum();
    let weight_total: u32 = weights.iter().sum();
    for (i, (&c, &w)) in counts.iter().zip(weights).enumerate() {
        let share = c as f64 / total as f64;
        let want = f64::from(w) / f64::from(weight_total);
        assert!(
            ((share - want) / want).abs() <= tolerance,
            "server {i}: share {share:.4}, weight share {want:.4} (counts {counts:?})"
        );
    }
}
