//! The certificate store and the per-listener acceptors built from it.
//!
//! One [`TlsStore`] per loaded config holds what all workers share: the SNI resolver over the
//! `[[certificate]]` entries, the TLS 1.3 ticket key and the TLS 1.2 session-id cache. Sharing
//! the last two is what lets a client resume on whichever core the kernel's SO_REUSEPORT
//! hashing lands its next connection: a ticket sealed by worker 3 opens on worker 0.
//!
//! Resumption is stateless for TLS 1.3 (and for TLS 1.2 clients that support RFC 5077
//! tickets): the session travels in a ticket encrypted under a key only this process knows,
//! rotated every 6 hours by rustls's `Ticketer` (a ticket stays valid for one more period, so
//! 12 hours at most). Older TLS 1.2 clients resume by session id, from a bounded in-memory
//! cache ([`SESSION_CACHE_ENTRIES_MAX`]). 0-RTT is off: early data can be replayed, and an
//! HTTP proxy cannot know which requests are safe to replay to its origins.
//!
//! With `[tls] ticket_key_file`, [`TlsStore::with_ticket_keys`] puts the file's keys in place
//! of the rotating key (`ticket.rs`): several processes, on one machine or behind one
//! balancer, then open each other's tickets.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::{ProducesTickets, ServerSessionMemoryCache, StoresServerSessions};

use crate::Alpn;
use crate::conn::Engine;
use crate::error::{ErrorKind, TlsError, Warning};
use crate::load::load_entry;
use crate::resolver::SniResolver;
use crate::ticket::TicketKeys;

/// Where an entry's certificate and key come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// A PEM chain (end-entity certificate first, then intermediates) and a PEM private key
    /// (PKCS#8, PKCS#1 RSA or SEC1 EC): RSA, ECDSA P-256/P-384 or Ed25519.
    Pem {
        /// The chain file (`cert = ...`).
        cert_path: PathBuf,
        /// The key file (`key = ...`).
        key_path: PathBuf,
    },
    /// `self_signed = true`: an ECDSA P-256 certificate for the entry's hosts, generated in
    /// memory at each load (for demos and tests).
    SelfSigned,
}

/// One `[[certificate]]` entry, as the config crate hands it over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertSpec {
    /// How errors and warnings name the entry, e.g. `certificate #1 (example.test)` or
    /// `squall.toml:12:1: certificate`.
    pub name: String,
    /// Exact names or `*.suffix` wildcards this entry serves. Empty: the certificate's own DNS
    /// names (PEM), or `localhost` (self-signed).
    pub hosts: Vec<String>,
    /// Where the certificate and key come from.
    pub source: KeySource,
}

/// The ALPN id of HTTP/3 (RFC 9114 §3.1), offered only inside QUIC.
pub const H3_ALPN: &[u8] = b"h3";

/// The most TLS 1.2 sessions remembered for session-id resumption, across all workers.
/// A session is a few hundred bytes, so this caps the cache near 20 MiB; beyond it the oldest
/// sessions are forgotten and those clients do a full handshake.
pub const SESSION_CACHE_ENTRIES_MAX: usize = 65_536;

/// Everything loaded once per config (or reload): the certificates behind an SNI resolver,
/// the shared ticket key and the TLS 1.2 session cache. `Send + Sync`; cloning is cheap and
/// shares everything.
#[derive(Clone, Debug)]
pub struct TlsStore {
    /// A complete config with an empty ALPN list; each acceptor clones it and sets its own.
    base: Arc<ServerConfig>,
    /// rustls's own rotating ticket key, kept across reloads even while a key file seals the
    /// tickets (`base.ticketer`), so that dropping the file on a reload falls back to it.
    rotating: Arc<dyn ProducesTickets>,
    entries: usize,
}

impl TlsStore {
    /// Loads every entry (the first is the default certificate) with fresh resumption state.
    ///
    /// Errors name the entry and, for files, the path: unreadable file, no certificate or key
    /// in it, unsupported key, key not matching the certificate, bad host pattern, no entry at
    /// all. Warnings (expired, not yet valid, host not covered) do not stop the load.
    pub fn load(certs: &[CertSpec]) -> Result<(TlsStore, Vec<Warning>), TlsError> {
        TlsStore::load_at(certs, SystemTime::now())
    }

    /// [`TlsStore::load`] with the time to check certificate validity against, for tests.
    pub fn load_at(
        certs: &[CertSpec],
        now: SystemTime,
    ) -> Result<(TlsStore, Vec<Warning>), TlsError> {
        let ticketer = rustls::crypto::aws_lc_rs::Ticketer::new().map_err(|e| {
            TlsError::with_source(ErrorKind::Internal, "cannot create the ticket key", e)
        })?;
        let sessions = ServerSessionMemoryCache::new(SESSION_CACHE_ENTRIES_MAX);
        TlsStore::build(certs, now, ticketer, sessions)
    }

    /// Loads `certs` as a new store that keeps this store's resumption state (ticket key and
    /// session cache), for a SIGHUP reload: clients resume across the reload, new handshakes
    /// get the new certificates, and connections on the old store are untouched.
    ///
    /// A resumed session skips the certificate, so a client may resume a session made under
    /// a certificate the reload replaced (for up to 12 hours). If that matters (a compromised
    /// key), use [`TlsStore::load`] instead, which also invalidates every ticket.
    pub fn reload(&self, certs: &[CertSpec]) -> Result<(TlsStore, Vec<Warning>), TlsError> {
        self.reload_at(certs, SystemTime::now())
    }

    /// [`TlsStore::reload`] with the time to check certificate validity against.
    pub fn reload_at(
        &self,
        certs: &[CertSpec],
        now: SystemTime,
    ) -> Result<(TlsStore, Vec<Warning>), TlsError> {
        let ticketer = self.rotating.clone();
        let sessions = self.base.session_storage.clone();
        TlsStore::build(certs, now, ticketer, sessions)
    }

    /// The same store with tickets sealed by the keys of a ticket key file (`[tls]
    /// ticket_key_file`, see [`TicketKeys`]) instead of rustls's per-process rotating key, so
    /// that processes with the same file resume each other's clients; `None` goes back to the
    /// rotating key. Acceptors made before keep the ticketer they had.
    pub fn with_ticket_keys(mut self, keys: Option<Arc<TicketKeys>>) -> TlsStore {
        let ticketer: Arc<dyn ProducesTickets> = match keys {
            Some(keys) => keys,
            None => self.rotating.clone(),
        };
        Arc::make_mut(&mut self.base).ticketer = ticketer;
        self
    }

    /// A server config for one listener, with its ALPN protocols in order of preference (the
    /// listener's `protocols`, TLS ones only). Cheap: clones a handful of `Arc`s.
    ///
    /// With a non-empty list, a client that offers ALPN but none of these protocols gets the
    /// `no_application_protocol` alert (RFC 7301 §3.2); a client that offers no ALPN is
    /// served, and [`crate::TlsConn::alpn`] is `None` (speak HTTP/1.1). With an empty list,
    /// ALPN is not negotiated at all.
    pub fn acceptor(&self, alpn: &[Alpn]) -> Acceptor {
        let mut config = (*self.base).clone();
        config.alpn_protocols.clear();
        for protocol in alpn {
            let id = protocol.id().to_vec();
            if !config.alpn_protocols.contains(&id) {
                config.alpn_protocols.push(id);
            }
        }
        Acceptor {
            config: Arc::new(config),
            engine: Engine::default(),
        }
    }

    /// The TLS config of a QUIC listener (RFC 9001): the same certificates, SNI resolver,
    /// ticket keys and key exchange groups (X25519MLKEM768 first) as the TCP listeners', TLS
    /// 1.3 only, ALPN `h3` alone. `early_data`: resumed clients may send 0-RTT data (QUIC wants
    /// the limit at 0 or at its maximum, `u32::MAX`: QUIC's own flow control bounds it).
    ///
    /// With early data, resumption is stateful: tickets are ids into this process's session
    /// cache, each good for one resumption, instead of sealed by the ticket key. rustls
    /// accepts 0-RTT only so (RFC 8446 §8.1): an attacker who replays a client's first flight
    /// finds its ticket already used, and gets no early data.
    pub fn quic_config(&self, early_data: bool) -> Arc<ServerConfig> {
        let mut config = (*self.base).clone();
        config.alpn_protocols = vec![H3_ALPN.to_vec()];
        config.max_early_data_size = if early_data { u32::MAX } else { 0 };
        if early_data {
            config.ticketer = Arc::new(StatefulOnly);
        }
        Arc::new(config)
    }

    /// How many certificate entries were loaded.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Always false: a store has at least the default certificate.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    fn build(
        certs: &[CertSpec],
        now: SystemTime,
        ticketer: Arc<dyn ProducesTickets>,
        sessions: Arc<dyn StoresServerSessions>,
    ) -> Result<(TlsStore, Vec<Warning>), TlsError> {
        if certs.is_empty() {
            let msg =
                "a TLS listener needs at least one [[certificate]] (the first is the default)";
            return Err(TlsError::new(ErrorKind::NoCertificates, msg));
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut warnings = Vec::new();
        let mut entries = Vec::with_capacity(certs.len());
        for (index, spec) in certs.iter().enumerate() {
            let loaded =
                load_entry(spec, &provider, now, &mut warnings).map_err(|e| e.at_entry(index))?;
            entries.push((loaded.key, loaded.hosts));
        }
        let resolver = Arc::new(SniResolver::new(entries));
        let base = server_config(provider, resolver, ticketer.clone(), sessions)?;
        let store = TlsStore {
            base: Arc::new(base),
            rotating: ticketer,
            entries: certs.len(),
        };
        Ok((store, warnings))
    }
}

/// A ticketer that seals no ticket, so that rustls issues stateful ones (ids into the
/// session cache), the only kind it accepts early data with.
#[derive(Debug)]
struct StatefulOnly;

impl ProducesTickets for StatefulOnly {
    fn enabled(&self) -> bool {
        false
    }

    fn lifetime(&self) -> u32 {
        0
    }

    fn encrypt(&self, _plain: &[u8]) -> Option<Vec<u8>> {
        None
    }

    fn decrypt(&self, _cipher: &[u8]) -> Option<Vec<u8>> {
        None
    }
}

/// The listener-independent part of every acceptor's config.
fn server_config(
    provider: Arc<CryptoProvider>,
    resolver: Arc<SniResolver>,
    ticketer: Arc<dyn ProducesTickets>,
    sessions: Arc<dyn StoresServerSessions>,
) -> Result<ServerConfig, TlsError> {
    let internal = |e| TlsError::with_source(ErrorKind::Internal, "tls: server config", e);
    // The provider's defaults: TLS13_AES_256_GCM, TLS13_AES_128_GCM, TLS13_CHACHA20 and the
    // ECDHE TLS 1.2 suites; key exchange X25519MLKEM768 first, then X25519, P-256, P-384.
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(internal)?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.ticketer = ticketer;
    config.session_storage = sessions;
    config.max_early_data_size = 0; // 0-RTT off: see the module header.
    config.send_half_rtt_data = false;
    // Prove once, here, that connections can be made from this config, so that
    // `TlsConn::new` may treat a failure as impossible.
    rustls::ServerConnection::new(Arc::new(config.clone())).map_err(internal)?;
    Ok(config)
}

/// A server config for one listener. Clone it into each worker; `Send + Sync`.
#[derive(Clone, Debug)]
pub struct Acceptor {
    pub(crate) config: Arc<ServerConfig>,
    pub(crate) engine: Engine,
}

impl Acceptor {
    /// The same acceptor, making connections on another rustls API (for benchmarks and tests;
    /// the default is the faster one).
    pub fn with_engine(mut self, engine: Engine) -> Acceptor {
        self.engine = engine;
        self
    }

    /// The engine new connections use.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// The ALPN protocols offered, in order of preference.
    pub fn alpn(&self) -> Vec<Alpn> {
        let ids = self.config.alpn_protocols.iter();
        ids.filter_map(|id| Alpn::from_id(id)).collect()
    }
}
