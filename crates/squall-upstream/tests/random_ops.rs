//! Random sequences of every public operation, in the manner of quinn's fuzz targets but run
//! as an ordinary deterministic test: a fixed-seed xorshift drives each step, and after every
//! step the group and pool invariants are checked, along with a small model (in-flight counts
//! per server, connections the pool may still hold). Misuse is part of the mix: ids out of
//! range, double check-ins, reports without picks, a clock that steps back.

mod common;

use std::time::{Duration, Instant};

use common::*;
use squall_upstream::{
    AllDown, Balance, Checkin, ConnId, HealthCheckSpec, Outcome, ServerId, Upstream, UpstreamSpec,
};

const STEPS: usize = 20_000;

struct Run {
    up: Upstream,
    rng: Rng,
    now: Instant,
    t0: Instant,
    /// Picks not yet reported, per the model.
    picked: Vec<ServerId>,
    /// The same, counted per server.
    in_flight: Vec<u32>,
    /// Connections checked out and not yet checked in or removed.
    lent: Vec<(ServerId, ConnId)>,
    next_conn: u64,
}

impl Run {
    fn random_id(&mut self) -> ServerId {
        // Mostly valid ids, sometimes one past the end or far out.
        let n = self.up.group.len() as u64;
        ServerId::new(match self.rng.below(20) {
            0 => n as u32,
            1 => u32::MAX,
            _ => self.rng.below(n) as u32,
        })
    }

    fn step(&mut self) {
        match self.rng.below(13) {
            0..=2 => self.pick(),
            3..=4 => self.report(),
            5 => self
                .up
                .group
                .report(ServerId::new(u32::MAX), Outcome::Failure, self.now),
            6 => self.probe(),
            7 => self.checkout(),
            8 => self.checkin(),
            9 => {
                // Only ids already handed out: a future id would alias a new connection.
                let conn = ConnId(self.rng.below(self.next_conn + 1));
                self.up.pool.remove(conn);
                self.lent.retain(|&(_, c)| c != conn);
            }
            10 => {
                let now = self.now;
                self.up.pool.expire(now);
            }
            11 if self.rng.below(50) == 0 => {
                self.up.pool.drain();
            }
            _ => self.tick(),
        }
    }

    fn pick(&mut self) {
        let key = (self.rng.below(3) != 0).then(|| self.rng.next());
        let exclude: Vec<ServerId> = (0..self.rng.below(4)).map(|_| self.random_id()).collect();
        if let Some(s) = self.up.group.pick(key, self.now, &exclude) {
            assert!(!exclude.contains(&s), "picked an excluded server");
            assert!(s.index() < self.up.group.len());
            self.picked.push(s);
            self.in_flight[s.index()] += 1;
        }
    }

    fn report(&mut self) {
        if self.picked.is_empty() {
            return;
        }
        let at = self.rng.below(self.picked.len() as u64) as usize;
        let s = self.picked.swap_remove(at);
        self.in_flight[s.index()] -= 1;
        let outcome =
            [Outcome::Success, Outcome::Failure, Outcome::Neutral][self.rng.below(3) as usize];
        self.up.group.report(s, outcome, self.now);
    }

    fn probe(&mut self) {
        let now = self.now;
        let due: Vec<ServerId> = self.up.group.due_checks(now).collect();
        for s in due {
            let ok = self.rng.below(3) != 0;
            self.up.group.record_check(s, ok, now);
        }
        let s = self.random_id();
        let ok = self.rng.below(2) == 0;
        self.up.group.record_check(s, ok, now);
    }

    fn checkout(&mut self) {
        let s = self.random_id();
        let now = self.now;
        let conn = self.up.pool.checkout(s, now).unwrap_or_else(|| {
            self.next_conn += 1;
            ConnId(self.next_conn)
        });
        assert!(
            !self.lent.iter().any(|&(_, c)| c == conn),
            "{conn:?} lent twice"
        );
        if s.index() < self.up.group.len() {
            self.lent.push((s, conn));
        }
    }

    fn checkin(&mut self) {
        let (s, conn) = if !self.lent.is_empty() && self.rng.below(10) != 0 {
            let at = self.rng.below(self.lent.len() as u64) as usize;
            self.lent.swap_remove(at)
        } else {
            // Misuse: any id, maybe one that is lent (it is checked in now, as far as the
            // pool knows).
            // Only ids already handed out: a future id would alias a new connection.
            let conn = ConnId(self.rng.below(self.next_conn + 1));
            self.lent.retain(|&(_, c)| c != conn);
            (self.random_id(), conn)
        };
        let now = self.now;
        if let Checkin::Close(_) = self.up.pool.checkin(s, conn, now) {
            // Closed means forgotten: the worker may reuse the id for a new connection.
            assert!(
                !self.up.pool.remove(conn),
                "a closed connection is still idle"
            );
        }
    }

    fn tick(&mut self) {
        let ms = match self.rng.below(10) {
            0 => self.rng.below(120_000),
            1 => {
                // The clock steps back a little (never before t0).
                let back = Duration::from_millis(self.rng.below(50));
                self.now = self
                    .now
                    .checked_sub(back)
                    .filter(|&t| t >= self.t0)
                    .unwrap_or(self.t0);
                return;
            }
            _ => self.rng.below(300),
        };
        self.now += Duration::from_millis(ms);
    }

    fn check(&self) {
        self.up.check_invariants();
        for id in self.up.group.ids() {
            assert_eq!(
                self.up.group.in_flight(id),
                self.in_flight[id.index()],
                "{id:?}"
            );
        }
    }
}

fn spec_for(balance: Balance, weights: &[u32], active: bool, all_down: AllDown) -> UpstreamSpec {
    let mut spec = spec(balance, weights);
    spec.all_down = all_down;
    spec.pool.idle_max = 4;
    spec.pool.requests_max = 5;
    spec.pool.idle_timeout = Duration::from_secs(2);
    spec.passive.fails = 2;
    if active {
        spec.health_check = Some(HealthCheckSpec {
            path: "/health".into(),
            interval: Duration::from_millis(700),
            fails: 2,
            passes: 2,
        });
    }
    spec
}

#[test]
fn random_operation_sequences_keep_every_invariant() {
    let t0 = Instant::now();
    let balances = [
        Balance::RoundRobin,
        Balance::Weighted,
        Balance::ConsistentHash,
        Balance::LeastConn,
    ];
    let groups: [&[u32]; 4] = [&[1], &[1, 3], &[5, 1, 1, 2, 1], &[2; 64]];
    let mut seed = 0x5eed_u64;
    // What the runs reached, so that a change that makes them shallow fails the test.
    let (mut downs, mut ups, mut hits, mut expired, mut requests_max) = (0, 0, 0, 0, 0);
    for balance in balances {
        for weights in groups {
            for (active, all_down) in [
                (false, AllDown::PickLeastRecentlyFailed),
                (true, AllDown::Fail),
            ] {
                seed += 1;
                let spec = spec_for(balance, weights, active, all_down);
                let mut run = Run {
                    up: Upstream::new(&spec, t0, seed).unwrap(),
                    rng: Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
                    now: t0,
                    t0,
                    picked: Vec::new(),
                    in_flight: vec![0; weights.len()],
                    lent: Vec::new(),
                    next_conn: 0,
                };
                let steps = if weights.len() > 8 { STEPS / 4 } else { STEPS };
                for _ in 0..steps {
                    run.step();
                    run.check();
                }
                for id in run.up.group.ids() {
                    downs += run.up.group.stats(id).downs;
                    ups += run.up.group.stats(id).ups;
                }
                let pool = run.up.pool.stats();
                (hits, expired) = (hits + pool.hits, expired + pool.expired);
                requests_max += pool.closed_requests_max;
            }
        }
    }
    assert!(downs > 100 && ups > 100, "downs {downs}, ups {ups}");
    assert!(
        hits > 1000 && expired > 100 && requests_max > 100,
        "{hits} {expired} {requests_max}"
    );
}
