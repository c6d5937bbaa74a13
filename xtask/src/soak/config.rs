//! What the soak serves: Squall's config (a `respond` route, a proxy route and a cached proxy
//! route, cleartext HTTP/1.1 + h2c and TLS h2 + HTTP/1.1 listeners with a self-signed
//! certificate, an admin listener) and the local nginx origin behind it, whose paths make some
//! objects cacheable for long, some for two seconds (so they expire and are fetched again all
//! soak long) and some never, so the cache sees hits, misses and passes. Pure text, tested.

use std::fmt::Write;
use std::net::SocketAddr;
use std::path::Path;

/// Bytes of the small objects behind `/cache/static/` and `/cache/short/`.
pub const SMALL_BYTES: usize = 2 * 1024;
/// Bytes of `/cache/big` and `/api/big`, what slow readers ask for and never read: well beyond
/// what the kernel's socket buffers hold, so Squall has to keep the rest.
pub const BIG_BYTES: usize = 4 * 1024 * 1024;
/// How many distinct cacheable URLs of each kind the load cycles through.
const CACHED_KEYS: u32 = 8;

/// The addresses of one soak.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Addrs {
    /// HTTP/1.1 and h2c.
    pub plain: SocketAddr,
    /// TLS: h2 and HTTP/1.1 by ALPN.
    pub tls: SocketAddr,
    pub admin: SocketAddr,
    pub origin: SocketAddr,
}

/// Squall's config. `generation` changes the `respond` body, so that each reload applies a
/// config that really differs (its hash in `squall_config_info` changes).
pub fn squall(addrs: &Addrs, generation: u32) -> String {
    format!(
        "# Written by `cargo xtask soak`; generation {generation}.\n\
         [server]\nworkers = 1\n\n\
         [admin]\nlisten = \"{admin}\"\n\n\
         # A short header timeout, so the slowloris fault sees its 408s within its window.\n\
         [limits]\nheader_timeout = \"5s\"\nidle_timeout = \"60s\"\n\n\
         [[listen]]\naddress = \"{plain}\"\nprotocols = [\"http1\", \"h2c\"]\n\n\
         [[listen]]\naddress = \"{tls}\"\ntls = true\nprotocols = [\"h2\", \"http1\"]\n\n\
         [[certificate]]\nhosts = [\"localhost\"]\nself_signed = true\n\n\
         [cache]\nmemory = \"64MiB\"\n\n\
         [[upstream]]\nname = \"origin\"\nservers = [{{ address = \"{origin}\" }}]\n\
         connect_timeout = \"1s\"\nresponse_timeout = \"10s\"\n\
         health_check = {{ path = \"/healthz\", interval = \"1s\", fails = 2, passes = 1 }}\n\n\
         [[vhost]]\nhosts = [\"*\"]\n\n\
         [[vhost.route]]\nexact = \"/respond\"\n\
         respond = {{ status = 200, body = \"soak generation {generation}\\n\" }}\n\n\
         [[vhost.route]]\nprefix = \"/api/\"\nproxy = \"origin\"\n\n\
         [[vhost.route]]\nprefix = \"/cache/\"\nproxy = \"origin\"\ncache = true\n",
        admin = addrs.admin,
        plain = addrs.plain,
        tls = addrs.tls,
        origin = addrs.origin,
    )
}

/// The origin's nginx.conf: files `small` and `big` in `dir`, a health path, and `return` for
/// everything else (POSTs included: nginx reads and drops the body).
pub fn origin(dir: &Path, port: u16) -> String {
    let d = dir.display();
    format!(
        "worker_processes 1; daemon off; master_process off; pid {d}/nginx.pid; \
         error_log {d}/error.log;\nevents {{ worker_connections 4096; }}\n\
         http {{ access_log off; keepalive_requests 10000000; client_body_temp_path {d}; \
         proxy_temp_path {d}; fastcgi_temp_path {d}; uwsgi_temp_path {d}; scgi_temp_path {d};\n\
         default_type text/plain; etag off; root {d};\n\
         server {{ listen 127.0.0.1:{port};\n\
         location = /healthz {{ return 200 \"ok\\n\"; }}\n\
         location /cache/static/ {{ add_header cache-control \"max-age=3600\" always; \
         try_files /small =404; }}\n\
         location /cache/short/ {{ add_header cache-control \"max-age=2\" always; \
         try_files /small =404; }}\n\
         location /cache/private/ {{ add_header cache-control \"no-store\" always; \
         return 200 \"private\\n\"; }}\n\
         location = /cache/big {{ add_header cache-control \"max-age=3600\" always; \
         try_files /big =404; }}\n\
         location = /api/big {{ try_files /big =404; }}\n\
         location / {{ return 200 \"origin\\n\"; }}\n}} }}\n"
    )
}

/// The paths every h2load client cycles through, in order (h2load takes several URIs and
/// uses them round robin): mostly the respond route and small cached objects, with proxied
/// and uncacheable requests in between.
pub fn load_paths() -> Vec<String> {
    let mut paths = Vec::new();
    for key in 0..CACHED_KEYS {
        paths.push("/respond".to_string());
        paths.push(format!("/cache/static/{key}"));
        paths.push(format!("/api/item/{key}"));
        paths.push(format!("/cache/short/{key}"));
        if key % 2 == 0 {
            paths.push(format!("/cache/private/{key}"));
        }
    }
    paths
}

/// A file of `bytes` printable bytes, a recognisable line over and over.
pub fn body(bytes: usize) -> Vec<u8> {
    const LINE: &[u8] = b"squall soak body: abcdefghijklmnopqrstuvwxyz0123456789-_\n";
    LINE.iter().copied().cycle().take(bytes).collect()
}

/// The config with its addresses, for the report: what ran where.
pub fn describe(addrs: &Addrs) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "- cleartext (HTTP/1.1, h2c): `{}`", addrs.plain);
    let _ = writeln!(text, "- TLS (h2, HTTP/1.1 by ALPN): `{}`", addrs.tls);
    let _ = writeln!(text, "- admin: `{}`", addrs.admin);
    let _ = writeln!(text, "- origin (nginx): `{}`", addrs.origin);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs() -> Addrs {
        let at = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        Addrs {
            plain: at(1),
            tls: at(2),
            admin: at(3),
            origin: at(4),
        }
    }

    #[test]
    fn the_squall_config_has_every_part_the_soak_needs() {
        let text = squall(&addrs(), 3);
        let table: toml::Table = text.parse().expect("valid TOML");
        let listens = table["listen"].as_array().unwrap();
        assert_eq!(listens.len(), 2);
        assert_eq!(listens[1]["tls"].as_bool(), Some(true));
        assert_eq!(listens[0]["protocols"].as_array().unwrap().len(), 2);
        assert_eq!(table["admin"]["listen"].as_str(), Some("127.0.0.1:3"));
        assert_eq!(
            table["upstream"][0]["servers"][0]["address"].as_str(),
            Some("127.0.0.1:4")
        );
        let routes = table["vhost"][0]["route"].as_array().unwrap();
        assert_eq!(routes.len(), 3);
        assert_eq!(
            routes[0]["respond"]["body"].as_str(),
            Some("soak generation 3\n")
        );
        assert_eq!(routes[2]["cache"].as_bool(), Some(true));
        assert_ne!(text, squall(&addrs(), 4));
    }

    #[test]
    fn the_origin_serves_every_path_the_load_uses() {
        let text = origin(Path::new("/o"), 9);
        for location in [
            "/healthz",
            "/cache/static/",
            "/cache/short/",
            "/cache/private/",
            "/cache/big",
            "/api/big",
        ] {
            assert!(text.contains(&format!("{location} {{")), "{location}");
        }
        assert!(text.contains("listen 127.0.0.1:9;"));
        let paths = load_paths();
        assert_eq!(paths.len(), 36);
        assert!(paths.iter().all(|p| p.starts_with('/')));
        assert!(paths.iter().any(|p| p.starts_with("/cache/private/")));
        assert_eq!(body(100).len(), 100);
    }
}
