//! A file's bytes to a socket without passing through user memory: `splice(2)` from the file
//! into a pipe (the pipe takes references to the page cache's pages, no copy), then from the
//! pipe into the socket (the socket takes those pages), each step one `IORING_OP_SPLICE`.
//!
//! What the kernel does with it (as read in `io_uring/splice.c`, and checked by the tests):
//! every splice is forced to io-wq, the ring's kernel worker threads (`REQ_F_FORCE_ASYNC`),
//! and the opcode has no poll support, so a splice to a socket with a full send buffer is not
//! parked on a poll as a send is: on a blocking socket it would hold an io-wq thread until the
//! peer reads. So the socket a splice writes to must be nonblocking ([`set_nonblocking`]): a
//! full one answers `EAGAIN` (or the bytes it took, a short splice), and the caller waits for
//! room with [`Ring::poll_once`] before splicing the rest. The pipe is nonblocking too, so a
//! splice never waits on it either.
//!
//! A splice names its descriptors by number, and io-wq looks them up when it runs the
//! operation, after submission: a descriptor closed (and its number reused) in between would
//! be the wrong one. The caller closes a descriptor a splice uses only after that splice's
//! completion.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use io_uring::opcode;
use io_uring::types::Fd;

use crate::{Kind, Lent, OpId, Ring};

/// A pipe for splicing, both ends nonblocking and close-on-exec.
#[derive(Debug)]
pub struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity: usize,
}

impl Pipe {
    /// A new pipe, grown to hold `want` bytes if the kernel lets it (`F_SETPIPE_SZ`; an
    /// unprivileged process may grow one to `/proc/sys/fs/pipe-max-size`, and a user past
    /// `pipe-user-pages-soft` gets small pipes): [`Pipe::capacity`] says what it holds.
    pub fn new(want: usize) -> io::Result<Pipe> {
        let mut fds: [libc::c_int; 2] = [-1, -1];
        // SAFETY: `pipe2` writes two descriptors into the two-element array it is given.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: on success both are new descriptors that nothing else owns.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let want = libc::c_int::try_from(want).unwrap_or(libc::c_int::MAX);
        // SAFETY: `fcntl` on a descriptor we own, with the integer argument F_SETPIPE_SZ takes.
        let set = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, want) };
        let capacity = if set > 0 {
            set
        } else {
            // Refused (EPERM past a limit): the pipe keeps the size it was made with.
            // SAFETY: `fcntl` on a descriptor we own; F_GETPIPE_SZ takes no argument.
            let size = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ) };
            if size < 0 {
                return Err(io::Error::last_os_error());
            }
            size
        };
        Ok(Pipe {
            read,
            write,
            capacity: usize::try_from(capacity).unwrap_or(0),
        })
    }

    /// The bytes the pipe holds at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The end a splice reads from.
    pub fn read_end(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    /// The end a splice writes into.
    pub fn write_end(&self) -> RawFd {
        self.write.as_raw_fd()
    }

    /// Both ends, to close (through the ring, or by dropping them).
    pub fn into_ends(self) -> [OwnedFd; 2] {
        [self.read, self.write]
    }
}

/// Makes `fd`'s open file nonblocking (`O_NONBLOCK`, on the file description: every
/// descriptor of it, duplicates included). The ring's own socket operations do not depend on
/// it (they try without waiting and poll by themselves); a splice needs it.
pub fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    socket2::SockRef::from(fd).set_nonblocking(true)
}

impl Ring {
    /// Moves up to `len` bytes from `fd_in` (at `offset_in`, or from a pipe with `None`) to
    /// `fd_out` (a pipe, or a nonblocking socket when `fd_in` is a pipe). The completion is
    /// [`crate::Completion::Splice`] with the bytes moved: fewer than `len` when the pipe or
    /// the socket took less (a short splice), `EAGAIN` when the socket had no room at all.
    pub fn splice(
        &mut self,
        fd_in: RawFd,
        offset_in: Option<u64>,
        fd_out: RawFd,
        len: u32,
        token: u64,
    ) -> OpId {
        let offset_in = offset_in.map_or(-1, |o| i64::try_from(o).unwrap_or(i64::MAX));
        let entry = opcode::Splice::new(Fd(fd_in), offset_in, Fd(fd_out), -1, len).build();
        self.queue(entry, Kind::Splice, token, Lent::None)
    }

    /// Waits once for `events` (`POLLOUT`, say) on `fd`. The completion is
    /// [`crate::Completion::Poll`] with the events that fired.
    pub fn poll_once(&mut self, fd: RawFd, events: u32, token: u64) -> OpId {
        let entry = opcode::PollAdd::new(Fd(fd), events).build();
        self.queue(entry, Kind::Poll, token, Lent::None)
    }
}
