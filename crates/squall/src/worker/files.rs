//! Static files in the worker: a `root` route's request becomes a [`Transfer`], which opens
//! its file beneath the root's directory descriptor, reads its metadata and then its bytes
//! through the ring, so a slow disk never blocks the worker (what to answer is decided in
//! `static_files.rs`).
//!
//! Backpressure is the proxied responses' rule (`budget.rs`): the next read is queued only
//! when the client has room for it, and a read is at most [`CHUNK_BYTES`], so a transfer holds
//! at most one chunk in flight plus what its client's bound lets wait. A file below the chunk
//! size goes out after a single read; a larger body sent unchanged to a cleartext HTTP/1.1
//! client is spliced from the file to the socket instead (`files/splice.rs`). Every answer
//! leaves through the downstream (`downstream/file.rs`: the head, the data, a cut, the end
//! with its counters and access log line), so nothing here asks which protocol the client
//! speaks.
//!
//! A transfer's descriptor is closed through the ring when it ends, whether whole, failed, or
//! because its client went away; while an operation is in flight the ring owns its buffers,
//! so a transfer whose client is gone waits for that completion before it is removed.
//!
//! Content codings (`static_files/encoding.rs` decides): on a route with `precompressed`, the
//! file's accepted siblings are opened and `statx`ed in turn, the file's descriptor held
//! meanwhile, and the first fresh one is answered instead; else a file that the route's
//! `compress` plans compressed goes through a `Compressor` one read at a time.

mod coding;
mod splice;

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, StatusCode};
use squall_h1::RequestHead;
use squall_proxy::compress::{Coding, Compressor};
use squall_uring::FileStat;

use slab::Slab;

use coding::{encode_piece, file_encoding};

use super::downstream::{self, Downstream, FileAnswered, part_downstream};
use super::ids::FileId;

use super::ids::Client;
use super::ids::Waiter;
use super::token::{self, Token};
use super::{Io, Worker, part_io};
use crate::roots::Root;
use crate::runtime::Runtime;
use crate::static_files::encoding::Encoding;
use crate::static_files::{self, Extent, Precondition, Target, Validators};

/// The most bytes one read asks for. 64 KiB reads keep a 1 MiB file to 16 trips through the
/// ring while one transfer's read buffer stays small beside its client's 256 KiB bound.
pub const CHUNK_BYTES: usize = 64 * 1024;
/// Below this much room (unless the rest of the file is smaller) a transfer waits for more:
/// a reader is never served in slivers.
const ROOM_MIN_BYTES: usize = 16 * 1024;

/// One static file request in progress.
pub struct Transfer {
    generation: u32,
    client: Client,
    head: RequestHead,
    root: Arc<Root>,
    target: Target,
    /// The index name being tried, for a directory request.
    index_next: usize,
    /// The path opened, relative to the root (its extension gives the type).
    name: Vec<u8>,
    fd: Option<OwnedFd>,
    /// An operation on this transfer is in flight: the ring owns its buffers.
    busy: bool,
    /// The client went away: the transfer ends at the in-flight operation's completion.
    gone: bool,
    /// The next byte to read, and the end (exclusive) of what the response sends.
    offset: u64,
    end: u64,
    status: StatusCode,
    /// Bytes written for the client (head and body), for the access log.
    sent: usize,
    /// The head is written: the access log line is due at the end.
    answered: bool,
    /// HTTP/1.x: the connection closes once the response has left (the request asked, or
    /// the worker drains). Set at the end, not with the head: a connection whose output ran
    /// dry between two reads would otherwise be shut before the body.
    close_after: bool,
    /// When the request's head arrived (the access log's duration).
    started: std::time::Instant,
    /// While precompressed siblings are tried: the file's own descriptor and metadata, which
    /// are served if no sibling is.
    original: Option<(OwnedFd, FileStat)>,
    /// The siblings still to try, the next one last.
    siblings: Vec<Coding>,
    /// The sibling being tried, then served.
    sibling: Option<Coding>,
    /// The body is compressed as it is read (the route's `compress`), until its last piece.
    compressor: Option<Box<Compressor>>,
    /// The head gave no length (compressed as it is read): chunked on HTTP/1.1.
    streamed: bool,
    /// It holds a charge of the descriptor budget for its file (`listen.rs`), from before
    /// its open to its end.
    descriptor: bool,
    /// The body goes file → pipe → socket (`files/splice.rs`) instead of through reads.
    splice: Option<Box<splice::Spliced>>,
}

/// The static file transfers in progress: their slab and their operations on the ring. Every
/// answer leaves through the downstream the loop lends each call; what the loop must do for
/// another part is queued as [`FileNews`] and taken with `next_news` after each call.
#[derive(Default)]
pub(super) struct Files {
    slab: Slab<Transfer>,
    generation: u32,
    news: Vec<FileNews>,
}

/// What a transfer asks of the loop, for another part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FileNews {
    /// The client may go on: it has output to send, or its transfer ended.
    Resume(Client),
    /// Transfer `id` ended: its descriptor's charge is given back (`charged`), or it leaves
    /// the queue of those waiting for one.
    Ended { id: FileId, charged: bool },
    /// Transfer `id` began: it is charged a descriptor and opens, or it waits in the queue for
    /// one (`open_charged` then).
    Began(FileId),
    /// Bytes were spliced to the client's socket: the connection was active (its idle
    /// clock starts again), as a send's completion says for output it sends itself.
    Active(Client),
}

impl Worker {
    /// Runs `f` on the file transfers with the I/O context and the downstream their methods
    /// take, then does what they asked of the loop: a client resumed, a descriptor's charge
    /// given back.
    pub(super) fn with_files<R>(
        &mut self,
        f: impl FnOnce(&mut Files, &mut Io<'_>, &mut Downstream<'_>) -> R,
    ) -> R {
        let result = f(
            &mut self.files,
            &mut part_io!(self),
            &mut part_downstream!(self),
        );
        while let Some(news) = self.files.next_news() {
            match news {
                FileNews::Resume(client) => part_downstream!(self).resume(client),
                FileNews::Ended { id, charged } => {
                    let holder = Waiter::File(id);
                    (self.admission).end_descriptor(&self.runtime, holder, charged);
                }
                FileNews::Active(client) => {
                    let index = client.conn();
                    if let Some(conn) = self.clients.conns.get_mut(index) {
                        conn.last_activity = self.now;
                        self.update_deadline(index);
                    }
                }
                FileNews::Began(id) => {
                    if self.admission.take_descriptor(&self.runtime) {
                        self.files.open_charged(&mut part_io!(self), id);
                    } else {
                        (self.admission).wait_for_descriptor(&part_io!(self), Waiter::File(id));
                    }
                }
            }
        }
        result
    }
}

/// The `root` route `route`'s directory, if it is one.
pub(super) fn files_root(runtime: &Runtime, route: Option<u32>) -> Option<Arc<Root>> {
    runtime.service.route_by_id(route?)?.rules.root.clone()
}

impl Files {
    /// What the last call asks of the loop, oldest first.
    pub(super) fn next_news(&mut self) -> Option<FileNews> {
        (!self.news.is_empty()).then(|| self.news.remove(0))
    }

    /// Starts serving `head` from `root` for `client`: answered at once (a refusal), or a
    /// transfer, noted on the client so that an HTTP/1.1 connection reads no further request
    /// until it ends, which asks the loop to charge it a descriptor (`FileNews::Began`, then
    /// `open_charged`).
    pub(super) fn start(
        &mut self,
        io: &mut Io<'_>,
        down: &mut Downstream<'_>,
        client: Client,
        head: RequestHead,
        root: Arc<Root>,
    ) {
        if let Some(status) = static_files::method_refusal(&head.method) {
            let allow = Some(("allow", &b"GET, HEAD"[..]));
            self.refuse(down, client, &head, root.id, status, allow);
            return;
        }
        let target = match static_files::target(head.uri.path()) {
            Ok(target) => target,
            Err(why) => {
                tracing::debug!(worker = io.worker, ?why, "static file path refused");
                self.refuse(down, client, &head, root.id, StatusCode::NOT_FOUND, None);
                return;
            }
        };
        self.generation = token::next_generation(self.generation);
        let generation = self.generation;
        let index = self.slab.insert(Transfer {
            generation,
            client,
            head,
            root,
            target,
            index_next: 0,
            name: Vec::new(),
            fd: None,
            busy: false,
            gone: false,
            offset: 0,
            end: 0,
            status: StatusCode::OK,
            sent: 0,
            answered: false,
            close_after: false,
            started: io.now,
            original: None,
            siblings: Vec::new(),
            sibling: None,
            compressor: None,
            streamed: false,
            descriptor: false,
            splice: None,
        });
        let id = FileId { index, generation };
        downstream::set_file(&mut down.conns[client.conn()], client, Some(id));
        self.news.push(FileNews::Began(id));
    }

    /// Opens the file of transfer `id`, waiting until now for a descriptor, now charged one;
    /// false when its client went away meanwhile.
    pub(super) fn open_charged(&mut self, io: &mut Io<'_>, id: FileId) -> bool {
        let Some(transfer) =
            (self.slab.get_mut(id.index)).filter(|t| t.generation == id.generation && !t.gone)
        else {
            return false;
        };
        debug_assert!(!transfer.descriptor && !transfer.busy);
        transfer.descriptor = true;
        self.open_next(io, id);
        true
    }

    /// Opens the transfer's file: the path itself, or the next index name of a directory.
    fn open_next(&mut self, io: &mut Io<'_>, id: FileId) {
        let transfer = &mut self.slab[id.index];
        let mut name = transfer.target.relative.clone();
        if transfer.target.directory {
            let index = &transfer.root.index[transfer.index_next];
            if !name.is_empty() {
                name.push(b'/');
            }
            name.extend_from_slice(index.as_bytes());
        } else if name.is_empty() {
            name.push(b'.');
        }
        // The target has no NUL byte (`static_files::target` refuses it) and index names none.
        let path = CString::new(name.clone()).unwrap_or_default();
        transfer.name = name;
        transfer.busy = true;
        let (dir, resolve) = (transfer.root.dir.as_raw_fd(), transfer.root.resolve);
        let token = Token::file(id.index, id.generation).raw();
        io.ring.openat2(dir, path, resolve, token);
    }

    /// The transfer a completion's token names, now that its operation is over; `None` when
    /// it ended meanwhile (its client went away), which ends it for good.
    fn done(&mut self, io: &mut Io<'_>, down: &mut Downstream<'_>, token: u64) -> Option<FileId> {
        let token = Token::from_raw(token);
        let transfer = self.slab.get_mut(token.index())?;
        if !token.names(transfer.generation) {
            return None;
        }
        transfer.busy = false;
        let id = FileId {
            index: token.index(),
            generation: transfer.generation,
        };
        if transfer.gone {
            self.end(io, down, id);
            return None;
        }
        Some(id)
    }

    pub(super) fn on_open(
        &mut self,
        io: &mut Io<'_>,
        down: &mut Downstream<'_>,
        token: u64,
        result: io::Result<OwnedFd>,
    ) {
        let Some(id) = self.done(io, down, token) else {
            if let Ok(fd) = result {
                io.ring.close(fd, token);
            }
            return;
        };
        let transfer = &mut self.slab[id.index];
        match result {
            Ok(fd) => {
                transfer.busy = true;
                io.ring.statx(fd.as_raw_fd(), token);
                transfer.fd = Some(fd);
            }
            // A sibling that cannot be opened (none, not readable) is no answer of its own.
            Err(_) if transfer.sibling.is_some() => self.next_sibling(io, down, id),
            Err(e)
                if squall_uring::is_not_found(&e)
                    && transfer.target.directory
                    && transfer.index_next + 1 < transfer.root.index.len() =>
            {
                transfer.index_next += 1;
                self.open_next(io, id);
            }
            Err(e) => {
                let status = match e.raw_os_error() {
                    _ if squall_uring::is_not_found(&e) => StatusCode::NOT_FOUND,
                    Some(libc::EACCES | libc::EPERM) => StatusCode::FORBIDDEN,
                    Some(libc::EMFILE | libc::ENFILE) => StatusCode::SERVICE_UNAVAILABLE,
                    _ => StatusCode::INTERNAL_SERVER_ERROR,
                };
                if status.is_server_error() {
                    tracing::warn!(worker = io.worker, "static file open: {e}");
                }
                self.fail(io, down, id, status, None);
            }
        }
    }

    pub(super) fn on_stat(
        &mut self,
        io: &mut Io<'_>,
        down: &mut Downstream<'_>,
        token: u64,
        result: io::Result<FileStat>,
    ) {
        let Some(id) = self.done(io, down, token) else {
            return;
        };
        let transfer = &self.slab[id.index];
        if transfer.sibling.is_some() {
            return self.on_sibling_stat(io, down, id, token, result);
        }
        match result {
            Ok(stat) if stat.is_dir() && !transfer.target.directory => {
                // A directory named without its slash: where it is (nginx's answer), with the
                // query kept.
                let uri = &transfer.head.uri;
                let mut location = format!("{}/", uri.path());
                if let Some(query) = uri.query() {
                    location.push('?');
                    location.push_str(query);
                }
                let field = Some(("location", location.as_bytes()));
                self.fail(io, down, id, StatusCode::MOVED_PERMANENTLY, field);
            }
            Ok(stat) if stat.is_file() => self.try_siblings(io, down, id, stat),
            // An index that is a directory, a device, a socket: nothing to serve.
            Ok(_) => self.fail(io, down, id, StatusCode::NOT_FOUND, None),
            Err(e) => {
                tracing::warn!(worker = io.worker, "static file statx: {e}");
                self.fail(io, down, id, StatusCode::INTERNAL_SERVER_ERROR, None);
            }
        }
    }

    /// Answers from the open file's metadata: 304, 412, 416, or the head of a 200 or 206
    /// whose body the reads then send.
    fn respond(&mut self, io: &mut Io<'_>, down: &mut Downstream<'_>, id: FileId, stat: &FileStat) {
        let mut v = Validators::of(stat);
        let Some((status, first, end)) = self.extent(io, down, id, &v, stat.size) else {
            return;
        };
        let transfer = &mut self.slab[id.index];
        let content_type = static_files::content_type(&transfer.name);
        let is_head = transfer.head.method == Method::HEAD;
        let no_body = is_head || status == StatusCode::NOT_MODIFIED || end == first;
        let encoding = file_encoding(transfer, status, stat.size, content_type, no_body);
        if let Encoding::Compressed(_) = encoding {
            // Another representation of the file, equivalent but not byte-equal (RFC 9110
            // §8.8.1), as nginx's gzip gives.
            v.etag.insert_str(0, "W/");
        }
        let content_range = (status == StatusCode::PARTIAL_CONTENT)
            .then(|| format!("bytes {first}-{}/{}", end - 1, stat.size));
        let mut fields: Vec<(&[u8], &[u8])> = vec![
            (b"etag", v.etag.as_bytes()),
            (b"last-modified", v.last_modified.as_bytes()),
        ];
        if encoding.varies() {
            fields.push((b"vary", b"Accept-Encoding"));
        }
        if status != StatusCode::NOT_MODIFIED {
            fields.push((b"content-type", content_type.as_bytes()));
            match encoding.coding() {
                Some(coding) => fields.push((b"content-encoding", coding.token().as_bytes())),
                None => fields.push((b"accept-ranges", b"bytes")),
            }
        }
        if let Some(range) = &content_range {
            fields.push((b"content-range", range.as_bytes()));
        }
        // A 304 and a HEAD carry the length a GET's 200 would have (RFC 9110 §8.6): none
        // when it is compressed as it is sent.
        let length = match (status, encoding) {
            (_, Encoding::Compressed(_)) => None,
            (StatusCode::NOT_MODIFIED, _) => Some(stat.size),
            _ => Some(end - first),
        };
        (transfer.status, transfer.offset, transfer.end) = (status, first, end);
        if no_body {
            transfer.end = first;
        }
        let (client, framing) = (transfer.client, transfer.head.framing());
        let head = down.file_head(client, framing, status, &fields, length, no_body);
        let Some((written, close_after)) = head else {
            return;
        };
        let transfer = &mut self.slab[id.index];
        transfer.close_after = close_after;
        transfer.sent += written;
        transfer.answered = true;
        self.begin_splice(io, down, id);
        self.pump(io, down, id);
    }

    /// The status and the bytes (first, end exclusive) a file of `len` bytes with validators
    /// `v` answers with: 200, 206 or 304; `None` once it was answered 412 or 416.
    fn extent(
        &mut self,
        io: &mut Io<'_>,
        down: &mut Downstream<'_>,
        id: FileId,
        v: &Validators,
        len: u64,
    ) -> Option<(StatusCode, u64, u64)> {
        let transfer = &self.slab[id.index];
        let extent = match static_files::precondition(&transfer.head, v) {
            Precondition::Failed => {
                self.fail(io, down, id, StatusCode::PRECONDITION_FAILED, None);
                return None;
            }
            Precondition::NotModified => None,
            Precondition::Proceed => Some(static_files::extent(&transfer.head, v, len)),
        };
        match extent {
            None => Some((StatusCode::NOT_MODIFIED, 0, 0)),
            Some(Extent::Whole) => Some((StatusCode::OK, 0, len)),
            Some(Extent::Part(range)) => {
                Some((StatusCode::PARTIAL_CONTENT, range.first, range.last + 1))
            }
            Some(Extent::Unsatisfiable) => {
                let range = format!("bytes */{len}");
                let field = Some(("content-range", range.as_bytes()));
                self.fail(io, down, id, StatusCode::RANGE_NOT_SATISFIABLE, field);
                None
            }
        }
    }

    /// Queues the next read if the client has room for it, or ends a transfer with nothing
    /// left to send.
    fn pump(&mut self, io: &mut Io<'_>, down: &mut Downstream<'_>, id: FileId) {
        let Some(transfer) = self
            .slab
            .get(id.index)
            .filter(|t| t.generation == id.generation)
        else {
            return;
        };
        // Busy, gone, or not yet opened (waiting for a descriptor).
        if transfer.busy || transfer.gone || !transfer.descriptor {
            return;
        }
        let left = transfer.end - transfer.offset;
        if transfer.splice.is_some() {
            return self.pump_spliced(io, down, id);
        }
        if left == 0 {
            self.end(io, down, id);
            return;
        }
        let client = transfer.client;
        let room = down.client_room(client).bytes;
        let left = usize::try_from(left).unwrap_or(usize::MAX);
        let n = left.min(CHUNK_BYTES).min(room);
        if n < left.min(ROOM_MIN_BYTES) {
            // `drained` comes back when the client has taken some.
            return;
        }
        let transfer = &mut self.slab[id.index];
        let Some(fd) = transfer.fd.as_ref() else {
            return;
        };
        transfer.busy = true;
        let token = Token::file(id.index, id.generation).raw();
        io.ring.read_at(
            fd.as_raw_fd(),
            Vec::with_capacity(n),
            transfer.offset,
            token,
        );
    }

    pub(super) fn on_read(
        &mut self,
        io: &mut Io<'_>,
        down: &mut Downstream<'_>,
        token: u64,
        result: io::Result<usize>,
        buf: Vec<u8>,
    ) {
        let Some(id) = self.done(io, down, token) else {
            return;
        };
        let n = match result {
            Ok(n) if n > 0 => n,
            // The file shrank under us, or the disk failed: the head promised a length, so
            // the client must see a cut response, never a short one that looks whole.
            Ok(_) | Err(_) => {
                if let Err(e) = result {
                    tracing::warn!(worker = io.worker, "static file read: {e}");
                }
                self.cut(io, down, id);
                return;
            }
        };
        let transfer = &mut self.slab[id.index];
        let n = n.min(usize::try_from(transfer.end - transfer.offset).unwrap_or(usize::MAX));
        transfer.offset += n as u64;
        let last = transfer.offset == transfer.end;
        let mut data = Bytes::from(buf);
        data.truncate(n);
        let (data, stats) = match encode_piece(transfer, data, last) {
            Ok(encoded) => encoded,
            Err(e) => {
                tracing::warn!(worker = io.worker, "static file: {e}");
                self.cut(io, down, id);
                return;
            }
        };
        transfer.sent += data.len();
        let (client, streamed) = (transfer.client, transfer.streamed);
        if let Some(stats) = stats {
            (io.runtime.metrics.worker(io.worker)).count_compression(stats);
        }
        // A compressor may hold a piece back whole: nothing to send until it gives some.
        if !data.is_empty() || last {
            down.file_data(client, data, last, streamed);
            self.news.push(FileNews::Resume(client));
        }
        self.pump(io, down, id);
    }

    /// The client has room again: the transfer reads on.
    pub(super) fn drained(&mut self, io: &mut Io<'_>, down: &mut Downstream<'_>, id: FileId) {
        self.pump(io, down, id);
    }

    /// The client (or its HTTP/2 stream) went away: the transfer ends now, or at the
    /// completion of its operation in flight.
    pub(super) fn gone(&mut self, io: &mut Io<'_>, down: &mut Downstream<'_>, id: FileId) {
        let Some(transfer) = self
            .slab
            .get_mut(id.index)
            .filter(|t| t.generation == id.generation)
        else {
            return;
        };
        transfer.gone = true;
        if !transfer.busy {
            self.end(io, down, id);
        } else {
            self.cancel_splice(io, id);
        }
    }

    /// A transfer that cannot finish after its head left: the HTTP/1.1 connection is cut
    /// once what it has left, the HTTP/2 stream reset.
    fn cut(&mut self, io: &mut Io<'_>, down: &mut Downstream<'_>, id: FileId) {
        let client = self.slab[id.index].client;
        down.file_cut(client);
        self.end(io, down, id);
    }

    /// Answers with a status of its own (404, 301, 412, 416...) instead of the file, then ends.
    fn fail(
        &mut self,
        io: &mut Io<'_>,
        down: &mut Downstream<'_>,
        id: FileId,
        status: StatusCode,
        field: Option<(&str, &[u8])>,
    ) {
        let transfer = &self.slab[id.index];
        let (client, route) = (transfer.client, transfer.root.id);
        let head = transfer.head.clone();
        self.refuse(down, client, &head, route, status, field);
        self.end(io, down, id);
    }

    /// A short answer for route `route`: the vhost's error page or a text body, with `field`.
    fn refuse(
        &mut self,
        down: &mut Downstream<'_>,
        client: Client,
        head: &RequestHead,
        route: u32,
        status: StatusCode,
        field: Option<(&str, &[u8])>,
    ) {
        if let Some(conn) = down.conns.get_mut(client.conn()) {
            conn.log_note.route = Some(route);
        }
        down.refuse_with(client, head, status, field);
    }

    /// Removes a transfer: its descriptor is closed through the ring, its access log line
    /// written if it answered, and its client may go on.
    fn end(&mut self, io: &mut Io<'_>, down: &mut Downstream<'_>, id: FileId) {
        let transfer = self.slab.remove(id.index);
        debug_assert!(!transfer.busy, "the ring owns a busy transfer's buffers");
        let charged = transfer.descriptor;
        self.news.push(FileNews::Ended { id, charged });
        let token = Token::file(id.index, id.generation).raw();
        if transfer.splice.is_some() {
            Files::end_splice(io);
        }
        for fd in [transfer.fd, transfer.original.map(|(fd, _)| fd)]
            .into_iter()
            .flatten()
            .chain(transfer.splice.into_iter().flat_map(|s| s.into_fds()))
        {
            io.ring.close(fd, token);
        }
        // A client that went away is not written to or logged for (as an aborted session):
        // its connection's slot may even have a new occupant by the time an operation of the
        // transfer completed, and the stream's entry went with its reset.
        if transfer.gone {
            return;
        }
        let client = transfer.client;
        let answered = transfer.answered.then(|| FileAnswered {
            head: &transfer.head,
            status: transfer.status,
            sent: transfer.sent,
            route: transfer.root.id,
            started: transfer.started,
        });
        down.file_end(client, id, transfer.close_after, answered);
        self.news.push(FileNews::Resume(client));
    }

    /// Every transfer answering a client on connection `index` ends (the connection closes).
    pub(super) fn gone_all(&mut self, io: &mut Io<'_>, down: &mut Downstream<'_>, index: usize) {
        for id in downstream::files_of(&down.conns[index]) {
            self.gone(io, down, id);
        }
    }
}
