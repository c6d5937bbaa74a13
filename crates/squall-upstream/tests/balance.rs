//! Each balancing policy's choices: exact sequences where the algorithm fixes them (nginx's
//! smooth weighted round robin), distributions over 100k picks otherwise, and what happens to
//! the choice when servers go down, are excluded, or are added and removed.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Instant;

use common::*;
use squall_upstream::{AllDown, Balance, Group, Outcome, ServerId};

/// Marks `server` down by reporting as many failures as the default threshold asks.
fn fail_until_down(group: &mut Group, server: ServerId, now: Instant) {
    for _ in 0..squall_upstream::PASSIVE_FAILS_DEFAULT {
        group.report(server, Outcome::Failure, now);
    }
    assert_eq!(
        group.state(server, now),
        Some(squall_upstream::HealthState::Down)
    );
}

fn sequence(group: &mut Group, picks: usize, now: Instant) -> String {
    (0..picks)
        .map(|_| {
            let s = group.pick(None, now, &[]).unwrap();
            group.report(s, Outcome::Success, now);
            (b'a' + s.index() as u8) as char
        })
        .collect()
}

#[test]
fn smooth_weighted_round_robin_gives_the_nginx_sequence() {
    let t0 = Instant::now();
    let mut g = group(Balance::Weighted, &[5, 1, 1], t0);
    // The example in the nginx change that introduced smooth weighted round robin (1.3.1).
    assert_eq!(sequence(&mut g, 14, t0), "aabacaaaabacaa");
    g.check_invariants();
}

#[test]
fn weighted_skips_a_down_server_and_keeps_the_others_ratio() {
    let t0 = Instant::now();
    let mut g = group(Balance::Weighted, &[5, 1, 2], t0);
    fail_until_down(&mut g, id(0), t0);
    let c = counts(&mut g, 3000, |_| None, t0);
    assert_eq!(c, vec![0, 1000, 2000]);
}

#[test]
fn round_robin_cycles_and_ignores_weights() {
    let t0 = Instant::now();
    let mut g = group(Balance::RoundRobin, &[5, 1, 1], t0);
    let s = sequence(&mut g, 6, t0);
    assert!(["abcabc", "bcabca", "cabcab"].contains(&s.as_str()), "{s}");
}

#[test]
fn round_robin_skips_the_down_server() {
    let t0 = Instant::now();
    let mut g = group(Balance::RoundRobin, &[1, 1, 1], t0);
    fail_until_down(&mut g, id(1), t0);
    let s = sequence(&mut g, 6, t0);
    assert!(!s.contains('b'), "{s}");
    assert_eq!(s.matches('a').count(), 3);
}

#[test]
fn exclude_skips_servers_already_tried() {
    let t0 = Instant::now();
    for balance in [
        Balance::RoundRobin,
        Balance::Weighted,
        Balance::LeastConn,
        Balance::ConsistentHash,
    ] {
        let mut g = group(balance, &[1, 1, 1], t0);
        for key in 0..50u64 {
            let first = g.pick(Some(key), t0, &[]).unwrap();
            let second = g.pick(Some(key), t0, &[first]).unwrap();
            let third = g.pick(Some(key), t0, &[first, second]).unwrap();
            assert!(
                first != second && second != third && first != third,
                "{balance:?}"
            );
            assert_eq!(
                g.pick(Some(key), t0, &[first, second, third]),
                None,
                "{balance:?}"
            );
            for s in [first, second, third] {
                g.report(s, Outcome::Success, t0);
            }
        }
        g.check_invariants();
    }
}

#[test]
fn least_conn_follows_in_flight_counts() {
    let t0 = Instant::now();
    let mut g = group(Balance::LeastConn, &[1, 1, 1], t0);
    // Three requests out, one per server; server b finishes first and gets the next one.
    let firsts: Vec<ServerId> = (0..3).map(|_| g.pick(None, t0, &[]).unwrap()).collect();
    assert_eq!(
        firsts.iter().map(|s| s.index()).sum::<usize>(),
        3,
        "one each"
    );
    g.report(id(1), Outcome::Success, t0);
    assert_eq!(g.pick(None, t0, &[]), Some(id(1)));
    assert_eq!(g.in_flight(id(1)), 1);
    // Two finish on c: it is the least loaded twice in a row.
    g.report(id(2), Outcome::Success, t0);
    assert_eq!(g.pick(None, t0, &[]), Some(id(2)));
    g.report(id(2), Outcome::Neutral, t0);
    assert_eq!(g.pick(None, t0, &[]), Some(id(2)));
    g.check_invariants();
}

#[test]
fn least_conn_weighs_in_flight_by_weight() {
    let t0 = Instant::now();
    let mut g = group(Balance::LeastConn, &[3, 1], t0);
    // Nothing ever finishes: a takes 3 requests for each of b's, since it compares
    // in_flight / weight.
    let mut c = [0usize; 2];
    for _ in 0..400 {
        c[g.pick(None, t0, &[]).unwrap().index()] += 1;
    }
    assert_eq!(c, [300, 100]);
}

#[test]
fn least_conn_on_an_idle_group_honours_weights_like_nginx() {
    let t0 = Instant::now();
    let mut g = group(Balance::LeastConn, &[5, 1, 1], t0);
    // Every request finishes before the next: all tie at 0, broken by smooth round robin.
    assert_eq!(sequence(&mut g, 7, t0), "aabacaa");
}

#[test]
fn distribution_over_100k_picks_is_within_2_percent_of_the_weights() {
    let t0 = Instant::now();
    let weights = [5, 3, 2, 1];
    for balance in [Balance::Weighted, Balance::LeastConn] {
        let mut g = group(balance, &weights, t0);
        assert_shares(&counts(&mut g, 100_000, |_| None, t0), &weights, 0.02);
    }
    let mut g = group(Balance::RoundRobin, &weights, t0);
    assert_shares(&counts(&mut g, 100_000, |_| None, t0), &[1, 1, 1, 1], 0.02);
}

#[test]
fn consistent_hash_distribution_follows_the_weights_loosely() {
    // A ring balances only to about 1/sqrt(points) per server (ring.rs): 4% at 640 points, so
    // the busiest of 10 servers is typically 1.5 to 2 of those off (8.5% here). Not the 2% the
    // other policies meet; see VNODES_PER_WEIGHT for the trade.
    let t0 = Instant::now();
    for weights in [&[1, 1, 1][..], &[2, 1, 1], &[1; 10]] {
        let mut g = group(Balance::ConsistentHash, weights, t0);
        let mut rng = Rng(7);
        let c = counts(&mut g, 100_000, |_| Some(rng.next()), t0);
        assert_shares(&c, weights, 0.10);
    }
}

#[test]
fn consistent_hash_sends_a_key_to_one_server_in_every_worker() {
    let t0 = Instant::now();
    let spec = spec(Balance::ConsistentHash, &[1, 1, 1, 1]);
    let mut workers: Vec<Group> = (0..4)
        .map(|seed| Group::new(&spec, t0, seed).unwrap())
        .collect();
    for key in 0..1000u64 {
        let key = squall_upstream::key_hash(format!("/item/{key}").as_bytes());
        let picks: Vec<ServerId> = workers
            .iter_mut()
            .map(|g| g.pick(Some(key), t0, &[]).unwrap())
            .collect();
        assert!(picks.windows(2).all(|w| w[0] == w[1]), "{picks:?}");
    }
}

#[test]
fn consistent_hash_without_a_key_round_robins() {
    let t0 = Instant::now();
    let mut g = group(Balance::ConsistentHash, &[1, 1], t0);
    let s = sequence(&mut g, 4, t0);
    assert!(s == "abab" || s == "baba", "{s}");
}

/// Which address each of `keys` lands on.
fn owners(weights: &[u32], skip: Option<usize>, keys: &[u64]) -> Vec<SocketAddr> {
    let t0 = Instant::now();
    let mut servers = servers(weights);
    if let Some(skip) = skip {
        servers.remove(skip);
    }
    let spec = squall_upstream::UpstreamSpec::new("app", servers, Balance::ConsistentHash);
    let mut g = Group::new(&spec, t0, 0).unwrap();
    keys.iter()
        .map(|&k| {
            let s = g.pick(Some(k), t0, &[]).unwrap();
            g.report(s, Outcome::Success, t0);
            g.address(s).unwrap()
        })
        .collect()
}

#[test]
fn removing_a_server_moves_only_its_keys() {
    let mut rng = Rng(99);
    let keys: Vec<u64> = (0..100_000).map(|_| rng.next()).collect();
    let weights = [1, 2, 1, 1, 3, 1, 1, 1, 1, 1];
    let before = owners(&weights, None, &keys);
    let after = owners(&weights, Some(4), &keys);
    let removed = address(4);
    let mut moved = 0;
    for (b, a) in before.iter().zip(&after) {
        if b != a {
            assert_eq!(
                *b, removed,
                "a key moved between two servers that both stayed"
            );
            moved += 1;
        }
    }
    assert_eq!(
        moved,
        before.iter().filter(|&&b| b == removed).count(),
        "all its keys moved"
    );
    // Its share was 3/13 of the keys.
    let share = moved as f64 / keys.len() as f64;
    assert!((share - 3.0 / 13.0).abs() < 0.03, "{share}");
}

#[test]
fn adding_a_server_moves_about_one_in_n_keys_all_to_it() {
    let mut rng = Rng(5);
    let keys: Vec<u64> = (0..100_000).map(|_| rng.next()).collect();
    let weights = [1u32; 8];
    let before = owners(&weights[..7], None, &keys);
    let after = owners(&weights, None, &keys);
    let added = address(7);
    let moved = before.iter().zip(&after).filter(|(b, a)| b != a).count();
    assert!(
        before
            .iter()
            .zip(&after)
            .all(|(b, a)| b == a || *a == added)
    );
    let share = moved as f64 / keys.len() as f64;
    assert!((share - 1.0 / 8.0).abs() < 0.02, "{share}");
}

#[test]
fn a_down_servers_keys_spread_over_the_others_and_come_back() {
    let t0 = Instant::now();
    let mut g = group(Balance::ConsistentHash, &[1, 1, 1, 1, 1], t0);
    let keys: Vec<u64> = (0..20_000u64).collect();
    let pick_all = |g: &mut Group| -> Vec<ServerId> {
        keys.iter()
            .map(|&k| {
                let s = g.pick(Some(k), t0, &[]).unwrap();
                g.report(s, Outcome::Neutral, t0);
                s
            })
            .collect()
    };
    let before = pick_all(&mut g);
    fail_until_down(&mut g, id(2), t0);
    let during = pick_all(&mut g);
    let mut went_to: HashMap<ServerId, usize> = HashMap::new();
    for (b, d) in before.iter().zip(&during) {
        if *b == id(2) {
            *went_to.entry(*d).or_default() += 1;
        } else {
            assert_eq!(b, d, "keys of servers that are up stay put");
        }
    }
    assert_eq!(went_to.len(), 4, "spread over all four others: {went_to:?}");
    assert!(!went_to.contains_key(&id(2)));
    // Back up (by active checks here, to keep it short): every key is home again.
    for _ in 0..squall_upstream::PASSIVE_PASSES_DEFAULT {
        g.record_check(id(2), true, t0);
    }
    assert_eq!(pick_all(&mut g), before);
}

#[test]
fn when_every_server_is_down_the_least_recently_failed_is_picked() {
    let t0 = Instant::now();
    for balance in [
        Balance::RoundRobin,
        Balance::Weighted,
        Balance::LeastConn,
        Balance::ConsistentHash,
    ] {
        let mut g = group(balance, &[1, 1, 1], t0);
        fail_until_down(&mut g, id(1), at(t0, 0));
        fail_until_down(&mut g, id(2), at(t0, 10));
        fail_until_down(&mut g, id(0), at(t0, 20));
        let now = at(t0, 30);
        let s = g.pick(Some(1), now, &[]);
        assert_eq!(s, Some(id(1)), "{balance:?}");
        g.report(id(1), Outcome::Failure, now);
        // It failed again, so it is now the most recent: server c is next.
        assert_eq!(g.pick(Some(1), now, &[]), Some(id(2)), "{balance:?}");
        assert_eq!(g.pick(Some(1), now, &[id(2)]), Some(id(0)), "{balance:?}");
        assert_eq!(g.pick(Some(1), now, &[id(0), id(1), id(2)]), None);
        g.check_invariants();
    }
}

#[test]
fn with_all_down_fail_a_group_of_down_servers_gives_none() {
    let t0 = Instant::now();
    let mut spec = spec(Balance::RoundRobin, &[1, 1]);
    spec.all_down = AllDown::Fail;
    let mut g = Group::new(&spec, t0, 0).unwrap();
    fail_until_down(&mut g, id(0), t0);
    fail_until_down(&mut g, id(1), t0);
    assert_eq!(g.pick(None, at(t0, 10), &[]), None);
    // Back-off over: one trial each, then none again until they report.
    let later = at(t0, 1000);
    let trials = [g.pick(None, later, &[]), g.pick(None, later, &[])];
    assert!(
        trials.contains(&Some(id(0))) && trials.contains(&Some(id(1))),
        "{trials:?}"
    );
    assert_eq!(g.pick(None, later, &[]), None);
}

#[test]
fn the_fallback_is_only_for_a_fully_down_group_not_for_exclusions() {
    let t0 = Instant::now();
    let mut g = group(Balance::RoundRobin, &[1, 1], t0);
    fail_until_down(&mut g, id(1), t0);
    // Server a is up but was tried: the request does not fall back onto the down server b.
    assert_eq!(g.pick(None, at(t0, 10), &[id(0)]), None);
}
