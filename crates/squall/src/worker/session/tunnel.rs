//! A session that becomes a tunnel (`worker/tunnel.rs` moves its client's side): the tunnel
//! counted when its head goes to the client, an HTTP/2 client's early bytes handed over then,
//! and the tunnel's end counted, or an upgrade that did not become one logged.

use std::sync::Arc;

use squall_proxy::{Exchange, ToClient, TunnelRefusal};
use tracing::{info, warn};

use super::super::Io;
use super::super::downstream;
use super::super::ids::Client;
use super::super::ids::SessionId;
use super::{SessionIo, Sessions};
use crate::upstream_events::UpstreamEvents;

impl Sessions {
    /// Before session `id`'s `message` goes to its client: when it is the head of a tunnel,
    /// counts the tunnel, and an HTTP/2 client's bytes that came early go to the origin now.
    pub(super) fn on_tunnel_head(
        &mut self,
        cx: &mut SessionIo<'_>,
        id: SessionId,
        message: &ToClient,
    ) {
        let ToClient::Head(_) = message else {
            return;
        };
        let Some(session) = self.get_mut(id) else {
            return;
        };
        let (tunnel, client) = (session.ex.is_tunnel(), session.client);
        let early =
            (cx.down.conns.get_mut(client.conn())).and_then(|c| downstream::take_early(c, client));
        if !tunnel {
            return;
        }
        let (runtime, worker, now) = (cx.io.runtime, cx.io.worker, cx.io.now);
        runtime.metrics.worker(worker).tunnels.inc();
        let generation = cx.origins.upstreams.generation();
        let upstream = session.upstream(generation);
        let events = upstream.map(|upstream| cx.origins.upstreams.events(runtime, upstream));
        if let Some(events) = &events {
            events.tunnels.inc(worker);
        }
        session.tunnel = events;
        for (data, end) in early.into_iter().flatten() {
            session.ex.on_tunnel_client_data(&data, now);
            if end {
                session.ex.on_tunnel_client_eof(now);
            }
        }
    }
}

/// Counts a tunnel's end, with its bytes, when the ending session was one (on its upstream's
/// `events` too); counts and logs an upgrade that did not become one.
pub(super) fn count_end(
    io: &Io<'_>,
    ex: &Exchange,
    client: Client,
    events: Option<Arc<UpstreamEvents>>,
) {
    if let Some(events) = events {
        events.tunnels_closed.inc(io.worker);
    }
    let counters = io.runtime.metrics.worker(io.worker);
    if let Some(stats) = ex.tunnel_stats() {
        counters.tunnels_closed.inc();
        counters.tunnel_bytes_up.add(stats.bytes_up);
        counters.tunnel_bytes_down.add(stats.bytes_down);
    }
    let Some(refusal) = ex.tunnel_refusal() else {
        return;
    };
    let route = ex.route().id;
    match refusal {
        TunnelRefusal::BadSwitch => {
            counters.tunnel_refused[0].inc();
            warn!(
                worker = io.worker,
                conn = client.conn(),
                route,
                status = ex.status().as_u16(),
                "tunnel refused: the origin answered the upgrade with a malformed 101 (or no switch)"
            );
        }
        TunnelRefusal::NotAllowed => {
            counters.tunnel_refused[1].inc();
            info!(
                worker = io.worker,
                conn = client.conn(),
                route,
                "upgrade not allowed on this route: forwarded without it"
            );
        }
    }
}
