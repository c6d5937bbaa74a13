//! The router against a naive reference that tries every route in CONFIG.md's order with a plain
//! loop, on random route sets and random requests from a small alphabet (so that routes overlap
//! and conditions often decide). Any disagreement is a bug in an index. Deterministic: a fixed
//! xorshift seed, no dependencies.

use http::{HeaderMap, HeaderName, HeaderValue, Method};
use regex::Regex;
use squall_router::{Pattern, RouteRequest, RouteSpec, Router, VhostSpec};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const SEGMENTS: &[&str] = &["a", "b", "ab", "1", "12", "x.json", ""];
const REGEXES: &[&str] = &[
    "^/a/",
    "^/a$",
    "b$",
    "/ab/",
    r"^/[ab]+/[0-9]+$",
    "(?i)^/A",
    "^/(a|b)/(ab|1)",
    "[0-9]",
    r"\.json$",
    "^/",
    ".*",
    "^/b/1/",
    "(?m)^/x",
    r"^/(?<first>[a-z]+)/",
];
const TEMPLATE_SEGMENTS: &[&str] = &["a", "b", "ab", "1", "{p}", "{q}.json", "a{r}", ""];

fn random_path(rng: &mut Rng) -> String {
    let depth = 1 + rng.below(4);
    (0..depth)
        .map(|_| format!("/{}", rng.pick(SEGMENTS)))
        .collect()
}

fn random_template(rng: &mut Rng) -> String {
    let depth = 1 + rng.below(3);
    let mut used = Vec::new();
    let mut out = String::new();
    for _ in 0..depth {
        let mut seg = *rng.pick(TEMPLATE_SEGMENTS);
        if seg.contains('{') && used.contains(&seg) {
            seg = "b"; // one name once per template
        }
        used.push(seg);
        out.push('/');
        out.push_str(seg);
    }
    out
}

fn random_route(rng: &mut Rng, action: usize) -> RouteSpec<usize> {
    let pattern = match rng.below(4) {
        0 => Pattern::Exact(random_path(rng)),
        1 => {
            let mut p = random_path(rng);
            p.truncate(rng.below(p.len() + 1));
            Pattern::Prefix(p)
        }
        2 => Pattern::Template(random_template(rng)),
        _ => Pattern::Regex(rng.pick(REGEXES).to_string()),
    };
    let methods = match rng.below(4) {
        0 => Some(vec![Method::GET]),
        1 => Some(vec![Method::POST, Method::HEAD]),
        _ => None,
    };
    let headers = match rng.below(5) {
        0 => vec![(
            HeaderName::from_static("x-canary"),
            HeaderValue::from_static("1"),
        )],
        _ => Vec::new(),
    };
    RouteSpec {
        pattern,
        methods,
        headers,
        action,
    }
}

/// CONFIG.md's order, by brute force. `compiled[i]` is `REGEXES[i]`.
fn reference(
    routes: &[RouteSpec<usize>],
    compiled: &[Regex],
    req: &RouteRequest<'_>,
) -> Option<usize> {
    let (method, path, headers) = (req.method, req.path, req.headers);
    let admit = |r: &RouteSpec<usize>| {
        r.methods.as_ref().is_none_or(|m| m.contains(method))
            && r.headers.iter().all(|(n, v)| headers.has_value(n, v))
    };
    let exact = routes
        .iter()
        .position(|r| matches!(&r.pattern, Pattern::Exact(p) if p == path) && admit(r));
    let ordered = || {
        routes.iter().position(|r| {
            let matched = match &r.pattern {
                Pattern::Template(t) => template_matches(t, path),
                Pattern::Regex(re) => {
                    let i = REGEXES.iter().position(|r| r == re).unwrap();
                    compiled[i].is_match(path)
                }
                _ => false,
            };
            matched && admit(r)
        })
    };
    let prefix = || {
        let mut prefixes: Vec<(usize, &str)> = routes
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match &r.pattern {
                Pattern::Prefix(p) if path.starts_with(p.as_str()) && admit(r) => {
                    Some((i, p.as_str()))
                }
                _ => None,
            })
            .collect();
        prefixes.sort_by_key(|(i, p)| (std::cmp::Reverse(p.len()), *i));
        prefixes.first().map(|(i, _)| *i)
    };
    exact.or_else(ordered).or_else(prefix)
}

fn template_matches(template: &str, path: &str) -> bool {
    let (Some(t), Some(p)) = (template.strip_prefix('/'), path.strip_prefix('/')) else {
        return false;
    };
    let (t, p): (Vec<&str>, Vec<&str>) = (t.split('/').collect(), p.split('/').collect());
    t.len() == p.len()
        && t.iter().zip(&p).all(|(t, p)| match t.split_once('{') {
            None => t == p,
            Some((before, rest)) => {
                let after = rest.split_once('}').unwrap().1;
                p.len() > before.len() + after.len() && p.starts_with(before) && p.ends_with(after)
            }
        })
}

#[test]
fn router_agrees_with_brute_force() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let methods = [Method::GET, Method::POST, Method::HEAD];
    let compiled: Vec<Regex> = REGEXES.iter().map(|r| Regex::new(r).unwrap()).collect();
    let mut compared = 0;
    for round in 0..300 {
        // Every tenth round is big enough for regex buckets to get a `RegexSet`.
        let count = 1 + rng.below(if round % 10 == 0 { 400 } else { 40 });
        let routes: Vec<RouteSpec<usize>> = (0..count).map(|i| random_route(&mut rng, i)).collect();
        let router = Router::new(vec![VhostSpec {
            hosts: vec!["*".into()],
            routes: routes.clone(),
        }])
        .unwrap_or_else(|e| panic!("round {round}: {e}"));
        for _ in 0..50 {
            let path = random_path(&mut rng);
            let method = rng.pick(&methods).clone();
            let mut headers = HeaderMap::new();
            if rng.below(2) == 0 {
                headers.insert("x-canary", HeaderValue::from_static("1"));
            }
            let req = RouteRequest {
                host: None,
                method: &method,
                path: &path,
                headers: &headers,
            };
            let got = router.route(&req).map(|m| m.route_index);
            let want = reference(&routes, &compiled, &req);
            assert_eq!(
                got, want,
                "round {round}: {method} {path} headers {headers:?}\n{routes:#?}"
            );
            compared += usize::from(want.is_some());
        }
    }
    assert!(
        compared > 5_000,
        "the alphabet should make most requests match: {compared}"
    );
}
