//! Who the client is and what it may do: HTTP Basic authentication on a route (RFC 7617), the
//! client address taken from a trusted proxy's header (`server.real_ip`), and a route's own
//! request rate.
//!
//! The users file is read by the binary (at start, reload and `squall check`); its lines are
//! judged here, as a pure function of the text, so that what is refused, and the words used,
//! are the same wherever it is read and can be tested without a file.

use std::path::PathBuf;
use std::time::Duration;

use http::HeaderName;

use crate::IpNet;

/// `limits.auth_failures_max` when absent: failed Basic authentication attempts a client
/// address may make per minute before it is answered 429 without its password being checked.
pub const AUTH_FAILURES_MAX_DEFAULT: u32 = 10;

/// A route's `auth_basic = { realm, users_file }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthBasic {
    /// Sent in `WWW-Authenticate: Basic realm="..."`; visible ASCII and spaces, no `"` or `\`.
    pub realm: String,
    /// `user:hash` lines, bcrypt or argon2 hashes only (see [`parse_users`]).
    pub users_file: PathBuf,
}

/// `server.real_ip = { header, from }`: take the client address from `header` when the
/// connection comes from a network in `from` (nginx's realip module, `real_ip_recursive on`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RealIp {
    pub header: HeaderName,
    /// Never empty.
    pub from: Vec<IpNet>,
}

/// A route's own `request_rate` (its own token bucket per key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteRate {
    /// `requests` per `per` (one second, minute or hour).
    pub requests: u32,
    pub per: Duration,
    /// Requests a key may send at once; `request_burst`, by default `requests`.
    pub burst: u32,
    pub key: RateKey,
}

/// `request_rate_key`: what a route's buckets are kept per.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RateKey {
    /// The client address (after `real_ip`).
    #[default]
    ClientIp,
    /// This request field's value; a request without it is keyed by its client address.
    Header(HeaderName),
    /// One bucket for the whole route.
    Route,
}

/// The hash schemes a users file may use: bcrypt and argon2, both slow and salted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashScheme {
    Bcrypt,
    Argon2,
}

/// One accepted line of a users file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub hash: String,
    pub scheme: HashScheme,
}

/// The users of an htpasswd-style file, or every refused line as `(line number, message)`.
/// Blank lines and lines starting with `#` are skipped. A user named twice is refused (which
/// one would count is not something a reader can see).
pub fn parse_users(text: &str) -> Result<Vec<User>, Vec<(usize, String)>> {
    let mut users: Vec<User> = Vec::new();
    let mut problems = Vec::new();
    for (number, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l)) {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        match parse_line(line) {
            Ok(user) if users.iter().any(|u| u.name == user.name) => {
                problems.push((number, format!("user {:?} is listed twice", user.name)));
            }
            Ok(user) => users.push(user),
            Err(message) => problems.push((number, message)),
        }
    }
    if problems.is_empty() {
        Ok(users)
    } else {
        Err(problems)
    }
}

fn parse_line(line: &str) -> Result<User, String> {
    let Some((name, hash)) = line.split_once(':') else {
        return Err("not a user:hash line".to_owned());
    };
    if name.is_empty() {
        return Err("the user name is empty".to_owned());
    }
    if name.chars().any(|c| c.is_control()) {
        return Err("the user name has a control character".to_owned());
    }
    let scheme = scheme(hash)?;
    Ok(User {
        name: name.to_owned(),
        hash: hash.to_owned(),
        scheme,
    })
}

/// The scheme of `hash`, or why it is refused: only slow, salted hashes are accepted.
fn scheme(hash: &str) -> Result<HashScheme, String> {
    const WEAK: &str = "use bcrypt (htpasswd -B) or argon2";
    if ["$2a$", "$2b$", "$2y$"].iter().any(|p| hash.starts_with(p)) {
        return Ok(HashScheme::Bcrypt);
    }
    if ["$argon2id$", "$argon2i$"]
        .iter()
        .any(|p| hash.starts_with(p))
    {
        return Ok(HashScheme::Argon2);
    }
    let kind = if hash.starts_with("$apr1$") || hash.starts_with("$1$") {
        "an MD5 hash"
    } else if hash.starts_with("{SHA}") {
        "a SHA-1 hash"
    } else if hash.starts_with("$argon2d$") {
        "an argon2d hash (argon2id or argon2i only)"
    } else if hash.starts_with('$') {
        "a hash scheme Squall does not accept"
    } else if hash.len() == 13 {
        "a crypt(3) DES hash, or a plain-text password"
    } else {
        "a plain-text password"
    };
    Err(format!("{kind} is refused: {WEAK}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BCRYPT: &str = "$2y$05$CUfJq6oRw0LD5pJyy0aLdeKFj1DLxvK3gBSJG0ZrUlRa2zRFP4kKi";
    const ARGON2: &str = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$dGVzdGhhc2g";

    #[test]
    fn good_lines_are_read_and_comments_skipped() {
        let text = format!("# staff\n\nalice:{BCRYPT}\r\nbob:{ARGON2}\n");
        let users = parse_users(&text).unwrap();
        assert_eq!(users.len(), 2);
        assert_eq!(users[0].name, "alice");
        assert_eq!(users[0].hash, BCRYPT);
        assert_eq!(users[0].scheme, HashScheme::Bcrypt);
        assert_eq!(users[1].scheme, HashScheme::Argon2);
        for prefix in ["$2a$", "$2b$", "$argon2i$"] {
            let line = format!("u:{prefix}rest");
            assert!(parse_users(&line).is_ok(), "{prefix}");
        }
    }

    #[test]
    fn weak_and_broken_lines_are_refused_with_their_number() {
        let text = format!(
            "alice:{BCRYPT}\nplain:secret\ndes:rOmI3ftyaexdo\nmd5:$apr1$x$y\nsha:{{SHA}}abc=\n\
             nocolon\n:{BCRYPT}\nalice:{ARGON2}\nd:$argon2d$v=19$x\nx:$5$salt$h\n"
        );
        let problems = parse_users(&text).unwrap_err();
        let expected = [
            (
                2,
                "a plain-text password is refused: use bcrypt (htpasswd -B) or argon2",
            ),
            (
                3,
                "a crypt(3) DES hash, or a plain-text password is refused: use bcrypt (htpasswd -B) or argon2",
            ),
            (
                4,
                "an MD5 hash is refused: use bcrypt (htpasswd -B) or argon2",
            ),
            (
                5,
                "a SHA-1 hash is refused: use bcrypt (htpasswd -B) or argon2",
            ),
            (6, "not a user:hash line"),
            (7, "the user name is empty"),
            (8, "user \"alice\" is listed twice"),
            (
                9,
                "an argon2d hash (argon2id or argon2i only) is refused: use bcrypt (htpasswd -B) or argon2",
            ),
            (
                10,
                "a hash scheme Squall does not accept is refused: use bcrypt (htpasswd -B) or argon2",
            ),
        ];
        let expected: Vec<(usize, String)> =
            expected.iter().map(|(n, m)| (*n, m.to_string())).collect();
        assert_eq!(problems, expected);
    }
}
