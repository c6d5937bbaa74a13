//! The SNI resolver: which certificate a handshake gets for the name the client asked for.
//!
//! The rules are the ones clients apply when they check a certificate's names (RFC 6125 §6.4.3,
//! as browsers implement it), so that the certificate we pick is one the client will accept:
//! an exact name matches itself, case-insensitively; `*.example.test` matches exactly one
//! label in place of the star (`a.example.test`, not `example.test` nor `a.b.example.test`).
//! An exact name wins over a wildcard. A name nothing matches, and a ClientHello without SNI
//! (old clients, clients connecting to an IP address), get the first `[[certificate]]` entry,
//! the default, as nginx's `default_server` does.
//!
//! Several entries may claim the same name, typically an ECDSA and an RSA certificate for one
//! site: the first whose key can sign with a scheme the client offers is chosen, so old
//! RSA-only clients still get a certificate while modern ones get the cheaper ECDSA one.
//!
//! The resolver also leaves the SNI it saw in a thread-local slot ([`take_captured_sni`]):
//! `rustls::unbuffered` has no accessor for the server name, and the resolver is called
//! synchronously, on the caller's thread, from inside the connection's `process_tls_records`.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// A host name from `hosts`, normalized (lowercase, no trailing dot).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum HostPattern {
    /// Matches this name only.
    Exact(Box<str>),
    /// `*.suffix`: matches one label followed by `.suffix`. Holds the suffix.
    Wildcard(Box<str>),
}

/// The longest DNS name (RFC 1035 §2.3.4), a bound on what we store per pattern.
const HOST_BYTES_MAX: usize = 253;

impl HostPattern {
    /// Parses and normalizes one `hosts` entry. The error is a sentence for the operator.
    pub(crate) fn parse(host: &str) -> Result<HostPattern, String> {
        let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        let (wild, rest) = match name.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, name.as_str()),
        };
        if rest.is_empty() || rest.len() > HOST_BYTES_MAX {
            return Err(format!("host {host:?} is not a DNS name"));
        }
        let label_ok = |label: &str| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        if !rest.split('.').all(label_ok) {
            return Err(format!(
                "host {host:?} is not a DNS name or a wildcard of the form \"*.example.com\""
            ));
        }
        Ok(match wild {
            true => HostPattern::Wildcard(rest.into()),
            false => HostPattern::Exact(rest.into()),
        })
    }

    /// Whether this pattern, taken as a certificate name, covers `host` (another pattern): the
    /// same exact name, the same wildcard, or an exact name one label below a wildcard.
    pub(crate) fn covers(&self, host: &HostPattern) -> bool {
        match (self, host) {
            (HostPattern::Exact(a), HostPattern::Exact(b)) => a == b,
            (HostPattern::Wildcard(a), HostPattern::Wildcard(b)) => a == b,
            (HostPattern::Wildcard(suffix), HostPattern::Exact(name)) => {
                parent(name) == Some(&**suffix)
            }
            (HostPattern::Exact(_), HostPattern::Wildcard(_)) => false,
        }
    }
}

/// `a.example.test` → `example.test`; `None` when there is no parent or the first label is
/// empty.
fn parent(name: &str) -> Option<&str> {
    match name.split_once('.') {
        Some((label, rest)) if !label.is_empty() && !rest.is_empty() => Some(rest),
        _ => None,
    }
}

/// Picks a certificate per ClientHello; shared by every connection of every worker.
#[derive(Debug)]
pub(crate) struct SniResolver {
    /// One per `[[certificate]]` entry, in config order; index 0 is the default.
    keys: Vec<Arc<CertifiedKey>>,
    /// Exact name → entries claiming it, in config order.
    exact: HashMap<Box<str>, Vec<usize>>,
    /// Wildcard suffix (`example.test` for `*.example.test`) → entries, in config order.
    wildcard: HashMap<Box<str>, Vec<usize>>,
}

/// The candidates for a name nothing matches: the first entry.
const DEFAULT_ENTRY: &[usize] = &[0];

impl SniResolver {
    /// Builds the tables. `entries` is in config order and must not be empty (the caller,
    /// `TlsStore::load`, rejects an empty list first).
    pub(crate) fn new(entries: Vec<(Arc<CertifiedKey>, Vec<HostPattern>)>) -> SniResolver {
        assert!(!entries.is_empty(), "TlsStore::load checks for no entries");
        let mut resolver = SniResolver {
            keys: Vec::with_capacity(entries.len()),
            exact: HashMap::new(),
            wildcard: HashMap::new(),
        };
        for (index, (key, hosts)) in entries.into_iter().enumerate() {
            resolver.keys.push(key);
            for host in hosts {
                let table = match host {
                    HostPattern::Exact(name) => resolver.exact.entry(name),
                    HostPattern::Wildcard(suffix) => resolver.wildcard.entry(suffix),
                };
                let list = table.or_default();
                // `hosts = ["a", "a"]` in one entry must not make it two candidates.
                if list.last() != Some(&index) {
                    list.push(index);
                }
            }
        }
        resolver
    }

    /// The entries that may serve `sni`, best first; never empty.
    pub(crate) fn candidates(&self, sni: Option<&str>) -> &[usize] {
        let Some(sni) = sni else {
            return DEFAULT_ENTRY;
        };
        let sni = sni.strip_suffix('.').unwrap_or(sni);
        // rustls hands us a lowercased name already; lowercase again only if it did not, so
        // the common case does not allocate.
        let lowered;
        let name = if sni.bytes().any(|b| b.is_ascii_uppercase()) {
            lowered = sni.to_ascii_lowercase();
            lowered.as_str()
        } else {
            sni
        };
        if let Some(list) = self.exact.get(name) {
            return list;
        }
        parent(name)
            .and_then(|suffix| self.wildcard.get(suffix))
            .map_or(DEFAULT_ENTRY, Vec::as_slice)
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        CAPTURED_SNI.set(hello.server_name().map(Box::from));
        let candidates = self.candidates(hello.server_name());
        if let [only] = candidates {
            return Some(self.keys[*only].clone());
        }
        let schemes = hello.signature_schemes();
        let usable = candidates
            .iter()
            .find(|&&i| self.keys[i].key.choose_scheme(schemes).is_some());
        // If none can sign for this client, still answer with the first: rustls then fails
        // the handshake with `handshake_failure`, which says more than `access_denied`.
        let index = usable.unwrap_or(&candidates[0]);
        Some(self.keys[*index].clone())
    }
}

thread_local! {
    /// The SNI of the last ClientHello resolved on this thread.
    static CAPTURED_SNI: Cell<Option<Box<str>>> = const { Cell::new(None) };
}

/// Forgets any SNI captured on this thread, before a call that may resolve a ClientHello.
pub(crate) fn clear_captured_sni() {
    CAPTURED_SNI.set(None);
}

/// Takes the SNI captured on this thread since [`clear_captured_sni`], if a ClientHello with a
/// server name was resolved.
pub(crate) fn take_captured_sni() -> Option<Box<str>> {
    CAPTURED_SNI.take()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::crypto::aws_lc_rs::sign::any_supported_type;
    use rustls_pki_types::PrivateKeyDer;

    fn key() -> Arc<CertifiedKey> {
        let pair = rcgen::generate_simple_self_signed(vec!["x.test".to_string()]).unwrap();
        let der = PrivateKeyDer::Pkcs8(pair.signing_key.serialize_der().into());
        let signer = any_supported_type(&der).unwrap();
        Arc::new(CertifiedKey::new(vec![pair.cert.der().clone()], signer))
    }

    fn resolver(hosts: &[&[&str]]) -> SniResolver {
        let entries = hosts
            .iter()
            .map(|list| {
                let patterns = list.iter().map(|h| HostPattern::parse(h).unwrap());
                (key(), patterns.collect())
            })
            .collect();
        SniResolver::new(entries)
    }

    #[test]
    fn exact_wildcard_and_default() {
        let r = resolver(&[
            &["default.test"],
            &["example.test", "www.example.test"],
            &["*.example.test"],
            &["*.b.example.test"],
        ]);
        let cases: &[(Option<&str>, &[usize])] = &[
            (Some("default.test"), &[0]),
            (Some("example.test"), &[1]),
            (Some("www.example.test"), &[1]), // exact beats the wildcard
            (Some("a.example.test"), &[2]),
            (Some("a.b.example.test"), &[3]),
            (Some("x.a.example.test"), &[0]), // a wildcard covers one label only
            (Some("unknown.test"), &[0]),
            (Some("test"), &[0]),
            (None, &[0]),
        ];
        for (sni, want) in cases {
            assert_eq!(r.candidates(*sni), *want, "sni {sni:?}");
        }
    }

    #[test]
    fn wildcard_does_not_match_its_own_suffix() {
        let r = resolver(&[&["default.test"], &["*.example.test"]]);
        assert_eq!(r.candidates(Some("example.test")), &[0]);
        assert_eq!(r.candidates(Some("a.b.example.test")), &[0]);
        assert_eq!(r.candidates(Some("a.example.test")), &[1]);
    }

    #[test]
    fn names_are_case_insensitive_and_ignore_a_trailing_dot() {
        let r = resolver(&[&["default.test"], &["Example.TEST", "*.Wild.Test."]]);
        for sni in [
            "example.test",
            "EXAMPLE.test",
            "example.test.",
            "A.wild.test",
            "b.WILD.TEST",
        ] {
            assert_eq!(r.candidates(Some(sni)), &[1], "sni {sni:?}");
        }
    }

    #[test]
    fn entries_sharing_a_name_are_candidates_in_order() {
        let r = resolver(&[&["a.test"], &["b.test", "b.test"], &["b.test"]]);
        assert_eq!(r.candidates(Some("b.test")), &[1, 2]);
    }

    #[test]
    fn host_patterns_are_validated() {
        for bad in [
            "", "*", "*.", "a..b", "*.*.a", "a.*.b", "a b", ".a", "x*.a", "*a.b",
        ] {
            assert!(HostPattern::parse(bad).is_err(), "{bad:?} must be rejected");
        }
        assert_eq!(
            HostPattern::parse("*.Example.Test.").unwrap(),
            HostPattern::Wildcard("example.test".into())
        );
        assert_eq!(
            HostPattern::parse("localhost").unwrap(),
            HostPattern::Exact("localhost".into())
        );
    }

    #[test]
    fn coverage_follows_the_same_rules() {
        let p = |s| HostPattern::parse(s).unwrap();
        assert!(p("*.a.test").covers(&p("x.a.test")));
        assert!(p("*.a.test").covers(&p("*.a.test")));
        assert!(!p("*.a.test").covers(&p("a.test")));
        assert!(!p("*.a.test").covers(&p("y.x.a.test")));
        assert!(!p("x.a.test").covers(&p("*.a.test")));
        assert!(p("x.a.test").covers(&p("x.a.test")));
    }
}
