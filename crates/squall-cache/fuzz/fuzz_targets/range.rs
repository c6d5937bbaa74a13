//! Fuzz target: the Range parser (RFC 9110 §14.2) on an arbitrary field value against a body
//! whose length the first two bytes give. Nothing may panic; a partial answer has at least one
//! and at most `RANGES_MAX` parts, each inside the body, and the Content-Range of each part reads back.
//!
//! (No `#![forbid(unsafe_code)]` here: see `headers.rs`.)
#![no_main]

use libfuzzer_sys::fuzz_target;
use squall_cache::{ContentRange, RANGES_MAX, RangeAnswer, parse_range};

fuzz_target!(|data: &[u8]| {
    let [a, b, value @ ..] = data else {
        return;
    };
    let len = u64::from(u16::from_le_bytes([*a, *b]));
    match parse_range(value, len) {
        RangeAnswer::Full | RangeAnswer::Unsatisfiable => {}
        RangeAnswer::Partial(ranges) => {
            assert!(
                !ranges.is_empty() && ranges.len() <= RANGES_MAX,
                "{ranges:?}"
            );
            for range in &ranges {
                assert!(
                    range.first <= range.last && range.last < len,
                    "{range:?} of {len}"
                );
                let header = ContentRange::part(*range, len);
                let text = std::str::from_utf8(header.as_bytes()).expect("ASCII");
                assert_eq!(text, format!("bytes {}-{}/{len}", range.first, range.last));
            }
        }
    }
});
