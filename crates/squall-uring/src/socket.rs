//! Operations on stream sockets: the multishot and single accepts of a listener, multishot
//! (unbounded, or up to a total limit) and one-buffer receives into the provided buffer ring, a send of one `Bytes`, a writev of many
//! (zero-copy past `RingConfig::zero_copy_min_bytes`), and a connect.

use std::net::SocketAddr;
use std::os::fd::RawFd;

use bytes::Bytes;
use io_uring::types::Fd;
use io_uring::{opcode, squeue};

use crate::bufring::BufRing;
use crate::{Kind, Lent, OpId, RECV_GROUP, Ring, WRITEV_BUFS_MAX};

impl Ring {
    /// Accepts connections on `listener` until cancelled or an error ends it.
    pub fn accept_multi(&mut self, listener: RawFd, token: u64) -> OpId {
        let entry = opcode::AcceptMulti::new(Fd(listener))
            .flags(libc::SOCK_CLOEXEC)
            .build();
        self.queue(entry, Kind::Accept, token, Lent::None)
    }

    /// Accepts one connection on `listener` (its completion has `more == false`): for a worker
    /// near its descriptor budget, where a multishot accept could take the whole queue at once.
    pub fn accept(&mut self, listener: RawFd, token: u64) -> OpId {
        let entry = opcode::Accept::new(Fd(listener), std::ptr::null_mut(), std::ptr::null_mut())
            .flags(libc::SOCK_CLOEXEC)
            .build();
        self.queue(entry, Kind::Accept, token, Lent::None)
    }

    /// Receives into provided buffers until cancelled, EOF, error or buffer exhaustion.
    pub fn recv_multi(&mut self, fd: RawFd, token: u64) -> OpId {
        let entry = opcode::RecvMulti::new(Fd(fd), RECV_GROUP).build();
        self.queue(entry, Kind::Recv, token, Lent::None)
    }

    /// Receives into provided buffers, multishot, until `total_bytes` have been received
    /// (then its last completion has `more` false), or as [`Ring::recv_multi`] ends: a
    /// multishot receive a reader can stop within a bounded number of bytes, where a plain
    /// one keeps filling buffers as fast as the peer sends until its cancellation lands. The
    /// last receive may take up to one buffer past the limit (the kernel caps a receive at a
    /// buffer, not at what is left of the limit).
    ///
    /// The limit is `IORING_RECV_MSHOT_LIM` (`sqe->optlen`), in recent kernels (6.18 has it); an older
    /// kernel fails the receive at once with `EINVAL`, receiving nothing: then say
    /// [`Ring::refuse_multishot_limit`] and receive with [`Ring::recv_once`] instead.
    pub fn recv_multi_limited(&mut self, fd: RawFd, token: u64, total_bytes: u32) -> OpId {
        let entry = opcode::RecvMulti::new(Fd(fd), RECV_GROUP).build();
        let entry = with_optlen(entry, total_bytes.max(1));
        self.queue(entry, Kind::Recv, token, Lent::None)
    }

    /// Whether [`Ring::recv_multi_limited`] may be used: true until a receive with a limit
    /// was refused.
    pub fn multishot_limit(&self) -> bool {
        self.multishot_limit
    }

    /// Bytes in each provided receive buffer (0 without buffers).
    pub fn recv_buffer_bytes(&self) -> u32 {
        self.bufs.as_ref().map_or(0, BufRing::buf_bytes)
    }

    /// The kernel refused a multishot receive with a limit (`EINVAL`): no more are made.
    pub fn refuse_multishot_limit(&mut self) {
        self.multishot_limit = false;
    }

    /// Receives once into one provided buffer: a single completion (`more` false) with at most
    /// one buffer's bytes. For a socket whose reader must be able to stop between any two
    /// pieces (an origin whose client reads slowly): a multishot receive keeps filling buffers,
    /// as fast as the peer sends, until its cancellation lands, and every one is delivered.
    pub fn recv_once(&mut self, fd: RawFd, token: u64) -> OpId {
        let len = self.recv_buffer_bytes();
        // No pointer: the kernel picks a buffer from the group and says which in the
        // completion's flags, as for the multishot receive.
        let entry = opcode::Recv::new(Fd(fd), std::ptr::null_mut(), len)
            .buf_group(RECV_GROUP)
            .build()
            .flags(squeue::Flags::BUFFER_SELECT);
        self.queue(entry, Kind::Recv, token, Lent::None)
    }

    /// Sends `buf`; the completion returns it with the count of bytes sent (maybe partial).
    pub fn send(&mut self, fd: RawFd, buf: Bytes, token: u64) -> OpId {
        let len = u32::try_from(buf.len()).unwrap_or(u32::MAX);
        // The pointer stays valid: `buf` moves into the op slab below and is only released by the
        // completion. Moving a `Bytes` does not move the bytes it points at.
        let entry = opcode::Send::new(Fd(fd), buf.as_ptr(), len)
            .flags(libc::MSG_NOSIGNAL)
            .build();
        self.queue(entry, Kind::Send, token, Lent::Send(buf))
    }

    /// Writes `bufs` in order with one writev (at most [`WRITEV_BUFS_MAX`] of them).
    ///
    /// From [`RingConfig::zero_copy_min_bytes`] on, the write is a zero-copy `sendmsg`: its
    /// completion reports as soon as the bytes are queued, with clones of `bufs`, while the ring
    /// keeps the originals until the kernel's second completion (the notification) says it is
    /// done with them. The caller sees one completion either way.
    pub fn writev(&mut self, fd: RawFd, bufs: Vec<Bytes>, token: u64) -> OpId {
        assert!(
            bufs.len() <= WRITEV_BUFS_MAX,
            "caller splits writes at WRITEV_BUFS_MAX"
        );
        let iovecs: Box<[libc::iovec]> = bufs
            .iter()
            .map(|b| libc::iovec {
                iov_base: b.as_ptr().cast_mut().cast(),
                iov_len: b.len(),
            })
            .collect();
        let total: usize = bufs.iter().map(Bytes::len).sum();
        if total >= self.zero_copy_min_bytes {
            return self.writev_zc(fd, bufs, iovecs, token);
        }
        // The iovec array is boxed, so its address survives the move into the slab.
        let entry = opcode::Writev::new(Fd(fd), iovecs.as_ptr(), iovecs.len() as u32).build();
        self.queue(entry, Kind::Writev, token, Lent::Writev { bufs, iovecs })
    }

    fn writev_zc(
        &mut self,
        fd: RawFd,
        bufs: Vec<Bytes>,
        iovecs: Box<[libc::iovec]>,
        token: u64,
    ) -> OpId {
        // SAFETY: msghdr is plain data for which all zeroes is valid (no name, no control).
        let mut msg: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        msg.msg_iov = iovecs.as_ptr().cast_mut();
        msg.msg_iovlen = iovecs.len();
        // Both boxes keep their addresses when moved into the slab.
        let entry = opcode::SendMsgZc::new(Fd(fd), &raw const *msg)
            .flags(libc::MSG_NOSIGNAL as u32)
            .build();
        let lent = Lent::WritevZc { bufs, iovecs, msg };
        self.queue(entry, Kind::WritevZc, token, lent)
    }

    /// Connects the socket `fd` (created by the caller) to `addr`.
    pub fn connect(&mut self, fd: RawFd, addr: SocketAddr, token: u64) -> OpId {
        // The address is boxed so that its location survives the move into the op slab.
        let (lent, ptr, len) = match addr {
            SocketAddr::V4(v4) => {
                let sin = Box::new(libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: v4.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from(*v4.ip()).to_be(),
                    },
                    sin_zero: [0; 8],
                });
                let ptr = (&raw const *sin).cast::<libc::sockaddr>();
                (Lent::SockAddrV4(sin), ptr, size_of::<libc::sockaddr_in>())
            }
            SocketAddr::V6(v6) => {
                let sin6 = Box::new(libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: v6.port().to_be(),
                    sin6_flowinfo: v6.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: v6.ip().octets(),
                    },
                    sin6_scope_id: v6.scope_id(),
                });
                let ptr = (&raw const *sin6).cast::<libc::sockaddr>();
                (Lent::SockAddrV6(sin6), ptr, size_of::<libc::sockaddr_in6>())
            }
        };
        let entry = opcode::Connect::new(Fd(fd), ptr, len as libc::socklen_t).build();
        self.queue(entry, Kind::Connect, token, lent)
    }
}

/// Byte offset of the submission entry's `optlen` (a union with `file_index` and
/// `splice_fd_in`) in the kernel's 64-byte `struct io_uring_sqe`.
const SQE_OPTLEN_OFFSET: usize = 44;

const _: () = assert!(std::mem::size_of::<squeue::Entry>() == 64);

/// `entry` with its `optlen` field set (the io-uring crate's `RecvMulti` has no setter).
fn with_optlen(entry: squeue::Entry, optlen: u32) -> squeue::Entry {
    // SAFETY: `squeue::Entry` is a `repr(C)` wrapper of the kernel's `io_uring_sqe`, 64 bytes
    // (asserted above) of plain integers and unions of integers, so every bit pattern is a
    // valid value both ways; only the four bytes of `optlen` change.
    let mut raw: [u8; 64] = unsafe { std::mem::transmute(entry) };
    raw[SQE_OPTLEN_OFFSET..SQE_OPTLEN_OFFSET + 4].copy_from_slice(&optlen.to_ne_bytes());
    // SAFETY: as above: the same 64 bytes, back into the type they came from.
    unsafe { std::mem::transmute::<[u8; 64], squeue::Entry>(raw) }
}
