//! An interleaved A/B of the two engines, for a machine shared with other work.
//!
//! Criterion measures one engine, then the other: when a neighbour's compile starts halfway,
//! the second engine looks slower. Here each round times a batch of each engine back to
//! back, and the report is the best and the median batch per engine, so contention inflates
//! both sides alike and the minimum shows the undisturbed cost. Run with
//! `cargo bench -p squall-tls --bench ab` (optionally `-- ROUNDS`).

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use common::{ClientOpts, ENGINES, Pair, client_config, self_signed};
use rustls::client::Resumption;
use squall_tls::{Acceptor, Alpn, Engine, TlsConn, TlsStore};

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(40);
    let certs = [self_signed("bench", &["bench.test"])];
    let store = TlsStore::load(&certs).unwrap().0;
    let fresh = client(false);
    let resuming = client(true);
    let request = b"GET /a HTTP/1.1\r\nHost: bench.test\r\n\r\n\r\n";
    let response = b"HTTP/1.1 200 ";
    let record = vec![0x5a; 16_384];

    // Each case returns the time spent inside the server's calls, or `None` to count the
    // whole iteration (handshakes, where both sides interleave).
    type Case<'a> = (
        &'a str,
        usize,
        Box<dyn FnMut(Engine) -> Option<Duration> + 'a>,
    );
    let mut cases: Vec<Case> = Vec::new();
    let acceptor = |engine: Engine| store.acceptor(&[Alpn::H2, Alpn::Http1]).with_engine(engine);
    let (a, f) = (acceptor, fresh.clone());
    cases.push((
        "handshake full (both sides)",
        20,
        Box::new(move |e| handshake(&a(e), &f)),
    ));
    let (a, r) = (acceptor, resuming.clone());
    cases.push((
        "handshake resumed (both)",
        20,
        Box::new(move |e| handshake(&a(e), &r)),
    ));
    let mut wires: Vec<Wire> = ENGINES.iter().map(|&e| Wire::new(&acceptor(e))).collect();
    let mut wires2: Vec<Wire> = ENGINES.iter().map(|&e| Wire::new(&acceptor(e))).collect();
    let mut wires3: Vec<Wire> = ENGINES.iter().map(|&e| Wire::new(&acceptor(e))).collect();
    cases.push((
        "rr 40b in/13b out (server)",
        2000,
        Box::new(move |e| {
            let w = &mut wires[e as usize];
            Some(w.upload(request) + w.download(response))
        }),
    ));
    let rec = record.clone();
    cases.push((
        "send 16 KiB (server)",
        200,
        Box::new(move |e| Some(wires2[e as usize].download(&rec))),
    ));
    cases.push((
        "recv 16 KiB (server)",
        200,
        Box::new(move |e| Some(wires3[e as usize].upload(&record))),
    ));

    println!("{rounds} interleaved rounds; per operation: best / median batch");
    for (name, batch, run) in &mut cases {
        println!("{name:>28}:{}", measure(rounds, *batch, run));
    }
}

/// Times `rounds` batches of `batch` runs per engine, alternating engines every batch, and
/// formats the best and median batch of each.
fn measure(rounds: usize, batch: usize, run: &mut dyn FnMut(Engine) -> Option<Duration>) -> String {
    let mut times = vec![Vec::new(); ENGINES.len()];
    for _ in 0..rounds {
        for &engine in ENGINES {
            let start = Instant::now();
            let mut inside = Duration::ZERO;
            let mut all_inside = true;
            for _ in 0..batch {
                match run(engine) {
                    Some(d) => inside += d,
                    None => all_inside = false,
                }
            }
            let total = if all_inside { inside } else { start.elapsed() };
            times[engine as usize].push(total / batch as u32);
        }
    }
    let mut line = String::new();
    for &engine in ENGINES {
        let t = &mut times[engine as usize];
        t.sort();
        line += &format!("  {engine:?} {} / {}", fmt(t[0]), fmt(t[t.len() / 2]));
    }
    line
}

fn fmt(d: Duration) -> String {
    if d < Duration::from_micros(10) {
        format!("{:.2} µs", d.as_nanos() as f64 / 1000.0)
    } else {
        format!("{:.1} µs", d.as_nanos() as f64 / 1000.0)
    }
}

fn client(resume: bool) -> Arc<rustls::ClientConfig> {
    let mut config = (*client_config(&ClientOpts::default())).clone();
    if !resume {
        config.resumption = Resumption::disabled();
    }
    Arc::new(config)
}

fn handshake(acceptor: &Acceptor, client: &Arc<rustls::ClientConfig>) -> Option<Duration> {
    Pair::new(acceptor, client, "bench.test", usize::MAX).handshake();
    None
}

/// An established connection with reusable buffers (as in `tls.rs`).
struct Wire {
    client: rustls::ClientConnection,
    server: TlsConn,
    wire: Vec<u8>,
    plain: BytesMut,
    out: BytesMut,
    read_buf: Vec<u8>,
}

impl Wire {
    fn new(acceptor: &Acceptor) -> Wire {
        let mut pair = Pair::new(acceptor, &client(false), "bench.test", usize::MAX);
        pair.handshake();
        Wire {
            client: pair.client,
            server: pair.server,
            wire: Vec::with_capacity(1 << 16),
            plain: BytesMut::with_capacity(1 << 16),
            out: BytesMut::with_capacity(1 << 16),
            read_buf: vec![0; 1 << 16],
        }
    }

    /// Client → server; returns the time spent in the server's `read_tls`.
    fn upload(&mut self, data: &[u8]) -> Duration {
        self.client.writer().write_all(data).unwrap();
        self.wire.clear();
        while self.client.wants_write() {
            self.client.write_tls(&mut self.wire).unwrap();
        }
        self.plain.clear();
        self.out.clear();
        let start = Instant::now();
        self.server
            .read_tls(&self.wire, &mut self.plain, &mut self.out)
            .unwrap();
        let inside = start.elapsed();
        assert_eq!(self.plain.len(), data.len());
        inside
    }

    /// Server → client; returns the time spent in the server's `write_plain`.
    fn download(&mut self, data: &[u8]) -> Duration {
        self.out.clear();
        let start = Instant::now();
        self.server.write_plain(data, &mut self.out).unwrap();
        let inside = start.elapsed();
        let mut wire = &self.out[..];
        while !wire.is_empty() {
            self.client.read_tls(&mut wire).unwrap();
            self.client.process_new_packets().unwrap();
        }
        let mut total = 0;
        while let Ok(n) = self.client.reader().read(&mut self.read_buf) {
            if n == 0 {
                break;
            }
            total += n;
        }
        assert_eq!(total, data.len());
        inside
    }
}
