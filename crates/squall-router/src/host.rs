//! Vhost selection by host name: exact names first, then the wildcard with the longest suffix,
//! then the default vhost `"*"` (nginx's `server_name` order, minus regex names).
//!
//! Names are compared case-insensitively (RFC 9110 §4.2.3: the host is case-insensitive) and a
//! trailing dot is ignored (`example.com.` is the same absolute name). The request's host is
//! lower-cased into a stack buffer, so selection allocates nothing.

use std::collections::HashMap;

use crate::error::BuildError;
use crate::hash::FxBuild;

/// The longest host name that can select an exact or wildcard vhost: a DNS name has at most 255
/// octets (RFC 1035 §2.3.4). A longer Host header can only get the default vhost.
pub(crate) const HOST_BYTES_MAX: usize = 255;

/// Host name -> vhost index.
pub(crate) struct HostTable {
    exact: HashMap<Box<[u8]>, usize, FxBuild>,
    /// Keyed by the suffix after the `*`, dot included: `"*.example.com"` is `".example.com"`.
    wildcard: HashMap<Box<[u8]>, usize, FxBuild>,
    default: Option<usize>,
}

enum HostKind {
    Default,
    Exact(Vec<u8>),
    Wildcard(Vec<u8>),
}

impl HostTable {
    /// Builds the table from each vhost's host list, in spec order.
    pub(crate) fn new<'s>(vhosts: impl Iterator<Item = &'s [String]>) -> Result<Self, BuildError> {
        let mut table = HostTable {
            exact: HashMap::default(),
            wildcard: HashMap::default(),
            default: None,
        };
        // Where each host was first listed, to name both vhosts in a duplicate error.
        for (vhost, hosts) in vhosts.enumerate() {
            if hosts.is_empty() {
                return Err(BuildError::NoHosts { vhost });
            }
            for host in hosts {
                let duplicate = |first| BuildError::DuplicateHost {
                    vhost,
                    host: host.clone(),
                    first,
                };
                let previous = match classify(host).map_err(|reason| BuildError::BadHost {
                    vhost,
                    host: host.clone(),
                    reason,
                })? {
                    HostKind::Default => table.default.replace(vhost),
                    HostKind::Exact(name) => table.exact.insert(name.into(), vhost),
                    HostKind::Wildcard(suffix) => table.wildcard.insert(suffix.into(), vhost),
                };
                if let Some(first) = previous {
                    return Err(duplicate(first));
                }
            }
        }
        Ok(table)
    }

    /// The vhost for a request's host (port already stripped by the caller).
    pub(crate) fn select(&self, host: Option<&str>) -> Option<usize> {
        let host = host.unwrap_or("");
        let host = host.strip_suffix('.').unwrap_or(host);
        let named = !self.exact.is_empty() || !self.wildcard.is_empty();
        if !named || host.is_empty() || host.len() > HOST_BYTES_MAX {
            return self.default;
        }
        // Clients send lower case almost always; copy only when there is something to fold.
        let mut buf;
        // A fold without early exit, so it vectorizes.
        let upper = host
            .bytes()
            .fold(false, |upper, b| upper | b.is_ascii_uppercase());
        let name = if upper {
            buf = [0u8; HOST_BYTES_MAX];
            let name = &mut buf[..host.len()];
            name.copy_from_slice(host.as_bytes());
            name.make_ascii_lowercase();
            &*name
        } else {
            host.as_bytes()
        };
        if let Some(&vhost) = self.exact.get(name) {
            return Some(vhost);
        }
        if !self.wildcard.is_empty() {
            // The leftmost dot gives the longest suffix; position 0 is skipped because `*` must
            // stand for a non-empty label.
            let dots = name.iter().enumerate().skip(1).filter(|(_, b)| **b == b'.');
            for (at, _) in dots {
                if let Some(&vhost) = self.wildcard.get(&name[at..]) {
                    return Some(vhost);
                }
            }
        }
        self.default
    }
}

/// Validates and normalizes one configured host (lower case, no trailing dot).
fn classify(host: &str) -> Result<HostKind, &'static str> {
    if host == "*" {
        return Ok(HostKind::Default);
    }
    let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    if name.is_empty() {
        return Err("empty");
    }
    if name.len() > HOST_BYTES_MAX {
        return Err("longer than 255 bytes, the DNS limit");
    }
    if name
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control() || b == b'/')
    {
        return Err("contains whitespace, a control character or '/'");
    }
    if name.contains(':') && !name.starts_with('[') {
        return Err("has a port; hosts are matched without their port");
    }
    if name.starts_with('.') {
        return Err("starts with '.'; list both \"example.com\" and \"*.example.com\"");
    }
    if let Some(suffix) = name.strip_prefix('*') {
        if suffix.len() < 2 || !suffix.starts_with('.') || suffix.contains('*') {
            return Err("a wildcard must be \"*.\" followed by a domain");
        }
        return Ok(HostKind::Wildcard(suffix.as_bytes().to_vec()));
    }
    if name.contains('*') {
        return Err("'*' may only be the whole host or its first label");
    }
    Ok(HostKind::Exact(name.into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(vhosts: &[&[&str]]) -> Result<HostTable, BuildError> {
        let owned: Vec<Vec<String>> = vhosts
            .iter()
            .map(|hs| hs.iter().map(|h| h.to_string()).collect())
            .collect();
        HostTable::new(owned.iter().map(Vec::as_slice))
    }

    #[test]
    fn exact_then_longest_wildcard_then_default() {
        let t = table(&[
            &["*"],
            &["example.com", "www.example.com"],
            &["*.example.com"],
            &["*.b.example.com"],
            &["A.b.Example.com."],
        ])
        .unwrap();
        assert_eq!(t.select(Some("example.com")), Some(1));
        assert_eq!(t.select(Some("WWW.Example.COM.")), Some(1));
        assert_eq!(t.select(Some("x.example.com")), Some(2));
        assert_eq!(t.select(Some("x.y.example.com")), Some(2));
        assert_eq!(t.select(Some("x.b.example.com")), Some(3));
        assert_eq!(
            t.select(Some("a.b.example.com")),
            Some(4),
            "exact beats wildcard"
        );
        assert_eq!(t.select(Some("b.example.com")), Some(2));
        assert_eq!(t.select(Some(".example.com")), Some(0), "empty label");
        assert_eq!(t.select(Some("example.org")), Some(0));
        assert_eq!(t.select(None), Some(0));
        assert_eq!(t.select(Some("")), Some(0));
        assert_eq!(t.select(Some(&"a".repeat(300))), Some(0));
    }

    #[test]
    fn no_default_means_none() {
        let t = table(&[&["example.com"], &["*.example.com"]]).unwrap();
        assert_eq!(t.select(Some("example.org")), None);
        assert_eq!(t.select(None), None);
        assert_eq!(t.select(Some("a.example.com")), Some(1));
    }

    #[test]
    fn rejects_bad_and_duplicate_hosts() {
        for bad in [
            "",
            ".",
            "*.",
            "*x.com",
            "a.*.com",
            "*.a.*",
            ".example.com",
            "a b",
            "a/b",
            "a:80",
        ] {
            let err = table(&[&[bad]])
                .err()
                .unwrap_or_else(|| panic!("{bad:?} accepted"));
            assert!(
                matches!(err, BuildError::BadHost { vhost: 0, .. }),
                "{bad:?}: {err}"
            );
        }
        assert!(table(&[&["[::1]"]]).is_ok());
        let err = table(&[&["a.com"], &["x.com", "A.COM."]]).err().unwrap();
        assert!(
            matches!(
                err,
                BuildError::DuplicateHost {
                    vhost: 1,
                    first: 0,
                    ..
                }
            ),
            "{err}"
        );
        let err = table(&[&["*", "*"]]).err().unwrap();
        assert!(
            matches!(
                err,
                BuildError::DuplicateHost {
                    vhost: 0,
                    first: 0,
                    ..
                }
            ),
            "{err}"
        );
        let err = table(&[&["*.a.com"], &["*.A.com"]]).err().unwrap();
        assert!(
            matches!(
                err,
                BuildError::DuplicateHost {
                    vhost: 1,
                    first: 0,
                    ..
                }
            ),
            "{err}"
        );
        let err = table(&[&["a.com"], &[]]).err().unwrap();
        assert!(matches!(err, BuildError::NoHosts { vhost: 1 }), "{err}");
    }
}
