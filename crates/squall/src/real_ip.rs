//! The client address of a request that came through a trusted proxy (`server.real_ip`), as
//! nginx's realip module finds it with `real_ip_recursive on`.
//!
//! The connection's peer is believed only when it is in `from`; then the header's addresses
//! are read from the right (the one the trusted peer added last) and the first that is not
//! itself trusted is the client. An entry that is not an address stops the walk: what lies to
//! its left was written by someone we cannot vouch for, so the last good address stands.
//!
//! It is a pure function of the peer and the request's fields, computed per request (HTTP/2
//! multiplexes requests from different clients of one proxy on a connection), wherever the
//! client address is wanted: the rate limits, `allow` / `deny`, authentication failures, the
//! access log and the balancing key. The `X-Forwarded-For` sent to the origin keeps the
//! proxy chain whole: the request's list with the connection's peer appended, so the real
//! client stays the last untrusted entry for the origin's own realip too.

use std::net::{IpAddr, SocketAddr};

use squall_config::{IpNet, RealIp};

/// The client address of a request from `peer` with fields `headers`: `peer` itself unless
/// `real_ip` says to believe its header. An address from the header has port 0.
pub fn client(
    real_ip: Option<&RealIp>,
    peer: Option<SocketAddr>,
    headers: &squall_h1::Fields,
) -> Option<SocketAddr> {
    let (Some(real_ip), Some(peer)) = (real_ip, peer) else {
        return peer;
    };
    let values = headers.get_all(&real_ip.header).map(|v| v.as_bytes());
    match select(peer.ip(), values, &real_ip.from) {
        ip if ip == peer.ip() => Some(peer),
        ip => Some(SocketAddr::new(ip, 0)),
    }
}

/// The realip walk over the header's lines (`values`, in the order received, each a comma
/// separated list).
pub fn select<'a>(
    peer: IpAddr,
    values: impl Iterator<Item = &'a [u8]>,
    trusted: &[IpNet],
) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|net| net.contains(ip));
    if !is_trusted(peer) {
        return peer;
    }
    let entries: Vec<&[u8]> = values
        .flat_map(|value| value.split(|&b| b == b','))
        .map(|entry| entry.trim_ascii())
        .filter(|entry| !entry.is_empty())
        .collect();
    let mut client = peer;
    for entry in entries.iter().rev() {
        let Some(ip) = parse(entry) else {
            break;
        };
        client = ip;
        if !is_trusted(ip) {
            break;
        }
    }
    client
}

/// One list entry: an IPv4 or IPv6 address, bare or with a port (`1.2.3.4:80`,
/// `[2001:db8::1]:80`, `[2001:db8::1]`). IPv4-mapped IPv6 is taken as the IPv4 address.
fn parse(entry: &[u8]) -> Option<IpAddr> {
    let text = std::str::from_utf8(entry).ok()?;
    let ip = if let Some(rest) = text.strip_prefix('[') {
        rest.split_once(']')?.0.parse().ok()?
    } else if let Ok(ip) = text.parse::<IpAddr>() {
        ip
    } else {
        text.parse::<std::net::SocketAddrV4>()
            .ok()?
            .ip()
            .to_owned()
            .into()
    };
    Some(match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|n| n.parse().unwrap()).collect()
    }

    fn pick(peer: &str, values: &[&[u8]], trusted: &[&str]) -> String {
        let peer: IpAddr = peer.parse().unwrap();
        select(peer, values.iter().copied(), &nets(trusted)).to_string()
    }

    const LB: &[&str] = &["10.0.0.0/8", "127.0.0.1"];

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_says() {
        assert_eq!(pick("192.0.2.7", &[b"203.0.113.1"], LB), "192.0.2.7");
        assert_eq!(pick("127.0.0.2", &[b"203.0.113.1"], LB), "127.0.0.2");
    }

    #[test]
    fn the_last_untrusted_address_is_the_client() {
        assert_eq!(pick("10.1.1.1", &[b"203.0.113.1"], LB), "203.0.113.1");
        // The client forged the first entry; the trusted proxies appended the rest.
        assert_eq!(
            pick(
                "10.1.1.1",
                &[b"6.6.6.6, 203.0.113.1, 10.2.2.2,10.3.3.3"],
                LB
            ),
            "203.0.113.1"
        );
        // Several field lines are one list, in order.
        assert_eq!(
            pick("10.1.1.1", &[b"6.6.6.6", b"203.0.113.1 , 10.2.2.2"], LB),
            "203.0.113.1"
        );
        assert_eq!(
            pick("127.0.0.1", &[b"2001:db8::1, [2001:db8::2]:443"], LB),
            "2001:db8::2"
        );
        assert_eq!(
            pick("127.0.0.1", &[b"198.51.100.9:5000"], LB),
            "198.51.100.9"
        );
        assert_eq!(
            pick("127.0.0.1", &[b"::ffff:198.51.100.9"], LB),
            "198.51.100.9"
        );
    }

    #[test]
    fn every_address_trusted_gives_the_first() {
        assert_eq!(pick("10.1.1.1", &[b"10.9.9.9, 10.8.8.8"], LB), "10.9.9.9");
    }

    #[test]
    fn no_header_or_garbage_keeps_what_was_vouched_for() {
        assert_eq!(pick("10.1.1.1", &[], LB), "10.1.1.1");
        assert_eq!(pick("10.1.1.1", &[b""], LB), "10.1.1.1");
        assert_eq!(pick("10.1.1.1", &[b" , ,"], LB), "10.1.1.1");
        assert_eq!(pick("10.1.1.1", &[b"unknown"], LB), "10.1.1.1");
        // The walk stops at the first entry that is not an address.
        assert_eq!(
            pick("10.1.1.1", &[b"6.6.6.6, garbage, 10.2.2.2"], LB),
            "10.2.2.2"
        );
        assert_eq!(pick("10.1.1.1", &[b"1.2.3.4\xff"], LB), "10.1.1.1");
    }

    #[test]
    fn the_header_address_has_no_port_and_the_peer_keeps_its_own() {
        let real_ip = RealIp {
            header: http::HeaderName::from_static("x-forwarded-for"),
            from: nets(LB),
        };
        let mut map = http::HeaderMap::new();
        map.insert("x-forwarded-for", "203.0.113.1".parse().unwrap());
        let headers = squall_h1::Fields::from_header_map(&map);
        let trusted: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let other: SocketAddr = "127.0.0.2:4000".parse().unwrap();
        let got = client(Some(&real_ip), Some(trusted), &headers);
        assert_eq!(got, Some("203.0.113.1:0".parse().unwrap()));
        assert_eq!(client(Some(&real_ip), Some(other), &headers), Some(other));
        assert_eq!(client(None, Some(trusted), &headers), Some(trusted));
        assert_eq!(client(Some(&real_ip), None, &headers), None);
    }
}
