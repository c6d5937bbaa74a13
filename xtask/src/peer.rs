//! The peer servers of `--vs`: nginx, h2o and varnish. Each has a module that translates a
//! scenario's Squall config into that server's own config and command line (`nginx`, `h2o`,
//! `varnish`); this one holds what they share: where a peer keeps its files, how its version is
//! read, the reading of Squall's routes, upstreams and certificate, and the dispatch.
//!
//! A peer is started, probed, measured and stopped exactly as Squall is (`server.rs`): pinned
//! with `taskset` to the server CPU, its CPU time read from `/proc` for its process and any
//! children (varnish serves from a child of its manager process). A scenario a peer cannot
//! serve the same way is "not supported by PEER: why", never a different benchmark.

use std::path::{Path, PathBuf};

use toml::{Table, Value};

use crate::cli::Peer;
use crate::scenario::Protocol;

/// Where a peer keeps its files (everything inside one run folder, so it needs no root-owned
/// path), the port it listens on, and what h2load will speak to it.
#[derive(Debug, Clone)]
pub struct Layout<'a> {
    pub dir: &'a Path,
    pub port: u16,
    pub protocol: Protocol,
    /// Whether xtask runs as root: h2o then needs `user: root`, or it drops to `nobody`.
    pub root: bool,
    /// `--workers`: nginx's `worker_processes` (each pinned to one of `server_cpus`, as Squall
    /// pins its workers) and h2o's `num-threads`; one worker in one process when `None`.
    pub workers: Option<u32>,
    /// The CPUs the server is pinned to.
    pub server_cpus: &'a [usize],
}

/// What to start for a peer: its arguments, the files to write before (config, bodies), and
/// the certificate to generate before, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub args: Vec<String>,
    pub files: Vec<(PathBuf, Vec<u8>)>,
    pub self_signed: Option<SelfSigned>,
}

impl Peer {
    /// The program on `PATH`.
    pub fn program(self) -> &'static str {
        match self {
            Peer::Nginx => "nginx",
            Peer::H2o => "h2o",
            Peer::Varnish => "varnishd",
        }
    }

    /// The name used in "not supported by NAME".
    pub fn short(self) -> &'static str {
        match self {
            Peer::Nginx => "nginx",
            Peer::H2o => "h2o",
            Peer::Varnish => "varnish",
        }
    }

    /// The Debian package that has the program.
    pub fn package(self) -> &'static str {
        match self {
            Peer::Nginx => "nginx",
            Peer::H2o => "h2o",
            Peer::Varnish => "varnish",
        }
    }

    /// The argument that makes the program print its version.
    pub fn version_arg(self) -> &'static str {
        match self {
            Peer::Nginx => "-v",
            Peer::H2o => "-v",
            Peer::Varnish => "-V",
        }
    }

    /// `nginx/1.22.1`, `h2o/2.2.5`, `varnish-7.1.1` from what the version argument printed
    /// (stdout and stderr together; nginx and varnishd print to stderr).
    pub fn version(self, printed: &str) -> String {
        let first = printed.lines().next().unwrap_or("").trim();
        let words: Vec<&str> = first.split_whitespace().collect();
        let found = match self {
            // nginx version: nginx/1.22.1
            Peer::Nginx => words.last().map(|w| w.to_string()),
            // h2o version 2.2.5
            Peer::H2o => words.get(2).map(|v| format!("h2o/{v}")),
            // varnishd (varnish-7.1.1 revision 7cee1c5...)
            Peer::Varnish => words.get(1).map(|w| w.trim_start_matches('(').to_string()),
        };
        found
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| self.short().to_string())
    }
}

/// How to start `peer` on a Squall config (listen address already set, `ORIGIN` replaced), or
/// why it cannot serve it.
pub fn launch(peer: Peer, squall: &Table, layout: &Layout) -> Result<Launch, String> {
    if layout.protocol == Protocol::H3 {
        return Err(format!(
            "HTTP/3 ({} as installed here serves none)",
            peer.short()
        ));
    }
    match peer {
        Peer::Nginx => crate::nginx::launch(squall, layout),
        Peer::H2o => crate::h2o::launch(squall, layout),
        Peer::Varnish => crate::varnish::launch(squall, layout),
    }
}

/// A self-signed certificate for `hosts` that the caller generates with `openssl req`.
#[derive(Debug, Clone, PartialEq)]
pub struct SelfSigned {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub hosts: Vec<String>,
}

impl SelfSigned {
    /// `openssl req` arguments for an ECDSA P-256 key and a certificate signed with it
    /// (ecdsa-with-SHA256), valid for two days, with the hosts as CN and subjectAltName.
    pub fn openssl_args(&self) -> Vec<String> {
        let first = self.hosts.first().map_or("localhost", String::as_str);
        let names: Vec<String> = self.hosts.iter().map(|h| format!("DNS:{h}")).collect();
        let mut args: Vec<String> = [
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-sha256",
            "-nodes",
            "-days",
            "2",
            "-subj",
        ]
        .map(String::from)
        .to_vec();
        args.push(format!("/CN={first}"));
        if !names.is_empty() {
            args.push("-addext".into());
            args.push(format!("subjectAltName={}", names.join(",")));
        }
        args.push("-keyout".into());
        args.push(self.key.to_string_lossy().into_owned());
        args.push("-out".into());
        args.push(self.cert.to_string_lossy().into_owned());
        args
    }
}

/// The certificate and key of the one `[[certificate]]` entry, and what to generate for a
/// `self_signed` one (an ECDSA P-256 certificate in `dir`, as Squall makes in memory).
pub fn certificate(
    squall: &Table,
    dir: &Path,
) -> Result<(PathBuf, PathBuf, Option<SelfSigned>), String> {
    let entries = squall
        .get("certificate")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let [entry] = entries else {
        return Err(format!(
            "{} [[certificate]] entries (a peer server is given exactly one)",
            entries.len()
        ));
    };
    let entry = entry.as_table().ok_or("[[certificate]] is not a table")?;
    let text = |key: &str| entry.get(key).and_then(Value::as_str).map(PathBuf::from);
    if entry.get("self_signed").and_then(Value::as_bool) == Some(true) {
        let hosts: Vec<String> = entry
            .get("hosts")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .map(|h| h.as_str().map(String::from).ok_or("a host is not a string"))
            .collect::<Result<_, _>>()?;
        if let Some(odd) = hosts.iter().find(|h| {
            h.is_empty()
                || !h
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '*'))
        }) {
            return Err(format!("a self-signed certificate for {odd:?}"));
        }
        let generated = SelfSigned {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
            hosts,
        };
        return Ok((
            generated.cert.clone(),
            generated.key.clone(),
            Some(generated),
        ));
    }
    match (text("cert"), text("key")) {
        (Some(cert), Some(key)) => Ok((cert, key, None)),
        _ => Err("a [[certificate]] without self_signed or cert and key".into()),
    }
}

/// The one vhost, which must catch every host (`hosts = ["*"]`): peers get one server block.
pub fn single_catch_all_vhost(squall: &Table) -> Result<&Table, String> {
    let vhosts = squall
        .get("vhost")
        .and_then(Value::as_array)
        .ok_or("no [[vhost]]")?;
    let [vhost] = vhosts.as_slice() else {
        return Err("more than one [[vhost]]".into());
    };
    let vhost = vhost.as_table().ok_or("[[vhost]] is not a table")?;
    let catch_all = vhost
        .get("hosts")
        .and_then(Value::as_array)
        .is_some_and(|hosts| hosts.iter().any(|h| h.as_str() == Some("*")));
    if !catch_all {
        return Err("a vhost that is not hosts = [\"*\"]".into());
    }
    Ok(vhost)
}

/// The routes of the one catch-all vhost, read.
pub fn routes(squall: &Table) -> Result<Vec<Route<'_>>, String> {
    let vhost = single_catch_all_vhost(squall)?;
    vhost
        .get("route")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|route| Route::read(route.as_table().ok_or("a route is not a table")?))
        .collect()
}

/// How a route matches the path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Matcher<'a> {
    Exact(&'a str),
    Prefix(&'a str),
    Regex(&'a str),
}

/// What a route does, of what peers can be asked to do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action<'a> {
    /// A fixed answer: `{ status, body, headers }`.
    Respond(&'a Table),
    /// Forward to the named `[[upstream]]`, through the cache with `cache = true`, compressing
    /// responses as the route's `compress = { types, min_bytes, level }` says, if it has one.
    Proxy {
        upstream: &'a str,
        cache: bool,
        compress: Option<&'a Table>,
    },
    /// Serve files from a directory (`root`), the path appended as nginx's `root` does.
    Files { root: &'a str },
}

/// One route, as far as peers translate routes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Route<'a> {
    pub matcher: Matcher<'a>,
    pub action: Action<'a>,
}

impl<'a> Route<'a> {
    /// Reads a `[[vhost.route]]`; a key no peer translates (`redirect`, `cache_ttl`, header
    /// edits ...) is "routes with `KEY`".
    pub fn read(route: &'a Table) -> Result<Route<'a>, String> {
        let mut matcher = None;
        for (key, value) in route {
            let text = || value.as_str().ok_or("a route pattern is not a string");
            let found = match key.as_str() {
                "exact" => Matcher::Exact(text()?),
                "prefix" => Matcher::Prefix(text()?),
                "regex" => Matcher::Regex(text()?),
                "respond" | "proxy" | "cache" | "root" | "compress" => continue,
                other => return Err(format!("routes with `{other}`")),
            };
            if matcher.replace(found).is_some() {
                return Err("a route with two matchers".into());
            }
        }
        let matcher = matcher.ok_or("a route without exact, prefix or regex")?;
        let cache = route.get("cache").and_then(Value::as_bool).unwrap_or(false);
        let compress = match route.get("compress") {
            Some(table) => Some(table.as_table().ok_or("compress is not a table")?),
            None => None,
        };
        let action = match (route.get("respond"), route.get("proxy"), route.get("root")) {
            (Some(_) | None, None, _) if compress.is_some() => {
                return Err("`compress` on a route that is not a proxy route".into());
            }
            (Some(respond), None, None) if !cache => {
                Action::Respond(respond.as_table().ok_or("respond is not a table")?)
            }
            (None, Some(upstream), None) => Action::Proxy {
                upstream: upstream.as_str().ok_or("proxy is not a string")?,
                cache,
                compress,
            },
            (None, None, Some(root)) if !cache => Action::Files {
                root: root.as_str().ok_or("root is not a string")?,
            },
            _ => return Err("a route that is not one respond, one proxy or one root".into()),
        };
        Ok(Route { matcher, action })
    }
}

/// One `[[upstream]]`, as far as peers translate it.
#[derive(Debug, Clone, PartialEq)]
pub struct Upstream {
    pub name: String,
    /// `(address, weight)`
    pub servers: Vec<(String, i64)>,
    pub balance: String,
    /// `tls`, and `tls_verify` (true unless it says false).
    pub tls: bool,
    pub tls_verify: bool,
    /// `protocol`: `"http1"` (the default), `"h2c"`, `"h2"` or `"auto"`.
    pub protocol: String,
    /// The first other TLS key it sets (`ca`, `tls_server_name`, a client certificate), which
    /// no peer translates.
    pub tls_other: Option<String>,
}

/// The `[[upstream]]` called `name`.
pub fn upstream(squall: &Table, name: &str) -> Result<Upstream, String> {
    let table = squall
        .get("upstream")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .filter_map(Value::as_table)
        .find(|u| u.get("name").and_then(Value::as_str) == Some(name))
        .ok_or_else(|| format!("no [[upstream]] {name:?}"))?;
    let servers = table
        .get("servers")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|server| {
            let address = server.get("address").and_then(Value::as_str);
            let weight = server
                .get("weight")
                .and_then(Value::as_integer)
                .unwrap_or(1);
            match address {
                Some(address) if address != "ORIGIN" => Ok((address.to_string(), weight)),
                Some(_) => Err("an upstream server still written ORIGIN (no origin started)"),
                None => Err("an upstream server without an address"),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    if servers.is_empty() {
        return Err(format!("[[upstream]] {name:?} has no servers"));
    }
    let balance = table
        .get("balance")
        .and_then(Value::as_str)
        .unwrap_or("round_robin")
        .to_string();
    let flag =
        |key: &str, default: bool| table.get(key).and_then(Value::as_bool).unwrap_or(default);
    let tls_keys = [
        "ca",
        "tls_server_name",
        "tls_certificate",
        "tls_certificate_key",
    ];
    Ok(Upstream {
        name: name.to_string(),
        servers,
        balance,
        tls: flag("tls", false),
        tls_verify: flag("tls_verify", true),
        protocol: (table.get("protocol").and_then(Value::as_str))
            .unwrap_or("http1")
            .to_string(),
        tls_other: (tls_keys.iter().find(|key| table.contains_key(**key))).map(|k| k.to_string()),
    })
}

/// The first `[[listen]]`'s TLS flag, for the translators.
pub fn tls(squall: &Table) -> bool {
    crate::scenario::listen_tls(squall)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn squall(rest: &str) -> Table {
        let text = format!(
            "[[listen]]\naddress = \"127.0.0.1:1\"\n[[upstream]]\nname = \"app\"\n\
             servers = [{{ address = \"127.0.0.1:9\" }}]\n[[vhost]]\nhosts = [\"*\"]\n{rest}"
        );
        toml::from_str(&text).expect("valid toml")
    }

    #[test]
    fn versions_as_each_program_prints_them() {
        assert_eq!(
            Peer::Nginx.version("nginx version: nginx/1.22.1\n"),
            "nginx/1.22.1"
        );
        assert_eq!(
            Peer::H2o.version("h2o version 2.2.5\nOpenSSL: OpenSSL 3.0.19\n"),
            "h2o/2.2.5"
        );
        assert_eq!(
            Peer::Varnish.version("varnishd (varnish-7.1.1 revision 7cee1c5)\nCopyright"),
            "varnish-7.1.1"
        );
        assert_eq!(Peer::H2o.version(""), "h2o");
    }

    #[test]
    fn routes_are_read_or_refused_by_key() {
        let table = squall(
            "[[vhost.route]]\nexact = \"/\"\nrespond = { body = \"x\" }\n\
             [[vhost.route]]\nprefix = \"/c/\"\nproxy = \"app\"\ncache = true\n",
        );
        let read = routes(&table).expect("readable");
        assert_eq!(read[0].matcher, Matcher::Exact("/"));
        assert!(matches!(read[0].action, Action::Respond(_)));
        assert_eq!(
            read[1],
            Route {
                matcher: Matcher::Prefix("/c/"),
                action: Action::Proxy {
                    upstream: "app",
                    cache: true,
                    compress: None,
                }
            }
        );
        let ttl = squall("[[vhost.route]]\nprefix = \"/\"\nproxy = \"app\"\ncache_ttl = \"1s\"\n");
        assert_eq!(routes(&ttl), Err("routes with `cache_ttl`".into()));
        let redirect = squall("[[vhost.route]]\nprefix = \"/\"\nredirect = { location = \"/\" }\n");
        assert_eq!(routes(&redirect), Err("routes with `redirect`".into()));
        let both = squall("[[vhost.route]]\nprefix = \"/\"\nproxy = \"app\"\nrespond = {}\n");
        assert!(routes(&both).is_err());
        let gzip = squall(
            "[[vhost.route]]\nprefix = \"/\"\nproxy = \"app\"\ncompress = { level = { gzip = 6 } }\n",
        );
        let read = routes(&gzip).expect("readable");
        let Action::Proxy { compress, .. } = read[0].action else {
            panic!("a proxy route: {:?}", read[0]);
        };
        assert_eq!(
            compress.expect("compress")["level"]["gzip"].as_integer(),
            Some(6)
        );
        let not_proxied = squall("[[vhost.route]]\nprefix = \"/\"\nroot = \"/s\"\ncompress = {}\n");
        assert_eq!(
            routes(&not_proxied),
            Err("`compress` on a route that is not a proxy route".into())
        );
    }

    #[test]
    fn upstreams_by_name() {
        let table = squall("");
        let app = upstream(&table, "app").expect("defined");
        assert_eq!(app.servers, [("127.0.0.1:9".to_string(), 1)]);
        assert_eq!(app.balance, "round_robin");
        assert_eq!(
            (app.tls, app.tls_verify, app.protocol.as_str()),
            (false, true, "http1")
        );
        assert_eq!(app.tls_other, None);
        assert!(upstream(&table, "other").is_err());
        let h2: Table = toml::from_str(
            "[[upstream]]\nname = \"app\"\nservers = [{ address = \"127.0.0.1:9\" }]\n\
             tls = true\ntls_verify = false\nprotocol = \"h2\"\ntls_server_name = \"a\"\n",
        )
        .expect("valid toml");
        let h2 = upstream(&h2, "app").expect("defined");
        assert_eq!(
            (h2.tls, h2.tls_verify, h2.protocol.as_str()),
            (true, false, "h2")
        );
        assert_eq!(h2.tls_other.as_deref(), Some("tls_server_name"));
        let unresolved: Table =
            toml::from_str("[[upstream]]\nname = \"app\"\nservers = [{ address = \"ORIGIN\" }]\n")
                .expect("valid toml");
        assert!(upstream(&unresolved, "app").is_err());
    }
}
