//! The 64 bits of user data each ring operation carries, typed: what the operation belongs to
//! (kind), which slot (index) and which occupant of that slot (generation).
//!
//! This is the only place that knows the bit layout. Slots are reused as connections come and
//! go, and a completion may arrive after its connection's slot has a new occupant (the ring owns
//! an operation until it reports): the generation tells the two apart, so a late completion is
//! recognised and dropped instead of reaching the wrong connection.

/// What a ring operation belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A client connection.
    Client,
    /// A listening socket (accepts, its close).
    Listener,
    /// The worker's waker (cross-thread wake-ups).
    Waker,
    /// A connection to an origin server (proxied requests and health probes).
    Origin,
    /// A static file being served (`files.rs`).
    File,
    /// A session's own timer: an exchange on a stream of a shared HTTP/2 origin connection,
    /// whose deadline is its own, not its connection's (`origin/h2.rs`).
    Session,
    /// A QUIC listener's UDP socket (its datagrams in and out, `quic.rs`).
    Udp,
}

/// Bits 61–63: the kind.
const KIND_SHIFT: u32 = 61;
/// Bits 32–60: the generation.
const GENERATION_SHIFT: u32 = 32;
const GENERATION_BITS: u32 = KIND_SHIFT - GENERATION_SHIFT;
/// Generations wrap at 29 bits: a slot would have to be reused 2^29 times while one stale
/// completion waits for a collision to matter.
pub const GENERATION_MASK: u32 = (1 << GENERATION_BITS) - 1;
/// Bits 0–31: the slot index.
const INDEX_MASK: u64 = (1 << GENERATION_SHIFT) - 1;
/// The most slots a slab addressed by a token may have.
pub const INDEX_MAX: usize = INDEX_MASK as usize;

const _: () = assert!(GENERATION_BITS == 29);

/// A typed ring token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Token(u64);

impl Token {
    /// A token for slot `index` of `kind`, occupied by `generation` (masked to its 30 bits).
    pub fn new(kind: Kind, index: usize, generation: u32) -> Token {
        debug_assert!(
            index <= INDEX_MAX,
            "slot index {index} does not fit a token"
        );
        let kind = match kind {
            Kind::Client => 0u64,
            Kind::Listener => 1,
            Kind::Waker => 2,
            Kind::Origin => 3,
            Kind::File => 4,
            Kind::Session => 5,
            Kind::Udp => 6,
        };
        Token(
            (kind << KIND_SHIFT)
                | (u64::from(generation & GENERATION_MASK) << GENERATION_SHIFT)
                | (index as u64 & INDEX_MASK),
        )
    }

    pub fn client(index: usize, generation: u32) -> Token {
        Token::new(Kind::Client, index, generation)
    }

    pub fn origin(index: usize, generation: u32) -> Token {
        Token::new(Kind::Origin, index, generation)
    }

    pub fn file(index: usize, generation: u32) -> Token {
        Token::new(Kind::File, index, generation)
    }

    pub fn session(index: usize, generation: u32) -> Token {
        Token::new(Kind::Session, index, generation)
    }

    pub fn listener(index: usize) -> Token {
        Token::new(Kind::Listener, index, 0)
    }

    pub fn udp(index: usize) -> Token {
        Token::new(Kind::Udp, index, 0)
    }

    pub fn waker() -> Token {
        Token::new(Kind::Waker, 0, 0)
    }

    /// The token as the ring carries it.
    pub fn raw(self) -> u64 {
        self.0
    }

    /// A token read back from a completion.
    pub fn from_raw(raw: u64) -> Token {
        Token(raw)
    }

    pub fn kind(self) -> Kind {
        match self.0 >> KIND_SHIFT {
            0 => Kind::Client,
            1 => Kind::Listener,
            2 => Kind::Waker,
            3 => Kind::Origin,
            4 => Kind::File,
            5 => Kind::Session,
            _ => Kind::Udp,
        }
    }

    pub fn index(self) -> usize {
        (self.0 & INDEX_MASK) as usize
    }

    pub fn generation(self) -> u32 {
        (self.0 >> GENERATION_SHIFT) as u32 & GENERATION_MASK
    }

    /// True when this token names the slot's current occupant of `generation`.
    pub fn names(self, generation: u32) -> bool {
        self.generation() == generation & GENERATION_MASK
    }
}

/// The next generation after `generation`, wrapping within the token's bits.
pub fn next_generation(generation: u32) -> u32 {
    generation.wrapping_add(1) & GENERATION_MASK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_never_bleed_into_each_other() {
        let kinds = [
            Kind::Client,
            Kind::Listener,
            Kind::Waker,
            Kind::Origin,
            Kind::File,
            Kind::Session,
            Kind::Udp,
        ];
        for kind in kinds {
            for index in [0, 1, 0xffff, 0x1_0000, INDEX_MAX] {
                for generation in [0, 1, GENERATION_MASK, u32::MAX] {
                    let token = Token::new(kind, index, generation);
                    assert_eq!(token.kind(), kind);
                    assert_eq!(token.index(), index);
                    assert_eq!(token.generation(), generation & GENERATION_MASK);
                    assert!(token.names(generation));
                    assert!(!token.names(generation.wrapping_add(1)));
                    assert_eq!(Token::from_raw(token.raw()), token);
                }
            }
        }
    }

    #[test]
    fn generations_wrap_inside_their_bits() {
        assert_eq!(next_generation(GENERATION_MASK), 0);
        assert_eq!(next_generation(5), 6);
        // A generation past its bits would once have set the kind bits of a client token.
        let token = Token::client(3, 1 << 29);
        assert_eq!(token.kind(), Kind::Client);
    }
}
