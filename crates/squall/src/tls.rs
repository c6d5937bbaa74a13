//! Turns the config's `[[certificate]]` entries and TLS listeners into squall-tls acceptors.
//!
//! The binary is where the config and the TLS layer meet (neither crate knows the other).

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use squall_config::{
    CertSource, Certificate, Config, Diagnostic, Protocol, Site, Sites, TlsEngine,
};
use squall_tls::{
    Acceptor, Alpn, CertField, CertSpec, Engine, KeySource, TicketKeyError, TicketKeys, TlsError,
    TlsStore,
};
use tracing::{debug, warn};

/// The certificate store and one acceptor per `[[listen]]` (None for cleartext listeners).
pub struct Tls {
    pub store: Option<TlsStore>,
    /// Per `[[listen]]` address (as configured): its acceptor, or None for cleartext.
    pub acceptors: Vec<(SocketAddr, Option<Acceptor>)>,
}

impl Tls {
    /// Loads the certificates; on reload, `previous` keeps the ticket key and session cache so
    /// clients resume across it. Errors are reported at the `cert`, `key` or `hosts` they are
    /// about, every failing entry at once (an operator fixing a file should not find the next
    /// broken certificate only on the next run).
    pub fn load(
        config: &Config,
        sites: &Sites,
        previous: Option<&TlsStore>,
    ) -> Result<Tls, Vec<Diagnostic>> {
        let specs: Vec<CertSpec> = config.certificate.iter().enumerate().map(spec).collect();
        let store = if specs.is_empty() {
            None
        } else {
            let loaded = match previous {
                Some(previous) => previous.reload(&specs),
                None => TlsStore::load(&specs),
            };
            let (store, warnings) = loaded.map_err(|e| every_problem(sites, &specs, &e))?;
            for warning in warnings {
                warn!("{warning}");
            }
            let keys = match &config.tls.ticket_key_file {
                Some(path) => Some(ticket_keys(path, sites)?),
                None => None,
            };
            debug!(
                "new TLS connections on the {} engine",
                config.tls.engine.as_str()
            );
            Some(store.with_ticket_keys(keys))
        };
        let acceptors = config
            .listen
            .iter()
            .map(|listen| {
                let acceptor = store
                    .as_ref()
                    .filter(|_| listen.tls)
                    .map(|store| store.acceptor(&alpn(&listen.protocols)))
                    .map(|acceptor| acceptor.with_engine(engine(config.tls.engine)));
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

/// `[tls] engine`: the rustls API of the connections an acceptor makes. A reload builds new
/// acceptors, so new connections take the new engine and open ones keep theirs.
fn engine(engine: TlsEngine) -> Engine {
    match engine {
        TlsEngine::Unbuffered => Engine::Unbuffered,
        TlsEngine::Buffered => Engine::Buffered,
    }
}

/// Reads `[tls] ticket_key_file` (at start-up, on every reload and in `squall check`): an
/// unreadable file is an error at the key, a bad line one at `FILE:LINE:COL`. A file that
/// others than its owner may read is a warning: anyone holding the keys can decrypt every
/// recorded session resumed under them.
fn ticket_keys(path: &Path, sites: &Sites) -> Result<Arc<TicketKeys>, Vec<Diagnostic>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        let message = format!("cannot read ticket_key_file {}: {e}", path.display());
        vec![sites.diagnostic(Site::TicketKeyFile, message)]
    })?;
    let file = path.display().to_string();
    let keys = TicketKeys::parse(&text).map_err(|problems| {
        let diagnostic = |p: TicketKeyError| Diagnostic {
            file: file.clone(),
            line: p.line,
            col: p.col,
            message: p.message,
        };
        problems.into_iter().map(diagnostic).collect::<Vec<_>>()
    })?;
    if let Ok(meta) = std::fs::metadata(path) {
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            warn!(
                "ticket_key_file {file} has mode {mode:04o}: others than its owner may read the \
                 ticket keys; chmod 600 it"
            );
        }
    }
    Ok(Arc::new(keys))
}

/// Every entry's load error, once loading them together failed with `first`: each entry is
/// loaded alone (only on this error path) so that each broken one is named. `first` stands
/// alone when no single entry fails by itself (a problem between entries).
fn every_problem(sites: &Sites, specs: &[CertSpec], first: &TlsError) -> Vec<Diagnostic> {
    let mut problems: Vec<Diagnostic> = specs
        .iter()
        .enumerate()
        .filter_map(|(index, spec)| {
            let error = TlsStore::load(std::slice::from_ref(spec)).err()?;
            Some(diagnostic_at(sites, &error, Some(index)))
        })
        .collect();
    if problems.is_empty() {
        problems.push(diagnostic_at(sites, first, None));
    }
    problems
}

/// A load error at the value it is about; `index` replaces the error's own entry index (for an
/// entry loaded alone, whose index is 0). The message is the error's alone: its source (an OS
/// error) is already in it.
fn diagnostic_at(sites: &Sites, error: &TlsError, index: Option<usize>) -> Diagnostic {
    let entry = error.entry().map(|(i, field)| (index.unwrap_or(i), field));
    let site = match entry {
        Some((i, Some(CertField::Cert))) => Site::CertificateCert(i),
        Some((i, Some(CertField::Key))) => Site::CertificateKey(i),
        Some((i, Some(CertField::Hosts))) => Site::CertificateHosts(i),
        // `Ca` is an upstream's (`origin_tls.rs`), never a certificate entry's.
        Some((i, None | Some(CertField::Ca))) => Site::Certificate(i),
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
            Protocol::H2c | Protocol::H3 => None,
        })
        .collect();
    if offered.is_empty() {
        vec![Alpn::Http1]
    } else {
        offered
    }
}
