//! The field lines of a request head, kept as spans into the bytes they arrived in.
//!
//! Why not `http::HeaderMap`: building one costs a hash, a name parse and an entry per field,
//! which measured as most of the cost of decoding a head (docs/PERFORMANCE.md). A [`Fields`]
//! is the head's `Bytes` (one slice of the receive buffer) and one `Vec` of offsets in
//! received order, filled in one pass; nothing is allocated per field. Lookups scan the list,
//! comparing names ASCII-case-insensitively: requests carry a dozen fields or so, and the
//! server asks for a handful per request.
//!
//! The API follows `HeaderMap`'s where the request path uses it (`get`, `get_all`,
//! `contains_key`, `iter`, `remove`, `insert`, `append`), so that callers read the same.
//! Fields added after the parse (the cluster's hop field, the cache's conditionals) are owned
//! and kept apart, after the received ones; a removed field is marked, not moved.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::fields::split_host_port;

/// The field lines of a request, as received, with owned additions after them.
#[derive(Clone, Default)]
pub struct Fields {
    /// The bytes the spans point into: the request head as received, or a buffer built for
    /// fields that came another way (HTTP/2, a stored request).
    bytes: Bytes,
    /// One entry per received field line, in order; a removed line has `name_len == 0`.
    spans: Vec<Span>,
    /// The value of a Host line made from HTTP/2's or HTTP/3's `:authority`, which lies in
    /// `bytes` as the received lines do ([`Fields::add_authority`]): listed after them, as
    /// `host`. Kept as a span, not as an added line, so that every such request does not
    /// count a shared buffer up and down and check the value again.
    authority: Option<(u32, u32)>,
    /// Fields added after the parse, in the order added (the cluster's hop field, the cache's
    /// conditionals: not on the common path, so not inline, which would make every head
    /// larger).
    extra: Vec<(HeaderName, HeaderValue)>,
    /// The host part (no port) of the received Host field, found during the parse so that
    /// [`Fields::host`] does not parse Host again. `None` once that line is removed.
    host: Option<(u32, u32)>,
}

/// Where one field line's name and value lie in [`Fields::bytes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    name: u32,
    name_len: u32,
    value: u32,
    value_len: u32,
}

/// A field name to look up: an `http` name (`header::HOST`), or a `&str` in any case.
pub trait AsFieldName {
    fn as_field_name(&self) -> &str;
}

/// A field's name as received (any case; names compare ASCII-case-insensitively).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct FieldName<'a>(&'a str);

/// A field's value: the bytes between the colon and the line end, whitespace trimmed.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FieldValue<'a>(&'a [u8]);

/// A value holds bytes other than visible ASCII, space and tab (`FieldValue::to_str`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the field value is not visible ASCII")]
pub struct ToStrError;

/// The values of one name, in order ([`Fields::get_all`]).
#[derive(Clone)]
pub struct GetAll<'a> {
    iter: Iter<'a>,
    name: &'a str,
}

/// Every field, received ones first, then the added ones ([`Fields::iter`]).
#[derive(Clone)]
pub struct Iter<'a> {
    fields: &'a Fields,
    spans: std::slice::Iter<'a, Span>,
    authority: Option<&'a [u8]>,
    extra: std::slice::Iter<'a, (HeaderName, HeaderValue)>,
}

impl Fields {
    /// An empty list.
    pub fn new() -> Fields {
        Fields::default()
    }

    /// Fields whose spans point into `bytes`; the parser's constructor.
    pub(crate) fn with_capacity(bytes: Bytes, capacity: usize) -> Fields {
        Fields {
            bytes,
            spans: Vec::with_capacity(capacity),
            authority: None,
            extra: Vec::new(),
            host: None,
        }
    }

    /// Adds a received line; `name` and `value` are slices of `self.bytes`, `name` a token
    /// (httparse checked) of at most `u16::MAX` bytes (the caller checked).
    pub(crate) fn push_received(&mut self, name: &[u8], value: &[u8]) {
        let span = Span {
            name: self.offset_of(name),
            name_len: name.len() as u32,
            value: self.offset_of(value),
            value_len: value.len() as u32,
        };
        debug_assert!(span.name_len > 0, "httparse refuses an empty name");
        self.spans.push(span);
    }

    /// Records the received Host line's host part; `host` is a slice of `self.bytes`.
    pub(crate) fn set_host(&mut self, host: &[u8]) {
        self.host = Some((self.offset_of(host), host.len() as u32));
    }

    /// The offset of `part`, a slice of `self.bytes`, which the parser refuses past 4 GiB
    /// (`parse_head`), so that it fits in a u32.
    fn offset_of(&self, part: &[u8]) -> u32 {
        let offset = part.as_ptr() as usize - self.bytes.as_ptr() as usize;
        debug_assert!(offset + part.len() <= self.bytes.len());
        offset as u32
    }

    /// Copies `map`'s fields into one buffer, for heads that arrive without one (HTTP/2's
    /// decoded fields, a stored request): one allocation for all of them.
    pub fn from_header_map(map: &HeaderMap) -> Fields {
        let size: usize = map.iter().map(|(n, v)| n.as_str().len() + v.len()).sum();
        let mut buf = BytesMut::with_capacity(size);
        let mut spans = Vec::with_capacity(map.len());
        let mut host = None;
        for (name, value) in map {
            let at = buf.len() as u32;
            buf.put_slice(name.as_str().as_bytes());
            buf.put_slice(value.as_bytes());
            let name_len = name.as_str().len() as u32;
            let value_at = at + name_len;
            if *name == header::HOST
                && host.is_none()
                && let Some((h, _port)) = split_host_port(value.as_bytes())
            {
                host = Some((value_at, h.len() as u32));
            }
            spans.push(Span {
                name: at,
                name_len,
                value: value_at,
                value_len: value.len() as u32,
            });
        }
        Fields {
            bytes: buf.freeze(),
            spans,
            authority: None,
            extra: Vec::new(),
            host,
        }
    }

    /// Fields over `bytes` that another decoder found, each span `[name, name_len, value,
    /// value_len]` in bytes (HTTP/2's validated fields: `squall_h2::HeaderFields`), without
    /// a copy: the spans' vector is reused as the list's. `None` when a span lies outside
    /// `bytes`, has an empty name or one over 65,535 bytes, or the name is not ASCII.
    pub fn from_parts(bytes: Bytes, spans: Vec<[u32; 4]>) -> Option<Fields> {
        let within = |at: u32, len: u32| {
            at.checked_add(len)
                .is_some_and(|end| end as usize <= bytes.len())
        };
        let mut host = None;
        for &[name, name_len, value, value_len] in &spans {
            let ok = within(name, name_len)
                && within(value, value_len)
                && name_len > 0
                && name_len <= u32::from(u16::MAX);
            let name_bytes = ok.then(|| &bytes[name as usize..(name + name_len) as usize])?;
            if !name_bytes.is_ascii() {
                return None;
            }
            if host.is_none() && name_bytes.eq_ignore_ascii_case(b"host") {
                let value_bytes = &bytes[value as usize..(value + value_len) as usize];
                host = split_host_port(value_bytes).map(|(h, _port)| {
                    let at = h.as_ptr() as usize - bytes.as_ptr() as usize;
                    (at as u32, h.len() as u32)
                });
            }
        }
        let spans = spans
            .into_iter()
            .map(|[name, name_len, value, value_len]| Span {
                name,
                name_len,
                value,
                value_len,
            })
            .collect();
        Some(Fields {
            bytes,
            spans,
            authority: None,
            extra: Vec::new(),
            host,
        })
    }

    /// The fields as an `http` map, for the edges that take one (the cache's request-side
    /// functions, tests). Names are lowercased, as `http` keeps them.
    pub fn to_header_map(&self) -> HeaderMap {
        let mut map = HeaderMap::with_capacity(self.len());
        for (name, value) in self {
            map.append(name.to_header_name(), value.to_header_value());
        }
        map
    }

    /// `value`, one of this list's, as an `http` value that shares the received bytes (an
    /// added field's value is copied).
    pub fn shared_value(&self, value: FieldValue<'_>) -> HeaderValue {
        let (at, base) = (value.0.as_ptr() as usize, self.bytes.as_ptr() as usize);
        let within = at >= base && at + value.0.len() <= base + self.bytes.len();
        // `within` is what `slice_ref` requires of its argument.
        if within && let Ok(shared) = HeaderValue::from_maybe_shared(self.bytes.slice_ref(value.0))
        {
            return shared;
        }
        value.to_header_value()
    }

    /// The first value of `name`. Compares the received names' bytes as they lie, without
    /// making a `str` of each (a lookup runs several times per request).
    pub fn get<K: AsFieldName>(&self, name: K) -> Option<FieldValue<'_>> {
        let name = name.as_field_name().as_bytes();
        let same = |n: &[u8]| n.len() == name.len() && n.eq_ignore_ascii_case(name);
        let received =
            (self.spans.iter()).find(|span| span.name_len > 0 && same(self.name_bytes(**span)));
        if let Some(&span) = received {
            return Some(FieldValue(self.value_at(span)));
        }
        if let Some(authority) = self.authority_value()
            && same(b"host")
        {
            return Some(FieldValue(authority));
        }
        (self.extra.iter())
            .find(|(n, _)| same(n.as_str().as_bytes()))
            .map(|(_, v)| FieldValue(v.as_bytes()))
    }

    /// Every value of `name`, in order.
    pub fn get_all<K: AsFieldName>(&self, name: K) -> GetAll<'_> {
        // The name must outlive the iterator: standard names are static, others are looked
        // up among the list's own names so that the borrow is the list's.
        let name = name.as_field_name();
        match self.iter().find(|(n, _)| n.0.eq_ignore_ascii_case(name)) {
            Some((n, _)) => self.get_all_str(n.0),
            None => GetAll {
                iter: Iter {
                    fields: self,
                    spans: [].iter(),
                    authority: None,
                    extra: [].iter(),
                },
                name: "",
            },
        }
    }

    fn get_all_str<'a>(&'a self, name: &'a str) -> GetAll<'a> {
        GetAll {
            iter: self.iter(),
            name,
        }
    }

    pub fn contains_key<K: AsFieldName>(&self, name: K) -> bool {
        self.get(name).is_some()
    }

    /// Every field as (name, value), received ones in order, then the added ones.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            fields: self,
            spans: self.spans.iter(),
            authority: self.authority_value(),
            extra: self.extra.iter(),
        }
    }

    /// The number of field lines (a name with two lines counts twice, as `HeaderMap::len`).
    pub fn len(&self) -> usize {
        let received = self.spans.iter().filter(|s| s.name_len > 0).count();
        received + usize::from(self.authority.is_some()) + self.extra.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// About the bytes the fields take on the wire (the received head's size), for a caller
    /// reserving room to write them out.
    pub fn bytes_len(&self) -> usize {
        let authority = self.authority.map_or(0, |(_, len)| len as usize + 8);
        self.bytes.len()
            + authority
            + self
                .extra
                .iter()
                .map(|(n, v)| n.as_str().len() + v.len() + 4)
                .sum::<usize>()
    }

    /// Removes every line of `name`; true when there was one.
    pub fn remove<K: AsFieldName>(&mut self, name: K) -> bool {
        let name = name.as_field_name();
        let mut removed = false;
        for i in 0..self.spans.len() {
            let span = self.spans[i];
            if span.name_len > 0 && self.name_at(span).eq_ignore_ascii_case(name) {
                self.spans[i].name_len = 0;
                removed = true;
            }
        }
        let before = self.extra.len();
        self.extra
            .retain(|(n, _)| !n.as_str().eq_ignore_ascii_case(name));
        removed |= self.extra.len() != before;
        if name.eq_ignore_ascii_case(header::HOST.as_str()) && self.authority.take().is_some() {
            removed = true;
        }
        if removed && name.eq_ignore_ascii_case(header::HOST.as_str()) {
            self.host = None;
        }
        removed
    }

    /// Replaces every line of `name` with one line of `value`.
    pub fn insert(&mut self, name: HeaderName, value: HeaderValue) {
        self.remove(&name);
        self.extra.push((name, value));
    }

    /// Adds a line of `name` after the others.
    pub fn append(&mut self, name: HeaderName, value: HeaderValue) {
        self.extra.push((name, value));
    }

    /// Adds `authority` (HTTP/2's or HTTP/3's `:authority`, a slice of the bytes the list
    /// was made over) as the Host line, unless one was received: where `host()`, the cache
    /// key and HTTP/1.1 origins find it. Its host part is found here once, as a received
    /// Host's is at the parse. `None` when `authority` is not a valid field value.
    pub fn add_authority(&mut self, authority: Bytes) -> Option<()> {
        if self.get(header::HOST).is_some() {
            return Some(());
        }
        let base = self.bytes.as_ptr() as usize;
        let at = authority.as_ptr() as usize;
        let within = at >= base && at + authority.len() <= base + self.bytes.len();
        if !within {
            let value = HeaderValue::from_maybe_shared(authority).ok()?;
            self.extra.push((header::HOST, value));
            return Some(());
        }
        // What `HeaderValue` takes, as an added line's value would be checked.
        let valid = |&b: &u8| (b >= b' ' && b != 0x7f) || b == b'\t';
        if !authority.iter().all(valid) {
            return None;
        }
        self.authority = Some(((at - base) as u32, authority.len() as u32));
        if let Some((host, _port)) = split_host_port(&authority) {
            let offset = host.as_ptr() as usize - base;
            self.host = Some((offset as u32, host.len() as u32));
        }
        Some(())
    }

    /// The value of the Host line [`Fields::add_authority`] made, if any.
    fn authority_value(&self) -> Option<&[u8]> {
        let (at, len) = self.authority?;
        Some(&self.bytes[at as usize..(at + len) as usize])
    }

    /// The host part (no port) of the Host field, found when the head was parsed; None when
    /// there is none or it names no host. An added Host is split here.
    pub fn host(&self) -> Option<&str> {
        let host = match self.host {
            Some((at, len)) => &self.bytes[at as usize..(at + len) as usize],
            None => {
                let value = self.get(header::HOST)?;
                split_host_port(value.as_bytes())?.0
            }
        };
        let host = std::str::from_utf8(host).ok()?;
        (!host.is_empty()).then_some(host)
    }

    fn name_bytes(&self, span: Span) -> &[u8] {
        &self.bytes[span.name as usize..(span.name + span.name_len) as usize]
    }

    fn name_at(&self, span: Span) -> &str {
        let bytes = self.name_bytes(span);
        // Names were checked as tokens (ASCII) by httparse or came from a HeaderName.
        std::str::from_utf8(bytes).unwrap_or("")
    }

    fn value_at(&self, span: Span) -> &[u8] {
        &self.bytes[span.value as usize..(span.value + span.value_len) as usize]
    }
}

impl PartialEq for Fields {
    fn eq(&self, other: &Fields) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Fields {}

impl fmt::Debug for Fields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl From<&HeaderMap> for Fields {
    fn from(map: &HeaderMap) -> Fields {
        Fields::from_header_map(map)
    }
}

impl<'a> IntoIterator for &'a Fields {
    type Item = (FieldName<'a>, FieldValue<'a>);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = (FieldName<'a>, FieldValue<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        for &span in self.spans.by_ref() {
            if span.name_len > 0 {
                let name = FieldName(self.fields.name_at(span));
                return Some((name, FieldValue(self.fields.value_at(span))));
            }
        }
        if let Some(authority) = self.authority.take() {
            return Some((FieldName("host"), FieldValue(authority)));
        }
        let (name, value) = self.extra.next()?;
        Some((FieldName(name.as_str()), FieldValue(value.as_bytes())))
    }
}

impl<'a> GetAll<'a> {
    /// The values, as `HeaderMap`'s `GetAll::iter` reads.
    pub fn iter(self) -> GetAll<'a> {
        self
    }
}

impl<'a> Iterator for GetAll<'a> {
    type Item = FieldValue<'a>;

    fn next(&mut self) -> Option<FieldValue<'a>> {
        let name = self.name;
        if name.is_empty() {
            return None;
        }
        self.iter
            .by_ref()
            .find(|(n, _)| n.0.len() == name.len() && n.0.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }
}

impl<'a> FieldName<'a> {
    pub fn as_str(&self) -> &'a str {
        self.0
    }

    pub fn as_bytes(&self) -> &'a [u8] {
        self.0.as_bytes()
    }

    /// The name as `http` keeps it (lowercase; standard names allocate nothing).
    pub fn to_header_name(&self) -> HeaderName {
        // A token of at most u16::MAX bytes, checked by the parser or from a HeaderName.
        HeaderName::from_bytes(self.0.as_bytes())
            .unwrap_or_else(|_| HeaderName::from_static("invalid"))
    }
}

impl fmt::Debug for FieldName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0, f)
    }
}

impl PartialEq<HeaderName> for FieldName<'_> {
    fn eq(&self, other: &HeaderName) -> bool {
        self.0.eq_ignore_ascii_case(other.as_str())
    }
}

impl PartialEq<&str> for FieldName<'_> {
    fn eq(&self, other: &&str) -> bool {
        self.0.eq_ignore_ascii_case(other)
    }
}

impl<'a> FieldValue<'a> {
    pub fn as_bytes(&self) -> &'a [u8] {
        self.0
    }

    /// The value as text when it is visible ASCII, space and tab only (`HeaderValue::to_str`).
    pub fn to_str(&self) -> Result<&'a str, ToStrError> {
        if !self
            .0
            .iter()
            .all(|&b| b == b'\t' || (b' '..0x7f).contains(&b))
        {
            return Err(ToStrError);
        }
        std::str::from_utf8(self.0).map_err(|_| ToStrError)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// An owned copy, for the edges that keep an `http` value.
    pub fn to_header_value(&self) -> HeaderValue {
        // The bytes were checked as field-value bytes (httparse's set is HeaderValue's).
        HeaderValue::from_bytes(self.0).unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

impl fmt::Debug for FieldValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match std::str::from_utf8(self.0) {
            Ok(s) => fmt::Debug::fmt(s, f),
            Err(_) => write!(f, "{:?}", self.0),
        }
    }
}

impl PartialEq<str> for FieldValue<'_> {
    fn eq(&self, other: &str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<&str> for FieldValue<'_> {
    fn eq(&self, other: &&str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<[u8]> for FieldValue<'_> {
    fn eq(&self, other: &[u8]) -> bool {
        self.0 == other
    }
}

impl PartialEq<&[u8]> for FieldValue<'_> {
    fn eq(&self, other: &&[u8]) -> bool {
        self.0 == *other
    }
}

impl PartialEq<HeaderValue> for FieldValue<'_> {
    fn eq(&self, other: &HeaderValue) -> bool {
        self.0 == other.as_bytes()
    }
}

impl AsFieldName for HeaderName {
    fn as_field_name(&self) -> &str {
        self.as_str()
    }
}

impl AsFieldName for str {
    fn as_field_name(&self) -> &str {
        self
    }
}

impl AsFieldName for String {
    fn as_field_name(&self) -> &str {
        self
    }
}

impl<T: AsFieldName + ?Sized> AsFieldName for &T {
    fn as_field_name(&self) -> &str {
        (**self).as_field_name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed() -> Fields {
        let map = {
            let mut m = HeaderMap::new();
            m.append(header::HOST, HeaderValue::from_static("Ex.test:8080"));
            m.append(header::ACCEPT, HeaderValue::from_static("a"));
            m.append(header::ACCEPT, HeaderValue::from_static("b"));
            m.append("x-one", HeaderValue::from_static("1"));
            m
        };
        Fields::from_header_map(&map)
    }

    #[test]
    fn lookups_ignore_case_and_keep_order() {
        let fields = parsed();
        assert_eq!(fields.get(header::HOST).unwrap(), "Ex.test:8080");
        assert_eq!(fields.get("X-One").unwrap(), "1");
        let accept: Vec<_> = fields.get_all(header::ACCEPT).iter().collect();
        assert_eq!(accept, [FieldValue(b"a"), FieldValue(b"b")]);
        assert_eq!(fields.get_all("nope").count(), 0);
        assert_eq!(fields.len(), 4);
        assert_eq!(fields.host(), Some("Ex.test"));
        assert_eq!(fields.to_header_map().len(), 4);
    }

    #[test]
    fn removals_and_additions() {
        let mut fields = parsed();
        assert!(fields.remove(header::ACCEPT));
        assert!(!fields.remove(header::ACCEPT));
        assert!(!fields.contains_key(header::ACCEPT));
        fields.append(header::ACCEPT, HeaderValue::from_static("c"));
        fields.insert(
            HeaderName::from_static("x-one"),
            HeaderValue::from_static("2"),
        );
        let names: Vec<_> = fields.iter().map(|(n, v)| (n.as_str(), v)).collect();
        assert_eq!(
            names,
            [
                ("host", FieldValue(b"Ex.test:8080")),
                ("accept", FieldValue(b"c")),
                ("x-one", FieldValue(b"2")),
            ]
        );
        fields.remove(header::HOST);
        assert_eq!(fields.host(), None);
        fields.insert(header::HOST, HeaderValue::from_static("[::1]:80"));
        assert_eq!(fields.host(), Some("[::1]"));
    }

    #[test]
    fn from_parts_keeps_the_spans_and_refuses_what_lies_outside() {
        let bytes = Bytes::from_static(b"hostex.test:8443acceptx");
        let spans = vec![[0, 4, 4, 12], [16, 6, 22, 1]];
        let fields = Fields::from_parts(bytes.clone(), spans).unwrap();
        assert_eq!(fields.host(), Some("ex.test"));
        assert_eq!(fields.get(header::ACCEPT).unwrap(), "x");
        assert_eq!(fields.len(), 2);
        assert!(Fields::from_parts(bytes.clone(), vec![[16, 6, 22, 2]]).is_none());
        assert!(Fields::from_parts(bytes.clone(), vec![[0, 0, 4, 1]]).is_none());
        assert!(Fields::from_parts(bytes, vec![[u32::MAX, 2, 0, 1]]).is_none());
    }

    /// HTTP/2's `:authority` becomes a Host line listed after the received ones, found,
    /// counted, removed and replaced as any line is, with its host part at hand; a received
    /// Host keeps it from being added, and a value `HeaderValue` would refuse is refused.
    #[test]
    fn an_authority_is_the_host_line_unless_one_was_received() {
        let bytes = Bytes::from_static(b"acceptxEx.test:8443");
        let authority = bytes.slice(7..);
        let mut fields = Fields::from_parts(bytes.clone(), vec![[0, 6, 6, 1]]).unwrap();
        assert_eq!(fields.host(), None);
        fields.add_authority(authority.clone()).unwrap();
        assert_eq!(fields.host(), Some("Ex.test"));
        assert_eq!(fields.get("HOST").unwrap(), "Ex.test:8443");
        assert_eq!(fields.len(), 2);
        let lines: Vec<_> = fields.iter().map(|(n, v)| (n.as_str(), v)).collect();
        assert_eq!(
            lines,
            [
                ("accept", FieldValue(b"x")),
                ("host", FieldValue(b"Ex.test:8443"))
            ]
        );
        let map = fields.to_header_map();
        assert_eq!(map.get(header::HOST).unwrap(), "Ex.test:8443");
        assert_eq!(fields.bytes_len(), bytes.len() + "Ex.test:8443".len() + 8);
        let copy = fields.clone();
        assert_eq!(copy, fields);
        assert!(fields.remove(header::HOST));
        assert_eq!(
            (fields.host(), fields.get(header::HOST), fields.len()),
            (None, None, 1)
        );
        fields.insert(header::HOST, HeaderValue::from_static("b.test"));
        assert_eq!(fields.host(), Some("b.test"));

        // A received Host is the one kept: it must equal `:authority` anyway.
        let bytes = Bytes::from_static(b"hosta.testa.test");
        let mut fields = Fields::from_parts(bytes.clone(), vec![[0, 4, 4, 6]]).unwrap();
        fields.add_authority(bytes.slice(10..)).unwrap();
        assert_eq!(fields.len(), 1);
        // An authority from elsewhere is copied in as an added line.
        let mut fields = Fields::from_parts(bytes, vec![]).unwrap();
        fields
            .add_authority(Bytes::from_static(b"c.test:1"))
            .unwrap();
        assert_eq!((fields.host(), fields.len()), (Some("c.test"), 1));
        // A control byte is no field value.
        let bytes = Bytes::from_static(b"a\x01b");
        let mut fields = Fields::from_parts(bytes.clone(), vec![]).unwrap();
        assert_eq!(fields.add_authority(bytes), None);
        assert_eq!(fields.len(), 0);
    }

    #[test]
    fn to_str_refuses_what_header_value_refuses() {
        assert_eq!(FieldValue(b"a b\tc").to_str(), Ok("a b\tc"));
        assert_eq!(FieldValue(b"caf\xc3\xa9").to_str(), Err(ToStrError));
    }
}
