//! `[[upstream]]` TLS keys: what they parse to, and each mistake's diagnostic.

use std::path::PathBuf;

use squall_config::{Site, UpstreamTls, parse, parse_with_sites};

const LISTEN: &str = "\n[[listen]]\naddress = \"127.0.0.1:8080\"\n";

fn upstream(keys: &str) -> String {
    format!(
        "[[upstream]]\nname = \"api\"\nservers = [{{ address = \"api.test:443\" }}]\n{keys}{LISTEN}"
    )
}

fn tls(keys: &str) -> Option<UpstreamTls> {
    let config = parse(&upstream(keys), "test.toml").unwrap();
    config.upstream[0].tls.clone()
}

fn errors(keys: &str) -> String {
    match parse(&upstream(keys), "test.toml") {
        Ok(_) => "(parsed)".into(),
        Err(d) => d.to_string(),
    }
}

#[test]
fn defaults_and_every_key() {
    assert_eq!(tls(""), None);
    assert_eq!(tls("tls = false\n"), None);
    assert_eq!(
        tls("tls = true\n"),
        Some(UpstreamTls {
            server_name: None,
            ca: None,
            verify: true,
            client_cert: None,
        })
    );
    let keys = "tls = true\ntls_server_name = \"Origin.Example.\"\nca = \"ca.pem\"\n\
                tls_certificate = \"c.pem\"\ntls_certificate_key = \"c.key\"\n";
    assert_eq!(
        tls(keys),
        Some(UpstreamTls {
            server_name: Some("origin.example".into()),
            ca: Some(PathBuf::from("ca.pem")),
            verify: true,
            client_cert: Some((PathBuf::from("c.pem"), PathBuf::from("c.key"))),
        })
    );
    let off = tls("tls = true\ntls_verify = false\ntls_server_name = \"10.0.0.1\"\n").unwrap();
    assert!(!off.verify);
    assert_eq!(off.server_name.as_deref(), Some("10.0.0.1"));
}

#[test]
fn mistakes() {
    let cases = [
        ("ca = \"ca.pem\"\n", "test.toml:4:6: ca needs tls = true"),
        (
            "tls = false\ntls_verify = false\n",
            "test.toml:5:14: tls_verify needs tls = true",
        ),
        (
            "tls = true\ntls_server_name = \"a b\"\n",
            "test.toml:5:19: bad tls_server_name \"a b\": use a DNS name or an IP address, without a port",
        ),
        (
            "tls = true\ntls_server_name = \"a.test:443\"\n",
            "test.toml:5:19: bad tls_server_name \"a.test:443\": use a DNS name or an IP address, without a port",
        ),
        (
            "tls = true\ntls_certificate = \"c.pem\"\n",
            "test.toml:5:19: tls_certificate needs tls_certificate_key",
        ),
        (
            "tls = true\ntls_certificate_key = \"c.key\"\n",
            "test.toml:5:23: tls_certificate_key needs tls_certificate",
        ),
        (
            "tls = true\ntls_verify = false\nca = \"ca.pem\"\n",
            "test.toml:6:6: ca is not used with tls_verify = false: remove one",
        ),
        (
            "tls = true\nca = \"\"\n",
            "test.toml:5:6: ca is an empty path",
        ),
        (
            "tls = \"yes\"\n",
            "test.toml:4:7: invalid type for \"tls\" in [[upstream]]: string \"yes\", expected a boolean",
        ),
    ];
    let failures: Vec<String> = (cases.iter())
        .filter(|(keys, expected)| errors(keys) != *expected)
        .map(|(keys, expected)| format!("{keys}: expected {expected}, got {}", errors(keys)))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_files_have_sites_for_the_binary_to_report_at() {
    let text = upstream(
        "tls = true\nca = \"ca.pem\"\ntls_certificate = \"c.pem\"\ntls_certificate_key = \"c.key\"\n",
    );
    let (_, sites) = parse_with_sites(&text, "test.toml").unwrap();
    let at = |site| sites.diagnostic(site, "m").to_string();
    assert_eq!(at(Site::UpstreamTls(0)), "test.toml:4:7: m");
    assert_eq!(at(Site::UpstreamCa(0)), "test.toml:5:6: m");
    assert_eq!(at(Site::UpstreamCert(0)), "test.toml:6:19: m");
    assert_eq!(at(Site::UpstreamKey(0)), "test.toml:7:23: m");
}
