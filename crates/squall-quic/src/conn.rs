//! One QUIC connection with its HTTP/3 connection on top.
//!
//! quinn-proto's [`quinn_proto::Connection`] owns packets, loss recovery, congestion control,
//! encryption and each stream's flow control; `squall-h3`'s server connection owns what the
//! streams mean (requests, QPACK, SETTINGS, GOAWAY). A [`Conn`] moves bytes between the two:
//! every readable stream's bytes into the HTTP/3 connection ([`Conn::drive`]), and the HTTP/3
//! connection's queued output into the QUIC streams, as much as each accepts (the rest waits
//! for QUIC's `Writable`). It runs no clock and does no I/O: the caller hands it packets and
//! `now`, and sends what [`Conn::transmit`] returns.

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

/// What driving a connection brought to light.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// The handshake finished, or the connection ended before it did (tell the endpoint).
    pub handshake_over: bool,
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
    /// Reused for GSO batches.
    buf: Vec<u8>,
}

impl Conn {
    pub(crate) fn new(quic: quinn_proto::Connection, config: &H3Config, now: Instant) -> Conn {
        Conn {
            quic,
            h3: H3::new(config.clone(), now),
            uni: None,
            opening: Vec::new(),
            handshake_reported: false,
            handshake_news: false,
            ended: None,
            buf: Vec::new(),
        }
    }

    /// The HTTP/3 connection: its request events, and where responses are written.
    pub fn h3(&mut self) -> &mut H3 {
        &mut self.h3
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
    /// requests, which an attacker could replay: see RFC 8470).
    pub fn accepted_0rtt(&self) -> bool {
        self.quic.accepted_0rtt()
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
        while let Some(event) = self.quic.poll() {
            match event {
                Event::Connected | Event::HandshakeDataReady => {}
                Event::ConnectionLost { reason } => {
                    if self.ended.is_none() {
                        self.ended = Some(Ended::Closed(lost(&reason)));
                    }
                }
                Event::Stream(StreamEvent::Opened { dir }) => self.accept_streams(dir, now),
                Event::Stream(StreamEvent::Readable { id }) => self.read(id, now),
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

    /// The next datagram (or GSO batch of at most `max_datagrams`) to send, if any.
    pub fn transmit(&mut self, now: Instant, max_datagrams: usize) -> Option<Outgoing> {
        self.buf.clear();
        let transmit = self.quic.poll_transmit(now, max_datagrams, &mut self.buf)?;
        Some(Outgoing {
            to: transmit.destination,
            from: transmit.src_ip,
            bytes: Bytes::copy_from_slice(&self.buf[..transmit.size]),
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

    fn accept_streams(&mut self, dir: Dir, now: Instant) {
        while let Some(id) = self.quic.streams().accept(dir) {
            self.read(id, now);
        }
    }

    /// Reads what stream `id` has into the HTTP/3 connection.
    fn read(&mut self, id: StreamId, now: Instant) {
        let mut stream = self.quic.recv_stream(id);
        let Ok(mut chunks) = stream.read(true) else {
            return;
        };
        // Everything the stream has now (at most its receive window): QUIC reports a stream
        // readable only when more arrives, so what is left unread would wait for that. The
        // last chunk is held back one step, so that a FIN read with it goes with it (a
        // request whose HEADERS and end came together is whole at its head).
        let mut held: Option<Bytes> = None;
        let outcome = loop {
            let next = match chunks.next(usize::MAX) {
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
            if let Some(data) = held.replace(next)
                && let Err(e) = self.h3.recv(id.into(), data, false, now)
            {
                break Err(e);
            }
        };
        // The window the bytes read took is given back to the client.
        let _ = chunks.finalize();
        let outcome = match (outcome, held) {
            (Ok(fin), Some(data)) => self.h3.recv(id.into(), data, fin, now),
            (Ok(true), None) => self.h3.recv(id.into(), Bytes::new(), true, now),
            (Ok(false), None) => Ok(()),
            (Err(e), _) => Err(e),
        };
        if let Err(e) = outcome {
            self.fail(now, e.code, e.reason);
        }
    }

    /// Carries out what the HTTP/3 connection asked for.
    fn commands(&mut self, now: Instant) {
        while let Some(command) = self.h3.poll_command() {
            match command {
                Command::ResetStream { stream_id, code } => {
                    let _ = self
                        .quic
                        .send_stream(stream(stream_id))
                        .reset(var(code.into()));
                }
                Command::StopSending { stream_id, code } => {
                    let _ = self
                        .quic
                        .recv_stream(stream(stream_id))
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
                OutStream::Request(id) => stream(id),
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

fn stream(id: u64) -> StreamId {
    StreamId::from(VarInt::from_u64(id).unwrap_or(VarInt::MAX))
}

fn lost(reason: &ConnectionError) -> String {
    reason.to_string()
}
