//! `[[upstream]]`: upstream names, balancing, servers and their addresses, health checks.

use std::net::SocketAddr;
use std::time::Duration;

use toml::Spanned;

use super::NO_ADDRESS;
use super::value::{duration_or, int_in, timeout_or};
use crate::diagnostics::Report;
use crate::model::*;
use crate::raw::*;

pub(super) fn upstreams(raw: &[Spanned<RawUpstream>], r: &mut Report) -> Vec<Upstream> {
    let mut upstreams: Vec<(Upstream, usize)> = Vec::new();
    for item in raw {
        let line = r.line(&item.span());
        let upstream = upstream(item.get_ref(), r);
        if let Some((_, first)) = upstreams.iter().find(|(u, _)| u.name == upstream.name) {
            let name = &item.get_ref().name;
            r.error(
                &name.span(),
                format!(
                    "upstream {:?} is already defined at line {first}",
                    upstream.name
                ),
            );
        }
        upstreams.push((upstream, line));
    }
    upstreams.into_iter().map(|(u, _)| u).collect()
}

fn upstream(raw: &RawUpstream, r: &mut Report) -> Upstream {
    let name = raw.name.get_ref();
    let name_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if name.is_empty() || !name.chars().all(name_ok) {
        r.error(
            &raw.name.span(),
            format!("bad upstream name {name:?}: use letters, digits, \"_\", \"-\" and \".\""),
        );
    }
    let balance = raw.balance.as_ref().map_or(Balance::RoundRobin, |b| {
        Balance::from_name(b.get_ref()).unwrap_or_else(|| {
            let names = "round_robin, weighted, consistent_hash or least_conn";
            r.error(
                &b.span(),
                format!("unknown balance {:?}: use {names}", b.get_ref()),
            );
            Balance::RoundRobin
        })
    });
    let hash_key = match &raw.hash_key {
        None => HashKey::default(),
        Some(key) => {
            if balance != Balance::ConsistentHash {
                r.error(&key.span(), "hash_key needs balance = \"consistent_hash\"");
            }
            HashKey::parse(key.get_ref()).unwrap_or_else(|e| {
                r.error(&key.span(), e);
                HashKey::default()
            })
        }
    };
    let tls = super::upstream_tls::tls(raw, r);
    let protocol = origin_protocol(raw, tls.is_some(), r);
    let pool_idle_timeout = timeout_or(
        r,
        "pool_idle_timeout",
        raw.pool_idle_timeout.as_ref(),
        POOL_IDLE_TIMEOUT_DEFAULT,
    );
    Upstream {
        name: name.clone(),
        servers: upstream_servers(name, &raw.servers, r),
        balance,
        hash_key,
        connect_timeout: timeout_or(
            r,
            "connect_timeout",
            raw.connect_timeout.as_ref(),
            CONNECT_TIMEOUT_DEFAULT,
        ),
        response_timeout: timeout_or(
            r,
            "response_timeout",
            raw.response_timeout.as_ref(),
            RESPONSE_TIMEOUT_DEFAULT,
        ),
        resolve_interval: timeout_or(
            r,
            "resolve_interval",
            raw.resolve_interval.as_ref(),
            RESOLVE_INTERVAL_DEFAULT,
        ),
        pool_idle_timeout,
        pool_unsafe_idle_timeout: pool_unsafe_idle_timeout(raw, pool_idle_timeout, r),
        health_check: raw
            .health_check
            .as_ref()
            .map(|h| health_check(h.get_ref(), r)),
        tls,
        protocol,
        proxy_protocol: raw
            .proxy_protocol
            .as_ref()
            .and_then(|v| match v.get_ref().as_str() {
                "v1" => Some(ProxyProtocolVersion::V1),
                "v2" => Some(ProxyProtocolVersion::V2),
                other => {
                    r.error(
                        &v.span(),
                        format!("unknown proxy_protocol {other:?}: use \"v1\" or \"v2\""),
                    );
                    None
                }
            }),
    }
}

/// `pool_unsafe_idle_timeout`: zero is allowed (unsafe requests always on a new connection);
/// longer than `pool_idle_timeout` would promise reuse after the pool has closed the connection.
fn pool_unsafe_idle_timeout(raw: &RawUpstream, idle: Duration, r: &mut Report) -> Duration {
    let key = "pool_unsafe_idle_timeout";
    let value = raw.pool_unsafe_idle_timeout.as_ref();
    let default = POOL_UNSAFE_IDLE_TIMEOUT_DEFAULT.min(idle);
    let unsafe_idle = duration_or(r, key, value, default);
    match value {
        Some(value) if unsafe_idle > idle => {
            let message = format!(
                "{key} ({unsafe_idle:?}) is longer than pool_idle_timeout ({idle:?}), after which \
                 no request reuses a connection"
            );
            r.error(&value.span(), message);
            default
        }
        _ => unsafe_idle,
    }
}

/// `protocol`: `h2` and `auto` choose with ALPN, so they need TLS; `h2c` is cleartext; none
/// of the HTTP/2 ones goes with `proxy_protocol` (a connection carries many clients' requests,
/// and its header could name only one).
fn origin_protocol(raw: &RawUpstream, tls: bool, r: &mut Report) -> OriginProtocol {
    let Some(value) = &raw.protocol else {
        return OriginProtocol::Http1;
    };
    let Some(protocol) = OriginProtocol::from_name(value.get_ref()) else {
        let message = format!(
            "unknown protocol {:?}: use \"http1\", \"h2\", \"h2c\" or \"auto\"",
            value.get_ref()
        );
        r.error(&value.span(), message);
        return OriginProtocol::Http1;
    };
    let problem = match protocol {
        OriginProtocol::H2 | OriginProtocol::Auto if !tls => Some(format!(
            "protocol = {:?} chooses HTTP/2 with ALPN, which needs tls = true; use \"h2c\" for \
             HTTP/2 over cleartext",
            protocol.name()
        )),
        OriginProtocol::H2c if tls => Some(
            "protocol = \"h2c\" is HTTP/2 over cleartext; with tls = true use \"h2\"".to_owned(),
        ),
        OriginProtocol::H2 | OriginProtocol::H2c | OriginProtocol::Auto
            if raw.proxy_protocol.is_some() =>
        {
            Some(format!(
                "protocol = {:?} shares a connection among clients, and a PROXY protocol header \
                 names one: use protocol = \"http1\" with proxy_protocol",
                protocol.name()
            ))
        }
        _ => None,
    };
    if let Some(message) = problem {
        r.error(&value.span(), message);
    }
    protocol
}

fn upstream_servers(
    name: &str,
    raw: &List<RawUpstreamServer>,
    r: &mut Report,
) -> Vec<UpstreamServer> {
    if raw.get_ref().is_empty() {
        r.error(&raw.span(), format!("upstream {name:?} has no servers"));
    }
    let mut servers: Vec<UpstreamServer> = Vec::new();
    for item in raw.get_ref() {
        let item = item.get_ref();
        let address = server_address(r, &item.address);
        if let Some(address) = &address
            && servers.iter().any(|s| s.address == *address)
        {
            r.error(
                &item.address.span(),
                format!("server {address} is listed twice"),
            );
        }
        let weight = item
            .weight
            .as_ref()
            .map_or(Some(1), |w| int_in(r, "weight", w, 1..=WEIGHT_MAX));
        servers.push(UpstreamServer {
            address: address.unwrap_or(ServerAddress::Ip(NO_ADDRESS)),
            weight: weight.unwrap_or(1),
        });
    }
    servers
}

/// `IP:PORT` or `NAME:PORT` (a DNS name, resolved later); `None` after reporting why not.
fn server_address(r: &mut Report, value: &Str) -> Option<ServerAddress> {
    let text = value.get_ref();
    let bad = |r: &mut Report, why: &str| {
        let hint = "expected IP:PORT or NAME:PORT, as in \"127.0.0.1:8080\", \"[::1]:8080\" or \"api.internal:8080\"";
        r.error(
            &value.span(),
            format!("bad address {text:?}: {why}; {hint}"),
        );
        None
    };
    if let Ok(address) = text.parse::<SocketAddr>() {
        if address.port() == 0 {
            return bad(r, "port 0");
        }
        return Some(ServerAddress::Ip(address));
    }
    let Some((host, port)) = text.rsplit_once(':') else {
        return bad(r, "no port");
    };
    let port = match port.parse::<u16>() {
        Ok(0) => return bad(r, "port 0"),
        Ok(port) => port,
        Err(_) => return bad(r, "bad port"),
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.is_empty() {
        return bad(r, "no host name");
    }
    if !is_dns_name(host) {
        return bad(r, "not an IP address or a DNS name");
    }
    Some(ServerAddress::Name {
        host: host.to_ascii_lowercase(),
        port,
    })
}

/// Letters, digits and hyphens in dot-separated labels of 1 to 63 bytes, 253 bytes in all
/// (RFC 1123 §2.1); underscores are let through, as resolvers do for service names.
pub(super) fn is_dns_name(host: &str) -> bool {
    let label_ok = |l: &str| {
        (1..=63).contains(&l.len())
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    host.len() <= 253 && host.split('.').all(label_ok)
}

pub(super) fn health_check(raw: &RawHealthCheck, r: &mut Report) -> HealthCheck {
    if !raw.path.get_ref().starts_with('/') {
        r.error(&raw.path.span(), "health_check path must start with \"/\"");
    }
    let count = |r: &mut Report, key: &str, value: &Option<Int>, default: u32| {
        value
            .as_ref()
            .map_or(Some(default), |v| int_in(r, key, v, 1..=HEALTH_COUNT_MAX))
            .unwrap_or(default)
    };
    HealthCheck {
        path: raw.path.get_ref().clone(),
        interval: timeout_or(
            r,
            "interval",
            raw.interval.as_ref(),
            HEALTH_INTERVAL_DEFAULT,
        ),
        fails: count(r, "fails", &raw.fails, HEALTH_FAILS_DEFAULT),
        passes: count(r, "passes", &raw.passes, HEALTH_PASSES_DEFAULT),
    }
}
