//! A file's bytes spliced to a cleartext HTTP/1.1 client: file → pipe → socket, each step an
//! `IORING_OP_SPLICE`, so the bytes are never copied into (or out of) user memory: the pipe
//! holds references to the page cache's pages and the socket takes them.
//!
//! Only where the body is the file's bytes unchanged on a plain socket (not compressed as it
//! is read, not chunked, not TLS, not a stream of HTTP/2 or HTTP/3), and only from
//! [`SPLICE_MIN_BYTES`] on; the rest reads as before.
//!
//! Order: the file's first chunk goes into the pipe while the response head is sent, and the
//! pipe goes to the socket only once the head and everything queued before it have left
//! (`Downstream::lend_socket`); from then until the transfer ends the connection sends
//! nothing of its own. Each chunk is spliced into the socket until the pipe is empty (a
//! short splice takes part of it) before the next one is spliced from the file, so one
//! operation of the transfer is in flight at a time.
//!
//! A full socket: every splice runs on io-wq and a splice does not wait for room as a send
//! does, so the socket is nonblocking (on the transfer's own duplicate of the descriptor,
//! which shares the connection's open file) and a full one answers `EAGAIN`; a one-shot poll
//! then waits for room. A client that stops reading thus holds no thread, only that poll,
//! and the connection's idle timeout (its clock moved by every splice that took bytes) ends
//! it. A client gone: the operation in flight is cancelled and the transfer ends at its
//! completion, closing its pipe and its descriptors (`Files::end`).
//!
//! Descriptors: the pipe's two ends and the socket's duplicate are charged to the descriptor
//! budget beside the file; a transfer that cannot have them, or a pipe that is too small
//! (past `pipe-user-pages-soft` the kernel hands out two pages), reads instead. Why a
//! duplicate of the socket: io-wq looks a splice's descriptors up when it runs it, after
//! submission, and the connection may close its socket (the number then free for another
//! connection) in between; the duplicate is the transfer's own, closed after its last
//! operation reported.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use squall_uring::{OpId, Pipe};

use super::super::downstream::Downstream;
use super::super::ids::FileId;
use super::super::token::Token;
use super::{FileNews, Files};
use crate::worker::Io;

/// Bodies from this size on are spliced (cleartext HTTP/1.1, unchanged bytes): those that
/// take more than one read (`CHUNK_BYTES`). Measured against reads (docs/PERFORMANCE.md): a
/// 64 KiB file spliced cost about what its one read and send cost (1.09× the machine's CPU
/// per request, noisy), a 128 KiB one 0.54×, 256 KiB 0.50×, 1 MiB 0.50×.
pub const SPLICE_MIN_BYTES: u64 = super::CHUNK_BYTES as u64 + 1;
/// The largest pipe asked for: a chunk spliced from the file at a time. 1 MiB (the default
/// `pipe-max-size`) sends a 1 MiB file with one splice from the file; measured on
/// `h1-static-1m`, a 1 MiB pipe took 0.88× the machine's CPU per request of a 256 KiB one,
/// and 0.61× that of a 64 KiB one (docs/PERFORMANCE.md).
const PIPE_BYTES: usize = 1024 * 1024;
/// A pipe smaller than this (a user past `pipe-user-pages-soft`) is not used.
const PIPE_MIN_BYTES: usize = 64 * 1024;
/// Descriptors a spliced transfer holds beside its file: the pipe's two ends and the
/// socket's duplicate.
const EXTRA_DESCRIPTORS: usize = 3;

/// A transfer's splicing state.
pub(super) struct Spliced {
    pipe: Pipe,
    /// The client's socket, the transfer's own duplicate (see the module docs).
    socket: OwnedFd,
    /// Bytes in the pipe, not yet in the socket.
    piped: usize,
    /// The head and what was queued before it left: the socket is the transfer's.
    lent: bool,
    /// The operation in flight, to cancel when the client goes.
    op: Option<(OpId, Step)>,
}

/// What a transfer's operation in flight is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// File → pipe.
    Fill,
    /// Pipe → socket.
    Drain,
    /// A poll for room in the socket.
    Room,
}

/// The pipe a body of `len` bytes asks for: the body rounded up to a power of two, from the
/// default 64 KiB to [`PIPE_BYTES`]. A pipe's pages count against its user's
/// `pipe-user-pages-soft` (past it, new pipes get two pages): a smaller body takes less.
fn pipe_bytes(len: u64) -> usize {
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    len.checked_next_power_of_two()
        .unwrap_or(PIPE_BYTES)
        .clamp(PIPE_MIN_BYTES, PIPE_BYTES)
}

impl Spliced {
    /// Its descriptors, to close.
    pub(super) fn into_fds(self) -> impl Iterator<Item = OwnedFd> {
        let [read, write] = self.pipe.into_ends();
        [read, write, self.socket].into_iter()
    }
}

impl Files {
    /// After the head: the transfer splices its body if the body is the file's bytes
    /// unchanged and over one read's, its client a cleartext HTTP/1.1 connection, and it can
    /// have a pipe and the descriptors; else it reads.
    pub(super) fn begin_splice(&mut self, io: &mut Io<'_>, down: &mut Downstream<'_>, id: FileId) {
        let transfer = &mut self.slab[id.index];
        let len = transfer.end - transfer.offset;
        if len < SPLICE_MIN_BYTES || transfer.compressor.is_some() || transfer.streamed {
            return;
        }
        let budget = &io.runtime.metrics.descriptors;
        if !budget.take_n(EXTRA_DESCRIPTORS) {
            return;
        }
        let socket = down.splice_socket(transfer.client);
        let pipe = socket.is_some().then(|| Pipe::new(pipe_bytes(len)));
        let pipe = pipe.and_then(|pipe| {
            pipe.map_err(|e| tracing::debug!(worker = io.worker, "splice pipe: {e}"))
                .ok()
        });
        let (Some(socket), Some(pipe)) = (socket, pipe.filter(|p| p.capacity() >= PIPE_MIN_BYTES))
        else {
            budget.give_n(EXTRA_DESCRIPTORS);
            return;
        };
        transfer.splice = Some(Box::new(Spliced {
            pipe,
            socket,
            piped: 0,
            lent: false,
            op: None,
        }));
        // The head goes out now, while the first chunk is spliced into the pipe.
        self.news.push(FileNews::Resume(transfer.client));
    }

    /// Gives back the descriptors a spliced transfer was charged beside its file.
    pub(super) fn end_splice(io: &Io<'_>) {
        io.runtime.metrics.descriptors.give_n(EXTRA_DESCRIPTORS);
    }

    /// Queues a spliced transfer's next operation: the pipe into the socket while it holds
    /// bytes (once the socket is lent), else the file's next chunk into the pipe; or ends it.
    pub(super) fn pump_spliced(&mut self, io: &mut Io<'_>, down: &mut Downstream<'_>, id: FileId) {
        let transfer = &mut self.slab[id.index];
        let client = transfer.client;
        let token = Token::file(id.index, id.generation).raw();
        let (Some(spliced), Some(fd)) = (transfer.splice.as_mut(), transfer.fd.as_ref()) else {
            return;
        };
        if spliced.piped > 0 {
            if !spliced.lent {
                if !down.lend_socket(client) {
                    // The head has yet to leave: `drained` comes back once it has.
                    self.news.push(FileNews::Resume(client));
                    return;
                }
                spliced.lent = true;
            }
            let len = u32::try_from(spliced.piped).unwrap_or(u32::MAX);
            let (pipe, socket) = (spliced.pipe.read_end(), spliced.socket.as_raw_fd());
            let op = io.ring.splice(pipe, None, socket, len, token);
            spliced.op = Some((op, Step::Drain));
        } else if transfer.offset < transfer.end {
            let left = usize::try_from(transfer.end - transfer.offset).unwrap_or(usize::MAX);
            let len = left.min(spliced.pipe.capacity());
            let len = u32::try_from(len).unwrap_or(u32::MAX);
            let pipe = spliced.pipe.write_end();
            let op = io
                .ring
                .splice(fd.as_raw_fd(), Some(transfer.offset), pipe, len, token);
            spliced.op = Some((op, Step::Fill));
        } else {
            self.end(io, down, id);
            return;
        }
        transfer.busy = true;
    }

    /// A splice of a transfer finished: the chunk is in the pipe, or part or all of the pipe
    /// is in the socket (`EAGAIN`: none, the socket is full).
    pub(in crate::worker) fn on_splice(
        &mut self,
        io: &mut Io<'_>,
        down: &mut Downstream<'_>,
        token: u64,
        result: io::Result<usize>,
    ) {
        let Some(id) = self.done(io, down, token) else {
            return;
        };
        let transfer = &mut self.slab[id.index];
        let client = transfer.client;
        let Some(spliced) = transfer.splice.as_mut() else {
            return;
        };
        let step = spliced.op.take().map(|(_, step)| step);
        match (step, result) {
            (Some(Step::Fill), Ok(n)) if n > 0 => {
                spliced.piped = n;
                transfer.offset += n as u64;
            }
            (Some(Step::Drain), Ok(n)) if n > 0 => {
                spliced.piped = spliced.piped.saturating_sub(n);
                transfer.sent += n;
                self.news.push(FileNews::Active(client));
            }
            (Some(Step::Drain), Err(e)) if e.raw_os_error() == Some(libc::EAGAIN) => {
                let socket = spliced.socket.as_raw_fd();
                let op = io.ring.poll_once(socket, libc::POLLOUT as u32, token);
                spliced.op = Some((op, Step::Room));
                transfer.busy = true;
                return;
            }
            // The file shrank under us or the disk failed (the head promised a length), or
            // the client's connection failed: the response is cut, as a failed read's is.
            (step, result) => {
                tracing::debug!(worker = io.worker, ?step, ?result, "static file splice");
                self.cut(io, down, id);
                return;
            }
        }
        self.pump(io, down, id);
    }

    /// The poll for room in a full socket fired: the pipe goes on into it.
    pub(in crate::worker) fn on_poll(
        &mut self,
        io: &mut Io<'_>,
        down: &mut Downstream<'_>,
        token: u64,
        result: io::Result<u32>,
    ) {
        let Some(id) = self.done(io, down, token) else {
            return;
        };
        if let Some(spliced) = self.slab[id.index].splice.as_mut() {
            spliced.op = None;
        }
        match result {
            Ok(_) => self.pump(io, down, id),
            Err(e) => {
                tracing::debug!(worker = io.worker, "static file poll: {e}");
                self.cut(io, down, id);
            }
        }
    }

    /// Cancels a gone transfer's operation in flight (a poll for room may never fire).
    pub(super) fn cancel_splice(&mut self, io: &mut Io<'_>, id: FileId) {
        let transfer = &self.slab[id.index];
        if let Some((op, _)) = transfer.splice.as_ref().and_then(|s| s.op) {
            io.ring
                .cancel(op, Token::file(id.index, id.generation).raw());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_is_sized_to_its_body_within_its_bounds() {
        assert_eq!(
            SPLICE_MIN_BYTES,
            64 * 1024 + 1,
            "one read's chunk is not spliced"
        );
        assert_eq!(pipe_bytes(SPLICE_MIN_BYTES), 128 * 1024);
        assert_eq!(pipe_bytes(256 * 1024), 256 * 1024);
        assert_eq!(pipe_bytes(1024 * 1024), PIPE_BYTES);
        assert_eq!(pipe_bytes(5 * 1024 * 1024 + 7), PIPE_BYTES);
        assert_eq!(pipe_bytes(u64::MAX), PIPE_BYTES);
        assert_eq!(pipe_bytes(1), PIPE_MIN_BYTES);
    }
}
