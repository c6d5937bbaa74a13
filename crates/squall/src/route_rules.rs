//! What the binary keeps for each route beside its handler: the rules a request meets at
//! admission (`allow` / `deny`, Basic authentication, the route's own rate) and the `root`
//! its files come from. They ride in the route's one record (`squall_proxy::Route`), so a
//! request finds all of its route at once, by reference, and a per-route feature adds a
//! field here rather than another array indexed by route id beside the others.

use std::sync::Arc;

use squall_config::Config;

use crate::auth::RouteAuth;
use crate::roots::Root;

/// The service as the binary runs it: every route with its rules.
pub type Service = squall_proxy::Service<RouteRules>;

/// One route with its rules.
pub type Route = squall_proxy::Route<RouteRules>;

/// A route's admission rules and files.
#[derive(Default)]
pub struct RouteRules {
    /// `allow` / `deny`; `None` when the route answers everyone.
    pub access: Option<squall_config::Access>,
    /// `auth_basic`, its users loaded.
    pub auth: Option<Arc<RouteAuth>>,
    /// `root`, its directory opened.
    pub root: Option<Arc<Root>>,
    /// The route's own `request_rate`.
    pub rate: Option<squall_config::RouteRate>,
}

/// Each route's rules, in file order: `auth` and `roots` as `auth::load_routes` and
/// `roots::open` give them (one per route, in the same order).
pub fn compile(
    config: &Config,
    auth: Vec<Option<Arc<RouteAuth>>>,
    roots: Vec<Option<Arc<Root>>>,
) -> Vec<RouteRules> {
    let routes = config.vhost.iter().flat_map(|v| &v.routes);
    debug_assert_eq!(routes.clone().count(), auth.len());
    debug_assert_eq!(routes.clone().count(), roots.len());
    (routes.zip(auth).zip(roots))
        .map(|((route, auth), root)| RouteRules {
            access: Some(route.access.clone()).filter(|a| !a.is_open()),
            auth,
            root,
            rate: route.rate.clone(),
        })
        .collect()
}
