//! squall-config
#![forbid(unsafe_code)]
