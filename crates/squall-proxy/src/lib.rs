//! squall-proxy
#![forbid(unsafe_code)]
