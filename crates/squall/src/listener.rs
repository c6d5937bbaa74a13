//! Listening sockets: one SO_REUSEPORT socket per worker per `[[listen]]`, so the kernel spreads
//! connections across workers without a shared accept queue (as nginx's `reuseport`).
//!
//! SO_REUSEPORT would also let a second Squall (same user) bind the same address and silently
//! take half the connections. [`claim`] stops that: before the workers' sockets bind, one socket
//! without SO_REUSEPORT binds the address, which fails while any other socket holds it.

use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;

use socket2::{Domain, Protocol, Socket, Type};

/// Pending connections the kernel may queue per socket (capped by net.core.somaxconn).
const BACKLOG: i32 = 4096;

/// Checks that no other socket holds `address` and returns the address to bind the workers'
/// sockets to (with port 0, a port that was free). The probe is closed before they bind; the
/// window between is a few system calls.
pub fn claim(address: SocketAddr) -> io::Result<SocketAddr> {
    let probe = Socket::new(
        Domain::for_address(address),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    // SO_REUSEADDR only lets the bind pass TIME_WAIT leftovers: a socket that listens, or is
    // bound, still makes it fail, as long as this one has no SO_REUSEPORT.
    probe.set_reuse_address(true)?;
    if address.is_ipv6() {
        probe.set_only_v6(true)?;
    }
    probe.bind(&address.into()).map_err(|e| {
        if e.kind() == io::ErrorKind::AddrInUse {
            io::Error::new(e.kind(), format!("another process holds it ({e})"))
        } else {
            e
        }
    })?;
    let local = probe.local_addr()?.as_socket();
    local.ok_or_else(|| io::Error::other("a socket without an IP address"))
}

/// [`claim`] for UDP: checks that no other socket holds `address` for datagrams (an HTTP/3
/// listener's port) and returns the address to bind the workers' UDP sockets to.
pub fn claim_udp(address: SocketAddr) -> io::Result<SocketAddr> {
    let probe = Socket::new(
        Domain::for_address(address),
        Type::DGRAM,
        Some(Protocol::UDP),
    )?;
    if address.is_ipv6() {
        probe.set_only_v6(true)?;
    }
    probe.bind(&address.into()).map_err(|e| {
        if e.kind() == io::ErrorKind::AddrInUse {
            io::Error::new(
                e.kind(),
                format!("another process holds its UDP port ({e})"),
            )
        } else {
            e
        }
    })?;
    let local = probe.local_addr()?.as_socket();
    local.ok_or_else(|| io::Error::other("a socket without an IP address"))
}

/// One UDP socket per worker for an HTTP/3 listener, with SO_REUSEPORT: `gro` asks the
/// kernel to coalesce received datagrams; a wildcard address reports each datagram's
/// destination, to answer from it. Larger socket buffers than the default, so that a burst
/// of datagrams waits in the kernel rather than being dropped.
pub fn bind_udp(address: SocketAddr, gro: bool) -> io::Result<OwnedFd> {
    /// What each UDP socket asks for in each direction (capped by net.core.{r,w}mem_max).
    const BUFFER_BYTES: usize = 4 << 20;
    let fd = squall_uring::udp_socket(address, true)?;
    if address.ip().is_unspecified() {
        squall_uring::enable_pktinfo(&fd, address.is_ipv6())?;
    }
    if gro {
        squall_uring::enable_udp_gro(&fd)?;
    }
    squall_uring::set_socket_buffers(&fd, Some(BUFFER_BYTES), Some(BUFFER_BYTES))?;
    Ok(fd)
}

/// A listening socket for one worker, with SO_REUSEPORT.
pub fn bind(address: SocketAddr) -> io::Result<OwnedFd> {
    let socket = Socket::new(
        Domain::for_address(address),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    if address.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_tcp_nodelay(true)?;
    socket.bind(&address.into())?;
    socket.listen(BACKLOG)?;
    Ok(socket.into())
}

/// The protocols a listener serves, from its `protocols` list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Protocols {
    pub http1: bool,
    pub h2c: bool,
    pub h2: bool,
}

impl Protocols {
    pub fn from_config(protocols: &[squall_config::Protocol]) -> Protocols {
        use squall_config::Protocol;
        Protocols {
            http1: protocols.contains(&Protocol::Http1),
            h2c: protocols.contains(&Protocol::H2c),
            h2: protocols.contains(&Protocol::H2),
        }
    }
}
