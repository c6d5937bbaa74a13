//! Listening sockets: one SO_REUSEPORT socket per worker per `[[listen]]`, so the kernel spreads
//! connections across workers without a shared accept queue (as nginx's `reuseport`).

use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;

use socket2::{Domain, Protocol, Socket, Type};

/// Pending connections the kernel may queue per socket (capped by net.core.somaxconn).
const BACKLOG: i32 = 4096;

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
