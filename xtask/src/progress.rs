//! Progress of a release build: a build of Squall and its dependencies takes minutes on a small
//! machine, and one silent line for all that time looks like a hang. While cargo runs, a line
//! every [`REPORT_EVERY`] says how long it has run, how many crates it has compiled, what cargo
//! printed last (a crate, or "Blocking waiting for file lock") and where its full log is.
//!
//! New lines rather than one rewritten line: the bench's output is often a CI log or a file,
//! where a carriage return makes a mess, and a few lines a minute are easy to read anywhere.

use std::fs;
use std::io;
use std::path::Path;
use std::process::{Child, ExitStatus};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::util::last_line;

/// How often a running build reports.
pub const REPORT_EVERY: Duration = Duration::from_secs(15);

/// How often the child is polled; short, so a finished build is noticed at once.
const POLL_EVERY: Duration = Duration::from_millis(200);

/// Waits for `child`, a build whose output goes to `log`, printing its progress to stderr, then
/// one line with the time it took.
pub fn wait_reporting(child: &mut Child, log: &Path) -> io::Result<ExitStatus> {
    let start = Instant::now();
    let mut next = REPORT_EVERY;
    loop {
        if let Some(status) = child.try_wait()? {
            let verb = if status.success() { "built" } else { "failed" };
            eprintln!(
                "bench:   {verb} after {}",
                elapsed_text(start.elapsed().as_secs())
            );
            return Ok(status);
        }
        if start.elapsed() >= next {
            let text = fs::read_to_string(log).unwrap_or_default();
            eprintln!("{}", report_line(start.elapsed().as_secs(), &text, log));
            next += REPORT_EVERY;
        }
        sleep(POLL_EVERY);
    }
}

/// `bench:   building for 1m05s, 87 crates compiled, last: Compiling regex v1.11.1 (log: PATH)`.
pub fn report_line(elapsed_secs: u64, log_text: &str, log: &Path) -> String {
    let compiled = log_text
        .lines()
        .filter(|line| line.trim_start().starts_with("Compiling "))
        .count();
    let last = match last_line(log_text) {
        "" => String::new(),
        line => format!(", last: {line}"),
    };
    format!(
        "bench:   building for {}, {compiled} crate{} compiled{last} (log: {})",
        elapsed_text(elapsed_secs),
        if compiled == 1 { "" } else { "s" },
        log.display()
    )
}

/// `45s`, `1m05s`, `1h02m03s`.
pub fn elapsed_text(secs: u64) -> String {
    let (h, m, s) = (secs / 3_600, secs % 3_600 / 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s:02}s"),
        _ => format!("{h}h{m:02}m{s:02}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_times() {
        assert_eq!(elapsed_text(0), "0s");
        assert_eq!(elapsed_text(45), "45s");
        assert_eq!(elapsed_text(65), "1m05s");
        assert_eq!(elapsed_text(3_723), "1h02m03s");
    }

    #[test]
    fn a_report_says_time_count_last_step_and_log() {
        let log = Path::new("/t/bench/builds/abc/build.log");
        let text = "    Updating crates.io index\n   Compiling libc v0.2.1\n   Compiling \
                    regex v1.11.1\n";
        assert_eq!(
            report_line(75, text, log),
            "bench:   building for 1m15s, 2 crates compiled, last: Compiling regex v1.11.1 \
             (log: /t/bench/builds/abc/build.log)"
        );
        assert_eq!(
            report_line(15, "", log),
            "bench:   building for 15s, 0 crates compiled (log: /t/bench/builds/abc/build.log)"
        );
        let blocked =
            "   Compiling libc v0.2.1\n    Blocking waiting for file lock on build directory\n";
        assert!(
            report_line(30, blocked, log).contains(
                "1 crate compiled, last: Blocking waiting for file lock on build directory"
            )
        );
    }
}
