//! Scenarios: the data in `bench/scenarios/*.toml` that says what Squall serves and how h2load
//! (or, for HTTP/3, `cargo xtask h3load`) loads it.
//!
//! A scenario holds the Squall config (inline, or a file beside it), optionally a route template
//! stamped out N times (so a 10,000-route table is generated rather than committed), and the
//! load: path, connections, streams, headers. The harness owns the listening address: it rewrites
//! the one `[[listen]]` to a free loopback port for every run.

use std::collections::BTreeMap;
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use serde::{Deserialize, Serialize};
use toml::{Table, Value};

mod table;

use table::set_workers;
pub use table::{listen_protocols, listen_tls};
use table::{listens, origin_upstreams, prepend_routes, replace_origin, replace_site, vhosts};

/// A bound on a generated origin body (`[origin] body_bytes`): big objects, not a disk filler.
const ORIGIN_BODY_BYTES_MAX: usize = 64 * 1024 * 1024;

/// One loaded scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub load: Load,
    /// Squall's config with routes generated but the listen address not yet set.
    config: Table,
    /// The local origin this scenario's proxy routes need, if any.
    pub origin: Option<OriginSection>,
    /// Where that origin listens, once started; upstream servers written `ORIGIN` become this.
    origin_addr: Option<SocketAddr>,
    /// Files to generate for `root` routes: name → bytes (`[files]`).
    pub files: BTreeMap<String, usize>,
    /// Where they were written; a route's `root = "SITE"` becomes this.
    site_dir: Option<PathBuf>,
}

/// How h2load loads the server.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Load {
    /// The request target every request asks for.
    pub path: String,
    pub connections: u32,
    /// Requests in flight per connection (`-m`); above 1 this is HTTP/1.1 pipelining.
    #[serde(default = "one")]
    pub streams: u32,
    /// Extra request headers, `"Name: value"`.
    #[serde(default)]
    pub headers: Vec<String>,
    /// The status every response must have; a build answering otherwise does not support the
    /// scenario (a route kind it lacks ends in the default 404).
    #[serde(default = "ok_status")]
    pub expect_status: u16,
    /// Send `Connection: close` so that every request opens a new connection.
    #[serde(default)]
    pub close: bool,
    /// With `close`: the rate used to turn `--duration` into a request count (see `h2load::Stop`).
    #[serde(default = "close_rate_default")]
    pub close_rate: u32,
    /// Speak TLS (`https://`); the `[[listen]]` must have `tls = true` too.
    #[serde(default)]
    pub tls: bool,
    /// With `tls` and `close`: whether a reconnecting h2load client resumes its TLS session.
    /// h2load 1.52 keeps a client's TLS session across its reconnections, so with `true` (the
    /// default) only a client's first handshake is full. `false` sends every request from a new
    /// h2load client (`h2load -r`): every handshake is full, and the load is an open loop at
    /// `close_rate` (or `--rate`) new connections per second.
    #[serde(default = "yes")]
    pub tls_resumption: bool,
    /// What h2load speaks: HTTP/1.1 (`--h1`, the default) or HTTP/2, with prior knowledge in
    /// cleartext (h2c) and by ALPN over TLS; or HTTP/3, which `cargo xtask h3load` speaks
    /// instead of h2load (QUIC, so `tls = true`). The `[[listen]]` must offer it.
    #[serde(default)]
    pub protocol: Protocol,
}

/// The HTTP version the load generator speaks in a scenario: h2load for HTTP/1.1 and HTTP/2,
/// `cargo xtask h3load` for HTTP/3.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    #[default]
    H1,
    H2,
    /// HTTP/3 over QUIC, on UDP at the TLS listener's port number.
    H3,
}

impl Load {
    /// The URL scheme h2load and the probe use.
    pub fn scheme(&self) -> &'static str {
        if self.tls { "https" } else { "http" }
    }

    /// Whether every request comes from a new h2load client, so that every TLS handshake is
    /// full (`tls_resumption = false`).
    pub fn new_client_per_request(&self) -> bool {
        self.tls && self.close && !self.tls_resumption
    }

    /// How requests travel, for people: ``, ` over TLS`, ` over h2c`, ` over TLS (h2)`,
    /// ` over QUIC (h3)`.
    pub fn over(&self) -> &'static str {
        match (self.tls, self.protocol) {
            (false, Protocol::H1) => "",
            (true, Protocol::H1) => " over TLS",
            (false, Protocol::H2) => " over h2c",
            (true, Protocol::H2) => " over TLS (h2)",
            (_, Protocol::H3) => " over QUIC (h3)",
        }
    }

    /// The name of the protocol as a Squall listener lists it (`protocols = [...]`).
    pub fn listener_protocol(&self) -> &'static str {
        match (self.protocol, self.tls) {
            (Protocol::H1, _) => "http1",
            (Protocol::H2, false) => "h2c",
            (Protocol::H2, true) => "h2",
            (Protocol::H3, _) => "h3",
        }
    }

    /// The application protocols h2load may report for this load ("Application protocol:"),
    /// so a run that silently fell back to another one is caught.
    pub fn application_protocols(&self) -> &'static [&'static str] {
        match self.protocol {
            Protocol::H1 => &["http/1.1"],
            Protocol::H2 => &["h2", "h2c"],
            Protocol::H3 => &["h3"],
        }
    }
}

fn one() -> u32 {
    1
}

fn yes() -> bool {
    true
}

fn ok_status() -> u16 {
    200
}

fn close_rate_default() -> u32 {
    4_000
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    description: String,
    load: Load,
    squall: SquallSection,
    /// A local origin for `proxy` routes (their server address is written `ORIGIN`).
    #[serde(default)]
    origin: Option<OriginSection>,
    /// Files for `root` routes (their root is written `SITE`): name → size in bytes, each
    /// generated once per bench into a folder of its own.
    #[serde(default)]
    files: BTreeMap<String, usize>,
}

/// The local origin: one nginx answering every request with status 200, one body and the
/// given headers. Exactly one of `body`, `body_bytes` and `text_bytes`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OriginSection {
    /// The body, written out (nginx `return`; short bodies only, nginx's config tokens are
    /// limited to a few KiB).
    #[serde(default)]
    pub body: Option<String>,
    /// Or a generated body of this many bytes, served from a file.
    #[serde(default)]
    pub body_bytes: Option<usize>,
    /// Or a generated body of this many bytes of English-like text (words in a fixed
    /// pseudo-random order, compressing about as prose does), for compression scenarios.
    #[serde(default)]
    pub text_bytes: Option<usize>,
    /// Response headers added to every answer, such as `cache-control = "max-age=3600"`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Serve https (a self-signed certificate made with openssl), for `tls = true` upstreams.
    #[serde(default)]
    pub tls: bool,
    /// Speak HTTP/2: h2c with prior knowledge only in cleartext (nginx 1.22 then refuses
    /// HTTP/1.1), ALPN h2 beside http/1.1 with `tls`; for `protocol = "h2c"` or `"h2"` upstreams.
    #[serde(default)]
    pub h2: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SquallSection {
    /// The config, inline.
    config: Option<String>,
    /// Or a config file, relative to the scenario file.
    config_file: Option<PathBuf>,
    /// Routes stamped out from a template and put first in the first `[[vhost]]`.
    routes: Option<RouteTemplate>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteTemplate {
    count: u32,
    /// One `[[vhost.route]]` table; `{n}` in any string becomes 0, 1, ... count-1.
    route: Table,
}

impl Scenario {
    /// Parses a scenario file; `name` is its file stem.
    pub fn from_file(path: &Path) -> Result<Scenario> {
        let text =
            fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let name = path.file_stem().context("scenario file has no name")?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Scenario::parse(&name.to_string_lossy(), &text, dir)
            .with_context(|| format!("in scenario {}", path.display()))
    }

    /// Parses scenario text; `dir` resolves `config_file`.
    pub fn parse(name: &str, text: &str, dir: &Path) -> Result<Scenario> {
        let file: ScenarioFile = toml::from_str(text)?;
        validate_load(&file.load)?;
        if let Some(origin) = &file.origin {
            validate_origin(origin)?;
        }
        for (name, &bytes) in &file.files {
            let plain = !name.is_empty() && !name.contains('/') && name != "." && name != "..";
            ensure!(plain, "files: {name:?} is not a plain file name");
            ensure!(
                bytes <= ORIGIN_BODY_BYTES_MAX,
                "files: {name:?} must be at most {ORIGIN_BODY_BYTES_MAX} bytes"
            );
        }
        let config_text = match (&file.squall.config, &file.squall.config_file) {
            (Some(inline), None) => inline.clone(),
            (None, Some(relative)) => fs::read_to_string(dir.join(relative))
                .with_context(|| format!("reading {}", relative.display()))?,
            _ => bail!("[squall] needs exactly one of `config` and `config_file`"),
        };
        let mut config: Table = toml::from_str(&config_text).context("in the squall config")?;
        ensure!(
            listens(&config) == 1,
            "the squall config needs exactly one [[listen]]"
        );
        ensure!(
            listen_tls(&config) == file.load.tls,
            "load.tls = {} but the squall config's [[listen]] has tls = {}: they must agree",
            file.load.tls,
            listen_tls(&config)
        );
        let offered = listen_protocols(&config);
        let wanted = file.load.listener_protocol();
        ensure!(
            offered.iter().any(|p| p == wanted),
            "the load speaks {wanted} but the squall config's [[listen]] offers {offered:?}"
        );
        // The probe of an HTTP/3 scenario is curl over HTTP/2 on the listener's TCP side (curl
        // here has no HTTP/3); the load generator checks the HTTP/3 side itself.
        ensure!(
            file.load.protocol != Protocol::H3 || offered.iter().any(|p| p == "h2"),
            "the load speaks h3, and its probe h2 on the same port over TCP, but the squall \
             config's [[listen]] offers {offered:?}: list \"h2\" too"
        );
        if let Some(origin) = &file.origin {
            check_origin_upstreams(&config, origin)?;
        }
        if let Some(template) = &file.squall.routes {
            prepend_routes(&mut config, template)?;
        }
        Ok(Scenario {
            name: name.to_string(),
            description: file.description,
            load: file.load,
            config,
            origin: file.origin,
            origin_addr: None,
            files: file.files,
            site_dir: None,
        })
    }

    /// Points this scenario's `ORIGIN` upstream servers at a started origin.
    pub fn set_origin_addr(&mut self, addr: SocketAddr) {
        self.origin_addr = Some(addr);
    }

    /// Points this scenario's `root = "SITE"` routes at the folder its files were written to.
    pub fn set_site_dir(&mut self, dir: PathBuf) {
        self.site_dir = Some(dir);
    }

    /// Squall's config as a table, listening on `127.0.0.1:port`.
    pub fn squall_table(&self, port: u16) -> Table {
        let mut config = self.config.clone();
        if let Some(Value::Array(listens)) = config.get_mut("listen") {
            for listen in listens.iter_mut().filter_map(Value::as_table_mut) {
                listen.insert("address".into(), Value::String(format!("127.0.0.1:{port}")));
            }
        }
        if let Some(origin) = self.origin_addr {
            replace_origin(&mut config, origin);
        }
        if let Some(site) = &self.site_dir {
            replace_site(&mut config, site);
        }
        config
    }

    /// Squall's config file text, listening on `127.0.0.1:port`, with `workers` workers
    /// (`--workers`) or the scenario's own.
    pub fn squall_config(&self, port: u16, workers: Option<u32>) -> Result<String> {
        let mut config = self.squall_table(port);
        if let Some(workers) = workers {
            set_workers(&mut config, workers);
        }
        Ok(toml::to_string(&config)?)
    }

    /// How many routes the config has in all vhosts (generated ones included).
    pub fn route_count(&self) -> usize {
        vhosts(&self.config)
            .filter_map(|vhost| vhost.get("route").and_then(Value::as_array))
            .map(Vec::len)
            .sum()
    }
}

/// Every scenario in `dir`: small route tables first, then by name, so tables read from the
/// simplest case to the costliest.
pub fn load_all(dir: &Path) -> Result<Vec<Scenario>> {
    let paths: Vec<PathBuf> = fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .filter(|path| !path.to_string_lossy().ends_with(".squall.toml"))
        .collect();
    let mut all: Vec<Scenario> = paths
        .iter()
        .map(|path| Scenario::from_file(path))
        .collect::<Result<_>>()?;
    all.sort_by(|a, b| (a.route_count(), &a.name).cmp(&(b.route_count(), &b.name)));
    Ok(all)
}

/// The scenarios named, in the order named; all of them when `names` is empty.
pub fn select(all: Vec<Scenario>, names: &[String]) -> Result<Vec<Scenario>> {
    if names.is_empty() {
        return Ok(all);
    }
    names
        .iter()
        .map(|name| {
            all.iter()
                .find(|s| &s.name == name)
                .cloned()
                .with_context(|| {
                    let known: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
                    format!("no scenario {name:?}; there are: {}", known.join(", "))
                })
        })
        .collect()
}

fn validate_load(load: &Load) -> Result<()> {
    ensure!(load.path.starts_with('/'), "load.path must start with '/'");
    ensure!(load.connections >= 1, "load.connections must be at least 1");
    ensure!(load.streams >= 1, "load.streams must be at least 1");
    ensure!(
        !load.close || load.streams == 1,
        "load.close needs streams = 1"
    );
    ensure!(load.close_rate >= 1, "load.close_rate must be at least 1");
    ensure!(
        load.tls_resumption || (load.tls && load.close),
        "load.tls_resumption = false needs tls = true and close = true"
    );
    ensure!(
        !load.close || load.protocol == Protocol::H1,
        "load.close needs protocol = \"h1\" (`Connection: close` is not HTTP/2 or HTTP/3)"
    );
    ensure!(
        load.tls || load.protocol != Protocol::H3,
        "load.protocol = \"h3\" needs tls = true (QUIC is always encrypted)"
    );
    Ok(())
}

fn validate_origin(origin: &OriginSection) -> Result<()> {
    match (&origin.body, origin.body_bytes, origin.text_bytes) {
        (Some(_), None, None) => {}
        (None, Some(bytes), None) | (None, None, Some(bytes)) => ensure!(
            bytes <= ORIGIN_BODY_BYTES_MAX,
            "origin.body_bytes and text_bytes must be at most {ORIGIN_BODY_BYTES_MAX}"
        ),
        _ => bail!("[origin] needs exactly one of `body`, `body_bytes` and `text_bytes`"),
    }
    for (name, value) in &origin.headers {
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        ensure!(
            !name.is_empty() && name.chars().all(token),
            "origin.headers: {name:?} is not a header name"
        );
        ensure!(
            value.chars().all(|c| c == ' ' || c.is_ascii_graphic()) && !value.contains('$'),
            "origin.headers: {value:?} needs to be visible ASCII without `$` (nginx expands it)"
        );
    }
    Ok(())
}

/// An upstream to the harness's origin must speak what that origin serves: TLS or not as it
/// does; HTTP/2 (`protocol = "h2c"` or `"h2"`) only to an `h2 = true` origin; HTTP/1.1 not to a
/// cleartext HTTP/2 one, which nginx 1.22 serves with prior knowledge only. (Over TLS an HTTP/2
/// origin offers http/1.1 too, by ALPN, so `"http1"` and `"auto"` reach it.)
fn check_origin_upstreams(config: &Table, origin: &OriginSection) -> Result<()> {
    for upstream in origin_upstreams(config) {
        let name = upstream.get("name").and_then(Value::as_str).unwrap_or("?");
        let tls = upstream
            .get("tls")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        ensure!(
            tls == origin.tls,
            "upstream {name:?} has tls = {tls} but [origin] tls = {}: they must agree",
            origin.tls
        );
        let protocol = upstream.get("protocol").and_then(Value::as_str);
        match protocol.unwrap_or("http1") {
            "h2c" | "h2" => ensure!(
                origin.h2,
                "upstream {name:?} speaks HTTP/2 ({protocol:?}) but [origin] has no h2 = true"
            ),
            "http1" => ensure!(
                !origin.h2 || origin.tls,
                "upstream {name:?} speaks HTTP/1.1 but the [origin] is h2 = true in cleartext \
                 (HTTP/2 with prior knowledge only): say protocol = \"h2c\""
            ),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
