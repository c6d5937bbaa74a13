//! A request's regular fields as the HPACK decoder wrote them: one `Bytes` and the spans of
//! each name and value in it, in received order.
//!
//! Why not `http::HeaderMap`: building one costs a hash, a name parse and an entry per field,
//! most of the cost of a request head. The decoder already writes a block's fields into one
//! buffer ([`squall_hpack::Decoder::decode_spans`]); the request keeps that buffer and the
//! spans of the fields that passed validation, and the server turns them into its own field
//! list without copying (`squall_h1::Fields::from_parts`). `squall-h3`'s requests carry the
//! same type: QPACK's fields are decoded one by one into one buffer ([`crate::head::push_field`]).

use std::fmt;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};

/// The regular fields of a request (or trailers), validated as RFC 9113 §8.2 (and RFC 9114
/// §4.2, the same rules) requires: lowercase token names of at most 65,535 bytes, none
/// connection-specific, values of field value bytes with no whitespace at either end.
/// Several `cookie` fields are one.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct HeaderFields {
    bytes: Bytes,
    spans: Vec<FieldSpan>,
}

/// Where one field's name and value lie in the buffer of [`HeaderFields::into_parts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldSpan {
    pub name: u32,
    pub name_len: u32,
    pub value: u32,
    pub value_len: u32,
}

impl HeaderFields {
    /// Fields over `bytes`; every span lies within it (the validation's constructor).
    pub(crate) fn new(bytes: Bytes, spans: Vec<FieldSpan>) -> HeaderFields {
        debug_assert!(spans.iter().all(|s| {
            s.name_len > 0
                && (s.name + s.name_len) as usize <= bytes.len()
                && (s.value + s.value_len) as usize <= bytes.len()
        }));
        HeaderFields { bytes, spans }
    }

    /// The first value of `name` (lowercase, as HTTP/2 and HTTP/3 names are).
    pub fn get<'a>(&'a self, name: &'a str) -> Option<&'a [u8]> {
        self.get_all(name).next()
    }

    /// Every value of `name` (lowercase), in order.
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.iter()
            .filter(move |(n, _)| *n == name.as_bytes())
            .map(|(_, v)| v)
    }

    /// Every field as (name, value), in received order (a joined cookie last).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.spans
            .iter()
            .map(|s| (self.name_at(s), self.value_at(s)))
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The buffer and the spans into it, for a caller building its own field list.
    pub fn into_parts(self) -> (Bytes, Vec<FieldSpan>) {
        (self.bytes, self.spans)
    }

    /// The fields as an `http` map (values share the buffer), for trailers and tests.
    pub fn to_header_map(&self) -> HeaderMap {
        let mut map = HeaderMap::with_capacity(self.len());
        for span in &self.spans {
            // Both were validated: a token name, field value bytes (see the type's docs).
            let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(self.name_at(span)),
                HeaderValue::from_maybe_shared(
                    self.bytes
                        .slice(span.value as usize..(span.value + span.value_len) as usize),
                ),
            ) else {
                continue;
            };
            map.append(name, value);
        }
        map
    }

    fn name_at(&self, span: &FieldSpan) -> &[u8] {
        &self.bytes[span.name as usize..(span.name + span.name_len) as usize]
    }

    fn value_at(&self, span: &FieldSpan) -> &[u8] {
        &self.bytes[span.value as usize..(span.value + span.value_len) as usize]
    }
}

impl fmt::Debug for HeaderFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        f.debug_map()
            .entries(self.iter().map(|(n, v)| (text(n), text(v))))
            .finish()
    }
}
