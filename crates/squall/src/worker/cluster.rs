//! The worker's side of `[cluster]` (docs/CLUSTER.md): which node owns a request's key, the
//! forward to that owner, the way back to the origin when the owner fails, and the PURGE
//! fan-out. The decisions are `crate::cluster`'s; this file only applies them.
//!
//! A request on a cached route whose key another node owns goes to that node through the
//! peer's upstream group (pooled keep-alive connections), with `Squall-Cluster-Hop: <self>`.
//! A request that carries the field from a node's address is served here whatever the
//! ownership says; from any other address the field is removed first, so a client cannot
//! skip the owner or pose as a peer. When the owner cannot be reached, the session's error is
//! not answered: the request is parked and woken at once (next loop turn, after the session
//! has ended and released its client) and then served here, so an owner's death costs its
//! clients no error. The failed connect has marked the peer down meanwhile, so later requests
//! for its keys go to their next owner without trying it.

use std::cell::Cell;
use std::sync::Arc;
use std::time::Instant;

use squall_cache::CacheKey;
use squall_h1::RequestHead;
use squall_proxy::ProxyRoute;
use squall_upstream::HealthState;

use super::Worker;
use super::conn::Conn;
use super::downstream;
use super::downstream::part_downstream;
use super::ids::Client;
use super::ids::SessionId;
use super::origin::Upstreams;
use crate::cache::Waiter;
use crate::cluster::{self, Cluster, HOP, fanout};
use crate::runtime::Runtime;
use crate::worker::parked::ClusterWait;
use crate::worker::parked::Parked;

thread_local! {
    /// Alternates forwards between a key's two owners (`replicas = 2`), per worker.
    static TURN: Cell<usize> = const { Cell::new(0) };
}

/// What the choice of a key's owner reads: the runtime, this worker's view of its upstream
/// groups (a peer's health), the clock and the worker's index, lent for one request (built
/// where `begin_cached` lends it).
pub(super) struct Owners<'a> {
    pub runtime: &'a Runtime,
    pub upstreams: &'a Upstreams,
    pub now: Instant,
    pub worker: usize,
}

impl Owners<'_> {
    /// Whether `head` comes from another node (a trusted hop field); an untrusted hop field is
    /// removed.
    pub(super) fn hop_from_peer(&self, conn: &Conn, head: &mut RequestHead) -> bool {
        if !head.headers.contains_key(HOP) {
            return false;
        }
        let peer = conn.peer;
        let trusted = (self.runtime.cluster.as_ref())
            .zip(peer)
            .is_some_and(|(cluster, peer)| cluster.trusts(peer.ip()));
        if trusted {
            (self.runtime.metrics.worker(self.worker))
                .cluster_served_for_peers
                .inc();
        } else {
            head.headers.remove(HOP);
        }
        trusted
    }

    /// The scheme a request's cache key has: a peer's forward says the client's own in
    /// `X-Forwarded-Proto` (the hop between nodes is clear text).
    pub(super) fn key_scheme(&self, conn: &Conn, head: &RequestHead, peer: bool) -> &'static str {
        let forwarded = head.headers.get("x-forwarded-proto");
        match forwarded {
            Some(v) if peer && v.as_bytes().eq_ignore_ascii_case(b"https") => "https",
            Some(_) if peer => "http",
            _ => super::scheme(conn),
        }
    }

    /// The node `head` should be forwarded to, when its key is owned elsewhere (by a peer this
    /// worker believes alive); `None` to serve it here.
    pub(super) fn owner_elsewhere(
        &self,
        conn: &Conn,
        head: &RequestHead,
        key: &CacheKey,
    ) -> Option<usize> {
        let cluster = self.runtime.cluster.as_deref()?;
        let peer = conn.peer;
        let hash = cluster::request_hash(cluster.hash_key.as_ref(), key, head, peer);
        let seeds: Vec<u64> = cluster.seeds().collect();
        let owners = cluster::owners(
            hash,
            &seeds,
            |i| self.node_alive(cluster, i),
            cluster.replicas,
        );
        let owners = owners.as_slice();
        if owners.is_empty() || owners.contains(&cluster.self_index) {
            return None;
        }
        let turn = TURN.with(|t| {
            t.set(t.get().wrapping_add(1));
            t.get()
        });
        Some(owners[turn % owners.len()])
    }

    /// This node, or a peer whose group this worker has not marked down.
    fn node_alive(&self, cluster: &Cluster, node: usize) -> bool {
        let Some(upstream) = cluster.nodes.get(node).and_then(|n| n.upstream) else {
            return node == cluster.self_index;
        };
        let Some(group) = self.upstreams.group(upstream) else {
            return false;
        };
        let server = group.group.ids().next();
        server.and_then(|id| group.group.state(id, self.now)) != Some(HealthState::Down)
    }

    /// `route` as sent to `node`: its peer group, no header edits and no compression (the owner
    /// applies them, once).
    pub(super) fn route_to_owner(
        &self,
        route: &ProxyRoute,
        node: usize,
        head: &mut RequestHead,
    ) -> Option<Arc<ProxyRoute>> {
        let cluster = self.runtime.cluster.as_deref()?;
        let upstream = cluster.nodes.get(node)?.upstream?;
        // Counted when a session sends it (`open_session`): with `local_ttl`, a borrowed copy
        // may answer it here instead.
        head.headers.insert(HOP, cluster.hop_value.clone());
        Some(Arc::new(ProxyRoute {
            id: route.id,
            upstream,
            request_headers: Default::default(),
            response_headers: Default::default(),
            cache: route.cache,
            cache_ttl: route.cache_ttl,
            // The owner compresses for the client; the copy passes through as it is.
            compress: None,
            upgrade: None,
            // The owner rewrites the path, as it applies the other edits: the copy goes with
            // the client's, which the owner routes again.
            rewrite: None,
            // A long stream's silence is the route's to bound, on the way to the owner too;
            // the peer's own head wait stays the cluster's.
            timeouts: squall_config::ProxyTimeouts {
                response: None,
                read: route.timeouts.read,
            },
            body_bytes_max: route.body_bytes_max,
        }))
    }
}

impl Worker {
    /// The hook of a session's error: a forward to an owner that failed before its response
    /// began is not answered but served here instead (parked, and woken at once). Whether it
    /// took the error over.
    pub(super) fn owner_failed(&mut self, id: SessionId, request_unfinished: bool) -> bool {
        let Some(cluster) = self.runtime.cluster.clone() else {
            return false;
        };
        let Some(session) = self.sessions.get_mut(id) else {
            return false;
        };
        let Some(client) = session.listener() else {
            return false;
        };
        if request_unfinished || !cluster.is_peer_upstream(session.ex.route().upstream) {
            return false;
        }
        let mut head = session.ex.head().clone();
        if let Some(fields) = session.ex.client_fields() {
            head.headers = squall_h1::Fields::from_header_map(fields);
        }
        head.headers.remove(HOP);
        let Some(route) = self.runtime.service.proxy_route(&head).cloned() else {
            return false;
        };
        self.runtime
            .metrics
            .worker(self.id)
            .cluster_owner_failures
            .inc();
        let scheme = super::scheme(&self.clients.conns[client.conn()]);
        let key = super::cache::key_of(&head, scheme);
        let parked = Parked {
            head,
            route,
            key,
            until: self.now + self.runtime.cache.coalesce_timeout,
            since: self.wall,
            fetched: false,
            cluster: Some(ClusterWait::OwnerFailed),
        };
        downstream::park(&mut self.clients.conns[client.conn()], client, parked);
        self.update_deadline(client.conn());
        let waiter = Waiter {
            worker: self.id,
            client: part_downstream!(self).client_token(client),
        };
        crate::cache::wake(&self.peers, vec![waiter]);
        true
    }

    /// Sends a PURGE this node accepted (and applied, removing `removed` objects) to every
    /// peer, and parks it until they have answered. `None` without peers: the caller answers.
    pub(super) fn fan_out_purge(
        &mut self,
        client: Client,
        head: RequestHead,
        route: Arc<ProxyRoute>,
        key: CacheKey,
        removed: usize,
        wait: bool,
    ) -> Option<(RequestHead, Arc<ProxyRoute>, CacheKey)> {
        let Some(cluster) = self.runtime.cluster.clone() else {
            return Some((head, route, key));
        };
        let peers: Vec<_> = (cluster.nodes.iter())
            .filter(|n| n.upstream.is_some())
            .map(|n| (n.name.clone(), n.address))
            .collect();
        if peers.is_empty() {
            return Some((head, route, key));
        }
        let mut fields: Vec<(&str, &[u8])> = Vec::new();
        if let Some(tags) = head.headers.get(squall_cache::SURROGATE_KEY) {
            fields.push(("surrogate-key", tags.as_bytes()));
        }
        if let Some(mode) = head.headers.get("x-squall-purge")
            && !mode
                .as_bytes()
                .trim_ascii()
                .eq_ignore_ascii_case(b"refetch")
        {
            fields.push(("x-squall-purge", mode.as_bytes()));
        }
        let target = head.uri.path_and_query().map_or("/", |pq| pq.as_str());
        let hop = cluster.hop_value.as_bytes();
        let request = fanout::request_bytes(target, key.host(), key.scheme(), hop, &fields);
        let token = part_downstream!(self).client_token(client);
        let (peer_channels, worker) = (self.peers.clone(), self.id);
        let done = move || {
            if wait {
                crate::cache::wake(
                    &peer_channels,
                    vec![Waiter {
                        worker,
                        client: token,
                    }],
                );
            }
        };
        let fanout = fanout::spawn(request, peers.clone(), done);
        if !wait {
            return Some((head, route, key));
        }
        let parked = Parked {
            head,
            route,
            key,
            until: self.now + fanout::FANOUT_WAIT,
            since: self.wall,
            fetched: false,
            cluster: Some(ClusterWait::Purge {
                fanout,
                peers: peers.into_iter().map(|(name, _)| name).collect(),
                removed,
            }),
        };
        downstream::park(&mut self.clients.conns[client.conn()], client, parked);
        self.update_deadline(client.conn());
        None
    }

    /// A parked request of the cluster's woke: an owner's failure is served here; a purge's
    /// fan-out is answered with every node's result.
    pub(super) fn unpark_cluster(&mut self, client: Client, parked: Parked, wait: ClusterWait) {
        match wait {
            ClusterWait::OwnerFailed => {
                let cache = self.runtime.cache.clone();
                let Parked {
                    head, route, key, ..
                } = parked;
                self.begin_here(client, head, route, cache, key, None);
            }
            ClusterWait::Purge {
                fanout,
                peers,
                removed,
            } => {
                let cluster = self.runtime.cluster.clone();
                let me = cluster.as_deref().map_or("self", Cluster::self_name);
                let mut nodes = vec![(me.to_owned(), Some(fanout::Reply::Purged(removed)))];
                match fanout {
                    Some(fanout) => nodes.extend(fanout.replies()),
                    None => nodes.extend(peers.into_iter().map(|name| {
                        let busy = format!("more than {} purges at once", fanout::FANOUTS_MAX);
                        (name, Some(fanout::Reply::Failed(busy)))
                    })),
                }
                let counters = self.runtime.metrics.worker(self.id);
                for (_, reply) in &nodes[1..] {
                    match reply {
                        Some(fanout::Reply::Purged(_)) => counters.cluster_purge_confirmed.inc(),
                        _ => counters.cluster_purge_failed.inc(),
                    }
                }
                part_downstream!(self).answer_fleet_purge(client, &parked.head, &nodes);
            }
        }
    }
}
