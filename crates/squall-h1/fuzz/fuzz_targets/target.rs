//! Fuzz target: the request-target normaliser (`squall_h1::target`) on arbitrary bytes after
//! a `/`. It must never panic; its output must be normal (normalising it again changes
//! nothing), hold no `//`, `/./` or `/../` in its path and not end in `/.` or `/..`, keep the
//! query as it came, and never climb above the root (a `..` there is refused, never
//! clamped). The lenient reading of the output must be normal in the same sense, with no `\`
//! or `;` left.
//!
//! (No `#![forbid(unsafe_code)]` here: see `request.rs`.)
#![no_main]

use libfuzzer_sys::fuzz_target;
use squall_h1::target::{lenient, normalize};

fuzz_target!(|data: &[u8]| {
    let mut target = Vec::with_capacity(data.len() + 1);
    target.push(b'/');
    target.extend_from_slice(data);
    let Ok(normal) = normalize(&target) else {
        return;
    };
    let normal = normal.unwrap_or_else(|| target.clone());
    assert_eq!(normalize(&normal), Ok(None), "not idempotent: {normal:?}");
    let query_at = normal.iter().position(|&b| b == b'?').unwrap_or(normal.len());
    let (path, query) = normal.split_at(query_at);
    let target_query = target.iter().position(|&b| b == b'?').map_or(&[][..], |at| &target[at..]);
    assert_eq!(query, target_query, "the query changed");
    assert_path_is_normal(path);
    if let Some(read) = lenient(path) {
        assert_path_is_normal(read.as_bytes());
        assert!(!read.contains('\\') && !read.contains(';'), "{read}");
    }
});

fn assert_path_is_normal(path: &[u8]) {
    assert_eq!(path.first(), Some(&b'/'), "{path:?}");
    let text = String::from_utf8_lossy(path);
    for bad in ["//", "/./", "/../"] {
        assert!(!text.contains(bad), "{bad} in {text}");
    }
    assert!(!text.ends_with("/.") && !text.ends_with("/.."), "{text}");
}
