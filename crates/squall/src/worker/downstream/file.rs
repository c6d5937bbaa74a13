//! A static file's answer written to its client, for HTTP/1.1 and HTTP/2 alike: the head
//! (validators, type, range, with Date and each protocol's framing), the file's bytes as
//! they are read, a cut when a read fails after the head left, and the end (the slot freed,
//! the response counted and logged). `files.rs` decides what to send and reads the file; it
//! never asks which protocol its client speaks.

use std::os::fd::OwnedFd;

use squall_h1::RequestFraming;

use super::super::conn::Phase;
use super::super::ids::FileId;
use super::*;

/// What a file transfer's end logs: its request, status, bytes sent, route, and when it began.
pub(in crate::worker) struct FileAnswered<'a> {
    pub head: &'a RequestHead,
    pub status: StatusCode,
    pub sent: usize,
    pub route: u32,
    pub started: Instant,
}

impl Downstream<'_> {
    /// Writes a file's response head to `client`: Server, `fields`, Date, and the length a GET's
    /// answer has (`no_body` for HEAD, 304 and an empty range); without a `length` (a file
    /// compressed as it is sent) the body is chunked on HTTP/1.1, and HTTP/2 DATA frames end
    /// it. Returns the bytes queued and whether an HTTP/1.1 connection closes after the
    /// response; `None` when the client is gone.
    #[allow(clippy::too_many_arguments)]
    pub fn file_head(
        &mut self,
        client: Client,
        framing: RequestFraming,
        status: StatusCode,
        fields: &[(&[u8], &[u8])],
        length: Option<u64>,
        no_body: bool,
    ) -> Option<(usize, bool)> {
        let (date, draining) = (self.date, self.draining);
        let conn = self.conns.get_mut(client.conn())?;
        match client {
            Client::H1(_) => {
                let mut raw = BytesMut::with_capacity(256);
                put_line(&mut raw, b"server", b"squall");
                for (name, value) in fields {
                    put_line(&mut raw, name, value);
                }
                let response = squall_h1::ResponseHead {
                    status,
                    headers: &HeaderMap::new(),
                    raw_headers: &raw,
                    body_len: length,
                };
                let mut framing = framing;
                framing.keep_alive &= !draining;
                let before = conn.out.len();
                squall_h1::encode_response_head(&response, framing, date, &mut conn.out);
                conn.alt_svc_h1(before);
                Some((conn.out.len() - before, !framing.keep_alive))
            }
            Client::H2(..) | Client::H3(..) => {
                let (mut mux, stream) = (Mux::of(conn)?, client.stream()?);
                let mut length = length.map(squall_proxy::digits::itoa_buf);
                let length = length
                    .as_mut()
                    .map(|l| (&b"content-length"[..], l.as_bytes()));
                let fields = [(&b"server"[..], &b"squall"[..])]
                    .into_iter()
                    .chain(fields.iter().copied())
                    .chain([(&b"date"[..], date)])
                    .chain(length);
                let sent = mux.send_headers(stream, status.as_u16(), fields, no_body);
                Some((sent.unwrap_or(0), false))
            }
        }
    }

    /// Queues a piece of the file's body; `last` ends an HTTP/2 stream, and the chunked body
    /// of a `streamed` answer (one whose head gave no length) on HTTP/1.1.
    pub fn file_data(&mut self, client: Client, data: Bytes, last: bool, streamed: bool) {
        let Some(conn) = self.conns.get_mut(client.conn()) else {
            return;
        };
        match client {
            Client::H1(_) if streamed => {
                squall_h1::encode_chunk(&data, &mut conn.out);
                if last {
                    squall_h1::encode_last_chunk(None, &mut conn.out);
                }
            }
            Client::H1(_) => {
                let copy = conn.tls.is_some();
                conn.chain.push(&mut conn.out, data, copy);
            }
            Client::H2(..) | Client::H3(..) => {
                if let (Some(mut mux), Some(stream)) = (Mux::of(conn), client.stream()) {
                    let _ = mux.send_data(stream, data, last);
                }
            }
        }
    }

    /// A duplicate of `client`'s socket for a static file's splice, nonblocking: only for a
    /// cleartext HTTP/1.x connection.
    pub fn splice_socket(&mut self, client: Client) -> Option<OwnedFd> {
        let conn = self.conns.get_mut(client.conn())?;
        if !matches!(client, Client::H1(_)) || conn.tls.is_some() || conn.phase != Phase::Open {
            return None;
        }
        let fd = conn.socket.fd()?;
        if !conn.nonblocking {
            squall_uring::set_nonblocking(fd).ok()?;
            conn.nonblocking = true;
        }
        fd.try_clone().ok()
    }

    /// Lends `client`'s socket to a splice once everything queued for it has left; false
    /// while something is unsent or in flight. Nothing else is sent until the transfer ends
    /// (`file_end`).
    pub fn lend_socket(&mut self, client: Client) -> bool {
        let Some(conn) = self.conns.get_mut(client.conn()) else {
            return false;
        };
        if conn.unsent_bytes() > 0 || conn.socket.sending() || conn.phase != Phase::Open {
            return false;
        }
        conn.lent = true;
        true
    }

    /// A response whose head left cannot be finished: the HTTP/1.1 connection is cut once
    /// what it has left, the HTTP/2 stream reset, so the client never takes it for whole.
    pub fn file_cut(&mut self, client: Client) {
        let Some(conn) = self.conns.get_mut(client.conn()) else {
            return;
        };
        match client {
            Client::H1(_) => {
                conn.close_after = true;
                conn.cut = true;
            }
            Client::H2(..) | Client::H3(..) => {
                if let (Some(mut mux), Some(stream)) = (Mux::of(conn), client.stream()) {
                    mux.cut(stream);
                }
            }
        }
    }

    /// Transfer `id` no longer answers `client`: its slot is freed, an HTTP/1.1 connection
    /// closes after it if the head said so (`close_after`), and a response that was answered
    /// is counted and logged.
    pub fn file_end(
        &mut self,
        client: Client,
        id: FileId,
        close_after: bool,
        answered: Option<FileAnswered<'_>>,
    ) {
        let Some(conn) = self.conns.get_mut(client.conn()) else {
            return;
        };
        debug_assert!(super::files_of(conn).contains(&id));
        set_file(conn, client, None);
        conn.lent = false;
        if let Client::H1(_) = client {
            conn.close_after |= close_after;
        }
        let Some(answered) = answered else {
            return;
        };
        if client.stream().is_some() {
            // Streams interleave: the connection's request clock is this stream's.
            conn.request_started = answered.started;
        }
        conn.log_note.route = Some(answered.route);
        let (head, status, sent) = (answered.head, answered.status, answered.sent);
        self.log_answer(client.conn(), Some(head), status, sent);
    }
}
