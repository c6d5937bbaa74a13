//! Sessions: the worker's side of a proxied request. A session owns one
//! [`squall_proxy::CachedExchange`] (the decisions: the exchange and, on a cached route, the
//! cache fill that watches it and the invalidation it implies); the worker feeds the exchange
//! events (origin connected, bytes, EOF, failure, sent; client body, end, room, gone; the
//! timer) and runs the actions it queues, the cache's outcomes among them.
//!
//! The driver keeps only I/O: picking from the worker's balancer and pool, the origin
//! sockets (`origin.rs`), and the client through the downstream (`downstream.rs`). Actions are
//! run in a loop by [`Worker::drive`], never re-entrantly: nothing an action does calls back
//! into a session, and a client that may go on (its next pipelined request, its stream's
//! output) is queued on the ready list rather than processed from inside the loop.

mod connect;
mod grpc;

use std::sync::Arc;
use std::time::Duration;

use squall_cache::{Entry, Invalidation, Served, Ticket};
use squall_h1::{RequestHead, ResponseLimits};
use squall_proxy::{
    Action, CachedAction, CachedExchange, ClientInfo, ClientProtocol, Exchange, ExchangeConfig,
    ProxyRoute, ToClient,
};
use squall_upstream::RetryPolicy;

use super::cache::CacheFill;
use super::downstream::{self, Client, Reply};
use super::origin::{self, News};
use super::token;
use super::{OUT_HIGH_BYTES, Worker};
use crate::cache::Cache;

/// Timeouts for a route whose group does not exist (an upstream that failed to build answers
/// 502 at the first pick, so these are never waited for).
const FALLBACK_TIMEOUT: Duration = Duration::from_secs(10);

/// A session's slot and the occupant of that slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SessionId {
    pub index: usize,
    pub generation: u32,
}

/// One proxied request.
pub struct Session {
    generation: u32,
    pub ex: CachedExchange,
    pub client: Client,
    /// The origin connection the exchange holds (between `Connect` and `ReleaseOrigin`).
    pub origin: Option<usize>,
    /// Due time of the session's own timer entry (exchanges on HTTP/2 origins), if filed.
    pub timer_due: Option<std::time::Instant>,
    /// The route's group, and the worker's upstream generation it was chosen under.
    upstream: usize,
    upstream_generation: u64,
    /// Once the exchange is a tunnel: its upstream's counters, where the tunnel's end counts.
    pub tunnel: Option<Arc<crate::upstream_events::UpstreamEvents>>,
    peer: Option<std::net::SocketAddr>,
    pub reply: Reply,
    /// On a cached route with a fill: the cache whose in-flight table the fill's ticket is
    /// published to.
    cache: Option<Arc<Cache>>,
    /// The method the client sent, when the fill forwards another (a PURGE refetched as a
    /// GET is logged as the PURGE it was).
    pub logged_method: Option<http::Method>,
    /// The origin bytes held undecoded (`Exchange::buffered_bytes`) as last charged to the
    /// process's count of buffered response bytes.
    charged: usize,
    /// The last room computed for the client was withheld by the process's buffer budget
    /// (counted once per pause in `squall_buffer_budget_pauses_total`).
    budget_paused: bool,
    /// Its client had no room when it began: the exchange has not started (no origin read)
    /// and waits for `client_drained` to find room.
    waiting: bool,
    /// It holds a charge of the descriptor budget for its origin connection (`listen.rs`),
    /// from its first pick to its end.
    descriptor: bool,
}

/// What running a batch of actions asks of the client afterwards.
#[derive(Default)]
struct Effects {
    /// The client has output to send, or may go on to its next request.
    kick: bool,
}

impl Session {
    /// The session's group, while the worker's groups are those it was chosen among (a reload
    /// since may have renumbered them).
    pub fn upstream(&self, generation: u64) -> Option<usize> {
        (self.upstream_generation == generation).then_some(self.upstream)
    }

    /// Whether this session is the occupant `id` names.
    pub fn is(&self, id: SessionId) -> bool {
        self.generation == id.generation
    }

    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// The client the session writes to; `None` once detached (gone, or a background fill).
    pub fn listener(&self) -> Option<Client> {
        (!self.ex.detached()).then_some(self.client)
    }
}

impl Worker {
    /// Starts a session for `head` on `route`, answering `client`, and runs its first actions.
    pub(super) fn start_session(
        &mut self,
        client: Client,
        head: RequestHead,
        route: Arc<ProxyRoute>,
        invalidate: Option<(Arc<Cache>, Invalidation)>,
        fill: Option<Box<CacheFill>>,
    ) {
        let info = self.client_info(client, &head);
        if route.body_bytes_max.is_some() || grpc::is_grpc(&head) {
            // The exchange bounds the body: the route's limit, or a gRPC status past it.
            downstream::lift_body_limit(&mut self.conns[client.conn()], client);
        }
        let id = self.open_session(client, head, route, info, invalidate, fill);
        downstream::set_session(&mut self.conns[client.conn()], client, Some(id));
        self.downstream().account(client.conn());
        // The first room is the client's share now, not a whole output bound: a thousand
        // requests starting at once must not each be promised one.
        if self.give_room(id, client) == 0 {
            // New origin reads are not started for a client that holds its bound already.
            if let Some(session) = self.session_mut(id) {
                session.waiting = true;
            }
            return;
        }
        self.drive(id);
    }

    /// Starts a session that answers nobody: a cache fill in the background (the revalidation
    /// of an entry served stale meanwhile, RFC 5861 §3). Its exchange reads the origin's
    /// response to the end for the fill; `client` is only the request that started it (its
    /// address goes to the origin as the forwarded-for one). It ends with its exchange, or
    /// with the worker.
    pub(super) fn start_background_session(
        &mut self,
        client: Client,
        head: RequestHead,
        route: Arc<ProxyRoute>,
        fill: Box<CacheFill>,
    ) {
        let info = ClientInfo {
            protocol: ClientProtocol::Http11,
            ..self.client_info(client, &head)
        };
        debug_assert!(fill.plan.background(), "a fetch that answers nobody");
        let id = self.open_session(client, head, route, info, None, Some(fill));
        self.runtime
            .metrics
            .worker(self.id)
            .cache_background_fetches
            .inc();
        self.drive(id);
    }

    fn client_info(&self, client: Client, head: &RequestHead) -> ClientInfo {
        let conn = &self.conns[client.conn()];
        ClientInfo {
            peer: conn.peer,
            client: self.runtime.client_addr(conn.peer, head),
            request_id: crate::request_id::next(),
            tls: conn.tls.is_some(),
            protocol: client.protocol(head),
            keep_alive: self.drain_deadline.is_none(),
        }
    }

    /// Makes the session (its exchange's first actions still queued).
    fn open_session(
        &mut self,
        client: Client,
        head: RequestHead,
        route: Arc<ProxyRoute>,
        info: ClientInfo,
        invalidate: Option<(Arc<Cache>, Invalidation)>,
        fill: Option<Box<CacheFill>>,
    ) -> SessionId {
        // A request that carries the hop field goes to its key's owner (`route_to_owner`).
        if self.runtime.cluster.is_some() && head.headers.contains_key(crate::cluster::HOP) {
            self.runtime.metrics.worker(self.id).cluster_forwarded.inc();
        }
        let upstream = route.upstream;
        let group = self.origins.group(upstream);
        // The route's timers over its group's; the read timeout is the head's by default.
        let response_timeout = (route.timeouts.response)
            .unwrap_or_else(|| group.map_or(FALLBACK_TIMEOUT, |g| g.response_timeout));
        let config = ExchangeConfig {
            retry: group.map_or(RetryPolicy::new(1, 1, false), |g| g.retry),
            connect_timeout: group.map_or(FALLBACK_TIMEOUT, |g| g.connect_timeout),
            response_timeout,
            read_timeout: route.timeouts.read.unwrap_or(response_timeout),
            body_bytes_max: (route.body_bytes_max).unwrap_or(self.runtime.h1_limits.body_bytes_max),
            high_water_bytes: OUT_HIGH_BYTES,
            response_limits: ResponseLimits::default(),
        };
        let x_cache = fill.as_ref().is_some_and(|f| f.cache.x_cache);
        let owner_fallback = (self.runtime.cluster.as_ref())
            .is_some_and(|cluster| cluster.is_peer_upstream(upstream));
        // The balancing key's client is the request's (`real_ip`); `info.peer` stays the
        // connection's, the hop X-Forwarded-For appends.
        let client_addr = self.runtime.client_addr(info.peer, &head);
        self.next_generation = token::next_generation(self.next_generation);
        let generation = self.next_generation;
        let ex = Exchange::new(head, route, info, config, self.now);
        let (cache, plan, logged_method) = match fill {
            Some(fill) => (Some(fill.cache), Some(fill.plan), fill.logged_method),
            None => (None, None, None),
        };
        let invalidate =
            invalidate.map(|(cache, invalidation)| (cache.store.clone(), invalidation));
        let mut ex = CachedExchange::new(ex, plan, invalidate);
        if owner_fallback {
            ex = ex.with_owner_fallback();
        }
        let index = self.sessions.insert(Session {
            generation,
            ex,
            client,
            origin: None,
            timer_due: None,
            upstream,
            upstream_generation: self.origins.groups_generation(),
            tunnel: None,
            peer: client_addr,
            reply: Reply::new(x_cache),
            cache,
            logged_method,
            charged: 0,
            budget_paused: false,
            waiting: false,
            descriptor: false,
        });
        SessionId { index, generation }
    }

    pub(super) fn session_mut(&mut self, id: SessionId) -> Option<&mut Session> {
        self.sessions.get_mut(id.index).filter(|s| s.is(id))
    }

    /// Feeds the exchange of session `id` one event, then runs what it queued.
    pub(super) fn feed(&mut self, id: SessionId, event: impl FnOnce(&mut Exchange)) {
        if self.feed_batched(id, event).is_some() {
            self.drive(id);
        }
    }

    /// Feeds session `id`'s exchange one event, checked as [`Worker::feed`] checks it, and
    /// leaves what it queued for the caller's next `drive` (the pieces of an HTTP/1.1 request's
    /// body, decoded in one batch): what `event` returns, or `None` when the session is gone.
    pub(super) fn feed_batched<R>(
        &mut self,
        id: SessionId,
        event: impl FnOnce(&mut Exchange) -> R,
    ) -> Option<R> {
        #[cfg(debug_assertions)]
        assert_not_driving(&self.driving, id);
        let session = self.session_mut(id)?;
        let out = event(&mut session.ex);
        #[cfg(debug_assertions)]
        session.ex.check_invariants();
        Some(out)
    }

    /// News from origin connection `origin` for session `id` (see `Worker::deliver`), heard
    /// only while the session holds that connection: anything else is news of a connection it
    /// let go of.
    pub(super) fn hear(&mut self, id: SessionId, origin: usize, news: News) {
        #[cfg(debug_assertions)]
        assert_not_driving(&self.driving, id);
        let now = self.now;
        let session =
            (self.sessions.get_mut(id.index)).filter(|s| s.is(id) && s.origin == Some(origin));
        let Some(session) = session else {
            if let News::Received(buf) = news {
                self.ring.recycle(buf);
            }
            return;
        };
        match news {
            News::Received(buf) => {
                session.ex.on_origin_data(self.ring.recv_bytes(&buf), now);
                self.ring.recycle(buf);
            }
            News::Requeue { upstream, server } => {
                session.origin = None;
                self.connect_h2(id, upstream, server, false);
            }
            News::Sent(n) => {
                session.ex.on_origin_sent(n, now);
                // A client paused on a full upload reads on.
                self.upload_drained(id);
            }
            news => news.apply(&mut session.ex, now),
        }
        #[cfg(debug_assertions)]
        if let Some(session) = self.session_mut(id) {
            session.ex.check_invariants();
        }
        self.drive(id);
    }

    /// Request bytes reached the origin: the exchange may take more body, so a client paused
    /// on a full upload reads on.
    fn upload_drained(&mut self, id: SessionId) {
        let Some(client) = self.session_mut(id).and_then(|s| s.listener()) else {
            return;
        };
        if let Some(conn) = self.conns.get_mut(client.conn())
            && conn.blocked
        {
            // Paused for its origin, not idle: its idle time starts again from here.
            conn.blocked = false;
            conn.last_activity = self.now;
            self.downstream().schedule(client.conn());
        }
    }

    /// Runs the actions session `id` has queued, in order, until it has none; ends the session
    /// once its exchange is finished. The one place actions are run.
    pub(super) fn drive(&mut self, id: SessionId) {
        #[cfg(debug_assertions)]
        assert_not_driving(&self.driving, id);
        #[cfg(debug_assertions)]
        self.driving.push(id);
        self.run_actions(id);
        #[cfg(debug_assertions)]
        self.driving.pop();
    }

    fn run_actions(&mut self, id: SessionId) {
        let Some(session) = self.session_mut(id) else {
            return;
        };
        if session.waiting {
            // Not started: nothing of it runs but its end (the client went away).
            if session.ex.is_finished() {
                self.end_session(id);
            }
            return;
        }
        let mut effects = Effects::default();
        let (now, wall) = (self.now, self.wall);
        while let Some(action) = self
            .session_mut(id)
            .and_then(|s| s.ex.poll_action(now, wall))
        {
            self.run_cached(id, action, &mut effects);
            // An action's own result (a pick, a pooled connection) is an event too.
            #[cfg(debug_assertions)]
            if let Some(session) = self.session_mut(id) {
                session.ex.check_invariants();
            }
        }
        let Some(session) = self.session_mut(id) else {
            return;
        };
        let held = session.ex.buffered_bytes();
        let before = std::mem::replace(&mut session.charged, held);
        let (client, detached) = (session.client, session.ex.detached());
        self.charge_session(client, before, held);
        if self.session_mut(id).is_some_and(|s| s.ex.is_finished()) {
            self.end_session(id);
            effects.kick = true;
        } else {
            self.arm_session_timer(id);
        }
        if effects.kick && !detached {
            self.downstream().resume(client);
        }
    }

    /// Runs one action of session `id`'s: the exchange's, or what the cache decided.
    fn run_cached(&mut self, id: SessionId, action: CachedAction, effects: &mut Effects) {
        match action {
            CachedAction::Run(action) => self.run_action(id, action, effects),
            CachedAction::Serve {
                entry,
                served,
                request,
                origin_failed,
            } => {
                self.serve_from_cache(id, &entry, served, &request, origin_failed);
                effects.kick |= origin_failed;
            }
            CachedAction::Publish { ticket, pass_for } => self.publish(id, ticket, pass_for),
            CachedAction::Stored => {
                self.runtime.metrics.worker(self.id).cache_stores.inc();
            }
            CachedAction::Invalidated(_) => {}
        }
    }

    fn run_action(&mut self, id: SessionId, action: Action, effects: &mut Effects) {
        let now = self.now;
        match action {
            Action::Pick => self.pick(id),
            Action::Connect { server, pooled } => self.connect_session(id, server, pooled),
            Action::WriteOrigin(bytes) => {
                if let Some(index) = self.session_mut(id).and_then(|s| s.origin) {
                    self.with_origins(|o, io| o.write_origin(io, index, bytes));
                }
            }
            Action::SendOrigin(message) => {
                let Some(session) = self.session_mut(id) else {
                    return;
                };
                let head_request = session.ex.head().method == http::Method::HEAD;
                if let Some(index) = session.origin {
                    self.with_origins(|o, io| o.h2_send(io, id, index, message, head_request));
                }
            }
            Action::OriginBodyConsumed(n) => {
                if let Some(index) = self.session_mut(id).and_then(|s| s.origin) {
                    self.with_origins(|o, io| o.h2_consumed(io, id, index, n));
                }
            }
            Action::PauseOrigin => {
                if let Some(index) = self.session_mut(id).and_then(|s| s.origin) {
                    self.with_origins(|o, io| o.pause_origin(io, index));
                }
            }
            Action::ResumeOrigin => {
                if let Some(index) = self.session_mut(id).and_then(|s| s.origin) {
                    self.with_origins(|o, io| o.resume_origin(io, index));
                }
            }
            Action::ShutdownOrigin => {
                if let Some(index) = self.session_mut(id).and_then(|s| s.origin) {
                    self.shutdown_origin(index);
                }
            }
            Action::ReleaseOrigin { reusable } => {
                if let Some(index) = self.session_mut(id).and_then(|s| s.origin.take()) {
                    self.with_origins(|o, io| o.let_go(io, id, index, reusable));
                }
            }
            Action::Report {
                server, outcome, ..
            } => {
                let Some(session) = self.sessions.get(id.index) else {
                    return;
                };
                let (generation, upstream) = (session.upstream_generation, session.upstream);
                self.origins
                    .report(generation, upstream, server, outcome, now);
            }
            Action::ClientBodyConsumed(n) => {
                if let Some(session) = self.session_mut(id) {
                    let client = session.client;
                    self.downstream().body_consumed(client, n);
                    effects.kick = true;
                }
            }
            Action::Client(ToClient::Error {
                status,
                request_unfinished,
            }) => {
                self.session_error(id, status, request_unfinished);
                effects.kick = true;
            }
            Action::Client(ToClient::Abort) if self.grpc_cut(id).is_some() => {
                self.cut_grpc_call(id);
                effects.kick = true;
            }
            Action::Client(message) => {
                self.on_tunnel_head(id, &message);
                let (mut down, sessions) = self.split();
                let Some(session) = sessions.get_mut(id.index).filter(|s| s.is(id)) else {
                    return;
                };
                let data = matches!(message, ToClient::Data(_));
                let client = session.client;
                let written = down.write(session, message);
                effects.kick |= written.queued;
                if data {
                    // Charged at once, and the room re-read: the bounds hold within a turn,
                    // however many sessions write in it.
                    self.downstream().account(client.conn());
                    self.give_room(id, client);
                }
            }
            // A fill hook of a route with no fill: nothing watches.
            Action::Fill(_) => {}
        }
    }

    /// The exchange gave up before the response started (and the cache had no stale entry to
    /// answer with): the client gets the error status.
    fn session_error(&mut self, id: SessionId, status: http::StatusCode, request_unfinished: bool) {
        // A forward to a cluster peer that failed is served here instead (`cluster.rs`).
        if self.owner_failed(id, request_unfinished) {
            return;
        }
        let grpc = self.grpc_error_message(id, status);
        let (mut down, sessions) = self.split();
        let Some(session) = sessions.get_mut(id.index).filter(|s| s.is(id)) else {
            return;
        };
        let head = session.ex.head();
        // The log names the id the origin was sent, if it was reached.
        if let Some(conn) = down.conns.get_mut(session.client.conn()) {
            conn.log_note.request_id = Some(session.ex.request_id());
        }
        if let Some(message) = grpc {
            down.answer_grpc_error(session.client, head, status, &message);
        } else if request_unfinished {
            down.answer_error_and_close(session.client, head, status);
        } else {
            // The request was read whole: the connection may go on (as nginx keeps it), so an
            // origin outage does not turn into a storm of reconnects and TLS handshakes.
            down.answer_status(session.client, head, status);
        }
    }

    /// Answers session `id`'s client from `entry` as `request` (the client's own head) asks:
    /// a revalidated entry, or a stale one in place of an origin error.
    fn serve_from_cache(
        &mut self,
        id: SessionId,
        entry: &Entry,
        served: Served,
        request: &RequestHead,
        origin_failed: bool,
    ) {
        let (mut down, sessions) = self.split();
        let Some(session) = sessions.get_mut(id.index).filter(|s| s.is(id)) else {
            return;
        };
        if origin_failed {
            down.counters.cache_stale.inc();
        }
        let x_cache = session.cache.as_ref().is_some_and(|c| c.x_cache);
        let route = session.ex.route().id;
        down.serve_entry(session.client, request, entry, served, x_cache, route);
    }

    /// Finishes a fill's ticket once its fate is known and wakes the requests it led; a
    /// response that could never be stored marks its URL for hit-for-pass (`pass_for`).
    fn publish(&mut self, id: SessionId, ticket: Ticket, pass_for: Option<Duration>) {
        let Some(cache) = self.session_mut(id).and_then(|s| s.cache.clone()) else {
            debug_assert!(false, "a ticket without its cache");
            return;
        };
        let waiters = match pass_for {
            Some(hold) => cache.inflight.finish_passing(ticket, self.wall, hold),
            None => cache.inflight.finish(ticket),
        };
        crate::cache::wake(&self.peers, waiters);
    }

    /// Removes a finished session: detaches it from its client and origin, and drops its
    /// exchange (a fill whose fate is still open, the response cut, drops its ticket with it:
    /// its followers are woken from the abandoned queue this turn).
    fn end_session(&mut self, id: SessionId) {
        let session = self.sessions.remove(id.index);
        self.charge_session(session.client, session.charged, 0);
        let holder = super::listen::Waiter::Session(id);
        (self.admission).end_descriptor(&self.runtime, holder, session.descriptor);
        debug_assert!(
            session.origin.is_none(),
            "a finished exchange holds no origin"
        );
        if let Some(index) = session.origin
            && !self.origins.is_shared(index)
        {
            self.with_origins(|o, io| o.let_go(io, id, index, false));
        }
        if let Some(conn) = self.conns.get_mut(session.client.conn())
            && !session.ex.detached()
        {
            downstream::set_session(conn, session.client, None);
            self.downstream().account(session.client.conn());
        }
        if let Some(stats) = session.ex.compression() {
            (self.runtime.metrics.worker(self.id)).count_compression(stats);
        }
        if session.ex.answered() {
            let started = session.ex.started();
            (self.runtime.metrics.worker(self.id).upstream_duration)
                .observe(self.now.saturating_duration_since(started));
        }
        self.count_tunnel_end(&session.ex, session.client, session.tunnel);
    }

    /// The client (or its HTTP/2 stream) went away mid-exchange: the exchange lets its origin
    /// go (not reusable) and the session ends without writing anything.
    pub(super) fn abort_session(&mut self, id: SessionId) {
        let now = self.now;
        let (mut down, sessions) = self.split();
        if let Some(session) = sessions.get_mut(id.index).filter(|s| s.is(id)) {
            down.log_abandoned(session);
        }
        let Some(session) = self.session_mut(id) else {
            return;
        };
        let client = session.client;
        session.ex.on_client_gone(now);
        if let Some(conn) = self.conns.get_mut(client.conn()) {
            downstream::set_session(conn, client, None);
            self.downstream().account(client.conn());
        }
        self.drive(id);
    }

    /// The client has room again (a send completed, HTTP/2 output moved on): a paused origin
    /// may be read again.
    pub(super) fn client_drained(&mut self, id: SessionId) {
        let Some(client) = self.session_mut(id).and_then(|s| s.listener()) else {
            return;
        };
        let room = self.give_room(id, client);
        if let Some(session) = self.session_mut(id)
            && session.waiting
        {
            if room == 0 {
                return;
            }
            session.waiting = false;
        }
        self.drive(id);
    }

    /// A session's undecoded origin bytes go from `before` to `now`: charged to the process,
    /// and counted in its client connection's holding.
    fn charge_session(&mut self, client: Client, before: usize, now: usize) {
        self.runtime.metrics.buffered.charge(before, now, false);
        if let Some(conn) = self.conns.get_mut(client.conn()) {
            conn.session_bytes = (conn.session_bytes + now).saturating_sub(before);
        }
    }

    /// Tells session `id`'s exchange how much room its client has now (see `budget.rs`),
    /// counting a pause the process's buffer budget causes; returns the room. Its actions are
    /// left queued.
    fn give_room(&mut self, id: SessionId, client: Client) -> usize {
        let room = self.downstream().client_room(client);
        let now = self.now;
        let Some(session) = self.session_mut(id) else {
            return 0;
        };
        let newly_paused = room.budget_paused && !session.budget_paused;
        session.budget_paused = room.budget_paused;
        if room.drained {
            session.ex.on_client_room_drained(room.bytes, now);
        } else {
            session.ex.on_client_room(room.bytes, now);
        }
        if newly_paused {
            (self.runtime.metrics.worker(self.id))
                .buffer_budget_pauses
                .inc();
        }
        room.bytes
    }
}

/// Debug builds: an event for session `id` may not arrive while its own actions run (the loop
/// in [`Worker::drive`], whose sessions `driving` lists); what an action learns for a session
/// goes on after it.
#[cfg(debug_assertions)]
fn assert_not_driving(driving: &[SessionId], id: SessionId) {
    assert!(
        !driving.contains(&id),
        "session {id:?} re-entered while its actions run (driving {driving:?})"
    );
}
