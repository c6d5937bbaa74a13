//! Where `cargo xtask bench` keeps its files: everything under one `bench/` folder in cargo's
//! target folder, `$CARGO_TARGET_DIR/bench` when that is set and `target/bench` otherwise, so
//! a developer who moved the target folder (to another disk, out of a synced tree) finds the
//! bench's builds and results beside cargo's and nothing appears in `target/` behind their back.
//!
//! The paths are computed here and nowhere else, from the environment given as arguments, so
//! the choice is unit-tested.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The folders of one bench invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Cargo's target folder for this workspace: where the working tree's release build lives.
    pub target: PathBuf,
    /// `TARGET/bench`: every file the bench writes, unless `--out` says otherwise.
    pub bench: PathBuf,
}

impl Layout {
    /// The layout for this process: `CARGO_TARGET_DIR` as cargo reads it, relative to the
    /// current directory (that of `cargo xtask`, which xtask inherits), or `REPO/target`.
    pub fn from_env(repo: &Path) -> Layout {
        let cwd = std::env::current_dir().unwrap_or_else(|_| repo.to_path_buf());
        Layout::new(std::env::var_os("CARGO_TARGET_DIR").as_deref(), &cwd, repo)
    }

    /// The pure part of [`Layout::from_env`]. An empty `CARGO_TARGET_DIR` counts as unset.
    pub fn new(target_dir: Option<&OsStr>, cwd: &Path, repo: &Path) -> Layout {
        let target = match target_dir.filter(|dir| !dir.is_empty()) {
            Some(dir) => cwd.join(dir),
            None => repo.join("target"),
        };
        let bench = target.join("bench");
        Layout { target, bench }
    }

    /// The default results folder of a bench started at `stamp`.
    pub fn results(&self, stamp: &str) -> PathBuf {
        self.bench.join(stamp)
    }

    /// The git worktree a commit is checked out in to be built.
    pub fn worktree(&self, commit: &str) -> PathBuf {
        self.bench.join("worktrees").join(commit)
    }

    /// Where the binary built from a commit is kept (`COMMIT`) or the working tree's
    /// (`working-tree`), with its build log.
    pub fn build(&self, name: &str) -> PathBuf {
        self.bench.join("builds").join(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bench_folder_follows_cargo_target_dir() {
        let repo = Path::new("/src/squall");
        let cwd = Path::new("/home/me");
        let unset = Layout::new(None, cwd, repo);
        assert_eq!(unset.target, Path::new("/src/squall/target"));
        assert_eq!(unset.bench, Path::new("/src/squall/target/bench"));
        assert_eq!(Layout::new(Some(OsStr::new("")), cwd, repo), unset);

        let absolute = Layout::new(Some(OsStr::new("/fast/t")), cwd, repo);
        assert_eq!(absolute.target, Path::new("/fast/t"));
        assert_eq!(
            absolute.results("2026-12-01-000000"),
            Path::new("/fast/t/bench/2026-12-01-000000")
        );
        assert_eq!(
            absolute.worktree("abc"),
            Path::new("/fast/t/bench/worktrees/abc")
        );
        assert_eq!(absolute.build("abc"), Path::new("/fast/t/bench/builds/abc"));

        // Relative to where cargo was started, as cargo reads it, not to the repository.
        let relative = Layout::new(Some(OsStr::new("out/t")), cwd, repo);
        assert_eq!(relative.bench, Path::new("/home/me/out/t/bench"));
    }
}
