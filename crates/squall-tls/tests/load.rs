//! Loading `[[certificate]]` entries: PEM RSA, ECDSA and Ed25519 files written by rcgen,
//! self-signed entries, and every way an entry can be wrong, each error naming the entry
//! (and the file); an expired certificate is only a warning.

mod common;

use std::time::{Duration, SystemTime};

use common::{Alg, ClientOpts, Pair, TempDir, client_config, generate, generate_with, self_signed};
use squall_tls::{Alpn, CertField, CertSpec, ErrorKind, Fault, KeySource, TlsStore, WarningKind};

fn load_err(certs: &[CertSpec]) -> squall_tls::TlsError {
    match TlsStore::load(certs) {
        Ok(_) => panic!("{certs:?} must not load"),
        Err(err) => err,
    }
}

#[test]
fn pem_rsa_ecdsa_and_ed25519_load_and_serve() {
    let dir = TempDir::new();
    for (stem, alg) in [
        ("rsa", Alg::Rsa),
        ("ecdsa", Alg::EcdsaP256),
        ("ed25519", Alg::Ed25519),
    ] {
        let generated = generate(alg, &["example.test"]);
        let spec = dir.spec(stem, &["example.test"], &generated);
        let (store, warnings) = TlsStore::load(&[spec]).unwrap();
        assert!(warnings.is_empty(), "{stem}: {warnings:?}");
        assert_eq!(store.len(), 1);
        for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
            let client = client_config(&ClientOpts {
                versions: vec![version],
                ..ClientOpts::default()
            });
            let acceptor = store.acceptor(&[Alpn::Http1]);
            let mut pair = Pair::new(&acceptor, &client, "example.test", usize::MAX);
            pair.handshake();
            assert_eq!(pair.server_cert(), generated.cert_der, "{stem} {version:?}");
        }
    }
}

#[test]
fn a_chain_file_with_intermediates_is_served_whole() {
    let dir = TempDir::new();
    let leaf = generate(Alg::EcdsaP256, &["example.test"]);
    let other = generate(Alg::EcdsaP256, &["intermediate.test"]);
    let mut spec = dir.spec("chain", &["example.test"], &leaf);
    if let KeySource::Pem { cert_path, .. } = &spec.source {
        std::fs::write(cert_path, format!("{}{}", leaf.cert_pem, other.cert_pem)).unwrap();
    }
    spec.name = "chain".into();
    let (store, _) = TlsStore::load(&[spec]).unwrap();
    let client = client_config(&ClientOpts::default());
    let mut pair = Pair::new(&store.acceptor(&[]), &client, "example.test", usize::MAX);
    pair.handshake();
    let chain = pair.client.peer_certificates().unwrap();
    assert_eq!(chain.len(), 2);
    assert_eq!(chain[1], other.cert_der);
}

#[test]
fn a_key_that_does_not_match_its_certificate_is_an_error_naming_the_entry() {
    let dir = TempDir::new();
    let a = generate(Alg::EcdsaP256, &["a.test"]);
    let b = generate(Alg::EcdsaP256, &["b.test"]);
    let spec = CertSpec {
        name: "certificate #2 (a.test)".into(),
        hosts: vec!["a.test".into()],
        source: KeySource::Pem {
            cert_path: dir.write("a.pem", &a.cert_pem),
            key_path: dir.write("b.key", &b.key_pem),
        },
    };
    let good = self_signed("certificate #1", &["default.test"]);
    let err = load_err(&[good, spec]);
    assert_eq!(err.kind(), ErrorKind::KeyMismatch);
    assert_eq!(err.fault(), Fault::Config);
    // The second entry's key, so that the config can point at `key = ...` of that entry.
    assert_eq!(err.entry(), Some((1, Some(CertField::Key))));
    let msg = err.to_string();
    assert!(msg.starts_with("certificate #2 (a.test): "), "{msg}");
    assert!(msg.contains("b.key") && msg.contains("a.pem"), "{msg}");
}

#[test]
fn a_key_of_another_algorithm_is_a_mismatch_too() {
    let dir = TempDir::new();
    let ecdsa = generate(Alg::EcdsaP256, &["a.test"]);
    let ed = generate(Alg::Ed25519, &["a.test"]);
    let spec = CertSpec {
        name: "mixed".into(),
        hosts: vec![],
        source: KeySource::Pem {
            cert_path: dir.write("ecdsa.pem", &ecdsa.cert_pem),
            key_path: dir.write("ed.key", &ed.key_pem),
        },
    };
    assert_eq!(load_err(&[spec]).kind(), ErrorKind::KeyMismatch);
}

#[test]
fn an_unreadable_file_is_an_error_naming_the_path_and_the_entry() {
    let dir = TempDir::new();
    let good = generate(Alg::EcdsaP256, &["a.test"]);
    let real = dir.spec("real", &["a.test"], &good);
    let KeySource::Pem {
        cert_path,
        key_path,
    } = real.source.clone()
    else {
        unreachable!()
    };
    let missing = dir.path().join("missing.pem");
    for (what, source) in [
        (
            "certificate",
            KeySource::Pem {
                cert_path: missing.clone(),
                key_path,
            },
        ),
        (
            "key",
            KeySource::Pem {
                cert_path,
                key_path: missing.clone(),
            },
        ),
    ] {
        let spec = CertSpec {
            name: "certificate #1 (a.test)".into(),
            hosts: vec!["a.test".into()],
            source,
        };
        let err = load_err(&[spec]);
        assert_eq!(err.kind(), ErrorKind::Io, "{what}");
        let field = if what == "key" {
            CertField::Key
        } else {
            CertField::Cert
        };
        assert_eq!(err.entry(), Some((0, Some(field))), "{what}");
        let msg = err.to_string();
        assert!(
            msg.starts_with("certificate #1 (a.test): cannot read "),
            "{msg}"
        );
        assert!(msg.contains(&format!("{what} file")), "{msg}");
        assert!(msg.contains(&missing.display().to_string()), "{msg}");
    }
}

#[test]
fn files_without_pem_blocks_are_errors() {
    let dir = TempDir::new();
    let good = generate(Alg::EcdsaP256, &["a.test"]);
    let junk = dir.write("junk.txt", "not pem at all\n");
    let cert = dir.write("a.pem", &good.cert_pem);
    let key = dir.write("a.key", &good.key_pem);
    let cases = [
        ("certificate", junk.clone(), key.clone()),
        ("key", cert.clone(), junk.clone()),
        ("key", cert.clone(), cert.clone()), // a certificate where the key should be
        ("certificate", key.clone(), key.clone()),
    ];
    for (what, cert_path, key_path) in cases {
        let spec = CertSpec {
            name: "entry".into(),
            hosts: vec![],
            source: KeySource::Pem {
                cert_path,
                key_path,
            },
        };
        let err = load_err(&[spec]);
        assert_eq!(err.kind(), ErrorKind::BadPem, "{err}");
        let field = if what == "key" {
            CertField::Key
        } else {
            CertField::Cert
        };
        assert_eq!(err.entry(), Some((0, Some(field))), "{err}");
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!("entry: no usable {what} in ")),
            "{msg}"
        );
    }
}

#[test]
fn an_expired_certificate_is_a_warning_not_an_error() {
    let dir = TempDir::new();
    let expired = generate_with(Alg::EcdsaP256, &["old.test"], |params| {
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    });
    let spec = dir.spec("old", &["old.test"], &expired);
    let (store, warnings) = TlsStore::load(&[spec]).unwrap();
    assert_eq!(store.len(), 1);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].kind, WarningKind::Expired);
    assert_eq!(warnings[0].entry, "certificate old");
    let text = warnings[0].to_string();
    assert!(text.starts_with("certificate old: expired at "), "{text}");
    assert!(text.contains("2021"), "{text}");
}

#[test]
fn validity_is_checked_against_the_given_time() {
    let dir = TempDir::new();
    let generated = generate_with(Alg::EcdsaP256, &["a.test"], |params| {
        params.not_before = rcgen::date_time_ymd(2030, 1, 1);
        params.not_after = rcgen::date_time_ymd(2031, 1, 1);
    });
    let spec = dir.spec("future", &["a.test"], &generated);
    let year = Duration::from_secs(365 * 24 * 3600);
    let early = SystemTime::UNIX_EPOCH + 59 * year; // 2028
    let (_, warnings) = TlsStore::load_at(std::slice::from_ref(&spec), early).unwrap();
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].kind, WarningKind::NotYetValid);
    let during = SystemTime::UNIX_EPOCH + 60 * year + 30 * 24 * 3600 * Duration::from_secs(1);
    let (_, warnings) = TlsStore::load_at(std::slice::from_ref(&spec), during).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let late = SystemTime::UNIX_EPOCH + 62 * year;
    let (_, warnings) = TlsStore::load_at(&[spec], late).unwrap();
    assert_eq!(warnings[0].kind, WarningKind::Expired);
}

#[test]
fn a_host_the_certificate_does_not_cover_is_a_warning() {
    let dir = TempDir::new();
    let generated = generate(Alg::EcdsaP256, &["example.test", "*.example.test"]);
    let hosts = [
        "example.test",
        "www.example.test",
        "*.example.test",
        "a.b.example.test",
        "other.test",
    ];
    let spec = dir.spec("partial", &hosts, &generated);
    let (_, warnings) = TlsStore::load(&[spec]).unwrap();
    let uncovered: Vec<&str> = warnings
        .iter()
        .inspect(|w| assert_eq!(w.kind, WarningKind::HostNotCovered))
        .map(|w| w.message.as_str())
        .collect();
    assert_eq!(uncovered.len(), 2, "{uncovered:?}");
    assert!(uncovered[0].contains("a.b.example.test"));
    assert!(uncovered[1].contains("other.test"));
}

#[test]
fn bad_host_patterns_are_errors_naming_the_entry() {
    for bad in ["*", "a.*.test", "exa mple.test", ""] {
        let err = load_err(&[self_signed("certificate #1", &[bad])]);
        assert_eq!(err.kind(), ErrorKind::BadHost, "{bad:?}");
        assert_eq!(err.entry(), Some((0, Some(CertField::Hosts))), "{bad:?}");
        assert!(
            err.to_string().starts_with("certificate #1: host "),
            "{err}"
        );
    }
}

#[test]
fn no_entries_is_an_error() {
    let err = load_err(&[]);
    assert_eq!(err.kind(), ErrorKind::NoCertificates);
    assert_eq!(err.fault(), Fault::Config);
    assert_eq!(err.entry(), None);
}

#[test]
fn self_signed_certificates_carry_the_hosts() {
    let (store, warnings) =
        TlsStore::load(&[self_signed("demo", &["demo.test", "*.demo.test"])]).unwrap();
    assert!(warnings.is_empty());
    let client = client_config(&ClientOpts::default());
    let mut pair = Pair::new(&store.acceptor(&[Alpn::H2]), &client, "x.demo.test", 3);
    pair.handshake();
    let der = pair.server_cert();
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    let san = cert.subject_alternative_name().unwrap().unwrap();
    let names: Vec<String> = san
        .value
        .general_names
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert_eq!(names, ["DNSName(demo.test)", "DNSName(*.demo.test)"]);
}

#[test]
fn a_self_signed_entry_without_hosts_is_for_localhost() {
    let (store, _) = TlsStore::load(&[self_signed("demo", &[])]).unwrap();
    let client = client_config(&ClientOpts::default());
    let mut pair = Pair::new(&store.acceptor(&[]), &client, "localhost", usize::MAX);
    pair.handshake();
    let der = pair.server_cert();
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    let san = cert.subject_alternative_name().unwrap().unwrap();
    assert_eq!(san.value.general_names.len(), 1);
    assert_eq!(san.value.general_names[0].to_string(), "DNSName(localhost)");
}

/// The QUIC listener's config: the same certificates, ALPN `h3` alone, TLS 1.3, and early
/// data at one of the two values QUIC accepts (RFC 9001 §4.6.1); rustls's QUIC server
/// connection takes it.
#[test]
fn quic_config_offers_h3_over_tls13() {
    use squall_tls::rustls;
    let (store, _) = TlsStore::load(&[self_signed("demo", &["demo.test"])]).unwrap();
    for (early, limit) in [(false, 0), (true, u32::MAX)] {
        let config = store.quic_config(early);
        assert_eq!(config.alpn_protocols, vec![b"h3".to_vec()]);
        assert_eq!(config.max_early_data_size, limit);
        let params = vec![0u8; 0];
        let conn = rustls::quic::ServerConnection::new(config, rustls::quic::Version::V1, params);
        assert!(conn.is_ok(), "{:?}", conn.err());
    }
    // The TCP acceptors are not touched: they still offer their own ALPN.
    assert_eq!(store.acceptor(&[Alpn::H2]).alpn(), vec![Alpn::H2]);
}
