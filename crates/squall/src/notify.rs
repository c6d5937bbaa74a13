//! The systemd notification protocol (sd_notify), and the watchdog fed by worker heartbeats.
//!
//! Every message is a no-op when `NOTIFY_SOCKET` is unset (not under systemd). The watchdog
//! pings only while every worker's event loop is turning: a worker stuck in a loop stops its
//! heartbeat, the pings stop, and systemd restarts the service (`WatchdogSec=`).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use sd_notify::NotifyState;
use tracing::{debug, warn};

use crate::metrics::{Metrics, heartbeat_now_ms};

/// READY=1 with a status line.
pub fn ready(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// RELOADING=1 with the monotonic time systemd 253+ expects (older ones ignore it).
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => send(&[NotifyState::Reloading, now]),
        Err(_) => send(&[NotifyState::Reloading]),
    }
}

/// STOPPING=1 with a status line.
pub fn stopping(status: &str) {
    send(&[NotifyState::Stopping, NotifyState::Status(status)]);
}

fn send(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        debug!("sd_notify: {e}");
    }
}

/// Starts the watchdog thread if systemd asked for one (`WATCHDOG_USEC`).
pub fn start_watchdog(metrics: Arc<Metrics>) {
    let Some(interval) = sd_notify::watchdog_enabled() else {
        return;
    };
    // Ping twice per interval, as sd_watchdog_enabled(3) advises; a heartbeat older than the
    // interval means a stuck worker (loops wake at least once a second).
    let period = interval / 2;
    let stale_ms = u64::try_from(interval.as_millis())
        .unwrap_or(u64::MAX)
        .max(2_000);
    let spawned = std::thread::Builder::new()
        .name("squall-watchdog".into())
        .spawn(move || {
            loop {
                std::thread::sleep(period.max(Duration::from_millis(10)));
                let now = heartbeat_now_ms();
                let stuck = metrics.workers().iter().position(|w| {
                    now.saturating_sub(w.heartbeat_ms.load(Ordering::Relaxed)) > stale_ms
                });
                match stuck {
                    None => send(&[NotifyState::Watchdog]),
                    Some(worker) => {
                        warn!(worker, "worker heartbeat stale: not feeding the watchdog")
                    }
                }
            }
        });
    if let Err(e) = spawned {
        warn!("cannot start the watchdog thread: {e}");
    }
}
