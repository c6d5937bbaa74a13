//! nginx as the peer server of `--vs nginx`: an nginx.conf generated from a scenario's Squall
//! config, so both servers answer the same requests with the same bodies.
//!
//! Only what the scenarios use is translated: one catch-all vhost whose routes are `exact`,
//! `prefix` or `regex` with a fixed `respond`, or a `proxy` to an `[[upstream]]`, cached or not.
//! Anything else is "not supported by nginx" rather than a silently different benchmark. Match
//! order is preserved: nginx tries `=` locations, then regexes in file order, then the longest
//! plain prefix, which is Squall's order too (CONFIG.md: exact, then regex in file order, then
//! longest prefix).
//!
//! A proxy route becomes `proxy_pass` to an `upstream` block with keep-alive connections as
//! Squall keeps them (256 idle, 60 s, 1,000 requests each), HTTP/1.1 to the origin, Host passed
//! through and `X-Forwarded-For`/`-Proto` set. `cache = true` adds `proxy_cache` on a
//! `proxy_cache_path` in the run folder, with `proxy_cache_lock` (Squall coalesces concurrent
//! misses too) and `sendfile` (nginx's cache is files; this is how nginx serves them best). No
//! `proxy_cache_valid`: the origin's `Cache-Control` says how long, for both servers. A route's
//! `compress` adds nginx's gzip module at the same level, types and minimum length (`gzip`).
//! An upstream with `tls = true` (and `tls_verify = false`) becomes `proxy_pass https://`; one
//! with `protocol = "h2c"` or `"h2"` becomes `grpc_pass grpc://` or `grpcs://`, nginx 1.22's
//! only HTTP/2 to upstreams (`grpc_body`); `"auto"` is not supported.
//!
//! A TLS listener (`tls = true`) becomes `listen ... ssl` with TLS 1.2 and 1.3, nginx's default
//! key exchange groups (OpenSSL's: X25519 first) and resumption as Squall offers it: TLS 1.3
//! tickets (nginx's default `ssl_session_tickets on`) and a TLS 1.2 session cache. Its
//! certificate is the one `[[certificate]]` entry: `self_signed = true` becomes an ECDSA P-256
//! certificate generated with `openssl req` into the run folder (what Squall generates in
//! memory), `cert` and `key` are served as they are.
//!
//! HTTP/2 scenarios get `listen ... http2`. Over TLS that offers ALPN `h2` and `http/1.1`, as
//! Squall's `protocols = ["h2", "http1"]`; in cleartext nginx 1.22 then speaks h2c with prior
//! knowledge only, not HTTP/1.1 on the same port, unlike Squall's `["http1", "h2c"]`, which is
//! why the probe speaks what h2load will speak.

use std::fmt::Write as _;

use toml::{Table, Value};

use crate::peer::{self, Action, Launch, Layout, Matcher, Route, SelfSigned, Upstream};
use crate::scenario::Protocol;

/// The `keys_zone` of the cache: room for about 80,000 keys, far more than any scenario has.
const CACHE_KEYS_ZONE: &str = "squall:10m";

/// An nginx.conf, and the certificate to generate before nginx starts, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Translated {
    pub text: String,
    pub self_signed: Option<SelfSigned>,
}

/// How to start nginx on a Squall config: `-p DIR -c DIR/nginx.conf -e DIR/error.log` (`-e`,
/// because nginx opens its default error log before reading the config otherwise).
pub fn launch(squall: &Table, layout: &Layout) -> Result<Launch, String> {
    let translated = config(squall, layout)?;
    let conf = layout.dir.join("nginx.conf");
    let dir = layout.dir.to_string_lossy().into_owned();
    let args = vec![
        "-p".into(),
        dir.clone(),
        "-c".into(),
        conf.to_string_lossy().into_owned(),
        "-e".into(),
        format!("{dir}/error.log"),
    ];
    Ok(Launch {
        args,
        files: vec![(conf, translated.text.into_bytes())],
        self_signed: translated.self_signed,
    })
}

/// The nginx.conf for a Squall config, or why nginx cannot serve it.
pub fn config(squall: &Table, layout: &Layout) -> Result<Translated, String> {
    let routes = peer::routes(squall)?;
    let mut locations = String::new();
    let mut upstreams: Vec<Upstream> = Vec::new();
    let mut cached = false;
    for route in &routes {
        locations.push_str(&location(route, squall)?);
        if let Action::Proxy {
            upstream, cache, ..
        } = route.action
        {
            if !upstreams.iter().any(|u| u.name == upstream) {
                upstreams.push(peer::upstream(squall, upstream)?);
            }
            cached |= cache;
        }
    }
    let mut http = String::new();
    for upstream in &upstreams {
        http.push_str(&upstream_block(upstream)?);
    }
    if cached {
        let _ = writeln!(
            http,
            "    proxy_cache_path {}/cache levels=1:2 keys_zone={CACHE_KEYS_ZONE} max_size=1g \
             inactive=1h use_temp_path=off;",
            layout.dir.display()
        );
    }
    if !peer::tls(squall) {
        return Ok(Translated {
            text: frame(layout, &http, "", &locations),
            self_signed: None,
        });
    }
    let (cert, key, self_signed) = peer::certificate(squall, layout.dir)?;
    let tls = format!(
        "        ssl_certificate {};
        ssl_certificate_key {};
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache shared:SSL:10m;
        ssl_session_tickets on;
",
        quote(&cert.to_string_lossy()),
        quote(&key.to_string_lossy()),
    );
    Ok(Translated {
        text: frame(layout, &http, &tls, &locations),
        self_signed,
    })
}

/// The fixed part: one process (`master_process off`) so that the PID started is the one that
/// serves and its CPU time is the whole cost; logs and temp files inside the run folder. `http`
/// is what proxy routes need at the `http` level (upstreams, the cache path), empty otherwise;
/// `tls` is empty in cleartext, else the `ssl_*` directives of the server.
fn frame(layout: &Layout, http: &str, tls: &str, locations: &str) -> String {
    let processes = processes(layout);
    let dir = layout.dir.display();
    let port = layout.port;
    let ssl = if tls.is_empty() { "" } else { " ssl" };
    let http2 = match layout.protocol {
        Protocol::H1 => "",
        // HTTP/3 never gets here: `peer::launch` refuses it for every peer.
        Protocol::H2 | Protocol::H3 => " http2",
    };
    format!(
        "# Generated by cargo xtask bench --vs nginx from a Squall scenario.
daemon off;
{processes}
worker_rlimit_nofile 20000;
pcre_jit on;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{
    worker_connections 16384;
}}
http {{
    access_log off;
    server_tokens off;
    tcp_nodelay on;
    keepalive_requests 1000000;
    keepalive_timeout 65s;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
{http}    server {{
        listen 127.0.0.1:{port}{ssl}{http2} backlog=4096;
        server_name _;
{tls}{locations}    }}
}}
"
    )
}

/// One process (`master_process off`) serving alone; or, with `--workers N`, a master and N
/// worker processes, each pinned to one of the server's CPUs in turn as Squall pins its workers
/// (`worker_cpu_affinity`, one bit mask per worker), the master idle. The harness counts the
/// CPU time of the master and all its children. As root the workers stay root (`user root`),
/// or they would drop to `nobody`, who may not read the run folder.
fn processes(layout: &Layout) -> String {
    let Some(workers) = layout.workers else {
        return "master_process off;\nworker_processes 1;".into();
    };
    let masks: Vec<String> = (0..workers as usize)
        .filter_map(|i| {
            let cpu = *layout
                .server_cpus
                .get(i % layout.server_cpus.len().max(1))?;
            let mut mask = "0".repeat(cpu + 1);
            mask.replace_range(0..1, "1");
            Some(mask)
        })
        .collect();
    let affinity = match masks.is_empty() {
        true => String::new(),
        false => format!("\nworker_cpu_affinity {};", masks.join(" ")),
    };
    let user = if layout.root { "user root;\n" } else { "" };
    format!("{user}master_process on;\nworker_processes {workers};{affinity}")
}

/// An `upstream` block with Squall's pool limits: up to 256 idle connections (the worker's
/// `idle_max`), closed after 60 s idle or 1,000 requests (CONFIG.md, `[[upstream]]`). With
/// fewer idle than requests in flight, nginx closes a connection on nearly every request once
/// 64 clients are busy (it caches at most `keepalive`), and over TLS resumes a handshake for
/// each: `keepalive 32` cost nginx 7.6 s per 100k requests to an https origin in h1-proxy-tls.
fn upstream_block(upstream: &Upstream) -> Result<String, String> {
    let balance = match upstream.balance.as_str() {
        "round_robin" | "weighted" => "",
        "least_conn" => "        least_conn;\n",
        other => return Err(format!("upstreams with balance = {other:?}")),
    };
    let mut out = format!(
        "    upstream {} {{\n{balance}",
        upstream_name(&upstream.name)?
    );
    for (address, weight) in &upstream.servers {
        let weight = if upstream.balance == "weighted" && *weight != 1 {
            format!(" weight={weight}")
        } else {
            String::new()
        };
        let _ = writeln!(out, "        server {address}{weight};");
    }
    out.push_str(
        "        keepalive 256;\n        keepalive_requests 1000;\n        keepalive_timeout 60s;\n    }\n",
    );
    Ok(out)
}

/// nginx's name for the upstream block of Squall's `[[upstream]]` called `name`.
fn upstream_name(name: &str) -> Result<String, String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        return Err(format!("an upstream called {name:?}"));
    }
    Ok(format!("squall_{name}"))
}

/// One `location` block for one route; `squall` has the upstreams its proxy routes name.
fn location(route: &Route, squall: &Table) -> Result<String, String> {
    let (kind, pattern) = match route.matcher {
        Matcher::Exact(pattern) => ("= ", pattern),
        Matcher::Prefix(pattern) => ("", pattern),
        Matcher::Regex(pattern) => ("~ ", pattern),
    };
    let body = match route.action {
        Action::Respond(respond) => respond_body(respond)?,
        Action::Proxy {
            upstream,
            cache,
            compress,
        } => {
            let mut body = proxy_body(&peer::upstream(squall, upstream)?, cache)?;
            if let Some(compress) = compress {
                body.push_str(&gzip(compress)?);
            }
            body
        }
        // nginx's best way with files (the `--vs nginx` comparison the static scenarios are
        // for): `sendfile`, with the same index and no symlinks, as Squall's default. Checked
        // `from=$document_root` because Squall opens the root once and resolves beneath it:
        // plain `on` has nginx open and close every directory from `/` down on each request
        // (12 more system calls per request for a run folder 6 deep).
        Action::Files { root } => format!(
            "root {}; index index.html; sendfile on; disable_symlinks on from=$document_root; ",
            quote(root)
        ),
    };
    Ok(format!(
        "        location {kind}{} {{ {body}}}\n",
        quote(pattern)
    ))
}

/// Forwarding as Squall forwards: HTTP/1.1 on pooled connections (`Connection ""` keeps them
/// open), Host passed through, the client added to `X-Forwarded-For`, the scheme in
/// `X-Forwarded-Proto`; through the cache when `cache`. An HTTP/2 upstream goes through the
/// grpc module instead (`origin_body`).
fn proxy_body(upstream: &Upstream, cache: bool) -> Result<String, String> {
    let name = upstream_name(&upstream.name)?;
    let (h2, tls) = origin_protocol(upstream)?;
    if h2 {
        if cache {
            return Err(
                "cached routes to an HTTP/2 upstream (nginx 1.22's grpc module has \
                        no cache)"
                    .into(),
            );
        }
        return Ok(grpc_body(&name, tls));
    }
    let (scheme, ssl) = match tls {
        true => (
            "https",
            "proxy_ssl_protocols TLSv1.2 TLSv1.3; proxy_ssl_verify off; \
             proxy_ssl_session_reuse on; ",
        ),
        false => ("http", ""),
    };
    let mut out = format!(
        "proxy_pass {scheme}://{name}; proxy_http_version 1.1; proxy_set_header Connection \"\"; \
         proxy_set_header Host $host; \
         proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; \
         proxy_set_header X-Forwarded-Proto $scheme; {ssl}"
    );
    if cache {
        let zone = CACHE_KEYS_ZONE.split(':').next().unwrap_or(CACHE_KEYS_ZONE);
        let _ = write!(
            out,
            "proxy_cache {zone}; proxy_cache_lock on; sendfile on; "
        );
    }
    Ok(out)
}

/// Whether nginx speaks HTTP/2 to `upstream`, and over TLS, or why it cannot as Squall does.
/// TLS to origins: TLS 1.2 and 1.3 as rustls offers them (`proxy_ssl_protocols` in 1.22
/// defaults to TLS 1 to 1.2), no verification (the scenarios' origins are self-signed, so
/// `tls_verify = false`), sessions resumed as Squall resumes them.
fn origin_protocol(upstream: &Upstream) -> Result<(bool, bool), String> {
    let tls = upstream.tls;
    if let Some(key) = &upstream.tls_other {
        return Err(format!("upstreams with `{key}`"));
    }
    if tls && upstream.tls_verify {
        return Err(
            "upstreams with tls = true and tls_verify = true (the scenarios' origins \
                    are self-signed: say tls_verify = false)"
                .into(),
        );
    }
    match (upstream.protocol.as_str(), tls) {
        ("http1", _) => Ok((false, tls)),
        ("h2c", false) | ("h2", true) => Ok((true, tls)),
        ("auto", _) => Err(
            "upstreams with protocol = \"auto\" (nginx 1.22 cannot choose \
                            HTTP/2 or HTTP/1.1 by ALPN)"
                .into(),
        ),
        (protocol, tls) => Err(format!(
            "upstreams with protocol = {protocol:?} and tls = {tls}"
        )),
    }
}

/// HTTP/2 to the origin, which nginx 1.22 speaks only in its grpc module: `grpc_pass` to the
/// same keep-alive `upstream` block (`keepalive` applies to grpc too), `grpc://` for h2c with
/// prior knowledge, `grpcs://` for TLS with ALPN h2. The module forwards any request, not only
/// gRPC: checked by hand with nginx 1.22.1 in front of an nginx `listen ... http2` origin, plain
/// GETs through it come back 200 with the origin's 13-byte body and a 70,000-byte file byte for
/// byte (`cmp`), over h2c and over TLS, and 2,000 requests from 8 clients reused 8 origin
/// connections. Unlike Squall, which multiplexes up to 100 streams on one origin connection,
/// nginx sends one request at a time on each.
fn grpc_body(name: &str, tls: bool) -> String {
    let (scheme, ssl) = match tls {
        true => (
            "grpcs",
            "grpc_ssl_protocols TLSv1.2 TLSv1.3; grpc_ssl_verify off; \
             grpc_ssl_session_reuse on; ",
        ),
        false => ("grpc", ""),
    };
    format!(
        "grpc_pass {scheme}://{name}; grpc_set_header Host $host; \
         grpc_set_header X-Forwarded-For $proxy_add_x_forwarded_for; \
         grpc_set_header X-Forwarded-Proto $scheme; {ssl}"
    )
}

/// Squall's `compress` defaults (CONFIG.md, Compression): the types, `min_bytes`, gzip level.
const COMPRESS_TYPES: [&str; 8] = [
    "text/html",
    "text/css",
    "text/plain",
    "text/javascript",
    "application/javascript",
    "application/json",
    "application/xml",
    "image/svg+xml",
];
const COMPRESS_MIN_BYTES: i64 = 256;
const GZIP_LEVEL: i64 = 6;

/// A route's `compress` as nginx's gzip module: the same level, types and minimum length, for
/// proxied responses whatever their caching headers (`gzip_proxied any`, as Squall does not
/// look at them), with `Vary: Accept-Encoding` (`gzip_vary on`). nginx 1.22 has gzip only, so
/// brotli and zstd levels are not translated: a scenario comparing with nginx asks for gzip
/// (`Accept-Encoding: gzip`). Both leave HTTP/1.0 clients alone (`gzip_http_version 1.1`, the
/// default). `text/html` is not listed: nginx always includes it and warns about a duplicate.
fn gzip(compress: &Table) -> Result<String, String> {
    for key in compress.keys() {
        if !matches!(key.as_str(), "types" | "min_bytes" | "level") {
            return Err(format!("compress with `{key}`"));
        }
    }
    let types: Vec<&str> = match compress.get("types") {
        None => COMPRESS_TYPES.to_vec(),
        Some(types) => types
            .as_array()
            .ok_or("compress.types is not an array")?
            .iter()
            .map(|t| t.as_str().ok_or("a compress type is not a string"))
            .collect::<Result<_, _>>()?,
    };
    if let Some(wild) = types.iter().find(|t| t.contains('*')) {
        return Err(format!(
            "compress type {wild:?} (nginx's gzip_types has no wildcards)"
        ));
    }
    let listed: Vec<String> = types
        .iter()
        .filter(|t| !t.eq_ignore_ascii_case("text/html"))
        .map(|t| quote(&t.to_ascii_lowercase()))
        .collect();
    let min_bytes = match compress.get("min_bytes") {
        None => COMPRESS_MIN_BYTES,
        Some(size) => size_bytes(size)?,
    };
    let level = match compress.get("level") {
        None => GZIP_LEVEL,
        Some(level) => {
            let level = level.as_table().ok_or("compress.level is not a table")?;
            match level.get("gzip") {
                None => GZIP_LEVEL,
                Some(gzip) => gzip
                    .as_integer()
                    .filter(|n| (1..=9).contains(n))
                    .ok_or("compress.level.gzip is not 1 to 9")?,
            }
        }
    };
    let types = if listed.is_empty() {
        String::new()
    } else {
        format!("gzip_types {}; ", listed.join(" "))
    };
    Ok(format!(
        "gzip on; gzip_comp_level {level}; {types}gzip_min_length {min_bytes}; \
         gzip_proxied any; gzip_vary on; "
    ))
}

/// A Squall size (CONFIG.md, Values): an integer of bytes, or a string of one with an optional
/// unit `B`, `KiB`, `MiB` or `GiB`.
fn size_bytes(size: &Value) -> Result<i64, String> {
    if let Some(n) = size.as_integer().filter(|n| *n >= 0) {
        return Ok(n);
    }
    let text = size
        .as_str()
        .ok_or("a size that is neither an integer nor a string")?;
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = match &text[digits.len()..] {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return Err(format!("the size {text:?}")),
    };
    digits
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| format!("the size {text:?}"))
}

/// `default_type` carries the content type because `return` has no header of its own.
fn respond_body(respond: &Table) -> Result<String, String> {
    let status = respond
        .get("status")
        .and_then(Value::as_integer)
        .unwrap_or(200);
    let body = respond.get("body").and_then(Value::as_str).unwrap_or("");
    let mut out = String::new();
    let mut content_type = "application/octet-stream";
    if let Some(headers) = respond.get("headers").and_then(Value::as_table) {
        for (name, value) in headers {
            let value = value.as_str().ok_or("a header value is not a string")?;
            if name.eq_ignore_ascii_case("content-type") {
                content_type = value;
            } else {
                // Formatting into a String cannot fail.
                let _ = write!(
                    out,
                    "add_header {} {} always; ",
                    quote(name),
                    quote_value(value)?
                );
            }
        }
    }
    let content_type = quote_value(content_type)?;
    Ok(format!(
        "default_type {content_type}; {out}return {status} {}; ",
        quote_value(body)?
    ))
}

/// A double-quoted nginx string for a value nginx expands (`return`, `add_header`): there `$`
/// starts a variable and nginx has no escape for it.
fn quote_value(text: &str) -> Result<String, String> {
    if text.contains('$') {
        return Err(format!("{text:?}: `$` in a response"));
    }
    Ok(quote(text))
}

/// A double-quoted nginx string, for names and location patterns (where `$` is literal).
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests;
