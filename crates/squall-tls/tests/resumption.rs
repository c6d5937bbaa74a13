//! Session resumption: TLS 1.3 tickets, TLS 1.2 session ids and TLS 1.2 tickets, across two
//! connections of one acceptor, across acceptors of one store (a client landing on another
//! worker), and across a reload; a freshly loaded store resumes nothing.

mod common;

use common::{CHUNKS, ClientOpts, ENGINES, Pair, client_config, self_signed};
use rustls::HandshakeKind;
use rustls::client::Tls12Resumption;
use squall_tls::{Acceptor, Alpn, CertSpec, TlsStore, TlsVersion};

fn certs() -> Vec<CertSpec> {
    vec![self_signed("certificate #1", &["example.test"])]
}

/// One full connection: handshake, a request and a response, so the client has its tickets.
fn connect(
    acceptor: &Acceptor,
    client: &std::sync::Arc<rustls::ClientConfig>,
    chunk: usize,
) -> Pair {
    let mut pair = Pair::new(acceptor, client, "example.test", chunk);
    pair.handshake();
    assert_eq!(&pair.client_sends(b"GET")[..], b"GET");
    assert_eq!(pair.server_sends(b"200"), b"200");
    pair
}

fn assert_resumed(pair: &Pair, resumed: bool) {
    assert_eq!(pair.server.is_resumed(), resumed, "server side");
    let want = if resumed {
        HandshakeKind::Resumed
    } else {
        HandshakeKind::Full
    };
    assert_eq!(pair.client.handshake_kind(), Some(want), "client side");
}

fn opts(version: &'static rustls::SupportedProtocolVersion, tls12: Tls12Resumption) -> ClientOpts {
    ClientOpts {
        versions: vec![version],
        tls12_resumption: tls12,
        ..ClientOpts::default()
    }
}

/// For each engine and chunk size, with a fresh client: the first connection is full, the
/// second (to `second`, which may be another acceptor) resumes.
fn check_resumes(opts: &ClientOpts, want: TlsVersion, first: &Acceptor, second: &Acceptor) {
    for &engine in ENGINES {
        for &chunk in CHUNKS {
            let client = client_config(opts);
            let a = connect(&first.clone().with_engine(engine), &client, chunk);
            assert_eq!(a.server.version(), Some(want));
            assert_resumed(&a, false);
            let b = connect(&second.clone().with_engine(engine), &client, chunk);
            assert_eq!(b.server.version(), Some(want), "{engine:?} {chunk}");
            assert_resumed(&b, true);
        }
    }
}

#[test]
fn tls13_ticket_resumes_on_the_same_acceptor() {
    let store = TlsStore::load(&certs()).unwrap().0;
    let acceptor = store.acceptor(&[Alpn::H2, Alpn::Http1]);
    let opts = opts(&rustls::version::TLS13, Tls12Resumption::SessionIdOrTickets);
    check_resumes(&opts, TlsVersion::Tls13, &acceptor, &acceptor);
}

#[test]
fn tls12_session_id_resumes_on_the_same_acceptor() {
    let store = TlsStore::load(&certs()).unwrap().0;
    let acceptor = store.acceptor(&[Alpn::H2, Alpn::Http1]);
    let opts = opts(&rustls::version::TLS12, Tls12Resumption::SessionIdOnly);
    check_resumes(&opts, TlsVersion::Tls12, &acceptor, &acceptor);
}

#[test]
fn tls12_ticket_resumes_on_the_same_acceptor() {
    let store = TlsStore::load(&certs()).unwrap().0;
    let acceptor = store.acceptor(&[Alpn::H2, Alpn::Http1]);
    let opts = opts(&rustls::version::TLS12, Tls12Resumption::SessionIdOrTickets);
    check_resumes(&opts, TlsVersion::Tls12, &acceptor, &acceptor);
}

#[test]
fn resumption_works_on_any_worker() {
    // Each worker builds its own acceptor from the shared store.
    let store = TlsStore::load(&certs()).unwrap().0;
    let worker0 = store.acceptor(&[Alpn::H2, Alpn::Http1]);
    let worker1 = store.acceptor(&[Alpn::H2, Alpn::Http1]);
    for (version, tls12, want) in [
        (
            &rustls::version::TLS13,
            Tls12Resumption::SessionIdOrTickets,
            TlsVersion::Tls13,
        ),
        (
            &rustls::version::TLS12,
            Tls12Resumption::SessionIdOnly,
            TlsVersion::Tls12,
        ),
        (
            &rustls::version::TLS12,
            Tls12Resumption::SessionIdOrTickets,
            TlsVersion::Tls12,
        ),
    ] {
        check_resumes(&opts(version, tls12), want, &worker0, &worker1);
    }
}

#[test]
fn a_session_resumes_across_engines() {
    let store = TlsStore::load(&certs()).unwrap().0;
    let acceptor = store.acceptor(&[Alpn::Http1]);
    let client = client_config(&ClientOpts::default());
    let a = connect(
        &acceptor.clone().with_engine(squall_tls::Engine::Buffered),
        &client,
        100,
    );
    assert_resumed(&a, false);
    let b = connect(
        &acceptor.with_engine(squall_tls::Engine::Unbuffered),
        &client,
        100,
    );
    assert_resumed(&b, true);
}

#[test]
fn reload_keeps_resumption_and_a_fresh_load_does_not() {
    let old = TlsStore::load(&certs()).unwrap().0;
    let (reloaded, _) = old.reload(&certs()).unwrap();
    let (fresh, _) = TlsStore::load(&certs()).unwrap();
    for (version, tls12) in [
        (&rustls::version::TLS13, Tls12Resumption::SessionIdOrTickets),
        (&rustls::version::TLS12, Tls12Resumption::SessionIdOnly),
    ] {
        let client = client_config(&opts(version, tls12));
        let a = connect(&old.acceptor(&[Alpn::Http1]), &client, usize::MAX);
        assert_resumed(&a, false);
        let b = connect(&reloaded.acceptor(&[Alpn::Http1]), &client, usize::MAX);
        assert_resumed(&b, true);
        // The reloaded store serves its own (new) certificate to full handshakes.
        let c = connect(&fresh.acceptor(&[Alpn::Http1]), &client, usize::MAX);
        assert_resumed(&c, false);
    }
}
