//! Loading one `[[certificate]]` entry: PEM files or a self-signed certificate made in memory,
//! checked the way an operator wants to hear about it.
//!
//! Hard errors (the entry cannot be served): an unreadable file, a file with no certificate or
//! no key, a key the provider cannot use, a key that does not belong to the certificate, a bad
//! host pattern. Each names the entry and the file. Soft problems (the entry is served, but
//! clients may refuse it) are [`Warning`]s: an expired or not-yet-valid certificate, a
//! configured host the certificate's names do not cover. An expired certificate is only a
//! warning because refusing to start would turn a renewal mistake into an outage of every
//! site on the host, plain-HTTP ones included.

use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::error::{CertField, ErrorKind, TlsError, Warning, WarningKind};
use crate::resolver::HostPattern;
use crate::store::{CertSpec, KeySource};

/// A loaded entry: what the resolver needs.
pub(crate) struct Loaded {
    pub(crate) key: Arc<CertifiedKey>,
    /// The names this entry serves: `hosts` from the config, or the certificate's DNS names
    /// when `hosts` is empty.
    pub(crate) hosts: Vec<HostPattern>,
}

/// The name given to a self-signed certificate whose entry lists no hosts.
const SELF_SIGNED_DEFAULT_HOST: &str = "localhost";

/// Loads and checks one entry; pushes its warnings to `warnings`.
pub(crate) fn load_entry(
    spec: &CertSpec,
    provider: &CryptoProvider,
    now: SystemTime,
    warnings: &mut Vec<Warning>,
) -> Result<Loaded, TlsError> {
    let mut hosts = spec
        .hosts
        .iter()
        .map(|host| HostPattern::parse(host))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|why| {
            let msg = format!("{}: {why}", spec.name);
            TlsError::new(ErrorKind::BadHost, msg).at_field(CertField::Hosts)
        })?;
    let key = match &spec.source {
        KeySource::Pem {
            cert_path,
            key_path,
        } => {
            let key = load_pem(spec, cert_path, key_path, provider)?;
            let leaf = &key.cert[0]; // load_pem checked the chain is not empty
            inspect_leaf(spec, leaf, now, &mut hosts, warnings)?;
            key
        }
        KeySource::SelfSigned => self_signed(spec, &mut hosts, provider)?,
    };
    Ok(Loaded {
        key: Arc::new(key),
        hosts,
    })
}

/// Reads the chain and the key, and checks that they belong together.
pub(crate) fn load_pem(
    spec: &CertSpec,
    cert_path: &Path,
    key_path: &Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let entry = &spec.name;
    let cert = |e: TlsError| e.at_field(CertField::Cert);
    let cert_pem = read_file(entry, "certificate", cert_path).map_err(cert)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| cert(bad_pem(entry, "certificate", cert_path, e)))?;
    if chain.is_empty() {
        let why = "no CERTIFICATE block";
        return Err(cert(bad_pem(entry, "certificate", cert_path, why)));
    }
    load_key(entry, chain, cert_path, key_path, provider).map_err(|e| e.at_field(CertField::Key))
}

/// Reads the key and checks that it belongs to the certificate of `chain`.
fn load_key(
    entry: &str,
    chain: Vec<CertificateDer<'static>>,
    cert_path: &Path,
    key_path: &Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let key_pem = read_file(entry, "key", key_path)?;
    let key_der = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        let why = match e {
            rustls_pki_types::pem::Error::NoItemsFound => {
                "no PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block".to_string()
            }
            other => other.to_string(),
        };
        bad_pem(entry, "key", key_path, why)
    })?;
    let signer = provider
        .key_provider
        .load_private_key(key_der)
        .map_err(|e| {
            let msg = format!("{entry}: unsupported private key in {}", key_path.display());
            TlsError::with_source(ErrorKind::UnsupportedKey, msg, e)
        })?;
    let key = CertifiedKey::new(chain, signer);
    match key.keys_match() {
        // `Unknown`: the provider cannot tell (never for aws-lc-rs keys); let it through, as
        // rustls's own `CertifiedKey::from_der` does.
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => Ok(key),
        Err(e) => {
            let msg = format!(
                "{entry}: the key in {} does not match the certificate in {}",
                key_path.display(),
                cert_path.display()
            );
            Err(TlsError::with_source(ErrorKind::KeyMismatch, msg, e))
        }
    }
}

pub(crate) fn read_file(entry: &str, what: &str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| {
        let msg = format!("{entry}: cannot read {what} file {}: {e}", path.display());
        TlsError::with_source(ErrorKind::Io, msg, e)
    })
}

pub(crate) fn bad_pem(
    entry: &str,
    what: &str,
    path: &Path,
    why: impl std::fmt::Display,
) -> TlsError {
    let msg = format!("{entry}: no usable {what} in {}: {why}", path.display());
    TlsError::new(ErrorKind::BadPem, msg)
}

/// Checks the end-entity certificate's validity period and names. With no configured hosts,
/// the certificate's DNS names become the entry's hosts.
fn inspect_leaf(
    spec: &CertSpec,
    leaf: &CertificateDer<'_>,
    now: SystemTime,
    hosts: &mut Vec<HostPattern>,
    warnings: &mut Vec<Warning>,
) -> Result<(), TlsError> {
    let (_, cert) = X509Certificate::from_der(leaf).map_err(|e| {
        let msg = format!("{}: cannot parse the certificate: {e}", spec.name);
        TlsError::new(ErrorKind::BadPem, msg).at_field(CertField::Cert)
    })?;
    let mut warn = |kind, message: String| {
        let entry = spec.name.clone();
        warnings.push(Warning {
            entry,
            kind,
            message,
        });
    };
    let now = unix_seconds(now);
    let validity = cert.validity();
    if validity.not_after.timestamp() < now {
        let msg = format!(
            "expired at {} (notAfter); clients will refuse it",
            validity.not_after
        );
        warn(WarningKind::Expired, msg);
    }
    if validity.not_before.timestamp() > now {
        let msg = format!(
            "not valid before {} (notBefore); clients will refuse it",
            validity.not_before
        );
        warn(WarningKind::NotYetValid, msg);
    }
    let names = dns_names(&cert);
    if hosts.is_empty() {
        *hosts = names;
        return Ok(());
    }
    for host in hosts.iter() {
        if !names.iter().any(|name| name.covers(host)) {
            let msg = format!(
                "host {} is not among the certificate's names; clients will refuse it there",
                display_host(host)
            );
            warn(WarningKind::HostNotCovered, msg);
        }
    }
    Ok(())
}

/// The certificate's DNS subjectAltNames that are valid patterns (others can never match an
/// SNI, so they are ignored).
fn dns_names(cert: &X509Certificate<'_>) -> Vec<HostPattern> {
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::DNSName(dns) => HostPattern::parse(dns).ok(),
            _ => None,
        })
        .collect()
}

fn display_host(host: &HostPattern) -> String {
    match host {
        HostPattern::Exact(name) => name.to_string(),
        HostPattern::Wildcard(suffix) => format!("*.{suffix}"),
    }
}

fn unix_seconds(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

/// Generates an ECDSA P-256 certificate for the entry's hosts (or `localhost`), in memory.
/// A new key on every load: nothing is written to disk, and clients must not pin it.
fn self_signed(
    spec: &CertSpec,
    hosts: &mut Vec<HostPattern>,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    if hosts.is_empty() {
        hosts.push(HostPattern::Exact(SELF_SIGNED_DEFAULT_HOST.into()));
    }
    let names: Vec<String> = hosts.iter().map(display_host).collect();
    let fail = |e: &dyn std::fmt::Display| {
        let msg = format!(
            "{}: cannot generate a self-signed certificate: {e}",
            spec.name
        );
        TlsError::new(ErrorKind::SelfSigned, msg)
    };
    let made = rcgen::generate_simple_self_signed(names).map_err(|e| fail(&e))?;
    let key_der = PrivateKeyDer::Pkcs8(made.signing_key.serialize_der().into());
    let signer = provider
        .key_provider
        .load_private_key(key_der)
        .map_err(|e| fail(&e))?;
    Ok(CertifiedKey::new(vec![made.cert.der().clone()], signer))
}
