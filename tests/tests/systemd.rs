//! The sd_notify protocol as systemd sees it: a datagram socket in NOTIFY_SOCKET receives
//! READY, the watchdog pings, RELOADING/READY around a reload, and STOPPING.

use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

use squall_e2e::{Squall, TempDir, hello_config};

/// Receives datagrams until one contains `needle`, for at most `timeout`.
fn wait_for(socket: &UnixDatagram, needle: &str, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        if let Ok(n) = socket.recv(&mut buf) {
            let message = String::from_utf8_lossy(&buf[..n]).into_owned();
            if message.contains(needle) {
                return message;
            }
            seen.push(message);
        }
    }
    panic!("no {needle:?} within {timeout:?}; got {seen:?}");
}

#[test]
fn ready_watchdog_reload_and_stop_are_notified() {
    let lateness = squall_e2e::Lateness::start();
    let dir = TempDir::new();
    let path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut squall = Squall::start_with(&hello_config(""), |command| {
        command
            .env("NOTIFY_SOCKET", &path)
            .env("WATCHDOG_USEC", "400000");
    });
    let ready = wait_for(&socket, "READY=1", Duration::from_secs(5));
    assert!(ready.contains("STATUS=serving with 1 workers"), "{ready}");
    // Pinged at half the watchdog interval (200 ms) while the worker turns: five pings in a
    // row, none later than the 400 ms after which systemd would restart the service.
    wait_for(&socket, "WATCHDOG=1", Duration::from_secs(1));
    let mut last = Instant::now();
    let mut gaps = Vec::new();
    for _ in 0..5 {
        wait_for(&socket, "WATCHDOG=1", Duration::from_secs(1));
        gaps.push(last.elapsed());
        last = Instant::now();
    }
    let largest = gaps.iter().max().unwrap();
    lateness.assert_within(
        "the largest watchdog gap",
        *largest,
        Duration::from_millis(400),
    );
    squall.signal(libc::SIGHUP);
    let reloading = wait_for(&socket, "RELOADING=1", Duration::from_secs(5));
    assert!(reloading.contains("MONOTONIC_USEC="), "{reloading}");
    let ready = wait_for(&socket, "READY=1", Duration::from_secs(5));
    assert!(ready.contains("configuration reloaded"), "{ready}");
    squall.signal(libc::SIGTERM);
    wait_for(&socket, "STOPPING=1", Duration::from_secs(5));
    let status = squall.wait_exit(Duration::from_secs(5)).expect("exits");
    assert!(status.success());
}

/// A stuck worker stops the watchdog pings (systemd then restarts the service), and they come
/// back when it turns again. The stall is the debug-build test hook `SQUALL_TEST_STALL_WORKER`.
#[cfg(debug_assertions)]
#[test]
fn a_stuck_worker_stops_the_watchdog_pings() {
    let dir = TempDir::new();
    let path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let _squall = Squall::start_with(&hello_config(""), |command| {
        command
            .env("NOTIFY_SOCKET", &path)
            .env("WATCHDOG_USEC", "400000")
            .env("SQUALL_TEST_STALL_WORKER", "1000:6000");
    });
    wait_for(&socket, "READY=1", Duration::from_secs(5));
    wait_for(&socket, "WATCHDOG=1", Duration::from_secs(1));
    // The worker freezes 1 s after start for 6 s; the heartbeat counts as stale after 2 s, so
    // no ping goes out from about 3 s to 7 s.
    std::thread::sleep(Duration::from_millis(3500));
    let mut buf = [0u8; 4096];
    while socket.recv(&mut buf).is_ok() {} // what was sent before the heartbeat went stale
    let quiet_until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < quiet_until {
        if let Ok(n) = socket.recv(&mut buf) {
            let message = String::from_utf8_lossy(&buf[..n]);
            assert!(
                !message.contains("WATCHDOG=1"),
                "pinged while stuck: {message}"
            );
        }
    }
    // Unfrozen at 7 s: the pings resume.
    wait_for(&socket, "WATCHDOG=1", Duration::from_secs(5));
}
