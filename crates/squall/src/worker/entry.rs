//! Where every request enters, whatever protocol it came on: the client address (`real_ip`),
//! the rate limits, routing (once per request), `allow` / `deny`, Basic authentication and
//! the choice between answering here, the cache and the origin, with the invalidation rule
//! for methods that are not safe.
//!
//! HTTP/1.1 calls [`Gate::admit`] when a request head is decoded and HTTP/2 when a stream's
//! HEADERS arrive, so that a rule written here holds for both: before this module, HTTP/2
//! streams on proxy and cache routes never met the rate limit.
//!
//! The client address is computed here per request from the connection's peer and the
//! request's fields (HTTP/2 multiplexes the clients of a proxy on one connection); the access
//! log and the session compute it the same way (`Runtime::client_addr`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode};
use squall_cache::Invalidation;
use squall_config::RateKey;
use squall_h1::RequestHead;
use squall_proxy::{Handler, ProxyRoute, SERVER_METHODS};
use tracing::debug;

use super::Worker;
use super::cache::{is_purge, key_of};
use super::conn::Conn;
use super::downstream::Downstream;
use super::ids::Client;
use crate::auth::{Check, Credentials, RouteAuth, Verdict};
use crate::cache::Cache;
use crate::clients::ClientTable;
use crate::clients::retry_after_secs;
use crate::route_rules::Route;
use crate::runtime::Runtime;

/// A field a refusal carries: `WWW-Authenticate` on a 401, `Retry-After` on a 429 or 503.
pub(super) type Field = (&'static str, Bytes);

/// What to do with a request, decided at its head.
pub(super) enum Admission {
    /// Refused with this status (and field) before anything else: 429 over a `request_rate`
    /// or after too many failed passwords, 403 outside the route's `allow` / `deny`, 401
    /// without good credentials, 503 when passwords cannot be checked now (already counted
    /// as refused). An HTTP/1.1 connection closes after it, as the request's body is not read.
    Refused(StatusCode, Option<Field>),
    /// A bodiless request whose credentials a verifier thread checks meanwhile: it waits,
    /// and is admitted again with the verdict ([`Worker::verified`]).
    Verify(Box<Verify>),
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

/// Credentials for the verifier threads.
pub(super) struct Verify {
    auth: Arc<RouteAuth>,
    credentials: Credentials,
}

/// What admission reads: the runtime, the per-address table, the worker's index and the
/// clock. Borrowed from the worker for one request (`Worker::gate`); it changes nothing but
/// counters and the rate buckets.
pub(super) struct Gate<'a> {
    pub runtime: &'a Runtime,
    pub table: &'a ClientTable,
    pub worker: usize,
    pub now: Instant,
}

impl Gate<'_> {
    /// Admits the request `head` on connection `conn`: the rate limits first, then the route.
    /// `bodiless` is true when no body follows the head (HTTP/1.1 framing, or END_STREAM on
    /// the HTTP/2 HEADERS).
    pub(super) fn admit(&self, conn: &Conn, head: &RequestHead, bodiless: bool) -> Admission {
        self.admit_with(conn, head, bodiless, None)
    }

    /// [`Gate::admit`] for a request that waited for its credentials' `verdict` (`None`:
    /// not verified yet); the rate limits were taken the first time.
    pub(super) fn admit_with(
        &self,
        conn: &Conn,
        head: &RequestHead,
        bodiless: bool,
        verdict: Option<Verdict>,
    ) -> Admission {
        let runtime = &self.runtime;
        let client = runtime.client_addr(conn.peer, head);
        let counters = runtime.metrics.worker(self.worker);
        if let (None, Some(rate), Some(client)) = (verdict, runtime.client_limits.rate, client)
            && let Err(wait) = self.table.allow_request(client.ip(), rate, self.now)
        {
            counters.limit_requests.inc();
            return self.refuse(StatusCode::TOO_MANY_REQUESTS, Some(retry_after(wait)));
        }
        let (route, handler) = runtime.service.route(head);
        if let Some(refused) = self.refuse_by_target(head, route) {
            return refused;
        }
        let id = route.map(|route| route.id);
        let rules = route.map(|route| &route.rules);
        if let Some(access) = rules.and_then(|r| r.access.as_ref())
            && !client.is_some_and(|client| access.permits(client.ip()))
        {
            counters.access_denied.inc();
            return self.refuse(StatusCode::FORBIDDEN, None);
        }
        if let (None, Some(route)) = (verdict, route)
            && let Err(wait) = self.route_rate(route, head, client)
        {
            counters.limit_requests.inc();
            return self.refuse(StatusCode::TOO_MANY_REQUESTS, Some(retry_after(wait)));
        }
        if let Some(auth) = rules.and_then(|r| r.auth.as_ref())
            && let Err(refused) = self.authenticate(auth, head, client, bodiless, verdict)
        {
            return refused;
        }
        let Handler::Proxy(route) = handler else {
            return Admission::Answer { route: id };
        };
        // A capture that would not stay one segment of the origin's path (see
        // `squall_proxy::rewrite`): refused here, before a cache lookup or an origin sees it.
        if squall_proxy::rewrite::origin_target(head, route.rewrite.as_ref()).is_err() {
            debug!(
                worker = self.worker,
                target = %String::from_utf8_lossy(head.request_uri()),
                "request refused: its captures cannot be rewritten into one segment each"
            );
            return self.refuse(StatusCode::BAD_REQUEST, None);
        }
        // Only what the cache can answer goes to it (GET, HEAD, and PURGE); other methods go
        // to the origin, with the purge their success implies.
        if route.cache && bodiless && (head.method.is_safe() || is_purge(&head.method)) {
            return Admission::Cached(route.clone());
        }
        Admission::Forward {
            route: route.clone(),
            invalidate: self.invalidation(conn, head, route),
        }
    }

    /// What the target and the method refuse, whatever the route's rules: TRACE where `route`
    /// does not allow it (405), and a target that an origin reading paths leniently
    /// could take for a path of another route (400, see `Service::reads_elsewhere`).
    fn refuse_by_target(&self, head: &RequestHead, route: Option<&Route>) -> Option<Admission> {
        let service = &self.runtime.service;
        let counters = self.runtime.metrics.worker(self.worker);
        if head.method == Method::TRACE && !route.is_some_and(|r| r.allow_trace) {
            counters.trace_refused.inc();
            let allow = ("allow", Bytes::from_static(SERVER_METHODS.as_bytes()));
            return Some(self.refuse(StatusCode::METHOD_NOT_ALLOWED, Some(allow)));
        }
        if service.reads_elsewhere(head, route.map(|r| r.id)) {
            counters.target_ambiguous.inc();
            debug!(
                worker = self.worker,
                target = %String::from_utf8_lossy(head.request_uri()),
                "request target refused: a lenient origin could read it as another route's path"
            );
            return Some(self.refuse(StatusCode::BAD_REQUEST, None));
        }
        None
    }

    /// Counts a refusal and makes its admission.
    fn refuse(&self, status: StatusCode, field: Option<Field>) -> Admission {
        self.runtime
            .metrics
            .worker(self.worker)
            .count_refused(status);
        Admission::Refused(status, field)
    }

    /// Takes a token from the request's bucket of `route`'s own `request_rate`, if any.
    fn route_rate(
        &self,
        route: &Route,
        head: &RequestHead,
        client: Option<SocketAddr>,
    ) -> Result<(), Duration> {
        let Some(rate) = &route.rules.rate else {
            return Ok(());
        };
        let id = route.id;
        let buckets = &self.runtime.route_buckets;
        let by_client = || buckets.key((id, 0u8, client.map(|c| c.ip())));
        let key = match &rate.key {
            RateKey::ClientIp => by_client(),
            RateKey::Header(name) => match head.headers.get(name) {
                Some(value) => buckets.key((id, 1u8, value.as_bytes())),
                None => by_client(),
            },
            RateKey::Route => buckets.key((id, 2u8)),
        };
        let per_second = f64::from(rate.requests) / rate.per.as_secs_f64();
        buckets.take(key, per_second, f64::from(rate.burst), self.now)
    }

    /// The route's Basic authentication: `Ok` when the request may go on.
    fn authenticate(
        &self,
        auth: &Arc<RouteAuth>,
        head: &RequestHead,
        client: Option<SocketAddr>,
        bodiless: bool,
        verdict: Option<Verdict>,
    ) -> Result<(), Admission> {
        let counters = self.runtime.metrics.worker(self.worker);
        let credentials = match verdict {
            Some(verdict) => return self.after_verification(auth, client, verdict),
            None => {
                // Two credentials are one too many to choose from (nginx answers 400 too).
                if head
                    .headers
                    .get_all(http::header::AUTHORIZATION)
                    .nth(1)
                    .is_some()
                {
                    return Err(self.refuse(StatusCode::BAD_REQUEST, None));
                }
                let value = head.headers.get(http::header::AUTHORIZATION);
                match auth.check(value.map(|v| v.as_bytes())) {
                    Check::Missing => return Err(self.unauthorized(auth)),
                    Check::Cached => {
                        counters.auth_cache_hits.inc();
                        return Ok(());
                    }
                    Check::Verify(credentials) => credentials,
                }
            }
        };
        // A client that failed too often is not checked again until its bucket refills.
        let (rate, burst) = self.failure_rate();
        if let Some(client) = client
            && let Err(wait) = (self.runtime.auth_failures).check(
                self.runtime.auth_failures.key(client.ip()),
                rate,
                burst,
                self.now,
            )
        {
            counters.auth_limited.inc();
            return Err(self.refuse(StatusCode::TOO_MANY_REQUESTS, Some(retry_after(wait))));
        }
        if bodiless {
            let auth = auth.clone();
            return Err(Admission::Verify(Box::new(Verify { auth, credentials })));
        }
        let verdict = match crate::auth::verify_inline(auth, &credentials) {
            Ok(true) => Verdict::Ok,
            Ok(false) => Verdict::Failed,
            Err(wait) => {
                counters.auth_busy.inc();
                let field = retry_after(wait);
                return Err(self.refuse(StatusCode::SERVICE_UNAVAILABLE, Some(field)));
            }
        };
        self.after_verification(auth, client, verdict)
    }

    /// Counts a verification; a failed one is also counted against the client's address.
    fn after_verification(
        &self,
        auth: &RouteAuth,
        client: Option<SocketAddr>,
        verdict: Verdict,
    ) -> Result<(), Admission> {
        let counters = self.runtime.metrics.worker(self.worker);
        match verdict {
            Verdict::Ok => {
                counters.auth_verifications.inc();
                Ok(())
            }
            Verdict::Failed => {
                counters.auth_verifications.inc();
                counters.auth_failures.inc();
                let failures = &self.runtime.auth_failures;
                if let Some(client) = client {
                    let (rate, burst) = self.failure_rate();
                    let _ = failures.take(failures.key(client.ip()), rate, burst, self.now);
                }
                Err(self.unauthorized(auth))
            }
            Verdict::Busy => {
                counters.auth_busy.inc();
                let field = ("retry-after", Bytes::from_static(b"1"));
                Err(self.refuse(StatusCode::SERVICE_UNAVAILABLE, Some(field)))
            }
        }
    }

    /// `limits.auth_failures_max` a minute, as a bucket's (rate per second, burst).
    fn failure_rate(&self) -> (f64, f64) {
        let max = f64::from(self.runtime.auth_failures_max);
        (max / 60.0, max)
    }

    fn unauthorized(&self, auth: &RouteAuth) -> Admission {
        let field = ("www-authenticate", auth.challenge.clone());
        self.refuse(StatusCode::UNAUTHORIZED, Some(field))
    }

    /// For a request on a cached route whose method is not safe: the stored object its
    /// response purges if it succeeds (RFC 9111 §4.4).
    pub(super) fn invalidation(
        &self,
        conn: &Conn,
        head: &RequestHead,
        route: &ProxyRoute,
    ) -> Option<(Arc<Cache>, Invalidation)> {
        if !route.cache {
            return None;
        }
        let scheme = super::scheme(conn);
        let invalidation = Invalidation::for_request(&head.method, || key_of(head, scheme))?;
        Some((self.runtime.cache.clone(), invalidation))
    }
}

impl Worker {
    /// What admission reads, borrowed for one request.
    pub(super) fn gate(&self) -> Gate<'_> {
        Gate {
            runtime: &self.runtime,
            table: &self.clients.table,
            worker: self.id,
            now: self.now,
        }
    }
}

/// Hands a parked request's credentials to the verifier threads; the verdict comes back on the
/// control channel of `peer` (this worker's) as `Control::Verified`.
pub(super) fn verify_parked(
    down: &mut Downstream<'_>,
    peer: Option<&crate::cache::Peer>,
    client: Client,
    head: RequestHead,
    verify: Verify,
) {
    if let Some(conn) = down.conns.get_mut(client.conn()) {
        super::downstream::set_verifying(conn, true);
    }
    let token = down.client_token(client);
    let peer = peer.map(|p| (p.control.clone(), p.waker.clone()));
    let Verify { auth, credentials } = verify;
    let head = Box::new(head);
    let done = move |verdict| {
        if let Some((control, waker)) = peer {
            let message = crate::worker::Control::Verified {
                client: token,
                head,
                verdict,
            };
            if control.send(message).is_ok() {
                waker.wake();
            }
        }
    };
    crate::auth::submit(crate::auth::Job {
        auth,
        credentials,
        done: Box::new(done),
    });
}

/// `Retry-After` for a wait (whole seconds, at least 1).
fn retry_after(wait: Duration) -> Field {
    (
        "retry-after",
        Bytes::from(retry_after_secs(wait).to_string()),
    )
}
