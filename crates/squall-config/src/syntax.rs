//! TOML text → raw schema, with toml's errors turned into our diagnostics.
//!
//! Syntax errors come from a recovering parse, so a file with three typos reports three
//! lines. Only the first error of each line is kept: after one mistake the parser's guesses
//! about the rest of that line are mostly noise. Schema errors (unknown keys, wrong types,
//! missing keys) come from serde, which stops at the first one; serde's wording is reworded
//! into the config's vocabulary (keys and sections, not fields).

use crate::diagnostics::{Diagnostic, Diagnostics, Source, into_result};
use crate::raw::RawConfig;

/// Parses `source` into the raw schema, or says why it cannot.
pub(crate) fn deserialize(source: &Source) -> Result<RawConfig, Diagnostics> {
    let (_, errors) = toml::de::DeTable::parse_recoverable(source.text);
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    for error in &errors {
        let diagnostic = diagnostic(source, error);
        if !diagnostics.iter().any(|d| d.line == diagnostic.line) {
            diagnostics.push(diagnostic);
        }
    }
    into_result(diagnostics)?;
    toml::from_str(source.text).map_err(|error| Diagnostics(vec![diagnostic(source, &error)]))
}

fn diagnostic(source: &Source, error: &toml::de::Error) -> Diagnostic {
    // An error without a span is about the document as a whole; point at its start.
    let span = error.span().unwrap_or(0..0);
    let message = reword(source, span.start, error.message());
    source.diagnostic(&span, &message)
}

/// Rewords serde's messages: "unknown field `x`, expected `a` or `b`" becomes
/// `unknown key "x" in [server]; expected "a" or "b"`, and "missing field" becomes
/// "missing key".
fn reword(source: &Source, offset: usize, message: &str) -> String {
    let message = requote(message);
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let (key, expected) = rest.split_once(", ").unwrap_or((rest, ""));
        let place = match enclosing_table(source, offset) {
            Place::Header(header) => {
                let name = header.trim_matches(['[', ']', ' ']);
                return match name.rsplit_once('.') {
                    Some((parent, _)) => {
                        format!("unknown section {header}; {expected} in [{parent}]")
                    }
                    None => format!("unknown section {header}; {expected}"),
                };
            }
            Place::Table(header) => format!(" in {header}"),
            Place::Top => " at the top level".to_owned(),
            Place::Unknown => String::new(),
        };
        let expected = expected.replace("there are no fields", "this table has no keys");
        return format!("unknown key {key}{place}; {expected}");
    }
    if let Some(rest) = message.strip_prefix("missing field ") {
        return format!("missing key {rest}");
    }
    let message = in_toml_terms(&message);
    match message.strip_prefix("invalid type: ") {
        Some(rest) => match value_key(source, offset) {
            Some(key) => format!("invalid type for {key}: {rest}"),
            None => message,
        },
        None => message,
    }
}

/// The key whose value starts at `offset`, with its table as the text shows it: `"address" in
/// [[listen]]` for `address = 21100` under `[[listen]]`. serde's type errors point at the value
/// and name only the type, so `address = 21100` would otherwise not say which key wanted a
/// string. `None` for a value that is not right after `key =` (an array's item).
fn value_key(source: &Source, offset: usize) -> Option<String> {
    let line_start = source.text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let before = source.text[line_start..offset].trim_end();
    let before = before.strip_suffix('=')?.trim_end();
    // A quoted key ends in a quote and starts at the one before; a bare one is a run of
    // letters, digits, `_`, `-` (and `.` for a dotted key).
    let key_start = match before.strip_suffix('"') {
        Some(inner) => inner.rfind('"')?,
        None => {
            let bare = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
            before.trim_end_matches(bare).len()
        }
    };
    let name = before[key_start..].trim_matches('"');
    if name.is_empty() {
        return None;
    }
    let place = match enclosing_table(source, line_start + key_start) {
        Place::Table(header) => format!(" in {header}"),
        Place::Top => " at the top level".to_owned(),
        Place::Header(_) | Place::Unknown => String::new(),
    };
    Some(format!("{:?}{place}", name))
}

/// Names serde's data model types as TOML does: "struct RawServer" and "map" are tables,
/// "sequence" is an array, "i64" an integer.
fn in_toml_terms(message: &str) -> String {
    let replacements = [
        ("invalid type: map", "invalid type: table"),
        ("invalid type: sequence", "invalid type: array"),
        ("invalid type: floating point", "invalid type: float"),
        ("expected a sequence", "expected an array"),
        ("expected i64", "expected an integer"),
        ("expected a map", "expected a table"),
    ];
    let mut message = message.to_owned();
    for (from, to) in replacements {
        message = message.replace(from, to);
    }
    if let Some(at) = message.find("expected struct Raw") {
        message.replace_range(at.., "expected a table");
    }
    message
}

/// Turns serde's and toml's `quoted` items into "quoted" ones, escaped as TOML basic strings
/// are, so that a quoted quote reads `"\""` rather than `"""`.
fn requote(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for (i, part) in message.split('`').enumerate() {
        if i % 2 == 1 {
            out.push_str(&format!("{part:?}"));
        } else {
            out.push_str(part);
        }
    }
    out
}

/// Where a key sits, as far as the text shows it.
enum Place<'a> {
    /// The key is part of a table header such as `[serverz]`: a whole unknown section.
    Header(&'a str),
    /// The key starts a line under this table header.
    Table(&'a str),
    /// The key starts a line before any table header.
    Top,
    /// The key is inside an inline table or array; naming the table would need the parse tree.
    Unknown,
}

/// Finds the table of the key at `offset` by looking back for the nearest header line.
fn enclosing_table<'a>(source: &Source<'a>, offset: usize) -> Place<'a> {
    let (line, col) = source.position(offset);
    let text = source.line_text(line);
    if let Some(header) = table_header(text) {
        return Place::Header(header);
    }
    let indent = text.chars().take_while(|c| c.is_whitespace()).count();
    if col != indent + 1 {
        return Place::Unknown;
    }
    let above = (1..line).rev().map(|l| source.line_text(l));
    above
        .filter_map(table_header)
        .next()
        .map_or(Place::Top, Place::Table)
}

/// The header of a `[table]` or `[[array]]` line, trimmed of whitespace and comment. Only bare
/// names count (letters, digits, `_`, `-`, `.`), so a line of a multi-line array such as
/// `["a", "b"],` is not mistaken for a header.
fn table_header(line: &str) -> Option<&str> {
    let line = line.split('#').next().unwrap_or("").trim();
    let name = line.strip_prefix("[[").and_then(|l| l.strip_suffix("]]"));
    let name = name.or_else(|| line.strip_prefix('[').and_then(|l| l.strip_suffix(']')))?;
    let bare = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ' ');
    (!name.trim().is_empty() && name.chars().all(bare)).then_some(line)
}
