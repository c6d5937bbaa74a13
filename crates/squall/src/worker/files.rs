//! Static files in the worker: a `root` route's request becomes a [`Transfer`], which opens
//! its file beneath the root's directory descriptor, reads its metadata and then its bytes
//! through the ring, so a slow disk never blocks the worker (what to answer is decided in
//! `static_files.rs`).
//!
//! Backpressure is the proxied responses' rule (`budget.rs`): the next read is queued only
//! when the client has room for it, and a read is at most [`CHUNK_BYTES`], so a transfer holds
//! at most one chunk in flight plus what its client's bound lets wait. A file below the chunk
//! size goes out after a single read. Every answer leaves through the downstream
//! (`downstream/file.rs`: the head, the data, a cut, the end with its counters and access log
//! line), so nothing here asks which protocol the client speaks.
//!
//! A transfer's descriptor is closed through the ring when it ends, whether whole, failed, or
//! because its client went away; while an operation is in flight the ring owns its buffers,
//! so a transfer whose client is gone waits for that completion before it is removed.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, StatusCode};
use squall_h1::RequestHead;
use squall_uring::FileStat;

use super::Worker;
use super::downstream::{self, Client, FileAnswered};
use super::token::{self, Token};
use crate::roots::Root;
use crate::static_files::{self, Extent, Precondition, Target, Validators};

/// The most bytes one read asks for. 64 KiB reads keep a 1 MiB file to 16 trips through the
/// ring while one transfer's read buffer stays small beside its client's 256 KiB bound.
pub const CHUNK_BYTES: usize = 64 * 1024;
/// Below this much room (unless the rest of the file is smaller) a transfer waits for more:
/// a reader is never served in slivers.
const ROOM_MIN_BYTES: usize = 16 * 1024;

/// A transfer's slot and the occupant of that slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    pub index: usize,
    pub generation: u32,
}

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
}

impl Worker {
    /// The `root` route `route`'s directory, if it is one.
    pub(super) fn files_root(&self, route: Option<u32>) -> Option<Arc<Root>> {
        self.runtime.service.route_by_id(route?)?.rules.root.clone()
    }

    /// Starts serving `head` from `root` for `client`. Returns true when it was answered at
    /// once (a refusal); false while the file is opened and sent, the transfer then noted on
    /// the client so that an HTTP/1.1 connection reads no further request until it ends.
    pub(super) fn start_file(
        &mut self,
        client: Client,
        head: RequestHead,
        root: Arc<Root>,
    ) -> bool {
        if let Some(status) = static_files::method_refusal(&head.method) {
            let allow = Some(("allow", &b"GET, HEAD"[..]));
            self.refuse_file(client, &head, root.id, status, allow);
            return true;
        }
        let target = match static_files::target(head.uri.path()) {
            Ok(target) => target,
            Err(why) => {
                tracing::debug!(worker = self.id, ?why, "static file path refused");
                self.refuse_file(client, &head, root.id, StatusCode::NOT_FOUND, None);
                return true;
            }
        };
        self.next_generation = token::next_generation(self.next_generation);
        let generation = self.next_generation;
        let index = self.files.insert(Transfer {
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
            started: self.now,
        });
        let id = FileId { index, generation };
        downstream::set_file(&mut self.conns[client.conn()], client, Some(id));
        self.open_next(id);
        false
    }

    /// Opens the transfer's file: the path itself, or the next index name of a directory.
    fn open_next(&mut self, id: FileId) {
        let transfer = &mut self.files[id.index];
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
        self.ring.openat2(dir, path, resolve, token);
    }

    /// The transfer a completion's token names, now that its operation is over; `None` when
    /// it ended meanwhile (its client went away), which ends it for good.
    fn file_done(&mut self, token: u64) -> Option<FileId> {
        let token = Token::from_raw(token);
        let transfer = self.files.get_mut(token.index())?;
        if !token.names(transfer.generation) {
            return None;
        }
        transfer.busy = false;
        let id = FileId {
            index: token.index(),
            generation: transfer.generation,
        };
        if transfer.gone {
            self.end_file(id);
            return None;
        }
        Some(id)
    }

    pub(super) fn on_file_open(&mut self, token: u64, result: io::Result<OwnedFd>) {
        let Some(id) = self.file_done(token) else {
            if let Ok(fd) = result {
                self.ring.close(fd, token);
            }
            return;
        };
        let transfer = &mut self.files[id.index];
        match result {
            Ok(fd) => {
                transfer.busy = true;
                self.ring.statx(fd.as_raw_fd(), token);
                transfer.fd = Some(fd);
            }
            Err(e)
                if squall_uring::is_not_found(&e)
                    && transfer.target.directory
                    && transfer.index_next + 1 < transfer.root.index.len() =>
            {
                transfer.index_next += 1;
                self.open_next(id);
            }
            Err(e) => {
                let status = match e.raw_os_error() {
                    _ if squall_uring::is_not_found(&e) => StatusCode::NOT_FOUND,
                    Some(libc::EACCES | libc::EPERM) => StatusCode::FORBIDDEN,
                    Some(libc::EMFILE | libc::ENFILE) => StatusCode::SERVICE_UNAVAILABLE,
                    _ => StatusCode::INTERNAL_SERVER_ERROR,
                };
                if status.is_server_error() {
                    tracing::warn!(worker = self.id, "static file open: {e}");
                }
                self.fail_file(id, status, None);
            }
        }
    }

    pub(super) fn on_file_stat(&mut self, token: u64, result: io::Result<FileStat>) {
        let Some(id) = self.file_done(token) else {
            return;
        };
        let transfer = &self.files[id.index];
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
                self.fail_file(id, StatusCode::MOVED_PERMANENTLY, field);
            }
            Ok(stat) if stat.is_file() => self.respond_file(id, &stat),
            // An index that is a directory, a device, a socket: nothing to serve.
            Ok(_) => self.fail_file(id, StatusCode::NOT_FOUND, None),
            Err(e) => {
                tracing::warn!(worker = self.id, "static file statx: {e}");
                self.fail_file(id, StatusCode::INTERNAL_SERVER_ERROR, None);
            }
        }
    }

    /// Answers from the open file's metadata: 304, 412, 416, or the head of a 200 or 206
    /// whose body the reads then send.
    fn respond_file(&mut self, id: FileId, stat: &FileStat) {
        let transfer = &self.files[id.index];
        let v = Validators::of(stat);
        let extent = match static_files::precondition(&transfer.head, &v) {
            Precondition::Failed => {
                return self.fail_file(id, StatusCode::PRECONDITION_FAILED, None);
            }
            Precondition::NotModified => None,
            Precondition::Proceed => Some(static_files::extent(&transfer.head, &v, stat.size)),
        };
        let (status, first, end) = match extent {
            None => (StatusCode::NOT_MODIFIED, 0, 0),
            Some(Extent::Whole) => (StatusCode::OK, 0, stat.size),
            Some(Extent::Part(range)) => (StatusCode::PARTIAL_CONTENT, range.first, range.last + 1),
            Some(Extent::Unsatisfiable) => {
                let range = format!("bytes */{}", stat.size);
                let field = Some(("content-range", range.as_bytes()));
                return self.fail_file(id, StatusCode::RANGE_NOT_SATISFIABLE, field);
            }
        };
        let content_range = (status == StatusCode::PARTIAL_CONTENT)
            .then(|| format!("bytes {first}-{}/{}", end - 1, stat.size));
        let transfer = &mut self.files[id.index];
        let content_type = static_files::content_type(&transfer.name);
        let mut fields: Vec<(&[u8], &[u8])> = vec![
            (b"etag", v.etag.as_bytes()),
            (b"last-modified", v.last_modified.as_bytes()),
        ];
        if status != StatusCode::NOT_MODIFIED {
            fields.push((b"content-type", content_type.as_bytes()));
            fields.push((b"accept-ranges", b"bytes"));
        }
        if let Some(range) = &content_range {
            fields.push((b"content-range", range.as_bytes()));
        }
        let is_head = transfer.head.method == Method::HEAD;
        // A 304 and a HEAD carry the length a GET's 200 would have (RFC 9110 §8.6).
        let length = match status {
            StatusCode::NOT_MODIFIED => stat.size,
            _ => end - first,
        };
        let no_body = is_head || status == StatusCode::NOT_MODIFIED || end == first;
        (transfer.status, transfer.offset, transfer.end) = (status, first, end);
        if no_body {
            transfer.end = first;
        }
        let (client, framing) = (transfer.client, transfer.head.framing());
        let head = self
            .downstream()
            .file_head(client, framing, status, &fields, length, no_body);
        let Some((written, close_after)) = head else {
            return;
        };
        let transfer = &mut self.files[id.index];
        transfer.close_after = close_after;
        transfer.sent += written;
        transfer.answered = true;
        self.pump_file(id);
    }

    /// Queues the next read if the client has room for it, or ends a transfer with nothing
    /// left to send.
    fn pump_file(&mut self, id: FileId) {
        let Some(transfer) = self
            .files
            .get(id.index)
            .filter(|t| t.generation == id.generation)
        else {
            return;
        };
        if transfer.busy || transfer.gone {
            return;
        }
        let left = transfer.end - transfer.offset;
        if left == 0 {
            self.end_file(id);
            return;
        }
        let client = transfer.client;
        let room = self.client_room(client).bytes;
        let left = usize::try_from(left).unwrap_or(usize::MAX);
        let n = left.min(CHUNK_BYTES).min(room);
        if n < left.min(ROOM_MIN_BYTES) {
            // `file_drained` comes back when the client has taken some.
            return;
        }
        let transfer = &mut self.files[id.index];
        let Some(fd) = transfer.fd.as_ref() else {
            return;
        };
        transfer.busy = true;
        let token = Token::file(id.index, id.generation).raw();
        self.ring.read_at(
            fd.as_raw_fd(),
            Vec::with_capacity(n),
            transfer.offset,
            token,
        );
    }

    pub(super) fn on_file_read(&mut self, token: u64, result: io::Result<usize>, buf: Vec<u8>) {
        let Some(id) = self.file_done(token) else {
            return;
        };
        let n = match result {
            Ok(n) if n > 0 => n,
            // The file shrank under us, or the disk failed: the head promised a length, so
            // the client must see a cut response, never a short one that looks whole.
            Ok(_) | Err(_) => {
                if let Err(e) = result {
                    tracing::warn!(worker = self.id, "static file read: {e}");
                }
                self.cut_file(id);
                return;
            }
        };
        let transfer = &mut self.files[id.index];
        let n = n.min(usize::try_from(transfer.end - transfer.offset).unwrap_or(usize::MAX));
        transfer.offset += n as u64;
        transfer.sent += n;
        let last = transfer.offset == transfer.end;
        let mut data = Bytes::from(buf);
        data.truncate(n);
        let client = transfer.client;
        self.downstream().file_data(client, data, last);
        self.resume_client(client);
        self.pump_file(id);
    }

    /// The client has room again: the transfer reads on.
    pub(super) fn file_drained(&mut self, id: FileId) {
        self.pump_file(id);
    }

    /// The client (or its HTTP/2 stream) went away: the transfer ends now, or at the
    /// completion of its operation in flight.
    pub(super) fn file_gone(&mut self, id: FileId) {
        let Some(transfer) = self
            .files
            .get_mut(id.index)
            .filter(|t| t.generation == id.generation)
        else {
            return;
        };
        transfer.gone = true;
        if !transfer.busy {
            self.end_file(id);
        }
    }

    /// A transfer that cannot finish after its head left: the HTTP/1.1 connection is cut
    /// once what it has left, the HTTP/2 stream reset.
    fn cut_file(&mut self, id: FileId) {
        let client = self.files[id.index].client;
        self.downstream().file_cut(client);
        self.end_file(id);
    }

    /// Answers with a status of its own (404, 301, 412, 416...) instead of the file, then ends.
    fn fail_file(&mut self, id: FileId, status: StatusCode, field: Option<(&str, &[u8])>) {
        let transfer = &self.files[id.index];
        let (client, route) = (transfer.client, transfer.root.id);
        let head = transfer.head.clone();
        self.refuse_file(client, &head, route, status, field);
        self.end_file(id);
    }

    /// A short answer for route `route`: the vhost's error page or a text body, with `field`.
    fn refuse_file(
        &mut self,
        client: Client,
        head: &RequestHead,
        route: u32,
        status: StatusCode,
        field: Option<(&str, &[u8])>,
    ) {
        let mut down = self.downstream();
        if let Some(conn) = down.conns.get_mut(client.conn()) {
            conn.log_note.route = Some(route);
        }
        down.refuse_with(client, head, status, field);
    }

    /// Removes a transfer: its descriptor is closed through the ring, its access log line
    /// written if it answered, and its client may go on.
    fn end_file(&mut self, id: FileId) {
        let transfer = self.files.remove(id.index);
        debug_assert!(!transfer.busy, "the ring owns a busy transfer's buffers");
        if let Some(fd) = transfer.fd {
            self.ring
                .close(fd, Token::file(id.index, id.generation).raw());
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
        (self.downstream()).file_end(client, id, transfer.close_after, answered);
        self.resume_client(client);
    }

    /// Every transfer answering a client on connection `index` ends (the connection closes).
    pub(super) fn files_gone(&mut self, index: usize) {
        for id in downstream::files_of(&self.conns[index]) {
            self.file_gone(id);
        }
    }
}
