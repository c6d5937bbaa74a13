//! The path a proxy route's origin is sent (`strip_prefix`, `upstream_prefix`, `rewrite`), as
//! pure functions of the routed path.
//!
//! Why the captures are matched again here rather than carried from routing: every exchange of
//! a route (a forward, a cache fill, a background revalidation, a PURGE's refetch) starts from
//! the request head alone, so the rewrite is a function of the head and the route, and cannot
//! be forgotten on one of those paths. Matching again uses the router itself (a one-route
//! router of the route's own pattern), so the captures are the ones routing saw. It costs only
//! the routes that have a rewrite: a route without one sends the normalised target as before.
//!
//! Why a capture must stay one segment: an origin reads the path it is sent, and a capture
//! that brings a `/`, a dot segment or something a lenient origin reads as one (`%2F`, `\`,
//! `..;x`, `..%20`) would let a client reach paths outside the rewrite's, past the routes and
//! access rules that chose it. Such a request is refused (400) rather than sent encoded: an
//! encoded `..` is still `..` to an origin that decodes it.

use std::fmt;

use http::Method;
use http::uri::PathAndQuery;
use squall_config::{PathRewrite, RewritePart, RouteMatch};
use squall_h1::RequestHead;
use squall_router::{Pattern, RouteRequest, RouteSpec, Router, VhostSpec};

/// A route's rewrite, compiled once when the route is built.
pub struct Rewrite {
    kind: Kind,
}

enum Kind {
    /// The route's prefix (ending with `/`) replaced by `to` (starting and ending with `/`).
    Prefix { from_len: usize, to: String },
    /// Literal text and captures; `matcher` is `None` when there is no capture to find.
    Template {
        parts: Vec<RewritePart>,
        matcher: Option<Router<()>>,
    },
}

/// A request whose captures cannot go into the rewrite as one segment each (see the module
/// documentation): answered 400.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused;

impl Rewrite {
    /// Compiles `rewrite` for a route that matches with `matcher` (what validation accepted:
    /// a prefix rewrite on a prefix route, captures that the route has).
    pub fn new(rewrite: &PathRewrite, matcher: &RouteMatch) -> Rewrite {
        let kind = match rewrite {
            PathRewrite::Prefix { from, to } => Kind::Prefix {
                from_len: from.len(),
                to: to.clone(),
            },
            PathRewrite::Template(parts) => {
                let captures = parts.iter().any(|p| matches!(p, RewritePart::Capture(_)));
                Kind::Template {
                    parts: parts.clone(),
                    matcher: captures.then(|| one_route(matcher)).flatten(),
                }
            }
        };
        Rewrite { kind }
    }

    /// The origin path for `path`, the normalised path the route matched.
    pub fn path(&self, path: &str) -> Result<String, Refused> {
        match &self.kind {
            Kind::Prefix { from_len, to } => {
                // The route matched, so `path` starts with the prefix; a shorter one (never
                // seen) is refused rather than cut at a wrong place.
                let rest = path.get(*from_len..).ok_or(Refused)?;
                Ok(format!("{to}{rest}"))
            }
            Kind::Template { parts, matcher } => expand(parts, matcher.as_ref(), path),
        }
    }
}

impl fmt::Debug for Rewrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Prefix { from_len, to } => write!(f, "Rewrite::Prefix({from_len} -> {to})"),
            Kind::Template { parts, .. } => write!(f, "Rewrite::Template({parts:?})"),
        }
    }
}

/// What `head` is sent to the origin as on `route`: `Ok(None)` for a route without a rewrite
/// (the normalised target goes as it is), else the rewritten path with the query as received.
pub fn origin_target(
    head: &RequestHead,
    rewrite: Option<&Rewrite>,
) -> Result<Option<PathAndQuery>, Refused> {
    let Some(rewrite) = rewrite else {
        return Ok(None);
    };
    let mut target = rewrite.path(head.uri.path())?;
    if let Some(query) = head.uri.query() {
        target.push('?');
        target.push_str(query);
    }
    PathAndQuery::try_from(target)
        .map(Some)
        .map_err(|_| Refused)
}

/// A router of the route's own pattern alone, whose match gives its captures.
fn one_route(matcher: &RouteMatch) -> Option<Router<()>> {
    let pattern = match matcher {
        RouteMatch::Template(t) => Pattern::Template(t.clone()),
        RouteMatch::Regex(r) => Pattern::Regex(r.clone()),
        RouteMatch::Exact(_) | RouteMatch::Prefix(_) => return None,
    };
    let route = RouteSpec {
        pattern,
        methods: None,
        headers: Vec::new(),
        action: (),
    };
    let vhost = VhostSpec {
        hosts: vec!["*".to_owned()],
        routes: vec![route],
    };
    // The service built this pattern into its own router already, so it compiles here too.
    Router::new(vec![vhost]).ok()
}

/// The parts with each capture's value from `path`. An absent capture (a regex group that
/// took no part) is empty; what that makes of the path is judged with the rest.
fn expand(
    parts: &[RewritePart],
    matcher: Option<&Router<()>>,
    path: &str,
) -> Result<String, Refused> {
    let no_fields = http::HeaderMap::new();
    let request = RouteRequest {
        host: None,
        method: &Method::GET,
        path,
        headers: &no_fields,
    };
    let matched = matcher
        .map(|m| m.route(&request).ok_or(Refused))
        .transpose()?;
    let mut out = String::with_capacity(path.len() + 32);
    for part in parts {
        match part {
            RewritePart::Literal(text) => out.push_str(text),
            RewritePart::Capture(name) => {
                let value = (matched.as_ref())
                    .and_then(|m| m.params.value(name, path))
                    .unwrap_or("");
                if !one_segment(value) {
                    return Err(Refused);
                }
                out.push_str(value);
            }
        }
    }
    if normal(&out) { Ok(out) } else { Err(Refused) }
}

/// Whether `value` stays inside one segment for a strict and a lenient reader alike: no `/`,
/// `\` or `;`, and none of their escapes (a normalised path's escapes are uppercase).
fn one_segment(value: &str) -> bool {
    const SPLITTERS: [&str; 6] = ["/", "\\", ";", "%2F", "%5C", "%3B"];
    !SPLITTERS.iter().any(|s| value.contains(s))
}

/// Whether `path` is one spelling of one path, also as a lenient origin reads it: no empty
/// segment but the last, and no segment that is only dots (and spaces, `%20`, which such an
/// origin drops from a segment's end) before any `;`.
fn normal(path: &str) -> bool {
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    let segments: Vec<&str> = rest.split('/').collect();
    let last = segments.len() - 1;
    segments.iter().enumerate().all(|(i, segment)| {
        let read = segment.split(';').next().unwrap_or("");
        let dots_only = !read.is_empty()
            && read
                .replace("%20", " ")
                .bytes()
                .all(|b| b == b'.' || b == b' ')
            && read.contains('.');
        let empty_inside = segment.is_empty() && i != last;
        !empty_inside && !dots_only
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use squall_config::parse_rewrite;

    fn template(matcher: &RouteMatch, text: &str, names: &[&str]) -> Rewrite {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let parts = parse_rewrite(text, &names).expect("a valid rewrite");
        Rewrite::new(&PathRewrite::Template(parts), matcher)
    }

    /// Each row: the route, the rewrite, the normalised path and what the origin is sent
    /// (`None`: refused with 400).
    #[test]
    fn rewrites_as_data() {
        let prefix = |from: &str, to: &str| {
            let rewrite = PathRewrite::Prefix {
                from: from.to_owned(),
                to: to.to_owned(),
            };
            Rewrite::new(&rewrite, &RouteMatch::Prefix(from.to_owned()))
        };
        let strip = prefix("/app/", "/");
        let replace = prefix("/old/", "/new/v2/");
        let users = RouteMatch::Template("/u/{id}/{file}.json".to_owned());
        let users = template(&users, "/users/{id}/files/{file}", &["id", "file"]);
        let regex = RouteMatch::Regex("^/v1/(?P<item>[^/]+)(/(?P<tail>.*))?$".to_owned());
        let regex = template(&regex, "/v2/{item}/{tail}", &["item", "tail"]);
        let exact = template(&RouteMatch::Exact("/old".to_owned()), "/new", &[]);
        #[rustfmt::skip]
        let rows: Vec<(&Rewrite, &str, Option<&str>)> = vec![
            (&strip, "/app/", Some("/")),
            (&strip, "/app/a/b", Some("/a/b")),
            (&strip, "/app/a%2Fb", Some("/a%2Fb")),
            (&replace, "/old/", Some("/new/v2/")),
            (&replace, "/old/x/y.css", Some("/new/v2/x/y.css")),
            (&users, "/u/42/report.json", Some("/users/42/files/report")),
            (&users, "/u/42/a%20b.json", Some("/users/42/files/a%20b")),
            (&users, "/u/%C3%A9/x.json", Some("/users/%C3%A9/files/x")),
            // A template capture holds no '/', but may be a dot segment, or read as one.
            (&users, "/u/42/..json", None),
            (&users, "/u/42/...json", None),
            (&users, "/u/../x.json", None),
            (&users, "/u/a..;x/x.json", None),
            (&users, "/u/42/a%2Fb.json", None),
            (&users, "/u/42/a%5Cb.json", None),
            (&users, "/u/42/a%3Bb.json", None),
            (&users, "/u/42/..%20.json", None),
            (&users, "/u/a../x.json", Some("/users/a../files/x")),
            (&users, "/u/.a/x.json", Some("/users/.a/files/x")),
            // Regex groups may span segments: one that does is refused.
            (&regex, "/v1/item", Some("/v2/item/")),
            (&regex, "/v1/item/tail", Some("/v2/item/tail")),
            (&regex, "/v1/item/a/b", None),
            (&regex, "/v1/item/..", None),
            (&regex, "/v1/item/.", None),
            (&exact, "/old", Some("/new")),
            // Not this route's path at all (never routed here): refused, not guessed.
            (&users, "/elsewhere", None),
            (&regex, "/v1/", None),
        ];
        let mut failures = Vec::new();
        for (rewrite, path, want) in rows {
            let got = rewrite.path(path).ok();
            if got.as_deref() != want {
                failures.push(format!("{rewrite:?} {path}: got {got:?}, want {want:?}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn the_query_goes_as_received() {
        let rewrite = PathRewrite::Prefix {
            from: "/app/".to_owned(),
            to: "/".to_owned(),
        };
        let rewrite = Rewrite::new(&rewrite, &RouteMatch::Prefix("/app/".to_owned()));
        let head =
            |target: &str| crate::tests::head(&format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n"));
        let sent = |target: &str| {
            origin_target(&head(target), Some(&rewrite)).map(|t| t.map(|t| t.as_str().to_owned()))
        };
        assert_eq!(
            sent("/app/a?x=1&y=%2F"),
            Ok(Some("/a?x=1&y=%2F".to_owned()))
        );
        assert_eq!(sent("/app/"), Ok(Some("/".to_owned())));
        assert_eq!(
            origin_target(&head("/app/a?x"), None).map(|t| t.is_none()),
            Ok(true)
        );
    }
}
