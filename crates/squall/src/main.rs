//! squall binary
#![forbid(unsafe_code)]
fn main() {}
