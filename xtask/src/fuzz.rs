//! `cargo xtask fuzz`: runs every `cargo fuzz` target of the workspace in turn, each for the
//! same time, and prints what each reached: runs, coverage, crashes and where they were kept.
//!
//! The targets live in each crate's `fuzz/` folder (a crate of its own, outside the workspace,
//! so neither `cargo build --workspace` nor clippy builds it); their names are read from its
//! `Cargo.toml`. libFuzzer needs nightly flags, so `RUSTC_BOOTSTRAP=1` lets the stable
//! toolchain build them, and the runs are `nice`d so a campaign on a shared host yields to
//! everything else. New inputs go to a working corpus under the fuzz crate's `target/`; the
//! committed seeds in `fuzz/corpus/<target>/` are only read. Never run by CI or `cargo test`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;

use crate::util::repo_root;

/// Run the fuzz targets (`cargo fuzz`, nightly features via RUSTC_BOOTSTRAP=1) one after another.
#[derive(Debug, Clone, Args)]
pub struct FuzzArgs {
    /// Time per target: a number with `s`, `m` or `h` (`90s`, `10m`, `1h`); seconds if bare.
    #[arg(long, default_value = "10m", value_parser = parse_time)]
    pub time: Duration,
    /// Run only this target (its name, or `CRATE/NAME`); repeat for more. All if absent.
    #[arg(long = "target", value_name = "NAME")]
    pub targets: Vec<String>,
    /// List the targets and exit.
    #[arg(long)]
    pub list: bool,
}

/// One fuzz target: the crate whose `fuzz/` folder holds it, and its binary's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub krate: String,
    pub name: String,
}

impl Target {
    fn label(&self) -> String {
        format!("{}/{}", self.krate, self.name)
    }

    fn matches(&self, wanted: &str) -> bool {
        wanted == self.name || wanted == self.label()
    }
}

/// What one run reached, read from libFuzzer's output.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub runs: Option<u64>,
    pub coverage: Option<u64>,
    pub crashes: Vec<String>,
}

pub fn main(args: &FuzzArgs) -> anyhow::Result<ExitCode> {
    let root = repo_root();
    let all = discover(&root)?;
    let targets = select(&all, &args.targets)?;
    if args.list {
        for target in &targets {
            println!("{}", target.label());
        }
        return Ok(ExitCode::SUCCESS);
    }
    // Without cargo-fuzz, `cargo fuzz` fails at once for every target, which read as a crash
    // each; say what is missing instead.
    let installed = Command::new("cargo")
        .args(["fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !installed {
        bail!("`cargo fuzz` is not installed: cargo install cargo-fuzz");
    }
    let mut crashed = 0;
    for target in &targets {
        let summary = run(&root, target, args.time)?;
        let artifacts = fuzz_dir(&root, target).join("artifacts").join(&target.name);
        println!(
            "{}: runs {}, coverage {}, crashes {}{}",
            target.label(),
            show(summary.runs),
            show(summary.coverage),
            summary.crashes.len(),
            if summary.crashes.is_empty() {
                String::new()
            } else {
                format!(" (in {})", artifacts.display())
            }
        );
        for crash in &summary.crashes {
            println!("  {crash}");
        }
        crashed += usize::from(!summary.crashes.is_empty());
    }
    Ok(if crashed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn show(value: Option<u64>) -> String {
    value.map_or_else(|| "?".to_owned(), |v| v.to_string())
}

/// `90s`, `10m`, `1h` or bare seconds; at least one second.
pub fn parse_time(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((at, _)) => text.split_at(at),
        None => (text, "s"),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?}: expected a number with s, m or h"))?;
    let seconds = match unit {
        "s" => n,
        "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3600),
        _ => return Err(format!("{text:?}: the unit is s, m or h")),
    };
    if seconds == 0 {
        return Err("the time must be at least 1s".to_owned());
    }
    Ok(Duration::from_secs(seconds))
}

/// Every target of every `crates/*/fuzz/Cargo.toml`, in crate order.
fn discover(root: &Path) -> anyhow::Result<Vec<Target>> {
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("fuzz/Cargo.toml").is_file())
        .collect();
    crates.sort();
    let mut targets = Vec::new();
    for dir in crates {
        let manifest = std::fs::read_to_string(dir.join("fuzz/Cargo.toml"))?;
        let krate = dir.file_name().unwrap_or_default().to_string_lossy();
        for name in bin_names(&manifest) {
            targets.push(Target {
                krate: krate.to_string(),
                name,
            });
        }
    }
    Ok(targets)
}

/// The `name` of each `[[bin]]` table of a fuzz crate's manifest.
pub fn bin_names(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_bin = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if in_bin && let Some(value) = line.strip_prefix("name") {
            let value = value.trim_start().trim_start_matches('=').trim();
            names.push(value.trim_matches('"').to_owned());
        }
    }
    names
}

fn select(all: &[Target], wanted: &[String]) -> anyhow::Result<Vec<Target>> {
    if wanted.is_empty() {
        return Ok(all.to_vec());
    }
    let mut chosen = Vec::new();
    for name in wanted {
        let found: Vec<_> = all.iter().filter(|t| t.matches(name)).collect();
        match found.as_slice() {
            [] => bail!(
                "no fuzz target {name:?}; the targets are: {}",
                all.iter().map(Target::label).collect::<Vec<_>>().join(", ")
            ),
            [one] => chosen.push((*one).clone()),
            _ => bail!("{name:?} names several targets: use CRATE/NAME"),
        }
    }
    Ok(chosen)
}

fn fuzz_dir(root: &Path, target: &Target) -> PathBuf {
    root.join("crates").join(&target.krate).join("fuzz")
}

/// Builds and runs one target for `time`; its output goes to the terminal as it comes, and is
/// read for the summary.
fn run(root: &Path, target: &Target, time: Duration) -> anyhow::Result<Summary> {
    let fuzz = fuzz_dir(root, target);
    let work = fuzz.join("target/corpus").join(&target.name);
    let seeds = fuzz.join("corpus").join(&target.name);
    std::fs::create_dir_all(&work)?;
    println!("== {} for {}s", target.label(), time.as_secs());
    let mut command = Command::new("nice");
    command
        .args(["-n", "10", "cargo", "fuzz", "run", &target.name])
        .arg(&work)
        .args(seeds.is_dir().then_some(&seeds))
        .arg("--")
        .arg(format!("-max_total_time={}", time.as_secs()))
        .arg("-print_final_stats=1")
        .env("RUSTC_BOOTSTRAP", "1")
        .current_dir(fuzz.parent().context("a crate folder")?)
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped());
    let child = command
        .spawn()
        .context("cannot run `cargo fuzz` (install it: cargo install cargo-fuzz)")?;
    let output = child.wait_with_output()?;
    let log = String::from_utf8_lossy(&output.stderr);
    eprint!("{log}");
    let summary = summarize(&log);
    if !output.status.success() && summary.crashes.is_empty() {
        // No input was written: the build or the tool failed, not the target.
        bail!(
            "{}: cargo fuzz exited with {} before fuzzing (see its output above)",
            target.label(),
            output.status
        );
    }
    Ok(summary)
}

/// Reads runs (`stat::number_of_executed_units`), coverage (the last `cov:`) and the crash
/// inputs libFuzzer wrote (`Test unit written to PATH`) from its output.
pub fn summarize(log: &str) -> Summary {
    let mut summary = Summary::default();
    for line in log.lines() {
        if let Some(value) = line.strip_prefix("stat::number_of_executed_units:") {
            summary.runs = value.trim().parse().ok();
        }
        if let Some(at) = line.find("cov: ") {
            let value = line[at + 5..].split_whitespace().next().unwrap_or("");
            summary.coverage = value.parse().ok().or(summary.coverage);
        }
        if let Some(at) = line.find("Test unit written to ") {
            summary
                .crashes
                .push(line[at + "Test unit written to ".len()..].trim().to_owned());
        }
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_take_a_unit_or_are_seconds() {
        assert_eq!(parse_time("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_time("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_time("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_time("45"), Ok(Duration::from_secs(45)));
        assert!(parse_time("0s").is_err());
        assert!(parse_time("10d").is_err());
        assert!(parse_time("m").is_err());
    }

    #[test]
    fn bin_names_come_from_the_bin_tables_only() {
        let manifest = "[package]\nname = \"x-fuzz\"\n\n[[bin]]\nname = \"one\"\npath = \"a.rs\"\n\n[[bin]]\nname = \"two\"\n";
        assert_eq!(bin_names(manifest), ["one", "two"]);
    }

    #[test]
    fn the_summary_reads_libfuzzer_output() {
        let log = "#2\tINITED cov: 10 ft: 11 corp: 1/1b\n#900\tDONE   cov: 321 ft: 400 corp: 9/99b\n\
                   ==1== ERROR: libFuzzer: deadly signal\n\
                   artifact_prefix='a/'; Test unit written to a/crash-abc\n\
                   stat::number_of_executed_units: 900\n";
        let summary = summarize(log);
        assert_eq!(summary.runs, Some(900));
        assert_eq!(summary.coverage, Some(321));
        assert_eq!(summary.crashes, ["a/crash-abc"]);
    }

    #[test]
    fn targets_are_chosen_by_name_or_crate_and_name() {
        let all = [
            Target {
                krate: "squall-h1".into(),
                name: "request".into(),
            },
            Target {
                krate: "squall-h2".into(),
                name: "frames".into(),
            },
        ];
        assert_eq!(select(&all, &["frames".into()]).unwrap(), [all[1].clone()]);
        assert_eq!(
            select(&all, &["squall-h1/request".into()]).unwrap(),
            [all[0].clone()]
        );
        assert!(select(&all, &["nope".into()]).is_err());
        assert_eq!(select(&all, &[]).unwrap().len(), 2);
    }
}
