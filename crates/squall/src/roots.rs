//! The directories `root` routes serve, opened by the binary at start-up, on reload and in
//! `squall check`: a root that does not exist or is not a directory is a diagnostic at its
//! `root =` key, and the config is refused as a whole. Workers open files beneath the
//! directory's descriptor (`openat2` with `RESOLVE_BENEATH`), so the root is fixed when the
//! config is loaded: a directory renamed or replaced later keeps being served as opened until
//! the next reload, as nginx's open file cache would not promise.

use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;

use squall_config::{Action, Config, Diagnostic, Site, Sites};
use squall_proxy::compress::Coding;

/// One `root` route's directory and settings.
#[derive(Debug)]
pub struct Root {
    /// The route's id (metrics, the access log).
    pub id: u32,
    /// The directory, opened read-only.
    pub dir: OwnedFd,
    /// The index file names, tried in order for a path ending in `/`.
    pub index: Vec<CString>,
    /// `openat2` resolve flags for every open beneath `dir`.
    pub resolve: u64,
    /// The route's `compress`: files of its types compressed as they are sent.
    pub compress: Option<squall_config::Compress>,
    /// The route's `precompressed`: the codings whose sibling files are looked for, ties
    /// between a client's weights going in this order.
    pub precompressed: Vec<Coding>,
}

/// Per route id: its root, for `root` routes.
pub fn open(config: &Config, sites: &Sites) -> Result<Vec<Option<Arc<Root>>>, Vec<Diagnostic>> {
    let mut problems = Vec::new();
    let routes = config.vhost.iter().flat_map(|v| &v.routes).enumerate();
    let roots = routes
        .map(|(id, route)| {
            let Action::Files(files) = &route.action else {
                return None;
            };
            match open_dir(&files.root) {
                Ok(dir) => Some(Arc::new(Root {
                    id: u32::try_from(id).unwrap_or(u32::MAX),
                    dir,
                    // Validation refused names with NUL bytes.
                    index: (files.index.iter())
                        .filter_map(|n| CString::new(n.as_bytes()).ok())
                        .collect(),
                    resolve: resolve_flags(files.follow_symlinks),
                    compress: route.compress.clone(),
                    // Validation let only the three tokens through.
                    precompressed: (files.precompressed.iter())
                        .filter_map(|t| Coding::from_token(t.as_bytes()))
                        .collect(),
                })),
                Err(message) => {
                    problems.push(sites.diagnostic(Site::Root(id), message));
                    None
                }
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(roots)
    } else {
        Err(problems)
    }
}

/// `RESOLVE_BENEATH` always (no `..`, absolute path or symlink leads out of the root),
/// `RESOLVE_NO_MAGICLINKS` always (no `/proc/self/fd/N` style escape), and
/// `RESOLVE_NO_SYMLINKS` unless symlinks are allowed.
pub fn resolve_flags(follow_symlinks: bool) -> u64 {
    let mut flags = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    if !follow_symlinks {
        flags |= libc::RESOLVE_NO_SYMLINKS;
    }
    flags
}

/// The directory at `path`, opened for `openat2`.
fn open_dir(path: &std::path::Path) -> Result<OwnedFd, String> {
    let shown = path.display();
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENOTDIR) => format!("root {shown} is not a directory"),
            _ => format!("cannot open root {shown}: {e}"),
        })?;
    Ok(OwnedFd::from(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_root_or_a_file_is_refused_at_its_key() {
        let dir = std::env::temp_dir().join(format!("squall-roots-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("site")).unwrap();
        std::fs::write(dir.join("file.txt"), "x").unwrap();
        let text = "[[listen]]\naddress = \"127.0.0.1:8080\"\n\n[[vhost]]\n\
                    [[vhost.route]]\nprefix = \"/a/\"\nroot = \"site\"\n\
                    [[vhost.route]]\nprefix = \"/b/\"\nroot = \"none\"\n\
                    [[vhost.route]]\nprefix = \"/c/\"\nroot = \"file.txt\"\n";
        let (mut config, sites) = squall_config::parse_with_sites(text, "s.toml").unwrap();
        config.resolve_paths(&dir);
        let problems = open(&config, &sites).unwrap_err();
        let shown: Vec<_> = problems.iter().map(|d| (d.line, d.col)).collect();
        assert_eq!(shown, [(10, 8), (13, 8)], "{problems:?}");
        assert!(
            problems[1].message.contains("not a directory"),
            "{problems:?}"
        );
        let text = "[[listen]]\naddress = \"127.0.0.1:8080\"\n\n[[vhost]]\n\
                    [[vhost.route]]\nexact = \"/x\"\nrespond = { status = 204 }\n\
                    [[vhost.route]]\nprefix = \"/\"\nroot = \"site\"\nindex = [\"i.htm\"]\n";
        let (mut config, sites) = squall_config::parse_with_sites(text, "s.toml").unwrap();
        config.resolve_paths(&dir);
        let roots = open(&config, &sites).unwrap();
        assert!(roots[0].is_none());
        let root = roots[1].as_ref().unwrap();
        assert_eq!((root.id, root.index.len()), (1, 1));
        assert_ne!(root.resolve & libc::RESOLVE_NO_SYMLINKS, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
