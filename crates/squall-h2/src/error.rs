//! Error codes (RFC 9113 §7) and the frame layer's error type.
//!
//! Every [`FrameError`] is the peer's fault: it sent a frame that breaks RFC 9113. The error
//! says what to answer with, not just what went wrong: the [`ErrorCode`] for the RST_STREAM or
//! GOAWAY, and the [`ErrorScope`], because RFC 9113 §5.4 tells apart errors that end one stream
//! from errors that end the whole connection.

use crate::frame::StreamId;

/// An HTTP/2 error code, as carried by RST_STREAM and GOAWAY (RFC 9113 §7).
///
/// Unknown codes "MUST NOT trigger any special behavior" (§7) but are kept, as
/// [`ErrorCode::Other`], so logs show what the peer sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// 0x0: graceful shutdown, or no error.
    NoError,
    /// 0x1: unspecific protocol error.
    ProtocolError,
    /// 0x2: unexpected internal error.
    InternalError,
    /// 0x3: the flow-control protocol was violated.
    FlowControlError,
    /// 0x4: a SETTINGS frame was not acknowledged in time.
    SettingsTimeout,
    /// 0x5: a frame arrived after the stream was half-closed.
    StreamClosed,
    /// 0x6: a frame has an invalid size.
    FrameSizeError,
    /// 0x7: the stream was refused before any application processing.
    RefusedStream,
    /// 0x8: the stream is no longer needed.
    Cancel,
    /// 0x9: the field compression context cannot be maintained.
    CompressionError,
    /// 0xa: the connection for a CONNECT request was reset or closed.
    ConnectError,
    /// 0xb: the peer is generating excessive load.
    EnhanceYourCalm,
    /// 0xc: the transport does not meet minimum security requirements.
    InadequateSecurity,
    /// 0xd: the peer must use HTTP/1.1 for this request.
    Http11Required,
    /// A code this implementation does not know, kept as sent.
    Other(u32),
}

impl From<u32> for ErrorCode {
    fn from(code: u32) -> Self {
        match code {
            0x0 => Self::NoError,
            0x1 => Self::ProtocolError,
            0x2 => Self::InternalError,
            0x3 => Self::FlowControlError,
            0x4 => Self::SettingsTimeout,
            0x5 => Self::StreamClosed,
            0x6 => Self::FrameSizeError,
            0x7 => Self::RefusedStream,
            0x8 => Self::Cancel,
            0x9 => Self::CompressionError,
            0xa => Self::ConnectError,
            0xb => Self::EnhanceYourCalm,
            0xc => Self::InadequateSecurity,
            0xd => Self::Http11Required,
            other => Self::Other(other),
        }
    }
}

impl From<ErrorCode> for u32 {
    fn from(code: ErrorCode) -> Self {
        match code {
            ErrorCode::NoError => 0x0,
            ErrorCode::ProtocolError => 0x1,
            ErrorCode::InternalError => 0x2,
            ErrorCode::FlowControlError => 0x3,
            ErrorCode::SettingsTimeout => 0x4,
            ErrorCode::StreamClosed => 0x5,
            ErrorCode::FrameSizeError => 0x6,
            ErrorCode::RefusedStream => 0x7,
            ErrorCode::Cancel => 0x8,
            ErrorCode::CompressionError => 0x9,
            ErrorCode::ConnectError => 0xa,
            ErrorCode::EnhanceYourCalm => 0xb,
            ErrorCode::InadequateSecurity => 0xc,
            ErrorCode::Http11Required => 0xd,
            ErrorCode::Other(other) => other,
        }
    }
}

/// What an error ends (RFC 9113 §5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorScope {
    /// A connection error (§5.4.1): send GOAWAY with the code and close.
    Connection,
    /// A stream error (§5.4.2): send RST_STREAM on this stream; the connection goes on.
    Stream(StreamId),
}

/// A frame that breaks RFC 9113, with the answer it calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[error("HTTP/2 {code:?} ({scope:?}): {reason}")]
pub struct FrameError {
    /// The code for the RST_STREAM or GOAWAY.
    pub code: ErrorCode,
    /// Whether this ends one stream or the connection.
    pub scope: ErrorScope,
    /// A short fixed sentence for logs; never sent to the peer.
    pub reason: &'static str,
}

impl FrameError {
    /// A connection error (RFC 9113 §5.4.1).
    pub fn connection(code: ErrorCode, reason: &'static str) -> Self {
        Self {
            code,
            scope: ErrorScope::Connection,
            reason,
        }
    }

    /// A stream error on `stream_id` (RFC 9113 §5.4.2).
    pub fn stream(stream_id: StreamId, code: ErrorCode, reason: &'static str) -> Self {
        Self {
            code,
            scope: ErrorScope::Stream(stream_id),
            reason,
        }
    }

    /// True when the whole connection must end with GOAWAY.
    pub fn is_connection_error(&self) -> bool {
        self.scope == ErrorScope::Connection
    }
}
