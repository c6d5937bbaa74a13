//! A byte radix tree (compressed trie) for "which keys are prefixes of this path".
//!
//! Prefix routes use it for nginx's longest-prefix `location`, and the regex index uses it for
//! the literal prefixes of anchored regexes. A lookup walks the path once, comparing each edge
//! label with the path, so it costs at most the path length whatever the number of keys:
//! the property that lets 10,000 prefix routes cost what 10 do. Keys are plain bytes compared
//! exactly, as nginx compares `location` strings.

use crate::smallbuf::SmallBuf;

/// Up to this many children, finding one scans `first_bytes` instead of bisecting it.
const LINEAR_SCAN_CHILDREN_MAX: usize = 16;

/// Keys mapped to values; node 0 is the root, whose label is empty (the key `""`).
pub(crate) struct RadixTree<V> {
    nodes: Vec<Node<V>>,
}

struct Node<V> {
    /// The bytes on the edge from the parent into this node.
    label: Box<[u8]>,
    /// First byte of each child's label, sorted, for a binary search; parallel to `children`.
    first_bytes: Vec<u8>,
    children: Vec<u32>,
    value: Option<V>,
}

impl<V> Node<V> {
    fn new(label: &[u8]) -> Self {
        Node {
            label: label.into(),
            first_bytes: Vec::new(),
            children: Vec::new(),
            value: None,
        }
    }

    /// A linear scan for the few children most nodes have (cheaper than a binary search's
    /// unpredictable branches), a binary search for wide fan-outs.
    fn child(&self, byte: u8) -> Option<u32> {
        let at = if self.first_bytes.len() <= LINEAR_SCAN_CHILDREN_MAX {
            self.first_bytes.iter().position(|&b| b == byte)
        } else {
            self.first_bytes.binary_search(&byte).ok()
        };
        at.map(|i| self.children[i])
    }
}

impl<V> RadixTree<V> {
    pub(crate) fn new() -> Self {
        RadixTree {
            nodes: vec![Node::new(b"")],
        }
    }

    /// No keys at all (not even `""`).
    pub(crate) fn is_empty(&self) -> bool {
        self.nodes.len() == 1 && self.nodes[0].value.is_none()
    }

    /// The value slot for `key`, created empty if the key is new.
    pub(crate) fn entry(&mut self, key: &[u8]) -> &mut Option<V> {
        let mut node = 0;
        let mut rest = key;
        while let Some(&byte) = rest.first() {
            let Some(child) = self.nodes[node].child(byte) else {
                let leaf = self.add_child(node, rest);
                return &mut self.nodes[leaf].value;
            };
            let label = &self.nodes[child as usize].label;
            let common = common_prefix_len(label, rest);
            if common < label.len() {
                self.split(node, child, common);
            }
            // After a split the child on this byte has a label of exactly `common` bytes.
            node = self.nodes[node].child(byte).map_or(0, |c| c as usize);
            rest = &rest[common..];
        }
        &mut self.nodes[node].value
    }

    /// Calls `visit` with the value of every key that is a prefix of `path`, shortest first.
    pub(crate) fn for_each_prefix(&self, path: &[u8], mut visit: impl FnMut(&V)) {
        self.walk(path, |_, value| visit(value));
    }

    /// The first `Some` that `try_value` returns, trying the values of keys that are prefixes of
    /// `path` longest first (nginx's longest-prefix rule, with fall-back to shorter prefixes).
    pub(crate) fn find_longest_first<'t, R>(
        &'t self,
        path: &[u8],
        mut try_value: impl FnMut(&'t V) -> Option<R>,
    ) -> Option<R> {
        let mut on_path = SmallBuf::new();
        self.walk(path, |node, _| on_path.push(node));
        on_path
            .as_slice()
            .iter()
            .rev()
            .find_map(|&n| try_value(self.nodes[n as usize].value.as_ref()?))
    }

    /// Follows `path` down the tree, calling `visit` with each node that holds a value (its key
    /// is a prefix of `path`), shortest key first.
    fn walk<'t>(&'t self, path: &[u8], mut visit: impl FnMut(u32, &'t V)) {
        let mut node = 0u32;
        let mut pos = 0;
        loop {
            let current = &self.nodes[node as usize];
            if let Some(value) = &current.value {
                visit(node, value);
            }
            let Some(&byte) = path.get(pos) else { return };
            let Some(child) = current.child(byte) else {
                return;
            };
            let label = &self.nodes[child as usize].label;
            if !path[pos..].starts_with(label) {
                return;
            }
            pos += label.len();
            node = child;
        }
    }

    fn add_child(&mut self, parent: usize, label: &[u8]) -> usize {
        let id = self.nodes.len();
        self.nodes.push(Node::new(label));
        let parent = &mut self.nodes[parent];
        let at = parent.first_bytes.partition_point(|&b| b < label[0]);
        parent.first_bytes.insert(at, label[0]);
        parent.children.insert(at, id as u32);
        id
    }

    /// Splits `child`'s edge after `at` bytes: a new node takes the first `at` bytes and gets
    /// `child` (with the remaining label) as its only child.
    fn split(&mut self, parent: usize, child: u32, at: usize) {
        let label = std::mem::take(&mut self.nodes[child as usize].label);
        let (head, tail) = label.split_at(at);
        let mid = self.nodes.len() as u32;
        let mut mid_node = Node::new(head);
        mid_node.first_bytes.push(tail[0]);
        mid_node.children.push(child);
        self.nodes.push(mid_node);
        self.nodes[child as usize].label = tail.into();
        let parent = &mut self.nodes[parent];
        if let Some(slot) = parent.children.iter_mut().find(|c| **c == child) {
            *slot = mid;
        }
    }
}

fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(keys: &[&str]) -> RadixTree<usize> {
        let mut tree = RadixTree::new();
        for (i, key) in keys.iter().enumerate() {
            *tree.entry(key.as_bytes()) = Some(i);
        }
        tree
    }

    fn prefixes(tree: &RadixTree<usize>, path: &str) -> Vec<usize> {
        let mut out = Vec::new();
        tree.for_each_prefix(path.as_bytes(), |&v| out.push(v));
        out
    }

    #[test]
    fn finds_every_prefix_shortest_first() {
        let t = tree(&[
            "/",
            "/static/",
            "/static/img/",
            "/stat",
            "/api",
            "",
            "/static/js/",
        ]);
        assert_eq!(prefixes(&t, "/static/img/a.png"), vec![5, 0, 3, 1, 2]);
        assert_eq!(prefixes(&t, "/static"), vec![5, 0, 3]);
        assert_eq!(prefixes(&t, "/apis"), vec![5, 0, 4]);
        assert_eq!(prefixes(&t, "x"), vec![5]);
        assert_eq!(prefixes(&t, ""), vec![5]);
    }

    #[test]
    fn longest_first_falls_back() {
        let t = tree(&["/", "/a/", "/a/b/"]);
        let mut tried = Vec::new();
        let found = t.find_longest_first(b"/a/b/c", |&v| {
            tried.push(v);
            (v == 0).then_some(v)
        });
        assert_eq!(found, Some(0));
        assert_eq!(tried, vec![2, 1, 0]);
    }

    #[test]
    fn splits_edges_in_any_insert_order() {
        let keys = ["/abc", "/abd", "/ab", "/a", "/abcdef", "/b"];
        for rotation in 0..keys.len() {
            let mut order = keys.to_vec();
            order.rotate_left(rotation);
            let t = tree(&order);
            let got: Vec<&str> = prefixes(&t, "/abcdefg")
                .into_iter()
                .map(|i| order[i])
                .collect();
            assert_eq!(got, vec!["/a", "/ab", "/abc", "/abcdef"], "order {order:?}");
            assert!(prefixes(&t, "/abx").into_iter().all(|i| order[i] != "/abd"));
        }
    }

    #[test]
    fn entry_returns_existing_slot() {
        let mut t: RadixTree<Vec<u32>> = RadixTree::new();
        t.entry(b"/x").get_or_insert_with(Vec::new).push(1);
        t.entry(b"/x").get_or_insert_with(Vec::new).push(2);
        let mut seen = Vec::new();
        t.for_each_prefix(b"/x/y", |v| seen.extend_from_slice(v));
        assert_eq!(seen, vec![1, 2]);
    }
}
