//! How much more of a proxied response a client may be given: the bounds on response bytes
//! buffered for clients that read slowly, as pure functions of what is held.
//!
//! Three bounds apply, each tighter than the one before only where it must be:
//!
//! - **Per client** (`OUT_HIGH_BYTES`): an HTTP/1.1 connection's unsent and in-flight bytes,
//!   or one HTTP/2 stream's queued DATA.
//! - **Per HTTP/2 connection** ([`H2_CONNECTION_BYTES`]): its streams share one bound, each
//!   stream getting an equal part of it (at least [`SHARE_MIN_BYTES`]), so 128 streams that
//!   are never read cannot each hold a whole per-client bound, while a stream the client does
//!   read still gets its part as its bytes leave. Once the connection holds its bound (its
//!   sessions' undecoded origin bytes included), a stream with no send window gets nothing:
//!   a new one does not even start its origin read until there is room.
//! - **Per process** (`limits.buffer_memory_max`): one atomic count of every connection's
//!   buffered bytes (`metrics::BufferedBytes`), and of the connections that hold any or are
//!   answered by a proxied response in progress. Each such connection may hold its share (the
//!   budget over those connections, at least [`SHARE_MIN_BYTES`]): one that holds its share
//!   gets no more room, so its origin pauses; one under it gets what is left of it. Clients
//!   that read drain to nothing, and a drained client always has room: it keeps getting data,
//!   and the slow ones hold what they have.
//!
//! Why shares and not a first-come order: the budget is reached by the clients that hold the
//! most, and it is them that must wait; a new or reading client must not be starved by them.
//! Why shares from the start, and not only once the budget is passed: what a slow reader is
//! given it keeps. With 1,000 slow HTTP/1.1 readers arriving together against a 32 MiB budget,
//! shares counted over the connections already holding (few at first, each then promised a
//! whole output bound) let the process hold 105 MiB; counted over every connection being
//! answered from the start, 44 MiB (the rest: the floor each drained client gets).

use super::OUT_HIGH_BYTES;

/// What one HTTP/2 connection may hold across its streams (before the share floor).
pub const H2_CONNECTION_BYTES: usize = 1024 * 1024;
/// The least room a stream's or a connection's share comes to, however many share: enough
/// for a few full DATA frames, so a reader is never reduced to a trickle of tiny writes.
pub const SHARE_MIN_BYTES: usize = 16 * 1024;

/// What a client holds, for [`room`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Held {
    /// Bytes waiting for this client: an HTTP/1.1 connection's unsent and in-flight bytes,
    /// or one HTTP/2 stream's queued DATA.
    pub own: usize,
    /// HTTP/2 only: the proxied streams sharing the connection's bound (0 on HTTP/1.1).
    pub streams: usize,
    /// HTTP/2 only: the DATA bytes the stream may send now (its window and the connection's).
    pub window: usize,
    /// Everything the client's connection holds, its sessions' undecoded origin bytes included.
    pub connection: usize,
}

/// The process-wide count, as last read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Process {
    /// `limits.buffer_memory_max` in bytes; 0 = no budget.
    pub limit: usize,
    /// Connections holding any, or answered by a proxied response in progress.
    pub holders: usize,
}

impl Process {
    /// A holder's fair part of the budget.
    pub fn share(&self) -> usize {
        (self.limit / self.holders.max(1)).max(SHARE_MIN_BYTES)
    }
}

/// How much more the client may be given now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Room {
    pub bytes: usize,
    /// Nothing waits for this client: any room resumes its origin (see
    /// `Exchange::on_client_room_drained`).
    pub drained: bool,
    /// The process's budget, not the client's own bounds, left it no room.
    pub budget_paused: bool,
}

/// A stream's part of its connection's bound.
pub fn stream_share(streams: usize) -> usize {
    (H2_CONNECTION_BYTES / streams.max(1)).clamp(SHARE_MIN_BYTES, OUT_HIGH_BYTES)
}

/// The room a client has under the three bounds (see the module docs).
pub fn room(held: Held, process: Process) -> Room {
    let mut bytes = OUT_HIGH_BYTES.saturating_sub(held.own);
    if held.streams > 0 {
        bytes = bytes.min(stream_share(held.streams).saturating_sub(held.own));
        // A stream that cannot send takes no more once its connection holds its bound: what
        // it would be given could only wait, and each read of an origin costs a burst of it.
        if held.window == 0 && held.connection >= H2_CONNECTION_BYTES {
            bytes = 0;
        }
    }
    let mut budget_paused = false;
    if process.limit > 0 {
        let left = process.share().saturating_sub(held.connection);
        budget_paused = left == 0 && bytes > 0;
        bytes = bytes.min(left);
    }
    // A client with nothing waiting that could take bytes now (an HTTP/1.1 connection, a
    // stream with window) always gets some: what its session holds undecoded can only leave
    // through it, and a reader must never wait on the clients that do not read.
    let drained = held.own == 0;
    if drained && (held.streams == 0 || held.window > 0) {
        bytes = bytes.max(SHARE_MIN_BYTES);
        budget_paused = false;
    }
    Room {
        bytes,
        drained,
        budget_paused,
    }
}

/// The machine's physical memory in bytes, from `/proc/meminfo` (read once); 0 if unknown.
pub fn physical_memory() -> u64 {
    static TOTAL: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TOTAL.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        mem_total(&text).unwrap_or(0)
    })
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// `limits.buffer_memory_max` in bytes for this machine; 0 = no budget.
pub fn limit(limits: &crate::runtime::ConnLimits) -> usize {
    let bytes = limits.buffer_memory_max.resolve(physical_memory());
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1024 * 1024;
    const GIB: usize = 1024 * MIB;

    fn h1(own: usize) -> Held {
        Held {
            own,
            streams: 0,
            window: 0,
            connection: own,
        }
    }

    #[test]
    fn a_client_alone_has_the_output_bound() {
        let none = Process::default();
        assert_eq!(room(h1(0), none).bytes, OUT_HIGH_BYTES);
        assert!(room(h1(0), none).drained);
        assert_eq!(room(h1(1000), none).bytes, OUT_HIGH_BYTES - 1000);
        assert_eq!(room(h1(OUT_HIGH_BYTES * 2), none).bytes, 0);
        assert!(!room(h1(1), none).drained);
    }

    #[test]
    fn streams_share_their_connections_bound() {
        let none = Process::default();
        let held = |own, streams| Held {
            own,
            streams,
            window: 0,
            connection: 0,
        };
        // Up to four streams each get the per-client bound; 128 get 16 KiB, not 8 KiB.
        assert_eq!(room(held(0, 4), none).bytes, OUT_HIGH_BYTES);
        assert_eq!(room(held(0, 8), none).bytes, 128 * 1024);
        assert_eq!(room(held(100 * 1024, 8), none).bytes, 28 * 1024);
        assert_eq!(room(held(0, 128), none).bytes, SHARE_MIN_BYTES);
        assert_eq!(room(held(SHARE_MIN_BYTES, 128), none).bytes, 0);
        // What 100 streams that are never read can hold together.
        assert!(100 * stream_share(100) <= 2 * MIB);
        // At the connection's bound, a stream without window waits; one with window does not.
        let full = Held {
            connection: H2_CONNECTION_BYTES,
            ..held(0, 128)
        };
        assert_eq!(room(full, none).bytes, 0);
        let reading = Held {
            window: 65_535,
            ..full
        };
        assert_eq!(room(reading, none).bytes, SHARE_MIN_BYTES);
    }

    #[test]
    fn a_drained_reader_always_has_some_room() {
        // Its connection holds far more than its share (undecoded origin bytes, say).
        let process = Process {
            limit: 32 * MIB,
            holders: 100,
        };
        let reader = Held {
            own: 0,
            streams: 0,
            window: 0,
            connection: 2 * MIB,
        };
        let room = room(reader, process);
        assert_eq!(room.bytes, SHARE_MIN_BYTES);
        assert!(room.drained && !room.budget_paused);
    }

    #[test]
    fn holders_at_their_share_wait() {
        let process = Process {
            limit: 64 * MIB,
            holders: 512,
        };
        assert_eq!(process.share(), 128 * 1024);
        // At or above its share: no room, and the budget is why (its own bound would allow more).
        let big = room(h1(200 * 1024), process);
        assert_eq!(big.bytes, 0);
        assert!(big.budget_paused);
        // At its own bound, the budget is not why it waits.
        assert!(!room(h1(OUT_HIGH_BYTES), process).budget_paused);
        // Under its share: what is left of it.
        assert_eq!(room(h1(100 * 1024), process).bytes, 28 * 1024);
        // A drained client (a reader) still gets data.
        let reader = room(h1(0), process);
        assert!(reader.bytes > 0 && reader.drained && !reader.budget_paused);
        // A budget with room for every holder's own bound, or none: the own bound decides.
        for limit in [GIB, 0] {
            let roomy = Process { limit, ..process };
            let held = room(h1(200 * 1024), roomy);
            assert_eq!(held.bytes, OUT_HIGH_BYTES - 200 * 1024);
            assert!(!held.budget_paused);
        }
    }

    #[test]
    fn a_thousand_slow_readers_share_the_budget_from_the_start() {
        // Every connection being answered counts, holding or not yet: a new one is promised
        // its share, not a whole output bound.
        let process = Process {
            limit: 32 * MIB,
            holders: 1000,
        };
        let first = room(h1(0), process);
        assert!(first.bytes < OUT_HIGH_BYTES);
        assert_eq!(first.bytes, 32 * MIB / 1000);
        assert!(1000 * first.bytes <= 32 * MIB);
    }

    #[test]
    fn many_holders_still_leave_a_reader_a_useful_share() {
        let process = Process {
            limit: MIB,
            holders: 10_000,
        };
        assert_eq!(process.share(), SHARE_MIN_BYTES);
        assert_eq!(room(h1(0), process).bytes, SHARE_MIN_BYTES);
    }

    #[test]
    fn mem_total_is_read_in_bytes() {
        let text = "MemTotal:       16316412 kB\nMemFree:         1000 kB\n";
        assert_eq!(mem_total(text), Some(16316412 * 1024));
        assert_eq!(mem_total("nothing"), None);
    }
}
