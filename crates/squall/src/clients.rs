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
//! a full bucket, which have nothing left to remember.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

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
    tokens: f64,
    refilled: Instant,
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

    /// Takes a token from `ip`'s bucket; false when it is empty (the request is over the rate).
    pub fn allow_request(&self, ip: IpAddr, (rate, burst): (u32, u32), now: Instant) -> bool {
        let mut shard = self.shard(ip);
        let client = entry(&mut shard, ip, now);
        let elapsed = now.saturating_duration_since(client.refilled).as_secs_f64();
        client.tokens = (client.tokens + elapsed * f64::from(rate)).min(f64::from(burst));
        client.refilled = now;
        if client.tokens >= 1.0 {
            client.tokens -= 1.0;
            true
        } else {
            false
        }
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
        shard.retain(|_, c| c.connections > 0 || now.duration_since(c.refilled).as_secs() < 60);
    }
    shard.entry(ip).or_insert(Client {
        connections: 0,
        tokens: f64::MAX,
        refilled: now,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
            .filter(|_| table.allow_request(IP, (2, 5), t0))
            .count();
        assert_eq!(allowed, 5, "the burst");
        assert!(!table.allow_request(IP, (2, 5), t0 + Duration::from_millis(100)));
        assert!(
            table.allow_request(IP, (2, 5), t0 + Duration::from_millis(600)),
            "refilled"
        );
        assert!(!table.allow_request(IP, (2, 5), t0 + Duration::from_millis(650)));
    }
}
