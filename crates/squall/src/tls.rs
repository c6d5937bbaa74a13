//! Turns the config's `[[certificate]]` entries and TLS listeners into squall-tls acceptors.
//!
//! The binary is where the config and the TLS layer meet (neither crate knows the other).

use std::net::SocketAddr;

use squall_config::{CertSource, Certificate, Config, Diagnostic, Protocol, Site, Sites};
use squall_tls::{Acceptor, Alpn, CertField, CertSpec, KeySource, TlsError, TlsStore};
use tracing::warn;

/// The certificate store and one acceptor per `[[listen]]` (None for cleartext listeners).
pub struct Tls {
    pub store: Option<TlsStore>,
    /// Per `[[listen]]` address (as configured): its acceptor, or None for cleartext.
    pub acceptors: Vec<(SocketAddr, Option<Acceptor>)>,
}

impl Tls {
    /// Loads the certificates; on reload, `previous` keeps the ticket key and session cache so
    /// clients resume across it. An error is reported at the `cert`, `key` or `hosts` it is
    /// about.
    pub fn load(
        config: &Config,
        sites: &Sites,
        previous: Option<&TlsStore>,
    ) -> Result<Tls, Diagnostic> {
        let specs: Vec<CertSpec> = config.certificate.iter().enumerate().map(spec).collect();
        let store = if specs.is_empty() {
            None
        } else {
            let loaded = match previous {
                Some(previous) => previous.reload(&specs),
                None => TlsStore::load(&specs),
            };
            let (store, warnings) = loaded.map_err(|e| diagnostic(sites, &e))?;
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

/// A load error at the value it is about. The message is the error's alone: its source (an
/// OS error) is already in it.
fn diagnostic(sites: &Sites, error: &TlsError) -> Diagnostic {
    let site = match error.entry() {
        Some((i, Some(CertField::Cert))) => Site::CertificateCert(i),
        Some((i, Some(CertField::Key))) => Site::CertificateKey(i),
        Some((i, Some(CertField::Hosts))) => Site::CertificateHosts(i),
        Some((i, None)) => Site::Certificate(i),
        None => Site::File,
    };
    sites.diagnostic(site, error.to_string())
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

/// ALPN offered on a TLS listener: its `protocols`, in the configured order of preference
/// (`h2c` has no ALPN id and is skipped). A listener whose list names neither `h2` nor `http1`
/// offers HTTP/1.1, so that a client always has a protocol to speak.
fn alpn(protocols: &[Protocol]) -> Vec<Alpn> {
    let offered: Vec<Alpn> = protocols
        .iter()
        .filter_map(|p| match p {
            Protocol::H2 => Some(Alpn::H2),
            Protocol::Http1 => Some(Alpn::Http1),
            Protocol::H2c => None,
        })
        .collect();
    if offered.is_empty() {
        vec![Alpn::Http1]
    } else {
        offered
    }
}
