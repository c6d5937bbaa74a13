//! Request ids (`$request_id`, the access log's `request_id`): 128 bits, the high half random
//! per process, the low half a process-wide counter, so that ids never repeat within a process
//! and hardly ever across processes or restarts, and taking one costs an atomic add (no
//! system call, no random number per request).

use std::hash::{BuildHasher, RandomState};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Random per process: std seeds `RandomState` from the OS once.
static PREFIX: LazyLock<u64> = LazyLock::new(|| RandomState::new().hash_one(std::process::id()));

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A new request id.
pub fn next() -> u128 {
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    (u128::from(*PREFIX) << 64) | u128::from(count)
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
        let text = squall_proxy::forward::request_id_hex(ids[0]);
        assert_eq!(text.len(), 32);
        assert!(
            text.iter()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
    }
}
