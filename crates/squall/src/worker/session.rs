//! Sessions: the worker's side of a proxied request. A session owns one
//! [`squall_proxy::CachedExchange`] (the decisions: the exchange and, on a cached route, the
//! cache fill that watches it and the invalidation it implies); the worker feeds the exchange
//! events (origin connected, bytes, EOF, failure, sent; client body, end, room, gone; the
//! timer) and runs the actions it queues, the cache's outcomes among them.
//!
//! The `Sessions` part owns the sessions and runs their actions. Each call is lent a
//! [`SessionIo`]: the ring and clock, the downstream (through which every answer leaves and a
//! client is resumed), and the two parts a session asks things of, the origins (a pick, a
//! connection, bytes to send) and admission (a descriptor). Nothing calls into `Sessions` but
//! the loop, and the one action a session cannot run itself (an error a cluster peer may take
//! over, which parks the request on the cache) is handed back as a [`Need`], so the loop's
//! `drive` is: step, and meet what the step needs, until the session has nothing queued.
//! Never re-entrant: nothing an action does calls back into a session, and a client that may
//! go on (its next pipelined request, its stream's output) is queued on the ready list.

mod actions;
mod connect;
mod drive;
mod grpc;
mod tunnel;

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Method;
use slab::Slab;
use squall_cache::{Entry, Invalidation, Served, Ticket};
use squall_h1::{RequestHead, ResponseLimits};
use squall_proxy::cached::FillPlan;
use squall_proxy::{CachedExchange, ClientInfo, Exchange, ExchangeConfig, ProxyRoute};
use squall_upstream::RetryPolicy;

use super::downstream::{self, Downstream, Reply};
use super::ids::Client;
use super::ids::SessionId;
use super::ids::Waiter;
use super::listen::Admission;
use super::origin::{News, Origins};
use super::token;
use super::{Io, OUT_HIGH_BYTES};
use crate::cache::Cache;

/// Timeouts for a route whose group does not exist (an upstream that failed to build answers
/// 502 at the first pick, so these are never waited for).
const FALLBACK_TIMEOUT: Duration = Duration::from_secs(10);

/// The cache side of a session's fetch: its fill's plan, and the cache whose store and
/// in-flight table it fills (a reload may have replaced the worker's since).
pub struct CacheFill {
    pub cache: Arc<Cache>,
    pub plan: FillPlan,
    /// The method the client sent, when the fill forwards another: a PURGE refetched as a GET
    /// is logged as the PURGE it was.
    pub logged_method: Option<Method>,
}

impl CacheFill {
    /// The request `fetch` sends to the origin, and the fill its response goes into.
    pub fn of(
        fetch: Box<squall_proxy::cached::Fetch>,
        cache: Arc<Cache>,
        logged_method: Option<Method>,
    ) -> (RequestHead, Box<CacheFill>) {
        let squall_proxy::cached::Fetch { head, plan } = *fetch;
        let fill = CacheFill {
            cache,
            plan,
            logged_method,
        };
        (head, Box::new(fill))
    }
}

/// One proxied request.
pub struct Session {
    generation: u32,
    pub ex: CachedExchange,
    pub client: Client,
    /// The origin connection the exchange holds (between `Connect` and `ReleaseOrigin`).
    pub origin: Option<usize>,
    /// Due time of the session's own timer entry (exchanges on HTTP/2 origins), if filed.
    pub timer_due: Option<Instant>,
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
    /// The batch of actions being run asks the client to go on afterwards: it has output to
    /// send, or may go on to its next request.
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

/// What the loop lends the sessions for one call (see the module docs).
pub(super) struct SessionIo<'a> {
    pub io: Io<'a>,
    pub down: Downstream<'a>,
    pub origins: &'a mut Origins,
    pub admission: &'a mut Admission,
    /// Every worker's control channel, to wake requests parked on a fill's ticket.
    pub peers: &'a [crate::cache::Peer],
}

/// What the loop tells a session from outside the session's own actions, besides its origin's
/// news (`Sessions::hear`) and its client's request body (`Sessions::feed_batched`).
pub(super) enum Told {
    /// Its client went away (closed, or reset its stream): the exchange lets its origin go and
    /// ends without writing anything.
    ClientGone,
    /// Its client has room again (a send completed, HTTP/2 output moved on): a paused origin
    /// may be read again.
    ClientDrained,
    /// The exchange's deadline has come.
    Timer,
    /// Bytes from its tunnel's client; `eof`: the client closed its side after them.
    TunnelData { data: bytes::Bytes, eof: bool },
}

/// An action a session cannot run itself, handed back to the loop by `Sessions::step`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Need {
    /// The exchange gave up before the response started (and the cache had no stale entry to
    /// answer with): a forward to a cluster peer may be served here instead, else the client
    /// gets the error status (`Sessions::answer_error`).
    Error {
        status: http::StatusCode,
        request_unfinished: bool,
    },
}

/// The proxied requests in progress, and what runs their actions.
#[derive(Default)]
pub(super) struct Sessions {
    slab: Slab<Session>,
    generation: u32,
    /// Debug builds: the sessions whose actions are running, innermost last (the re-entrancy
    /// check).
    #[cfg(debug_assertions)]
    driving: Vec<SessionId>,
    /// When a gRPC call for an HTTP/1.1 upstream was last logged (`session/grpc.rs`).
    grpc_logged_at: Option<Instant>,
}

/// What starts a session: the request, its route, and what the cache adds.
pub(super) struct Start {
    pub client: Client,
    pub head: RequestHead,
    pub route: Arc<ProxyRoute>,
    pub info: ClientInfo,
    pub invalidate: Option<(Arc<Cache>, Invalidation)>,
    pub fill: Option<Box<CacheFill>>,
}

/// A session's undecoded origin bytes go from `before` to `now`: charged to the process, and
/// counted in its client connection's holding.
fn charge(down: &mut Downstream<'_>, client: Client, before: usize, now: usize) {
    down.buffered.charge(before, now, false);
    if let Some(conn) = down.conns.get_mut(client.conn()) {
        conn.session_bytes = (conn.session_bytes + now).saturating_sub(before);
    }
}

impl Sessions {
    pub(super) fn get(&self, id: SessionId) -> Option<&Session> {
        self.slab.get(id.index).filter(|s| s.is(id))
    }

    pub(super) fn get_mut(&mut self, id: SessionId) -> Option<&mut Session> {
        self.slab.get_mut(id.index).filter(|s| s.is(id))
    }

    /// Debug builds: session `id`'s actions start running (`Worker::drive`).
    fn enter(&mut self, id: SessionId) {
        #[cfg(debug_assertions)]
        {
            assert_not_driving(&self.driving, id);
            self.driving.push(id);
        }
        #[cfg(not(debug_assertions))]
        let _ = id;
    }

    /// Debug builds: session `id`'s actions stopped running.
    fn leave(&mut self, id: SessionId) {
        #[cfg(debug_assertions)]
        debug_assert_eq!(self.driving.pop(), Some(id));
        #[cfg(not(debug_assertions))]
        let _ = id;
    }

    /// Makes the session for `start`, tells it its client's room, and returns it unless it
    /// must wait for room first (the loop then drives it).
    fn start(&mut self, cx: &mut SessionIo<'_>, start: Start) -> Option<SessionId> {
        let (client, route, head) = (start.client, &start.route, &start.head);
        if route.body_bytes_max.is_some() || grpc::is_grpc(head) {
            // The exchange bounds the body: the route's limit, or a gRPC status past it.
            downstream::lift_body_limit(&mut cx.down.conns[client.conn()], client);
        }
        let id = self.open(cx, start);
        downstream::set_session(&mut cx.down.conns[client.conn()], client, Some(id));
        cx.down.account(client.conn());
        // The first room is the client's share now, not a whole output bound: a thousand
        // requests starting at once must not each be promised one.
        if self.give_room(cx, id, client) == 0 {
            // New origin reads are not started for a client that holds its bound already.
            if let Some(session) = self.get_mut(id) {
                session.waiting = true;
            }
            return None;
        }
        Some(id)
    }

    /// Makes the session (its exchange's first actions still queued).
    fn open(&mut self, cx: &mut SessionIo<'_>, start: Start) -> SessionId {
        let Start {
            client,
            head,
            route,
            info,
            invalidate,
            fill,
        } = start;
        let (runtime, now) = (cx.io.runtime, cx.io.now);
        // A request that carries the hop field goes to its key's owner (`route_to_owner`).
        if runtime.cluster.is_some() && head.headers.contains_key(crate::cluster::HOP) {
            runtime.metrics.worker(cx.io.worker).cluster_forwarded.inc();
        }
        let upstream = route.upstream;
        let group = cx.origins.upstreams.group(upstream);
        // The route's timers over its group's; the read timeout is the head's by default.
        let response_timeout = (route.timeouts.response)
            .unwrap_or_else(|| group.map_or(FALLBACK_TIMEOUT, |g| g.response_timeout));
        let config = ExchangeConfig {
            retry: group.map_or(RetryPolicy::new(1, 1, false), |g| g.retry),
            connect_timeout: group.map_or(FALLBACK_TIMEOUT, |g| g.connect_timeout),
            response_timeout,
            read_timeout: route.timeouts.read.unwrap_or(response_timeout),
            body_bytes_max: (route.body_bytes_max).unwrap_or(runtime.h1_limits.body_bytes_max),
            high_water_bytes: OUT_HIGH_BYTES,
            response_limits: ResponseLimits::default(),
        };
        let x_cache = fill.as_ref().is_some_and(|f| f.cache.x_cache);
        let owner_fallback =
            (runtime.cluster.as_ref()).is_some_and(|cluster| cluster.is_peer_upstream(upstream));
        // The balancing key's client is the request's (`real_ip`); `info.peer` stays the
        // connection's, the hop X-Forwarded-For appends.
        let client_addr = runtime.client_addr(info.peer, &head);
        self.generation = token::next_generation(self.generation);
        let generation = self.generation;
        let ex = Exchange::new(head, route, info, config, now);
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
        let index = self.slab.insert(Session {
            generation,
            ex,
            client,
            origin: None,
            timer_due: None,
            upstream,
            upstream_generation: cx.origins.upstreams.generation(),
            tunnel: None,
            peer: client_addr,
            reply: Reply::new(x_cache),
            cache,
            logged_method,
            charged: 0,
            budget_paused: false,
            waiting: false,
            descriptor: false,
            kick: false,
        });
        SessionId { index, generation }
    }

    /// Feeds session `id`'s exchange one event and leaves what it queued for the caller's next
    /// `drive` (the pieces of an HTTP/1.1 request's body, decoded in one batch): what `event`
    /// returns, or `None` when the session is gone. In debug builds, the event may not arrive
    /// while the session's own actions run, and the exchange's invariants are checked after it.
    pub(super) fn feed_batched<R>(
        &mut self,
        id: SessionId,
        event: impl FnOnce(&mut Exchange) -> R,
    ) -> Option<R> {
        #[cfg(debug_assertions)]
        assert_not_driving(&self.driving, id);
        let session = self.get_mut(id)?;
        let out = event(&mut session.ex);
        #[cfg(debug_assertions)]
        session.ex.check_invariants();
        Some(out)
    }

    /// News from origin connection `origin` for session `id` (see `Worker::deliver`), heard
    /// only while the session holds that connection: anything else is news of a connection it
    /// let go of. True when it was heard (the loop then drives the session).
    pub(super) fn hear(
        &mut self,
        cx: &mut SessionIo<'_>,
        id: SessionId,
        origin: usize,
        news: News,
    ) -> bool {
        #[cfg(debug_assertions)]
        assert_not_driving(&self.driving, id);
        let now = cx.io.now;
        let session =
            (self.slab.get_mut(id.index)).filter(|s| s.is(id) && s.origin == Some(origin));
        let Some(session) = session else {
            if let News::Received(buf) = news {
                cx.io.ring.recycle(buf);
            }
            return false;
        };
        match news {
            News::Received(buf) => {
                session.ex.on_origin_data(cx.io.ring.recv_bytes(&buf), now);
                cx.io.ring.recycle(buf);
            }
            News::Requeue { upstream, server } => {
                session.origin = None;
                self.connect_h2(cx, id, upstream, server, false);
            }
            News::Sent(n) => {
                session.ex.on_origin_sent(n, now);
                // A client paused on a full upload reads on.
                self.upload_drained(cx, id);
            }
            news => news.apply(&mut session.ex, now),
        }
        #[cfg(debug_assertions)]
        if let Some(session) = self.get_mut(id) {
            session.ex.check_invariants();
        }
        true
    }

    /// Request bytes reached the origin: the exchange may take more body, so a client paused
    /// on a full upload reads on.
    fn upload_drained(&mut self, cx: &mut SessionIo<'_>, id: SessionId) {
        let Some(client) = self.get(id).and_then(Session::listener) else {
            return;
        };
        if let Some(conn) = cx.down.conns.get_mut(client.conn())
            && conn.blocked
        {
            // Paused for its origin, not idle: its idle time starts again from here.
            conn.blocked = false;
            conn.last_activity = cx.io.now;
            cx.down.schedule(client.conn());
        }
    }

    /// The exchange gave up before the response started, and no cluster peer took the error
    /// over: the client gets the error status.
    fn answer_error(
        &mut self,
        cx: &mut SessionIo<'_>,
        id: SessionId,
        status: http::StatusCode,
        request_unfinished: bool,
    ) {
        let grpc = self.grpc_error_message(cx, id, status);
        let Some(session) = self.get_mut(id) else {
            return;
        };
        let down = &mut cx.down;
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
        cx: &mut SessionIo<'_>,
        id: SessionId,
        entry: &Entry,
        served: Served,
        request: &RequestHead,
        origin_failed: bool,
    ) {
        let Some(session) = self.get_mut(id) else {
            return;
        };
        if origin_failed {
            cx.down.counters.cache_stale.inc();
        }
        let x_cache = session.cache.as_ref().is_some_and(|c| c.x_cache);
        let route = session.ex.route().id;
        (cx.down).serve_entry(session.client, request, entry, served, x_cache, route);
    }

    /// Finishes a fill's ticket once its fate is known and wakes the requests it led; a
    /// response that could never be stored marks its URL for hit-for-pass (`pass_for`).
    fn publish(
        &mut self,
        cx: &mut SessionIo<'_>,
        id: SessionId,
        ticket: Ticket,
        pass_for: Option<Duration>,
    ) {
        let Some(cache) = self.get(id).and_then(|s| s.cache.clone()) else {
            debug_assert!(false, "a ticket without its cache");
            return;
        };
        let waiters = match pass_for {
            Some(hold) => cache.inflight.finish_passing(ticket, cx.down.wall, hold),
            None => cache.inflight.finish(ticket),
        };
        crate::cache::wake(cx.peers, waiters);
    }

    /// Removes a finished session: detaches it from its client and origin, and drops its
    /// exchange (a fill whose fate is still open, the response cut, drops its ticket with it:
    /// its followers are woken from the abandoned queue this turn).
    fn end(&mut self, cx: &mut SessionIo<'_>, id: SessionId) {
        let session = self.slab.remove(id.index);
        charge(&mut cx.down, session.client, session.charged, 0);
        let holder = Waiter::Session(id);
        (cx.admission).end_descriptor(cx.io.runtime, holder, session.descriptor);
        debug_assert!(
            session.origin.is_none(),
            "a finished exchange holds no origin"
        );
        if let Some(index) = session.origin
            && !cx.origins.conns.is_shared(index)
        {
            cx.origins.let_go(&mut cx.io, id, index, false);
        }
        if let Some(conn) = cx.down.conns.get_mut(session.client.conn())
            && !session.ex.detached()
        {
            downstream::set_session(conn, session.client, None);
            cx.down.account(session.client.conn());
        }
        let counters = cx.io.runtime.metrics.worker(cx.io.worker);
        if let Some(stats) = session.ex.compression() {
            counters.count_compression(stats);
        }
        if session.ex.answered() {
            let started = session.ex.started();
            (counters.upstream_duration).observe(cx.io.now.saturating_duration_since(started));
        }
        tunnel::count_end(&cx.io, &session.ex, session.client, session.tunnel);
    }

    /// Tells session `id` what the loop learned for it (see [`Told`]). True when the session
    /// is to be driven now. In debug builds, the news may not arrive while the session's own
    /// actions run, and the exchange's invariants are checked after it.
    pub(super) fn tell(&mut self, cx: &mut SessionIo<'_>, id: SessionId, told: Told) -> bool {
        let now = cx.io.now;
        match told {
            Told::ClientGone => self.abort(cx, id),
            Told::ClientDrained => self.client_drained(cx, id),
            Told::Timer => self.feed_batched(id, |ex| ex.on_timer(now)).is_some(),
            Told::TunnelData { data, eof } => self
                .feed_batched(id, |ex| {
                    ex.on_tunnel_client_data(&data, now);
                    if eof {
                        ex.on_tunnel_client_eof(now);
                    }
                })
                .is_some(),
        }
    }

    /// The client of session `id` went away: the abandoned request is logged and the exchange
    /// told. True when the session was there (the loop then drives it to its end).
    fn abort(&mut self, cx: &mut SessionIo<'_>, id: SessionId) -> bool {
        let now = cx.io.now;
        let Some(session) = self.get_mut(id) else {
            return false;
        };
        cx.down.log_abandoned(session);
        let client = session.client;
        session.ex.on_client_gone(now);
        if let Some(conn) = cx.down.conns.get_mut(client.conn()) {
            downstream::set_session(conn, client, None);
            cx.down.account(client.conn());
        }
        true
    }

    /// Session `id`'s client has room again; true when the session is to be driven (a
    /// waiting session only once the room is more than none).
    fn client_drained(&mut self, cx: &mut SessionIo<'_>, id: SessionId) -> bool {
        let Some(client) = self.get(id).and_then(Session::listener) else {
            return false;
        };
        let room = self.give_room(cx, id, client);
        if let Some(session) = self.get_mut(id)
            && session.waiting
        {
            if room == 0 {
                return false;
            }
            session.waiting = false;
        }
        true
    }

    /// Tells session `id`'s exchange how much room its client has now (see `budget.rs`),
    /// counting a pause the process's buffer budget causes; returns the room. Its actions are
    /// left queued.
    fn give_room(&mut self, cx: &mut SessionIo<'_>, id: SessionId, client: Client) -> usize {
        let room = cx.down.client_room(client);
        let now = cx.io.now;
        let Some(session) = self.get_mut(id) else {
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
            (cx.down.counters).buffer_budget_pauses.inc();
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
