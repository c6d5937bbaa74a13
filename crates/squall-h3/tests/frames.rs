//! Varints and frames: RFC vectors, round trips, every chunk split, and the frame layer's
//! errors.

mod common;

use bytes::{Bytes, BytesMut};
use common::{Outcome, feed, feed_every_split, hex};
use squall_h3::varint::{self, VarintReader};
use squall_h3::{
    ErrorCode, Frame, FrameDecoder, FrameError, Settings, StreamKind, StreamType,
    StreamTypeDecoder, encode_data_header, encode_settings, encode_stream_type, kind, reserved,
    setting,
};

const MAX: u64 = 1024;

fn request() -> FrameDecoder {
    FrameDecoder::new(StreamKind::Request, MAX)
}

fn control() -> FrameDecoder {
    FrameDecoder::new(StreamKind::Control, MAX)
}

fn encode(frames: &[Frame]) -> Vec<u8> {
    let mut out = BytesMut::new();
    for frame in frames {
        frame.encode(&mut out);
    }
    out.to_vec()
}

/// A frame of any type with a raw payload.
fn raw(ty: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint::encode(ty, &mut out);
    varint::encode(payload.len() as u64, &mut out);
    out.extend_from_slice(payload);
    out
}

fn code(outcome: &Outcome) -> Option<ErrorCode> {
    outcome.end.err().map(|e| e.code)
}

#[test]
fn rfc_9000_a_1_varint_examples() {
    let cases: [(&str, u64); 5] = [
        ("c2197c5eff14e88c", 151_288_809_941_952_652),
        ("9d7f3e7d", 494_878_333),
        ("7bbd", 15_293),
        ("25", 37),
        // The two-byte encoding of 37: longer than needed, still valid (RFC 9000 §16).
        ("4025", 37),
    ];
    for (bytes, value) in cases {
        let bytes = hex(bytes);
        assert_eq!(varint::decode(&bytes), Some((value, bytes.len())));
        // Split anywhere, the reader gets the same value.
        for cut in 0..bytes.len() {
            let mut reader = VarintReader::new();
            let (mut a, mut b) = bytes.split_at(cut);
            let first = reader.read(&mut a);
            let value_read = first.or_else(|| reader.read(&mut b));
            assert_eq!(value_read, Some(value));
        }
        if bytes != hex("4025") {
            let mut out = Vec::new();
            varint::encode(value, &mut out);
            assert_eq!(out, bytes, "the encoder writes the shortest form");
        }
    }
}

#[test]
fn frame_vectors_by_hand() {
    // DATA "hi": type 0, length 2.
    assert_eq!(
        encode(&[Frame::Data(Bytes::from_static(b"hi"))]),
        hex("00 02 6869")
    );
    // HEADERS with the B.1 section (RFC 9204 Appendix B.1): type 1, length 15.
    let section = hex("0000 510b 2f69 6e64 6578 2e68 746d 6c");
    let mut expected = hex("01 0f");
    expected.extend_from_slice(&section);
    assert_eq!(encode(&[Frame::Headers(Bytes::from(section))]), expected);
    // GOAWAY 4: type 7, length 1. MAX_PUSH_ID 16383: type 0x0d, length 2. CANCEL_PUSH 64.
    assert_eq!(encode(&[Frame::GoAway(4)]), hex("07 01 04"));
    assert_eq!(encode(&[Frame::MaxPushId(16_383)]), hex("0d 02 7fff"));
    assert_eq!(encode(&[Frame::CancelPush(64)]), hex("03 02 4040"));
    // SETTINGS: QPACK_MAX_TABLE_CAPACITY 4096, MAX_FIELD_SECTION_SIZE 16384,
    // QPACK_BLOCKED_STREAMS 16, ENABLE_CONNECT_PROTOCOL, H3_DATAGRAM, in identifier order.
    let settings = Settings {
        qpack_max_table_capacity: 4096,
        qpack_blocked_streams: 16,
        max_field_section_size: Some(16_384),
        enable_connect_protocol: true,
        h3_datagram: true,
    };
    let bytes = hex("04 0e 01 5000 06 80004000 07 10 08 01 33 01");
    assert_eq!(encode(&[Frame::Settings(settings)]), bytes);
    assert_eq!(
        feed_every_split(control, &bytes, false).frames,
        [Frame::Settings(settings)]
    );
    // Defaults are not sent: an empty SETTINGS.
    let mut out = Vec::new();
    encode_settings(&Settings::default(), &mut out);
    assert_eq!(out, hex("04 00"));
    // A DATA header alone, for a body sent from the caller's buffers.
    let mut out = Vec::new();
    encode_data_header(70_000, &mut out);
    assert_eq!(out, hex("00 80011170"));
}

#[test]
fn request_stream_round_trips_at_every_split() {
    let frames = [
        Frame::Headers(Bytes::from_static(b"\x00\x00\xd1\xd7")),
        Frame::Data(Bytes::from_static(b"hello, ")),
        Frame::Data(Bytes::new()),
        Frame::Data(Bytes::from(vec![7u8; 300])),
        Frame::Headers(Bytes::from_static(b"\x00\x00trailers")),
    ];
    let mut input = encode(&frames);
    // Grease and unknown frames anywhere are skipped, however long (no payload limit).
    input.splice(0..0, raw(reserved(3), b"grease"));
    let at = encode(&frames[..2]).len() + raw(reserved(3), b"grease").len();
    input.splice(at..at, raw(0x2f_ffff, &[0xaa; 2000]));
    let outcome = feed_every_split(request, &input, true);
    assert_eq!(outcome.frames, frames);
    assert_eq!(outcome.end, Ok(()));
}

#[test]
fn control_stream_round_trips_at_every_split() {
    let frames = [
        Frame::Settings(Settings {
            qpack_max_table_capacity: 100,
            ..Settings::default()
        }),
        Frame::MaxPushId(0),
        Frame::CancelPush(3),
        Frame::GoAway(1 << 40),
    ];
    let mut input = encode(&frames);
    input.extend(raw(reserved(0), b""));
    let outcome = feed_every_split(control, &input, false);
    assert_eq!(outcome.frames, frames);
    // The control stream may never end (RFC 9114 §6.2.1).
    let closed = feed(control(), &[&input], true);
    assert_eq!(code(&closed), Some(ErrorCode::ClosedCriticalStream));
}

#[test]
fn data_is_streamed_as_it_arrives_not_buffered() {
    let mut decoder = request();
    let mut header = Vec::new();
    encode_data_header(1_000_000, &mut header);
    let mut input = Bytes::from(header);
    assert_eq!(decoder.decode(&mut input), Ok(None));
    let mut total = 0;
    for _ in 0..100 {
        let mut piece = Bytes::from(vec![1u8; 10_000]);
        let Ok(Some(Frame::Data(data))) = decoder.decode(&mut piece) else {
            panic!("a piece");
        };
        // The piece is a slice of the input, handed out whole.
        assert_eq!(data.len(), 10_000);
        assert!(piece.is_empty());
        total += data.len();
    }
    assert_eq!(total, 1_000_000);
    assert!(decoder.is_between_frames());
    assert_eq!(decoder.finish(), Ok(()));
}

#[test]
fn stream_types_at_every_split() {
    let types = [
        StreamType::Control,
        StreamType::Push,
        StreamType::QpackEncoder,
        StreamType::QpackDecoder,
        StreamType::Unknown(reserved(1000)),
    ];
    for ty in types {
        let mut bytes = Vec::new();
        encode_stream_type(ty, &mut bytes);
        bytes.extend_from_slice(b"rest");
        for cut in 0..bytes.len() {
            let mut decoder = StreamTypeDecoder::new();
            let (a, b) = bytes.split_at(cut);
            let mut a = Bytes::copy_from_slice(a);
            let mut b = Bytes::copy_from_slice(b);
            let got = decoder.decode(&mut a).or_else(|| decoder.decode(&mut b));
            assert_eq!(got, Some(ty));
            assert_eq!([&a[..], &b[..]].concat(), b"rest");
        }
    }
    assert!(squall_h3::is_reserved(reserved(1000)));
}

/// Each case: the stream kind, the bytes, the code they end in.
#[test]
fn frame_errors_carry_their_codes_at_every_split() {
    let settings = encode(&[Frame::Settings(Settings::default())]);
    let after_settings = |rest: Vec<u8>| [settings.clone(), rest].concat();
    let cases: Vec<(&str, StreamKind, Vec<u8>, ErrorCode)> = vec![
        (
            "HEADERS over the payload limit, refused from its length",
            StreamKind::Request,
            hex("01 4401"), // length 1025 > 1024, no payload sent
            ErrorCode::ExcessiveLoad,
        ),
        (
            "SETTINGS over the payload limit",
            StreamKind::Control,
            hex("04 4401"),
            ErrorCode::ExcessiveLoad,
        ),
        (
            "HTTP/2 setting id (SETTINGS_ENABLE_PUSH)",
            StreamKind::Control,
            raw(kind::SETTINGS, &hex("02 00")),
            ErrorCode::SettingsError,
        ),
        (
            "HTTP/2 setting id 0x00",
            StreamKind::Control,
            raw(kind::SETTINGS, &hex("00 00")),
            ErrorCode::SettingsError,
        ),
        (
            "a setting repeated",
            StreamKind::Control,
            raw(kind::SETTINGS, &hex("01 00 01 00")),
            ErrorCode::SettingsError,
        ),
        (
            "H3_DATAGRAM = 2",
            StreamKind::Control,
            raw(kind::SETTINGS, &[setting::H3_DATAGRAM as u8, 2]),
            ErrorCode::SettingsError,
        ),
        (
            "SETTINGS ending inside a setting",
            StreamKind::Control,
            raw(kind::SETTINGS, &hex("01")),
            ErrorCode::FrameError,
        ),
        (
            "a second SETTINGS",
            StreamKind::Control,
            after_settings(settings.clone()),
            ErrorCode::FrameUnexpected,
        ),
        (
            "control stream starting with GOAWAY",
            StreamKind::Control,
            hex("07 01 00"),
            ErrorCode::MissingSettings,
        ),
        (
            "control stream starting with a grease frame",
            StreamKind::Control,
            raw(reserved(2), b""),
            ErrorCode::MissingSettings,
        ),
        (
            "DATA on the control stream",
            StreamKind::Control,
            after_settings(hex("00 00")),
            ErrorCode::FrameUnexpected,
        ),
        (
            "HEADERS on the control stream",
            StreamKind::Control,
            after_settings(hex("01 00")),
            ErrorCode::FrameUnexpected,
        ),
        (
            "SETTINGS on a request stream",
            StreamKind::Request,
            settings.clone(),
            ErrorCode::FrameUnexpected,
        ),
        (
            "GOAWAY on a request stream",
            StreamKind::Request,
            hex("07 01 00"),
            ErrorCode::FrameUnexpected,
        ),
        (
            "PUSH_PROMISE to a server",
            StreamKind::Request,
            hex("05 02 00 00"),
            ErrorCode::FrameUnexpected,
        ),
        (
            "HTTP/2's PING",
            StreamKind::Request,
            hex("06 00"),
            ErrorCode::FrameUnexpected,
        ),
        (
            "HTTP/2's CONTINUATION on the control stream",
            StreamKind::Control,
            after_settings(hex("09 00")),
            ErrorCode::FrameUnexpected,
        ),
        (
            "GOAWAY with a byte after its id",
            StreamKind::Control,
            after_settings(hex("07 02 00 00")),
            ErrorCode::FrameError,
        ),
        (
            "MAX_PUSH_ID with its id cut short",
            StreamKind::Control,
            after_settings(hex("0d 01 40")),
            ErrorCode::FrameError,
        ),
        (
            "CANCEL_PUSH empty",
            StreamKind::Control,
            after_settings(hex("03 00")),
            ErrorCode::FrameError,
        ),
        (
            "request stream ending inside a DATA payload",
            StreamKind::Request,
            hex("00 05 6869"),
            ErrorCode::FrameError,
        ),
        (
            "request stream ending inside a frame length",
            StreamKind::Request,
            hex("01 40"),
            ErrorCode::FrameError,
        ),
    ];
    for (what, stream, input, expected) in cases {
        let outcome = feed_every_split(|| FrameDecoder::new(stream, MAX), &input, true);
        assert_eq!(code(&outcome), Some(expected), "{what}");
    }
}

#[test]
fn an_error_sticks() {
    let mut decoder = request();
    let mut input = Bytes::from(hex("06 00 00 00"));
    let error = decoder.decode(&mut input).unwrap_err();
    assert_eq!(
        error,
        FrameError {
            code: ErrorCode::FrameUnexpected,
            reason: "HTTP/2 frame type",
        }
    );
    let mut more = Bytes::from(hex("00 00"));
    assert_eq!(decoder.decode(&mut more), Err(error));
    assert_eq!(decoder.finish(), Err(error));
}

/// A configured limit past what a varint carries is sent as the largest one, not a panic.
#[test]
fn a_setting_past_the_varint_maximum_is_sent_as_the_maximum() {
    let settings = Settings {
        qpack_max_table_capacity: u64::MAX,
        max_field_section_size: Some(u64::MAX),
        ..Settings::default()
    };
    let bytes = encode(&[Frame::Settings(settings)]);
    let clamped = Settings {
        qpack_max_table_capacity: varint::VARINT_MAX,
        max_field_section_size: Some(varint::VARINT_MAX),
        ..Settings::default()
    };
    assert_eq!(
        feed_every_split(control, &bytes, false).frames,
        [Frame::Settings(clamped)]
    );
}

#[test]
fn skipped_frames_are_counted_not_buffered() {
    let input = [
        raw(reserved(0), b""),
        raw(0x21 + 0x1f * 40, &[7; 100]),
        encode(&[Frame::Data(Bytes::from_static(b"x"))]),
        raw(0xff, b"unknown, not reserved"),
    ]
    .concat();
    for split in [1, 3, input.len()] {
        let mut decoder = request();
        let mut frames = Vec::new();
        for piece in input.chunks(split) {
            let mut piece = Bytes::copy_from_slice(piece);
            while let Some(frame) = decoder.decode(&mut piece).unwrap() {
                frames.push(frame);
            }
        }
        assert_eq!(frames, [Frame::Data(Bytes::from_static(b"x"))]);
        assert_eq!(decoder.unknown_frames(), 3, "split {split}");
    }
}
