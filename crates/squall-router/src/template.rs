//! Template routes (`/users/{name}/orders`) and the segment trie that matches them.
//!
//! Templates are not compiled to regexes: a trie keyed by path segment finds every template that
//! matches a path by walking the path's segments once, with a hash lookup among literal
//! segments at each level, so 10,000 templates cost a request what 10 do. The trie keeps every
//! match (not only the first) because the router must try them in file order, interleaved with
//! regex routes, and skip those whose conditions fail. Parameter names do not shape the trie:
//! `/u/{id}` and `/u/{name}` share a node, and the winner's names are read from its own
//! [`Template`] when its captures are extracted.

use std::collections::HashMap;

use crate::hash::FxBuild;
use crate::params::{PARAMS_MAX, Params};
use crate::smallbuf::SmallBuf;

/// The most segments a template may have. It bounds the trie's depth, which is the recursion
/// depth of a lookup; real URL schemes stay far below it.
pub(crate) const TEMPLATE_SEGMENTS_MAX: usize = 64;

/// A parsed template: one [`Segment`] per `/`-separated piece after the leading `/`.
#[derive(Debug)]
pub(crate) struct Template {
    segments: Box<[Segment]>,
    /// Parameter names in order; the k-th `Segment::Param` captures `names[k]`.
    names: Box<[Box<str>]>,
}

#[derive(Debug, PartialEq, Eq)]
enum Segment {
    /// Matches exactly this text (possibly empty, as the last segment of `/users/`).
    Literal(Box<str>),
    /// `prefix{name}suffix`: the segment starts with `prefix`, ends with `suffix`, and has a
    /// non-empty value in between.
    Param { prefix: Box<str>, suffix: Box<str> },
}

impl Template {
    /// Parses `/a/{b}/c`. The error is a sentence for [`crate::PatternError::Template`].
    pub(crate) fn parse(text: &str) -> Result<Template, String> {
        let Some(rest) = text.strip_prefix('/') else {
            return Err("must start with '/'".into());
        };
        let parsed = rest
            .split('/')
            .map(parse_segment)
            .collect::<Result<Vec<_>, _>>()?;
        if parsed.len() > TEMPLATE_SEGMENTS_MAX {
            return Err(format!("more than {TEMPLATE_SEGMENTS_MAX} segments"));
        }
        let names: Vec<&str> = parsed.iter().filter_map(|(_, name)| *name).collect();
        if names.len() > PARAMS_MAX {
            return Err(format!("more than {PARAMS_MAX} parameters"));
        }
        if let Some(dup) = names
            .iter()
            .enumerate()
            .find(|(i, n)| names[..*i].contains(n))
        {
            return Err(format!("parameter {{{}}} appears twice", dup.1));
        }
        let names = names.into_iter().map(Box::from).collect();
        let segments = parsed.into_iter().map(|(segment, _)| segment).collect();
        Ok(Template { segments, names })
    }

    /// The captures of this template in `path`, which the trie already matched against it.
    pub(crate) fn captures<'r>(&'r self, path: &str) -> Params<'r> {
        let mut params = Params::new(&self.names);
        let mut param = 0;
        let mut start = 1; // after the leading '/'
        for segment in self.segments.iter() {
            let end = segment_end(path, start);
            if let Segment::Param { prefix, suffix } = segment {
                // The trie matched this template, so the value is non-empty; saturate anyway
                // rather than trust that with a request's bytes.
                let value_start = start + prefix.len();
                let value_end = end.saturating_sub(suffix.len()).max(value_start);
                debug_assert!(
                    value_end > value_start,
                    "captures of a template that matched"
                );
                params.set(param, value_start..value_end);
                param += 1;
            }
            start = end + 1;
        }
        params
    }
}

/// One segment, and its parameter's name if it has one.
fn parse_segment(text: &str) -> Result<(Segment, Option<&str>), String> {
    let Some(open) = text.find('{') else {
        if text.contains('}') {
            return Err(format!("unmatched '}}' in segment {text:?}"));
        }
        return Ok((Segment::Literal(text.into()), None));
    };
    let Some(close) = text[open..].find('}').map(|i| open + i) else {
        return Err(format!("unclosed '{{' in segment {text:?}"));
    };
    let (prefix, name, suffix) = (&text[..open], &text[open + 1..close], &text[close + 1..]);
    if prefix.contains('}') || suffix.contains(['{', '}']) {
        return Err(format!(
            "segment {text:?} has more than one parameter or a stray brace"
        ));
    }
    if !is_ident(name) {
        return Err(format!(
            "parameter name {name:?} is not an identifier ([A-Za-z_][A-Za-z0-9_]*)"
        ));
    }
    Ok((
        Segment::Param {
            prefix: prefix.into(),
            suffix: suffix.into(),
        },
        Some(name),
    ))
}

fn is_ident(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The end of the segment starting at byte `start`: the next '/' or the end of the path.
fn segment_end(path: &str, start: usize) -> usize {
    path.as_bytes()[start..]
        .iter()
        .position(|&b| b == b'/')
        .map_or(path.len(), |i| start + i)
}

/// Every template of one vhost, merged by segment.
pub(crate) struct TemplateTrie {
    nodes: Vec<SegNode>,
}

#[derive(Default)]
struct SegNode {
    /// Literal segment -> child. A hash (not a sorted list) because one level may hold
    /// thousands of siblings (`/svc0` ... `/svc9999`), where a binary search costs a dozen
    /// string compares.
    literals: HashMap<Box<str>, u32, FxBuild>,
    /// Parameter segments, one edge per distinct (prefix, suffix).
    params: Vec<ParamEdge>,
    /// Routes whose template ends at this node, in file order.
    routes: Vec<u32>,
}

struct ParamEdge {
    prefix: Box<str>,
    suffix: Box<str>,
    child: u32,
}

impl ParamEdge {
    fn matches(&self, segment: &str) -> bool {
        segment.len() > self.prefix.len() + self.suffix.len()
            && segment.starts_with(&*self.prefix)
            && segment.ends_with(&*self.suffix)
    }
}

impl TemplateTrie {
    pub(crate) fn new() -> Self {
        TemplateTrie {
            nodes: vec![SegNode::default()],
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.nodes.len() == 1
    }

    /// Adds `route`'s template. Routes must be inserted in file order.
    pub(crate) fn insert(&mut self, template: &Template, route: u32) {
        let mut node = 0u32;
        for segment in template.segments.iter() {
            node = match segment {
                Segment::Literal(text) => self.literal_child(node, text),
                Segment::Param { prefix, suffix, .. } => self.param_child(node, prefix, suffix),
            };
        }
        self.nodes[node as usize].routes.push(route);
    }

    /// Pushes every route whose template matches `path` (unordered; the caller sorts).
    pub(crate) fn collect(&self, path: &str, out: &mut SmallBuf) {
        if path.starts_with('/') && !self.is_empty() {
            self.walk(0, path, 1, out);
        }
    }

    /// Matches the segment starting at `start` against `node`'s edges, descending into each
    /// edge that matches. Depth is bounded by the trie's depth (`TEMPLATE_SEGMENTS_MAX`), not by
    /// the path: a path longer than every template stops where the trie does.
    fn walk(&self, node: usize, path: &str, start: usize, out: &mut SmallBuf) {
        let end = segment_end(path, start);
        let segment = &path[start..end];
        let last = end == path.len();
        let node = &self.nodes[node];
        if let Some(&child) = node.literals.get(segment) {
            self.step(child, path, end, last, out);
        }
        for edge in node.params.iter().filter(|e| e.matches(segment)) {
            self.step(edge.child, path, end, last, out);
        }
    }

    fn step(&self, child: u32, path: &str, end: usize, last: bool, out: &mut SmallBuf) {
        if last {
            out.extend(&self.nodes[child as usize].routes);
        } else {
            self.walk(child as usize, path, end + 1, out);
        }
    }

    fn literal_child(&mut self, node: u32, text: &str) -> u32 {
        if let Some(&child) = self.nodes[node as usize].literals.get(text) {
            return child;
        }
        let child = self.new_node();
        self.nodes[node as usize]
            .literals
            .insert(text.into(), child);
        child
    }

    fn param_child(&mut self, node: u32, prefix: &str, suffix: &str) -> u32 {
        let edges = &self.nodes[node as usize].params;
        if let Some(edge) = edges
            .iter()
            .find(|e| *e.prefix == *prefix && *e.suffix == *suffix)
        {
            return edge.child;
        }
        let child = self.new_node();
        let edge = ParamEdge {
            prefix: prefix.into(),
            suffix: suffix.into(),
            child,
        };
        self.nodes[node as usize].params.push(edge);
        child
    }

    fn new_node(&mut self) -> u32 {
        self.nodes.push(SegNode::default());
        (self.nodes.len() - 1) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trie(templates: &[&str]) -> (TemplateTrie, Vec<Template>) {
        let parsed: Vec<Template> = templates
            .iter()
            .map(|t| Template::parse(t).unwrap())
            .collect();
        let mut trie = TemplateTrie::new();
        for (i, t) in parsed.iter().enumerate() {
            trie.insert(t, i as u32);
        }
        (trie, parsed)
    }

    fn matches(trie: &TemplateTrie, path: &str) -> Vec<u32> {
        let mut out = SmallBuf::new();
        trie.collect(path, &mut out);
        out.sort_dedup();
        out.as_slice().to_vec()
    }

    #[test]
    fn parse_errors() {
        for (bad, why) in [
            ("users/{id}", "start with '/'"),
            ("/users/{id", "unclosed"),
            ("/users/id}", "unmatched"),
            ("/users/{}", "identifier"),
            ("/users/{1a}", "identifier"),
            ("/users/{a-b}", "identifier"),
            ("/users/{a}{b}", "more than one"),
            ("/users/{a}/x/{a}", "twice"),
            ("/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}", "more than 8"),
        ] {
            let err = Template::parse(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
        let deep = "/x".repeat(TEMPLATE_SEGMENTS_MAX + 1);
        assert!(Template::parse(&deep).unwrap_err().contains("segments"));
    }

    #[test]
    fn segments_and_params() {
        let (t, _) = trie(&[
            "/users/{name}/orders",
            "/users/me/orders",
            "/",
            "/users/",
            "/v{n}/x",
        ]);
        assert_eq!(matches(&t, "/users/bob/orders"), vec![0]);
        assert_eq!(matches(&t, "/users/me/orders"), vec![0, 1]);
        assert_eq!(
            matches(&t, "/users//orders"),
            Vec::<u32>::new(),
            "empty segment"
        );
        assert_eq!(
            matches(&t, "/users/bob/orders/"),
            Vec::<u32>::new(),
            "trailing slash"
        );
        assert_eq!(matches(&t, "/users/bob"), Vec::<u32>::new());
        assert_eq!(matches(&t, "/"), vec![2]);
        assert_eq!(matches(&t, "/users/"), vec![3]);
        assert_eq!(matches(&t, "/v2/x"), vec![4]);
        assert_eq!(
            matches(&t, "/v/x"),
            Vec::<u32>::new(),
            "value must be non-empty"
        );
        assert_eq!(matches(&t, "users/bob/orders"), Vec::<u32>::new());
        assert_eq!(matches(&t, ""), Vec::<u32>::new());
    }

    #[test]
    fn captures_with_prefix_and_suffix() {
        let (t, parsed) = trie(&["/files/{stem}.json/v{version}/{rest}"]);
        let path = "/files/report.json/v12/x.y";
        assert_eq!(matches(&t, path), vec![0]);
        let params = parsed[0].captures(path);
        assert_eq!(params.value("stem", path), Some("report"));
        assert_eq!(params.value("version", path), Some("12"));
        assert_eq!(params.value("rest", path), Some("x.y"));
        assert_eq!(params.len(), 3);
        assert_eq!(matches(&t, "/files/.json/v12/x"), Vec::<u32>::new());
    }

    #[test]
    fn names_do_not_split_nodes() {
        let (t, parsed) = trie(&["/u/{id}", "/u/{name}"]);
        let path = "/u/ann";
        assert_eq!(matches(&t, path), vec![0, 1]);
        assert_eq!(parsed[1].captures(path).value("name", path), Some("ann"));
        assert_eq!(t.nodes.len(), 3);
    }
}
