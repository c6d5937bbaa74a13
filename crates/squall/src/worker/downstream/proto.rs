//! What a client connection speaks, and the request state that goes with it: one request at a
//! time for HTTP/1.x ([`H1`]), a map per stream for HTTP/2 ([`H2`]). The connection
//! ([`Conn`](super::super::conn::Conn)) holds one [`Proto`] and asks it the questions its
//! timers and bounds need; nothing outside the protocol layer looks inside.

use std::time::{Duration, Instant};

use super::super::IDLE_GOAWAY_GRACE;
use super::super::h1::H1;
use super::super::h2::H2;

/// A client connection's protocol, with its request state.
#[derive(Default)]
pub enum Proto {
    /// Not chosen yet: the TLS handshake runs, or too few bytes arrived to tell an h2c
    /// preface from an HTTP/1.1 request.
    #[default]
    Undecided,
    /// HTTP/1.x (boxed with the H2 variant, so that the connection stays small).
    H1(Box<H1>),
    /// HTTP/2, with its streams.
    H2(Box<H2>),
}

/// What a connection's deadline, once reached, calls for (see [`Proto::at_deadline`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// Not idle after all (a request in progress, or activity since): compute it again.
    Later,
    /// HTTP/2's own timers (a stream stalled on a zero window) are due; `again`: the
    /// connection waits on Squall (a password check), so its deadline is computed again.
    H2Timers { again: bool },
    /// The grace after an idle GOAWAY is over: what is still in flight is cut.
    Cut,
    /// An idle HTTP/2 connection: GOAWAY(NO_ERROR) first, then close.
    GoAway,
    /// Idle, or a head that did not finish in time (the caller tells them apart).
    Idle,
}

impl Proto {
    pub fn h1(&self) -> Option<&H1> {
        match self {
            Proto::H1(h1) => Some(h1),
            _ => None,
        }
    }

    pub fn h1_mut(&mut self) -> Option<&mut H1> {
        match self {
            Proto::H1(h1) => Some(h1),
            _ => None,
        }
    }

    pub fn h2(&self) -> Option<&H2> {
        match self {
            Proto::H2(h2) => Some(h2),
            _ => None,
        }
    }

    pub fn h2_mut(&mut self) -> Option<&mut H2> {
        match self {
            Proto::H2(h2) => Some(h2),
            _ => None,
        }
    }

    /// True when no request is in progress or waiting; `rbuf_empty`: no received byte waits
    /// to be decoded.
    pub fn is_idle(&self, rbuf_empty: bool) -> bool {
        match self {
            Proto::Undecided => rbuf_empty,
            Proto::H1(h1) => h1.is_idle(rbuf_empty),
            Proto::H2(h2) => h2.is_idle() && rbuf_empty,
        }
    }

    /// True when part of an HTTP/1.x request head (or of whatever decides the protocol) has
    /// arrived and is not complete: the header timeout runs.
    pub fn head_in_progress(&self, rbuf_empty: bool) -> bool {
        match self {
            Proto::Undecided => !rbuf_empty,
            Proto::H1(h1) => h1.head_in_progress(rbuf_empty),
            Proto::H2(_) => false,
        }
    }

    /// Response bytes queued on HTTP/2 streams under flow control (none on HTTP/1.x).
    pub fn queued_bytes(&self) -> usize {
        self.h2().map_or(0, |h2| h2.conn.queued_data_total())
    }

    /// True while a proxied request answers this connection.
    pub fn has_sessions(&self) -> bool {
        match self {
            Proto::Undecided => false,
            Proto::H1(h1) => h1.exchange.is_some(),
            Proto::H2(h2) => !h2.exchanges.is_empty(),
        }
    }

    /// Drops what waits on a closing connection: a request whose body was arriving and
    /// requests parked on the cache (a later wake-up finds nothing to resume).
    pub fn forget_waiting(&mut self) {
        match self {
            Proto::Undecided => {}
            Proto::H1(h1) => {
                h1.request = None;
                h1.parked = None;
            }
            Proto::H2(h2) => h2.parked.clear(),
        }
    }

    /// When an open connection that is not reading a head must next be looked at: its idle
    /// limit from `last_activity` (from `now` while Squall, not the client, takes its time:
    /// a password check, or, `origin_wait`, a proxied request waiting on its origin, whose
    /// own timers bound it; the grace after an idle GOAWAY once one was sent), or sooner for
    /// an HTTP/2 timer or a request parked on the cache whose wait ends.
    pub fn deadline(
        &self,
        last_activity: Instant,
        now: Instant,
        idle_timeout: Duration,
        origin_wait: bool,
    ) -> Instant {
        let idle = match self {
            Proto::H2(h2) => match h2.idle_goaway {
                Some(sent) => sent + IDLE_GOAWAY_GRACE,
                None if h2.verifying > 0 || origin_wait => now + idle_timeout,
                None => last_activity + idle_timeout,
            },
            _ if origin_wait => now + idle_timeout,
            _ => last_activity + idle_timeout,
        };
        let sooner = match self {
            Proto::Undecided => None,
            Proto::H1(h1) => h1.parked.as_ref().map(|p| p.until),
            Proto::H2(h2) => {
                let parked = h2.parked.values().map(|p| p.until).min();
                [h2.conn.next_deadline(), parked]
                    .into_iter()
                    .flatten()
                    .min()
            }
        };
        sooner.map_or(idle, |at| at.min(idle))
    }

    /// What an open connection's deadline calls for at `now`; `active_since_idle`: bytes
    /// moved within the idle limit; `origin_wait`: a proxied request waits on its origin.
    pub fn at_deadline(&self, now: Instant, active_since_idle: bool, origin_wait: bool) -> Due {
        let active = active_since_idle || origin_wait;
        match self {
            Proto::H2(h2) if h2.idle_goaway.is_some_and(|t| t + IDLE_GOAWAY_GRACE <= now) => {
                Due::Cut
            }
            Proto::H1(h1) if (h1.parked.is_some() || h1.exchange.is_some()) && active => Due::Later,
            // A stream waits for its password check or its origin, not for the client: not
            // idle. Its HTTP/2 timers (stalled streams) still run.
            Proto::H2(h2) if h2.verifying > 0 || origin_wait => Due::H2Timers { again: true },
            // Not idle: an HTTP/2 timer (a stalled stream) is due.
            Proto::H2(_) if active_since_idle => Due::H2Timers { again: false },
            Proto::H2(h2) if h2.idle_goaway.is_none() => Due::GoAway,
            _ => Due::Idle,
        }
    }
}
