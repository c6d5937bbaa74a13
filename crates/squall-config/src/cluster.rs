//! The `[cluster]` section: several Squall nodes behind one L4 balancer share their caches by
//! giving each cache key an owner among them (docs/CLUSTER.md).
//!
//! The config only names the nodes and this node's place among them; who owns which key is
//! the binary's decision (`crates/squall/src/cluster.rs`), made from these values alone so that
//! every node with the same `nodes` list agrees without talking to the others.

use std::net::SocketAddr;
use std::time::Duration;

use crate::HashKey;

/// `replicas` when not set: one owner per key.
pub const CLUSTER_REPLICAS_DEFAULT: u8 = 1;
/// The most owners a key may have.
pub const CLUSTER_REPLICAS_MAX: u8 = 2;
/// The most nodes in a cluster (each peer is a one-server upstream group in every worker).
pub const CLUSTER_NODES_MAX: usize = 64;

/// The validated `[cluster]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// In file order; names and addresses unique; at least one.
    pub nodes: Vec<ClusterNode>,
    /// This node's index in `nodes` (`self`, or the node whose address a `[[listen]]` binds).
    pub self_index: usize,
    /// What the owner is chosen by; `None`: the cache key (scheme, host, path and query).
    pub hash_key: Option<HashKey>,
    /// Owners per key, 1 ..= [`CLUSTER_REPLICAS_MAX`] (and at most the number of nodes).
    pub replicas: u8,
    /// How long a node keeps its own copy of what it fetched from another key's owner; zero
    /// keeps none.
    pub local_ttl: Duration,
    /// Probes of every peer, as an upstream's `health_check`; `None`: failed forwards alone
    /// mark a peer down.
    pub health_check: Option<crate::HealthCheck>,
}

/// One Squall node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// Letters, digits, `_`, `-` and `.`: it travels in the `Squall-Cluster-Hop` field.
    pub name: String,
    /// Where the other nodes reach it: a plain (not TLS, not PROXY protocol) HTTP listener.
    pub address: SocketAddr,
}

impl Cluster {
    /// This node.
    pub fn self_node(&self) -> &ClusterNode {
        &self.nodes[self.self_index]
    }

    /// The other nodes, with their index in `nodes`.
    pub fn peers(&self) -> impl Iterator<Item = (usize, &ClusterNode)> {
        let me = self.self_index;
        self.nodes.iter().enumerate().filter(move |(i, _)| *i != me)
    }
}
