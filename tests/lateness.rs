//! Timing bounds that hold on a loaded machine.
//!
//! A test that asserts "within N of the deadline" fails on a busy machine for reasons that are
//! not Squall's: the server's timer, its send and the test's read each wait for a core. Widening
//! every bound for the worst machine would let a timer that fires seconds late pass on a quiet
//! one. Instead a timing test measures how late this machine runs things while it runs: a thread
//! asks to sleep [`TICK`] over and over and keeps the worst overshoot, and a bound is the
//! quiet-machine bound plus that lateness times [`FACTOR`]. On an idle machine the lateness is
//! well under a millisecond and the bound is what it was; under two busy loops per core or a
//! parallel build it grows with the load the test itself saw.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the measuring thread asks to sleep each time.
pub const TICK: Duration = Duration::from_millis(5);

/// How many times the worst lateness a bound allows: between a server's timer and the test
/// seeing its effect there are several wake-ups (the worker's, the client thread's, an origin's),
/// each of which can be that late, and a timer wheel's tick on top.
pub const FACTOR: u32 = 20;

/// Measures this machine's scheduling lateness from [`Lateness::start`] until dropped.
pub struct Lateness {
    worst_us: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Lateness {
    /// Starts measuring; call it before the part of the test that is timed.
    pub fn start() -> Lateness {
        let worst_us = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let (worst_us, stop) = (worst_us.clone(), stop.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    let asked = Instant::now();
                    std::thread::sleep(TICK);
                    let late = asked.elapsed().saturating_sub(TICK);
                    let late = u64::try_from(late.as_micros()).unwrap_or(u64::MAX);
                    worst_us.fetch_max(late, Ordering::Relaxed);
                }
            }
        });
        Lateness {
            worst_us,
            stop,
            thread: Some(thread),
        }
    }

    /// The worst lateness seen so far.
    pub fn worst(&self) -> Duration {
        Duration::from_micros(self.worst_us.load(Ordering::Relaxed))
    }

    /// `bound` (what holds on an idle machine) plus [`FACTOR`] times the worst lateness seen.
    pub fn allow(&self, bound: Duration) -> Duration {
        bound + self.worst() * FACTOR
    }

    /// Asserts that `took` is under [`Lateness::allow`]`(bound)`, naming `what`.
    #[track_caller]
    pub fn assert_within(&self, what: &str, took: Duration, bound: Duration) {
        let allowed = self.allow(bound);
        assert!(
            took < allowed,
            "{what} took {took:?}: over {allowed:?} ({bound:?} on an idle machine, plus {FACTOR} \
             × the worst lateness seen, {:?})",
            self.worst()
        );
    }
}

impl Drop for Lateness {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bound is the idle one plus FACTOR times what was seen (set by hand here: lateness
    /// cannot be forced on demand).
    #[test]
    fn a_bound_grows_by_the_lateness_seen() {
        let lateness = Lateness::start();
        std::thread::sleep(Duration::from_millis(50));
        let worst = lateness.worst();
        let bound = Duration::from_secs(1);
        assert_eq!(lateness.allow(bound), bound + worst * FACTOR);
        lateness.worst_us.store(100_000, Ordering::Relaxed);
        assert_eq!(
            lateness.allow(bound),
            bound + Duration::from_secs(2),
            "100 ms late: 2 s more"
        );
    }
}
