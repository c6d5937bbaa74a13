//! Surrogate keys: the tags an origin puts on a response (`Surrogate-Key: product-7 list`, as
//! Fastly and Varnish xkey read it) so that an operator can drop every object carrying a tag at
//! once, and the per-shard index from tag to stored slots that makes that a lookup, not a walk.
//!
//! The index lives inside the memory limit like everything else the store keeps: each distinct
//! tag string costs [`TAG_OVERHEAD_BYTES`] plus its length (while some entry of the shard
//! carries it), and each entry pays [`TAG_REF_BYTES`] per tag it carries (its pointer to the
//! shared string and its slot in the tag's set). A response brings at most
//! [`SURROGATE_KEYS_MAX`] tags of at most [`SURROGATE_KEY_BYTES_MAX`] bytes; others are
//! ignored, so one response cannot grow the index without bound.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use http::HeaderMap;
use http::header::HeaderName;

/// One tag, shared between the index and every entry that carries it.
pub type Tag = Arc<[u8]>;

/// Tags read from one `Surrogate-Key` field (request or response); later ones are ignored.
pub const SURROGATE_KEYS_MAX: usize = 64;
/// Longest tag read; a longer one is ignored (and does not count toward the maximum).
pub const SURROGATE_KEY_BYTES_MAX: usize = 256;
/// Bytes charged per distinct tag in a shard's index beyond its length: the map slot, the
/// string's and the set's headers.
pub const TAG_OVERHEAD_BYTES: usize = 96;
/// Bytes charged per tag an entry carries: its pointer to the string and its slot number in
/// the tag's set (with the set's slack).
pub const TAG_REF_BYTES: usize = 40;

/// The response (and PURGE request) field that carries tags.
pub const SURROGATE_KEY: HeaderName = HeaderName::from_static("surrogate-key");

/// The tags of every `Surrogate-Key` line in `headers`: separated by spaces or tabs, byte for
/// byte (tags are case-sensitive), without duplicates, in order, bounded as the module says.
pub fn surrogate_keys(headers: &HeaderMap) -> Vec<Tag> {
    let mut tags: Vec<Tag> = Vec::new();
    let members = headers
        .get_all(SURROGATE_KEY)
        .iter()
        .flat_map(|line| line.as_bytes().split(|&b| b == b' ' || b == b'\t'));
    for tag in members {
        if tags.len() == SURROGATE_KEYS_MAX {
            break;
        }
        if tag.is_empty() || tag.len() > SURROGATE_KEY_BYTES_MAX {
            continue;
        }
        if !tags.iter().any(|t| **t == *tag) {
            tags.push(Arc::from(tag));
        }
    }
    tags
}

/// What `tags` cost an entry: [`TAG_REF_BYTES`] each.
pub(crate) fn ref_bytes(tags: &[Tag]) -> usize {
    tags.len() * TAG_REF_BYTES
}

/// What a tag string costs the index while some entry of the shard carries it.
fn string_bytes(tag: &[u8]) -> usize {
    tag.len() + TAG_OVERHEAD_BYTES
}

/// The most `tags` can cost: their references and every string new to the index.
pub(crate) fn worst_bytes(tags: &[Tag]) -> usize {
    ref_bytes(tags) + tags.iter().map(|t| string_bytes(t)).sum::<usize>()
}

/// One shard's index: tag -> slots of the entries that carry it. A tag is present only while
/// its set is not empty.
#[derive(Debug, Default)]
pub(crate) struct TagIndex {
    map: HashMap<Tag, HashSet<usize>>,
    /// The strings' charge: [`string_bytes`] of every tag present.
    bytes: usize,
}

impl TagIndex {
    /// The bytes the tag strings are charged now.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The bytes adding `tags` would charge for strings not yet present.
    pub fn new_bytes(&self, tags: &[Tag]) -> usize {
        tags.iter()
            .filter(|t| !self.map.contains_key(&***t))
            .map(|t| string_bytes(t))
            .sum()
    }

    /// `tags` with each one already present replaced by the index's copy, so that entries
    /// share one string per tag.
    pub fn share(&self, tags: Vec<Tag>) -> Box<[Tag]> {
        tags.into_iter()
            .map(|t| match self.map.get_key_value(&*t) {
                Some((shared, _)) => Arc::clone(shared),
                None => t,
            })
            .collect()
    }

    /// Records that `slot` carries `tags` (no duplicates among them); returns the bytes added.
    pub fn add(&mut self, slot: usize, tags: &[Tag]) -> usize {
        let mut added = 0;
        for tag in tags {
            let slots = self.map.entry(Arc::clone(tag)).or_insert_with(|| {
                added += string_bytes(tag);
                HashSet::new()
            });
            slots.insert(slot);
        }
        self.bytes += added;
        added
    }

    /// Forgets that `slot` carries `tags`; returns the bytes freed.
    pub fn remove(&mut self, slot: usize, tags: &[Tag]) -> usize {
        let mut freed = 0;
        for tag in tags {
            let Some(slots) = self.map.get_mut(&**tag) else {
                continue;
            };
            slots.remove(&slot);
            if slots.is_empty() {
                self.map.remove(&**tag);
                freed += string_bytes(tag);
            }
        }
        self.bytes -= freed;
        freed
    }

    /// The slots carrying any of `tags`, each once.
    pub fn slots(&self, tags: &[Tag]) -> Vec<usize> {
        let mut slots: Vec<usize> = tags
            .iter()
            .filter_map(|t| self.map.get(&**t))
            .flatten()
            .copied()
            .collect();
        slots.sort_unstable();
        slots.dedup();
        slots
    }

    /// Panics unless the index is exactly what `stored` (slot, tags) says and its byte count
    /// is right. For tests.
    pub fn check<'a>(&self, stored: impl Iterator<Item = (usize, &'a [Tag])>) {
        let mut refs = 0;
        for (slot, tags) in stored {
            for tag in tags {
                let slots = self.map.get(&**tag).expect("a carried tag is indexed");
                assert!(slots.contains(&slot), "slot {slot} missing from its tag");
                refs += 1;
            }
        }
        let mut bytes = 0;
        let mut indexed = 0;
        for (tag, slots) in &self.map {
            assert!(!slots.is_empty(), "empty tag kept");
            bytes += string_bytes(tag);
            indexed += slots.len();
        }
        assert_eq!(indexed, refs, "index holds slots that do not carry the tag");
        assert_eq!(bytes, self.bytes, "tag bytes drifted");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(lines: &[&[u8]]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for line in lines {
            h.append(SURROGATE_KEY, HeaderValue::from_bytes(line).unwrap());
        }
        h
    }

    fn strings(tags: &[Tag]) -> Vec<&[u8]> {
        tags.iter().map(|t| &**t).collect()
    }

    #[test]
    fn parsing_splits_on_spaces_keeps_case_and_drops_duplicates() {
        let h = headers(&[b" a  B\tc a ", b"d a"]);
        assert_eq!(strings(&surrogate_keys(&h)), [&b"a"[..], b"B", b"c", b"d"]);
        assert!(surrogate_keys(&HeaderMap::new()).is_empty());
        assert!(surrogate_keys(&headers(&[b"   "])).is_empty());
    }

    #[test]
    fn parsing_is_bounded() {
        let long = vec![b'x'; SURROGATE_KEY_BYTES_MAX + 1];
        let edge = vec![b'y'; SURROGATE_KEY_BYTES_MAX];
        let line = [&long[..], b" ", &edge[..]].concat();
        assert_eq!(strings(&surrogate_keys(&headers(&[&line]))), [&edge[..]]);
        let many: Vec<String> = (0..SURROGATE_KEYS_MAX + 10)
            .map(|i| format!("t{i}"))
            .collect();
        let tags = surrogate_keys(&headers(&[many.join(" ").as_bytes()]));
        assert_eq!(tags.len(), SURROGATE_KEYS_MAX);
        assert_eq!(&*tags[SURROGATE_KEYS_MAX - 1], b"t63");
    }

    #[test]
    fn the_index_charges_each_string_once_and_frees_it_with_its_last_slot() {
        let mut index = TagIndex::default();
        let ab = surrogate_keys(&headers(&[b"a bb"]));
        let b = index.share(surrogate_keys(&headers(&[b"bb"])));
        assert_eq!(index.new_bytes(&ab), 1 + 2 + 2 * TAG_OVERHEAD_BYTES);
        assert_eq!(index.add(1, &ab), worst_bytes(&ab) - ref_bytes(&ab));
        let b = index.share(b.into_vec());
        assert!(Arc::ptr_eq(&b[0], &ab[1]), "the string is shared");
        assert_eq!(index.new_bytes(&b), 0);
        assert_eq!(index.add(2, &b), 0);
        assert_eq!(index.slots(&ab), [1, 2]);
        index.check([(1, &ab[..]), (2, &b[..])].into_iter());
        assert_eq!(index.remove(1, &ab), 1 + TAG_OVERHEAD_BYTES);
        assert_eq!(index.bytes(), 2 + TAG_OVERHEAD_BYTES);
        index.check([(2, &b[..])].into_iter());
        assert_eq!(index.remove(2, &b), 2 + TAG_OVERHEAD_BYTES);
        assert_eq!(index.bytes(), 0);
        index.check(std::iter::empty());
    }
}
