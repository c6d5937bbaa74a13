//! `IpNet`: an IP network in CIDR notation, for `cache.purge_allow` and later access lists.
//!
//! A dozen lines of our own instead of a dependency: we need parsing with an operator-friendly
//! error, `contains`, and nothing else.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// An IPv4 or IPv6 network: an address whose bits past `prefix_len` are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpNet {
    addr: IpAddr,
    prefix_len: u8,
}

impl IpNet {
    /// The network `addr/prefix_len`. Refuses a prefix longer than the address and an address
    /// with host bits set: "10.0.0.1/8" is almost always a typo for "10.0.0.0/8" or
    /// "10.0.0.1/32", and guessing which would widen or narrow an access list silently.
    pub fn new(addr: IpAddr, prefix_len: u8) -> Result<IpNet, String> {
        let bits = address_bits(addr);
        if prefix_len > bits {
            return Err(format!(
                "prefix length {prefix_len} is longer than {bits} bits"
            ));
        }
        let net = IpNet { addr, prefix_len };
        let network = net.network();
        if network != addr {
            return Err(format!(
                "host bits are set; did you mean \"{network}/{prefix_len}\"?"
            ));
        }
        Ok(net)
    }

    /// The network holding only `addr`.
    pub fn host(addr: IpAddr) -> IpNet {
        IpNet {
            addr,
            prefix_len: address_bits(addr),
        }
    }

    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    pub fn prefix_len(&self) -> u8 {
        self.prefix_len
    }

    /// Whether `ip` is in this network. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, what a
    /// dual-stack socket reports for an IPv4 peer) counts as its IPv4 address.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = mask_u32(self.prefix_len);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = mask_u128(self.prefix_len);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }

    /// `addr` with the host bits cleared.
    fn network(&self) -> IpAddr {
        match self.addr {
            IpAddr::V4(a) => IpAddr::V4((u32::from(a) & mask_u32(self.prefix_len)).into()),
            IpAddr::V6(a) => IpAddr::V6((u128::from(a) & mask_u128(self.prefix_len)).into()),
        }
    }
}

impl FromStr for IpNet {
    type Err = String;

    /// "a.b.c.d/len", "x:y::z/len", or a bare address meaning that one host.
    fn from_str(s: &str) -> Result<IpNet, String> {
        let Some((addr, len)) = s.split_once('/') else {
            return s
                .parse()
                .map(IpNet::host)
                .map_err(|_| "not an IP address or network".to_owned());
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("{addr:?} is not an IP address"))?;
        let len: u8 = len
            .parse()
            .map_err(|_| format!("{len:?} is not a prefix length"))?;
        IpNet::new(addr, len)
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

fn address_bits(addr: IpAddr) -> u8 {
    if addr.is_ipv4() { 32 } else { 128 }
}

/// The top `len` bits set; `len` <= 32. `checked_shl` covers `len == 0`, where a plain shift by
/// 32 would overflow.
fn mask_u32(len: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0)
}

/// The top `len` bits set; `len` <= 128.
fn mask_u128(len: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn parses_networks_and_hosts() {
        assert_eq!(net("10.0.0.0/8").to_string(), "10.0.0.0/8");
        assert_eq!(net("10.1.2.3").to_string(), "10.1.2.3/32");
        assert_eq!(net("::1").to_string(), "::1/128");
        assert_eq!(net("fd00::/8").prefix_len(), 8);
        assert_eq!(net("0.0.0.0/0").to_string(), "0.0.0.0/0");
    }

    #[test]
    fn refuses_bad_networks() {
        let cases = [
            (
                "10.0.0.1/8",
                "host bits are set; did you mean \"10.0.0.0/8\"?",
            ),
            ("10.0.0.0/33", "prefix length 33 is longer than 32 bits"),
            ("::/129", "prefix length 129 is longer than 128 bits"),
            ("10.0.0/8", "\"10.0.0\" is not an IP address"),
            ("10.0.0.0/x", "\"x\" is not a prefix length"),
            ("example.test", "not an IP address or network"),
            ("", "not an IP address or network"),
        ];
        for (input, error) in cases {
            assert_eq!(input.parse::<IpNet>().unwrap_err(), error, "{input}");
        }
    }

    #[test]
    fn contains() {
        let cases = [
            ("127.0.0.1/32", "127.0.0.1", true),
            ("127.0.0.1/32", "127.0.0.2", false),
            ("10.0.0.0/8", "10.255.1.2", true),
            ("10.0.0.0/8", "11.0.0.0", false),
            ("0.0.0.0/0", "203.0.113.9", true),
            ("::1/128", "::1", true),
            ("::1/128", "127.0.0.1", false),
            ("fd00::/8", "fdab::1", true),
            ("::/0", "2001:db8::1", true),
            ("::/0", "192.0.2.1", false),
            // A dual-stack socket reports IPv4 peers as IPv4-mapped IPv6 addresses.
            ("127.0.0.0/8", "::ffff:127.0.0.1", true),
        ];
        for (network, addr, inside) in cases {
            assert_eq!(net(network).contains(ip(addr)), inside, "{network} {addr}");
        }
    }
}
