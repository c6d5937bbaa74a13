//! squall-uring: the io_uring driver under each Squall worker, and the only crate with `unsafe`.
//!
//! A [`Ring`] is owned by one worker thread. The worker queues operations (multishot accept,
//! multishot receive into a provided buffer ring, send and writev of `Bytes`, close, cancel, a
//! wake-up poll, and for static files an open beneath a directory, statx, a read at an offset,
//! a splice through a pipe and a one-shot poll), then calls [`Ring::submit_and_wait`] and
//! drains [`Ring::next_completion`].
//!
//! Buffer ownership follows tokio-uring's rule: memory handed to the kernel is owned by the ring
//! until the operation's completion arrives, even when the connection that asked for it is gone.
//! A send takes its `Bytes` by value and returns it inside the completion; receive buffers live in
//! the ring's [`bufring`] and go back to the kernel through [`Ring::recycle`]. When a `Ring` is
//! dropped with operations still in flight it cancels them and waits; memory that the kernel might
//! still touch after that is leaked rather than freed.
//!
//! For QUIC the ring also carries UDP: a multishot `recvmsg` into a buffer group of its own
//! and a `sendmsg` with segmentation offload and a chosen source address (`datagram.rs`), and
//! `udp.rs` sets up the sockets and the BPF program that steers each packet to the worker that
//! owns its connection.
//!
//! Nothing in here knows about HTTP or connections: a caller names each operation with an opaque
//! `u64` token and gets it back in the completion.
//!
//! Three ways to spend less time in the kernel can be switched on in [`RingConfig`]: a registered
//! ring descriptor, waits that batch completions (both in `enter.rs`) and zero-copy writes. Each
//! was measured on Squall's benchmarks and none made a request cheaper over loopback (see
//! docs/PERFORMANCE.md), so all three are off by default; they stay, tested, for measuring on
//! real network cards, where zero-copy in particular can only pay.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

mod bufring;
mod datagram;
mod enter;
mod file;
mod limits;
mod socket;
mod splice;
mod udp;
mod waker;

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use bytes::Bytes;
use io_uring::types::{CancelBuilder, Fd};
use io_uring::{IoUring, cqueue, opcode, squeue};
use slab::Slab;

pub use bufring::RecvBuf;
pub use datagram::{DATAGRAM_HEADROOM, Datagram, UDP_BUFFER_BYTES_GRO};
pub use file::{FileStat, is_not_found};
pub use limits::{raise_nofile_limit, release_free_memory, set_tcp_notsent_lowat};
pub use splice::{Pipe, set_nonblocking};
pub use udp::{
    SockFilter, attach_reuseport_cbpf, enable_pktinfo, enable_udp_gro, gso_supported, is_gso_error,
    quic_steering_program, set_socket_buffers, udp_socket,
};
pub use waker::Waker;

use bufring::BufRing;
use enter::Enter;

/// Sizes of a ring; every figure is fixed at start-up.
#[derive(Clone, Copy, Debug)]
pub struct RingConfig {
    /// Submission queue entries (the completion queue gets four times as many).
    pub sq_entries: u32,
    /// Number of provided receive buffers (a power of two, at most 32,768).
    pub recv_buffers: u16,
    /// Bytes in each provided receive buffer.
    pub recv_buffer_bytes: u32,
    /// Number of datagram receive buffers, a group of their own (a power of two, at most
    /// 32,768); 0, the default, makes none, and the ring cannot receive datagrams (see
    /// `datagram.rs` for why UDP does not share the TCP buffers).
    pub udp_buffers: u16,
    /// Bytes in each datagram buffer, [`DATAGRAM_HEADROOM`] of them before the payload. The
    /// default, [`UDP_BUFFER_BYTES_GRO`], holds what receive offload coalesces; without
    /// offload, the largest datagram expected plus the headroom is enough.
    pub udp_buffer_bytes: u32,
    /// Register the ring's descriptor with the creating thread (the only one that can use a
    /// `Ring`), so that entering the kernel skips the descriptor lookup (see `enter.rs`).
    /// Off by default: no measurable gain.
    pub register_ring_fd: bool,
    /// Completions [`Ring::submit_and_wait`] waits for, at most `wait_batch_usec` long, before
    /// returning with whatever arrived (at least one). 1 turns batching off; so does a kernel
    /// without `IORING_FEAT_MIN_TIMEOUT` (6.12). Off (1) by default: no measurable gain.
    pub wait_batch: u32,
    /// The longest a wait holds out for `wait_batch` completions, in microseconds.
    pub wait_batch_usec: u32,
    /// A writev of at least this many bytes goes out zero-copy (`IORING_OP_SENDMSG_ZC`): the
    /// kernel sends from the `Bytes` themselves instead of copying them into the socket, and
    /// holds them until its notification (see [`Ring::writev`]). `usize::MAX`, the default,
    /// turns it off: over loopback the kernel copies the bytes anyway, at the receiver, and
    /// the pinning and the notification made a 64 KiB cache hit cost 1.7× the CPU.
    pub zero_copy_min_bytes: usize,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            sq_entries: 4096,
            recv_buffers: 4096,
            recv_buffer_bytes: 16 * 1024,
            udp_buffers: 0,
            udp_buffer_bytes: UDP_BUFFER_BYTES_GRO,
            register_ring_fd: false,
            wait_batch: 1,
            wait_batch_usec: 0,
            zero_copy_min_bytes: usize::MAX,
        }
    }
}

/// Which set-up flags the kernel accepted, for the start-up log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN (kernel 6.1+): completions run only
    /// when this thread asks, measured ~25% less CPU per request here.
    SingleIssuerDeferTaskrun,
    /// IORING_SETUP_COOP_TASKRUN (5.19+): no IPI to interrupt the thread for task work.
    CoopTaskrun,
    /// No optional flag.
    Plain,
}

/// What an operation was, as reported in its completion.
#[derive(Debug)]
pub enum Completion {
    /// A connection from a multishot accept; `more` is false once the accept has ended (on an
    /// error such as EMFILE, or after a cancel) and must be queued again.
    Accept {
        token: u64,
        result: io::Result<OwnedFd>,
        more: bool,
    },
    /// Bytes from a multishot receive: `Ok(Some(buf))` data, `Ok(None)` end of stream. `more`
    /// false means the receive has ended (ENOBUFS when buffers ran out, EOF, error, cancel).
    Recv {
        token: u64,
        result: io::Result<Option<RecvBuf>>,
        more: bool,
    },
    /// A send finished; `buf` is what was handed in, `result` the number of bytes sent. Also
    /// the completion of [`Ring::send_datagrams`].
    Send {
        token: u64,
        result: io::Result<usize>,
        buf: Bytes,
    },
    /// A writev finished; `bufs` are what were handed in.
    Writev {
        token: u64,
        result: io::Result<usize>,
        bufs: Vec<Bytes>,
    },
    /// A datagram from [`Ring::recvmsg_multi`]; `more` false means the receive has ended
    /// (ENOBUFS when buffers ran out, an empty datagram, error, cancel) and must be queued
    /// again.
    Datagram {
        token: u64,
        result: io::Result<Datagram>,
        more: bool,
    },
    /// A connect finished: `Ok` once the TCP handshake completed.
    Connect { token: u64, result: io::Result<()> },
    /// A close finished.
    Close { token: u64, result: io::Result<()> },
    /// A cancel request finished (the cancelled operation reports separately).
    Cancel { token: u64 },
    /// A [`Waker`] was woken; `more` false means the poll must be queued again.
    Wake { token: u64, more: bool },
    /// An [`Ring::openat2`] finished: the new descriptor.
    Open {
        token: u64,
        result: io::Result<OwnedFd>,
    },
    /// A [`Ring::statx`] finished.
    Statx {
        token: u64,
        result: io::Result<FileStat>,
    },
    /// A [`Ring::read_at`] finished: `buf` is what was handed in, its length grown by the
    /// bytes read (`result`).
    Read {
        token: u64,
        result: io::Result<usize>,
        buf: Vec<u8>,
    },
    /// A [`Ring::splice`] finished: the bytes moved.
    Splice {
        token: u64,
        result: io::Result<usize>,
    },
    /// A [`Ring::poll_once`] fired: the events.
    Poll { token: u64, result: io::Result<u32> },
}

/// Identifies a queued operation, for [`Ring::cancel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpId(u64);

/// The buffers an in-flight operation lends the kernel.
enum Lent {
    None,
    /// The address a connect reads (the kernel may read it after submission).
    SockAddrV4(#[allow(dead_code)] Box<libc::sockaddr_in>),
    SockAddrV6(#[allow(dead_code)] Box<libc::sockaddr_in6>),
    Send(Bytes),
    /// `iovecs` is never read by us, only by the kernel through the submitted pointer.
    Writev {
        bufs: Vec<Bytes>,
        #[allow(dead_code)]
        iovecs: Box<[libc::iovec]>,
    },
    /// A zero-copy writev: the message header points at `iovecs`; both are the kernel's.
    WritevZc {
        bufs: Vec<Bytes>,
        #[allow(dead_code)]
        iovecs: Box<[libc::iovec]>,
        #[allow(dead_code)]
        msg: Box<libc::msghdr>,
    },
    /// An open's path and `open_how`, which the kernel reads after submission.
    Open {
        #[allow(dead_code)]
        path: std::ffi::CString,
        #[allow(dead_code)]
        how: Box<io_uring::types::OpenHow>,
    },
    /// The buffer a statx fills.
    Statx(Box<libc::statx>),
    /// The buffer a read fills (its spare capacity).
    Read(Vec<u8>),
    /// A datagram receive's `msghdr` (only its lengths matter to the kernel).
    RecvMsg(#[allow(dead_code)] Box<libc::msghdr>),
    /// A datagram send: the payload, and the message that points at it.
    SendMsg {
        buf: Bytes,
        #[allow(dead_code)]
        parts: Box<datagram::SendParts>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Accept,
    Recv,
    Send,
    Writev,
    WritevZc,
    Connect,
    Close,
    Cancel,
    Wake,
    Open,
    Statx,
    Read,
    RecvMsg,
    SendMsg,
    Splice,
    Poll,
}

struct Op {
    kind: Kind,
    token: u64,
    lent: Lent,
    /// For `Wake`: the waker whose eventfd to drain when it fires; holding a clone keeps the
    /// descriptor open as long as the poll exists.
    waker: Option<Waker>,
}

/// How long `Drop` waits for cancelled operations before leaking their memory.
const DROP_DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// Most buffers one writev may carry (IOV_MAX is 1024 on Linux).
pub const WRITEV_BUFS_MAX: usize = 1024;

/// Buffer group id of the provided receive buffers.
const RECV_GROUP: u16 = 0;

/// One worker's io_uring.
pub struct Ring {
    // Field order matters for drop: the ring fd closes before the buffers it may point at are
    // freed; `Drop` below makes sure no operation is still running at that point.
    uring: IoUring,
    enter: Enter,
    ops: Slab<Op>,
    bufs: Option<BufRing>,
    /// The datagram buffers, when [`RingConfig::udp_buffers`] asked for them.
    udp_bufs: Option<BufRing>,
    flavor: Flavor,
    zero_copy_min_bytes: usize,
    /// Multishot receives may carry a total limit (see [`Ring::recv_multi_limited`]).
    multishot_limit: bool,
}

impl Ring {
    /// Sets up a ring with the cheapest flags this kernel accepts, and its receive buffers.
    ///
    /// An error here with `ENOSYS` or `EPERM` means io_uring is unavailable (kernel without it,
    /// `kernel.io_uring_disabled`, seccomp); see [`is_unavailable`].
    pub fn new(config: &RingConfig) -> io::Result<Ring> {
        let (uring, flavor) = setup(config.sq_entries)?;
        let bufs = BufRing::new(
            &uring,
            RECV_GROUP,
            config.recv_buffers,
            config.recv_buffer_bytes,
        )?;
        // Made after the TCP group: if this fails, both are dropped before any operation
        // could use them.
        let udp_bufs = match config.udp_buffers {
            0 => None,
            _ if config.udp_buffer_bytes as usize <= DATAGRAM_HEADROOM => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "udp_buffer_bytes leaves no room for a payload",
                ));
            }
            n => Some(BufRing::new(
                &uring,
                datagram::UDP_GROUP,
                n,
                config.udp_buffer_bytes,
            )?),
        };
        let enter = Enter::new(
            &uring,
            config.register_ring_fd,
            config.wait_batch,
            Duration::from_micros(u64::from(config.wait_batch_usec)),
        );
        Ok(Ring {
            uring,
            enter,
            ops: Slab::with_capacity(1024),
            bufs: Some(bufs),
            udp_bufs,
            flavor,
            zero_copy_min_bytes: config.zero_copy_min_bytes,
            multishot_limit: true,
        })
    }

    /// The set-up flags in use.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// Whether the ring's descriptor is registered (see [`RingConfig::register_ring_fd`]).
    pub fn registered_ring_fd(&self) -> bool {
        self.enter.registered()
    }

    /// Whether waits batch completions (see [`RingConfig::wait_batch`]).
    pub fn batching(&self) -> bool {
        self.enter.batching()
    }

    /// Number of operations queued or in flight.
    pub fn in_flight(&self) -> usize {
        self.ops.len()
    }

    /// Closes `fd`. Queued after earlier operations on it, so they resolve the descriptor first.
    pub fn close(&mut self, fd: OwnedFd, token: u64) -> OpId {
        let raw = std::os::fd::IntoRawFd::into_raw_fd(fd);
        let entry = opcode::Close::new(Fd(raw)).build();
        self.queue(entry, Kind::Close, token, Lent::None)
    }

    /// Asks the kernel to cancel `op`; `op` still reports its own (final) completion.
    pub fn cancel(&mut self, op: OpId, token: u64) {
        let entry = opcode::AsyncCancel2::new(CancelBuilder::user_data(op.0)).build();
        self.queue(entry, Kind::Cancel, token, Lent::None);
    }

    /// Polls `waker` so that [`Waker::wake`] from any thread produces a `Wake` completion.
    pub fn poll_waker(&mut self, waker: &Waker, token: u64) -> OpId {
        let fd = waker.raw_fd();
        let entry = opcode::PollAdd::new(Fd(fd), libc::POLLIN as u32)
            .multi(true)
            .build();
        let id = self.queue(entry, Kind::Wake, token, Lent::None);
        self.ops[id.0 as usize].waker = Some(waker.clone());
        id
    }

    /// The bytes of a received buffer.
    pub fn recv_bytes(&self, buf: &RecvBuf) -> &[u8] {
        self.buffers().bytes(buf)
    }

    /// Gives a received buffer back to the kernel.
    pub fn recycle(&mut self, buf: RecvBuf) {
        self.buffers_mut().recycle(buf);
    }

    /// Submits queued operations and waits for at least one completion or `timeout` (for a
    /// batch of them, when [`RingConfig::wait_batch`] asks, within its time).
    pub fn submit_and_wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let to_submit = self.uring.submission().len() as u32;
        match self.enter.submit_and_wait(to_submit, timeout) {
            Ok(()) => Ok(()),
            // ETIME: the timeout passed; EINTR: a signal. Both are ordinary wake-ups.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR)) => Ok(()),
            // EBUSY: the completion queue is full; the caller drains it and comes back.
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Takes the next completion, if any.
    pub fn next_completion(&mut self) -> Option<Completion> {
        loop {
            let cqe = self.uring.completion().next()?;
            let key = cqe.user_data() as usize;
            if self.ops[key].kind == Kind::WritevZc {
                if let Some(done) = self.complete_zc(key, cqe.result(), cqe.flags()) {
                    return Some(done);
                }
                continue;
            }
            return Some(self.complete(key, cqe.result(), cqe.flags()));
        }
    }

    /// A zero-copy writev's result (with `more` when a notification follows, the ring keeping
    /// the buffers for it), or its notification, which releases them and reports nothing.
    fn complete_zc(&mut self, key: usize, res: i32, flags: u32) -> Option<Completion> {
        if cqueue::notif(flags) {
            self.ops.remove(key);
            return None;
        }
        let token = self.ops[key].token;
        let bufs = if cqueue::more(flags) {
            match &self.ops[key].lent {
                Lent::WritevZc { bufs, .. } => bufs.clone(),
                _ => unreachable!("a zero-copy writev lends its buffers"),
            }
        } else {
            match self.ops.remove(key).lent {
                Lent::WritevZc { bufs, .. } => bufs,
                _ => unreachable!("a zero-copy writev lends its buffers"),
            }
        };
        Some(Completion::Writev {
            token,
            result: count(res),
            bufs,
        })
    }

    fn complete(&mut self, key: usize, res: i32, flags: u32) -> Completion {
        let more = cqueue::more(flags);
        let kind = self.ops[key].kind;
        let token = self.ops[key].token;
        if let Some(waker) = &self.ops[key].waker {
            drain_eventfd(waker.raw_fd());
        }
        if kind == Kind::RecvMsg {
            let result = self.datagram(res, flags);
            if !more {
                self.ops.remove(key);
            }
            return Completion::Datagram {
                token,
                result,
                more,
            };
        }
        if !more || !matches!(kind, Kind::Accept | Kind::Recv | Kind::Wake) {
            let op = self.ops.remove(key);
            return finish(op, res, flags, more);
        }
        match kind {
            Kind::Accept => Completion::Accept {
                token,
                result: accepted(res),
                more,
            },
            Kind::Recv => Completion::Recv {
                token,
                result: received(res, flags),
                more,
            },
            _ => Completion::Wake { token, more },
        }
    }

    fn queue(&mut self, entry: squeue::Entry, kind: Kind, token: u64, lent: Lent) -> OpId {
        let key = self.ops.insert(Op {
            kind,
            token,
            lent,
            waker: None,
        });
        let entry = entry.user_data(key as u64);
        loop {
            // SAFETY: every pointer in `entry` refers to memory owned by `self.ops[key].lent`
            // (heap memory whose address does not change when the slab moves it) or by the
            // buffer ring, and neither is released before this op's final completion.
            let pushed = unsafe { self.uring.submission().push(&entry) };
            if pushed.is_ok() {
                return OpId(key as u64);
            }
            // The submission queue is full: hand what is queued to the kernel and retry.
            if let Err(e) = self.uring.submit() {
                if e.raw_os_error() != Some(libc::EBUSY) {
                    panic!("io_uring submit failed with a full queue: {e}");
                }
                // EBUSY: the completion ring is full too. The caller must drain completions;
                // until then keep the kernel's backlog flowing.
                std::thread::yield_now();
            }
        }
    }

    fn buffers(&self) -> &BufRing {
        // Invariant: `bufs` is Some from `new` until `drop`.
        self.bufs
            .as_ref()
            .expect("buffer ring lives as long as the Ring")
    }

    fn buffers_mut(&mut self) -> &mut BufRing {
        self.bufs
            .as_mut()
            .expect("buffer ring lives as long as the Ring")
    }

    /// Cancels everything in flight and waits, bounded by [`DROP_DRAIN_TIMEOUT`], for the
    /// kernel to let go of our memory: each operation's buffers come back with its last
    /// completion, never before. `Drop` runs this; a caller that wants what the completions
    /// carry (or to know whether the kernel let go) may run it first.
    pub fn shutdown(&mut self) -> Shutdown {
        let mut completions = Vec::new();
        if self.ops.is_empty() {
            return Shutdown {
                completions,
                in_flight: 0,
            };
        }
        let entry = opcode::AsyncCancel2::new(CancelBuilder::any().all())
            .build()
            .user_data(u64::MAX);
        // SAFETY: a cancel-all carries no pointer.
        let _ = unsafe { self.uring.submission().push(&entry) };
        let deadline = Instant::now() + DROP_DRAIN_TIMEOUT;
        while !self.ops.is_empty() && Instant::now() < deadline {
            let _ = self.submit_and_wait(Some(Duration::from_millis(50)));
            let cqes: Vec<_> = self.uring.completion().collect();
            for cqe in cqes {
                let key = cqe.user_data() as usize;
                if cqe.user_data() == u64::MAX || !self.ops.contains(key) {
                    continue;
                }
                let (res, flags) = (cqe.result(), cqe.flags());
                let completion = match self.ops[key].kind {
                    Kind::WritevZc => self.complete_zc(key, res, flags),
                    _ => Some(self.complete(key, res, flags)),
                };
                completions.extend(completion);
            }
        }
        Shutdown {
            completions,
            in_flight: self.ops.len(),
        }
    }
}

/// What [`Ring::shutdown`] saw.
#[derive(Debug)]
pub struct Shutdown {
    /// The completions that ended the operations in flight (mostly cancellations), with the
    /// buffers they hand back.
    pub completions: Vec<Completion>,
    /// Operations the kernel still held when the wait ended: their memory is leaked, never
    /// freed under the kernel.
    pub in_flight: usize,
}

impl Drop for Ring {
    fn drop(&mut self) {
        if self.shutdown().in_flight > 0 {
            // The kernel may still write into receive buffers or read lent send buffers: leak
            // them instead of handing freed memory to it.
            std::mem::forget(self.bufs.take());
            std::mem::forget(self.udp_bufs.take());
            std::mem::forget(std::mem::take(&mut self.ops));
        }
        self.enter.unregister();
    }
}

/// True when `e` from [`Ring::new`] means io_uring cannot be used at all on this host.
pub fn is_unavailable(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSYS | libc::EPERM | libc::EACCES)
    )
}

fn setup(sq_entries: u32) -> io::Result<(IoUring, Flavor)> {
    let cq_entries = sq_entries * 4;
    let best = IoUring::builder()
        .setup_cqsize(cq_entries)
        .setup_submit_all()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(sq_entries);
    match best {
        Ok(ring) => return Ok((ring, Flavor::SingleIssuerDeferTaskrun)),
        Err(e) if e.raw_os_error() != Some(libc::EINVAL) => return Err(e),
        Err(_) => {}
    }
    // EINVAL: the kernel predates a flag. Fall back one step at a time.
    let coop = IoUring::builder()
        .setup_cqsize(cq_entries)
        .setup_coop_taskrun()
        .build(sq_entries);
    match coop {
        Ok(ring) => Ok((ring, Flavor::CoopTaskrun)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let ring = IoUring::builder()
                .setup_cqsize(cq_entries)
                .build(sq_entries)?;
            Ok((ring, Flavor::Plain))
        }
        Err(e) => Err(e),
    }
}

fn finish(op: Op, res: i32, flags: u32, more: bool) -> Completion {
    let token = op.token;
    match (op.kind, op.lent) {
        (Kind::Accept, _) => Completion::Accept {
            token,
            result: accepted(res),
            more,
        },
        (Kind::Recv, _) => Completion::Recv {
            token,
            result: received(res, flags),
            more,
        },
        (Kind::Send, Lent::Send(buf)) | (Kind::SendMsg, Lent::SendMsg { buf, .. }) => {
            Completion::Send {
                token,
                result: count(res),
                buf,
            }
        }
        (Kind::Writev, Lent::Writev { bufs, .. }) => Completion::Writev {
            token,
            result: count(res),
            bufs,
        },
        (Kind::Connect, _) => Completion::Connect {
            token,
            result: count(res).map(drop),
        },
        (Kind::Close, _) => Completion::Close {
            token,
            result: count(res).map(drop),
        },
        (Kind::Wake, _) => Completion::Wake { token, more },
        (Kind::Cancel, _) => Completion::Cancel { token },
        (Kind::Splice, _) => Completion::Splice {
            token,
            result: count(res),
        },
        (Kind::Poll, _) => Completion::Poll {
            token,
            result: count(res).map(|events| events as u32),
        },
        (kind @ (Kind::Open | Kind::Statx | Kind::Read), lent) => {
            file::finish(kind, lent, token, res)
        }
        (kind, _) => unreachable!("op {kind:?} was queued with the buffers of another kind"),
    }
}

fn count(res: i32) -> io::Result<usize> {
    if res < 0 {
        Err(io::Error::from_raw_os_error(-res))
    } else {
        Ok(res as usize)
    }
}

fn accepted(res: i32) -> io::Result<OwnedFd> {
    let fd = count(res)? as RawFd;
    // SAFETY: a successful accept completion carries a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn received(res: i32, flags: u32) -> io::Result<Option<RecvBuf>> {
    let len = count(res)?;
    match cqueue::buffer_select(flags) {
        Some(bid) => Ok(Some(RecvBuf {
            bid,
            len: len as u32,
        })),
        None if len == 0 => Ok(None),
        None => Err(io::Error::other(
            "receive completed without a provided buffer",
        )),
    }
}

fn drain_eventfd(fd: RawFd) {
    let mut value = 0u64;
    // SAFETY: `fd` is the waker's nonblocking eventfd, alive while its poll op exists; we read
    // exactly 8 bytes into a local u64. EAGAIN (nothing to drain) is fine to ignore.
    let _ = unsafe { libc::read(fd, (&raw mut value).cast(), 8) };
}

impl AsRawFd for Ring {
    fn as_raw_fd(&self) -> RawFd {
        self.uring.as_raw_fd()
    }
}

#[cfg(test)]
mod tests;
