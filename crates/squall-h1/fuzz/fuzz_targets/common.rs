//! What the HTTP/1.1 targets share: feeding a decoder whole and split at a point the fuzzer
//! chooses, and a transcript of what it produced that must not depend on the split.

use bytes::BytesMut;

/// One step of a decoder: `Ok(None)` wants more bytes.
pub type Step<E> = Result<Option<E>, String>;

/// The outcome of a run, independent of how the bytes arrived: body pieces are joined (they
/// follow the reads), everything else is kept in order.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Transcript {
    pub items: Vec<Item>,
    pub error: Option<String>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Item {
    Event(String),
    Data(Vec<u8>),
}

impl Transcript {
    pub fn push(&mut self, item: String) {
        self.items.push(Item::Event(item));
    }

    pub fn data(&mut self, bytes: &[u8]) {
        assert!(!bytes.is_empty(), "a Data event is never empty");
        match self.items.last_mut() {
            Some(Item::Data(data)) => data.extend_from_slice(bytes),
            _ => self.items.push(Item::Data(bytes.to_vec())),
        }
    }
}

/// Feeds `input` in the pieces `cuts` gives, calling `step` until it wants more bytes or
/// fails, and `record` for each event. Bounded: every event must consume input or end a
/// message, so more events than twice the input's bytes (plus a few) is a loop.
pub fn feed<E>(
    input: &[u8],
    cuts: &[usize],
    mut step: impl FnMut(&mut BytesMut) -> Step<E>,
    mut record: impl FnMut(&mut Transcript, E),
) -> Transcript {
    let mut transcript = Transcript::default();
    let mut buf = BytesMut::new();
    let mut events = 0usize;
    let mut from = 0;
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        let cut = cut.clamp(from, input.len());
        buf.extend_from_slice(&input[from..cut]);
        from = cut;
        loop {
            match step(&mut buf) {
                Ok(Some(event)) => {
                    events += 1;
                    assert!(events <= 2 * input.len() + 8, "the decoder loops");
                    record(&mut transcript, event);
                }
                Ok(None) => break,
                Err(error) => {
                    transcript.error = Some(error);
                    return transcript;
                }
            }
        }
    }
    transcript
}

/// Where the fuzzer's byte puts the cut in `len` bytes.
pub fn cut(selector: u8, len: usize) -> usize {
    len * usize::from(selector) / 255
}
