//! The keep-alive pool policy: LIFO reuse, the idle limit per server, idle expiry, the request
//! limit per connection, removal, and the reuse counters.

mod common;

use std::time::{Duration, Instant};

use common::*;
use squall_upstream::{Checkin, CloseReason, ConnId, Pool, PoolLimits, PoolStats};

fn pool(idle_max: u32, idle_timeout_ms: u64, requests_max: u32) -> Pool {
    Pool::new(
        2,
        PoolLimits {
            idle_max,
            idle_timeout: Duration::from_millis(idle_timeout_ms),
            requests_max,
            ..PoolLimits::default()
        },
    )
}

#[test]
fn defaults_are_32_idle_60s_1000_requests_and_1s_for_unsafe_requests() {
    let limits = PoolLimits::default();
    assert_eq!(
        (limits.idle_max, limits.idle_timeout, limits.requests_max),
        (32, Duration::from_secs(60), 1000)
    );
    assert_eq!(limits.unsafe_idle_timeout, Duration::from_secs(1));
}

#[test]
fn an_unsafe_request_reuses_only_a_connection_idle_less_than_its_timeout() {
    let t0 = Instant::now();
    let mut p = pool(8, 60_000, 100);
    assert_eq!(p.checkin(id(0), ConnId(1), t0), Checkin::Keep);
    assert_eq!(p.checkin(id(0), ConnId(2), at(t0, 500)), Checkin::Keep);
    // The newest, idle 999 ms: young enough.
    assert_eq!(p.checkout_unsafe(id(0), at(t0, 1499)), Some(ConnId(2)));
    // The next, idle 1.499 s: not for an unsafe request, and it stays for a safe one.
    assert_eq!(p.checkout_unsafe(id(0), at(t0, 1499)), None);
    assert_eq!(p.idle_count(id(0)), 1);
    assert_eq!(p.checkout(id(0), at(t0, 1499)), Some(ConnId(1)));
    // No idle connection at all is a plain miss, not a stale one.
    assert_eq!(p.checkout_unsafe(id(0), at(t0, 1499)), None);
    assert_eq!(p.checkout_unsafe(id(1), at(t0, 1499)), None);
    let stats = p.stats();
    assert_eq!((stats.hits, stats.misses, stats.unsafe_stale), (2, 3, 1));
    p.check_invariants();
}

#[test]
fn unsafe_idle_timeout_zero_sends_unsafe_requests_on_new_connections() {
    let t0 = Instant::now();
    let limits = PoolLimits {
        unsafe_idle_timeout: Duration::ZERO,
        ..PoolLimits::default()
    };
    let mut p = Pool::new(1, limits);
    assert_eq!(p.checkin(id(0), ConnId(1), t0), Checkin::Keep);
    assert_eq!(p.checkout_unsafe(id(0), t0), None);
    assert_eq!(p.checkout(id(0), t0), Some(ConnId(1)));
    p.check_invariants();
}

#[test]
fn an_unsafe_checkout_never_returns_a_connection_past_idle_timeout() {
    let t0 = Instant::now();
    // unsafe_idle_timeout (1 s) above idle_timeout (200 ms): the shorter one holds.
    let mut p = pool(8, 200, 100);
    assert_eq!(p.checkin(id(0), ConnId(1), t0), Checkin::Keep);
    assert_eq!(p.checkout_unsafe(id(0), at(t0, 200)), None);
    assert_eq!(p.checkout_unsafe(id(0), at(t0, 199)), Some(ConnId(1)));
    p.check_invariants();
}

#[test]
fn checkout_returns_the_most_recently_used_connection_first() {
    let t0 = Instant::now();
    let mut p = pool(8, 60_000, 100);
    for (i, conn) in [ConnId(1), ConnId(2), ConnId(3)].into_iter().enumerate() {
        assert_eq!(p.checkin(id(0), conn, at(t0, i as u64)), Checkin::Keep);
    }
    assert_eq!(p.checkout(id(0), at(t0, 10)), Some(ConnId(3)));
    assert_eq!(p.checkout(id(0), at(t0, 10)), Some(ConnId(2)));
    // Servers have separate stacks.
    assert_eq!(p.checkout(id(1), at(t0, 10)), None);
    assert_eq!(p.checkin(id(0), ConnId(3), at(t0, 11)), Checkin::Keep);
    assert_eq!(p.checkout(id(0), at(t0, 12)), Some(ConnId(3)));
    assert_eq!(p.checkout(id(0), at(t0, 12)), Some(ConnId(1)));
    assert_eq!(p.checkout(id(0), at(t0, 12)), None);
    assert_eq!(p.stats().hits, 4);
    assert_eq!(p.stats().misses, 2);
    p.check_invariants();
}

#[test]
fn the_idle_limit_per_server_closes_the_surplus() {
    let t0 = Instant::now();
    let mut p = pool(2, 60_000, 100);
    assert_eq!(p.checkin(id(0), ConnId(1), t0), Checkin::Keep);
    assert_eq!(p.checkin(id(0), ConnId(2), t0), Checkin::Keep);
    assert_eq!(
        p.checkin(id(0), ConnId(3), t0),
        Checkin::Close(CloseReason::IdleFull)
    );
    assert_eq!(p.checkin(id(1), ConnId(4), t0), Checkin::Keep, "per server");
    assert_eq!(p.idle_count(id(0)), 2);
    assert_eq!(p.idle_total(), 3);
    assert_eq!(p.known(), 3, "the closed one is forgotten");
    p.check_invariants();
}

#[test]
fn idle_max_zero_turns_keep_alive_off() {
    let t0 = Instant::now();
    let mut p = pool(0, 60_000, 100);
    assert_eq!(
        p.checkin(id(0), ConnId(1), t0),
        Checkin::Close(CloseReason::IdleFull)
    );
    assert_eq!(p.known(), 0);
}

#[test]
fn a_connection_is_closed_after_requests_max_exchanges() {
    let t0 = Instant::now();
    let mut p = pool(8, 60_000, 3);
    assert_eq!(
        p.checkin(id(0), ConnId(9), t0),
        Checkin::Keep,
        "1st exchange"
    );
    assert_eq!(p.checkout(id(0), t0), Some(ConnId(9)));
    assert_eq!(p.checkin(id(0), ConnId(9), t0), Checkin::Keep, "2nd");
    assert_eq!(p.checkout(id(0), t0), Some(ConnId(9)));
    assert_eq!(
        p.checkin(id(0), ConnId(9), t0),
        Checkin::Close(CloseReason::RequestsMax),
        "3rd"
    );
    assert_eq!(p.known(), 0);
    assert_eq!(p.stats().closed_requests_max, 1);
    let mut one = pool(8, 60_000, 1);
    assert_eq!(
        one.checkin(id(0), ConnId(1), t0),
        Checkin::Close(CloseReason::RequestsMax)
    );
}

#[test]
fn idle_connections_expire_oldest_first_and_are_never_checked_out_expired() {
    let t0 = Instant::now();
    let mut p = pool(8, 1000, 100);
    p.checkin(id(0), ConnId(1), at(t0, 0));
    p.checkin(id(0), ConnId(2), at(t0, 500));
    p.checkin(id(1), ConnId(3), at(t0, 200));
    assert_eq!(p.next_expiry(), Some(at(t0, 1000)));
    assert_eq!(p.expire(at(t0, 999)), vec![]);
    assert_eq!(p.expire(at(t0, 1000)), vec![ConnId(1)]);
    assert_eq!(p.next_expiry(), Some(at(t0, 1200)));
    // At 1.5 s every idle connection of server 0 is expired: checkout does not hand one out,
    // it leaves them to `expire`.
    assert_eq!(p.checkout(id(0), at(t0, 1500)), None);
    assert_eq!(p.expire(at(t0, 1500)), vec![ConnId(2), ConnId(3)]);
    assert_eq!(p.idle_total(), 0);
    assert_eq!(p.known(), 0);
    assert_eq!(p.next_expiry(), None);
    assert_eq!(p.stats().expired, 3);
    p.check_invariants();
}

#[test]
fn remove_forgets_an_idle_connection_the_origin_closed() {
    let t0 = Instant::now();
    let mut p = pool(8, 60_000, 100);
    p.checkin(id(0), ConnId(1), t0);
    p.checkin(id(0), ConnId(2), t0);
    assert!(p.remove(ConnId(2)));
    assert!(!p.remove(ConnId(2)), "already gone");
    assert!(!p.remove(ConnId(77)), "never known");
    assert_eq!(p.checkout(id(0), t0), Some(ConnId(1)));
    // Removing a connection that is checked out (closed on error) forgets it too.
    assert!(!p.remove(ConnId(1)));
    assert_eq!(p.known(), 0);
    assert_eq!(p.stats().removed_idle, 1);
    p.check_invariants();
}

#[test]
fn misuse_is_handled_without_panicking() {
    let t0 = Instant::now();
    let mut p = pool(8, 60_000, 100);
    assert_eq!(
        p.checkin(id(5), ConnId(1), t0),
        Checkin::Close(CloseReason::UnknownServer)
    );
    assert_eq!(p.checkout(id(5), t0), None);
    // Checked in twice: one idle entry, on top.
    p.checkin(id(0), ConnId(2), t0);
    p.checkin(id(0), ConnId(3), t0);
    p.checkin(id(0), ConnId(2), t0);
    assert_eq!(p.idle_count(id(0)), 2);
    assert_eq!(p.checkout(id(0), t0), Some(ConnId(2)));
    // Checked in under another server: moves there.
    p.checkin(id(1), ConnId(3), at(t0, 10));
    assert_eq!(p.idle_count(id(0)), 0);
    assert_eq!(p.idle_count(id(1)), 1);
    // A clock that goes backwards keeps the stack ordered.
    p.checkin(id(1), ConnId(4), at(t0, 5));
    p.check_invariants();
    assert_eq!(p.checkout(id(1), at(t0, 11)), Some(ConnId(4)));
}

#[test]
fn drain_hands_back_every_idle_connection() {
    let t0 = Instant::now();
    let mut p = pool(8, 60_000, 100);
    p.checkin(id(0), ConnId(1), t0);
    p.checkin(id(1), ConnId(2), t0);
    let mut drained = p.drain();
    drained.sort();
    assert_eq!(drained, vec![ConnId(1), ConnId(2)]);
    assert_eq!((p.idle_total(), p.known()), (0, 0));
    assert_eq!(
        p.stats(),
        PoolStats {
            kept: 2,
            ..PoolStats::default()
        }
    );
}
