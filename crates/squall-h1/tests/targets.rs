//! The request target as the decoder hands it on, fed at every split: normalised once
//! (`squall_h1::target`), absolute-form made origin-form with its authority as Host, and the
//! target as received kept for `$request_uri` and the access log.

mod common;

use common::{decode, error_kind};
use http::StatusCode;
use squall_h1::{ErrorKind, Limits};

fn request(target: &str, host: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nX: y\r\n\r\n").into_bytes()
}

#[test]
fn targets_are_normalised_once_and_the_received_one_kept() {
    let table: &[(&str, &str)] = &[
        ("/", "/"),
        ("/a/b?c=%2e", "/a/b?c=%2e"),
        ("//private/secret.txt", "/private/secret.txt"),
        ("/./private/secret.txt", "/private/secret.txt"),
        ("/%70rivate/secret.txt", "/private/secret.txt"),
        ("/x/../admin/panel?a=1", "/admin/panel?a=1"),
        ("/x/%2e%2E/admin/panel", "/admin/panel"),
        ("/a%2fb%3b", "/a%2Fb%3B"),
        ("/a/b/..", "/a/"),
    ];
    for (target, normal) in table {
        let outcome = decode(&request(target, "a.test"));
        let head = outcome.head();
        assert_eq!(head.uri, *normal, "{target}");
        let received = (target != normal).then_some(target.as_bytes());
        let got = head.received_target.as_deref().map(|r| &r[..]);
        assert_eq!(got, received, "{target}");
        assert_eq!(head.request_uri(), target.as_bytes());
        assert_eq!(head.headers.get("x").unwrap(), "y");
    }
}

#[test]
fn targets_that_cannot_be_read_are_400() {
    for target in [
        "/..",
        "/a/../../b",
        "/%2e%2e/x",
        "/%",
        "/%g0",
        "/a%00",
        "/%C0%AE%C0%AE/",
    ] {
        let kind = error_kind(&request(target, "a.test"), Limits::default());
        assert_eq!(kind, ErrorKind::BadUri, "{target}");
        assert_eq!(kind.status(), StatusCode::BAD_REQUEST);
    }
}

/// RFC 9112 §3.2.2: the authority of an absolute-form target replaces Host, and the target
/// goes on in origin-form, normalised like any other.
#[test]
fn absolute_form_becomes_origin_form_with_its_authority_as_host() {
    let table: &[(&str, &str, &str)] = &[
        ("http://app.test/admin/panel", "app.test", "/admin/panel"),
        ("https://app.test:8443/a/../b?q", "app.test:8443", "/b?q"),
        ("http://app.test", "app.test", "/"),
        ("http://app.test?q=1", "app.test", "/?q=1"),
        ("http://[::1]:80//x", "[::1]:80", "/x"),
    ];
    for (target, host, normal) in table {
        let outcome = decode(&request(target, "public.test"));
        let head = outcome.head();
        assert_eq!(head.uri, *normal, "{target}");
        assert_eq!(head.uri.authority(), None, "{target}");
        let hosts: Vec<_> = head.headers.get_all("host").iter().collect();
        assert_eq!(hosts, [*host], "{target}");
        assert!(head.received_target.is_some());
    }
}
