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
pub mod digits;
mod exchange;
pub mod forward;
mod handler;
mod pages;

use bytes::BytesMut;
use http::StatusCode;
use squall_config::Config;
use squall_h1::RequestHead;
use squall_router::{RouteRequest, Router};

pub use exchange::{
    Action, ClientFraming, ClientHead, ClientInfo, ClientProtocol, Exchange, ExchangeConfig,
    FillHook, OriginMessage, ToClient, TunnelRefusal, TunnelStats,
};
pub use handler::{Fields, Handler, LocationPart, ProxyRoute, Reply, SERVER_METHODS};
pub use pages::{ErrorPages, Page, intercepted};

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
    /// The answer to `OPTIONS *`.
    options: Handler,
    /// Each route's `allow_trace`, by route id.
    traces: Vec<bool>,
    /// Each route's label for metrics, by route id.
    labels: Vec<String>,
    /// The error pages, resolved per vhost.
    pages: ErrorPages,
    /// Each route's vhost index, by route id.
    route_vhosts: Vec<usize>,
    /// Each route's `intercept_errors`, by route id.
    intercepts: Vec<bool>,
    /// The default 404 as each vhost's 404 page has it, by vhost index (`None`: the text).
    not_found_pages: Vec<Option<Handler>>,
    /// The default 404 for requests no vhost takes, from `[server] error_pages`.
    not_found_server: Option<Handler>,
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
        let route_vhosts = (config.vhost.iter().enumerate())
            .flat_map(|(i, v)| v.routes.iter().map(move |_| i))
            .collect();
        let intercepts = (config.vhost.iter().flat_map(|v| &v.routes))
            .map(|r| r.intercept_errors)
            .collect();
        let traces = (config.vhost.iter().flat_map(|v| &v.routes))
            .map(|r| r.allow_trace)
            .collect();
        Ok(Service {
            router,
            handlers,
            not_found: Handler::not_found(),
            options: Handler::server_options(),
            traces,
            labels,
            pages: ErrorPages::default(),
            route_vhosts,
            intercepts,
            not_found_pages: Vec::new(),
            not_found_server: None,
        })
    }

    /// Takes the error pages of `config`, whose files' bytes are in `files`: the default 404
    /// and `block` routes answer with their vhost's page, and [`Service::error_page`] finds
    /// the others.
    pub fn with_error_pages(
        mut self,
        config: &Config,
        files: &std::collections::HashMap<std::path::PathBuf, bytes::Bytes>,
    ) -> Service {
        let pages = ErrorPages::new(config, files);
        let routes = config.vhost.iter().flat_map(|v| &v.routes).enumerate();
        for (id, route) in routes {
            if let squall_config::Action::Block { status } = route.action
                && let Some(page) = pages.get(self.route_vhosts.get(id).copied(), status)
            {
                self.handlers[id] = handler::page_handler(status, page);
            }
        }
        let not_found = |vhost| {
            (pages.get(vhost, StatusCode::NOT_FOUND))
                .map(|page| handler::page_handler(StatusCode::NOT_FOUND, page))
        };
        self.not_found_pages = (0..config.vhost.len())
            .map(|i| not_found(Some(i)))
            .collect();
        self.not_found_server = not_found(None);
        self.pages = pages;
        self
    }

    /// The page Squall answers `status` with for `head` (by the vhost its host selects), if
    /// one is configured.
    pub fn error_page(&self, head: &RequestHead, status: StatusCode) -> Option<&Page> {
        if self.pages.is_empty() {
            return None;
        }
        self.pages
            .get(self.router.select_vhost(head.host()), status)
    }

    /// The content type and body of Squall's own `status` answer to `head`: its vhost's error
    /// page, or the short text (`404 Not Found`); `None` (no head yet) is always the text.
    pub fn error_body(
        &self,
        head: Option<&RequestHead>,
        status: StatusCode,
    ) -> (&'static str, bytes::Bytes) {
        if let Some(page) = head.and_then(|head| self.error_page(head, status)) {
            return (page.content_type, page.body.clone());
        }
        let reason = status.canonical_reason().unwrap_or("Error");
        let body = bytes::Bytes::from(format!("{} {reason}\n", status.as_u16()));
        ("text/plain", body)
    }

    /// The page that replaces an origin's `status` response on route `route` (a route with
    /// `intercept_errors`), if one is configured.
    pub fn intercept_page(&self, route: u32, status: StatusCode) -> Option<&Page> {
        let id = route as usize;
        if !status.is_client_error() && !status.is_server_error() {
            return None;
        }
        if !self.intercepts.get(id).copied().unwrap_or(false) {
            return None;
        }
        self.pages.get(Some(*self.route_vhosts.get(id)?), status)
    }

    /// The handler that answers `head` on `route`: the route's, or for `None` the default 404
    /// (with the 404 page of the vhost the host selects, if any).
    pub fn answering(&self, route: Option<u32>, head: &RequestHead) -> &Handler {
        if route.is_none() && is_asterisk(head) {
            return &self.options;
        }
        if route.is_some() || self.pages.is_empty() {
            return self.handler(route);
        }
        let page = match self.router.select_vhost(head.host()) {
            Some(i) => self.not_found_pages.get(i).and_then(Option::as_ref),
            None => self.not_found_server.as_ref(),
        };
        page.unwrap_or(&self.not_found)
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
    ///
    /// The path routed is the normalised one (`squall_h1::target`); `OPTIONS *` is no route's
    /// and gets the server's own answer (200 with `Allow`).
    pub fn route(&self, head: &RequestHead) -> (Option<u32>, &Handler) {
        if is_asterisk(head) {
            return (None, &self.options);
        }
        let route = self.route_path(head, head.uri.path());
        (route, self.handler(route))
    }

    /// Whether an origin that reads paths leniently could take `head`'s target for a path
    /// that routes elsewhere than `route`, the route its normalised path took (see
    /// `squall_h1::target::lenient`): `/admin%2Fpanel`, `/admin;x/panel` or `/admin./panel`
    /// beside a route for `/admin/`. Such a request is refused: it would reach the origin of
    /// one route and be served as a resource of another, past its access rules.
    pub fn reads_elsewhere(&self, head: &RequestHead, route: Option<u32>) -> bool {
        let Some(lenient) = squall_h1::target::lenient(head.uri.path().as_bytes()) else {
            return false;
        };
        self.route_path(head, &lenient) != route
    }

    /// Whether route `route` lets TRACE through (`allow_trace`); TRACE is refused otherwise,
    /// and always where no route matches.
    pub fn allows_trace(&self, route: Option<u32>) -> bool {
        route.is_some_and(|id| self.traces.get(id as usize).copied().unwrap_or(false))
    }

    /// The route `head` takes when its path is `path`.
    fn route_path(&self, head: &RequestHead, path: &str) -> Option<u32> {
        let fields = RouteFieldsOf(&head.headers);
        let request = RouteRequest {
            host: head.host(),
            method: &head.method,
            path,
            headers: &fields,
        };
        self.router.route(&request).map(|matched| *matched.action)
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
        let handler = self.answering(route, head);
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

/// Whether `head` is `OPTIONS *` (the parsers let `*` through for OPTIONS only).
fn is_asterisk(head: &RequestHead) -> bool {
    head.uri.path() == "*"
}

/// A request head's fields as the router reads them, without building a map.
#[derive(Debug)]
struct RouteFieldsOf<'a>(&'a squall_h1::Fields);

impl squall_router::RouteFields for RouteFieldsOf<'_> {
    fn has_value(&self, name: &http::HeaderName, value: &http::HeaderValue) -> bool {
        self.0.get_all(name).any(|present| present == *value)
    }
}

#[cfg(test)]
mod tests;
