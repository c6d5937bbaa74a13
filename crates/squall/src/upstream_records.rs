//! Each upstream group compiled once into one record: the balancer's spec, the hash key, TLS
//! to its servers, the PROXY protocol, the protocol spoken and its event counters. Workers
//! find a group's record by its index in `Runtime::upstreams` (the config's `[[upstream]]`
//! order, then the cluster's peers) and read everything about it there, so a per-upstream
//! feature adds a field here rather than another array beside the others.
//!
//! What outlives a reload (TLS connectors and their session caches, event counters) is
//! carried over by the group's name, never by its position, which a reload may change.

use std::sync::Arc;

use squall_config::{HashKey, OriginProtocol, ProxyProtocolVersion};

use crate::origin_tls::OriginTls;
use crate::upstream_events::UpstreamEvents;

/// One upstream group.
pub struct UpstreamRecord {
    /// Its servers and balancing, as `squall-upstream` builds a group from.
    pub spec: squall_upstream::UpstreamSpec,
    /// What `consistent_hash` hashes.
    pub hash_key: HashKey,
    /// `tls = true`: the connector and server names; `None` in clear text.
    pub tls: Option<Arc<OriginTls>>,
    /// `proxy_protocol`: the header version sent before each request's bytes.
    pub proxy_protocol: Option<ProxyProtocolVersion>,
    /// `protocol`: HTTP/1.1, h2, h2c or auto.
    pub protocol: OriginProtocol,
    /// HTTP/2 stream and tunnel counters, kept by name across reloads; `None` for a cluster
    /// peer, whose counters are made on first use.
    pub events: Option<Arc<UpstreamEvents>>,
}

impl UpstreamRecord {
    /// A cluster peer's group: clear text HTTP/1.1, no PROXY protocol, hashed by URI.
    pub fn peer(spec: squall_upstream::UpstreamSpec) -> UpstreamRecord {
        UpstreamRecord {
            spec,
            hash_key: HashKey::default(),
            tls: None,
            proxy_protocol: None,
            protocol: OriginProtocol::default(),
            events: None,
        }
    }
}

/// The TLS state of the group named `name` in `previous` (the runtime a reload replaces).
pub fn previous_tls<'a>(previous: &'a [UpstreamRecord], name: &str) -> Option<&'a OriginTls> {
    (previous.iter())
        .find(|u| u.spec.name == name)
        .and_then(|u| u.tls.as_deref())
}
