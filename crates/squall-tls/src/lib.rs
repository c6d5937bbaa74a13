//! squall-tls: TLS for Squall, over rustls, without I/O: termination for the client listeners,
//! and the client side for origins (`tls = true` upstreams).
//!
//! The worker owns the sockets; this crate only turns bytes into bytes. Three layers on the
//! server side:
//!
//! - [`TlsStore`]: everything loaded once per config (and per reload): the certificates of the
//!   `[[certificate]]` entries ([`CertSpec`]), the SNI resolver that picks one of them per
//!   handshake, and the resumption state shared by every worker (the TLS 1.3 ticket key,
//!   rotated every 6 h, or the keys of a ticket key file shared by a fleet ([`TicketKeys`]),
//!   and the TLS 1.2 session-id cache). `Send + Sync`: build it once, share
//!   it in the config `Arc`.
//! - [`Acceptor`]: a rustls `ServerConfig` for one listener (its ALPN list in order of
//!   preference). Cheap to clone; each worker keeps one per TLS listener.
//! - [`TlsConn`]: one server connection, sans-IO. [`TlsConn::read_tls`] takes received
//!   ciphertext (any split, one byte at a time works) and appends plaintext for the HTTP codec
//!   and bytes to send (handshake flights, tickets, alerts); [`TlsConn::write_plain`] encrypts a
//!   response into the send buffer.
//!
//! The client side (`client.rs`) has two: a [`Connector`] per upstream (trust anchors, client
//! certificate, ALPN, the session cache that lets reconnects resume) and a [`TlsClientConn`]
//! per origin connection, driven as below but started by [`Connector::connect`], which
//! appends the ClientHello to send.
//!
//! # Driving a connection (what the worker does)
//!
//! ```text
//! recv completion -> conn.read_tls(bytes, &mut plain, &mut out)
//!     Ok  -> if !out.is_empty(): send(out)        (handshake flight, tickets, key update)
//!            if !conn.is_handshaking(): pick codec from conn.alpn(), feed it `plain`
//!            if conn.peer_closed(): the client will send nothing more (half-close)
//!     Err -> send(out) (the alert, if any), then close; count err.kind().as_str()
//! response  -> conn.write_plain(bytes, &mut out); send(out)
//! shutdown  -> conn.close(&mut out); send(out); close
//! ```
//!
//! # Limits
//!
//! Nothing grows without bound before (or after) the handshake: rustls rejects a handshake
//! message over 64 KiB and a record over 16 KiB + 2 KiB, and this crate never keeps more than
//! one partial record (or one partial handshake message) of ciphertext between calls, checked
//! by [`TlsConn::check_invariants`]. Plaintext is handed out as soon as it is decrypted; the
//! caller bounds `plain` by how much it reads before parsing. A handshake that takes too long
//! is the worker's timer's business (`limits.header_timeout`): this crate has no clock.
//!
//! # Engines
//!
//! [`TlsConn`] runs on one of two rustls APIs, chosen by [`Engine`]: the buffered
//! `ServerConnection` or `rustls::unbuffered` (the binary's `[tls] engine`). Both pass the
//! same tests; the default, unbuffered, is the one measured faster here (see [`Engine`] for
//! the numbers).
//!
//! # Example
//!
//! ```
//! use bytes::BytesMut;
//! use squall_tls::{Alpn, CertSpec, KeySource, TlsConn, TlsStore};
//!
//! let certs = [CertSpec {
//!     name: "certificate #1 (localhost)".into(),
//!     hosts: vec!["localhost".into()],
//!     source: KeySource::SelfSigned,
//! }];
//! let (store, warnings) = TlsStore::load(&certs)?; // once per (re)load
//! assert!(warnings.is_empty());
//! let acceptor = store.acceptor(&[Alpn::H2, Alpn::Http1]); // per listener, per worker
//!
//! let mut conn = TlsConn::new(&acceptor); // per accepted socket
//! let (mut plain, mut out) = (BytesMut::new(), BytesMut::new());
//! // A client that speaks plain HTTP to the TLS port gets a `decode_error` alert.
//! let err = conn.read_tls(b"GET / HTTP/1.1\r\n", &mut plain, &mut out).unwrap_err();
//! assert_eq!(err.kind().as_str(), "bad_record");
//! assert_eq!(out[0], 21); // an alert record, to send before closing
//! # Ok::<(), squall_tls::TlsError>(())
//! ```

#![forbid(unsafe_code)]

mod buffered;
mod client;
mod conn;
mod error;
mod load;
mod resolver;
mod store;
mod ticket;
mod unbuffered;

pub use client::{CLIENT_SESSIONS_MAX, ClientSpec, Connector, TlsClientConn, server_name};
pub use conn::{Engine, TlsConn, TlsVersion};
pub use error::{CertField, ErrorKind, Fault, TlsError, Warning, WarningKind};
/// The rustls this crate builds on, for the QUIC transport that takes its server config.
pub use rustls;
pub use rustls_pki_types::ServerName;
pub use store::{Acceptor, CertSpec, H3_ALPN, KeySource, SESSION_CACHE_ENTRIES_MAX, TlsStore};
pub use ticket::{
    TICKET_KEY_BYTES, TICKET_KEYS_MAX, TICKET_LIFETIME_SECS, TicketKeyError, TicketKeys,
};

/// An application protocol negotiated with ALPN (RFC 7301).
///
/// The order of a listener's list is the server's preference: the first of ours that the
/// client also offers wins, whatever the client's order (as nginx does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Alpn {
    /// HTTP/2 over TLS, ALPN id `h2` (RFC 9113 §3.2).
    H2,
    /// HTTP/1.1, ALPN id `http/1.1`.
    Http1,
}

impl Alpn {
    /// The protocol id sent on the wire.
    pub const fn id(self) -> &'static [u8] {
        match self {
            Alpn::H2 => b"h2",
            Alpn::Http1 => b"http/1.1",
        }
    }

    /// The protocol for a wire id, if it is one of ours.
    pub fn from_id(id: &[u8]) -> Option<Alpn> {
        match id {
            b"h2" => Some(Alpn::H2),
            b"http/1.1" => Some(Alpn::Http1),
            _ => None,
        }
    }
}
