//! `squall check` and start-up failures: the contract of CONFIG.md's command line.

use std::process::Command;

use squall_e2e::{TempDir, squall_bin};

fn check(text: &str) -> (bool, String, String, String) {
    let dir = TempDir::new();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, text).unwrap();
    let out = Command::new(squall_bin())
        .arg("check")
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (
        out.status.success(),
        stdout,
        stderr,
        path.display().to_string(),
    )
}

#[test]
fn check_accepts_the_embedded_default() {
    let (ok, stdout, stderr, _) = check(include_str!("../../config/squall.toml"));
    assert!(ok, "{stderr}");
    assert_eq!(stdout.trim(), "ok");
}

#[test]
fn check_reports_errors_with_file_line_and_column() {
    let bad = "[server]\nworkers = 2\n\n[[listen]]\naddress = \"127.0.0.1:99999\"\n";
    let (ok, _, stderr, path) = check(bad);
    assert!(!ok);
    assert!(stderr.starts_with(&format!("{path}:5:11: ")), "{stderr}");

    let unknown = "[server]\nworkerz = 2\n";
    let (ok, _, stderr, path) = check(unknown);
    assert!(!ok);
    assert!(
        stderr.starts_with(&format!("{path}:2:1: ")) && stderr.contains("workerz"),
        "{stderr}"
    );

    let two_kinds = "[[listen]]\naddress = \"127.0.0.1:1\"\n[[vhost]]\nhosts = [\"*\"]\n[[vhost.route]]\nexact = \"/\"\nprefix = \"/\"\nblock = 403\n";
    let (ok, _, stderr, path) = check(two_kinds);
    assert!(!ok);
    assert!(stderr.starts_with(&format!("{path}:")), "{stderr}");
    let line: usize = stderr.split(':').nth(1).unwrap().parse().unwrap();
    assert!((5..=7).contains(&line), "points at the route: {stderr}");

    let no_unit = "[server]\ndrain_timeout = \"10\"\n[[listen]]\naddress = \"127.0.0.1:1\"\n";
    let (ok, _, stderr, path) = check(no_unit);
    assert!(!ok);
    assert!(stderr.starts_with(&format!("{path}:2:17: ")), "{stderr}");
}

#[test]
fn a_bad_config_refuses_to_start_with_one_line() {
    let dir = TempDir::new();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[[listen]]\naddress = \"nope\"\n").unwrap();
    let out = Command::new(squall_bin())
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(":2:11: "), "{stderr}");
}

#[test]
fn port_in_use_is_a_clear_start_up_failure() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let dir = TempDir::new();
    let path = dir.path().join("c.toml");
    std::fs::write(
        &path,
        format!("[server]\nworkers = 1\n[[listen]]\naddress = \"{addr}\"\n"),
    )
    .unwrap();
    // SO_REUSEPORT lets a second socket bind only if both set it; std's listener does not.
    let out = Command::new(squall_bin())
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot listen on {addr}")),
        "{stderr}"
    );
}

#[test]
fn version_names_the_commit() {
    let out = Command::new(squall_bin()).arg("version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("squall 0.1.0 (commit "), "{text}");
}

/// The text of the doc at `path` (relative to the workspace).
fn doc_text(path: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent();
    std::fs::read_to_string(root.unwrap().join(path)).unwrap()
}

/// The first ```toml block after `marker` in the doc at `path` (relative to the workspace).
fn doc_block(path: &str, marker: &str) -> String {
    let doc = doc_text(path);
    let (_, after) = doc
        .split_once(marker)
        .unwrap_or_else(|| panic!("{path} has no {marker:?}"));
    let (_, block) = after.split_once("```toml\n").expect("a toml block");
    let (block, _) = block.split_once("\n```").expect("the block's end");
    format!("{block}\n")
}

#[test]
fn check_accepts_the_complete_example_of_config_md() {
    let example = doc_block("docs/CONFIG.md", "<a id=\"example\"></a>");
    assert!(example.contains("[[certificate]]"), "{example}");
    let (ok, stdout, stderr, _) = check(&example);
    assert!(ok, "{stderr}");
    assert_eq!(stdout, "ok\n");
}

#[test]
fn check_accepts_the_operations_config_before_the_first_start() {
    // docs/OPERATIONS.md step 3, with its log directory under a temporary root where, as
    // before the unit's first start, it does not exist yet.
    let root = TempDir::new();
    let logs = root.path().join("var/log/squall");
    let operations = doc_text("docs/OPERATIONS.md");
    let (_, step) = operations
        .split_once("**3. Configure and start.**")
        .unwrap();
    let (_, step) = step.split_once("<<'TOML'\n").expect("a heredoc");
    let (step, _) = step.split_once("\nTOML\n").expect("the heredoc's end");
    assert!(step.contains("\"/var/log/squall/access.log\""), "{step}");
    let text = step.replace("/var/log/squall/", &format!("{}/", logs.display()));
    let (ok, stdout, stderr, _) = check(&text);
    assert!(ok, "{stderr}");
    assert_eq!(stdout, "ok\n");
    let warning = format!(
        "the access log's directory {} does not exist yet",
        logs.display()
    );
    assert!(stderr.contains(&warning), "{stderr}");
    assert!(!logs.exists(), "check makes nothing");
}
