//! What a client connection's bytes say, handed to the loop as values: the protocol layer
//! decodes (HTTP/1.1 in `h1.rs`, HTTP/2 in `h2.rs`) and yields one [`Heard`] at a time, in
//! the same vocabulary for both, and the loop decides what each leads to (admission, the
//! cache, a session, a file, an answer). The loop never asks which protocol a client speaks:
//! where the protocols differ (an HTTP/1.1 request waits for its end before it is answered; an
//! HTTP/2 stream's body is bounded by its window, not by pausing the socket) it asks the
//! questions below, which this layer answers for the protocol in force.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use squall_h1::RequestHead;
use squall_h2::{Connection, ErrorCode};
use squall_proxy::ProxyRoute;
use tracing::{debug, info};

use super::super::OUT_HIGH_BYTES;
use super::super::entry::{Admission, Field};
use super::super::h2::{Selection, select};
use super::super::ids::{Client, FileId, SessionId};
use super::super::tunnel::{is_stream_upgrade, upgrade_allowed};
use super::Downstream;
use super::proto::{H1, H2, Proto};

/// One request event from a client connection (see the module docs).
pub enum Heard {
    /// A request head, to be admitted; `end`: nothing follows it (no body, or its stream
    /// ended with it).
    Head {
        client: Client,
        head: RequestHead,
        end: bool,
    },
    /// Bytes of the body of the request session `id` answers (or of its HTTP/2 tunnel);
    /// `end`: the last of them.
    Body {
        client: Client,
        id: SessionId,
        data: Bytes,
        end: bool,
    },
    /// The end of the body of the request session `id` answers, with its trailers.
    End {
        id: SessionId,
        trailers: Option<HeaderMap>,
    },
    /// A request read to its end, which the way noted at its head now answers.
    Complete {
        client: Client,
        head: RequestHead,
        deferred: Deferred,
    },
    /// The client reset a request (HTTP/2 RST_STREAM): what answered it ends.
    Reset {
        session: Option<SessionId>,
        file: Option<FileId>,
    },
}

/// How a request admitted at its head is answered once it has been read to its end.
pub enum Deferred {
    /// From the cache (a bodiless request on a cached route).
    Cached(Arc<ProxyRoute>),
    /// By its route (`respond`, `redirect`, `root`), `None`: the service's fallback.
    Answer(Option<u32>),
}

/// Where a connection's protocol stands when it is processed (see [`Downstream::begin`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Began {
    /// Not known yet: the TLS handshake runs, or too few bytes tell it.
    Undecided,
    /// The client speaks a protocol this listener does not serve: the connection closes.
    Refused,
    /// Known: its requests may be read.
    Speaking,
}

impl Downstream<'_> {
    /// Chooses connection `index`'s protocol if it has none yet, then hands an HTTP/2
    /// connection its received bytes (its events are then [`Downstream::next`]'s).
    pub fn begin(&mut self, index: usize) -> Began {
        let conn = &mut self.conns[index];
        if matches!(conn.proto, Proto::Undecided) {
            match select(conn) {
                Selection::Undecided => return Began::Undecided,
                Selection::Refused => {
                    debug!(
                        worker = self.log.worker,
                        conn = index,
                        "protocol not served here"
                    );
                    self.counters.bad_requests.inc();
                    return Began::Refused;
                }
                Selection::H2 => {
                    conn.fresh = false;
                    let h2 = Connection::new(self.h2.clone(), self.now);
                    conn.proto = Proto::H2(Box::new(H2::new(h2)));
                    self.counters.h2_connections.inc();
                }
                Selection::Http1 => {
                    let decoder = squall_h1::RequestDecoder::new(self.h1_limits);
                    conn.proto = Proto::H1(Box::new(H1::new(decoder)));
                }
            }
        }
        self.receive_h2(index);
        Began::Speaking
    }

    /// The next request event connection `index` has, if any; answers what needs nothing
    /// else (a request that cannot be read) on the way.
    pub fn next(&mut self, index: usize) -> Option<Heard> {
        match self.conns[index].proto {
            Proto::Undecided => None,
            Proto::H1(_) => self.next_h1(index),
            Proto::H2(_) => self.next_h2(index),
            Proto::H3(_) => self.next_h3(index),
        }
    }

    /// Whether an admitted request's answer waits for its end, while its body arrives
    /// (HTTP/1.1: until the decoder's `End`, with `100 Continue` said now if asked for; HTTP/2:
    /// until its stream ends); `end`: it is whole. `None`: its connection is gone, and the
    /// request with it. If it waits, [`Downstream::defer`] keeps it: asked apart from the
    /// keeping so that a request answered now is not moved through it and back (a head is
    /// some 250 bytes, and its moves showed in the profile).
    pub fn waits(
        &mut self,
        client: Client,
        head: &RequestHead,
        deferred: &Deferred,
        end: bool,
    ) -> Option<bool> {
        let conn = self.conns.get_mut(client.conn())?;
        Some(match (&conn.proto, deferred) {
            (Proto::H1(_), _) => {
                if head.expect_continue {
                    squall_h1::encode_continue(&mut conn.out);
                }
                !end
            }
            (Proto::H2(_), Deferred::Answer(_)) => !end && matches!(client, Client::H2(..)),
            _ => false,
        })
    }

    /// Keeps a request [`Downstream::waits`] said waits, until its end comes.
    pub fn defer(&mut self, client: Client, head: RequestHead, deferred: Deferred) {
        let Some(conn) = self.conns.get_mut(client.conn()) else {
            return;
        };
        match (&mut conn.proto, client, deferred) {
            (Proto::H1(h1), _, deferred) => {
                match deferred {
                    Deferred::Cached(route) => h1.cached_route = Some(route),
                    Deferred::Answer(route) => h1.answer_route = route,
                }
                h1.request = Some(head);
            }
            (Proto::H2(h2), Client::H2(_, stream), Deferred::Answer(route)) => {
                h2.streams.pending.insert(u64::from(stream), (head, route));
            }
            _ => debug_assert!(false, "only what `waits` said waits is deferred"),
        }
    }

    /// Notes that the body of `client`'s request goes to a session as it arrives: an HTTP/1.1
    /// connection's decoder hands its body and end to the session.
    pub fn forwarding(&mut self, client: Client) {
        if let Some(h1) = (self.conns.get_mut(client.conn())).and_then(|c| c.proto.h1_mut()) {
            h1.forwarding = true;
        }
    }

    /// A proxied request's exchange takes no more of its body: true when the connection stops
    /// reading until it does (HTTP/1.1; an HTTP/2 stream's window bounds its body instead).
    pub fn body_full(&mut self, client: Client) -> bool {
        let Some(conn) = self.conns.get_mut(client.conn()) else {
            return false;
        };
        let h1 = matches!(conn.proto, Proto::H1(_));
        conn.blocked |= h1;
        h1
    }

    /// The session whose request body connection `index` is reading, if its reading may be
    /// paused for it (HTTP/1.1).
    pub fn reading_body_of(&self, index: usize) -> Option<SessionId> {
        let h1 = self.conns.get(index)?.proto.h1()?;
        h1.exchange.filter(|_| h1.forwarding)
    }

    /// A request whose credentials were checked: false when its connection can no longer
    /// take its answer (closed, or no longer speaking the protocol it came on).
    pub fn verified(&mut self, client: Client) -> bool {
        let Some(conn) = self.conns.get_mut(client.conn()) else {
            return false;
        };
        let open = conn.phase == super::super::conn::Phase::Open;
        match (&mut conn.proto, client) {
            (Proto::H1(h1), Client::H1(_)) if h1.verifying && open => {
                h1.verifying = false;
                true
            }
            (Proto::H2(h2), Client::H2(..)) => {
                h2.streams.verifying = h2.streams.verifying.saturating_sub(1);
                open
            }
            (_, _) => {
                super::set_verifying(conn, false);
                false
            }
        }
    }

    /// Refuses an admitted request with `status` (and `field`, a `Retry-After` or a
    /// challenge): on HTTP/1.1 the connection closes after it (its body is not read).
    pub fn refuse(
        &mut self,
        client: Client,
        head: &RequestHead,
        status: StatusCode,
        field: Option<Field>,
    ) {
        match (client, field) {
            (Client::H1(index), field) => self.refuse_h1(index, head, status, field),
            (Client::H2(..) | Client::H3(..), None) => {
                self.refuse_stream(client, status, Some(head));
            }
            (Client::H2(..) | Client::H3(..), Some((name, value))) => {
                self.refuse_with(client, head, status, Some((name, &value[..])));
            }
        }
    }

    /// What an HTTP/2 or HTTP/3 extended CONNECT's admission leads to: a session on a route
    /// that allows its protocol (never the cache); a 501 on any other route (`None`:
    /// answered). Other requests, and refusals, pass as they are.
    pub fn admit_tunnel(
        &mut self,
        client: Client,
        head: &RequestHead,
        admission: Admission,
    ) -> Option<Admission> {
        if !is_stream_upgrade(head) {
            return Some(admission);
        }
        let route = match admission {
            Admission::Forward { route, .. } | Admission::Cached(route) => route,
            Admission::Answer { .. } => {
                self.refuse_tunnel(client, head);
                return None;
            }
            refused @ (Admission::Refused(..) | Admission::Verify(_)) => return Some(refused),
        };
        if !upgrade_allowed(&route, head) {
            self.refuse_tunnel(client, head);
            return None;
        }
        Some(Admission::Forward {
            route,
            invalidate: None,
        })
    }

    /// 501 to an extended CONNECT whose protocol the route does not take (RFC 9220 §3 says
    /// 501 for a `:protocol` the server does not support). The stream, which the client has
    /// not ended, is then reset with NO_ERROR on HTTP/2 (RFC 9113 §8.1); on HTTP/3 what more
    /// the client sends on it is read and dropped, its flow control given back.
    fn refuse_tunnel(&mut self, client: Client, head: &RequestHead) {
        let (index, Some(stream)) = (client.conn(), client.stream()) else {
            return;
        };
        self.counters.tunnel_refused[1].inc();
        info!(
            worker = self.log.worker,
            conn = index,
            stream,
            "extended CONNECT on a route that does not allow its upgrade: 501"
        );
        self.refuse_stream(client, StatusCode::NOT_IMPLEMENTED, Some(head));
        if let (Client::H2(_, stream), Some(h2)) = (client, self.conns[index].proto.h2_mut()) {
            h2.conn.reset_stream(stream, ErrorCode::NoError);
        }
    }

    /// Tunnel bytes an HTTP/2 or HTTP/3 extended CONNECT's client sent before its tunnel
    /// began: kept (their window not given back, which bounds them) until it does.
    pub fn keep_early(&mut self, client: Client, data: Bytes, end: bool) {
        let Some(stream) = client.stream() else {
            return;
        };
        let conn = self.conns.get_mut(client.conn());
        if let Some(streams) = conn.and_then(|c| c.proto.streams_mut()) {
            streams.early.entry(stream).or_default().push((data, end));
        }
    }

    /// Moves what an HTTP/2 connection has to say into its output, up to the output bound,
    /// and marks it to close once it has nothing more to do. True when it did (its streams
    /// may have drained); false on HTTP/1.1, whose answers are written as they are made. An
    /// HTTP/3 connection's output moves into QUIC when it is flushed: here its counts are
    /// taken, and its streams may have drained.
    pub fn pump(&mut self, index: usize) -> bool {
        let conn = &mut self.conns[index];
        if let Some(h3) = conn.proto.h3_mut() {
            super::super::h3::count_stats(self.counters, h3.quic.h3().take_stats());
            return true;
        }
        let Some(h2) = conn.proto.h2_mut() else {
            return false;
        };
        super::super::h2::count_stats(self.counters, h2.conn.take_stats());
        let room =
            OUT_HIGH_BYTES.saturating_sub(conn.out.len() + conn.wire.len() + conn.chain.bytes);
        if room > 0 {
            let (out, chain, copy) = (&mut conn.out, &mut conn.chain, conn.tls.is_some());
            h2.conn
                .poll_output(room, |piece| chain.push(out, piece, copy));
        }
        if h2.conn.is_finished() {
            conn.close_after = true;
        }
        true
    }

    /// Begins a graceful stop of an HTTP/2 connection: GOAWAY, then its streams finish.
    /// `idle`: it reached its idle limit, and is closed `IDLE_GOAWAY_GRACE` after the GOAWAY
    /// at the latest. True when there was one to send (the caller pumps it); nothing on
    /// HTTP/1.1.
    pub fn go_away(&mut self, index: usize, idle: bool) -> bool {
        if let Some(h3) = self.conns[index].proto.h3_mut() {
            // HTTP/3's GOAWAY (RFC 9114 §5.2): requests after it are refused, those before
            // it finish; QUIC's own idle timeout ends an idle connection.
            h3.quic.h3().go_away();
            return true;
        }
        let Some(h2) = self.conns[index].proto.h2_mut() else {
            return false;
        };
        if idle {
            h2.streams.idle_goaway = Some(self.now);
        }
        h2.conn.go_away(ErrorCode::NoError);
        true
    }

    /// Runs an HTTP/2 connection's own timers (a stream stalled on a zero window). True when
    /// it has them (the caller pumps what they said).
    pub fn run_timers(&mut self, index: usize) -> bool {
        if let Some(h3) = self.conns[index].proto.h3_mut() {
            h3.quic.timeout(self.now);
            h3.quic.drive(self.now);
            return true;
        }
        let Some(h2) = self.conns[index].proto.h2_mut() else {
            return false;
        };
        h2.conn.on_timer(self.now);
        true
    }
}
