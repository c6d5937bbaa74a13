//! A proxy route's upstream path: `strip_prefix`, `upstream_prefix` and `rewrite`.
//!
//! A rewrite is split once, at config load, into literal text and the route's captures, as
//! redirect targets and header values are, so a request pays only for the routes that have one.
//! The literal text is checked here to be a normal path (no empty or dot segment, no query):
//! what the origin is sent must stay one spelling of one path, as the request target is.

/// What the origin is sent in place of the request's normalised path (the query is kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathRewrite {
    /// `strip_prefix = true` (`to = "/"`) or `upstream_prefix = "/v2/"`: the route's `prefix`
    /// (which ends with `/`) is replaced by `to` (which starts and ends with `/`).
    Prefix { from: String, to: String },
    /// `rewrite = "/v2/{name}"`: the parts in order, each capture one of the route's own
    /// (a template's `{name}` or a regex's named group).
    Template(Vec<RewritePart>),
}

/// A piece of a `rewrite` template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RewritePart {
    Literal(String),
    /// The value the route captured under this name.
    Capture(String),
}

/// Splits `text` into parts, naming only `captures` (the route's capture names). The error is
/// a sentence for `squall check`.
pub fn parse_rewrite(text: &str, captures: &[String]) -> Result<Vec<RewritePart>, String> {
    let mut parts = Vec::new();
    let mut skeleton = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find(['{', '}']) {
        let Some(after) = rest[open..].strip_prefix('{') else {
            return Err("unbalanced braces: a capture is written {name}".to_owned());
        };
        let Some(close) = after.find('}') else {
            return Err("unbalanced braces: a capture is written {name}".to_owned());
        };
        let name = &after[..close];
        if !captures.iter().any(|c| c == name) {
            return Err(unknown_capture(name, captures));
        }
        if open > 0 {
            parts.push(RewritePart::Literal(rest[..open].to_owned()));
        }
        skeleton.push_str(&rest[..open]);
        // A capture is one non-empty segment's worth of text (checked per request).
        skeleton.push('x');
        parts.push(RewritePart::Capture(name.to_owned()));
        rest = &after[close + 1..];
    }
    if !rest.is_empty() {
        parts.push(RewritePart::Literal(rest.to_owned()));
    }
    skeleton.push_str(rest);
    path_error(&skeleton).map_or(Ok(parts), Err)
}

/// Why `path` is not a normal absolute path to send an origin, if it is not: it starts with
/// `/`, has no query or fragment, no empty segment but a last one, no `.` or `..` segment, and
/// only visible ASCII with valid percent escapes.
pub fn path_error(path: &str) -> Option<String> {
    let Some(rest) = path.strip_prefix('/') else {
        return Some("an upstream path starts with \"/\"".to_owned());
    };
    if let Some(c) = path
        .chars()
        .find(|c| !c.is_ascii_graphic() || matches!(c, '?' | '#' | '\\'))
    {
        return Some(format!(
            "{c:?} is not allowed in an upstream path: visible ASCII without ?, # or \\, \
             percent-encode the rest"
        ));
    }
    let bytes = path.as_bytes();
    for (i, _) in path.match_indices('%') {
        if !bytes
            .get(i + 1..i + 3)
            .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
        {
            return Some("a % is followed by two hex digits".to_owned());
        }
    }
    let segments: Vec<&str> = rest.split('/').collect();
    let last = segments.len() - 1;
    for (i, segment) in segments.iter().enumerate() {
        if segment.is_empty() && i != last {
            return Some("an upstream path has no empty segment (//)".to_owned());
        }
        if matches!(*segment, "." | "..") {
            return Some("an upstream path has no . or .. segment".to_owned());
        }
    }
    None
}

fn unknown_capture(name: &str, captures: &[String]) -> String {
    if captures.is_empty() {
        return format!("unknown capture {{{name}}}: the route captures nothing");
    }
    let known: Vec<String> = captures.iter().map(|c| format!("{{{c}}}")).collect();
    format!(
        "unknown capture {{{name}}}: the route captures {}",
        known.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_split_into_literals_and_captures() {
        let names = ["name".to_owned(), "id".to_owned()];
        let lit = |s: &str| RewritePart::Literal(s.to_owned());
        let cap = |s: &str| RewritePart::Capture(s.to_owned());
        let ok: [(&str, Vec<RewritePart>); 4] = [
            ("/", vec![lit("/")]),
            ("/v2/{name}", vec![lit("/v2/"), cap("name")]),
            (
                "/u/{id}/{name}.json",
                vec![lit("/u/"), cap("id"), lit("/"), cap("name"), lit(".json")],
            ),
            ("/a%20b/{id}/", vec![lit("/a%20b/"), cap("id"), lit("/")]),
        ];
        for (text, want) in ok {
            assert_eq!(parse_rewrite(text, &names), Ok(want), "{text}");
        }
        let bad = [
            ("v2/{name}", "an upstream path starts with \"/\""),
            (
                "/v2/{nam}",
                "unknown capture {nam}: the route captures {name}, {id}",
            ),
            (
                "/v2/{name",
                "unbalanced braces: a capture is written {name}",
            ),
            (
                "/v2/name}",
                "unbalanced braces: a capture is written {name}",
            ),
            ("/v2//{name}", "an upstream path has no empty segment (//)"),
            ("/v2/../{name}", "an upstream path has no . or .. segment"),
            ("/v2/./{name}", "an upstream path has no . or .. segment"),
            (
                "/v2/{name}?x=1",
                "'?' is not allowed in an upstream path: visible ASCII without ?, # or \\, percent-encode the rest",
            ),
            (
                "/v2 {name}",
                "' ' is not allowed in an upstream path: visible ASCII without ?, # or \\, percent-encode the rest",
            ),
            ("/v2/%zz{name}", "a % is followed by two hex digits"),
        ];
        for (text, want) in bad {
            assert_eq!(parse_rewrite(text, &names), Err(want.to_owned()), "{text}");
        }
        assert_eq!(
            parse_rewrite("/{x}", &[]),
            Err("unknown capture {x}: the route captures nothing".to_owned())
        );
    }
}
