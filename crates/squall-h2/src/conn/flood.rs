//! Flood counters: how many frames of a kind the peer sent within the current window.
//!
//! Fixed windows, not a sliding log: one integer and one instant per kind, whatever the
//! rate. A burst across a window boundary can reach twice the limit, which is still a small
//! constant amount of work.

use std::time::{Duration, Instant};

use super::types::FloodKind;

/// One kind's count in the current window.
#[derive(Debug, Clone, Copy)]
struct Counter {
    count: u32,
    started: Instant,
}

impl Counter {
    /// Counts one event at `now`; true when that makes more than `limit` in the window.
    fn hit(&mut self, now: Instant, window: Duration, limit: u32) -> bool {
        if now.saturating_duration_since(self.started) >= window {
            self.started = now;
            self.count = 0;
        }
        self.count = self.count.saturating_add(1);
        self.count > limit
    }
}

/// The counters of every kind that is counted per window.
#[derive(Debug, Clone)]
pub(crate) struct Floods {
    window: Duration,
    resets: Counter,
    control: Counter,
    empty: Counter,
    window_updates: Counter,
}

impl Floods {
    pub(crate) fn new(window: Duration, now: Instant) -> Self {
        let counter = Counter {
            count: 0,
            started: now,
        };
        Self {
            window,
            resets: counter,
            control: counter,
            empty: counter,
            window_updates: counter,
        }
    }

    /// Counts one event of `kind`; true when the limit is exceeded. Kinds that are not
    /// counted per window (a single block's CONTINUATIONs, output, stalls) never are.
    pub(crate) fn hit(&mut self, kind: FloodKind, now: Instant, limit: u32) -> bool {
        let counter = match kind {
            FloodKind::RapidReset => &mut self.resets,
            FloodKind::Control => &mut self.control,
            FloodKind::EmptyFrames => &mut self.empty,
            FloodKind::WindowUpdate => &mut self.window_updates,
            FloodKind::Continuation | FloodKind::OutputQueue | FloodKind::Stall => return false,
        };
        counter.hit(now, self.window, limit)
    }
}
