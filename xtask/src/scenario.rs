//! Scenarios: the data in `bench/scenarios/*.toml` that says what Squall serves and how h2load
//! loads it.
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
    /// cleartext (h2c) and by ALPN over TLS. The `[[listen]]` must offer it.
    #[serde(default)]
    pub protocol: Protocol,
}

/// The HTTP version h2load speaks in a scenario.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    #[default]
    H1,
    H2,
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

    /// How requests travel, for people: ``, ` over TLS`, ` over h2c`, ` over TLS (h2)`.
    pub fn over(&self) -> &'static str {
        match (self.tls, self.protocol) {
            (false, Protocol::H1) => "",
            (true, Protocol::H1) => " over TLS",
            (false, Protocol::H2) => " over h2c",
            (true, Protocol::H2) => " over TLS (h2)",
        }
    }

    /// The name of the protocol as a Squall listener lists it (`protocols = [...]`).
    pub fn listener_protocol(&self) -> &'static str {
        match (self.protocol, self.tls) {
            (Protocol::H1, _) => "http1",
            (Protocol::H2, false) => "h2c",
            (Protocol::H2, true) => "h2",
        }
    }

    /// The application protocols h2load may report for this load ("Application protocol:"),
    /// so a run that silently fell back to another one is caught.
    pub fn application_protocols(&self) -> &'static [&'static str] {
        match self.protocol {
            Protocol::H1 => &["http/1.1"],
            Protocol::H2 => &["h2", "h2c"],
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

    /// Squall's config file text, listening on `127.0.0.1:port`.
    pub fn squall_config(&self, port: u16) -> Result<String> {
        Ok(toml::to_string(&self.squall_table(port))?)
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
        "load.close needs protocol = \"h1\" (`Connection: close` is not HTTP/2)"
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
mod tests {
    use super::*;

    fn shipped() -> Vec<Scenario> {
        load_all(&crate::util::repo_root().join("bench/scenarios")).expect("shipped scenarios load")
    }

    fn routes(config: &Table) -> Vec<&Table> {
        vhosts(config)
            .flat_map(|vhost| {
                vhost
                    .get("route")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
            })
            .filter_map(Value::as_table)
            .collect()
    }

    #[test]
    fn files_are_checked_and_site_roots_point_at_their_folder() {
        let text = |files: &str| {
            format!(
                "description = \"d\"\n[load]\npath = \"/a\"\nconnections = 1\n[files]\n{files}\n\
                 [squall]\nconfig = '''\n[[listen]]\naddress = \"127.0.0.1:1\"\n[[vhost]]\n\
                 [[vhost.route]]\nprefix = \"/\"\nroot = \"SITE\"\n'''\n"
            )
        };
        let mut scenario = Scenario::parse("s", &text("\"a\" = 10"), Path::new(".")).unwrap();
        assert_eq!(scenario.files.get("a"), Some(&10));
        scenario.set_site_dir(PathBuf::from("/bench/sites/s"));
        let config = scenario.squall_config(1).unwrap();
        assert!(config.contains("root = \"/bench/sites/s\""), "{config}");
        assert!(Scenario::parse("s", &text("\"a/b\" = 1"), Path::new(".")).is_err());
        assert!(Scenario::parse("s", &text("\"a\" = 999999999"), Path::new(".")).is_err());
    }

    #[test]
    fn the_issue_scenarios_ship() {
        let names: Vec<String> = shipped().into_iter().map(|s| s.name).collect();
        for name in [
            "h1-small",
            "h1-pipelined",
            "h1-close",
            "h1-10k-routes-static",
            "h1-10k-routes-prefix",
            "h1-10k-routes-regex",
            "h1-tls-small",
            "h1-tls-handshake",
        ] {
            assert!(
                names.iter().any(|n| n == name),
                "{name} missing from {names:?}"
            );
        }
    }

    #[test]
    fn ten_thousand_routes_and_the_request_hits_the_5000th() {
        for scenario in shipped()
            .iter()
            .filter(|s| s.name.starts_with("h1-10k-routes"))
        {
            assert_eq!(scenario.route_count(), 10_000, "{}", scenario.name);
            let table = scenario.squall_table(1);
            let target = routes(&table)[4_999];
            let pattern = ["exact", "prefix", "regex"]
                .iter()
                .find_map(|kind| target.get(*kind).and_then(Value::as_str))
                .expect("a matcher");
            assert!(pattern.contains("/4999"), "{}: {pattern}", scenario.name);
            let path = &scenario.load.path;
            // The path carries the 5,000th route's number, and no shorter one as a whole segment.
            assert!(
                path.contains("/4999") && !path.contains("/4999/4"),
                "{path}"
            );
        }
    }

    #[test]
    fn the_harness_owns_the_listen_address() {
        for scenario in shipped() {
            let text = scenario.squall_config(45_678).expect("serializes");
            let parsed: Table = toml::from_str(&text).expect("round-trips");
            let listen = &parsed["listen"].as_array().expect("listen")[0];
            assert_eq!(
                listen["address"].as_str(),
                Some("127.0.0.1:45678"),
                "{}",
                scenario.name
            );
            assert_eq!(
                parsed["server"]["workers"].as_integer(),
                Some(1),
                "{}",
                scenario.name
            );
        }
    }

    #[test]
    fn the_tls_scenarios_speak_tls_to_a_self_signed_tls_listener() {
        let all = shipped();
        let tls: Vec<&Scenario> = all.iter().filter(|s| s.load.tls).collect();
        assert!(
            tls.len() >= 2,
            "{:?}",
            tls.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        for scenario in tls {
            let table = scenario.squall_table(45_678);
            assert!(listen_tls(&table), "{}", scenario.name);
            assert_eq!(scenario.load.scheme(), "https");
            let certificates = table["certificate"].as_array().expect("[[certificate]]");
            assert_eq!(certificates.len(), 1, "{}", scenario.name);
            assert_eq!(certificates[0]["self_signed"].as_bool(), Some(true));
            let listen = &table["listen"].as_array().expect("listen")[0];
            assert_eq!(listen["address"].as_str(), Some("127.0.0.1:45678"));
            assert_eq!(
                listen["tls"].as_bool(),
                Some(true),
                "the port change keeps tls"
            );
        }
        let by_name = |name: &str| {
            all.iter()
                .find(|s| s.name == name)
                .unwrap_or_else(|| panic!("{name} ships"))
        };
        let small = by_name("h1-tls-small");
        assert!(!small.load.close && !small.load.new_client_per_request());
        let handshake = by_name("h1-tls-handshake");
        assert!(handshake.load.close && handshake.load.new_client_per_request());
        assert!(!by_name("h1-small").load.tls);
        assert_eq!(by_name("h1-small").load.scheme(), "http");
    }

    #[test]
    fn the_http2_and_cache_scenarios_are_what_they_say() {
        let all = shipped();
        let by_name = |name: &str| {
            all.iter()
                .find(|s| s.name == name)
                .unwrap_or_else(|| panic!("{name} ships"))
        };
        for (name, tls, streams) in [
            ("h2c-small", false, 10),
            ("h2c-small-m100", false, 100),
            ("h2-tls-small", true, 10),
            ("h2-tls-small-m100", true, 100),
            ("h2-tls-cache-hit-1k", true, 10),
        ] {
            let load = &by_name(name).load;
            assert_eq!(load.protocol, Protocol::H2, "{name}");
            assert_eq!(
                (load.tls, load.streams, load.connections),
                (tls, streams, 100)
            );
            let offered = listen_protocols(&by_name(name).squall_table(1));
            assert!(offered.iter().any(|p| p == "http1"), "{name}: {offered:?}");
        }
        assert_eq!(by_name("h1-small").load.protocol, Protocol::H1);
        for (name, bytes) in [
            ("h1-cache-hit-1k", 1024),
            ("h1-cache-hit-64k", 65_536),
            ("h2-tls-cache-hit-1k", 1024),
            ("h2-tls-cache-hit-1m", 1_048_576),
        ] {
            let scenario = by_name(name);
            let origin = scenario.origin.as_ref().expect("an origin");
            assert_eq!(
                (origin.body.as_ref(), origin.body_bytes),
                (None, Some(bytes))
            );
            assert_eq!(origin.headers["cache-control"], "max-age=3600");
            let mut scenario = scenario.clone();
            scenario.set_origin_addr(([127, 0, 0, 1], 4_321).into());
            let table = scenario.squall_table(1);
            let route = routes(&table)[0];
            assert_eq!(route["cache"].as_bool(), Some(true), "{name}");
            let server = &table["upstream"][0]["servers"][0];
            assert_eq!(server["address"].as_str(), Some("127.0.0.1:4321"));
        }
    }

    #[test]
    fn the_http2_origin_scenarios_are_what_they_say() {
        let all = shipped();
        let by_name = |name: &str| {
            all.iter()
                .find(|s| s.name == name)
                .unwrap_or_else(|| panic!("{name} ships"))
        };
        for (name, client, tls, protocol) in [
            ("h1-proxy-h2c", Protocol::H1, false, "h2c"),
            ("h2-proxy-h2c", Protocol::H2, false, "h2c"),
            ("h1-proxy-h2-tls", Protocol::H1, true, "h2"),
        ] {
            let scenario = by_name(name);
            assert_eq!(scenario.load.protocol, client, "{name}");
            let origin = scenario.origin.as_ref().expect("an origin");
            assert!(origin.h2 && origin.tls == tls, "{name}");
            assert_eq!(origin.body.as_deref(), Some("Hello, world!"));
            let table = scenario.squall_table(1);
            let upstream = &table["upstream"][0];
            assert_eq!(upstream["protocol"].as_str(), Some(protocol), "{name}");
            assert_eq!(
                upstream.get("tls").and_then(Value::as_bool),
                tls.then_some(true)
            );
        }
        let load = &by_name("h2-proxy-h2c").load;
        assert_eq!((load.connections, load.streams), (16, 8));
        let load = &by_name("h1-proxy-h2c").load;
        assert_eq!((load.connections, load.streams), (64, 1));
    }

    #[test]
    fn the_listener_must_offer_the_loads_protocol() {
        let text = |load: &str, listen: &str| {
            format!(
                "description = \"d\"\n[load]\npath = \"/\"\nconnections = 1\n{load}\n\
                 [squall]\nconfig = '''\n[[listen]]\naddress = \"x\"\n{listen}\n'''\n"
            )
        };
        let parse =
            |load: &str, listen: &str| Scenario::parse("t", &text(load, listen), Path::new("."));
        assert!(parse("protocol = \"h2\"", "protocols = [\"http1\", \"h2c\"]").is_ok());
        // Without `protocols`, CONFIG.md's defaults: http1 and h2c, or h2 and http1 with TLS.
        assert!(parse("protocol = \"h2\"", "").is_ok());
        assert!(parse("protocol = \"h2\"\ntls = true", "tls = true").is_ok());
        let err = parse("protocol = \"h2\"", "protocols = [\"http1\"]").expect_err("no h2c");
        assert!(format!("{err:#}").contains("speaks h2c"), "{err:#}");
        assert!(parse("", "protocols = [\"h2c\"]").is_err());
        assert!(parse("protocol = \"h3\"", "").is_err());
        let close = parse("protocol = \"h2\"\nclose = true", "").expect_err("close");
        assert!(
            format!("{close:#}").contains("Connection: close"),
            "{close:#}"
        );
    }

    #[test]
    fn origin_sections() {
        let text = |origin: &str| {
            format!(
                "description = \"d\"\n[load]\npath = \"/\"\nconnections = 1\n[origin]\n{origin}\n\
                 [squall]\nconfig = '''\n[[listen]]\naddress = \"x\"\n'''\n"
            )
        };
        let parse = |origin: &str| Scenario::parse("t", &text(origin), Path::new("."));
        let written = parse("body = \"x\"").expect("valid");
        let section = written.origin.expect("an origin");
        assert_eq!(section.body.as_deref(), Some("x"));
        assert!(section.headers.is_empty());
        assert!(parse("body_bytes = 10\nheaders = { \"cache-control\" = \"max-age=1\" }").is_ok());
        assert!(parse("").is_err());
        assert!(parse("body = \"x\"\nbody_bytes = 1").is_err());
        assert!(parse("body_bytes = 100000000").is_err());
        let text = parse("text_bytes = 65536").expect("valid").origin;
        assert_eq!(text.expect("an origin").text_bytes, Some(65_536));
        assert!(parse("text_bytes = 1\nbody_bytes = 1").is_err());
        assert!(parse("text_bytes = 1\nbody = \"x\"").is_err());
        assert!(parse("text_bytes = 100000000").is_err());
        assert!(parse("body = \"x\"\nheaders = { \"a b\" = \"c\" }").is_err());
        assert!(parse("body = \"x\"\nheaders = { \"a\" = \"$c\" }").is_err());
    }

    #[test]
    fn upstreams_to_the_origin_speak_what_it_serves() {
        let text = |origin: &str, upstream: &str| {
            format!(
                "description = \"d\"\n[load]\npath = \"/\"\nconnections = 1\n\
                 [origin]\nbody = \"x\"\n{origin}\n[squall]\nconfig = '''\n\
                 [[listen]]\naddress = \"x\"\n[[upstream]]\nname = \"app\"\n\
                 servers = [{{ address = \"ORIGIN\" }}]\n{upstream}\n'''\n"
            )
        };
        let parse = |origin: &str, upstream: &str| {
            Scenario::parse("t", &text(origin, upstream), Path::new("."))
        };
        let h2c = parse("h2 = true", "protocol = \"h2c\"").expect("valid");
        assert!(h2c.origin.expect("an origin").h2);
        assert!(parse("", "").is_ok());
        assert!(parse("tls = true", "tls = true").is_ok());
        let h2_tls = "tls = true\nh2 = true";
        assert!(parse(h2_tls, "tls = true\nprotocol = \"h2\"").is_ok());
        // Over TLS the HTTP/2 origin offers http/1.1 too.
        assert!(parse(h2_tls, "tls = true").is_ok());
        assert!(parse(h2_tls, "tls = true\nprotocol = \"auto\"").is_ok());
        let err = parse("h2 = true", "").expect_err("HTTP/1.1 to an h2c origin");
        assert!(format!("{err:#}").contains("say protocol"), "{err:#}");
        let err = parse("", "protocol = \"h2c\"").expect_err("h2c to an HTTP/1.1 origin");
        assert!(format!("{err:#}").contains("no h2 = true"), "{err:#}");
        assert!(parse("tls = true", "tls = true\nprotocol = \"h2\"").is_err());
        let err = parse(h2_tls, "protocol = \"h2c\"").expect_err("cleartext to https");
        assert!(format!("{err:#}").contains("must agree"), "{err:#}");
        assert!(parse("h2 = true", "tls = true\nprotocol = \"h2\"").is_err());
        assert!(parse("h2 = \"yes\"", "").is_err());
    }

    #[test]
    fn tls_in_the_load_and_in_the_listener_must_agree() {
        let text = |load: &str, listen: &str| {
            format!(
                "description = \"d\"\n[load]\npath = \"/\"\nconnections = 1\n{load}\n\
                 [squall]\nconfig = '''\n[[listen]]\naddress = \"x\"\n{listen}\n'''\n"
            )
        };
        let parse =
            |load: &str, listen: &str| Scenario::parse("t", &text(load, listen), Path::new("."));
        let tls = parse("tls = true", "tls = true").expect("valid");
        assert!(tls.load.tls && tls.load.tls_resumption);
        assert!(!tls.load.new_client_per_request());
        let err = parse("tls = true", "").expect_err("a cleartext listener");
        assert!(format!("{err:#}").contains("must agree"), "{err:#}");
        assert!(parse("", "tls = true").is_err());
        assert!(parse("tls = false", "tls = false").is_ok());
        let full = parse(
            "tls = true\nclose = true\ntls_resumption = false",
            "tls = true",
        )
        .expect("valid");
        assert!(full.load.new_client_per_request());
        // Without TLS or without close there is no session to resume.
        let err = parse("tls = true\ntls_resumption = false", "tls = true").expect_err("close");
        assert!(format!("{err:#}").contains("tls_resumption"), "{err:#}");
        assert!(parse("close = true\ntls_resumption = false", "").is_err());
        assert!(parse("tls = \"yes\"", "tls = true").is_err());
    }

    #[test]
    fn templates_and_errors() {
        let text = r#"
description = "d"
[load]
path = "/a/2"
connections = 4
[squall]
config = '''
[[listen]]
address = "x"
[[vhost]]
hosts = ["*"]
[[vhost.route]]
prefix = "/"
respond = { status = 404 }
'''
[squall.routes]
count = 3
route = { exact = "/a/{n}", respond = { body = "n={n}" } }
"#;
        let scenario = Scenario::parse("t", text, Path::new(".")).expect("valid");
        let table = scenario.squall_table(9);
        let all = routes(&table);
        assert_eq!(all.len(), 4);
        assert_eq!(all[2]["exact"].as_str(), Some("/a/2"));
        assert_eq!(all[2]["respond"]["body"].as_str(), Some("n=2"));
        assert_eq!(all[3]["prefix"].as_str(), Some("/"));
        assert_eq!(scenario.load.streams, 1);
        assert_eq!(scenario.load.expect_status, 200);
        let unknown = text.replace("connections = 4", "connections = 4\nconections = 5");
        assert!(Scenario::parse("t", &unknown, Path::new(".")).is_err());
        let relative = text.replace("path = \"/a/2\"", "path = \"a\"");
        assert!(Scenario::parse("t", &relative, Path::new(".")).is_err());
    }

    #[test]
    fn config_file_beside_the_scenario() {
        let dir = std::env::temp_dir().join(format!("xtask-scenario-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("temp dir");
        fs::write(dir.join("t.squall.toml"), "[[listen]]\naddress = \"x\"\n").expect("write");
        let text = "description = \"d\"\n[load]\npath = \"/\"\nconnections = 1\n\
                    [squall]\nconfig_file = \"t.squall.toml\"\n";
        let scenario = Scenario::parse("t", text, &dir);
        fs::remove_dir_all(&dir).expect("cleanup");
        assert_eq!(scenario.expect("valid").route_count(), 0);
    }
}
