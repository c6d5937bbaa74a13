//! `[[upstream]]`: origin server groups, how they are reached (addresses, TLS, the PROXY
//! protocol), balanced and health-checked.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// One `[[upstream]]`: a named group of origin servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    pub name: String,
    /// Non-empty, addresses unique.
    pub servers: Vec<UpstreamServer>,
    pub balance: Balance,
    /// What `consistent_hash` hashes.
    pub hash_key: HashKey,
    pub connect_timeout: Duration,
    /// Time to wait for the response head once the request is sent.
    pub response_timeout: Duration,
    /// How often the servers given by host name are looked up again, in the background.
    pub resolve_interval: Duration,
    /// A pooled keep-alive connection idle this long is closed.
    pub pool_idle_timeout: Duration,
    /// A request that could not be sent again (not idempotent, or with a body) reuses only a
    /// pooled connection idle for less than this (zero: never), at most `pool_idle_timeout`.
    pub pool_unsafe_idle_timeout: Duration,
    pub health_check: Option<HealthCheck>,
    /// `tls = true` and its keys: the connections to the servers are TLS.
    pub tls: Option<UpstreamTls>,
    /// `proxy_protocol = "v1" | "v2"`: each connection to a server starts with a PROXY
    /// protocol header carrying the client's address (before any TLS).
    pub proxy_protocol: Option<ProxyProtocolVersion>,
    /// `protocol`: the HTTP version spoken to the servers.
    pub protocol: OriginProtocol,
}

/// The HTTP version an upstream's servers are spoken to in (`protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OriginProtocol {
    /// `"http1"`: HTTP/1.1, one request at a time per connection, kept alive in a pool.
    #[default]
    Http1,
    /// `"h2"`: HTTP/2 over TLS (ALPN `h2` offered alone): one connection carries many streams.
    H2,
    /// `"h2c"`: HTTP/2 over cleartext TCP, with prior knowledge (RFC 9113 §3.3).
    H2c,
    /// `"auto"`: over TLS, ALPN offers `h2` and `http/1.1` and the server chooses.
    Auto,
}

impl OriginProtocol {
    pub fn from_name(name: &str) -> Option<OriginProtocol> {
        Some(match name {
            "http1" => OriginProtocol::Http1,
            "h2" => OriginProtocol::H2,
            "h2c" => OriginProtocol::H2c,
            "auto" => OriginProtocol::Auto,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            OriginProtocol::Http1 => "http1",
            OriginProtocol::H2 => "h2",
            OriginProtocol::H2c => "h2c",
            OriginProtocol::Auto => "auto",
        }
    }
}

/// The PROXY protocol version an upstream's connections start with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProxyProtocolVersion {
    /// The human-readable header (`PROXY TCP4 ...`).
    V1,
    /// The binary header.
    V2,
}

/// How an upstream's servers are reached over TLS.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UpstreamTls {
    /// `tls_server_name`: the SNI sent and the name the certificate must be valid for. `None`:
    /// each server's host name, or its IP literal (then no SNI, and an IP subjectAltName).
    pub server_name: Option<String>,
    /// `ca`: trust these CA certificates (PEM) instead of the operating system's store.
    pub ca: Option<PathBuf>,
    /// `tls_verify`: false accepts any certificate (warned about at start and on reload).
    pub verify: bool,
    /// `tls_certificate` and `tls_certificate_key`: a client certificate for mTLS.
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

impl Upstream {
    /// The distinct host names (with their ports) among the servers, in file order.
    pub fn names(&self) -> Vec<(&str, u16)> {
        let mut names: Vec<(&str, u16)> = Vec::new();
        for server in &self.servers {
            if let ServerAddress::Name { host, port } = &server.address
                && !names.contains(&(host.as_str(), *port))
            {
                names.push((host, *port));
            }
        }
        names
    }
}

/// One origin server of an upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamServer {
    pub address: ServerAddress,
    /// 1 ..= [`WEIGHT_MAX`]; default 1; every address a name resolves to gets it.
    pub weight: u32,
}

/// Where an origin server is: an IP literal, or a host name the OS resolver turns into
/// addresses at start-up, on reload and every `resolve_interval` (never on a worker).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ServerAddress {
    Ip(SocketAddr),
    /// A DNS name (lowercase, without a trailing dot) and a port.
    Name {
        host: String,
        port: u16,
    },
}

impl std::fmt::Display for ServerAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerAddress::Ip(address) => write!(f, "{address}"),
            ServerAddress::Name { host, port } => write!(f, "{host}:{port}"),
        }
    }
}

/// The request property `balance = "consistent_hash"` keeps on one server.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum HashKey {
    /// Path and query (nginx's `hash $request_uri consistent`): one URL, one origin, so the
    /// origins' own caches each hold a share of the objects.
    #[default]
    Uri,
    /// Host: one site, one origin.
    Host,
    /// The client's address: one client, one origin (sessions kept on the origin).
    ClientIp,
    /// The value of a request header (lowercase name), e.g. a session or tenant id; requests
    /// without it hash as an empty value.
    Header(http::HeaderName),
}

impl HashKey {
    /// Parses `"uri"`, `"host"`, `"client_ip"` or `"header:NAME"`.
    pub fn parse(s: &str) -> Result<HashKey, String> {
        match s {
            "uri" => Ok(HashKey::Uri),
            "host" => Ok(HashKey::Host),
            "client_ip" => Ok(HashKey::ClientIp),
            _ => match s.strip_prefix("header:") {
                Some(name) => http::HeaderName::from_bytes(name.as_bytes())
                    .map(HashKey::Header)
                    .map_err(|_| format!("bad header name {name:?}")),
                None => Err(format!(
                    "unknown hash_key {s:?}: use \"uri\", \"host\", \"client_ip\" or \"header:NAME\""
                )),
            },
        }
    }
}

/// How an upstream picks a server for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Balance {
    RoundRobin,
    /// Smooth weighted round robin, as nginx.
    Weighted,
    /// By a hash of the cache key, so one URL keeps going to one origin.
    ConsistentHash,
    LeastConn,
}

impl Balance {
    /// Every name the config accepts, in the order the docs list them.
    pub const NAMES: &[&str] = &["round_robin", "weighted", "consistent_hash", "least_conn"];

    /// The name used in the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            Balance::RoundRobin => "round_robin",
            Balance::Weighted => "weighted",
            Balance::ConsistentHash => "consistent_hash",
            Balance::LeastConn => "least_conn",
        }
    }

    /// The balance named `name` in the config file.
    pub fn from_name(name: &str) -> Option<Balance> {
        match name {
            "round_robin" => Some(Balance::RoundRobin),
            "weighted" => Some(Balance::Weighted),
            "consistent_hash" => Some(Balance::ConsistentHash),
            "least_conn" => Some(Balance::LeastConn),
            _ => None,
        }
    }
}

/// Active health checking of an upstream's servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    /// Request path of the probe; starts with '/'.
    pub path: String,
    pub interval: Duration,
    pub fails: u32,
    pub passes: u32,
}
