//! UDP datagrams through the ring, for QUIC: a multishot `recvmsg` into provided buffers and a
//! `sendmsg` of one `Bytes` that may carry several datagrams (segmentation offload).
//!
//! Buffers: datagrams are received into a buffer group of their own ([`UDP_GROUP`], sized by
//! [`RingConfig::udp_buffers`](crate::RingConfig::udp_buffers) and
//! [`udp_buffer_bytes`](crate::RingConfig::udp_buffer_bytes)), not the TCP group. With receive
//! offload one receive may hold up to 64 KiB of datagrams, while a TCP receive wants 16 KiB
//! buffers, many of them; each completion takes a whole buffer, so sharing one size would
//! either truncate coalesced datagrams or spend 64 KiB on every TCP read. Two groups also keep a
//! burst of one protocol from taking the other's buffers. The UDP group is only made when asked
//! for (`udp_buffers` > 0).
//!
//! Layout of a received buffer (the kernel's `io_uring_recvmsg_out` format): a 16-byte header
//! (name, control and payload lengths, message flags), the peer's address in a fixed
//! [`NAME_LEN`] field, the control messages in a fixed [`CONTROL_LEN`] field, then the payload,
//! so the payload starts [`DATAGRAM_HEADROOM`] bytes in.
//!
//! Ownership is the crate's rule: the receive's `msghdr` and everything a send's `msghdr`
//! points at (address, iovec, control messages) move into the op slab, boxed, and are only
//! released by the final completion, which hands the payload `Bytes` back.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

use bytes::Bytes;
use io_uring::types::{Fd, RecvMsgOut};
use io_uring::{cqueue, opcode};

use crate::bufring::{BufRing, RecvBuf};
use crate::{Kind, Lent, OpId, Ring, count};

/// Buffer group id of the datagram receive buffers (the TCP group is 0).
pub(crate) const UDP_GROUP: u16 = 1;

/// `struct io_uring_recvmsg_out`: four u32.
const OUT_HEADER: usize = 16;
/// Room for the peer's address: a `sockaddr_in6` (28 bytes), rounded up to 8 so that the
/// control messages after it stay aligned as the kernel lays them out.
const NAME_LEN: usize = 32;
/// Room for control messages: `UDP_GRO` (24 bytes) and `IPV6_PKTINFO` (40) with space to spare
/// (ECN, later). A message that does not fit is flagged `MSG_CTRUNC`.
const CONTROL_LEN: usize = 128;

/// Bytes of each datagram buffer before the payload (header, address, control messages): a
/// buffer of [`RingConfig::udp_buffer_bytes`](crate::RingConfig::udp_buffer_bytes) holds that
/// many bytes less of payload.
pub const DATAGRAM_HEADROOM: usize = OUT_HEADER + NAME_LEN + CONTROL_LEN;

/// A datagram buffer big enough for what receive offload coalesces (under 64 KiB of payload):
/// the default of [`RingConfig::udp_buffer_bytes`](crate::RingConfig::udp_buffer_bytes).
pub const UDP_BUFFER_BYTES_GRO: u32 = (64 * 1024 + DATAGRAM_HEADROOM) as u32;

/// Room for the control messages of a send: `UDP_SEGMENT` (24 bytes) and `IPV6_PKTINFO` (40).
const SEND_CONTROL_LEN: usize = 64;

/// A datagram (or, with receive offload, several of one size back to back) from a multishot
/// receive. Its bytes are [`Ring::datagram_bytes`]; it goes back to the kernel through
/// [`Ring::recycle_datagram`].
///
/// Not `Clone`: its buffer must go back exactly once.
#[derive(Debug)]
pub struct Datagram {
    buf: RecvBuf,
    len: u32,
    peer: SocketAddr,
    local: Option<IpAddr>,
    segment_size: Option<u16>,
    truncated: bool,
}

impl Datagram {
    /// Bytes of payload received (with receive offload, of all the datagrams).
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True for an empty datagram.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The sender's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// The address the datagram was sent to, when packet info is on
    /// ([`enable_pktinfo`](crate::enable_pktinfo)): the source to answer from.
    pub fn local(&self) -> Option<IpAddr> {
        self.local
    }

    /// With receive offload, the size of each datagram in the payload (the last may be
    /// shorter); `None` when the payload is one datagram.
    pub fn segment_size(&self) -> Option<u16> {
        self.segment_size
    }

    /// True when the payload or the control messages did not fit the buffer (`MSG_TRUNC`,
    /// `MSG_CTRUNC`): the datagram is incomplete, or its segment size or destination may be
    /// missing. Drop it (and count it).
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// The datagrams in `payload` (this datagram's [`Ring::datagram_bytes`]): one, or with
    /// receive offload one per segment; none for an empty datagram.
    pub fn segments<'a>(&self, payload: &'a [u8]) -> std::slice::Chunks<'a, u8> {
        let size = self.segment_size.map_or(payload.len(), usize::from);
        payload.chunks(size.max(1))
    }
}

/// A send's message, boxed: the `msghdr` points at the fields after it, which keep their
/// addresses while the box moves.
#[repr(C)]
pub(crate) struct SendParts {
    msg: libc::msghdr,
    v4: libc::sockaddr_in,
    v6: libc::sockaddr_in6,
    iov: libc::iovec,
    control: Control,
}

/// Control message space, aligned as `cmsghdr` wants.
#[repr(C, align(8))]
struct Control([u8; SEND_CONTROL_LEN]);

impl Ring {
    /// Receives datagrams on the UDP socket `fd` into the datagram buffers until cancelled,
    /// an error, or the buffers running out (`ENOBUFS`, `more` false: recycle and queue it
    /// again; the datagrams not yet received wait in the socket). Each completion is a
    /// [`Completion::Datagram`](crate::Completion::Datagram).
    ///
    /// An empty datagram also ends it, delivered with `more` false: the kernel reads a
    /// receive of 0 bytes as a stream's end. Anyone can send one, so the caller queues the
    /// receive again after it as after `ENOBUFS`.
    ///
    /// The ring must have datagram buffers ([`RingConfig::udp_buffers`](crate::RingConfig)).
    pub fn recvmsg_multi(&mut self, fd: RawFd, token: u64) -> OpId {
        assert!(
            self.udp_bufs.is_some(),
            "a datagram receive needs RingConfig::udp_buffers"
        );
        // Only the lengths count: they fix the size of the address and control fields in
        // every buffer. The box keeps its address in the slab until the final completion.
        let msg = Box::new(recvmsg_template());
        let entry = opcode::RecvMsgMulti::new(Fd(fd), &raw const *msg, UDP_GROUP).build();
        self.queue(entry, Kind::RecvMsg, token, Lent::RecvMsg(msg))
    }

    /// Sends `payload` to `dest` on the UDP socket `fd`, from the local address `src_ip` when
    /// given (for a socket bound to a wildcard address; `IP_PKTINFO` / `IPV6_PKTINFO`, of the
    /// socket's own family). With `segment_size` the kernel cuts `payload` into datagrams of
    /// that size, the last maybe shorter (`UDP_SEGMENT`); a refusal comes back as the
    /// completion's error (see [`is_gso_error`](crate::is_gso_error)).
    ///
    /// The completion is [`Completion::Send`](crate::Completion::Send) with `payload` and the
    /// bytes sent.
    pub fn send_datagrams(
        &mut self,
        fd: RawFd,
        dest: SocketAddr,
        src_ip: Option<IpAddr>,
        payload: Bytes,
        segment_size: Option<u16>,
        token: u64,
    ) -> OpId {
        let mut parts = send_parts(dest);
        parts.iov = libc::iovec {
            iov_base: payload.as_ptr().cast_mut().cast(),
            iov_len: payload.len(),
        };
        let mut used = 0;
        if let Some(size) = segment_size {
            let data = size.to_ne_bytes();
            push_cmsg(
                &mut parts.control,
                &mut used,
                libc::SOL_UDP,
                libc::UDP_SEGMENT,
                &data,
            );
        }
        match src_ip {
            Some(IpAddr::V4(ip)) => {
                // struct in_pktinfo: interface index (0: by route), source, header address.
                let mut data = [0u8; 12];
                data[4..8].copy_from_slice(&ip.octets());
                push_cmsg(
                    &mut parts.control,
                    &mut used,
                    libc::IPPROTO_IP,
                    libc::IP_PKTINFO,
                    &data,
                );
            }
            Some(IpAddr::V6(ip)) => {
                // struct in6_pktinfo: source, interface index (0: by route).
                let mut data = [0u8; 20];
                data[..16].copy_from_slice(&ip.octets());
                let level = libc::IPPROTO_IPV6;
                push_cmsg(
                    &mut parts.control,
                    &mut used,
                    level,
                    libc::IPV6_PKTINFO,
                    &data,
                );
            }
            None => {}
        }
        parts.msg.msg_name = match dest {
            SocketAddr::V4(_) => (&raw mut parts.v4).cast(),
            SocketAddr::V6(_) => (&raw mut parts.v6).cast(),
        };
        parts.msg.msg_iov = &raw mut parts.iov;
        parts.msg.msg_iovlen = 1;
        if used > 0 {
            parts.msg.msg_control = (&raw mut parts.control).cast();
            parts.msg.msg_controllen = used as _;
        }
        // The message and all it points at are in one box, the payload's bytes in `payload`:
        // both move into the slab without their memory moving.
        let entry = opcode::SendMsg::new(Fd(fd), &raw const parts.msg)
            .flags(libc::MSG_NOSIGNAL as u32)
            .build();
        let lent = Lent::SendMsg {
            buf: payload,
            parts,
        };
        self.queue(entry, Kind::SendMsg, token, lent)
    }

    /// The payload of a received datagram.
    pub fn datagram_bytes(&self, datagram: &Datagram) -> &[u8] {
        let bytes = self.udp_buffers().bytes(&datagram.buf);
        &bytes[DATAGRAM_HEADROOM..][..datagram.len as usize]
    }

    /// Gives a datagram's buffer back to the kernel.
    pub fn recycle_datagram(&mut self, datagram: Datagram) {
        self.udp_buffers_mut().recycle(datagram.buf);
    }

    /// The datagram a receive completion carries; its buffer goes straight back when the
    /// completion is an error or cannot be read.
    pub(crate) fn datagram(&mut self, res: i32, flags: u32) -> io::Result<Datagram> {
        let len = count(res)?;
        let Some(bid) = cqueue::buffer_select(flags) else {
            return Err(io::Error::other(
                "datagram receive completed without a provided buffer",
            ));
        };
        let buf = RecvBuf {
            bid,
            len: len as u32,
        };
        match parse(self.udp_buffers().bytes(&buf)) {
            Ok(parsed) => Ok(Datagram { buf, ..parsed }),
            Err(e) => {
                self.udp_buffers_mut().recycle(buf);
                Err(e)
            }
        }
    }

    fn udp_buffers(&self) -> &BufRing {
        // Invariant: a datagram or a receive of them exists only with the UDP group.
        self.udp_bufs
            .as_ref()
            .expect("the ring has datagram buffers")
    }

    fn udp_buffers_mut(&mut self) -> &mut BufRing {
        self.udp_bufs
            .as_mut()
            .expect("the ring has datagram buffers")
    }
}

/// The `msghdr` of the multishot receive: no pointers, only the field lengths.
fn recvmsg_template() -> libc::msghdr {
    // SAFETY: msghdr is plain data for which all zeroes is valid (no name, no control).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_namelen = NAME_LEN as libc::socklen_t;
    msg.msg_controllen = CONTROL_LEN as _;
    msg
}

/// Reads a filled buffer: header, peer address, control messages, payload length. `buf` of
/// the result is a placeholder the caller replaces.
fn parse(bytes: &[u8]) -> io::Result<Datagram> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let out = RecvMsgOut::parse(bytes, &recvmsg_template())
        .map_err(|()| bad("datagram buffer shorter than its header"))?;
    let peer = sockaddr(out.name_data()).ok_or_else(|| bad("datagram without a peer address"))?;
    let mut datagram = Datagram {
        buf: RecvBuf { bid: 0, len: 0 },
        len: out.payload_data().len() as u32,
        peer,
        local: None,
        segment_size: None,
        truncated: out.is_payload_truncated() || out.is_control_data_truncated(),
    };
    control_messages(out.control_data(), &mut datagram);
    Ok(datagram)
}

/// A `sockaddr_in` or `sockaddr_in6` as the kernel wrote it.
fn sockaddr(name: &[u8]) -> Option<SocketAddr> {
    let family = u16::from_ne_bytes(name.get(..2)?.try_into().ok()?);
    let port = u16::from_be_bytes(name.get(2..4)?.try_into().ok()?);
    match i32::from(family) {
        libc::AF_INET => {
            let ip: [u8; 4] = name.get(4..8)?.try_into().ok()?;
            Some(SocketAddrV4::new(Ipv4Addr::from(ip), port).into())
        }
        libc::AF_INET6 => {
            // As std reads a sockaddr_in6: flow info and scope id as stored.
            let flowinfo = u32::from_ne_bytes(name.get(4..8)?.try_into().ok()?);
            let ip: [u8; 16] = name.get(8..24)?.try_into().ok()?;
            let scope_id = u32::from_ne_bytes(name.get(24..28)?.try_into().ok()?);
            Some(SocketAddrV6::new(Ipv6Addr::from(ip), port, flowinfo, scope_id).into())
        }
        _ => None,
    }
}

/// `CMSG_ALIGN`: control messages and their data start at multiples of the word size.
fn cmsg_align(len: usize) -> usize {
    let word = size_of::<usize>();
    (len + word - 1) & !(word - 1)
}

/// Reads the control messages Squall asks for: the receive offload's segment size and the
/// destination address.
fn control_messages(control: &[u8], datagram: &mut Datagram) {
    let header = size_of::<libc::cmsghdr>();
    let mut at = 0;
    while at + header <= control.len() {
        // SAFETY: `header` bytes from `at` lie inside `control` (checked just above);
        // `read_unaligned` copes with any address, and a cmsghdr is plain integers, valid
        // for any bits.
        let cmsg = unsafe {
            control
                .as_ptr()
                .add(at)
                .cast::<libc::cmsghdr>()
                .read_unaligned()
        };
        #[allow(
            clippy::unnecessary_cast,
            reason = "a size_t in glibc, a socklen_t in musl"
        )]
        let len = cmsg.cmsg_len as usize;
        if len < header || at + len > control.len() {
            break;
        }
        let data = &control[at + cmsg_align(header)..at + len];
        match (cmsg.cmsg_level, cmsg.cmsg_type) {
            (libc::SOL_UDP, libc::UDP_GRO) => {
                // An int from the kernel (a u16 from some); either way a size under 64 KiB.
                let size = match data.len() {
                    4.. => i32::from_ne_bytes(data[..4].try_into().unwrap_or_default()),
                    2 | 3 => i32::from(u16::from_ne_bytes([data[0], data[1]])),
                    _ => 0,
                };
                datagram.segment_size = u16::try_from(size).ok().filter(|&s| s > 0);
            }
            (libc::IPPROTO_IP, libc::IP_PKTINFO) if data.len() >= 12 => {
                // struct in_pktinfo: interface index, local address, header destination.
                let ip: [u8; 4] = data[8..12].try_into().unwrap_or_default();
                datagram.local = Some(IpAddr::V4(Ipv4Addr::from(ip)));
            }
            (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) if data.len() >= 16 => {
                // struct in6_pktinfo: destination address, interface index.
                let ip: [u8; 16] = data[..16].try_into().unwrap_or_default();
                datagram.local = Some(IpAddr::V6(Ipv6Addr::from(ip)));
            }
            _ => {}
        }
        at += cmsg_align(len);
    }
}

/// A boxed, zeroed send message with the destination address filled in.
fn send_parts(dest: SocketAddr) -> Box<SendParts> {
    // SAFETY: every field is plain data (integers, null pointers, byte arrays) for which all
    // zeroes is valid.
    let mut parts: Box<SendParts> = Box::new(unsafe { std::mem::zeroed() });
    match dest {
        SocketAddr::V4(v4) => {
            parts.v4.sin_family = libc::AF_INET as libc::sa_family_t;
            parts.v4.sin_port = v4.port().to_be();
            parts.v4.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
            parts.msg.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        }
        SocketAddr::V6(v6) => {
            parts.v6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            parts.v6.sin6_port = v6.port().to_be();
            parts.v6.sin6_flowinfo = v6.flowinfo();
            parts.v6.sin6_addr.s6_addr = v6.ip().octets();
            parts.v6.sin6_scope_id = v6.scope_id();
            parts.msg.msg_namelen = size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        }
    }
    parts
}

/// Appends one control message to `control` at `*used` (`CMSG_SPACE` bytes of it).
fn push_cmsg(control: &mut Control, used: &mut usize, level: i32, kind: i32, data: &[u8]) {
    let header = cmsg_align(size_of::<libc::cmsghdr>());
    let space = header + cmsg_align(data.len());
    let at = *used;
    assert!(
        at + space <= control.0.len(),
        "send control messages fit SEND_CONTROL_LEN"
    );
    // SAFETY: cmsghdr is plain integers (and padding, on some C libraries) for which all zeroes
    // is valid.
    let mut cmsg: libc::cmsghdr = unsafe { std::mem::zeroed() };
    cmsg.cmsg_len = (header + data.len()) as _;
    cmsg.cmsg_level = level;
    cmsg.cmsg_type = kind;
    // SAFETY: the header's bytes from `at` lie inside `control` (asserted above);
    // `write_unaligned` needs no alignment.
    unsafe {
        control
            .0
            .as_mut_ptr()
            .add(at)
            .cast::<libc::cmsghdr>()
            .write_unaligned(cmsg);
    }
    control.0[at + header..][..data.len()].copy_from_slice(data);
    *used = at + space;
}
