//! The PROXY protocol (HAProxy's spec, versions 1 and 2): the header an L4 balancer (HAProxy
//! in TCP mode, AWS NLB, IPVS setups with a proxy, Envoy) writes before a connection's first
//! byte, carrying the client's address that the TCP connection itself no longer shows.
//!
//! Sans-IO: [`parse`] looks at the bytes received so far and says whether they hold a whole
//! header (and how long it is), need more, or are not a valid header. The caller keeps reading
//! until it gets an answer, then hands the bytes after the header to TLS or HTTP. [`encode_v1`]
//! and [`encode_v2`] write headers, for sending to origins.
//!
//! Bounds: a version 1 header is at most 107 bytes (the spec's own limit), a version 2 header
//! at most [`V2_MAX_BYTES`] (its TLVs, which Squall does not use, included): a peer cannot make
//! the reader buffer more. Anything that is neither signature is an error at the first byte
//! that shows it, so a client that speaks HTTP straight to a PROXY listener is refused at once.
#![forbid(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The longest version 1 header (the spec's bound: `PROXY UNKNOWN` followed by two full IPv6
/// addresses and ports).
pub const V1_MAX_BYTES: usize = 107;
/// The longest version 2 header accepted: the 16-byte preamble and up to 2 KiB of addresses
/// and TLVs (HAProxy's own TLVs, SSL details and a unique id included, stay well under it).
pub const V2_MAX_BYTES: usize = 16 + 2048;

const V1_PREFIX: &[u8] = b"PROXY ";
const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";

/// What a complete header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Header {
    /// A proxied connection: the client's address and the address it connected to.
    Proxied {
        source: SocketAddr,
        destination: SocketAddr,
    },
    /// The balancer's own connection (a health check: version 2 `LOCAL`), or one whose
    /// addresses it does not know (version 1 `UNKNOWN`, version 2 `UNSPEC` or a Unix socket):
    /// the connection's own peer address stands.
    Local,
}

/// The result of looking at the bytes received so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A prefix of a valid header: read more (the caller bounds the time it waits).
    Incomplete,
    /// A whole header of `len` bytes; what follows it is the connection's own data.
    Done { header: Header, len: usize },
}

/// Why the bytes are not a PROXY header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("not a PROXY protocol header")]
    NotProxy,
    #[error("version 1 header longer than 107 bytes or without CRLF")]
    V1TooLong,
    #[error("malformed version 1 header")]
    V1Malformed,
    #[error("unsupported version 2 version or command")]
    V2Version,
    #[error("version 2 header longer than allowed")]
    V2TooLong,
    #[error("version 2 address block shorter than its family needs")]
    V2Short,
}

/// Parses the start of a connection's bytes.
pub fn parse(buf: &[u8]) -> Result<Parsed, Error> {
    if buf.first() == Some(&V2_SIGNATURE[0]) {
        parse_v2(buf)
    } else {
        parse_v1(buf)
    }
}

fn parse_v1(buf: &[u8]) -> Result<Parsed, Error> {
    let prefix = buf.len().min(V1_PREFIX.len());
    if buf[..prefix] != V1_PREFIX[..prefix] {
        return Err(Error::NotProxy);
    }
    let window = &buf[..buf.len().min(V1_MAX_BYTES)];
    let Some(end) = window.windows(2).position(|w| w == b"\r\n") else {
        // A lone CR or LF inside the header is malformed; anything else may still be growing.
        if window.contains(&b'\n') || window[..window.len().saturating_sub(1)].contains(&b'\r') {
            return Err(Error::V1Malformed);
        }
        return if buf.len() >= V1_MAX_BYTES {
            Err(Error::V1TooLong)
        } else {
            Ok(Parsed::Incomplete)
        };
    };
    let line = &buf[V1_PREFIX.len()..end];
    // A CR or LF inside the line is malformed however much follows it, as on a partial read.
    if line.iter().any(|&b| b == b'\r' || b == b'\n') {
        return Err(Error::V1Malformed);
    }
    let line = std::str::from_utf8(line).map_err(|_| Error::V1Malformed)?;
    let header = v1_fields(line)?;
    Ok(Parsed::Done {
        header,
        len: end + 2,
    })
}

/// `TCP4 src dst sport dport`, `TCP6 ...` or `UNKNOWN[ anything]`.
fn v1_fields(line: &str) -> Result<Header, Error> {
    if line == "UNKNOWN" || line.starts_with("UNKNOWN ") {
        return Ok(Header::Local);
    }
    let mut parts = line.split(' ');
    let family = parts.next().ok_or(Error::V1Malformed)?;
    let fields: Vec<&str> = parts.collect();
    let [source, destination, source_port, destination_port] = fields[..] else {
        return Err(Error::V1Malformed);
    };
    let address = |text: &str| -> Result<IpAddr, Error> {
        match family {
            "TCP4" => text.parse::<Ipv4Addr>().map(IpAddr::V4),
            "TCP6" => text.parse::<Ipv6Addr>().map(IpAddr::V6),
            _ => return Err(Error::V1Malformed),
        }
        .map_err(|_| Error::V1Malformed)
    };
    Ok(Header::Proxied {
        source: SocketAddr::new(address(source)?, port(source_port)?),
        destination: SocketAddr::new(address(destination)?, port(destination_port)?),
    })
}

/// A decimal port: digits only, no leading zero (but `0` itself), at most 65535.
fn port(text: &str) -> Result<u16, Error> {
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    if !digits || (text.len() > 1 && text.starts_with('0')) || text.len() > 5 {
        return Err(Error::V1Malformed);
    }
    text.parse().map_err(|_| Error::V1Malformed)
}

fn parse_v2(buf: &[u8]) -> Result<Parsed, Error> {
    let prefix = buf.len().min(V2_SIGNATURE.len());
    if buf[..prefix] != V2_SIGNATURE[..prefix] {
        return Err(Error::NotProxy);
    }
    if buf.len() < 16 {
        if let Some(&version) = buf.get(12) {
            check_version(version)?;
        }
        return Ok(Parsed::Incomplete);
    }
    let local = check_version(buf[12])?;
    let length = usize::from(u16::from_be_bytes([buf[14], buf[15]]));
    let len = 16 + length;
    if len > V2_MAX_BYTES {
        return Err(Error::V2TooLong);
    }
    if buf.len() < len {
        return Ok(Parsed::Incomplete);
    }
    let block = &buf[16..len];
    let header = match (local, buf[13] >> 4) {
        (true, _) => Header::Local,
        (false, 0x1) => {
            let a = block.get(..12).ok_or(Error::V2Short)?;
            let ip = |at: usize| IpAddr::V4(Ipv4Addr::new(a[at], a[at + 1], a[at + 2], a[at + 3]));
            Header::Proxied {
                source: SocketAddr::new(ip(0), u16::from_be_bytes([a[8], a[9]])),
                destination: SocketAddr::new(ip(4), u16::from_be_bytes([a[10], a[11]])),
            }
        }
        (false, 0x2) => {
            let a = block.get(..36).ok_or(Error::V2Short)?;
            let ip = |at: usize| {
                let octets: [u8; 16] = a[at..at + 16].try_into().expect("16 bytes");
                IpAddr::V6(Ipv6Addr::from(octets))
            };
            Header::Proxied {
                source: SocketAddr::new(ip(0), u16::from_be_bytes([a[32], a[33]])),
                destination: SocketAddr::new(ip(16), u16::from_be_bytes([a[34], a[35]])),
            }
        }
        // UNSPEC, AF_UNIX, or a family from a later version of the spec: no address to use.
        (false, _) => Header::Local,
    };
    Ok(Parsed::Done { header, len })
}

/// Version 2 and a known command: `Ok(true)` for LOCAL, `Ok(false)` for PROXY.
fn check_version(byte: u8) -> Result<bool, Error> {
    match (byte >> 4, byte & 0x0f) {
        (2, 0) => Ok(true),
        (2, 1) => Ok(false),
        _ => Err(Error::V2Version),
    }
}

/// A version 1 header for a TCP connection from `source` to `destination` (both of one
/// family; mixed families are written as `UNKNOWN`, as the spec says).
pub fn encode_v1(source: SocketAddr, destination: SocketAddr) -> Vec<u8> {
    let text = match (source, destination) {
        (SocketAddr::V4(s), SocketAddr::V4(d)) => {
            format!(
                "PROXY TCP4 {} {} {} {}\r\n",
                s.ip(),
                d.ip(),
                s.port(),
                d.port()
            )
        }
        (SocketAddr::V6(s), SocketAddr::V6(d)) => {
            format!(
                "PROXY TCP6 {} {} {} {}\r\n",
                s.ip(),
                d.ip(),
                s.port(),
                d.port()
            )
        }
        _ => "PROXY UNKNOWN\r\n".to_owned(),
    };
    text.into_bytes()
}

/// A header that carries no client: version 1 `UNKNOWN`, or version 2 `LOCAL` (the sender's
/// own connection, as a balancer's health check). The receiver keeps the connection's own
/// addresses.
pub fn encode_local(v2: bool) -> Vec<u8> {
    if !v2 {
        return b"PROXY UNKNOWN\r\n".to_vec();
    }
    let mut out = Vec::with_capacity(16);
    out.extend_from_slice(&V2_SIGNATURE);
    // Version 2, command LOCAL; family UNSPEC; no address block.
    out.extend_from_slice(&[0x20, 0x00, 0x00, 0x00]);
    out
}

/// A version 2 `PROXY` header over TCP from `source` to `destination`, without TLVs; mixed
/// families are written with IPv4 addresses mapped into IPv6.
pub fn encode_v2(source: SocketAddr, destination: SocketAddr) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + 36);
    out.extend_from_slice(&V2_SIGNATURE);
    out.push(0x21);
    match (source, destination) {
        (SocketAddr::V4(s), SocketAddr::V4(d)) => {
            out.push(0x11);
            out.extend_from_slice(&12u16.to_be_bytes());
            out.extend_from_slice(&s.ip().octets());
            out.extend_from_slice(&d.ip().octets());
        }
        (s, d) => {
            let v6 = |ip: IpAddr| match ip {
                IpAddr::V4(ip) => ip.to_ipv6_mapped(),
                IpAddr::V6(ip) => ip,
            };
            out.push(0x21);
            out.extend_from_slice(&36u16.to_be_bytes());
            out.extend_from_slice(&v6(s.ip()).octets());
            out.extend_from_slice(&v6(d.ip()).octets());
        }
    }
    out.extend_from_slice(&source.port().to_be_bytes());
    out.extend_from_slice(&destination.port().to_be_bytes());
    out
}

#[cfg(test)]
mod tests;
