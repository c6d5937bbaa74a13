//! A fast, unkeyed hash (the Fx hash of rustc) for the router's lookup tables: exact paths, host
//! names and template literal segments.
//!
//! std's SipHash costs ~20 ns on a short path, the largest single cost of an exact-route hit.
//! Its key guards against hash flooding, where an attacker *inserts* colliding keys and makes
//! every probe long. These tables are built once from the operator's config and only *looked
//! up* with request data: a request picks one probe sequence among those the config's keys
//! created, so the worst it can do is walk the longest cluster of the operator's own keys.

use std::hash::{BuildHasher, Hasher};

/// `HashMap<K, V, FxBuild>`: see the module comment for why an unkeyed hash is safe here.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FxBuild;

impl BuildHasher for FxBuild {
    type Hasher = FxHasher;

    fn build_hasher(&self) -> FxHasher {
        FxHasher(0)
    }
}

pub(crate) struct FxHasher(u64);

/// rustc-hash 2's multiplier.
const SEED: u64 = 0xf135_7aea_2e62_a9c5;

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    /// The multiply leaves the best-mixed bits at the top; hashbrown picks buckets with the low
    /// bits, so rotate them down (as rustc-hash 2 does).
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn distinct_short_keys_spread() {
        let mut map: HashMap<String, usize, FxBuild> = HashMap::default();
        for i in 0..10_000 {
            map.insert(format!("/api/v1/svc{i}/items"), i);
        }
        assert!((0..10_000).all(|i| map[&format!("/api/v1/svc{i}/items")] == i));
        let low_bits: std::collections::HashSet<u64> = (0..1024)
            .map(|i| FxBuild.hash_one(format!("svc{i}")) & 1023)
            .collect();
        assert!(
            low_bits.len() > 600,
            "low bits collide too often: {}",
            low_bits.len()
        );
    }
}
