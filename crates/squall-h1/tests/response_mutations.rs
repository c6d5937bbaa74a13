//! A deterministic fuzz pass over the client role: thousands of mutated origin responses, each
//! fed whole and split several ways, with and without the origin closing at the end. The
//! decoder must never panic, never loop, and give the same outcome however the bytes arrive
//! (the harness checks the event grammar and invariants on the way).

mod common;

use common::response::{Script, run_pieces};
use http::Method;
use squall_h1::ResponseLimits;

/// Response exchanges to mutate, covering every part of the grammar, with the methods they
/// answer.
const SEEDS: &[(&[u8], &[Method])] = &[
    (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
        &[Method::GET],
    ),
    (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n\
          5;a=\"b\"\r\nhello\r\n0\r\nT: v\r\n\r\n",
        &[Method::POST],
    ),
    (
        b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\nuntil close",
        &[Method::GET],
    ),
    (
        b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n",
        &[Method::GET, Method::HEAD],
    ),
    (
        b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 404 Not Found\r\nConnection: close\r\n\
          Transfer-Encoding: gzip, chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
        &[Method::GET],
    ),
];

/// Bytes that matter to HTTP/1.1 framing, to insert and substitute.
const SPECIAL: &[u8] = b"\r\n \t:;,=\"\\0aAzZ9\x00\x7f\xff-+/#*?@[]HTP1.";

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
fn mutated_responses_decode_the_same_at_any_split() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let limits = ResponseLimits {
        header_bytes_max: 160,
        headers_count_max: 6,
        interim_count_max: 2,
    };
    for round in 0..3000 {
        let (seed, methods) = SEEDS[round % SEEDS.len()];
        let mut input = seed.to_vec();
        mutate(&mut rng, &mut input);
        let script = Script {
            methods: methods.to_vec(),
            eof: round % 2 == 0,
            limits,
        };
        let whole = run_pieces([&input[..]], &script);
        for size in [1, 2, 3, 5, 8, 13] {
            let outcome = run_pieces(input.chunks(size), &script);
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
                run_pieces([a, b], &script),
                whole,
                "round {round}: {:?}",
                String::from_utf8_lossy(&input)
            );
        }
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0xfeed_beef);
    let script = Script::get(2).then_eof();
    for _ in 0..2000 {
        let len = rng.below(200);
        let mut input: Vec<u8> = b"HTTP/1.1 ".to_vec();
        input.extend((0..len).map(|_| SPECIAL[rng.below(SPECIAL.len())]));
        let whole = run_pieces([&input[..]], &script);
        assert_eq!(run_pieces(input.chunks(1), &script), whole);
    }
}
