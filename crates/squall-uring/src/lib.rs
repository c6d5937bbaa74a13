//! squall-uring
