//! Where a frame may come, before it is handled by type: the rules of RFC 9113 §3.4 and
//! §6.10 that both roles apply alike, to frames and to the frame decoder's errors.

use crate::error::{ErrorCode, ErrorScope, FrameError};
use crate::frame::{Frame, Settings, StreamId};

/// The peer's first frame must be a SETTINGS (§3.4), which sets `settings_seen`; inside a
/// header block, on stream `block`, only a CONTINUATION of that stream may come (§6.10).
/// `Err`: the reason of a connection PROTOCOL_ERROR, `not_settings` for a first frame that
/// is not SETTINGS.
#[inline]
pub(crate) fn check_order(
    frame: &Frame,
    settings_seen: &mut bool,
    block: Option<StreamId>,
    not_settings: &'static str,
) -> Result<(), &'static str> {
    if !*settings_seen {
        if !matches!(frame, Frame::Settings(Settings { ack: false, .. })) {
            return Err(not_settings);
        }
        *settings_seen = true;
    }
    if let Some(block) = block {
        let same = matches!(frame, Frame::Continuation { stream_id, .. } if *stream_id == block);
        if !same {
            return Err("frame inside a header block");
        }
    }
    Ok(())
}

/// The stream a frame error ends, when it may stay a stream error: inside a header block
/// (`in_block`) any other frame is a connection error (§6.10), and so is anything before
/// the peer's SETTINGS (§3.4). `Err`: the connection error's code and reason.
pub(crate) fn error_stream(
    error: &FrameError,
    in_block: bool,
    settings_seen: bool,
) -> Result<StreamId, (ErrorCode, &'static str)> {
    match error.scope {
        ErrorScope::Stream(id) if !in_block && settings_seen => Ok(id),
        ErrorScope::Stream(_) => Err((
            ErrorCode::ProtocolError,
            "bad frame inside a header block or before SETTINGS",
        )),
        ErrorScope::Connection => Err((error.code, error.reason)),
    }
}
