//! Fuzz target: the request decoder (server role) on arbitrary bytes, pipelined requests and
//! bodies included. The first byte picks where the rest splits into two reads; the events
//! must be the same as when the bytes arrive at once (body pieces joined), the invariants
//! must hold after each step, and nothing may panic.
//!
//! (No `#![forbid(unsafe_code)]` here: `fuzz_target!` expands to a `#[no_mangle]` entry point,
//! which that lint counts against `unsafe_code`. This crate is outside the workspace.)
#![no_main]

mod common;

use common::{Transcript, cut, feed};
use libfuzzer_sys::fuzz_target;
use squall_h1::{Event, Limits, RequestDecoder};

/// Small limits, so that the fuzzer reaches each of them.
const LIMITS: Limits = Limits {
    header_bytes_max: 1024,
    uri_bytes_max: 256,
    body_bytes_max: 4096,
    headers_count_max: 16,
};

fn run(input: &[u8], cuts: &[usize]) -> Transcript {
    let mut decoder = RequestDecoder::new(LIMITS);
    let mut step = |buf: &mut bytes::BytesMut| {
        let result = decoder.decode(buf).map_err(|e| format!("{:?}", e.kind()));
        // After an error the decoder is poisoned and its scan state is not looked at again.
        if result.is_ok() {
            decoder.check_invariants();
        }
        result
    };
    feed(input, cuts, &mut step, record)
}

pub fn record(transcript: &mut Transcript, event: Event) {
    match event {
        Event::Head(head) => transcript.push(format!("head {head:?}")),
        Event::Data(data) => transcript.data(&data),
        Event::End { trailers } => transcript.push(format!("end {trailers:?}")),
    }
}

fuzz_target!(|data: &[u8]| {
    let [selector, input @ ..] = data else {
        return;
    };
    let whole = run(input, &[]);
    let split = run(input, &[cut(*selector, input.len())]);
    assert_eq!(
        whole, split,
        "the events depend on where the input was split"
    );
});
