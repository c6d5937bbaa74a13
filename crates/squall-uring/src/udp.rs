//! UDP sockets for QUIC: set-up (bind, GRO, GSO, packet info, buffer sizes) and the classic
//! BPF program that steers each packet of a `SO_REUSEPORT` group to the worker that owns its
//! connection.
//!
//! The datagrams themselves go through the ring ([`crate::Ring::recvmsg_multi`],
//! [`crate::Ring::send_datagrams`], in `datagram.rs`); what is here runs once per socket at
//! start-up.
//!
//! Steering: each worker binds its own socket to the QUIC address with `SO_REUSEPORT`, so the
//! kernel spreads packets over them. By default it picks by a hash of the 4-tuple, which sends
//! a connection's packets elsewhere once the client's address changes (NAT rebinding,
//! migration). Squall's server connection IDs carry the owning worker's index in their first
//! byte, and [`quic_steering_program`] makes the kernel pick by that byte instead.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use socket2::{Domain, Protocol, SockRef, Socket, Type};

/// Creates a non-blocking UDP socket bound to `addr`, with `SO_REUSEPORT` when `reuseport`
/// (one socket per worker on one address) and `IPV6_V6ONLY` for an IPv6 address, as the TCP
/// listeners are bound: a `[::]` listener then never takes IPv4 traffic, which its own
/// `0.0.0.0` listener serves.
pub fn udp_socket(addr: SocketAddr, reuseport: bool) -> io::Result<OwnedFd> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_nonblocking(true)?;
    if reuseport {
        socket.set_reuse_port(true)?;
    }
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// Asks the kernel for generic receive offload on a UDP socket (`UDP_GRO`, Linux 5.0): several
/// datagrams of one flow may then arrive as one receive, with their segment size in a control
/// message ([`crate::Datagram::segment_size`]). `Ok(false)` when the kernel does not know the
/// option.
pub fn enable_udp_gro(fd: &impl AsFd) -> io::Result<bool> {
    match set_int(fd.as_fd(), libc::SOL_UDP, libc::UDP_GRO, 1) {
        Ok(()) => Ok(true),
        Err(e) if refused(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Asks for the destination address of each received datagram (`IP_PKTINFO`, or
/// `IPV6_RECVPKTINFO` when `v6`): on a socket bound to a wildcard address, the answer must
/// leave from the address the client wrote to ([`crate::Datagram::local`], and the source
/// given to [`crate::Ring::send_datagrams`]).
pub fn enable_pktinfo(fd: &impl AsFd, v6: bool) -> io::Result<()> {
    match v6 {
        false => set_int(fd.as_fd(), libc::IPPROTO_IP, libc::IP_PKTINFO, 1),
        true => set_int(fd.as_fd(), libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO, 1),
    }
}

/// Whether the kernel knows generic segmentation offload for UDP (`UDP_SEGMENT`, Linux 4.18):
/// a send may then carry several datagrams of one size. A kernel that knows it may still fail
/// such a send, with `EIO` where the outgoing device cannot checksum the segments (see
/// [`is_gso_error`]); the caller then turns segmentation off.
pub fn gso_supported(fd: &impl AsFd) -> bool {
    get_int(fd.as_fd(), libc::SOL_UDP, libc::UDP_SEGMENT).is_ok()
}

/// Whether a failed send with a segment size may be the kernel or the device refusing
/// segmentation offload: `EIO` (a device without checksum offload) or `EINVAL` (a segment
/// size over the path's MTU, or more segments than the kernel takes in one send,
/// `UDP_MAX_SEGMENTS`: 64, or 128 in recent kernels). The datagrams were not sent; send them
/// one by one and stop asking for segmentation if it happens again.
pub fn is_gso_error(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL))
}

/// Sets the socket's receive and send buffer sizes (`SO_RCVBUF`, `SO_SNDBUF`) where given, and
/// returns both as the kernel now has them: it doubles what it is asked for (for its own
/// bookkeeping) and caps it at `net.core.rmem_max` / `wmem_max`. A QUIC server that receives
/// bursts wants a large receive buffer: a datagram that finds it full is dropped.
pub fn set_socket_buffers(
    fd: &impl AsFd,
    recv: Option<usize>,
    send: Option<usize>,
) -> io::Result<(usize, usize)> {
    let socket = SockRef::from(fd);
    if let Some(bytes) = recv {
        socket.set_recv_buffer_size(bytes)?;
    }
    if let Some(bytes) = send {
        socket.set_send_buffer_size(bytes)?;
    }
    Ok((socket.recv_buffer_size()?, socket.send_buffer_size()?))
}

/// One instruction of a classic BPF program (`struct sock_filter`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SockFilter {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

impl SockFilter {
    /// An instruction that does not jump.
    pub const fn stmt(code: u16, k: u32) -> SockFilter {
        SockFilter {
            code,
            jt: 0,
            jf: 0,
            k,
        }
    }

    /// A conditional jump: `jt` instructions ahead when true, `jf` when false.
    pub const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> SockFilter {
        SockFilter { code, jt, jf, k }
    }
}

/// Attaches `program` to the `SO_REUSEPORT` group of `fd` (`SO_ATTACH_REUSEPORT_CBPF`, Linux
/// 4.5): for each packet to the group's address the kernel runs it over the UDP payload and
/// delivers the packet to the socket whose index in the group it returns. Sockets are indexed
/// in the order they joined (bound); an index past the last falls back to the kernel's hash.
/// Attaching through any socket of the group sets it for the whole group.
///
/// When a socket of the group closes, the kernel moves the last one into its place, so the
/// indexes hold only while every worker keeps its socket: a worker's socket lives as long as
/// the process.
pub fn attach_reuseport_cbpf(fd: &impl AsFd, program: &[SockFilter]) -> io::Result<()> {
    let mut filters: Vec<libc::sock_filter> = program
        .iter()
        .map(|f| libc::sock_filter {
            code: f.code,
            jt: f.jt,
            jf: f.jf,
            k: f.k,
        })
        .collect();
    let len = u16::try_from(filters.len())
        .ok()
        .filter(|&len| len > 0 && i32::from(len) <= libc::BPF_MAXINSNS)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "BPF program length"))?;
    let fprog = libc::sock_fprog {
        len,
        filter: filters.as_mut_ptr(),
    };
    // SAFETY: setsockopt reads one `sock_fprog` from the local we pass, of the size we pass,
    // and through it `len` instructions from `filters`, which outlives the call (the kernel
    // copies the program); the descriptor is borrowed for the call.
    let result = unsafe {
        libc::setsockopt(
            fd.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            (&raw const fprog).cast::<libc::c_void>(),
            size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The shortest payload the steering program looks into: a long header's first DCID byte is
/// its seventh (flags, 4 bytes of version, DCID length, DCID).
const STEER_MIN_LEN: u32 = 7;

/// A classic BPF program for [`attach_reuseport_cbpf`] that sends each QUIC packet to socket
/// `first DCID byte % workers` of the group.
///
/// Squall's server connection IDs begin with the index of the worker that owns the
/// connection, so a packet for an established connection reaches its worker whatever the
/// client's address. A client's first packets (Initial, 0-RTT) carry a destination ID the
/// client chose at random; all of them carry the same one, so they all reach one worker, which
/// then answers with IDs of its own. Where the first DCID byte is:
///
/// - short header (bit 0x80 of byte 0 clear): byte 1;
/// - long header (bit 0x80 set): byte 6, after the flags, the 4-byte version and the DCID
///   length.
///
/// A payload too short for a long header (under 7 bytes) is no QUIC packet Squall answers;
/// it goes where the kernel's hash sends it. The program's offsets are counted from the start
/// of the UDP payload: the kernel moves the packet's data pointer past the UDP header before
/// it runs a reuseport program (`reuseport_select_sock` in net/core/sock_reuseport.c, whose
/// `hdr_len` is the UDP header's size for UDP sockets).
///
/// One byte addresses at most 256 workers; `workers` 0 is taken as 1.
pub fn quic_steering_program(workers: u16) -> Vec<SockFilter> {
    let op = |parts: u32| parts as u16;
    let workers = u32::from(workers.max(1));
    vec![
        // A = payload length; under 7 bytes, return an index past the group: the hash picks.
        SockFilter::stmt(op(libc::BPF_LD | libc::BPF_W | libc::BPF_LEN), 0),
        SockFilter::jump(
            op(libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K),
            STEER_MIN_LEN,
            1,
            0,
        ),
        SockFilter::stmt(op(libc::BPF_RET | libc::BPF_K), u32::MAX),
        // A = byte 0; the header form bit picks where the DCID begins.
        SockFilter::stmt(op(libc::BPF_LD | libc::BPF_B | libc::BPF_ABS), 0),
        SockFilter::jump(op(libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K), 0x80, 2, 0),
        // Short header: A = byte 1, then on to the modulo.
        SockFilter::stmt(op(libc::BPF_LD | libc::BPF_B | libc::BPF_ABS), 1),
        SockFilter::stmt(op(libc::BPF_JMP | libc::BPF_JA), 1),
        // Long header: A = byte 6.
        SockFilter::stmt(op(libc::BPF_LD | libc::BPF_B | libc::BPF_ABS), 6),
        // Return A % workers.
        SockFilter::stmt(op(libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K), workers),
        SockFilter::stmt(op(libc::BPF_RET | libc::BPF_A), 0),
    ]
}

/// Errors by which a kernel says it does not know a socket option.
fn refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOPROTOOPT | libc::EINVAL | libc::EOPNOTSUPP)
    )
}

fn set_int(fd: BorrowedFd<'_>, level: i32, name: i32, value: libc::c_int) -> io::Result<()> {
    // SAFETY: setsockopt reads one c_int from the local we pass, of the length we pass; the
    // descriptor is borrowed for the call and stays open across it.
    let result = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&raw const value).cast::<libc::c_void>(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn get_int(fd: BorrowedFd<'_>, level: i32, name: i32) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the local c_int we pass and updates
    // `len`; the descriptor is borrowed for the call and stays open across it.
    let result = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&raw mut value).cast::<libc::c_void>(),
            &mut len,
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value)
}
