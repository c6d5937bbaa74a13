//! Each way a single frame can break RFC 9113, with its exact code and scope (§5.4), fed at
//! every chunk split.

mod common;

use bytes::{BufMut, BytesMut};
use common::{assert_error, raw, run, run_all_splits};
use squall_h2::{ErrorCode, ErrorScope, Frame, FrameDecoder, FrameError};

const PROTOCOL: ErrorCode = ErrorCode::ProtocolError;
const FRAME_SIZE: ErrorCode = ErrorCode::FrameSizeError;

fn conn(code: ErrorCode) -> FrameError {
    FrameError::connection(code, "")
}

fn stream(id: u32, code: ErrorCode) -> FrameError {
    FrameError::stream(id, code, "")
}

/// The frame is consumed by the error, so the next frame decodes.
fn assert_consumed(input: &[u8], expected: FrameError) {
    assert_eq!(assert_error(input, expected), 0, "frame not consumed");
}

fn settings(params: &[(u16, u32)]) -> Vec<u8> {
    let mut payload = BytesMut::new();
    for &(id, value) in params {
        payload.put_u16(id);
        payload.put_u32(value);
    }
    raw(0x4, 0, 0, &payload)
}

#[test]
fn stream_frames_on_stream_0_are_connection_protocol_errors() {
    // RFC 9113 §6.1, §6.2, §6.3, §6.4, §6.10.
    assert_consumed(&raw(0x0, 0, 0, b"x"), conn(PROTOCOL));
    assert_consumed(&raw(0x1, 0x4, 0, b"\x82"), conn(PROTOCOL));
    assert_consumed(&raw(0x2, 0, 0, b"\0\0\0\x01\x10"), conn(PROTOCOL));
    assert_consumed(&raw(0x3, 0, 0, b"\0\0\0\x08"), conn(PROTOCOL));
    assert_consumed(&raw(0x9, 0x4, 0, b"\x82"), conn(PROTOCOL));
    // §6.6: PUSH_PROMISE on stream 0 as well.
    assert_consumed(&raw(0x5, 0x4, 0, b"\0\0\0\x02"), conn(PROTOCOL));
}

#[test]
fn connection_frames_on_a_stream_are_connection_protocol_errors() {
    // RFC 9113 §6.5, §6.7, §6.8.
    assert_consumed(&raw(0x4, 0, 1, b""), conn(PROTOCOL));
    assert_consumed(&raw(0x4, 0x1, 1, b""), conn(PROTOCOL));
    assert_consumed(&raw(0x6, 0, 3, &[0; 8]), conn(PROTOCOL));
    assert_consumed(&raw(0x7, 0, 5, &[0; 8]), conn(PROTOCOL));
}

#[test]
fn reserved_bit_alone_does_not_make_a_stream() {
    // R set, id 0: still stream 0 (§4.1), so DATA there is an error and SETTINGS is fine.
    assert_consumed(&raw(0x0, 0, 0x8000_0000, b"x"), conn(PROTOCOL));
    let outcome = run_all_splits(16_384, &raw(0x4, 0x1, 0x8000_0000, b""));
    assert_eq!(outcome.error, None);
}

#[test]
fn push_promise_is_a_connection_protocol_error_for_a_server() {
    // RFC 9113 §8.4: "A client cannot push"; §6.6.
    assert_consumed(&raw(0x5, 0x4, 1, b"\0\0\0\x02\x82"), conn(PROTOCOL));
}

#[test]
fn padding_as_long_as_the_payload_is_a_connection_protocol_error() {
    // RFC 9113 §6.1: Pad Length 3 with 3 bytes of payload (the Pad Length byte counts).
    assert_consumed(&raw(0x0, 0x8, 1, b"\x03\0\0"), conn(PROTOCOL));
    assert_consumed(&raw(0x0, 0x8, 1, b"\xff"), conn(PROTOCOL));
    // §6.2: padding longer than what is left after the priority fields.
    assert_consumed(&raw(0x1, 0x8 | 0x4, 1, b"\x02\x82"), conn(PROTOCOL));
    assert_consumed(
        &raw(0x1, 0x8 | 0x20 | 0x4, 1, b"\x01\0\0\0\x03\x10"),
        conn(PROTOCOL),
    );
}

#[test]
fn frames_too_short_for_mandatory_fields_are_frame_size_errors() {
    // RFC 9113 §4.2: PADDED without a Pad Length; PRIORITY flag without its 5 bytes.
    assert_consumed(&raw(0x0, 0x8, 1, b""), conn(FRAME_SIZE));
    assert_consumed(&raw(0x1, 0x8, 1, b""), conn(FRAME_SIZE));
    assert_consumed(&raw(0x1, 0x20, 1, b"\0\0\0\x03"), conn(FRAME_SIZE));
    assert_consumed(&raw(0x1, 0x8 | 0x20, 1, b"\0\0\0\0\x03"), conn(FRAME_SIZE));
}

#[test]
fn priority_of_wrong_length_is_a_stream_frame_size_error() {
    // RFC 9113 §6.3: the one fixed-length frame whose size error is a stream error.
    assert_consumed(&raw(0x2, 0, 7, b"\0\0\0\x01"), stream(7, FRAME_SIZE));
    assert_consumed(
        &raw(0x2, 0, 7, b"\0\0\0\x01\x10\x00"),
        stream(7, FRAME_SIZE),
    );
}

#[test]
fn fixed_length_frames_of_wrong_length_are_connection_frame_size_errors() {
    // RFC 9113 §6.4 RST_STREAM 4, §6.7 PING 8, §6.8 GOAWAY >= 8, §6.9 WINDOW_UPDATE 4.
    assert_consumed(&raw(0x3, 0, 1, b"\0\0\0"), conn(FRAME_SIZE));
    assert_consumed(&raw(0x3, 0, 1, b"\0\0\0\0\0"), conn(FRAME_SIZE));
    assert_consumed(&raw(0x6, 0, 0, &[0; 7]), conn(FRAME_SIZE));
    assert_consumed(&raw(0x6, 0x1, 0, &[0; 9]), conn(FRAME_SIZE));
    assert_consumed(&raw(0x7, 0, 0, &[0; 7]), conn(FRAME_SIZE));
    assert_consumed(&raw(0x8, 0, 0, b"\0\0\x01"), conn(FRAME_SIZE));
    assert_consumed(&raw(0x8, 0, 1, b"\0\0\0\x01\0"), conn(FRAME_SIZE));
}

#[test]
fn settings_layout_errors_are_connection_frame_size_errors() {
    // RFC 9113 §6.5: ACK with a payload; a length not a multiple of 6.
    assert_consumed(&raw(0x4, 0x1, 0, &[0, 3, 0, 0, 0, 1]), conn(FRAME_SIZE));
    assert_consumed(&raw(0x4, 0, 0, &[0, 3, 0, 0, 0]), conn(FRAME_SIZE));
    assert_consumed(&raw(0x4, 0, 0, &[0, 3, 0, 0, 0, 1, 0]), conn(FRAME_SIZE));
}

#[test]
fn settings_values_are_validated() {
    // RFC 9113 §6.5.2.
    assert_consumed(&settings(&[(0x2, 2)]), conn(PROTOCOL));
    assert_consumed(
        &settings(&[(0x4, 0x8000_0000)]),
        conn(ErrorCode::FlowControlError),
    );
    assert_consumed(&settings(&[(0x5, 16_383)]), conn(PROTOCOL));
    assert_consumed(&settings(&[(0x5, 16_777_216)]), conn(PROTOCOL));
    // A bad value after good ones still fails the frame.
    assert_consumed(
        &settings(&[(0x3, 10), (0x99, 7), (0x2, 0xffff_ffff)]),
        conn(PROTOCOL),
    );
    // The edges are allowed.
    let ok = [
        (0x2, 1),
        (0x4, 0x7fff_ffff),
        (0x5, 16_384),
        (0x5, 16_777_215),
        (0x1, u32::MAX),
    ];
    for (id, value) in ok {
        assert_eq!(
            run(16_384, [settings(&[(id, value)]).as_slice()]).error,
            None,
            "{id}={value}"
        );
    }
}

#[test]
fn zero_window_update_is_a_stream_error_on_a_stream_and_a_connection_error_on_0() {
    // RFC 9113 §6.9.
    assert_consumed(&raw(0x8, 0, 3, b"\0\0\0\0"), stream(3, PROTOCOL));
    assert_consumed(&raw(0x8, 0, 0, b"\0\0\0\0"), conn(PROTOCOL));
    // The reserved bit is not part of the increment: R alone is still 0.
    assert_consumed(&raw(0x8, 0, 3, b"\x80\0\0\0"), stream(3, PROTOCOL));
}

#[test]
fn decoding_goes_on_after_a_stream_error() {
    let mut buf = BytesMut::from(&raw(0x8, 0, 3, b"\0\0\0\0")[..]);
    buf.extend_from_slice(&raw(0x8, 0, 3, b"\0\0\0\x09"));
    let mut decoder = FrameDecoder::new(16_384);
    let error = decoder.decode(&mut buf).unwrap_err();
    assert_eq!(error.scope, ErrorScope::Stream(3));
    assert!(!error.is_connection_error());
    let frame = decoder.decode(&mut buf).unwrap();
    assert_eq!(
        frame,
        Some(Frame::WindowUpdate {
            stream_id: 3,
            increment: 9
        })
    );
}

#[test]
fn oversized_frame_is_refused_from_its_header_alone() {
    // RFC 9113 §4.2: only the 9-byte header is needed; the payload is never waited for.
    let mut head = raw(0x0, 0, 1, b"");
    head[..3].copy_from_slice(&[0x00, 0x40, 0x01]); // 16,385
    let left = assert_error(&head, conn(FRAME_SIZE));
    assert_eq!(left, 9, "the header stays: the connection is over");
    head[..3].copy_from_slice(&[0xff, 0xff, 0xff]);
    assert_error(&head, conn(FRAME_SIZE));
    // Any type, even unknown ones and SETTINGS on stream 0.
    let mut unknown = raw(0xee, 0, 0, b"");
    unknown[..3].copy_from_slice(&[0x01, 0x00, 0x00]);
    assert_error(&unknown, conn(FRAME_SIZE));
}

#[test]
fn oversized_frame_is_refused_at_a_raised_limit_too() {
    let mut decoder = FrameDecoder::new(16_384);
    decoder.set_max_frame_size(100_000);
    let mut buf = BytesMut::from(&raw(0x0, 0, 1, b"")[..]);
    buf[..3].copy_from_slice(&[0x01, 0x86, 0xa1]); // 100,001
    let error = decoder.decode(&mut buf).unwrap_err();
    assert_eq!(
        (error.code, error.scope),
        (FRAME_SIZE, ErrorScope::Connection)
    );
    buf[..3].copy_from_slice(&[0x01, 0x86, 0xa0]); // 100,000: wait for the payload
    assert_eq!(decoder.decode(&mut buf), Ok(None));
}

#[test]
fn errors_after_good_frames_keep_the_good_frames() {
    let mut input = raw(0x6, 0, 0, &[1; 8]);
    input.extend(raw(0x0, 0, 0, b"bad"));
    let outcome = run_all_splits(16_384, &input);
    assert_eq!(
        outcome.frames,
        [Frame::Ping {
            ack: false,
            data: [1; 8]
        }]
    );
    assert_eq!(
        outcome.error.map(|e| (e.code, e.scope)),
        Some((PROTOCOL, ErrorScope::Connection))
    );
}

#[test]
fn error_display_names_code_scope_and_reason() {
    let mut buf = BytesMut::from(&raw(0x8, 0, 5, b"\0\0\0\0")[..]);
    let error = FrameDecoder::new(16_384).decode(&mut buf).unwrap_err();
    assert_eq!(
        error.to_string(),
        "HTTP/2 ProtocolError (Stream(5)): WINDOW_UPDATE increment of 0"
    );
}
