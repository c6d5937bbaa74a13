//! `cargo xtask tidy`: the architecture rules a compiler does not check (the invariants of
//! docs/ARCHITECTURE.md), enforced by a `#[test]` so `cargo test` fails when one breaks.
//!
//! - Nothing below the binary depends on `squall-uring`: only `crates/squall` may, so that
//!   every crate but the driver and the binary stays sans-IO.
//! - Config, router, cache, upstream, the codecs and TLS know nothing of each other; only
//!   `squall-proxy` (and the binary) joins them.
//! - Every crate root but `squall-uring`'s has `#![forbid(unsafe_code)]`.
//! - The source-text rules of [`source`]: no file over 1,000 lines outside tests, and no branch
//!   on the client's protocol outside the binary's downstream layer.
//! - The docs rules of [`docs`]: every bench scenario is named in bench/README.md.
//! - The import rule of [`imports`]: no circle of more than three files in the binary's
//!   import graph.
//!
//! Manifests are read as TOML rather than through `cargo metadata`, so the check needs no
//! cargo lock and no network and runs in milliseconds.

use std::collections::{BTreeMap, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use toml::{Table, Value};

mod docs;
mod imports;
mod source;

/// The only crate without `forbid(unsafe_code)`, and the only one the binary alone may depend on.
const URING: &str = "squall-uring";
/// The binary crate, the one package under `crates/` allowed to depend on `squall-uring`.
const BINARY: &str = "squall";
/// Groups of crates that must not depend on a crate of another group, even indirectly
/// (docs/ARCHITECTURE.md: "config, router, cache, upstream, codecs and tls know nothing of each other's
/// internals except through squall-proxy"). A crate and its own helpers share a group.
const INDEPENDENT_GROUPS: &[&[&str]] = &[
    &["squall-config"],
    &["squall-router"],
    &["squall-cache"],
    &["squall-upstream"],
    &["squall-h1"],
    &["squall-h2", "squall-h3", "squall-hpack"],
    &["squall-tls"],
];

/// One workspace package, as far as tidy cares.
#[derive(Debug, Clone, PartialEq)]
pub struct Package {
    pub name: String,
    /// The package folder, relative to the workspace root.
    pub dir: PathBuf,
    /// Workspace or external package names from `[dependencies]` and `[build-dependencies]`,
    /// per-target ones included. Dev-dependencies are left out: a test may use any crate.
    pub deps: Vec<String>,
    /// Crate root files (lib, main, bins), relative to the workspace root.
    pub roots: Vec<PathBuf>,
}

/// Runs tidy on this repository and prints what is wrong.
pub fn main() -> Result<ExitCode> {
    let root = crate::util::repo_root();
    let problems = check_repo(&root)?;
    for problem in &problems {
        eprintln!("tidy: {problem}");
    }
    if problems.is_empty() {
        eprintln!("tidy: ok");
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::FAILURE)
    }
}

/// Every problem in the workspace at `root`.
pub fn check_repo(root: &Path) -> Result<Vec<String>> {
    let packages = load_workspace(root)?;
    let mut problems = check_dependencies(&packages);
    for package in packages.iter().filter(|p| p.name != URING) {
        for crate_root in &package.roots {
            let text = fs::read_to_string(root.join(crate_root))
                .with_context(|| format!("reading {}", crate_root.display()))?;
            if !forbids_unsafe(&text) {
                problems.push(format!(
                    "{}: no #![forbid(unsafe_code)] (only {URING} may go without it)",
                    crate_root.display()
                ));
            }
        }
    }
    problems.extend(source::check(root)?);
    problems.extend(docs::check(root)?);
    problems.extend(imports::check(root)?);
    Ok(problems)
}

/// Problems with the dependency order among `packages`.
pub fn check_dependencies(packages: &[Package]) -> Vec<String> {
    let mut problems = Vec::new();
    for package in packages {
        let below_binary =
            package.dir.starts_with("crates") && package.name != BINARY && package.name != URING;
        if below_binary && let Some(path) = dependency_path(packages, &package.name, URING) {
            problems.push(format!(
                "{}: depends on {URING} ({}); only the binary crate may",
                manifest(package),
                path.join(" -> ")
            ));
        }
        let Some(own) = group_of(&package.name) else {
            continue;
        };
        for other in INDEPENDENT_GROUPS
            .iter()
            .filter(|g| **g != own)
            .flat_map(|g| g.iter())
        {
            if let Some(path) = dependency_path(packages, &package.name, other) {
                problems.push(format!(
                    "{}: depends on {other} ({}); they may meet only in squall-proxy",
                    manifest(package),
                    path.join(" -> ")
                ));
            }
        }
    }
    problems
}

fn manifest(package: &Package) -> String {
    package.dir.join("Cargo.toml").display().to_string()
}

fn group_of(name: &str) -> Option<&'static [&'static str]> {
    INDEPENDENT_GROUPS
        .iter()
        .copied()
        .find(|group| group.contains(&name))
}

/// The shortest chain of workspace dependencies from `from` to `to`, both included.
fn dependency_path(packages: &[Package], from: &str, to: &str) -> Option<Vec<String>> {
    let by_name: BTreeMap<&str, &Package> = packages.iter().map(|p| (p.name.as_str(), p)).collect();
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([from]);
    while let Some(name) = queue.pop_front() {
        let Some(package) = by_name.get(name) else {
            continue;
        };
        for dep in &package.deps {
            if dep == from || parent.contains_key(dep.as_str()) {
                continue;
            }
            parent.insert(dep, name);
            if dep == to {
                let mut path = vec![to.to_string()];
                let mut at = to;
                while let Some(&up) = parent.get(at) {
                    path.push(up.to_string());
                    at = up;
                }
                path.reverse();
                return Some(path);
            }
            queue.push_back(dep);
        }
    }
    None
}

/// Whether a crate root has `#![forbid(unsafe_code)]` (possibly among other lints).
pub fn forbids_unsafe(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .any(|line| line.starts_with("#![forbid(") && line.contains("unsafe_code"))
}

/// The workspace's packages, from the root manifest's `members`.
pub fn load_workspace(root: &Path) -> Result<Vec<Package>> {
    let manifest = read_toml(&root.join("Cargo.toml"))?;
    let members = manifest
        .get("workspace")
        .and_then(|w| w.get("members"))
        .and_then(Value::as_array)
        .context("Cargo.toml has no [workspace] members")?;
    let mut packages = Vec::new();
    for member in members.iter().filter_map(Value::as_str) {
        for dir in expand_member(root, member)? {
            packages.push(load_package(root, &dir)?);
        }
    }
    Ok(packages)
}

/// A member path, with a trailing `/*` glob expanded to the folders holding a Cargo.toml.
fn expand_member(root: &Path, member: &str) -> Result<Vec<PathBuf>> {
    let Some(parent) = member.strip_suffix("/*") else {
        return Ok(vec![PathBuf::from(member)]);
    };
    let mut dirs: Vec<PathBuf> = fs::read_dir(root.join(parent))?
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.path().join("Cargo.toml").is_file())
        .map(|entry| Path::new(parent).join(entry.file_name()))
        .collect();
    dirs.sort();
    Ok(dirs)
}

fn load_package(root: &Path, dir: &Path) -> Result<Package> {
    let manifest = read_toml(&root.join(dir).join("Cargo.toml"))?;
    let name = manifest
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .with_context(|| format!("{}/Cargo.toml has no package name", dir.display()))?
        .to_string();
    let deps = dependencies(&manifest);
    let roots = crate_roots(root, dir, &manifest);
    Ok(Package {
        name,
        dir: dir.to_path_buf(),
        deps,
        roots,
    })
}

fn read_toml(path: &Path) -> Result<Table> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Package names of normal and build dependencies, including `[target.'cfg'.…]` ones, with
/// renames (`foo = { package = "bar" }`) resolved to the real package.
pub fn dependencies(manifest: &Table) -> Vec<String> {
    let mut tables: Vec<&Table> = Vec::new();
    let sections = ["dependencies", "build-dependencies"];
    tables.extend(
        sections
            .iter()
            .filter_map(|s| manifest.get(*s).and_then(Value::as_table)),
    );
    if let Some(targets) = manifest.get("target").and_then(Value::as_table) {
        for target in targets.values().filter_map(Value::as_table) {
            tables.extend(
                sections
                    .iter()
                    .filter_map(|s| target.get(*s).and_then(Value::as_table)),
            );
        }
    }
    let mut names: Vec<String> = tables
        .iter()
        .flat_map(|table| table.iter())
        .map(|(key, spec)| {
            spec.get("package")
                .and_then(Value::as_str)
                .unwrap_or(key)
                .to_string()
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The lib and bin roots cargo would build: `[lib] path` or `src/lib.rs`, `[[bin]] path`s,
/// `src/main.rs` and `src/bin/*.rs`.
fn crate_roots(root: &Path, dir: &Path, manifest: &Table) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    let lib = manifest
        .get("lib")
        .and_then(|lib| lib.get("path"))
        .and_then(Value::as_str);
    roots.push(dir.join(lib.unwrap_or("src/lib.rs")));
    let bins = manifest
        .get("bin")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    roots.extend(
        bins.filter_map(|bin| bin.get("path"))
            .filter_map(Value::as_str)
            .map(|p| dir.join(p)),
    );
    roots.push(dir.join("src/main.rs"));
    if let Ok(entries) = fs::read_dir(root.join(dir).join("src/bin")) {
        let mut bins: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok())
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
            .filter_map(|path| path.strip_prefix(root).ok().map(Path::to_path_buf))
            .collect();
        bins.sort();
        roots.extend(bins);
    }
    roots.retain(|path| root.join(path).is_file());
    roots.dedup();
    roots
}

#[cfg(test)]
mod tests {
    use super::*;

    fn package(name: &str, dir: &str, deps: &[&str]) -> Package {
        Package {
            name: name.into(),
            dir: dir.into(),
            deps: deps.iter().map(|d| d.to_string()).collect(),
            roots: vec![],
        }
    }

    /// The rule `cargo test` enforces on the real repository.
    #[test]
    fn this_repository_is_tidy() {
        let problems = check_repo(&crate::util::repo_root()).expect("workspace readable");
        assert!(
            problems.is_empty(),
            "cargo xtask tidy found:\n{}",
            problems.join("\n")
        );
    }

    #[test]
    fn the_layering_of_the_design_passes() {
        let packages = [
            package("squall-uring", "crates/squall-uring", &["io-uring", "libc"]),
            package("squall-config", "crates/squall-config", &["toml"]),
            package("squall-router", "crates/squall-router", &["regex"]),
            package("squall-h2", "crates/squall-h2", &["squall-hpack"]),
            package("squall-hpack", "crates/squall-hpack", &[]),
            package(
                "squall-proxy",
                "crates/squall-proxy",
                &["squall-config", "squall-router", "squall-h2"],
            ),
            package("squall", "crates/squall", &["squall-proxy", "squall-uring"]),
            package("xtask", "xtask", &["squall-uring"]),
        ];
        assert_eq!(check_dependencies(&packages), Vec::<String>::new());
    }

    #[test]
    fn uring_below_the_binary_is_reported_even_indirectly() {
        let packages = [
            package("squall-uring", "crates/squall-uring", &[]),
            package("squall-proxy", "crates/squall-proxy", &["squall-h1"]),
            package("squall-h1", "crates/squall-h1", &["squall-uring"]),
        ];
        let problems = check_dependencies(&packages);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].contains("squall-proxy -> squall-h1 -> squall-uring"),
            "{problems:?}"
        );
    }

    #[test]
    fn independent_crates_may_not_meet_outside_the_proxy() {
        let packages = [
            package("squall-router", "crates/squall-router", &["squall-helper"]),
            package("squall-helper", "crates/squall-helper", &["squall-config"]),
            package("squall-config", "crates/squall-config", &[]),
        ];
        let problems = check_dependencies(&packages);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("crates/squall-router/Cargo.toml: depends on squall-config")
        );
    }

    #[test]
    fn forbid_attribute_detection() {
        assert!(forbids_unsafe(
            "//! x\n#![forbid(unsafe_code)]\nfn main() {}\n"
        ));
        assert!(forbids_unsafe("#![forbid(unsafe_code, missing_docs)]\n"));
        assert!(!forbids_unsafe("#![deny(unsafe_code)]\n"));
        assert!(!forbids_unsafe("// #![forbid(unsafe_code)]\n"));
    }

    #[test]
    fn dependency_names_with_renames_and_targets() {
        let manifest: Table = toml::from_str(
            r#"
[dependencies]
a.workspace = true
b = { package = "real-b", version = "1" }
[build-dependencies]
c = "1"
[dev-dependencies]
d = "1"
[target.'cfg(unix)'.dependencies]
e = "1"
"#,
        )
        .expect("valid toml");
        assert_eq!(dependencies(&manifest), ["a", "c", "e", "real-b"]);
    }
}
