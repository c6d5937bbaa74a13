//! The exchange compressing a response: the head it sends (coding, Vary, weak ETag, no
//! length, chunked or DATA frames), the body decoded back to the origin's bytes for every
//! split of the origin's response, a flush at each pause of the origin, what the fill sees,
//! and backpressure counted on the compressed bytes.
//!
//! A driver of its own rather than the pair harness: the harness keeps what the client saw as
//! text, and compressed bodies are bytes.

mod exchange_support;

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use exchange_support::{HIGH, client, config, head, splits};
use squall_config::{Compress, HeaderEdits};
use squall_proxy::compress::{Coding, decode};
use squall_proxy::{
    Action, ClientFraming, ClientHead, ClientProtocol, Exchange, FillHook, ProxyRoute, ToClient,
};
use squall_upstream::ServerId;

fn route(cache: bool) -> Arc<ProxyRoute> {
    Arc::new(ProxyRoute {
        id: 1,
        upstream: 0,
        request_headers: HeaderEdits::default(),
        response_headers: HeaderEdits::default(),
        cache,
        cache_ttl: None,
        compress: Some(Compress::default()),
        upgrade: None,
        rewrite: None,
        timeouts: Default::default(),
        body_bytes_max: None,
    })
}

/// What one exchange did, as bytes.
#[derive(Default)]
struct Seen {
    head: Option<ClientHead>,
    body: Vec<u8>,
    /// The body pieces, as the client got them.
    pieces: Vec<Bytes>,
    fill_head: Option<(http::HeaderMap, Option<u64>)>,
    fill_body: Vec<u8>,
    ended: bool,
    aborted: bool,
}

/// Runs the queued actions of `ex` (one server, always reachable; writes acknowledged).
fn run(ex: &mut Exchange, now: Instant, seen: &mut Seen) {
    while let Some(action) = ex.poll_action() {
        match action {
            Action::Pick => ex.on_pick(Some(ServerId::new(0)), now),
            Action::Connect { .. } => ex.on_origin_connected(false, now),
            Action::WriteOrigin(bytes) => ex.on_origin_sent(bytes.len(), now),
            Action::Client(ToClient::Head(head)) => seen.head = Some(head),
            Action::Client(ToClient::Data(data)) => {
                seen.body.extend_from_slice(&data);
                seen.pieces.push(data);
            }
            Action::Client(ToClient::End { .. }) => seen.ended = true,
            Action::Client(ToClient::Abort) => seen.aborted = true,
            Action::Fill(FillHook::Head {
                client_headers,
                body_len,
                ..
            }) => seen.fill_head = Some((client_headers, body_len)),
            Action::Fill(FillHook::Data(data)) => seen.fill_body.extend_from_slice(&data),
            _ => {}
        }
        ex.check_invariants();
    }
}

fn start(raw: &str, protocol: ClientProtocol, cache: bool) -> (Exchange, Instant, Seen) {
    let now = Instant::now();
    let mut ex = Exchange::new(head(raw), route(cache), client(protocol), config(1), now);
    let mut seen = Seen::default();
    run(&mut ex, now, &mut seen);
    (ex, now, seen)
}

fn page() -> String {
    (0..60)
        .map(|i| format!("<p>paragraph {i} of a page that compresses</p>\n"))
        .collect()
}

#[test]
fn every_split_of_the_origin_decodes_to_its_body() {
    let body = page();
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nETag: \"v7\"\r\nVary: Origin\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let cases = [
        ("gzip", Coding::Gzip, ClientProtocol::Http11),
        ("gzip, br", Coding::Brotli, ClientProtocol::H2),
        ("zstd, gzip;q=0.5", Coding::Zstd, ClientProtocol::Http11),
    ];
    for (accept, coding, protocol) in cases {
        let raw = format!("GET / HTTP/1.1\r\nHost: x\r\nAccept-Encoding: {accept}\r\n\r\n");
        for pieces in splits(response.as_bytes()) {
            let (mut ex, now, mut seen) = start(&raw, protocol, false);
            for piece in &pieces {
                // The client reads everything: a flush per byte makes more bytes than it.
                ex.on_client_room(HIGH, now);
                ex.on_origin_data(piece, now);
                run(&mut ex, now, &mut seen);
            }
            assert!(
                seen.ended && ex.is_finished(),
                "{accept}: {} pieces",
                pieces.len()
            );
            let head = seen.head.as_ref().expect("a head");
            assert_eq!(head.body_len, None);
            let framing = match protocol {
                ClientProtocol::H2 => ClientFraming::Frames,
                _ => ClientFraming::Chunked,
            };
            assert_eq!(head.framing, framing);
            assert_eq!(head.headers["content-encoding"], coding.token());
            assert_eq!(head.headers["etag"], "W/\"v7\"");
            let vary: Vec<_> = head.headers.get_all("vary").iter().collect();
            assert_eq!(vary, ["Origin", "Accept-Encoding"]);
            assert_eq!(decode(coding, &seen.body).unwrap(), body.as_bytes());
            let stats = ex.compression().expect("compressed");
            assert_eq!(stats.coding, coding);
            assert_eq!(stats.bytes_in, body.len() as u64);
            assert_eq!(stats.bytes_out, seen.body.len() as u64);
        }
    }
}

#[test]
fn each_pause_of_the_origin_flushes_what_it_sent() {
    let raw = "GET /events HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n";
    let (mut ex, now, mut seen) = start(raw, ClientProtocol::Http11, false);
    ex.on_origin_data(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n",
        now,
    );
    run(&mut ex, now, &mut seen);
    let mut sent = String::new();
    for i in 0..5 {
        let event = format!("data: {i}\n\n");
        sent.push_str(&event);
        ex.on_origin_data(format!("{:x}\r\n{event}\r\n", event.len()).as_bytes(), now);
        run(&mut ex, now, &mut seen);
        let mut decoder = flate2::write::GzDecoder::new(Vec::new());
        std::io::Write::write_all(&mut decoder, &seen.body).unwrap();
        std::io::Write::flush(&mut decoder).unwrap();
        assert_eq!(decoder.get_ref(), sent.as_bytes(), "event {i} is out");
    }
    ex.on_origin_data(b"0\r\n\r\n", now);
    run(&mut ex, now, &mut seen);
    assert!(seen.ended);
    assert_eq!(decode(Coding::Gzip, &seen.body).unwrap(), sent.as_bytes());
}

#[test]
fn the_fill_sees_what_the_client_gets() {
    let body = page();
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nCache-Control: max-age=60\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let raw = "GET / HTTP/1.1\r\nHost: x\r\nAccept-Encoding: br\r\n\r\n";
    let (mut ex, now, mut seen) = start(raw, ClientProtocol::Http11, true);
    ex.on_origin_data(response.as_bytes(), now);
    run(&mut ex, now, &mut seen);
    let (headers, body_len) = seen.fill_head.clone().expect("a fill head");
    assert_eq!(headers["content-encoding"], "br");
    assert_eq!(headers["vary"], "Accept-Encoding");
    assert_eq!(body_len, None);
    assert_eq!(seen.fill_body, seen.body);
    assert_eq!(
        decode(Coding::Brotli, &seen.fill_body).unwrap(),
        body.as_bytes()
    );
}

#[test]
fn responses_that_are_not_compressed_keep_their_length() {
    let body = page();
    let head_of = |extra: &str| {
        format!(
            "HTTP/1.1 200 OK\r\n{extra}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let gzip = "GET / HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n";
    let cases = [
        (gzip, head_of("Content-Type: image/png\r\n"), false),
        (
            gzip,
            head_of("Content-Type: text/html\r\nContent-Encoding: gzip\r\n"),
            false,
        ),
        (
            gzip,
            head_of("Content-Type: text/html\r\nCache-Control: no-transform\r\n"),
            false,
        ),
        (
            "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
            head_of("Content-Type: text/html\r\n"),
            true,
        ),
        (
            "GET / HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nRange: bytes=0-3\r\n\r\n",
            head_of("Content-Type: text/html\r\n"),
            true,
        ),
        (
            "GET / HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\nsmall".into(),
            false,
        ),
    ];
    for (request, response, vary) in cases {
        let (mut ex, now, mut seen) = start(request, ClientProtocol::Http11, false);
        ex.on_origin_data(response.as_bytes(), now);
        run(&mut ex, now, &mut seen);
        let head = seen.head.as_ref().expect("a head");
        assert!(head.body_len.is_some(), "{response:.60}");
        assert!(matches!(head.framing, ClientFraming::Length(_)));
        assert_eq!(
            head.headers.get_all("vary").iter().count(),
            usize::from(vary)
        );
        assert!(ex.compression().is_none());
        assert_eq!(
            seen.body,
            response.split("\r\n\r\n").nth(1).unwrap().as_bytes()
        );
    }
}

#[test]
fn backpressure_counts_the_compressed_bytes() {
    // Bytes that do not compress: the client's room runs out and the origin is paused.
    let mut x = 7u32;
    let body: Vec<u8> = (0..8 * HIGH)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    let mut response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    response.extend_from_slice(&body);
    let raw = "GET / HTTP/1.1\r\nHost: x\r\nAccept-Encoding: zstd\r\n\r\n";
    let (mut ex, now, mut seen) = start(raw, ClientProtocol::Http11, false);
    let mut paused = false;
    for piece in response.chunks(HIGH / 2) {
        ex.on_origin_data(piece, now);
        while let Some(action) = ex.poll_action() {
            match action {
                Action::PauseOrigin => paused = true,
                Action::Client(ToClient::Data(data)) => seen.body.extend_from_slice(&data),
                Action::Client(ToClient::End { .. }) => seen.ended = true,
                _ => {}
            }
        }
    }
    assert!(paused, "no room, no reading");
    assert!(ex.buffered_bytes() > 0, "the rest waits undecoded");
    while !ex.is_finished() {
        ex.on_client_room(HIGH, now);
        run(&mut ex, now, &mut seen);
    }
    assert!(seen.ended);
    assert_eq!(decode(Coding::Zstd, &seen.body).unwrap(), body);
}
