//! The bench's command line where it builds and measures nothing: `--list` and a `--base` that
//! cannot be resolved. Fast, so part of every `cargo test`.

use std::process::Command;

fn xtask(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .output()
        .expect("xtask runs")
}

#[test]
fn list_shows_only_the_scenarios_asked_for() {
    let output = xtask(&[
        "bench",
        "--list",
        "--scenario",
        "h1-small",
        "--scenario",
        "h2c-small",
    ]);
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8_lossy(&output.stdout);
    let names: Vec<&str> = text
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert_eq!(names, ["h1-small", "h2c-small"], "{text}");

    let all = xtask(&["bench", "--list"]);
    assert!(String::from_utf8_lossy(&all.stdout).lines().count() > 2);

    let unknown = xtask(&["bench", "--list", "--scenario", "no-such-scenario"]);
    assert!(!unknown.status.success(), "{unknown:?}");
}

#[test]
fn a_base_that_cannot_be_built_leaves_no_results_folder() {
    let out = std::env::temp_dir().join(format!("xtask-bench-no-base-{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["bench", "--base", "refs/heads/no/such/branch", "--out"])
        .arg(&out)
        .output()
        .expect("xtask runs");
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !out.exists(),
        "{} was left behind:\n{stderr}",
        out.display()
    );
    let _ = std::fs::remove_dir_all(&out);
}
