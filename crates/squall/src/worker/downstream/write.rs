//! A piece of a proxied response (head, data, end with trailers, abort) written in the
//! protocol its client speaks: HTTP/1.x framing into the connection's output, or HEADERS and
//! DATA frames on the client's HTTP/2 or HTTP/3 stream.

use bytes::{Bytes, BytesMut};
use http::StatusCode;
use http::header::{HeaderName, HeaderValue};
use squall_h1::RequestHead;
use squall_proxy::{ClientFraming, ClientHead, ToClient};

use super::super::conn::Conn;
use super::super::ids::Label;
use super::Reply;
use super::mux::Mux;

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
            let head_at = conn.out.len();
            squall_h1::encode_response_head(&response, framing, date, &mut conn.out);
            conn.alt_svc_h1(head_at);
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

/// Writes a piece of a proxied response to an HTTP/2 or HTTP/3 stream. Returns true when
/// the response ended.
pub(super) fn write_mux(
    mut mux: Mux<'_>,
    stream: u64,
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
            let sent = mux.send_headers(stream, head.status.as_u16(), fields, no_body);
            reply.sent += sent.unwrap_or(0);
            reply.framing = Some(head.framing);
            false
        }
        ToClient::Interim { status, headers } => {
            // An interim HEADERS frame: the stream stays open for the final head (RFC 9113
            // §8.1, RFC 9114 §4.1).
            let fields = headers
                .iter()
                .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()));
            let sent = mux.send_headers(stream, status.as_u16(), fields, false);
            reply.sent += sent.unwrap_or(0);
            false
        }
        ToClient::Data(data) => {
            reply.sent += data.len();
            let _ = mux.send_data(stream, data, false);
            false
        }
        ToClient::End {
            trailers,
            request_unfinished,
        } => {
            // The stream ends with a trailers HEADERS frame (gRPC's `grpc-status`), or with
            // an empty DATA frame (HTTP/2's END_STREAM; HTTP/3's FIN) without them.
            if reply.framing != Some(ClientFraming::Empty) {
                if let Some(trailers) = trailers {
                    let fields = trailers.iter();
                    let fields = fields.map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()));
                    let _ = mux.send_trailers(stream, fields);
                } else {
                    let _ = mux.send_data(stream, Bytes::new(), true);
                }
            }
            if request_unfinished {
                mux.request_unwanted(stream);
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
/// content-length already HPACK-encoded without a table (a fixed response) and the encoded
/// date: on HTTP/2 they tell the connection that these are the fields of its last fixed
/// answer, sent again as indices (HTTP/3's QPACK encodes `fields` instead). Returns the
/// bytes queued (the HEADERS frames and the body), for the access log.
#[allow(clippy::too_many_arguments)]
pub(in crate::worker) fn send_reply<'a>(
    mut mux: Mux<'_>,
    stream: u64,
    status: StatusCode,
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    encoded: Option<(&[u8], &[u8])>,
    body: Bytes,
    is_head: bool,
    date: &'a [u8],
) -> usize {
    let no_body = is_head || body.is_empty();
    let mut length = squall_proxy::digits::itoa_buf(body.len() as u64);
    let length = length.as_bytes();
    let fields = fields
        .into_iter()
        .map(|(n, v): (&'a [u8], &'a [u8])| -> (&[u8], &[u8]) { (n, v) });
    let sent = match (&mut mux, encoded) {
        (Mux::H2(conn, alt_svc), Some((encoded_fields, encoded_date))) => {
            let before = conn.encoded_bytes();
            let Ok(id) = squall_h2::StreamId::try_from(stream) else {
                return 0;
            };
            let alt_svc = alt_svc.map(|value| (&b"alt-svc"[..], value));
            // The fields, content-length then date: the order of their static encoding.
            let fixed = fields.chain([(&b"content-length"[..], length), (&b"date"[..], date)]);
            let fixed = (&[encoded_fields, encoded_date][..], fixed);
            (conn.send_headers_fixed(id, status.as_u16(), fixed, alt_svc, no_body))
                .map(|()| conn.encoded_bytes().saturating_sub(before))
                .map_err(|_| super::mux::Gone)
        }
        _ => {
            let fields = fields.chain([(&b"date"[..], date), (&b"content-length"[..], length)]);
            mux.send_headers(stream, status.as_u16(), fields, no_body)
        }
    };
    // The client reset the stream meanwhile: nothing was sent.
    let Ok(head) = sent else {
        return 0;
    };
    if no_body {
        return head;
    }
    let body_len = body.len();
    match mux.send_data(stream, body, true) {
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
