//! squall-proxy: the per-request session, sans-IO.
//!
//! A [`Service`] is compiled once from a validated [`squall_config::Config`]: the routes go into a
//! [`squall_router::Router`] whose actions are [`Handler`]s with their response headers already
//! encoded, so that answering a `respond` route is a hash lookup, a status line, a Date header and
//! two copies of a few dozen bytes. The worker hands each decoded request head to
//! [`Service::respond`] and sends what it appends to the output buffer.
//!
//! A proxied request is an [`Exchange`]: the sans-IO state machine of its life with an origin
//! (pick, connect, forward, retry, re-frame, end), which the worker drives with events and whose
//! actions it runs. [`forward`] holds the request and response rewriting it applies.
//!
//! This crate knows the codec's request and response types, the router and the upstream
//! decisions; it knows nothing of sockets, rings or clocks (the worker passes `now` and the
//! current Date header in).
#![forbid(unsafe_code)]

mod exchange;
pub mod forward;
mod handler;

use bytes::BytesMut;
use http::StatusCode;
use squall_config::Config;
use squall_h1::RequestHead;
use squall_router::{RouteRequest, Router};

pub use exchange::{
    Action, ClientFraming, ClientHead, ClientInfo, ClientProtocol, Exchange, ExchangeConfig,
    FillHook, ToClient,
};
pub use handler::{Fields, Handler, LocationPart, ProxyRoute, Reply, Routed};

/// Why a config could not be turned into a service.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("routes: {0}")]
    Router(#[from] squall_router::BuildError),
}

/// The routes and their handlers, shared read-only by every worker.
pub struct Service {
    router: Router<Routed>,
    not_found: Handler,
    /// Each route's label for metrics, by route id.
    labels: Vec<String>,
}

/// What [`Service::respond`] did, for the worker's bookkeeping and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub status: StatusCode,
    /// False when the connection must close after this response.
    pub keep_alive: bool,
    /// The route that answered; `None` for the default 404.
    pub route: Option<u32>,
}

impl Service {
    /// Compiles the vhosts and routes of `config`.
    pub fn new(config: &Config) -> Result<Service, BuildError> {
        let mut next_id = 0;
        let vhosts = config
            .vhost
            .iter()
            .map(|v| handler::vhost_spec(v, &config.upstream, &mut next_id))
            .collect();
        let router = Router::new(vhosts)?;
        let labels = (config.vhost.iter())
            .flat_map(|v| v.routes.iter().map(move |r| handler::route_label(v, r)))
            .collect();
        Ok(Service {
            router,
            not_found: Handler::not_found(),
            labels,
        })
    }

    /// Each route's label for metrics (`* prefix:/p/`), indexed by route id.
    pub fn route_labels(&self) -> &[String] {
        &self.labels
    }

    /// Where `head` goes: a proxy route's group, or `None` for a route answered here.
    pub fn proxy_route(&self, head: &RequestHead) -> Option<&std::sync::Arc<ProxyRoute>> {
        match self.handler(head) {
            Handler::Proxy(route) => Some(route),
            _ => None,
        }
    }

    /// The route for `head` (its id, `None` for the default 404) and its handler, for a
    /// caller that routes once and then either forwards (a [`Handler::Proxy`]) or answers
    /// with [`Handler::reply`].
    pub fn route(&self, head: &RequestHead) -> (Option<u32>, &Handler) {
        let request = RouteRequest {
            host: head.host(),
            method: &head.method,
            path: head.uri.path(),
            headers: &head.headers,
        };
        match self.router.route(&request) {
            Some(matched) => (Some(matched.action.id), &matched.action.handler),
            None => (None, &self.not_found),
        }
    }

    fn handler(&self, head: &RequestHead) -> &Handler {
        self.route(head).1
    }

    /// Appends the complete response to `head` to `out`.
    ///
    /// `scheme` is `http` or `https` (for redirects' `$scheme`); `date` is the current
    /// IMF-fixdate; `close` forces `Connection: close` (the worker is draining or the
    /// connection has served its quota).
    pub fn respond(
        &self,
        head: &RequestHead,
        scheme: &str,
        date: &[u8],
        close: bool,
        out: &mut BytesMut,
    ) -> Outcome {
        let (route, handler) = self.route(head);
        let mut framing = head.framing();
        framing.keep_alive &= !close;
        let status = handler.write(head, scheme, framing, date, out);
        Outcome {
            status,
            keep_alive: framing.keep_alive,
            route,
        }
    }
}

#[cfg(test)]
mod tests;
