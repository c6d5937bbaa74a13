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
//! actions it runs. [`forward`] holds the request and response rewriting it applies. On a
//! cached route it is a [`CachedExchange`] (`cached/`): the exchange joined to the cache's fill
//! and invalidation, one action stream, and the lookup that decides whether a request fetches
//! at all ([`cached::begin`]).
//!
//! This crate knows the codec's request and response types, the router, the cache and the
//! upstream decisions; it knows nothing of sockets, rings or clocks (the worker passes `now`
//! and the current Date header in).
#![forbid(unsafe_code)]

pub mod cached;
pub mod compress;
pub mod digits;
mod exchange;
pub mod forward;
mod handler;
mod pages;
pub mod rewrite;

use bytes::BytesMut;
use http::StatusCode;
use squall_config::Config;
use squall_h1::RequestHead;
use squall_router::{RouteRequest, Router};

pub use cached::{CachedAction, CachedExchange};
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

/// The routes and their handlers, shared read-only by every worker. `R` is what the caller
/// keeps per route beside them (the binary: access rules, authentication, root, rate), so that
/// a route is one record, found once per request.
pub struct Service<R = ()> {
    /// Matches a request to its route's id, the index in `routes`.
    router: Router<u32>,
    /// Every route of the config, in file order.
    routes: Vec<Route<R>>,
    not_found: Handler,
    /// The answer to `OPTIONS *`.
    options: Handler,
    /// The error pages, resolved per vhost.
    pages: ErrorPages,
    /// The default 404 as each vhost's 404 page has it, by vhost index (`None`: the text).
    not_found_pages: Vec<Option<Handler>>,
    /// The default 404 for requests no vhost takes, from `[server] error_pages`.
    not_found_server: Option<Handler>,
}

/// One route, compiled once from its `[[vhost.route]]`.
#[derive(Debug)]
pub struct Route<R> {
    /// Its place among all routes of the config, in file order: what per-route metrics are
    /// kept by, and what a request remembers between its head and its answer.
    pub id: u32,
    /// What answers it (a proxy route's handler carries its upstream, edits and cache
    /// settings).
    pub handler: Handler,
    /// Its label for metrics (`* prefix:/p/`).
    pub label: String,
    /// Its vhost's index in the config.
    pub vhost: usize,
    /// `intercept_errors`.
    pub intercept_errors: bool,
    /// `allow_trace`.
    pub allow_trace: bool,
    /// What the caller keeps for it ([`Service::with_rules`]).
    pub rules: R,
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
        let routes = (config.vhost.iter().enumerate())
            .flat_map(|(i, v)| v.routes.iter().map(move |r| (i, v, r)))
            .zip(handlers)
            .enumerate()
            .map(|(id, ((vhost, v, r), handler))| Route {
                id: id as u32,
                handler,
                label: handler::route_label(v, r),
                vhost,
                intercept_errors: r.intercept_errors,
                allow_trace: r.allow_trace,
                rules: (),
            })
            .collect();
        Ok(Service {
            router,
            routes,
            not_found: Handler::not_found(),
            options: Handler::server_options(),
            pages: ErrorPages::default(),
            not_found_pages: Vec::new(),
            not_found_server: None,
        })
    }

    /// Gives each route what the caller keeps for it: `rules` has one item per route, in
    /// file order (as `config.vhost[..].routes` lists them).
    pub fn with_rules<R>(self, rules: impl IntoIterator<Item = R>) -> Service<R> {
        let mut rules = rules.into_iter();
        let routes = (self.routes.into_iter())
            .map(|route| Route {
                id: route.id,
                handler: route.handler,
                label: route.label,
                vhost: route.vhost,
                intercept_errors: route.intercept_errors,
                allow_trace: route.allow_trace,
                rules: rules.next().expect("one rule set per route"),
            })
            .collect();
        debug_assert!(rules.next().is_none(), "one rule set per route");
        Service {
            router: self.router,
            routes,
            not_found: self.not_found,
            options: self.options,
            pages: self.pages,
            not_found_pages: self.not_found_pages,
            not_found_server: self.not_found_server,
        }
    }
}

impl<R> Service<R> {
    /// Takes the error pages of `config`, whose files' bytes are in `files`: the default 404
    /// and `block` routes answer with their vhost's page, and [`Service::error_page`] finds
    /// the others.
    pub fn with_error_pages(
        mut self,
        config: &Config,
        files: &std::collections::HashMap<std::path::PathBuf, bytes::Bytes>,
    ) -> Service<R> {
        let pages = ErrorPages::new(config, files);
        let configured = config.vhost.iter().flat_map(|v| &v.routes);
        for (route, configured) in self.routes.iter_mut().zip(configured) {
            if let squall_config::Action::Block { status } = configured.action
                && let Some(page) = pages.get(Some(route.vhost), status)
            {
                route.handler = handler::page_handler(status, page);
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
        let route = self.routes.get(id)?;
        if !route.intercept_errors {
            return None;
        }
        self.pages.get(Some(route.vhost), status)
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

    /// Each route's label for metrics (`* prefix:/p/`), in route id order.
    pub fn route_labels(&self) -> Vec<String> {
        self.routes.iter().map(|r| r.label.clone()).collect()
    }

    /// Route `id` (as a request noted it at its head).
    pub fn route_by_id(&self, id: u32) -> Option<&Route<R>> {
        self.routes.get(id as usize)
    }

    /// Where `head` goes: a proxy route's group, or `None` for a route answered here.
    pub fn proxy_route(&self, head: &RequestHead) -> Option<&std::sync::Arc<ProxyRoute>> {
        match self.route(head).1 {
            Handler::Proxy(route) => Some(route),
            _ => None,
        }
    }

    /// The route for `head` (`None` for the default 404) and its handler, for a caller that
    /// routes once and then either forwards (a [`Handler::Proxy`]) or answers with
    /// [`Handler::reply`].
    ///
    /// The path routed is the normalised one (`squall_h1::target`); `OPTIONS *` is no route's
    /// and gets the server's own answer (200 with `Allow`).
    pub fn route(&self, head: &RequestHead) -> (Option<&Route<R>>, &Handler) {
        if is_asterisk(head) {
            return (None, &self.options);
        }
        let route = self.route_path(head, head.uri.path());
        match route.and_then(|id| self.routes.get(id as usize)) {
            Some(route) => (Some(route), &route.handler),
            None => (None, &self.not_found),
        }
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
            .and_then(|id| self.routes.get(id as usize))
            .map_or(&self.not_found, |route| &route.handler)
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
        let route = self.route(head).0.map(|route| route.id);
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
