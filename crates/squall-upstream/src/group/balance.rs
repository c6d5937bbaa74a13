//! The four ways a [`Group`] chooses among its eligible servers, plus the all-down fallback.
//!
//! A server is eligible when it is not in the request's `exclude` list and its health admits
//! it (up, or half-open with no trial out). `weighted` and `least_conn` look at every server on
//! every pick, as nginx's do; so that costs little with 64 servers, the numbers they read sit
//! in one small array of [`Hot`] entries, and while no server is down and nothing is excluded
//! (the usual case) they skip the eligibility test altogether.

use std::cmp::Ordering;
use std::time::Instant;

use super::{Group, ServerId};
use crate::spec::{AllDown, SERVERS_MAX};

/// The per-server numbers every pick of `weighted` or `least_conn` reads: 16 bytes.
#[derive(Debug, Clone)]
pub(super) struct Hot {
    pub weight: i64,
    /// Smooth weighted round robin's running weight (nginx's `current_weight`).
    pub current: i64,
    /// Requests of this worker out on the server, picked and not yet reported.
    pub in_flight: u32,
}

impl Hot {
    pub fn new(weight: u32) -> Hot {
        Hot {
            weight: i64::from(weight),
            current: 0,
            in_flight: 0,
        }
    }
}

/// A server's `least_conn` load, `in_flight / weight`, kept as the fraction and compared by
/// cross-multiplication: exact, and no division on the pick path.
#[derive(Debug, Clone, Copy)]
struct Load {
    in_flight: i64,
    weight: i64,
}

impl Load {
    fn of(hot: &Hot) -> Load {
        Load {
            in_flight: i64::from(hot.in_flight),
            weight: hot.weight,
        }
    }

    fn cmp(&self, other: &Load) -> Ordering {
        (self.in_flight * other.weight).cmp(&(other.in_flight * self.weight))
    }
}

impl PartialEq for Load {
    fn eq(&self, other: &Load) -> bool {
        self.in_flight * other.weight == other.in_flight * self.weight
    }
}

impl Group {
    pub(super) fn eligible(&self, index: usize, now: Instant, exclude: &[ServerId]) -> bool {
        !exclude.contains(&ServerId(index as u32))
            && self.servers[index].health.admits(&self.policy, now)
    }

    /// True when every server is eligible and the balancers may skip the test.
    fn all_eligible(&self, exclude: &[ServerId]) -> bool {
        self.down_count == 0 && exclude.is_empty()
    }

    /// The next eligible server after the last one picked.
    pub(super) fn pick_round_robin(&mut self, now: Instant, exclude: &[ServerId]) -> Option<usize> {
        let n = self.servers.len();
        let index = (0..n)
            .map(|step| (self.cursor + step) % n)
            .find(|&i| self.eligible(i, now, exclude))?;
        self.cursor = (index + 1) % n;
        Some(index)
    }

    /// nginx's smooth weighted round robin (`ngx_http_upstream_get_peer`): every eligible
    /// server's `current` grows by its weight, the largest wins and gives back the total. Over
    /// `sum(weights)` picks each server wins `weight` times, spread out (5,1,1 gives
    /// a a b a c a a, not a a a a a b c). Ineligible servers keep their `current`.
    pub(super) fn pick_weighted(&mut self, now: Instant, exclude: &[ServerId]) -> Option<usize> {
        if self.all_eligible(exclude) {
            return self.smooth_among(|_, _| true);
        }
        self.smooth_among(|group, i| group.eligible(i, now, exclude))
    }

    /// nginx's `least_conn`: the fewest in-flight requests per unit of weight; ties by smooth
    /// weighted round robin among the tied servers, so an idle group still honours weights.
    pub(super) fn pick_least_conn(&mut self, now: Instant, exclude: &[ServerId]) -> Option<usize> {
        let all = self.all_eligible(exclude);
        let mut best: Option<(usize, Load)> = None;
        let mut tied = 0usize;
        for (i, hot) in self.hot.iter().enumerate() {
            if !all && !self.eligible(i, now, exclude) {
                continue;
            }
            let load = Load::of(hot);
            match best.map_or(Ordering::Less, |(_, b)| load.cmp(&b)) {
                Ordering::Less => (best, tied) = (Some((i, load)), 1),
                Ordering::Equal => tied += 1,
                Ordering::Greater => {}
            }
        }
        let (index, least) = best?;
        if tied == 1 {
            return Some(index);
        }
        self.smooth_among(|group, i| {
            Load::of(&group.hot[i]) == least && (all || group.eligible(i, now, exclude))
        })
    }

    /// The ring owner of `key` or, if it may not take the request, the owner of the next
    /// point along the ring that may. A server's points are scattered around the ring, so its
    /// keys spread over all the others while it is down instead of piling onto one neighbour.
    pub(super) fn pick_hash(
        &mut self,
        key: u64,
        now: Instant,
        exclude: &[ServerId],
    ) -> Option<usize> {
        let ring = self.ring.as_ref()?;
        let start = ring.start(crate::hash::mix64(key));
        let owner = ring.owner_after(start, 0);
        if self.eligible(owner, now, exclude) {
            return Some(owner);
        }
        let mut seen = BitSet::default();
        seen.insert(owner);
        for step in 1..ring.len() {
            let index = ring.owner_after(start, step);
            if seen.contains(index) {
                continue;
            }
            if self.eligible(index, now, exclude) {
                return Some(index);
            }
            seen.insert(index);
            if seen.len == self.servers.len() {
                break;
            }
        }
        None
    }

    /// When no server is admitted at all (not merely all excluded), [`AllDown`] decides.
    pub(super) fn pick_all_down(&self, now: Instant, exclude: &[ServerId]) -> Option<usize> {
        if self.all_down == AllDown::Fail || self.down_count < self.servers.len() {
            return None;
        }
        if self
            .servers
            .iter()
            .any(|s| s.health.admits(&self.policy, now))
        {
            // Down, but one is half-open: it was not chosen only because it is excluded.
            return None;
        }
        (0..self.servers.len())
            .filter(|&i| !exclude.contains(&ServerId(i as u32)))
            .min_by_key(|&i| (self.servers[i].health.last_failure(), i))
    }

    /// One round of smooth weighted round robin among the servers `include` accepts.
    fn smooth_among(&mut self, include: impl Fn(&Group, usize) -> bool) -> Option<usize> {
        let mut best: Option<usize> = None;
        let mut best_current = i64::MIN;
        let mut total: i64 = 0;
        for i in 0..self.hot.len() {
            if !include(self, i) {
                continue;
            }
            let hot = &mut self.hot[i];
            hot.current += hot.weight;
            total += hot.weight;
            // Strictly greater: the first of equals wins, as in nginx.
            if hot.current > best_current {
                (best, best_current) = (Some(i), hot.current);
            }
        }
        let best = best?;
        self.hot[best].current -= total;
        Some(best)
    }
}

/// A set of server indices on the stack (`SERVERS_MAX` bits), so a pick never allocates.
struct BitSet {
    words: [u64; SERVERS_MAX / 64],
    len: usize,
}

impl Default for BitSet {
    fn default() -> Self {
        BitSet {
            words: [0; SERVERS_MAX / 64],
            len: 0,
        }
    }
}

impl BitSet {
    fn insert(&mut self, i: usize) {
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        if self.words[word] & bit == 0 {
            self.words[word] |= bit;
            self.len += 1;
        }
    }

    fn contains(&self, i: usize) -> bool {
        self.words[i / 64] & (1u64 << (i % 64)) != 0
    }
}

const _: () = assert!(
    SERVERS_MAX.is_multiple_of(64),
    "BitSet words cover SERVERS_MAX exactly"
);
