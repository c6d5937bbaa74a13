//! Targeted cache control: the response fields that speak to this cache alone, ahead of
//! Cache-Control. RFC 9213 targeted fields (the configured `cache.target_header`, then
//! `CDN-Cache-Control`), then `Surrogate-Control` as Varnish and Fastly read it.
//!
//! Why a parser of its own: RFC 9213 §2.1 defines targeted fields as Structured Fields
//! Dictionaries (RFC 8941 §3.2), whose error handling differs from Cache-Control's. A field that
//! does not parse, or is empty, is ignored as if absent (the cache falls back to the next field,
//! and finally to Cache-Control); inside a valid field the reading is lenient the way §2.1
//! asks: parameters are ignored, unknown directives are ignored, and a directive whose value has
//! the wrong type (`max-age=1.5`, `max-age="60"`, `no-store=3`) is not consumed.
//!
//! Surrogate-Control predates structured fields: it is read with the Cache-Control parser, and
//! only `max-age` (its `+stale` suffix dropped) and `no-store` count. A Surrogate-Control that
//! carries neither (only `content="ESI/1.0"`, say) is not a policy and is passed over.

use http::HeaderMap;
use http::header::{HeaderName, HeaderValue};

use crate::directives::{self, DELTA_SECONDS_MAX, Directive};

/// `CDN-Cache-Control` (RFC 9213 §3).
pub const CDN_CACHE_CONTROL: &str = "cdn-cache-control";
/// `Surrogate-Control` (Edge Architecture 1.0, as Varnish and Fastly honour it).
pub const SURROGATE_CONTROL: &str = "surrogate-control";

/// The value of a targeted directive, mapped from its structured type (RFC 9213 §2.1) to what
/// the policy can consume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    /// A bare key or `?1`.
    True,
    /// `?0`: the directive is not set.
    False,
    /// A non-negative Integer, clamped to 2^31 as delta-seconds are.
    Seconds(u64),
    /// A String (a field-name list for `private` and `no-cache`).
    Text,
    /// Any other type (negative or Decimal numbers, Tokens, Byte Sequences, Inner Lists,
    /// Dates): never consumed.
    Other,
}

/// A directive of the selected targeted field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Targeted<'a> {
    pub name: &'a str,
    pub value: Value,
}

/// The directives of the first valid, non-empty field of the target list in `headers`: the
/// configured `target`, `CDN-Cache-Control`, then `Surrogate-Control`. `None`: no targeted
/// field applies, and Cache-Control (with Expires and Pragma) decides.
pub(crate) fn select<'a>(
    headers: &'a HeaderMap,
    target: Option<&HeaderName>,
) -> Option<Vec<Targeted<'a>>> {
    let structured = target
        .into_iter()
        .map(HeaderName::as_str)
        .chain([CDN_CACHE_CONTROL]);
    for name in structured {
        if let Some(found) = dictionary(headers.get_all(name).iter()) {
            return Some(found);
        }
    }
    surrogate(headers)
}

/// Parses the lines of one field as a single Dictionary (lines join with commas, RFC 8941
/// §4.2). `None` when absent, empty or invalid.
fn dictionary<'a>(lines: impl Iterator<Item = &'a HeaderValue>) -> Option<Vec<Targeted<'a>>> {
    let mut out = Vec::new();
    for line in lines {
        let text = std::str::from_utf8(line.as_bytes()).ok()?;
        // An empty line adds nothing to the combined value (`a, , b` is not produced by
        // joining an empty line: it is dropped, RFC 9110 §5.3).
        if text.trim_matches([' ', '\t']).is_empty() {
            continue;
        }
        Parser::new(text).dictionary(&mut out)?;
    }
    (!out.is_empty()).then_some(out)
}

/// `Surrogate-Control`, when it carries `max-age` or `no-store`.
fn surrogate(headers: &HeaderMap) -> Option<Vec<Targeted<'static>>> {
    let mut out = Vec::new();
    for line in headers.get_all(SURROGATE_CONTROL) {
        directives::parse_line(line.as_bytes(), &mut |d: Directive<'_>| {
            if d.is("no-store") {
                out.push(Targeted {
                    name: "no-store",
                    value: Value::True,
                });
            } else if d.is("max-age")
                && let Some(n) = d.value.and_then(surrogate_max_age)
            {
                out.push(Targeted {
                    name: "max-age",
                    value: Value::Seconds(n),
                });
            }
        });
    }
    (!out.is_empty()).then_some(out)
}

/// `max-age=60` or `max-age=60+600` (the stale window after `+` is not used).
fn surrogate_max_age(value: &[u8]) -> Option<u64> {
    let fresh = value.split(|&b| b == b'+').next().unwrap_or(value);
    directives::delta_seconds(fresh)
}

/// A Structured Fields Dictionary parser (RFC 8941 §4.2.2), keeping what the policy needs.
struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Parser<'a> {
        Parser { text, at: 0 }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        let found = self.peek() == Some(b);
        self.at += usize::from(found);
        found
    }

    fn skip(&mut self, pred: impl Fn(u8) -> bool) {
        while self.peek().is_some_and(&pred) {
            self.at += 1;
        }
    }

    /// Appends the members of this line; a later member of the same name replaces an earlier
    /// one (§4.2.2: the last value of a key wins). `None` on any syntax error.
    fn dictionary(&mut self, out: &mut Vec<Targeted<'a>>) -> Option<()> {
        self.skip(|b| b == b' ');
        while self.peek().is_some() {
            let name = self.key()?;
            let value = if self.eat(b'=') {
                self.member_value()?
            } else {
                self.parameters()?;
                Value::True
            };
            out.retain(|t| t.name != name);
            out.push(Targeted { name, value });
            self.skip(directives::is_ows);
            if self.peek().is_none() {
                return Some(());
            }
            if !self.eat(b',') {
                return None;
            }
            self.skip(directives::is_ows);
            // A trailing comma is an error.
            self.peek()?;
        }
        Some(())
    }

    /// §4.2.3.3: lcalpha or `*`, then lcalpha, digits, `_ - . *`. Uppercase is an error.
    fn key(&mut self) -> Option<&'a str> {
        let start = self.at;
        match self.peek() {
            Some(b) if b.is_ascii_lowercase() || b == b'*' => self.at += 1,
            _ => return None,
        }
        self.skip(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-.*".contains(&b));
        Some(&self.text[start..self.at])
    }

    fn member_value(&mut self) -> Option<Value> {
        if self.peek() == Some(b'(') {
            self.inner_list()?;
            self.parameters()?;
            return Some(Value::Other);
        }
        let value = self.bare_item()?;
        self.parameters()?;
        Some(value)
    }

    /// §4.2.1.2: `(` items separated by spaces `)`.
    fn inner_list(&mut self) -> Option<()> {
        self.eat(b'(');
        loop {
            self.skip(|b| b == b' ');
            if self.eat(b')') {
                return Some(());
            }
            self.bare_item()?;
            self.parameters()?;
            match self.peek() {
                Some(b' ' | b')') => {}
                _ => return None,
            }
        }
    }

    /// §4.2.3.2: `;key[=bare-item]`, any number; their values are ignored (RFC 9213 §2.1).
    fn parameters(&mut self) -> Option<()> {
        while self.eat(b';') {
            self.skip(|b| b == b' ');
            self.key()?;
            if self.eat(b'=') {
                self.bare_item()?;
            }
        }
        Some(())
    }

    fn bare_item(&mut self) -> Option<Value> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => self.number(),
            b'"' => self.string().map(|()| Value::Text),
            b'?' => self.boolean(),
            b':' => self.byte_sequence().map(|()| Value::Other),
            // RFC 9651 §3.3.7 Date: `@` and an Integer.
            b'@' => {
                self.at += 1;
                self.number().map(|_| Value::Other)
            }
            b if b.is_ascii_alphabetic() || b == b'*' => {
                self.at += 1;
                self.skip(|b| is_tchar(b) || b == b':' || b == b'/');
                Some(Value::Other)
            }
            _ => None,
        }
    }

    /// §4.2.4: an Integer (at most 15 digits) or a Decimal (at most 12 digits, a dot, 1 to 3
    /// digits). Only a non-negative Integer is consumed, as delta-seconds.
    fn number(&mut self) -> Option<Value> {
        let negative = self.eat(b'-');
        let start = self.at;
        self.skip(|b| b.is_ascii_digit());
        let digits = &self.text[start..self.at];
        if digits.is_empty() {
            return None;
        }
        if self.eat(b'.') {
            let frac = self.at;
            self.skip(|b| b.is_ascii_digit());
            let frac_len = self.at - frac;
            return (digits.len() <= 12 && (1..=3).contains(&frac_len)).then_some(Value::Other);
        }
        if digits.len() > 15 {
            return None;
        }
        if negative {
            return Some(Value::Other);
        }
        let n = directives::delta_seconds(digits.as_bytes()).unwrap_or(DELTA_SECONDS_MAX);
        Some(Value::Seconds(n))
    }

    /// §4.2.5: printable ASCII between quotes; only `\"` and `\\` are escapes.
    fn string(&mut self) -> Option<()> {
        self.eat(b'"');
        loop {
            match self.peek()? {
                b'"' => {
                    self.at += 1;
                    return Some(());
                }
                b'\\' => {
                    self.at += 1;
                    if !matches!(self.peek()?, b'"' | b'\\') {
                        return None;
                    }
                    self.at += 1;
                }
                0x20..=0x7e => self.at += 1,
                _ => return None,
            }
        }
    }

    /// §4.2.8: `?0` or `?1`.
    fn boolean(&mut self) -> Option<Value> {
        self.eat(b'?');
        let value = match self.peek()? {
            b'1' => Value::True,
            b'0' => Value::False,
            _ => return None,
        };
        self.at += 1;
        Some(value)
    }

    /// §4.2.7: `:` base64 `:`.
    fn byte_sequence(&mut self) -> Option<()> {
        self.eat(b':');
        self.skip(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
        self.eat(b':').then_some(())
    }
}

/// RFC 9110 §5.6.2 tchar.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(fields: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in fields {
            h.append(
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_bytes(v.as_bytes()).unwrap(),
            );
        }
        h
    }

    fn parsed(value: &str) -> Option<Vec<(String, Value)>> {
        let h = map(&[("cdn-cache-control", value)]);
        let got = select(&h, None)?;
        Some(got.iter().map(|t| (t.name.to_owned(), t.value)).collect())
    }

    fn pairs(list: &[(&str, Value)]) -> Option<Vec<(String, Value)>> {
        Some(list.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect())
    }

    #[test]
    fn dictionary_members_map_to_values() {
        assert_eq!(
            parsed("max-age=60, no-store, private=\"set-cookie\", must-revalidate=?1"),
            pairs(&[
                ("max-age", Value::Seconds(60)),
                ("no-store", Value::True),
                ("private", Value::Text),
                ("must-revalidate", Value::True),
            ])
        );
        assert_eq!(
            parsed("no-cache=?0;x=1, max-age=1.5, s-maxage=-3, a=tok, b=:AQ==:, c=(1 2), d=@5"),
            pairs(&[
                ("no-cache", Value::False),
                ("max-age", Value::Other),
                ("s-maxage", Value::Other),
                ("a", Value::Other),
                ("b", Value::Other),
                ("c", Value::Other),
                ("d", Value::Other),
            ])
        );
        // Parameters are ignored; the last of a repeated key wins; huge values clamp.
        assert_eq!(
            parsed("max-age=10;foo=bar, max-age=999999999999"),
            pairs(&[("max-age", Value::Seconds(DELTA_SECONDS_MAX))])
        );
    }

    #[test]
    fn invalid_or_empty_fields_are_ignored() {
        for bad in [
            "Max-Age=60",
            "max-age=60,",
            "max-age=60;",
            "max-age=\"60",
            "max-age=60 no-store",
            "max-age=1234567890123456",
            "max-age=1.2345",
            "=60",
            "max-age=é",
            "",
            "  ",
        ] {
            assert_eq!(parsed(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn lines_join_into_one_dictionary() {
        let h = map(&[
            ("cdn-cache-control", "max-age=60"),
            ("cdn-cache-control", "no-store"),
        ]);
        assert_eq!(select(&h, None).map(|v| v.len()), Some(2));
        // One bad line spoils the field.
        let h = map(&[
            ("cdn-cache-control", "max-age=60"),
            ("cdn-cache-control", "No-Store"),
        ]);
        assert_eq!(select(&h, None), None);
    }

    #[test]
    fn the_target_list_is_in_order() {
        let target = HeaderName::from_static("squall-cache-control");
        let h = map(&[
            ("squall-cache-control", "max-age=1"),
            ("cdn-cache-control", "max-age=2"),
            ("surrogate-control", "max-age=3"),
        ]);
        let first = |h: &HeaderMap, t| select(h, t).unwrap()[0].value;
        assert_eq!(first(&h, Some(&target)), Value::Seconds(1));
        assert_eq!(first(&h, None), Value::Seconds(2));
        let h = map(&[
            ("squall-cache-control", "bad value!"),
            ("cdn-cache-control", ""),
            ("surrogate-control", "max-age=3+600"),
        ]);
        assert_eq!(first(&h, Some(&target)), Value::Seconds(3));
    }

    #[test]
    fn surrogate_control_counts_only_max_age_and_no_store() {
        let s = |v: &str| {
            let h = map(&[("surrogate-control", v)]);
            let got = select(&h, None)?;
            Some(got.iter().map(|t| (t.name.to_owned(), t.value)).collect())
        };
        assert_eq!(s("content=\"ESI/1.0\""), None);
        assert_eq!(s("max-age=abc"), None);
        assert_eq!(
            s("content=\"ESI/1.0\", no-store"),
            pairs(&[("no-store", Value::True)])
        );
        assert_eq!(
            s("max-age=30+60"),
            pairs(&[("max-age", Value::Seconds(30))])
        );
    }
}
