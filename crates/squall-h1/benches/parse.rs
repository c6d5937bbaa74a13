//! Micro-benchmarks of the per-request hot path: decoding a curl-like (3 fields) and a
//! browser-like (13 fields) GET head, encoding
//! the head and body of a small (13-byte) response, and, for the proxy path, encoding the
//! request to an origin and decoding a typical origin response.
//!
//! Run with `cargo bench -p squall-h1`; criterion's time per iteration is the cost per
//! request (per 16 requests for the pipelined case, whose throughput line gives requests/s).
//! The httparse-only line is the floor the decoder builds on.

use std::hint::black_box;

use bytes::BytesMut;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderValue, Method, StatusCode, Version};
use squall_h1::{
    BodyKind, Event, Limits, OutboundRequest, RequestDecoder, RequestFraming, ResponseDecoder,
    ResponseEvent, ResponseHead, ResponseLimits, encode_request_head, encode_response_head,
};

/// What curl sends (3 fields): the smallest head a real client sends, so the fixed cost of a
/// head (request line, framing checks, the request's own allocations) shows apart from the
/// per-field cost that the 13-field head adds.
const CURL_GET: &[u8] = b"GET /assets/app.js?v=3 HTTP/1.1\r\n\
Host: www.example.com\r\n\
User-Agent: curl/8.5.0\r\n\
Accept: */*\r\n\
\r\n";

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

/// What an nginx or CDN origin typically answers for a small static file (11 fields), with its
/// 13-byte body in the same read.
const ORIGIN_RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\n\
Server: nginx/1.26.2\r\n\
Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
Content-Type: application/javascript; charset=utf-8\r\n\
Content-Length: 13\r\n\
Last-Modified: Sat, 05 Nov 1994 10:00:00 GMT\r\n\
Connection: keep-alive\r\n\
ETag: \"6543a1b2-d\"\r\n\
Cache-Control: public, max-age=3600\r\n\
Vary: Accept-Encoding\r\n\
X-Content-Type-Options: nosniff\r\n\
Accept-Ranges: bytes\r\n\
\r\n\
Hello, world!";

const DATE: &[u8] = b"Sun, 06 Nov 1994 08:49:37 GMT";

/// Decodes `input`, one GET head, as a worker does: one decoder per connection and one
/// receive buffer, reused. Appending the bytes stands in for the receive; the head is dropped
/// inside the loop, as the proxy drops it after the request, so the allocator sees the real
/// reuse pattern. Criterion's time per iteration is the time per head.
fn decode_head(c: &mut Criterion, name: &str, input: &[u8]) {
    let mut decoder = RequestDecoder::new(Limits::default());
    let mut buf = BytesMut::with_capacity(64 * 1024);
    c.bench_function(name, |b| {
        b.iter(|| {
            buf.extend_from_slice(input);
            let head = decoder.decode(&mut buf);
            let end = decoder.decode(&mut buf);
            debug_assert!(matches!(end, Ok(Some(Event::End { .. }))));
            black_box((head, end))
        })
    });
}

fn decode_curl_get(c: &mut Criterion) {
    decode_head(c, "decode curl GET head (3 fields)", CURL_GET);
}

fn decode_browser_get(c: &mut Criterion) {
    decode_head(c, "decode browser GET head (13 fields)", BROWSER_GET);
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

fn decode_origin_response(c: &mut Criterion) {
    // As on an origin connection from the keep-alive pool: one decoder, re-armed per request.
    let mut decoder = ResponseDecoder::new(ResponseLimits::default(), &Method::GET);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    c.bench_function(
        "decode typical origin response (11 fields, 13-byte body)",
        |b| {
            b.iter(|| {
                buf.extend_from_slice(ORIGIN_RESPONSE);
                let head = decoder.decode(&mut buf);
                let data = decoder.decode(&mut buf);
                let end = decoder.decode(&mut buf);
                debug_assert!(matches!(end, Ok(Some(ResponseEvent::End { .. }))));
                decoder.expect(&Method::GET);
                black_box((head, data, end))
            })
        },
    );
}

fn encode_origin_request(c: &mut Criterion) {
    // The browser GET's fields as the proxy forwards them (hop-by-hop already stripped).
    let mut headers = HeaderMap::new();
    for (name, value) in [
        (
            "user-agent",
            "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
        ),
        ("accept", "*/*"),
        ("accept-language", "en-US,en;q=0.5"),
        ("accept-encoding", "gzip, deflate, br, zstd"),
        ("referer", "https://www.example.com/"),
        (
            "cookie",
            "session=0123456789abcdef0123456789abcdef; theme=dark",
        ),
    ] {
        headers.append(name, HeaderValue::from_static(value));
    }
    let target = PathAndQuery::from_static("/assets/app.js?v=3");
    let host = HeaderValue::from_static("www.example.com");
    let mut out = BytesMut::with_capacity(4096);
    c.bench_function("encode origin request head", |b| {
        b.iter(|| {
            out.clear();
            let req = OutboundRequest {
                method: &Method::GET,
                target: &target,
                host: &host,
                headers: &headers,
                raw_headers: b"X-Forwarded-For: 192.0.2.1\r\nX-Forwarded-Proto: https\r\n",
                body: BodyKind::Empty,
                keep_alive: true,
            };
            encode_request_head(black_box(&req), &mut out);
            black_box(out.len())
        })
    });
}

criterion_group!(
    benches,
    httparse_baseline,
    decode_curl_get,
    decode_browser_get,
    decode_pipelined,
    encode_small_response,
    decode_origin_response,
    encode_origin_request
);
criterion_main!(benches);
