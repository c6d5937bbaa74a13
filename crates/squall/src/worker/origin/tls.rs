//! TLS on origin connections (`tls = true` upstreams): the handshake after the connect, the
//! decryption of what arrives and the accounting of what is sent.
//!
//! The handshake sits between the TCP connect and the "connected" its exchange (or probe)
//! hears: until then the connection is `Handshaking`, its exchange still in its connect phase,
//! so `connect_timeout` bounds connect and handshake together, and a failed handshake is a
//! failed connect (retried or failed over as one, then 502). A certificate that does not verify
//! is counted per upstream and logged at warn with rustls's reason, at most once a minute per
//! upstream (every failure is logged at debug).
//!
//! Plaintext from the exchange is encrypted into the connection's `out` at once, so bytes
//! leave in the order they were written, handshake flights included; the exchange hears how
//! much of its plaintext left when the ciphertext buffer carrying it has left whole. Received
//! ciphertext is decrypted straight out of the ring's buffer, which goes back to the ring
//! before the plaintext is handed on: one receive buffer at a time, as for cleartext origins
//! (rustls keeps at most one partial record besides). The origin's close_notify is its end of
//! stream; a TCP FIN without one is taken as the end too, as nginx does (a response whose
//! length is known is checked by the decoder anyway).

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use squall_tls::{TlsClientConn, TlsError};
use squall_upstream::UpstreamErrorClass;
use squall_uring::RecvBuf;
use tracing::{debug, warn};

use super::{News, OriginState, OriginTarget, Origins};
use crate::origin_tls::TlsCounters;
use crate::worker::Io;

pub use crate::origin_tls::HandshakeFailure;

/// How often a failed handshake is logged at warn, per upstream.
const FAILURE_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// An origin connection's TLS state.
pub struct OriginTls {
    conn: TlsClientConn,
    counters: Arc<TlsCounters>,
    /// The name verified, for log lines.
    name: String,
    /// Plaintext encrypted into `out` and not yet handed to a send.
    unsent_plain: usize,
    /// Plaintext in the send in flight.
    in_flight_plain: usize,
}

impl OriginTls {
    /// A new TLS client connection when `target`'s upstream is a TLS one, its ClientHello
    /// appended to `out`.
    pub fn open(io: &Io<'_>, target: &OriginTarget, out: &mut BytesMut) -> Option<Box<OriginTls>> {
        let tls = io.runtime.upstreams.get(target.upstream)?.tls.as_ref()?;
        let name = (tls.name(target.server.index()))
            .unwrap_or_else(|| squall_tls::ServerName::IpAddress(target.address.ip().into()));
        let shown = name.to_str().into_owned();
        Some(Box::new(OriginTls {
            conn: tls.connector.connect(name, out),
            counters: tls.counters.clone(),
            name: shown,
            unsent_plain: 0,
            in_flight_plain: 0,
        }))
    }

    /// Encrypts what the exchange (or a probe) writes into `out`.
    pub fn encrypt(&mut self, plain: &[u8], out: &mut BytesMut) -> Result<(), TlsError> {
        self.conn.write_plain(plain, out)?;
        self.unsent_plain += plain.len();
        Ok(())
    }

    /// Before Squall closes a connection that is still sound: a TLS `close_notify`, so that
    /// the origin can tell our close from a truncation (RFC 8446 §6.1). Best effort: one
    /// non-blocking send of the alert, skipped while a send is in flight (it would go out of
    /// order) and ignored if the socket's buffer is full or the peer is gone.
    pub fn close_notify(&mut self, socket: &super::Socket) {
        if socket.sending() {
            return;
        }
        let Some(fd) = socket.fd() else {
            return;
        };
        let mut alert = BytesMut::new();
        self.conn.close(&mut alert);
        if !alert.is_empty() {
            let flags = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
            let _ = socket2::SockRef::from(fd).send_with_flags(&alert, flags);
        }
    }

    /// The origin chose HTTP/2 with ALPN.
    pub fn chose_h2(&self) -> bool {
        self.conn.alpn() == Some(squall_tls::Alpn::H2)
    }

    /// Everything in `out` goes into a send now.
    pub fn sending(&mut self) {
        self.in_flight_plain += std::mem::take(&mut self.unsent_plain);
    }

    /// The send completed, `whole` when its buffer left entirely: the plaintext it carried.
    pub fn sent(&mut self, whole: bool) -> usize {
        if whole {
            std::mem::take(&mut self.in_flight_plain)
        } else {
            0
        }
    }
}

/// Shuts both directions of a connection whose TLS state failed, from inside an action (no
/// session may be called back from there): its armed receive ends with EOF, which reports the
/// failure to whoever holds the connection through the ordinary path.
pub fn cut(origin: &mut super::Origin) {
    if let Some(fd) = origin.socket.fd() {
        let _ = socket2::SockRef::from(fd).shutdown(std::net::Shutdown::Both);
    }
}

impl Origins {
    /// Ciphertext arrived on a TLS origin connection: decrypt it and hand on what it holds.
    pub(super) fn on_origin_cipher(&mut self, io: &mut Io<'_>, index: usize, buf: RecvBuf) {
        let origin = &mut self.conns[index];
        let Some(tls) = origin.tls.as_mut() else {
            io.ring.recycle(buf);
            return;
        };
        let handshaking = tls.conn.is_handshaking();
        let mut plain = BytesMut::new();
        let cipher = io.ring.recv_bytes(&buf);
        let result = tls.conn.read_tls(cipher, &mut plain, &mut origin.out);
        let (done, resumed, closed) = (
            !tls.conn.is_handshaking(),
            tls.conn.is_resumed(),
            tls.conn.peer_closed(),
        );
        io.ring.recycle(buf);
        // The second flight, or the alert that ends the connection.
        self.conns.flush(io, index);
        if let Err(e) = result {
            return self.origin_tls_failed(io, index, handshaking, &e);
        }
        if handshaking && done {
            self.handshake_done(io, index, resumed);
        }
        if !plain.is_empty() {
            self.origin_plain(io, index, plain);
        }
        if closed && self.conns.contains(index) {
            self.origin_eof(io, index);
        }
    }

    /// The handshake is done: the exchange (or probe) hears "connected" now.
    fn handshake_done(&mut self, io: &mut Io<'_>, index: usize, resumed: bool) {
        let origin = &mut self.conns[index];
        if origin.state != OriginState::Handshaking {
            return;
        }
        origin.state = OriginState::Busy;
        let alpn_h2 = origin.tls.as_ref().is_some_and(|t| t.chose_h2());
        if let Some(tls) = &origin.tls {
            tls.counters.handshake_done(resumed);
        }
        // An `auto` upstream's origin chose HTTP/2: the connection becomes a shared one.
        if origin.mux.is_none() && origin.session.is_some() && alpn_h2 {
            self.become_h2(io, index);
        }
        if self.conns[index].mux.is_some() {
            return self.h2_connected(io, index);
        }
        let origin = &mut self.conns[index];
        match origin.session {
            Some(id) => (self.news).tell(id, index, News::Connected { reused: false }),
            None => self.write_probe(io, index),
        }
    }

    /// Decrypted bytes, as a cleartext origin's are taken in `on_origin_recv`.
    fn origin_plain(&mut self, io: &mut Io<'_>, index: usize, plain: BytesMut) {
        let origin = &mut self.conns[index];
        if let Some(h2) = origin.mux.as_deref_mut() {
            h2.take_input(&plain);
            return self.h2_input(io, index);
        }
        match (origin.state, origin.session, origin.probe.as_mut()) {
            (OriginState::Busy, Some(id), _) => {
                (self.news).tell(id, index, News::Plain(plain.freeze()));
            }
            (OriginState::Busy, None, Some(probe)) => {
                probe.rbuf.extend_from_slice(&plain);
                self.read_probe(io, index, false);
            }
            // An idle origin has nothing to say (a session ticket is no plaintext).
            _ => self.close_origin(io, index),
        }
    }

    /// A TLS error: during the handshake a failed connect, later a failed exchange.
    fn origin_tls_failed(
        &mut self,
        io: &mut Io<'_>,
        index: usize,
        handshaking: bool,
        error: &TlsError,
    ) {
        if handshaking {
            let why = HandshakeFailure::of(error);
            return self.handshake_failed(io, index, why, &error.to_string());
        }
        let origin = &self.conns[index];
        debug!(worker = io.worker, address = %origin.address, "origin tls: {error}");
        match origin.state {
            OriginState::Busy => self.origin_failed(io, index, News::Failed),
            _ => self.close_origin(io, index),
        }
    }

    /// The handshake failed: counted, logged, and a failed connect for the exchange.
    pub(super) fn handshake_failed(
        &mut self,
        io: &mut Io<'_>,
        index: usize,
        why: HandshakeFailure,
        detail: &str,
    ) {
        let now = io.now;
        let origin = &self.conns[index];
        let Some(tls) = &origin.tls else {
            return;
        };
        tls.counters.handshake_failed(why);
        let upstream = self.upstreams.group_name(origin.upstream);
        if tls.counters.should_log(now, FAILURE_LOG_INTERVAL) {
            warn!(
                worker = io.worker,
                upstream,
                server = %origin.address,
                name = %tls.name,
                reason = why.as_str(),
                "TLS handshake with origin {} ({}) failed: {detail}",
                origin.address,
                tls.name
            );
        } else {
            debug!(worker = io.worker, upstream, server = %origin.address, "origin handshake: {detail}");
        }
        self.origin_failed(
            io,
            index,
            News::ConnectFailed(UpstreamErrorClass::ConnectFailed),
        );
    }

    /// The connect timeout passed during the handshake: counted (the exchange's timer or the
    /// probe's does the rest).
    pub(super) fn handshake_timed_out(&mut self, io: &mut Io<'_>, index: usize) {
        if let Some(tls) = &self.conns[index].tls {
            tls.counters.handshake_failed(HandshakeFailure::Timeout);
            debug!(worker = io.worker, name = %tls.name, "origin handshake timed out");
        }
    }
}
