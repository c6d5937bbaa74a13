//! The client role: requests towards origins, and the responses they send back (RFC 9112).
//!
//! The proxy writes a request with [`encode_request_head`] (after [`strip_hop_by_hop`] on the
//! client's fields) and the body with `encode_chunk` or as is, then feeds what the origin
//! sends to a [`ResponseDecoder`], which yields [`ResponseEvent`]s: `Interim` heads (1xx),
//! the final `Head`, `Data` slices of the body, `End`. When the origin closes the connection
//! the proxy calls [`ResponseDecoder::eof`], which ends a close-delimited body and turns any
//! other unfinished response into an error.
//!
//! # Why it is strict
//!
//! An origin's response is as much a smuggling vector as a client's request: if two parsers
//! on the path frame it differently, a response meant for one client ends up with another
//! (response splitting, response-queue poisoning). So the decoder applies the server role's
//! rules to responses, reusing its scanner, field grammars and chunked decoder: CRLF line
//! endings only, no obs-fold, no control characters in fields, Content-Length and
//! Transfer-Encoding never together, strict chunk framing. Each refusal is a
//! [`ResponseError`] of the origin's fault, which the proxy turns into a 502 or an aborted
//! response; and bytes that arrive when no response is expected are refused too.
//!
//! Framing follows RFC 9112 §6.3 in order: no body for HEAD, 1xx, 204 and 304; chunked when
//! it is the final transfer coding; until close for any other transfer coding; the
//! Content-Length; otherwise until close (and the connection is not reused).

//!
//! # What the proxy must do around it
//!
//! - Strip hop-by-hop fields both ways ([`strip_hop_by_hop`]) and re-frame: the request with
//!   [`OutboundRequest::body`], the response with `ResponseHead::body_len` from the decoded
//!   [`OriginHead::body`]. Check [`OriginHead::transfer_coded`] first: such a body is still in
//!   a transfer coding we do not undo.
//! - Return an origin connection to the keep-alive pool only when the decoder
//!   [`is_idle`](ResponseDecoder::is_idle), the last head said `keep_alive`, the request did not
//!   say `Connection: close`, and the receive buffer is empty; call
//!   [`expect`](ResponseDecoder::expect) with the next request's method when reusing it.
//! - On a [`ResponseError`]: answer 502 (or retry, see
//!   [`ResponseError::retryable_if_idempotent`]) while no final head was received; abort the
//!   client's response after. Either way close the origin connection.
//!
//! # Example
//!
//! ```
//! use bytes::BytesMut;
//! use http::{HeaderMap, HeaderValue, Method, StatusCode, uri::PathAndQuery};
//! use squall_h1::{
//!     BodyKind, OutboundRequest, ResponseBody, ResponseDecoder, ResponseEvent, ResponseLimits,
//!     encode_request_head, strip_hop_by_hop,
//! };
//!
//! // The client's fields, filtered.
//! let mut headers = HeaderMap::new();
//! headers.insert("accept", HeaderValue::from_static("*/*"));
//! headers.insert("connection", HeaderValue::from_static("close"));
//! strip_hop_by_hop(&mut headers);
//!
//! let target = PathAndQuery::from_static("/index.html");
//! let host = HeaderValue::from_static("origin.example");
//! let request = OutboundRequest {
//!     method: &Method::GET,
//!     target: &target,
//!     host: &host,
//!     headers: &headers,
//!     raw_headers: b"Via: 1.1 squall\r\n",
//!     body: BodyKind::Empty,
//!     keep_alive: true,
//! };
//! let mut send = BytesMut::new();
//! encode_request_head(&request, &mut send);
//! assert_eq!(
//!     &send[..],
//!     b"GET /index.html HTTP/1.1\r\nHost: origin.example\r\naccept: */*\r\nVia: 1.1 squall\r\n\r\n"
//! );
//!
//! // What the origin answers; it then closes the connection.
//! let mut recv = BytesMut::from(&b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhi"[..]);
//! let mut decoder = ResponseDecoder::new(ResponseLimits::default(), &Method::GET);
//! let mut body = Vec::new();
//! while let Some(event) = decoder.decode(&mut recv)? {
//!     match event {
//!         ResponseEvent::Interim(_) => {} // forward a 103, or drop it
//!         ResponseEvent::Head(head) => {
//!             assert_eq!(head.status, StatusCode::OK);
//!             assert_eq!(head.body, ResponseBody::Close);
//!             assert!(!head.keep_alive);
//!         }
//!         ResponseEvent::Data(data) => body.extend_from_slice(&data),
//!         ResponseEvent::End { .. } => unreachable!("the body runs until close"),
//!     }
//! }
//! // The read returned 0: the close ends the body.
//! assert!(matches!(decoder.eof()?, Some(ResponseEvent::End { trailers: None })));
//! assert_eq!(body, b"hi");
//! # Ok::<(), squall_h1::ResponseError>(())
//! ```

mod decoder;
mod error;
mod head;
mod request;

pub use decoder::{ResponseDecoder, ResponseEvent, ResponseLimits};
pub use error::{ResponseError, ResponseErrorKind};
pub use head::OriginHead;
pub use request::{
    HopByHop, OutboundRequest, encode_request_head, encode_request_start, is_framing_field,
    strip_hop_by_hop,
};
