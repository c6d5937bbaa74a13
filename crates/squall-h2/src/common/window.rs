//! Receive flow control (RFC 9113 §6.9), the giving back: window the application released
//! is owed to the peer until at least half a window is, then returned in one WINDOW_UPDATE,
//! so a stream of small reads does not become a stream of small frames.

use bytes::BytesMut;

use crate::encode::encode_window_update;
use crate::frame::{FRAME_HEADER_BYTES, StreamId};

/// A WINDOW_UPDATE frame's length on the wire.
pub(crate) const WINDOW_UPDATE_FRAME_BYTES: usize = FRAME_HEADER_BYTES + 4;

/// Adds `n` released bytes to `owed`. When `announce` and at least `threshold` is owed, the
/// debt goes back into `window` and a WINDOW_UPDATE for `id` (0: the connection) into `out`;
/// returns the bytes encoded.
#[inline]
pub(crate) fn credit(
    out: &mut BytesMut,
    id: StreamId,
    window: &mut i64,
    owed: &mut u64,
    n: u64,
    threshold: u64,
    announce: bool,
) -> usize {
    *owed += n;
    if !announce || *owed < threshold {
        return 0;
    }
    let increment = *owed;
    *owed = 0;
    *window += increment as i64;
    // Owed bytes were all taken from the window, which never exceeds 2^31-1 (a stream's
    // starts at our initial window, itself at most that: `sanitized` saw to it).
    encode_window_update(out, id, increment as u32);
    WINDOW_UPDATE_FRAME_BYTES
}
