//! The store's surrogate-key index and prefix purge: tags indexed on insert, dropped on
//! eviction, replacement and purge, their bytes charged within the memory limit, and the
//! invariants (index = entries, bytes = charges) after every step.

mod common;

use std::sync::Arc;

use common::{Rng, entry, headers};
use http::HeaderMap;
use squall_cache::{
    CacheKey, Entry, NODE_OVERHEAD_BYTES, SURROGATE_KEY_BYTES_MAX, SURROGATE_KEYS_MAX, Store,
    TAG_OVERHEAD_BYTES, TAG_REF_BYTES, surrogate_keys,
};

fn key(path: &str) -> CacheKey {
    CacheKey::new("https", b"example.com", path.as_bytes())
}

fn tagged(tags: &str, body_len: usize) -> Arc<Entry> {
    entry(&[("surrogate-key", tags)], &[], body_len)
}

fn tags(value: &str) -> Vec<squall_cache::Tag> {
    surrogate_keys(&headers(&[("surrogate-key", value)]))
}

fn present(store: &Store, path: &str) -> bool {
    store.lookup(&key(path), &HeaderMap::new()).is_some()
}

#[test]
fn purge_by_tag_drops_every_carrier_and_frees_the_index() {
    // One shard, so that the shared tag's string is charged once and the sums are exact.
    let store = Store::new(1 << 20, 1, 1.0);
    let (a, ab, c) = (tagged("a", 10), tagged("a b", 10), tagged("c", 10));
    let untagged = entry(&[], &[], 10);
    for (path, e) in [("/a", &a), ("/ab", &ab), ("/c", &c), ("/none", &untagged)] {
        assert!(store.insert(key(path), Arc::clone(e)));
        store.check_invariants();
    }
    let charges = Store::charge(&key("/a"), &a)
        + Store::charge(&key("/ab"), &ab)
        + Store::charge(&key("/c"), &c)
        + Store::charge(&key("/none"), &untagged);
    // `a` is indexed once for two entries: its string is charged once.
    assert_eq!(store.stats().bytes, charges - (1 + TAG_OVERHEAD_BYTES));
    assert_eq!(
        Store::charge(&key("/a"), &a),
        a.size() + key("/a").size() + NODE_OVERHEAD_BYTES + 1 + TAG_OVERHEAD_BYTES + TAG_REF_BYTES
    );

    assert_eq!(store.purge_tags(&tags("a")), 2);
    store.check_invariants();
    assert!(!present(&store, "/a") && !present(&store, "/ab"));
    assert!(present(&store, "/c") && present(&store, "/none"));
    assert_eq!(
        store.stats().bytes,
        Store::charge(&key("/c"), &c) + Store::charge(&key("/none"), &untagged)
    );
    assert_eq!(store.purge_tags(&tags("a b")), 0, "b left with /ab");
    assert_eq!(store.purge_tags(&tags("x c")), 1);
    assert_eq!(store.purge_tags(&[]), 0);
    store.check_invariants();
    assert_eq!(store.stats().bytes, Store::charge(&key("/none"), &untagged));
    assert!(present(&store, "/none"));
}

#[test]
fn tags_are_case_sensitive_and_shared_across_shards() {
    let store = Store::new(1 << 20, 16, 1.0);
    for i in 0..64 {
        store.insert(key(&format!("/o/{i}")), tagged(&format!("all n{i}"), 10));
    }
    store.insert(key("/upper"), tagged("ALL", 10));
    store.check_invariants();
    assert_eq!(store.purge_tags(&tags("n3 n7")), 2);
    assert_eq!(store.purge_tags(&tags("all")), 62);
    store.check_invariants();
    assert_eq!(store.stats().entries, 1);
    assert!(present(&store, "/upper"));
}

#[test]
fn a_replaced_variant_leaves_its_old_tags() {
    let store = Store::new(1 << 20, 1, 1.0);
    store.insert(key("/k"), tagged("old shared", 10));
    store.insert(key("/other"), tagged("shared", 10));
    let new = tagged("new", 10);
    store.insert(key("/k"), Arc::clone(&new));
    store.check_invariants();
    assert_eq!(store.purge_tags(&tags("old")), 0);
    assert_eq!(store.purge_tags(&tags("shared")), 1);
    assert!(present(&store, "/k"));
    assert_eq!(store.stats().bytes, Store::charge(&key("/k"), &new));
    // A purge by URL and a removal of the variant drop the tags too.
    store.purge(&key("/k"));
    store.check_invariants();
    assert_eq!(store.stats().bytes, 0);
    store.insert(key("/k"), Arc::clone(&new));
    store.remove_variant(&key("/k"), &new);
    store.check_invariants();
    assert_eq!(store.stats().bytes, 0);
    assert_eq!(store.purge_tags(&tags("new")), 0);
}

#[test]
fn eviction_drops_index_references_and_tag_bytes_count_toward_the_limit() {
    // Responses with the most and longest tags the index takes: most of their charge is tags.
    let many: Vec<String> = (0..SURROGATE_KEYS_MAX)
        .map(|i| format!("{i:0>width$}", width = SURROGATE_KEY_BYTES_MAX))
        .collect();
    let heavy = tagged(&many.join(" "), 10);
    let k = key("/heavy");
    let worst = Store::charge(&k, &heavy);
    assert!(worst > SURROGATE_KEYS_MAX * SURROGATE_KEY_BYTES_MAX);
    // Room for three, not four, when none shares its tags.
    let store = Store::new(worst * 3 + worst / 2, 1, 1.0);
    for i in 0..10 {
        let own = format!("own{i} {}", many[..SURROGATE_KEYS_MAX - 1].join(" "));
        assert_eq!(tags(&own).len(), SURROGATE_KEYS_MAX);
        assert!(store.insert(key(&format!("/h/{i}")), tagged(&own, 10)));
        store.check_invariants();
    }
    // They share 63 strings, so far more than three fit, and some were still evicted.
    let stats = store.stats();
    assert!(stats.entries > 3 && stats.evictions > 0, "{stats:?}");
    assert_eq!(store.purge_tags(&tags("own0 own1")), 0, "evicted");
    assert_eq!(store.purge_tags(&tags(&many[0])), stats.entries);
    store.check_invariants();
    assert_eq!(store.stats().bytes, 0);
    // An object whose body fits but whose tags would not is refused.
    let small = Store::new(worst - 1, 1, 1.0);
    assert!(!small.insert(k, heavy));
    assert_eq!(small.stats().rejected_too_large, 1);
}

#[test]
fn prefix_purge_takes_the_path_and_query_under_it_on_that_scheme_and_host() {
    let store = Store::new(1 << 20, 8, 1.0);
    let keys = [
        ("https", "example.com", "/p/", true),
        ("https", "example.com", "/p/a", true),
        ("https", "Example.com:443", "/p/b/c?d", true),
        ("https", "example.com", "/p/?q", true),
        ("https", "example.com", "/p", false),
        ("https", "example.com", "/pa/x", false),
        ("https", "example.com", "/q/p/", false),
        ("https", "example.org", "/p/a", false),
        ("http", "example.com", "/p/a", false),
    ];
    for (scheme, host, path, _) in keys {
        let k = CacheKey::new(scheme, host.as_bytes(), path.as_bytes());
        let varied = [("vary", "accept-encoding")];
        store.insert(
            k.clone(),
            entry(&varied, &[("accept-encoding", "gzip")], 10),
        );
        store.insert(k, entry(&varied, &[("accept-encoding", "br")], 10));
    }
    store.check_invariants();
    assert_eq!(store.stats().entries, 2 * keys.len());
    assert_eq!(
        store.purge_prefix(&key("/p/")),
        2 * 4,
        "both variants of four URLs"
    );
    store.check_invariants();
    for (scheme, host, path, under) in keys {
        let k = CacheKey::new(scheme, host.as_bytes(), path.as_bytes());
        let found = store.lookup(&k, &headers(&[("accept-encoding", "br")]));
        assert_eq!(found.is_none(), under, "{scheme}://{host}{path}");
    }
    assert_eq!(store.purge_prefix(&key("/p/")), 0);
    assert_eq!(store.purge_prefix(&key("/")), 2 * 3);
    store.check_invariants();
}

/// Random inserts (with random tags), lookups, purges by URL, tag and prefix against a small
/// store: the bound and the invariants hold throughout, and every kind of removal happens.
#[test]
fn random_tagged_load_keeps_the_index_and_the_bound() {
    const MEMORY_BYTES: usize = 128 * 1024;
    let store = Store::new(MEMORY_BYTES, 4, 0.5);
    let mut rng = Rng::new(0x7a65);
    let (mut by_tag, mut by_prefix) = (0, 0);
    for step in 0..30_000u32 {
        let dir = rng.below(8);
        let k = key(&format!("/d{dir}/{}", rng.below(500)));
        match rng.below(100) {
            0..=79 => {
                let count = rng.below(6);
                let t: Vec<String> = (0..count).map(|_| format!("t{}", rng.below(40))).collect();
                let len = if rng.below(50) == 0 { 200 } else { 8 };
                let t = format!("{} {}", t.join(" "), "x".repeat(len));
                store.insert(k, tagged(&t, rng.below(2_048) as usize));
            }
            80..=89 => {
                store.lookup(&k, &HeaderMap::new());
            }
            90..=94 => {
                store.purge(&k);
            }
            95..=97 => by_tag += store.purge_tags(&tags(&format!("t{}", rng.below(40)))),
            _ => by_prefix += store.purge_prefix(&key(&format!("/d{dir}/"))),
        }
        assert!(store.stats().bytes <= MEMORY_BYTES, "step {step}");
        if step % 16 == 0 {
            store.check_invariants();
        }
    }
    store.check_invariants();
    let stats = store.stats();
    assert!(stats.evictions > 1_000, "{stats:?}");
    assert!(by_tag > 100, "purged by tag: {by_tag}");
    assert!(by_prefix > 100, "purged by prefix: {by_prefix}");
}
