//! Fuzz target: arbitrary bytes as an HTTP/2 origin's byte stream to a client connection.
//!
//! An origin's bytes are untrusted input to the proxy. The connection opens three requests
//! first: a GET that ends its stream (1), a POST whose body it keeps sending while the
//! stream is open (3), and a POST with a short body and trailers (5); the fuzzer's bytes
//! are then the origin's answer. The first byte picks the piece length and how often the
//! clock jumps, the second the application's behaviour: it releases capacity (or holds
//! it), resets streams when their response arrives, opens new requests while
//! `available_streams()` allows. Nothing may panic, the connection's invariants must hold
//! after every step, no event may come for a stream that already ended, a failed
//! connection keeps failing and finishes once its events and output are taken, and output
//! always drains.
//!
//! (No `#![forbid(unsafe_code)]` here: `fuzz_target!` expands to a `#[no_mangle]` entry point,
//! which that lint counts against `unsafe_code`. This crate is outside the workspace and its tidy check.)
#![no_main]

use std::collections::HashSet;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use squall_h2::{ClientConfig, ClientConnection, ClientEvent, ErrorCode, OpenError, StreamId};

/// Request body the streaming POST queues per step, and at most in all.
const BODY_PIECE_BYTES: usize = 16_384;
const BODY_TOTAL_BYTES_MAX: usize = 1 << 20;
/// Requests the application opens after the first three, at most.
const EXTRA_REQUESTS_MAX: usize = 16;

fuzz_target!(|data: &[u8]| {
    let [mode, behaviour, rest @ ..] = data else {
        return;
    };
    let mut app = App::new(*behaviour);
    let piece = 1 + usize::from(mode & 0x3f);
    let mut now = Instant::now();
    let mut conn = ClientConnection::new(ClientConfig::default(), now);
    app.open_first(&mut conn);
    conn.check_invariants();
    drain(&mut conn);
    let mut input = BytesMut::new();
    for (i, chunk) in rest.chunks(piece).enumerate() {
        input.extend_from_slice(chunk);
        if conn.recv(&mut input, now).is_err() {
            failed(&mut conn, &mut app, &mut input, now);
            return;
        }
        conn.check_invariants();
        app.step(&mut conn);
        conn.poll_output(16_384, |_| {});
        conn.check_invariants();
        if i % 7 == 6 {
            now += Duration::from_secs(u64::from(mode >> 6) * 15);
            conn.on_timer(now);
            conn.check_invariants();
        }
    }
    app.step(&mut conn);
    drain(&mut conn);
    conn.fail();
    failed(&mut conn, &mut app, &mut input, now);
});

/// The application: which streams it opened, which still await their response, and what
/// it does.
struct App {
    behaviour: u8,
    /// Opened, not reset either way: a Reset event may come (even after a complete
    /// response, while the request body still goes: RFC 9113 §8.1).
    opened: HashSet<StreamId>,
    /// Opened, the response neither complete nor reset: response events may come.
    responding: HashSet<StreamId>,
    /// The POST whose body keeps coming, while it is open.
    streaming: Option<StreamId>,
    body_sent: usize,
    extra: usize,
}

impl App {
    fn new(behaviour: u8) -> Self {
        Self {
            behaviour,
            opened: HashSet::new(),
            responding: HashSet::new(),
            streaming: None,
            body_sent: 0,
            extra: 0,
        }
    }

    fn open_first(&mut self, conn: &mut ClientConnection) {
        let get = self
            .open(conn, b"GET", true)
            .expect("a new connection has streams");
        assert_eq!(get, 1);
        let post = self.open(conn, b"POST", false).expect("stream 3");
        self.streaming = Some(post);
        self.feed_body(conn);
        let trailers = self.open(conn, b"POST", false).expect("stream 5");
        conn.send_data(trailers, Bytes::from_static(b"hello"), false)
            .expect("stream 5 is open");
        conn.send_trailers(trailers, [(&b"grpc-status"[..], &b"0"[..])])
            .expect("stream 5 is open");
    }

    fn open(
        &mut self,
        conn: &mut ClientConnection,
        method: &[u8],
        end: bool,
    ) -> Result<StreamId, OpenError> {
        let fields = [
            (&b":method"[..], method),
            (b":scheme", b"https"),
            (b":authority", b"origin.test"),
            (b":path", b"/fuzz"),
            (b"user-agent", b"squall-fuzz"),
        ];
        let id = conn.send_request(fields, end)?;
        assert!(id % 2 == 1 && self.opened.insert(id), "stream {id} reused");
        self.responding.insert(id);
        Ok(id)
    }

    /// Takes every event and reacts, then opens new requests and keeps the body coming.
    fn step(&mut self, conn: &mut ClientConnection) {
        while let Some(event) = conn.poll_event() {
            self.on_event(conn, event);
            conn.check_invariants();
        }
        while conn.available_streams() > 0 && self.extra < EXTRA_REQUESTS_MAX {
            self.extra += 1;
            let end = self.behaviour & 0x10 == 0;
            let id = self
                .open(conn, b"GET", end)
                .expect("available_streams() > 0");
            if !end {
                let _ = conn.send_data(id, Bytes::from_static(b"x"), true);
            }
            conn.check_invariants();
        }
        self.feed_body(conn);
        conn.check_invariants();
    }

    fn on_event(&mut self, conn: &mut ClientConnection, event: ClientEvent) {
        match (&event, event.stream_id()) {
            (ClientEvent::Reset { .. }, Some(id)) => {
                assert!(
                    self.opened.contains(&id),
                    "reset of a stream gone: {event:?}"
                );
            }
            (_, Some(id)) => {
                assert!(
                    self.responding.contains(&id),
                    "event after the end: {event:?}"
                );
            }
            (_, None) => {}
        }
        match event {
            ClientEvent::Response {
                stream_id,
                end_stream,
                ..
            } => {
                if end_stream {
                    self.responding.remove(&stream_id);
                } else if self.behaviour & 0x03 == 0 {
                    conn.reset_stream(stream_id, ErrorCode::Cancel);
                    self.gone(stream_id);
                }
            }
            ClientEvent::Data {
                stream_id,
                data,
                end_stream,
            } => {
                // Holding capacity now and then: a slow client stalls the origin.
                if self.behaviour & 0x0c != 0x0c {
                    conn.release_capacity(stream_id, data.len());
                }
                if end_stream {
                    self.responding.remove(&stream_id);
                } else if self.behaviour & 0x03 == 1 && data.len() > 100 {
                    conn.reset_stream(stream_id, ErrorCode::Cancel);
                    self.gone(stream_id);
                }
            }
            ClientEvent::Trailers { stream_id, .. } => {
                self.responding.remove(&stream_id);
            }
            ClientEvent::Reset { stream_id, .. } => self.gone(stream_id),
            ClientEvent::Interim { .. } | ClientEvent::GoAway { .. } => {}
        }
    }

    /// Reset, by us or by the connection: nothing more comes for it.
    fn gone(&mut self, id: StreamId) {
        self.opened.remove(&id);
        self.responding.remove(&id);
        if self.streaming == Some(id) {
            self.streaming = None;
        }
    }

    /// More body for the streaming POST, while little of it waits; it ends at the limit.
    fn feed_body(&mut self, conn: &mut ClientConnection) {
        let Some(id) = self.streaming else {
            return;
        };
        if conn.queued_data(id) >= 2 * BODY_PIECE_BYTES {
            return;
        }
        self.body_sent += BODY_PIECE_BYTES;
        let end = self.body_sent >= BODY_TOTAL_BYTES_MAX;
        let body = Bytes::from(vec![b'b'; BODY_PIECE_BYTES]);
        if conn.send_data(id, body, end).is_err() || end {
            self.streaming = None;
        }
    }
}

/// A failed connection: it keeps failing, opens nothing, ends every stream with a Reset
/// event, and finishes once its events and output are taken.
fn failed(conn: &mut ClientConnection, app: &mut App, input: &mut BytesMut, now: Instant) {
    conn.check_invariants();
    assert!(conn.last_error().is_some());
    assert_eq!(conn.available_streams(), 0);
    while let Some(event) = conn.poll_event() {
        app.on_event(conn, event);
        conn.check_invariants();
    }
    let ended = app.responding.is_empty();
    assert!(ended, "responses without an end: {:?}", app.responding);
    assert!(conn.is_idle());
    drain(conn);
    assert!(conn.is_finished());
    assert!(conn.recv(input, now).is_err());
    assert!(matches!(
        conn.send_request([(&b":method"[..], &b"GET"[..])], true),
        Err(OpenError::GoingAway)
    ));
    conn.check_invariants();
}

/// Takes all output; it must end.
fn drain(conn: &mut ClientConnection) {
    let mut rounds = 0;
    while conn.has_output() {
        conn.poll_output(65_536, |_| {});
        conn.check_invariants();
        rounds += 1;
        assert!(rounds < 100_000, "output never ends");
    }
}
