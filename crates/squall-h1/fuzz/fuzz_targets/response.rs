//! Fuzz target: the response decoder (client role, for the proxy) on arbitrary bytes: 1xx
//! interims, every framing (length, chunked, until close), a response to HEAD, then the
//! origin's close. The first byte picks the request method and where the input splits; the
//! events must not depend on the split, and nothing may panic.
//!
//! (No `#![forbid(unsafe_code)]` here: see `request.rs`.)
#![no_main]

mod common;

use common::{Transcript, cut, feed};
use http::Method;
use libfuzzer_sys::fuzz_target;
use squall_h1::{ResponseDecoder, ResponseEvent, ResponseLimits};

const LIMITS: ResponseLimits = ResponseLimits {
    header_bytes_max: 1024,
    headers_count_max: 16,
    interim_count_max: 4,
};

fn record(transcript: &mut Transcript, event: ResponseEvent) {
    match event {
        ResponseEvent::Interim(head) => transcript.push(format!("interim {head:?}")),
        ResponseEvent::Head(head) => transcript.push(format!("head {head:?}")),
        ResponseEvent::Data(data) => transcript.data(&data),
        ResponseEvent::End { trailers } => transcript.push(format!("end {trailers:?}")),
    }
}

fn run(input: &[u8], cuts: &[usize], method: &Method) -> Transcript {
    let mut decoder = ResponseDecoder::new(LIMITS, method);
    let mut step = |buf: &mut bytes::BytesMut| {
        let result = decoder.decode(buf).map_err(|e| format!("{:?}", e.kind()));
        // After an error the decoder is poisoned and its scan state is not looked at again.
        if result.is_ok() {
            decoder.check_invariants();
        }
        result
    };
    let mut transcript = feed(input, cuts, &mut step, record);
    if transcript.error.is_none() {
        // The origin closes: a body framed by the close ends, anything else is cut short.
        for _ in 0..4 {
            match decoder.eof() {
                Ok(Some(event)) => record(&mut transcript, event),
                Ok(None) => break,
                Err(e) => {
                    transcript.error = Some(format!("eof {:?}", e.kind()));
                    break;
                }
            }
            decoder.check_invariants();
        }
    }
    transcript
}

fuzz_target!(|data: &[u8]| {
    let [selector, input @ ..] = data else {
        return;
    };
    let method = if selector & 1 == 0 {
        Method::GET
    } else {
        Method::HEAD
    };
    let whole = run(input, &[], &method);
    let split = run(input, &[cut(*selector, input.len())], &method);
    assert_eq!(
        whole, split,
        "the events depend on where the input was split"
    );
});
