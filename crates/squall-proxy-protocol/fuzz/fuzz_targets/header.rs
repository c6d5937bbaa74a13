//! Any bytes: `parse` never panics, a `Done` length lies within the bytes and the bounds, every
//! prefix of a whole header is `Incomplete` (so a header split across reads parses the same),
//! and what follows a header never changes it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use squall_proxy_protocol::{Parsed, V1_MAX_BYTES, V2_MAX_BYTES, parse};

fuzz_target!(|data: &[u8]| {
    let Ok(Parsed::Done { header, len }) = parse(data) else {
        return;
    };
    assert!(len <= data.len() && len <= V1_MAX_BYTES.max(V2_MAX_BYTES));
    for cut in 0..len {
        assert_eq!(parse(&data[..cut]), Ok(Parsed::Incomplete), "cut at {cut}");
    }
    assert_eq!(parse(&data[..len]), Ok(Parsed::Done { header, len }));
});
