//! An independent HTTP/3 client for the tests: hyperium's `h3` over `quinn` (QUIC and TLS of
//! their own, sharing no code with Squall's), trusting any certificate (the servers under
//! test use self-signed ones).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};
use http::HeaderMap;

/// A response as the client got it.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub trailers: Option<HeaderMap>,
}

/// One client connection: its request sender, and the QUIC endpoint and connection beneath.
pub struct H3 {
    pub send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    pub conn: quinn::Connection,
    pub endpoint: quinn::Endpoint,
    driver: tokio::task::JoinHandle<()>,
}

impl Drop for H3 {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

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

/// A QUIC client config offering ALPN `h3`, trusting any certificate.
pub fn client_config() -> quinn::ClientConfig {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    // Resumed connections may send requests in 0-RTT, where the server allows it.
    tls.enable_early_data = true;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("QUIC TLS");
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    transport.max_idle_timeout(Some(Duration::from_secs(20).try_into().expect("idle")));
    config.transport_config(Arc::new(transport));
    config
}

/// Connects to `addr` (UDP) with SNI `localhost` and sets HTTP/3 up.
pub async fn connect(addr: SocketAddr) -> H3 {
    try_connect(addr).await.expect("an HTTP/3 connection")
}

/// [`connect`], saying why it failed.
pub async fn try_connect(addr: SocketAddr) -> Result<H3, String> {
    let endpoint = endpoint(addr);
    let connecting = endpoint
        .connect(addr, "localhost")
        .map_err(|e| e.to_string())?;
    let conn = tokio::time::timeout(Duration::from_secs(10), connecting)
        .await
        .map_err(|_| "the QUIC handshake timed out".to_owned())?
        .map_err(|e| format!("the QUIC handshake: {e}"))?;
    setup(endpoint, conn).await
}

/// A client endpoint on loopback (the family of `addr`) with [`client_config`].
pub fn endpoint(addr: SocketAddr) -> quinn::Endpoint {
    let bind: SocketAddr = if addr.is_ipv4() {
        "127.0.0.1:0".parse().unwrap()
    } else {
        "[::1]:0".parse().unwrap()
    };
    let mut endpoint = quinn::Endpoint::client(bind).expect("a client endpoint");
    endpoint.set_default_client_config(client_config());
    endpoint
}

/// HTTP/3 set up on a QUIC connection of `endpoint`.
pub async fn setup(endpoint: quinn::Endpoint, conn: quinn::Connection) -> Result<H3, String> {
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
        .await
        .map_err(|e| format!("HTTP/3 set-up: {e}"))?;
    let driver = tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    Ok(H3 {
        send,
        conn,
        endpoint,
        driver,
    })
}

/// One request with an optional body, its response read whole (10 s at most).
pub async fn fetch(h3: &mut H3, method: &str, uri: &str, body: Option<Bytes>) -> Reply {
    let request = http::Request::builder()
        .method(method)
        .uri(uri)
        .body(())
        .expect("a request");
    let exchange = async {
        let mut stream = h3.send.send_request(request).await?;
        if let Some(body) = body {
            stream.send_data(body).await?;
        }
        stream.finish().await?;
        let response = stream.recv_response().await?;
        let mut body = Vec::new();
        while let Some(mut chunk) = stream.recv_data().await? {
            while chunk.has_remaining() {
                let piece = chunk.chunk();
                body.extend_from_slice(piece);
                let n = piece.len();
                chunk.advance(n);
            }
        }
        let trailers = stream.recv_trailers().await?;
        Ok::<_, h3::error::StreamError>(Reply {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            body,
            trailers,
        })
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .expect("the exchange in time")
        .expect("the exchange")
}
