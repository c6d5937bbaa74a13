//! RFC 9218 extensible priorities: the urgency and incremental parameters a client sends in
//! the `priority` request field or a PRIORITY_UPDATE frame, and the parser of their field
//! value (an RFC 8941 structured-field dictionary). Pure functions: bytes in, parameters out.

/// Urgency levels: 0 (most urgent) to 7 (background), RFC 9218 §4.1.
pub(crate) const URGENCY_LEVELS: usize = 8;

/// The priority parameters of one response (RFC 9218 §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PriorityParams {
    /// 0..=7, lower first.
    pub urgency: u8,
    /// Whether the client uses the response as it arrives: such responses share the
    /// bandwidth of their urgency, the others go one after another.
    pub incremental: bool,
}

impl PriorityParams {
    /// A signal that leaves out a parameter means its default (RFC 9218 §4): u=3, not
    /// incremental.
    pub(crate) const SIGNALLED_DEFAULT: Self = Self {
        urgency: 3,
        incremental: false,
    };

    /// A request that sent no signal at all: RFC 9218's default urgency, shared round robin
    /// as Squall always did, so clients that know nothing of priorities see no change.
    pub(crate) const UNSIGNALLED: Self = Self {
        urgency: 3,
        incremental: true,
    };

    /// Parses the field lines of a `priority` field (or a PRIORITY_UPDATE's value, one line)
    /// starting from the defaults. `None` when a line is not a dictionary: RFC 8941 §4.2 has
    /// the whole field ignored then. Unknown parameters, and known ones out of range or of
    /// another type, are ignored (RFC 9218 §4), so their defaults stay.
    pub(crate) fn parse<'a>(lines: impl IntoIterator<Item = &'a [u8]>) -> Option<Self> {
        let mut params = Self::SIGNALLED_DEFAULT;
        for line in lines {
            // Lines of one field combine into one dictionary (RFC 8941 §4.2), where a later
            // key replaces an earlier one: parsing them in order gives the same result.
            Parser::new(line).dictionary(|key, value| match (key, value) {
                (b"u", Bare::Integer(u)) if (0..URGENCY_LEVELS as i64).contains(&u) => {
                    params.urgency = u as u8;
                }
                (b"i", Bare::Boolean(i)) => params.incremental = i,
                _ => {}
            })?;
        }
        Some(params)
    }
}

/// A member value as far as priorities care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bare {
    Integer(i64),
    Boolean(bool),
    /// Any other bare item or an inner list.
    Other,
}

/// An RFC 8941 §4.2 parser over one field line; no allocation.
struct Parser<'a> {
    input: &'a [u8],
    at: usize,
}

impl<'a> Parser<'a> {
    fn new(input: &'a [u8]) -> Self {
        Self { input, at: 0 }
    }

    fn peek(&self) -> Option<u8> {
        self.input.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let hit = self.peek() == Some(byte);
        self.at += usize::from(hit);
        hit
    }

    fn skip_while(&mut self, keep: impl Fn(u8) -> bool) {
        while self.peek().is_some_and(&keep) {
            self.at += 1;
        }
    }

    /// §4.2.2: members in order, each handed to `member` with its value (a bare key is
    /// `true`; parameters on members are parsed and dropped).
    fn dictionary(mut self, mut member: impl FnMut(&[u8], Bare)) -> Option<()> {
        self.skip_while(|b| b == b' ');
        if self.peek().is_none() {
            return Some(());
        }
        loop {
            let key = self.key()?;
            let value = match self.eat(b'=') {
                true => self.member_value()?,
                false => Bare::Boolean(true),
            };
            self.parameters()?;
            member(key, value);
            self.skip_while(|b| b == b' ' || b == b'\t');
            if self.peek().is_none() {
                return Some(());
            }
            if !self.eat(b',') {
                return None;
            }
            self.skip_while(|b| b == b' ' || b == b'\t');
            // A trailing comma is an error (§4.2.2 step 3.6).
            self.peek()?;
        }
    }

    /// §4.2.3.3: ( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" ).
    fn key(&mut self) -> Option<&'a [u8]> {
        let start = self.at;
        if !self
            .peek()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'*')
        {
            return None;
        }
        self.skip_while(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-' | b'.' | b'*')
        });
        Some(&self.input[start..self.at])
    }

    /// An item or an inner list (§4.2.1.1).
    fn member_value(&mut self) -> Option<Bare> {
        if !self.eat(b'(') {
            return self.bare_item();
        }
        loop {
            self.skip_while(|b| b == b' ');
            if self.eat(b')') {
                return Some(Bare::Other);
            }
            self.bare_item()?;
            self.parameters()?;
            if !matches!(self.peek(), Some(b' ' | b')')) {
                return None;
            }
        }
    }

    /// §4.2.3.2: *( ";" *SP key [ "=" bare-item ] ).
    fn parameters(&mut self) -> Option<()> {
        while self.eat(b';') {
            self.skip_while(|b| b == b' ');
            self.key()?;
            if self.eat(b'=') {
                self.bare_item()?;
            }
        }
        Some(())
    }

    /// §4.2.3.1.
    fn bare_item(&mut self) -> Option<Bare> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => self.number(),
            b'"' => self.string(),
            b'?' => self.boolean(),
            b':' => self.binary(),
            b if b.is_ascii_alphabetic() || b == b'*' => {
                self.at += 1;
                let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&b);
                self.skip_while(tchar);
                Some(Bare::Other)
            }
            _ => None,
        }
    }

    /// §4.2.4: an integer of at most 15 digits, or a decimal of at most 12.3.
    fn number(&mut self) -> Option<Bare> {
        let negative = self.eat(b'-');
        let start = self.at;
        self.skip_while(|b| b.is_ascii_digit());
        let digits = &self.input[start..self.at];
        if digits.is_empty() {
            return None;
        }
        if self.eat(b'.') {
            let fraction = self.at;
            self.skip_while(|b| b.is_ascii_digit());
            let places = self.at - fraction;
            return (digits.len() <= 12 && (1..=3).contains(&places)).then_some(Bare::Other);
        }
        if digits.len() > 15 {
            return None;
        }
        let value = (digits.iter()).fold(0i64, |n, &d| n * 10 + i64::from(d - b'0'));
        Some(Bare::Integer(if negative { -value } else { value }))
    }

    /// §4.2.5: printable ASCII, with `\"` and `\\` the only escapes.
    fn string(&mut self) -> Option<Bare> {
        self.at += 1;
        loop {
            match self.peek()? {
                b'"' => {
                    self.at += 1;
                    return Some(Bare::Other);
                }
                b'\\' => {
                    self.at += 1;
                    if !matches!(self.peek()?, b'"' | b'\\') {
                        return None;
                    }
                }
                0x20..=0x7e => {}
                _ => return None,
            }
            self.at += 1;
        }
    }

    /// §4.2.8: `?0` or `?1`.
    fn boolean(&mut self) -> Option<Bare> {
        self.at += 1;
        let value = match self.peek()? {
            b'0' => false,
            b'1' => true,
            _ => return None,
        };
        self.at += 1;
        Some(Bare::Boolean(value))
    }

    /// §4.2.7: base64 between colons.
    fn binary(&mut self) -> Option<Bare> {
        self.at += 1;
        self.skip_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
        self.eat(b':').then_some(Bare::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: &str) -> Option<(u8, bool)> {
        PriorityParams::parse([value.as_bytes()]).map(|p| (p.urgency, p.incremental))
    }

    #[test]
    fn parameters_and_their_defaults() {
        let cases: &[(&str, Option<(u8, bool)>)] = &[
            ("", Some((3, false))),
            ("   ", Some((3, false))),
            ("u=0", Some((0, false))),
            ("u=7, i", Some((7, true))),
            ("i, u=5", Some((5, true))),
            ("u=1,i=?0", Some((1, false))),
            ("i=?1", Some((3, true))),
            ("u=1, u=6", Some((6, false))),
            // Out of range, another type, unknown: ignored, the rest applies.
            ("u=8, i", Some((3, true))),
            ("u=-1", Some((3, false))),
            ("u=1.5", Some((3, false))),
            ("u=\"1\", i=1", Some((3, false))),
            ("u=?1", Some((3, false))),
            ("u=(1 2), i", Some((3, true))),
            ("foo=bar;x=1, u=2;p, i;q=:YQ==:", Some((2, true))),
            ("x=\"a\\\"b\", u=4", Some((4, false))),
            // Not a dictionary: the whole field is ignored.
            ("U=1", None),
            ("u=1,", None),
            ("u=1 i", None),
            ("u=", None),
            ("u=1, =2", None),
            ("u=1234567890123456", None),
            ("u=\"open", None),
            ("i=?2", None),
        ];
        for (value, expected) in cases {
            assert_eq!(parse(value), *expected, "{value:?}");
        }
    }

    #[test]
    fn field_lines_combine_in_order() {
        let lines: [&[u8]; 2] = [b"u=1", b"i, u=4"];
        let params = PriorityParams::parse(lines).unwrap();
        assert_eq!((params.urgency, params.incremental), (4, true));
        let lines: [&[u8]; 2] = [b"u=1", b"u=,"];
        assert_eq!(PriorityParams::parse(lines), None);
    }
}
