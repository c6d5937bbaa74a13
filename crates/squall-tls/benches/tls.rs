//! The two engines side by side, in memory, with a rustls client on the other end:
//!
//! - `handshake`: full TLS 1.3 handshakes (X25519MLKEM768, ECDSA P-256), client and server
//!   both in the loop, resumption off, so every iteration pays for the whole thing;
//! - `handshake_resumed`: TLS 1.3 handshakes resuming with a ticket;
//! - `rr_13b`: one keep-alive round trip on an established connection: a 40-byte request
//!   record in, a 13-byte response out (the shape of a small cache hit);
//! - `send_16k` / `recv_16k`: one full 16 KiB record out of / into the server.
//!
//! The client's share of the work is the same for both engines, so differences between
//! engines are differences in the server. Run with `cargo bench -p squall-tls --bench tls`.
//! On a machine shared with other builds, criterion's one-engine-then-the-other runs drift
//! by tens of percent; `benches/ab.rs` interleaves the engines and is the one to decide by.

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::{Read, Write};
use std::sync::Arc;

use bytes::BytesMut;
use common::{ClientOpts, ENGINES, Pair, client_config, self_signed};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rustls::ClientConfig;
use rustls::client::Resumption;
use squall_tls::{Acceptor, Alpn, TlsConn, TlsStore};

fn setup() -> TlsStore {
    let certs = [self_signed("bench", &["bench.test"])];
    TlsStore::load(&certs).unwrap().0
}

fn client(resume: bool) -> Arc<ClientConfig> {
    let mut config = (*client_config(&ClientOpts::default())).clone();
    if !resume {
        config.resumption = Resumption::disabled();
    }
    Arc::new(config)
}

fn handshakes(c: &mut Criterion) {
    let store = setup();
    let mut group = c.benchmark_group("handshake");
    for (name, resume) in [("full", false), ("resumed", true)] {
        let client = client(resume);
        for &engine in ENGINES {
            let acceptor = store.acceptor(&[Alpn::H2, Alpn::Http1]).with_engine(engine);
            // Prime the client's ticket store for the resumed case.
            Pair::new(&acceptor, &client, "bench.test", usize::MAX).handshake();
            group.bench_function(BenchmarkId::new(name, format!("{engine:?}")), |b| {
                b.iter(|| {
                    let mut pair = Pair::new(&acceptor, &client, "bench.test", usize::MAX);
                    pair.handshake();
                    pair
                })
            });
        }
    }
    group.finish();
}

/// An established connection with reusable buffers, for the steady-state benchmarks.
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

    /// Client → server: `data` in one record; returns the plaintext length the server got.
    fn upload(&mut self, data: &[u8]) -> usize {
        self.client.writer().write_all(data).unwrap();
        self.wire.clear();
        while self.client.wants_write() {
            self.client.write_tls(&mut self.wire).unwrap();
        }
        self.plain.clear();
        self.out.clear();
        self.server
            .read_tls(&self.wire, &mut self.plain, &mut self.out)
            .unwrap();
        self.plain.len()
    }

    /// Server → client: `data` in one `write_plain`; returns what the client read.
    fn download(&mut self, data: &[u8]) -> usize {
        self.out.clear();
        self.server.write_plain(data, &mut self.out).unwrap();
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
        total
    }
}

fn steady_state(c: &mut Criterion) {
    let store = setup();
    let request = b"GET /a HTTP/1.1\r\nHost: bench.test\r\n\r\n\r\n";
    let response = b"HTTP/1.1 200 "; // 13 bytes
    let record = vec![0x5a; 16_384];
    let mut group = c.benchmark_group("steady");
    for &engine in ENGINES {
        let acceptor = store.acceptor(&[Alpn::Http1]).with_engine(engine);
        let id = format!("{engine:?}");
        let mut wire = Wire::new(&acceptor);
        group.throughput(Throughput::Elements(1));
        group.bench_function(BenchmarkId::new("rr_13b", &id), |b| {
            b.iter(|| {
                assert_eq!(wire.upload(request), request.len());
                assert_eq!(wire.download(response), response.len());
            })
        });
        group.throughput(Throughput::Bytes(record.len() as u64));
        group.bench_function(BenchmarkId::new("send_16k", &id), |b| {
            b.iter(|| assert_eq!(wire.download(&record), record.len()))
        });
        group.bench_function(BenchmarkId::new("recv_16k", &id), |b| {
            b.iter(|| assert_eq!(wire.upload(&record), record.len()))
        });
    }
    group.finish();
}

fn config() -> Criterion {
    // A shared 2-core machine: short runs, enough samples to see a 5% difference.
    Criterion::default()
        .sample_size(30)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(3))
}

criterion_group! {
    name = benches;
    config = config();
    targets = handshakes, steady_state
}
criterion_main!(benches);
