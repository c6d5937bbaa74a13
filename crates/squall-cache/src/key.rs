//! The cache key: which stored URL a request names (RFC 9111 §2: the request method and target
//! URI), with the hash that picks its store shard and in-flight shard.

use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::OnceLock;

/// One cacheable URL: method class (GET and HEAD share one, since a HEAD may be answered from a
/// stored GET response, RFC 9110 §9.3.2), scheme, host (lowercased, default port and trailing
/// dot stripped) and path with query, byte for byte.
///
/// The path is not normalised here: the router has already decided what the path means, and
/// two spellings of one resource are at worst two cache entries, never a wrong answer.
#[derive(Clone)]
pub struct CacheKey {
    /// `G` (the GET/HEAD class), then `scheme://host`, then the path and query.
    repr: Box<[u8]>,
    /// Where the host starts and where the path starts in `repr`.
    host_at: usize,
    path_at: usize,
    hash: u64,
}

/// The method class byte of GET and HEAD; other classes may come later (e.g. for OPTIONS).
const CLASS_GET: u8 = b'G';

impl CacheKey {
    /// The key of a GET or HEAD request for `scheme://host` + `path_and_query`.
    pub fn new(scheme: &str, host: &[u8], path_and_query: &[u8]) -> CacheKey {
        let host = normalize_host(scheme, host);
        let mut repr = Vec::with_capacity(1 + scheme.len() + 3 + host.len() + path_and_query.len());
        repr.push(CLASS_GET);
        repr.extend(scheme.bytes().map(|b| b.to_ascii_lowercase()));
        repr.extend_from_slice(b"://");
        let host_at = repr.len();
        repr.extend(host.iter().map(u8::to_ascii_lowercase));
        let path_at = repr.len();
        repr.extend_from_slice(path_and_query);
        let hash = hasher().hash_one(&repr[..]);
        CacheKey {
            repr: repr.into_boxed_slice(),
            host_at,
            path_at,
            hash,
        }
    }

    /// A keyed (SipHash, one random key per process) hash of the key: stable within the
    /// process, so the store and the in-flight table agree, and not predictable from outside,
    /// so clients cannot fill one shard or one hash chain on purpose.
    pub fn hash64(&self) -> u64 {
        self.hash
    }

    pub fn scheme(&self) -> &[u8] {
        &self.repr[1..self.host_at - 3]
    }

    pub fn host(&self) -> &[u8] {
        &self.repr[self.host_at..self.path_at]
    }

    pub fn path_and_query(&self) -> &[u8] {
        &self.repr[self.path_at..]
    }

    /// Whether this key is `prefix`'s URL or one under it: same method class, scheme and host,
    /// and a path and query that start with `prefix`'s, byte for byte (`/a/` covers `/a/b` and
    /// `/a/?x`, not `/a`; `/a` also covers `/ab`).
    pub fn starts_with(&self, prefix: &CacheKey) -> bool {
        self.repr[..self.path_at] == prefix.repr[..prefix.path_at]
            && self.path_and_query().starts_with(prefix.path_and_query())
    }

    /// Bytes this key occupies, for the store's accounting.
    pub fn size(&self) -> usize {
        self.repr.len() + std::mem::size_of::<CacheKey>()
    }
}

fn hasher() -> &'static RandomState {
    static HASHER: OnceLock<RandomState> = OnceLock::new();
    HASHER.get_or_init(RandomState::new)
}

/// Strips the scheme's default port and a trailing dot: `Example.com.:443` and `example.com`
/// are one host for https. Lowercasing is done while copying.
fn normalize_host<'a>(scheme: &str, host: &'a [u8]) -> &'a [u8] {
    let default_port: &[u8] = if scheme.eq_ignore_ascii_case("https") {
        b":443"
    } else if scheme.eq_ignore_ascii_case("http") {
        b":80"
    } else {
        b""
    };
    let mut host = host;
    if !default_port.is_empty()
        && let Some(name) = host.strip_suffix(default_port)
    {
        // `[::1]:80` is an IPv6 literal with a port; a bare `::80` is not a port at all.
        if !name.contains(&b':') || name.ends_with(b"]") {
            host = name;
        }
    }
    host.strip_suffix(b".").unwrap_or(host)
}

impl PartialEq for CacheKey {
    fn eq(&self, other: &CacheKey) -> bool {
        self.hash == other.hash && self.repr == other.repr
    }
}

impl Eq for CacheKey {}

impl Hash for CacheKey {
    /// Feeds only the precomputed keyed hash; the tables use [`PassThrough`] so the key is not
    /// hashed twice.
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CacheKey({})", String::from_utf8_lossy(&self.repr[1..]))
    }
}

/// `BuildHasher` for maps keyed by [`CacheKey`]: its `Hash` writes one already-keyed u64, which
/// is used as is.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PassThrough;

impl BuildHasher for PassThrough {
    type Hasher = PassThroughHasher;

    fn build_hasher(&self) -> PassThroughHasher {
        PassThroughHasher(0)
    }
}

pub(crate) struct PassThroughHasher(u64);

impl Hasher for PassThroughHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only reached if something other than CacheKey is hashed; mix it in reasonably.
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The shard index of a hash among `mask + 1` shards. The bits come from the upper half:
/// hashbrown takes the bucket from the low bits and the tag from the top seven, so sharding on
/// either would leave each shard's map with correlated hashes.
pub(crate) fn shard_of(hash: u64, mask: usize) -> usize {
    (hash >> 32) as usize & mask
}

/// Shard counts are powers of two up to this; more shards than this only costs memory.
pub(crate) const SHARDS_MAX: usize = 1 << 16;

/// `shards` rounded to a power of two in `1..=SHARDS_MAX`.
pub(crate) fn shard_count(shards: usize) -> usize {
    shards.clamp(1, SHARDS_MAX).next_power_of_two()
}

const _: () = assert!(SHARDS_MAX.is_power_of_two() && SHARDS_MAX <= 1 << 25);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_normalisation() {
        let a = CacheKey::new("https", b"Example.COM:443", b"/a?b");
        let b = CacheKey::new("HTTPS", b"example.com.", b"/a?b");
        assert_eq!(a, b);
        assert_eq!(a.hash64(), b.hash64());
        assert_eq!(a.host(), b"example.com");
        assert_eq!(a.scheme(), b"https");
        assert_eq!(a.path_and_query(), b"/a?b");
        assert_ne!(a, CacheKey::new("http", b"example.com", b"/a?b"));
        assert_ne!(a, CacheKey::new("https", b"example.com:8443", b"/a?b"));
        assert_ne!(a, CacheKey::new("https", b"example.com", b"/A?b"));
        assert_eq!(CacheKey::new("http", b"[::1]:80", b"/").host(), b"[::1]");
        assert_eq!(CacheKey::new("http", b"::80", b"/").host(), b"::80");
        assert_eq!(CacheKey::new("http", b"h:443", b"/").host(), b"h:443");
    }

    #[test]
    fn prefixes_match_scheme_host_and_leading_path_bytes() {
        let dir = CacheKey::new("https", b"a.example", b"/p/");
        let key = |scheme, host: &[u8], path: &[u8]| CacheKey::new(scheme, host, path);
        assert!(key("https", b"A.example:443", b"/p/x?y").starts_with(&dir));
        assert!(key("https", b"a.example", b"/p/").starts_with(&dir));
        assert!(key("https", b"a.example", b"/p/?q").starts_with(&dir));
        assert!(!key("https", b"a.example", b"/p").starts_with(&dir));
        assert!(!key("https", b"a.example", b"/px/").starts_with(&dir));
        assert!(!key("http", b"a.example", b"/p/x").starts_with(&dir));
        assert!(!key("https", b"a.example.evil", b"/p/x").starts_with(&dir));
        assert!(!key("https", b"b.example", b"/p/x").starts_with(&dir));
        let bare = CacheKey::new("https", b"a.example", b"/p");
        assert!(key("https", b"a.example", b"/pq").starts_with(&bare));
    }

    #[test]
    fn shard_counts() {
        assert_eq!(shard_count(0), 1);
        assert_eq!(shard_count(3), 4);
        assert_eq!(shard_count(64), 64);
        assert_eq!(shard_count(usize::MAX), SHARDS_MAX);
    }
}
