//! squall-router: virtual hosts and routes, compiled once from a spec and then matched per
//! request, in the common case without allocating.
//!
//! The proxy translates `[[vhost]]` and `[[vhost.route]]` from the config into [`VhostSpec`]s
//! (this crate knows nothing of `squall-config`, by the crate dependency rule) and builds a
//! [`Router`] generic over its own action type. Per request it calls [`Router::route`] with the
//! host, method, path (without the query) and headers, and gets back the action of the route that
//! matched, or `None`, on which it answers the default 404.
//!
//! # Order of matching (CONFIG.md)
//! 1. The vhost: exact host (case-insensitive, trailing dot ignored), then the wildcard
//!    `*.example.com` with the longest suffix, then the default vhost `*`.
//! 2. Within the vhost: exact routes, then regex and template routes in file order, then prefix
//!    routes, longest first. A route whose conditions (methods, headers) fail is skipped and the
//!    search goes on with the next candidate in that order, so a longer prefix with a failing
//!    condition falls back to a shorter one.
//!
//! # Why it scales
//! Ten thousand routes must cost a request no more than ten do, for every kind:
//! exact paths are a hash map; prefixes are a radix tree walked along the path; templates are a
//! segment trie walked segment by segment; regexes are indexed by the literals every match must
//! start or end with (a radix tree for anchored ones, Aho-Corasick for the others), so a request
//! only runs the handful of regexes whose literal it contains. See `regex_index.rs`.
#![forbid(unsafe_code)]

mod error;
mod hash;
mod host;
mod params;
mod radix;
mod regex_index;
mod smallbuf;
mod template;
mod vhost;

use std::fmt;

pub use error::{BuildError, PatternError};
pub use params::{PARAMS_MAX, Param, Params};

use host::HostTable;
use vhost::Vhost;

/// How a route matches the request path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// The path equals this string (nginx `location = /x`).
    Exact(String),
    /// The path starts with this string; the longest such prefix wins (nginx `location /x/`).
    Prefix(String),
    /// `/users/{name}/orders`: `{ident}` matches one non-empty path segment (no `/`), the rest
    /// is literal. A segment may put literal text around its one parameter: `/v{version}/`,
    /// `/files/{stem}.json`. The captures come back in [`Matched::params`].
    Template(String),
    /// A `regex` crate pattern searched in the path, unanchored unless it anchors itself
    /// (nginx `location ~`). Named groups come back in [`Matched::params`].
    Regex(String),
}

/// One route: a pattern, optional conditions, and what to do on a match.
#[derive(Clone, Debug)]
pub struct RouteSpec<A> {
    pub pattern: Pattern,
    /// `None`: any method. Otherwise the request method must be in the list; HEAD does not
    /// match a route that lists only GET, and an empty list matches no request.
    pub methods: Option<Vec<http::Method>>,
    /// Every listed header must be present with exactly this value (byte for byte; the name is
    /// case-insensitive by `HeaderName`'s nature). With repeated header lines, any one equal
    /// line satisfies the condition.
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
    pub action: A,
}

/// One virtual host: the host names it answers and its routes in file order.
#[derive(Clone, Debug)]
pub struct VhostSpec<A> {
    /// `"*"` (the default vhost), an exact name `"example.com"`, or a wildcard
    /// `"*.example.com"` (matches `a.example.com` and `a.b.example.com`, not `example.com`).
    pub hosts: Vec<String>,
    pub routes: Vec<RouteSpec<A>>,
}

/// What [`Router::route`] looks at. The caller strips the port from the host and the query from
/// the path before routing.
#[derive(Clone, Copy, Debug)]
pub struct RouteRequest<'a> {
    /// `None` (or empty) selects the default vhost.
    pub host: Option<&'a str>,
    pub method: &'a http::Method,
    pub path: &'a str,
    pub headers: &'a dyn RouteFields,
}

/// The request's fields as the router reads them. A trait, so that the router knows no codec:
/// an HTTP/1.1 head keeps its fields as spans into the received bytes, not as a map.
pub trait RouteFields: fmt::Debug {
    /// Whether some line of `name` has exactly `value`.
    fn has_value(&self, name: &http::HeaderName, value: &http::HeaderValue) -> bool;
}

impl RouteFields for http::HeaderMap {
    fn has_value(&self, name: &http::HeaderName, value: &http::HeaderValue) -> bool {
        self.get_all(name).iter().any(|present| present == value)
    }
}

/// The route a request matched.
#[derive(Clone, Debug)]
pub struct Matched<'r, A> {
    pub action: &'r A,
    /// The route's index within its vhost, in file order.
    pub route_index: usize,
    /// The vhost's index in the spec list (for metrics and logs).
    pub vhost_index: usize,
    /// Template captures, or a regex's named groups, as ranges into the request path.
    pub params: Params<'r>,
}

/// Vhosts and their routes, compiled. Immutable once built; share it behind an `Arc` and build a
/// new one on reload.
pub struct Router<A> {
    hosts: HostTable,
    vhosts: Vec<Vhost<A>>,
}

impl<A> Router<A> {
    /// Compiles the specs. Fails on the first bad host, duplicate host, bad template or bad
    /// regex, naming the vhost and route index.
    pub fn new(vhosts: Vec<VhostSpec<A>>) -> Result<Self, BuildError> {
        let hosts = HostTable::new(vhosts.iter().map(|v| v.hosts.as_slice()))?;
        let vhosts = vhosts
            .into_iter()
            .enumerate()
            .map(|(index, spec)| Vhost::new(index, spec.routes))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Router { hosts, vhosts })
    }

    /// The route for this request, or `None` when no vhost or no route matches (the caller
    /// answers the default 404). Allocates nothing, except: when a regex with named groups wins
    /// (its capture positions), when a request collects more than 32 candidate regex/template
    /// routes, and when a path hits a bucket of `BUCKET_SET_MIN` or more regexes sharing one
    /// literal (the `RegexSet` match flags).
    pub fn route<'r>(&'r self, req: &RouteRequest<'_>) -> Option<Matched<'r, A>> {
        let vhost_index = self.hosts.select(req.host)?;
        let (route_index, action, params) = self.vhosts[vhost_index].route(req)?;
        Some(Matched {
            action,
            route_index,
            vhost_index,
            params,
        })
    }

    /// The index of the vhost a host name selects, if any (also what [`Router::route`] uses).
    pub fn select_vhost(&self, host: Option<&str>) -> Option<usize> {
        self.hosts.select(host)
    }

    /// How many vhosts were compiled.
    pub fn vhost_count(&self) -> usize {
        self.vhosts.len()
    }

    /// How many routes the vhost at `vhost_index` has (0 for an index out of range).
    pub fn route_count(&self, vhost_index: usize) -> usize {
        self.vhosts.get(vhost_index).map_or(0, Vhost::route_count)
    }
}

/// Counts only, so a config struct holding a router can derive `Debug` whatever its action is.
impl<A> fmt::Debug for Router<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let routes: Vec<usize> = self.vhosts.iter().map(Vhost::route_count).collect();
        f.debug_struct("Router")
            .field("routes_per_vhost", &routes)
            .finish()
    }
}
