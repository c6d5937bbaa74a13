//! One worker's QUIC endpoint on one listener: datagrams in, connections and answers out.
//!
//! quinn-proto's [`quinn_proto::Endpoint`] does the packet work (version negotiation,
//! Initial decryption, stateless resets, Retry tokens); this wrapper adds what a Squall worker
//! decides: its connection IDs ([`WorkerCids`]), packets that belong to another worker handed
//! back to the caller ([`Received::Misrouted`]), when to ask a new client for a Retry round
//! trip ([`Retry`]), and the TLS config new handshakes use (swapped on reload).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use quinn_proto::crypto::rustls::QuicServerConfig;
use quinn_proto::{
    ConnectionEvent, ConnectionHandle, DatagramEvent, EndpointConfig, EndpointEvent, IdleTimeout,
    ServerConfig, TransportConfig, VarInt,
};
use squall_tls::rustls;

use crate::cid::{CID_BYTES, WorkerCids, random};
use crate::conn::Conn;

/// When a new client is asked to prove its address with a Retry packet (RFC 9000 §8.1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// While more than this many handshakes are in progress on the endpoint.
    Load(u32),
    Always,
    Never,
}

/// What one endpoint is set up with.
#[derive(Clone, Debug)]
pub struct Settings {
    /// This worker's index, and how many workers share the listener's port.
    pub worker: u8,
    pub workers: u8,
    pub retry: Retry,
    /// Concurrent request streams a client may open (initial_max_streams_bidi).
    pub streams_max: u32,
    /// Receive window of one stream and of the connection, in bytes.
    pub stream_window: u64,
    pub connection_window: u64,
    /// A connection with no packet for this long is closed silently (max_idle_timeout).
    pub idle_timeout: Duration,
    /// Send several packets in one datagram buffer for the kernel to split (GSO).
    pub gso: bool,
    /// The HTTP/3 connection's settings.
    pub h3: squall_h3::server::ServerConfig,
}

/// Keys every worker's endpoint shares, so that a Retry token or a stateless reset made by
/// one worker is good at another (a client whose address changed may land elsewhere).
#[derive(Clone)]
pub struct SharedKeys {
    reset: Arc<aws_lc_rs::hmac::Key>,
    token: Arc<aws_lc_rs::hkdf::Prk>,
}

impl SharedKeys {
    /// Fresh random keys (once per process).
    pub fn new() -> SharedKeys {
        let mut secret = [0u8; 64];
        random(&mut secret);
        let reset = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, &secret[..32]);
        let salt = aws_lc_rs::hkdf::Salt::new(aws_lc_rs::hkdf::HKDF_SHA256, &[]);
        let token = salt.extract(&secret[32..]);
        SharedKeys {
            reset: Arc::new(reset),
            token: Arc::new(token),
        }
    }
}

impl Default for SharedKeys {
    fn default() -> Self {
        SharedKeys::new()
    }
}

impl std::fmt::Debug for SharedKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedKeys(..)")
    }
}

/// A datagram to send: `bytes` go to `to`, from `from` when the socket is bound to a wildcard
/// address; with `segment` set, `bytes` are several datagrams of that size (the last may be
/// shorter) for the kernel to split (GSO).
#[derive(Debug)]
pub struct Outgoing {
    pub to: SocketAddr,
    pub from: Option<IpAddr>,
    pub bytes: Bytes,
    pub segment: Option<usize>,
}

/// What a received datagram came to.
pub enum Received {
    /// Nothing to do: junk, a packet too short to answer, or one the endpoint buffered.
    Dropped,
    /// A packet for one of this endpoint's connections: hand it to that connection.
    Conn(ConnectionHandle, ConnectionEvent),
    /// A new connection, accepted; its handshake is under way.
    New(ConnectionHandle, Box<Conn>),
    /// The endpoint answers by itself (version negotiation, Retry, stateless reset, refusal).
    Answer(Outgoing),
    /// A short-header packet whose connection ID names another worker (its index, then the
    /// packet, untouched): deliver it there.
    Misrouted(u8, BytesMut),
}

/// What the endpoint counted since it was last asked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    pub accepted: u64,
    pub retries: u64,
    pub refused: u64,
    pub misrouted: u64,
}

/// One worker's endpoint on one listener (see the module docs).
pub struct Endpoint {
    inner: quinn_proto::Endpoint,
    server: Arc<ServerConfig>,
    settings: Settings,
    /// Handshakes accepted and not yet reported over (see [`Endpoint::handshake_over`]).
    handshakes: u32,
    stats: EndpointStats,
    buf: Vec<u8>,
}

/// A TLS config QUIC cannot use (no TLS 1.3 AES-128-GCM suite for Initial packets).
#[derive(Debug, thiserror::Error)]
#[error("the TLS config has no cipher suite for QUIC Initial packets")]
pub struct BadTls;

impl Endpoint {
    /// An endpoint answering with `tls` (from `squall_tls::TlsStore::quic_config`).
    pub fn new(
        settings: Settings,
        tls: Arc<rustls::ServerConfig>,
        keys: &SharedKeys,
    ) -> Result<Endpoint, BadTls> {
        let cids = WorkerCids::new(settings.worker, settings.workers);
        let mut config = EndpointConfig::new(keys.reset.clone());
        config.cid_generator(move || Box::new(cids));
        let server = server_config(&settings, tls, keys)?;
        let inner = quinn_proto::Endpoint::new(Arc::new(config), Some(server.clone()), true, None);
        Ok(Endpoint {
            inner,
            server,
            settings,
            handshakes: 0,
            stats: EndpointStats::default(),
            buf: Vec::new(),
        })
    }

    /// New handshakes use `tls` (a reload's certificates); connections keep theirs.
    pub fn set_tls(
        &mut self,
        tls: Arc<rustls::ServerConfig>,
        keys: &SharedKeys,
    ) -> Result<(), BadTls> {
        let server = server_config(&self.settings, tls, keys)?;
        self.inner.set_server_config(Some(server.clone()));
        self.server = server;
        Ok(())
    }

    /// Takes no new connection from now on (a graceful stop): a new client's packets are
    /// dropped; connections in progress go on.
    pub fn stop_accepting(&mut self) {
        self.inner.set_server_config(None);
    }

    /// Handles one received datagram (one QUIC datagram: a GRO buffer is split by the caller).
    pub fn receive(
        &mut self,
        now: Instant,
        from: SocketAddr,
        to: Option<IpAddr>,
        data: BytesMut,
    ) -> Received {
        if let Some(owner) = self.misrouted(&data) {
            self.stats.misrouted += 1;
            return Received::Misrouted(owner, data);
        }
        self.buf.clear();
        let event = self.inner.handle(now, from, to, None, data, &mut self.buf);
        match event {
            None => Received::Dropped,
            Some(DatagramEvent::ConnectionEvent(handle, event)) => Received::Conn(handle, event),
            Some(DatagramEvent::Response(transmit)) => Received::Answer(self.outgoing(&transmit)),
            Some(DatagramEvent::NewConnection(incoming)) => self.incoming(now, incoming),
        }
    }

    /// A new client's first packet: accepted, asked to retry, or refused.
    fn incoming(&mut self, now: Instant, incoming: quinn_proto::Incoming) -> Received {
        let retry = match self.settings.retry {
            Retry::Always => true,
            Retry::Never => false,
            Retry::Load(max) => self.handshakes >= max,
        };
        if retry && !incoming.remote_address_validated() && incoming.may_retry() {
            self.buf.clear();
            return match self.inner.retry(incoming, &mut self.buf) {
                Ok(transmit) => {
                    self.stats.retries += 1;
                    Received::Answer(self.outgoing(&transmit))
                }
                Err(e) => {
                    self.inner.ignore(e.into_incoming());
                    Received::Dropped
                }
            };
        }
        self.buf.clear();
        match self.inner.accept(incoming, now, &mut self.buf, None) {
            Ok((handle, conn)) => {
                let (h3, window) = (&self.settings.h3, self.settings.stream_window);
                self.stats.accepted += 1;
                self.handshakes += 1;
                Received::New(handle, Box::new(Conn::new(conn, h3, window, now)))
            }
            Err(e) => {
                self.stats.refused += 1;
                match e.response {
                    Some(transmit) => Received::Answer(self.outgoing(&transmit)),
                    None => Received::Dropped,
                }
            }
        }
    }

    /// A connection's event for the endpoint (new IDs, retirements, its end); the answer,
    /// if any, goes back to that connection.
    pub fn connection_event(
        &mut self,
        handle: ConnectionHandle,
        event: EndpointEvent,
    ) -> Option<ConnectionEvent> {
        self.inner.handle_event(handle, event)
    }

    /// A connection accepted here finished its handshake, or ended during it: one fewer
    /// counts towards `Retry::Load`.
    pub fn handshake_over(&mut self) {
        self.handshakes = self.handshakes.saturating_sub(1);
    }

    /// Handshakes in progress.
    pub fn handshakes(&self) -> u32 {
        self.handshakes
    }

    /// Connections the endpoint knows (until each one is drained).
    pub fn open_connections(&self) -> usize {
        self.inner.open_connections()
    }

    /// Counts since the last call.
    pub fn take_stats(&mut self) -> EndpointStats {
        std::mem::take(&mut self.stats)
    }

    /// The owner of a short-header packet whose connection ID is not this worker's.
    fn misrouted(&self, data: &[u8]) -> Option<u8> {
        let workers = self.settings.workers.max(1);
        // Long headers (Initial, 0-RTT, Handshake) go to the worker that the first packet of
        // their connection reached, however their IDs look; short headers carry our ID.
        let first = *data.first()?;
        if first & 0x80 != 0 || workers == 1 || data.len() < 1 + CID_BYTES {
            return None;
        }
        let owner = WorkerCids::owner(&data[1..1 + CID_BYTES], workers)?;
        (owner != self.settings.worker).then_some(owner)
    }

    fn outgoing(&self, transmit: &quinn_proto::Transmit) -> Outgoing {
        Outgoing {
            to: transmit.destination,
            from: transmit.src_ip,
            bytes: Bytes::copy_from_slice(&self.buf[..transmit.size]),
            segment: transmit.segment_size,
        }
    }
}

/// quinn-proto's server config from Squall's settings and TLS config.
fn server_config(
    settings: &Settings,
    tls: Arc<rustls::ServerConfig>,
    keys: &SharedKeys,
) -> Result<Arc<ServerConfig>, BadTls> {
    let crypto = QuicServerConfig::try_from(tls).map_err(|_| BadTls)?;
    let mut server = ServerConfig::new(Arc::new(crypto), keys.token.clone());
    let mut transport = TransportConfig::default();
    let varint = |n: u64| VarInt::from_u64(n).unwrap_or(VarInt::MAX);
    transport
        .max_concurrent_bidi_streams(VarInt::from_u32(settings.streams_max))
        // The client's control stream and its two QPACK streams, and room for grease.
        .max_concurrent_uni_streams(VarInt::from_u32(crate::conn::CLIENT_UNI_STREAMS))
        .stream_receive_window(varint(settings.stream_window))
        .receive_window(varint(settings.connection_window))
        .max_idle_timeout(IdleTimeout::try_from(settings.idle_timeout).ok())
        .enable_segmentation_offload(settings.gso)
        // No unreliable datagrams (RFC 9297 is not offered).
        .datagram_receive_buffer_size(None);
    server.transport_config(Arc::new(transport));
    Ok(Arc::new(server))
}
