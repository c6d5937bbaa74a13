//! One QUIC connection with its HTTP/3 connection on top.
//!
//! quinn-proto's [`quinn_proto::Connection`] owns packets, loss recovery, congestion control,
//! encryption and each stream's flow control; `squall-h3`'s server connection owns what the
//! streams mean (requests, QPACK, SETTINGS, GOAWAY). A [`Conn`] moves bytes between the two:
//! every readable stream's bytes into the HTTP/3 connection ([`Conn::drive`]), and the HTTP/3
//! connection's queued output into the QUIC streams, as much as each accepts (the rest waits
//! for QUIC's `Writable`). It runs no clock and does no I/O: the caller hands it packets and
//! `now`, and sends what [`Conn::transmit`] returns.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use bytes::Bytes;
use quinn_proto::{
    ConnectionError, ConnectionEvent, Dir, EndpointEvent, Event, ReadError, StreamEvent, StreamId,
    VarInt, WriteError,
};
use squall_h3::ErrorCode;
use squall_h3::server::{Command, Connection as H3, OutStream, ServerConfig as H3Config, Uni};

use crate::endpoint::Outgoing;

/// How many unidirectional streams a client may have open: its control stream, its two QPACK
/// streams, and a few more for the reserved ("grease") types clients send to keep servers
/// honest (RFC 9114 §6.2.3), which are read and dropped.
pub const CLIENT_UNI_STREAMS: u32 = 8;

/// A batch of datagrams at least this large is handed over to the send rather than copied
/// out of the scratch buffer (below it, a copy is cheaper than a buffer of the full room).
const HAND_OVER_BYTES_MIN: usize = 16 * 1024;

/// What driving a connection brought to light.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// The handshake finished, or the connection ended before it did (tell the endpoint).
    pub handshake_over: bool,
    /// Bytes moved from QUIC into the HTTP/3 connection: it may have events.
    pub delivered: bool,
}

/// How a connection ended, for logs and metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The client closed it, or it went idle.
    Closed(String),
    /// A protocol error of the client's: we closed it with this HTTP/3 or QUIC code.
    Error { code: u64, reason: &'static str },
}

/// One QUIC connection and its HTTP/3 connection (see the module docs).
pub struct Conn {
    quic: quinn_proto::Connection,
    h3: H3,
    /// Our control, QPACK encoder and QPACK decoder streams, once opened.
    uni: Option<[StreamId; 3]>,
    /// The ones opened so far, until all three are.
    opening: Vec<StreamId>,
    /// The handshake has been reported over (see [`Progress::handshake_over`]).
    handshake_reported: bool,
    /// The handshake's end, not yet taken by [`Conn::take_handshake_over`].
    handshake_news: bool,
    ended: Option<Ended>,
    /// Bytes read from each request stream that the application has not released yet (its
    /// body moved on to an origin, or dropped): at most `read_limit` are read ahead of it, so
    /// that QUIC's flow control, not Squall's memory, holds back a client that uploads faster
    /// than its origin takes (HTTP/2's window does the same).
    unreleased: HashMap<StreamId, u64>,
    read_limit: u64,
    /// Request streams that have bytes QUIC holds, left unread for want of room.
    waiting: HashSet<StreamId>,
    /// Of those, the ones whose room came back: read at the next drive.
    woken: Vec<StreamId>,
}

impl Conn {
    pub(crate) fn new(
        quic: quinn_proto::Connection,
        config: &H3Config,
        read_limit: u64,
        now: Instant,
    ) -> Conn {
        Conn {
            quic,
            h3: H3::new(config.clone(), now),
            uni: None,
            opening: Vec::new(),
            handshake_reported: false,
            handshake_news: false,
            ended: None,
            unreleased: HashMap::new(),
            read_limit,
            waiting: HashSet::new(),
            woken: Vec::new(),
        }
    }

    /// The HTTP/3 connection: its request events, and where responses are written.
    pub fn h3(&mut self) -> &mut H3 {
        &mut self.h3
    }

    /// The application is done with `n` body bytes of request stream `stream` (they went on
    /// to an origin, or were dropped): that much more may be read from QUIC, which then gives
    /// the client its flow-control credit back.
    pub fn release(&mut self, stream: u64, n: usize) {
        let id = quic_stream(stream);
        let Some(unreleased) = self.unreleased.get_mut(&id) else {
            return;
        };
        *unreleased = unreleased.saturating_sub(n as u64);
        if *unreleased < self.read_limit && self.waiting.remove(&id) {
            self.woken.push(id);
        }
    }

    /// The HTTP/3 connection, to look at.
    pub fn h3_ref(&self) -> &H3 {
        &self.h3
    }

    /// A packet (or another event) from the endpoint.
    pub fn handle(&mut self, event: ConnectionEvent) {
        self.quic.handle_event(event);
    }

    /// The next time [`Conn::timeout`] must run (loss detection, idle, ACK delay).
    pub fn deadline(&mut self) -> Option<Instant> {
        self.quic.poll_timeout()
    }

    /// Runs QUIC's timers that are due at `now`.
    pub fn timeout(&mut self, now: Instant) {
        self.quic.handle_timeout(now);
    }

    /// An event for the endpoint (connection IDs, the connection's end), until none is left.
    pub fn endpoint_event(&mut self) -> Option<EndpointEvent> {
        self.quic.poll_endpoint_events()
    }

    /// True once the connection is over and every packet about it is done with: its slot
    /// may go.
    pub fn is_drained(&self) -> bool {
        self.quic.is_drained()
    }

    /// True once the connection is closing or closed.
    pub fn is_closed(&self) -> bool {
        self.quic.is_closed()
    }

    /// How the connection ended, once it did.
    pub fn ended(&self) -> Option<&Ended> {
        self.ended.as_ref()
    }

    /// The client's address (it may change: QUIC connections migrate).
    pub fn remote(&self) -> std::net::SocketAddr {
        self.quic.remote_address()
    }

    /// True when 0-RTT data was accepted on this connection (a resumed client's early
    /// requests, which an attacker could replay: see RFC 8470). On a server, quinn-proto's
    /// `accepted_0rtt` says nothing (it is the client's view of the server's answer); TLS
    /// gave 0-RTT keys exactly when it accepted the client's early data.
    pub fn accepted_0rtt(&self) -> bool {
        self.quic.has_0rtt()
    }

    /// True while the handshake is in progress: requests received now came in 0-RTT.
    pub fn is_handshaking(&self) -> bool {
        self.quic.is_handshaking()
    }

    /// QUIC's counts (packets lost, congestion events, bytes) for metrics.
    pub fn stats(&self) -> quinn_proto::ConnectionStats {
        self.quic.stats()
    }

    /// Closes the connection now with an HTTP/3 `code` (H3_NO_ERROR for a graceful end after
    /// GOAWAY).
    pub fn close(&mut self, now: Instant, code: ErrorCode, reason: &'static str) {
        self.quic
            .close(now, var(code.into()), Bytes::from_static(reason.as_bytes()));
    }

    /// True once, when the handshake finished or the connection ended during it: the endpoint
    /// that accepted it is told ([`crate::Endpoint::handshake_over`]).
    pub fn take_handshake_over(&mut self) -> bool {
        std::mem::take(&mut self.handshake_news)
    }

    /// Moves bytes both ways between QUIC and HTTP/3 and acts on what either asks for: reads
    /// every readable stream into the HTTP/3 connection, writes its output into the QUIC
    /// streams, carries out its commands (resets, STOP_SENDING, closing).
    pub fn drive(&mut self, now: Instant) -> Progress {
        let mut progress = Progress::default();
        if self.uni.is_none() {
            self.open_uni_streams(now);
        }
        for id in std::mem::take(&mut self.woken) {
            progress.delivered |= self.read(id, now);
        }
        while let Some(event) = self.quic.poll() {
            match event {
                Event::Connected | Event::HandshakeDataReady => {}
                Event::ConnectionLost { reason } => {
                    if self.ended.is_none() {
                        self.ended = Some(Ended::Closed(lost(&reason)));
                    }
                }
                Event::Stream(StreamEvent::Opened { dir }) => {
                    progress.delivered |= self.accept_streams(dir, now);
                }
                Event::Stream(StreamEvent::Readable { id }) => {
                    progress.delivered |= self.read(id, now);
                }
                Event::Stream(StreamEvent::Stopped { id, error_code }) => {
                    let code = error_code.into_inner();
                    if let Err(e) = self.h3.stop_sending(id.into(), code, now) {
                        self.fail(now, e.code, e.reason);
                    }
                }
                Event::Stream(
                    StreamEvent::Writable { .. }
                    | StreamEvent::Finished { .. }
                    | StreamEvent::Available { .. },
                ) => {}
                Event::DatagramReceived | Event::DatagramsUnblocked => {}
            }
        }
        if !self.handshake_reported && (!self.quic.is_handshaking() || self.quic.is_closed()) {
            self.handshake_reported = true;
            self.handshake_news = true;
            progress.handshake_over = true;
        }
        self.commands(now);
        self.write();
        progress
    }

    /// The next datagram (or GSO batch of at most `max_datagrams`) to send, if any. `buf` is
    /// scratch space the caller keeps for every connection (a GSO batch is tens of KiB: one
    /// per connection would stay allocated while it idles).
    pub fn transmit(
        &mut self,
        now: Instant,
        max_datagrams: usize,
        buf: &mut Vec<u8>,
    ) -> Option<Outgoing> {
        buf.clear();
        let transmit = self.quic.poll_transmit(now, max_datagrams, buf)?;
        // A large batch leaves in the scratch buffer itself (the caller gets a new one of the
        // same room): one allocation either way, and no copy of tens of KiB.
        let bytes = match transmit.size >= HAND_OVER_BYTES_MIN {
            true => {
                let room = buf.capacity();
                let mut sent = std::mem::replace(buf, Vec::with_capacity(room));
                sent.truncate(transmit.size);
                Bytes::from(sent)
            }
            false => Bytes::copy_from_slice(&buf[..transmit.size]),
        };
        Some(Outgoing {
            to: transmit.destination,
            from: transmit.src_ip,
            bytes,
            segment: transmit.segment_size,
        })
    }

    /// Opens our three unidirectional streams (control, QPACK encoder, QPACK decoder) as soon
    /// as QUIC lets us (RFC 9114 §6.2.1: the control stream is opened at once): once the
    /// client's transport parameters allow them, which may be after its first flight.
    fn open_uni_streams(&mut self, now: Instant) {
        while self.opening.len() < 3 {
            match self.quic.streams().open(Dir::Uni) {
                Some(id) => self.opening.push(id),
                None => break,
            }
        }
        if let [control, encoder, decoder] = self.opening[..] {
            self.uni = Some([control, encoder, decoder]);
        } else if !self.quic.is_handshaking() && !self.quic.is_closed() {
            // RFC 9114 §6.2: a client must allow the server three unidirectional streams.
            let reason = "client allows too few server streams";
            self.fail(now, ErrorCode::StreamCreationError, reason);
        }
    }

    fn accept_streams(&mut self, dir: Dir, now: Instant) -> bool {
        let mut delivered = false;
        while let Some(id) = self.quic.streams().accept(dir) {
            delivered |= self.read(id, now);
        }
        delivered
    }

    /// Reads what stream `id` has into the HTTP/3 connection; true when something was read.
    fn read(&mut self, id: StreamId, now: Instant) -> bool {
        // A request stream reads at most `read_limit` ahead of what the application released.
        let request = id.dir() == Dir::Bi;
        let mut room = match request {
            true => self.read_limit.saturating_sub(self.unreleased_of(id)),
            false => u64::MAX,
        };
        if room == 0 {
            self.waiting.insert(id);
            return false;
        }
        let mut stream = self.quic.recv_stream(id);
        let Ok(mut chunks) = stream.read(true) else {
            return false;
        };
        // Everything the stream has now (at most its receive window): QUIC reports a stream
        // readable only when more arrives, so what is left unread would wait for that. The
        // last chunk is held back one step, so that a FIN read with it goes with it (a
        // request whose HEADERS and end came together is whole at its head).
        let mut held: Option<Bytes> = None;
        let mut taken = 0u64;
        let outcome = loop {
            if room == 0 {
                // More may be waiting in QUIC: read once the application releases some.
                self.waiting.insert(id);
                break Ok(false);
            }
            let next = match chunks.next(usize::try_from(room).unwrap_or(usize::MAX)) {
                Ok(Some(chunk)) => chunk.bytes,
                Ok(None) => break Ok(true),
                Err(ReadError::Blocked) => break Ok(false),
                Err(ReadError::Reset(code)) => {
                    held = None;
                    break (self.h3)
                        .stream_reset(id.into(), code.into_inner(), now)
                        .map(|()| false);
                }
            };
            if request {
                room = room.saturating_sub(next.len() as u64);
                taken += next.len() as u64;
            }
            if let Some(data) = held.replace(next)
                && let Err(e) = self.h3.recv(id.into(), data, false, now)
            {
                break Err(e);
            }
        };
        match outcome {
            // The stream is over: nothing more to hold back.
            Ok(true) | Err(_) => {
                self.unreleased.remove(&id);
                self.waiting.remove(&id);
            }
            Ok(false) if taken > 0 => *self.unreleased.entry(id).or_default() += taken,
            Ok(false) => {}
        }
        // The window the bytes read took is given back to the client.
        let _ = chunks.finalize();
        let delivered = held.is_some() || outcome.is_err() || matches!(outcome, Ok(true));
        let outcome = match (outcome, held) {
            (Ok(fin), Some(data)) => self.h3.recv(id.into(), data, fin, now),
            (Ok(true), None) => self.h3.recv(id.into(), Bytes::new(), true, now),
            (Ok(false), None) => Ok(()),
            (Err(e), _) => Err(e),
        };
        if let Err(e) = outcome {
            self.fail(now, e.code, e.reason);
        }
        delivered
    }

    /// Carries out what the HTTP/3 connection asked for.
    fn commands(&mut self, now: Instant) {
        while let Some(command) = self.h3.poll_command() {
            match command {
                Command::ResetStream { stream_id, code } => {
                    let _ = self
                        .quic
                        .send_stream(quic_stream(stream_id))
                        .reset(var(code.into()));
                }
                Command::StopSending { stream_id, code } => {
                    let _ = self
                        .quic
                        .recv_stream(quic_stream(stream_id))
                        .stop(var(code.into()));
                }
                Command::Close { code, reason } => self.fail(now, code, reason),
            }
        }
    }

    /// Writes the HTTP/3 connection's queued output into the QUIC streams, as much as each
    /// accepts (by reference: QUIC keeps the `Bytes` until they are acknowledged); the rest
    /// stays queued until QUIC reports the stream writable.
    fn write(&mut self) {
        let Some(uni) = self.uni else {
            return;
        };
        let quic = &mut self.quic;
        self.h3.poll_output(|out| {
            let id = match out.stream {
                OutStream::Uni(Uni::Control) => uni[0],
                OutStream::Uni(Uni::QpackEncoder) => uni[1],
                OutStream::Uni(Uni::QpackDecoder) => uni[2],
                OutStream::Request(id) => quic_stream(id),
            };
            let mut send = quic.send_stream(id);
            let mut chunk = [out.data.clone()];
            let written = match send.write_chunks(&mut chunk) {
                Ok(written) => written.bytes,
                // Blocked by flow control; or stopped by the client, which the connection
                // hears of through `Stopped` and resets.
                Err(WriteError::Blocked | WriteError::Stopped(_) | WriteError::ClosedStream) => 0,
            };
            if out.fin && written == out.data.len() {
                let _ = send.finish();
            }
            written
        });
    }

    /// Ends the connection for a protocol error (ours to report: the client's).
    fn unreleased_of(&self, id: StreamId) -> u64 {
        self.unreleased.get(&id).copied().unwrap_or(0)
    }

    fn fail(&mut self, now: Instant, code: ErrorCode, reason: &'static str) {
        if self.ended.is_none() {
            self.ended = Some(Ended::Error {
                code: code.into(),
                reason,
            });
        }
        self.close(now, code, reason);
    }
}

fn var(code: u64) -> VarInt {
    VarInt::from_u64(code).unwrap_or(VarInt::MAX)
}

fn quic_stream(id: u64) -> StreamId {
    StreamId::from(VarInt::from_u64(id).unwrap_or(VarInt::MAX))
}

fn lost(reason: &ConnectionError) -> String {
    reason.to_string()
}
