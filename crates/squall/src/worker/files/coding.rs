//! A transfer's content codings: its precompressed siblings, tried in turn, and the
//! compression of a file as it is read (`static_files/encoding.rs` decides which).

use std::ffi::CString;
use std::io;
use std::os::fd::AsRawFd;

use bytes::Bytes;
use http::StatusCode;
use squall_proxy::compress::{CompressError, Compressor, Stats};
use squall_uring::FileStat;

use super::{Files, Transfer};

use super::super::ids::FileId;
use crate::static_files::encoding::{self, Encoding};
use crate::worker::Io;
use crate::worker::downstream::Downstream;
use crate::worker::token::Token;

impl Files {
    /// The file is open and regular: its precompressed siblings the request accepts are
    /// tried in turn (`encoding::siblings`), else the file is answered.
    pub(super) fn try_siblings(
        &mut self,
        io: &mut Io<'_>,
        down: &mut Downstream<'_>,
        id: FileId,
        stat: FileStat,
    ) {
        let transfer = &mut self.slab[id.index];
        transfer.siblings = encoding::siblings(&transfer.root, &transfer.head);
        if transfer.siblings.is_empty() {
            return self.respond(io, down, id, &stat);
        }
        debug_assert!(transfer.original.is_none() && transfer.fd.is_some());
        transfer.original = transfer.fd.take().map(|fd| (fd, stat));
        self.next_sibling(io, down, id);
    }

    /// Opens the next sibling beneath the root, with the file's own confinement (the same
    /// directory descriptor and resolve flags); with none left, answers with the file.
    pub(super) fn next_sibling(&mut self, io: &mut Io<'_>, down: &mut Downstream<'_>, id: FileId) {
        let transfer = &mut self.slab[id.index];
        let token = Token::file(id.index, id.generation).raw();
        if let Some(fd) = transfer.fd.take() {
            io.ring.close(fd, token);
        }
        let Some(coding) = transfer.siblings.pop() else {
            transfer.sibling = None;
            let Some((fd, stat)) = transfer.original.take() else {
                debug_assert!(false, "siblings are tried with the file open");
                return self.fail(io, down, id, StatusCode::INTERNAL_SERVER_ERROR, None);
            };
            transfer.fd = Some(fd);
            return self.respond(io, down, id, &stat);
        };
        transfer.sibling = Some(coding);
        let mut name = transfer.name.clone();
        name.push(b'.');
        name.extend_from_slice(encoding::extension(coding));
        // The file's name has no NUL byte, nor has an extension.
        let path = CString::new(name).unwrap_or_default();
        transfer.busy = true;
        let (dir, resolve) = (transfer.root.dir.as_raw_fd(), transfer.root.resolve);
        io.ring.openat2(dir, path, resolve, token);
    }

    /// A sibling's metadata: a fresh regular file is answered in place of the file (whose
    /// descriptor closes); anything else is passed over for the next.
    pub(super) fn on_sibling_stat(
        &mut self,
        io: &mut Io<'_>,
        down: &mut Downstream<'_>,
        id: FileId,
        token: u64,
        result: io::Result<FileStat>,
    ) {
        let transfer = &mut self.slab[id.index];
        let file = transfer.original.as_ref().map(|(_, stat)| stat);
        match result {
            Ok(stat) if file.is_some_and(|file| encoding::fresh(&stat, file)) => {
                if let Some((fd, _)) = transfer.original.take() {
                    io.ring.close(fd, token);
                }
                self.respond(io, down, id, &stat);
            }
            _ => self.next_sibling(io, down, id),
        }
    }
}

/// How `transfer`'s answer with `status` to a file of `len` bytes and `content_type` is coded:
/// its sibling's coding, else the route's plan for the file. A compressed answer with a body
/// (`no_body` false) gets its compressor here; one that cannot be made leaves the file as it
/// is (only zstd can refuse, never for valid levels).
pub(super) fn file_encoding(
    transfer: &mut Transfer,
    status: StatusCode,
    len: u64,
    content_type: &str,
    no_body: bool,
) -> Encoding {
    if let Some(coding) = transfer.sibling {
        return Encoding::Sibling(coding);
    }
    let protocol = transfer.client.protocol(&transfer.head);
    let encoding = encoding::plan(&transfer.root, &transfer.head, protocol, content_type, len);
    debug_assert!(
        status != StatusCode::PARTIAL_CONTENT || encoding.coding().is_none(),
        "a range is of the file's own bytes"
    );
    let (Encoding::Compressed(coding), false, Some(rules)) =
        (encoding, no_body, transfer.root.compress.as_ref())
    else {
        return encoding;
    };
    match Compressor::new(coding, rules.into()) {
        Ok(compressor) => {
            transfer.compressor = Some(Box::new(compressor));
            transfer.streamed = true;
            encoding
        }
        Err(e) => {
            tracing::warn!("static file: {e}");
            Encoding::Vary
        }
    }
}

/// `data` through the transfer's compressor, if it has one; at the `last` piece the stream
/// ends, its last bytes going with the piece, and what it did comes back.
pub(super) fn encode_piece(
    transfer: &mut Transfer,
    data: Bytes,
    last: bool,
) -> Result<(Bytes, Option<Stats>), CompressError> {
    let Some(compressor) = transfer.compressor.as_mut() else {
        return Ok((data, None));
    };
    let piece = compressor.push(&data)?;
    if !last {
        return Ok((piece, None));
    }
    let Some(compressor) = transfer.compressor.take() else {
        return Ok((piece, None));
    };
    let (rest, stats) = compressor.finish()?;
    let mut out = Vec::with_capacity(piece.len() + rest.len());
    out.extend_from_slice(&piece);
    out.extend_from_slice(&rest);
    Ok((Bytes::from(out), Some(stats)))
}
