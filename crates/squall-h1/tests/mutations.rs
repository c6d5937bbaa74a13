//! A deterministic fuzz pass: thousands of mutated requests, each fed whole and split several
//! ways. The decoder must never panic, never loop, and give the same outcome however the
//! bytes arrive (the harness checks the event grammar and invariants on the way). A stand-in
//! for `cargo fuzz` that runs in every `cargo test`.

mod common;

use common::run_pieces;
use squall_h1::Limits;

/// Requests to mutate, covering every part of the grammar.
const SEEDS: &[&[u8]] = &[
    b"GET /a?b=c HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n",
    b"POST /p HTTP/1.1\r\nHost: a:80\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhelloGET / HTTP/1.0\r\n\r\n",
    b"PUT / HTTP/1.1\r\nHost: [::1]\r\nTransfer-Encoding: chunked\r\n\r\n5;a=\"b\"\r\nhello\r\n0\r\nT: v\r\n\r\n",
    b"\r\nOPTIONS * HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    b"GET http://h.example/x HTTP/1.1\r\nHost: h\r\nCookie: a=1\r\nCookie: b=2\r\n\r\n",
];

/// Bytes that matter to HTTP/1.1 framing, to insert and substitute.
const SPECIAL: &[u8] = b"\r\n \t:;,=\"\\0aAzZ9\x00\x7f\xff-+/#*?@[]";

/// xorshift64*: small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn mutate(rng: &mut Rng, input: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(input.len() + 1);
        let byte = SPECIAL[rng.below(SPECIAL.len())];
        match rng.below(5) {
            0 => input.insert(at, byte),
            1 if at < input.len() => input[at] = byte,
            2 if at < input.len() => {
                input.remove(at);
            }
            3 if at < input.len() => {
                let end = (at + 1 + rng.below(8)).min(input.len());
                let copy = input[at..end].to_vec();
                input.splice(at..at, copy);
            }
            _ => input.insert(at, rng.below(256) as u8),
        }
    }
}

#[test]
fn mutated_requests_decode_the_same_at_any_split() {
    let mut rng = Rng(0x5eed_f00d_5a11);
    let limits = Limits {
        header_bytes_max: 160,
        uri_bytes_max: 24,
        body_bytes_max: 16,
        headers_count_max: 6,
    };
    for round in 0..3000 {
        let mut input = SEEDS[round % SEEDS.len()].to_vec();
        mutate(&mut rng, &mut input);
        let whole = run_pieces([&input[..]], limits);
        for size in [1, 2, 3, 5, 8, 13] {
            let outcome = run_pieces(input.chunks(size), limits);
            assert_eq!(
                outcome,
                whole,
                "round {round}, pieces of {size}: {:?}",
                String::from_utf8_lossy(&input)
            );
        }
        for _ in 0..4 {
            let (a, b) = input.split_at(rng.below(input.len() + 1));
            assert_eq!(
                run_pieces([a, b], limits),
                whole,
                "round {round}: {:?}",
                String::from_utf8_lossy(&input)
            );
        }
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0xdead_beef);
    for _ in 0..2000 {
        let len = rng.below(200);
        let input: Vec<u8> = (0..len)
            .map(|_| SPECIAL[rng.below(SPECIAL.len())])
            .collect();
        let whole = run_pieces([&input[..]], Limits::default());
        assert_eq!(run_pieces(input.chunks(1), Limits::default()), whole);
    }
}
