//! SIEVE against LRU on a Zipf trace: the store must not do worse than LRU at the same
//! capacity (the SIEVE paper reports it usually does better on web traces). Run with
//! `--nocapture` to see the ratios.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use common::{Rng, entry};
use http::HeaderMap;
use squall_cache::{CacheKey, Store};

const OBJECTS: usize = 20_000;
const REQUESTS: usize = 250_000;

/// Zipf(alpha) over ranks 0..n by inverse CDF.
struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    fn new(n: usize, alpha: f64) -> Zipf {
        let mut cdf = Vec::with_capacity(n);
        let mut sum = 0.0;
        for rank in 1..=n {
            sum += 1.0 / (rank as f64).powf(alpha);
            cdf.push(sum);
        }
        for c in &mut cdf {
            *c /= sum;
        }
        Zipf { cdf }
    }

    fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.unit();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

/// A plain LRU by recency stamps: a map of key -> stamp and an ordered map stamp -> key.
struct Lru {
    capacity: usize,
    stamp: u64,
    by_key: HashMap<usize, u64>,
    by_stamp: BTreeMap<u64, usize>,
}

impl Lru {
    fn new(capacity: usize) -> Lru {
        Lru {
            capacity,
            stamp: 0,
            by_key: HashMap::new(),
            by_stamp: BTreeMap::new(),
        }
    }

    /// Looks `key` up and inserts it on a miss; returns whether it was a hit.
    fn access(&mut self, key: usize) -> bool {
        self.stamp += 1;
        let hit = match self.by_key.insert(key, self.stamp) {
            Some(old) => {
                self.by_stamp.remove(&old);
                true
            }
            None => false,
        };
        self.by_stamp.insert(self.stamp, key);
        if self.by_key.len() > self.capacity
            && let Some((_, victim)) = self.by_stamp.pop_first()
        {
            self.by_key.remove(&victim);
        }
        hit
    }
}

/// Hit ratios of SIEVE (the store) and LRU at the same capacity, after a warm-up of one
/// tenth of the trace.
fn compare(alpha: f64, capacity_share: f64, seed: u64) -> (f64, f64, usize) {
    let keys: Vec<CacheKey> = (0..OBJECTS)
        .map(|i| CacheKey::new("http", b"zipf", format!("/{i:06}").as_bytes()))
        .collect();
    let value = entry(&[], &[], 100);
    let charge = Store::charge(&keys[0], &value);
    let capacity = (OBJECTS as f64 * capacity_share) as usize;
    let store = Store::new(charge * capacity, 1, 1.0);
    let mut lru = Lru::new(capacity);
    let zipf = Zipf::new(OBJECTS, alpha);
    let mut rng = Rng::new(seed);
    let none = HeaderMap::new();
    let warm_up = REQUESTS / 10;
    let (mut sieve_hits, mut lru_hits) = (0, 0);
    for n in 0..REQUESTS {
        let i = zipf.sample(&mut rng);
        let sieve_hit = store.lookup(&keys[i], &none).is_some();
        if !sieve_hit {
            assert!(store.insert(keys[i].clone(), Arc::clone(&value)));
        }
        let lru_hit = lru.access(i);
        if n >= warm_up {
            sieve_hits += usize::from(sieve_hit);
            lru_hits += usize::from(lru_hit);
        }
    }
    assert_eq!(store.stats().entries, capacity);
    store.check_invariants();
    let measured = (REQUESTS - warm_up) as f64;
    (
        sieve_hits as f64 / measured,
        lru_hits as f64 / measured,
        capacity,
    )
}

#[test]
fn sieve_is_not_worse_than_lru_on_zipf() {
    for (alpha, share) in [(0.9, 0.01), (0.9, 0.1), (1.0, 0.01), (1.0, 0.1)] {
        let (sieve, lru, capacity) = compare(alpha, share, 42);
        println!(
            "zipf alpha={alpha} objects={OBJECTS} capacity={capacity}: SIEVE {:.4}, LRU {:.4}",
            sieve, lru
        );
        assert!(
            sieve >= lru - 0.01,
            "alpha {alpha}, share {share}: SIEVE {sieve} < LRU {lru}"
        );
    }
}
