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

/// When given-back window is announced: once half a window of `size` bytes is owed.
pub(crate) fn threshold(size: u32) -> u64 {
    u64::from(size / 2).max(1)
}

/// The connection's receive window: what the peer may still send, and what was given back
/// (released by the application, or dropped) and not yet announced.
#[derive(Debug)]
pub(crate) struct ConnRecvWindow {
    pub(crate) window: i64,
    pub(crate) owed: u64,
    threshold: u64,
}

impl ConnRecvWindow {
    /// A window of our `size`, announced in SETTINGS and the first WINDOW_UPDATE.
    pub(crate) fn new(size: u32) -> Self {
        Self {
            window: i64::from(size),
            owed: 0,
            threshold: threshold(size),
        }
    }

    /// Takes a DATA frame's flow-controlled length (padding included) from the window;
    /// false, and nothing taken, when it is more than the window: a connection
    /// FLOW_CONTROL_ERROR (§6.9.1).
    #[inline]
    pub(crate) fn take(&mut self, flow_len: u32) -> bool {
        if i64::from(flow_len) > self.window {
            return false;
        }
        self.window -= i64::from(flow_len);
        true
    }

    /// Gives back `n` bytes, announced in a WINDOW_UPDATE in `out` once half the window is
    /// owed; returns the bytes encoded.
    #[inline]
    pub(crate) fn credit(&mut self, out: &mut BytesMut, n: u64) -> usize {
        let (window, owed) = (&mut self.window, &mut self.owed);
        credit(out, 0, window, owed, n, self.threshold, true)
    }
}
