//! The client against this crate's own server side, in memory: handshakes at every split,
//! verification failures with rustls's reason, mTLS, resumption, data both ways, close.

use std::path::{Path, PathBuf};

use bytes::BytesMut;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

use super::*;
use crate::{TlsConn, TlsStore};

/// A CA and a server certificate for `localhost` signed by it, in a temp directory.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn new(tag: &str) -> Pki {
        let dir =
            std::env::temp_dir().join(format!("squall-tls-client-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf = |names: Vec<String>, file: &str| {
            let key = KeyPair::generate().unwrap();
            let cert = CertificateParams::new(names)
                .unwrap()
                .signed_by(&key, &issuer)
                .unwrap();
            std::fs::write(dir.join(format!("{file}.pem")), cert.pem()).unwrap();
            std::fs::write(dir.join(format!("{file}.key")), key.serialize_pem()).unwrap();
        };
        leaf(vec!["localhost".into()], "server");
        leaf(vec!["client.test".into()], "client");
        std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
        let other_key = KeyPair::generate().unwrap();
        let mut other = CertificateParams::new(Vec::<String>::new()).unwrap();
        other.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        // Another subject: with the same one, webpki would try this anchor for the chain.
        (other.distinguished_name).push(rcgen::DnType::CommonName, "another CA");
        let other = other.self_signed(&other_key).unwrap();
        std::fs::write(dir.join("other-ca.pem"), other.pem()).unwrap();
        Pki { dir }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    fn store(&self) -> TlsStore {
        let spec = CertSpec {
            name: "server".into(),
            hosts: vec!["localhost".into()],
            source: KeySource::Pem {
                cert_path: self.path("server.pem"),
                key_path: self.path("server.key"),
            },
        };
        TlsStore::load(&[spec]).unwrap().0
    }

    fn spec(&self) -> ClientSpec {
        ClientSpec {
            name: "upstream \"api\"".into(),
            ca: Some(self.path("ca.pem")),
            verify: true,
            client_cert: None,
            alpn: vec![Alpn::Http1],
        }
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs a handshake, `split` bytes per call each way; returns both ends or the client's error.
fn handshake(
    connector: &Connector,
    server: &mut TlsConn,
    name: &str,
    split: usize,
) -> Result<TlsClientConn, TlsError> {
    let mut to_server = BytesMut::new();
    let mut client = connector.connect(server_name(name).unwrap(), &mut to_server);
    let mut plain = BytesMut::new();
    for _ in 0..100 {
        let mut to_client = BytesMut::new();
        for piece in to_server.split().chunks(split) {
            // The server's error (an alert from the client) shows on the client's side too.
            let _ = server.read_tls(piece, &mut plain, &mut to_client);
        }
        for piece in to_client.chunks(split) {
            client.read_tls(piece, &mut plain, &mut to_server)?;
            client.check_invariants();
        }
        if !client.is_handshaking() && !server.is_handshaking() && to_server.is_empty() {
            return Ok(client);
        }
    }
    panic!("the handshake did not end");
}

#[test]
fn handshakes_at_every_split_and_carries_data_both_ways() {
    let pki = Pki::new("split");
    let acceptor = pki.store().acceptor(&[Alpn::H2, Alpn::Http1]);
    let connector = Connector::load(&pki.spec(), None).unwrap();
    for split in [1, 2, 3, 7, 100, usize::MAX] {
        let mut server = TlsConn::new(&acceptor);
        let mut client = handshake(&connector, &mut server, "localhost", split).unwrap();
        assert_eq!(
            client.alpn(),
            Some(Alpn::Http1),
            "only http/1.1 was offered"
        );
        assert_eq!(server.sni(), Some("localhost"));
        let (mut wire, mut plain) = (BytesMut::new(), BytesMut::new());
        client
            .write_plain(b"GET / HTTP/1.1\r\n\r\n", &mut wire)
            .unwrap();
        server
            .read_tls(&wire, &mut plain, &mut BytesMut::new())
            .unwrap();
        assert_eq!(&plain[..], b"GET / HTTP/1.1\r\n\r\n");
        let (mut wire, mut plain) = (BytesMut::new(), BytesMut::new());
        server
            .write_plain(b"HTTP/1.1 200 OK\r\n\r\n", &mut wire)
            .unwrap();
        server.close(&mut wire);
        for piece in wire.chunks(split) {
            client
                .read_tls(piece, &mut plain, &mut BytesMut::new())
                .unwrap();
        }
        assert_eq!(&plain[..], b"HTTP/1.1 200 OK\r\n\r\n");
        assert!(client.peer_closed());
    }
}

#[test]
fn a_certificate_that_fails_verification_is_an_invalid_certificate_error() {
    let pki = Pki::new("verify");
    let acceptor = pki.store().acceptor(&[]);
    let cases = [
        // Another name than the certificate's.
        ("other.test", pki.spec(), "not valid for name"),
        // Trusting another CA.
        (
            "localhost",
            ClientSpec {
                ca: Some(pki.path("other-ca.pem")),
                ..pki.spec()
            },
            "UnknownIssuer",
        ),
    ];
    for (name, spec, reason) in cases {
        let connector = Connector::load(&spec, None).unwrap();
        let mut server = TlsConn::new(&acceptor);
        let err = handshake(&connector, &mut server, name, usize::MAX).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidCertificate, "{err}");
        assert!(err.to_string().contains(reason), "{err}");
    }
    // tls_verify = false takes it anyway.
    let spec = ClientSpec {
        verify: false,
        ..pki.spec()
    };
    let connector = Connector::load(&spec, None).unwrap();
    let mut server = TlsConn::new(&acceptor);
    assert!(handshake(&connector, &mut server, "other.test", 5).is_ok());
}

#[test]
fn a_second_connection_resumes_and_a_kept_store_survives_a_reload() {
    let pki = Pki::new("resume");
    let acceptor = pki.store().acceptor(&[]);
    let connector = Connector::load(&pki.spec(), None).unwrap();
    let run = |connector: &Connector| {
        let mut server = TlsConn::new(&acceptor);
        let client = handshake(connector, &mut server, "localhost", usize::MAX).unwrap();
        assert_eq!(client.is_resumed(), server.is_resumed());
        client.is_resumed()
    };
    assert!(!run(&connector), "nothing to resume yet");
    assert!(run(&connector), "the ticket from the first connection");
    let kept = Connector::load(&pki.spec(), Some(&connector)).unwrap();
    assert!(run(&kept), "the same files: the same connector");
    let changed = ClientSpec {
        alpn: vec![],
        ..pki.spec()
    };
    let reloaded = Connector::load(&changed, Some(&connector)).unwrap();
    assert!(!run(&reloaded), "new settings, a new store");
}

#[test]
fn a_client_certificate_is_sent_when_asked() {
    let pki = Pki::new("mtls");
    let spec = ClientSpec {
        client_cert: Some((pki.path("client.pem"), pki.path("client.key"))),
        ..pki.spec()
    };
    let connector = Connector::load(&spec, None).unwrap();
    // A rustls server that requires a client certificate from the same CA.
    let mut roots = RootCertStore::empty();
    let ca = std::fs::read(pki.path("ca.pem")).unwrap();
    roots
        .add(CertificateDer::from_pem_slice(&ca).unwrap())
        .unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
        .build()
        .unwrap();
    let chain = CertificateDer::pem_file_iter(pki.path("server.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = rustls_pki_types::PrivateKeyDer::from_pem_file(pki.path("server.key")).unwrap();
    let config = rustls::ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .unwrap();
    let mut server = rustls::ServerConnection::new(Arc::new(config)).unwrap();
    let mut to_server = BytesMut::new();
    let mut client = connector.connect(server_name("localhost").unwrap(), &mut to_server);
    for _ in 0..10 {
        server.read_tls(&mut &to_server.split()[..]).unwrap();
        server.process_new_packets().unwrap();
        let mut to_client = Vec::new();
        server.write_tls(&mut to_client).unwrap();
        client
            .read_tls(&to_client, &mut BytesMut::new(), &mut to_server)
            .unwrap();
    }
    assert!(!server.is_handshaking());
    let certs = server
        .peer_certificates()
        .expect("the client sent its certificate");
    assert_eq!(certs.len(), 1);
}

#[test]
fn files_that_cannot_be_used_name_the_field() {
    let pki = Pki::new("files");
    let missing = Path::new("/nonexistent/ca.pem").to_path_buf();
    let err = Connector::load(
        &ClientSpec {
            ca: Some(missing),
            ..pki.spec()
        },
        None,
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Io);
    assert_eq!(err.entry(), Some((0, Some(CertField::Ca))));
    // A key file given as the CA: no certificate in it.
    let err = Connector::load(
        &ClientSpec {
            ca: Some(pki.path("server.key")),
            ..pki.spec()
        },
        None,
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadPem, "{err}");
    assert_eq!(err.entry(), Some((0, Some(CertField::Ca))));
    // The client key does not belong to the client certificate.
    let err = Connector::load(
        &ClientSpec {
            client_cert: Some((pki.path("client.pem"), pki.path("server.key"))),
            ..pki.spec()
        },
        None,
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::KeyMismatch, "{err}");
    assert_eq!(err.entry(), Some((0, Some(CertField::Key))));
}
