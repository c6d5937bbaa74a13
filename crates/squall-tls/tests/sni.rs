//! Certificate selection by SNI, end to end: the certificate the client is shown for exact,
//! wildcard, unknown and absent names, on both engines; hosts taken from the certificate
//! when the entry lists none; an RSA and an ECDSA certificate for the same name, chosen by
//! what the client can verify.

mod common;

use common::{Alg, ClientOpts, ENGINES, Generated, Pair, TempDir, client_config, generate};
use rustls::SignatureScheme;
use squall_tls::{Acceptor, Alpn, TlsStore};

struct Fixture {
    _dir: TempDir,
    store: TlsStore,
    default: Generated,
    exact: Generated,
    wild: Generated,
}

fn fixture() -> Fixture {
    let dir = TempDir::new();
    let default = generate(Alg::EcdsaP256, &["default.test"]);
    let exact = generate(Alg::EcdsaP256, &["example.test", "www.example.test"]);
    let wild = generate(Alg::EcdsaP256, &["*.example.test"]);
    let specs = [
        dir.spec("default", &["default.test"], &default),
        dir.spec("exact", &["example.test", "www.example.test"], &exact),
        dir.spec("wild", &["*.example.test"], &wild),
    ];
    let (store, warnings) = TlsStore::load(&specs).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    Fixture {
        _dir: dir,
        store,
        default,
        exact,
        wild,
    }
}

fn shown(
    acceptor: &Acceptor,
    opts: &ClientOpts,
    sni: &str,
) -> (rustls::pki_types::CertificateDer<'static>, Option<String>) {
    let client = client_config(opts);
    let mut pair = Pair::new(acceptor, &client, sni, 7);
    pair.handshake();
    (pair.server_cert(), pair.server.sni().map(str::to_string))
}

#[test]
fn each_name_gets_its_certificate() {
    let f = fixture();
    let cases = [
        ("default.test", &f.default),
        ("example.test", &f.exact),
        ("www.example.test", &f.exact),
        ("api.example.test", &f.wild),
        ("a.b.example.test", &f.default), // one label only under a wildcard
        ("unknown.test", &f.default),
        ("WWW.Example.Test", &f.exact), // DNS names are case-insensitive
    ];
    for &engine in ENGINES {
        let acceptor = f.store.acceptor(&[Alpn::H2]).with_engine(engine);
        for (sni, want) in &cases {
            let (cert, seen) = shown(&acceptor, &ClientOpts::default(), sni);
            assert_eq!(cert, want.cert_der, "{engine:?} {sni}");
            assert_eq!(seen.as_deref(), Some(sni.to_ascii_lowercase().as_str()));
        }
    }
}

#[test]
fn no_sni_gets_the_first_entry() {
    let f = fixture();
    let opts = ClientOpts {
        sni: false,
        ..ClientOpts::default()
    };
    for &engine in ENGINES {
        let acceptor = f.store.acceptor(&[Alpn::H2]).with_engine(engine);
        let (cert, seen) = shown(&acceptor, &opts, "example.test");
        assert_eq!(cert, f.default.cert_der);
        assert_eq!(seen, None);
    }
}

#[test]
fn hosts_default_to_the_certificate_names() {
    let dir = TempDir::new();
    let first = generate(Alg::EcdsaP256, &["first.test"]);
    let second = generate(Alg::EcdsaP256, &["second.test", "*.second.test"]);
    let specs = [
        dir.spec("first", &[], &first),
        dir.spec("second", &[], &second),
    ];
    let (store, warnings) = TlsStore::load(&specs).unwrap();
    assert!(warnings.is_empty());
    let acceptor = store.acceptor(&[]);
    let opts = ClientOpts::default();
    assert_eq!(shown(&acceptor, &opts, "x.second.test").0, second.cert_der);
    assert_eq!(shown(&acceptor, &opts, "second.test").0, second.cert_der);
    assert_eq!(shown(&acceptor, &opts, "first.test").0, first.cert_der);
    assert_eq!(shown(&acceptor, &opts, "other.test").0, first.cert_der);
}

#[test]
fn an_rsa_only_client_gets_the_rsa_certificate_of_a_dual_pair() {
    let dir = TempDir::new();
    let ecdsa = generate(Alg::EcdsaP256, &["dual.test"]);
    let rsa = generate(Alg::Rsa, &["dual.test"]);
    let specs = [
        dir.spec("ecdsa", &["dual.test"], &ecdsa),
        dir.spec("rsa", &["dual.test"], &rsa),
    ];
    let (store, _) = TlsStore::load(&specs).unwrap();
    for &engine in ENGINES {
        let acceptor = store.acceptor(&[]).with_engine(engine);
        let modern = ClientOpts::default();
        assert_eq!(
            shown(&acceptor, &modern, "dual.test").0,
            ecdsa.cert_der,
            "{engine:?}"
        );
        let rsa_only = ClientOpts {
            schemes: Some(vec![
                SignatureScheme::RSA_PSS_SHA256,
                SignatureScheme::RSA_PKCS1_SHA256,
            ]),
            ..ClientOpts::default()
        };
        assert_eq!(
            shown(&acceptor, &rsa_only, "dual.test").0,
            rsa.cert_der,
            "{engine:?}"
        );
    }
}
