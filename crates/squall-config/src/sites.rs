//! Where the values that start-up acts on sit in the file, for problems found after validation.
//!
//! Validation cannot know that a certificate file is missing, that a key does not match its
//! certificate, or that the access log's directory is read-only: the binary finds those when
//! it opens the files, at start-up, on reload and in `squall check`. [`Sites`] lets it report
//! them as `FILE:LINE:COL: message` at the key that named the file, as every other problem is.
//! Positions are kept beside the [`crate::Config`] rather than in it, so that moving a key or
//! adding a comment does not change the config (nor its hash).

use toml::Spanned;

use crate::diagnostics::{Diagnostic, Source};
use crate::raw::RawConfig;

/// A value of the config file that the binary may find wrong when it acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    /// The `[[certificate]]` entry with this index (its header).
    Certificate(usize),
    /// `cert = ...` of that entry (or the entry, with `self_signed`).
    CertificateCert(usize),
    /// `key = ...` of that entry (or the entry, with `self_signed`).
    CertificateKey(usize),
    /// `hosts = [...]` of that entry.
    CertificateHosts(usize),
    /// `tls = true` of the `[[upstream]]` with this index (or the entry's header).
    UpstreamTls(usize),
    /// `ca = ...` of that upstream.
    UpstreamCa(usize),
    /// `tls_certificate = ...` of that upstream.
    UpstreamCert(usize),
    /// `tls_certificate_key = ...` of that upstream.
    UpstreamKey(usize),
    /// `[log] access = ...`.
    AccessLog,
    /// `[admin] listen = ...`.
    Admin,
    /// `address = ...` of the `[[listen]]` with this index.
    Listen(usize),
    /// `[server] workers = ...`.
    Workers,
    /// `[server] control = ...`.
    Control,
    /// The path of `error_pages` for this status, in the `[[vhost]]` with this index, or in
    /// `[server]` for `None`.
    ErrorPage(Option<usize>, u16),
    /// `root = ...` of the route with this id (the vhosts' routes counted in file order).
    Root(usize),
    /// `[tls] ticket_key_file = ...`.
    TicketKeyFile,
    /// The file as a whole.
    File,
}

/// The position of every [`Site`] in one config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sites {
    file: String,
    /// 1-based line and column of each site the file has.
    positions: Vec<(Site, usize, usize)>,
}

impl Sites {
    /// Sites of a config that did not come from a file the operator can open (tests).
    pub fn none(file: &str) -> Sites {
        Sites {
            file: file.to_owned(),
            positions: Vec::new(),
        }
    }

    /// The file name diagnostics use.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// `message` at `site`; at the enclosing entry when the key is absent (a `self_signed`
    /// entry has no `key`), or about the whole file when neither is in it.
    pub fn diagnostic(&self, site: Site, message: impl Into<String>) -> Diagnostic {
        let message = message.into().replace(['\n', '\r'], " ");
        let fallback = match site {
            Site::CertificateCert(i) | Site::CertificateKey(i) | Site::CertificateHosts(i) => {
                Site::Certificate(i)
            }
            Site::UpstreamCa(i) | Site::UpstreamCert(i) | Site::UpstreamKey(i) => {
                Site::UpstreamTls(i)
            }
            _ => Site::File,
        };
        let found = [site, fallback]
            .into_iter()
            .find_map(|wanted| (self.positions.iter()).find(|(s, _, _)| *s == wanted));
        match found {
            Some(&(_, line, col)) => Diagnostic {
                file: self.file.clone(),
                line,
                col,
                message,
            },
            None => Diagnostic::whole_file(&self.file, message),
        }
    }
}

/// The sites of `raw`, read from `source`.
pub(crate) fn collect(raw: &RawConfig, source: &Source) -> Sites {
    let mut positions = Vec::new();
    let mut add = |site: Site, span: std::ops::Range<usize>| {
        let (line, col) = source.position(span.start);
        positions.push((site, line, col));
    };
    for (i, entry) in raw.certificate.iter().enumerate() {
        add(Site::Certificate(i), entry.span());
        let entry = entry.get_ref();
        let spans = [
            (
                Site::CertificateCert(i),
                entry.cert.as_ref().map(Spanned::span),
            ),
            (
                Site::CertificateKey(i),
                entry.key.as_ref().map(Spanned::span),
            ),
            (
                Site::CertificateHosts(i),
                entry.hosts.as_ref().map(Spanned::span),
            ),
        ];
        for (site, span) in spans {
            if let Some(span) = span {
                add(site, span);
            }
        }
    }
    for (i, upstream) in raw.upstream.iter().enumerate() {
        let u = upstream.get_ref();
        let tls = u.tls.as_ref().map_or(upstream.span(), Spanned::span);
        add(Site::UpstreamTls(i), tls);
        for (site, value) in [
            (Site::UpstreamCa(i), &u.ca),
            (Site::UpstreamCert(i), &u.tls_certificate),
            (Site::UpstreamKey(i), &u.tls_certificate_key),
        ] {
            if let Some(value) = value {
                add(site, value.span());
            }
        }
    }
    if let Some(keys) = raw
        .tls
        .as_ref()
        .and_then(|t| t.get_ref().ticket_key_file.as_ref())
    {
        add(Site::TicketKeyFile, keys.span());
    }
    if let Some(access) = &raw.log.access {
        add(Site::AccessLog, access.span());
    }
    if let Some(admin) = &raw.admin {
        add(Site::Admin, admin.listen.span());
    }
    for (i, listen) in raw.listen.iter().enumerate() {
        add(Site::Listen(i), listen.get_ref().address.span());
    }
    if let Some(workers) = &raw.server.workers {
        add(Site::Workers, workers.span());
    }
    if let Some(control) = &raw.server.control {
        add(Site::Control, control.span());
    }
    let vhost_pages = (raw.vhost.iter().enumerate())
        .filter_map(|(i, v)| Some((Some(i), v.get_ref().error_pages.as_ref()?)));
    let server_pages = raw.server.error_pages.as_ref().map(|p| (None, p));
    for (vhost, pages) in server_pages.into_iter().chain(vhost_pages) {
        for (key, value) in &pages.get_ref().0 {
            if let Ok(status) = key.get_ref().parse::<u16>() {
                add(Site::ErrorPage(vhost, status), value.span());
            }
        }
    }
    let routes = raw.vhost.iter().flat_map(|v| &v.get_ref().route);
    for (id, route) in routes.enumerate() {
        if let Some(root) = &route.get_ref().root {
            add(Site::Root(id), root.span());
        }
    }
    Sites {
        file: source.file.to_owned(),
        positions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_site_is_at_its_value_and_absent_keys_fall_back() {
        let text = "[log]\naccess = \"a.log\"\n\n[[certificate]]\nhosts = [\"a.test\"]\n\
                    cert = \"a.pem\"\nkey = \"a.key\"\n\n[[certificate]]\nself_signed = true\n";
        let source = Source::new("f.toml", text);
        let raw = crate::syntax::deserialize(&source).unwrap();
        let sites = collect(&raw, &source);
        let at = |site| {
            let d = sites.diagnostic(site, "m");
            (d.line, d.col)
        };
        assert_eq!(at(Site::AccessLog), (2, 10));
        assert_eq!(at(Site::CertificateHosts(0)), (5, 9));
        assert_eq!(at(Site::CertificateCert(0)), (6, 8));
        assert_eq!(at(Site::CertificateKey(0)), (7, 7));
        // A self-signed entry has no key: its problems are the entry's.
        assert_eq!(at(Site::CertificateKey(1)), at(Site::Certificate(1)));
        assert_eq!(at(Site::Admin), (0, 0));
        assert_eq!(
            sites.diagnostic(Site::File, "two\nlines").to_string(),
            "f.toml: two lines"
        );
    }
}
