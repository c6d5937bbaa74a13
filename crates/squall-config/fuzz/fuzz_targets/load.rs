//! Fuzz target: a config file's text through parse and validation, as `squall check` and a
//! reload read it. Nothing may panic; the answer must be the same when asked twice (the loader
//! is a pure function of the text), and a refusal must carry at least one diagnostic that
//! names the file.
//!
//! (No `#![forbid(unsafe_code)]` here: `fuzz_target!` expands to a `#[no_mangle]` entry point,
//! which that lint counts against `unsafe_code`. This crate is outside the workspace.)
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let first = squall_config::parse(text, "fuzz.toml");
    match &first {
        Ok(_) => {}
        Err(diagnostics) => {
            let message = diagnostics.to_string();
            assert!(
                message.contains("fuzz.toml"),
                "a diagnostic without the file: {message}"
            );
        }
    }
    let again = squall_config::parse(text, "fuzz.toml");
    assert_eq!(
        first.as_ref().ok(),
        again.as_ref().ok(),
        "the same text gave two configs"
    );
});
