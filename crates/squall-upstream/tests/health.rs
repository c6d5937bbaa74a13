//! Health transitions of servers in a group, on a virtual clock: passive (real traffic, with
//! back-off and half-open trials) and active (probe scheduling and thresholds).

mod common;

use std::time::{Duration, Instant};

use common::*;
use squall_upstream::{
    Balance, Group, HealthCheckSpec, HealthState, Outcome, UpstreamErrorClass, UpstreamSpec,
};

fn active_spec(interval_ms: u64) -> UpstreamSpec {
    let mut spec = spec(Balance::RoundRobin, &[1, 1]);
    spec.health_check = Some(HealthCheckSpec {
        path: "/healthz".into(),
        interval: Duration::from_millis(interval_ms),
        fails: 3,
        passes: 2,
    });
    spec
}

#[test]
fn passive_failures_in_a_row_mark_a_server_down_and_a_success_resets_the_count() {
    let t0 = Instant::now();
    let mut g = group(Balance::RoundRobin, &[1, 1], t0);
    g.report(id(0), Outcome::Failure, t0);
    g.report(id(0), Outcome::Failure, t0);
    g.report(id(0), Outcome::Success, t0);
    g.report(id(0), Outcome::Failure, t0);
    g.report(id(0), Outcome::Failure, t0);
    assert_eq!(
        g.state(id(0), t0),
        Some(HealthState::Up),
        "not three in a row"
    );
    g.report(id(0), Outcome::Failure, t0);
    assert_eq!(g.state(id(0), t0), Some(HealthState::Down));
    assert_eq!(g.up_count(), 1);
    assert_eq!(g.stats(id(0)).downs, 1);
    g.check_invariants();
}

#[test]
fn a_down_server_gets_one_trial_after_its_back_off_which_doubles_to_30s() {
    let t0 = Instant::now();
    let mut g = group(Balance::RoundRobin, &[1, 1], t0);
    for _ in 0..3 {
        g.report(id(0), Outcome::Failure, t0);
    }
    // Back-offs 1 s, 2, 4, 8, 16, then 30 s (capped) after each failed trial.
    let mut now = t0;
    for backoff_s in [1, 2, 4, 8, 16, 30, 30] {
        let just_before = now + Duration::from_millis(backoff_s * 1000 - 1);
        assert_eq!(
            g.state(id(0), just_before),
            Some(HealthState::Down),
            "{backoff_s}"
        );
        assert_eq!(
            g.pick(None, just_before, &[id(1)]),
            None,
            "only b, which is excluded"
        );
        now += Duration::from_secs(backoff_s);
        assert_eq!(
            g.state(id(0), now),
            Some(HealthState::HalfOpen),
            "{backoff_s}"
        );
        assert_eq!(g.pick(None, now, &[id(1)]), Some(id(0)), "the trial");
        assert_eq!(g.pick(None, now, &[id(1)]), None, "one trial at a time");
        g.report(id(0), Outcome::Failure, now);
        g.check_invariants();
    }
}

#[test]
fn passes_in_a_row_bring_a_server_back_with_the_back_off_reset() {
    let t0 = Instant::now();
    let mut g = group(Balance::RoundRobin, &[1, 1], t0);
    for _ in 0..3 {
        g.report(id(0), Outcome::Failure, t0);
    }
    let now = at(t0, 1000);
    assert_eq!(g.pick(None, now, &[id(1)]), Some(id(0)));
    g.report(id(0), Outcome::Success, now);
    assert_eq!(
        g.state(id(0), now),
        Some(HealthState::HalfOpen),
        "one pass of two: next trial now"
    );
    assert_eq!(g.pick(None, now, &[id(1)]), Some(id(0)));
    g.report(id(0), Outcome::Success, now);
    assert_eq!(g.state(id(0), now), Some(HealthState::Up));
    assert_eq!(g.stats(id(0)).ups, 1);
    // Down again: the back-off starts from 1 s, not from where it was.
    for _ in 0..3 {
        g.report(id(0), Outcome::Failure, now);
    }
    assert_eq!(g.state(id(0), at(t0, 2000)), Some(HealthState::HalfOpen));
    g.check_invariants();
}

#[test]
fn a_trial_that_ends_neutral_lets_the_next_trial_through() {
    let t0 = Instant::now();
    let mut g = group(Balance::RoundRobin, &[1], t0);
    for _ in 0..3 {
        g.report(id(0), Outcome::Failure, t0);
    }
    let now = at(t0, 1000);
    assert_eq!(g.pick(None, now, &[]), Some(id(0)));
    g.report(id(0), Outcome::Neutral, now);
    assert_eq!(g.state(id(0), now), Some(HealthState::HalfOpen));
}

#[test]
fn active_checks_are_staggered_then_periodic() {
    let t0 = Instant::now();
    let spec = active_spec(2000);
    let mut g = Group::new(&spec, t0, 3).unwrap();
    assert_eq!(
        g.due_checks(t0).count(),
        0,
        "first probes are spread over the first interval"
    );
    let first = g.next_check_at().unwrap();
    assert!(first >= t0 && first < at(t0, 2000));
    let due: Vec<_> = g.due_checks(at(t0, 2000)).collect();
    assert_eq!(due, vec![id(0), id(1)], "both due within one interval");
    assert_eq!(
        g.due_checks(at(t0, 3999)).count(),
        0,
        "each probed once per interval"
    );
    assert_eq!(g.next_check_at(), Some(at(t0, 4000)));
    // A stalled worker probes once, not once per missed interval.
    assert_eq!(g.due_checks(at(t0, 60_000)).count(), 2);
    assert_eq!(g.due_checks(at(t0, 60_001)).count(), 0);
    // Different workers probe at different times.
    let other = Group::new(&spec, t0, 4).unwrap();
    assert_ne!(other.next_check_at(), Some(first));
}

#[test]
fn dropping_the_due_iterator_early_leaves_the_rest_due() {
    let t0 = Instant::now();
    let mut g = Group::new(&active_spec(1000), t0, 0).unwrap();
    let now = at(t0, 1000);
    assert_eq!(g.due_checks(now).next(), Some(id(0)));
    assert_eq!(g.due_checks(now).collect::<Vec<_>>(), vec![id(1)]);
}

#[test]
fn without_a_health_check_nothing_is_ever_due() {
    let t0 = Instant::now();
    let mut g = group(Balance::RoundRobin, &[1, 1], t0);
    assert_eq!(g.due_checks(at(t0, 1_000_000)).count(), 0);
    assert_eq!(g.next_check_at(), None);
}

#[test]
fn probes_take_a_server_down_and_only_probes_bring_it_back() {
    let t0 = Instant::now();
    let mut g = Group::new(&active_spec(1000), t0, 0).unwrap();
    for _ in 0..3 {
        g.record_check(id(1), false, t0);
    }
    assert_eq!(g.state(id(1), t0), Some(HealthState::Down));
    // No half-open trial, however long it waits: the check decides (an operator draining a
    // server by failing its health endpoint must not see trial requests undo it).
    let later = at(t0, 120_000);
    assert_eq!(g.state(id(1), later), Some(HealthState::Down));
    for _ in 0..5 {
        let s = g.pick(None, later, &[]).unwrap();
        assert_eq!(s, id(0));
        g.report(s, Outcome::Success, later);
    }
    g.record_check(id(1), true, later);
    assert_eq!(
        g.state(id(1), later),
        Some(HealthState::Down),
        "one pass of two"
    );
    g.record_check(id(1), false, later);
    g.record_check(id(1), true, later);
    g.record_check(id(1), true, later);
    assert_eq!(g.state(id(1), later), Some(HealthState::Up));
    let stats = g.stats(id(1));
    assert_eq!(
        (stats.probes_ok, stats.probes_failed, stats.downs, stats.ups),
        (3, 4, 1, 1)
    );
    g.check_invariants();
}

#[test]
fn requests_and_probes_share_the_fails_count() {
    let t0 = Instant::now();
    let mut g = Group::new(&active_spec(1000), t0, 0).unwrap();
    g.report(id(0), Outcome::Failure, t0);
    g.record_check(id(0), false, t0);
    assert_eq!(g.state(id(0), t0), Some(HealthState::Up));
    g.report(id(0), Outcome::Failure, t0);
    assert_eq!(g.state(id(0), t0), Some(HealthState::Down));
}

#[test]
fn outcomes_classify_statuses_and_errors() {
    assert_eq!(Outcome::from_status(200), Outcome::Success);
    assert_eq!(Outcome::from_status(404), Outcome::Success);
    assert_eq!(Outcome::from_status(499), Outcome::Success);
    assert_eq!(Outcome::from_status(500), Outcome::Failure);
    assert_eq!(Outcome::from_status(503), Outcome::Failure);
    use UpstreamErrorClass as E;
    for e in [
        E::ConnectFailed,
        E::ConnectTimeout,
        E::ResponseTimeout,
        E::InvalidResponse,
    ] {
        assert_eq!(Outcome::from_error(e, false), Outcome::Failure, "{e:?}");
        assert_eq!(Outcome::from_error(e, true), Outcome::Failure, "{e:?}");
    }
    for e in [E::ResetBeforeResponse, E::ClosedBeforeResponse] {
        assert_eq!(Outcome::from_error(e, false), Outcome::Failure, "{e:?}");
        assert_eq!(
            Outcome::from_error(e, true),
            Outcome::Neutral,
            "stale keep-alive: {e:?}"
        );
    }
}

#[test]
fn in_flight_counts_every_pick_until_its_report() {
    let t0 = Instant::now();
    let mut g = group(Balance::RoundRobin, &[1], t0);
    for _ in 0..5 {
        g.pick(None, t0, &[]);
    }
    assert_eq!(g.in_flight(id(0)), 5);
    for outcome in [Outcome::Success, Outcome::Failure, Outcome::Neutral] {
        g.report(id(0), outcome, t0);
    }
    assert_eq!(g.in_flight(id(0)), 2);
    // Ids out of range are ignored, not a panic.
    g.report(id(7), Outcome::Failure, t0);
    g.record_check(id(7), false, t0);
    assert_eq!(g.state(id(7), t0), None);
    assert_eq!(g.stats(id(0)).picks, 5);
}
