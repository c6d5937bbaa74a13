//! Finds the few regex routes worth running on a path, out of thousands.
//!
//! Running every regex (or one `RegexSet` of all of them) does not scale: measured here, a
//! `RegexSet` of 10,000 patterns answers a warm path in ~0.3 µs but spends 10 µs to 15 ms on each
//! path it has not seen, building lazy-DFA states of 10,000 NFA threads, and real traffic is
//! mostly paths not seen before. So each regex is indexed by literals that every match must
//! contain, taken from its syntax tree (`regex_syntax::hir::literal::Extractor`):
//! - anchored (`^/api/v1/`): every match starts the path with one of its prefix literals; the
//!   literals go into a radix tree walked along the path;
//! - unanchored with a literal (`/static/`, `\.php$`): every match contains one of its prefix
//!   (or suffix) literals somewhere; the literals go into one Aho-Corasick automaton run over
//!   the path;
//! - the rest (`[a-z]+$`, or `^.*x` under the empty prefix) are candidates for every path.
//!
//! A request therefore collects the routes whose literal the path contains (a trie walk and one
//! automaton pass, both bounded by the path length) and the caller runs only their regexes, in
//! file order. When many regexes share one literal (a bucket of `BUCKET_SET_MIN` or more), the
//! bucket also gets a `RegexSet`, so the path is scanned once for the whole bucket instead of
//! once per regex.

use std::collections::HashMap;

use aho_corasick::{AhoCorasick, AhoCorasickKind};
use regex::{RegexSet, RegexSetBuilder};
use regex_syntax::hir::Look;
use regex_syntax::hir::literal::{ExtractKind, Extractor, Seq};

use crate::hash::FxBuild;
use crate::radix::RadixTree;
use crate::smallbuf::SmallBuf;

/// The most literals one regex is indexed under. More alternatives than this (`(?i)` on a long
/// word, a big alternation) fall back to their common prefix, which indexes less sharply.
pub(crate) const REGEX_LITERALS_MAX: usize = 16;

/// A common prefix (or suffix) this long indexes a regex alone, without its alternatives.
pub(crate) const LITERAL_COMMON_BYTES_MIN: usize = 8;

/// Buckets with at least this many regexes get a `RegexSet`: below it, running the few regexes
/// one by one is as fast and costs no extra memory.
pub(crate) const BUCKET_SET_MIN: usize = 16;

/// Compiled-program limit for a bucket's `RegexSet` (the `regex` default is 10 MiB, sized for
/// one pattern). If a set still does not compile, the bucket runs its regexes one by one.
pub(crate) const BUCKET_SET_PROGRAM_BYTES_MAX: usize = 256 << 20;

/// Lazy-DFA cache per thread for a bucket's `RegexSet` (default 2 MiB): many patterns make big
/// DFA states, and a cache that thrashes falls back to the much slower PikeVM.
pub(crate) const BUCKET_SET_DFA_BYTES_MAX: usize = 32 << 20;

/// Largest estimated Aho-Corasick DFA for the unanchored regexes' literals. A DFA costs one table
/// lookup per path byte whatever the number of literals, where the NFA the crate picks for
/// more than ~100 literals follows failure links: measured here (callgrind), a request routed
/// through 10,000 unanchored regexes costs ~1,800 instructions with the DFA and ~2,300 with the
/// NFA, against ~1,730 through 10. The DFA for 10,000 literals of ~15 bytes takes ~10 MiB; past
/// this budget the NFA (about a tenth of the memory) is the better trade.
pub(crate) const AUTOMATON_DFA_BYTES_MAX: usize = 32 << 20;

/// Where one regex is indexed, decided from its syntax alone.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Keys {
    /// Anchored at the start: the path must start with one of these (possibly `""`).
    Anchored(Vec<Vec<u8>>),
    /// The path must contain one of these, each non-empty.
    Floating(Vec<Vec<u8>>),
    /// No usable literal: a candidate for every path.
    Everywhere,
    /// The regex cannot match anything (an empty class): indexed nowhere.
    Nowhere,
}

/// Classifies `pattern`, which already compiled with the same (default) syntax options.
pub(crate) fn keys(pattern: &str) -> Keys {
    let Ok(hir) = regex_syntax::Parser::new().parse(pattern) else {
        return Keys::Everywhere; // not expected, as `regex` parsed it; stay correct regardless
    };
    let prefixes = extract(&hir, ExtractKind::Prefix);
    if prefixes.is_finite() && prefixes.is_empty() {
        return Keys::Nowhere;
    }
    if hir.properties().look_set_prefix().contains(Look::Start) {
        let keys = choose(&prefixes, Affix::Prefix)
            .unwrap_or_else(|| vec![prefixes.longest_common_prefix().unwrap_or(b"").to_vec()]);
        return Keys::Anchored(keys);
    }
    let suffixes = extract(&hir, ExtractKind::Suffix);
    let sets = [
        choose(&prefixes, Affix::Prefix),
        choose(&suffixes, Affix::Suffix),
    ];
    let best = sets
        .into_iter()
        .flatten()
        .filter(|keys| keys.iter().all(|k| !k.is_empty()))
        .max_by_key(|keys| keys.iter().map(Vec::len).min());
    if let Some(keys) = best {
        return Keys::Floating(keys);
    }
    let common = [
        prefixes.longest_common_prefix(),
        suffixes.longest_common_suffix(),
    ];
    match common.into_iter().flatten().max_by_key(|c| c.len()) {
        Some(common) if !common.is_empty() => Keys::Floating(vec![common.to_vec()]),
        _ => Keys::Everywhere,
    }
}

fn extract(hir: &regex_syntax::hir::Hir, kind: ExtractKind) -> Seq {
    let mut extractor = Extractor::new();
    extractor.kind(kind);
    extractor.extract(hir)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Affix {
    Prefix,
    Suffix,
}

/// The keys to index a literal set under: its common prefix (suffix) alone when that is long
/// enough to be selective, else the set itself. `^/api/v1/svc7/[0-9]+` yields ten literals
/// `/api/v1/svc7/0` ... `/9`; one key `/api/v1/svc7/` filters as well at a tenth of the size.
fn choose(seq: &Seq, affix: Affix) -> Option<Vec<Vec<u8>>> {
    let common = match affix {
        Affix::Prefix => seq.longest_common_prefix(),
        Affix::Suffix => seq.longest_common_suffix(),
    };
    match common {
        Some(common) if common.len() >= LITERAL_COMMON_BYTES_MIN => Some(vec![common.to_vec()]),
        _ => minimal(seq, affix),
    }
}

/// The literals of `seq` minus those made redundant by a shorter one (anything starting with
/// `/ab` starts with `/a`; for suffixes, ending), or `None` if the set is infinite or too big.
fn minimal(seq: &Seq, affix: Affix) -> Option<Vec<Vec<u8>>> {
    let orient = |bytes: &[u8]| -> Vec<u8> {
        match affix {
            Affix::Prefix => bytes.to_vec(),
            Affix::Suffix => bytes.iter().rev().copied().collect(),
        }
    };
    let mut all: Vec<Vec<u8>> = seq
        .literals()?
        .iter()
        .map(|l| orient(l.as_bytes()))
        .collect();
    all.sort_unstable();
    // Sorted, a key's extensions follow it directly, so comparing with the last kept key
    // finds every redundant one.
    let mut kept: Vec<Vec<u8>> = Vec::new();
    for key in all {
        if !kept.last().is_some_and(|shorter| key.starts_with(shorter)) {
            kept.push(key);
        }
    }
    (kept.len() <= REGEX_LITERALS_MAX).then(|| kept.iter().map(|k| orient(k)).collect())
}

/// Regex routes sharing one literal (or the catch-all group).
struct Bucket {
    /// Route indices in file order.
    routes: Vec<u32>,
    /// The same routes' patterns as one set, in the same order, for big buckets.
    set: Option<RegexSet>,
}

impl Bucket {
    fn new(routes: Vec<u32>, pattern_of: &impl Fn(u32) -> String) -> Bucket {
        let set = (routes.len() >= BUCKET_SET_MIN)
            .then(|| {
                RegexSetBuilder::new(routes.iter().map(|&r| pattern_of(r)))
                    .size_limit(BUCKET_SET_PROGRAM_BYTES_MAX)
                    .dfa_size_limit(BUCKET_SET_DFA_BYTES_MAX)
                    .build()
                    .ok() // too big even so: run the bucket's regexes one by one
            })
            .flatten();
        Bucket { routes, set }
    }

    /// Pushes the routes that may match `path`. With a set, only those that do match; the
    /// set's `matches` allocates one flag per pattern, so a cheap `is_match` screens misses.
    fn collect(&self, path: &str, out: &mut SmallBuf) {
        match &self.set {
            None => out.extend(&self.routes),
            Some(set) if set.is_match(path) => {
                set.matches(path)
                    .iter()
                    .for_each(|i| out.push(self.routes[i]));
            }
            Some(_) => {}
        }
    }
}

/// Every regex route of one vhost, indexed by literal.
pub(crate) struct RegexIndex {
    anchored: RadixTree<Bucket>,
    floating: Option<Floating>,
    everywhere: Option<Bucket>,
}

/// Unanchored regexes: one automaton over all their literals; pattern `i` is `buckets[i]`.
struct Floating {
    automaton: AhoCorasick,
    buckets: Vec<Bucket>,
}

/// Collects routes per key in file order, then freezes them into a [`RegexIndex`].
#[derive(Default)]
pub(crate) struct RegexIndexBuilder {
    // Fx rather than std's random hash so that one config always builds the same index.
    anchored: HashMap<Vec<u8>, Vec<u32>, FxBuild>,
    floating: HashMap<Vec<u8>, Vec<u32>, FxBuild>,
    everywhere: Vec<u32>,
}

impl RegexIndexBuilder {
    /// Indexes `route` under `keys`. Routes must be added in file order.
    pub(crate) fn add(&mut self, route: u32, keys: Keys) {
        match keys {
            Keys::Anchored(keys) => keys
                .into_iter()
                .for_each(|k| add(&mut self.anchored, k, route)),
            Keys::Floating(keys) => keys
                .into_iter()
                .for_each(|k| add(&mut self.floating, k, route)),
            Keys::Everywhere => self.everywhere.push(route),
            Keys::Nowhere => {}
        }
    }

    /// `pattern_of(route)` gives a route's regex source, for the buckets' `RegexSet`s.
    pub(crate) fn build(self, pattern_of: impl Fn(u32) -> String) -> RegexIndex {
        let mut everywhere = self.everywhere;
        let mut anchored = RadixTree::new();
        for (key, routes) in self.anchored {
            *anchored.entry(&key) = Some(Bucket::new(routes, &pattern_of));
        }
        let (keys, groups): (Vec<Vec<u8>>, Vec<Vec<u32>>) = self.floating.into_iter().unzip();
        let floating = if keys.is_empty() {
            None
        } else if let Some(automaton) = automaton(&keys) {
            let buckets = groups
                .into_iter()
                .map(|g| Bucket::new(g, &pattern_of))
                .collect();
            Some(Floating { automaton, buckets })
        } else {
            // Only a state-count overflow fails here; stay correct by trying them everywhere.
            everywhere.extend(groups.into_iter().flatten());
            everywhere.sort_unstable();
            everywhere.dedup();
            None
        };
        let everywhere = (!everywhere.is_empty()).then(|| Bucket::new(everywhere, &pattern_of));
        RegexIndex {
            anchored,
            floating,
            everywhere,
        }
    }
}

/// A DFA when its estimate fits `AUTOMATON_DFA_BYTES_MAX`, else the crate's own choice.
fn automaton(keys: &[Vec<u8>]) -> Option<AhoCorasick> {
    let kind =
        (dfa_bytes_estimate(keys) <= AUTOMATON_DFA_BYTES_MAX).then_some(AhoCorasickKind::DFA);
    AhoCorasick::builder().kind(kind).build(keys).ok()
}

/// An upper bound on the DFA's transition table: at most one state per literal byte (plus the
/// start and dead states), each a row of `stride` 4-byte state IDs, where `stride` is the number
/// of byte classes rounded up to a power of two. The classes are computed as aho-corasick does:
/// each byte the literals use is a class boundary on both sides.
fn dfa_bytes_estimate(keys: &[Vec<u8>]) -> usize {
    let mut boundary = [false; 256];
    for &byte in keys.iter().flatten() {
        if byte > 0 {
            boundary[usize::from(byte - 1)] = true;
        }
        boundary[usize::from(byte)] = true;
    }
    let classes = boundary[..255].iter().filter(|&&b| b).count() + 1;
    let states = keys.iter().map(Vec::len).sum::<usize>() + 3;
    states
        .saturating_mul(classes.next_power_of_two())
        .saturating_mul(4)
}

fn add(map: &mut HashMap<Vec<u8>, Vec<u32>, FxBuild>, key: Vec<u8>, route: u32) {
    let routes = map.entry(key).or_default();
    if routes.last() != Some(&route) {
        routes.push(route);
    }
}

impl RegexIndex {
    pub(crate) fn is_empty(&self) -> bool {
        self.anchored.is_empty() && self.floating.is_none() && self.everywhere.is_none()
    }

    /// Pushes every regex route that may match `path` (unordered, possibly repeated; the caller
    /// sorts, and runs each route's regex to confirm).
    pub(crate) fn collect(&self, path: &str, out: &mut SmallBuf) {
        self.anchored
            .for_each_prefix(path.as_bytes(), |bucket| bucket.collect(path, out));
        if let Some(floating) = &self.floating {
            // A literal can occur many times in one path; gather distinct buckets first.
            let mut hits = SmallBuf::new();
            for m in floating.automaton.find_overlapping_iter(path) {
                hits.push(m.pattern().as_u32());
            }
            hits.sort_dedup();
            for &hit in hits.as_slice() {
                floating.buckets[hit as usize].collect(path, out);
            }
        }
        if let Some(bucket) = &self.everywhere {
            bucket.collect(path, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anchored(keys: &[&str]) -> Keys {
        Keys::Anchored(keys.iter().map(|k| k.as_bytes().to_vec()).collect())
    }

    fn floating(keys: &[&str]) -> Keys {
        Keys::Floating(keys.iter().map(|k| k.as_bytes().to_vec()).collect())
    }

    #[test]
    fn classifies_patterns() {
        assert_eq!(keys("^/api/v1/"), anchored(&["/api/v1/"]));
        assert_eq!(keys("^/api/v1/svc7/[0-9]+$"), anchored(&["/api/v1/svc7/"]));
        assert_eq!(keys("/svc7/items/[0-9]+$"), floating(&["/svc7/items/"]));
        let Keys::Floating(digits) = keys("/x/[0-9]+$") else {
            panic!("floating")
        };
        assert_eq!(
            digits.len(),
            10,
            "short common prefix: keep the alternatives"
        );
        assert_eq!(keys(r"\A/x"), anchored(&["/x"]));
        assert_eq!(
            keys("^/v[0-9]+/"),
            anchored(&[
                "/v0", "/v1", "/v2", "/v3", "/v4", "/v5", "/v6", "/v7", "/v8", "/v9"
            ])
        );
        assert_eq!(keys("^/(img|css)/"), anchored(&["/css/", "/img/"]));
        assert_eq!(
            keys("^/a(b)?"),
            anchored(&["/a"]),
            "/ab is redundant after /a"
        );
        assert_eq!(keys("^.*x"), anchored(&[""]));
        assert_eq!(
            keys("^/[a-z]+/"),
            anchored(&["/"]),
            "too many literals: common prefix"
        );
        assert_eq!(keys("/static/"), floating(&["/static/"]));
        assert_eq!(keys(r".*\.php$"), floating(&[".php"]));
        assert_eq!(keys(r"\.(gif|png)$"), floating(&[".gif", ".png"]));
        assert_eq!(
            keys("(?m)^/x"),
            floating(&["/x"]),
            "multi-line ^ is not an anchor"
        );
        assert_eq!(keys("[a-z]+$"), Keys::Everywhere);
        assert_eq!(keys("x*"), Keys::Everywhere, "matches the empty string");
        assert_eq!(keys("^"), anchored(&[""]));
        assert_eq!(keys(r"[^\x00-\x{10FFFF}]"), Keys::Nowhere);
    }

    #[test]
    fn case_insensitive_keys_cover_every_case() {
        let Keys::Anchored(keys) = keys("(?i)^/ab") else {
            panic!("anchored")
        };
        assert_eq!(keys.len(), 4);
        assert!(keys.iter().any(|k| k == b"/aB"));
    }

    fn index(patterns: &[&str]) -> RegexIndex {
        let mut builder = RegexIndexBuilder::default();
        for (i, p) in patterns.iter().enumerate() {
            builder.add(i as u32, keys(p));
        }
        builder.build(|r| patterns[r as usize].to_string())
    }

    fn candidates(index: &RegexIndex, path: &str) -> Vec<u32> {
        let mut out = SmallBuf::new();
        index.collect(path, &mut out);
        out.sort_dedup();
        out.as_slice().to_vec()
    }

    #[test]
    fn collects_only_routes_whose_literal_is_present() {
        let i = index(&[
            "^/api/",
            "^/static/",
            "/img/",
            r"\.png$",
            "[a-z]+$",
            r"[^\x00-\x{10FFFF}]",
        ]);
        assert_eq!(candidates(&i, "/api/x"), vec![0, 4]);
        assert_eq!(candidates(&i, "/static/img/a.png"), vec![1, 2, 3, 4]);
        assert_eq!(candidates(&i, "/x/api/"), vec![4]);
        assert_eq!(candidates(&i, "/img/img/img/"), vec![2, 4]);
    }

    #[test]
    fn dfa_estimate_bounds_the_real_automaton() {
        let keys: Vec<Vec<u8>> = (0..10_000)
            .map(|i| format!("/svc{i}/items/").into_bytes())
            .collect();
        let estimate = dfa_bytes_estimate(&keys);
        let built = automaton(&keys).unwrap();
        assert_eq!(built.kind(), AhoCorasickKind::DFA);
        assert!(
            built.memory_usage() <= estimate,
            "{} > {estimate}",
            built.memory_usage()
        );
        let wide: Vec<Vec<u8>> = (0..40_000u32).map(|i| i.to_le_bytes().repeat(4)).collect();
        assert!(dfa_bytes_estimate(&wide) > AUTOMATON_DFA_BYTES_MAX);
        assert_ne!(automaton(&wide).unwrap().kind(), AhoCorasickKind::DFA);
    }

    #[test]
    fn big_buckets_use_a_set() {
        let patterns: Vec<String> = (0..40).map(|i| format!("^/[a-z]+/{i}$")).collect();
        let refs: Vec<&str> = patterns.iter().map(String::as_str).collect();
        let i = index(&refs);
        assert!(i.anchored.for_each_prefix_has_set(b"/"));
        assert_eq!(candidates(&i, "/abc/17"), vec![17]);
        assert_eq!(candidates(&i, "/abc/99"), Vec::<u32>::new());
    }

    impl RadixTree<Bucket> {
        fn for_each_prefix_has_set(&self, path: &[u8]) -> bool {
            let mut any = false;
            self.for_each_prefix(path, |b| any |= b.set.is_some());
            any
        }
    }
}
