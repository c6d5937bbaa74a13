//! The sans-IO layer against an in-memory rustls client, on both engines, with the bytes
//! delivered at chunk sizes 1, 2, 3, 7, 100 and whole in both directions: handshake, ALPN,
//! protocol versions, data, close_notify, and misuse by the caller.

mod common;

use bytes::BytesMut;
use common::{CHUNKS, ClientOpts, ENGINES, Pair, client_config, self_signed};
use rustls::AlertDescription;
use squall_tls::{Acceptor, Alpn, Engine, ErrorKind, TlsConn, TlsStore, TlsVersion};

fn store() -> TlsStore {
    let certs = [self_signed(
        "certificate #1",
        &["example.test", "*.example.test"],
    )];
    TlsStore::load(&certs).unwrap().0
}

/// Runs `test` for every engine and chunk size, naming the case if it panics.
fn each_case(test: impl Fn(Engine, usize)) {
    for &engine in ENGINES {
        for &chunk in CHUNKS {
            let guard = CaseName(engine, chunk);
            test(engine, chunk);
            std::mem::forget(guard);
        }
    }
}

/// Prints the case on the way out of a panic (dropped only when unwinding).
struct CaseName(Engine, usize);

impl Drop for CaseName {
    fn drop(&mut self) {
        eprintln!("failing case: engine {:?}, chunk {}", self.0, self.1);
    }
}

fn acceptor(store: &TlsStore, alpn: &[Alpn], engine: Engine) -> Acceptor {
    store.acceptor(alpn).with_engine(engine)
}

#[test]
fn handshake_then_data_both_ways() {
    let store = store();
    let client = client_config(&ClientOpts::default());
    each_case(|engine, chunk| {
        let acceptor = acceptor(&store, &[Alpn::H2, Alpn::Http1], engine);
        let mut pair = Pair::new(&acceptor, &client, "www.example.test", chunk);
        pair.handshake();
        assert_eq!(pair.server.sni(), Some("www.example.test"));
        assert_eq!(pair.server.alpn(), Some(Alpn::H2));
        assert_eq!(pair.server.version(), Some(TlsVersion::Tls13));
        assert!(!pair.server.peer_closed());

        let request = b"GET / HTTP/1.1\r\nHost: www.example.test\r\n\r\n";
        assert_eq!(&pair.client_sends(request)[..], request);
        assert_eq!(pair.server_sends(b"HTTP/1.1 200"), b"HTTP/1.1 200");
    });
}

#[test]
fn multi_record_data_arrives_whole_and_in_order() {
    let store = store();
    let client = client_config(&ClientOpts::default());
    let upload = common::random_bytes(50_000, 1);
    let download = common::random_bytes(100_000, 2);
    for &engine in ENGINES {
        // 1-byte chunks of 150 KB would only test the same paths more slowly.
        for chunk in [7, 1000, usize::MAX] {
            let acceptor = acceptor(&store, &[Alpn::Http1], engine);
            let mut pair = Pair::new(&acceptor, &client, "example.test", chunk);
            pair.handshake();
            assert_eq!(
                &pair.client_sends(&upload)[..],
                &upload[..],
                "{engine:?} {chunk}"
            );
            assert_eq!(pair.server_sends(&download), download, "{engine:?} {chunk}");
        }
    }
}

#[test]
fn many_small_writes_and_reads_interleave() {
    let store = store();
    let client = client_config(&ClientOpts::default());
    each_case(|engine, chunk| {
        let acceptor = acceptor(&store, &[Alpn::Http1], engine);
        let mut pair = Pair::new(&acceptor, &client, "example.test", chunk);
        pair.handshake();
        for i in 0..5u8 {
            let request = [b'q', i];
            assert_eq!(&pair.client_sends(&request)[..], &request);
            let response = [b'r', i, i];
            assert_eq!(pair.server_sends(&response), response);
        }
    });
}

/// Our ALPN list, the client's, and the protocol that must be chosen.
type AlpnCase = (&'static [Alpn], &'static [&'static [u8]], Option<Alpn>);

#[test]
fn a_client_key_update_is_answered_and_traffic_continues() {
    let store = store();
    let client = client_config(&ClientOpts::default());
    each_case(|engine, chunk| {
        let acceptor = acceptor(&store, &[Alpn::Http1], engine);
        let mut pair = Pair::new(&acceptor, &client, "example.test", chunk);
        pair.handshake();
        assert_eq!(&pair.client_sends(b"before")[..], b"before");
        // The client asks for new keys both ways (RFC 8446 §4.6.3); our answer goes in `out`.
        pair.client.refresh_traffic_keys().unwrap();
        assert_eq!(&pair.client_sends(b"after")[..], b"after");
        assert_eq!(pair.server_sends(b"reply"), b"reply");
        assert_eq!(&pair.client_sends(b"again")[..], b"again");
        assert!(pair.server_err.is_none() && pair.client_err.is_none());
    });
}

#[test]
fn alpn_follows_server_preference() {
    let store = store();
    let cases: &[AlpnCase] = &[
        (
            &[Alpn::H2, Alpn::Http1],
            &[b"http/1.1", b"h2"],
            Some(Alpn::H2),
        ),
        (
            &[Alpn::Http1, Alpn::H2],
            &[b"h2", b"http/1.1"],
            Some(Alpn::Http1),
        ),
        (&[Alpn::H2, Alpn::Http1], &[b"http/1.1"], Some(Alpn::Http1)),
        (&[Alpn::H2, Alpn::Http1], &[b"h2"], Some(Alpn::H2)),
        (&[Alpn::H2, Alpn::Http1], &[], None), // no ALPN offered: HTTP/1.1
        (&[], &[b"h2"], None),                 // listener without ALPN
    ];
    for (ours, theirs, want) in cases {
        let opts = ClientOpts {
            alpn: theirs.to_vec(),
            ..ClientOpts::default()
        };
        let client = client_config(&opts);
        each_case(|engine, chunk| {
            let acceptor = acceptor(&store, ours, engine);
            let mut pair = Pair::new(&acceptor, &client, "example.test", chunk);
            pair.handshake();
            assert_eq!(pair.server.alpn(), *want, "ours {ours:?} theirs {theirs:?}");
            let client_alpn = pair.client.alpn_protocol().map(<[u8]>::to_vec);
            assert_eq!(client_alpn, want.map(|a| a.id().to_vec()));
        });
    }
}

#[test]
fn disjoint_alpn_is_refused_with_no_application_protocol() {
    let store = store();
    let opts = ClientOpts {
        alpn: vec![b"spdy/3", b"h3"],
        ..ClientOpts::default()
    };
    let client = client_config(&opts);
    each_case(|engine, chunk| {
        let acceptor = acceptor(&store, &[Alpn::H2, Alpn::Http1], engine);
        let mut pair = Pair::new(&acceptor, &client, "example.test", chunk);
        pair.run();
        let err = pair.server_err.as_ref().expect("server refuses");
        assert_eq!(err.kind(), ErrorKind::NoApplicationProtocol);
        assert_eq!(err.kind().as_str(), "no_application_protocol");
        assert_eq!(
            pair.client_err,
            Some(rustls::Error::AlertReceived(
                AlertDescription::NoApplicationProtocol
            ))
        );
        // The connection stays failed.
        let again = pair
            .server
            .read_tls(b"x", &mut BytesMut::new(), &mut BytesMut::new());
        assert_eq!(again.unwrap_err().kind(), ErrorKind::NoApplicationProtocol);
    });
}

#[test]
fn tls12_and_tls13_each_handshake_and_carry_data() {
    let store = store();
    let versions = [
        (&rustls::version::TLS12, TlsVersion::Tls12),
        (&rustls::version::TLS13, TlsVersion::Tls13),
    ];
    for (version, want) in versions {
        let opts = ClientOpts {
            versions: vec![version],
            ..ClientOpts::default()
        };
        let client = client_config(&opts);
        each_case(|engine, chunk| {
            let acceptor = acceptor(&store, &[Alpn::H2, Alpn::Http1], engine);
            let mut pair = Pair::new(&acceptor, &client, "a.example.test", chunk);
            pair.handshake();
            assert_eq!(pair.server.version(), Some(want));
            assert_eq!(pair.server.alpn(), Some(Alpn::H2));
            assert_eq!(pair.server.sni(), Some("a.example.test"));
            assert_eq!(&pair.client_sends(b"ping")[..], b"ping");
            assert_eq!(pair.server_sends(b"pong"), b"pong");
        });
    }
}

#[test]
fn no_sni_is_served_and_reported_as_none() {
    let store = store();
    let client = client_config(&ClientOpts {
        sni: false,
        ..ClientOpts::default()
    });
    each_case(|engine, chunk| {
        let acceptor = acceptor(&store, &[Alpn::Http1], engine);
        let mut pair = Pair::new(&acceptor, &client, "example.test", chunk);
        pair.handshake();
        assert_eq!(pair.server.sni(), None);
    });
}

#[test]
fn client_close_notify_is_reported_and_later_bytes_ignored() {
    let store = store();
    let client = client_config(&ClientOpts::default());
    each_case(|engine, chunk| {
        let acceptor = acceptor(&store, &[Alpn::Http1], engine);
        let mut pair = Pair::new(&acceptor, &client, "example.test", chunk);
        pair.handshake();
        use std::io::Write;
        pair.client.writer().write_all(b"last words").unwrap();
        pair.client.send_close_notify();
        pair.run();
        assert!(pair.server.peer_closed());
        assert_eq!(&pair.server_plain[..], b"last words");
        // Anything after close_notify is dropped without an error.
        pair.feed_server(b"\x17\x03\x03\x00\x05trash");
        assert!(pair.server_err.is_none());
        assert_eq!(&pair.server_plain[..], b"last words");
        // We may still answer, then close our side.
        assert_eq!(pair.server_sends(b"bye"), b"bye");
    });
}

#[test]
fn server_close_sends_close_notify_once() {
    let store = store();
    let client = client_config(&ClientOpts::default());
    each_case(|engine, chunk| {
        let acceptor = acceptor(&store, &[Alpn::Http1], engine);
        let mut pair = Pair::new(&acceptor, &client, "example.test", chunk);
        pair.handshake();
        let mut out = BytesMut::new();
        pair.server.close(&mut out);
        assert!(!out.is_empty());
        let mut again = BytesMut::new();
        pair.server.close(&mut again);
        assert!(again.is_empty(), "close is idempotent");
        pair.to_client.extend_from_slice(&out);
        pair.run();
        assert!(pair.client_saw_close);
        let err = pair
            .server
            .write_plain(b"late", &mut BytesMut::new())
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed);
    });
}

#[test]
fn write_before_the_handshake_is_refused_without_poisoning() {
    let store = store();
    let client = client_config(&ClientOpts::default());
    for &engine in ENGINES {
        let acceptor = acceptor(&store, &[Alpn::Http1], engine);
        let mut pair = Pair::new(&acceptor, &client, "example.test", usize::MAX);
        let mut out = BytesMut::new();
        let err = pair.server.write_plain(b"early", &mut out).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::HandshakeNotComplete);
        assert!(out.is_empty());
        // Closing during the handshake appends nothing: the caller just drops the socket.
        pair.server.close(&mut out);
        assert!(out.is_empty());
        pair.handshake();
        assert_eq!(pair.server_sends(b"now"), b"now");
    }
}

#[test]
fn empty_input_and_empty_writes_are_no_ops() {
    let store = store();
    let client = client_config(&ClientOpts::default());
    for &engine in ENGINES {
        let acceptor = acceptor(&store, &[Alpn::Http1], engine);
        let mut conn = TlsConn::new(&acceptor);
        let (mut plain, mut out) = (BytesMut::new(), BytesMut::new());
        conn.read_tls(&[], &mut plain, &mut out).unwrap();
        assert!(plain.is_empty() && out.is_empty());
        assert!(conn.is_handshaking());
        assert_eq!(conn.engine(), engine);

        let mut pair = Pair::new(&acceptor, &client, "example.test", usize::MAX);
        pair.handshake();
        let mut out = BytesMut::new();
        pair.server.write_plain(&[], &mut out).unwrap();
        assert!(out.is_empty());
    }
}

#[test]
fn the_default_engine_is_unbuffered() {
    let store = store();
    assert_eq!(store.acceptor(&[]).engine(), Engine::default());
    assert_eq!(
        TlsConn::new(&store.acceptor(&[])).engine(),
        Engine::Unbuffered
    );
}

#[test]
fn types_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<TlsStore>();
    send_sync::<Acceptor>();
    send::<TlsConn>();
}
