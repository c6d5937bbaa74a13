//! Turns the config's `[[certificate]]` entries and TLS listeners into squall-tls acceptors.
//!
//! The binary is where the config and the TLS layer meet (neither crate knows the other).

use std::net::SocketAddr;

use squall_config::{CertSource, Certificate, Config, Protocol};
use squall_tls::{Acceptor, Alpn, CertSpec, KeySource, TlsStore};
use tracing::warn;

/// The certificate store and one acceptor per `[[listen]]` (None for cleartext listeners).
pub struct Tls {
    pub store: Option<TlsStore>,
    /// Per `[[listen]]` address (as configured): its acceptor, or None for cleartext.
    pub acceptors: Vec<(SocketAddr, Option<Acceptor>)>,
}

impl Tls {
    /// Loads the certificates; on reload, `previous` keeps the ticket key and session cache so
    /// clients resume across it.
    pub fn load(config: &Config, previous: Option<&TlsStore>) -> anyhow::Result<Tls> {
        let specs: Vec<CertSpec> = config.certificate.iter().enumerate().map(spec).collect();
        let store = if specs.is_empty() {
            None
        } else {
            let (store, warnings) = match previous {
                Some(previous) => previous.reload(&specs)?,
                None => TlsStore::load(&specs)?,
            };
            for warning in warnings {
                warn!("{warning}");
            }
            Some(store)
        };
        let acceptors = config
            .listen
            .iter()
            .map(|listen| {
                let acceptor = store
                    .as_ref()
                    .filter(|_| listen.tls)
                    .map(|store| store.acceptor(&alpn(&listen.protocols)));
                (listen.address, acceptor)
            })
            .collect();
        Ok(Tls { store, acceptors })
    }

    /// The acceptor of the listener configured as `address`; None for cleartext ones.
    pub fn acceptor(&self, address: SocketAddr) -> Option<&Acceptor> {
        self.acceptors
            .iter()
            .find(|(a, _)| *a == address)
            .and_then(|(_, acceptor)| acceptor.as_ref())
    }
}

fn spec((index, certificate): (usize, &Certificate)) -> CertSpec {
    let first = certificate.hosts.first().map_or("", String::as_str);
    CertSpec {
        name: format!("certificate #{} ({first})", index + 1),
        hosts: certificate.hosts.clone(),
        source: match &certificate.source {
            CertSource::Files { cert, key } => KeySource::Pem {
                cert_path: cert.clone(),
                key_path: key.clone(),
            },
            CertSource::SelfSigned => KeySource::SelfSigned,
        },
    }
}

/// ALPN offered on a TLS listener. HTTP/2 is not served yet, so `h2` is not advertised: a
/// client offering only `h2` gets `no_application_protocol` rather than a protocol we cannot
/// speak. HTTP/1.1 is always offered so clients without ALPN-less fallback still connect.
fn alpn(protocols: &[Protocol]) -> Vec<Alpn> {
    if protocols.iter().any(|p| matches!(p, Protocol::H2)) {
        warn!(
            "a TLS listener lists h2: HTTP/2 is not available in this build yet; offering http/1.1"
        );
    }
    vec![Alpn::Http1]
}
