//! `[cluster]`: several Squall nodes behind one L4 balancer share one cache by giving every
//! key an owner (docs/CLUSTER.md).
//!
//! Ownership is rendezvous hashing (highest random weight) over the nodes a worker believes
//! alive: each node scores `hash(key, node)` and the highest `replicas` scores own the key.
//! Every node computes the same answer from the same `nodes` list, without talking to the
//! others, and when a node dies only the keys it owned move (each to its next-best node);
//! the others keep their owner, so the fleet's caches stay warm. With at most 64 nodes the
//! scoring costs a request a few dozen multiplications, and needs no ring to rebuild.
//!
//! The peers are reached through the upstream machinery: each is a one-server upstream group
//! appended after the config's `[[upstream]]` list ([`Cluster::peer_specs`]), so forwarded
//! requests get keep-alive pooling, timeouts and passive health like any origin, and
//! `/metrics` shows each peer under `upstream="cluster:NAME"`. A peer that refuses a
//! connection is marked down at once (one failure), and tried again by one request after a
//! back-off of 1 s (doubling up to 5 s): while it is down its keys belong to the next node.
//! With `[cluster] health_check`, the workers also probe the peers as they probe upstream
//! servers (`worker/origin/probe.rs`), so a dead peer is noticed without a failed request.
//!
//! Everything here is pure but the purge fan-out (`fanout.rs`), which runs on a short-lived
//! thread of its own with blocking sockets, off the workers' rings.

pub mod fanout;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use http::HeaderName;
use http::header::HeaderValue;
use squall_cache::CacheKey;
use squall_config::HashKey;
use squall_h1::RequestHead;
use squall_upstream::{
    AllDown, Balance, HealthCheckSpec, PassiveHealth, ServerSpec, UpstreamSpec, key_hash,
};

/// The field that marks a request as sent by another node of the cluster: its value is the
/// sender's name. A request carrying it is always served by the node it reaches (from its
/// cache or its origin), which is what stops forwarding loops when two nodes disagree about
/// an owner (one has seen a peer die, the other not yet).
pub const HOP: HeaderName = HeaderName::from_static("squall-cluster-hop");

/// How long an edge node waits to connect to an owner before going to the origin itself.
const PEER_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long it waits for the owner's response head (the owner may itself wait on its origin).
const PEER_RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);

/// One node as the runtime sees it.
#[derive(Debug)]
pub struct Node {
    pub name: String,
    pub address: SocketAddr,
    /// The node's score seed: a hash of its name, so that ownership follows names (an
    /// address change keeps the node's keys).
    seed: u64,
    /// The index of its upstream group in the runtime's `upstreams`; `None` for this node.
    pub upstream: Option<usize>,
}

/// The cluster as one runtime (config generation) sees it.
#[derive(Debug)]
pub struct Cluster {
    pub nodes: Vec<Node>,
    pub self_index: usize,
    pub replicas: usize,
    pub hash_key: Option<HashKey>,
    pub local_ttl: Duration,
    /// Active probes of the peers (`[cluster] health_check`).
    pub health_check: Option<squall_config::HealthCheck>,
    /// This node's name as the hop field's value.
    pub hop_value: HeaderValue,
    /// The first upstream index that is a peer's.
    first_upstream: usize,
}

/// The owners of a key: up to [`squall_config::CLUSTER_REPLICAS_MAX`] node indexes, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Owners {
    nodes: [usize; 2],
    len: usize,
}

impl Owners {
    pub fn as_slice(&self) -> &[usize] {
        &self.nodes[..self.len]
    }
}

/// The nodes that own `key` among those `alive` says are up: the `replicas` best scores.
/// `seeds` are the nodes' score seeds ([`node_seed`]).
pub fn owners(key: u64, seeds: &[u64], alive: impl Fn(usize) -> bool, replicas: usize) -> Owners {
    let mut best: [(u64, usize); 2] = [(0, usize::MAX); 2];
    let replicas = replicas.clamp(1, 2);
    for (index, seed) in seeds.iter().enumerate() {
        if !alive(index) {
            continue;
        }
        let score = score(key, *seed);
        if best[0].1 == usize::MAX || score > best[0].0 {
            best[1] = best[0];
            best[0] = (score, index);
        } else if best[1].1 == usize::MAX || score > best[1].0 {
            best[1] = (score, index);
        }
    }
    let mut owners = Owners::default();
    for (_, index) in best.iter().take(replicas) {
        if *index != usize::MAX {
            owners.nodes[owners.len] = *index;
            owners.len += 1;
        }
    }
    owners
}

/// A node's weight for a key: a stable hash of both, so every node ranks alike.
fn score(key: u64, seed: u64) -> u64 {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&key.to_le_bytes());
    bytes[8..].copy_from_slice(&seed.to_le_bytes());
    key_hash(&bytes)
}

/// A node's score seed, from its name.
pub fn node_seed(name: &str) -> u64 {
    key_hash(name.as_bytes())
}

/// What a request is owned by: the cache key (scheme, host, path and query) by default, else
/// what the cluster's `hash_key` names, as an upstream's `consistent_hash` would read it.
pub fn request_hash(
    hash_key: Option<&HashKey>,
    key: &CacheKey,
    head: &RequestHead,
    peer: Option<SocketAddr>,
) -> u64 {
    match hash_key {
        Some(hash_key) => squall_proxy::forward::balance_key(hash_key, head, peer),
        None => cache_key_hash(key),
    }
}

/// A stable hash of a cache key's parts (the key's own hash is seeded per process, so nodes
/// would not agree on it).
pub fn cache_key_hash(key: &CacheKey) -> u64 {
    let mut bytes = [0u8; 24];
    bytes[..8].copy_from_slice(&key_hash(key.scheme()).to_le_bytes());
    bytes[8..16].copy_from_slice(&key_hash(key.host()).to_le_bytes());
    bytes[16..].copy_from_slice(&key_hash(key.path_and_query()).to_le_bytes());
    key_hash(&bytes)
}

impl Cluster {
    /// The runtime's view of `config`, whose peers' groups start at upstream index
    /// `first_upstream` (after the config's own `[[upstream]]` groups).
    pub fn new(config: &squall_config::Cluster, first_upstream: usize) -> Cluster {
        let mut next = first_upstream;
        let nodes = (config.nodes.iter().enumerate())
            .map(|(index, node)| Node {
                name: node.name.clone(),
                address: node.address,
                seed: node_seed(&node.name),
                upstream: (index != config.self_index).then(|| {
                    next += 1;
                    next - 1
                }),
            })
            .collect();
        Cluster {
            nodes,
            self_index: config.self_index,
            replicas: usize::from(config.replicas),
            hash_key: config.hash_key.clone(),
            local_ttl: config.local_ttl,
            health_check: config.health_check.clone(),
            hop_value: HeaderValue::from_str(&config.self_node().name)
                .unwrap_or(HeaderValue::from_static("node")),
            first_upstream,
        }
    }

    /// One upstream group per peer, in `nodes` order: one server, passive health that marks
    /// it down at its first failure and tries it again after a short back-off, one attempt
    /// (the edge goes to the origin itself rather than retrying), and no all-down fallback.
    /// With `health_check`, each worker also probes each peer as it probes an upstream's
    /// servers: a dead peer is marked down after `fails` probes without any request failing,
    /// and up again after `passes` good ones (its thresholds then apply to forwards too).
    pub fn peer_specs(&self) -> Vec<UpstreamSpec> {
        let peers = self.nodes.iter().filter(|n| n.upstream.is_some());
        peers
            .map(|node| {
                let server = ServerSpec {
                    address: node.address,
                    weight: 1,
                };
                let mut spec = UpstreamSpec::new(
                    format!("cluster:{}", node.name),
                    vec![server],
                    Balance::RoundRobin,
                );
                spec.connect_timeout = PEER_CONNECT_TIMEOUT;
                spec.response_timeout = PEER_RESPONSE_TIMEOUT;
                spec.passive = PassiveHealth {
                    fails: 1,
                    passes: 1,
                    backoff_min: Duration::from_secs(1),
                    backoff_max: Duration::from_secs(5),
                };
                spec.health_check = (self.health_check.as_ref()).map(|c| HealthCheckSpec {
                    path: c.path.clone(),
                    interval: c.interval,
                    fails: c.fails,
                    passes: c.passes,
                });
                spec.all_down = AllDown::Fail;
                spec.attempts_max = 1;
                spec
            })
            .collect()
    }

    /// The node scores' seeds, in `nodes` order.
    pub fn seeds(&self) -> impl Iterator<Item = u64> + '_ {
        self.nodes.iter().map(|n| n.seed)
    }

    pub fn self_name(&self) -> &str {
        &self.nodes[self.self_index].name
    }

    /// Whether upstream group `upstream` is a peer's (a forwarded request's session).
    pub fn is_peer_upstream(&self, upstream: usize) -> bool {
        upstream >= self.first_upstream
            && upstream < self.first_upstream + self.nodes.len().saturating_sub(1)
    }

    /// Whether a request from `ip` may carry the hop field: only the nodes' addresses may.
    pub fn trusts(&self, ip: IpAddr) -> bool {
        self.nodes.iter().any(|n| n.address.ip() == ip)
    }
}

#[cfg(test)]
mod tests;
