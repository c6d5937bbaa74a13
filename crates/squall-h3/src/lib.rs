//! squall-h3: HTTP/3 framing (RFC 9114) and QPACK (RFC 9204), sans-IO.
//!
//! This is the codec layer of HTTP/3 and nothing more: bytes in, values and bytes out, like
//! `squall-h2`'s frame layer and `squall-hpack`. It has **no QUIC** (no packets, no
//! encryption, no loss recovery, no congestion control, no stream flow control), **no I/O**
//! and no clock. Whatever carries QUIC streams feeds each stream's bytes to the decoder
//! meant for it and sends what the encoders write.
//!
//! # Parts
//!
//! - [`varint`]: QUIC variable-length integers (RFC 9000 §16).
//! - Frames (RFC 9114 §7): [`FrameDecoder`], incremental (a frame may be split anywhere; DATA
//!   payloads are handed out as they arrive, never buffered whole; other frames are bounded
//!   by a payload limit), with the per-stream rules told in its module docs; the encoders
//!   ([`Frame::encode`], [`encode_data_header`], [`encode_headers`], [`encode_settings`],
//!   [`encode_stream_type`]); unidirectional stream types ([`StreamType`],
//!   [`StreamTypeDecoder`]); [`Settings`].
//! - [`qpack`]: the static table, an [`qpack::Encoder`] and a [`qpack::Decoder`] with the
//!   dynamic table, both QPACK streams' instructions and blocked streams.
//! - Errors: [`ErrorCode`] (RFC 9114 §8.1, RFC 9204 §6), [`FrameError`] for the frame layer,
//!   [`qpack::QpackError`] for QPACK. Each says which code closes the connection.
//!
//! # What is not here
//!
//! The connection: which streams exist and what each one's frames mean together (a request's
//! HEADERS, DATA and trailers in order; the control stream's SETTINGS applied to QPACK;
//! GOAWAY; one control stream and one of each QPACK stream per side), request validation
//! (RFC 9114 §4.3), and answering errors by closing or resetting. That is the caller's, and
//! the module docs of the decoders say which check is whose.
//!
//! # Example
//!
//! ```
//! use bytes::{Bytes, BytesMut};
//! use squall_h3::qpack::{Decoder, Encoder, Section};
//! use squall_h3::{Frame, FrameDecoder, StreamKind, encode_headers};
//!
//! // A client encodes a request head with QPACK (static table and literals) and frames it.
//! let mut encoder = Encoder::default();
//! let mut block = BytesMut::new();
//! encoder.encode_section(
//!     0,
//!     [
//!         (&b":method"[..], &b"GET"[..], false),
//!         (b":scheme", b"https", false),
//!         (b":authority", b"example.com", false),
//!         (b":path", b"/", false),
//!     ],
//!     &mut block,
//! );
//! let mut stream = BytesMut::new();
//! encode_headers(&block, &mut stream);
//! Frame::Data(Bytes::from_static(b"hello")).encode(&mut stream);
//!
//! // The server reads the stream, here one byte at a time.
//! let mut frames = FrameDecoder::new(StreamKind::Request, 16 * 1024);
//! let mut decoder = Decoder::new(0, 0);
//! let mut body = Vec::new();
//! for byte in stream.freeze().chunks(1) {
//!     let mut input = Bytes::copy_from_slice(byte);
//!     while let Some(frame) = frames.decode(&mut input).unwrap() {
//!         match frame {
//!             Frame::Headers(section) => {
//!                 let Section::Fields(fields) = decoder.decode_section(0, &section, 16 * 1024).unwrap()
//!                 else {
//!                     panic!("no dynamic table, so never blocked");
//!                 };
//!                 assert_eq!(fields[2].value, "example.com");
//!             }
//!             Frame::Data(piece) => body.extend_from_slice(&piece),
//!             other => panic!("{other:?}"),
//!         }
//!     }
//! }
//! frames.finish().unwrap();
//! assert_eq!(body, b"hello");
//! ```

#![forbid(unsafe_code)]

mod decode;
mod encode;
mod error;
mod frame;
pub mod qpack;
pub mod server;
pub mod varint;

pub use decode::{FRAME_PAYLOAD_BYTES_DEFAULT, FrameDecoder, StreamKind, StreamTypeDecoder};
pub use encode::{encode_data_header, encode_headers, encode_settings, encode_stream_type};
pub use error::{ErrorCode, FrameError};
pub use frame::{Frame, Settings, StreamType, is_reserved, kind, reserved, setting};
