//! The server connection with well-behaved clients, their side: requests at every split
//! (GET, bodies, trailers, cookies, extended CONNECT, grease), QPACK sections blocked and
//! unblocked, and our own streams' opening bytes.

mod server_support;

use std::time::Instant;

use bytes::Bytes;
use server_support::*;
use squall_h3::qpack::DecoderInstruction;
use squall_h3::server::{Connection, Event, ServerConfig, Uni};
use squall_h3::{ErrorCode, Frame, Settings, StreamType, reserved};

fn config() -> ServerConfig {
    ServerConfig::default()
}

fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap()
}

#[test]
fn our_streams_open_with_their_types_and_settings() {
    let now = Instant::now();
    let mut conn = Connection::new(config(), now);
    let mut wire = Wire::default();
    wire.drain(&mut conn, usize::MAX);
    let expected = Settings {
        qpack_max_table_capacity: 4096,
        qpack_blocked_streams: 16,
        max_field_section_size: Some(16 * 1024),
        enable_connect_protocol: false,
        h3_datagram: false,
    };
    assert_eq!(wire.control(), [Frame::Settings(expected)]);
    assert!(
        wire.uni(Uni::QpackEncoder, StreamType::QpackEncoder)
            .is_empty()
    );
    assert!(
        wire.uni(Uni::QpackDecoder, StreamType::QpackDecoder)
            .is_empty()
    );
    assert!(wire.fins.is_empty(), "our unidirectional streams never end");
    assert!(conn.is_idle());
    conn.check_invariants();

    let with_connect = ServerConfig {
        enable_connect_protocol: true,
        ..config()
    };
    let mut conn = Connection::new(with_connect, now);
    let mut wire = Wire::default();
    wire.drain(&mut conn, usize::MAX);
    let [Frame::Settings(settings)] = &wire.control()[..] else {
        panic!("SETTINGS");
    };
    assert!(settings.enable_connect_protocol);
}

#[test]
fn a_get_at_every_split() {
    let mut client = Client::new();
    let head = client.headers(0, GET);
    let control = control_stream(&Settings::default());
    let script = [chunk(CONTROL, &control, false), chunk(0, &head, true)];
    for at in 0..script.len() {
        let transcript = run_every_split(&config(), &script, at);
        let exchange = transcript.exchange(0);
        let request = exchange.request.as_ref().unwrap();
        assert_eq!(request.method, http::Method::GET);
        assert_eq!(&request.scheme[..], b"https");
        assert_eq!(request.authority.as_deref(), Some(&b"example.com"[..]));
        assert_eq!(&request.path[..], b"/");
        assert!(request.headers.is_empty());
        assert!(exchange.ended && exchange.body.is_empty());
        assert_eq!(transcript.stats.requests, 1);
        assert!(transcript.resets.is_empty() && transcript.stops.is_empty());
    }
}

#[test]
fn a_post_with_a_body_and_content_length_at_every_split() {
    let mut client = Client::new();
    let fields = [
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/upload?x=1"),
        ("content-type", "text/plain"),
        ("content-length", "11"),
    ];
    let stream = concat(&[
        &client.headers(4, &fields),
        &data_frame(b"hello "),
        // Grease between frames is skipped (RFC 9114 §7.2.8).
        &raw_frame(reserved(3), b"ignored"),
        &data_frame(b""),
        &data_frame(b"world"),
    ]);
    let transcript = run_every_split(&config(), &[chunk(4, &stream, true)], 0);
    let exchange = transcript.exchange(4);
    let request = exchange.request.as_ref().unwrap();
    assert_eq!(request.method, http::Method::POST);
    assert_eq!(request.content_length, Some(11));
    assert_eq!(
        request.headers.get("content-type"),
        Some(&b"text/plain"[..])
    );
    assert_eq!(exchange.body, b"hello world");
    assert!(exchange.ended);
    // The head's fields are spans of one buffer, as squall-h2 hands them out.
    let (bytes, spans) = request.headers.clone().into_parts();
    let names: Vec<&str> = spans
        .iter()
        .map(|s| text(&bytes[s.name as usize..(s.name + s.name_len) as usize]))
        .collect();
    assert_eq!(names, ["content-type", "content-length"]);
}

#[test]
fn trailers_end_the_body_at_every_split() {
    let mut client = Client::new();
    let fields = [
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/rpc"),
        ("te", "trailers"),
    ];
    let stream = concat(&[
        &client.headers(0, &fields),
        &data_frame(b"abc"),
        &client.headers(0, &[("grpc-status", "0"), ("x-checksum", "9")]),
    ]);
    let transcript = run_every_split(&config(), &[chunk(0, &stream, true)], 0);
    let exchange = transcript.exchange(0);
    assert_eq!(exchange.body, b"abc");
    let trailers = exchange.trailers.as_ref().unwrap();
    assert_eq!(trailers["grpc-status"], "0");
    assert_eq!(trailers["x-checksum"], "9");
    assert!(exchange.ended);
}

#[test]
fn cookies_are_joined_and_host_stands_in_for_authority() {
    let mut client = Client::new();
    let fields = [
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "/"),
        ("cookie", "a=1"),
        ("host", "example.org"),
        ("cookie", "b=2"),
    ];
    let transcript = run(&config(), &[chunk(0, &client.headers(0, &fields), true)]);
    let request = transcript.exchange(0).request.clone().unwrap();
    assert_eq!(request.authority.as_deref(), Some(&b"example.org"[..]));
    let all: Vec<_> = request.headers.iter().collect();
    assert_eq!(
        all,
        [
            (&b"host"[..], &b"example.org"[..]),
            (b"cookie", b"a=1; b=2")
        ]
    );
}

/// The client's request references dynamic entries whose insertions come later on its
/// encoder stream: the section waits, with the body behind it, then the request comes.
#[test]
fn a_blocked_section_waits_for_the_encoder_stream() {
    let mut client = Client::with_table();
    let fields = [
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/blocked"),
        ("x-custom", "a value for the table"),
    ];
    let first = concat(&[&client.headers(0, &fields), &data_frame(b"body")]);
    let encoder = client.encoder_stream();
    assert!(encoder.len() > 1, "the client inserted");
    // Trailers with a new entry: blocked again until the second encoder stream piece.
    let trailers = client.headers(0, &[("x-trailer", "inserted late")]);
    let encoder_later = client.encoder_stream();
    let control = control_stream(&Settings::default());
    let script = [
        chunk(CONTROL, &control, false),
        chunk(0, &first, false),
        chunk(0, &trailers, true),
        chunk(ENCODER, &encoder, false),
        chunk(ENCODER, &encoder_later, false),
    ];
    for at in 1..script.len() {
        let transcript = run_every_split(&config(), &script, at);
        let exchange = transcript.exchange(0);
        let request = exchange.request.as_ref().unwrap();
        assert_eq!(&request.path[..], b"/blocked");
        assert_eq!(
            request.headers.get("x-custom"),
            Some(&b"a value for the table"[..])
        );
        assert_eq!(exchange.body, b"body");
        assert_eq!(
            exchange.trailers.as_ref().unwrap()["x-trailer"],
            "inserted late"
        );
        assert!(exchange.ended);
    }

    // Nothing comes out before the insertions; the decoder stream then acknowledges both
    // sections and the insertions, which the client's encoder accepts.
    let now = Instant::now();
    let mut conn = Connection::new(config(), now);
    conn.recv(0, Bytes::from(first), false, now).unwrap();
    conn.recv(0, Bytes::from(trailers), true, now).unwrap();
    assert!(conn.poll_event().is_none());
    conn.check_invariants();
    conn.recv(ENCODER, Bytes::from(encoder), false, now)
        .unwrap();
    conn.check_invariants();
    assert!(matches!(conn.poll_event(), Some(Event::Request { .. })));
    assert!(matches!(conn.poll_event(), Some(Event::Data { .. })));
    assert!(conn.poll_event().is_none(), "the trailers still wait");
    conn.recv(ENCODER, Bytes::from(encoder_later), false, now)
        .unwrap();
    conn.check_invariants();
    assert!(matches!(conn.poll_event(), Some(Event::Trailers { .. })));
    let mut wire = Wire::default();
    wire.drain(&mut conn, usize::MAX);
    let decoder = wire.uni(Uni::QpackDecoder, StreamType::QpackDecoder);
    let mut at = 0;
    let mut instructions = Vec::new();
    while let Some((instruction, len)) = DecoderInstruction::parse(&decoder[at..]).unwrap() {
        instructions.push(instruction);
        at += len;
    }
    assert_eq!(at, decoder.len());
    assert_eq!(
        instructions
            .iter()
            .filter(|i| **i == DecoderInstruction::SectionAck(0))
            .count(),
        2
    );
    client.encoder.feed_decoder_stream(&decoder).unwrap();
    assert_eq!(
        client.encoder.known_received_count(),
        client.encoder.insert_count()
    );
    client.encoder.check_invariants();
}

#[test]
fn extended_connect_carries_a_tunnel() {
    let fields = [
        (":method", "CONNECT"),
        (":protocol", "websocket"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/chat"),
    ];
    let config = ServerConfig {
        enable_connect_protocol: true,
        max_body_bytes: 4,
        ..config()
    };
    let mut client = Client::new();
    let stream = concat(&[&client.headers(0, &fields), &data_frame(b"more than four")]);
    let transcript = run_every_split(&config, &[chunk(0, &stream, false)], 0);
    let exchange = transcript.exchange(0);
    let request = exchange.request.as_ref().unwrap();
    assert_eq!(request.method, http::Method::CONNECT);
    assert_eq!(request.protocol.as_deref(), Some(&b"websocket"[..]));
    assert_eq!(
        exchange.body, b"more than four",
        "no body limit on a tunnel"
    );

    // Without the setting, :protocol makes the request malformed.
    let transcript = run(&ServerConfig::default(), &[chunk(0, &stream, false)]);
    assert_eq!(transcript.reset_codes(), [(0, ErrorCode::MessageError)]);
    assert_eq!(transcript.stats.malformed, 1);
}

/// Grease the connection must ignore: reserved frame types on request and control
/// streams, reserved stream types, reserved settings.
#[test]
fn grease_is_ignored() {
    let mut client = Client::new();
    let mut control = control_stream(&Settings::default());
    control.extend_from_slice(&raw_frame(reserved(7), b"grease"));
    let mut unknown = Vec::new();
    squall_h3::varint::encode(reserved(2), &mut unknown);
    unknown.extend_from_slice(b"whatever follows");
    let request = concat(&[
        &raw_frame(reserved(1), b""),
        &client.headers(0, GET),
        &raw_frame(reserved(5), b"after"),
    ]);
    let script = [
        chunk(CONTROL, &control, false),
        chunk(14, &unknown, true),
        chunk(18, &unknown, false),
        chunk(0, &request, true),
    ];
    for at in 0..script.len() {
        let transcript = run_every_split(&config(), &script, at);
        assert!(transcript.exchange(0).ended);
        assert!(transcript.resets.is_empty() && transcript.stops.is_empty());
    }
}
