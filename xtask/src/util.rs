//! Small helpers shared by `bench` and `tidy`: where the repository is, finding programs on
//! `PATH`, free loopback ports, the clock tick, the load average, and a UTC timestamp for
//! output folders.

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};

/// The workspace root: xtask lives one level below it.
pub fn repo_root() -> PathBuf {
    let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().unwrap_or(xtask).to_path_buf()
}

/// The first executable called `name` on `PATH`, as a shell's `command -v` would find it.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// A loopback port that was free a moment ago. Another process could take it before the server
/// binds it; the server then fails to start and the run says so, which is rare enough on a
/// developer machine to accept instead of teaching every server to report its bound port.
pub fn free_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("binding 127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// Clock ticks per second, the unit of utime/stime in `/proc/PID/stat`. Asked of `getconf`
/// because `sysconf` would break this crate's `forbid(unsafe_code)`.
pub fn clock_ticks() -> Result<f64> {
    let output = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .context("running getconf CLK_TCK")?;
    let text = String::from_utf8_lossy(&output.stdout);
    match text.trim().parse::<f64>() {
        Ok(ticks) if ticks > 0.0 => Ok(ticks),
        _ => bail!("getconf CLK_TCK printed {text:?}, not a positive number"),
    }
}

/// `YYYY-MM-DD-HHMMSS` in UTC, for a results folder that sorts by time.
pub fn utc_stamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    format_utc(secs)
}

/// The pure part of [`utc_stamp`]: seconds since the epoch to `YYYY-MM-DD-HHMMSS`.
pub fn format_utc(secs: u64) -> String {
    let (year, month, day) = civil_from_days(secs / 86_400);
    let time = secs % 86_400;
    let (hour, minute, second) = (time / 3_600, time % 3_600 / 60, time % 60);
    format!("{year:04}-{month:02}-{day:02}-{hour:02}{minute:02}{second:02}")
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's `civil_from_days`),
/// so the crate needs no date library for one folder name.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// The machine's load averages over 1, 5 and 15 minutes, as `/proc/loadavg` gives them
/// (`0.98 0.76 0.82`), or why there are none.
pub fn load_average() -> String {
    match std::fs::read_to_string("/proc/loadavg") {
        Ok(text) => parse_loadavg(&text).unwrap_or_else(|| format!("unreadable ({text:?})")),
        Err(err) => format!("unknown (/proc/loadavg: {err})"),
    }
}

/// The TCP congestion control new connections get (`net.ipv4.tcp_congestion_control`, per
/// network namespace): on loopback, BBR's pacing stalls a connection now and then for tens of
/// milliseconds where Reno does not, which moves latency tails (docs/PERFORMANCE.md).
pub fn congestion_control() -> String {
    match std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control") {
        Ok(text) => text.trim().to_owned(),
        Err(err) => format!("unknown ({err})"),
    }
}

/// The pure part of [`load_average`]: the first three fields, if they are numbers.
pub fn parse_loadavg(text: &str) -> Option<String> {
    let fields: Vec<&str> = text.split_whitespace().take(3).collect();
    let numbers = fields.iter().all(|f| f.parse::<f64>().is_ok());
    (fields.len() == 3 && numbers).then(|| fields.join(" "))
}

/// Waits for `child` until `limit` has passed, then kills it (by its PID, through `Child`).
/// `Ok(None)` means it was killed.
pub fn wait_bounded(child: &mut Child, limit: Duration) -> Result<Option<ExitStatus>> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            child.kill()?;
            child.wait()?;
            return Ok(None);
        }
        sleep(Duration::from_millis(20));
    }
}

/// The last non-empty line of some output, for one-line error reports.
pub fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("")
        .trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_stamps() {
        assert_eq!(format_utc(0), "1970-01-01-000000");
        assert_eq!(format_utc(951_782_400), "2000-02-29-000000");
        assert_eq!(format_utc(1_795_917_385), "2026-11-29-015625");
    }

    #[test]
    fn load_averages() {
        assert_eq!(
            parse_loadavg("0.98 0.76 0.82 1/92 11214\n").as_deref(),
            Some("0.98 0.76 0.82")
        );
        assert_eq!(parse_loadavg("0.98 0.76"), None);
        assert_eq!(parse_loadavg("a b c d"), None);
    }

    #[test]
    fn last_line_skips_blank_lines() {
        assert_eq!(last_line("a\nb  \n\n"), "b");
        assert_eq!(last_line(""), "");
    }
}
