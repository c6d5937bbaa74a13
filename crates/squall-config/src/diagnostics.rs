//! Diagnostics: `FILE:LINE:COL: message`, the format compilers use, so that editors and CI
//! logs turn them into links.
//!
//! Validation reports every problem it finds rather than the first, so an operator fixes a
//! broken config in one round instead of one per mistake. Positions come from byte spans
//! (TOML's, and ours for values) turned into 1-based lines and columns counted in chars.

use std::fmt;
use std::ops::Range;

/// One problem in a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file name as given to [`crate::parse`] or [`crate::load`].
    pub file: String,
    /// 1-based; 0 when the problem is with the file as a whole (it cannot be read).
    pub line: usize,
    /// 1-based, in chars; 0 with `line`.
    pub col: usize,
    /// One line, no trailing period.
    pub message: String,
}

impl Diagnostic {
    /// A problem with the whole file, such as being unreadable; it displays without a position.
    pub fn whole_file(file: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            file: file.to_owned(),
            line: 0,
            col: 0,
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else if self.col == 0 {
            // A line of a file that is not TOML (a users file): no column to point at.
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        } else {
            write!(
                f,
                "{}:{}:{}: {}",
                self.file, self.line, self.col, self.message
            )
        }
    }
}

/// Every problem found in a config file, in file order. Displays one per line, with no
/// trailing newline, ready for `squall check` to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, diagnostic) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            diagnostic.fmt(f)?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Diagnostics {
    type Item = &'a Diagnostic;
    type IntoIter = std::slice::Iter<'a, Diagnostic>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// A config file's name and text, with an index from byte offsets to lines.
pub(crate) struct Source<'a> {
    pub file: &'a str,
    pub text: &'a str,
    /// Byte offset of the start of each line; the first is 0.
    line_starts: Vec<usize>,
}

impl<'a> Source<'a> {
    pub fn new(file: &'a str, text: &'a str) -> Source<'a> {
        let newlines = text.match_indices('\n').map(|(i, _)| i + 1);
        let line_starts = std::iter::once(0).chain(newlines).collect();
        Source {
            file,
            text,
            line_starts,
        }
    }

    /// The 1-based line and char column of byte `offset` (clamped to the text).
    pub fn position(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_starts.partition_point(|&start| start <= offset);
        let line_start = self.line_starts[line - 1]; // line >= 1: line_starts[0] == 0 <= offset.
        (line, self.text[line_start..offset].chars().count() + 1)
    }

    /// The 1-based line of byte `offset`.
    pub fn line(&self, offset: usize) -> usize {
        self.position(offset).0
    }

    /// The text of 1-based `line`, without its line ending.
    pub fn line_text(&self, line: usize) -> &'a str {
        let start = self.line_starts[line - 1];
        let end = self
            .line_starts
            .get(line)
            .copied()
            .unwrap_or(self.text.len());
        self.text[start..end].trim_end_matches(['\n', '\r'])
    }

    /// A diagnostic at the start of `span`. Messages are kept to one line, as the format needs.
    pub fn diagnostic(&self, span: &Range<usize>, message: &str) -> Diagnostic {
        let (line, col) = self.position(span.start);
        let message = message.replace(['\n', '\r'], " ");
        Diagnostic {
            file: self.file.to_owned(),
            line,
            col,
            message,
        }
    }
}

/// Collects the diagnostics of one validation pass.
pub(crate) struct Report<'a> {
    source: &'a Source<'a>,
    diagnostics: Vec<Diagnostic>,
}

impl<'a> Report<'a> {
    pub fn new(source: &'a Source<'a>) -> Report<'a> {
        Report {
            source,
            diagnostics: Vec::new(),
        }
    }

    /// Records a problem with the value or table at `span`.
    pub fn error(&mut self, span: &Range<usize>, message: impl AsRef<str>) {
        let diagnostic = self.source.diagnostic(span, message.as_ref());
        self.diagnostics.push(diagnostic);
    }

    /// The 1-based line of `span`, for messages that point back at an earlier definition.
    pub fn line(&self, span: &Range<usize>) -> usize {
        self.source.line(span.start)
    }

    /// `Err` with every problem in file order, or `Ok` if there was none.
    pub fn finish(self) -> Result<(), Diagnostics> {
        into_result(self.diagnostics)
    }
}

/// `Err` with `diagnostics` sorted by position (stable, so problems found at one place keep
/// the order they were found in), or `Ok` if there are none.
pub(crate) fn into_result(mut diagnostics: Vec<Diagnostic>) -> Result<(), Diagnostics> {
    if diagnostics.is_empty() {
        return Ok(());
    }
    diagnostics.sort_by_key(|d| (d.line, d.col));
    Err(Diagnostics(diagnostics))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_in_chars() {
        let source = Source::new("f.toml", "a = 1\r\nkey = \"héllo\" x\n\nlast");
        assert_eq!(source.position(0), (1, 1));
        assert_eq!(source.position(4), (1, 5));
        assert_eq!(source.position(7), (2, 1));
        // "é" is two bytes but one column.
        let x = source.text.find(" x").unwrap() + 1;
        assert_eq!(source.position(x), (2, 15));
        assert_eq!(source.position(source.text.len()), (4, 5));
        assert_eq!(source.position(usize::MAX), (4, 5));
        assert_eq!(source.line_text(1), "a = 1");
        assert_eq!(source.line_text(3), "");
        assert_eq!(source.line_text(4), "last");
    }

    #[test]
    fn display() {
        let source = Source::new("f.toml", "a\nbb\n");
        let diagnostics = Diagnostics(vec![
            source.diagnostic(&(3..4), "second\nline"),
            Diagnostic::whole_file("g.toml", "cannot read: gone"),
        ]);
        assert_eq!(
            diagnostics.to_string(),
            "f.toml:2:2: second line\ng.toml: cannot read: gone"
        );
    }

    #[test]
    fn report_sorts_by_position() {
        let source = Source::new("f.toml", "a\nb\nc\n");
        let mut report = Report::new(&source);
        report.error(&(4..5), "third");
        report.error(&(0..1), "first");
        report.error(&(2..3), "second");
        report.error(&(0..1), "first again");
        let lines: Vec<_> = report
            .finish()
            .unwrap_err()
            .iter()
            .map(|d| d.message.clone())
            .collect();
        assert_eq!(lines, ["first", "first again", "second", "third"]);
    }
}
