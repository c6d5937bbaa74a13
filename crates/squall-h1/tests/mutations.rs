//! A deterministic fuzz pass: thousands of mutated requests, each fed whole and split several
//! ways. The decoder must never panic, never loop, and give the same outcome however the
//! bytes arrive (the harness checks the event grammar and invariants on the way). A stand-in
//! for `cargo fuzz` that runs in every `cargo test`.

mod common;

use std::collections::HashSet;

use common::{Item, Outcome, run_pieces};
use squall_h1::{ErrorKind, Limits};

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

/// What the inputs of a run decoded to, so that a generator that stops reaching past the
/// request line, or stops breaking requests, fails the test instead of passing it vacuously.
#[derive(Debug, Default)]
struct Tally {
    /// Inputs refused with an error, and the distinct kinds of error.
    refused: usize,
    kinds: HashSet<ErrorKind>,
    /// Inputs that ended between messages with at least one whole request decoded.
    complete: usize,
    /// Inputs that ended inside a message, waiting for more bytes.
    mid_message: usize,
    /// Inputs that ended before any head, with no error.
    waiting: usize,
    heads: usize,
    bodies: usize,
    trailers: usize,
    /// Inputs with at least two heads: the decoder went on to a second request.
    pipelined: usize,
}

impl Tally {
    /// Reports the caller's line, so a failure says which minimum it was.
    #[track_caller]
    fn at_least(&self, what: &str, seen: usize, minimum: usize) {
        assert!(seen >= minimum, "{what}: {seen}, below {minimum}: {self:?}");
    }

    fn add(&mut self, outcome: &Outcome) {
        let heads = outcome.heads().len();
        match outcome.error {
            Some(kind) => {
                self.refused += 1;
                self.kinds.insert(kind);
            }
            None if !outcome.between_messages => self.mid_message += 1,
            None if heads > 0 => self.complete += 1,
            None => self.waiting += 1,
        }
        self.heads += heads;
        self.pipelined += usize::from(heads >= 2);
        for item in &outcome.items {
            match item {
                Item::Body(_) => self.bodies += 1,
                Item::End(Some(_)) => self.trailers += 1,
                _ => {}
            }
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
    let mut tally = Tally::default();
    for round in 0..3000 {
        let mut input = SEEDS[round % SEEDS.len()].to_vec();
        mutate(&mut rng, &mut input);
        let whole = run_pieces([&input[..]], limits);
        tally.add(&whole);
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
    eprintln!("mutated requests: {tally:?}");
    // The run is seeded, so the counts are the same every time; each minimum is about a third
    // of what was seen when it was written (after each), except the kinds of error, which
    // show how much of the grammar was broken.
    let t = &tally;
    t.at_least("refused", t.refused, 800); // 2515
    t.at_least("kinds of error", t.kinds.len(), 15); // 20
    t.at_least("complete", t.complete, 130); // 400
    t.at_least("mid-message", t.mid_message, 1); // 4
    t.at_least("waiting", t.waiting, 25); // 81
    t.at_least("heads", t.heads, 240); // 718
    t.at_least("bodies", t.bodies, 60); // 185
    t.at_least("trailers", t.trailers, 6); // 19
    t.at_least("pipelined", t.pipelined, 28); // 86
}

/// Where random bytes start: nowhere, then deeper and deeper into a request.
const PREFIXES: &[&[u8]] = &[
    b"",
    b"GET / HTTP/1.1\r\n",
    b"GET / HTTP/1.1\r\nHost: a\r\n",
    b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
];

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0xdead_beef);
    let mut tally = Tally::default();
    for _ in 0..2000 {
        let len = rng.below(200);
        // Random bytes alone never get past the request line (a bare LF ends nearly all of
        // them), so most inputs start further in: after the request line, after a Host field,
        // or inside a body.
        let mut input = PREFIXES[rng.below(PREFIXES.len())].to_vec();
        for _ in 0..len {
            // A CR alone is an error, so lines end in CRLF often enough for some to be whole.
            if rng.below(8) == 0 {
                input.extend(b"\r\n");
            } else {
                input.push(SPECIAL[rng.below(SPECIAL.len())]);
            }
        }
        let whole = run_pieces([&input[..]], Limits::default());
        assert_eq!(run_pieces(input.chunks(1), Limits::default()), whole);
        tally.add(&whole);
    }
    eprintln!("random bytes: {tally:?}");
    // About a third of what the seeded run saw when this was written (after each). Random
    // bytes never form trailers or a second request, so those have no minimum.
    let t = &tally;
    t.at_least("refused", t.refused, 600); // 1822
    t.at_least("kinds of error", t.kinds.len(), 7); // 10
    t.at_least("complete", t.complete, 15); // 47
    t.at_least("mid-message", t.mid_message, 3); // 10
    t.at_least("waiting", t.waiting, 40); // 121
    t.at_least("heads", t.heads, 280); // 839
    t.at_least("bodies", t.bodies, 130); // 392
}
