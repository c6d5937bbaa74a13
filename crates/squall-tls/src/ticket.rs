//! TLS session tickets sealed with keys from a file (`[tls] ticket_key_file`), so that every
//! node behind one balancer opens the tickets of the others and a client resumes on any of
//! them.
//!
//! rustls's own `Ticketer` makes a random key per process; two processes never share it, so a
//! client that the balancer sends to another node does a full handshake. With a key file the
//! operator hands every node the same keys:
//!
//! - The file holds one key per line, each the base64 of 48 random bytes
//!   (`openssl rand -base64 48`), as nginx's `ssl_session_ticket_key` holds 48 bytes. Empty
//!   lines and lines starting with `#` are skipped. At most [`TICKET_KEYS_MAX`] keys.
//! - The **first** key seals new tickets; **every** key opens them. To rotate, prepend a new
//!   key on every node, reload, and remove the old one after a ticket lifetime.
//!
//! A ticket is `name (16 bytes) || nonce (12) || AES-256-GCM ciphertext and tag (16)`. The
//! name and the AEAD key are both derived from the file's key by HKDF-SHA256 with distinct
//! labels, so a key's name says nothing about the key, and the name is the ticket's
//! associated data. A ticket with a name none of the keys has, or whose tag does not verify
//! (forged, truncated, from an older key since removed), opens to `None`: rustls then does a
//! full handshake, which is all an unusable ticket may cost.
//!
//! Nonces are random: AES-GCM with random 96-bit nonces is safe for about 2^32 tickets per key,
//! which is why the operator rotates the key (daily is common).

use std::fmt;

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::hkdf;
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::Engine as _;
use rustls::server::ProducesTickets;

/// Bytes of a key in the file, before base64 (nginx's 48-byte `ssl_session_ticket_key`).
pub const TICKET_KEY_BYTES: usize = 48;
/// The most keys a file may hold: one sealing and a few still opening is all rotation needs.
pub const TICKET_KEYS_MAX: usize = 16;
/// How long a client is told it may keep a ticket (RFC 8446 §4.6.1 `ticket_lifetime`; at
/// most 7 days). Whether it still opens depends on its key still being in the file.
pub const TICKET_LIFETIME_SECS: u32 = 12 * 3600;
/// Bytes of a key name at the head of every ticket.
pub const TICKET_NAME_BYTES: usize = 16;

const TAG_BYTES: usize = 16;
const NAME_LABEL: &[u8] = b"squall ticket key name";
const AEAD_LABEL: &[u8] = b"squall ticket aead key";

/// A problem with one line of a key file: 1-based line and column, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TicketKeyError {
    /// 1-based line of the file (0: the file as a whole).
    pub line: usize,
    /// 1-based column of the line (0: the line as a whole).
    pub col: usize,
    /// What is wrong, e.g. `a ticket key is 48 bytes (base64 of 64 characters), found 32`.
    pub message: String,
}

impl fmt::Display for TicketKeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.col, self.message)
    }
}

/// The keys of a ticket key file, the first one sealing. `Send + Sync`; share it in an `Arc`.
pub struct TicketKeys {
    keys: Vec<TicketKey>,
    rng: SystemRandom,
}

struct TicketKey {
    name: [u8; TICKET_NAME_BYTES],
    aead: LessSafeKey,
}

impl TicketKeys {
    /// Parses a key file's text. Every bad line is reported (not only the first), with the
    /// column where its problem starts.
    pub fn parse(text: &str) -> Result<TicketKeys, Vec<TicketKeyError>> {
        let mut keys = Vec::new();
        let mut problems = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let indent = line.len() - line.trim_start().len();
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let problem = |col: usize, message: String| TicketKeyError {
                line: index + 1,
                col,
                message,
            };
            match base64::engine::general_purpose::STANDARD.decode(trimmed) {
                Ok(bytes) if bytes.len() == TICKET_KEY_BYTES => keys.push(TicketKey::new(&bytes)),
                Ok(bytes) => problems.push(problem(
                    indent + 1,
                    format!(
                        "a ticket key is {TICKET_KEY_BYTES} bytes (`openssl rand -base64 \
                         {TICKET_KEY_BYTES}`), found {}",
                        bytes.len()
                    ),
                )),
                Err(e) => {
                    let col = match e {
                        base64::DecodeError::InvalidByte(at, _)
                        | base64::DecodeError::InvalidLastSymbol(at, _) => indent + at + 1,
                        _ => indent + 1,
                    };
                    problems.push(problem(col, format!("not base64: {e}")));
                }
            }
        }
        if problems.is_empty() && keys.is_empty() {
            let message = "no ticket key: add a line made by `openssl rand -base64 48`";
            problems.push(TicketKeyError {
                line: 0,
                col: 0,
                message: message.to_owned(),
            });
        }
        if keys.len() > TICKET_KEYS_MAX {
            problems.push(TicketKeyError {
                line: 0,
                col: 0,
                message: format!("{} ticket keys, at most {TICKET_KEYS_MAX}", keys.len()),
            });
        }
        if problems.is_empty() {
            Ok(TicketKeys {
                keys,
                rng: SystemRandom::new(),
            })
        } else {
            Err(problems)
        }
    }

    /// How many keys open tickets (the first also seals them).
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Always false: a parsed file has at least one key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    fn seal(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let key = self.keys.first()?;
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let mut ticket =
            Vec::with_capacity(TICKET_NAME_BYTES + NONCE_LEN + plain.len() + TAG_BYTES);
        ticket.extend_from_slice(&key.name);
        ticket.extend_from_slice(&nonce);
        let mut sealed = plain.to_vec();
        let nonce = Nonce::assume_unique_for_key(nonce);
        key.aead
            .seal_in_place_append_tag(nonce, Aad::from(&key.name), &mut sealed)
            .ok()?;
        ticket.extend_from_slice(&sealed);
        Some(ticket)
    }

    fn open(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        if ticket.len() < TICKET_NAME_BYTES + NONCE_LEN + TAG_BYTES {
            return None;
        }
        let (name, rest) = ticket.split_at(TICKET_NAME_BYTES);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let key = self.keys.iter().find(|k| k.name == name)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut plain = sealed.to_vec();
        let opened = key
            .aead
            .open_in_place(nonce, Aad::from(name), &mut plain)
            .ok()?;
        let len = opened.len();
        plain.truncate(len);
        Some(plain)
    }
}

impl TicketKey {
    fn new(secret: &[u8]) -> TicketKey {
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, &[]).extract(secret);
        let mut name = [0u8; TICKET_NAME_BYTES];
        let mut aead = [0u8; 32];
        // Both lengths are far below HKDF-SHA256's 255 * 32 bytes, so expand cannot fail.
        let expand = |label: &[u8], out: &mut [u8]| {
            let info = [label];
            let okm = prk
                .expand(&info, Len(out.len()))
                .expect("short HKDF output");
            okm.fill(out).expect("short HKDF output");
        };
        expand(NAME_LABEL, &mut name);
        expand(AEAD_LABEL, &mut aead);
        // 32 bytes is AES-256's key length, so the key is always accepted.
        let unbound = UnboundKey::new(&AES_256_GCM, &aead).expect("a 32-byte AES-256 key");
        TicketKey {
            name,
            aead: LessSafeKey::new(unbound),
        }
    }
}

/// An HKDF output length.
struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

impl fmt::Debug for TicketKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Key names only: never the keys.
        let names: Vec<String> = (self.keys.iter())
            .map(|k| k.name[..4].iter().map(|b| format!("{b:02x}")).collect())
            .collect();
        f.debug_struct("TicketKeys").field("names", &names).finish()
    }
}

impl ProducesTickets for TicketKeys {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        TICKET_LIFETIME_SECS
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.seal(plain)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        self.open(cipher)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_A: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4v";
    const KEY_B: &str = "MDEyMzQ1Njc4OTo7PD0+P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5f";

    fn keys(text: &str) -> TicketKeys {
        TicketKeys::parse(text).unwrap()
    }

    #[test]
    fn a_sealed_ticket_opens_and_looks_as_documented() {
        let keys = keys(KEY_A);
        let ticket = keys.encrypt(b"session state").unwrap();
        assert_eq!(ticket.len(), 16 + 12 + 13 + 16);
        assert_eq!(keys.decrypt(&ticket).unwrap(), b"session state");
        // Two tickets of the same state differ (random nonces) and both open.
        let other = keys.encrypt(b"session state").unwrap();
        assert_ne!(ticket, other);
        assert_eq!(ticket[..16], other[..16], "same key name");
        assert_eq!(keys.decrypt(&other).unwrap(), b"session state");
        assert!(keys.enabled());
        assert_eq!(keys.lifetime(), TICKET_LIFETIME_SECS);
    }

    #[test]
    fn two_processes_with_the_same_file_open_each_others_tickets() {
        let (one, two) = (keys(KEY_A), keys(KEY_A));
        let ticket = one.encrypt(b"x").unwrap();
        assert_eq!(two.decrypt(&ticket).unwrap(), b"x");
    }

    #[test]
    fn rotation_the_first_key_seals_and_every_key_opens() {
        let old = keys(KEY_A);
        let old_ticket = old.encrypt(b"old").unwrap();
        let rotated = keys(&format!("# new first\n{KEY_B}\n\n  {KEY_A}  \n"));
        assert_eq!(rotated.len(), 2);
        assert_eq!(rotated.decrypt(&old_ticket).unwrap(), b"old");
        let new_ticket = rotated.encrypt(b"new").unwrap();
        assert_ne!(
            new_ticket[..16],
            old_ticket[..16],
            "sealed under the new key"
        );
        assert!(
            old.decrypt(&new_ticket).is_none(),
            "the old file lacks the new key"
        );
        // Once the old key is removed, its tickets no longer open.
        assert!(keys(KEY_B).decrypt(&old_ticket).is_none());
    }

    #[test]
    fn a_wrong_key_garbage_and_truncated_tickets_open_to_none() {
        let keys_a = keys(KEY_A);
        let ticket = keys_a.encrypt(b"secret state").unwrap();
        assert!(keys(KEY_B).decrypt(&ticket).is_none(), "wrong key");
        assert!(keys_a.decrypt(b"").is_none());
        assert!(keys_a.decrypt(&[0u8; 100]).is_none(), "garbage");
        for len in 0..ticket.len() {
            assert!(
                keys_a.decrypt(&ticket[..len]).is_none(),
                "truncated to {len}"
            );
        }
        for at in 0..ticket.len() {
            let mut flipped = ticket.clone();
            flipped[at] ^= 1;
            assert!(keys_a.decrypt(&flipped).is_none(), "bit flipped at {at}");
        }
        // The right name with another key's sealing (a forged name) does not open either.
        let mut forged = keys(KEY_B).encrypt(b"secret state").unwrap();
        forged[..16].copy_from_slice(&ticket[..16]);
        assert!(keys_a.decrypt(&forged).is_none());
    }

    #[test]
    fn bad_files_name_the_line_and_column() {
        let text = format!("{KEY_A}\n# ok\n  AAAA\n{}!x\n", &KEY_B[..10]);
        let problems = TicketKeys::parse(&text).unwrap_err();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert_eq!((problems[0].line, problems[0].col), (3, 3));
        assert!(problems[0].message.contains("48 bytes"), "{}", problems[0]);
        assert!(problems[0].message.contains("found 3"), "{}", problems[0]);
        assert_eq!((problems[1].line, problems[1].col), (4, 11));
        assert!(
            problems[1].message.starts_with("not base64"),
            "{}",
            problems[1]
        );
        let empty = TicketKeys::parse("# nothing\n\n").unwrap_err();
        assert_eq!(empty[0].line, 0);
        assert!(empty[0].message.contains("no ticket key"));
        let many = vec![KEY_A; TICKET_KEYS_MAX + 1].join("\n");
        assert!(
            TicketKeys::parse(&many).unwrap_err()[0]
                .message
                .contains("at most")
        );
        assert_eq!(
            TicketKeys::parse(&many[..many.len() - 65]).unwrap().len(),
            16
        );
    }

    #[test]
    fn debug_shows_names_not_keys() {
        let shown = format!("{:?}", keys(KEY_A));
        assert!(shown.starts_with("TicketKeys"));
        assert!(!shown.contains(KEY_A));
    }
}
