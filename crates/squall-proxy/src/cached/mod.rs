//! The cached exchange: one proxied request on a cached route, the [`Exchange`] joined to the
//! cache's fill and invalidation, as one sans-IO state machine with one action stream.
//!
//! Why: the exchange says what happens with the origin and the client; the fill
//! (`squall_cache::Fill`) says what the cache makes of the response; what one leads to in the
//! other (a foreign 304 sends the request again without conditionals, an origin failure is
//! answered with a stale entry, a background revalidation that will store nothing lets its
//! origin go, a known fate publishes the in-flight ticket, a success of a method that is not
//! safe purges the URL) is decided here, with `now` and `wall` passed in, so that the pair
//! harness tests it byte by byte. The driver runs the [`CachedAction`]s and knows no rule.
//!
//! Events go to the exchange unchanged (the type dereferences to it): the cache's decisions
//! follow from the actions those events cause ([`Action::Fill`] hooks, a
//! [`ToClient::Error`]), which [`CachedExchange::poll_action`] takes before they reach the
//! driver. Only the client's going away is the cached exchange's own event
//! ([`CachedExchange::on_client_gone`]).
//!
//! The shared store is reached through the `Arc<Store>` the fill and the invalidation hold,
//! as the fill always did: storing is part of a fill's end, and the purge must read the
//! final status. The in-flight table is not: publishing a ticket wakes requests parked on
//! any worker, which is I/O, so it is an action ([`CachedAction::Publish`]).

mod begin;

pub use begin::{
    Answer, Begun, CacheFields, CachedRoute, Count, Fetch, FillPlan, after_wait, begin,
};

use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use http::{HeaderMap, StatusCode};
use squall_cache::{
    Entry, HeadAction, Invalidation, OriginHead, Outcome, Served, Store, Ticket, passes_after,
};
use squall_h1::RequestHead;

use crate::{Action, Exchange, FillHook, ToClient};

/// What the driver does, in order: the exchange's own actions, and the cache's outcomes.
#[derive(Debug)]
pub enum CachedAction {
    /// An exchange action, run as for any exchange. A fill hook comes through only on a
    /// route without a fill (nothing to do); nothing for the client comes once it left.
    Run(Action),
    /// Answer the client from `entry` (labelled `served`) as `request`, the client's own
    /// head, asks: its conditionals decide a 304, its range a 206. The exchange reads the
    /// origin's response to its end and drops it. `origin_failed`: served in place of a
    /// failed fetch (stale-if-error on no response or a cut), counted as stale.
    Serve {
        entry: Arc<Entry>,
        served: Served,
        request: Box<RequestHead>,
        origin_failed: bool,
    },
    /// The fill's fate is known: finish the leader's ticket on the in-flight table (marking
    /// the key hit-for-pass for `pass_for`, if any) and wake the waiters it returns.
    Publish {
        ticket: Ticket,
        pass_for: Option<Duration>,
    },
    /// A complete response was stored.
    Stored,
    /// The exchange ended and the success of a method that is not safe removed this many
    /// stored variants of its URL (RFC 9111 §4.4; 0 when the status did not invalidate).
    Invalidated(usize),
}

/// One proxied request and what the cache does with it (see the module docs).
#[derive(Debug)]
pub struct CachedExchange {
    ex: Exchange,
    plan: Option<FillPlan>,
    invalidation: Option<(Arc<Store>, Invalidation)>,
    out: VecDeque<CachedAction>,
    /// The client went away: nothing more reaches it.
    client_gone: bool,
    /// The client was answered from the cache (a revalidated or stale entry), or the fetch
    /// answers nobody: the origin's response is read to its end and dropped.
    answered: bool,
    /// A forward to a cluster key's owner: an error the request can still be served past
    /// here (its body read whole) goes to the driver as it is, which serves it locally.
    owner_fallback: bool,
    /// The exchange ended and its end was settled (last ticket, invalidation).
    settled: bool,
}

impl CachedExchange {
    /// `ex`, watched by the fill of `plan` (on a cached route), settling `invalidation` (a
    /// method that is not safe) at its end. A background plan's exchange answers nobody
    /// from the start.
    pub fn new(
        mut ex: Exchange,
        plan: Option<FillPlan>,
        invalidation: Option<(Arc<Store>, Invalidation)>,
    ) -> CachedExchange {
        let background = plan.as_ref().is_some_and(|p| p.background);
        if background {
            ex.on_answered_elsewhere();
        }
        CachedExchange {
            ex,
            plan,
            invalidation,
            out: VecDeque::new(),
            client_gone: false,
            answered: background,
            owner_fallback: false,
            settled: false,
        }
    }

    /// This exchange forwards to a cluster key's owner (see `owner_fallback`).
    pub fn with_owner_fallback(mut self) -> CachedExchange {
        self.owner_fallback = true;
        self
    }

    /// The next thing to do, in order; `None` until the next event. Once the exchange has
    /// ended, its end is settled here, once (the ticket, the invalidation).
    pub fn poll_action(&mut self, now: Instant, wall: SystemTime) -> Option<CachedAction> {
        loop {
            if let Some(action) = self.out.pop_front() {
                return Some(action);
            }
            match self.ex.poll_action() {
                Some(action) => self.take(action, now, wall),
                None if self.ex.is_finished() && !self.settled => self.settle(),
                None => return None,
            }
        }
    }

    /// The client (or its stream) went away: the origin is let go, nothing more reaches the
    /// client, and a fill whose fate is open drops its ticket with the exchange (the
    /// followers are woken from the in-flight table's abandoned queue).
    pub fn on_client_gone(&mut self, now: Instant) {
        self.client_gone = true;
        self.ex.on_client_gone(now);
    }

    /// Nothing reaches the client: it went away, or the fetch answers nobody.
    pub fn detached(&self) -> bool {
        self.client_gone || self.plan.as_ref().is_some_and(|p| p.background)
    }

    /// The client was answered from the cache, or nobody was to be answered.
    pub fn answered(&self) -> bool {
        self.answered
    }

    /// Whether a fill watches the response (a miss, in the access log).
    pub fn filling(&self) -> bool {
        self.plan.is_some()
    }

    /// The client's own request fields, when a fill watches (the request to the origin may
    /// carry the stale entry's validators instead of its conditionals).
    pub fn client_fields(&self) -> Option<&HeaderMap> {
        self.plan.as_ref().map(|p| p.fill.client_headers())
    }

    /// The fill's outcome so far, if a fill watches.
    pub fn outcome(&self) -> Option<Outcome> {
        self.plan.as_ref().and_then(|p| p.fill.outcome())
    }

    /// Panics if the exchange, the fill or their join disagree; tests call it after every
    /// step.
    pub fn check_invariants(&self) {
        self.ex.check_invariants();
        if let Some(plan) = &self.plan {
            plan.fill.check_invariants();
            if self.settled {
                assert!(
                    !plan.fill.leads() || plan.fill.outcome().is_none(),
                    "a fill whose fate is known has published its ticket"
                );
            }
        }
        assert!(self.plan.is_some() || !self.answered, "only a fill answers");
        assert!(!self.settled || self.ex.is_finished(), "settled at the end");
        assert!(!self.settled || self.invalidation.is_none());
    }

    /// One action of the exchange's: the cache's, or the driver's.
    fn take(&mut self, action: Action, now: Instant, wall: SystemTime) {
        match action {
            Action::Fill(hook) if self.plan.is_some() => self.on_hook(hook, now, wall),
            Action::Client(_) | Action::ClientBodyConsumed(_) if self.detached() => {}
            Action::Client(ToClient::Error {
                status,
                request_unfinished,
            }) => self.on_error(status, request_unfinished, wall),
            action => self.out.push_back(CachedAction::Run(action)),
        }
    }

    /// The exchange gave up before the response started: stale-if-error may answer with the
    /// stored entry, else the client gets the error status.
    fn on_error(&mut self, status: StatusCode, request_unfinished: bool, wall: SystemTime) {
        let owner_serves = self.owner_fallback && !request_unfinished;
        let stale = (self.plan.as_mut())
            .filter(|_| !owner_serves)
            .and_then(|plan| plan.fill.on_failed(wall));
        match stale {
            Some(entry) => {
                self.answered = true;
                self.serve(entry, Served::Stale, true);
            }
            None => self
                .out
                .push_back(CachedAction::Run(Action::Client(ToClient::Error {
                    status,
                    request_unfinished,
                }))),
        }
        self.release();
    }

    /// What the fill observes of the response.
    fn on_hook(&mut self, hook: FillHook, now: Instant, wall: SystemTime) {
        let Some(plan) = self.plan.as_mut() else {
            return;
        };
        match hook {
            FillHook::Head {
                status,
                headers,
                client_headers,
                body_len,
            } => {
                // What the client gets (compressed, on a compressed response) is what is
                // stored: a hit is never compressed again.
                let head = OriginHead {
                    status,
                    origin_headers: &headers,
                    client_headers: &client_headers,
                    content_length: body_len,
                };
                let action = plan.fill.on_head(head, wall);
                self.on_head_action(action, now);
            }
            FillHook::Data(data) => plan.fill.on_body(&data),
            FillHook::End { .. } => {
                if plan.fill.on_end() == Some(Outcome::Stored) {
                    self.out.push_back(CachedAction::Stored);
                }
            }
        }
        self.release();
        // A background fill that will store nothing has no reason to read on (a large
        // object's body, say): its origin connection is let go.
        let stores_nothing = matches!(
            self.outcome(),
            Some(Outcome::NotStorable(_) | Outcome::TooLarge)
        );
        if self.detached() && stores_nothing {
            self.ex.on_client_gone(now);
        }
    }

    fn on_head_action(&mut self, action: HeadAction, now: Instant) {
        match action {
            HeadAction::Forward => {}
            HeadAction::Answer(entry, served) => {
                self.ex.on_answered_elsewhere();
                self.answered = true;
                if !self.detached() {
                    self.serve(entry, served, false);
                }
            }
            // A 304 for another validator than the entry's must not reach a client that did
            // not ask for it (RFC 9111 §4.3.4): ask again, unconditionally, with the client's
            // own fields.
            HeadAction::Refetch => {
                if let Some(fields) = self.client_fields().cloned() {
                    self.ex.refetch(fields, now);
                }
            }
        }
    }

    fn serve(&mut self, entry: Arc<Entry>, served: Served, origin_failed: bool) {
        let mut request = self.ex.head().clone();
        if let Some(fields) = self.client_fields() {
            request.headers = squall_h1::Fields::from_header_map(fields);
        }
        self.out.push_back(CachedAction::Serve {
            entry,
            served,
            request: Box::new(request),
            origin_failed,
        });
    }

    /// Publishes the leader's ticket once the fill's fate is known; a response that could
    /// never be stored marks its key hit-for-pass.
    fn release(&mut self) {
        let Some(plan) = self.plan.as_mut() else {
            return;
        };
        if let Some(ticket) = plan.fill.release() {
            let hold = plan.hit_for_pass;
            let passes = !hold.is_zero() && passes_after(plan.fill.outcome());
            let pass_for = passes.then_some(hold);
            self.out
                .push_back(CachedAction::Publish { ticket, pass_for });
        }
    }

    /// The exchange ended: the ticket of a fill whose fate is known goes out (one whose
    /// fate is open, a response cut, is dropped with this exchange: abandoned), and the
    /// invalidation reads the final status.
    fn settle(&mut self) {
        debug_assert!(self.ex.is_finished() && !self.settled);
        self.settled = true;
        self.release();
        if let Some((store, invalidation)) = self.invalidation.take() {
            let removed = invalidation.on_response(self.ex.status(), &store);
            self.out.push_back(CachedAction::Invalidated(removed));
        }
    }
}

impl Deref for CachedExchange {
    type Target = Exchange;

    fn deref(&self) -> &Exchange {
        &self.ex
    }
}

impl DerefMut for CachedExchange {
    fn deref_mut(&mut self) -> &mut Exchange {
        &mut self.ex
    }
}
