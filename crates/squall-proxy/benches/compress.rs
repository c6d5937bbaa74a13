//! What compressing a response costs per KiB, per coding and level: a 64 KiB HTML-like body
//! fed in 16 KiB pieces (an origin read) with a flush after each, as the exchange does, then
//! finished. The levels are the defaults (gzip 6, brotli 4, zstd 3) and their neighbours, to
//! show what a step up or down buys.
//!
//! Run with `cargo bench -p squall-proxy --bench compress -- --warm-up-time 1
//! --measurement-time 3`; the throughput line is input bytes per second, so 1 / it is the
//! cost per byte. The output sizes are printed once per case.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use squall_proxy::compress::{Coding, Compressor, Levels};

/// 64 KiB of text shaped like a generated page: repeated markup, varying numbers and words.
fn body() -> Vec<u8> {
    let words = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf",
    ];
    let mut out = String::new();
    let mut i = 0usize;
    while out.len() < 64 * 1024 {
        out.push_str(&format!(
            "<tr class=\"row-{}\"><td>{}</td><td>{}</td><td>{:.2}</td></tr>\n",
            i % 2,
            i * 7919 % 100_000,
            words[i * 31 % words.len()],
            (i * 37 % 1000) as f64 / 7.0
        ));
        i += 1;
    }
    out.truncate(64 * 1024);
    out.into_bytes()
}

fn compress(coding: Coding, levels: Levels, body: &[u8]) -> usize {
    let mut c = Compressor::new(coding, levels).expect("valid levels");
    let mut out = 0;
    for piece in body.chunks(16 * 1024) {
        out += c.push(piece).expect("compresses").len();
        out += c.flush().expect("flushes").len();
    }
    out + c.finish().expect("finishes").0.len()
}

fn codings(c: &mut Criterion) {
    let body = body();
    let defaults = Levels {
        gzip: 6,
        brotli: 4,
        zstd: 3,
    };
    let cases = [
        (
            "gzip-1",
            Coding::Gzip,
            Levels {
                gzip: 1,
                ..defaults
            },
        ),
        ("gzip-6", Coding::Gzip, defaults),
        (
            "gzip-9",
            Coding::Gzip,
            Levels {
                gzip: 9,
                ..defaults
            },
        ),
        ("br-4", Coding::Brotli, defaults),
        (
            "br-5",
            Coding::Brotli,
            Levels {
                brotli: 5,
                ..defaults
            },
        ),
        (
            "br-6",
            Coding::Brotli,
            Levels {
                brotli: 6,
                ..defaults
            },
        ),
        (
            "zstd-1",
            Coding::Zstd,
            Levels {
                zstd: 1,
                ..defaults
            },
        ),
        ("zstd-3", Coding::Zstd, defaults),
        (
            "zstd-6",
            Coding::Zstd,
            Levels {
                zstd: 6,
                ..defaults
            },
        ),
    ];
    let mut group = c.benchmark_group("compress_64KiB");
    group.throughput(Throughput::Bytes(body.len() as u64));
    for (name, coding, levels) in cases {
        let size = compress(coding, levels, &body);
        println!("{name}: {} -> {size} bytes", body.len());
        group.bench_function(name, |b| {
            b.iter(|| compress(coding, levels, black_box(&body)))
        });
    }
    group.finish();
}

criterion_group!(benches, codings);
criterion_main!(benches);
