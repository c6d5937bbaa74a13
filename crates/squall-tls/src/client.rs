//! The client side, for connections to origin servers: a [`Connector`] per `[[upstream]]` (its
//! trust anchors, client certificate, ALPN list and session cache, shared by every worker) and
//! a [`TlsClientConn`] per origin connection, sans-IO like [`crate::TlsConn`]: ciphertext in,
//! plaintext out, and the reverse.
//!
//! It runs on rustls's buffered `ClientConnection`, as the server's [`crate::Engine::Buffered`]
//! does: origin connections are few and long-lived next to client ones, and the two engines
//! measured a tie on handshakes and small exchanges, so the simpler API is the one to keep.
//!
//! Trust: the `ca` bundle when one is given, else the operating system's store, read with
//! `rustls-native-certs` (on Linux `/etc/ssl/certs` or `SSL_CERT_FILE`/`SSL_CERT_DIR`) at each
//! load, so a reload picks up a changed store. `verify = false` accepts any certificate for
//! any name (the handshake's signatures are still checked, so the peer holds the key of the
//! certificate it sent): an explicit opt-out for test origins.
//!
//! Resumption: rustls's in-memory client session store ([`CLIENT_SESSIONS_MAX`] servers), in
//! the connector's config, so every worker's connections to an upstream share it and a new
//! connection resumes the session an earlier one got (a TLS 1.3 ticket, or a TLS 1.2 session
//! id or ticket). A reload that leaves the upstream's TLS settings and files as they were
//! keeps the connector, and so its sessions ([`Connector::load`]).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, Resumption};
use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore};
use rustls::{HandshakeKind, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use crate::Alpn;
use crate::error::{CertField, ErrorKind, TlsError};
use crate::load::{bad_pem, load_pem, read_file};
use crate::store::{CertSpec, KeySource};

/// Servers whose sessions one connector remembers (rustls keeps a few tickets each).
pub const CLIENT_SESSIONS_MAX: usize = 256;

/// How many bytes of plaintext rustls's writer takes before its records are moved out, so its
/// send queue stays small (as on the server side).
const WRITE_CHUNK_BYTES: usize = 64 * 1024;

/// One upstream's TLS settings, as the binary hands them over.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClientSpec {
    /// How errors name the upstream, e.g. `upstream "api"`.
    pub name: String,
    /// A PEM bundle of CA certificates to trust instead of the operating system's store.
    pub ca: Option<PathBuf>,
    /// False: accept any certificate (see the module docs).
    pub verify: bool,
    /// A client certificate chain and its key (PEM), for origins that ask for one (mTLS).
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// The protocols offered with ALPN, in order of preference; empty offers none.
    pub alpn: Vec<Alpn>,
}

/// A client config for one upstream. Cheap to clone; `Send + Sync`.
#[derive(Clone, Debug)]
pub struct Connector {
    config: Arc<ClientConfig>,
    /// A hash of the spec and of every byte loaded for it (see [`Connector::load`]).
    material: u64,
}

impl Connector {
    /// Loads the trust anchors and the client certificate. Errors name the upstream and the
    /// file, with [`TlsError::entry`]'s field saying which (`Ca`, `Cert` or `Key`).
    ///
    /// With `previous` (a reload), when the spec and every byte loaded (the CA bundle or the
    /// system store, the client certificate and key) are what `previous` was made from,
    /// `previous` itself is returned, sessions and all: rustls resumes a session only with
    /// the verifier and client certificate that made it, so a new config, however equal,
    /// would start every origin connection over with a full handshake.
    pub fn load(spec: &ClientSpec, previous: Option<&Connector>) -> Result<Connector, TlsError> {
        let mut material = DefaultHasher::new();
        spec.hash(&mut material);
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let internal = |e| TlsError::with_source(ErrorKind::Internal, "tls: client config", e);
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(internal)?;
        let builder = if spec.verify {
            builder.with_root_certificates(roots(spec, &mut material)?)
        } else {
            let verifier = Arc::new(AnyCertificate(provider.clone()));
            builder
                .dangerous()
                .with_custom_certificate_verifier(verifier)
        };
        let mut config = match &spec.client_cert {
            Some((cert_path, key_path)) => {
                let cert = CertSpec {
                    name: spec.name.clone(),
                    hosts: Vec::new(),
                    source: KeySource::Pem {
                        cert_path: cert_path.clone(),
                        key_path: key_path.clone(),
                    },
                };
                let key = load_pem(&cert, cert_path, key_path, &provider)?;
                for path in [cert_path, key_path] {
                    std::fs::read(path).unwrap_or_default().hash(&mut material);
                }
                builder.with_client_cert_resolver(Arc::new(ClientCert(Arc::new(key))))
            }
            None => builder.with_no_client_auth(),
        };
        let material = material.finish();
        if let Some(previous) = previous.filter(|p| p.material == material) {
            return Ok(previous.clone());
        }
        config.alpn_protocols = spec.alpn.iter().map(|a| a.id().to_vec()).collect();
        config.resumption = Resumption::in_memory_sessions(CLIENT_SESSIONS_MAX);
        // 0-RTT off: a proxy cannot know which requests are safe to replay.
        config.enable_early_data = false;
        Ok(Connector {
            config: Arc::new(config),
            material,
        })
    }

    /// A new connection to the server called `name` (sent as SNI when it is a DNS name, and
    /// the name the certificate must be valid for). Its ClientHello is appended to `out`.
    pub fn connect(&self, name: ServerName<'static>, out: &mut BytesMut) -> TlsClientConn {
        let mut conn = match ClientConnection::new(self.config.clone(), name) {
            Ok(conn) => conn,
            Err(e) => return TlsClientConn::failed(TlsError::from_rustls(e)),
        };
        // The limit only bounds the send queue, which every call empties.
        conn.set_buffer_limit(None);
        let mut tls = TlsClientConn {
            conn: Some(conn),
            failed: None,
            peer_closed: false,
            close_sent: false,
        };
        tls.drain_out(out);
        tls
    }

    /// The protocols offered with ALPN.
    pub fn alpn(&self) -> Vec<Alpn> {
        let ids = self.config.alpn_protocols.iter();
        ids.filter_map(|id| Alpn::from_id(id)).collect()
    }
}

/// The server name for an origin: a DNS name, or an IP literal (then no SNI is sent and the
/// certificate must carry the address as an IP subjectAltName, RFC 6066 §3).
pub fn server_name(name: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(name.to_owned()).map_err(|e| format!("bad server name {name:?}: {e}"))
}

/// The trust anchors: the `ca` bundle, or the operating system's store.
fn roots(spec: &ClientSpec, material: &mut DefaultHasher) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    let ca_err = |e: TlsError| e.at_field(CertField::Ca);
    match &spec.ca {
        Some(path) => {
            let pem = read_file(&spec.name, "ca", path).map_err(ca_err)?;
            pem.hash(material);
            let certs = CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| ca_err(bad_pem(&spec.name, "CA certificate", path, e)))?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                let why = "no CERTIFICATE block that parses";
                return Err(ca_err(bad_pem(&spec.name, "CA certificate", path, why)));
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in &found.certs {
                cert.as_ref().hash(material);
            }
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                let msg = format!(
                    "{}: no CA certificates in the system store ({} errors reading it); \
                     give a ca file",
                    spec.name,
                    found.errors.len()
                );
                return Err(TlsError::new(ErrorKind::Io, msg).at_field(CertField::Ca));
            }
        }
    }
    Ok(roots)
}

/// One TLS client connection, sans-IO. All output goes to caller-owned buffers, appended.
pub struct TlsClientConn {
    /// `None` only when the connection could not even be made (see [`Connector::connect`]).
    conn: Option<ClientConnection>,
    failed: Option<TlsError>,
    peer_closed: bool,
    close_sent: bool,
}

impl TlsClientConn {
    fn failed(err: TlsError) -> TlsClientConn {
        TlsClientConn {
            conn: None,
            failed: Some(err),
            peer_closed: false,
            close_sent: false,
        }
    }

    /// Consumes ciphertext from the server, split anywhere. Appends decrypted data to `plain`
    /// and what must be sent to `out` (the second handshake flight, alerts). On `Err` the
    /// connection is dead: send `out` (the alert) and close; later calls return the error
    /// again. A certificate that fails verification is [`ErrorKind::InvalidCertificate`],
    /// and the message carries rustls's reason (unknown issuer, not valid for the name,
    /// expired, ...).
    pub fn read_tls(
        &mut self,
        mut cipher: &[u8],
        plain: &mut BytesMut,
        out: &mut BytesMut,
    ) -> Result<(), TlsError> {
        if let Some(err) = &self.failed {
            return Err(err.replay());
        }
        let Some(conn) = self.conn.as_mut() else {
            return Err(TlsError::new(ErrorKind::Internal, "tls: no connection"));
        };
        while !cipher.is_empty() && !self.peer_closed {
            let taken = match conn.read_tls(&mut cipher) {
                Ok(taken) => taken,
                Err(e) => {
                    let err = TlsError::with_source(ErrorKind::BadRecord, format!("tls: {e}"), e);
                    return self.fail(err);
                }
            };
            if taken == 0 {
                break; // close_notify was processed: the rest is ignored.
            }
            let state = conn.process_new_packets();
            drain(conn, out);
            match state {
                Ok(state) => {
                    drain_plain(conn, plain);
                    self.peer_closed = state.peer_has_closed();
                }
                Err(e) => return self.fail(TlsError::from_rustls(e)),
            }
        }
        Ok(())
    }

    /// Encrypts `plain` into `out`. Only once the handshake is done; before, it returns
    /// [`ErrorKind::HandshakeNotComplete`] without poisoning the connection.
    pub fn write_plain(&mut self, plain: &[u8], out: &mut BytesMut) -> Result<(), TlsError> {
        if let Some(err) = &self.failed {
            return Err(err.replay());
        }
        if self.close_sent {
            return Err(TlsError::new(ErrorKind::Closed, "tls: write after close"));
        }
        if self.is_handshaking() {
            let msg = "tls: application data written before the handshake completed";
            return Err(TlsError::new(ErrorKind::HandshakeNotComplete, msg));
        }
        let Some(conn) = self.conn.as_mut() else {
            return Err(TlsError::new(ErrorKind::Internal, "tls: no connection"));
        };
        for chunk in plain.chunks(WRITE_CHUNK_BYTES) {
            if let Err(e) = conn.writer().write_all(chunk) {
                let err =
                    TlsError::with_source(ErrorKind::Internal, format!("tls: encrypt: {e}"), e);
                return self.fail(err);
            }
            drain(conn, out);
        }
        Ok(())
    }

    /// Appends a close_notify (once, after the handshake, unless the connection failed).
    pub fn close(&mut self, out: &mut BytesMut) {
        if self.close_sent || self.failed.is_some() || self.is_handshaking() {
            return;
        }
        if let Some(conn) = self.conn.as_mut() {
            self.close_sent = true;
            conn.send_close_notify();
            drain(conn, out);
        }
    }

    /// True until the handshake is done (and for a connection that failed during it).
    pub fn is_handshaking(&self) -> bool {
        self.conn.as_ref().is_none_or(|c| c.is_handshaking())
    }

    /// True once the server's close_notify arrived: everything before it is in `plain`.
    pub fn peer_closed(&self) -> bool {
        self.peer_closed
    }

    /// The protocol the server chose with ALPN, once the handshake is done.
    pub fn alpn(&self) -> Option<Alpn> {
        Alpn::from_id(self.conn.as_ref()?.alpn_protocol()?)
    }

    /// True when the handshake resumed an earlier session.
    pub fn is_resumed(&self) -> bool {
        let kind = self.conn.as_ref().and_then(|c| c.handshake_kind());
        kind == Some(HandshakeKind::Resumed)
    }

    /// Asserts that every queued record was moved out (tests call it after each step).
    pub fn check_invariants(&self) {
        if let Some(conn) = &self.conn {
            assert!(
                !conn.wants_write(),
                "every queued record was moved to `out`"
            );
        }
    }

    fn fail(&mut self, err: TlsError) -> Result<(), TlsError> {
        self.failed = Some(err.replay());
        Err(err)
    }

    fn drain_out(&mut self, out: &mut BytesMut) {
        if let Some(conn) = self.conn.as_mut() {
            drain(conn, out);
        }
    }
}

impl std::fmt::Debug for TlsClientConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClientConn")
            .field("handshaking", &self.is_handshaking())
            .field("alpn", &self.alpn())
            .field("failed", &self.failed.as_ref().map(TlsError::kind))
            .finish()
    }
}

/// Moves every queued record to `out` (writing into a `BytesMut` cannot fail).
fn drain(conn: &mut ClientConnection, out: &mut BytesMut) {
    let mut writer = out.writer();
    while conn.wants_write() {
        match conn.write_tls(&mut writer) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
}

/// Moves all decrypted plaintext to `plain`.
fn drain_plain(conn: &mut ClientConnection, plain: &mut BytesMut) {
    let mut reader = conn.reader();
    while let Ok(chunk) = reader.fill_buf() {
        if chunk.is_empty() {
            break;
        }
        let len = chunk.len();
        plain.extend_from_slice(chunk);
        reader.consume(len);
    }
}

/// The client certificate, offered whenever a server asks.
#[derive(Debug)]
struct ClientCert(Arc<CertifiedKey>);

impl ResolvesClientCert for ClientCert {
    fn resolve(&self, _: &[&[u8]], _: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// `tls_verify = false`: any certificate, for any name, at any time; the handshake's
/// signature must still be made by the certificate's key.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests;
