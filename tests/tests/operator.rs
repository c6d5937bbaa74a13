//! An operator's commands: `squall check` refuses what start-up would refuse, at the key in
//! the file, with start-up's own words.

use std::path::Path;
use std::process::{Command, Output};

use squall_e2e::{TempDir, openssl_cert, squall_bin};

/// Runs `squall ARGS` to completion (these commands never serve, so they end by themselves).
fn squall(args: &[&str], config: &Path) -> Output {
    Command::new(squall_bin())
        .args(args)
        .arg("--config")
        .arg(config)
        .env("SQUALL_LOG", "warn")
        .output()
        .expect("run squall")
}

/// `FILE:LINE:COL: ` of the value of the first line of `text` that starts with `key = `.
fn at_key(file: &Path, text: &str, key: &str) -> String {
    let prefix = format!("{key} = ");
    let (line, col) = text
        .lines()
        .enumerate()
        .find_map(|(i, l)| l.starts_with(&prefix).then(|| (i + 1, prefix.len() + 1)))
        .unwrap_or_else(|| panic!("no {key} in:\n{text}"));
    format!("{}:{line}:{col}: ", file.display())
}

/// Writes `text` as `squall.toml` in `dir` and returns its path.
fn write_config(dir: &TempDir, text: &str) -> std::path::PathBuf {
    let path = dir.path().join("squall.toml");
    std::fs::write(&path, text).expect("write config");
    path
}

/// A config that validates, with one TLS certificate from `cert` and `key`, and `extra`.
fn tls_config(cert: &Path, key: &Path, extra: &str) -> String {
    format!(
        "[server]\nworkers = 1\n\n[[listen]]\naddress = \"127.0.0.1:0\"\ntls = true\n\n\
         [[certificate]]\nhosts = [\"a.test\"]\ncert = \"{}\"\nkey = \"{}\"\n\n{extra}\n\
         [[vhost]]\nhosts = [\"*\"]\n\n[[vhost.route]]\nprefix = \"/\"\nblock = 403\n",
        cert.display(),
        key.display()
    )
}

/// Asserts that `check` failed with exactly one problem starting with `at` and containing
/// `what`, ending with a newline, and that start-up refuses the file with the same line.
fn assert_refused_at(config: &Path, at: &str, what: &str) {
    let out = squall(&["check"], config);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "check must refuse: {stderr}");
    assert!(out.stdout.is_empty(), "nothing on stdout");
    assert!(
        stderr.ends_with('\n'),
        "output ends with a newline: {stderr:?}"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one problem: {stderr}");
    assert!(lines[0].starts_with(at), "at {at}: {stderr}");
    assert!(lines[0].contains(what), "says {what:?}: {stderr}");
    assert!(
        lines[0].matches("os error").count() <= 1,
        "the OS error once: {stderr}"
    );

    let start = squall(&[], config);
    let start_err = String::from_utf8_lossy(&start.stderr);
    assert_eq!(
        start.status.code(),
        Some(1),
        "start-up must refuse: {start_err}"
    );
    assert!(
        start_err.lines().any(|l| l == lines[0]),
        "start-up says what check says:\ncheck: {stderr}start-up: {start_err}"
    );
}

#[test]
fn check_accepts_a_config_whose_files_are_good() {
    let dir = TempDir::new();
    let (cert, key) = openssl_cert(dir.path(), "a.test");
    let log = dir.path().join("access.log");
    let extra = format!("[log]\naccess = \"{}\"\n", log.display());
    let config = write_config(&dir, &tls_config(&cert, &key, &extra));
    let out = squall(&["check"], &config);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"ok\n");
    // Check probes the log by opening it, and leaves no file behind that it created.
    assert!(!log.exists(), "check left {} behind", log.display());
}

#[test]
fn check_refuses_a_missing_certificate_at_its_key() {
    let dir = TempDir::new();
    let (_, key) = openssl_cert(dir.path(), "a.test");
    let missing = dir.path().join("missing.pem");
    let text = tls_config(&missing, &key, "");
    let config = write_config(&dir, &text);
    let at = at_key(&config, &text, "cert");
    assert_refused_at(&config, &at, "cannot read certificate file");
}

#[test]
fn check_refuses_a_key_that_does_not_match_its_certificate() {
    let dir = TempDir::new();
    let (cert, _) = openssl_cert(dir.path(), "a.test");
    let (_, other_key) = openssl_cert(dir.path(), "b.test");
    let text = tls_config(&cert, &other_key, "");
    let config = write_config(&dir, &text);
    let at = at_key(&config, &text, "key");
    assert_refused_at(&config, &at, "does not match the certificate");
}

#[test]
fn check_refuses_an_access_log_it_cannot_open_for_append() {
    let dir = TempDir::new();
    let (cert, key) = openssl_cert(dir.path(), "a.test");
    // A directory that is a regular file: no user, root included, can create a file under it.
    let not_a_dir = dir.path().join("file");
    std::fs::write(&not_a_dir, "").unwrap();
    let log = not_a_dir.join("access.log");
    let extra = format!("[log]\naccess = \"{}\"\n", log.display());
    let text = tls_config(&cert, &key, &extra);
    let config = write_config(&dir, &text);
    let at = at_key(&config, &text, "access");
    assert_refused_at(&config, &at, "cannot open access log");
}
