//! The engine on rustls's buffered `ServerConnection`.
//!
//! rustls keeps three buffers here: the deframer buffer that `read_tls` copies ciphertext
//! into (bounded by rustls: one record, or one handshake message of at most 64 KiB), the
//! queue of decrypted plaintext (16 KiB by default), and the queue of records to send. We
//! feed ciphertext in rustls-sized bites and, after each, process it and empty both queues
//! into the caller's buffers, so none of them holds anything between calls and the bounds
//! rustls enforces are the only ones that matter.

use std::io::{BufRead, Write};
use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use rustls::{HandshakeKind, ProtocolVersion, ServerConfig, ServerConnection};

use crate::error::{ErrorKind, TlsError};

/// How much plaintext is handed to rustls's writer at once before its records are moved to
/// `out`, so its send queue never holds more than this (plus record overhead).
const WRITE_CHUNK_BYTES: usize = 64 * 1024;

pub(crate) struct Buffered {
    conn: ServerConnection,
    peer_closed: bool,
}

impl Buffered {
    pub(crate) fn new(config: Arc<ServerConfig>) -> Buffered {
        let mut conn = ServerConnection::new(config)
            .expect("TlsStore::load made a connection from this config already");
        // The limit only bounds rustls's send queue, which `write_plain` empties after each
        // WRITE_CHUNK_BYTES; with the default 64 KiB limit a bigger write would be cut short.
        conn.set_buffer_limit(None);
        Buffered {
            conn,
            peer_closed: false,
        }
    }

    pub(crate) fn read_tls(
        &mut self,
        mut cipher: &[u8],
        plain: &mut BytesMut,
        out: &mut BytesMut,
    ) -> Result<(), TlsError> {
        while !cipher.is_empty() && !self.peer_closed {
            // Takes as much as the deframer buffer allows (at least a 4 KiB read, at most
            // up to the record or handshake size limit) and advances `cipher` past it.
            let taken = self
                .conn
                .read_tls(&mut cipher)
                .map_err(|e| TlsError::with_source(ErrorKind::BadRecord, format!("tls: {e}"), e))?;
            if taken == 0 {
                break; // close_notify was processed: the rest is ignored.
            }
            let state = self.conn.process_new_packets();
            // Whether or not processing failed, rustls may have queued records: on failure,
            // the fatal alert.
            self.drain_out(out);
            let state = state.map_err(TlsError::from_rustls)?;
            self.drain_plain(plain);
            self.peer_closed = state.peer_has_closed();
        }
        Ok(())
    }

    pub(crate) fn write_plain(&mut self, plain: &[u8], out: &mut BytesMut) -> Result<(), TlsError> {
        for chunk in plain.chunks(WRITE_CHUNK_BYTES) {
            // With no buffer limit and the handshake done, the writer takes every byte.
            self.conn.writer().write_all(chunk).map_err(|e| {
                TlsError::with_source(ErrorKind::Internal, format!("tls: encrypt: {e}"), e)
            })?;
            self.drain_out(out);
        }
        Ok(())
    }

    pub(crate) fn close(&mut self, out: &mut BytesMut) -> Result<(), TlsError> {
        self.conn.send_close_notify();
        self.drain_out(out);
        Ok(())
    }

    /// Moves all decrypted plaintext to `plain`, one rustls chunk (one record) at a time.
    fn drain_plain(&mut self, plain: &mut BytesMut) {
        let mut reader = self.conn.reader();
        // `fill_buf` says WouldBlock when empty, Ok(empty) after close_notify.
        while let Ok(chunk) = reader.fill_buf() {
            if chunk.is_empty() {
                break;
            }
            let len = chunk.len();
            plain.extend_from_slice(chunk);
            reader.consume(len);
        }
    }

    /// Moves every queued record to `out`.
    fn drain_out(&mut self, out: &mut BytesMut) {
        let mut writer = out.writer();
        while self.conn.wants_write() {
            // Writing into a `BytesMut` cannot fail; a zero-length write would mean rustls
            // had nothing after all.
            match self.conn.write_tls(&mut writer) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }

    /// Nothing we can do: rustls keeps its deframer buffer (up to a record, 18 KiB) until
    /// the next read, which shrinks it to 4 KiB first.
    pub(crate) fn shrink(&mut self) {}

    pub(crate) fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    pub(crate) fn alpn_id(&self) -> Option<&[u8]> {
        self.conn.alpn_protocol()
    }

    pub(crate) fn sni(&self) -> Option<&str> {
        self.conn.server_name()
    }

    pub(crate) fn peer_closed(&self) -> bool {
        self.peer_closed
    }

    pub(crate) fn handshake_kind(&self) -> Option<HandshakeKind> {
        self.conn.handshake_kind()
    }

    pub(crate) fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.conn.protocol_version()
    }

    pub(crate) fn check_invariants(&self) {
        assert!(
            !self.conn.wants_write(),
            "every queued record was moved to `out`"
        );
    }
}
