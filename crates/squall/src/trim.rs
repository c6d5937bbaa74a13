//! Giving memory back to the system after a burst.
//!
//! Slow readers, a flood of connections or a wave of large proxied responses make the process
//! allocate tens of megabytes that it frees when they leave; glibc's malloc keeps what it freed
//! inside its heaps for reuse, so the process's resident size stays at the burst's peak. A
//! thread samples the two counts that such bursts raise (buffered response bytes and open
//! client connections) once a second and, when one has fallen well below its peak since the
//! last trim, asks the allocator to return its free pages (`malloc_trim(0)`).
//!
//! Measured with 1,000 slow HTTP/1.1 readers and 10 HTTP/2 connections × 128 slow streams of
//! an 8 MiB body (a 32 MiB buffer budget): RSS +74 MiB at the peak stayed +74 MiB with glibc's
//! defaults (and with `MALLOC_TRIM_THRESHOLD_` and `MALLOC_ARENA_MAX` tuned), came back to
//! +13–22 MiB with jemalloc (background purging, 1 s decay) or mimalloc, and to +4 MiB with
//! glibc and one `malloc_trim(0)`; glibc also measured no slower per request than either, so
//! the allocator stays glibc's (docs/PERFORMANCE.md).
//!
//! The decision is a pure function of the samples ([`Trim::sample`]); the thread only reads
//! the counts and calls the allocator.

use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, warn};

use crate::metrics::Metrics;

/// How often the counts are sampled.
const PERIOD: Duration = Duration::from_secs(1);
/// A fall in buffered response bytes below the peak that is worth a trim.
const BUFFERED_FALL: u64 = 8 << 20;
/// A fall in open client connections below the peak that is worth a trim (each holds a few
/// KiB of state and buffers).
const CLIENTS_FALL: u64 = 512;

/// The peaks since the last trim.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Trim {
    buffered: u64,
    clients: u64,
}

impl Trim {
    /// Takes a sample of the counts; true when memory should be given back now: one count
    /// has fallen by its threshold and to at most half its peak since the last trim. The
    /// peaks then start again from the sample.
    pub fn sample(&mut self, buffered: u64, clients: u64) -> bool {
        self.buffered = self.buffered.max(buffered);
        self.clients = self.clients.max(clients);
        let fell = |peak: u64, now: u64, by: u64| peak - now >= by && now <= peak / 2;
        let trim = fell(self.buffered, buffered, BUFFERED_FALL)
            || fell(self.clients, clients, CLIENTS_FALL);
        if trim {
            *self = Trim { buffered, clients };
        }
        trim
    }
}

/// Starts the thread that trims after bursts.
pub fn start(metrics: Arc<Metrics>) {
    let spawned = std::thread::Builder::new()
        .name("squall-trim".into())
        .spawn(move || {
            let mut trim = Trim::default();
            loop {
                std::thread::sleep(PERIOD);
                let clients = u64::try_from(metrics.descriptors.open()).unwrap_or(u64::MAX);
                if !trim.sample(metrics.buffered.bytes(), clients) {
                    continue;
                }
                let before = resident_bytes();
                let released = squall_uring::release_free_memory();
                metrics.memory_trims.inc();
                debug!(
                    released,
                    rss_before = before,
                    rss_after = resident_bytes(),
                    "returned free memory after a burst"
                );
            }
        });
    if let Err(e) = spawned {
        warn!("cannot start the memory trim thread: {e}");
    }
}

/// The process's resident size in bytes (`/proc/self/statm`), 0 if unknown.
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_burst_that_passes_is_trimmed_once() {
        let mut trim = Trim::default();
        assert!(!trim.sample(0, 10));
        // The burst rises: nothing to give back yet.
        assert!(!trim.sample(40 * MIB, 1_000));
        assert!(!trim.sample(64 * MIB, 2_000));
        // Part way down: not yet half.
        assert!(!trim.sample(40 * MIB, 1_500));
        // Gone: one trim, and the next samples at the same level ask for none.
        assert!(trim.sample(MIB, 1_200));
        assert!(!trim.sample(MIB, 1_200));
        assert!(!trim.sample(0, 1_100));
    }

    #[test]
    fn connections_leaving_are_a_burst_too() {
        let mut trim = Trim::default();
        assert!(!trim.sample(0, 3_000));
        assert!(!trim.sample(0, 2_000));
        assert!(trim.sample(0, 1_000));
        // A small fall is not worth a trim.
        let mut small = Trim::default();
        assert!(!small.sample(MIB, 600));
        assert!(!small.sample(0, 200));
    }

    #[test]
    fn steady_load_never_trims() {
        let mut trim = Trim::default();
        for i in 0..1_000u64 {
            let wobble = (i % 7) * MIB;
            assert!(!trim.sample(20 * MIB + wobble, 5_000 + i % 100));
        }
    }
}
