//! Fixed, seedless hashes. Every worker builds its own ring and hashes its own keys, and a key
//! must land on the same server in all of them (and after a restart), or consistent hashing
//! would scatter one URL's cache over every origin. So nothing here may depend on a per-process
//! random seed the way `std`'s `RandomState` does.

use std::net::SocketAddr;

/// splitmix64's finalizer: a bijection on u64 whose every output bit depends on every input
/// bit. A caller's key may be weak (an IPv4 address as an integer uses 32 bits); mixing spreads
/// it over the whole ring without adding collisions.
pub(crate) fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A stable 64-bit hash of `bytes`, for the worker to turn a consistent-hash key (the request
/// URI, a client address) into the `u64` that [`crate::Group::pick`] takes. Eight bytes per
/// multiply, then a splitmix64 finalizer; not for adversarial collision resistance (a client who can choose
/// URIs can aim at one origin anyway, by trying).
pub fn key_hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    // Seeded with digits of pi so that the empty key does not hash to 0.
    let mut h = 0x243f_6a88_85a3_08d3 ^ (bytes.len() as u64).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        h = (h ^ u64::from_le_bytes(word))
            .wrapping_mul(K)
            .rotate_left(29);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(word))
            .wrapping_mul(K)
            .rotate_left(29);
    }
    mix64(h)
}

/// Where virtual node `vnode` of the server at `address` sits on the ring. It depends only on
/// the address and the node's number, never on the server's index or the other servers: that
/// is what makes adding or removing a server move only the keys it must.
pub(crate) fn ring_point(address: &SocketAddr, vnode: u32) -> u32 {
    (mix64(address_hash(address) ^ mix64(u64::from(vnode).wrapping_add(1))) >> 32) as u32
}

fn address_hash(address: &SocketAddr) -> u64 {
    let mut bytes = [0u8; 18];
    let len = match address {
        SocketAddr::V4(v4) => {
            bytes[..4].copy_from_slice(&v4.ip().octets());
            4
        }
        SocketAddr::V6(v6) => {
            bytes[..16].copy_from_slice(&v6.ip().octets());
            16
        }
    };
    bytes[len..len + 2].copy_from_slice(&address.port().to_be_bytes());
    key_hash(&bytes[..len + 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_hash_is_stable_and_length_sensitive() {
        // Pinned values: a change here silently remaps every key on every deployed ring, so
        // it must be a decision, not an accident.
        assert_eq!(key_hash(b""), 0xe9e0_033e_3bad_af36);
        assert_eq!(key_hash(b"/index.html"), 0xa55b_ed4d_d841_9776);
        assert_eq!(ring_point(&"10.0.0.1:80".parse().unwrap(), 0), 0x2eca_9cf4);
        assert_ne!(key_hash(b"a"), key_hash(b"a\0"));
        assert_ne!(key_hash(b"/index.html"), key_hash(b"/index.htm"));
        let v4: SocketAddr = "10.0.0.1:80".parse().unwrap();
        let v4b: SocketAddr = "10.0.0.1:81".parse().unwrap();
        assert_ne!(ring_point(&v4, 0), ring_point(&v4b, 0));
        assert_ne!(ring_point(&v4, 0), ring_point(&v4, 1));
    }

    #[test]
    fn mix64_spreads_small_keys() {
        // Consecutive small integers must not stay in one corner of the ring.
        let high_bits: std::collections::HashSet<u64> =
            (0..64u64).map(|k| mix64(k) >> 58).collect();
        assert!(high_bits.len() > 30, "{}", high_bits.len());
    }
}
