//! One server's health as a state machine of pure transitions on `now`.
//!
//! ```text
//!            fails in a row >= fails
//!   Up ────────────────────────────────▶ Down (back-off b, from backoff_min)
//!    ▲                                    │ b elapsed (passive mode only)
//!    │ passes in a row >= passes          ▼
//!    └──────────────────────────────── HalfOpen: one trial request at a time
//!                                         │ trial fails: b = min(2b, backoff_max), Down
//! ```
//! Real traffic ("passive") and probes ("active") feed the same counters. With an active check
//! configured only probes bring a server back: an operator drains a server by making its health
//! endpoint fail, and trial requests would undo that. Without one, trial requests are the only
//! way back, and the back-off keeps a dead server from costing more than one request per `b`.
//!
//! Outcomes are not matched to the request they belong to: a request picked before the server
//! went down may report after. Every report is evidence about the server, so a success while
//! down counts as a pass whatever its age; only the back-off doubling is tied to the trial,
//! so that a burst of failures from requests already in flight does not push it to the max.

use std::time::{Duration, Instant};

/// What the balancer may do with a server now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthState {
    /// Takes traffic.
    Up,
    /// Marked down and waiting out its back-off (or, with an active check, for good probes).
    Down,
    /// Marked down, back-off over: the next pick may send it one trial request.
    HalfOpen,
}

/// Thresholds and back-off shared by every server of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Policy {
    pub fails: u32,
    pub passes: u32,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// Active checks decide recovery: no trial requests.
    pub active: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct Health {
    down: bool,
    /// Failures in a row while up.
    fails: u32,
    /// Successes in a row while down.
    passes: u32,
    /// A trial request is out (down, passive mode).
    trial: bool,
    backoff: Duration,
    /// While down: no trial before this.
    retry_at: Instant,
    /// Orders down servers for the all-down fallback; `None` if it never failed.
    last_failure: Option<Instant>,
}

impl Health {
    pub fn new(policy: &Policy, now: Instant) -> Health {
        Health {
            down: false,
            fails: 0,
            passes: 0,
            trial: false,
            backoff: policy.backoff_min,
            retry_at: now,
            last_failure: None,
        }
    }

    pub fn state(&self, policy: &Policy, now: Instant) -> HealthState {
        if !self.down {
            HealthState::Up
        } else if !policy.active && !self.trial && now >= self.retry_at {
            HealthState::HalfOpen
        } else {
            HealthState::Down
        }
    }

    /// Whether the balancer may choose this server now.
    pub fn admits(&self, policy: &Policy, now: Instant) -> bool {
        self.state(policy, now) != HealthState::Down
    }

    pub fn last_failure(&self) -> Option<Instant> {
        self.last_failure
    }

    pub fn is_down(&self) -> bool {
        self.down
    }

    /// The server was chosen. A down one is on trial from now: no other trial until this one
    /// reports, or until one more back-off passes if the report never comes.
    pub fn on_pick(&mut self, now: Instant) {
        if self.down {
            self.trial = true;
            self.retry_at = after(now, self.backoff);
        }
    }

    /// A request or probe succeeded. Returns true if the server came back up.
    pub fn success(&mut self, policy: &Policy, probe: bool, now: Instant) -> bool {
        if !self.down {
            self.fails = 0;
            return false;
        }
        if policy.active && !probe {
            // Only probes bring a server back when they are configured (module doc).
            return false;
        }
        self.trial = false;
        self.passes = self.passes.saturating_add(1);
        if self.passes >= policy.passes {
            self.down = false;
            self.fails = 0;
            self.passes = 0;
            self.backoff = policy.backoff_min;
            return true;
        }
        // More passes needed: let the next trial through at once.
        self.retry_at = now;
        false
    }

    /// A request or probe failed. Returns true if the server went down.
    pub fn failure(&mut self, policy: &Policy, now: Instant) -> bool {
        self.last_failure = Some(now);
        if self.down {
            self.passes = 0;
            if self.trial {
                // The trial failed: wait longer before the next one.
                self.trial = false;
                self.backoff = (self.backoff * 2).min(policy.backoff_max);
                self.retry_at = after(now, self.backoff);
            }
            return false;
        }
        self.fails = self.fails.saturating_add(1);
        if self.fails < policy.fails {
            return false;
        }
        self.down = true;
        self.fails = 0;
        self.passes = 0;
        self.trial = false;
        self.backoff = policy.backoff_min;
        self.retry_at = after(now, self.backoff);
        true
    }

    /// A request ended without saying anything about the server. If it was the trial, the
    /// next one may go at once rather than after another back-off.
    pub fn neutral(&mut self, now: Instant) {
        if self.down && self.trial {
            self.trial = false;
            self.retry_at = now;
        }
    }

    pub fn check_invariants(&self, policy: &Policy) {
        assert!(self.backoff >= policy.backoff_min && self.backoff <= policy.backoff_max);
        if self.down {
            assert_eq!(self.fails, 0, "a down server counts passes, not fails");
            assert!(
                self.passes < policy.passes,
                "enough passes would have brought it up"
            );
            assert!(
                self.last_failure.is_some(),
                "a server goes down only by failing"
            );
        } else {
            assert!(!self.trial, "trials are for down servers");
            assert_eq!(self.passes, 0, "an up server counts fails, not passes");
            assert!(
                self.fails < policy.fails,
                "enough fails would have taken it down"
            );
        }
    }
}

/// `now + d` without the overflow panic; spec durations are bounded (`DURATION_MAX`), so the
/// fallback is for a caller who passes absurd `Instant`s, not a case that happens.
pub(crate) fn after(now: Instant, d: Duration) -> Instant {
    now.checked_add(d).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(active: bool) -> Policy {
        Policy {
            fails: 2,
            passes: 2,
            backoff_min: Duration::from_secs(1),
            backoff_max: Duration::from_secs(4),
            active,
        }
    }

    #[test]
    fn back_off_doubles_on_failed_trials_and_resets_when_up() {
        let p = policy(false);
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_secs(n);
        let mut h = Health::new(&p, t0);
        assert!(!h.failure(&p, t0));
        assert!(h.failure(&p, t0));
        assert_eq!(h.state(&p, t0), HealthState::Down);
        assert_eq!(h.state(&p, s(1)), HealthState::HalfOpen);
        h.on_pick(s(1));
        assert_eq!(h.state(&p, s(1)), HealthState::Down, "one trial at a time");
        h.failure(&p, s(1));
        assert_eq!(h.state(&p, s(2)), HealthState::Down, "back-off is now 2 s");
        assert_eq!(h.state(&p, s(3)), HealthState::HalfOpen);
        h.on_pick(s(3));
        h.failure(&p, s(3));
        h.on_pick(s(7));
        h.failure(&p, s(7));
        assert_eq!(h.backoff, Duration::from_secs(4), "capped at backoff_max");
        h.check_invariants(&p);
        h.on_pick(s(11));
        assert!(!h.success(&p, false, s(11)));
        assert_eq!(
            h.state(&p, s(11)),
            HealthState::HalfOpen,
            "next trial at once"
        );
        h.on_pick(s(11));
        assert!(h.success(&p, false, s(11)));
        assert_eq!(h.backoff, Duration::from_secs(1));
        h.check_invariants(&p);
    }

    #[test]
    fn failures_of_old_requests_do_not_grow_the_back_off() {
        let p = policy(false);
        let t0 = Instant::now();
        let mut h = Health::new(&p, t0);
        h.failure(&p, t0);
        h.failure(&p, t0);
        for _ in 0..10 {
            h.failure(&p, t0);
        }
        assert_eq!(h.backoff, Duration::from_secs(1));
    }

    #[test]
    fn with_active_checks_only_probes_bring_a_server_back() {
        let p = policy(true);
        let t0 = Instant::now();
        let mut h = Health::new(&p, t0);
        h.failure(&p, t0);
        h.failure(&p, t0);
        let later = t0 + Duration::from_secs(60);
        assert_eq!(
            h.state(&p, later),
            HealthState::Down,
            "no half-open with active checks"
        );
        assert!(!h.success(&p, false, later));
        assert!(!h.success(&p, false, later));
        assert!(!h.success(&p, true, later));
        assert!(h.success(&p, true, later));
        assert_eq!(h.state(&p, later), HealthState::Up);
    }
}
