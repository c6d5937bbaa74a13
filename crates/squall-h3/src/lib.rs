//! squall-h3: HTTP/3 framing (RFC 9114) and QPACK (RFC 9204), and the server side of an
//! HTTP/3 connection above QUIC streams, sans-IO.
//!
//! The codec layer of HTTP/3 (bytes in, values and bytes out, like `squall-h2`'s frame
//! layer and `squall-hpack`), and above it [`server::Connection`], the connection layer of a
//! server, as `squall-h2`'s `Connection` is for HTTP/2. It has **no QUIC** (no packets, no
//! encryption, no loss recovery, no congestion control, no stream flow control), **no I/O**
//! and no clock: QUIC streams are ids and bytes here, and `Instant`s are passed in.
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
//! # The server connection ([`server`])
//!
//! [`server::Connection`] is one server connection: stream bytes and `Instant`s in;
//! [`server::Event`]s for the application, [`server::Command`]s and stream bytes for the
//! driver out. It builds on `squall-h2`'s request layer, since HTTP/3's request semantics
//! (RFC 9114 §4.2, §4.3) are HTTP/2's (RFC 9113 §8.2, §8.3): a request is a
//! `squall_h2::Request` (re-exported as [`server::Request`], its fields a
//! [`server::HeaderFields`]), validated by `squall_h2::head`, the code that validates
//! HTTP/2's, which also filters our response heads; so a server treats both alike. What is
//! HTTP/3's own stays here: QPACK, QUIC streams and their FIN, the H3 error codes.
//!
//! - Streams: client bidirectional streams carry requests; client unidirectional streams
//!   start with their type: one control stream (SETTINGS first, applied to our QPACK
//!   encoder; GOAWAY and MAX_PUSH_ID checked and otherwise ignored: we never push), one
//!   QPACK encoder stream (our decoder) and one QPACK decoder stream (our encoder); a
//!   second of any, a push stream, or one of them closed or reset is a connection error;
//!   unknown types are read and discarded, a few at a time, the rest stopped. We open the
//!   same three ([`server::Uni`]).
//! - Requests (RFC 9114 §4.1): HEADERS, DATA, optional trailers, end; frames out of that
//!   order are a connection error H3_FRAME_UNEXPECTED. A section blocked on the QPACK
//!   encoder stream waits, with what follows it (bounded), until the encoder stream
//!   unblocks it; its stream being reset or abandoned cancels it. Heads and trailers are
//!   validated by `squall_h2::head` (QPACK's fields copied once into one buffer), as HTTP/2's
//!   are (same rules, same answers); a malformed request is a stream error H3_MESSAGE_ERROR
//!   (both parts of the stream reset, counted), not a connection error. 413, 414, 431 and
//!   501 are answered by the connection itself.
//!   Extended CONNECT (RFC 9220) when configured.
//! - Responses: `send_headers` (1xx first if wanted), `send_data` (the body queued as the
//!   application's `Bytes`, behind a DATA frame header: never copied), `send_trailers`,
//!   `reset_stream`; queued per QUIC stream. [`server::Connection::poll_output`] offers the
//!   chunks to the driver, which writes what QUIC flow control takes and leaves the rest.
//! - Limits: rapid reset, empty and unknown (grease) frames, control frames, QPACK
//!   insertions, each per window (H3_EXCESSIVE_LOAD); see [`server::ServerConfig`].
//!
//! What the driver still does: QUIC itself (quinn-proto, in the binary): opening our three
//! unidirectional streams and mapping them to [`server::Uni`], feeding each received chunk
//! to [`server::Connection::recv`] and the peer's RESET_STREAM and STOP_SENDING to
//! [`server::Connection::stream_reset`] and [`server::Connection::stop_sending`] (and
//! resetting a stream the peer stopped), writing [`server::Connection::poll_output`]'s
//! chunks, carrying out [`server::Command`]s, flow control (reading no more of a stream
//! than the application keeps up with: the connection buffers request bodies only while a
//! section is blocked), timeouts, and closing the connection once
//! [`server::Connection::is_finished`]. The peer's SETTINGS_MAX_FIELD_SECTION_SIZE is
//! available ([`server::Connection::peer_settings`]) but not enforced on our responses.
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
//!
//! # Server example
//!
//! ```
//! use std::time::Instant;
//!
//! use bytes::{Bytes, BytesMut};
//! use squall_h3::server::{Connection, Event, OutStream, ServerConfig, StreamOut};
//! use squall_h3::{Settings, StreamType, encode_headers, encode_settings, encode_stream_type};
//!
//! let now = Instant::now();
//! let mut conn = Connection::new(ServerConfig::default(), now);
//!
//! // The client's control stream (unidirectional stream 2), then GET / on stream 0.
//! let mut control = BytesMut::new();
//! encode_stream_type(StreamType::Control, &mut control);
//! encode_settings(&Settings::default(), &mut control);
//! conn.recv(2, control.freeze(), false, now).unwrap();
//! let mut block = BytesMut::new();
//! squall_h3::qpack::Encoder::default().encode_section(
//!     0,
//!     [
//!         (&b":method"[..], &b"GET"[..], false),
//!         (b":scheme", b"https", false),
//!         (b":authority", b"example.com", false),
//!         (b":path", b"/", false),
//!     ],
//!     &mut block,
//! );
//! let mut request = BytesMut::new();
//! encode_headers(&block, &mut request);
//! conn.recv(0, request.freeze(), true, now).unwrap();
//!
//! let Some(Event::Request { stream_id, request }) = conn.poll_event() else {
//!     panic!("a request");
//! };
//! assert_eq!(request.path, "/");
//! conn.send_headers(stream_id, 200, [(&b"content-type"[..], &b"text/plain"[..])], false)
//!     .unwrap();
//! conn.send_data(stream_id, Bytes::from_static(b"hello"), true).unwrap();
//!
//! // The driver writes what QUIC takes: here 4 bytes per call.
//! let mut written = Vec::new();
//! while conn.has_output() {
//!     conn.poll_output(|out: StreamOut<'_>| {
//!         let n = out.data.len().min(4);
//!         if out.stream == OutStream::Request(stream_id) {
//!             written.extend_from_slice(&out.data[..n]);
//!         }
//!         n
//!     });
//! }
//! assert!(written.ends_with(b"hello"));
//! assert!(conn.is_idle());
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
