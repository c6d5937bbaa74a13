//! The QUIC client configuration: ALPN `h3`, TLS 1.3 with what h2load negotiates over TCP
//! (`TLS_AES_128_GCM_SHA256` and X25519), and a certificate verifier that trusts anything, as
//! h2load does (the scenarios' servers present self-signed certificates).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use rustls::crypto::CryptoProvider;
use rustls::crypto::aws_lc_rs::{cipher_suite, default_provider, kx_group};

/// The one cipher suite offered: QUIC's Initial suite, and what h2load (OpenSSL 3.0) picks.
pub const CIPHER: &str = "TLS_AES_128_GCM_SHA256";
/// The one key exchange offered, named as h2load prints its "Server Temp Key".
pub const KEY_EXCHANGE: &str = "X25519 253 bits";

/// How long a connection may stay silent: longer than any run's gaps, so that the server's idle
/// timeout (60 s by default) or the end of the run closes it, never this side by surprise.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A verifier that accepts any certificate but still checks the handshake's signatures with
/// it, so the handshake costs what a verifying client's does minus the chain walk.
#[derive(Debug)]
struct AnyCert(Arc<CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// aws-lc-rs with one cipher suite and one key exchange group: the HTTP/3 runs then encrypt
/// with what the HTTP/2 + TLS runs do (rustls would otherwise agree on the post-quantum
/// X25519MLKEM768 with Squall, a costlier handshake than h2load's X25519), and what was
/// negotiated is known without asking the connection.
fn provider() -> CryptoProvider {
    CryptoProvider {
        cipher_suites: vec![cipher_suite::TLS13_AES_128_GCM_SHA256],
        kx_groups: vec![kx_group::X25519],
        ..default_provider()
    }
}

/// The client config every connection uses: ALPN `h3` only, TLS 1.3 (QUIC has no other), any
/// certificate, no session resumption across connections needed (each connects once).
pub fn client_config() -> Result<quinn::ClientConfig> {
    let provider = Arc::new(provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("TLS 1.3 with aws-lc-rs")?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
        .context("a QUIC client config from rustls")?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    let idle = IDLE_TIMEOUT.try_into().context("the idle timeout")?;
    transport.max_idle_timeout(Some(idle));
    config.transport_config(Arc::new(transport));
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_only_what_h2load_negotiates() {
        let provider = provider();
        let suites: Vec<String> = provider
            .cipher_suites
            .iter()
            .map(|s| format!("{:?}", s.suite()))
            .collect();
        // rustls names the suite TLS13_..., OpenSSL (and so h2load) TLS_...
        assert_eq!(suites, [CIPHER.replace("TLS_", "TLS13_")]);
        let groups: Vec<String> = (provider.kx_groups.iter())
            .map(|g| format!("{:?}", g.name()))
            .collect();
        assert_eq!(groups, ["X25519"]);
        assert!(KEY_EXCHANGE.starts_with(&groups[0]));
        client_config().expect("a QUIC client config");
    }
}
