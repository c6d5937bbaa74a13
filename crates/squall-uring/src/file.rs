//! File operations for serving static files without blocking a worker on a slow disk: open a
//! path beneath a directory (`openat2` with resolve flags), read its metadata (`statx`) and
//! read it at an offset into an owned buffer. Closing goes through [`Ring::close`] like any
//! descriptor.
//!
//! Ownership is the crate's rule: the path and `open_how` of an open, the `statx` buffer and
//! the read buffer move into the op slab when queued and are only released by the final
//! completion, which hands the read buffer back to the caller.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use io_uring::opcode;
use io_uring::types::{Fd, OpenHow};

use crate::{Completion, Kind, Lent, OpId, Ring, count};

/// The path `statx` is given to describe the descriptor itself (with `AT_EMPTY_PATH`).
const EMPTY_PATH: &CStr = c"";

/// What `statx` says about an open file, as far as serving it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStat {
    /// `st_mode`: the file type and permission bits.
    pub mode: u32,
    pub size: u64,
    pub inode: u64,
    /// Last modification, in seconds since the epoch (may be negative) and nanoseconds.
    pub mtime_sec: i64,
    pub mtime_nsec: u32,
}

impl FileStat {
    /// Whether the file is a regular file.
    pub fn is_file(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFREG
    }

    /// Whether the file is a directory.
    pub fn is_dir(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFDIR
    }
}

impl Ring {
    /// Opens `path` relative to the directory `dir` for reading (`O_RDONLY | O_CLOEXEC`, plus
    /// `O_NOFOLLOW` for the last component unless `resolve` allows symlinks), with the
    /// `openat2` resolve flags `resolve` (`RESOLVE_BENEATH` and friends). The completion is
    /// [`Completion::Open`] with the new descriptor.
    pub fn openat2(&mut self, dir: RawFd, path: CString, resolve: u64, token: u64) -> OpId {
        let mut flags = (libc::O_RDONLY | libc::O_CLOEXEC) as u64;
        if resolve & libc::RESOLVE_NO_SYMLINKS != 0 {
            flags |= libc::O_NOFOLLOW as u64;
        }
        let how = Box::new(OpenHow::new().flags(flags).resolve(resolve));
        // Both the path and `how` are heap memory that keeps its address when moved into the
        // op slab, where they stay until the completion.
        let entry = opcode::OpenAt2::new(Fd(dir), path.as_ptr(), &raw const *how).build();
        self.queue(entry, Kind::Open, token, Lent::Open { path, how })
    }

    /// Reads the metadata of the open file `fd`. The completion is [`Completion::Statx`].
    pub fn statx(&mut self, fd: RawFd, token: u64) -> OpId {
        // SAFETY: `libc::statx` is plain data for which all zeroes is valid.
        let buf: Box<libc::statx> = Box::new(unsafe { std::mem::zeroed() });
        let mask = libc::STATX_TYPE
            | libc::STATX_MODE
            | libc::STATX_SIZE
            | libc::STATX_INO
            | libc::STATX_MTIME;
        // The buffer is boxed (its address survives the move into the slab); the path is a
        // static empty string.
        let statx = (&raw const *buf)
            .cast_mut()
            .cast::<io_uring::types::statx>();
        let entry = opcode::Statx::new(Fd(fd), EMPTY_PATH.as_ptr(), statx)
            .flags(libc::AT_EMPTY_PATH)
            .mask(mask)
            .build();
        self.queue(entry, Kind::Statx, token, Lent::Statx(buf))
    }

    /// Reads up to `buf.capacity() - buf.len()` bytes of `fd` at `offset`, appended to `buf`.
    /// The completion is [`Completion::Read`], which hands `buf` back with the bytes read
    /// added to its length (0 at the end of the file).
    pub fn read_at(&mut self, fd: RawFd, mut buf: Vec<u8>, offset: u64, token: u64) -> OpId {
        let spare = buf.spare_capacity_mut();
        let len = u32::try_from(spare.len()).unwrap_or(u32::MAX);
        let ptr = spare.as_mut_ptr().cast::<u8>();
        // The pointer is into the vector's heap buffer, which does not move when the vector
        // moves into the slab and is not touched by us until the completion.
        let entry = opcode::Read::new(Fd(fd), ptr, len).offset(offset).build();
        self.queue(entry, Kind::Read, token, Lent::Read(buf))
    }
}

/// The completion of a file operation, from its op's buffers and the kernel's result.
pub(crate) fn finish(kind: Kind, lent: Lent, token: u64, res: i32) -> Completion {
    match (kind, lent) {
        (Kind::Open, _) => Completion::Open {
            token,
            result: count(res).map(|fd| {
                // SAFETY: a successful open completion carries a new descriptor that nothing
                // else owns.
                unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
            }),
        },
        (Kind::Statx, Lent::Statx(buf)) => Completion::Statx {
            token,
            result: count(res).map(|_| FileStat {
                mode: u32::from(buf.stx_mode),
                size: buf.stx_size,
                inode: buf.stx_ino,
                mtime_sec: buf.stx_mtime.tv_sec,
                mtime_nsec: buf.stx_mtime.tv_nsec,
            }),
        },
        (Kind::Read, Lent::Read(mut buf)) => {
            let result = count(res);
            if let Ok(n) = result {
                let n = n.min(buf.capacity() - buf.len());
                // SAFETY: the kernel wrote `n` bytes (its result, bounded by the spare
                // capacity we gave it) right after the vector's initialised part, and the
                // completion says it is done with the buffer.
                unsafe { buf.set_len(buf.len() + n) };
            }
            Completion::Read { token, result, buf }
        }
        (kind, _) => unreachable!("op {kind:?} was queued with the buffers of another kind"),
    }
}

/// Whether an error from [`Ring::openat2`] means the path is not there to serve (missing,
/// not a directory on the way, a symlink refused, outside the root): a 404, not a 500.
pub fn is_not_found(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::EXDEV | libc::ENAMETOOLONG)
    )
}
