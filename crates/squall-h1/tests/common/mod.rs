//! The test harness: feeds an input to a fresh decoder split every way and checks
//! that the outcome is the same however the bytes arrive.
//!
//! The outcome is normalised so that it can be compared across splits: the `Data` events of
//! one message are concatenated (their boundaries follow the reads, by design), and the
//! outcome records the error kind, the bytes left in the buffer and whether the decoder is
//! between messages. Along the way the harness checks the event grammar (Head, Data*, End),
//! that no Data is empty, that the decoder's invariants hold after every call, and that a
//! poisoned decoder keeps returning its error.
#![allow(dead_code)] // each test binary uses its own subset

pub mod response;

use bytes::BytesMut;
use http::{HeaderMap, StatusCode};
use squall_h1::{ErrorKind, Event, Limits, RequestDecoder, RequestHead};

/// One message-level item of a decoded stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Head(Box<RequestHead>),
    /// All the body bytes of one message (only when there are some).
    Body(Vec<u8>),
    End(Option<HeaderMap>),
}

/// Everything observable about decoding one input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub items: Vec<Item>,
    pub error: Option<ErrorKind>,
    pub leftover: Vec<u8>,
    pub between_messages: bool,
}

impl Outcome {
    /// The heads, in order.
    pub fn heads(&self) -> Vec<&RequestHead> {
        self.items
            .iter()
            .filter_map(|item| match item {
                Item::Head(h) => Some(&**h),
                _ => None,
            })
            .collect()
    }

    /// The only head; panics unless there is exactly one.
    pub fn head(&self) -> &RequestHead {
        let heads = self.heads();
        assert_eq!(heads.len(), 1, "{self:#?}");
        heads[0]
    }

    /// The status of the error; panics when there was none.
    pub fn status(&self) -> StatusCode {
        self.error
            .unwrap_or_else(|| panic!("expected an error: {self:#?}"))
            .status()
    }
}

/// Decodes `input` fed as the given pieces.
pub fn run_pieces<'a>(pieces: impl IntoIterator<Item = &'a [u8]>, limits: Limits) -> Outcome {
    let mut decoder = RequestDecoder::new(limits);
    let mut buf = BytesMut::new();
    let mut outcome = Outcome {
        items: Vec::new(),
        error: None,
        leftover: Vec::new(),
        between_messages: true,
    };
    let mut in_message = false;
    for piece in pieces {
        buf.extend_from_slice(piece);
        // A decoder that never stops returning events would hang; each event consumes a byte
        // or follows one that did, so this bound is generous, and running out of it is a bug
        // to report, not a reason to stop reading quietly.
        let bound = 2 * buf.len() + 4;
        for call in 0.. {
            assert!(
                call <= bound,
                "the decoder returned an event on each of {call} calls for one piece (the bound \
                 of 2 calls per buffered byte + 4, {bound}, ran out)"
            );
            match decoder.decode(&mut buf) {
                Ok(Some(event)) => push_event(&mut outcome, &mut in_message, event),
                Ok(None) => break,
                Err(e) => {
                    let again = decoder
                        .decode(&mut buf)
                        .expect_err("a poisoned decoder errs again");
                    assert_eq!(again.kind(), e.kind(), "the same error after poisoning");
                    assert_eq!(e.status(), e.kind().status());
                    assert!(!decoder.is_between_messages());
                    // What is left in the buffer after an error depends on the reads; nobody
                    // looks at it, since the connection is closed.
                    outcome.error = Some(e.kind());
                    outcome.between_messages = false;
                    return outcome;
                }
            }
            decoder.check_invariants();
        }
    }
    outcome.leftover = buf.to_vec();
    outcome.between_messages = decoder.is_between_messages();
    assert_eq!(outcome.between_messages, !in_message);
    outcome
}

fn push_event(outcome: &mut Outcome, in_message: &mut bool, event: Event) {
    match event {
        Event::Head(head) => {
            assert!(!*in_message, "Head inside a message");
            *in_message = true;
            outcome.items.push(Item::Head(Box::new(head)));
        }
        Event::Data(data) => {
            assert!(*in_message, "Data outside a message");
            assert!(!data.is_empty(), "empty Data event");
            match outcome.items.last_mut() {
                Some(Item::Body(body)) => body.extend_from_slice(&data),
                _ => outcome.items.push(Item::Body(data.to_vec())),
            }
        }
        Event::End { trailers } => {
            assert!(*in_message, "End outside a message");
            if let Some(t) = &trailers {
                assert!(!t.is_empty(), "Some(trailers) must not be empty");
            }
            *in_message = false;
            outcome.items.push(Item::End(trailers));
        }
    }
}

/// Decodes `input` whole, in pieces of every size 1, 2, 3, ... and split once at every point;
/// asserts every run has the same outcome and returns it. Long inputs get a sample of sizes
/// and points so that a test stays well under a second.
pub fn decode_all_ways(input: &[u8], limits: Limits) -> Outcome {
    let whole = run_pieces([input], limits);
    for size in piece_sizes(input.len()) {
        let outcome = run_pieces(input.chunks(size), limits);
        assert_eq!(
            outcome, whole,
            "pieces of {size} bytes differ from the whole input"
        );
    }
    for at in split_points(input.len()) {
        let (a, b) = input.split_at(at);
        let outcome = run_pieces([a, b], limits);
        assert_eq!(outcome, whole, "split at {at} differs from the whole input");
    }
    whole
}

pub fn piece_sizes(len: usize) -> Vec<usize> {
    if len <= 400 {
        return (1..=len.max(1)).collect();
    }
    let mut sizes: Vec<usize> = (1..=40).collect();
    let mut size = 41;
    while size < len {
        sizes.push(size);
        size = size * 3 / 2;
    }
    sizes.push(len);
    sizes
}

pub fn split_points(len: usize) -> Vec<usize> {
    if len <= 2000 {
        return (0..=len).collect();
    }
    let step = len / 500;
    (0..=len)
        .filter(|at| at % step == 0 || *at < 64 || len - at < 64)
        .collect()
}

/// Decodes with default limits, every way.
pub fn decode(input: &[u8]) -> Outcome {
    decode_all_ways(input, Limits::default())
}

/// The status a request is refused with (default limits), every way.
pub fn status(input: &[u8]) -> StatusCode {
    decode(input).status()
}

/// The error kind a request is refused with, every way.
pub fn error_kind(input: &[u8], limits: Limits) -> ErrorKind {
    let outcome = decode_all_ways(input, limits);
    outcome
        .error
        .unwrap_or_else(|| panic!("expected an error: {outcome:#?}"))
}

/// `Bytes`-free body of the first message, for short assertions.
pub fn body(outcome: &Outcome) -> Vec<u8> {
    outcome
        .items
        .iter()
        .find_map(|item| match item {
            Item::Body(b) => Some(b.clone()),
            _ => None,
        })
        .unwrap_or_default()
}
