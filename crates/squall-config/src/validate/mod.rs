//! Raw schema → validated [`Config`]: every rule the config contract states, with every
//! violation reported at the offending value.
//!
//! Sections are checked in an order that lets later ones refer to earlier ones: upstreams
//! before routes (a route's `proxy` must name one), certificates before listeners (a TLS
//! listener needs one). A value that fails is replaced by its default so checking continues;
//! the result is only handed out when the report is empty.

mod client;
mod cluster;
mod compress;
mod files;
mod rewrite;
mod route;
mod timeouts;
mod upstream;
mod upstream_tls;
mod value;

use std::net::{Ipv4Addr, SocketAddr};
use std::num::NonZeroUsize;
use std::path::PathBuf;

use http::HeaderName;
use toml::Spanned;

use crate::diagnostics::Report;
use crate::model::*;
use crate::raw::*;
use upstream::{health_check, is_dns_name, upstreams};
use value::{duration_or, int_in, nonzero_size_or, size_or, socket_addr, timeout_or};

/// Stands in for an address that failed to parse, so checking can go on; never handed out.
const NO_ADDRESS: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);

/// Validates the whole file; the caller hands the result out only if `r` stays empty.
pub(crate) fn config(raw: &RawConfig, r: &mut Report) -> Config {
    let admin = raw.admin.as_ref().map(|admin| Admin {
        listen: socket_addr(r, &admin.listen).unwrap_or(NO_ADDRESS),
    });
    let certificate = certificates(&raw.certificate, r);
    let listen = listeners(&raw.listen, !certificate.is_empty(), r);
    if let (Some(admin), Some(raw_admin)) = (&admin, &raw.admin) {
        admin_conflict(admin, &raw_admin.listen, &raw.listen, r);
    }
    let upstream = upstreams(&raw.upstream, r);
    let mut vhost = route::vhosts(&raw.vhost, &upstream, r);
    let cache = cache(&raw.cache, r);
    route::hide_targeted(&mut vhost, &cache);
    let server = server(&raw.server, r);
    route::send_request_id(&mut vhost, server.request_id_header.as_ref());
    let cluster = raw
        .cluster
        .as_ref()
        .map(|c| cluster::cluster(c, &listen, r));
    Config {
        server,
        admin,
        log: log(&raw.log, r),
        listen,
        certificate,
        limits: limits(&raw.limits, r),
        cache,
        upstream,
        vhost,
        cluster,
        tls: tls(raw.tls.as_ref(), !raw.certificate.is_empty(), r),
        quic: raw
            .quic
            .as_ref()
            .map_or_else(Quic::default, |q| quic(q.get_ref(), r)),
    }
}

/// `[quic]`: each key in its range; absent keys keep their defaults.
fn quic(raw: &RawQuic, r: &mut Report) -> Quic {
    let d = Quic::default();
    let retry = match raw.retry.as_ref() {
        None => d.retry,
        Some(value) => match value.get_ref().as_str() {
            "load" => QuicRetry::Load,
            "always" => QuicRetry::Always,
            "never" => QuicRetry::Never,
            other => {
                let message = format!("retry: unknown value {other:?}: use load, always or never");
                r.error(&value.span(), message);
                d.retry
            }
        },
    };
    let flag = |value: &Option<Spanned<bool>>, default: bool| {
        value.as_ref().map_or(default, |v| *v.get_ref())
    };
    // QUIC's flow-control limits are varints (RFC 9000 §16); a window over 2^62-1 is refused.
    let window = |r: &mut Report, key: &str, value: Option<&Val>, default: u64| {
        let bytes = nonzero_size_or(r, key, value, default);
        if bytes >= 1 << 62 {
            if let Some(value) = value {
                r.error(&value.span(), format!("{key}: at most 2^62-1 bytes"));
            }
            return default;
        }
        bytes
    };
    let stream_window = window(
        r,
        "stream_window",
        raw.stream_window.as_ref(),
        d.stream_window,
    );
    let connection_window = window(
        r,
        "connection_window",
        raw.connection_window.as_ref(),
        d.connection_window,
    );
    Quic {
        retry,
        handshakes_max: (raw.handshakes_max.as_ref())
            .and_then(|v| int_in(r, "handshakes_max", v, 1..=u32::MAX))
            .unwrap_or(d.handshakes_max),
        early_data: flag(&raw.early_data, d.early_data),
        streams_max: (raw.streams_max.as_ref())
            .and_then(|v| int_in(r, "streams_max", v, 1..=1 << 20))
            .unwrap_or(d.streams_max),
        stream_window,
        connection_window,
        alt_svc_max_age: duration_or(
            r,
            "alt_svc_max_age",
            raw.alt_svc_max_age.as_ref(),
            d.alt_svc_max_age,
        ),
        gso: flag(&raw.gso, d.gso),
        gro: flag(&raw.gro, d.gro),
        steering: flag(&raw.steering, d.steering),
    }
}

/// `[tls]`: a ticket key file is a path, and only means something with certificates; the
/// engine is one of two names.
fn tls(raw: Option<&Spanned<RawTls>>, certificates: bool, r: &mut Report) -> TlsOptions {
    let Some(raw) = raw else {
        return TlsOptions::default();
    };
    let engine = raw
        .get_ref()
        .engine
        .as_ref()
        .map_or(TlsEngine::default(), |name| {
            TlsEngine::from_name(name.get_ref()).unwrap_or_else(|| {
                let message = format!(
                    "engine: unknown value {:?}: use unbuffered or buffered",
                    name.get_ref()
                );
                r.error(&name.span(), message);
                TlsEngine::default()
            })
        });
    let ticket_key_file = raw.get_ref().ticket_key_file.as_ref().and_then(|path| {
        if path.get_ref().is_empty() {
            r.error(
                &path.span(),
                "ticket_key_file: an empty path; leave the key out",
            );
            return None;
        }
        if !certificates {
            let message = "ticket_key_file needs a TLS listener and its [[certificate]]";
            r.error(&path.span(), message);
        }
        Some(std::path::PathBuf::from(path.get_ref()))
    });
    TlsOptions {
        ticket_key_file,
        engine,
    }
}

fn log(raw: &RawLog, r: &mut Report) -> Log {
    let access = raw.access.as_ref().and_then(|path| {
        if path.get_ref().is_empty() {
            r.error(
                &path.span(),
                "access: an empty path; leave the key out for no access log",
            );
            None
        } else {
            Some(std::path::PathBuf::from(path.get_ref()))
        }
    });
    let format = raw.format.as_ref().map_or(LogFormat::default(), |name| {
        if access.is_none() {
            r.error(&name.span(), "format needs access = \"PATH\"");
        }
        LogFormat::from_name(name.get_ref()).unwrap_or_else(|| {
            let message = format!(
                "unknown log format {:?}: use combined or json",
                name.get_ref()
            );
            r.error(&name.span(), message);
            LogFormat::default()
        })
    });
    Log { access, format }
}

fn server(raw: &RawServer, r: &mut Report) -> Server {
    let defaults = Server::default();
    Server {
        workers: raw
            .workers
            .as_ref()
            .map_or(defaults.workers, |w| workers(w, r)),
        drain_timeout: duration_or(
            r,
            "drain_timeout",
            raw.drain_timeout.as_ref(),
            defaults.drain_timeout,
        ),
        control: raw.control.as_ref().and_then(|c| path(r, "control", c)),
        tcp_notsent_lowat: notsent_lowat(raw.tcp_notsent_lowat.as_ref(), r),
        real_ip: raw.real_ip.as_ref().and_then(|v| client::real_ip(v, r)),
        error_pages: (raw.error_pages.as_ref())
            .map_or_else(Vec::new, |p| crate::pages::error_pages(p.get_ref(), r)),
        request_id_header: (raw.request_id_header.as_ref())
            .and_then(|v| value::header_name(r, v).and_then(|n| value::editable(r, n, v))),
    }
}

/// A size the kernel takes as an `int` (0 leaves the option unset).
fn notsent_lowat(value: Option<&Val>, r: &mut Report) -> u64 {
    let default = Server::default().tcp_notsent_lowat;
    let size = size_or(r, "tcp_notsent_lowat", value, default);
    match (value, i32::try_from(size)) {
        (Some(value), Err(_)) => {
            r.error(
                &value.span(),
                "tcp_notsent_lowat must be under 2GiB (0 leaves the kernel's default)",
            );
            default
        }
        _ => size,
    }
}

/// `"auto"` or 1 ..= [`WORKERS_MAX`].
fn workers(value: &Val, r: &mut Report) -> Workers {
    let count = match value.get_ref() {
        toml::Value::String(s) if s == "auto" => return Workers::Auto,
        toml::Value::Integer(n) => usize::try_from(*n).ok().and_then(NonZeroUsize::new),
        _ => None,
    };
    match count {
        Some(n) if n.get() <= WORKERS_MAX => Workers::Count(n),
        Some(_) => {
            r.error(
                &value.span(),
                format!("workers must be at most {WORKERS_MAX}"),
            );
            Workers::Auto
        }
        None => {
            r.error(
                &value.span(),
                "workers must be \"auto\" or a positive integer",
            );
            Workers::Auto
        }
    }
}

/// The admin listener may not take a client listener's address: both would bind it.
fn admin_conflict(admin: &Admin, raw: &Str, listeners: &[Spanned<RawListen>], r: &mut Report) {
    let clash = listeners
        .iter()
        .find(|l| l.get_ref().address.get_ref().parse() == Ok(admin.listen));
    if let Some(listener) = clash {
        let line = r.line(&listener.span());
        r.error(
            &raw.span(),
            format!(
                "admin address {} is also the [[listen]] at line {line}",
                admin.listen
            ),
        );
    }
}

fn listeners(raw: &[Spanned<RawListen>], have_certificate: bool, r: &mut Report) -> Vec<Listen> {
    if raw.is_empty() {
        let hint = "Squall needs at least one address to accept connections on";
        r.error(&(0..0), format!("no [[listen]] section: {hint}"));
    }
    let mut seen: Vec<(SocketAddr, usize)> = Vec::new();
    let mut listen = Vec::new();
    for item in raw {
        let line = r.line(&item.span());
        let item = item.get_ref();
        let address = socket_addr(r, &item.address).unwrap_or(NO_ADDRESS);
        if let Some((_, first)) = seen
            .iter()
            .find(|(a, _)| *a == address && address != NO_ADDRESS)
        {
            r.error(
                &item.address.span(),
                format!("duplicate listen address {address} (first at line {first})"),
            );
        }
        seen.push((address, line));
        let tls = item.tls.as_ref().is_some_and(|t| *t.get_ref());
        if let (true, false, Some(value)) = (tls, have_certificate, &item.tls) {
            r.error(
                &value.span(),
                "tls = true needs at least one [[certificate]]",
            );
        }
        let protocols = item
            .protocols
            .as_ref()
            .map_or_else(|| Protocol::defaults(tls), |p| protocols(p, tls, r));
        let proxy_protocol_from = proxy_protocol(item, r);
        if let (false, Some(flag)) = (proxy_protocol_from.is_empty(), &item.proxy_protocol)
            && protocols.contains(&Protocol::H3)
        {
            let message = "proxy_protocol is a header on TCP connections; \"h3\" (QUIC over \
                           UDP) has none: serve h3 on a listener of its own";
            r.error(&flag.span(), message);
        }
        listen.push(Listen {
            address,
            tls,
            protocols,
            proxy_protocol_from,
        });
    }
    listen
}

/// A listener's trusted balancers: `proxy_protocol = true` needs `proxy_protocol_from` (trusting
/// every address would let any client claim any address), and the list needs the flag.
fn proxy_protocol(item: &RawListen, r: &mut Report) -> Vec<crate::IpNet> {
    let on = item.proxy_protocol.as_ref().is_some_and(|v| *v.get_ref());
    match (&item.proxy_protocol, &item.proxy_protocol_from) {
        (Some(flag), None) if on => {
            let message = "proxy_protocol = true needs proxy_protocol_from, the balancers' \
                           networks (a header from anywhere else is refused)";
            r.error(&flag.span(), message);
            Vec::new()
        }
        (_, Some(list)) if !on => {
            r.error(
                &list.span(),
                "proxy_protocol_from needs proxy_protocol = true",
            );
            Vec::new()
        }
        (_, Some(list)) => {
            if list.get_ref().is_empty() {
                r.error(
                    &list.span(),
                    "proxy_protocol_from is empty: list the balancers' networks",
                );
            }
            networks(list, r)
        }
        _ => Vec::new(),
    }
}

/// A listener's protocol list: known names, no repeats, and each fit for `tls` or cleartext.
fn protocols(raw: &List<String>, tls: bool, r: &mut Report) -> Vec<Protocol> {
    if raw.get_ref().is_empty() {
        r.error(
            &raw.span(),
            "protocols is empty: list at least one of http1, h2c, h2, h3",
        );
    }
    let mut protocols = Vec::new();
    for name in raw.get_ref() {
        let protocol = match name.get_ref().as_str() {
            "http1" => Protocol::Http1,
            "h2c" if tls => {
                r.error(
                    &name.span(),
                    "\"h2c\" is HTTP/2 over cleartext; a tls listener offers \"h2\"",
                );
                continue;
            }
            "h2c" => Protocol::H2c,
            "h2" if !tls => {
                let why = "it is negotiated by TLS ALPN; use \"h2c\" for HTTP/2 over cleartext";
                r.error(&name.span(), format!("\"h2\" needs tls = true: {why}"));
                continue;
            }
            "h2" => Protocol::H2,
            "h3" if !tls => {
                let why = "HTTP/3 runs over QUIC, which is always encrypted";
                r.error(&name.span(), format!("\"h3\" needs tls = true: {why}"));
                continue;
            }
            "h3" => Protocol::H3,
            other => {
                r.error(
                    &name.span(),
                    format!("unknown protocol {other:?}: use http1, h2c, h2 or h3"),
                );
                continue;
            }
        };
        if protocols.contains(&protocol) {
            r.error(
                &name.span(),
                format!("protocol {:?} is listed twice", protocol.as_str()),
            );
        }
        protocols.push(protocol);
    }
    protocols
}

fn certificates(raw: &[Spanned<RawCertificate>], r: &mut Report) -> Vec<Certificate> {
    let mut seen: Vec<(String, usize)> = Vec::new();
    let mut certificates = Vec::new();
    for item in raw {
        let line = r.line(&item.span());
        let hosts = certificate_hosts(item, r);
        for (host, span) in &hosts {
            if let Some((_, first)) = seen.iter().find(|(h, _)| h == host) {
                r.error(
                    span,
                    format!("host {host:?} already has the [[certificate]] at line {first}"),
                );
            } else {
                seen.push((host.clone(), line));
            }
        }
        let source = cert_source(item, r);
        let hosts = hosts.into_iter().map(|(host, _)| host).collect();
        certificates.push(Certificate {
            hosts,
            source: source.unwrap_or(CertSource::SelfSigned),
        });
    }
    certificates
}

/// A certificate's host names with their spans; `*` is refused because the first
/// certificate already serves clients whose SNI matches none.
fn certificate_hosts(
    item: &Spanned<RawCertificate>,
    r: &mut Report,
) -> Vec<(String, std::ops::Range<usize>)> {
    let Some(hosts) = &item.get_ref().hosts else {
        r.error(
            &item.span(),
            "certificate has no hosts: list its names, as in hosts = [\"example.test\"]",
        );
        return Vec::new();
    };
    if hosts.get_ref().is_empty() {
        r.error(
            &hosts.span(),
            "hosts is empty: list the certificate's names",
        );
    }
    let mut checked = Vec::new();
    for host in hosts.get_ref() {
        if host.get_ref() == "*" {
            r.error(
                &host.span(),
                "bad host \"*\": the first [[certificate]] is already the default",
            );
        } else if let Some(name) = value::host_pattern(r, host, false) {
            checked.push((name, host.span()));
        }
    }
    checked
}

/// Either a cert and key pair of files, or `self_signed = true`; never both, never half.
fn cert_source(item: &Spanned<RawCertificate>, r: &mut Report) -> Option<CertSource> {
    let raw = item.get_ref();
    let self_signed = raw.self_signed.as_ref().filter(|s| *s.get_ref());
    match (&raw.cert, &raw.key, self_signed) {
        (None, None, Some(_)) => Some(CertSource::SelfSigned),
        (_, _, Some(flag)) => {
            r.error(
                &flag.span(),
                "self_signed = true cannot be combined with cert and key; use one",
            );
            None
        }
        (Some(cert), Some(key), None) => {
            let cert = path(r, "cert", cert);
            let key = path(r, "key", key);
            Some(CertSource::Files {
                cert: cert?,
                key: key?,
            })
        }
        (Some(cert), None, None) => {
            r.error(
                &cert.span(),
                "cert without key: give both, or self_signed = true",
            );
            None
        }
        (None, Some(key), None) => {
            r.error(
                &key.span(),
                "key without cert: give both, or self_signed = true",
            );
            None
        }
        (None, None, None) => {
            r.error(
                &item.span(),
                "certificate needs cert and key, or self_signed = true",
            );
            None
        }
    }
}

fn path(r: &mut Report, key: &str, value: &Str) -> Option<PathBuf> {
    if value.get_ref().is_empty() {
        r.error(&value.span(), format!("{key} is an empty path"));
        return None;
    }
    Some(PathBuf::from(value.get_ref()))
}

fn limits(raw: &RawLimits, r: &mut Report) -> Limits {
    let d = Limits::default();
    let request_rate = raw
        .request_rate
        .as_ref()
        .and_then(|v| int_in(r, "request_rate", v, 1..=u32::MAX));
    let request_burst = match &raw.request_burst {
        Some(burst) => {
            if raw.request_rate.is_none() {
                r.error(&burst.span(), "request_burst needs request_rate");
            }
            int_in(r, "request_burst", burst, 1..=u32::MAX)
        }
        // One second's worth of requests, the usual token-bucket size.
        None => request_rate,
    };
    let connections = raw.connections_per_ip_max.as_ref();
    Limits {
        header_bytes_max: nonzero_size_or(
            r,
            "header_bytes_max",
            raw.header_bytes_max.as_ref(),
            d.header_bytes_max,
        ),
        uri_bytes_max: nonzero_size_or(
            r,
            "uri_bytes_max",
            raw.uri_bytes_max.as_ref(),
            d.uri_bytes_max,
        ),
        body_bytes_max: size_or(
            r,
            "body_bytes_max",
            raw.body_bytes_max.as_ref(),
            d.body_bytes_max,
        ),
        header_timeout: timeout_or(
            r,
            "header_timeout",
            raw.header_timeout.as_ref(),
            d.header_timeout,
        ),
        idle_timeout: timeout_or(r, "idle_timeout", raw.idle_timeout.as_ref(), d.idle_timeout),
        request_rate,
        request_burst,
        connections_per_ip_max: connections
            .and_then(|v| int_in(r, "connections_per_ip_max", v, 1..=u32::MAX)),
        auth_failures_max: client::auth_failures_max(raw.auth_failures_max.as_ref(), r),
        descriptor_reserve: descriptor_reserve(r, raw.descriptor_reserve.as_ref()),
        buffer_memory_max: buffer_memory(r, raw.buffer_memory_max.as_ref()),
        h2: h2_limits(raw, r),
    }
}

/// `"auto"` or a count from 0 to [`DESCRIPTOR_RESERVE_MAX`]; `Auto` when absent or invalid.
fn descriptor_reserve(r: &mut Report, value: Option<&Val>) -> DescriptorReserve {
    const KEY: &str = "descriptor_reserve";
    let Some(value) = value else {
        return DescriptorReserve::Auto;
    };
    let message = match value.get_ref() {
        toml::Value::String(s) if s == "auto" => return DescriptorReserve::Auto,
        toml::Value::Integer(n) => match u32::try_from(*n) {
            Ok(n) if n <= DESCRIPTOR_RESERVE_MAX => return DescriptorReserve::Fixed(n),
            _ => format!("{KEY} must be from 0 to {DESCRIPTOR_RESERVE_MAX}, not {n}"),
        },
        toml::Value::String(s) => format!("{KEY}: expected \"auto\" or a number, found \"{s}\""),
        other => format!(
            "{KEY}: expected \"auto\" or a number, found {}",
            other.type_str()
        ),
    };
    r.error(&value.span(), message);
    DescriptorReserve::Auto
}

/// `"auto"` or a size (0 turns the budget off); `Auto` when absent or invalid.
fn buffer_memory(r: &mut Report, value: Option<&Val>) -> BufferMemory {
    const KEY: &str = "buffer_memory_max";
    match value.map(|v| v.get_ref()) {
        None => BufferMemory::Auto,
        Some(toml::Value::String(s)) if s == "auto" => BufferMemory::Auto,
        Some(_) => BufferMemory::Bytes(size_or(r, KEY, value, 0)),
    }
}

fn h2_limits(raw: &RawLimits, r: &mut Report) -> H2Limits {
    let d = H2Limits::default();
    let mut count = |key: &str, value: &Option<Int>, default: u32| {
        value
            .as_ref()
            .and_then(|v| int_in(r, key, v, 1..=u32::MAX))
            .unwrap_or(default)
    };
    H2Limits {
        // RFC 9113 §6.5.2: 2^31-1 is the largest value SETTINGS can carry.
        streams_max: count("h2_streams_max", &raw.h2_streams_max, d.streams_max)
            .min(i32::MAX as u32),
        resets_max: count("h2_resets_max", &raw.h2_resets_max, d.resets_max),
        control_frames_max: count(
            "h2_control_frames_max",
            &raw.h2_control_frames_max,
            d.control_frames_max,
        ),
        empty_frames_max: count(
            "h2_empty_frames_max",
            &raw.h2_empty_frames_max,
            d.empty_frames_max,
        ),
        continuation_frames_max: count(
            "h2_continuation_frames_max",
            &raw.h2_continuation_frames_max,
            d.continuation_frames_max,
        ),
        flood_window: timeout_or(
            r,
            "h2_flood_window",
            raw.h2_flood_window.as_ref(),
            d.flood_window,
        ),
        stall_timeout: timeout_or(
            r,
            "h2_stall_timeout",
            raw.h2_stall_timeout.as_ref(),
            d.stall_timeout,
        ),
    }
}

fn cache(raw: &RawCache, r: &mut Report) -> Cache {
    let memory = size_or(r, "memory", raw.memory.as_ref(), CACHE_MEMORY_DEFAULT);
    let object_bytes_max = size_or(
        r,
        "object_bytes_max",
        raw.object_bytes_max.as_ref(),
        CACHE_OBJECT_BYTES_MAX_DEFAULT,
    );
    let coalesce_timeout = timeout_or(
        r,
        "coalesce_timeout",
        raw.coalesce_timeout.as_ref(),
        CACHE_COALESCE_TIMEOUT_DEFAULT,
    );
    let hit_for_pass = duration_or(
        r,
        "hit_for_pass",
        raw.hit_for_pass.as_ref(),
        CACHE_HIT_FOR_PASS_DEFAULT,
    );
    let x_cache = raw.x_cache.as_ref().is_none_or(|v| *v.get_ref());
    let request_no_cache = (raw.request_no_cache.as_ref())
        .map_or_else(RequestNoCache::default, |v| request_no_cache(v, r));
    let target_header = raw.target_header.as_ref().and_then(|v| target_header(v, r));
    let strip_cdn_cache_control = raw
        .strip_cdn_cache_control
        .as_ref()
        .is_some_and(|v| *v.get_ref());
    let heuristic_freshness_max = duration_or(
        r,
        "heuristic_freshness_max",
        raw.heuristic_freshness_max.as_ref(),
        CACHE_HEURISTIC_FRESHNESS_MAX_DEFAULT,
    );
    let purge_allow = (raw.purge_allow.as_ref())
        .map_or_else(Cache::purge_allow_default, |list| networks(list, r));
    Cache {
        memory,
        purge_allow,
        object_bytes_max,
        x_cache,
        coalesce_timeout,
        hit_for_pass,
        request_no_cache,
        target_header,
        strip_cdn_cache_control,
        heuristic_freshness_max,
    }
}

/// A list of networks (`"10.0.0.0/8"`, `"::1"`); a bad one is reported and left out.
pub(super) fn networks(list: &List<String>, r: &mut Report) -> Vec<crate::IpNet> {
    let mut nets = Vec::new();
    for item in list.get_ref() {
        match item.get_ref().parse() {
            Ok(net) => nets.push(net),
            Err(e) => r.error(
                &item.span(),
                format!("bad network {:?}: {e}", item.get_ref()),
            ),
        }
    }
    nets
}

/// `cache.target_header`: a field name Squall does not manage and the cache does not already
/// read with another meaning.
fn target_header(value: &Str, r: &mut Report) -> Option<HeaderName> {
    let name = value::header_name(r, value).and_then(|n| value::editable(r, n, value))?;
    // An uppercase name is lowered by the parser; the check below sees it lowercase.
    let taken = name == http::header::CACHE_CONTROL || TARGETED_HEADERS.contains(&name.as_str());
    if taken {
        let message = format!(
            "target_header {:?} is already read by the cache: name a field of your own, such as \"squall-cache-control\"",
            name.as_str()
        );
        r.error(&value.span(), message);
        return None;
    }
    Some(name)
}

/// A `request_no_cache` value, in `[cache]` or a route.
pub(super) fn request_no_cache(value: &Str, r: &mut Report) -> RequestNoCache {
    RequestNoCache::from_name(value.get_ref()).unwrap_or_else(|| {
        r.error(
            &value.span(),
            format!(
                "unknown request_no_cache {:?}: use honor or ignore",
                value.get_ref()
            ),
        );
        RequestNoCache::default()
    })
}
