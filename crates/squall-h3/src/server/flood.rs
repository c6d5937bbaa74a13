//! Flood counters: how many events of a kind the peer caused within the current window, as
//! `squall-h2` counts them.
//!
//! Fixed windows, not a sliding log: one integer and one instant per kind, whatever the
//! rate. A burst across a window boundary can reach twice the limit, which is still a small
//! constant amount of work.

use std::time::{Duration, Instant};

use super::types::FloodKind;

/// One kind's count in the current window.
#[derive(Debug, Clone, Copy)]
struct Counter {
    count: u64,
    started: Instant,
}

impl Counter {
    /// Counts `n` events at `now`; true when that makes more than `limit` in the window.
    fn hit(&mut self, n: u64, now: Instant, window: Duration, limit: u32) -> bool {
        if now.saturating_duration_since(self.started) >= window {
            self.started = now;
            self.count = 0;
        }
        self.count = self.count.saturating_add(n);
        self.count > u64::from(limit)
    }
}

/// The counters of every kind, and the empty-name QPACK insertions, which count against
/// the empty frames' limit but in their own counter.
#[derive(Debug, Clone)]
pub(crate) struct Floods {
    window: Duration,
    counters: [Counter; 6],
}

/// Which counter: one per [`FloodKind`], and [`Counted::EmptyInserts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counted {
    Kind(FloodKind),
    /// QPACK insertions of an entry with an empty name ([`FloodKind::QpackEncoder`]).
    EmptyInserts,
}

impl Floods {
    pub(crate) fn new(window: Duration, now: Instant) -> Self {
        let counter = Counter {
            count: 0,
            started: now,
        };
        Self {
            window,
            counters: [counter; 6],
        }
    }

    /// Counts `n` events; true when the limit is exceeded.
    pub(crate) fn hit(&mut self, counted: Counted, n: u64, now: Instant, limit: u32) -> bool {
        let index = match counted {
            Counted::Kind(FloodKind::RapidReset) => 0,
            Counted::Kind(FloodKind::EmptyFrames) => 1,
            Counted::Kind(FloodKind::UnknownFrames) => 2,
            Counted::Kind(FloodKind::ControlFrames) => 3,
            Counted::Kind(FloodKind::QpackEncoder) => 4,
            Counted::EmptyInserts => 5,
        };
        self.counters[index].hit(n, now, self.window, limit)
    }
}
