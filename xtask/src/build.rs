//! The two things being compared: Squall built from a git ref, from the working tree, or given
//! as a binary, and a peer server (nginx, h2o, varnish) for `--vs`.
//!
//! A ref is built in release mode in its own git worktree under `BENCH/worktrees/`, and the
//! binary is kept in `BENCH/builds/COMMIT/` so a second call with the same commit builds
//! nothing (`BENCH` is the bench folder of [`Layout`]). A worktree builds in a cargo target folder kept for its lock file ([`Layout::cargo_target`]), never the
//! workspace's own, so no build links another's libraries. Each binary is copied out right
//! after its build. A build that fails, or a ref without the `squall` package, makes the
//! build unavailable ("not supported by REF") rather than stopping the whole bench.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::cli::Peer;
use crate::layout::Layout;
use crate::util::last_line;

/// Which side of the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Base,
    Head,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Base => "base",
            Role::Head => "head",
        }
    }
}

/// A server program ready to run.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    Squall(PathBuf),
    /// A peer server of `--vs` and its program.
    Peer(Peer, PathBuf),
}

/// One side of the comparison.
#[derive(Debug, Clone)]
pub struct Build {
    pub role: Role,
    /// What it is, for people: `main (5f6979e)`, `working tree (5f6979e + changes)`,
    /// `nginx/1.22.1`, `h2o/2.2.5`, `varnish-7.1.1`.
    pub name: String,
    /// The short name used in "not supported by NAME": the ref, "working tree" or the peer.
    pub short: String,
    /// The program, or why there is none.
    pub target: Result<Target, String>,
}

/// Squall at a git ref, built (or found in the cache) in its own worktree.
pub fn at_ref(repo: &Path, layout: &Layout, role: Role, refname: &str) -> Result<Build> {
    let commit = git(
        repo,
        &["rev-parse", "--verify", &format!("{refname}^{{commit}}")],
    )
    .with_context(|| format!("{refname:?} is not a commit in this repository"))?;
    let short_commit = &commit[..commit.len().min(10)];
    let name = format!("{refname} ({short_commit})");
    let target = cached_or_built(repo, layout, &commit, &name);
    Ok(Build {
        role,
        name,
        short: refname.to_string(),
        target,
    })
}

/// Squall from the working tree, uncommitted changes included, built with the repository's
/// ordinary target folder (the build a developer already has).
pub fn working_tree(repo: &Path, layout: &Layout, role: Role) -> Result<Build> {
    let head = git(repo, &["rev-parse", "--short=10", "HEAD"])?;
    let dirty = !git(repo, &["status", "--porcelain"])?.is_empty();
    let name = format!(
        "working tree ({head}{})",
        if dirty { " + changes" } else { "" }
    );
    let cache = layout.build("working-tree");
    eprintln!("bench: building squall from the {name}");
    let target = cargo_build(repo, &layout.target, &cache).map(Target::Squall);
    Ok(Build {
        role,
        name,
        short: "working tree".into(),
        target,
    })
}

/// A squall binary someone built already.
pub fn prebuilt(role: Role, path: &Path) -> Result<Build> {
    let path =
        fs::canonicalize(path).with_context(|| format!("no binary at {}", path.display()))?;
    let name = path.display().to_string();
    Ok(Build {
        role,
        name: name.clone(),
        short: name,
        target: Ok(Target::Squall(path)),
    })
}

/// A peer server (`--vs`) from `PATH`, as base, named by its version (`nginx/1.22.1`).
pub fn peer(peer: Peer) -> Result<Build> {
    let program = peer.program();
    let Some(path) = crate::util::which(program) else {
        bail!(
            "--vs {} needs {program} on PATH: install it with `apt-get install {}`",
            peer.short(),
            peer.package()
        );
    };
    let output = Command::new(&path)
        .arg(peer.version_arg())
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {program} {}", peer.version_arg()))?;
    // nginx and varnishd print their version to stderr, h2o to stdout.
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
    Ok(Build {
        role: Role::Base,
        name: peer.version(printed.trim_start()),
        short: peer.short().into(),
        target: Ok(Target::Peer(peer, path)),
    })
}

fn cached_or_built(
    repo: &Path,
    layout: &Layout,
    commit: &str,
    name: &str,
) -> Result<Target, String> {
    let cache = &layout.build(commit);
    let binary = cache.join("squall");
    if binary.is_file() {
        eprintln!("bench: squall at {name} is cached in {}", cache.display());
        return Ok(Target::Squall(binary));
    }
    if let Ok(reason) = fs::read_to_string(cache.join("unsupported.txt")) {
        return Err(reason);
    }
    let worktree =
        worktree(repo, &layout.worktree(commit), commit).map_err(|err| format!("{err:#}"))?;
    if !worktree.join("crates/squall/Cargo.toml").is_file() {
        let reason = "it has no squall binary crate".to_string();
        let _ = fs::create_dir_all(cache)
            .and_then(|()| fs::write(cache.join("unsupported.txt"), &reason));
        return Err(reason);
    }
    let lock = |dir: &Path| fs::read(dir.join("Cargo.lock")).ok();
    let target_dir = layout.cargo_target(commit, lock(&worktree).as_deref());
    eprintln!(
        "bench: building squall at {name} in {}, cargo target folder {}",
        worktree.display(),
        target_dir.display()
    );
    cargo_build(&worktree, &target_dir, cache).map(Target::Squall)
}

/// A detached worktree of `commit` in `dir`, made or reused.
fn worktree(repo: &Path, dir: &Path, commit: &str) -> Result<PathBuf> {
    let dir = dir.to_path_buf();
    if dir.join(".git").exists() {
        if git(&dir, &["rev-parse", "HEAD"]).is_ok_and(|head| head == commit) {
            return Ok(dir);
        }
        let _ = git(
            repo,
            &["worktree", "remove", "--force", &dir.to_string_lossy()],
        );
    }
    if dir.exists() {
        fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    // A worktree whose folder was deleted by hand stays registered until pruned.
    git(repo, &["worktree", "prune"])?;
    git(
        repo,
        &[
            "worktree",
            "add",
            "--detach",
            "--force",
            &dir.to_string_lossy(),
            commit,
        ],
    )?;
    Ok(dir)
}

/// The HTTP/3 load generator, `xtask h3load`, optimized: this very program when it is a release
/// build, else xtask built in release from the working tree (`cargo build --release -p xtask`
/// in the ordinary target folder) and kept in `BENCH/builds/h3load/`. `cargo xtask` runs a
/// debug build, in which quinn, rustls and h3 send less than half the requests a release build
/// does from the same core: the server would be measured under a lighter load than h2load
/// gives it.
pub fn h3load(repo: &Path, layout: &Layout) -> Result<PathBuf> {
    if !cfg!(debug_assertions) {
        return std::env::current_exe().context("finding the xtask binary");
    }
    eprintln!("bench: building the HTTP/3 load generator (xtask h3load) in release");
    cargo_build_package(repo, &layout.target, &layout.build("h3load"), "xtask")
        .map_err(anyhow::Error::msg)
}

/// `cargo build --release -p squall` in `workspace`, then the binary copied into `cache`.
fn cargo_build(workspace: &Path, target_dir: &Path, cache: &Path) -> Result<PathBuf, String> {
    cargo_build_package(workspace, target_dir, cache, "squall")
}

/// `cargo build --release -p PACKAGE` in `workspace`, then its binary (named as the package)
/// copied into `cache`.
fn cargo_build_package(
    workspace: &Path,
    target_dir: &Path,
    cache: &Path,
    package: &str,
) -> Result<PathBuf, String> {
    fs::create_dir_all(cache).map_err(|err| format!("creating {}: {err}", cache.display()))?;
    let log_path = cache.join("build.log");
    let log =
        File::create(&log_path).map_err(|err| format!("creating {}: {err}", log_path.display()))?;
    let stderr = log.try_clone().map_err(|err| err.to_string())?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("bench:   log: {}", log_path.display());
    let mut child = Command::new(cargo)
        .args(["build", "--release", "--package", package])
        .current_dir(workspace)
        .env("CARGO_TARGET_DIR", target_dir)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(stderr)
        .spawn()
        .map_err(|err| format!("running cargo: {err}"))?;
    let status = crate::progress::wait_reporting(&mut child, &log_path)
        .map_err(|err| format!("waiting for cargo: {err}"))?;
    if !status.success() {
        let text = fs::read_to_string(&log_path).unwrap_or_default();
        let error = text
            .lines()
            .find(|l| l.starts_with("error"))
            .unwrap_or(last_line(&text));
        return Err(format!(
            "its build failed: {error} (log: {})",
            log_path.display()
        ));
    }
    let built = target_dir.join("release").join(package);
    let kept = cache.join(package);
    fs::copy(&built, &kept).map_err(|err| format!("copying {}: {err}", built.display()))?;
    Ok(kept)
}

/// Runs git in `dir` and returns its trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("running git")?;
    if !output.status.success() {
        bail!(
            "git {}: {}",
            args.join(" "),
            last_line(&String::from_utf8_lossy(&output.stderr))
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}
