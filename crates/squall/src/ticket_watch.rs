//! `[tls] ticket_key_file` is re-read when it changes, not only on SIGHUP: an operator's
//! tooling that rotates the key on every node of a fleet (writes the file with a new key first)
//! need not also signal each process. A thread looks at the file's modification time, size and
//! inode once a second and, when they change, raises SIGHUP: the ordinary reload, which reads
//! the file with everything else and refuses a bad one (the keys in force stay).
//!
//! The main thread tells the watch, after each reload, which file is in force and how it
//! looked then ([`TicketWatch::follow`]), so a reload that already read a change (a SIGHUP
//! sent with it) is not followed by a second one.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tracing::{info, warn};

/// How often the file is looked at.
const PERIOD: Duration = Duration::from_secs(1);

/// What tells one version of the file from the next.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some(Stamp {
        modified: meta.modified().ok(),
        len: meta.len(),
        inode: meta.ino(),
    })
}

/// The file in force and how it looked when it was read.
#[derive(Debug, Default)]
struct Watched {
    path: Option<PathBuf>,
    seen: Option<Stamp>,
}

/// The handle the main thread keeps.
pub struct TicketWatch {
    watched: Arc<Mutex<Watched>>,
}

impl TicketWatch {
    /// Starts watching `path` (none: nothing until a reload names one).
    pub fn start(path: Option<PathBuf>) -> TicketWatch {
        let watch = TicketWatch {
            watched: Arc::default(),
        };
        watch.follow(path);
        let watched = watch.watched.clone();
        let spawned = std::thread::Builder::new()
            .name("squall-ticket-watch".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(PERIOD);
                    if changed(&watched) {
                        // The reload reads the file and calls `follow` with what it read.
                        if let Err(e) = signal_hook::low_level::raise(libc::SIGHUP) {
                            warn!("cannot raise SIGHUP for the changed ticket_key_file: {e}");
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            warn!("cannot start the ticket_key_file watch: {e}");
        }
        watch
    }

    /// A reload put `path` in force, as it is now.
    pub fn follow(&self, path: Option<PathBuf>) {
        let seen = path.as_deref().and_then(stamp);
        let mut watched = self.watched.lock().unwrap_or_else(|e| e.into_inner());
        *watched = Watched { path, seen };
    }
}

/// Whether the file in force has changed since it was read (a file that disappeared is not a
/// change: the keys in force stay until it comes back).
fn changed(watched: &Mutex<Watched>) -> bool {
    let mut watched = watched.lock().unwrap_or_else(|e| e.into_inner());
    let Some(path) = watched.path.clone() else {
        return false;
    };
    let Some(now) = stamp(&path) else {
        return false;
    };
    if watched.seen.as_ref() == Some(&now) {
        return false;
    }
    info!(file = %path.display(), "ticket_key_file changed: reloading the configuration");
    watched.seen = Some(now);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_seen_once_and_a_followed_file_not_at_all() {
        let dir = std::env::temp_dir().join(format!("squall-ticket-watch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("keys");
        std::fs::write(&path, "one\n").unwrap();
        let watched = Mutex::new(Watched {
            path: Some(path.clone()),
            seen: stamp(&path),
        });
        assert!(!changed(&watched));
        std::fs::write(&path, "one\ntwo\n").unwrap();
        assert!(changed(&watched));
        assert!(!changed(&watched), "seen once");
        // Gone: not a change; back with other bytes: a change.
        std::fs::remove_file(&path).unwrap();
        assert!(!changed(&watched));
        std::fs::write(&path, "three three\n").unwrap();
        assert!(changed(&watched));
        // No file in force: nothing to see.
        let none = Mutex::new(Watched::default());
        assert!(!changed(&none));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
