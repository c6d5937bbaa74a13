//! A request parked on the cache: waiting for another request's fetch of the same object, or
//! for something of the cluster's (`cache.rs`, `cluster.rs`), kept in its client's slot.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use squall_cache::CacheKey;
use squall_h1::RequestHead;
use squall_proxy::ProxyRoute;

/// A request waiting for another's fetch of the same object.
pub struct Parked {
    pub head: RequestHead,
    pub route: Arc<ProxyRoute>,
    pub key: CacheKey,
    pub until: Instant,
    /// When it parked (wall clock, as entries' response times): an entry stored since then
    /// satisfies its `no-cache` and `max-age`.
    pub since: SystemTime,
    /// It waits for the fetch it caused (a range of an object not stored): the entry it is
    /// then served from is its `MISS`, not a hit.
    pub fetched: bool,
    /// It waits for something of the cluster's, not for a fetch (`cluster.rs`).
    pub cluster: Option<ClusterWait>,
}

/// What a request parked by the cluster waits for.
pub enum ClusterWait {
    /// Nothing: its key's owner failed, and it is served here on the next turn of the loop,
    /// once the failed session has let its client go.
    OwnerFailed,
    /// The answers of the peers a PURGE was sent to (`None`: too many fan-outs at once), and
    /// what it removed here.
    Purge {
        fanout: Option<Arc<crate::cluster::fanout::FanOut>>,
        peers: Vec<String>,
        removed: usize,
    },
}
