//! The one system call of a worker's turn, `io_uring_enter`, made by hand rather than through
//! the io-uring crate, for two savings the crate's `IoUring` cannot keep across calls:
//!
//! - **A registered ring descriptor** (`IORING_REGISTER_RING_FDS`, Linux 5.18): the thread
//!   registers its ring once and then enters by index with `IORING_ENTER_REGISTERED_RING`, so
//!   the kernel skips the `fdget`/`fdput` of the ring's file on every enter. The crate can
//!   register one, but only on a `Submitter` it builds afresh (unregistered) for every call.
//!   The registration belongs to the thread that made it; a `Ring` is not `Send`, so that is
//!   the thread that enters it. A dropped ring is unregistered: a registered index holds the
//!   ring open for as long as the thread lives, and a thread has 16 of them.
//! - **A minimum wait** (`min_wait_usec` in `io_uring_getevents_arg`, Linux 6.12): wait for
//!   `want` completions for at most that long, then return with whatever has arrived (at least
//!   one), so that a busy worker takes several completions per enter instead of one.
//!
//! Everything else (the queues, the completions) still goes through the crate.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use io_uring::IoUring;

/// `IORING_ENTER_GETEVENTS`: wait for completions (and, with DEFER_TASKRUN, run task work).
const ENTER_GETEVENTS: u32 = 1 << 0;
/// `IORING_ENTER_EXT_ARG`: the argument is an `io_uring_getevents_arg`.
const ENTER_EXT_ARG: u32 = 1 << 3;
/// `IORING_ENTER_REGISTERED_RING`: the descriptor argument is a registered ring index.
const ENTER_REGISTERED_RING: u32 = 1 << 4;
/// `IORING_REGISTER_RING_FDS`.
const REGISTER_RING_FDS: libc::c_uint = 20;
/// `IORING_UNREGISTER_RING_FDS`.
const UNREGISTER_RING_FDS: libc::c_uint = 21;

/// `struct io_uring_getevents_arg` (the field named `pad` before 6.12 is `min_wait_usec`).
#[repr(C)]
struct GetEventsArg {
    sigmask: u64,
    sigmask_sz: u32,
    min_wait_usec: u32,
    ts: u64,
}

/// `struct __kernel_timespec`.
#[repr(C)]
struct KernelTimespec {
    tv_sec: i64,
    tv_nsec: i64,
}

/// `struct io_uring_rsrc_update`, as IORING_REGISTER_RING_FDS reads and writes it.
#[repr(C)]
struct RsrcUpdate {
    offset: u32,
    resv: u32,
    data: u64,
}

/// How a ring is entered: its descriptor or registered index, and the batching in force.
#[derive(Debug)]
pub(crate) struct Enter {
    /// The ring's descriptor.
    fd: RawFd,
    /// The index registered with the creating thread.
    registered: Option<u32>,
    /// Completions to wait for before `min_wait` has passed (1: no batching).
    want: u32,
    /// How long to wait for `want` completions; 0 when the kernel lacks the feature.
    min_wait_usec: u32,
}

impl Enter {
    /// Registers `uring`'s descriptor for the calling thread when `register` (falling back to
    /// the plain descriptor if the kernel refuses), and batches by `want` completions within
    /// `min_wait` when the kernel can (`IORING_FEAT_MIN_TIMEOUT`).
    pub(crate) fn new(uring: &IoUring, register: bool, want: u32, min_wait: Duration) -> Enter {
        let fd = uring.as_raw_fd();
        let registered = register.then(|| register_ring(fd)).flatten();
        let min_wait_usec = if uring.params().is_feature_min_timeout() {
            u32::try_from(min_wait.as_micros()).unwrap_or(u32::MAX)
        } else {
            0
        };
        Enter {
            fd,
            registered,
            want: if min_wait_usec > 0 { want.max(1) } else { 1 },
            min_wait_usec,
        }
    }

    /// Whether enters go by a registered index.
    pub(crate) fn registered(&self) -> bool {
        self.registered.is_some()
    }

    /// Whether waits batch completions.
    pub(crate) fn batching(&self) -> bool {
        self.want > 1
    }

    /// Submits `to_submit` queued entries and waits for completions as set up, or `timeout`.
    pub(crate) fn submit_and_wait(
        &self,
        to_submit: u32,
        timeout: Option<Duration>,
    ) -> io::Result<()> {
        let ts = timeout.map(|t| KernelTimespec {
            tv_sec: i64::try_from(t.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(t.subsec_nanos()),
        });
        let arg = GetEventsArg {
            sigmask: 0,
            sigmask_sz: 0,
            min_wait_usec: self.min_wait_usec,
            ts: ts.as_ref().map_or(0, |ts| (&raw const *ts) as u64),
        };
        let mut flags = ENTER_GETEVENTS | ENTER_EXT_ARG;
        let mut fd = self.fd;
        if let Some(index) = self.registered {
            flags |= ENTER_REGISTERED_RING;
            fd = index as RawFd;
        }
        // SAFETY: `arg` and the timespec it points at are locals that outlive the call, sized
        // and laid out as the kernel's structs; the kernel only reads them. The submission
        // entries it consumes were pushed through the crate, whose pointers the caller
        // guarantees (see `Ring::queue`).
        let ret = unsafe {
            libc::syscall(
                libc::SYS_io_uring_enter,
                fd,
                to_submit,
                self.want,
                flags,
                (&raw const arg).cast::<libc::c_void>(),
                size_of::<GetEventsArg>(),
            )
        };
        if ret < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Gives the registered index back.
    pub(crate) fn unregister(&mut self) {
        if let Some(index) = self.registered.take() {
            let mut update = RsrcUpdate {
                offset: index,
                resv: 0,
                data: 0,
            };
            // SAFETY: as in `register_ring`: a local entry, read during the call only.
            unsafe {
                libc::syscall(
                    libc::SYS_io_uring_register,
                    self.fd,
                    UNREGISTER_RING_FDS,
                    (&raw mut update).cast::<libc::c_void>(),
                    1,
                );
            }
        }
    }
}

/// Registers ring descriptor `fd` for this thread; its index, or `None` if refused.
fn register_ring(fd: RawFd) -> Option<u32> {
    let mut update = RsrcUpdate {
        // Any free slot.
        offset: u32::MAX,
        resv: 0,
        data: fd as u64,
    };
    // SAFETY: the update is a local the kernel reads and writes (the chosen index) during the
    // call only; one entry, as the count says.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            fd,
            REGISTER_RING_FDS,
            (&raw mut update).cast::<libc::c_void>(),
            1,
        )
    };
    (ret == 1).then_some(update.offset)
}
