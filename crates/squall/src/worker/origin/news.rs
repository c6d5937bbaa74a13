//! What an origin connection learns for the exchange on it, as a value: the origin side never
//! calls a session. It queues [`News`] in [`Outbox`], and the worker's loop delivers it once
//! the origin side is done with the completion that taught it (see `Worker::deliver`), so
//! that no origin method runs inside a session's action or the other way round.

use std::collections::VecDeque;

use bytes::Bytes;
use squall_h1::ResponseEvent;
use squall_proxy::Exchange;
use squall_upstream::UpstreamErrorClass;
use squall_uring::RecvBuf;

use super::super::ids::SessionId;

/// One thing an origin connection tells the exchange that holds it.
#[derive(Debug)]
pub enum News {
    /// An HTTP/1.1 connection is ready for the request (a new one after its TLS handshake, if
    /// any; `reused`: taken from the pool).
    Connected { reused: bool },
    /// A stream of a shared HTTP/2 connection is free for the request.
    Stream { reused: bool, tls: bool },
    /// The connection (or the handshake, or the HTTP/2 connection it waited for) failed.
    ConnectFailed(UpstreamErrorClass),
    /// `n` bytes of what the exchange wrote left for the origin.
    Sent(usize),
    /// Response bytes as received (cleartext): read, then given back to the ring.
    Received(RecvBuf),
    /// Response bytes decrypted from a TLS connection.
    Plain(Bytes),
    /// A piece of an HTTP/2 response (`None`: only its end), and whether the stream ended
    /// with it.
    Response {
        event: Option<ResponseEvent>,
        end: bool,
    },
    /// The origin closed the connection.
    Eof,
    /// A send or receive failed.
    Failed,
    /// The HTTP/2 stream was reset (`refused`: nothing of the request was processed).
    Reset { refused: bool },
    /// The connection's timer came due: the exchange's deadline may have passed.
    Timer,
    /// The HTTP/2 connection the exchange waited on takes no new stream (a GOAWAY): it must
    /// look for another connection to the same server.
    Requeue {
        upstream: usize,
        server: squall_upstream::ServerId,
    },
}

impl News {
    /// Hands the news to `ex`, for those the exchange takes as they are. `Received` (which
    /// needs the ring's buffer) and `Requeue` (which needs the origin side) are the loop's.
    pub fn apply(self, ex: &mut Exchange, now: std::time::Instant) {
        match self {
            News::Connected { reused } => ex.on_origin_connected(reused, now),
            News::Stream { reused, tls } => ex.on_origin_stream(reused, tls, now),
            News::ConnectFailed(class) => ex.on_connect_failed(class, now),
            News::Sent(n) => ex.on_origin_sent(n, now),
            News::Plain(bytes) => ex.on_origin_data(&bytes, now),
            News::Response { event, end } => {
                if let Some(event) = event {
                    ex.on_origin_response(event, now);
                }
                if end {
                    ex.on_origin_response(ResponseEvent::End { trailers: None }, now);
                }
            }
            News::Eof => ex.on_origin_eof(now),
            News::Failed => ex.on_origin_error(now),
            News::Reset { refused } => ex.on_origin_reset(refused, now),
            News::Timer => ex.on_timer(now),
            News::Received(_) | News::Requeue { .. } => {
                debug_assert!(false, "delivered by the loop, not applied");
            }
        }
    }
}

/// News waiting for the loop, in the order it was learned: for session `.0`, from origin
/// connection `.1` (delivered only while the session still holds that connection).
#[derive(Debug, Default)]
pub struct Outbox {
    queue: VecDeque<(SessionId, usize, News)>,
}

impl Outbox {
    pub fn tell(&mut self, id: SessionId, origin: usize, news: News) {
        self.queue.push_back((id, origin, news));
    }

    pub fn next(&mut self) -> Option<(SessionId, usize, News)> {
        self.queue.pop_front()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}
