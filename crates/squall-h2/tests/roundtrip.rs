//! Every frame type through encode → decode, fed at every chunk split; and byte-exact
//! encodings checked against the layouts of RFC 9113 §4.1 and §6.

mod common;

use bytes::{Bytes, BytesMut};
use common::{assert_frames, raw};
use squall_h2::{
    ErrorCode, Frame, FrameDecoder, PREFACE, PrefaceState, Priority, SettingId, Settings,
    encode_data_header, encode_goaway, encode_headers, encode_ping, encode_priority,
    encode_rst_stream, encode_settings, encode_settings_ack, encode_window_update, match_preface,
};

fn encoded(f: impl FnOnce(&mut BytesMut)) -> Vec<u8> {
    let mut buf = BytesMut::new();
    f(&mut buf);
    buf.to_vec()
}

#[test]
fn data_round_trips_with_payload_after_header() {
    let mut input = encoded(|b| encode_data_header(b, 1, 5, false));
    input.extend_from_slice(b"hello");
    let mut end = encoded(|b| encode_data_header(b, 3, 0, true));
    input.append(&mut end);
    assert_frames(
        &input,
        &[
            Frame::Data {
                stream_id: 1,
                data: Bytes::from_static(b"hello"),
                end_stream: false,
                flow_len: 5,
            },
            Frame::Data {
                stream_id: 3,
                data: Bytes::new(),
                end_stream: true,
                flow_len: 0,
            },
        ],
    );
}

#[test]
fn data_padding_is_stripped_and_counted_for_flow_control() {
    // PADDED | END_STREAM, Pad Length 3, "abc", 3 bytes of padding (RFC 9113 §6.1).
    let input = raw(0x0, 0x8 | 0x1, 5, b"\x03abc\0\0\0");
    assert_frames(
        &input,
        &[Frame::Data {
            stream_id: 5,
            data: Bytes::from_static(b"abc"),
            end_stream: true,
            flow_len: 7,
        }],
    );
    // Padding may fill everything after the Pad Length byte.
    let input = raw(0x0, 0x8, 5, b"\x02\0\0");
    assert_frames(
        &input,
        &[Frame::Data {
            stream_id: 5,
            data: Bytes::new(),
            end_stream: false,
            flow_len: 3,
        }],
    );
}

#[test]
fn data_payload_shares_the_receive_buffer() {
    let mut buf = BytesMut::new();
    encode_data_header(&mut buf, 1, 4, false);
    buf.extend_from_slice(b"abcd");
    let base = buf.as_ptr() as usize;
    let Some(Frame::Data { data, .. }) = FrameDecoder::new(16_384).decode(&mut buf).unwrap() else {
        panic!("expected DATA");
    };
    assert_eq!(data.as_ptr() as usize, base + 9, "payload was copied");
}

#[test]
fn headers_round_trip_in_one_frame() {
    let input = encoded(|b| encode_headers(b, 1, true, b"\x82\x86\x84", 16_384));
    assert_frames(
        &input,
        &[Frame::Headers {
            stream_id: 1,
            block: Bytes::from_static(b"\x82\x86\x84"),
            end_stream: true,
            end_headers: true,
            priority: None,
        }],
    );
    let input = encoded(|b| encode_headers(b, 7, false, b"", 16_384));
    assert_frames(
        &input,
        &[Frame::Headers {
            stream_id: 7,
            block: Bytes::new(),
            end_stream: false,
            end_headers: true,
            priority: None,
        }],
    );
}

#[test]
fn headers_split_into_continuations_round_trip() {
    let block: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
    let input = encoded(|b| encode_headers(b, 3, true, &block, 16_384));
    let outcome = common::run(16_384, [input.as_slice()]);
    assert_eq!((outcome.error, outcome.left), (None, 0));
    // Every split of 40 kB is too slow unoptimized; sizes around the frame boundaries.
    for size in [
        1, 2, 3, 8, 9, 10, 4_096, 16_392, 16_393, 16_394, 32_786, 40_000,
    ] {
        assert_eq!(
            common::run(16_384, input.chunks(size)),
            outcome,
            "chunk size {size}"
        );
    }
    let block = Bytes::from(block);
    assert_eq!(
        outcome.frames,
        [
            Frame::Headers {
                stream_id: 3,
                block: block.slice(..16_384),
                end_stream: true,
                end_headers: false,
                priority: None
            },
            Frame::Continuation {
                stream_id: 3,
                block: block.slice(16_384..32_768),
                end_headers: false
            },
            Frame::Continuation {
                stream_id: 3,
                block: block.slice(32_768..),
                end_headers: true
            },
        ]
    );
}

#[test]
fn headers_split_exactly_at_the_limit_has_no_empty_continuation() {
    let block = vec![0x82; 32_768];
    let input = encoded(|b| encode_headers(b, 1, false, &block, 16_384));
    assert_eq!(input.len(), 2 * (9 + 16_384));
    // The second frame is a CONTINUATION with END_HEADERS.
    assert_eq!(
        &input[9 + 16_384..9 + 16_384 + 9],
        &[0x00, 0x40, 0x00, 0x09, 0x04, 0, 0, 0, 1]
    );
}

#[test]
fn headers_split_small_round_trips_at_every_split() {
    // max_frame_size is clamped to 16,384, so build small CONTINUATIONs by hand.
    let mut input = raw(0x1, 0x0, 1, b"\x82\x86");
    input.extend(raw(0x9, 0x0, 1, b"\x84"));
    input.extend(raw(0x9, 0x4, 1, b""));
    assert_frames(
        &input,
        &[
            Frame::Headers {
                stream_id: 1,
                block: Bytes::from_static(b"\x82\x86"),
                end_stream: false,
                end_headers: false,
                priority: None,
            },
            Frame::Continuation {
                stream_id: 1,
                block: Bytes::from_static(b"\x84"),
                end_headers: false,
            },
            Frame::Continuation {
                stream_id: 1,
                block: Bytes::new(),
                end_headers: true,
            },
        ],
    );
}

#[test]
fn headers_with_padding_and_priority_are_parsed() {
    // PADDED | PRIORITY | END_HEADERS: Pad Length 2, E + dependency 3, weight 15, block, pad.
    let input = raw(
        0x1,
        0x8 | 0x20 | 0x4,
        5,
        b"\x02\x80\x00\x00\x03\x0f\x82\x84\0\0",
    );
    assert_frames(
        &input,
        &[Frame::Headers {
            stream_id: 5,
            block: Bytes::from_static(b"\x82\x84"),
            end_stream: false,
            end_headers: true,
            priority: Some(Priority {
                exclusive: true,
                dependency: 3,
                weight: 15,
            }),
        }],
    );
}

#[test]
fn priority_round_trips() {
    let priority = Priority {
        exclusive: false,
        dependency: 0x7fff_ffff,
        weight: 255,
    };
    let input = encoded(|b| encode_priority(b, 9, priority));
    assert_eq!(input, raw(0x2, 0, 9, b"\x7f\xff\xff\xff\xff"));
    assert_frames(
        &input,
        &[Frame::Priority {
            stream_id: 9,
            priority,
        }],
    );
}

#[test]
fn rst_stream_round_trips_known_and_unknown_codes() {
    let mut input = encoded(|b| encode_rst_stream(b, 1, ErrorCode::Cancel));
    input.extend(encoded(|b| {
        encode_rst_stream(b, 3, ErrorCode::Other(0xdead))
    }));
    assert_frames(
        &input,
        &[
            Frame::RstStream {
                stream_id: 1,
                code: ErrorCode::Cancel,
            },
            Frame::RstStream {
                stream_id: 3,
                code: ErrorCode::Other(0xdead),
            },
        ],
    );
}

#[test]
fn settings_round_trip() {
    let params = [
        (SettingId::HeaderTableSize, 4096),
        (SettingId::EnablePush, 0),
        (SettingId::MaxConcurrentStreams, 100),
        (SettingId::InitialWindowSize, 0x7fff_ffff),
        (SettingId::MaxFrameSize, 16_777_215),
        (SettingId::MaxHeaderListSize, 65_536),
        (SettingId::MaxConcurrentStreams, 50),
    ];
    let mut input = encoded(|b| encode_settings(b, &params));
    input.extend(encoded(encode_settings_ack));
    input.extend(encoded(|b| encode_settings(b, &[])));
    assert_frames(
        &input,
        &[
            Frame::Settings(Settings {
                ack: false,
                params: params.to_vec(),
            }),
            Frame::Settings(Settings {
                ack: true,
                params: vec![],
            }),
            Frame::Settings(Settings {
                ack: false,
                params: vec![],
            }),
        ],
    );
}

#[test]
fn settings_unknown_ids_are_ignored() {
    // Ids 0x0 and 0xabcd are unknown: dropped (§6.5.2); 0x8 is RFC 8441's, kept.
    let input = raw(0x4, 0, 0, b"\x00\x00\x00\x00\x00\x01\x00\x08\x00\x00\x00\x01\x00\x03\x00\x00\x00\x0a\xab\xcd\xff\xff\xff\xff");
    assert_frames(
        &input,
        &[Frame::Settings(Settings {
            ack: false,
            params: vec![
                (SettingId::EnableConnectProtocol, 1),
                (SettingId::MaxConcurrentStreams, 10),
            ],
        })],
    );
}

#[test]
fn setting_ids_convert_both_ways() {
    for id in 0..=u16::MAX {
        if let Some(setting) = SettingId::from_u16(id) {
            assert_eq!(setting.to_u16(), id);
        } else {
            assert!(id == 0 || id > 6);
        }
    }
}

#[test]
fn ping_round_trips_with_and_without_ack() {
    let mut input = encoded(|b| encode_ping(b, false, *b"\x01\x02\x03\x04\x05\x06\x07\x08"));
    input.extend(encoded(|b| encode_ping(b, true, [0xff; 8])));
    assert_frames(
        &input,
        &[
            Frame::Ping {
                ack: false,
                data: *b"\x01\x02\x03\x04\x05\x06\x07\x08",
            },
            Frame::Ping {
                ack: true,
                data: [0xff; 8],
            },
        ],
    );
}

#[test]
fn goaway_round_trips_with_debug_data() {
    let mut input = encoded(|b| encode_goaway(b, 7, ErrorCode::EnhanceYourCalm, b"calm"));
    input.extend(encoded(|b| encode_goaway(b, 0, ErrorCode::NoError, b"")));
    assert_frames(
        &input,
        &[
            Frame::GoAway {
                last_stream_id: 7,
                code: ErrorCode::EnhanceYourCalm,
                debug: Bytes::from_static(b"calm"),
            },
            Frame::GoAway {
                last_stream_id: 0,
                code: ErrorCode::NoError,
                debug: Bytes::new(),
            },
        ],
    );
}

#[test]
fn window_update_round_trips_on_stream_and_connection() {
    let mut input = encoded(|b| encode_window_update(b, 0, 0x7fff_ffff));
    input.extend(encoded(|b| encode_window_update(b, 1, 1)));
    assert_frames(
        &input,
        &[
            Frame::WindowUpdate {
                stream_id: 0,
                increment: 0x7fff_ffff,
            },
            Frame::WindowUpdate {
                stream_id: 1,
                increment: 1,
            },
        ],
    );
}

#[test]
fn unknown_types_are_returned_payload_dropped() {
    let mut input = raw(0xfa, 0xff, 3, b"whatever");
    input.extend(raw(0x0a, 0, 0, b""));
    input.extend(encoded(|b| encode_ping(b, false, [0; 8])));
    assert_frames(
        &input,
        &[
            Frame::Unknown {
                ty: 0xfa,
                stream_id: 3,
            },
            Frame::Unknown {
                ty: 0x0a,
                stream_id: 0,
            },
            Frame::Ping {
                ack: false,
                data: [0; 8],
            },
        ],
    );
}

#[test]
fn reserved_bits_are_ignored() {
    // RFC 9113 §4.1: R in the header; §6.8, §6.9: R in GOAWAY and WINDOW_UPDATE.
    let mut input = raw(0x8, 0, 0x8000_0001, b"\x80\x00\x00\x05");
    input.extend(raw(
        0x7,
        0,
        0x8000_0000,
        b"\x80\x00\x00\x03\x00\x00\x00\x00",
    ));
    assert_frames(
        &input,
        &[
            Frame::WindowUpdate {
                stream_id: 1,
                increment: 5,
            },
            Frame::GoAway {
                last_stream_id: 3,
                code: ErrorCode::NoError,
                debug: Bytes::new(),
            },
        ],
    );
}

#[test]
fn unknown_flags_are_ignored() {
    // RFC 9113 §4.1: undefined flags "MUST be ignored on receipt".
    let input = raw(0x3, 0xfe, 1, b"\x00\x00\x00\x08");
    assert_frames(
        &input,
        &[Frame::RstStream {
            stream_id: 1,
            code: ErrorCode::Cancel,
        }],
    );
}

#[test]
fn frames_up_to_a_raised_max_frame_size_decode() {
    let mut buf = BytesMut::new();
    encode_data_header(&mut buf, 1, 20_000, false);
    buf.extend_from_slice(&[7; 20_000]);
    let mut decoder = FrameDecoder::new(16_384);
    decoder.set_max_frame_size(20_000);
    assert_eq!(decoder.max_frame_size(), 20_000);
    let frame = decoder.decode(&mut buf).unwrap().unwrap();
    assert_eq!(frame.stream_id(), 1);
    assert!(buf.is_empty());
}

#[test]
fn encodings_match_the_rfc_layout_byte_for_byte() {
    // Length (24) | Type (8) | Flags (8) | R + Stream Identifier (32) | payload (§4.1).
    assert_eq!(
        encoded(encode_settings_ack),
        [0, 0, 0, 0x4, 0x1, 0, 0, 0, 0]
    );
    assert_eq!(
        encoded(|b| encode_settings(
            b,
            &[
                (SettingId::MaxConcurrentStreams, 100),
                (SettingId::InitialWindowSize, 65_535)
            ]
        )),
        [
            0, 0, 12, 0x4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100, 0, 4, 0, 0, 0xff, 0xff
        ]
    );
    assert_eq!(
        encoded(|b| encode_ping(b, true, *b"abcdefgh")),
        [
            0, 0, 8, 0x6, 0x1, 0, 0, 0, 0, b'a', b'b', b'c', b'd', b'e', b'f', b'g', b'h'
        ]
    );
    assert_eq!(
        encoded(|b| encode_goaway(b, 0x0102_0304, ErrorCode::ProtocolError, b"x")),
        [
            0, 0, 9, 0x7, 0, 0, 0, 0, 0, 0x01, 0x02, 0x03, 0x04, 0, 0, 0, 1, b'x'
        ]
    );
    assert_eq!(
        encoded(|b| encode_rst_stream(b, 1, ErrorCode::RefusedStream)),
        [0, 0, 4, 0x3, 0, 0, 0, 0, 1, 0, 0, 0, 7]
    );
    assert_eq!(
        encoded(|b| encode_window_update(b, 0x7fff_ffff, 0x0001_0000)),
        [0, 0, 4, 0x8, 0, 0x7f, 0xff, 0xff, 0xff, 0, 1, 0, 0]
    );
    assert_eq!(
        encoded(|b| encode_data_header(b, 3, 0x0001_2345, true)),
        [0x01, 0x23, 0x45, 0x0, 0x1, 0, 0, 0, 3]
    );
    assert_eq!(
        encoded(|b| encode_headers(b, 1, false, b"\x82", 16_384)),
        [0, 0, 1, 0x1, 0x4, 0, 0, 0, 1, 0x82]
    );
}

#[test]
fn error_codes_convert_both_ways() {
    for code in 0..=0x20u32 {
        let known = ErrorCode::from(code);
        assert_eq!(u32::from(known), code);
        assert_eq!(
            matches!(known, ErrorCode::Other(_)),
            code > 0xd,
            "{code:#x}"
        );
    }
    assert_eq!(ErrorCode::from(0xb), ErrorCode::EnhanceYourCalm);
    assert_eq!(u32::from(ErrorCode::Http11Required), 0xd);
    assert_eq!(u32::from(ErrorCode::Other(u32::MAX)), u32::MAX);
}

#[test]
fn preface_is_matched_at_every_length() {
    assert_eq!(PREFACE.len(), 24);
    for n in 0..PREFACE.len() {
        assert_eq!(
            match_preface(&PREFACE[..n]),
            PrefaceState::Incomplete,
            "{n}"
        );
    }
    assert_eq!(match_preface(PREFACE), PrefaceState::Matched);
    let mut more = PREFACE.to_vec();
    more.extend(encoded(encode_settings_ack));
    assert_eq!(match_preface(&more), PrefaceState::Matched);
    assert_eq!(match_preface(b"GET / HTTP/1.1\r\n"), PrefaceState::Mismatch);
    assert_eq!(match_preface(b"PRI * HTTP/1.1"), PrefaceState::Mismatch);
    assert_eq!(match_preface(b"X"), PrefaceState::Mismatch);
}
