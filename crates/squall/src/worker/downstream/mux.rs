//! The sending side of a multiplexed connection, HTTP/2 or HTTP/3, behind one interface: a
//! response on a stream is a HEADERS, DATA and trailers in both, with the same rules (1xx
//! heads first, connection-specific fields dropped, the stream closed by its last frame), so
//! the downstream writes each kind of answer once for both and only this file tells them
//! apart. HTTP/2 takes stream ids of 31 bits; HTTP/3's are QUIC's 62-bit ids.

use bytes::Bytes;
use squall_h2::ErrorCode as H2Code;
use squall_h3::ErrorCode as H3Code;

use super::super::conn::Conn;
use super::proto::Proto;

/// A multiplexed connection's sending side (see the module docs).
pub enum Mux<'a> {
    /// With the `Alt-Svc` field value its final response heads carry, if any.
    H2(&'a mut squall_h2::Connection, Option<&'a [u8]>),
    H3(&'a mut squall_h3::server::Connection),
}

/// A send to a stream that can no longer take it (the client reset it meanwhile).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gone;

impl Mux<'_> {
    /// The sending side of the connection, if it multiplexes.
    pub fn of(conn: &mut Conn) -> Option<Mux<'_>> {
        let Conn { proto, alt_svc, .. } = conn;
        match proto {
            Proto::H2(h2) => Some(Mux::H2(&mut h2.conn, alt_svc.as_deref())),
            Proto::H3(h3) => Some(Mux::H3(h3.quic.h3())),
            Proto::H1(_) | Proto::Undecided => None,
        }
    }

    /// Queues a response head (or a 1xx one); `end`: no body follows. Returns the bytes it
    /// took on the wire, for the access log.
    pub fn send_headers<'f>(
        &mut self,
        stream: u64,
        status: u16,
        fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
        end: bool,
    ) -> Result<usize, Gone> {
        match self {
            Mux::H2(conn, alt_svc) => {
                let before = conn.encoded_bytes();
                let id = h2_id(stream)?;
                // A final head advertises HTTP/3 where the listener serves it.
                let alt_svc = alt_svc.filter(|_| status >= 200);
                let fields = (fields.into_iter().map(shorten))
                    .chain(alt_svc.map(|value| (&b"alt-svc"[..], value)));
                conn.send_headers(id, status, fields, end)
                    .map_err(|_| Gone)?;
                Ok(conn.encoded_bytes().saturating_sub(before))
            }
            Mux::H3(conn) => {
                let before = conn.queued_data(stream);
                conn.send_headers(stream, status, fields, end)
                    .map_err(|_| Gone)?;
                Ok(conn.queued_data(stream).saturating_sub(before))
            }
        }
    }

    /// Queues body bytes (by reference); `end` ends the stream after them.
    pub fn send_data(&mut self, stream: u64, data: Bytes, end: bool) -> Result<(), Gone> {
        match self {
            Mux::H2(conn, _) => conn.send_data(h2_id(stream)?, data, end).map_err(|_| Gone),
            Mux::H3(conn) => conn.send_data(stream, data, end).map_err(|_| Gone),
        }
    }

    /// Ends the stream with trailers.
    pub fn send_trailers<'f>(
        &mut self,
        stream: u64,
        fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
    ) -> Result<(), Gone> {
        match self {
            Mux::H2(conn, _) => conn.send_trailers(h2_id(stream)?, fields).map_err(|_| Gone),
            Mux::H3(conn) => conn.send_trailers(stream, fields).map_err(|_| Gone),
        }
    }

    /// Cuts the response on `stream`, which cannot be finished (its origin failed mid-body, a
    /// file read failed): HTTP/2 RST_STREAM, HTTP/3 QUIC RESET_STREAM, so the client never
    /// takes it for whole.
    pub fn cut(&mut self, stream: u64) {
        match self {
            Mux::H2(conn, _) => {
                if let Ok(id) = h2_id(stream) {
                    conn.reset_stream(id, H2Code::InternalError);
                }
            }
            Mux::H3(conn) => conn.reset_stream(stream, H3Code::InternalError),
        }
    }

    /// The response on `stream` is whole and the rest of its request is not wanted: the client
    /// may stop sending it (HTTP/2: RST_STREAM NO_ERROR after the response, RFC 9113 §8.1;
    /// HTTP/3: the connection drops what more arrives, RFC 9114 §4.1).
    pub fn request_unwanted(&mut self, stream: u64) {
        if let (Mux::H2(conn, _), Ok(id)) = (self, h2_id(stream)) {
            conn.reset_stream(id, H2Code::NoError);
        }
    }
}

/// A field with the shorter of two lifetimes, so that fields borrowed from the caller and
/// from the connection go into one list.
fn shorten<'s, 'l: 's>(field: (&'l [u8], &'l [u8])) -> (&'s [u8], &'s [u8]) {
    field
}

/// An HTTP/2 stream id from the maps' u64: never larger than 2^31 - 1 there.
fn h2_id(stream: u64) -> Result<squall_h2::StreamId, Gone> {
    squall_h2::StreamId::try_from(stream).map_err(|_| Gone)
}
