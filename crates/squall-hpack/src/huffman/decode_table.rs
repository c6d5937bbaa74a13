//! The Huffman decoder's state machine, built from [`CODES`] at compile time.
//!
//! Why a state machine: walking the code tree one bit at a time costs a branch per bit, and
//! the `hpack` crate's map lookups per bit cost far more (measured here at about 100× slower).
//! Like nghttp2, we consume four bits per step. A state is an internal node of the code tree
//! (the bits read since the last complete symbol); the 257 leaves of a complete binary tree
//! hang from exactly 256 internal nodes, so a state fits in a `u8`. For every state and every
//! nibble the table holds the state after those four bits, the symbol completed on the way if
//! any (the shortest code is 5 bits, so at most one), and two flags:
//!
//! - `FAIL`: the nibble completes EOS, which RFC 7541 §5.2 forbids inside a string;
//! - `ACCEPT`: the string may end here, because the bits since the last symbol are a valid
//!   padding: at most 7 bits, all ones, a prefix of EOS (RFC 7541 §5.2).
//!
//! The table is 256 × 16 × 4 bytes = 16 KiB, small enough to stay in L1 while decoding.
//! It is a `static` computed by `const fn`, so there is no generated file to keep in sync and
//! no start-up cost; the tests in `huffman/mod.rs` check it against a bit-by-bit reference.

use super::codes::{CODES, EOS};

/// One transition of the state machine: see the module documentation. Aligned to 4 bytes so
/// that an entry's address is a shift and an add away from the state, on the critical path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(4))]
pub(crate) struct Transition {
    /// The state after the nibble.
    pub next: u8,
    /// The symbol completed by the nibble, valid when `flags` has [`EMIT`].
    pub symbol: u8,
    pub flags: u8,
}

/// The nibble completed a symbol, in [`Transition::symbol`].
pub(crate) const EMIT: u8 = 1;
/// The string may end after this nibble.
pub(crate) const ACCEPT: u8 = 2;
/// The nibble completed EOS: the string is invalid.
pub(crate) const FAIL: u8 = 4;

/// The state machine, indexed by `[state][nibble]`. State 0 is the root (a symbol boundary).
pub(crate) static TRANSITIONS: [[Transition; 16]; STATES] = build_transitions(&build_tree());

/// For each state, whether the bits since the last symbol are all ones. Only read when a
/// string ends in a state without [`ACCEPT`], to tell "padding longer than 7 bits" from
/// "padding that is not a prefix of EOS".
pub(crate) static ALL_ONES: [bool; STATES] = build_tree().all_ones;

/// Internal nodes of the code tree: one per state.
const STATES: usize = 256;
/// A child slot that points at a leaf has this bit set; the low bits are the symbol.
const LEAF: u16 = 0x8000;
/// A child slot not filled yet (only while building; a complete code fills every slot).
const EMPTY: u16 = 0xffff;
/// Padding longer than this is an error (RFC 7541 §5.2): it would contain a whole byte.
const PADDING_BITS_MAX: u8 = 7;

/// The code tree as arrays, so that `const fn` can build it.
struct Tree {
    /// `children[node][bit]`: an internal node id, or `LEAF | symbol`.
    children: [[u16; 2]; STATES],
    /// Depth of each internal node, in bits from the root.
    depth: [u8; STATES],
    /// Whether the path from the root to the node is all 1 bits (a prefix of EOS).
    all_ones: [bool; STATES],
}

/// Inserts every code of [`CODES`] into a tree. Node ids are given in creation order, so the
/// root is 0. Panics (a compile error, since it runs in a `static` initializer) unless the code
/// is complete and prefix-free with exactly 256 internal nodes.
const fn build_tree() -> Tree {
    let mut tree = Tree {
        children: [[EMPTY; 2]; STATES],
        depth: [0; STATES],
        all_ones: [false; STATES],
    };
    tree.all_ones[0] = true;
    let mut nodes = 1;
    let mut symbol = 0;
    while symbol < CODES.len() {
        let (code, bits) = CODES[symbol];
        let mut node = 0;
        let mut i = bits;
        while i > 1 {
            i -= 1;
            let bit = ((code >> i) & 1) as usize;
            let child = tree.children[node][bit];
            if child == EMPTY {
                assert!(nodes < STATES, "the code has more than 256 internal nodes");
                tree.children[node][bit] = nodes as u16;
                tree.depth[nodes] = tree.depth[node] + 1;
                tree.all_ones[nodes] = tree.all_ones[node] && bit == 1;
                node = nodes;
                nodes += 1;
            } else {
                assert!(child & LEAF == 0, "a code is a prefix of another");
                node = child as usize;
            }
        }
        let bit = (code & 1) as usize;
        assert!(tree.children[node][bit] == EMPTY, "two codes are equal");
        tree.children[node][bit] = LEAF | symbol as u16;
        symbol += 1;
    }
    assert!(nodes == STATES, "the code is not complete");
    tree
}

const fn build_transitions(tree: &Tree) -> [[Transition; 16]; STATES] {
    let none = Transition {
        next: 0,
        symbol: 0,
        flags: 0,
    };
    let mut table = [[none; 16]; STATES];
    let mut state = 0;
    while state < STATES {
        let mut nibble = 0;
        while nibble < 16 {
            table[state][nibble] = transition(tree, state, nibble as u8);
            nibble += 1;
        }
        state += 1;
    }
    table
}

/// Walks four bits, most significant first, from `state`.
const fn transition(tree: &Tree, state: usize, nibble: u8) -> Transition {
    let mut node = state;
    let mut symbol = 0;
    let mut flags = 0;
    let mut i = 4;
    while i > 0 {
        i -= 1;
        let child = tree.children[node][((nibble >> i) & 1) as usize];
        assert!(child != EMPTY, "the code is not complete");
        if child & LEAF == 0 {
            node = child as usize;
            continue;
        }
        let leaf = (child & !LEAF) as usize;
        if leaf == EOS {
            return Transition {
                next: 0,
                symbol: 0,
                flags: FAIL,
            };
        }
        symbol = leaf as u8;
        flags |= EMIT;
        node = 0;
    }
    if tree.all_ones[node] && tree.depth[node] <= PADDING_BITS_MAX {
        flags |= ACCEPT;
    }
    Transition {
        next: node as u8,
        symbol,
        flags,
    }
}
