//! Micro-benchmarks of the per-request hot path: decoding a browser-like GET head, and
//! encoding the head and body of a small (13-byte) response.
//!
//! Run with `cargo bench -p squall-h1`; criterion's time per iteration is the cost per
//! request (per 16 requests for the pipelined case, whose throughput line gives requests/s).
//! The httparse-only line is the floor the decoder builds on.

use std::hint::black_box;

use bytes::BytesMut;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use http::{HeaderMap, HeaderValue, StatusCode, Version};
use squall_h1::{
    Event, Limits, RequestDecoder, RequestFraming, ResponseHead, encode_response_head,
};

/// What a current Firefox sends for a script on a page (about 500 bytes, 13 fields).
const BROWSER_GET: &[u8] = b"GET /assets/app.js?v=3 HTTP/1.1\r\n\
Host: www.example.com\r\n\
User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n\
Accept: */*\r\n\
Accept-Language: en-US,en;q=0.5\r\n\
Accept-Encoding: gzip, deflate, br, zstd\r\n\
Referer: https://www.example.com/\r\n\
Connection: keep-alive\r\n\
Cookie: session=0123456789abcdef0123456789abcdef; theme=dark\r\n\
Sec-Fetch-Dest: script\r\n\
Sec-Fetch-Mode: no-cors\r\n\
Sec-Fetch-Site: same-origin\r\n\
Priority: u=2\r\n\
\r\n";

const DATE: &[u8] = b"Sun, 06 Nov 1994 08:49:37 GMT";

fn decode_browser_get(c: &mut Criterion) {
    // As in a worker: one decoder per connection and one receive buffer, reused. Appending the
    // bytes stands in for the receive; the head is dropped inside the loop, as the proxy
    // drops it after the request, so the allocator sees the real reuse pattern.
    let mut decoder = RequestDecoder::new(Limits::default());
    let mut buf = BytesMut::with_capacity(64 * 1024);
    c.bench_function("decode browser GET head", |b| {
        b.iter(|| {
            buf.extend_from_slice(BROWSER_GET);
            let head = decoder.decode(&mut buf);
            let end = decoder.decode(&mut buf);
            debug_assert!(matches!(end, Ok(Some(Event::End { .. }))));
            black_box((head, end))
        })
    });
}

/// The floor: httparse alone on the same head, without building a `RequestHead`.
fn httparse_baseline(c: &mut Criterion) {
    c.bench_function("httparse only, browser GET head", |b| {
        b.iter(|| {
            let mut fields = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut fields);
            black_box(req.parse(black_box(BROWSER_GET)).is_ok())
        })
    });
}

fn decode_pipelined(c: &mut Criterion) {
    const DEPTH: usize = 16;
    let input = BROWSER_GET.repeat(DEPTH);
    let mut decoder = RequestDecoder::new(Limits::default());
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut group = c.benchmark_group("pipelined");
    group.throughput(Throughput::Elements(DEPTH as u64));
    group.bench_function("decode 16 browser GET heads", |b| {
        b.iter(|| {
            buf.extend_from_slice(&input);
            while let Ok(Some(event)) = decoder.decode(&mut buf) {
                black_box(event);
            }
        })
    });
    group.finish();
}

fn encode_small_response(c: &mut Criterion) {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("text/plain"));
    let req = RequestFraming {
        version: Version::HTTP_11,
        keep_alive: true,
        is_head: false,
    };
    let mut out = BytesMut::with_capacity(4096);
    c.bench_function("encode 13-byte response", |b| {
        b.iter(|| {
            out.clear();
            let head = ResponseHead {
                status: StatusCode::OK,
                headers: &headers,
                raw_headers: b"Server: squall\r\n",
                body_len: Some(13),
            };
            if encode_response_head(&head, black_box(req), DATE, &mut out) {
                out.extend_from_slice(b"Hello, world!");
            }
            black_box(out.len())
        })
    });
}

criterion_group!(
    benches,
    httparse_baseline,
    decode_browser_get,
    decode_pipelined,
    encode_small_response
);
criterion_main!(benches);
