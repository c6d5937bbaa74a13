//! Test helpers: certificates made with rcgen, a temp dir, an in-memory rustls client, and a
//! [`Pair`] that moves bytes between that client and a `TlsConn` at a chosen chunk size.
//!
//! The client is rustls's buffered `ClientConnection`, an independent implementation of the
//! other end; its certificate verifier accepts any chain (these certificates are
//! self-signed) but still checks the handshake signatures against the presented
//! certificate, so a server signing with the wrong key fails here.

#![allow(dead_code)] // each test binary uses part of this module

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::BytesMut;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{Resumption, Tls12Resumption};
use rustls::crypto::{CryptoProvider, aws_lc_rs};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme};
use squall_tls::{Acceptor, CertSpec, Engine, KeySource, TlsConn, TlsError};

/// The chunk sizes every sans-IO test runs at; `usize::MAX` means "whole".
pub const CHUNKS: &[usize] = &[1, 2, 3, 7, 100, usize::MAX];
pub const ENGINES: &[Engine] = &[Engine::Buffered, Engine::Unbuffered];

// ---------------------------------------------------------------- certificates and files

/// A key algorithm for generated certificates.
#[derive(Clone, Copy, Debug)]
pub enum Alg {
    EcdsaP256,
    Rsa,
    Ed25519,
}

/// A generated certificate: PEM texts and the DER the client will see.
pub struct Generated {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert_der: CertificateDer<'static>,
}

pub fn generate(alg: Alg, names: &[&str]) -> Generated {
    generate_with(alg, names, |_| {})
}

/// Like [`generate`], letting the caller adjust the parameters (validity dates).
pub fn generate_with(
    alg: Alg,
    names: &[&str],
    adjust: impl FnOnce(&mut rcgen::CertificateParams),
) -> Generated {
    let algorithm = match alg {
        Alg::EcdsaP256 => &rcgen::PKCS_ECDSA_P256_SHA256,
        Alg::Rsa => &rcgen::PKCS_RSA_SHA256,
        Alg::Ed25519 => &rcgen::PKCS_ED25519,
    };
    let key = rcgen::KeyPair::generate_for(algorithm).unwrap();
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let mut params = rcgen::CertificateParams::new(names).unwrap();
    adjust(&mut params);
    let cert = params.self_signed(&key).unwrap();
    Generated {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        cert_der: cert.der().clone(),
    }
}

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("squall-tls-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Writes `generated` as `{stem}.pem` and `{stem}.key` and returns the entry for it.
    pub fn spec(&self, stem: &str, hosts: &[&str], generated: &Generated) -> CertSpec {
        CertSpec {
            name: format!("certificate {stem}"),
            hosts: hosts.iter().map(|s| s.to_string()).collect(),
            source: KeySource::Pem {
                cert_path: self.write(&format!("{stem}.pem"), &generated.cert_pem),
                key_path: self.write(&format!("{stem}.key"), &generated.key_pem),
            },
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn self_signed(name: &str, hosts: &[&str]) -> CertSpec {
    CertSpec {
        name: name.to_string(),
        hosts: hosts.iter().map(|s| s.to_string()).collect(),
        source: KeySource::SelfSigned,
    }
}

// ---------------------------------------------------------------- the client

/// Accepts any certificate chain, checks handshake signatures, and offers only `schemes`.
#[derive(Debug)]
struct AnyCert {
    provider: Arc<CryptoProvider>,
    schemes: Vec<SignatureScheme>,
}

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.schemes.clone()
    }
}

/// How the test client is configured.
#[derive(Clone, Debug)]
pub struct ClientOpts {
    pub versions: Vec<&'static rustls::SupportedProtocolVersion>,
    pub alpn: Vec<&'static [u8]>,
    pub sni: bool,
    pub tls12_resumption: Tls12Resumption,
    /// Offer only these signature schemes (all the provider's when `None`).
    pub schemes: Option<Vec<SignatureScheme>>,
}

impl Default for ClientOpts {
    fn default() -> ClientOpts {
        ClientOpts {
            versions: vec![&rustls::version::TLS13, &rustls::version::TLS12],
            alpn: vec![b"h2", b"http/1.1"],
            sni: true,
            tls12_resumption: Tls12Resumption::SessionIdOrTickets,
            schemes: None,
        }
    }
}

/// A client config; reuse the same `Arc` to let a second connection resume.
pub fn client_config(opts: &ClientOpts) -> Arc<ClientConfig> {
    let provider = Arc::new(aws_lc_rs::default_provider());
    let schemes = opts.schemes.clone().unwrap_or_else(|| {
        provider
            .signature_verification_algorithms
            .supported_schemes()
    });
    let verifier = Arc::new(AnyCert {
        provider: provider.clone(),
        schemes,
    });
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&opts.versions)
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.alpn_protocols = opts.alpn.iter().map(|p| p.to_vec()).collect();
    config.enable_sni = opts.sni;
    config.resumption = Resumption::in_memory_sessions(64).tls12_resumption(opts.tls12_resumption);
    Arc::new(config)
}

// ---------------------------------------------------------------- the pair

/// A client and a server connection joined by two in-memory pipes, each delivering at most
/// `chunk` bytes per `read_tls` call.
pub struct Pair {
    pub client: ClientConnection,
    pub server: TlsConn,
    pub chunk: usize,
    /// Plaintext the server decrypted.
    pub server_plain: BytesMut,
    /// Plaintext the client decrypted.
    pub client_plain: Vec<u8>,
    /// Bytes the server produced, not yet given to the client.
    pub to_client: BytesMut,
    pub server_err: Option<TlsError>,
    pub client_err: Option<rustls::Error>,
    /// The client read close_notify.
    pub client_saw_close: bool,
}

impl Pair {
    pub fn new(acceptor: &Acceptor, client: &Arc<ClientConfig>, sni: &str, chunk: usize) -> Pair {
        let name = ServerName::try_from(sni.to_string()).unwrap();
        Pair {
            client: ClientConnection::new(client.clone(), name).unwrap(),
            server: TlsConn::new(acceptor),
            chunk,
            server_plain: BytesMut::new(),
            client_plain: Vec::new(),
            to_client: BytesMut::new(),
            server_err: None,
            client_err: None,
            client_saw_close: false,
        }
    }

    /// Moves everything the client has to send into the server; returns the byte count.
    pub fn client_to_server(&mut self) -> usize {
        let mut wire = Vec::new();
        while self.client.wants_write() {
            self.client.write_tls(&mut wire).unwrap();
        }
        self.feed_server(&wire);
        wire.len()
    }

    /// Feeds raw bytes to the server, `chunk` at a time, stopping at its first error.
    pub fn feed_server(&mut self, wire: &[u8]) {
        for piece in wire.chunks(self.chunk.min(wire.len().max(1))) {
            if self.server_err.is_some() {
                return;
            }
            let mut out = BytesMut::new();
            let result = self
                .server
                .read_tls(piece, &mut self.server_plain, &mut out);
            self.server.check_invariants();
            // As an idle worker would: it must never lose a partial record.
            self.server.shrink();
            self.to_client.extend_from_slice(&out);
            if let Err(err) = result {
                self.server_err = Some(err);
            }
        }
    }

    /// Moves everything the server produced into the client; returns the byte count.
    pub fn server_to_client(&mut self) -> usize {
        let wire = self.to_client.split();
        let chunk = self.chunk.min(wire.len().max(1));
        for piece in wire.chunks(chunk) {
            if self.client_err.is_some() {
                break;
            }
            let mut rest = piece;
            while !rest.is_empty() {
                if self.client.read_tls(&mut rest).unwrap() == 0 {
                    break; // the client saw close_notify and takes no more
                }
                if let Err(err) = self.client.process_new_packets() {
                    self.client_err = Some(err);
                    break;
                }
                self.drain_client();
            }
        }
        wire.len()
    }

    fn drain_client(&mut self) {
        use std::io::Read;
        let mut buf = [0u8; 4096];
        loop {
            match self.client.reader().read(&mut buf) {
                Ok(0) => {
                    self.client_saw_close = true;
                    return;
                }
                Ok(n) => self.client_plain.extend_from_slice(&buf[..n]),
                Err(_) => return, // WouldBlock: nothing more for now
            }
        }
    }

    /// Moves bytes both ways until neither side has anything to say.
    pub fn run(&mut self) {
        for _ in 0..1000 {
            let moved = self.client_to_server() + self.server_to_client();
            if moved == 0 {
                return;
            }
        }
        panic!("the pair never went quiet");
    }

    /// Runs the handshake to completion and asserts both sides finished it cleanly.
    pub fn handshake(&mut self) {
        self.run();
        assert!(self.server_err.is_none(), "server: {:?}", self.server_err);
        assert!(self.client_err.is_none(), "client: {:?}", self.client_err);
        assert!(!self.server.is_handshaking(), "server still handshaking");
        assert!(!self.client.is_handshaking(), "client still handshaking");
    }

    /// The client sends `data`; returns what the server decrypted (and clears it).
    pub fn client_sends(&mut self, data: &[u8]) -> BytesMut {
        use std::io::Write;
        self.client.writer().write_all(data).unwrap();
        self.run();
        self.server_plain.split()
    }

    /// The server sends `data` (with one `write_plain` call); returns what the client got.
    pub fn server_sends(&mut self, data: &[u8]) -> Vec<u8> {
        let mut out = BytesMut::new();
        self.server.write_plain(data, &mut out).unwrap();
        self.server.check_invariants();
        self.to_client.extend_from_slice(&out);
        self.run();
        std::mem::take(&mut self.client_plain)
    }

    /// The certificate the client was shown.
    pub fn server_cert(&self) -> CertificateDer<'static> {
        self.client.peer_certificates().unwrap()[0].clone()
    }
}

/// Deterministic pseudo-random bytes (xorshift64*), so failures replay.
pub fn random_bytes(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        out.extend_from_slice(&seed.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}
