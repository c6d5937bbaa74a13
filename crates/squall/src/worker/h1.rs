//! HTTP/1.x connections in the protocol layer: decoding pipelined requests in order into the
//! loop's request events ([`Heard`]). One request is answered at a time: while a proxied
//! request's answer, a parked cache request, a file or a password check is in progress, the
//! next one waits in the receive buffer; a proxied request's body goes to its session as it
//! arrives, and every other request is handed on at its end.

use squall_h1::Event;
use tracing::debug;

use super::OUT_HIGH_BYTES;
use super::conn::Phase;
use super::downstream::Downstream;
use super::downstream::heard::{Deferred, Heard};
use super::ids::Client;

impl Downstream<'_> {
    /// The next request event of HTTP/1.x connection `index`, if it may read one now; a
    /// request the decoder cannot read is answered (and the connection closes after it) on
    /// the way, and the body of a request nobody forwards is dropped.
    pub(super) fn next_h1(&mut self, index: usize) -> Option<Heard> {
        loop {
            let conn = &mut self.conns[index];
            let unsent = conn.unsent_bytes();
            let h1 = conn.proto.h1_mut()?;
            if conn.close_after || conn.phase != Phase::Open || h1.verifying {
                return None;
            }
            // A proxied request is answered before the next pipelined one is read.
            if (h1.exchange.is_some() && !h1.forwarding) || h1.parked.is_some() || h1.file.is_some()
            {
                return None;
            }
            if unsent >= OUT_HIGH_BYTES {
                conn.blocked = true;
                return None;
            }
            if conn.head_started.is_none()
                && h1.request.is_none()
                && !h1.forwarding
                && !conn.rbuf.is_empty()
            {
                conn.head_started = Some(self.now);
                conn.fresh = false;
            }
            let client = Client::H1(index);
            match h1.decoder.decode(&mut conn.rbuf) {
                Ok(Some(Event::Head(head))) => {
                    conn.request_started = conn.head_started.take().unwrap_or(self.now);
                    // A request without a body is whole with its head: its end is taken now,
                    // so that it is answered at once, as an HTTP/2 stream ended with its
                    // HEADERS is.
                    let end = head.body == squall_h1::BodyKind::Empty && h1.decoder.take_end();
                    return Some(Heard::Head { client, head, end });
                }
                // A proxied request's body goes to its session, which frames it for the
                // origin; `respond` routes do not read bodies, so the bytes are dropped.
                Ok(Some(Event::Data(data))) => {
                    if let Some(id) = h1.exchange.filter(|_| h1.forwarding) {
                        let end = false;
                        return Some(Heard::Body {
                            client,
                            id,
                            data,
                            end,
                        });
                    }
                }
                // The end of a proxied request (whose session may have ended already: then
                // the connection closes after its answer). Trailers of a chunked request go
                // on in the origin's last chunk.
                Ok(Some(Event::End { trailers })) if h1.forwarding => {
                    h1.forwarding = false;
                    if let Some(id) = h1.exchange {
                        return Some(Heard::End { id, trailers });
                    }
                }
                Ok(Some(Event::End { .. })) => {
                    let head = h1
                        .request
                        .take()
                        .expect("the codec ends only a started request");
                    let deferred = match h1.cached_route.take() {
                        Some(route) => Deferred::Cached(route),
                        None => Deferred::Answer(h1.answer_route.take()),
                    };
                    return Some(Heard::Complete {
                        client,
                        head,
                        deferred,
                    });
                }
                Ok(None) => return None,
                Err(e) => {
                    let status = e.status();
                    debug!(
                        worker = self.log.worker,
                        conn = index,
                        status = status.as_u16(),
                        "bad request: {e}"
                    );
                    let head = h1.request.take();
                    self.bad_request_h1(index, head.as_ref(), status);
                }
            }
        }
    }
}
