//! Reading and rewriting a scenario's Squall config table: listeners, placeholders, routes.

use std::path::Path;

use anyhow::{Context, Result, ensure};
use toml::{Table, Value};

use super::RouteTemplate;

/// The placeholder a route template uses for its index.
const INDEX_PLACEHOLDER: &str = "{n}";
/// A bound on generated routes, so a typo cannot ask for a billion of them.
const GENERATED_ROUTES_MAX: u32 = 100_000;

/// Sets `[server] workers` (`--workers`), making the `[server]` table if there is none.
pub(super) fn set_workers(config: &mut Table, workers: u32) {
    let server = config
        .entry("server")
        .or_insert_with(|| Value::Table(Table::new()));
    if let Value::Table(server) = server {
        server.insert("workers".into(), Value::Integer(i64::from(workers)));
    }
}

/// Writes the site folder into every route whose `root` is `SITE`.
pub(super) fn replace_site(config: &mut Table, site: &Path) {
    let Some(Value::Array(vhosts)) = config.get_mut("vhost") else {
        return;
    };
    let routes = (vhosts.iter_mut().filter_map(Value::as_table_mut))
        .filter_map(|vhost| vhost.get_mut("route").and_then(Value::as_array_mut))
        .flatten()
        .filter_map(Value::as_table_mut);
    for route in routes {
        if route.get("root").and_then(Value::as_str) == Some("SITE") {
            let site = site.to_string_lossy().into_owned();
            route.insert("root".into(), Value::String(site));
        }
    }
}

/// Writes the origin's address into every upstream server named `ORIGIN`.
pub(super) fn replace_origin(config: &mut Table, origin: std::net::SocketAddr) {
    let Some(Value::Array(upstreams)) = config.get_mut("upstream") else {
        return;
    };
    for upstream in upstreams.iter_mut().filter_map(Value::as_table_mut) {
        let Some(Value::Array(servers)) = upstream.get_mut("servers") else {
            continue;
        };
        for server in servers.iter_mut().filter_map(Value::as_table_mut) {
            if server.get("address").and_then(Value::as_str) == Some("ORIGIN") {
                server.insert("address".into(), Value::String(origin.to_string()));
            }
        }
    }
}

/// The `[[upstream]]` tables with a server written `ORIGIN` (the harness's origin).
pub(super) fn origin_upstreams(config: &Table) -> impl Iterator<Item = &Table> {
    let to_origin = |upstream: &&Table| {
        (upstream
            .get("servers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten())
        .any(|server| server.get("address").and_then(Value::as_str) == Some("ORIGIN"))
    };
    config
        .get("upstream")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_table)
        .filter(to_origin)
}

pub(super) fn listens(config: &Table) -> usize {
    config
        .get("listen")
        .and_then(Value::as_array)
        .map_or(0, Vec::len)
}

/// What the (first) `[[listen]]` speaks, with CONFIG.md's defaults when it does not say.
pub fn listen_protocols(config: &Table) -> Vec<String> {
    let listen = config
        .get("listen")
        .and_then(Value::as_array)
        .and_then(|listens| listens.first());
    let given = listen
        .and_then(|listen| listen.get("protocols"))
        .and_then(Value::as_array);
    match given {
        Some(names) => names
            .iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect(),
        None if listen_tls(config) => vec!["h2".into(), "http1".into()],
        None => vec!["http1".into(), "h2c".into()],
    }
}

/// Whether the (first) `[[listen]]` terminates TLS.
pub fn listen_tls(config: &Table) -> bool {
    config
        .get("listen")
        .and_then(Value::as_array)
        .and_then(|listens| listens.first())
        .and_then(|listen| listen.get("tls"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

pub(super) fn vhosts(config: &Table) -> impl Iterator<Item = &Table> {
    config
        .get("vhost")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_table)
}

/// Puts `template.count` copies of the route first in the first vhost, `{n}` replaced by the
/// copy's index. First, so that in regex scenarios the target is really the Nth regex tried.
pub(super) fn prepend_routes(config: &mut Table, template: &RouteTemplate) -> Result<()> {
    ensure!(
        (1..=GENERATED_ROUTES_MAX).contains(&template.count),
        "routes.count must be 1..={GENERATED_ROUTES_MAX}"
    );
    let vhost = config
        .get_mut("vhost")
        .and_then(Value::as_array_mut)
        .and_then(|vhosts| vhosts.first_mut())
        .and_then(Value::as_table_mut)
        .context("[squall.routes] needs a [[vhost]] in the config")?;
    let prototype = Value::Table(template.route.clone());
    let mut routes: Vec<Value> = (0..template.count)
        .map(|n| substitute(&prototype, &n.to_string()))
        .collect();
    if let Some(Value::Array(existing)) = vhost.remove("route") {
        routes.extend(existing);
    }
    vhost.insert("route".into(), Value::Array(routes));
    Ok(())
}

/// A copy of `value` with every `{n}` in its strings replaced by `index`.
pub(super) fn substitute(value: &Value, index: &str) -> Value {
    match value {
        Value::String(text) => Value::String(text.replace(INDEX_PLACEHOLDER, index)),
        Value::Array(items) => Value::Array(items.iter().map(|v| substitute(v, index)).collect()),
        Value::Table(table) => Value::Table(
            table
                .iter()
                .map(|(k, v)| (k.clone(), substitute(v, index)))
                .collect(),
        ),
        other => other.clone(),
    }
}
