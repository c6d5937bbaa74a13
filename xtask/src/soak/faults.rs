//! The soak's faults: when they happen (a pure schedule) and how each is made. One thread walks
//! the schedule, one fault at a time, and records when each began and ended and what it saw.
//!
//! - **origin down**: the nginx origin is killed (SIGKILL) and started again on the same port
//!   after [`ORIGIN_DOWN_SECS`]; proxied and cache-miss requests fail meanwhile, which the
//!   verdict expects.
//! - **reload**: the config is rewritten (a new `respond` body) and Squall is sent SIGHUP; the
//!   fault ends when `squall_reloads_total{result="ok"}` has gone up.
//! - **slowloris**: [`SLOWLORIS_CONNECTIONS`] connections send a request head one byte every
//!   [`TRICKLE_EVERY`], past the soak config's 5 s header timeout, so Squall should answer 408.
//! - **slow readers**: [`SLOW_READERS`] connections ask for a 4 MiB object (cached, and
//!   proxied without cache) and never read it.
//! - **flood**: [`FLOOD_CONNECTIONS`] new connections as fast as they open, then closed.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::config::{self, Addrs};
use super::origin::Origin;
use super::sample::{Counters, scrape};
use super::verdict::{Fault, FaultKind};

/// How long the origin stays dead.
pub const ORIGIN_DOWN_SECS: u64 = 4;
pub const SLOWLORIS_CONNECTIONS: usize = 24;
/// How long slowloris connections trickle: past the 5 s header timeout.
pub const SLOWLORIS_SECS: u64 = 8;
pub const TRICKLE_EVERY: Duration = Duration::from_secs(2);
pub const SLOW_READERS: usize = 16;
/// How long slow readers hold their connections.
pub const SLOW_READER_SECS: u64 = 8;
pub const FLOOD_CONNECTIONS: usize = 300;
/// How long a reload may take to show in `/metrics`.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(5);
/// The order faults come in; the schedule cycles through it.
const ORDER: [FaultKind; 5] = [
    FaultKind::OriginDown,
    FaultKind::Reload,
    FaultKind::Slowloris,
    FaultKind::SlowReaders,
    FaultKind::Flood,
];
/// The room a fault needs before the end: its longest window, the recovery allowance, a margin.
const TAIL_SECS: u32 = 25;
/// Bounds on the time between two fault starts: room for the longest fault and its recovery,
/// and often enough that a long soak repeats every kind.
const GAP_SECS_MIN: u32 = 18;
const GAP_SECS_MAX: u32 = 60;

/// A fault due `at` seconds after the start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slot {
    pub kind: FaultKind,
    pub at: u32,
}

/// Seconds of warm-up before any fault and before the verdict looks: a sixth of the soak,
/// between 10 s and 60 s.
pub fn warmup_secs(duration: u32) -> u32 {
    (duration / 6).clamp(10, 60)
}

/// The faults of a soak of `duration` seconds: from just after warm-up, every kind in turn,
/// spaced evenly (within [`GAP_SECS_MIN`], [`GAP_SECS_MAX`]), none later than leaves
/// [`TAIL_SECS`] to recover.
pub fn schedule(duration: u32) -> Vec<Slot> {
    let first = warmup_secs(duration) + 2;
    let room = duration.saturating_sub(first + TAIL_SECS);
    let gap = (room / (ORDER.len() as u32 - 1).max(1)).clamp(GAP_SECS_MIN, GAP_SECS_MAX);
    (0..)
        .map(|i: u32| Slot {
            kind: ORDER[i as usize % ORDER.len()],
            at: first + i * gap,
        })
        .take_while(|slot| slot.at + TAIL_SECS <= duration)
        .collect()
}

/// What the faults act on.
pub struct Target<'a> {
    pub origin: &'a mut Origin,
    pub squall_pid: u32,
    pub config_path: &'a Path,
    pub addrs: Addrs,
}

/// Runs `slots` in order, each at its time after `t0`, until done or `stop`; prints each as it
/// ends.
pub fn run(slots: &[Slot], t0: Instant, target: &mut Target, stop: &AtomicBool) -> Vec<Fault> {
    let mut log = Vec::new();
    let mut generation = 0;
    for slot in slots {
        let due = t0 + Duration::from_secs(u64::from(slot.at));
        while Instant::now() < due {
            if stop.load(Ordering::Relaxed) {
                return log;
            }
            sleep(Duration::from_millis(50).min(due - Instant::now()));
        }
        let start = t0.elapsed().as_secs_f64();
        let outcome = match slot.kind {
            FaultKind::OriginDown => origin_down(target.origin),
            FaultKind::Reload => {
                generation += 1;
                reload(target, generation)
            }
            FaultKind::Slowloris => slowloris(target.addrs.plain),
            FaultKind::SlowReaders => slow_readers(target.addrs.plain),
            FaultKind::Flood => flood(target.addrs.plain),
        };
        let end = t0.elapsed().as_secs_f64();
        let (note, ok) = match outcome {
            Ok(note) => (note, true),
            Err(err) => (format!("failed: {err:#}"), false),
        };
        eprintln!("soak: {start:6.1}-{end:6.1} s {}: {note}", slot.kind.name());
        log.push(Fault {
            kind: slot.kind,
            start,
            end,
            note,
            ok,
        });
    }
    log
}

/// Runs the connection faults (slowloris, slow readers, flood) once, together, before the load
/// starts and outside the timeline: the buffers and allocator arenas they touch first grow RSS
/// once and stay, which is not a leak, and a short soak has each fault only once after warm-up.
/// A leak still shows: what each later fault loses comes on top of this high-water mark.
pub fn primer(addrs: &Addrs) -> Result<String> {
    std::thread::scope(|scope| {
        let slow = scope.spawn(|| slowloris(addrs.plain));
        let readers = scope.spawn(|| slow_readers(addrs.plain));
        let flooded = flood(addrs.plain);
        let join = |handle: std::thread::ScopedJoinHandle<'_, Result<String>>| {
            handle
                .join()
                .map_err(|_| anyhow::anyhow!("a primer thread panicked"))?
        };
        Ok(format!("{}; {}; {}", join(slow)?, join(readers)?, flooded?))
    })
}

fn origin_down(origin: &mut Origin) -> Result<String> {
    origin.kill();
    sleep(Duration::from_secs(ORIGIN_DOWN_SECS));
    origin.restart()?;
    Ok(format!(
        "killed, listening again after {ORIGIN_DOWN_SECS} s"
    ))
}

fn reload(target: &Target, generation: u32) -> Result<String> {
    let before = Counters::from_text(&scrape(target.addrs.admin)?).reloads_ok;
    std::fs::write(
        target.config_path,
        config::squall(&target.addrs, generation),
    )
    .context("rewriting the config")?;
    // `kill` the program: the libc call would break xtask's `forbid(unsafe_code)`.
    let status = Command::new("kill")
        .args(["-HUP", &target.squall_pid.to_string()])
        .stderr(Stdio::null())
        .status()?;
    if !status.success() {
        bail!("kill -HUP failed ({status})");
    }
    let deadline = Instant::now() + RELOAD_TIMEOUT;
    loop {
        let now = Counters::from_text(&scrape(target.addrs.admin)?).reloads_ok;
        if now > before {
            return Ok(format!(
                "generation {generation} applied (reloads ok: {now})"
            ));
        }
        if Instant::now() > deadline {
            bail!("no applied reload within {}s", RELOAD_TIMEOUT.as_secs());
        }
        sleep(Duration::from_millis(50));
    }
}

/// How one held connection ended, as far as the client saw.
#[derive(Debug, Default)]
struct Ends {
    answered_408: usize,
    closed: usize,
    open: usize,
}

fn slowloris(addr: SocketAddr) -> Result<String> {
    const HEAD: &[u8] = b"GET /respond HTTP/1.1\r\nHost: soak\r\nX-Slow: 1\r\n";
    let mut conns = connect_many(addr, SLOWLORIS_CONNECTIONS)?;
    let started = Instant::now();
    let mut sent = 0;
    while started.elapsed() < Duration::from_secs(SLOWLORIS_SECS) {
        let byte = &HEAD[sent % HEAD.len()..sent % HEAD.len() + 1];
        conns.retain_mut(|conn| conn.write_all(byte).is_ok());
        sent += 1;
        sleep(TRICKLE_EVERY);
    }
    let ends = ends(&mut conns, SLOWLORIS_CONNECTIONS);
    Ok(format!(
        "{SLOWLORIS_CONNECTIONS} connections, {sent} bytes each over {SLOWLORIS_SECS} s: \
         {} answered 408, {} closed, {} still open",
        ends.answered_408, ends.closed, ends.open
    ))
}

fn slow_readers(addr: SocketAddr) -> Result<String> {
    let mut conns = connect_many(addr, SLOW_READERS)?;
    for (i, conn) in conns.iter_mut().enumerate() {
        let path = if i % 2 == 0 { "/cache/big" } else { "/api/big" };
        let request = format!("GET {path} HTTP/1.1\r\nHost: soak\r\n\r\n");
        conn.write_all(request.as_bytes())?;
    }
    sleep(Duration::from_secs(SLOW_READER_SECS));
    let open = conns
        .iter_mut()
        .filter(|conn| {
            let _ = conn.set_nonblocking(true);
            let mut byte = [0u8; 1];
            !matches!(conn.peek(&mut byte), Ok(0))
        })
        .count();
    Ok(format!(
        "{SLOW_READERS} connections asked for {} MiB each and read nothing for \
         {SLOW_READER_SECS} s; {open} still open",
        config::BIG_BYTES >> 20
    ))
}

fn flood(addr: SocketAddr) -> Result<String> {
    let started = Instant::now();
    let mut opened = Vec::with_capacity(FLOOD_CONNECTIONS);
    let mut refused = 0;
    for _ in 0..FLOOD_CONNECTIONS {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            Ok(conn) => opened.push(conn),
            Err(_) => refused += 1,
        }
    }
    let took = started.elapsed();
    drop(opened);
    Ok(format!(
        "{FLOOD_CONNECTIONS} connections in {:.2} s ({refused} failed), then closed",
        took.as_secs_f64()
    ))
}

fn connect_many(addr: SocketAddr, count: usize) -> Result<Vec<TcpStream>> {
    (0..count)
        .map(|_| {
            let conn = TcpStream::connect_timeout(&addr, Duration::from_secs(1))
                .with_context(|| format!("connecting to {addr}"))?;
            conn.set_write_timeout(Some(Duration::from_secs(1)))?;
            Ok(conn)
        })
        .collect()
}

/// Reads what each held connection got: a 408, a close, or nothing yet. Connections already
/// dropped (a failed write) count as closed.
fn ends(conns: &mut [TcpStream], started_with: usize) -> Ends {
    let mut ends = Ends {
        closed: started_with - conns.len(),
        ..Ends::default()
    };
    for conn in conns {
        let _ = conn.set_read_timeout(Some(Duration::from_millis(100)));
        let mut head = [0u8; 64];
        match conn.read(&mut head) {
            Ok(0) => ends.closed += 1,
            Ok(n) if crate::server::status_of(&head[..n]) == Some(408) => ends.answered_408 += 1,
            Ok(_) => ends.closed += 1,
            Err(err) if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                ends.open += 1;
            }
            Err(_) => ends.closed += 1,
        }
    }
    ends
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_two_minute_soak_has_every_fault_once() {
        let slots = schedule(120);
        assert_eq!(warmup_secs(120), 20);
        let kinds: Vec<FaultKind> = slots.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, ORDER);
        assert_eq!(slots[0].at, 22);
        for pair in slots.windows(2) {
            assert!(pair[1].at - pair[0].at >= GAP_SECS_MIN);
        }
        assert!(slots.last().unwrap().at + TAIL_SECS <= 120);
    }

    #[test]
    fn a_ten_minute_soak_repeats_them_a_minute_apart() {
        let slots = schedule(600);
        assert_eq!(warmup_secs(600), 60);
        assert_eq!(slots.len(), 9);
        assert_eq!(slots[1].at - slots[0].at, GAP_SECS_MAX);
        assert_eq!(slots[5].kind, FaultKind::OriginDown);
        assert!(slots.last().unwrap().at + TAIL_SECS <= 600);
    }

    #[test]
    fn short_soaks_have_few_or_no_faults() {
        assert!(schedule(30).is_empty());
        assert_eq!(schedule(60).len(), 2);
        assert_eq!(warmup_secs(30), 10);
    }

    #[test]
    fn held_connections_are_told_apart() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut conns = connect_many(addr, 3).unwrap();
        let mut accepted: Vec<TcpStream> = (0..3).map(|_| listener.accept().unwrap().0).collect();
        accepted[0]
            .write_all(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
            .unwrap();
        drop(accepted.remove(1));
        let ends = ends(&mut conns, 4);
        assert_eq!((ends.answered_408, ends.closed, ends.open), (1, 2, 1));
    }
}
