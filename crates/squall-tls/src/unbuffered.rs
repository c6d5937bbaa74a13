//! The engine on `rustls::unbuffered::UnbufferedServerConnection`.
//!
//! rustls keeps no ciphertext buffer here: we own `incoming`, rustls deframes and decrypts
//! records in place inside it and tells us how many bytes to discard from its front. Records
//! to send go into the caller's `out` as rustls produces them, with no send queue between.
//! (rustls 0.23 still copies each decrypted record into its own plaintext queue, and
//! encrypts into a temporary it then copies to `out`; its `ReadTraffic` has a TODO to
//! decrypt in place, which this engine would get without changes.)
//!
//! The API is a state machine: each `process_tls_records` call returns one state to handle
//! (plaintext to read, a handshake record to encode, data to transmit, blocked for more
//! input, or ready for application data) and the caller loops until it is blocked. [`pump`]
//! is that loop; what it does on `WriteTraffic` depends on why it was called ([`Want`]).
//!
//! Memory: after every pump `incoming` holds at most one partial record, or one partial
//! handshake message (rustls rejects a handshake message over 64 KiB as soon as its header
//! arrives), so [`LEFTOVER_BYTES_MAX`] bounds it; input is appended [`FEED_BYTES`] at a time.
//!
//! [`pump`]: Unbuffered::pump

use std::sync::Arc;

use bytes::{Buf, BytesMut};
use rustls::server::ServerConnectionData;
use rustls::server::UnbufferedServerConnection;
use rustls::unbuffered::{
    ConnectionState, EncodeError, EncodeTlsData, EncryptError, InsufficientSizeError, WriteTraffic,
};
use rustls::{HandshakeKind, ProtocolVersion, ServerConfig};

use crate::error::{ErrorKind, TlsError};
use crate::resolver::{clear_captured_sni, take_captured_sni};

/// The largest TLS record on the wire that rustls accepts: 5-byte header, 16 KiB of plaintext
/// plus 2 KiB of expansion (RFC 8446 §5.2 allows 256 bytes; RFC 5246 §6.2.3 allows 2048).
const RECORD_WIRE_BYTES_MAX: usize = 5 + 16_384 + 2_048;
/// The largest handshake message rustls accepts (its own `MAX_HANDSHAKE_SIZE`), plus header.
const HANDSHAKE_MESSAGE_BYTES_MAX: usize = 4 + 0xffff;
/// What may stay in `incoming` between calls: a partial handshake message being joined, and
/// the partial record after it.
const LEFTOVER_BYTES_MAX: usize = HANDSHAKE_MESSAGE_BYTES_MAX + RECORD_WIRE_BYTES_MAX;
/// Ciphertext appended to `incoming` per pump, so one huge `read_tls` input cannot make it
/// bigger than `LEFTOVER_BYTES_MAX + FEED_BYTES`.
const FEED_BYTES: usize = 64 * 1024;
/// Plaintext per record, and the most a record adds to it (TLS 1.2 AES-GCM: header 5,
/// explicit nonce 8, tag 16; TLS 1.3: header 5, content type 1, tag 16), to size `out`
/// before encrypting. If rustls needs more it says so and we retry.
const RECORD_PLAIN_BYTES: usize = 16_384;
const RECORD_OVERHEAD_BYTES: usize = 32;
/// Room for a close_notify alert record (at most 5 + 8 + 2 + 16 bytes).
const ALERT_RECORD_BYTES: usize = 64;
/// Capacity `incoming` may keep through [`Unbuffered::shrink`]. An idle keep-alive
/// connection should not pin a full record's worth of memory (10,000 idle clients × 18 KiB
/// is 180 MiB), but freeing it after every read makes malloc churn (measured: glibc then
/// trims and regrows its heap, +5 µs per 16 KiB record), so the worker decides when.
const IDLE_KEEP_BYTES: usize = 4096;
/// After an error, how many queued records we pull out (the alert, and anything queued
/// before it) before giving up.
const FLUSH_RECORDS_MAX: usize = 16;

const _: () = assert!(RECORD_OVERHEAD_BYTES >= 5 + 8 + 16 && RECORD_OVERHEAD_BYTES >= 5 + 1 + 16);

pub(crate) struct Unbuffered {
    conn: UnbufferedServerConnection,
    /// Received ciphertext rustls has not consumed yet.
    incoming: BytesMut,
    /// Plaintext rustls produced while we were pumping to write (normally never: see
    /// `write_plain`); handed out by the next `read_tls`.
    stashed_plain: BytesMut,
    sni: Option<Box<str>>,
    peer_closed: bool,
}

/// Why the state machine is pumped, which decides what `WriteTraffic` means.
enum Want<'a> {
    /// Process input; stop when blocked or ready to write.
    Read,
    /// Encrypt this application data once ready.
    Write(&'a [u8]),
    /// Encrypt a close_notify once ready.
    Close,
}

impl Unbuffered {
    pub(crate) fn new(config: Arc<ServerConfig>) -> Unbuffered {
        let conn = UnbufferedServerConnection::new(config)
            .expect("TlsStore::load made a connection from this config already");
        Unbuffered {
            conn,
            incoming: BytesMut::new(),
            stashed_plain: BytesMut::new(),
            sni: None,
            peer_closed: false,
        }
    }

    pub(crate) fn read_tls(
        &mut self,
        mut cipher: &[u8],
        plain: &mut BytesMut,
        out: &mut BytesMut,
    ) -> Result<(), TlsError> {
        if !self.stashed_plain.is_empty() {
            plain.extend_from_slice(&self.stashed_plain);
            self.stashed_plain.clear();
        }
        while !cipher.is_empty() && !self.peer_closed {
            let take = cipher.len().min(FEED_BYTES);
            self.incoming.extend_from_slice(&cipher[..take]);
            cipher = &cipher[take..];
            self.pump_capturing_sni(Want::Read, plain, out)?;
            if self.incoming.len() > LEFTOVER_BYTES_MAX {
                // rustls's own limits make this unreachable; it is the backstop that keeps
                // "nothing grows without bound" true whatever rustls does.
                let msg = "tls: too much ciphertext without a complete record";
                return Err(TlsError::new(ErrorKind::BadRecord, msg));
            }
        }
        if self.peer_closed {
            // "Any data received after a closure alert has been received MUST be ignored."
            // (RFC 8446 §6.1) Nothing more will come: free the buffer.
            self.incoming = BytesMut::new();
        }
        Ok(())
    }

    /// Frees `incoming` if it is empty and its allocation is larger than `IDLE_KEEP_BYTES`.
    pub(crate) fn shrink(&mut self) {
        // `advance` hides the consumed front of the allocation from `capacity()`;
        // `try_reclaim` (no copy: nothing is left) tells whether the allocation is large.
        if self.incoming.is_empty() && self.incoming.try_reclaim(IDLE_KEEP_BYTES + 1) {
            self.incoming = BytesMut::new();
        }
        if self.stashed_plain.is_empty() {
            self.stashed_plain = BytesMut::new();
        }
    }

    pub(crate) fn write_plain(&mut self, data: &[u8], out: &mut BytesMut) -> Result<(), TlsError> {
        // `read_tls` left rustls blocked on input with nothing to hand out, so this pump
        // reaches `WriteTraffic` at once, after encoding anything rustls queued meanwhile.
        let mut stash = std::mem::take(&mut self.stashed_plain);
        let result = self.pump(Want::Write(data), &mut stash, out);
        self.stashed_plain = stash;
        result
    }

    pub(crate) fn close(&mut self, out: &mut BytesMut) -> Result<(), TlsError> {
        let mut stash = std::mem::take(&mut self.stashed_plain);
        let result = self.pump(Want::Close, &mut stash, out);
        self.stashed_plain = stash;
        result
    }

    /// Pumps, and while the handshake runs, keeps the SNI our resolver saw: the unbuffered
    /// API has no `server_name()` (see `resolver.rs`).
    fn pump_capturing_sni(
        &mut self,
        want: Want<'_>,
        plain: &mut BytesMut,
        out: &mut BytesMut,
    ) -> Result<(), TlsError> {
        let capture = self.sni.is_none() && self.conn.is_handshaking();
        if capture {
            clear_captured_sni();
        }
        let result = self.pump(want, plain, out);
        if capture {
            self.sni = take_captured_sni();
        }
        result
    }

    /// Runs the state machine until it needs more input, or has done what `want` asks.
    fn pump(
        &mut self,
        want: Want<'_>,
        plain: &mut BytesMut,
        out: &mut BytesMut,
    ) -> Result<(), TlsError> {
        loop {
            let status = self.conn.process_tls_records(&mut self.incoming);
            let discard = status.discard;
            let state = match status.state {
                Ok(state) => state,
                Err(err) => {
                    self.incoming.advance(discard);
                    self.flush_after_error(out);
                    return Err(TlsError::from_rustls(err));
                }
            };
            if matches!(state, ConnectionState::PeerClosed) {
                self.peer_closed = true;
            }
            // rustls's contract: handle the state, then discard, then call again.
            let (more_discard, done) = handle_state(state, &want, plain, out)?;
            self.incoming.advance(discard + more_discard);
            if done {
                return Ok(());
            }
        }
    }

    /// After an error rustls has queued the fatal alert but returned the error instead of an
    /// `EncodeTlsData` state; while records are queued, the next calls hand them out before
    /// looking at input. Once the queue is empty we stop: another call would deframe the bad
    /// input again. (The buffer must still be `incoming`: rustls remembers positions in it.)
    fn flush_after_error(&mut self, out: &mut BytesMut) {
        for _ in 0..FLUSH_RECORDS_MAX {
            if !self.conn.wants_write() {
                return;
            }
            let status = self.conn.process_tls_records(&mut self.incoming);
            match status.state {
                Ok(ConnectionState::EncodeTlsData(mut encode)) => {
                    if encode_into(&mut encode, out).is_err() {
                        return;
                    }
                }
                _ => return,
            }
        }
    }

    pub(crate) fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    pub(crate) fn alpn_id(&self) -> Option<&[u8]> {
        self.conn.alpn_protocol()
    }

    pub(crate) fn sni(&self) -> Option<&str> {
        self.sni.as_deref()
    }

    pub(crate) fn peer_closed(&self) -> bool {
        self.peer_closed
    }

    pub(crate) fn handshake_kind(&self) -> Option<HandshakeKind> {
        self.conn.handshake_kind()
    }

    pub(crate) fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.conn.protocol_version()
    }

    pub(crate) fn check_invariants(&self) {
        assert!(
            self.incoming.len() <= LEFTOVER_BYTES_MAX,
            "incoming is bounded"
        );
        assert!(
            !self.peer_closed || self.incoming.is_empty(),
            "input after close_notify is dropped"
        );
        assert!(
            self.stashed_plain.len() <= RECORD_WIRE_BYTES_MAX,
            "stash holds one pump's output"
        );
    }
}

/// Does what one state asks. Returns the extra bytes to discard (from records read) and
/// whether the pump is done: blocked on input, or `want` fulfilled.
fn handle_state(
    state: ConnectionState<'_, '_, ServerConnectionData>,
    want: &Want<'_>,
    plain: &mut BytesMut,
    out: &mut BytesMut,
) -> Result<(usize, bool), TlsError> {
    let mut discard = 0;
    let done = match state {
        ConnectionState::ReadTraffic(mut traffic) => {
            while let Some(record) = traffic.next_record() {
                let record = record.map_err(TlsError::from_rustls)?;
                discard += record.discard;
                plain.extend_from_slice(record.payload);
            }
            false
        }
        ConnectionState::EncodeTlsData(mut encode) => {
            encode_into(&mut encode, out)?;
            false
        }
        // The records are in `out` already; the caller sends them.
        ConnectionState::TransmitTlsData(transmit) => {
            transmit.done();
            false
        }
        ConnectionState::PeerClosed => false, // noted by the caller
        ConnectionState::WriteTraffic(mut traffic) => {
            match want {
                Want::Read => {}
                Want::Write(data) => encrypt_into(&mut traffic, data, out)?,
                Want::Close => close_into(&mut traffic, out)?,
            }
            true
        }
        ConnectionState::BlockedHandshake | ConnectionState::Closed => {
            if !matches!(want, Want::Read) {
                // `TlsConn` only writes after the handshake and before close, so rustls must
                // have offered `WriteTraffic`; never drop data silently.
                let msg = "tls: connection not ready for application data";
                return Err(TlsError::new(ErrorKind::Internal, msg));
            }
            true
        }
        ConnectionState::ReadEarlyData(_) => {
            // `max_early_data_size` is 0, so rustls never accepts early data.
            let msg = "tls: early data offered, but 0-RTT is off";
            return Err(TlsError::new(ErrorKind::PeerMisbehaved, msg));
        }
        _ => {
            let msg = "tls: unknown state from rustls::unbuffered";
            return Err(TlsError::new(ErrorKind::Internal, msg));
        }
    };
    Ok((discard, done))
}

/// Appends a handshake (or alert) record that rustls has ready.
fn encode_into(
    encode: &mut EncodeTlsData<'_, ServerConnectionData>,
    out: &mut BytesMut,
) -> Result<(), TlsError> {
    // An empty slice makes rustls tell the exact size without giving the record up.
    let needed = match encode.encode(&mut []) {
        Ok(_) => return Ok(()), // an empty record: nothing to append
        Err(EncodeError::InsufficientSize(InsufficientSizeError { required_size })) => {
            required_size
        }
        Err(e) => return Err(internal("encode", e)),
    };
    let start = out.len();
    out.resize(start + needed, 0);
    match encode.encode(&mut out[start..]) {
        Ok(written) => {
            out.truncate(start + written);
            Ok(())
        }
        Err(e) => {
            out.truncate(start);
            Err(internal("encode", e))
        }
    }
}

/// Encrypts application data into records appended to `out`.
fn encrypt_into(
    traffic: &mut WriteTraffic<'_, ServerConnectionData>,
    data: &[u8],
    out: &mut BytesMut,
) -> Result<(), TlsError> {
    let records = data.len().div_ceil(RECORD_PLAIN_BYTES).max(1);
    let guess = data.len() + records * RECORD_OVERHEAD_BYTES;
    write_sized(out, guess, |room| traffic.encrypt(data, room))
}

fn close_into(
    traffic: &mut WriteTraffic<'_, ServerConnectionData>,
    out: &mut BytesMut,
) -> Result<(), TlsError> {
    write_sized(out, ALERT_RECORD_BYTES, |room| {
        traffic.queue_close_notify(room)
    })
}

/// Gives `write` `guess` zeroed bytes at the end of `out`, and the exact size it asks for if
/// that was too few (a queued key update can make it so), then trims `out` to what it wrote.
/// The zeroing is the price of `forbid(unsafe_code)`: a `memset` of the record, far cheaper
/// than the AEAD that overwrites it.
fn write_sized(
    out: &mut BytesMut,
    guess: usize,
    mut write: impl FnMut(&mut [u8]) -> Result<usize, EncryptError>,
) -> Result<(), TlsError> {
    let start = out.len();
    out.resize(start + guess, 0);
    let result = match write(&mut out[start..]) {
        Err(EncryptError::InsufficientSize(InsufficientSizeError { required_size })) => {
            out.resize(start + required_size, 0);
            write(&mut out[start..])
        }
        other => other,
    };
    match result {
        Ok(written) => {
            out.truncate(start + written);
            Ok(())
        }
        Err(e) => {
            out.truncate(start);
            Err(internal("encrypt", e))
        }
    }
}

fn internal(what: &str, err: impl std::fmt::Display) -> TlsError {
    TlsError::new(ErrorKind::Internal, format!("tls: {what}: {err}"))
}
