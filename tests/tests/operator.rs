//! An operator's commands: `squall check` refuses what start-up would refuse, at the key in
//! the file, with start-up's own words; `squall reload` reports what the running server did.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use squall_e2e::{
    Squall, TOOLS, TempDir, admin_addr, admin_get, hello_config, metric_sum, openssl_cert,
    roundtrip, squall_bin, tool,
};

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

/// Every broken certificate is named at once, each at its own key, in file order: an operator
/// fixing one should not meet the next only on the next run.
#[test]
fn check_names_every_broken_certificate_at_once() {
    let dir = TempDir::new();
    let (cert, _) = openssl_cert(dir.path(), "a.test");
    let (good_cert, good_key) = openssl_cert(dir.path(), "c.test");
    let (_, other_key) = openssl_cert(dir.path(), "b.test");
    let missing = dir.path().join("missing.pem");
    // Entry 1: a key that does not match; entry 2: good; entry 3: a missing chain file.
    let extra = format!(
        "[[certificate]]\nhosts = [\"c.test\"]\ncert = \"{}\"\nkey = \"{}\"\n\n\
         [[certificate]]\nhosts = [\"d.test\"]\ncert = \"{}\"\nkey = \"{}\"\n",
        good_cert.display(),
        good_key.display(),
        missing.display(),
        good_key.display()
    );
    let text = tls_config(&cert, &other_key, &extra);
    let config = write_config(&dir, &text);
    let out = squall(&["check"], &config);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "two problems: {stderr}");
    let key_at = at_key(&config, &text, "key");
    assert!(lines[0].starts_with(&key_at), "{stderr}");
    assert!(
        lines[0].contains("does not match the certificate"),
        "{stderr}"
    );
    let missing_line = text
        .lines()
        .position(|l| l.contains("missing.pem"))
        .expect("the missing cert's line")
        + 1;
    let missing_at = format!("{}:{missing_line}:8: ", config.display());
    assert!(
        lines[1].starts_with(&missing_at),
        "at {missing_at}: {stderr}"
    );
    assert!(
        lines[1].contains("cannot read certificate file"),
        "{stderr}"
    );
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

/// `hello_config` with `[server] control` next to the config file, and an admin endpoint.
fn reloadable(body: &str, extra: &str) -> String {
    hello_config(&format!("[admin]\nlisten = \"127.0.0.2:0\"\n\n{extra}"))
        .replace("[server]\n", "[server]\ncontrol = \"control.sock\"\n")
        .replace("Hello, world!", body)
}

fn get_root(squall: &Squall) -> String {
    let mut stream = squall.connect();
    roundtrip(&mut stream, "GET / HTTP/1.1\r\nHost: a\r\n\r\n").body_text()
}

#[test]
fn reload_reports_applied_refused_and_restart_needed() {
    let squall = Squall::start(&reloadable("one", ""));
    let config = squall.config_path().to_owned();
    assert_eq!(get_root(&squall), "one");

    squall.rewrite_config(&reloadable("two", ""));
    let out = squall_timed(&["reload", "--timeout", "20s"], &config);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout, "reload applied\n");
    assert_eq!(get_root(&squall), "two");

    // A certificate that cannot be read: refused, with the reason at its key, old config kept.
    let missing = squall.config_path().with_file_name("missing.pem");
    let certificate = format!(
        "[[certificate]]\nhosts = [\"a.test\"]\ncert = \"{}\"\nkey = \"{}\"\n",
        missing.display(),
        missing.display()
    );
    let bad = reloadable("three", &certificate);
    squall.rewrite_config(&bad);
    let out = squall_timed(&["reload"], &config);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("reload refused"), "{stderr}");
    let text = std::fs::read_to_string(&config).unwrap();
    let at = at_key(&config, &text, "cert");
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with(&at) && l.contains("cannot read certificate file")),
        "the reason at {at}: {stderr}"
    );
    assert!(stderr.ends_with('\n'), "{stderr:?}");
    assert_eq!(get_root(&squall), "two", "the running config stays");
    assert!(squall.log().contains("reload refused"), "{}", squall.log());

    // workers needs a restart: the rest applies, and the result, the log and /metrics say so.
    let admin = admin_addr(&squall);
    let (_, metrics) = admin_get(admin, "/metrics");
    assert_eq!(metric_sum(&metrics, "squall_restart_required"), 0.0);
    squall.rewrite_config(&reloadable("four", "").replace("workers = 1", "workers = 2"));
    let out = squall_timed(&["reload"], &config);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with("reload applied, but a restart is needed for:\n")
            && stdout.contains("server.workers (running 1, file says 2)"),
        "{stdout}"
    );
    assert_eq!(get_root(&squall), "four");
    assert!(
        squall
            .log()
            .contains("except what needs a restart: server.workers"),
        "{}",
        squall.log()
    );
    let (_, metrics) = admin_get(admin, "/metrics");
    assert_eq!(metric_sum(&metrics, "squall_restart_required"), 1.0);
}

#[test]
fn reload_of_a_file_with_errors_asks_the_server_which_refuses_and_counts_it() {
    let squall = Squall::start(&reloadable("one", ""));
    let config = squall.config_path().to_owned();
    let admin = admin_addr(&squall);
    let failed = "squall_reloads_total{result=\"failed\"}";
    assert_eq!(metric_sum(&admin_get(admin, "/metrics").1, failed), 0.0);
    // A schema error: the file does not load, but its `control` is still where to ask.
    let bad = reloadable("two", "").replace("workers = 1\n", "workers = 1\nworkerz = 2\n");
    squall.rewrite_config(&bad);
    let out = squall_timed(&["reload"], &config);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let text = std::fs::read_to_string(&config).unwrap();
    let line = 1 + text
        .lines()
        .position(|l| l == "workerz = 2")
        .expect("the key");
    let at = format!("{}:{line}:1: unknown key \"workerz\"", config.display());
    assert!(
        stderr.starts_with("reload refused, the running configuration stays:\n")
            && stderr.lines().filter(|l| l.starts_with(&at)).count() == 1,
        "the server's refusal, with the reason at {at}, once: {stderr}"
    );
    assert!(!stderr.contains("socket"), "{stderr}");
    assert_eq!(metric_sum(&admin_get(admin, "/metrics").1, failed), 1.0);
    assert_eq!(get_root(&squall), "one", "the running config stays");
}

#[test]
fn reload_without_a_server_fails_and_says_where_it_looked() {
    let dir = TempDir::new();
    let config = write_config(&dir, &reloadable("one", "").replace("ADDR", "127.0.0.1:0"));
    let out = squall_timed(&["reload"], &config);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let socket = dir.path().join("control.sock");
    assert!(
        stderr.contains(&format!("cannot reach the server at {}", socket.display())),
        "{stderr}"
    );
}

/// `squall ARGS --config FILE`, killed if it runs for more than 30 s.
fn squall_timed(args: &[&str], config: &Path) -> Output {
    let mut child = Command::new(squall_bin())
        .args(args)
        .arg("--config")
        .arg(config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn squall");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("squall {args:?} ran for more than 30 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("squall output")
}

#[test]
fn a_second_squall_on_a_taken_address_exits_1_with_one_line() {
    let first = Squall::start(&hello_config(""));
    let addr = first.addr;
    let dir = TempDir::new();
    let config = write_config(&dir, &hello_config("").replace("ADDR", &addr.to_string()));
    let out = squall_timed(&[], &config);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("squall: "))
        .collect();
    assert_eq!(
        lines,
        [format!(
            "squall: cannot listen on {addr}: another process holds it (Address already in use (os error 98))"
        )],
        "{stderr}"
    );
    assert!(
        !stderr.contains("all workers listening"),
        "it never served: {stderr}"
    );
    // The first one still has the address to itself.
    assert_eq!(get_root(&first), "Hello, world!");
}

#[test]
fn every_test_tool_is_installed_by_ci_and_named_in_the_readme() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root");
    let ci = std::fs::read_to_string(root.join(".ci/run")).expect("read .ci/run");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("read README.md");
    for (tool, package) in TOOLS {
        let install = format!("command -v {tool} >/dev/null || need+=({package})");
        assert!(ci.contains(&install), ".ci/run lacks `{install}`");
        assert!(
            readme.contains(&format!("`{tool}`")),
            "README does not name `{tool}`"
        );
        assert!(readme.contains(package), "README does not name {package}");
    }
    assert!(
        !ci.contains("target/debug"),
        ".ci/run must not assume target/"
    );
}

#[test]
fn relative_cert_and_key_paths_name_systemd_credentials_when_there_are_some() {
    let config_dir = TempDir::new();
    let credentials = TempDir::new();
    let (cert, key) = openssl_cert(credentials.path(), "a.test");
    let text = tls_config(Path::new("a.test.pem"), Path::new("a.test.key"), "");
    let config = write_config(&config_dir, &text);
    assert_eq!(cert.file_name().unwrap(), "a.test.pem");
    assert_eq!(key.file_name().unwrap(), "a.test.key");
    let with = Command::new(squall_bin())
        .args(["check", "--config"])
        .arg(&config)
        .env("CREDENTIALS_DIRECTORY", credentials.path())
        .output()
        .expect("run squall check");
    assert!(
        with.status.success(),
        "{}",
        String::from_utf8_lossy(&with.stderr)
    );
    // Without it, the same names are next to the config file, where there is nothing.
    let without = Command::new(squall_bin())
        .args(["check", "--config"])
        .arg(&config)
        .env_remove("CREDENTIALS_DIRECTORY")
        .output()
        .expect("run squall check");
    let stderr = String::from_utf8_lossy(&without.stderr);
    let expected = config_dir.path().join("a.test.pem");
    assert!(
        !without.status.success() && stderr.contains(&expected.display().to_string()),
        "{stderr}"
    );
}

#[test]
fn install_sh_puts_every_file_the_unit_names_where_it_names_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root");
    let dest = TempDir::new();
    let out = tool("sh")
        .arg(root.join("systemd/install.sh"))
        .arg(squall_bin())
        .env("DESTDIR", dest.path())
        .output()
        .expect("run systemd/install.sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let unit = std::fs::read_to_string(dest.path().join("etc/systemd/system/squall.service"))
        .expect("the unit is installed");
    // Every file the unit runs, reads or points readers at is installed.
    let mut named = Vec::new();
    for line in unit.lines().filter(|l| !l.starts_with('#')) {
        if let Some(docs) = line.strip_prefix("Documentation=") {
            named.extend(docs.split(' ').filter_map(|d| d.strip_prefix("file://")));
        }
        if line.starts_with("Exec") {
            let command = line
                .split_once('=')
                .unwrap()
                .1
                .trim_start_matches(['-', '+', '!']);
            named.extend(command.split(' ').filter(|w| w.starts_with('/')));
        }
    }
    assert!(named.len() >= 6, "{named:?}");
    for path in named {
        let installed = dest.path().join(path.trim_start_matches('/'));
        assert!(
            installed.exists(),
            "the unit names {path}, which install.sh does not install"
        );
    }
    // The access log lives where the unit lets the dynamic user write, and is rotated there.
    assert!(unit.contains("\nLogsDirectory=squall\n"), "{unit}");
    // `squall reload` run by hand looks for the server's socket in /run/squall.
    assert!(unit.contains("\nRuntimeDirectory=squall\n"), "{unit}");
    let logrotate = std::fs::read_to_string(dest.path().join("etc/logrotate.d/squall")).unwrap();
    assert!(logrotate.starts_with("#") && logrotate.contains("\n/var/log/squall/*.log {"));
    let operations = std::fs::read_to_string(root.join("docs/OPERATIONS.md")).unwrap();
    assert!(operations.contains("access = \"/var/log/squall/access.log\""));
}

/// The files `systemd/install.sh` reads, copied into `dir` as a checkout would hold them,
/// with the binary where `cargo build --release` puts it.
fn checkout_copy(dir: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let files = [
        "systemd/install.sh",
        "systemd/squall.service",
        "systemd/squall.logrotate",
        "config/squall.toml",
        "README.md",
        "docs/OPERATIONS.md",
        "docs/CONFIG.md",
    ];
    for file in files {
        std::fs::create_dir_all(dir.join(file).parent().unwrap()).unwrap();
        std::fs::copy(root.join(file), dir.join(file)).expect("copy a checkout file");
    }
    std::fs::create_dir_all(dir.join("target/release")).unwrap();
    std::fs::copy(squall_bin(), dir.join("target/release/squall")).expect("copy the binary");
}

/// `sh -c COMMAND` in `cwd` with the environment Debian's sudo leaves (`env_reset`: HOME is
/// root's, CARGO_TARGET_DIR and the rest dropped): `home` stands for root's home, where no
/// rustup toolchain is, and `path` for the PATH the command gets.
fn as_under_sudo(cwd: &Path, home: &Path, path: &str, dest: &Path, command: &str) -> Output {
    tool("sh")
        .args(["-c", command])
        .current_dir(cwd)
        .env_clear()
        .env("HOME", home)
        .env("PATH", path)
        .env("DESTDIR", dest)
        .output()
        .expect("run sh")
}

#[test]
fn install_sh_as_documented_works_under_sudo_for_a_user_built_binary() {
    let checkout = TempDir::new();
    checkout_copy(checkout.path());
    let home = TempDir::new();
    let operations = std::fs::read_to_string(checkout.path().join("docs/OPERATIONS.md")).unwrap();
    let documented = operations
        .lines()
        .find_map(|l| l.strip_prefix("sudo systemd/install.sh"))
        .expect("OPERATIONS.md runs systemd/install.sh under sudo");
    // The documented line, its path expanded by the user's shell (no CARGO_TARGET_DIR here);
    // then no path at all, with cargo (a rustup proxy in the user's PATH, as `sudo env
    // "PATH=$PATH"` passes it) unable to find a toolchain in root's home.
    let user_path = std::env::var("PATH").unwrap_or_default();
    let secure_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    let forms = [
        (format!("systemd/install.sh{documented}"), secure_path),
        ("systemd/install.sh".to_owned(), user_path.as_str()),
    ];
    for (command, path) in forms {
        let dest = TempDir::new();
        let out = as_under_sudo(checkout.path(), home.path(), path, dest.path(), &command);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.starts_with("installed squall "),
            "{command}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let installed = dest.path().join("usr/local/bin/squall");
        assert_eq!(
            std::fs::read(&installed).expect("the binary is installed"),
            std::fs::read(squall_bin()).unwrap(),
            "{command}"
        );
        assert!(dest.path().join("etc/squall/squall.toml").exists());
    }
    // No binary where it looks: one line that says how to name it.
    std::fs::remove_file(checkout.path().join("target/release/squall")).unwrap();
    let dest = TempDir::new();
    let out = as_under_sudo(
        checkout.path(),
        home.path(),
        secure_path,
        dest.path(),
        "systemd/install.sh",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("sudo systemd/install.sh PATH-TO-BINARY"),
        "{stderr}"
    );
}

#[test]
fn a_bare_squall_says_it_runs_the_embedded_default_config() {
    let mut child = Command::new(squall_bin())
        .env("SQUALL_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn squall");
    // The line comes before anything is bound, so it is there whether or not the default
    // config's ports are free on this machine; the process is stopped as soon as it is read.
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(10));
    let _ = child.kill();
    let _ = child.wait();
    let first = first.expect("a first log line within 10 s");
    assert!(
        first.contains("no --config FILE: running the embedded default config"),
        "{first}"
    );
}
