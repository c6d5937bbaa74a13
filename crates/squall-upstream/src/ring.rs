//! The consistent-hash ring (ketama style): each server owns `weight × VNODES_PER_WEIGHT`
//! points on a 64-bit circle, and a key belongs to the first point at or after its hash.
//!
//! A point's position depends only on its server's address and the point's number
//! ([`crate::hash::ring_point`]), so adding a server only adds points (the keys that move all
//! move to it) and removing one only removes its points (only its keys move). Two points may
//! land on the same 32-bit position (a few times on a ring of 2^18 points); the server with
//! the smaller address keeps it, which again depends on nothing but those two servers, so the
//! property holds through collisions too.
//!
//! Balance: with `v` points a server's share deviates from its weight by about `1/√v`
//! relative, so the point count trades memory (6 bytes a point, per group and worker) for
//! evenness; see `VNODES_PER_WEIGHT`. This is the ring's known weakness against Maglev, which
//! balances to within a slot but moves some keys between remaining servers on a change.

use std::net::SocketAddr;

use crate::hash::ring_point;
use crate::spec::ServerSpec;

/// Points per unit of weight. ketama and nginx use 160 (about ±8% per server); 640 halves the
/// deviation (about ±4%, measured within 2% of the weight shares for the test groups) for 8 KiB
/// a server of weight 1.
pub const VNODES_PER_WEIGHT: u32 = 1024;
/// The most points on one ring (12 MiB at 12 bytes a point would be too much per worker). A
/// group whose `sum(weight) × VNODES_PER_WEIGHT` is above it gets proportionally fewer points
/// per server; it stays consistent (points are a prefix of each server's sequence), but adding
/// or removing a server then also moves a few keys between the others.
pub const RING_POINTS_MAX: usize = 1 << 18;

#[derive(Debug, Clone)]
pub(crate) struct Ring {
    /// Sorted positions: 32 bits, so that a binary search touches half the cache lines.
    points: Vec<u32>,
    /// `owners[i]` is the server index owning `points[i]` (`SERVERS_MAX` fits in 16 bits).
    owners: Vec<u16>,
}

impl Ring {
    pub fn new(servers: &[ServerSpec]) -> Ring {
        let total: u64 = servers.iter().map(|s| u64::from(s.weight)).sum();
        let mut entries: Vec<(u32, SocketAddr, u16)> = Vec::new();
        for (index, server) in servers.iter().enumerate() {
            let count = point_count(server.weight, total);
            // `index < SERVERS_MAX <= 2^16`, checked by `UpstreamSpec::validate`.
            let owner = index as u16;
            entries.extend(
                (0..count).map(|v| (ring_point(&server.address, v), server.address, owner)),
            );
        }
        // Ties on position go to the smaller address, never to the smaller index (module doc).
        entries.sort_unstable_by_key(|e| (e.0, e.1));
        entries.dedup_by_key(|e| e.0);
        let ring = Ring {
            points: entries.iter().map(|e| e.0).collect(),
            owners: entries.iter().map(|e| e.2).collect(),
        };
        if cfg!(debug_assertions) {
            ring.check_invariants(servers.len());
        }
        ring
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// The ring position where the walk for `key_hash` (already mixed) starts.
    pub fn start(&self, key_hash: u64) -> usize {
        let key = (key_hash >> 32) as u32;
        let at = self.points.partition_point(|&p| p < key);
        if at == self.points.len() { 0 } else { at }
    }

    /// The owner of the point `steps` after `start`, wrapping around.
    pub fn owner_after(&self, start: usize, steps: usize) -> usize {
        let len = self.owners.len();
        self.owners[(start + steps) % len] as usize
    }

    /// The full check, O(points): run once when the ring is built, since it never changes.
    pub fn check_invariants(&self, servers: usize) {
        assert_eq!(self.points.len(), self.owners.len());
        assert!(
            !self.points.is_empty(),
            "every server has at least one point"
        );
        assert!(
            self.points.windows(2).all(|w| w[0] < w[1]),
            "sorted, no duplicates"
        );
        assert!(self.owners.iter().all(|&o| (o as usize) < servers));
    }

    /// The O(1) part of the check, for callers that check after every step.
    pub fn check_shape(&self) {
        assert!(!self.points.is_empty() && self.points.len() == self.owners.len());
    }
}

/// `weight × VNODES_PER_WEIGHT` points, or, when the whole ring would pass
/// `RING_POINTS_MAX`, the server's weighted share of that many, but never zero: so the ring
/// holds at most `RING_POINTS_MAX + SERVERS_MAX` points and every server owns at least one.
fn point_count(weight: u32, total_weight: u64) -> u32 {
    let wanted = u64::from(weight) * u64::from(VNODES_PER_WEIGHT);
    let all = total_weight * u64::from(VNODES_PER_WEIGHT);
    let count = if all <= RING_POINTS_MAX as u64 {
        wanted
    } else {
        (u64::from(weight) * RING_POINTS_MAX as u64 / total_weight.max(1)).max(1)
    };
    u32::try_from(count).unwrap_or(u32::MAX)
}

const _: () = assert!(crate::spec::SERVERS_MAX <= 1 << 16, "owners are u16");

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(n: usize, weight: u32) -> Vec<ServerSpec> {
        (0..n)
            .map(|i| ServerSpec {
                address: SocketAddr::from(([10, 0, (i / 256) as u8, (i % 256) as u8], 8080)),
                weight,
            })
            .collect()
    }

    #[test]
    fn point_count_is_capped_and_never_zero() {
        assert_eq!(
            Ring::new(&servers(3, 1)).len(),
            3 * VNODES_PER_WEIGHT as usize
        );
        let big = Ring::new(&servers(1024, 1000));
        assert!(big.len() <= RING_POINTS_MAX + 1024);
        big.check_invariants(1024);
        for i in 0..1024 {
            assert!(big.owners.contains(&(i as u16)));
        }
    }

    #[test]
    fn start_wraps_past_the_last_point() {
        let ring = Ring::new(&servers(2, 1));
        assert_eq!(ring.start(u64::MAX), 0);
        assert_eq!(ring.start(0), 0);
        assert_eq!(ring.owner_after(ring.len() - 1, 1), ring.owners[0] as usize);
    }
}
