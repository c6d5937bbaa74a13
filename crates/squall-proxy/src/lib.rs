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

pub mod compress;
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
pub use handler::{Fields, Handler, LocationPart, ProxyRoute, Reply};

/// Why a config could not be turned into a service.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("routes: {0}")]
    Router(#[from] squall_router::BuildError),
}

/// The routes and their handlers, shared read-only by every worker.
pub struct Service {
    /// Matches a request to its route's id.
    router: Router<u32>,
    /// Each route's handler, by route id.
    handlers: Vec<Handler>,
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
        let mut handlers = Vec::new();
        let vhosts = config
            .vhost
            .iter()
            .map(|v| handler::vhost_spec(v, &config.upstream, &mut handlers))
            .collect();
        let router = Router::new(vhosts)?;
        let labels = (config.vhost.iter())
            .flat_map(|v| v.routes.iter().map(move |r| handler::route_label(v, r)))
            .collect();
        Ok(Service {
            router,
            handlers,
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
        match self.route(head).1 {
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
        let route = self.router.route(&request).map(|matched| *matched.action);
        (route, self.handler(route))
    }

    /// The handler of route `route` (as [`Service::route`] returned it; `None` is the default
    /// 404): a request routed once at its head is answered at its end without routing again.
    pub fn handler(&self, route: Option<u32>) -> &Handler {
        route
            .and_then(|id| self.handlers.get(id as usize))
            .unwrap_or(&self.not_found)
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
        let route = self.route(head).0;
        self.respond_routed(route, head, scheme, date, close, out)
    }

    /// As [`Service::respond`], for a request already routed to `route`.
    pub fn respond_routed(
        &self,
        route: Option<u32>,
        head: &RequestHead,
        scheme: &str,
        date: &[u8],
        close: bool,
        out: &mut BytesMut,
    ) -> Outcome {
        let handler = self.handler(route);
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
