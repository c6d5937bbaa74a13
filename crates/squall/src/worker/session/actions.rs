//! Running a session's actions: a step runs them in order until one needs the loop or none
//! is left, and then ends the batch.

use squall_proxy::{Action, CachedAction, ToClient};

use super::{Need, SessionIo, Sessions, charge};

use super::super::ids::SessionId;

impl Sessions {
    /// Marks that the batch being run asks session `id`'s client to go on afterwards.
    fn kick(&mut self, id: SessionId) {
        if let Some(session) = self.get_mut(id) {
            session.kick = true;
        }
    }

    /// Runs session `id`'s queued actions in order until one needs the loop (returned; the
    /// loop meets it and steps again) or none is left: then the batch ends (the session's
    /// bytes charged, its end or its timer, its client resumed if an action asked).
    pub(super) fn step(&mut self, cx: &mut SessionIo<'_>, id: SessionId) -> Option<Need> {
        let session = self.get_mut(id)?;
        if session.waiting {
            // Not started: nothing of it runs but its end (the client went away).
            if session.ex.is_finished() {
                self.end(cx, id);
            }
            return None;
        }
        let (now, wall) = (cx.io.now, cx.down.wall);
        while let Some(action) = self.get_mut(id).and_then(|s| s.ex.poll_action(now, wall)) {
            if let Some(need) = self.run_cached(cx, id, action) {
                return Some(need);
            }
            // An action's own result (a pick, a pooled connection) is an event too.
            #[cfg(debug_assertions)]
            if let Some(session) = self.get_mut(id) {
                session.ex.check_invariants();
            }
        }
        let session = self.get_mut(id)?;
        let held = session.ex.buffered_bytes();
        let before = std::mem::replace(&mut session.charged, held);
        let (client, detached) = (session.client, session.ex.detached());
        let mut kick = std::mem::take(&mut session.kick);
        charge(&mut cx.down, client, before, held);
        if self.get(id).is_some_and(|s| s.ex.is_finished()) {
            self.end(cx, id);
            kick = true;
        } else {
            self.arm_timer(cx, id);
        }
        if kick && !detached {
            cx.down.resume(client);
        }
        None
    }

    /// Runs one action of session `id`'s: the exchange's, or what the cache decided.
    fn run_cached(
        &mut self,
        cx: &mut SessionIo<'_>,
        id: SessionId,
        action: CachedAction,
    ) -> Option<Need> {
        match action {
            CachedAction::Run(action) => return self.run_action(cx, id, action),
            CachedAction::Serve {
                entry,
                served,
                request,
                origin_failed,
            } => {
                self.serve_from_cache(cx, id, &entry, served, &request, origin_failed);
                if origin_failed {
                    self.kick(id);
                }
            }
            CachedAction::Publish { ticket, pass_for } => self.publish(cx, id, ticket, pass_for),
            CachedAction::Stored => {
                cx.io
                    .runtime
                    .metrics
                    .worker(cx.io.worker)
                    .cache_stores
                    .inc();
            }
            CachedAction::Invalidated(_) => {}
        }
        None
    }

    fn run_action(
        &mut self,
        cx: &mut SessionIo<'_>,
        id: SessionId,
        action: Action,
    ) -> Option<Need> {
        let now = cx.io.now;
        let origin = self.get(id).and_then(|s| s.origin);
        match action {
            Action::Pick => self.pick(cx, id),
            Action::Connect { server, pooled } => self.connect(cx, id, server, pooled),
            Action::WriteOrigin(bytes) => {
                if let Some(index) = origin {
                    cx.origins.conns.write(&mut cx.io, index, bytes);
                }
            }
            Action::SendOrigin(message) => {
                let session = self.get(id)?;
                let head_request = session.ex.head().method == http::Method::HEAD;
                if let Some(index) = origin {
                    cx.origins
                        .h2_send(&mut cx.io, id, index, message, head_request);
                }
            }
            Action::OriginBodyConsumed(n) => {
                if let Some(index) = origin {
                    cx.origins.h2_consumed(&mut cx.io, id, index, n);
                }
            }
            Action::PauseOrigin => {
                if let Some(index) = origin {
                    cx.origins.conns.pause(&mut cx.io, index);
                }
            }
            Action::ResumeOrigin => {
                if let Some(index) = origin {
                    cx.origins.conns.resume(&mut cx.io, index);
                }
            }
            Action::ShutdownOrigin => {
                if let Some(index) = origin
                    && !cx.origins.conns.shutdown_write(index)
                {
                    tracing::debug!(worker = cx.io.worker, "tunnel: origin shutdown failed");
                }
            }
            Action::ReleaseOrigin { reusable } => {
                if let Some(index) = self.get_mut(id).and_then(|s| s.origin.take()) {
                    cx.origins.let_go(&mut cx.io, id, index, reusable);
                }
            }
            Action::Report {
                server, outcome, ..
            } => {
                let session = self.slab.get(id.index)?;
                let (generation, upstream) = (session.upstream_generation, session.upstream);
                cx.origins
                    .upstreams
                    .report(generation, upstream, server, outcome, now);
            }
            Action::ClientBodyConsumed(n) => {
                if let Some(session) = self.get_mut(id) {
                    session.kick = true;
                    cx.down.body_consumed(session.client, n);
                }
            }
            Action::Client(ToClient::Error {
                status,
                request_unfinished,
            }) => {
                self.kick(id);
                return Some(Need::Error {
                    status,
                    request_unfinished,
                });
            }
            Action::Client(ToClient::Abort) if self.grpc_cut(cx, id).is_some() => {
                self.cut_grpc_call(cx, id);
                self.kick(id);
            }
            Action::Client(message) => {
                self.on_tunnel_head(cx, id, &message);
                let session = self.get_mut(id)?;
                let data = matches!(message, ToClient::Data(_));
                let client = session.client;
                let written = cx.down.write(session, message);
                session.kick |= written.queued;
                if data {
                    // Charged at once, and the room re-read: the bounds hold within a turn,
                    // however many sessions write in it.
                    cx.down.account(client.conn());
                    self.give_room(cx, id, client);
                }
            }
            // A fill hook of a route with no fill: nothing watches.
            Action::Fill(_) => {}
        }
        None
    }
}
