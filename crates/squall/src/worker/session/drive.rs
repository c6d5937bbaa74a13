//! The loop's side of the sessions: what lends them a [`SessionIo`], starts a session, feeds
//! it, and drives its actions, meeting what a step needs of the loop.

use std::sync::Arc;

use squall_cache::Invalidation;
use squall_h1::RequestHead;
use squall_proxy::{ClientInfo, ClientProtocol, ProxyRoute};

use super::super::downstream::{Downstream, part_downstream};
use super::super::ids::Client;
use super::super::ids::SessionId;
use super::super::{Worker, part_io};
use super::{Need, SessionIo, Sessions, Start, Told};
use crate::cache::Cache;
use crate::worker::session::CacheFill;

impl Worker {
    /// Runs `f` on the sessions with what the loop lends them (see [`SessionIo`]).
    pub(in crate::worker) fn with_sessions<R>(
        &mut self,
        f: impl FnOnce(&mut Sessions, &mut SessionIo<'_>) -> R,
    ) -> R {
        let mut cx = SessionIo {
            io: part_io!(self),
            down: part_downstream!(self),
            origins: &mut self.origins,
            admission: &mut self.admission,
            peers: &self.peers,
        };
        f(&mut self.sessions, &mut cx)
    }

    /// Starts a session for `head` on `route`, answering `client`, and runs its first actions
    /// (unless its client holds its bound already: then it waits for room). A background
    /// cache fill (the revalidation of an entry served stale meanwhile, RFC 5861 §3) answers
    /// nobody: its exchange reads the origin's response to the end for the fill, and `client`
    /// is only the request that started it (its address goes to the origin as the
    /// forwarded-for one); it ends with its exchange, or with the worker.
    pub(in crate::worker) fn start_session(
        &mut self,
        client: Client,
        head: RequestHead,
        route: Arc<ProxyRoute>,
        invalidate: Option<(Arc<Cache>, Invalidation)>,
        fill: Option<Box<CacheFill>>,
    ) {
        let background = fill.as_ref().is_some_and(|fill| fill.plan.background());
        let started = self.with_sessions(|sessions, cx| {
            let mut info = client_info(&cx.down, cx.io.runtime, client, &head);
            if background {
                info.protocol = ClientProtocol::Http11;
            }
            let start = Start {
                client,
                head,
                route,
                info,
                invalidate,
                fill,
            };
            if !background {
                return sessions.start(cx, start);
            }
            let counters = cx.io.runtime.metrics.worker(cx.io.worker);
            counters.cache_background_fetches.inc();
            Some(sessions.open(cx, start))
        });
        if let Some(id) = started {
            self.drive(id);
        }
    }

    /// Tells session `id` what the loop learned for it (`Sessions::tell`), then runs what it
    /// queued.
    pub(in crate::worker) fn tell(&mut self, id: SessionId, told: Told) {
        if self.with_sessions(|sessions, cx| sessions.tell(cx, id, told)) {
            self.drive(id);
        }
    }

    /// Runs the actions session `id` has queued, in order, until it has none, meeting what a
    /// step needs of the loop; the session ends once its exchange is finished. The one place
    /// actions are run.
    pub(in crate::worker) fn drive(&mut self, id: SessionId) {
        self.sessions.enter(id);
        while let Some(need) = self.with_sessions(|sessions, cx| sessions.step(cx, id)) {
            match need {
                Need::Error {
                    status,
                    request_unfinished,
                } => {
                    // A forward to a cluster peer that failed is served here instead
                    // (`cluster.rs`).
                    if !self.owner_failed(id, request_unfinished) {
                        self.with_sessions(|sessions, cx| {
                            sessions.answer_error(cx, id, status, request_unfinished);
                        });
                    }
                }
            }
        }
        self.sessions.leave(id);
    }
}

/// What the exchange is told of `client` and its request `head`.
fn client_info(
    down: &Downstream<'_>,
    runtime: &crate::runtime::Runtime,
    client: Client,
    head: &RequestHead,
) -> ClientInfo {
    let conn = &down.conns[client.conn()];
    ClientInfo {
        peer: conn.peer,
        client: runtime.client_addr(conn.peer, head),
        request_id: crate::request_id::next(),
        tls: conn.tls.is_some(),
        protocol: client.protocol(head),
        keep_alive: !down.draining,
    }
}
