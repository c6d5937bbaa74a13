//! Vhosts and their routes: host patterns, path matchers, conditions, actions and header edits.
//!
//! A route needs exactly one matcher and exactly one action; with two, which one wins would
//! depend on an order the operator cannot see, so both mistakes are errors at the second key.

use std::ops::Range;
use std::time::Duration;

use http::HeaderName;
use toml::Spanned;

use super::value::{
    duration_or, editable, header_fields, header_name, header_value, host_pattern, method, status,
};
use crate::diagnostics::Report;
use crate::model::*;
use crate::raw::*;

pub(super) fn vhosts(
    raw: &[Spanned<RawVhost>],
    upstreams: &[Upstream],
    r: &mut Report,
) -> Vec<Vhost> {
    let mut seen: Vec<(String, usize)> = Vec::new();
    let mut vhosts = Vec::new();
    for item in raw {
        let line = r.line(&item.span());
        let hosts = vhost_hosts(item, r);
        for (host, span) in &hosts {
            if let Some((_, first)) = seen.iter().find(|(h, _)| h == host) {
                r.error(
                    span,
                    format!("host {host:?} is already served by the [[vhost]] at line {first}"),
                );
            } else {
                seen.push((host.clone(), line));
            }
        }
        let routes = routes(&item.get_ref().route, upstreams, r);
        let error_pages = (item.get_ref().error_pages.as_ref())
            .map_or_else(Vec::new, |p| crate::pages::error_pages(p.get_ref(), r));
        vhosts.push(Vhost {
            hosts: hosts.into_iter().map(|(h, _)| h).collect(),
            routes,
            error_pages,
        });
    }
    vhosts
}

/// A vhost's hosts with their spans; absent means `["*"]`, the default vhost.
fn vhost_hosts(item: &Spanned<RawVhost>, r: &mut Report) -> Vec<(String, Range<usize>)> {
    let Some(hosts) = &item.get_ref().hosts else {
        return vec![("*".to_owned(), item.span())];
    };
    if hosts.get_ref().is_empty() {
        r.error(
            &hosts.span(),
            "hosts is empty: list names, or [\"*\"] for the default vhost",
        );
    }
    let checked = hosts.get_ref().iter();
    checked
        .filter_map(|h| host_pattern(r, h, true).map(|name| (name, h.span())))
        .collect()
}

fn routes(raw: &[Spanned<RawRoute>], upstreams: &[Upstream], r: &mut Report) -> Vec<Route> {
    // Routes with no method or header condition, by matcher, to find ones that can never match.
    let mut unconditional: Vec<(RouteMatch, usize)> = Vec::new();
    let mut routes = Vec::new();
    for item in raw {
        let Some(route) = route(item, upstreams, r) else {
            continue;
        };
        if route.methods.is_none() && route.headers.is_empty() {
            if let Some((_, first)) = unconditional.iter().find(|(m, _)| *m == route.matcher) {
                let message = format!(
                    "route can never match: the route at line {first} has the same path match"
                );
                r.error(&item.span(), message);
            } else {
                unconditional.push((route.matcher.clone(), r.line(&item.span())));
            }
        }
        routes.push(route);
    }
    routes
}

/// One route, or `None` when its matcher or action is missing or doubled (already reported).
fn route(item: &Spanned<RawRoute>, upstreams: &[Upstream], r: &mut Report) -> Option<Route> {
    let raw = item.get_ref();
    let matcher = matcher(item, r);
    let action = action(item, upstreams, r);
    super::files::orphans(raw, r);
    let cache = raw.cache.as_ref().is_some_and(|c| *c.get_ref());
    if let (true, Some(flag), Some(false)) =
        (cache, &raw.cache, action.as_ref().map(Action::is_proxy))
    {
        r.error(&flag.span(), "cache = true only applies to proxy routes");
    }
    let cache_ttl = raw
        .cache_ttl
        .as_ref()
        .map(|ttl| duration_or(r, "cache_ttl", Some(ttl), Default::default()));
    if let (Some(ttl), false) = (&raw.cache_ttl, cache) {
        r.error(&ttl.span(), "cache_ttl needs cache = true");
    }
    let request_no_cache = (raw.request_no_cache.as_ref()).map(|v| {
        if !cache {
            r.error(&v.span(), "request_no_cache needs cache = true");
        }
        super::request_no_cache(v, r)
    });
    let cache_set_cookie = (raw.cache_set_cookie.as_ref())
        .map_or_else(CacheSetCookie::default, |v| cache_set_cookie(v, cache, r));
    let methods = raw.methods.as_ref().map(|m| methods(m, r));
    let headers = raw
        .headers
        .as_ref()
        .map_or_else(Vec::new, |h| header_fields(r, h.get_ref(), false));
    let request_headers = header_edits(raw.request_headers.as_ref(), r);
    let response_headers = header_edits(raw.response_headers.as_ref(), r);
    let access = access(raw, r);
    let auth_basic = (raw.auth_basic.as_ref()).and_then(|a| super::client::auth_basic(a, r));
    let rate = super::client::route_rate(raw, r);
    let compress = (raw.compress.as_ref()).map(|c| super::compress::compress(c, &action, r));
    let intercept_errors = raw.intercept_errors.as_ref().is_some_and(|i| *i.get_ref());
    if let (true, Some(flag), Some(false)) = (
        intercept_errors,
        &raw.intercept_errors,
        action.as_ref().map(Action::is_proxy),
    ) {
        r.error(
            &flag.span(),
            "intercept_errors only applies to proxy routes",
        );
    }
    let allow_trace = raw.allow_trace.as_ref().is_some_and(|t| *t.get_ref());
    let upgrade = upgrade(raw, &action, upstreams, r);
    let rewrite = super::rewrite::path_rewrite(raw, matcher.as_ref(), &action, r);
    let timeouts = super::timeouts::proxy_timeouts(raw, &action, r);
    let body_bytes_max = super::timeouts::body_bytes_max(raw, &action, r);
    Some(Route {
        matcher: matcher?,
        methods,
        headers,
        action: action?,
        cache,
        cache_ttl,
        request_no_cache,
        cache_set_cookie,
        access,
        auth_basic,
        rate,
        request_headers,
        response_headers,
        compress,
        intercept_errors,
        allow_trace,
        upgrade,
        rewrite,
        timeouts,
        body_bytes_max,
    })
}

/// The default `tunnel_idle_timeout`: what nginx's `proxy_read_timeout` gives a WebSocket.
const TUNNEL_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// A route's `upgrade` and `tunnel_idle_timeout`: tokens only (RFC 9110 §5.6.2), lowercase,
/// on proxy routes only, to an upstream spoken to in HTTP/1.1 (an upgrade does not cross
/// HTTP/2: it would reach an `h2`, `h2c` or `auto` origin as a plain request).
fn upgrade(
    raw: &RawRoute,
    action: &Option<Action>,
    upstreams: &[Upstream],
    r: &mut Report,
) -> Option<Upgrade> {
    if let (Some(t), None) = (&raw.tunnel_idle_timeout, &raw.upgrade) {
        r.error(&t.span(), "tunnel_idle_timeout needs upgrade = [..]");
    }
    let list = raw.upgrade.as_ref()?;
    if action.as_ref().is_some_and(|a| !a.is_proxy()) {
        r.error(&list.span(), "upgrade only applies to proxy routes");
    }
    if let Some(Action::Proxy { upstream }) = action
        && let Some(target) = upstreams.iter().find(|u| u.name == *upstream)
        && target.protocol != OriginProtocol::Http1
    {
        let message = format!(
            "upgrade needs an upstream spoken to in HTTP/1.1, and {upstream:?} has protocol = \
             {:?}: tunnels do not cross HTTP/2; give this route an upstream of the same servers \
             with protocol = \"http1\"",
            target.protocol.name()
        );
        r.error(&list.span(), message);
    }
    if list.get_ref().is_empty() {
        r.error(
            &list.span(),
            "upgrade: name at least one protocol, as in [\"websocket\"]",
        );
    }
    let mut protocols = Vec::new();
    for item in list.get_ref() {
        let token = item.get_ref();
        let valid = !token.is_empty()
            && token.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(&b)
            });
        if !valid {
            let message = format!(
                "upgrade: {token:?} is not a lowercase protocol token, such as \"websocket\""
            );
            r.error(&item.span(), message);
        } else if token == "h2c" {
            r.error(
                &item.span(),
                "upgrade: h2c is refused (served as HTTP/1.1); use a listener's protocols",
            );
        } else if !protocols.contains(token) {
            protocols.push(token.clone());
        }
    }
    let tunnel_idle_timeout = super::value::timeout_or(
        r,
        "tunnel_idle_timeout",
        raw.tunnel_idle_timeout.as_ref(),
        TUNNEL_IDLE_TIMEOUT,
    );
    Some(Upgrade {
        protocols,
        tunnel_idle_timeout,
    })
}

/// A route's `allow` and `deny`. A network in both lists would leave the answer to a rule
/// the reader cannot see, so it is an error.
fn access(raw: &RawRoute, r: &mut Report) -> Access {
    let allow = raw
        .allow
        .as_ref()
        .map_or_else(Vec::new, |l| super::networks(l, r));
    let deny = raw
        .deny
        .as_ref()
        .map_or_else(Vec::new, |l| super::networks(l, r));
    if let Some(list) = &raw.allow {
        for item in list.get_ref() {
            let net = item.get_ref().parse::<crate::IpNet>();
            if net.is_ok_and(|net| deny.contains(&net)) {
                let message = format!("{:?} is in both allow and deny", item.get_ref());
                r.error(&item.span(), message);
            }
        }
    }
    // An empty list would read as "nobody" to some and "no rule" to others.
    for (key, list) in [("allow", &raw.allow), ("deny", &raw.deny)] {
        if let Some(list) = list.as_ref().filter(|l| l.get_ref().is_empty()) {
            let message = format!("{key} is empty: list networks, or use block = 403");
            r.error(&list.span(), message);
        }
    }
    Access { allow, deny }
}

/// A route's `cache_set_cookie`: pass, strip or store, and only on a cached route.
fn cache_set_cookie(value: &Str, cache: bool, r: &mut Report) -> CacheSetCookie {
    if !cache {
        r.error(&value.span(), "cache_set_cookie needs cache = true");
    }
    CacheSetCookie::from_name(value.get_ref()).unwrap_or_else(|| {
        let message = format!(
            "unknown cache_set_cookie {:?}: use pass, strip or store",
            value.get_ref()
        );
        r.error(&value.span(), message);
        CacheSetCookie::default()
    })
}

/// Cached routes keep the targeted cache-control fields meant for this cache alone from
/// clients: their `response_headers.remove` gets each one the route does not set itself.
/// Those are `cache.target_header` and `Surrogate-Control` (surrogates remove it, W3C Edge
/// Architecture); `CDN-Cache-Control` is for every CDN on the path, which "will typically
/// forward" it (RFC 9213 §3), so it goes only with `cache.strip_cdn_cache_control`.
pub(super) fn hide_targeted(vhosts: &mut [Vhost], cache: &Cache) {
    let standard = TARGETED_HEADERS.map(HeaderName::from_static);
    let names: Vec<&HeaderName> = (cache.target_header.iter().chain(&standard))
        .filter(|name| cache.strip_cdn_cache_control || *name != "cdn-cache-control")
        .collect();
    for route in vhosts.iter_mut().flat_map(|v| &mut v.routes) {
        let edits = &mut route.response_headers;
        for &name in names.iter().filter(|_| route.cache) {
            if !edits.sets(name) && !edits.remove.contains(name) {
                edits.remove.push(name.clone());
            }
        }
    }
}

/// `server.request_id_header`: every proxy route sets the field to `$request_id` on the way
/// to the origin, unless the route sets it itself.
pub(super) fn send_request_id(vhosts: &mut [Vhost], name: Option<&HeaderName>) {
    let Some(name) = name else { return };
    let id = crate::Template(vec![crate::Part::Var(crate::Var::RequestId)]);
    for route in vhosts.iter_mut().flat_map(|v| &mut v.routes) {
        let edits = &mut route.request_headers;
        if route.action.is_proxy() && !edits.sets(name) {
            edits.remove.retain(|n| n != name);
            edits.templates.push((name.clone(), id.clone()));
        }
    }
}

fn matcher(item: &Spanned<RawRoute>, r: &mut Report) -> Option<RouteMatch> {
    let raw = item.get_ref();
    let given = [
        ("exact", &raw.exact),
        ("prefix", &raw.prefix),
        ("regex", &raw.regex),
        ("template", &raw.template),
    ];
    let given: Vec<(&str, &Str)> = given
        .into_iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| (k, v)))
        .collect();
    let [(kind, value)] = given[..] else {
        if let [(first, _), (second, value), ..] = given[..] {
            r.error(
                &value.span(),
                format!("route has both {first} and {second}: give one path match"),
            );
        } else {
            r.error(
                &item.span(),
                "route has no path match: give one of exact, prefix, regex or template",
            );
        }
        return None;
    };
    let text = value.get_ref();
    let (matcher, error) = match kind {
        "exact" => (RouteMatch::Exact(text.clone()), path_error(text)),
        "prefix" => (RouteMatch::Prefix(text.clone()), path_error(text)),
        "regex" => (RouteMatch::Regex(text.clone()), regex_error(text)),
        _ => (RouteMatch::Template(text.clone()), template_error(text)),
    };
    match error {
        None => Some(matcher),
        Some(error) => {
            r.error(&value.span(), format!("bad {kind} {text:?}: {error}"));
            None
        }
    }
}

fn action(item: &Spanned<RawRoute>, upstreams: &[Upstream], r: &mut Report) -> Option<Action> {
    let raw = item.get_ref();
    let given = [
        ("respond", raw.respond.as_ref().map(Spanned::span)),
        ("redirect", raw.redirect.as_ref().map(Spanned::span)),
        ("block", raw.block.as_ref().map(Spanned::span)),
        ("proxy", raw.proxy.as_ref().map(Spanned::span)),
        ("root", raw.root.as_ref().map(Spanned::span)),
    ];
    let given: Vec<(&str, Range<usize>)> = given
        .into_iter()
        .filter_map(|(k, s)| s.map(|s| (k, s)))
        .collect();
    match &given[..] {
        [_] => {}
        [(first, _), (second, span), ..] => {
            r.error(
                span,
                format!("route has both {first} and {second}: give one action"),
            );
            return None;
        }
        [] => {
            r.error(
                &item.span(),
                "route has no action: give one of respond, redirect, block, proxy or root",
            );
            return None;
        }
    }
    if let Some(respond) = &raw.respond {
        return self::respond(respond, r);
    }
    if let Some(redirect) = &raw.redirect {
        return self::redirect(redirect.get_ref(), r);
    }
    if let Some(block) = &raw.block {
        let status = status(
            r,
            "block",
            block,
            |c| (400..=599).contains(&c),
            "400 to 599",
        )?;
        return Some(Action::Block { status });
    }
    if let Some(root) = &raw.root {
        return super::files::files(root, raw, r);
    }
    let proxy = raw.proxy.as_ref()?; // Exactly one action is given, and it was none of the others.
    proxy_target(proxy, upstreams, r)
}

fn respond(raw: &Spanned<RawRespond>, r: &mut Report) -> Option<Action> {
    let respond = raw.get_ref();
    let status = match &respond.status {
        None => Some(http::StatusCode::OK),
        Some(value) => status(
            r,
            "respond",
            value,
            |c| (200..=599).contains(&c),
            "200 to 599",
        ),
    };
    let body = respond.body.clone().unwrap_or_default();
    // RFC 9110 §15.3.5 and §15.4.5: 204 and 304 responses end after the header section.
    if let Some(s @ (http::StatusCode::NO_CONTENT | http::StatusCode::NOT_MODIFIED)) = status
        && !body.is_empty()
    {
        r.error(
            &raw.span(),
            format!("a {} response cannot have a body", s.as_u16()),
        );
    }
    let headers = respond
        .headers
        .as_ref()
        .map_or_else(Vec::new, |h| header_fields(r, h.get_ref(), true));
    Some(Action::Respond {
        status: status?,
        body,
        headers,
    })
}

fn redirect(raw: &RawRedirect, r: &mut Report) -> Option<Action> {
    let status = match &raw.status {
        None => Some(http::StatusCode::FOUND),
        Some(value) => status(
            r,
            "redirect",
            value,
            |c| matches!(c, 301..=303 | 307 | 308),
            "301, 302, 303, 307 or 308",
        ),
    };
    let location = raw.location.get_ref();
    if let Some(error) = location_error(location) {
        r.error(
            &raw.location.span(),
            format!("bad location {location:?}: {error}"),
        );
        return None;
    }
    Some(Action::Redirect {
        status: status?,
        location: location.clone(),
    })
}

fn proxy_target(proxy: &Str, upstreams: &[Upstream], r: &mut Report) -> Option<Action> {
    let name = proxy.get_ref();
    if upstreams.iter().any(|u| u.name == *name) {
        return Some(Action::Proxy {
            upstream: name.clone(),
        });
    }
    let defined: Vec<String> = upstreams.iter().map(|u| format!("{:?}", u.name)).collect();
    let hint = if defined.is_empty() {
        "there is no [[upstream]]".to_owned()
    } else {
        format!("defined: {}", defined.join(", "))
    };
    r.error(&proxy.span(), format!("unknown upstream {name:?}; {hint}"));
    None
}

fn methods(raw: &List<String>, r: &mut Report) -> Vec<http::Method> {
    if raw.get_ref().is_empty() {
        r.error(
            &raw.span(),
            "methods is empty: leave it out to match every method",
        );
    }
    raw.get_ref().iter().filter_map(|m| method(r, m)).collect()
}

/// `request_headers` or `response_headers`: no name set twice, none both set and removed.
fn header_edits(raw: Option<&Spanned<RawHeaderEdits>>, r: &mut Report) -> HeaderEdits {
    let Some(raw) = raw else {
        return HeaderEdits::default();
    };
    let raw = raw.get_ref();
    let mut edits = HeaderEdits::default();
    for (name, raw_value) in raw.set.as_ref().map_or(&[][..], |s| &s.get_ref().0[..]) {
        let checked = header_name(r, name).and_then(|n| editable(r, n, name));
        let (Some(checked), Some(value)) = (checked, header_value(r, raw_value)) else {
            continue;
        };
        if edits.sets(&checked) {
            r.error(
                &name.span(),
                format!("header {:?} is set twice", checked.as_str()),
            );
        }
        match crate::parse_template(value.to_str().unwrap_or("")) {
            Ok(None) => edits.set.push((checked, value)),
            Ok(Some(template)) => edits.templates.push((checked, template)),
            Err(message) => r.error(&raw_value.span(), message),
        }
    }
    for name in raw.remove.as_ref().map_or(&[][..], |l| &l.get_ref()[..]) {
        let Some(checked) = header_name(r, name).and_then(|n| editable(r, n, name)) else {
            continue;
        };
        if edits.sets(&checked) {
            r.error(
                &name.span(),
                format!("header {:?} is both set and removed", checked.as_str()),
            );
        }
        edits.remove.push(checked);
    }
    edits
}

/// Why `path` cannot be an exact or prefix match, if it cannot: it is compared with the
/// request path, which starts with '/' and excludes the query (RFC 9112 §3.2.1).
fn path_error(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return Some("a path starts with \"/\"".to_owned());
    }
    if path.contains(['?', '#']) {
        return Some("paths are matched without the query: remove \"?...\"".to_owned());
    }
    if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some("a path has no spaces or control characters".to_owned());
    }
    None
}

/// Why `pattern` does not compile, if it does not, as one line: the regex crate's message is
/// a multi-line drawing whose last line says what is wrong.
fn regex_error(pattern: &str) -> Option<String> {
    let error = match regex::Regex::new(pattern) {
        Ok(regex) if regex.capture_names().flatten().count() > CAPTURES_MAX => {
            return Some(format!("more than {CAPTURES_MAX} named groups"));
        }
        Ok(_) => return None,
        Err(error) => error.to_string(),
    };
    let last = error
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("does not compile");
    Some(last.trim().trim_start_matches("error: ").to_owned())
}

/// Why `template` is not a template, if it is not. A template is '/'-separated segments, each
/// literal text with at most one `{ident}` capture in it (`/users/{id}`, `/files/{name}.json`),
/// every capture named once. The bounds are the router's: it rejects more, without a position.
fn template_error(template: &str) -> Option<String> {
    let Some(rest) = template.strip_prefix('/') else {
        return Some("a template starts with \"/\"".to_owned());
    };
    let mut names: Vec<&str> = Vec::new();
    for (i, segment) in rest.split('/').enumerate() {
        if i == TEMPLATE_SEGMENTS_MAX {
            return Some(format!("more than {TEMPLATE_SEGMENTS_MAX} segments"));
        }
        let opens = segment.matches('{').count();
        if opens != segment.matches('}').count() {
            return Some(format!("segment {segment:?} has unbalanced braces"));
        }
        if opens > 1 {
            return Some(format!("segment {segment:?} has more than one capture"));
        }
        let (Some(open), Some(close)) = (segment.find('{'), segment.find('}')) else {
            continue;
        };
        let Some(name) = segment.get(open + 1..close) else {
            return Some(format!("segment {segment:?} has unbalanced braces"));
        };
        let mut chars = name.chars();
        let ident = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ident {
            return Some(format!(
                "capture {{{name}}}: a capture name is an identifier, as in {{name}}"
            ));
        }
        if names.contains(&name) {
            return Some(format!("capture {{{name}}} appears twice"));
        }
        names.push(name);
    }
    if names.len() > CAPTURES_MAX {
        return Some(format!("more than {CAPTURES_MAX} captures"));
    }
    None
}

/// Why `location` cannot be a redirect target, if it cannot: it must be a valid header value
/// once its `$variables` are replaced, and name only variables the router knows.
fn location_error(location: &str) -> Option<String> {
    if location.is_empty() {
        return Some("location is empty".to_owned());
    }
    if !location.is_ascii() || http::HeaderValue::from_str(location).is_err() {
        return Some(
            "only visible ASCII is allowed: percent-encode the rest (RFC 3986 §2.1)".to_owned(),
        );
    }
    let mut rest = location;
    while let Some(dollar) = rest.find('$') {
        rest = &rest[dollar + 1..];
        let len = rest
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        let name = &rest[..len];
        // A '$' not followed by a name is a literal dollar sign.
        if len > 0 && !REDIRECT_VARIABLES.contains(&name) {
            let known: Vec<String> = REDIRECT_VARIABLES.iter().map(|v| format!("${v}")).collect();
            return Some(format!(
                "unknown variable \"${name}\": use {}",
                known.join(", ")
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates() {
        let ok = [
            "/",
            "/users/{name}/orders",
            "/{a}/{b_2}/x",
            "/static/file.css",
            "/{_}",
            "/files/{name}.json",
            "/v{n}",
        ];
        for template in ok {
            assert_eq!(template_error(template), None, "{template}");
        }
        let bad = [
            ("users/{name}", "a template starts with \"/\""),
            ("/users/{name", "segment \"{name\" has unbalanced braces"),
            ("/users/name}", "segment \"name}\" has unbalanced braces"),
            ("/users/}name{", "segment \"}name{\" has unbalanced braces"),
            (
                "/users/{{name}",
                "segment \"{{name}\" has unbalanced braces",
            ),
            ("/a/{x}{y}", "segment \"{x}{y}\" has more than one capture"),
            (
                "/a/{}",
                "capture {}: a capture name is an identifier, as in {name}",
            ),
            (
                "/a/{1x}",
                "capture {1x}: a capture name is an identifier, as in {name}",
            ),
            (
                "/a/{x-y}",
                "capture {x-y}: a capture name is an identifier, as in {name}",
            ),
            ("/{id}/{id}", "capture {id} appears twice"),
            (
                "/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}",
                "more than 8 captures",
            ),
        ];
        for (template, error) in bad {
            assert_eq!(
                template_error(template).as_deref(),
                Some(error),
                "{template}"
            );
        }
        let deep = "/a".repeat(TEMPLATE_SEGMENTS_MAX);
        assert_eq!(template_error(&deep), None);
        assert_eq!(
            template_error(&format!("{deep}/a")).as_deref(),
            Some("more than 64 segments")
        );
    }

    #[test]
    fn paths() {
        assert_eq!(path_error("/static/"), None);
        assert_eq!(
            path_error("static/").as_deref(),
            Some("a path starts with \"/\"")
        );
        assert_eq!(
            path_error("/a?b").as_deref(),
            Some("paths are matched without the query: remove \"?...\"")
        );
        assert_eq!(
            path_error("/a b").as_deref(),
            Some("a path has no spaces or control characters")
        );
    }

    #[test]
    fn regexes() {
        assert_eq!(regex_error("^/v[0-9]+/"), None);
        assert_eq!(
            regex_error("^/v[0-9+/").as_deref(),
            Some("unclosed character class")
        );
    }

    #[test]
    fn locations() {
        for ok in [
            "https://$host$request_uri",
            "/new",
            "$scheme://example.test$uri?a=1",
            "/cost$",
        ] {
            assert_eq!(location_error(ok), None, "{ok}");
        }
        let unknown = "use $scheme, $host, $request_uri, $uri";
        assert_eq!(
            location_error("https://$hostname/").unwrap(),
            format!("unknown variable \"$hostname\": {unknown}")
        );
        assert_eq!(location_error("").as_deref(), Some("location is empty"));
        let ascii = "only visible ASCII is allowed: percent-encode the rest (RFC 3986 §2.1)";
        assert_eq!(location_error("/a\nb").as_deref(), Some(ascii));
        assert_eq!(location_error("/café").as_deref(), Some(ascii));
    }
}
