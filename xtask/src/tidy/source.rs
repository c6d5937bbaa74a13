//! Rules about the source text itself:
//!
//! - **No `.rs` file over 1,000 lines** outside tests: split a file by responsibility before it
//!   gets there (test files, `tests.rs` modules and `tests/` folders may be longer: tables of
//!   cases read best in one place).
//! - **The driver's types stay small:** `Worker` has at most [`WORKER_METHODS_MAX`] methods and
//!   every other type of the driver at most [`PART_METHODS_MAX`], counted over its inherent
//!   `impl` blocks in every file of the driver; a part past the bound is split into sub-parts
//!   that own their state.
//! - **The HTTP/1.1, HTTP/2 or HTTP/3 decision lives in the downstream layer.** A request is
//!   answered through one protocol-neutral interface, so that each feature is written once; a
//!   branch on the protocol elsewhere in the binary is how the paths once drifted apart
//!   (HTTP/2 streams skipped the rate limit on proxied routes). Every spelling of one counts: a
//!   match on `Client::H1`, `Client::H2` or `Client::H3`, on a connection's
//!   `Proto::Undecided`, `Proto::H1`, `Proto::H2` or `Proto::H3`, a look at its protocol state
//!   (`conn.proto.h2_mut()`, `.proto.h1()`, `.proto.h3_mut()`, the old `.h2` field), and the
//!   old `client.stream == 0`. Such a branch is allowed only in the files of
//!   [`PROTOCOL_LAYER`] (the downstream, the protocol files, and HTTP/3's QUIC part).
//!
//! - **No citation of the team's working notes** (their section marks or file names): the
//!   repository stands on its own, and its readers do not have those notes; what a reader needs
//!   is said where it is needed, or in `docs/`.
//!
//! Files that broke a rule before it existed may be listed in [`LEGACY`] with the most they may
//! have, so a rule can land before the file is split; the list may only shrink (it is empty).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The most lines a source file may have.
pub const LINES_MAX: usize = 1_000;

/// The downstream layer: the only files of the binary that may branch on the client's
/// protocol. Paths relative to the workspace root; a folder covers everything below it.
const PROTOCOL_LAYER: &[&str] = &[
    "crates/squall/src/worker/downstream.rs",
    "crates/squall/src/worker/downstream/",
    "crates/squall/src/worker/h1.rs",
    "crates/squall/src/worker/h2.rs",
    "crates/squall/src/worker/h2/",
    "crates/squall/src/worker/h3.rs",
    "crates/squall/src/worker/quic.rs",
];

/// The most lines a file of the driver may have: it is being split into parts that own their
/// state (the issue "The driver in owned parts"), each small enough to read whole.
pub const DRIVER_LINES_MAX: usize = 700;

/// The most methods `Worker` may have across its `impl Worker` blocks: the loop dispatches and
/// joins the parts, and what has state of its own belongs to the part that owns it (the
/// issue "The driver in owned parts" set 40).
pub const WORKER_METHODS_MAX: usize = 40;

/// The most methods any other type of the driver may have, counted per type name over its
/// `impl Name {` blocks in every file of the driver (trait impls aside): a part that grows past
/// it is split by responsibility into sub-parts that own their state and methods (as `Origins`
/// was into `Conns` and `Upstreams`), not into free functions that take the part.
pub const PART_METHODS_MAX: usize = 60;

/// The binary's source, where the protocol rule applies.
const BINARY_SRC: &str = "crates/squall/src/";

/// The driver, whose client connections carry the HTTP/2 state (`.h2`); elsewhere in the
/// binary an `h2` field is configuration (`limits.h2`), no branch.
const DRIVER_SRC: &str = "crates/squall/src/worker/";

/// Files written before the rules, with the lines and protocol branches they may still have
/// while they are split. The protocol rule was widened to every spelling while the driver is
/// being split into owned parts (the issue "The driver in owned parts"): these files still
/// branch, and their counts may only go down until the list is empty again.
const LEGACY: &[Legacy] = &[];

/// How a citation of the team's working notes looks (spelled in pieces, so that this file does
/// not cite them itself).
const NOTE_CITATIONS: &[&str] = &[
    concat!("STY", "LE §"),
    concat!("DES", "IGN §"),
    concat!("STY", "LE.md"),
    concat!("DES", "IGN.md"),
    concat!("../sha", "red"),
];

/// A file exempt from the rules up to these bounds.
struct Legacy {
    path: &'static str,
    lines: usize,
    protocol_branches: usize,
}

/// Every source-text problem under `root`'s `crates/`, `xtask/` and `bench/`.
pub fn check(root: &Path) -> Result<Vec<String>> {
    let mut files = Vec::new();
    for top in ["crates", "xtask", "bench"] {
        collect_rs(root, Path::new(top), &mut files)?;
    }
    files.sort();
    let mut problems = Vec::new();
    let mut methods = 0;
    let mut parts = BTreeMap::new();
    for file in files {
        let text = fs::read_to_string(root.join(&file))
            .with_context(|| format!("reading {}", file.display()))?;
        problems.extend(check_file(&file, &text));
        if file
            .to_string_lossy()
            .replace('\\', "/")
            .starts_with(DRIVER_SRC)
            && !is_test(&file)
        {
            methods += worker_methods(&text);
            for (name, count) in part_methods(&text) {
                *parts.entry(name).or_default() += count;
            }
        }
    }
    problems.extend(worker_methods_problem(methods));
    problems.extend(part_methods_problems(&parts));
    Ok(problems)
}

/// The methods defined in `text`'s `impl Worker` blocks (top-level blocks, four-space
/// indented `fn`s, whatever their visibility).
pub fn worker_methods(text: &str) -> usize {
    let mut inside = false;
    let mut count = 0;
    for line in text.lines() {
        if line.starts_with("impl Worker ") || line == "impl Worker {" {
            inside = true;
        } else if inside && line == "}" {
            inside = false;
        } else if inside {
            count += usize::from(is_method(line));
        }
    }
    count
}

/// Whether `line` defines a method of the top-level block it is in: four spaces, an optional
/// visibility (`pub`, `pub(super)`, `pub(in path)`), then `fn `.
fn is_method(line: &str) -> bool {
    let rest = line.strip_prefix("    ").unwrap_or("");
    let rest = match rest.strip_prefix("pub") {
        Some(visible) => visible
            .strip_prefix(' ')
            .or_else(|| visible.split_once(") ").map(|(_, after)| after))
            .unwrap_or(visible),
        None => rest,
    };
    rest.starts_with("fn ")
}

/// The methods defined in `text`'s inherent `impl Name {` blocks (top-level, generics
/// allowed: `impl<'a> Gate<'a> {`), counted the way `worker_methods` counts, per type name;
/// `Worker`, held to its own bound, and trait impls (`impl Trait for Name`) are left out.
pub fn part_methods(text: &str) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    let mut inside: Option<&str> = None;
    for line in text.lines() {
        if let Some(name) = impl_name(line) {
            inside = (name != "Worker").then_some(name);
        } else if inside.is_some() && line == "}" {
            inside = None;
        } else if let Some(name) = inside
            && is_method(line)
        {
            *counts.entry(name.to_owned()).or_default() += 1;
        }
    }
    counts
}

/// The type an inherent `impl` block that opens on `line` is for, if one does.
fn impl_name(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("impl")?;
    if !line.ends_with('{') || line.contains(" for ") {
        return None;
    }
    let rest = match rest.strip_prefix('<') {
        // The block's own generics, up to the `>` that closes them.
        Some(generics) => {
            let mut depth = 1;
            let end = generics.find(|c| {
                match c {
                    '<' => depth += 1,
                    '>' => depth -= 1,
                    _ => {}
                }
                depth == 0
            })?;
            &generics[end + 1..]
        }
        None => rest,
    };
    // The type's path, named by its last segment (`super::Downstream<'_>` is `Downstream`).
    let rest = rest.strip_prefix(' ')?;
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(rest.len());
    let name = rest[..end].rsplit("::").next()?;
    (!name.is_empty()).then_some(name)
}

/// The problems with the driver's other types having `parts` methods each.
fn part_methods_problems(parts: &BTreeMap<String, usize>) -> Vec<String> {
    (parts.iter())
        .filter(|(_, methods)| **methods > PART_METHODS_MAX)
        .map(|(name, methods)| {
            format!(
                "{name} has {methods} methods, over {PART_METHODS_MAX}: split it by \
                 responsibility into sub-parts that own their state and methods"
            )
        })
        .collect()
}

/// The problem, if any, with `Worker` having `methods` methods.
fn worker_methods_problem(methods: usize) -> Option<String> {
    (methods > WORKER_METHODS_MAX).then(|| {
        format!(
            "Worker has {methods} methods, over {WORKER_METHODS_MAX}: a new one belongs to \
             the part that owns its state (origin/'s Origins, the downstream), not the driver"
        )
    })
}

/// The problems of one file, `path` relative to the workspace root.
pub fn check_file(path: &Path, text: &str) -> Vec<String> {
    let name = path.to_string_lossy().replace('\\', "/");
    let legacy = LEGACY.iter().find(|l| l.path == name);
    let mut problems = Vec::new();
    if !is_test(path) {
        let lines = text.lines().count();
        let own = match name.starts_with(DRIVER_SRC) {
            true => DRIVER_LINES_MAX,
            false => LINES_MAX,
        };
        let max = legacy.map_or(own, |l| l.lines);
        if lines > max {
            problems.push(format!(
                "{name}: {lines} lines, over {max}: split it by responsibility"
            ));
        }
    }
    for (n, line) in text.lines().enumerate() {
        if let Some(cited) = NOTE_CITATIONS.iter().find(|c| line.contains(*c)) {
            problems.push(format!(
                "{name}:{}: cites the team's working notes ({cited:?}); say what the reader \
                 needs here or in docs/",
                n + 1
            ));
        }
    }
    if name.starts_with(BINARY_SRC) && !PROTOCOL_LAYER.iter().any(|p| name.starts_with(p)) {
        let branches: Vec<usize> = protocol_branches(text, name.starts_with(DRIVER_SRC));
        let max = legacy.map_or(0, |l| l.protocol_branches);
        if branches.len() > max {
            let at: Vec<String> = branches.iter().map(|l| l.to_string()).collect();
            problems.push(format!(
                "{name}: a branch on the client's protocol (lines {}) outside the downstream \
                 layer; answer through the downstream instead",
                at.join(", ")
            ));
        }
    }
    problems
}

/// The 1-based lines of `text` that branch on the client's protocol, in any spelling;
/// `driver`: `text` is the driver's, where an `.h2` field is a client connection's.
pub fn protocol_branches(text: &str, driver: bool) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .filter(|(_, line)| is_stream_zero_test(line) || names_a_protocol(line, driver))
        .map(|(n, _)| n + 1)
        .collect()
}

/// True for a line that names a client's protocol: `Client::H1` or `Client::H2` (a match or
/// a constructor), a connection's `Proto::Undecided`, `Proto::H1` or `Proto::H2`, or its
/// protocol state (`conn.proto.h2_mut()`, `c.proto.h1()`, the old `conn.h2`). A local binding
/// named `h2` (`h2.conn`) is no branch and does not count.
fn names_a_protocol(line: &str, driver: bool) -> bool {
    let tokens = tokens(line);
    let variant = tokens.windows(4).any(|w| {
        let client = w[0].ends_with("Client") && matches!(w[3], "H1" | "H2" | "H3");
        let proto = w[0].ends_with("Proto") && matches!(w[3], "H1" | "H2" | "H3" | "Undecided");
        (client || proto) && w[1] == ":" && w[2] == ":"
    });
    let field = |t: &&str| {
        t.ends_with(".h2")
            || t.contains(".h2.")
            || t.contains(".proto.h1")
            || t.contains(".proto.h2")
            || t.contains(".proto.h3")
    };
    variant || (driver && tokens.iter().any(field))
}

/// True for `stream == 0`, `stream != 0`, `0 == x.stream` and the like, spaced any way.
fn is_stream_zero_test(line: &str) -> bool {
    let tokens = tokens(line);
    let is_stream = |t: &str| t == "stream" || t.ends_with(".stream");
    tokens.windows(3).any(|w| {
        let comparison = w[1] == "==" || w[1] == "!=";
        comparison && ((is_stream(w[0]) && w[2] == "0") || (w[0] == "0" && is_stream(w[2])))
    })
}

/// `line` split into paths (`client.stream`), numbers, `==`/`!=`, and single other characters.
fn tokens(line: &str) -> Vec<&str> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
    let mut tokens = Vec::new();
    let mut rest = line;
    while let Some(c) = rest.chars().next() {
        let len = if word(c) {
            rest.find(|c: char| !word(c)).unwrap_or(rest.len())
        } else if rest.starts_with("==") || rest.starts_with("!=") {
            2
        } else {
            c.len_utf8()
        };
        if !c.is_whitespace() {
            tokens.push(&rest[..len]);
        }
        rest = &rest[len..];
    }
    tokens
}

/// Test code: a `tests` or `benches` folder's files, `tests.rs`, and `fuzz` targets.
pub(super) fn is_test(path: &Path) -> bool {
    path.components().any(|c| {
        let c = c.as_os_str();
        c == "tests" || c == "fuzz"
    }) || path.file_name().is_some_and(|n| n == "tests.rs")
}

/// Every `.rs` file below `root/dir`, relative to `root`, skipping build output.
pub(super) fn collect_rs(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let Ok(entries) = fs::read_dir(root.join(dir)) else {
        return Ok(());
    };
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        let name = entry.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        let path = dir.join(&name);
        if entry.file_type()?.is_dir() {
            collect_rs(root, &path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn long(lines: usize) -> String {
        "fn x() {}\n".repeat(lines)
    }

    #[test]
    fn worker_methods_are_counted_in_every_spelling_and_only_in_impl_worker() {
        let text = "impl Worker {\n    fn a() {}\n    pub(super) fn b() {}\n    pub fn c() {}\n    \
                    pub(in crate::worker) fn d() {}\n        fn nested() {}\n}\n\
                    impl Other {\n    fn e() {}\n}\nfn free() {}\n\
                    impl Worker {\n    /// doc\n    #[cfg(test)]\n    fn f() {}\n}\n";
        assert_eq!(worker_methods(text), 5);
        assert_eq!(worker_methods_problem(WORKER_METHODS_MAX), None);
        let over = worker_methods_problem(WORKER_METHODS_MAX + 1).expect("over the bound");
        assert!(over.contains("over"), "{over}");
    }

    #[test]
    fn part_methods_are_counted_per_type_across_blocks_and_trait_impls_left_out() {
        let text = "impl Origins {\n    fn a() {}\n    pub(in crate::worker) fn b() {}\n}\n\
                    impl<'a> Gate<'a> {\n    pub fn c() {}\n        fn nested() {}\n}\n\
                    impl Default for Origins {\n    fn default() -> Self {}\n}\n\
                    impl Worker {\n    fn w() {}\n}\nfn free() {}\n\
                    impl Origins {\n    /// doc\n    pub(super) fn d() {}\n}\n\
                    impl<T: Into<u8>> Conns<T> {\n    fn e() {}\n}\n\
                    impl super::Gate<'_> {\n    fn g() {}\n}\nimpl Empty {}\n";
        let counts = part_methods(text);
        let expected = [("Conns", 1), ("Gate", 2), ("Origins", 3)];
        let expected: BTreeMap<String, usize> = (expected.iter())
            .map(|(n, c)| (n.to_string(), *c))
            .collect();
        assert_eq!(counts, expected);
        let at = BTreeMap::from([("Origins".to_owned(), PART_METHODS_MAX)]);
        assert!(part_methods_problems(&at).is_empty());
        let over = BTreeMap::from([("Origins".to_owned(), PART_METHODS_MAX + 1)]);
        let problems = part_methods_problems(&over);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("Origins has 61 methods"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_driver_file_is_held_to_the_driver_bound() {
        let path = Path::new("crates/squall/src/worker/x.rs");
        assert!(check_file(path, &long(DRIVER_LINES_MAX)).is_empty());
        let problems = check_file(path, &long(DRIVER_LINES_MAX + 1));
        assert_eq!(problems.len(), 1, "{problems:?}");
        let elsewhere = Path::new("crates/squall/src/x.rs");
        assert!(check_file(elsewhere, &long(DRIVER_LINES_MAX + 1)).is_empty());
    }

    #[test]
    fn a_long_file_is_reported_unless_it_is_a_test() {
        let text = long(LINES_MAX + 1);
        let problems = check_file(Path::new("crates/squall-h1/src/big.rs"), &text);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("1001 lines, over 1000"),
            "{problems:?}"
        );
        for test in [
            "crates/squall-h1/tests/big.rs",
            "crates/squall-h1/src/tests.rs",
            "crates/squall-h2/fuzz/fuzz_targets/conn.rs",
        ] {
            assert_eq!(check_file(Path::new(test), &text), Vec::<String>::new());
        }
        assert_eq!(
            check_file(Path::new("crates/squall-h1/src/ok.rs"), &long(LINES_MAX)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn citations_of_the_working_notes_are_reported() {
        let cited = format!(
            "/// Checked after every step ({}7).\nfn x() {{}}\n",
            NOTE_CITATIONS[0]
        );
        let problems = check_file(Path::new("crates/a/src/lib.rs"), &cited);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("crates/a/src/lib.rs:1: cites"),
            "{problems:?}"
        );
        let clean = "/// Checked after every step.\nfn x() {}\n";
        assert!(check_file(Path::new("crates/a/src/lib.rs"), clean).is_empty());
    }

    #[test]
    fn protocol_branches_are_found_however_spelled() {
        for line in [
            "if client.stream == 0 {",
            "    if client.stream!=0 {",
            "let h1 = c.stream == 0;",
            "if 0 == client.stream {",
            "matches!(x, _ if stream == 0)",
        ] {
            assert_eq!(protocol_branches(line, true), [1], "{line}");
        }
        // Every other spelling of the same question.
        for line in [
            "Client::H1(_) => conn.file = Some(id),",
            "            Client::H2(_, stream) => {",
            "if let Client::H2(..) = client {",
            "matches!(session.client, Client::H2(..))",
            "let c = downstream::Client::H1(index);",
            "if let Some(h2) = conn.h2.as_mut() {",
            "let idle = self.conns[index].h2.is_none();",
            "        .and_then(|c| c.h2.as_mut())",
            "if conn.h2.is_some() {",
            "Proto::H2(h2) => h2.is_idle(),",
            "if let super::downstream::Proto::H1(h1) = &conn.proto {",
            "matches!(conn.proto, Proto::Undecided)",
            "let h2 = self.conns[index].proto.h2_mut();",
            "conn.proto.h1().and_then(|h1| h1.exchange)",
            "        .proto.h2()",
            "            Client::H3(_, stream) => {",
            "if let Proto::H3(h3) = std::mem::take(&mut conn.proto) {",
            "if let Some(h3) = self.clients.conns[index].proto.h3_mut() {",
        ] {
            assert_eq!(protocol_branches(line, true), [1], "{line}");
        }
        for line in [
            "if stream == 0x10 {",
            "h2.conn.reset_stream(stream, code);",
            "let origin = self.origins[index].mux.as_mut();",
            "use squall_h2::ErrorCode;",
            "self.h2_mut(index).pending.insert(stream_id, x);",
            "h2::Selection::H2 => {",
            "if upstream == 0 {",
            "if stream == 01 {",
            "// if client.stream == 0 {",
            "if streams == 0 {",
            "if 0 == streams_open {",
            "proto: Proto::default(),",
            "let h3 = Box::new(H3::new(conn, listener, handle));",
            "h3.quic.drive(now);",
            "self.proto.is_idle(self.rbuf.is_empty())",
            "let h2 = Protocol::H2;",
        ] {
            assert_eq!(protocol_branches(line, true), Vec::<usize>::new(), "{line}");
        }
    }

    #[test]
    fn protocol_branches_are_allowed_only_in_the_downstream_layer() {
        let text = "fn f(c: Client) {\n    if c.stream == 0 {}\n}\n";
        let problems = check_file(Path::new("crates/squall/src/worker/session.rs"), text);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("(lines 2)"), "{problems:?}");
        for allowed in [
            "crates/squall/src/worker/downstream.rs",
            "crates/squall/src/worker/downstream/slots.rs",
            "crates/squall/src/worker/h1.rs",
            "crates/squall/src/worker/h2.rs",
            "crates/squall-h2/src/conn/mod.rs",
        ] {
            assert_eq!(check_file(Path::new(allowed), text), Vec::<String>::new());
        }
        // A connection's HTTP/2 state counts in the driver; elsewhere `.h2` is configuration.
        let field = "fn f(conn: &Conn) -> bool {\n    conn.h2.is_some()\n}\n";
        let driver = check_file(Path::new("crates/squall/src/worker/files.rs"), field);
        assert_eq!(driver.len(), 1, "{driver:?}");
        let config = check_file(Path::new("crates/squall/src/server.rs"), field);
        assert_eq!(config, Vec::<String>::new());
    }

    /// No file is exempt any more: one that was (gRPC's trailers-only answers) is held to the
    /// rule like any other, and the list may not grow again.
    #[test]
    fn no_file_outside_the_layer_may_branch() {
        assert!(LEGACY.is_empty(), "the legacy list only shrinks");
        let path = "crates/squall/src/worker/session/grpc.rs";
        let branch = "if let Client::H2(..) = c {}\n";
        assert_eq!(check_file(Path::new(path), branch).len(), 1);
        let neutral = "if session.client.ends_with_trailers() {}\n";
        assert_eq!(check_file(Path::new(path), neutral), Vec::<String>::new());
    }
}
