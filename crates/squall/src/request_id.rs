//! Request ids (`$request_id`, the access log's `request_id`): 128 bits, the high 48 random per
//! process, then 16 naming the thread that took it, then that thread's own 64-bit counter, so
//! that ids never repeat within a process and hardly ever across processes or restarts, and
//! taking one touches nothing another worker writes (no shared counter, no system call, no
//! random number per request).

use std::cell::Cell;
use std::hash::{BuildHasher, RandomState};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Random per process: std seeds `RandomState` from the OS once.
static PREFIX: LazyLock<u64> = LazyLock::new(|| RandomState::new().hash_one(std::process::id()));

/// Threads that took an id so far: each gets the next ordinal, once.
static THREADS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's ordinal (16 bits) and its next count.
    static NEXT: (u64, Cell<u64>) = (THREADS.fetch_add(1, Ordering::Relaxed) & 0xffff, Cell::new(0));
}

/// A new request id.
pub fn next() -> u128 {
    let (thread, count) = NEXT.with(|(thread, next)| {
        let count = next.get();
        next.set(count.wrapping_add(1));
        (*thread, count)
    });
    (u128::from(*PREFIX >> 16) << 80) | (u128::from(thread) << 64) | u128::from(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_share_the_process_prefix_and_print_as_32_hex_digits() {
        let ids: Vec<u128> = (0..10_000).map(|_| next()).collect();
        let unique: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len());
        assert!(ids.iter().all(|id| id >> 64 == ids[0] >> 64));
        // Another thread: the same process prefix, another thread ordinal.
        let other = std::thread::spawn(next).join().expect("no panic");
        assert_eq!(other >> 80, ids[0] >> 80);
        assert_ne!(other >> 64, ids[0] >> 64);
        let text = squall_proxy::forward::request_id_hex(ids[0]);
        assert_eq!(text.len(), 32);
        assert!(
            text.iter()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
    }
}
