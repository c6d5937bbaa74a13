//! Whether a failed attempt may be tried again, where, and which status the client gets when
//! it may not.
//!
//! # The rules, and where they come from
//! - Nothing is retried once any byte of the response went to the client: the client would
//!   get two responses spliced together (nginx: "passing a request to the next server is only
//!   possible if nothing has been sent to a client yet").
//! - A connect failure or connect timeout is retried on another server for every method: no
//!   byte of the request reached anyone.
//! - Likewise any failure before a byte of the request was handed to the kernel
//!   (`request_sent == false`): the origin cannot have processed what it never got.
//! - Once the request was (even partly) sent, only idempotent methods are retried. RFC 9110
//!   §9.2.2: "A proxy MUST NOT automatically retry non-idempotent requests." A reset or close
//!   before the response cannot tell "never processed" from "processed, then crashed", so a
//!   POST that may have been applied is answered 502, not replayed. nginx does the same since
//!   1.9.13 (`proxy_next_upstream` without `non_idempotent`).
//! - A reset or close on a *reused* keep-alive connection before any response byte is the
//!   classic race: the origin closed the idle connection as we wrote to it (RFC 9112 §9.3.1
//!   expects clients to recover from such closes, within RFC 9110 §9.2.2's limits). An
//!   idempotent (or unsent) request is retried; it goes to the same server on a new
//!   connection ([`Retry::SameServer`]), and does not use up an attempt (nginx likewise gives
//!   a cached connection's `error` an extra try). It is bounded: the new connection is not
//!   reused, so it cannot earn another free retry.
//! - A response timeout is not retried unless [`RetryPolicy::retry_response_timeout`] is set,
//!   and then only for idempotent methods. nginx retries it by default, but then a client can
//!   wait `attempts × response_timeout`, and an origin slow on this request is usually slow on
//!   it everywhere: the retry multiplies load exactly when the origins are struggling.
//! - An invalid response (unparseable head) is retried like a reset: the server misbehaved and
//!   nothing reached the client.
//! - At most `attempts_max` servers per request, at most [`ATTEMPTS_CAP`], and at most the
//!   number of servers.

/// Most servers one request tries: beyond three, an outage is not going to be routed around by
/// trying harder, and every try adds a timeout's worth of latency.
pub const ATTEMPTS_CAP: u32 = 3;

/// Why an attempt to an origin failed, as the worker observed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UpstreamErrorClass {
    /// The connection was refused or failed (ECONNREFUSED, EHOSTUNREACH, ...).
    ConnectFailed,
    /// `connect_timeout` passed before the connection was established.
    ConnectTimeout,
    /// The origin reset the connection (or a write failed) before any response byte arrived.
    ResetBeforeResponse,
    /// The origin closed the connection cleanly before any response byte arrived.
    ClosedBeforeResponse,
    /// `response_timeout` passed before the response head arrived (or, after it, the route's
    /// read timeout: the response is cut then, never retried).
    ResponseTimeout,
    /// The response could not be parsed (the client codec rejected it).
    InvalidResponse,
}

impl UpstreamErrorClass {
    /// The status the client gets when this error ends the request (issue 6: a connect timeout
    /// is 502, a response timeout 504; nginx answers 504 to both timeouts, but a connect timeout
    /// means the origin is unreachable, which is what 502 says).
    pub fn status(self) -> u16 {
        match self {
            UpstreamErrorClass::ResponseTimeout => 504,
            _ => 502,
        }
    }

    /// What the failure says about the server's health. A reset or close on a reused
    /// connection is neutral: an idle-timeout race, not a sick server; if the server is sick,
    /// the retry on a fresh connection fails too and counts.
    pub fn outcome(self, connection_reused: bool) -> crate::Outcome {
        match self {
            UpstreamErrorClass::ResetBeforeResponse | UpstreamErrorClass::ClosedBeforeResponse
                if connection_reused =>
            {
                crate::Outcome::Neutral
            }
            _ => crate::Outcome::Failure,
        }
    }
}

/// The status the client gets when the group gives no server at all.
pub const NO_SERVER_STATUS: u16 = 502;

/// Everything the retry decision depends on, about one failed attempt. A struct rather than a
/// row of booleans, so a call site names each fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptFailure {
    pub error: UpstreamErrorClass,
    /// The method is idempotent (RFC 9110 §9.2.2: GET, HEAD, OPTIONS, TRACE, PUT, DELETE), or
    /// the request is otherwise known to be safe to repeat.
    pub method_idempotent: bool,
    /// Servers tried so far for this request, the failed one included (the length of the
    /// `exclude` list once the failed server is on it). A [`Retry::SameServer`] retry does not
    /// add to it.
    pub attempts: u32,
    /// Some byte of the request (head or body) was handed to the kernel on this connection.
    pub request_sent: bool,
    /// Some byte of the response was already sent to the client.
    pub response_started: bool,
    /// The connection came from the keep-alive pool rather than a fresh connect.
    pub connection_reused: bool,
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Give up: answer `error.status()`, or abort the client connection or stream if the
    /// response had started (never pass off a truncated response as complete).
    No,
    /// Pick again with the failed server added to `exclude`.
    OtherServer,
    /// Connect anew to the same server (not from the pool) and send the request again.
    SameServer,
}

/// When to retry, per group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Most servers per request, at least 1.
    pub attempts_max: u32,
    pub retry_response_timeout: bool,
}

impl RetryPolicy {
    /// The policy for a group of `servers` servers: `attempts_max` capped by [`ATTEMPTS_CAP`]
    /// and by the number of servers (a second try on the only server is no failover).
    pub fn new(attempts_max: u32, servers: usize, retry_response_timeout: bool) -> RetryPolicy {
        let servers = u32::try_from(servers).unwrap_or(u32::MAX);
        RetryPolicy {
            attempts_max: attempts_max.min(ATTEMPTS_CAP).min(servers).max(1),
            retry_response_timeout,
        }
    }

    /// The decision for one failed attempt (the module doc gives the rules).
    pub fn decide(&self, f: &AttemptFailure) -> Retry {
        use UpstreamErrorClass as E;
        if f.response_started {
            return Retry::No;
        }
        let repeatable = f.method_idempotent || !f.request_sent;
        let stale = f.connection_reused
            && matches!(f.error, E::ResetBeforeResponse | E::ClosedBeforeResponse);
        if stale && repeatable {
            return Retry::SameServer;
        }
        if f.attempts >= self.attempts_max {
            return Retry::No;
        }
        let retry = match f.error {
            E::ConnectFailed | E::ConnectTimeout => true,
            E::ResetBeforeResponse | E::ClosedBeforeResponse | E::InvalidResponse => repeatable,
            E::ResponseTimeout => {
                (self.retry_response_timeout && f.method_idempotent) || !f.request_sent
            }
        };
        if retry { Retry::OtherServer } else { Retry::No }
    }

    /// `decide` as a yes or no.
    pub fn should_retry(&self, f: &AttemptFailure) -> bool {
        self.decide(f) != Retry::No
    }
}
