//! CPU time as `/proc` books it: the server's user-space share, the whole machine's busy and
//! softirq time, and the load generator's (this process's reaped children).

use std::fs;

use anyhow::{Context, Result};

use crate::server::Server;

/// The user-space CPU seconds (utime) of the server and its descendants so far: read next to
/// [`Server::cpu_secs`] (utime + stime) for the user/kernel split of a run.
pub fn user_secs(server: &Server, clock_ticks: f64) -> Result<f64> {
    let pid = server.pid();
    let mut ticks = 0;
    for pid in std::iter::once(pid).chain(crate::server::descendants(pid)) {
        let path = format!("/proc/{pid}/stat");
        match fs::read_to_string(&path) {
            Ok(stat) => ticks += utime_ticks(&stat).with_context(|| format!("parsing {path}"))?,
            Err(err) if pid == server.pid() => {
                return Err(err).with_context(|| format!("reading {path}"));
            }
            // A child may end between listing and reading.
            Err(_) => {}
        }
    }
    Ok(ticks as f64 / clock_ticks)
}

/// The machine's CPU time so far, from the `cpu` line of `/proc/stat` (every core), in
/// clock ticks: what was busy (user, nice, system, irq, softirq, steal; guest time is inside
/// user already) and, of that, softirq.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineTicks {
    pub busy: u64,
    pub softirq: u64,
}

impl MachineTicks {
    pub fn read() -> Result<MachineTicks> {
        let stat = fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
        MachineTicks::parse(&stat).context("parsing the cpu line of /proc/stat")
    }

    fn parse(stat: &str) -> Option<MachineTicks> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let fields: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        // user nice system idle iowait irq softirq steal ...
        let at = |i: usize| fields.get(i).copied().unwrap_or(0);
        (fields.len() >= 7).then(|| MachineTicks {
            busy: at(0) + at(1) + at(2) + at(5) + at(6) + at(7),
            softirq: at(6),
        })
    }

    /// What was spent since `earlier`.
    pub fn since(self, earlier: MachineTicks) -> MachineTicks {
        MachineTicks {
            busy: self.busy.saturating_sub(earlier.busy),
            softirq: self.softirq.saturating_sub(earlier.softirq),
        }
    }
}

/// utime, field 14 of `/proc/PID/stat`, counted after the parenthesised command name.
fn utime_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(11)?.parse().ok()
}

/// The CPU seconds (user + system) of this process's children that have ended and been waited
/// for: `cutime` and `cstime`, fields 16 and 17 of `/proc/self/stat`. Read before a load
/// generator starts and after it is reaped, the difference is its CPU time, as it is the only
/// child waited for in between (the server and the origin run on until later).
pub fn reaped_children_secs(clock_ticks: f64) -> Result<f64> {
    let stat = fs::read_to_string("/proc/self/stat").context("reading /proc/self/stat")?;
    let ticks = children_ticks(&stat).context("parsing /proc/self/stat")?;
    Ok(ticks as f64 / clock_ticks)
}

/// cutime + cstime, fields 16 and 17 of `/proc/PID/stat`, counted after the command name.
fn children_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(13);
    let cutime: u64 = fields.next()?.parse().ok()?;
    let cstime: u64 = fields.next()?.parse().ok()?;
    Some(cutime + cstime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_ticks_from_proc_stat() {
        let stat = "cpu  100 5 50 9000 7 3 40 2 0 0\ncpu0 50 2 25 4500 3 1 20 1 0 0\nintr 1 2\n";
        let ticks = MachineTicks::parse(stat).unwrap();
        assert_eq!(
            ticks,
            MachineTicks {
                busy: 200,
                softirq: 40
            }
        );
        let later = MachineTicks {
            busy: 260,
            softirq: 55,
        };
        assert_eq!(
            later.since(ticks),
            MachineTicks {
                busy: 60,
                softirq: 15
            }
        );
        assert_eq!(MachineTicks::parse("cpu0 1 2 3\n"), None);
        assert_eq!(MachineTicks::parse("cpu  1 2 x 4 5 6 7\n"), None);
    }

    #[test]
    fn utime_from_proc_stat() {
        let stat = "5539 (nginx: worker) S 1 5539 5539 0 -1 4194624 530 0 0 0 1234 567 0 0 20 0 \
                    1 0 12345 0 0 18446744073709551615";
        assert_eq!(utime_ticks(stat), Some(1234));
        assert_eq!(utime_ticks("1 (a) b) S 0 0 0 0 0 0 0 0 0 0 7 8 0"), Some(7));
        assert_eq!(utime_ticks("garbage"), None);
    }

    #[test]
    fn reaped_children_from_proc_stat() {
        let stat = "5539 (xtask) S 1 5539 5539 0 -1 4194624 530 0 0 0 1234 567 300 45 20 0 \
                    1 0 12345 0 0 18446744073709551615";
        assert_eq!(children_ticks(stat), Some(345));
        assert_eq!(
            children_ticks("1 (a b) S 0 0 0 0 0 0 0 0 0 0 7 8 9 10 0"),
            Some(19)
        );
        assert_eq!(children_ticks("1 (a) S 0 0"), None);
        assert!(reaped_children_secs(100.0).is_ok_and(|secs| secs >= 0.0));
    }
}
