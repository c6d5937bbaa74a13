//! Rules that keep the docs true to the repository, checked by `cargo xtask tidy`: what a
//! reader follows from the docs must exist, and what exists must be in the docs.
//!
//! - Every bench scenario (`bench/scenarios/NAME.toml`) is named in bench/README.md's table as
//!   `` `NAME` ``: `cargo xtask bench --scenario` takes any of them, and the README is where
//!   an operator looks them up.
//! - README.md's requirements name the C compiler the build needs (aws-lc and zstd are C).
//! - The `cargo xtask` alias (.cargo/config.toml) does not pass `--quiet`: the first run
//!   compiles for minutes, and without cargo's progress it looks hung.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

/// Every problem with the docs of the repository at `root`.
pub fn check(root: &Path) -> Result<Vec<String>> {
    let readme_path = root.join("bench/README.md");
    let readme = fs::read_to_string(&readme_path)
        .with_context(|| format!("reading {}", readme_path.display()))?;
    let mut scenarios = Vec::new();
    for entry in fs::read_dir(root.join("bench/scenarios")).context("reading bench/scenarios")? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "toml")
            && let Some(name) = path.file_stem().and_then(|s| s.to_str())
        {
            scenarios.push(name.to_owned());
        }
    }
    scenarios.sort();
    let mut problems = unnamed_scenarios(&readme, &scenarios);
    let cargo_config = fs::read_to_string(root.join(".cargo/config.toml"))
        .context("reading .cargo/config.toml")?;
    problems.extend(quiet_alias(&cargo_config));
    let readme = fs::read_to_string(root.join("README.md")).context("reading README.md")?;
    if !requirements(&readme).contains("C compiler") {
        problems.push("README.md: the requirements do not name a C compiler".to_owned());
    }
    Ok(problems)
}

/// The paragraph of `readme` that starts with `Requirements:`, or "" without one.
fn requirements(readme: &str) -> &str {
    let Some((_, from)) = readme.split_once("\nRequirements:") else {
        return "";
    };
    from.split("\n\n").next().unwrap_or("")
}

/// A problem when the `xtask` alias of `cargo_config` hides cargo's build progress.
pub fn quiet_alias(cargo_config: &str) -> Option<String> {
    let alias = cargo_config
        .lines()
        .find(|l| l.trim_start().starts_with("xtask ="))?;
    let quiet = alias
        .split_whitespace()
        .any(|w| matches!(w.trim_matches('"'), "--quiet" | "-q"));
    quiet.then(|| {
        ".cargo/config.toml: the xtask alias passes --quiet, so its first build shows nothing for minutes".to_owned()
    })
}

/// The scenarios of `names` that `readme` has no table row for.
pub fn unnamed_scenarios(readme: &str, names: &[String]) -> Vec<String> {
    names
        .iter()
        .filter(|name| !readme.contains(&format!("\n| `{name}` |")))
        .map(|name| {
            format!(
                "bench/README.md does not name the scenario `{name}` (bench/scenarios/{name}.toml)"
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_xtask_alias_is_reported() {
        assert!(quiet_alias("[alias]\nxtask = \"run --quiet --package xtask --\"\n").is_some());
        assert!(quiet_alias("[alias]\nxtask = \"run -q --package xtask --\"\n").is_some());
        assert_eq!(
            quiet_alias("[alias]\nxtask = \"run --package xtask --\"\n"),
            None
        );
    }

    #[test]
    fn a_scenario_without_a_row_is_reported() {
        let readme = "| name | what |\n|---|---|\n| `a` | one |\n";
        let names = ["a".to_owned(), "b".to_owned()];
        assert_eq!(
            unnamed_scenarios(readme, &names),
            ["bench/README.md does not name the scenario `b` (bench/scenarios/b.toml)"]
        );
    }
}
