//! A piece of a proxied response (head, data, end with trailers, abort) written in the
//! protocol its client speaks: HTTP/1.x framing into the connection's output, or HEADERS and
//! DATA frames on the client's HTTP/2 stream.

use bytes::{Bytes, BytesMut};
use http::StatusCode;
use http::header::{HeaderName, HeaderValue};
use squall_h1::RequestHead;
use squall_h2::{Connection, ErrorCode, StreamId};
use squall_proxy::{ClientFraming, ClientHead, ToClient};

use super::super::conn::Conn;
use super::super::ids::Label;
use super::Reply;

/// Writes a piece of a proxied response to an HTTP/1.x connection. Returns true when the
/// response ended.
pub(super) fn write_h1(
    conn: &mut Conn,
    reply: &mut Reply,
    request: &RequestHead,
    message: ToClient,
    date: &[u8],
    keep_alive: bool,
) -> bool {
    let before = conn.out.len() + conn.chain.bytes;
    let ended = match message {
        ToClient::Continue => {
            squall_h1::encode_continue(&mut conn.out);
            return false;
        }
        ToClient::Interim { status, headers } => {
            // A 1xx has no body and decides nothing about the connection (RFC 9112 §6.1).
            let response = squall_h1::ResponseHead {
                status,
                headers: &headers,
                raw_headers: b"",
                body_len: None,
            };
            squall_h1::encode_response_head(&response, request.framing(), date, &mut conn.out);
            false
        }
        ToClient::Head(mut head) => {
            add_x_cache(reply, &mut head);
            let mut framing = request.framing();
            // The exchange decided the framing; the drain may still close the connection.
            framing.keep_alive = head.keep_alive && keep_alive;
            let response = squall_h1::ResponseHead {
                status: head.status,
                headers: &head.headers,
                raw_headers: b"",
                body_len: head.body_len,
            };
            squall_h1::encode_response_head(&response, framing, date, &mut conn.out);
            reply.framing = Some(head.framing);
            reply.keep_alive = framing.keep_alive;
            false
        }
        ToClient::Data(data) => {
            match reply.framing {
                Some(ClientFraming::Chunked) => squall_h1::encode_chunk(&data, &mut conn.out),
                Some(ClientFraming::Empty) | None => {}
                Some(_) => {
                    let copy = conn.tls.is_some();
                    conn.chain.push(&mut conn.out, data, copy);
                }
            }
            false
        }
        ToClient::End {
            trailers,
            request_unfinished,
        } => {
            // The exchange passes trailers only to a client that asked (`TE: trailers`).
            if reply.framing == Some(ClientFraming::Chunked) {
                squall_h1::encode_last_chunk(trailers.as_ref(), &mut conn.out);
            }
            if !reply.keep_alive || request_unfinished {
                conn.close_after = true;
            }
            true
        }
        ToClient::Error { .. } | ToClient::Abort => false,
    };
    reply.sent += conn.out.len() + conn.chain.bytes - before;
    ended
}

/// Writes a piece of a proxied response to an HTTP/2 stream. Returns true when the response
/// ended.
pub(super) fn write_h2(
    conn: &mut squall_h2::Connection,
    stream: StreamId,
    reply: &mut Reply,
    message: ToClient,
    date: &[u8],
) -> bool {
    match message {
        ToClient::Head(mut head) => {
            add_x_cache(reply, &mut head);
            let no_body = head.framing == ClientFraming::Empty;
            let mut length = head.body_len.map(squall_proxy::digits::itoa_buf);
            let fields = head
                .headers
                .iter()
                .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
                .chain([(&b"date"[..], date)])
                .chain(
                    length
                        .as_mut()
                        .map(|l| (&b"content-length"[..], l.as_bytes())),
                );
            let before = conn.encoded_bytes();
            let _ = conn.send_headers(stream, head.status.as_u16(), fields, no_body);
            reply.sent += conn.encoded_bytes().saturating_sub(before);
            reply.framing = Some(head.framing);
            false
        }
        ToClient::Interim { status, headers } => {
            // An interim HEADERS frame: the stream stays open for the final head (RFC 9113
            // §8.1).
            let fields = headers
                .iter()
                .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()));
            let before = conn.encoded_bytes();
            let _ = conn.send_headers(stream, status.as_u16(), fields, false);
            reply.sent += conn.encoded_bytes().saturating_sub(before);
            false
        }
        ToClient::Data(data) => {
            reply.sent += data.len();
            let _ = conn.send_data(stream, data, false);
            false
        }
        ToClient::End {
            trailers,
            request_unfinished,
        } => {
            // END_STREAM on a trailers HEADERS frame (gRPC's `grpc-status`), or on an empty
            // DATA frame without them.
            if reply.framing != Some(ClientFraming::Empty) {
                if let Some(trailers) = trailers {
                    let fields = trailers.iter();
                    let fields = fields.map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()));
                    let _ = conn.send_trailers(stream, fields);
                } else {
                    let _ = conn.send_data(stream, Bytes::new(), true);
                }
            }
            if request_unfinished {
                // The response is whole; the rest of the request is not needed (RFC 9113 §8.1).
                conn.reset_stream(stream, ErrorCode::NoError);
            }
            true
        }
        ToClient::Continue | ToClient::Error { .. } | ToClient::Abort => false,
    }
}

fn add_x_cache(reply: &Reply, head: &mut ClientHead) {
    if reply.x_cache {
        head.headers.insert(
            HeaderName::from_static("x-cache"),
            HeaderValue::from_static(Label::Miss.as_str()),
        );
    }
}

/// Queues a whole response on a stream: HEADERS (with `date` and `content-length`), then the
/// body as DATA unless the request was HEAD. `encoded`, when given, is the fields and the
/// content-length already HPACK-encoded (a fixed response) and the encoded date, sent as they
/// are. Returns the bytes queued (the HEADERS frames and the body), for the access log.
#[allow(clippy::too_many_arguments)]
pub(in crate::worker) fn send_reply<'a>(
    conn: &mut Connection,
    stream_id: StreamId,
    status: StatusCode,
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    encoded: Option<(&[u8], &[u8])>,
    body: Bytes,
    is_head: bool,
    date: &'a [u8],
) -> usize {
    let no_body = is_head || body.is_empty();
    let before = conn.encoded_bytes();
    let sent = match encoded {
        Some((fields, date)) => {
            conn.send_headers_encoded(stream_id, status.as_u16(), &[fields, date], [], no_body)
        }
        None => {
            let mut length = squall_proxy::digits::itoa_buf(body.len() as u64);
            let length = length.as_bytes();
            let fields = fields
                .into_iter()
                .map(|(n, v): (&'a [u8], &'a [u8])| -> (&[u8], &[u8]) { (n, v) })
                .chain([(&b"date"[..], date), (&b"content-length"[..], length)]);
            conn.send_headers(stream_id, status.as_u16(), fields, no_body)
        }
    };
    if sent.is_err() {
        return 0; // the client reset the stream meanwhile
    }
    let head = conn.encoded_bytes().saturating_sub(before);
    if no_body {
        return head;
    }
    let body_len = body.len();
    match conn.send_data(stream_id, body, true) {
        Ok(()) => head + body_len,
        Err(_) => head,
    }
}

/// The `date` field HPACK-encoded (`squall_hpack::encode_static`), once per second.
#[derive(Default)]
pub struct EncodedDate {
    date: Vec<u8>,
    encoded: BytesMut,
}

impl EncodedDate {
    /// The fragment for `date` (the worker's current IMF-fixdate).
    pub fn get(&mut self, date: &[u8]) -> &[u8] {
        if self.date != date {
            self.date = date.to_vec();
            self.encoded.clear();
            squall_hpack::encode_static([(&b"date"[..], date)], &mut self.encoded);
        }
        &self.encoded
    }
}
