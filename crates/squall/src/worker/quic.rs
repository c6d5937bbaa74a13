//! The `Quic` part: a worker's UDP sockets on its HTTP/3 listeners, one QUIC endpoint on each
//! (`squall_quic::Endpoint`), and the datagrams both ways.
//!
//! A datagram is received on the ring (multishot, into the UDP buffer group; several at once
//! with GRO), cut into its QUIC datagrams and handed to the endpoint, which says what each
//! is. What concerns another part comes back to the loop as an [`Arrival`]: a new connection
//! (the loop gives it a client slot, where it is `Proto::H3` behind the downstream like any
//! other protocol), a packet for a connection (which the downstream feeds to it), or a packet
//! for another worker's connection (which the loop hands over). The endpoint's own answers
//! (version negotiation, Retry, stateless reset) leave from here at once.
//!
//! A connection's datagrams leave when the loop flushes its client slot ([`Quic::flush`]):
//! QUIC builds them (several per send with GSO) and this part sends them on the listener's
//! socket. When the client slot closes, the QUIC connection is handed back here
//! ([`Quic::retire`]) to finish QUIC's close (its CONNECTION_CLOSE repeated, late packets
//! absorbed) and to be forgotten by its endpoint once drained, so the slot is free at once.
//!
//! Packets reach their connection's worker because the connection IDs name it and the
//! listener's reuseport group runs `squall_uring::quic_steering_program`. Without the program
//! (refused by the kernel, or `[quic] steering = false`) the kernel spreads packets by
//! address, and a packet whose connection ID names another worker (its client's address
//! changed) is kept here as [`Handed`] and sent to its owner once the received buffer is done
//! ([`Quic::hand_over`]: one message on the owner's control channel per batch), where it
//! arrives as if received there ([`Quic::handed`]).

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Instant;

use bytes::BytesMut;
use squall_quic::{ConnectionEvent, ConnectionHandle, Endpoint, Outgoing, Received};
use squall_uring::{Datagram, OpId};
use tracing::{debug, warn};

use super::Io;
use super::conn::Conn;
use super::downstream::proto::{H3, Proto};
use super::token::Token;

/// Datagrams one GSO send may carry (what quinn-proto batches at most per transmit). A 64 KiB
/// answer leaves in one or two sends instead of five: 21% less server CPU per 64 KiB answer
/// than at 10 (55 -> 43 us on loopback, docs/PERFORMANCE.md).
const GSO_DATAGRAMS_MAX: usize = 40;

/// The largest datagram QUIC sends here: quinn-proto's MTU discovery stops at 1452 bytes
/// (its default upper bound, which squall-quic keeps).
const DATAGRAM_BYTES_MAX: usize = 1452;

/// Messages a worker may have waiting on its control channel beyond which handed packets are
/// dropped instead of queued: the channel has no bound of its own, and an owner that is slow
/// to take them (or junk whose connection IDs name it) must not grow it without end. A full
/// socket buffer drops packets the same way; QUIC recovers.
const HANDED_WAITING_MAX: usize = 1024;

// A GSO send is one UDP datagram to the kernel until it segments it: at most 65,507 bytes of
// payload over IPv4, or the kernel refuses it (and GSO is turned off on the listener).
const _: () = assert!(GSO_DATAGRAMS_MAX * DATAGRAM_BYTES_MAX <= 65_507);

struct Listener {
    /// The `[[listen]]` address this socket serves, as configured.
    address: SocketAddr,
    fd: Option<OwnedFd>,
    endpoint: Endpoint,
    recv: Option<OpId>,
    /// Send several datagrams per system call; off after the kernel refused a GSO send.
    gso: bool,
}

/// What a received datagram means for another part (see the module docs).
pub(super) enum Arrival {
    /// A new connection on listener `listener`, whose handshake has begun: its protocol
    /// state, for a client slot.
    New {
        listener: usize,
        handle: ConnectionHandle,
        proto: Proto,
        peer: SocketAddr,
    },
    /// A packet for a connection of listener `listener` (possibly one that arrived as `New`
    /// earlier in the same batch: its 0-RTT packets follow its Initial), found by
    /// [`Quic::client`] once the arrivals before it are handled.
    Packet {
        listener: usize,
        handle: ConnectionHandle,
        event: ConnectionEvent,
    },
}

/// A packet for a connection of another worker, handed to it through its control channel.
pub struct Handed {
    /// The listener it came in on, by configured address (each worker has a socket on it).
    address: SocketAddr,
    peer: SocketAddr,
    local: Option<IpAddr>,
    data: BytesMut,
}

/// What flushing an HTTP/3 connection found.
pub(super) struct Flushed {
    /// The connection is over (closed by the client, by QUIC's idle timeout, or for an
    /// error): its slot closes.
    pub closed: bool,
    /// Request bytes moved in meanwhile (a stream read on once its body was released): the
    /// connection has events to process.
    pub delivered: bool,
}

/// The worker's QUIC listeners and the connections they carry (see the module docs).
#[derive(Default)]
pub(super) struct Quic {
    listeners: Vec<Listener>,
    /// The client slot of each connection, by listener and handle.
    conns: HashMap<(usize, ConnectionHandle), Token>,
    /// Connections whose client slot closed, finishing QUIC's close.
    closing: HashMap<(usize, ConnectionHandle), Box<squall_quic::Conn>>,
    /// Where every connection builds its datagrams before they are copied out to be sent.
    scratch: Vec<u8>,
    /// Reused for the QUIC datagrams of one received buffer (several with GRO).
    pieces: Vec<BytesMut>,
    /// Packets for other workers' connections, by owner, until [`Quic::hand_over`].
    outbox: Vec<Vec<Handed>>,
}

impl Quic {
    /// Starts serving HTTP/3 on new UDP sockets (at start-up and from a reload): one endpoint
    /// on each, with this worker's connection IDs.
    pub(super) fn add(&mut self, io: &mut Io<'_>, sockets: Vec<(SocketAddr, OwnedFd)>) {
        let Some(quic) = &io.runtime.quic else {
            return;
        };
        for (address, fd) in sockets {
            let mut settings = quic.settings.clone();
            settings.worker = u8::try_from(io.worker).unwrap_or(u8::MAX);
            let endpoint = match Endpoint::new(settings, quic.tls.clone(), &quic.keys) {
                Ok(endpoint) => endpoint,
                Err(e) => {
                    warn!(worker = io.worker, %address, "h3: {e}");
                    continue;
                }
            };
            self.listeners.push(Listener {
                address,
                fd: Some(fd),
                endpoint,
                recv: None,
                gso: quic.settings.gso,
            });
            self.arm(io, self.listeners.len() - 1);
        }
    }

    /// New handshakes on every listener use the runtime's TLS config (a reload's
    /// certificates); connections keep theirs.
    pub(super) fn reloaded(&mut self, io: &Io<'_>) {
        let Some(quic) = &io.runtime.quic else {
            return;
        };
        for listener in &mut self.listeners {
            if let Err(e) = listener.endpoint.set_tls(quic.tls.clone(), &quic.keys) {
                warn!(worker = io.worker, address = %listener.address, "h3: {e}");
            }
        }
    }

    /// A graceful stop: new connections are no longer accepted (their packets are dropped,
    /// and their clients try again elsewhere); the connections in progress keep their
    /// sockets until they end.
    pub(super) fn stop_accepting(&mut self) {
        for listener in &mut self.listeners {
            listener.endpoint.stop_accepting();
        }
    }

    fn arm(&mut self, io: &mut Io<'_>, index: usize) {
        let listener = &mut self.listeners[index];
        let Some(fd) = &listener.fd else {
            return;
        };
        if listener.recv.is_none() {
            let token = Token::udp(index).raw();
            listener.recv = Some(io.ring.recvmsg_multi(fd.as_raw_fd(), token));
        }
    }

    /// A datagram receive completed on listener `token`: its QUIC datagrams go to the
    /// endpoint, and what they mean for other parts is appended to `arrivals`.
    pub(super) fn receive(
        &mut self,
        io: &mut Io<'_>,
        token: Token,
        result: io::Result<Datagram>,
        more: bool,
        arrivals: &mut Vec<Arrival>,
    ) {
        let index = token.index();
        let Some(listener) = self.listeners.get_mut(index) else {
            if let Ok(datagram) = result {
                io.ring.recycle_datagram(datagram);
            }
            return;
        };
        if !more {
            // Out of buffers, an empty datagram, or an error: the receive ended; armed again.
            listener.recv = None;
        }
        match result {
            Ok(datagram) => {
                self.datagram(io, index, &datagram, arrivals);
                io.ring.recycle_datagram(datagram);
            }
            Err(e) if !more && e.raw_os_error() == Some(libc::ECANCELED) => return,
            Err(e) if e.raw_os_error() != Some(libc::ENOBUFS) => {
                debug!(worker = io.worker, "h3: receive: {e}");
            }
            Err(_) => {}
        }
        if !more {
            self.arm(io, index);
        }
        self.count(io, index);
    }

    /// One received buffer: each QUIC datagram in it (several with GRO) to the endpoint.
    fn datagram(
        &mut self,
        io: &mut Io<'_>,
        index: usize,
        datagram: &Datagram,
        arrivals: &mut Vec<Arrival>,
    ) {
        if datagram.truncated() || datagram.is_empty() {
            return;
        }
        let (peer, local) = (datagram.peer(), datagram.local());
        let payload = io.ring.datagram_bytes(datagram);
        // Copied out of the ring's buffer: QUIC decrypts in place and may keep a packet (an
        // Initial waiting for its handshake), while the buffer goes back to the kernel now.
        let mut pieces = std::mem::take(&mut self.pieces);
        pieces.extend(datagram.segments(payload).map(BytesMut::from));
        for piece in pieces.drain(..) {
            self.piece(io, index, (peer, local), piece, arrivals);
        }
        self.pieces = pieces;
    }

    /// Packets another worker received for this one's connections, as if received here.
    pub(super) fn handed(
        &mut self,
        io: &mut Io<'_>,
        packets: Vec<Handed>,
        arrivals: &mut Vec<Arrival>,
    ) {
        for packet in packets {
            let index = self
                .listeners
                .iter()
                .position(|l| l.address == packet.address);
            if let Some(index) = index {
                let from = (packet.peer, packet.local);
                self.piece(io, index, from, packet.data, arrivals);
            }
        }
        for index in 0..self.listeners.len() {
            self.count(io, index);
        }
    }

    /// Sends each other worker the packets received here for its connections, and wakes it.
    pub(super) fn hand_over(&mut self, peers: &[crate::cache::Peer]) {
        for (owner, packets) in self.outbox.iter_mut().enumerate() {
            if packets.is_empty() {
                continue;
            }
            let peer = peers.get(owner);
            let Some(peer) = peer.filter(|p| p.control.len() < HANDED_WAITING_MAX) else {
                debug!(
                    owner,
                    dropped = packets.len(),
                    "h3: packets for another worker dropped"
                );
                packets.clear();
                continue;
            };
            let message = super::Control::QuicPackets(std::mem::take(packets));
            if peer.control.send(message).is_ok() {
                peer.waker.wake();
            }
        }
    }

    /// One QUIC datagram from `from` (the peer, and the local address it was sent to) on
    /// listener `index`.
    fn piece(
        &mut self,
        io: &mut Io<'_>,
        index: usize,
        (peer, local): (SocketAddr, Option<IpAddr>),
        piece: BytesMut,
        arrivals: &mut Vec<Arrival>,
    ) {
        let received = self.listeners[index]
            .endpoint
            .receive(io.now, peer, local, piece);
        match received {
            Received::Dropped => {}
            Received::Misrouted(owner, data) => {
                let owner = usize::from(owner);
                if self.outbox.len() <= owner {
                    self.outbox.resize_with(owner + 1, Vec::new);
                }
                let address = self.listeners[index].address;
                self.outbox[owner].push(Handed {
                    address,
                    peer,
                    local,
                    data,
                });
            }
            Received::Conn(handle, event) => {
                if self.closing.contains_key(&(index, handle)) {
                    self.closing_event(io, index, handle, event);
                } else {
                    let listener = index;
                    arrivals.push(Arrival::Packet {
                        listener,
                        handle,
                        event,
                    });
                }
            }
            Received::New(handle, conn) => {
                io.runtime.metrics.worker(io.worker).quic_connections.inc();
                let h3 = H3::new(conn, index, handle);
                arrivals.push(Arrival::New {
                    listener: index,
                    handle,
                    proto: Proto::h3(h3),
                    peer,
                });
            }
            Received::Answer(outgoing) => self.send(io, index, outgoing),
        }
    }

    /// A new connection got client slot `client`.
    pub(super) fn opened(&mut self, listener: usize, handle: ConnectionHandle, client: Token) {
        self.conns.insert((listener, handle), client);
    }

    /// The client slot of connection `handle` of listener `listener`.
    pub(super) fn client(&self, listener: usize, handle: ConnectionHandle) -> Option<Token> {
        self.conns.get(&(listener, handle)).copied()
    }

    /// The address listener `listener` serves, as configured.
    pub(super) fn address(&self, listener: usize) -> Option<SocketAddr> {
        self.listeners.get(listener).map(|l| l.address)
    }

    /// Sends what client connection `conn` has to send if QUIC carries it (`None`: a TCP
    /// one): its HTTP/3 output moved into QUIC, then QUIC's datagrams; tells its endpoint
    /// what it learned.
    pub(super) fn flush(&mut self, io: &mut Io<'_>, conn: &mut Conn) -> Option<Flushed> {
        let h3 = conn.proto.h3_mut()?;
        let progress = h3.quic.drive(io.now);
        self.transmit(io, h3.listener, h3.handle, &mut h3.quic);
        h3.due = h3.quic.deadline();
        Some(Flushed {
            closed: h3.quic.is_closed(),
            delivered: progress.delivered,
        })
    }

    /// Takes the QUIC connection of a client slot that closed, if QUIC carries it: it
    /// finishes QUIC's close here, and its endpoint forgets it once it is drained. True when
    /// it did (the slot, with no socket to wait for, may go at once).
    pub(super) fn retire(&mut self, io: &mut Io<'_>, proto: &mut Proto) -> bool {
        let Some(h3) = proto.take_h3() else {
            return false;
        };
        let H3 {
            mut quic,
            listener,
            handle,
            ..
        } = *h3;
        self.conns.remove(&(listener, handle));
        let counters = io.runtime.metrics.worker(io.worker);
        let path = quic.stats().path;
        counters.quic_lost_packets.add(path.lost_packets);
        counters.quic_congestion_events.add(path.congestion_events);
        if !quic.is_closed() {
            quic.close(io.now, squall_h3::ErrorCode::NoError, "");
        }
        quic.drive(io.now);
        self.transmit(io, listener, handle, &mut quic);
        if !quic.is_drained() {
            self.closing.insert((listener, handle), quic);
        }
        true
    }

    /// When the next closing connection's timer is due.
    pub(super) fn next_wake(&mut self) -> Option<Instant> {
        self.closing.values_mut().filter_map(|q| q.deadline()).min()
    }

    /// Runs the timers of closing connections that are due; forgets the drained.
    pub(super) fn expire(&mut self, io: &mut Io<'_>) {
        let now = io.now;
        let due: Vec<(usize, ConnectionHandle)> = (self.closing.iter_mut())
            .filter_map(|(&key, q)| q.deadline().filter(|at| *at <= now).map(|_| key))
            .collect();
        for (listener, handle) in due {
            let Some(mut quic) = self.closing.remove(&(listener, handle)) else {
                continue;
            };
            quic.timeout(io.now);
            quic.drive(io.now);
            self.transmit(io, listener, handle, &mut quic);
            if !quic.is_drained() {
                self.closing.insert((listener, handle), quic);
            }
        }
    }

    /// A packet for a connection whose slot closed: it is still finishing its close.
    fn closing_event(
        &mut self,
        io: &mut Io<'_>,
        listener: usize,
        handle: ConnectionHandle,
        event: ConnectionEvent,
    ) {
        let Some(mut quic) = self.closing.remove(&(listener, handle)) else {
            return;
        };
        quic.handle(event);
        quic.drive(io.now);
        self.transmit(io, listener, handle, &mut quic);
        if !quic.is_drained() {
            self.closing.insert((listener, handle), quic);
        }
    }

    /// Tells the endpoint what connection `quic` learned, and sends its datagrams.
    fn transmit(
        &mut self,
        io: &mut Io<'_>,
        listener: usize,
        handle: ConnectionHandle,
        quic: &mut squall_quic::Conn,
    ) {
        let Some(l) = self.listeners.get_mut(listener) else {
            return;
        };
        if quic.take_handshake_over() {
            l.endpoint.handshake_over();
            let counters = io.runtime.metrics.worker(io.worker);
            if !quic.is_closed() {
                counters.quic_handshakes.inc();
            }
            if quic.accepted_0rtt() {
                counters.quic_early_accepted.inc();
            }
        }
        while let Some(event) = quic.endpoint_event() {
            if let Some(back) = l.endpoint.connection_event(handle, event) {
                quic.handle(back);
            }
        }
        let batch = if l.gso { GSO_DATAGRAMS_MAX } else { 1 };
        let mut scratch = std::mem::take(&mut self.scratch);
        while let Some(outgoing) = quic.transmit(io.now, batch, &mut scratch) {
            self.send(io, listener, outgoing);
        }
        self.scratch = scratch;
    }

    /// Sends one datagram (or GSO batch) on listener `index`'s socket.
    fn send(&mut self, io: &mut Io<'_>, index: usize, outgoing: Outgoing) {
        let listener = &self.listeners[index];
        let Some(fd) = &listener.fd else {
            return;
        };
        let Outgoing {
            to,
            from,
            bytes,
            segment,
        } = outgoing;
        let segment = segment.and_then(|s| u16::try_from(s).ok());
        let from = from.filter(|ip| same_family(*ip, to));
        let token = Token::udp(index).raw();
        io.ring
            .send_datagrams(fd.as_raw_fd(), to, from, bytes, segment, token);
    }

    /// A send on listener `token` completed: a kernel that refuses GSO turns it off there.
    pub(super) fn on_send(&mut self, io: &Io<'_>, token: Token, result: io::Result<usize>) {
        let Err(e) = result else {
            return;
        };
        let Some(listener) = self.listeners.get_mut(token.index()) else {
            return;
        };
        if listener.gso && squall_uring::is_gso_error(&e) {
            warn!(worker = io.worker, address = %listener.address, "h3: GSO refused ({e}): off");
            listener.gso = false;
        } else {
            debug!(worker = io.worker, "h3: send: {e}");
        }
    }

    /// Adds the endpoint's counts to the worker's counters.
    fn count(&mut self, io: &Io<'_>, index: usize) {
        let stats = self.listeners[index].endpoint.take_stats();
        let counters = io.runtime.metrics.worker(io.worker);
        counters.quic_retries.add(stats.retries);
        counters.quic_refused.add(stats.refused);
        counters.quic_misrouted.add(stats.misrouted);
    }
}

fn same_family(ip: IpAddr, to: SocketAddr) -> bool {
    ip.is_ipv4() == to.is_ipv4()
}
