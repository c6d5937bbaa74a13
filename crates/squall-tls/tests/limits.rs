//! Hostile and broken input: garbage instead of a ClientHello, plain HTTP on the TLS port,
//! oversized records and handshake messages, a tampered record. Each must end in an error
//! with the alert to send in `out`, without growing any buffer past its bound.

mod common;

use bytes::BytesMut;
use common::{ClientOpts, ENGINES, Pair, client_config, random_bytes, self_signed};
use squall_tls::{Acceptor, Alpn, Engine, ErrorKind, Fault, TlsConn, TlsError, TlsStore};

/// TLS record content type of an alert (RFC 8446 §5.1).
const ALERT: u8 = 21;

fn acceptor(engine: Engine) -> Acceptor {
    let certs = [self_signed("certificate #1", &["example.test"])];
    let (store, _) = TlsStore::load(&certs).unwrap();
    store.acceptor(&[Alpn::H2, Alpn::Http1]).with_engine(engine)
}

/// Feeds `input` `chunk` bytes at a time until the first error. Returns the error, how many
/// bytes were fed, and everything the server wanted to send.
fn feed_until_error(conn: &mut TlsConn, input: &[u8], chunk: usize) -> (TlsError, usize, BytesMut) {
    let (mut plain, mut out) = (BytesMut::new(), BytesMut::new());
    let mut fed = 0;
    for piece in input.chunks(chunk) {
        fed += piece.len();
        let result = conn.read_tls(piece, &mut plain, &mut out);
        conn.check_invariants();
        assert!(plain.is_empty(), "no plaintext from garbage");
        if let Err(err) = result {
            return (err, fed, out);
        }
    }
    panic!("{} bytes of garbage were accepted", input.len());
}

/// The bytes are a single plaintext alert record: type 21, then a fatal level.
fn assert_fatal_alert(out: &[u8]) {
    assert!(out.len() >= 7, "an alert record, got {out:?}");
    assert_eq!(out[0], ALERT, "alert content type, got {out:?}");
    assert_eq!(out[5], 2, "fatal level");
}

#[test]
fn a_megabyte_of_random_bytes_is_refused_early_with_an_alert() {
    let garbage = random_bytes(1 << 20, 0x5eed);
    for &engine in ENGINES {
        for chunk in [1, 7, 4096, 1 << 20] {
            let mut conn = TlsConn::new(&acceptor(engine));
            let (err, fed, out) = feed_until_error(&mut conn, &garbage, chunk);
            assert_eq!(
                err.kind(),
                ErrorKind::BadRecord,
                "{engine:?} {chunk}: {err}"
            );
            assert_eq!(err.fault(), Fault::Peer);
            // Refused at the first record header, not after buffering the megabyte.
            assert!(fed <= 5.max(chunk), "{engine:?} {chunk}: fed {fed}");
            assert_fatal_alert(&out);
            // Poisoned: the same error again, nothing more to send.
            let mut again = BytesMut::new();
            let err2 = conn
                .read_tls(b"more", &mut BytesMut::new(), &mut again)
                .unwrap_err();
            assert_eq!(err2.kind(), ErrorKind::BadRecord);
            assert!(again.is_empty());
        }
    }
}

#[test]
fn plain_http_on_the_tls_port_is_refused() {
    for &engine in ENGINES {
        let mut conn = TlsConn::new(&acceptor(engine));
        let request = b"GET / HTTP/1.1\r\nHost: example.test\r\n\r\n";
        let (err, _, out) = feed_until_error(&mut conn, request, request.len());
        assert_eq!(err.kind(), ErrorKind::BadRecord, "{engine:?}: {err}");
        assert_fatal_alert(&out);
    }
}

#[test]
fn a_record_over_the_size_limit_is_refused_from_its_header() {
    for &engine in ENGINES {
        let mut conn = TlsConn::new(&acceptor(engine));
        // A handshake record claiming 40,000 bytes (the limit is 16 KiB + 2 KiB).
        let header = [22, 3, 1, 0x9c, 0x40];
        let (err, fed, out) = feed_until_error(&mut conn, &header, 1);
        assert_eq!(err.kind(), ErrorKind::BadRecord, "{engine:?}: {err}");
        assert_eq!(fed, 5);
        assert_fatal_alert(&out);
    }
}

#[test]
fn a_handshake_message_over_64k_is_refused_from_its_header() {
    for &engine in ENGINES {
        let mut conn = TlsConn::new(&acceptor(engine));
        // A ClientHello claiming 16 MiB - 1, in a well-formed 16 KiB record.
        let mut input = vec![22, 3, 1, 0x40, 0x00, 1, 0xff, 0xff, 0xff];
        input.resize(5 + 16_384, 0);
        let (err, fed, out) = feed_until_error(&mut conn, &input, 1);
        assert_eq!(err.kind(), ErrorKind::BadRecord, "{engine:?}: {err}");
        // rustls checks the handshake length once the record is complete: bounded by it.
        assert_eq!(fed, input.len());
        assert_fatal_alert(&out);
    }
}

#[test]
fn a_64k_handshake_message_is_buffered_within_bounds_then_refused() {
    // The largest handshake message rustls accepts (0xffff bytes), dripped in 16 KiB records
    // of zeros: the server must hold it (bounded) and then fail to parse it.
    let mut message = vec![1, 0x00, 0xff, 0xff];
    message.resize(4 + 0xffff, 0);
    let mut input = Vec::new();
    for fragment in message.chunks(16_384) {
        let len = u16::try_from(fragment.len()).unwrap().to_be_bytes();
        input.extend_from_slice(&[22, 3, 1, len[0], len[1]]);
        input.extend_from_slice(fragment);
    }
    for &engine in ENGINES {
        for chunk in [1000, usize::MAX] {
            let mut conn = TlsConn::new(&acceptor(engine));
            let (err, _, out) = feed_until_error(&mut conn, &input, chunk.min(input.len()));
            assert_eq!(err.fault(), Fault::Peer, "{engine:?}: {err}");
            assert_fatal_alert(&out);
        }
    }
}

#[test]
fn a_tampered_record_after_the_handshake_fails_with_bad_record_mac() {
    let client = client_config(&ClientOpts::default());
    for &engine in ENGINES {
        let mut pair = Pair::new(&acceptor(engine), &client, "example.test", usize::MAX);
        pair.handshake();
        use std::io::Write;
        pair.client
            .writer()
            .write_all(b"GET / HTTP/1.1\r\n\r\n")
            .unwrap();
        let mut wire = Vec::new();
        pair.client.write_tls(&mut wire).unwrap();
        let last = wire.len() - 1;
        wire[last] ^= 1;
        pair.feed_server(&wire);
        let err = pair.server_err.as_ref().expect("tampering is detected");
        assert_eq!(err.kind(), ErrorKind::Decrypt, "{engine:?}: {err}");
        assert!(pair.server_plain.is_empty());
        // The (encrypted) alert is there to send; the client decrypts it as bad_record_mac.
        assert!(!pair.to_client.is_empty());
        pair.server_to_client();
        assert_eq!(
            pair.client_err,
            Some(rustls::Error::AlertReceived(
                rustls::AlertDescription::BadRecordMac
            ))
        );
    }
}

#[test]
fn a_client_alert_is_reported_as_its_fault() {
    let client = client_config(&ClientOpts::default());
    for &engine in ENGINES {
        let mut pair = Pair::new(&acceptor(engine), &client, "example.test", usize::MAX);
        pair.client_to_server(); // ClientHello
        // A fatal handshake_failure alert in plaintext, as a client that gives up would send.
        pair.feed_server(&[21, 3, 3, 0, 2, 2, 40]);
        let err = pair
            .server_err
            .as_ref()
            .expect("the alert ends the connection");
        assert_eq!(err.kind(), ErrorKind::AlertReceived, "{engine:?}: {err}");
        assert_eq!(err.fault(), Fault::Peer);
    }
}
