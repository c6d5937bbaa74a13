//! The raw schema: the config file's shape as serde sees it, before validation.
//!
//! Every struct denies unknown keys, so a typo is an error with its position instead of a
//! silently ignored setting. Values that validation may still reject are wrapped in
//! `Spanned`, which keeps their byte span so the diagnostic can point at them. Durations and
//! sizes are read as any TOML value (`Val`) so that `drain_timeout = 10` gets our explanation
//! ("duration without a unit") instead of serde's "expected a string", and so that such
//! mistakes are collected with the others rather than stopping the parse.

use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use toml::Spanned;

/// A string with its span.
pub(crate) type Str = Spanned<String>;
/// Any TOML value with its span: durations, sizes, `workers`.
pub(crate) type Val = Spanned<toml::Value>;
/// An integer with its span; ranges are checked in validation.
pub(crate) type Int = Spanned<i64>;
/// An array whose elements each keep a span.
pub(crate) type List<T> = Spanned<Vec<Spanned<T>>>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    #[serde(default)]
    pub server: RawServer,
    pub admin: Option<RawAdmin>,
    #[serde(default)]
    pub log: RawLog,
    #[serde(default)]
    pub listen: Vec<Spanned<RawListen>>,
    #[serde(default)]
    pub certificate: Vec<Spanned<RawCertificate>>,
    #[serde(default)]
    pub limits: RawLimits,
    #[serde(default)]
    pub cache: RawCache,
    #[serde(default)]
    pub upstream: Vec<Spanned<RawUpstream>>,
    #[serde(default)]
    pub vhost: Vec<Spanned<RawVhost>>,
    pub cluster: Option<Spanned<RawCluster>>,
    pub tls: Option<Spanned<RawTls>>,
    pub quic: Option<Spanned<RawQuic>>,
}

/// `[quic]`: settings of every listener that serves HTTP/3.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawQuic {
    pub retry: Option<Str>,
    pub handshakes_max: Option<Int>,
    pub early_data: Option<Spanned<bool>>,
    pub streams_max: Option<Int>,
    pub stream_window: Option<Val>,
    pub connection_window: Option<Val>,
    pub alt_svc_max_age: Option<Val>,
    pub gso: Option<Spanned<bool>>,
    pub gro: Option<Spanned<bool>>,
    pub steering: Option<Spanned<bool>>,
}

/// `[tls]`: TLS settings shared by every TLS listener.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTls {
    pub ticket_key_file: Option<Str>,
    pub engine: Option<Str>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawServer {
    pub workers: Option<Val>,
    pub drain_timeout: Option<Val>,
    pub control: Option<Str>,
    pub tcp_notsent_lowat: Option<Val>,
    pub real_ip: Option<Spanned<RawRealIp>>,
    pub error_pages: Option<Spanned<Pairs>>,
    pub request_id_header: Option<Str>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLog {
    pub access: Option<Str>,
    pub format: Option<Str>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAdmin {
    pub listen: Str,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawListen {
    pub address: Str,
    pub tls: Option<Spanned<bool>>,
    pub protocols: Option<List<String>>,
    pub proxy_protocol: Option<Spanned<bool>>,
    pub proxy_protocol_from: Option<List<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCertificate {
    pub hosts: Option<List<String>>,
    pub cert: Option<Str>,
    pub key: Option<Str>,
    pub self_signed: Option<Spanned<bool>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLimits {
    pub header_bytes_max: Option<Val>,
    pub uri_bytes_max: Option<Val>,
    pub body_bytes_max: Option<Val>,
    pub header_timeout: Option<Val>,
    pub idle_timeout: Option<Val>,
    pub request_rate: Option<Int>,
    pub request_burst: Option<Int>,
    pub connections_per_ip_max: Option<Int>,
    pub auth_failures_max: Option<Int>,
    pub descriptor_reserve: Option<Val>,
    pub buffer_memory_max: Option<Val>,
    pub h2_streams_max: Option<Int>,
    pub h2_resets_max: Option<Int>,
    pub h2_control_frames_max: Option<Int>,
    pub h2_empty_frames_max: Option<Int>,
    pub h2_continuation_frames_max: Option<Int>,
    pub h2_flood_window: Option<Val>,
    pub h2_stall_timeout: Option<Val>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCache {
    pub memory: Option<Val>,
    pub purge_allow: Option<List<String>>,
    pub object_bytes_max: Option<Val>,
    pub x_cache: Option<Spanned<bool>>,
    pub coalesce_timeout: Option<Val>,
    pub hit_for_pass: Option<Val>,
    pub request_no_cache: Option<Str>,
    pub target_header: Option<Str>,
    pub strip_cdn_cache_control: Option<Spanned<bool>>,
    pub heuristic_freshness_max: Option<Val>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawUpstream {
    pub name: Str,
    pub servers: List<RawUpstreamServer>,
    pub balance: Option<Str>,
    pub hash_key: Option<Str>,
    pub connect_timeout: Option<Val>,
    pub response_timeout: Option<Val>,
    pub resolve_interval: Option<Val>,
    pub pool_idle_timeout: Option<Val>,
    pub pool_unsafe_idle_timeout: Option<Val>,
    pub health_check: Option<Spanned<RawHealthCheck>>,
    pub tls: Option<Spanned<bool>>,
    pub tls_server_name: Option<Str>,
    pub ca: Option<Str>,
    pub tls_verify: Option<Spanned<bool>>,
    pub tls_certificate: Option<Str>,
    pub tls_certificate_key: Option<Str>,
    pub proxy_protocol: Option<Str>,
    pub protocol: Option<Str>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawUpstreamServer {
    pub address: Str,
    pub weight: Option<Int>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHealthCheck {
    pub path: Str,
    pub interval: Option<Val>,
    pub fails: Option<Int>,
    pub passes: Option<Int>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawVhost {
    pub hosts: Option<List<String>>,
    pub error_pages: Option<Spanned<Pairs>>,
    #[serde(default)]
    pub route: Vec<Spanned<RawRoute>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRoute {
    pub exact: Option<Str>,
    pub prefix: Option<Str>,
    pub regex: Option<Str>,
    pub template: Option<Str>,
    pub methods: Option<List<String>>,
    pub headers: Option<Spanned<Pairs>>,
    pub respond: Option<Spanned<RawRespond>>,
    pub redirect: Option<Spanned<RawRedirect>>,
    pub block: Option<Int>,
    pub proxy: Option<Str>,
    pub root: Option<Str>,
    pub index: Option<Spanned<OneOrMany>>,
    pub root_follow_symlinks: Option<Spanned<bool>>,
    pub precompressed: Option<List<String>>,
    pub cache: Option<Spanned<bool>>,
    pub cache_ttl: Option<Val>,
    pub request_no_cache: Option<Str>,
    pub cache_set_cookie: Option<Str>,
    pub allow: Option<List<String>>,
    pub deny: Option<List<String>>,
    pub auth_basic: Option<Spanned<RawAuthBasic>>,
    pub request_rate: Option<Str>,
    pub request_burst: Option<Int>,
    pub request_rate_key: Option<Str>,
    pub request_headers: Option<Spanned<RawHeaderEdits>>,
    pub response_headers: Option<Spanned<RawHeaderEdits>>,
    pub compress: Option<Spanned<RawCompress>>,
    pub intercept_errors: Option<Spanned<bool>>,
    pub allow_trace: Option<Spanned<bool>>,
    pub upgrade: Option<List<String>>,
    pub tunnel_idle_timeout: Option<Val>,
    pub response_timeout: Option<Val>,
    pub read_timeout: Option<Val>,
    pub body_bytes_max: Option<Val>,
    pub strip_prefix: Option<Spanned<bool>>,
    pub upstream_prefix: Option<Str>,
    pub rewrite: Option<Str>,
}

/// A string, or a list of them (`index = "index.html"` or `index = ["index.html", "i.htm"]`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// A route's `compress = { types, min_bytes, level = { gzip, br, zstd } }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCompress {
    pub types: Option<List<String>>,
    pub min_bytes: Option<Val>,
    pub level: Option<Spanned<RawCompressLevels>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCompressLevels {
    pub gzip: Option<Int>,
    pub br: Option<Int>,
    pub zstd: Option<Int>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRespond {
    pub status: Option<Int>,
    pub body: Option<String>,
    pub headers: Option<Spanned<Pairs>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRedirect {
    pub status: Option<Int>,
    pub location: Str,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHeaderEdits {
    pub set: Option<Spanned<Pairs>>,
    pub remove: Option<List<String>>,
}

/// A table of strings (`{ "content-type" = "text/plain" }`), in file order, keys and values
/// spanned. A map type would lose either the order or the key positions.
#[derive(Debug)]
pub(crate) struct Pairs(pub Vec<(Str, Str)>);

impl<'de> Deserialize<'de> for Pairs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Pairs, D::Error> {
        deserializer.deserialize_map(PairsVisitor)
    }
}

struct PairsVisitor;

impl<'de> Visitor<'de> for PairsVisitor {
    type Value = Pairs;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table of strings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pairs, A::Error> {
        let mut pairs = Vec::new();
        while let Some(key) = map.next_key()? {
            pairs.push((key, map.next_value()?));
        }
        Ok(Pairs(pairs))
    }
}

/// `[cluster]`: the Squall nodes that share one cache by owning its keys.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCluster {
    pub nodes: List<RawClusterNode>,
    #[serde(rename = "self")]
    pub self_name: Option<Str>,
    pub hash_key: Option<Str>,
    pub replicas: Option<Int>,
    pub local_ttl: Option<Val>,
    pub health_check: Option<Spanned<RawHealthCheck>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawClusterNode {
    pub name: Str,
    pub address: Str,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAuthBasic {
    pub realm: Str,
    pub users_file: Str,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRealIp {
    pub header: Str,
    pub from: List<String>,
}
