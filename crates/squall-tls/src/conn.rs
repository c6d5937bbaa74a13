//! [`TlsConn`]: one TLS server connection, sans-IO, over either rustls API.
//!
//! The rules every engine shares live here, so the two cannot drift apart: an error poisons
//! the connection (later calls return it again and append nothing), application data may be
//! written only between the end of the handshake and `close`, and `close` is idempotent.

use bytes::BytesMut;
use rustls::{HandshakeKind, ProtocolVersion};

use crate::Alpn;
use crate::buffered::Buffered;
use crate::error::{ErrorKind, TlsError};
use crate::store::Acceptor;
use crate::unbuffered::Unbuffered;

/// Which rustls API a [`TlsConn`] runs on. Both pass the same tests; the API is the same.
///
/// Measured with `cargo bench -p squall-tls --bench ab` (in memory; time inside the server's
/// calls, except handshakes, which count both sides; best of 80 interleaved batches, on this
/// shared 2-core EPYC VM; repeated runs agree within ~5%, medians tell the same story):
///
/// | operation                            | Buffered | Unbuffered |
/// |--------------------------------------|----------|------------|
/// | full TLS 1.3 handshake (both sides)  | 466 µs   | 476 µs     |
/// | resumed handshake (both sides)       | 311 µs   | 310 µs     |
/// | 40-byte request in, 13-byte response | 0.71 µs  | 0.75 µs    |
/// | one 16 KiB record out                | 5.39 µs  | 5.61 µs    |
/// | one 16 KiB record in                 | 6.42 µs  | 5.93 µs    |
///
/// A tie on handshakes and small exchanges. On input the unbuffered engine is ~8-10% faster
/// (rustls's buffered reader copies into its own buffer 4 KiB per read and retries the
/// deframer after each); on output it is ~4% slower, the cost of zeroing the space it
/// encrypts into (we `forbid(unsafe_code)`). Unbuffered is the default, as the issue prefers when
/// the numbers tie: its receive buffer is ours to bound and release ([`TlsConn::shrink`]),
/// and it is the API through which rustls plans true in-place decryption, and through
/// which the worker could later lend its receive buffer to decrypt in place.
///
/// `cargo xtask bench` agrees (the binary's `[tls] engine` picks the engine; the scenarios
/// `h2-tls-small-buffered` and `h2-tls-cache-hit-64k-buffered` run the buffered one; server
/// CPU per request, medians of 6 runs, two invocations; docs/PERFORMANCE.md):
///
/// | scenario                             | Buffered        | Unbuffered      |
/// |--------------------------------------|-----------------|-----------------|
/// | `h2-tls-small` (13 bytes)            | 1.33 / 1.57 µs  | 1.41 / 1.53 µs  |
/// | `h2-tls-cache-hit-64k` (64 KiB hits) | 58.4 / 54.9 µs  | 16.4 / 14.7 µs  |
///
/// A tie on small answers; 3.6 times the CPU, most of it the kernel's, on large ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Engine {
    /// `rustls::ServerConnection`: ciphertext is copied into rustls's own deframer buffer,
    /// plaintext out of its queue, and records to send out of its queue.
    Buffered,
    /// `rustls::unbuffered::UnbufferedServerConnection`: records are decrypted in place in
    /// our receive buffer, and written into `out` without a send queue in between. (rustls
    /// 0.23 still copies plaintext into a queue of its own on the way in, and encrypts into
    /// a temporary on the way out.)
    #[default]
    Unbuffered,
}

/// The negotiated protocol version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TlsVersion {
    /// TLS 1.2 (RFC 5246).
    Tls12,
    /// TLS 1.3 (RFC 8446).
    Tls13,
}

impl TlsVersion {
    /// `"TLSv1.2"` or `"TLSv1.3"`, as nginx's `$ssl_protocol` spells it.
    pub const fn as_str(self) -> &'static str {
        match self {
            TlsVersion::Tls12 => "TLSv1.2",
            TlsVersion::Tls13 => "TLSv1.3",
        }
    }
}

/// One TLS server connection, sans-IO: ciphertext in, plaintext out, and the reverse.
///
/// All output goes to caller-owned `BytesMut` buffers, appended, never cleared: the caller
/// decides when to send and when to reuse them.
pub struct TlsConn {
    engine: Inner,
    /// The first error; every later call returns a copy of it.
    failed: Option<TlsError>,
    /// `close` has appended our close_notify.
    close_sent: bool,
    /// Something was appended to `out` (a ServerHello at least): from then on the client
    /// may expect protected records, and only rustls can make an alert it will read.
    spoke: bool,
}

enum Inner {
    Buffered(Box<Buffered>),
    Unbuffered(Box<Unbuffered>),
}

/// Calls the same method on whichever engine is inside.
macro_rules! dispatch {
    ($self:expr, $engine:ident => $call:expr) => {
        match $self {
            Inner::Buffered($engine) => $call,
            Inner::Unbuffered($engine) => $call,
        }
    };
}

impl TlsConn {
    /// A new connection accepting a handshake, on the acceptor's [`Engine`].
    pub fn new(acceptor: &Acceptor) -> TlsConn {
        let config = acceptor.config.clone();
        let engine = match acceptor.engine {
            Engine::Buffered => Inner::Buffered(Box::new(Buffered::new(config))),
            Engine::Unbuffered => Inner::Unbuffered(Box::new(Unbuffered::new(config))),
        };
        TlsConn {
            engine,
            failed: None,
            close_sent: false,
            spoke: false,
        }
    }

    /// Consumes received ciphertext, split anywhere (one byte per call works). Appends the
    /// decrypted application data to `plain` and whatever must be sent to `out`: handshake
    /// flights, TLS 1.3 session tickets, key-update responses, alerts.
    ///
    /// After `Ok`, send `out` if it is not empty, even while [`TlsConn::is_handshaking`].
    /// On `Err` the connection is dead: the fatal alert to send, if rustls made one, is
    /// already in `out`; send it and close the socket. Later calls return the same error.
    ///
    /// Bytes after the client's close_notify are ignored (RFC 8446 §6.1).
    pub fn read_tls(
        &mut self,
        cipher: &[u8],
        plain: &mut BytesMut,
        out: &mut BytesMut,
    ) -> Result<(), TlsError> {
        if let Some(err) = &self.failed {
            return Err(err.replay());
        }
        let before = out.len();
        let result = dispatch!(&mut self.engine, e => e.read_tls(cipher, plain, out));
        if let Err(err) = &result
            && out.len() == before
            && !self.spoke
        {
            // rustls gives up without an alert on a few errors found before any message is
            // parsed (a handshake message over 64 KiB, a full deframer buffer); before our
            // first flight a plaintext alert is what the client expects, so make one.
            push_plaintext_alert(err.kind(), out);
        }
        self.spoke |= out.len() > before;
        self.remember(result)
    }

    /// Encrypts `plain` into `out` as application-data records (16 KiB of plaintext each).
    ///
    /// Only once the handshake is done (`!is_handshaking()`): before that it appends nothing
    /// and returns [`ErrorKind::HandshakeNotComplete`], without poisoning the connection, so
    /// the caller must hold its response until then. In practice that never happens: a
    /// response answers a request, and a request arrives only after the client's Finished
    /// (the worker's HTTP/2 server preface goes out once `alpn()` is known, likewise after).
    /// After [`TlsConn::close`] it returns [`ErrorKind::Closed`].
    ///
    /// To make few, full records, pass a whole response (or up to the send buffer's worth)
    /// per call rather than many small pieces: each call costs at least one record header
    /// and tag (22 to 29 bytes) and one AEAD call.
    pub fn write_plain(&mut self, plain: &[u8], out: &mut BytesMut) -> Result<(), TlsError> {
        if let Some(err) = &self.failed {
            return Err(err.replay());
        }
        if self.close_sent {
            let msg = "tls: write after close_notify was sent";
            return Err(TlsError::new(ErrorKind::Closed, msg));
        }
        if self.is_handshaking() {
            let msg = "tls: application data written before the handshake completed";
            return Err(TlsError::new(ErrorKind::HandshakeNotComplete, msg));
        }
        if plain.is_empty() {
            return Ok(());
        }
        let result = dispatch!(&mut self.engine, e => e.write_plain(plain, out));
        self.remember(result)
    }

    /// Appends a close_notify alert to `out` (RFC 8446 §6.1): the clean end of our side,
    /// which tells the client the response was not truncated. Send it, then close or
    /// half-close the socket. Appends nothing if it was already sent, if the connection
    /// failed (the fatal alert was the end), or during the handshake (there is nothing to
    /// protect from truncation: just close the socket).
    pub fn close(&mut self, out: &mut BytesMut) {
        if self.close_sent || self.failed.is_some() || self.is_handshaking() {
            return;
        }
        self.close_sent = true;
        if let Err(err) = dispatch!(&mut self.engine, e => e.close(out)) {
            self.failed = Some(err);
        }
    }

    /// Gives back memory an idle connection does not need: the receive buffer, if it is
    /// empty and grew past 4 KiB (after a large record). Call it when the connection goes
    /// idle (e.g. when arming the keep-alive timer with no input pending); not after every
    /// read, where freeing and re-allocating a record-sized buffer costs more than it saves.
    pub fn shrink(&mut self) {
        dispatch!(&mut self.engine, e => e.shrink());
    }

    /// True until the handshake completes: until then `alpn()` and `sni()` may be unknown and
    /// `write_plain` fails.
    pub fn is_handshaking(&self) -> bool {
        dispatch!(&self.engine, e => e.is_handshaking())
    }

    /// The negotiated application protocol, once the handshake is done. `None` means the
    /// client offered no ALPN (speak HTTP/1.1), or the acceptor has no ALPN list.
    pub fn alpn(&self) -> Option<Alpn> {
        let id = dispatch!(&self.engine, e => e.alpn_id())?;
        Alpn::from_id(id)
    }

    /// The server name the client asked for (lowercase), once its ClientHello is processed;
    /// `None` if it sent none.
    pub fn sni(&self) -> Option<&str> {
        dispatch!(&self.engine, e => e.sni())
    }

    /// True once the client's close_notify arrived: it will send no more data. All data sent
    /// before it has been appended to `plain` already.
    pub fn peer_closed(&self) -> bool {
        dispatch!(&self.engine, e => e.peer_closed())
    }

    /// True if the handshake resumed an earlier session (a ticket or a session id), for the
    /// resumption-rate metric.
    pub fn is_resumed(&self) -> bool {
        dispatch!(&self.engine, e => e.handshake_kind()) == Some(HandshakeKind::Resumed)
    }

    /// The negotiated protocol version, once known.
    pub fn version(&self) -> Option<TlsVersion> {
        match dispatch!(&self.engine, e => e.protocol_version())? {
            ProtocolVersion::TLSv1_3 => Some(TlsVersion::Tls13),
            ProtocolVersion::TLSv1_2 => Some(TlsVersion::Tls12),
            _ => None,
        }
    }

    /// The rustls API this connection runs on.
    pub fn engine(&self) -> Engine {
        match self.engine {
            Inner::Buffered(_) => Engine::Buffered,
            Inner::Unbuffered(_) => Engine::Unbuffered,
        }
    }

    /// Asserts the connection's internal invariants (bounded buffers, consistent flags).
    /// Tests call it after every step; it is cheap enough for `debug_assert!` use too.
    pub fn check_invariants(&self) {
        dispatch!(&self.engine, e => e.check_invariants());
        if self.close_sent {
            assert!(
                !self.is_handshaking(),
                "close_notify is only sent after the handshake"
            );
        }
    }

    fn remember(&mut self, result: Result<(), TlsError>) -> Result<(), TlsError> {
        if let Err(err) = &result {
            self.failed = Some(err.replay());
        }
        result
    }
}

/// Appends a fatal alert in a plaintext record (RFC 8446 §6, §5.1), for errors found before
/// any keys exist.
fn push_plaintext_alert(kind: ErrorKind, out: &mut BytesMut) {
    // RFC 8446 §6.2 descriptions.
    let description = match kind {
        ErrorKind::Decrypt => 20,                // bad_record_mac
        ErrorKind::HandshakeFailure => 40,       // handshake_failure
        ErrorKind::PeerMisbehaved => 10,         // unexpected_message
        ErrorKind::NoApplicationProtocol => 120, // no_application_protocol
        ErrorKind::AlertReceived => return,      // the client ended it; say nothing
        ErrorKind::BadRecord => 50,              // decode_error
        _ => 80,                                 // internal_error
    };
    // Content type alert, legacy version TLS 1.2, length 2, level fatal.
    out.extend_from_slice(&[21, 3, 3, 0, 2, 2, description]);
}

impl std::fmt::Debug for TlsConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConn")
            .field("engine", &self.engine())
            .field("handshaking", &self.is_handshaking())
            .field("sni", &self.sni())
            .field("alpn", &self.alpn())
            .field("failed", &self.failed.as_ref().map(TlsError::kind))
            .finish()
    }
}
