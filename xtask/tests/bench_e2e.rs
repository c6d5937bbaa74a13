//! End to end: `cargo xtask bench --base HEAD --head HEAD --runs 1 --duration 2 --scenario
//! h1-small` builds Squall at HEAD in release mode, loads it with h2load, and prints a table
//! with both builds and a ratio.
//!
//! Opt-in (`cargo test -p xtask -- --ignored`): a release build and h2load runs take minutes on
//! two cores, too long for every `cargo test`.

use std::path::PathBuf;
use std::process::Command;

#[test]
#[ignore = "builds squall in release mode and runs h2load: cargo test -p xtask -- --ignored"]
fn bench_head_against_head() {
    let out = std::env::temp_dir().join(format!("xtask-bench-e2e-{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args([
            "bench",
            "--base",
            "HEAD",
            "--head",
            "HEAD",
            "--runs",
            "1",
            "--duration",
            "2",
        ])
        .args(["--scenario", "h1-small", "--out"])
        .arg(&out)
        .output()
        .expect("xtask runs");
    let table = String::from_utf8_lossy(&output.stdout);
    let progress = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "bench failed:\n{progress}\n{table}"
    );
    assert!(table.contains("- base: HEAD ("), "{table}");
    assert!(table.contains("- head: HEAD ("), "{table}");
    let rps = table
        .lines()
        .find(|line| line.starts_with("| requests/s |"))
        .unwrap_or_else(|| panic!("no requests/s row:\n{table}\n{progress}"));
    // Both builds measured, so the row has a ratio such as "1.02×" rather than "—".
    assert!(!rps.contains("n/a") && rps.contains('×'), "{rps}");
    let json = PathBuf::from(&out).join("results.json");
    assert!(json.is_file() && out.join("results.md").is_file());
    let _ = std::fs::remove_dir_all(&out);
}
