//! Fuzz target: the chunked body decoder, through the request decoder, behind a fixed
//! `Transfer-Encoding: chunked` head, so every input starts in the chunk grammar (sizes,
//! extensions, data, CRLFs, the last chunk, trailers). The first byte picks two cuts; the
//! events must not depend on them, and the body must never pass its limit.
//!
//! (No `#![forbid(unsafe_code)]` here: see `request.rs`.)
#![no_main]

mod common;

use common::{Transcript, cut, feed};
use libfuzzer_sys::fuzz_target;
use squall_h1::{Event, Limits, RequestDecoder};

const HEAD: &[u8] = b"POST /upload HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";

const LIMITS: Limits = Limits {
    header_bytes_max: 512,
    uri_bytes_max: 256,
    body_bytes_max: 1024,
    headers_count_max: 8,
};

fn run(input: &[u8], cuts: &[usize]) -> Transcript {
    let mut decoder = RequestDecoder::new(LIMITS);
    let mut body = 0u64;
    let mut step = |buf: &mut bytes::BytesMut| {
        let result = decoder.decode(buf).map_err(|e| format!("{:?}", e.kind()));
        // After an error the decoder is poisoned and its scan state is not looked at again.
        if result.is_ok() {
            decoder.check_invariants();
        }
        result
    };
    let record = |transcript: &mut Transcript, event: Event| match event {
        Event::Head(head) => transcript.push(format!("head {head:?}")),
        Event::Data(data) => {
            body += data.len() as u64;
            assert!(body <= LIMITS.body_bytes_max, "a body past its limit");
            transcript.data(&data);
        }
        Event::End { trailers } => {
            body = 0;
            transcript.push(format!("end {trailers:?}"));
        }
    };
    feed(input, cuts, &mut step, record)
}

fuzz_target!(|data: &[u8]| {
    let [selector, chunks @ ..] = data else {
        return;
    };
    let input = [HEAD, chunks].concat();
    let whole = run(&input, &[]);
    let first = HEAD.len() + cut(selector & 0x0f | selector << 4, chunks.len()) / 2;
    let second = HEAD.len() + cut(*selector, chunks.len());
    let split = run(&input, &[first.min(second), first.max(second)]);
    assert_eq!(
        whole, split,
        "the events depend on where the input was split"
    );
});
