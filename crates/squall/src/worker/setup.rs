//! What a worker's start-up needs beside the loop: the message for a ring that cannot be set
//! up, and the watchdog's test hook.

use std::io;
use std::time::{Duration, Instant};

/// Why the worker's ring could not be set up, in words an operator can act on.
pub(super) fn ring_error(e: &io::Error) -> String {
    if squall_uring::is_unavailable(e) {
        format!(
            "io_uring is unavailable on this host ({e}): Squall needs Linux 6.1 or later with \
             io_uring enabled (sysctl kernel.io_uring_disabled=0, and no seccomp filter denying it)"
        )
    } else {
        format!("cannot set up io_uring: {e}")
    }
}

/// The watchdog's test hook, in debug builds only: `SQUALL_TEST_STALL_WORKER=AFTER_MS:FOR_MS`
/// freezes worker 0 for FOR_MS once AFTER_MS have passed, so that a test can see the
/// watchdog pings stop. Release builds ignore it.
pub(super) fn test_stall(worker: usize) -> Option<(Instant, Duration)> {
    if !cfg!(debug_assertions) || worker != 0 {
        return None;
    }
    let value = std::env::var("SQUALL_TEST_STALL_WORKER").ok()?;
    let (after, length) = value.split_once(':')?;
    let after = Duration::from_millis(after.parse().ok()?);
    let length = Duration::from_millis(length.parse().ok()?);
    Some((Instant::now() + after, length))
}
