//! A proxy route's `strip_prefix`, `upstream_prefix` and `rewrite`: at most one, on proxy
//! routes only, each checked against the route's path match (a prefix to replace, or the
//! captures a template may name).

use crate::diagnostics::Report;
use crate::model::{Action, RouteMatch};
use crate::raw::RawRoute;
use crate::rewrite::{PathRewrite, parse_rewrite, path_error};

/// The route's upstream path rewrite, or `None` (none given, or an error reported).
pub(super) fn path_rewrite(
    raw: &RawRoute,
    matcher: Option<&RouteMatch>,
    action: &Option<Action>,
    r: &mut Report,
) -> Option<PathRewrite> {
    let strip = raw.strip_prefix.as_ref().filter(|s| *s.get_ref());
    let given = [
        ("strip_prefix", strip.map(|s| s.span())),
        (
            "upstream_prefix",
            raw.upstream_prefix.as_ref().map(|s| s.span()),
        ),
        ("rewrite", raw.rewrite.as_ref().map(|s| s.span())),
    ];
    let mut given = given.into_iter().filter_map(|(k, s)| s.map(|s| (k, s)));
    let (key, span) = given.next()?;
    if let Some((second, span)) = given.next() {
        r.error(
            &span,
            format!("route has both {key} and {second}: give one upstream path"),
        );
        return None;
    }
    if action.as_ref().is_some_and(|a| !a.is_proxy()) {
        r.error(&span, format!("{key} only applies to proxy routes"));
        return None;
    }
    let matcher = matcher?;
    let result = match (key, matcher) {
        ("rewrite", RouteMatch::Prefix(_)) => Err(
            "rewrite is for exact, template and regex routes: on a prefix route use \
             strip_prefix or upstream_prefix"
                .to_owned(),
        ),
        ("rewrite", _) => {
            let text = raw.rewrite.as_ref().map_or("", |t| t.get_ref());
            parse_rewrite(text, &capture_names(matcher)).map(PathRewrite::Template)
        }
        (_, RouteMatch::Prefix(from)) if from.ends_with('/') => {
            let to = (raw.upstream_prefix.as_ref()).map_or("/", |t| t.get_ref());
            prefix_error(to).map_or_else(
                || {
                    Ok(PathRewrite::Prefix {
                        from: from.clone(),
                        to: to.to_owned(),
                    })
                },
                Err,
            )
        }
        (_, RouteMatch::Prefix(_)) => Err(format!(
            "{key} needs a prefix that ends with \"/\", so that what follows it is whole segments"
        )),
        _ => Err(format!(
            "{key} only applies to prefix routes: use rewrite on exact, template and regex routes"
        )),
    };
    result
        .map_err(|e| r.error(&span, format!("{key}: {e}")))
        .ok()
}

/// Why `to` cannot replace a prefix: it is a normal path that starts and ends with `/`.
fn prefix_error(to: &str) -> Option<String> {
    if !to.ends_with('/') {
        return Some("an upstream prefix ends with \"/\"".to_owned());
    }
    path_error(to)
}

/// The names a `rewrite` may use: the template's `{name}`s or the regex's named groups.
fn capture_names(matcher: &RouteMatch) -> Vec<String> {
    match matcher {
        RouteMatch::Template(t) => t
            .split('{')
            .skip(1)
            .filter_map(|s| s.split_once('}'))
            .map(|(name, _)| name.to_owned())
            .collect(),
        RouteMatch::Regex(p) => regex::Regex::new(p).map_or_else(
            |_| Vec::new(),
            |re| re.capture_names().flatten().map(str::to_owned).collect(),
        ),
        RouteMatch::Exact(_) | RouteMatch::Prefix(_) => Vec::new(),
    }
}
