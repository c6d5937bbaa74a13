//! `[cluster]`: the nodes (names and addresses unique), which one is this node, what keys are
//! hashed by, how many owners each key has, how long a borrowed copy is kept, and how peers
//! are probed (an upstream's `health_check`).

use std::net::SocketAddr;

use toml::Spanned;

use super::value::{duration_or, int_in, socket_addr};
use crate::diagnostics::Report;
use crate::model::{HashKey, Listen};
use crate::raw::{RawCluster, RawClusterNode, Str};
use crate::{CLUSTER_NODES_MAX, CLUSTER_REPLICAS_DEFAULT, CLUSTER_REPLICAS_MAX};
use crate::{Cluster, ClusterNode};

/// Validates `[cluster]`; `listen` finds this node when `self` is not given.
pub(super) fn cluster(raw: &Spanned<RawCluster>, listen: &[Listen], r: &mut Report) -> Cluster {
    let item = raw.get_ref();
    let nodes = nodes(raw, r);
    let self_index = self_index(raw, &nodes, listen, r);
    let replicas = item
        .replicas
        .as_ref()
        .map_or(CLUSTER_REPLICAS_DEFAULT, |v| {
            let max = u32::from(CLUSTER_REPLICAS_MAX);
            let n = int_in(r, "replicas", v, 1..=max).unwrap_or(1) as u8;
            if usize::from(n) > nodes.len().max(1) {
                r.error(
                    &v.span(),
                    format!("replicas = {n} needs at least {n} nodes"),
                );
            }
            n
        });
    Cluster {
        nodes,
        self_index,
        hash_key: item.hash_key.as_ref().and_then(|key| hash_key(key, r)),
        replicas,
        local_ttl: duration_or(r, "local_ttl", item.local_ttl.as_ref(), Default::default()),
        health_check: (item.health_check.as_ref()).map(|h| super::health_check(h.get_ref(), r)),
    }
}

/// `"cache_key"` (the default) or any upstream `hash_key`.
fn hash_key(key: &Str, r: &mut Report) -> Option<HashKey> {
    if key.get_ref() == "cache_key" {
        return None;
    }
    HashKey::parse(key.get_ref())
        .map_err(|e| r.error(&key.span(), format!("{e}, or \"cache_key\"")))
        .ok()
}

fn nodes(raw: &Spanned<RawCluster>, r: &mut Report) -> Vec<ClusterNode> {
    let list = &raw.get_ref().nodes;
    if list.get_ref().is_empty() {
        r.error(&list.span(), "nodes: a cluster needs at least one node");
    }
    if list.get_ref().len() > CLUSTER_NODES_MAX {
        r.error(&list.span(), format!("nodes: at most {CLUSTER_NODES_MAX}"));
    }
    let mut nodes: Vec<ClusterNode> = Vec::new();
    for item in list.get_ref() {
        let RawClusterNode { name, address } = item.get_ref();
        let text = name.get_ref();
        let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
        if text.is_empty() || !text.chars().all(ok) {
            let hint = "use letters, digits, \"_\", \"-\" and \".\"";
            r.error(&name.span(), format!("bad node name {text:?}: {hint}"));
        } else if nodes.iter().any(|n| n.name == *text) {
            r.error(&name.span(), format!("node name {text:?} is used twice"));
        }
        let address = socket_addr(r, address).unwrap_or(NO_ADDRESS);
        if address != NO_ADDRESS && nodes.iter().any(|n| n.address == address) {
            let span = item.get_ref().address.span();
            r.error(&span, format!("node address {address} is used twice"));
        }
        nodes.push(ClusterNode {
            name: text.clone(),
            address,
        });
    }
    nodes
}

const NO_ADDRESS: SocketAddr = super::NO_ADDRESS;

/// `self` by name, else the one node whose address a `[[listen]]` binds.
fn self_index(
    raw: &Spanned<RawCluster>,
    nodes: &[ClusterNode],
    listen: &[Listen],
    r: &mut Report,
) -> usize {
    if let Some(name) = &raw.get_ref().self_name {
        let found = nodes.iter().position(|n| n.name == *name.get_ref());
        if found.is_none() {
            let message = format!("self = {:?} is not among the nodes", name.get_ref());
            r.error(&name.span(), message);
        }
        return found.unwrap_or(0);
    }
    let bound: Vec<usize> = (nodes.iter().enumerate())
        .filter(|(_, n)| listen.iter().any(|l| l.address == n.address))
        .map(|(i, _)| i)
        .collect();
    match bound[..] {
        [one] => one,
        [] => {
            let hint = "set self = \"NAME\", or listen on this node's address";
            r.error(
                &raw.span(),
                format!("[cluster] does not say which node this is: {hint}"),
            );
            0
        }
        _ => {
            let hint = "set self = \"NAME\"";
            r.error(
                &raw.span(),
                format!("[cluster]: this node listens on several nodes' addresses: {hint}"),
            );
            0
        }
    }
}
