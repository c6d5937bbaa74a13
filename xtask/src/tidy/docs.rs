//! Rules that keep the docs true to the repository, checked by `cargo xtask tidy`: what a
//! reader follows from the docs must exist, and what exists must be in the docs.
//!
//! - Every bench scenario (`bench/scenarios/NAME.toml`) is named in bench/README.md's table as
//!   `` `NAME` ``: `cargo xtask bench --scenario` takes any of them, and the README is where
//!   an operator looks them up.

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
    Ok(unnamed_scenarios(&readme, &scenarios))
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
    fn a_scenario_without_a_row_is_reported() {
        let readme = "| name | what |\n|---|---|\n| `a` | one |\n";
        let names = ["a".to_owned(), "b".to_owned()];
        assert_eq!(
            unnamed_scenarios(readme, &names),
            ["bench/README.md does not name the scenario `b` (bench/scenarios/b.toml)"]
        );
    }
}
