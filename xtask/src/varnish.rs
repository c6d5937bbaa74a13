//! varnish 7.1 as the peer server of `--vs varnish`, for the cache scenarios: a Squall config
//! whose one route caches everything from one origin server becomes `varnishd -b ORIGIN` with
//! the built-in VCL, which caches what the origin's `Cache-Control` allows (and requests
//! without cookies or credentials, which h2load never sends).
//!
//! `varnishd -F` keeps its manager process in the foreground and serves from a child process;
//! the harness measures the CPU time of both (`server::Server::cpu_secs`), and both run on the
//! server CPU as `taskset` pins the manager and the child inherits it. Varnish runs many
//! threads (a pool of workers, `-p thread_pools=1` of them here, plus its housekeeping), which
//! is its design; pinned to one CPU it gets the same one core as Squall's single worker.
//! `-j none`: no privilege separation, so that it runs as root or not without a jail user.
//! `-s malloc,256m`: objects in memory, as Squall keeps them. Its working directory (`-n`,
//! shared memory logs and the compiled VCL) is in the run folder.
//!
//! Everything else is "not supported by varnish": TLS (varnish terminates none), HTTP/2 (the
//! comparison is HTTP/1.1), `respond` routes and uncached or partial proxying.

use toml::Table;

use crate::peer::{self, Action, Launch, Layout, Matcher};
use crate::scenario::Protocol;

/// Cache storage: far more than the scenarios' objects need.
const STORAGE: &str = "malloc,256m";

/// `varnishd -F -j none -a 127.0.0.1:PORT -b ORIGIN -s malloc,256m -p thread_pools=1 -n DIR`.
pub fn launch(squall: &Table, layout: &Layout) -> Result<Launch, String> {
    if peer::tls(squall) {
        return Err("TLS (varnish terminates no TLS)".into());
    }
    if layout.protocol != Protocol::H1 {
        return Err("HTTP/2 (varnish is compared over HTTP/1.1 only)".into());
    }
    if layout.workers.is_some() {
        return Err("--workers (varnish's thread pools are not a count of workers)".into());
    }
    let routes = peer::routes(squall)?;
    let upstream = match routes.as_slice() {
        [route] if route.matcher == Matcher::Prefix("/") => match route.action {
            Action::Proxy {
                upstream,
                cache: true,
                compress: None,
            } => upstream,
            _ => return Err("routes other than a cached proxy route".into()),
        },
        _ => return Err("anything but one cached proxy route for every path".into()),
    };
    let upstream = peer::upstream(squall, upstream)?;
    let [(origin, _)] = upstream.servers.as_slice() else {
        return Err("upstreams of more than one server (-b names one backend)".into());
    };
    let workdir = layout.dir.join("varnish");
    let args = [
        "-F",
        "-j",
        "none",
        "-a",
        &format!("127.0.0.1:{}", layout.port),
        "-b",
        origin,
        "-s",
        STORAGE,
        "-p",
        "thread_pools=1",
        "-n",
        &workdir.to_string_lossy(),
    ]
    .map(String::from)
    .to_vec();
    Ok(Launch {
        args,
        files: Vec::new(),
        self_signed: None,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn layout(protocol: Protocol) -> Layout<'static> {
        Layout {
            dir: Path::new("/tmp/run"),
            port: 8080,
            protocol,
            root: true,
            workers: None,
            server_cpus: &[1],
        }
    }

    fn squall(listen: &str, routes: &str) -> Table {
        let text = format!(
            "[[listen]]\naddress = \"127.0.0.1:1\"\n{listen}\n[[upstream]]\nname = \"app\"\n\
             servers = [{{ address = \"127.0.0.1:9\" }}]\n[[vhost]]\nhosts = [\"*\"]\n{routes}"
        );
        toml::from_str(&text).expect("valid toml")
    }

    const CACHED: &str = "[[vhost.route]]\nprefix = \"/\"\nproxy = \"app\"\ncache = true\n";

    #[test]
    fn a_cached_proxy_is_varnishd_with_the_origin_as_backend() {
        let launch = launch(&squall("", CACHED), &layout(Protocol::H1)).expect("supported");
        assert_eq!(
            launch.args.join(" "),
            "-F -j none -a 127.0.0.1:8080 -b 127.0.0.1:9 -s malloc,256m -p thread_pools=1 \
             -n /tmp/run/varnish"
        );
        assert!(launch.files.is_empty() && launch.self_signed.is_none());
    }

    #[test]
    fn everything_else_is_unsupported() {
        let h1 = layout(Protocol::H1);
        assert!(launch(&squall("", CACHED), &layout(Protocol::H2)).is_err());
        assert!(launch(&squall("tls = true", CACHED), &h1).is_err());
        let uncached = "[[vhost.route]]\nprefix = \"/\"\nproxy = \"app\"\n";
        assert!(launch(&squall("", uncached), &h1).is_err());
        let respond = "[[vhost.route]]\nexact = \"/\"\nrespond = {}\n";
        assert!(launch(&squall("", respond), &h1).is_err());
        let partial = CACHED.replace("prefix = \"/\"", "prefix = \"/a/\"");
        assert!(launch(&squall("", &partial), &h1).is_err());
    }
}
