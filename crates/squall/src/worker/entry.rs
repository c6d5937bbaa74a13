//! Where every request enters, whatever protocol it came on: the rate limit, routing (once per
//! request) and the choice between answering here, the cache and the origin, with the
//! invalidation rule for methods that are not safe.
//!
//! HTTP/1.1 calls [`Worker::admit`] when a request head is decoded and HTTP/2 when a stream's
//! HEADERS arrive, so that a rule written here holds for both: before this module, HTTP/2
//! streams on proxy and cache routes never met the rate limit.

use std::sync::Arc;

use http::StatusCode;
use squall_cache::Invalidation;
use squall_h1::RequestHead;
use squall_proxy::{Handler, ProxyRoute};

use super::Worker;
use super::cache::{is_purge, key_of};
use crate::cache::Cache;

/// What to do with a request, decided at its head.
pub(super) enum Admission {
    /// Refused with this status before anything else: 429 over `limits.request_rate`, 403
    /// outside the route's `allow` / `deny` (already counted as refused). An HTTP/1.1
    /// connection closes after it, as the request's body is not read.
    Refused(StatusCode),
    /// Answered here, at the request's end, by route `route`'s handler (respond, redirect,
    /// block; `None` is the default 404).
    Answer { route: Option<u32> },
    /// A bodiless safe request (or PURGE) on a cached route: hit, fetch, park, pass or purge
    /// (see `cache.rs`).
    Cached(Arc<ProxyRoute>),
    /// Forwarded to the route's upstream group; `invalidate` is the stored object the
    /// response purges if it succeeds.
    Forward {
        route: Arc<ProxyRoute>,
        invalidate: Option<(Arc<Cache>, Invalidation)>,
    },
}

impl Worker {
    /// Admits the request `head` on connection `index`: the rate limit first, then the route.
    /// `bodiless` is true when no body follows the head (HTTP/1.1 framing, or END_STREAM on
    /// the HTTP/2 HEADERS).
    pub(super) fn admit(&self, index: usize, head: &RequestHead, bodiless: bool) -> Admission {
        let runtime = &self.runtime;
        let conn = &self.conns[index];
        if let (Some(rate), Some(peer)) = (runtime.client_limits.rate, conn.peer)
            && !self.clients.allow_request(peer.ip(), rate, self.now)
        {
            let counters = runtime.metrics.worker(self.id);
            counters.limit_requests.inc();
            counters.count_refused(StatusCode::TOO_MANY_REQUESTS);
            return Admission::Refused(StatusCode::TOO_MANY_REQUESTS);
        }
        let (id, handler) = runtime.service.route(head);
        let rules = id.and_then(|id| runtime.access.get(id as usize)?.as_ref());
        if let Some(rules) = rules
            && !conn.peer.is_some_and(|peer| rules.permits(peer.ip()))
        {
            let counters = runtime.metrics.worker(self.id);
            counters.access_denied.inc();
            counters.count_refused(StatusCode::FORBIDDEN);
            return Admission::Refused(StatusCode::FORBIDDEN);
        }
        let Handler::Proxy(route) = handler else {
            return Admission::Answer { route: id };
        };
        // Only what the cache can answer goes to it (GET, HEAD, and PURGE); other methods go
        // to the origin, with the purge their success implies.
        if route.cache && bodiless && (head.method.is_safe() || is_purge(&head.method)) {
            return Admission::Cached(route.clone());
        }
        Admission::Forward {
            route: route.clone(),
            invalidate: self.invalidation(index, head, route),
        }
    }

    /// For a request on a cached route whose method is not safe: the stored object its
    /// response purges if it succeeds (RFC 9111 §4.4).
    pub(super) fn invalidation(
        &self,
        index: usize,
        head: &RequestHead,
        route: &ProxyRoute,
    ) -> Option<(Arc<Cache>, Invalidation)> {
        if !route.cache {
            return None;
        }
        let scheme = super::scheme(&self.conns[index]);
        let invalidation = Invalidation::for_request(&head.method, || key_of(head, scheme))?;
        Some((self.runtime.cache.clone(), invalidation))
    }
}
