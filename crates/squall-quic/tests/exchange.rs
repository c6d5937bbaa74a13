//! A real QUIC client (quinn-proto's own endpoint, with rustls) against `squall_quic`, in
//! memory: every datagram both ways goes through the two endpoints, with a virtual clock. The
//! client speaks HTTP/3 with `squall-h3`'s encoders and decoders (its own control stream and
//! QPACK without a dynamic table), so these tests check the glue: handshake, Retry, streams
//! both ways under flow control, responses whole and in order.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use quinn_proto::crypto::rustls::QuicClientConfig;
use quinn_proto::{ClientConfig, ConnectionHandle, DatagramEvent, Dir, StreamId};
use squall_h3::qpack::{Decoder, Encoder, Section};
use squall_h3::server::{Event, ServerConfig as H3Config};
use squall_h3::{
    Frame, FrameDecoder, Settings, StreamKind, StreamType, encode_headers, encode_settings,
    encode_stream_type,
};
use squall_quic::{
    Conn, Endpoint, Outgoing, Received, Retry, Settings as QuicSettings, SharedKeys,
};
use squall_tls::rustls;
use squall_tls::{CertSpec, KeySource, TlsStore};

const CLIENT: &str = "127.0.0.1:40000";
const SERVER: &str = "127.0.0.1:443";

fn settings(retry: Retry) -> QuicSettings {
    QuicSettings {
        worker: 1,
        workers: 3,
        retry,
        streams_max: 16,
        stream_window: 64 * 1024,
        connection_window: 256 * 1024,
        idle_timeout: Duration::from_secs(30),
        gso: true,
        h3: H3Config::default(),
    }
}

/// A verifier that takes any certificate: the server's is self-signed, and what is tested is
/// the transport, not the PKI.
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn client_config() -> ClientConfig {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls).unwrap()))
}

/// Both ends and the wire between them.
struct Pair {
    now: Instant,
    client_endpoint: quinn_proto::Endpoint,
    client: quinn_proto::Connection,
    client_handle: ConnectionHandle,
    server: Endpoint,
    conns: HashMap<ConnectionHandle, Box<Conn>>,
    retries: usize,
}

impl Pair {
    fn new(retry: Retry) -> Pair {
        let spec = CertSpec {
            name: "test".into(),
            hosts: vec!["quic.test".into()],
            source: KeySource::SelfSigned,
        };
        let (store, _) = TlsStore::load(&[spec]).unwrap();
        let keys = SharedKeys::new();
        let server = Endpoint::new(settings(retry), store.quic_config(false), &keys).unwrap();
        let mut client_endpoint = quinn_proto::Endpoint::new(
            Arc::new(quinn_proto::EndpointConfig::default()),
            None,
            false,
            None,
        );
        let now = Instant::now();
        let (client_handle, client) = client_endpoint
            .connect(now, client_config(), SERVER.parse().unwrap(), "quic.test")
            .unwrap();
        Pair {
            now,
            client_endpoint,
            client,
            client_handle,
            server,
            conns: HashMap::new(),
            retries: 0,
        }
    }

    /// Moves datagrams and events both ways until nothing moves, then lets the clock run to
    /// the next timer; `until` stops it early.
    fn run(&mut self, mut until: impl FnMut(&mut Pair) -> bool) {
        for _ in 0..10_000 {
            if until(self) {
                return;
            }
            if !self.step() {
                let next = [self.client.poll_timeout()]
                    .into_iter()
                    .chain(self.conns.values_mut().map(|c| c.deadline()))
                    .flatten()
                    .min();
                let Some(next) = next else { return };
                self.now = self.now.max(next);
                self.client.handle_timeout(self.now);
                for conn in self.conns.values_mut() {
                    conn.timeout(self.now);
                }
            }
        }
        panic!("the exchange did not settle");
    }

    /// Moves datagrams and events both ways until nothing moves, without letting the clock
    /// run (no timer fires: a stalled exchange stays stalled rather than timing out);
    /// `each` runs before every round.
    fn settle(&mut self, mut each: impl FnMut(&mut Pair)) {
        for _ in 0..10_000 {
            each(self);
            if !self.step() {
                return;
            }
        }
        panic!("the exchange did not settle");
    }

    /// One round of moving things; true when something moved.
    fn step(&mut self) -> bool {
        let mut moved = false;
        let mut buf = Vec::new();
        while let Some(event) = self.client.poll_endpoint_events() {
            if let Some(back) = self.client_endpoint.handle_event(self.client_handle, event) {
                self.client.handle_event(back);
            }
        }
        while let Some(transmit) = self.client.poll_transmit(self.now, 10, &mut buf) {
            moved = true;
            let segment = transmit.segment_size.unwrap_or(transmit.size);
            for datagram in buf[..transmit.size].chunks(segment) {
                self.deliver_to_server(datagram);
            }
            buf.clear();
        }
        let handles: Vec<ConnectionHandle> = self.conns.keys().copied().collect();
        for handle in handles {
            let conn = self.conns.get_mut(&handle).unwrap();
            conn.drive(self.now);
            while let Some(event) = conn.endpoint_event() {
                if let Some(back) = self.server.connection_event(handle, event) {
                    conn.handle(back);
                }
            }
            let mut out = Vec::new();
            while let Some(outgoing) = conn.transmit(self.now, 10, &mut buf) {
                out.push(outgoing);
            }
            for outgoing in out {
                moved = true;
                self.deliver_to_client(&outgoing);
            }
        }
        moved
    }

    fn deliver_to_server(&mut self, datagram: &[u8]) {
        let from: SocketAddr = CLIENT.parse().unwrap();
        match (self.server).receive(self.now, from, None, BytesMut::from(datagram)) {
            Received::Dropped => {}
            Received::Conn(handle, event) => self.conns.get_mut(&handle).unwrap().handle(event),
            Received::New(handle, conn) => {
                self.conns.insert(handle, conn);
            }
            Received::Answer(outgoing) => {
                self.retries += 1;
                self.deliver_to_client(&outgoing);
            }
            Received::Misrouted(owner, _) => panic!("misrouted to {owner}"),
        }
    }

    fn deliver_to_client(&mut self, outgoing: &Outgoing) {
        let segment = outgoing.segment.unwrap_or(outgoing.bytes.len());
        for datagram in outgoing.bytes.chunks(segment) {
            let mut buf = Vec::new();
            let from = SERVER.parse().unwrap();
            let data = BytesMut::from(datagram);
            match (self.client_endpoint).handle(self.now, from, None, None, data, &mut buf) {
                Some(DatagramEvent::ConnectionEvent(_, event)) => self.client.handle_event(event),
                Some(DatagramEvent::Response(_) | DatagramEvent::NewConnection(_)) | None => {}
            }
        }
    }

    fn server_conn(&mut self) -> &mut Conn {
        self.conns.values_mut().next().expect("a server connection")
    }

    fn handshake(&mut self) {
        self.run(|p| !p.client.is_handshaking() && !p.conns.is_empty());
        assert!(!self.client.is_closed(), "{:?}", self.client.poll());
    }

    /// Opens the client's control stream with its SETTINGS.
    fn client_control(&mut self) {
        let id = self.client.streams().open(Dir::Uni).unwrap();
        let mut out = BytesMut::new();
        encode_stream_type(StreamType::Control, &mut out);
        encode_settings(&Settings::default(), &mut out);
        self.client.send_stream(id).write(&out).unwrap();
    }

    /// Sends a request; returns its stream.
    fn request(&mut self, method: &str, path: &str, body: &[u8]) -> StreamId {
        let id = self.client.streams().open(Dir::Bi).unwrap();
        let mut block = BytesMut::new();
        let mut encoder = Encoder::default();
        let length = body.len().to_string();
        let mut fields = vec![
            (&b":method"[..], method.as_bytes(), false),
            (b":scheme", b"https", false),
            (b":authority", b"quic.test", false),
            (b":path", path.as_bytes(), false),
        ];
        if !body.is_empty() {
            fields.push((b"content-length", length.as_bytes(), false));
        }
        encoder.encode_section(id.into(), fields, &mut block);
        let mut out = BytesMut::new();
        encode_headers(&block, &mut out);
        if !body.is_empty() {
            Frame::Data(Bytes::copy_from_slice(body)).encode(&mut out);
        }
        let mut send = self.client.send_stream(id);
        let mut chunks = [out.freeze()];
        let written = send.write_chunks(&mut chunks).unwrap();
        assert_eq!(
            chunks[0].len(),
            0,
            "{written:?}: the request fits the window"
        );
        send.finish().unwrap();
        id
    }

    /// Reads what the client got on stream `id` so far; true when it ended.
    fn client_read(&mut self, id: StreamId, into: &mut BytesMut) -> bool {
        let mut stream = self.client.recv_stream(id);
        let Ok(mut chunks) = stream.read(true) else {
            return false;
        };
        let mut fin = false;
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => into.extend_from_slice(&chunk.bytes),
                Ok(None) => {
                    fin = true;
                    break;
                }
                Err(_) => break,
            }
        }
        let _ = chunks.finalize();
        fin
    }
}

/// A response as the client decoded it.
#[derive(Debug)]
struct Response {
    status: String,
    fields: Vec<(String, String)>,
    body: Vec<u8>,
}

fn decode_response(stream: BytesMut) -> Response {
    let mut frames = FrameDecoder::new(StreamKind::Request, 64 * 1024);
    let mut decoder = Decoder::new(0, 0);
    let mut input = stream.freeze();
    let mut response = Response {
        status: String::new(),
        fields: Vec::new(),
        body: Vec::new(),
    };
    while let Some(frame) = frames.decode(&mut input).unwrap() {
        match frame {
            Frame::Headers(section) => {
                let Section::Fields(fields) = decoder.decode_section(0, &section, 1 << 20).unwrap()
                else {
                    panic!("no dynamic table: never blocked");
                };
                for field in fields {
                    let name = String::from_utf8(field.name.to_vec()).unwrap();
                    let value = String::from_utf8(field.value.to_vec()).unwrap();
                    if name == ":status" {
                        response.status = value;
                    } else {
                        response.fields.push((name, value));
                    }
                }
            }
            Frame::Data(piece) => response.body.extend_from_slice(&piece),
            other => panic!("unexpected frame {other:?}"),
        }
    }
    frames.finish().unwrap();
    response
}

/// The server's next request event, once it arrives.
fn next_request(pair: &mut Pair) -> (u64, squall_h3::server::Request) {
    let mut got = None;
    pair.run(|p| {
        if p.conns.is_empty() {
            return false;
        }
        if let Some(event) = p.server_conn().h3().poll_event() {
            got = Some(event);
            return true;
        }
        false
    });
    match got {
        Some(Event::Request { stream_id, request }) => (stream_id, request),
        other => panic!("expected a request, got {other:?}"),
    }
}

#[test]
fn a_get_is_answered_over_quic() {
    let mut pair = Pair::new(Retry::Never);
    pair.handshake();
    pair.client_control();
    let id = pair.request("GET", "/hello", b"");
    let (stream, request) = next_request(&mut pair);
    assert_eq!(stream, u64::from(id));
    assert_eq!(request.method, http::Method::GET);
    assert_eq!(&request.path[..], b"/hello");
    assert_eq!(request.authority.as_deref(), Some(&b"quic.test"[..]));
    let h3 = pair.server_conn().h3();
    let fields = [(&b"content-type"[..], &b"text/plain"[..])];
    h3.send_headers(stream, 200, fields, false).unwrap();
    h3.send_data(stream, Bytes::from_static(b"hello over h3\n"), true)
        .unwrap();
    let mut got = BytesMut::new();
    pair.run(|p| p.client_read(id, &mut got));
    let response = decode_response(got);
    assert_eq!(response.status, "200");
    assert!(
        response
            .fields
            .contains(&("content-type".into(), "text/plain".into()))
    );
    assert_eq!(response.body, b"hello over h3\n");
    assert_eq!(pair.retries, 0);
    assert_eq!(
        pair.server.handshakes(),
        1,
        "not yet reported over by a caller"
    );
}

/// A response far larger than the client's windows: written into QUIC as flow control
/// allows, the rest kept queued, all of it arriving in order with the stream's end.
#[test]
fn a_large_response_crosses_flow_control_whole() {
    let mut pair = Pair::new(Retry::Never);
    pair.handshake();
    pair.client_control();
    let id = pair.request("POST", "/upload", &[7u8; 5000]);
    let (stream, request) = next_request(&mut pair);
    assert_eq!(request.content_length, Some(5000));
    let mut body = Vec::new();
    pair.run(|p| {
        while let Some(event) = p.server_conn().h3().poll_event() {
            match event {
                Event::Data {
                    data, end_stream, ..
                } => {
                    body.extend_from_slice(&data);
                    if end_stream {
                        return true;
                    }
                }
                other => panic!("{other:?}"),
            }
        }
        false
    });
    assert_eq!(body, vec![7u8; 5000]);
    let big: Vec<u8> = (0..3 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    let h3 = pair.server_conn().h3();
    h3.send_headers(stream, 200, [], false).unwrap();
    h3.send_data(stream, Bytes::from(big.clone()), true)
        .unwrap();
    let mut got = BytesMut::new();
    pair.run(|p| p.client_read(id, &mut got));
    let response = decode_response(got);
    assert_eq!(response.status, "200");
    assert_eq!(response.body.len(), big.len());
    assert!(response.body == big, "the body arrives in order");
    assert_eq!(pair.server_conn().h3().queued_data_total(), 0);
}

/// With `retry = always`, the first Initial is answered with a Retry, and the client's
/// second one, carrying the token, is accepted.
#[test]
fn retry_validates_the_address_first() {
    let mut pair = Pair::new(Retry::Always);
    pair.handshake();
    // Every Initial without a token is answered with a Retry (the client may have sent
    // more than one before the first Retry reached it); none was accepted without one.
    let stats = pair.server.take_stats();
    assert!(pair.retries >= 1);
    assert_eq!(stats.retries, pair.retries as u64);
    assert_eq!(stats.accepted, 1);
    pair.client_control();
    let id = pair.request("GET", "/", b"");
    let (stream, _) = next_request(&mut pair);
    let h3 = pair.server_conn().h3();
    h3.send_headers(stream, 204, [], true).unwrap();
    let mut got = BytesMut::new();
    pair.run(|p| p.client_read(id, &mut got));
    assert_eq!(decode_response(got).status, "204");
}

/// A short-header packet whose connection ID names another worker is handed back to be
/// delivered there, before quinn-proto sees it.
#[test]
fn another_workers_packet_is_misrouted() {
    let mut pair = Pair::new(Retry::Never);
    let mut packet = vec![0x40u8];
    // Worker 2 of 3: a first byte of 2 + 3k.
    packet.extend_from_slice(&[5, 1, 2, 3, 4, 5, 6, 7]);
    packet.extend_from_slice(&[0u8; 40]);
    let from: SocketAddr = CLIENT.parse().unwrap();
    let received = (pair.server).receive(pair.now, from, None, BytesMut::from(&packet[..]));
    match received {
        Received::Misrouted(owner, data) => assert_eq!((owner, &data[..]), (2, &packet[..])),
        _ => panic!("not handed to worker 2"),
    }
    // Ours (worker 1) goes to quinn-proto, which knows no such connection.
    packet[1] = 4;
    let received = (pair.server).receive(pair.now, from, None, BytesMut::from(&packet[..]));
    assert!(!matches!(received, Received::Misrouted(..)));
    assert_eq!(pair.server.take_stats().misrouted, 1);
}

/// A request body is read from QUIC only as far as the application has released what it
/// took (plus the stream window): an upload faster than its consumer is held back by QUIC's
/// flow control at the client, not buffered here; released, the rest arrives whole.
#[test]
fn an_upload_waits_for_the_application_to_release_it() {
    let mut pair = Pair::new(Retry::Never);
    pair.handshake();
    pair.client_control();
    let id = pair.client.streams().open(Dir::Bi).unwrap();
    let body: Vec<u8> = (0..1_000_000u32).map(|i| (i % 253) as u8).collect();
    let mut block = BytesMut::new();
    let length = body.len().to_string();
    let fields = [
        (&b":method"[..], &b"POST"[..], false),
        (b":scheme", b"https", false),
        (b":authority", b"quic.test", false),
        (b":path", b"/up", false),
        (b"content-length", length.as_bytes(), false),
    ];
    Encoder::default().encode_section(id.into(), fields, &mut block);
    let mut wire = BytesMut::new();
    encode_headers(&block, &mut wire);
    Frame::Data(Bytes::from(body.clone())).encode(&mut wire);
    let mut wire = wire.freeze();
    let mut got = Vec::new();
    let mut finished = false;
    let drain = |p: &mut Pair, got: &mut Vec<u8>, finished: &mut bool| {
        while let Some(event) = p.server_conn().h3().poll_event() {
            match event {
                Event::Request { .. } => {}
                Event::Data {
                    data, end_stream, ..
                } => {
                    got.extend_from_slice(&data);
                    *finished |= end_stream;
                }
                other => panic!("{other:?}"),
            }
        }
    };
    // The client writes what its window lets it; nothing is released yet.
    pair.settle(|p| {
        if !wire.is_empty() {
            let mut chunks = [wire.clone()];
            if let Ok(written) = p.client.send_stream(id).write_chunks(&mut chunks) {
                let _ = wire.split_to(written.bytes);
            }
            if wire.is_empty() {
                p.client.send_stream(id).finish().unwrap();
            }
        }
        if !p.conns.is_empty() {
            drain(p, &mut got, &mut finished);
        }
    });
    let held_back = body.len() - got.len();
    assert!(
        got.len() as u64 <= 64 * 1024 + 1024,
        "read {} bytes ahead of the application (window 64 KiB)",
        got.len()
    );
    assert!(held_back > 0 && !finished);
    // Released as it is taken: the rest flows, and ends.
    pair.run(|p| {
        if !wire.is_empty() {
            let mut chunks = [wire.clone()];
            if let Ok(written) = p.client.send_stream(id).write_chunks(&mut chunks) {
                let _ = wire.split_to(written.bytes);
            }
            if wire.is_empty() {
                p.client.send_stream(id).finish().unwrap();
            }
        }
        if p.conns.is_empty() {
            return false;
        }
        let before = got.len();
        drain(p, &mut got, &mut finished);
        let taken = got.len() - before;
        if taken > 0 {
            p.server_conn().release(u64::from(id), taken);
        }
        // The first read-ahead was never released: release it once, now.
        if before == got.len() && !finished {
            p.server_conn().release(u64::from(id), 64 * 1024 + 1024);
        }
        finished
    });
    assert_eq!(got.len(), body.len(), "finished: {finished}");
    assert!(got == body, "the body arrives in order");
}

/// A short-header packet of this worker's connection-ID shape for a connection the endpoint
/// does not know (a client whose server restarted) is answered with a stateless reset
/// (RFC 9000 §10.3): a datagram smaller than the packet, ending in a 16-byte token.
#[test]
fn an_unknown_connection_gets_a_stateless_reset() {
    let mut pair = Pair::new(Retry::Never);
    let mut packet = vec![0x40u8];
    // Worker 1 of 3: a first byte of 1 + 3k.
    packet.extend_from_slice(&[4, 9, 9, 9, 9, 9, 9, 9]);
    packet.extend_from_slice(&[0x55u8; 60]);
    let from: SocketAddr = CLIENT.parse().unwrap();
    match (pair.server).receive(pair.now, from, None, BytesMut::from(&packet[..])) {
        Received::Answer(reset) => {
            assert_eq!(reset.to, from);
            assert!(reset.bytes.len() < packet.len() && reset.bytes.len() >= 21);
            assert_eq!(
                reset.bytes[0] & 0xc0,
                0x40,
                "it looks like a short-header packet"
            );
        }
        _ => panic!("no stateless reset"),
    }
}
