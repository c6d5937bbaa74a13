//! squall-h1
#![forbid(unsafe_code)]
