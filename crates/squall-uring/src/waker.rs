//! A cross-thread wake-up for a ring: an eventfd the ring polls.
//!
//! The control thread (signals, reload) sends a message on a channel and then calls
//! [`Waker::wake`]; the worker's ring sees a `Wake` completion, and the worker drains its channel.
//! MSG_RING would need the sender to own a ring too; an eventfd works from any thread.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

/// Wakes one worker's ring from any thread. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Waker {
    fd: Arc<OwnedFd>,
}

impl Waker {
    /// Creates a new eventfd-backed waker.
    pub fn new() -> io::Result<Waker> {
        // SAFETY: eventfd takes no pointers; on success it returns a new descriptor we own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Waker { fd: Arc::new(fd) })
    }

    /// Makes the polling ring report a `Wake` completion. Never blocks.
    pub fn wake(&self) {
        let one = 1u64;
        // SAFETY: writes 8 bytes from a local u64 to our eventfd. EAGAIN means the counter is
        // saturated, so a wake-up is already pending: nothing to do.
        let _ = unsafe { libc::write(self.fd.as_raw_fd(), (&raw const one).cast(), 8) };
    }

    pub(crate) fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
