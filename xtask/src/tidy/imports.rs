//! The binary's import graph: no circle of more than [`CIRCLE_MAX`] files.
//!
//! A file imports another when it names an item of the other's module by a path that starts
//! at the crate root, `super` or `self` (in a `use`, a `use` group, or inline). A module's
//! own children, named relatively (`mod x;`, `x::Y`), are part of it and draw no arrow, and
//! neither do comments. Files import each other through a circle when each reaches the others:
//! the strongly connected components of the graph. A big one means a change anywhere in it
//! may touch all of it, which is what splitting the driver into owned parts is for.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

/// The source folder of the crate whose graph is checked.
const SRC: &str = "crates/squall/src";
/// The most files one circle of imports may hold.
pub const CIRCLE_MAX: usize = 3;

/// Files, by path relative to the source folder, to the files they import.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// Every circle over [`CIRCLE_MAX`] files in the binary's import graph, as problems.
pub fn check(root: &Path) -> Result<Vec<String>> {
    let mut paths = Vec::new();
    super::source::collect_rs(root, Path::new(SRC), &mut paths)?;
    let mut files = BTreeMap::new();
    for path in paths.iter().filter(|p| !super::source::is_test(p)) {
        let text = fs::read_to_string(root.join(path))
            .with_context(|| format!("reading {}", path.display()))?;
        let relative = path.strip_prefix(SRC).unwrap_or(path);
        files.insert(relative.to_string_lossy().replace('\\', "/"), text);
    }
    let problems = circles(&graph(&files))
        .into_iter()
        .filter(|circle| circle.len() > CIRCLE_MAX)
        .map(|circle| {
            format!(
                "{SRC}: {} files import each other in a circle (at most {CIRCLE_MAX}): {}; \
                 name what they share from a module below them (the worker's `ids.rs`)",
                circle.len(),
                circle.join(", ")
            )
        })
        .collect();
    Ok(problems)
}

/// The import graph of `files` (path relative to the source folder, and text).
pub fn graph(files: &BTreeMap<String, String>) -> Graph {
    let modules: BTreeMap<Vec<String>, String> = files
        .keys()
        .map(|path| (module_of(path), path.clone()))
        .collect();
    let mut graph = Graph::new();
    for (path, text) in files {
        let here = module_of(path);
        let mut imports = BTreeSet::new();
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for segments in paths_in(line) {
                if let Some(file) = resolve(&modules, &here, &segments)
                    && file != path
                {
                    imports.insert(file.clone());
                }
            }
        }
        graph.insert(path.clone(), imports);
    }
    graph
}

/// The module a file is, as the path of names from the crate root (`worker/mod.rs` and
/// `worker.rs` are both `["worker"]`; `main.rs` is the root).
fn module_of(path: &str) -> Vec<String> {
    let mut names: Vec<String> = path
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if names
        .last()
        .is_some_and(|n| n == "mod" || n == "main" || n == "lib")
    {
        names.pop();
    }
    names
}

/// The paths on `line` that start at `crate`, `super` or `self`, as segments; a `use` group
/// (`use super::{a, b::C}`) gives one path per member.
fn paths_in(line: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let starts = [&b"crate::"[..], b"super::", b"self::"]
            .iter()
            .any(|p| bytes[i..].starts_with(p));
        let boundary = i == 0 || !is_ident(bytes[i - 1]) && bytes[i - 1] != b':';
        if !(starts && boundary) {
            i += 1;
            continue;
        }
        let mut segments = Vec::new();
        let mut j = i;
        loop {
            let end = (j..bytes.len())
                .find(|&k| !is_ident(bytes[k]))
                .unwrap_or(bytes.len());
            segments.push(line[j..end].to_owned());
            if bytes[end..].starts_with(b"::{") {
                let close = (end..bytes.len())
                    .find(|&k| bytes[k] == b'}')
                    .unwrap_or(bytes.len());
                for member in line[end + 3..close].split(',') {
                    let member = member.split(" as ").next().unwrap_or("").trim();
                    if !member.is_empty() {
                        let mut path = segments.clone();
                        path.extend(member.split("::").map(str::to_owned));
                        out.push(path);
                    }
                }
                j = close;
                segments.clear();
                break;
            }
            if bytes[end..].starts_with(b"::") && end + 2 < bytes.len() && is_ident(bytes[end + 2])
            {
                j = end + 2;
            } else {
                j = end;
                break;
            }
        }
        if !segments.is_empty() {
            out.push(segments);
        }
        i = j.max(i + 1);
    }
    out
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The file a path names from module `here`: the longest prefix of its absolute form that is
/// a module of the crate.
fn resolve<'a>(
    modules: &'a BTreeMap<Vec<String>, String>,
    here: &[String],
    segments: &[String],
) -> Option<&'a String> {
    let mut base: Vec<String> = Vec::new();
    let mut rest = segments;
    match segments.first().map(String::as_str) {
        Some("crate") => rest = &segments[1..],
        Some("super" | "self") => {
            base = here.to_vec();
            while let Some(first) = rest.first() {
                match first.as_str() {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    (0..=rest.len()).rev().find_map(|k| {
        let mut module = base.clone();
        module.extend(rest[..k].iter().cloned());
        modules.get(&module)
    })
}

/// The circles of `graph`: its strongly connected components of more than one file, each
/// sorted, largest first (Tarjan's algorithm).
pub fn circles(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found.sort_by_key(|c| std::cmp::Reverse(c.len()));
    walk.found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> BTreeMap<String, String> {
        list.iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect()
    }

    #[test]
    fn paths_are_read_from_uses_groups_and_inline_and_resolved_from_the_file() {
        let graph = graph(&files(&[
            ("main.rs", "mod a;\nmod w;\nuse crate::a::Thing;\n"),
            (
                "a.rs",
                "// use crate::w::X; in a comment draws no arrow\nfn f() {}\n",
            ),
            ("w/mod.rs", "mod b;\nmod c;\nuse b::Near;\n"),
            (
                "w/b.rs",
                "use super::{c::C, Worker};\nfn f(x: crate::a::A) -> self::Y {}\n",
            ),
            ("w/c.rs", "fn g(_: super::super::a::A) {}\n"),
        ]));
        let arrows = |p: &str| graph[p].iter().cloned().collect::<Vec<_>>();
        assert_eq!(arrows("main.rs"), ["a.rs"]);
        assert!(arrows("a.rs").is_empty(), "comments are not read");
        assert!(
            arrows("w/mod.rs").is_empty(),
            "a module's own children draw no arrow"
        );
        assert_eq!(arrows("w/b.rs"), ["a.rs", "w/c.rs", "w/mod.rs"]);
        assert_eq!(arrows("w/c.rs"), ["a.rs"]);
    }

    #[test]
    fn a_circle_of_four_is_found_and_one_of_three_is_allowed() {
        let four = files(&[
            ("a.rs", "use crate::b::X;"),
            ("b.rs", "use crate::c::X;"),
            ("c.rs", "use crate::d::X;"),
            ("d.rs", "use crate::a::X;"),
            ("e.rs", "use crate::a::X;"),
        ]);
        assert_eq!(circles(&graph(&four)), [["a.rs", "b.rs", "c.rs", "d.rs"]]);
        let three = files(&[
            ("a.rs", "use crate::b::X;"),
            ("b.rs", "use crate::c::X;"),
            ("c.rs", "use crate::a::X;"),
        ]);
        let found = circles(&graph(&three));
        assert!(found.iter().all(|c| c.len() <= CIRCLE_MAX), "{found:?}");
        assert_eq!(found.len(), 1);
    }

    #[test]
    fn the_binary_has_no_circle_over_the_limit() {
        let root = crate::util::repo_root();
        let problems = check(&root).unwrap();
        assert!(problems.is_empty(), "{problems:#?}");
    }
}
