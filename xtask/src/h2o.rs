//! h2o 2.2 as the peer server of `--vs h2o`: an h2o.conf (YAML) generated from a scenario's
//! Squall config.
//!
//! h2o 2.2 has no handler that answers with a configured body short of mruby, so a `respond`
//! route becomes a static file: its body written to `body-N` in the run folder and mapped with
//! `file.file`, with `file.mime.setdefaulttype` for its content type (Squall's default,
//! `text/plain`, when it names none), no ETag (Squall sends none), and at most one more header
//! (`header.add`, which h2o takes once per path). h2o adds `last-modified` and `accept-ranges`,
//! a few dozen bytes more per response than Squall. Only status 200 can be served that way.
//!
//! h2o maps paths by longest prefix only, so `exact` and `prefix` routes both become `paths`
//! entries (an exact route then also answers below its path, which the scenario never asks) and
//! `regex` routes are not supported. A plain `proxy` route becomes `proxy.reverse.url` to its
//! one upstream server, Host passed through, idle origin connections kept 60 s as Squall keeps
//! them; h2o 2.2 has no response cache, so `cache = true` is not supported.
//!
//! One worker thread (`num-threads: 1`; h2o keeps a few helper threads, whose CPU time is
//! counted too). A cleartext listener speaks HTTP/1.1 and h2c with prior knowledge on the same
//! port, as Squall's `["http1", "h2c"]`; a TLS one offers ALPN `h2` and `http/1.1`, with the
//! certificate as for nginx (`peer::certificate`) and OCSP stapling off (it would start a
//! helper process to fetch a response that a self-signed certificate cannot have).

use std::fmt::Write as _;
use std::path::PathBuf;

use toml::{Table, Value};

use crate::peer::{self, Action, Launch, Layout, Matcher, Route};

/// The content type of a `respond` route that names none (CONFIG.md, `respond`).
const CONTENT_TYPE_DEFAULT: &str = "text/plain";
/// How long h2o keeps an idle origin connection: Squall's 60 s (CONFIG.md, `[[upstream]]`).
const ORIGIN_IDLE_MS: u32 = 60_000;

/// How to start h2o on a Squall config: `-c DIR/h2o.conf`, the body files beside it.
pub fn launch(squall: &Table, layout: &Layout) -> Result<Launch, String> {
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    let mut paths = String::new();
    let mut seen: Vec<&str> = Vec::new();
    for route in &peer::routes(squall)? {
        let path = match route.matcher {
            Matcher::Exact(path) | Matcher::Prefix(path) => path,
            Matcher::Regex(_) => {
                return Err("regex routes (h2o 2.2 matches paths by prefix)".into());
            }
        };
        if seen.contains(&path) {
            return Err(format!("two routes on {path:?} (one h2o path)"));
        }
        seen.push(path);
        let _ = writeln!(paths, "      {}:", quote(path));
        paths.push_str(&path_body(squall, route, path, layout, &mut bodies)?);
    }
    let mut files: Vec<(PathBuf, Vec<u8>)> = bodies
        .into_iter()
        .enumerate()
        .map(|(n, body)| (layout.dir.join(format!("body-{n}")), body))
        .collect();
    let (listen, self_signed) = listen(squall, layout)?;
    let conf = layout.dir.join("h2o.conf");
    files.push((conf.clone(), frame(layout, &listen, &paths).into_bytes()));
    Ok(Launch {
        args: vec!["-c".into(), conf.to_string_lossy().into_owned()],
        files,
        self_signed,
    })
}

/// The directives of one path: a file for `respond`, `proxy.reverse.url` for `proxy`.
fn path_body(
    squall: &Table,
    route: &Route,
    path: &str,
    layout: &Layout,
    bodies: &mut Vec<Vec<u8>>,
) -> Result<String, String> {
    match route.action {
        Action::Respond(respond) => respond_body(respond, layout, bodies),
        Action::Proxy { cache: true, .. } => {
            Err("cached proxy routes (h2o 2.2 has no response cache)".into())
        }
        Action::Files { .. } => Err("static file routes (not translated for h2o)".into()),
        Action::Proxy {
            compress: Some(_), ..
        } => Err("compressed proxy routes (not translated for h2o)".into()),
        Action::Proxy { upstream, .. } => {
            let upstream = peer::upstream(squall, upstream)?;
            let [(address, _)] = upstream.servers.as_slice() else {
                return Err("upstreams of more than one server (h2o 2.2 balances by DNS)".into());
            };
            // h2o 2.2 proxies in cleartext HTTP/1.1 only: an https or HTTP/2 origin would be
            // measured as something else, or not answer at all.
            if upstream.tls {
                return Err("TLS upstreams (h2o 2.2's proxy speaks cleartext only)".into());
            }
            if upstream.protocol != "http1" {
                return Err(format!(
                    "upstreams with protocol = {:?} (h2o 2.2's proxy speaks HTTP/1.1 only)",
                    upstream.protocol
                ));
            }
            Ok(format!(
                "        proxy.reverse.url: {}\n        proxy.preserve-host: ON\n        \
                 proxy.timeout.keepalive: {ORIGIN_IDLE_MS}\n",
                quote(&format!("http://{address}{path}"))
            ))
        }
    }
}

/// `file.file` on the body, written once however many routes share it.
fn respond_body(
    respond: &Table,
    layout: &Layout,
    bodies: &mut Vec<Vec<u8>>,
) -> Result<String, String> {
    let status = respond
        .get("status")
        .and_then(Value::as_integer)
        .unwrap_or(200);
    if status != 200 {
        return Err(format!(
            "respond with status {status} (h2o serves a file, with 200)"
        ));
    }
    let body = respond
        .get("body")
        .and_then(Value::as_str)
        .unwrap_or("")
        .as_bytes()
        .to_vec();
    let index = match bodies.iter().position(|b| *b == body) {
        Some(index) => index,
        None => {
            bodies.push(body);
            bodies.len() - 1
        }
    };
    let file = layout.dir.join(format!("body-{index}"));
    let mut content_type = CONTENT_TYPE_DEFAULT;
    let mut added: Vec<String> = Vec::new();
    if let Some(headers) = respond.get("headers").and_then(Value::as_table) {
        for (name, value) in headers {
            let value = value.as_str().ok_or("a header value is not a string")?;
            if name.eq_ignore_ascii_case("content-type") {
                content_type = value;
            } else {
                added.push(format!("{name}: {value}"));
            }
        }
    }
    let mut out = format!(
        "        file.file: {}\n        file.etag: OFF\n        file.mime.setdefaulttype: {}\n",
        quote(&file.to_string_lossy()),
        quote(content_type)
    );
    match added.as_slice() {
        [] => {}
        [one] => {
            let _ = writeln!(out, "        header.add: {}", quote(one));
        }
        _ => return Err("respond with more than one header besides content-type".into()),
    }
    Ok(out)
}

/// The `listen` mapping, with `ssl` over TLS, and the certificate to generate.
fn listen(squall: &Table, layout: &Layout) -> Result<(String, Option<peer::SelfSigned>), String> {
    let mut out = format!("listen:\n  host: 127.0.0.1\n  port: {}\n", layout.port);
    if !peer::tls(squall) {
        return Ok((out, None));
    }
    let (cert, key, self_signed) = peer::certificate(squall, layout.dir)?;
    let _ = write!(
        out,
        "  ssl:\n    certificate-file: {}\n    key-file: {}\n    minimum-version: TLSv1.2\n    \
         ocsp-update-interval: 0\n",
        quote(&cert.to_string_lossy()),
        quote(&key.to_string_lossy())
    );
    Ok((out, self_signed))
}

/// The fixed part: one worker thread (`--workers`: that many), room for as many connections as
/// nginx is given, no access log, the error log and pid file in the run folder.
fn frame(layout: &Layout, listen: &str, paths: &str) -> String {
    let dir = layout.dir.to_string_lossy();
    let threads = layout.workers.unwrap_or(1);
    // As root h2o drops to `nobody` unless told otherwise, and nobody may not read the run folder.
    let user = if layout.root { "user: root\n" } else { "" };
    format!(
        "# Generated by cargo xtask bench --vs h2o from a Squall scenario.\n{user}\
         num-threads: {threads}\nmax-connections: 16384\nerror-log: {}\npid-file: {}\n{listen}\
         hosts:\n  default:\n    paths:\n{paths}",
        quote(&format!("{dir}/error.log")),
        quote(&format!("{dir}/h2o.pid")),
    )
}

/// A YAML double-quoted scalar; JSON's string syntax is a subset of it.
fn quote(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::scenario::Protocol;

    fn layout() -> Layout<'static> {
        Layout {
            dir: Path::new("/tmp/run"),
            port: 8080,
            protocol: Protocol::H2,
            root: true,
            workers: None,
            server_cpus: &[1],
        }
    }

    fn squall(listen: &str, rest: &str) -> Table {
        let text = format!(
            "[[listen]]\naddress = \"127.0.0.1:1\"\n{listen}\n[[upstream]]\nname = \"app\"\n\
             servers = [{{ address = \"127.0.0.1:9\" }}]\n[[vhost]]\nhosts = [\"*\"]\n{rest}"
        );
        toml::from_str(&text).expect("valid toml")
    }

    fn text(launch: &Launch) -> String {
        let (path, conf) = launch.files.last().expect("the config comes last");
        assert_eq!(path, Path::new("/tmp/run/h2o.conf"));
        String::from_utf8(conf.clone()).expect("utf-8")
    }

    #[test]
    fn https_and_http2_upstreams_are_refused() {
        let route = "[[vhost.route]]\nprefix = \"/\"\nproxy = \"app\"\n";
        let cases = [
            ("tls = true\ntls_verify = false\n", "TLS upstreams"),
            ("protocol = \"h2c\"\n", "protocol = \"h2c\""),
        ];
        for (keys, expected) in cases {
            let text = format!(
                "[[listen]]\naddress = \"127.0.0.1:1\"\n[[upstream]]\nname = \"app\"\n\
                 servers = [{{ address = \"127.0.0.1:9\" }}]\n{keys}[[vhost]]\nhosts = [\"*\"]\n{route}"
            );
            let squall: Table = toml::from_str(&text).expect("valid toml");
            let err = launch(&squall, &layout()).expect_err("not translatable");
            assert!(err.to_string().contains(expected), "{err}");
        }
    }

    #[test]
    fn respond_routes_become_files() {
        let squall = squall(
            "",
            "[[vhost.route]]\nexact = \"/\"\nrespond = { body = \"Hello, world!\", headers = \
             { \"content-type\" = \"text/plain\", \"x-a\" = \"b\" } }\n\
             [[vhost.route]]\nprefix = \"/p/\"\nrespond = { body = \"Hello, world!\" }\n",
        );
        let launch = launch(&squall, &layout()).expect("translatable");
        assert_eq!(launch.args, ["-c", "/tmp/run/h2o.conf"]);
        assert_eq!(launch.self_signed, None);
        assert_eq!(
            launch.files[0],
            (PathBuf::from("/tmp/run/body-0"), b"Hello, world!".to_vec())
        );
        assert_eq!(launch.files.len(), 2, "one body file for both routes");
        let text = text(&launch);
        assert!(
            text.starts_with(
                "# Generated by cargo xtask bench --vs h2o from a Squall scenario.\nuser: root\n\
                 num-threads: 1\nmax-connections: 16384\nerror-log: \"/tmp/run/error.log\"\n\
                 pid-file: \"/tmp/run/h2o.pid\"\nlisten:\n  host: 127.0.0.1\n  port: 8080\n\
                 hosts:\n  default:\n    paths:\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "      \"/\":\n        file.file: \"/tmp/run/body-0\"\n        file.etag: OFF\n        \
                 file.mime.setdefaulttype: \"text/plain\"\n        header.add: \"x-a: b\"\n"
            ),
            "{text}"
        );
        assert!(text.contains("      \"/p/\":\n        file.file: \"/tmp/run/body-0\"\n"));
    }

    #[test]
    fn tls_and_proxy() {
        let squall = squall(
            "tls = true\n[[certificate]]\nhosts = [\"localhost\"]\nself_signed = true",
            "[[vhost.route]]\nprefix = \"/\"\nproxy = \"app\"\n",
        );
        let launch = launch(&squall, &layout()).expect("translatable");
        let text = text(&launch);
        assert!(
            text.contains(
                "  ssl:\n    certificate-file: \"/tmp/run/cert.pem\"\n    key-file: \
                 \"/tmp/run/key.pem\"\n    minimum-version: TLSv1.2\n    ocsp-update-interval: 0\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "      \"/\":\n        proxy.reverse.url: \"http://127.0.0.1:9/\"\n        \
                 proxy.preserve-host: ON\n        proxy.timeout.keepalive: 60000\n"
            ),
            "{text}"
        );
        assert!(launch.self_signed.is_some());
    }

    #[test]
    fn refuses_what_h2o_cannot_serve_the_same_way() {
        let refused = |rest: &str| launch(&squall("", rest), &layout()).expect_err(rest);
        assert!(refused("[[vhost.route]]\nregex = \"^/\"\nrespond = {}\n").contains("regex"));
        assert!(
            refused("[[vhost.route]]\nprefix = \"/\"\nproxy = \"app\"\ncache = true\n")
                .contains("no response cache")
        );
        assert!(
            refused("[[vhost.route]]\nprefix = \"/\"\nrespond = { status = 404 }\n")
                .contains("404")
        );
        assert!(
            refused(
                "[[vhost.route]]\nexact = \"/\"\nrespond = {}\n[[vhost.route]]\nprefix = \"/\"\n\
             respond = {}\n"
            )
            .contains("two routes")
        );
    }
}
