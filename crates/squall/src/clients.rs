//! Per-client-address limits (Tempesta's "frang"): `limits.connections_per_ip_max` and
//! `limits.request_rate` / `request_burst`.
//!
//! One table for the whole process, because SO_REUSEPORT spreads one client's connections over
//! every worker: a per-worker count would let a client open `workers ×` the limit. The table is
//! split into shards by address hash, each behind a short mutex, and is touched only at accept,
//! at close and once per request head, and only when a limit is configured.
//!
//! The request rate is a token bucket per address: `burst` tokens, refilled at `rate` per
//! second. Entries outlive their connections (or a client could reset its bucket by
//! reconnecting); a shard past `SHARD_ENTRIES_MAX` sweeps out addresses with no connection and
//! a full bucket, which have nothing left to remember. A refused request is told when the
//! bucket will hold a token again (`Retry-After`, RFC 9110 §10.2.3).
//!
//! [`KeyedBuckets`] holds buckets by any key (pre-hashed): a route's own `request_rate`, per
//! client address, header value or the whole route, and the failed Basic authentication
//! attempts per client address.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Shards of the table; a power of two.
const SHARDS: usize = 64;
/// Addresses one shard keeps before sweeping forgettable ones (64 × 16k ≈ 1M addresses).
const SHARD_ENTRIES_MAX: usize = 16 * 1024;

/// The limits in force (from `[limits]`; a reload may change them).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClientLimits {
    pub connections_max: Option<u32>,
    /// (requests per second, burst).
    pub rate: Option<(u32, u32)>,
}

impl ClientLimits {
    pub fn from_config(limits: &squall_config::Limits) -> ClientLimits {
        ClientLimits {
            connections_max: limits.connections_per_ip_max,
            rate: limits
                .request_rate
                .map(|rate| (rate, limits.request_burst.unwrap_or(rate))),
        }
    }

    pub fn any(&self) -> bool {
        self.connections_max.is_some() || self.rate.is_some()
    }
}

#[derive(Debug)]
struct Client {
    connections: u32,
    bucket: Bucket,
}

/// A token bucket: `burst` tokens at most, refilled continuously at `rate` per second.
#[derive(Debug, Clone, Copy)]
pub struct Bucket {
    tokens: f64,
    refilled: Instant,
}

impl Bucket {
    /// A full bucket (whatever the burst, `take` clamps it).
    pub fn full(now: Instant) -> Bucket {
        Bucket {
            tokens: f64::MAX,
            refilled: now,
        }
    }

    /// Takes a token; when there is none, the wait until there is one.
    pub fn take(&mut self, rate: f64, burst: f64, now: Instant) -> Result<(), Duration> {
        self.check(rate, burst, now)?;
        self.tokens -= 1.0;
        Ok(())
    }

    /// Whether a token is there, taking none; when there is none, the wait until there is one.
    pub fn check(&mut self, rate: f64, burst: f64, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(burst);
        self.refilled = now;
        if self.tokens >= 1.0 {
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / rate))
        }
    }

    /// Full again by `now`: nothing worth remembering.
    fn is_full(&self, rate: f64, burst: f64, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens + elapsed * rate >= burst
    }
}

/// `Retry-After` for a wait: whole seconds, rounded up, at least 1 (0 would invite a client
/// to retry at once and be refused again).
pub fn retry_after_secs(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

/// Every client address with a connection or a partly spent bucket.
pub struct ClientTable {
    shards: Box<[Mutex<HashMap<IpAddr, Client>>]>,
    hasher: RandomState,
}

impl ClientTable {
    pub fn new() -> ClientTable {
        ClientTable {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: RandomState::new(),
        }
    }

    /// Counts a new connection from `ip`; false (and nothing counted) when it would exceed `max`.
    pub fn open(&self, ip: IpAddr, max: Option<u32>, now: Instant) -> bool {
        let mut shard = self.shard(ip);
        let client = entry(&mut shard, ip, now);
        if max.is_some_and(|max| client.connections >= max) {
            return false;
        }
        client.connections += 1;
        true
    }

    /// Forgets one connection of `ip` (one that `open` counted).
    pub fn close(&self, ip: IpAddr) {
        let mut shard = self.shard(ip);
        if let Some(client) = shard.get_mut(&ip) {
            client.connections = client.connections.saturating_sub(1);
        }
    }

    /// Takes a token from `ip`'s bucket; when it is empty (the request is over the rate), the
    /// wait until it holds one.
    pub fn allow_request(
        &self,
        ip: IpAddr,
        (rate, burst): (u32, u32),
        now: Instant,
    ) -> Result<(), Duration> {
        let mut shard = self.shard(ip);
        let client = entry(&mut shard, ip, now);
        (client.bucket).take(f64::from(rate), f64::from(burst), now)
    }

    fn shard(&self, ip: IpAddr) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Client>> {
        let index = (self.hasher.hash_one(ip) as usize) & (SHARDS - 1);
        // A poisoned shard only means another thread panicked mid-update of plain counters.
        self.shards[index].lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The entry for `ip`, created with a full bucket; sweeps the shard first when it is full.
fn entry(shard: &mut HashMap<IpAddr, Client>, ip: IpAddr, now: Instant) -> &mut Client {
    if shard.len() >= SHARD_ENTRIES_MAX && !shard.contains_key(&ip) {
        // An address with no connection and no request for a minute has a full bucket again
        // at any rate of at least one per second: nothing worth keeping.
        shard.retain(|_, c| {
            c.connections > 0 || now.duration_since(c.bucket.refilled).as_secs() < 60
        });
    }
    shard.entry(ip).or_insert(Client {
        connections: 0,
        bucket: Bucket::full(now),
    })
}

/// Token buckets by key, for the whole process (sharded like [`ClientTable`]). Keys are hashed
/// by the caller with [`KeyedBuckets::key`] (a per-process random SipHash key), so a header
/// value is never stored and a client cannot aim at one shard.
pub struct KeyedBuckets {
    shards: Box<[Mutex<HashMap<u64, Bucket>>]>,
    hasher: RandomState,
}

impl KeyedBuckets {
    pub fn new() -> KeyedBuckets {
        KeyedBuckets {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: RandomState::new(),
        }
    }

    /// The key of `value` (any hashable: a route id with an address or a header value).
    pub fn key(&self, value: impl std::hash::Hash) -> u64 {
        self.hasher.hash_one(value)
    }

    /// Takes a token from `key`'s bucket, or the wait until it has one.
    pub fn take(&self, key: u64, rate: f64, burst: f64, now: Instant) -> Result<(), Duration> {
        self.with(key, rate, burst, now, |b| b.take(rate, burst, now))
    }

    /// Whether `key`'s bucket has a token, taking none; or the wait until it has one.
    pub fn check(&self, key: u64, rate: f64, burst: f64, now: Instant) -> Result<(), Duration> {
        self.with(key, rate, burst, now, |b| b.check(rate, burst, now))
    }

    fn with<T>(
        &self,
        key: u64,
        rate: f64,
        burst: f64,
        now: Instant,
        f: impl FnOnce(&mut Bucket) -> T,
    ) -> T {
        let index = (key as usize) & (SHARDS - 1);
        let mut shard = self.shards[index].lock().unwrap_or_else(|e| e.into_inner());
        if shard.len() >= SHARD_ENTRIES_MAX && !shard.contains_key(&key) {
            // Every bucket here refills at this caller's rate or another's; one full at this
            // rate is dropped (it would be made full again), so the sweep is approximate but
            // bounded, and never forgets a partly spent bucket of the same rate.
            shard.retain(|_, b| !b.is_full(rate, burst, now));
            if shard.len() >= SHARD_ENTRIES_MAX {
                shard.clear();
            }
        }
        f(shard.entry(key).or_insert_with(|| Bucket::full(now)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn connections_are_capped_per_address() {
        let table = ClientTable::new();
        let now = Instant::now();
        assert!(table.open(IP, Some(2), now));
        assert!(table.open(IP, Some(2), now));
        assert!(!table.open(IP, Some(2), now));
        let other: IpAddr = "10.0.0.1".parse().unwrap();
        assert!(
            table.open(other, Some(2), now),
            "another address has its own count"
        );
        table.close(IP);
        assert!(table.open(IP, Some(2), now));
    }

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let table = ClientTable::new();
        let t0 = Instant::now();
        let allowed = (0..10)
            .filter(|_| table.allow_request(IP, (2, 5), t0).is_ok())
            .count();
        assert_eq!(allowed, 5, "the burst");
        let wait = table.allow_request(IP, (2, 5), t0 + Duration::from_millis(100));
        assert_eq!(
            wait,
            Err(Duration::from_millis(400)),
            "2/s: a token each 500 ms"
        );
        assert!(
            table
                .allow_request(IP, (2, 5), t0 + Duration::from_millis(600))
                .is_ok(),
            "refilled"
        );
        assert!((table.allow_request(IP, (2, 5), t0 + Duration::from_millis(650))).is_err());
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(59)), 59);
    }

    #[test]
    fn a_slow_rate_says_when_the_next_token_comes() {
        let buckets = KeyedBuckets::new();
        let t0 = Instant::now();
        let key = buckets.key((7u32, "k"));
        // 10 a minute: the burst of 10, then one each 6 s.
        let (rate, burst) = (10.0 / 60.0, 10.0);
        for _ in 0..10 {
            assert!(buckets.take(key, rate, burst, t0).is_ok());
        }
        let wait = buckets.take(key, rate, burst, t0).unwrap_err();
        assert_eq!(retry_after_secs(wait), 6);
        let later = t0 + Duration::from_secs(3);
        assert_eq!(
            retry_after_secs(buckets.check(key, rate, burst, later).unwrap_err()),
            3
        );
        assert!(
            (buckets.check(key, rate, burst, t0 + Duration::from_secs(6))).is_ok(),
            "check takes nothing"
        );
        assert!(
            buckets
                .check(key, rate, burst, t0 + Duration::from_secs(6))
                .is_ok()
        );
        let other = buckets.key((7u32, "other"));
        assert!(
            buckets.take(other, rate, burst, t0).is_ok(),
            "its own bucket"
        );
    }
}
