//! The one error type of this layer, classified for the worker's decisions and metrics, and
//! the warnings a certificate load can give without failing.
//!
//! A connection error is always fatal to that connection (rustls poisons its state), so the
//! only decision left to the caller is who to blame: [`Fault::Peer`] errors are a client's
//! doing (garbage, a protocol it cannot speak, an alert of its own) and are counted, not
//! logged loudly; [`Fault::Internal`] ones are a bug or a resource failure here;
//! [`Fault::Config`] ones come from loading `[[certificate]]` entries and name the entry.

use std::fmt;

/// An error from loading certificates or from a TLS connection.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct TlsError {
    kind: ErrorKind,
    message: String,
    /// For a certificate load: the entry (index into the specs) and the value at fault.
    at: Option<(usize, Option<CertField>)>,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// What went wrong, coarse enough to be a metrics label ([`ErrorKind::as_str`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Bytes that are not TLS records, or a record over the size limits (garbage, a plain-HTTP
    /// client on a TLS port, a handshake message over 64 KiB). Alert `decode_error` or
    /// `record_overflow`.
    BadRecord,
    /// A record failed authentication. Alert `bad_record_mac`.
    Decrypt,
    /// No protocol version, cipher suite, key exchange group or signature scheme in common.
    /// Alert `handshake_failure` (or `protocol_version`, `illegal_parameter`).
    HandshakeFailure,
    /// The client offered ALPN protocols, none of them ours. Alert `no_application_protocol`.
    NoApplicationProtocol,
    /// The client broke the protocol (unexpected message, bad transcript, ...).
    PeerMisbehaved,
    /// The client sent a fatal alert (often `bad_certificate` or `unknown_ca`: it does not
    /// trust our certificate).
    AlertReceived,
    /// On the client side: the server's certificate failed verification (unknown issuer,
    /// not valid for the name, expired, ...); the message says which.
    InvalidCertificate,
    /// [`crate::TlsConn::write_plain`] before the handshake completed: a caller bug.
    HandshakeNotComplete,
    /// [`crate::TlsConn::write_plain`] after [`crate::TlsConn::close`]: a caller bug.
    Closed,
    /// Anything else from rustls or the crypto provider.
    Internal,
    /// A certificate or key file could not be read.
    Io,
    /// A file held no usable PEM certificate or key, or a certificate could not be parsed.
    BadPem,
    /// The private key does not belong to the certificate.
    KeyMismatch,
    /// The private key is of a kind the crypto provider cannot sign with.
    UnsupportedKey,
    /// A host name in `hosts` is not an exact name or a `*.suffix` wildcard.
    BadHost,
    /// Generating a `self_signed` certificate failed.
    SelfSigned,
    /// No `[[certificate]]` entry at all: a TLS listener needs a default certificate.
    NoCertificates,
}

/// The value of a `[[certificate]]` entry that a load error is about, so that the caller can
/// point at it in the config file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CertField {
    /// The chain file (`cert`), or the certificate in it.
    Cert,
    /// The key file (`key`), or the key in it (including a key that does not match).
    Key,
    /// A host name in `hosts`.
    Hosts,
    /// The CA bundle of a client ([`crate::ClientSpec::ca`]), or the system's store.
    Ca,
}

/// Who is to blame for an error, which decides how loudly it is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The client: count it and close the connection.
    Peer,
    /// This process: a bug or a failed resource; log it.
    Internal,
    /// The config file: report it against the entry and refuse the config.
    Config,
}

impl ErrorKind {
    /// A stable snake_case name, for metric labels and logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorKind::BadRecord => "bad_record",
            ErrorKind::Decrypt => "decrypt",
            ErrorKind::HandshakeFailure => "handshake_failure",
            ErrorKind::NoApplicationProtocol => "no_application_protocol",
            ErrorKind::PeerMisbehaved => "peer_misbehaved",
            ErrorKind::AlertReceived => "alert_received",
            ErrorKind::InvalidCertificate => "invalid_certificate",
            ErrorKind::HandshakeNotComplete => "handshake_not_complete",
            ErrorKind::Closed => "closed",
            ErrorKind::Internal => "internal",
            ErrorKind::Io => "io",
            ErrorKind::BadPem => "bad_pem",
            ErrorKind::KeyMismatch => "key_mismatch",
            ErrorKind::UnsupportedKey => "unsupported_key",
            ErrorKind::BadHost => "bad_host",
            ErrorKind::SelfSigned => "self_signed",
            ErrorKind::NoCertificates => "no_certificates",
        }
    }

    /// Who is to blame for this kind of error.
    pub const fn fault(self) -> Fault {
        match self {
            ErrorKind::BadRecord
            | ErrorKind::Decrypt
            | ErrorKind::HandshakeFailure
            | ErrorKind::NoApplicationProtocol
            | ErrorKind::PeerMisbehaved
            | ErrorKind::AlertReceived
            | ErrorKind::InvalidCertificate => Fault::Peer,
            ErrorKind::HandshakeNotComplete | ErrorKind::Closed | ErrorKind::Internal => {
                Fault::Internal
            }
            ErrorKind::Io
            | ErrorKind::BadPem
            | ErrorKind::KeyMismatch
            | ErrorKind::UnsupportedKey
            | ErrorKind::BadHost
            | ErrorKind::SelfSigned
            | ErrorKind::NoCertificates => Fault::Config,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TlsError {
    /// The classification of this error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// For an error from loading certificates: the index of the entry at fault (in the specs
    /// given to [`crate::TlsStore::load`]), and the value of it at fault when one is.
    pub fn entry(&self) -> Option<(usize, Option<CertField>)> {
        self.at
    }

    /// This error, as about entry `index` (its `field` when one is).
    pub(crate) fn at_entry(mut self, index: usize) -> TlsError {
        let field = self.at.and_then(|(_, field)| field);
        self.at = Some((index, field));
        self
    }

    /// This error, as about `field` of its entry.
    pub(crate) fn at_field(mut self, field: CertField) -> TlsError {
        let index = self.at.map_or(0, |(index, _)| index);
        self.at = Some((index, Some(field)));
        self
    }

    /// Shorthand for `self.kind().fault()`.
    pub fn fault(&self) -> Fault {
        self.kind.fault()
    }

    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> TlsError {
        TlsError {
            kind,
            message: message.into(),
            at: None,
            source: None,
        }
    }

    pub(crate) fn with_source(
        kind: ErrorKind,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> TlsError {
        TlsError {
            kind,
            message: message.into(),
            at: None,
            source: Some(Box::new(source)),
        }
    }

    /// A connection error from rustls. The rustls error is kept as the source and its text is
    /// the message, so a log line says exactly what the peer did.
    pub(crate) fn from_rustls(err: rustls::Error) -> TlsError {
        let kind = classify(&err);
        TlsError::with_source(kind, format!("tls: {err}"), err)
    }

    /// A copy for a poisoned connection that is asked to do more work after its error. The
    /// source is not cloneable in general, so the copy carries the kind and message only.
    pub(crate) fn replay(&self) -> TlsError {
        TlsError {
            at: self.at,
            ..TlsError::new(self.kind, self.message.clone())
        }
    }
}

/// Maps a rustls error to our kinds. `rustls::Error` is non-exhaustive: new variants land in
/// `Internal` until someone classifies them.
fn classify(err: &rustls::Error) -> ErrorKind {
    use rustls::Error as E;
    match err {
        E::InvalidMessage(_) | E::PeerSentOversizedRecord => ErrorKind::BadRecord,
        E::DecryptError => ErrorKind::Decrypt,
        E::PeerIncompatible(_) => ErrorKind::HandshakeFailure,
        E::NoApplicationProtocol => ErrorKind::NoApplicationProtocol,
        E::PeerMisbehaved(_)
        | E::InappropriateMessage { .. }
        | E::InappropriateHandshakeMessage { .. }
        | E::InvalidEncryptedClientHello(_) => ErrorKind::PeerMisbehaved,
        E::AlertReceived(_) => ErrorKind::AlertReceived,
        E::InvalidCertificate(_) => ErrorKind::InvalidCertificate,
        E::HandshakeNotComplete => ErrorKind::HandshakeNotComplete,
        _ => ErrorKind::Internal,
    }
}

/// Something wrong with a certificate entry that does not stop it from being served.
///
/// Displayed as `"{entry}: {what}"`, e.g. `certificate #1 (example.test): expired at
/// 2024-01-01 00:00:00 UTC (notAfter); clients will refuse it`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// The entry's name, from [`crate::CertSpec::name`].
    pub entry: String,
    /// What kind of problem.
    pub kind: WarningKind,
    /// The sentence to show the operator.
    pub message: String,
}

/// What a [`Warning`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WarningKind {
    /// The certificate's notAfter is in the past.
    Expired,
    /// The certificate's notBefore is in the future.
    NotYetValid,
    /// A configured host is not among the certificate's names: clients checking the name
    /// will refuse the certificate for that host.
    HostNotCovered,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.entry, self.message)
    }
}
