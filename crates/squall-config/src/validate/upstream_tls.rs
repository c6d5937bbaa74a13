//! An upstream's TLS keys: `tls`, `tls_server_name`, `ca`, `tls_verify`, `tls_certificate`
//! and `tls_certificate_key`. The files are only named here; the binary reads them at start-up,
//! on reload and in `squall check`, and reports what is wrong with them at these keys
//! ([`crate::Site::UpstreamCa`] and the others).

use std::net::IpAddr;
use std::path::PathBuf;

use crate::diagnostics::Report;
use crate::model::UpstreamTls;
use crate::raw::RawUpstream;

/// The upstream's TLS settings; `None` without `tls = true`, where the other keys are errors
/// (an operator who wrote `ca` expects TLS, not a silent cleartext connection).
pub(super) fn tls(raw: &RawUpstream, r: &mut Report) -> Option<UpstreamTls> {
    let on = raw.tls.as_ref().is_some_and(|t| *t.get_ref());
    if !on {
        let set = [
            (
                "tls_server_name",
                raw.tls_server_name.as_ref().map(|v| v.span()),
            ),
            ("ca", raw.ca.as_ref().map(|v| v.span())),
            ("tls_verify", raw.tls_verify.as_ref().map(|v| v.span())),
            (
                "tls_certificate",
                raw.tls_certificate.as_ref().map(|v| v.span()),
            ),
            (
                "tls_certificate_key",
                raw.tls_certificate_key.as_ref().map(|v| v.span()),
            ),
        ];
        for (key, span) in set {
            if let Some(span) = span {
                r.error(&span, format!("{key} needs tls = true"));
            }
        }
        return None;
    }
    let server_name = raw.tls_server_name.as_ref().map(|name| {
        let text = name.get_ref();
        let host = text.strip_suffix('.').unwrap_or(text);
        if host.parse::<IpAddr>().is_err() && !super::is_dns_name(host) {
            let why = "use a DNS name or an IP address, without a port";
            r.error(&name.span(), format!("bad tls_server_name {text:?}: {why}"));
        }
        host.to_ascii_lowercase()
    });
    let verify = raw.tls_verify.as_ref().is_none_or(|v| *v.get_ref());
    if let (false, Some(ca)) = (verify, &raw.ca) {
        r.error(
            &ca.span(),
            "ca is not used with tls_verify = false: remove one",
        );
    }
    let path = |value: &crate::raw::Str, r: &mut Report, key: &str| {
        if value.get_ref().is_empty() {
            r.error(&value.span(), format!("{key} is an empty path"));
        }
        PathBuf::from(value.get_ref())
    };
    let ca = raw.ca.as_ref().map(|v| path(v, r, "ca"));
    let client_cert = match (&raw.tls_certificate, &raw.tls_certificate_key) {
        (Some(cert), Some(key)) => Some((
            path(cert, r, "tls_certificate"),
            path(key, r, "tls_certificate_key"),
        )),
        (Some(cert), None) => {
            r.error(&cert.span(), "tls_certificate needs tls_certificate_key");
            None
        }
        (None, Some(key)) => {
            r.error(&key.span(), "tls_certificate_key needs tls_certificate");
            None
        }
        (None, None) => None,
    };
    Some(UpstreamTls {
        server_name,
        ca,
        verify,
        client_cert,
    })
}
