//! Decoding an HTTP/2 request head, as the server does it: a browser's GET in one HEADERS
//! frame, through the connection (frame, HPACK, validation) to the request event, then to
//! the server's field list (`squall_h1::Fields`, what the worker's `request_head` builds).
//!
//! Run with `cargo bench -p squall-h2 --bench request_head`. Two cases: the first request on
//! a connection (most fields are literals the decoder adds to its table) and a later one on
//! the same connection (nearly every field comes from the table, the common case). Each
//! iteration gets a connection that has seen the preface (and, for the later request, the
//! first request), made outside the measured time.

use std::hint::black_box;
use std::time::Instant;

use bytes::BytesMut;
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use squall_h2::{Connection, Event, PREFACE, Request, ServerConfig, encode_headers};

/// What a current Firefox sends for a script on a page over HTTP/2: 4 pseudo-header fields
/// and 12 regular ones, the cookie in two crumbs (RFC 9113 §8.2.3), about the fields of the
/// 13-field HTTP/1.1 head of squall-h1's bench (`:authority` for Host, no Connection).
fn browser_get(path: &str) -> Vec<(&[u8], Vec<u8>)> {
    vec![
        (b":method", b"GET".to_vec()),
        (b":scheme", b"https".to_vec()),
        (b":authority", b"www.example.com".to_vec()),
        (b":path", path.as_bytes().to_vec()),
        (
            b"user-agent",
            b"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0".to_vec(),
        ),
        (b"accept", b"*/*".to_vec()),
        (b"accept-language", b"en-US,en;q=0.5".to_vec()),
        (b"accept-encoding", b"gzip, deflate, br, zstd".to_vec()),
        (b"referer", b"https://www.example.com/".to_vec()),
        (
            b"cookie",
            b"session=0123456789abcdef0123456789abcdef".to_vec(),
        ),
        (b"cookie", b"theme=dark".to_vec()),
        (b"sec-fetch-dest", b"script".to_vec()),
        (b"sec-fetch-mode", b"no-cors".to_vec()),
        (b"sec-fetch-site", b"same-origin".to_vec()),
        (b"te", b"trailers".to_vec()),
        (b"priority", b"u=2".to_vec()),
    ]
}

/// One HEADERS frame (END_STREAM, END_HEADERS) of `fields`, encoded by `encoder`.
fn headers_frame(
    encoder: &mut squall_hpack::Encoder,
    stream_id: u32,
    fields: &[(&[u8], Vec<u8>)],
) -> BytesMut {
    let mut block = BytesMut::new();
    encoder.encode(
        fields.iter().map(|(n, v)| (*n, v.as_slice(), false)),
        &mut block,
    );
    let mut frame = BytesMut::new();
    encode_headers(&mut frame, stream_id, true, &block, 16_384);
    frame
}

/// A connection past the preface and the client's SETTINGS.
fn connection(now: Instant) -> Connection {
    let mut conn = Connection::new(ServerConfig::default(), now);
    let mut input = BytesMut::from(&PREFACE[..]);
    squall_h2::encode_settings(&mut input, &[]);
    conn.recv(&mut input, now).expect("preface");
    while conn.poll_event().is_some() {}
    conn
}

/// The request's fields as the worker keeps them.
fn to_fields(request: Request) -> squall_h1::Fields {
    let (bytes, spans) = request.headers.into_parts();
    let spans = (spans.into_iter())
        .map(|s| [s.name, s.name_len, s.value, s.value_len])
        .collect();
    squall_h1::Fields::from_parts(bytes, spans).expect("validated spans")
}

/// Receives `frame` and turns its request into the server's field list.
fn decode(conn: &mut Connection, frame: &mut BytesMut, now: Instant) -> squall_h1::Fields {
    conn.recv(frame, now).expect("a valid request");
    let Some(Event::Request { request, .. }) = conn.poll_event() else {
        panic!("no request");
    };
    to_fields(request)
}

fn first_request(c: &mut Criterion) {
    let now = Instant::now();
    let fields = browser_get("/assets/app.js?v=3");
    let frame = headers_frame(&mut squall_hpack::Encoder::new(), 1, &fields);
    c.bench_function("h2 request head, first on a connection (16 fields)", |b| {
        b.iter_batched_ref(
            || (connection(now), frame.clone()),
            |(conn, frame)| black_box(decode(conn, frame, now)),
            BatchSize::SmallInput,
        )
    });
}

fn later_request(c: &mut Criterion) {
    let now = Instant::now();
    let mut encoder = squall_hpack::Encoder::new();
    let first = headers_frame(&mut encoder, 1, &browser_get("/assets/app.js?v=3"));
    let later = headers_frame(&mut encoder, 3, &browser_get("/assets/style.css?v=3"));
    c.bench_function("h2 request head, later on a connection (16 fields)", |b| {
        b.iter_batched_ref(
            || {
                let mut conn = connection(now);
                decode(&mut conn, &mut first.clone(), now);
                (conn, later.clone())
            },
            |(conn, frame)| black_box(decode(conn, frame, now)),
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, first_request, later_request);
criterion_main!(benches);
