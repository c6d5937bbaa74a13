//! The validated runtime configuration: what the rest of Squall reads.
//!
//! Every value here has passed validation, so consumers never re-check it: addresses are
//! parsed, durations and sizes are in their units, header names are lowercase `http` types,
//! routes name upstreams that exist. Defaults live here too (as `Default` impls and
//! `*_DEFAULT` constants) so that the binary, the docs and the tests agree on one set.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::Duration;

use http::HeaderName;

use crate::IpNet;

mod route;
mod upstream;
pub use route::*;
pub use upstream::*;

/// `server.drain_timeout` when absent.
pub const DRAIN_TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);
/// `server.tcp_notsent_lowat` when absent: small enough that the kernel holds little more than
/// a few segments of a large response ahead of what Squall chooses to send next, as
/// Cloudflare and Apple recommend for HTTP/2 prioritization.
pub const TCP_NOTSENT_LOWAT_DEFAULT: u64 = 16 * 1024;
/// `server.workers` may not exceed this: one worker per core, and no host we target has more.
pub const WORKERS_MAX: usize = 1024;
/// `limits.header_bytes_max` when absent (nginx's `large_client_header_buffers` is 4 × 8 KiB).
pub const HEADER_BYTES_MAX_DEFAULT: u64 = 16 * 1024;
/// `limits.uri_bytes_max` when absent.
pub const URI_BYTES_MAX_DEFAULT: u64 = 8 * 1024;
/// `limits.body_bytes_max` when absent.
pub const BODY_BYTES_MAX_DEFAULT: u64 = 16 * 1024 * 1024;
/// `limits.header_timeout` when absent: a slowloris client gets this long to send a request head.
pub const HEADER_TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);
/// `limits.idle_timeout` when absent.
pub const IDLE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(60);
/// `cache.memory` when absent.
pub const CACHE_MEMORY_DEFAULT: u64 = 1024 * 1024 * 1024;
/// `upstream.connect_timeout` when absent.
pub const CONNECT_TIMEOUT_DEFAULT: Duration = Duration::from_secs(5);
/// `upstream.response_timeout` when absent (nginx's `proxy_read_timeout`).
pub const RESPONSE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(60);
/// Upper bound of `weight`: consistent hashing places `weight` points per server on its ring,
/// so the bound keeps the ring small.
pub const WEIGHT_MAX: u32 = 1000;
/// `health_check.interval` when absent.
pub const HEALTH_INTERVAL_DEFAULT: Duration = Duration::from_secs(5);
/// `upstream.pool_idle_timeout` when absent: nginx's `keepalive_timeout` for upstreams.
pub const POOL_IDLE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(60);
/// `upstream.pool_unsafe_idle_timeout` when absent: below every common origin keep-alive
/// timeout (gunicorn 2 s, node and Apache 5 s, nginx 75 s).
pub const POOL_UNSAFE_IDLE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(1);
/// `upstream.resolve_interval` when absent: how often server host names are looked up again.
pub const RESOLVE_INTERVAL_DEFAULT: Duration = Duration::from_secs(30);
/// `health_check.fails` when absent: failed probes in a row before a server is marked down.
pub const HEALTH_FAILS_DEFAULT: u32 = 3;
/// `health_check.passes` when absent: good probes in a row before a server is marked up again.
pub const HEALTH_PASSES_DEFAULT: u32 = 2;
/// Upper bound of `health_check.fails` and `health_check.passes`.
pub const HEALTH_COUNT_MAX: u32 = 100;
/// The most values one route may capture (template captures, named regex groups): the router
/// keeps a request's captures in a fixed array of this size.
pub const CAPTURES_MAX: usize = 8;
/// The most '/'-separated segments in a template: it bounds the depth of the router's trie.
pub const TEMPLATE_SEGMENTS_MAX: usize = 64;
/// The variables a redirect `location` may use, written `$name` (as in nginx).
pub const REDIRECT_VARIABLES: &[&str] = &["scheme", "host", "request_uri", "uri"];

/// The whole validated config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub server: Server,
    /// `None` when the file has no `[admin]` section: no admin listener is started.
    pub admin: Option<Admin>,
    pub log: Log,
    /// At least one, addresses unique.
    pub listen: Vec<Listen>,
    /// In file order; the first is the default for clients that send no or an unknown SNI.
    pub certificate: Vec<Certificate>,
    pub limits: Limits,
    pub cache: Cache,
    /// Names unique.
    pub upstream: Vec<Upstream>,
    /// Hosts unique across all vhosts.
    pub vhost: Vec<Vhost>,
    /// `None` without a `[cluster]` section: this node caches alone.
    pub cluster: Option<crate::Cluster>,
    /// `[tls]`: settings of every TLS listener beyond their certificates.
    pub tls: TlsOptions,
    /// `[quic]`: settings of every listener that serves HTTP/3.
    pub quic: Quic,
}

/// When a QUIC listener asks a new client to prove its address with a Retry packet (RFC 9000
/// §8.1) before it spends a handshake on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuicRetry {
    /// Only while more handshakes are in progress than `Quic::handshakes_max` (a flood of
    /// Initial packets from spoofed addresses): one round trip more for new clients then.
    Load,
    /// Every new connection: one round trip more for all, no amplification ever.
    Always,
    /// Never: the amplification limit (3x what the client sent, RFC 9000 §8) still holds.
    Never,
}

/// The `[quic]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quic {
    pub retry: QuicRetry,
    /// Handshakes in progress per worker beyond which `retry = "load"` sends Retry.
    pub handshakes_max: u32,
    /// 0-RTT (TLS early data) accepted on resumed connections; requests in it whose method is
    /// not safe are answered `425 Too Early` (RFC 8470).
    pub early_data: bool,
    /// Concurrent request streams per connection (QUIC's initial_max_streams_bidi). 100 by
    /// default, the least RFC 9114 §6.1 advises: quinn-proto keeps a table entry for every
    /// stream the client may open, which a request's lookups miss in cache.
    pub streams_max: u32,
    /// Receive window of one request body, in bytes.
    pub stream_window: u64,
    /// Receive window of a whole connection, in bytes.
    pub connection_window: u64,
    /// How long a client may remember the `Alt-Svc` advertisement added to HTTP/1.1 and
    /// HTTP/2 responses of an h3 listener's port (`ma`); zero: no `Alt-Svc` field.
    pub alt_svc_max_age: Duration,
    /// Send several packets in one system call (UDP generic segmentation offload), where the
    /// kernel supports it.
    pub gso: bool,
    /// Receive several packets in one buffer (UDP generic receive offload).
    pub gro: bool,
    /// A reuseport BPF program sends each packet to the worker whose connection ID it
    /// carries; off, the kernel spreads packets by address and workers hand each other the
    /// packets of connections they do not own.
    pub steering: bool,
}

impl Default for Quic {
    fn default() -> Self {
        Quic {
            retry: QuicRetry::Load,
            handshakes_max: 1000,
            early_data: false,
            streams_max: 100,
            stream_window: 1024 * 1024,
            connection_window: 16 * 1024 * 1024,
            alt_svc_max_age: Duration::from_secs(86_400),
            gso: true,
            gro: true,
            steering: true,
        }
    }
}

/// The `[tls]` section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// A file of TLS session ticket keys shared by a fleet (read by the binary at start-up
    /// and on reload); `None`: a random key per process, rotated every 6 hours.
    pub ticket_key_file: Option<PathBuf>,
    /// Which rustls API new TLS connections run on.
    pub engine: TlsEngine,
}

/// `[tls] engine`: the rustls API a TLS connection runs on (squall-tls's `Engine`). Both serve
/// the same; they differ in copies and in who owns the buffers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TlsEngine {
    /// rustls's `UnbufferedServerConnection`: records decrypted in Squall's receive buffer.
    #[default]
    Unbuffered,
    /// rustls's `ServerConnection`, with its own receive and send buffers.
    Buffered,
}

impl TlsEngine {
    /// The engine named `name` in the config file.
    pub fn from_name(name: &str) -> Option<TlsEngine> {
        match name {
            "unbuffered" => Some(TlsEngine::Unbuffered),
            "buffered" => Some(TlsEngine::Buffered),
            _ => None,
        }
    }

    /// The name used in the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            TlsEngine::Unbuffered => "unbuffered",
            TlsEngine::Buffered => "buffered",
        }
    }
}

impl Config {
    /// Makes relative paths (certificates, access log, control socket) relative to `base` (the
    /// config file's directory), as an operator expects when the config and its keys sit side
    /// by side.
    pub fn resolve_paths(&mut self, base: &Path) {
        self.resolve_paths_with(base, base);
    }

    /// [`Config::resolve_paths`], with relative `cert` and `key` paths made relative to
    /// `key_base` instead (systemd's credentials directory).
    pub fn resolve_paths_with(&mut self, base: &Path, key_base: &Path) {
        // An upstream's CA bundle is read like an error page, its client key like a key.
        for tls in self.upstream.iter_mut().filter_map(|u| u.tls.as_mut()) {
            let client = tls.client_cert.iter_mut().flat_map(|(c, k)| [c, k]);
            let paths = (tls.ca.iter_mut().map(|p| (p, base))).chain(client.map(|p| (p, key_base)));
            for (path, dir) in paths {
                if path.is_relative() {
                    *path = dir.join(&*path);
                }
            }
        }
        // Ticket keys are secrets, read like the certificates' keys.
        if let Some(keys) = &mut self.tls.ticket_key_file
            && keys.is_relative()
        {
            *keys = key_base.join(&*keys);
        }
        if let Some(control) = &mut self.server.control
            && control.is_relative()
        {
            *control = base.join(&*control);
        }
        if let Some(access) = &mut self.log.access
            && access.is_relative()
        {
            *access = base.join(&*access);
        }
        for certificate in &mut self.certificate {
            if let CertSource::Files { cert, key } = &mut certificate.source {
                for path in [cert, key] {
                    if path.is_relative() {
                        *path = key_base.join(&*path);
                    }
                }
            }
        }
        let vhost_pages = self.vhost.iter_mut().flat_map(|v| &mut v.error_pages);
        for page in self.server.error_pages.iter_mut().chain(vhost_pages) {
            if page.path.is_relative() {
                page.path = base.join(&page.path);
            }
        }
        let routes = self.vhost.iter_mut().flat_map(|v| &mut v.routes);
        for route in routes {
            if let Action::Files(files) = &mut route.action
                && files.root.is_relative()
            {
                files.root = base.join(&files.root);
            }
        }
        let routes = self.vhost.iter_mut().flat_map(|v| &mut v.routes);
        for auth in routes.filter_map(|r| r.auth_basic.as_mut()) {
            if auth.users_file.is_relative() {
                auth.users_file = base.join(&auth.users_file);
            }
        }
    }

    /// The upstream named `name`; validation guarantees every `Action::Proxy` finds one.
    pub fn upstream(&self, name: &str) -> Option<&Upstream> {
        self.upstream.iter().find(|u| u.name == name)
    }
}

/// `[server]`: process-wide settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub workers: Workers,
    /// How long a graceful stop waits for in-flight requests.
    pub drain_timeout: Duration,
    /// The Unix socket `squall reload` talks to; `None`: `$RUNTIME_DIRECTORY/control.sock`
    /// under systemd, no control socket otherwise.
    pub control: Option<PathBuf>,
    /// `TCP_NOTSENT_LOWAT` for client connections, in bytes; 0 leaves the kernel's default.
    pub tcp_notsent_lowat: u64,
    /// `real_ip`: the client address from a trusted proxy's header.
    pub real_ip: Option<crate::RealIp>,
    /// `error_pages`: the default pages for Squall's own error answers (a vhost's win).
    pub error_pages: crate::ErrorPages,
    /// `request_id_header`: the field the request's id is sent to origins in (a client's own
    /// value replaced); `None`: not sent.
    pub request_id_header: Option<HeaderName>,
}

impl Default for Server {
    fn default() -> Self {
        Server {
            workers: Workers::Auto,
            drain_timeout: DRAIN_TIMEOUT_DEFAULT,
            control: None,
            tcp_notsent_lowat: TCP_NOTSENT_LOWAT_DEFAULT,
            real_ip: None,
            error_pages: Vec::new(),
            request_id_header: None,
        }
    }
}

/// `server.workers`: how many pinned io_uring workers to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workers {
    /// One per available core.
    Auto,
    /// Exactly this many (at most [`WORKERS_MAX`]).
    Count(NonZeroUsize),
}

impl Workers {
    /// The number of workers to start on a host with `cores` usable cores.
    pub fn count(self, cores: NonZeroUsize) -> NonZeroUsize {
        match self {
            Workers::Auto => cores,
            Workers::Count(n) => n,
        }
    }
}

/// `[log]`: where request logs go (process logs go to stderr, see `SQUALL_LOG`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Log {
    /// The access log file, one line per request; `None`: no access log.
    pub access: Option<PathBuf>,
    /// How each line is written.
    pub format: LogFormat,
}

/// `log.format`: the access log's line format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// nginx's "combined" and Squall's fields, space separated.
    #[default]
    Combined,
    /// One JSON object per line.
    Json,
}

impl LogFormat {
    /// The format named `name` in the config file.
    pub fn from_name(name: &str) -> Option<LogFormat> {
        match name {
            "combined" => Some(LogFormat::Combined),
            "json" => Some(LogFormat::Json),
            _ => None,
        }
    }

    /// The name used in the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            LogFormat::Combined => "combined",
            LogFormat::Json => "json",
        }
    }
}

/// `[admin]`: the metrics and health endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admin {
    pub listen: SocketAddr,
}

/// One `[[listen]]`: a socket Squall accepts client connections on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listen {
    pub address: SocketAddr,
    pub tls: bool,
    /// Non-empty, no duplicates, in order of preference (the ALPN order for TLS). Validation
    /// guarantees `H2` only with `tls` and `H2c` only without.
    pub protocols: Vec<Protocol>,
    /// `proxy_protocol = true`: every connection starts with a PROXY protocol header (v1 or v2)
    /// from one of these balancer networks, and the address it carries is the client's.
    /// Empty: no PROXY protocol on this listener.
    pub proxy_protocol_from: Vec<IpNet>,
}

/// An application protocol a listener speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// HTTP/1.1 (and 1.0).
    Http1,
    /// HTTP/2 over cleartext with prior knowledge (RFC 9113 §3.3).
    H2c,
    /// HTTP/2 over TLS, chosen by ALPN (RFC 9113 §3.2).
    H2,
    /// HTTP/3 over QUIC (RFC 9114, RFC 9000): UDP on the listener's port number, with the
    /// listener's certificates (ALPN `h3`, TLS 1.3 inside QUIC). Needs `tls`.
    H3,
}

impl Protocol {
    /// The name used in the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Http1 => "http1",
            Protocol::H2c => "h2c",
            Protocol::H2 => "h2",
            Protocol::H3 => "h3",
        }
    }

    /// The ALPN protocol ID to offer for it on a TLS listener's TCP connections (RFC 7301);
    /// h2c has none, and h3 is offered only inside QUIC, never on TCP.
    pub fn alpn_id(self) -> Option<&'static [u8]> {
        match self {
            Protocol::Http1 => Some(b"http/1.1"),
            Protocol::H2 => Some(b"h2"),
            Protocol::H2c | Protocol::H3 => None,
        }
    }

    /// True for the protocols carried over TCP (all but HTTP/3).
    pub fn is_tcp(self) -> bool {
        self != Protocol::H3
    }

    /// What a listener speaks when `protocols` is absent.
    pub fn defaults(tls: bool) -> Vec<Protocol> {
        if tls {
            vec![Protocol::H2, Protocol::Http1]
        } else {
            vec![Protocol::Http1, Protocol::H2c]
        }
    }
}

/// One `[[certificate]]`, chosen by SNI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Certificate {
    /// Non-empty; lowercase names or `*.suffix` wildcards.
    pub hosts: Vec<String>,
    pub source: CertSource,
}

/// Where a certificate's chain and key come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertSource {
    /// PEM files, read at start-up and on reload.
    Files { cert: PathBuf, key: PathBuf },
    /// Generated in memory at start-up for `hosts` (demos and tests).
    SelfSigned,
}

/// `[limits]`: protection against abusive clients, as Tempesta's "frang".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest request head (request line and all header fields), in bytes.
    pub header_bytes_max: u64,
    /// Longest request target, in bytes.
    pub uri_bytes_max: u64,
    /// Largest request body, in bytes; 0 allows none.
    pub body_bytes_max: u64,
    /// Time a client gets to send a complete request head.
    pub header_timeout: Duration,
    /// Time a connection may sit with no request in progress.
    pub idle_timeout: Duration,
    /// Requests per second per client IP; `None` means unlimited.
    pub request_rate: Option<u32>,
    /// Requests a client may send at once above the rate; `Some` exactly when `request_rate`
    /// is (it defaults to `request_rate`).
    pub request_burst: Option<u32>,
    /// Concurrent connections per client IP; `None` means unlimited.
    pub connections_per_ip_max: Option<u32>,
    /// Failed Basic authentication attempts per client address per minute, beyond which the
    /// client is answered 429 without its credentials being checked.
    pub auth_failures_max: u32,
    /// Descriptors kept free for what a client connection can cause (origin connections),
    /// the log files, the admin and control sockets and a reload: accepting pauses before
    /// the process's open descriptors would reach `RLIMIT_NOFILE` minus this.
    pub descriptor_reserve: DescriptorReserve,
    /// Response bytes the whole process may hold for clients that read slowly before the
    /// largest holders' origins are paused.
    pub buffer_memory_max: BufferMemory,
    /// HTTP/2 stream and flood limits.
    pub h2: H2Limits,
}

/// `limits.descriptor_reserve`: computed from the config, or a fixed count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DescriptorReserve {
    /// Sized from the upstream groups, listeners and workers at start-up and on each reload.
    #[default]
    Auto,
    /// This many descriptors; 0 turns the reserve off (accepting then pauses only when the
    /// kernel refuses a descriptor).
    Fixed(u32),
}

/// `limits.buffer_memory_max`: the process-wide budget for buffered response bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BufferMemory {
    /// Sized by the binary from the machine's memory: an eighth of physical RAM, at most
    /// [`BUFFER_MEMORY_AUTO_MAX`].
    #[default]
    Auto,
    /// This many bytes; 0 turns the budget off (each connection keeps its own bound).
    Bytes(u64),
}

/// The most `limits.buffer_memory_max = "auto"` comes to.
pub const BUFFER_MEMORY_AUTO_MAX: u64 = 1 << 30;

impl BufferMemory {
    /// The budget in bytes on a machine with `physical` bytes of memory; 0 when off.
    pub fn resolve(self, physical: u64) -> u64 {
        match self {
            BufferMemory::Auto => (physical / 8).clamp(1, BUFFER_MEMORY_AUTO_MAX),
            BufferMemory::Bytes(n) => n,
        }
    }
}

/// The largest fixed `limits.descriptor_reserve`.
pub const DESCRIPTOR_RESERVE_MAX: u32 = 1 << 24;

/// The `h2_*` keys of `[limits]`: HTTP/2 streams and floods. A connection over a flood limit
/// gets GOAWAY(ENHANCE_YOUR_CALM) and is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct H2Limits {
    /// Concurrent streams per connection (SETTINGS_MAX_CONCURRENT_STREAMS); more are refused.
    pub streams_max: u32,
    /// Streams reset by the client (or refused) per `flood_window`: the rapid-reset limit.
    pub resets_max: u32,
    /// SETTINGS, PING, PRIORITY, RST_STREAM and useless WINDOW_UPDATE frames per window.
    pub control_frames_max: u32,
    /// DATA, HEADERS or CONTINUATION frames with nothing in them, per window.
    pub empty_frames_max: u32,
    /// CONTINUATION frames in one header block.
    pub continuation_frames_max: u32,
    pub flood_window: Duration,
    /// How long a stream (or the connection) may hold response data with a zero send window.
    pub stall_timeout: Duration,
}

impl Default for H2Limits {
    fn default() -> Self {
        H2Limits {
            streams_max: 128,
            resets_max: 200,
            control_frames_max: 1000,
            empty_frames_max: 100,
            continuation_frames_max: 32,
            flood_window: Duration::from_secs(10),
            stall_timeout: Duration::from_secs(30),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_bytes_max: HEADER_BYTES_MAX_DEFAULT,
            uri_bytes_max: URI_BYTES_MAX_DEFAULT,
            body_bytes_max: BODY_BYTES_MAX_DEFAULT,
            header_timeout: HEADER_TIMEOUT_DEFAULT,
            idle_timeout: IDLE_TIMEOUT_DEFAULT,
            request_rate: None,
            request_burst: None,
            connections_per_ip_max: None,
            auth_failures_max: crate::AUTH_FAILURES_MAX_DEFAULT,
            descriptor_reserve: DescriptorReserve::Auto,
            buffer_memory_max: BufferMemory::Auto,
            h2: H2Limits::default(),
        }
    }
}

/// `[cache]`: the shared response cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cache {
    /// Total bytes of cached responses; 0 stores nothing.
    pub memory: u64,
    /// Client networks allowed to send PURGE.
    pub purge_allow: Vec<IpNet>,
    /// Larger responses are passed through, never stored.
    pub object_bytes_max: u64,
    /// Add `X-Cache: HIT|MISS|STALE|REVALIDATED` to responses of cached routes.
    pub x_cache: bool,
    /// How long a request waits for another's fetch of the same object before it goes to the
    /// origin itself (as nginx's `proxy_cache_lock_timeout`).
    pub coalesce_timeout: Duration,
    /// After a response that could not be stored (no-store, private, Set-Cookie, no
    /// freshness, too large), how long its URL's requests go to the origin without waiting for
    /// one another (Varnish's hit-for-miss); 0 turns it off.
    pub hit_for_pass: Duration,
    /// Whether a request's `Cache-Control: no-cache` / `max-age` (and `Pragma: no-cache`) send
    /// a fresh entry to the origin; a route's own setting overrides it.
    pub request_no_cache: RequestNoCache,
    /// A targeted cache-control field (RFC 9213) of this cache's own, read before
    /// `CDN-Cache-Control` and `Surrogate-Control`; lowercase, never one of those two nor
    /// Cache-Control. `None`: only the standard ones.
    pub target_header: Option<HeaderName>,
    /// Whether cached routes remove `CDN-Cache-Control` from responses (RFC 9213 §3: a CDN
    /// "MAY remove it when configured to"). Off by default: the field is for every CDN on the
    /// path, and a second tier behind Squall reads it too.
    pub strip_cdn_cache_control: bool,
    /// The cap on the Last-Modified heuristic (RFC 9111 §4.2.2): a response with no stated
    /// freshness but a Last-Modified is fresh for 10% of the time since then, at most this.
    /// Zero, the default: off, so only stated freshness (or a route's `cache_ttl`) stores.
    pub heuristic_freshness_max: Duration,
}

/// The targeted cache-control fields every cached route reads (RFC 9213 `CDN-Cache-Control`,
/// and `Surrogate-Control`), besides `cache.target_header`. Which of them clients see:
/// [`Route::response_headers`].
pub const TARGETED_HEADERS: [&str; 2] = ["cdn-cache-control", "surrogate-control"];

/// A route's `cache_set_cookie`: what a response with `Set-Cookie` does on a cached route.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CacheSetCookie {
    /// Not stored: a cookie meant for one client is never replayed to another.
    #[default]
    Pass,
    /// Stored without its `Set-Cookie` fields; only the client whose request fetched it gets
    /// the cookie.
    Strip,
    /// Stored with the cookie, which every hit replays.
    Store,
}

impl CacheSetCookie {
    /// The mode named `name` in the config file.
    pub fn from_name(name: &str) -> Option<CacheSetCookie> {
        match name {
            "pass" => Some(CacheSetCookie::Pass),
            "strip" => Some(CacheSetCookie::Strip),
            "store" => Some(CacheSetCookie::Store),
            _ => None,
        }
    }
}

/// `cache.request_no_cache` (and a route's): what the request directives a browser sends on
/// reload do to a fresh entry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RequestNoCache {
    /// RFC 9111 §5.2.1: `no-cache`, `Pragma: no-cache` and `max-age` the entry exceeds make
    /// the request revalidate with the origin.
    #[default]
    Honor,
    /// As nginx and Varnish: those request directives do not bypass a fresh entry, so clients
    /// cannot make the origin work by asking.
    Ignore,
}

impl RequestNoCache {
    /// The mode named `name` in the config file.
    pub fn from_name(name: &str) -> Option<RequestNoCache> {
        match name {
            "honor" => Some(RequestNoCache::Honor),
            "ignore" => Some(RequestNoCache::Ignore),
            _ => None,
        }
    }
}

/// `cache.object_bytes_max` when absent.
pub const CACHE_OBJECT_BYTES_MAX_DEFAULT: u64 = 16 * 1024 * 1024;
/// `cache.coalesce_timeout` when absent.
pub const CACHE_COALESCE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(5);
/// `cache.hit_for_pass` when absent: Varnish's built-in hit-for-miss time.
pub const CACHE_HIT_FOR_PASS_DEFAULT: Duration = Duration::from_secs(120);
/// `cache.heuristic_freshness_max` when absent: the Last-Modified heuristic is off.
pub const CACHE_HEURISTIC_FRESHNESS_MAX_DEFAULT: Duration = Duration::ZERO;

impl Cache {
    /// `cache.purge_allow` when absent: loopback only, so PURGE is never open by accident.
    pub fn purge_allow_default() -> Vec<IpNet> {
        vec![
            IpNet::host(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            IpNet::host(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        ]
    }
}

impl Default for Cache {
    fn default() -> Self {
        Cache {
            memory: CACHE_MEMORY_DEFAULT,
            purge_allow: Cache::purge_allow_default(),
            object_bytes_max: CACHE_OBJECT_BYTES_MAX_DEFAULT,
            x_cache: true,
            coalesce_timeout: CACHE_COALESCE_TIMEOUT_DEFAULT,
            hit_for_pass: CACHE_HIT_FOR_PASS_DEFAULT,
            request_no_cache: RequestNoCache::default(),
            target_header: None,
            strip_cdn_cache_control: false,
            heuristic_freshness_max: CACHE_HEURISTIC_FRESHNESS_MAX_DEFAULT,
        }
    }
}
