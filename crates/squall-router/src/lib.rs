//! squall-router
#![forbid(unsafe_code)]
