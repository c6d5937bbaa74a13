//! `[[vhost]]` and `[[vhost.route]]`: virtual hosts, and each route's match, conditions,
//! action and per-route options (caching, header edits, compression, access rules, rewrites).

use http::{HeaderName, HeaderValue, Method, StatusCode};

use super::*;

/// One `[[vhost]]`: routes for a set of host names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vhost {
    /// Non-empty; lowercase names, `*.suffix` wildcards, or `*` (the default vhost).
    pub hosts: Vec<String>,
    /// In file order; the router applies its precedence (exact, then regex/template in file
    /// order, then longest prefix).
    pub routes: Vec<Route>,
    /// `error_pages`: this vhost's pages, over `[server] error_pages`.
    pub error_pages: crate::ErrorPages,
}

/// One `[[vhost.route]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub matcher: RouteMatch,
    /// `None` matches every method.
    pub methods: Option<Vec<Method>>,
    /// Each header must be present with exactly this value.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub action: Action,
    /// Store and serve responses per RFC 9111; only on proxy routes.
    pub cache: bool,
    /// Freshness when the origin gives none; only with `cache`.
    pub cache_ttl: Option<Duration>,
    /// `request_no_cache` for this route; `None`: `cache.request_no_cache`. Only with `cache`.
    pub request_no_cache: Option<RequestNoCache>,
    /// `cache_set_cookie`: storing responses with `Set-Cookie`. Only with `cache`.
    pub cache_set_cookie: CacheSetCookie,
    /// `allow` / `deny`: which client addresses the route answers.
    pub access: Access,
    /// `auth_basic`: HTTP Basic authentication against a users file.
    pub auth_basic: Option<crate::AuthBasic>,
    /// `request_rate` on the route: its own buckets, on top of `limits.request_rate`.
    pub rate: Option<crate::RouteRate>,
    /// Applied to the request before it is forwarded.
    pub request_headers: HeaderEdits,
    /// Applied to the response before it is sent to the client. On a cached route `remove`
    /// also holds the targeted fields that are for this cache alone unless `set` names them:
    /// `cache.target_header` and `Surrogate-Control` always, `CDN-Cache-Control` only with
    /// `cache.strip_cdn_cache_control` (RFC 9213 §3: CDNs typically forward it).
    pub response_headers: HeaderEdits,
    /// `compress = { ... }`: responses compressed for clients that accept it; on proxy and
    /// `root` routes. `None`: never compressed.
    pub compress: Option<Compress>,
    /// `intercept_errors`: an origin's 4xx/5xx response with a configured error page is
    /// answered with the page instead (its status kept). Only on proxy routes.
    pub intercept_errors: bool,
    /// `allow_trace`: TRACE requests are let through (answered or forwarded as any other
    /// method). Off by default: TRACE is answered 405, as it echoes the request's fields
    /// (cookies, credentials) back to whoever can make the browser send it.
    pub allow_trace: bool,
    /// `upgrade = [..]`: the `Upgrade` protocols (lowercase tokens) this proxy route forwards
    /// to the origin, with `tunnel_idle_timeout`. `None`: upgrades are stripped.
    pub upgrade: Option<Upgrade>,
    /// `strip_prefix`, `upstream_prefix` or `rewrite`: the path the origin is sent in place of
    /// the normalised one. Only on proxy routes. `None`: the normalised path.
    pub rewrite: Option<crate::PathRewrite>,
    /// `response_timeout` and `read_timeout`: how long the origin may take on this route.
    /// Only on proxy routes.
    pub timeouts: ProxyTimeouts,
    /// `body_bytes_max` on a proxy route: the largest request body, over
    /// `limits.body_bytes_max` (HTTP/2 requests; HTTP/1.1 ones keep that as their ceiling).
    pub body_bytes_max: Option<u64>,
}

/// A proxy route's `response_timeout` and `read_timeout`. `None` takes the default: the
/// upstream's `response_timeout` for the first, the route's head timeout for the second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyTimeouts {
    /// The wait for the origin's response head, from the request's last byte sent.
    pub response: Option<Duration>,
    /// Once the head arrived: the longest time with no body byte from the origin (nor to
    /// it), as nginx's `proxy_read_timeout` and `grpc_read_timeout`.
    pub read: Option<Duration>,
}

/// A route's `upgrade` and `tunnel_idle_timeout`: which HTTP/1.1 upgrades (RFC 9110 §7.8)
/// become tunnels between client and origin, and how long a tunnel may stay silent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upgrade {
    /// Non-empty, lowercase tokens, such as `websocket`.
    pub protocols: Vec<String>,
    /// No byte either way for this long: both sides are closed.
    pub tunnel_idle_timeout: Duration,
}

/// A route's `compress`: which responses are compressed (gzip, brotli or zstd, as the
/// client's `Accept-Encoding` prefers) and how hard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compress {
    /// Media types compressed, lowercase: `type/subtype`, or `type/*` for a whole type.
    pub types: Vec<String>,
    /// Responses whose length is known and below this are sent as they are (a few hundred
    /// bytes gain nothing once the coding's framing is paid).
    pub min_bytes: u64,
    /// gzip level, 1..=9.
    pub gzip_level: u32,
    /// brotli quality, 0..=11.
    pub brotli_level: u32,
    /// zstd level, 1..=19.
    pub zstd_level: u32,
}

/// `compress.types` when absent: the text formats browsers fetch that are not compressed
/// already.
pub const COMPRESS_TYPES_DEFAULT: [&str; 8] = [
    "text/html",
    "text/css",
    "text/plain",
    "text/javascript",
    "application/javascript",
    "application/json",
    "application/xml",
    "image/svg+xml",
];

impl Default for Compress {
    /// The defaults: [`COMPRESS_TYPES_DEFAULT`], 256 bytes, gzip 6, brotli 4, zstd 3 (see
    /// docs/PERFORMANCE.md for what each costs per KiB).
    fn default() -> Compress {
        Compress {
            types: COMPRESS_TYPES_DEFAULT.map(str::to_owned).to_vec(),
            min_bytes: 256,
            gzip_level: 6,
            brotli_level: 4,
            zstd_level: 3,
        }
    }
}

/// A route's `allow` and `deny` networks. The most specific network that contains the client
/// decides (a tie goes to `deny`); a client in none is allowed only when `allow` is empty.
/// That is what nginx's first-match order gives for rules written specific-first, without
/// depending on an order between two lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    pub allow: Vec<IpNet>,
    pub deny: Vec<IpNet>,
}

impl Access {
    /// Whether the route has no address rule.
    pub fn is_open(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }

    /// Whether a client at `ip` may use the route.
    pub fn permits(&self, ip: std::net::IpAddr) -> bool {
        let longest = |nets: &[IpNet]| {
            nets.iter()
                .filter(|n| n.contains(ip))
                .map(|n| i16::from(n.prefix_len()))
                .max()
                .unwrap_or(-1)
        };
        let (allow, deny) = (longest(&self.allow), longest(&self.deny));
        if allow < 0 && deny < 0 {
            return self.allow.is_empty();
        }
        allow > deny
    }
}

/// How a route matches the request path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteMatch {
    /// The whole path equals this (starts with '/').
    Exact(String),
    /// The path starts with this (starts with '/').
    Prefix(String),
    /// The path matches this regex (compiles with the `regex` crate, at most [`CAPTURES_MAX`]
    /// named groups).
    Regex(String),
    /// `/users/{name}/orders`: literal segments with at most one `{ident}` capture each
    /// (`/files/{name}.json`), at most [`CAPTURES_MAX`] captures in all.
    Template(String),
}

/// What a route does with a matching request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Answer from the config: a final status (200..=599).
    Respond {
        status: StatusCode,
        body: String,
        headers: Vec<(HeaderName, HeaderValue)>,
    },
    /// Redirect (301, 302, 303, 307 or 308); `location` may use [`REDIRECT_VARIABLES`].
    Redirect {
        status: StatusCode,
        location: String,
    },
    /// Refuse with an error status (400..=599).
    Block { status: StatusCode },
    /// Forward to the named upstream, which exists.
    Proxy { upstream: String },
    /// Serve files from a directory (`root`): the request path, decoded, names a file beneath
    /// it, as nginx's `root` (the whole path is appended, the route's prefix included).
    Files(Files),
}

/// A route's `root`, `index` and `root_follow_symlinks`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Files {
    /// The directory served (made absolute against the config file's directory).
    pub root: std::path::PathBuf,
    /// The file names tried, in order, for a path ending in `/` (no `/` in a name).
    pub index: Vec<String>,
    /// Whether symlinks are followed; even then, never out of `root`.
    pub follow_symlinks: bool,
    /// `precompressed`: the content codings (`"br"`, `"zstd"`, `"gzip"`, each once) whose
    /// sibling files (`NAME.br`, `NAME.zst`, `NAME.gz`) are served to clients that accept them,
    /// ties between the client's weights going in this order. Empty: none (the default).
    pub precompressed: Vec<String>,
}

/// The content codings `precompressed` may name.
pub const PRECOMPRESSED_CODINGS: [&str; 3] = ["br", "zstd", "gzip"];

/// `index` when absent.
pub const INDEX_DEFAULT: &str = "index.html";

impl Action {
    /// Whether the route forwards to an origin.
    pub fn is_proxy(&self) -> bool {
        matches!(self, Action::Proxy { .. })
    }
}

/// Header edits: `set` replaces (or adds) each field, `remove` deletes all fields of a name.
/// Names are lowercase, and no name is in both lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderEdits {
    pub set: Vec<(HeaderName, HeaderValue)>,
    pub remove: Vec<HeaderName>,
    /// The `set` values that name request variables (`$remote_addr`...), compiled; a name is
    /// either here or in `set`.
    pub templates: Vec<(HeaderName, crate::Template)>,
}

impl HeaderEdits {
    /// Whether the edits change nothing.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.remove.is_empty() && self.templates.is_empty()
    }

    /// Whether `set` gives `name` a value (plain or a template).
    pub fn sets(&self, name: &HeaderName) -> bool {
        self.set.iter().any(|(n, _)| n == name) || self.templates.iter().any(|(n, _)| n == name)
    }
}
