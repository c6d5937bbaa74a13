//! Header values with request variables: `set = { "x-client" = "$remote_addr" }`.
//!
//! A value is split once, at config load, into literal bytes and variables (nginx's names), so
//! a request pays only for the values that name one; a value without a variable stays a plain
//! `HeaderValue` and is copied as before.

/// A request variable a header value may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Var {
    /// `$remote_addr`: the client's address as Squall sees it (PROXY protocol and `real_ip`
    /// applied), without the port.
    RemoteAddr,
    /// `$request_id`: the request's id, 32 hex digits, the same as in the access log.
    RequestId,
    /// `$host`: the request's host, without the port.
    Host,
    /// `$scheme`: `http`, or `https` on a TLS listener.
    Scheme,
    /// `$request_uri`: the path and query as received.
    RequestUri,
}

/// A piece of a header value template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Literal(String),
    Var(Var),
}

/// A header value with at least one variable, as its parts in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template(pub Vec<Part>);

const VARS: [(&str, Var); 5] = [
    ("remote_addr", Var::RemoteAddr),
    ("request_id", Var::RequestId),
    ("request_uri", Var::RequestUri),
    ("host", Var::Host),
    ("scheme", Var::Scheme),
];

/// Splits `value` into parts: `Ok(None)` when it names no variable (a `$` not followed by a
/// letter or `_` is a literal `$`), an error naming an unknown `$name`.
pub fn parse_template(value: &str) -> Result<Option<Template>, String> {
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        literal.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let name = &after[..len];
        if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            literal.push('$');
            rest = after;
            continue;
        }
        let Some((_, var)) = VARS.iter().find(|(n, _)| *n == name) else {
            return Err(format!(
                "unknown variable ${name}: use $remote_addr, $request_id, $host, $scheme or $request_uri"
            ));
        };
        if !literal.is_empty() {
            parts.push(Part::Literal(std::mem::take(&mut literal)));
        }
        parts.push(Part::Var(*var));
        rest = &after[len..];
    }
    literal.push_str(rest);
    if parts.is_empty() {
        return Ok(None);
    }
    if !literal.is_empty() {
        parts.push(Part::Literal(literal));
    }
    Ok(Some(Template(parts)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_split_into_literals_and_variables() {
        let lit = |s: &str| Part::Literal(s.to_owned());
        assert_eq!(parse_template("plain"), Ok(None));
        assert_eq!(parse_template("costs $5"), Ok(None));
        assert_eq!(parse_template("$"), Ok(None));
        assert_eq!(
            parse_template("$remote_addr"),
            Ok(Some(Template(vec![Part::Var(Var::RemoteAddr)])))
        );
        assert_eq!(
            parse_template("id=$request_id; $scheme://$host$request_uri!"),
            Ok(Some(Template(vec![
                lit("id="),
                Part::Var(Var::RequestId),
                lit("; "),
                Part::Var(Var::Scheme),
                lit("://"),
                Part::Var(Var::Host),
                Part::Var(Var::RequestUri),
                lit("!"),
            ])))
        );
        let unknown = parse_template("$hostname").unwrap_err();
        assert!(
            unknown.starts_with("unknown variable $hostname"),
            "{unknown}"
        );
        assert!(parse_template("a $request_idx").is_err());
    }
}
