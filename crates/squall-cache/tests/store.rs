//! The store: a hard byte bound under random load, Vary variants, purge, size limits, and
//! byte accounting on replacement.

mod common;

use std::sync::Arc;

use common::{Rng, entry, headers};
use http::HeaderMap;
use squall_cache::{CacheKey, Entry, Store, VARIANTS_PER_KEY_MAX};

fn key(path: &str) -> CacheKey {
    CacheKey::new("https", b"example.com", path.as_bytes())
}

#[test]
fn byte_bound_holds_under_random_load() {
    const MEMORY_BYTES: usize = 256 * 1024;
    let store = Store::new(MEMORY_BYTES, 4, 0.5);
    let mut rng = Rng::new(0x5eed);
    let encodings = ["gzip", "br", "identity", "zstd"];
    let mut too_large = 0;
    let mut live: Vec<(CacheKey, Arc<Entry>)> = Vec::new();
    for step in 0..100_000u32 {
        let k = key(&format!("/o/{}", rng.below(2_000)));
        let op = rng.below(100);
        if op < 80 {
            // Mostly small bodies, sometimes large ones, now and then too large.
            let size = match rng.below(100) {
                0..=79 => rng.below(2_048),
                80..=97 => rng.below(16_384),
                _ => rng.below(64 * 1024),
            } as usize;
            let enc = encodings[rng.below(4) as usize];
            let varied = rng.below(2) == 0;
            let response: &[(&str, &str)] = if varied {
                &[("vary", "accept-encoding")]
            } else {
                &[]
            };
            let e = entry(response, &[("accept-encoding", enc)], size);
            if Store::charge(&k, &e) > store.object_max_bytes() {
                too_large += 1;
            }
            if store.insert(k.clone(), Arc::clone(&e)) {
                live.push((k, e));
            }
        } else if op < 90 {
            let enc = encodings[rng.below(4) as usize];
            if let Some(e) = store.lookup(&k, &headers(&[("accept-encoding", enc)])) {
                assert!(e.matches_vary(&headers(&[("accept-encoding", enc)])));
            }
        } else if op < 95 {
            store.purge(&k);
        } else if let Some((k, e)) = live.get(rng.below(live.len().max(1) as u64) as usize) {
            store.remove_variant(k, e);
        }
        let stats = store.stats();
        assert!(
            stats.bytes <= MEMORY_BYTES,
            "step {step}: {} bytes",
            stats.bytes
        );
        if step % 64 == 0 {
            store.check_invariants();
        }
        if live.len() > 10_000 {
            live.drain(..5_000);
        }
    }
    store.check_invariants();
    let stats = store.stats();
    assert_eq!(stats.rejected_too_large, too_large);
    assert!(
        too_large > 0,
        "the trace should include objects over the limit"
    );
    assert!(
        stats.evictions > 1_000,
        "the trace should fill the store: {stats:?}"
    );
    println!("after 100k ops: {stats:?}");
}

#[test]
fn vary_variants_are_separate_entries() {
    let store = Store::new(1 << 20, 1, 1.0);
    let k = key("/page");
    let vary = &[("vary", "Accept-Encoding")][..];
    let gzip = entry(vary, &[("accept-encoding", "gzip")], 10);
    let br = entry(vary, &[("accept-encoding", "br")], 20);
    assert!(store.insert(k.clone(), Arc::clone(&gzip)));
    assert!(store.insert(k.clone(), Arc::clone(&br)));
    assert_eq!(store.stats().entries, 2);
    let got = store
        .lookup(&k, &headers(&[("accept-encoding", "br")]))
        .unwrap();
    assert!(Arc::ptr_eq(&got, &br));
    let got = store
        .lookup(&k, &headers(&[("accept-encoding", " GZIP ")]))
        .unwrap();
    assert!(Arc::ptr_eq(&got, &gzip));
    assert!(
        store
            .lookup(&k, &headers(&[("accept-encoding", "zstd")]))
            .is_none()
    );
    assert!(store.lookup(&k, &HeaderMap::new()).is_none());
    // HEAD shares the key class of GET; other hosts and paths do not match.
    assert!(
        store
            .lookup(&key("/other"), &headers(&[("accept-encoding", "br")]))
            .is_none()
    );
    let other_host = CacheKey::new("https", b"example.org", b"/page");
    assert!(
        store
            .lookup(&other_host, &headers(&[("accept-encoding", "br")]))
            .is_none()
    );
    store.check_invariants();
}

#[test]
fn a_new_vary_schema_replaces_old_variants() {
    let store = Store::new(1 << 20, 1, 1.0);
    let k = key("/page");
    let ae = &[("vary", "accept-encoding")][..];
    store.insert(k.clone(), entry(ae, &[("accept-encoding", "gzip")], 1));
    store.insert(k.clone(), entry(ae, &[("accept-encoding", "br")], 1));
    let plain = entry(&[], &[("accept-encoding", "gzip")], 1);
    store.insert(k.clone(), Arc::clone(&plain));
    assert_eq!(store.stats().entries, 1);
    let got = store
        .lookup(&k, &headers(&[("accept-encoding", "br")]))
        .unwrap();
    assert!(Arc::ptr_eq(&got, &plain));
    store.check_invariants();
}

#[test]
fn variants_per_key_are_bounded() {
    let store = Store::new(16 << 20, 1, 1.0);
    let k = key("/ua");
    let vary = &[("vary", "user-agent")][..];
    let agents: Vec<String> = (0..VARIANTS_PER_KEY_MAX + 5)
        .map(|i| format!("agent-{i}"))
        .collect();
    for a in &agents {
        store.insert(k.clone(), entry(vary, &[("user-agent", a)], 1));
    }
    assert_eq!(store.stats().entries, VARIANTS_PER_KEY_MAX);
    // The oldest went first.
    assert!(
        store
            .lookup(&k, &headers(&[("user-agent", &agents[0])]))
            .is_none()
    );
    assert!(
        store
            .lookup(&k, &headers(&[("user-agent", agents.last().unwrap())]))
            .is_some()
    );
    store.check_invariants();
}

#[test]
fn purge_removes_every_variant() {
    let store = Store::new(1 << 20, 8, 1.0);
    let k = key("/p");
    let vary = &[("vary", "accept-encoding")][..];
    for enc in ["gzip", "br", "zstd"] {
        store.insert(k.clone(), entry(vary, &[("accept-encoding", enc)], 5));
    }
    let other = key("/q");
    store.insert(other.clone(), entry(&[], &[], 5));
    assert_eq!(store.purge(&k), 3);
    assert_eq!(store.purge(&k), 0);
    assert_eq!(store.stats().entries, 1);
    assert!(store.lookup(&other, &HeaderMap::new()).is_some());
    store.check_invariants();
}

#[test]
fn remove_variant_removes_only_that_entry() {
    let store = Store::new(1 << 20, 2, 1.0);
    let k = key("/r");
    let first = entry(&[], &[], 5);
    store.insert(k.clone(), Arc::clone(&first));
    let second = entry(&[], &[], 6);
    store.insert(k.clone(), Arc::clone(&second));
    // `first` was replaced already; removing it again is a no-op.
    store.remove_variant(&k, &first);
    assert_eq!(store.stats().entries, 1);
    store.remove_variant(&k, &second);
    assert_eq!(store.stats().entries, 0);
    assert_eq!(store.stats().bytes, 0);
}

#[test]
fn too_large_objects_are_refused() {
    let store = Store::new(100_000, 4, 0.5);
    assert_eq!(store.memory_limit(), 100_000);
    assert_eq!(store.object_max_bytes(), 12_500);
    let k = key("/big");
    let big = entry(&[], &[], 13_000);
    assert!(!store.insert(k.clone(), big));
    let fits = entry(&[], &[], 10_000);
    assert!(Store::charge(&k, &fits) <= store.object_max_bytes());
    assert!(store.insert(k.clone(), fits));
    let stats = store.stats();
    assert_eq!(
        (stats.rejected_too_large, stats.inserts, stats.entries),
        (1, 1, 1)
    );

    let nothing = Store::new(0, 4, 1.0);
    assert!(!nothing.insert(k.clone(), entry(&[], &[], 0)));
    assert!(nothing.lookup(&k, &HeaderMap::new()).is_none());
    assert_eq!(nothing.stats().bytes, 0);
}

#[test]
fn replacement_accounts_bytes() {
    let store = Store::new(1 << 20, 1, 1.0);
    let k = key("/x");
    let small = entry(&[], &[], 100);
    let large = entry(&[], &[], 5_000);
    store.insert(k.clone(), Arc::clone(&small));
    assert_eq!(store.stats().bytes, Store::charge(&k, &small));
    store.insert(k.clone(), Arc::clone(&large));
    assert_eq!(store.stats().bytes, Store::charge(&k, &large));
    assert_eq!(store.stats().entries, 1);
    store.insert(k.clone(), Arc::clone(&small));
    assert_eq!(store.stats().bytes, Store::charge(&k, &small));
    let got = store.lookup(&k, &HeaderMap::new()).unwrap();
    assert!(Arc::ptr_eq(&got, &small));
    // Sizes count headers, body and wire head.
    assert!(large.size() >= 5_000 + large.wire_head.len());
    store.check_invariants();
}

#[test]
fn eviction_keeps_visited_entries() {
    let k = |i: usize| key(&format!("/e/{i}"));
    let one = entry(&[], &[], 1_000);
    let charge = Store::charge(&k(0), &one);
    let store = Store::new(charge * 4, 1, 1.0);
    for i in 0..4 {
        store.insert(k(i), entry(&[], &[], 1_000));
    }
    assert_eq!(store.stats().entries, 4);
    assert!(store.lookup(&k(0), &HeaderMap::new()).is_some());
    store.insert(k(4), entry(&[], &[], 1_000));
    // The visited oldest stays; the next unvisited one goes.
    assert!(store.lookup(&k(0), &HeaderMap::new()).is_some());
    assert!(store.lookup(&k(1), &HeaderMap::new()).is_none());
    assert_eq!(store.stats().evictions, 1);
    store.check_invariants();
}

#[test]
fn shared_across_threads() {
    let store = Arc::new(Store::new(1 << 20, 8, 0.5));
    let handles: Vec<_> = (0..4u64)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let mut rng = Rng::new(t);
                for _ in 0..5_000 {
                    let k = key(&format!("/t/{}", rng.below(300)));
                    if rng.below(2) == 0 {
                        store.insert(k, entry(&[], &[], rng.below(8_000) as usize));
                    } else {
                        store.lookup(&k, &HeaderMap::new());
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    store.check_invariants();
    assert!(store.stats().bytes <= store.memory_limit());
}
