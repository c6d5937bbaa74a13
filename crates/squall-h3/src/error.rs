//! Error codes (RFC 9114 §8.1, RFC 9204 §6) and the frame layer's error type.
//!
//! HTTP/3 carries its error codes in QUIC's CONNECTION_CLOSE and RESET_STREAM /
//! STOP_SENDING frames, as variable-length integers. Every [`FrameError`] is a connection
//! error: RFC 9114 makes each frame-layer fault one (§7.1, §7.2), so the answer is to close
//! the QUIC connection with the error's code.

/// An HTTP/3 or QPACK error code (RFC 9114 §8.1, RFC 9204 §6).
///
/// Unknown codes, including the reserved `0x1f * N + 0x21` ones that exist to be ignored
/// (RFC 9114 §8.1), are kept as [`ErrorCode::Other`], so logs show what the peer sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// 0x100 H3_NO_ERROR: no error; a graceful close, or a stream no longer needed.
    NoError,
    /// 0x101 H3_GENERAL_PROTOCOL_ERROR: a protocol error with no more specific code.
    GeneralProtocolError,
    /// 0x102 H3_INTERNAL_ERROR: an internal error of the endpoint.
    InternalError,
    /// 0x103 H3_STREAM_CREATION_ERROR: the peer created a stream we will not accept.
    StreamCreationError,
    /// 0x104 H3_CLOSED_CRITICAL_STREAM: a stream required by the connection closed or was reset.
    ClosedCriticalStream,
    /// 0x105 H3_FRAME_UNEXPECTED: a frame not permitted in the current state or on this stream.
    FrameUnexpected,
    /// 0x106 H3_FRAME_ERROR: a frame whose layout or size is wrong.
    FrameError,
    /// 0x107 H3_EXCESSIVE_LOAD: the peer generates excessive load.
    ExcessiveLoad,
    /// 0x108 H3_ID_ERROR: a stream or push id used wrongly.
    IdError,
    /// 0x109 H3_SETTINGS_ERROR: an error in the payload of a SETTINGS frame.
    SettingsError,
    /// 0x10a H3_MISSING_SETTINGS: the control stream did not start with SETTINGS.
    MissingSettings,
    /// 0x10b H3_REQUEST_REJECTED: the request was rejected before any processing.
    RequestRejected,
    /// 0x10c H3_REQUEST_CANCELLED: the request or its response is cancelled.
    RequestCancelled,
    /// 0x10d H3_REQUEST_INCOMPLETE: the client's stream ended without a complete request.
    RequestIncomplete,
    /// 0x10e H3_MESSAGE_ERROR: a malformed HTTP message.
    MessageError,
    /// 0x10f H3_CONNECT_ERROR: the connection of a CONNECT request was reset or closed.
    ConnectError,
    /// 0x110 H3_VERSION_FALLBACK: the request should be retried over HTTP/1.1.
    VersionFallback,
    /// 0x200 QPACK_DECOMPRESSION_FAILED: a field section could not be decoded.
    QpackDecompressionFailed,
    /// 0x201 QPACK_ENCODER_STREAM_ERROR: an encoder stream instruction could not be applied.
    QpackEncoderStreamError,
    /// 0x202 QPACK_DECODER_STREAM_ERROR: a decoder stream instruction could not be applied.
    QpackDecoderStreamError,
    /// A code this implementation does not know, kept as sent.
    Other(u64),
}

impl From<u64> for ErrorCode {
    fn from(code: u64) -> Self {
        match code {
            0x100 => Self::NoError,
            0x101 => Self::GeneralProtocolError,
            0x102 => Self::InternalError,
            0x103 => Self::StreamCreationError,
            0x104 => Self::ClosedCriticalStream,
            0x105 => Self::FrameUnexpected,
            0x106 => Self::FrameError,
            0x107 => Self::ExcessiveLoad,
            0x108 => Self::IdError,
            0x109 => Self::SettingsError,
            0x10a => Self::MissingSettings,
            0x10b => Self::RequestRejected,
            0x10c => Self::RequestCancelled,
            0x10d => Self::RequestIncomplete,
            0x10e => Self::MessageError,
            0x10f => Self::ConnectError,
            0x110 => Self::VersionFallback,
            0x200 => Self::QpackDecompressionFailed,
            0x201 => Self::QpackEncoderStreamError,
            0x202 => Self::QpackDecoderStreamError,
            other => Self::Other(other),
        }
    }
}

impl From<ErrorCode> for u64 {
    fn from(code: ErrorCode) -> Self {
        match code {
            ErrorCode::NoError => 0x100,
            ErrorCode::GeneralProtocolError => 0x101,
            ErrorCode::InternalError => 0x102,
            ErrorCode::StreamCreationError => 0x103,
            ErrorCode::ClosedCriticalStream => 0x104,
            ErrorCode::FrameUnexpected => 0x105,
            ErrorCode::FrameError => 0x106,
            ErrorCode::ExcessiveLoad => 0x107,
            ErrorCode::IdError => 0x108,
            ErrorCode::SettingsError => 0x109,
            ErrorCode::MissingSettings => 0x10a,
            ErrorCode::RequestRejected => 0x10b,
            ErrorCode::RequestCancelled => 0x10c,
            ErrorCode::RequestIncomplete => 0x10d,
            ErrorCode::MessageError => 0x10e,
            ErrorCode::ConnectError => 0x10f,
            ErrorCode::VersionFallback => 0x110,
            ErrorCode::QpackDecompressionFailed => 0x200,
            ErrorCode::QpackEncoderStreamError => 0x201,
            ErrorCode::QpackDecoderStreamError => 0x202,
            ErrorCode::Other(other) => other,
        }
    }
}

impl ErrorCode {
    /// True for the reserved codes `0x1f * N + 0x21`, which an endpoint sends now and then so
    /// that peers keep treating unknown codes as [`ErrorCode::GeneralProtocolError`]-like
    /// rather than failing (RFC 9114 §8.1).
    pub fn is_reserved(self) -> bool {
        crate::frame::is_reserved(u64::from(self))
    }
}

/// A frame-layer fault of the peer's, with the code to close the connection with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[error("HTTP/3 {code:?}: {reason}")]
pub struct FrameError {
    /// The code for CONNECTION_CLOSE.
    pub code: ErrorCode,
    /// A short fixed sentence for logs; never sent to the peer.
    pub reason: &'static str,
}

impl FrameError {
    pub(crate) fn new(code: ErrorCode, reason: &'static str) -> Self {
        Self { code, reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_number() {
        for number in (0x100..=0x110).chain(0x200..=0x202) {
            let code = ErrorCode::from(number);
            assert!(!matches!(code, ErrorCode::Other(_)), "{number:#x}");
            assert_eq!(u64::from(code), number);
        }
        assert_eq!(ErrorCode::from(0x21), ErrorCode::Other(0x21));
        assert!(ErrorCode::from(0x21).is_reserved());
        assert!(ErrorCode::from(0x1f * 7 + 0x21).is_reserved());
        assert!(!ErrorCode::NoError.is_reserved());
        assert_eq!(u64::from(ErrorCode::VersionFallback), 0x110);
        assert_eq!(u64::from(ErrorCode::QpackDecoderStreamError), 0x202);
    }
}
