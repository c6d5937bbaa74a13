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

    /// The cargo target folder a worktree of `commit` builds in: a folder under
    /// `BENCH/cargo-target` named by the hash of its `Cargo.lock`, shared by every commit with
    /// that lock (their dependencies build once), never the workspace's own target folder.
    /// Sharing that one was tried and mixed builds: cargo keys the workspace's own crates by
    /// their path *within* the workspace, so a worktree's `squall-config` and the working
    /// tree's had the same key, and one build linked the other's library. No lock file at all
    /// (cargo makes one up during the build): a folder for that commit alone.
    pub fn cargo_target(&self, commit: &str, worktree_lock: Option<&[u8]>) -> PathBuf {
        let own = self.bench.join("cargo-target");
        match worktree_lock {
            Some(lock) => own.join(format!("lock-{:016x}", fnv1a(lock))),
            None => own.join(format!("unlocked-{commit}")),
        }
    }
}

/// FNV-1a, 64 bits: a name for a lock file's folder that stays the same from one Rust release
/// to the next (std's `DefaultHasher` promises no such thing), in a few lines and no
/// dependency. Not for security: a collision only means two lock files share a folder, which
/// cargo's own keys keep correct anyway.
fn fnv1a(bytes: &[u8]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET_BASIS, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    })
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

    #[test]
    fn worktrees_build_in_a_folder_per_lock_file_never_the_workspace_target() {
        let layout = Layout::new(None, Path::new("/"), Path::new("/src/squall"));
        let lock = b"version = 4\n".as_slice();
        let other = b"version = 3\n".as_slice();
        let own = layout.cargo_target("c1", Some(lock));
        assert_ne!(own, Path::new("/src/squall/target"));
        assert!(
            own.to_string_lossy()
                .starts_with("/src/squall/target/bench/cargo-target/lock-"),
            "{own:?}"
        );
        // Same lock, same folder, whatever the commit; another lock, another folder.
        assert_eq!(layout.cargo_target("c2", Some(lock)), own);
        assert_ne!(layout.cargo_target("c1", Some(other)), own);
        assert_eq!(
            layout.cargo_target("c1", None),
            Path::new("/src/squall/target/bench/cargo-target/unlocked-c1")
        );
    }

    #[test]
    fn fnv1a_is_the_published_function() {
        // Test vectors of the FNV reference (draft-eastlake-fnv).
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
