//! The harness of the client role: feeds what an origin sends to a fresh `ResponseDecoder`
//! split every way, optionally followed by the origin closing the connection, and
//! checks that the outcome is the same however the bytes arrive.
//!
//! As for requests, the `Data` of one response is concatenated, and the outcome records the
//! error (kind and whether the final head had been received), the bytes left over and whether
//! the decoder is idle. Along the way the harness checks the event grammar (Interim*, Head,
//! Data*, End), that no Data is empty, the decoder's invariants after every call, and that a
//! poisoned decoder keeps returning its error. After each End it arms the decoder for the next
//! request of the script, as the proxy does when it reuses the connection.

use bytes::BytesMut;
use http::{HeaderMap, Method};
use squall_h1::{
    OriginHead, ResponseDecoder, ResponseError, ResponseErrorKind, ResponseEvent, ResponseLimits,
};

use super::{piece_sizes, split_points};

/// What the origin is answering, and how the exchange ends.
#[derive(Debug, Clone)]
pub struct Script {
    /// The method of each request sent, in order: one response is expected per entry.
    pub methods: Vec<Method>,
    /// The origin closes the connection after the input (`eof` is called).
    pub eof: bool,
    pub limits: ResponseLimits,
}

impl Script {
    /// Responses to GETs, the connection left open.
    pub fn get(responses: usize) -> Self {
        Self {
            methods: vec![Method::GET; responses],
            eof: false,
            limits: ResponseLimits::default(),
        }
    }

    /// One response to `method`.
    pub fn one(method: Method) -> Self {
        Self {
            methods: vec![method],
            ..Self::get(1)
        }
    }

    /// The same, with the origin closing the connection at the end.
    pub fn then_eof(self) -> Self {
        Self { eof: true, ..self }
    }

    pub fn with_limits(self, limits: ResponseLimits) -> Self {
        Self { limits, ..self }
    }
}

/// One message-level item of a decoded stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Interim(Box<OriginHead>),
    Head(Box<OriginHead>),
    /// All the body bytes of one response (only when there are some).
    Body(Vec<u8>),
    End(Option<HeaderMap>),
}

/// Everything observable about decoding one input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub items: Vec<Item>,
    pub error: Option<ResponseError>,
    pub leftover: Vec<u8>,
    pub idle: bool,
}

impl Outcome {
    /// The final heads, in order.
    pub fn heads(&self) -> Vec<&OriginHead> {
        self.items
            .iter()
            .filter_map(|item| match item {
                Item::Head(h) => Some(&**h),
                _ => None,
            })
            .collect()
    }

    /// The only final head; panics unless there is exactly one.
    pub fn head(&self) -> &OriginHead {
        let heads = self.heads();
        assert_eq!(heads.len(), 1, "{self:#?}");
        heads[0]
    }

    /// The body of the `n`th response (empty when it had none).
    pub fn body(&self, n: usize) -> Vec<u8> {
        let mut response = 0;
        for item in &self.items {
            match item {
                Item::Body(b) if response == n => return b.clone(),
                Item::End(_) => response += 1,
                _ => {}
            }
        }
        Vec::new()
    }

    /// The kind of the error; panics when there was none.
    pub fn error_kind(&self) -> ResponseErrorKind {
        self.error
            .unwrap_or_else(|| panic!("expected an error: {self:#?}"))
            .kind()
    }
}

/// Grammar state of the harness: where in a response the events are.
#[derive(Debug, Default)]
struct Grammar {
    /// The final head has been seen and End not yet.
    in_body: bool,
    /// Responses ended so far.
    ended: usize,
}

/// Decodes `pieces` in order, as the script says.
pub fn run_pieces<'a>(pieces: impl IntoIterator<Item = &'a [u8]>, script: &Script) -> Outcome {
    let mut decoder = ResponseDecoder::new(script.limits, &script.methods[0]);
    let mut buf = BytesMut::new();
    let mut outcome = Outcome {
        items: Vec::new(),
        error: None,
        leftover: Vec::new(),
        idle: false,
    };
    let mut grammar = Grammar::default();
    for piece in pieces {
        buf.extend_from_slice(piece);
        // Each event consumes a byte or follows one that did, so this bound is generous, and
        // running out of it is a bug to report, not a reason to stop reading quietly.
        let bound = 2 * buf.len() + 4;
        for call in 0.. {
            assert!(
                call <= bound,
                "the decoder returned an event on each of {call} calls for one piece (the bound \
                 of 2 calls per buffered byte + 4, {bound}, ran out)"
            );
            match decoder.decode(&mut buf) {
                Ok(Some(event)) => push(&mut outcome, &mut grammar, &mut decoder, script, event),
                Ok(None) => break,
                Err(e) => return poisoned(outcome, &mut decoder, &mut buf, e),
            }
            decoder.check_invariants();
        }
    }
    if script.eof {
        // At the close only a body delimited by the close can end, and only once; the next
        // response expected is then an error. A third event means the decoder is looping.
        let bound = 3;
        for call in 0.. {
            assert!(
                call < bound,
                "eof() returned an event on each of {call} calls (the bound, {bound}, ran out)"
            );
            match decoder.eof() {
                Ok(Some(event)) => {
                    assert!(matches!(event, ResponseEvent::End { trailers: None }));
                    push(&mut outcome, &mut grammar, &mut decoder, script, event);
                }
                Ok(None) => break,
                Err(e) => return poisoned(outcome, &mut decoder, &mut buf, e),
            }
            decoder.check_invariants();
        }
    }
    outcome.leftover = buf.to_vec();
    outcome.idle = decoder.is_idle();
    outcome
}

/// Records an error after checking that the decoder keeps returning it.
fn poisoned(
    mut outcome: Outcome,
    decoder: &mut ResponseDecoder,
    buf: &mut BytesMut,
    e: ResponseError,
) -> Outcome {
    assert_eq!(
        decoder.decode(buf),
        Err(e),
        "the same error after poisoning"
    );
    assert_eq!(decoder.eof(), Err(e), "the same error from eof");
    assert!(!decoder.is_idle());
    assert_eq!(e.head_received(), decoder.head_received());
    assert_eq!(e.retryable_if_idempotent(), !e.head_received());
    assert_eq!(e.fault(), squall_h1::Fault::Origin);
    // The leftover after an error depends on the reads; nobody reads it, the connection closes.
    outcome.error = Some(e);
    outcome
}

fn push(
    outcome: &mut Outcome,
    grammar: &mut Grammar,
    decoder: &mut ResponseDecoder,
    script: &Script,
    event: ResponseEvent,
) {
    match event {
        ResponseEvent::Interim(head) => {
            assert!(!grammar.in_body, "Interim after the final head");
            assert!(head.status.is_informational() && !decoder.head_received());
            outcome.items.push(Item::Interim(Box::new(head)));
        }
        ResponseEvent::Head(head) => {
            assert!(!grammar.in_body, "two final heads");
            assert!(!head.status.is_informational() && decoder.head_received());
            grammar.in_body = true;
            outcome.items.push(Item::Head(Box::new(head)));
        }
        ResponseEvent::Data(data) => {
            assert!(grammar.in_body, "Data outside a body");
            assert!(!data.is_empty(), "empty Data event");
            match outcome.items.last_mut() {
                Some(Item::Body(body)) => body.extend_from_slice(&data),
                _ => outcome.items.push(Item::Body(data.to_vec())),
            }
        }
        ResponseEvent::End { trailers } => {
            assert!(grammar.in_body, "End without a head");
            if let Some(t) = &trailers {
                assert!(!t.is_empty(), "Some(trailers) must not be empty");
            }
            assert!(decoder.is_idle());
            grammar.in_body = false;
            grammar.ended += 1;
            outcome.items.push(Item::End(trailers));
            // The proxy sends the next request on the kept-alive connection, and says so.
            if let Some(method) = script.methods.get(grammar.ended) {
                decoder.expect(method);
                assert!(!decoder.is_idle() && !decoder.head_received());
            }
        }
    }
}

/// Decodes `input` whole, in pieces of every size 1, 2, 3, ... and split once at every point;
/// asserts every run has the same outcome and returns it.
pub fn decode_all_ways(input: &[u8], script: &Script) -> Outcome {
    let whole = run_pieces([input], script);
    for size in piece_sizes(input.len()) {
        let outcome = run_pieces(input.chunks(size), script);
        assert_eq!(
            outcome, whole,
            "pieces of {size} bytes differ from the whole input"
        );
    }
    for at in split_points(input.len()) {
        let (a, b) = input.split_at(at);
        let outcome = run_pieces([a, b], script);
        assert_eq!(outcome, whole, "split at {at} differs from the whole input");
    }
    whole
}

/// The error an input is refused with, every way.
pub fn error(input: &[u8], script: &Script) -> ResponseError {
    let outcome = decode_all_ways(input, script);
    outcome
        .error
        .unwrap_or_else(|| panic!("expected an error: {outcome:#?}"))
}
