//! The descriptor budget: how many client connections the process accepts before it pauses.
//!
//! Every client connection is a descriptor, and so is every origin connection a proxied
//! request opens. Accepting clients until `accept` fails with EMFILE leaves nothing for the
//! origin sockets of the requests those clients send: they fail, and the clients that were
//! accepted get 502s. So accepting stops earlier, at a mark that keeps a *reserve* free for
//! what accepted clients cause (the keep-alive pools), for the log files, the admin port, the
//! control socket and a reload. Clients past the mark wait in the kernel's accept queue (or
//! are refused by the kernel when it is full): never accepted and then half-served.
//!
//! With `"auto"` and proxy (or `root`) routes, a request in flight is charged the origin
//! connection (or file) it holds, from its pick to its end: not each client connection, most
//! of which sit idle between requests. What is left after the reserve (the *room*) is shared:
//! client connections and charged requests together stop accepting at three quarters of it
//! ([`REQUESTS_SHARE`]), and requests alone may take the last quarter. A request that finds
//! the room full waits (before it picks a server, so no timer runs) until a request ends or a
//! client leaves, rather than failing its connect: since clients never take more than three
//! quarters, at least a quarter of the room is always for requests, so waiting ends.
//!
//! The counts are process-wide (atomics that every worker adds to at accept and at a charge
//! and takes from when a connection's slot is freed or a request ends), because the descriptor
//! limit is the process's: a per-worker share would pause a busy worker while an idle one
//! holds descriptors it does not use. The mark is set at start-up and on each reload (the
//! reserve depends on the config).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use squall_config::DescriptorReserve;
use tracing::{info, warn};

/// The least automatic reserve: room for what the sum below does not name (a resolver, a
/// certificate read by a reload, the odd descriptor a library opens).
/// Idle keep-alive origin connections a worker keeps per upstream server (docs/CONFIG.md,
/// `[[upstream]]`, and the `descriptor_reserve` that counts them).
pub const POOL_IDLE_PER_SERVER_MAX: u32 = 256;

pub const RESERVE_FLOOR: usize = 64;
/// Descriptors a worker opens once its thread starts (its ring, its waker), counted into the
/// base because start-up measures the base before the workers run.
pub const WORKER_DESCRIPTORS: usize = 4;
/// What a reload opens besides new listening sockets: the config file, certificate and key
/// files, the access log reopened, a control connection.
const RELOAD_FILES: usize = 16;
/// The admin listener and a scrape in progress; the control socket and a `squall reload`.
const ADMIN_AND_CONTROL: usize = 4;
/// With requests charged, the share of the room (one part in this many) that client
/// connections may not take, so that requests always find descriptors to wait for.
pub const REQUESTS_SHARE: usize = 4;

/// What the automatic reserve is sized from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReserveInputs {
    pub workers: usize,
    /// `[[listen]]` entries: a reload may open a new socket per worker for each.
    pub listeners: usize,
    /// Per worker, the origin connections its keep-alive pools may hold idle: Σ over the
    /// upstream groups of servers × the pool's idle bound.
    pub pooled_per_worker: usize,
    /// Whether any route forwards to an origin or serves files: then each request in flight
    /// may hold one origin connection or file.
    pub proxies: bool,
}

/// The accept mark and what it was computed from, for the start-up log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Client connections (and charged requests) accepting pauses at; `usize::MAX` with the
    /// reserve off.
    pub clients_max: usize,
    /// Client connections and charged requests together: a request past it waits for a
    /// descriptor. `usize::MAX` when requests are not charged (a fixed reserve, no proxy).
    pub room: usize,
    /// Descriptors kept free for everything but client connections (what the log calls the
    /// reserve: the limit minus `clients_max`, the base included).
    pub reserve: usize,
}

/// The descriptors the reserve keeps for everything but the client connections and the base:
/// the pools, the files and sockets of the admin, the control socket and a reload, with
/// [`RESERVE_FLOOR`] added. Requests in flight are not in this sum: they are charged as they
/// go (see [`plan`]).
pub fn auto_reserve(inputs: &ReserveInputs) -> usize {
    let pools = inputs.workers.saturating_mul(inputs.pooled_per_worker);
    let reload = inputs
        .workers
        .saturating_mul(inputs.listeners)
        .saturating_add(RELOAD_FILES);
    RESERVE_FLOOR
        .saturating_add(pools)
        .saturating_add(reload)
        .saturating_add(ADMIN_AND_CONTROL)
}

/// Where accepting pauses, given the soft `RLIMIT_NOFILE`, the descriptors the process holds
/// before any client (`base`: stdio, listeners, rings, log files) and the configured reserve.
///
/// With `"auto"` and proxy routes, requests in flight are charged too: clients and charged
/// requests stop accepting at three quarters of the room, requests wait past all of it. A
/// fixed reserve is taken as the operator's whole answer (nothing is charged per request); 0
/// turns the mark off. A limit too low for the reserve still uses a quarter of what is left
/// after the base (start-up warns about it), so the server serves rather than accepting no one.
pub fn plan(nofile: u64, base: usize, reserve: DescriptorReserve, inputs: &ReserveInputs) -> Plan {
    let nofile = usize::try_from(nofile).unwrap_or(usize::MAX);
    let (fixed, charged) = match reserve {
        DescriptorReserve::Fixed(0) => {
            return Plan {
                clients_max: usize::MAX,
                room: usize::MAX,
                reserve: 0,
            };
        }
        DescriptorReserve::Fixed(n) => (n as usize, false),
        DescriptorReserve::Auto => (auto_reserve(inputs), inputs.proxies),
    };
    let least = nofile.saturating_sub(base) / 4;
    let room = nofile
        .saturating_sub(base)
        .saturating_sub(fixed)
        .max(least)
        .max(2);
    let (clients_max, room) = match charged {
        true => ((room - room / REQUESTS_SHARE).min(room - 1), room),
        false => (room, usize::MAX),
    };
    debug_assert!(clients_max >= 1 && clients_max < room);
    Plan {
        clients_max,
        room,
        reserve: nofile.saturating_sub(clients_max),
    }
}

/// What the reserve of `config` is sized from, with `upstreams` its compiled groups.
pub fn inputs<'a>(
    config: &squall_config::Config,
    upstreams: impl IntoIterator<Item = &'a squall_upstream::UpstreamSpec>,
    workers: usize,
) -> ReserveInputs {
    let mut groups = 0;
    let pooled_per_worker = (upstreams.into_iter())
        .inspect(|_| groups += 1)
        .map(|u| u.servers.len().saturating_mul(u.pool.idle_max as usize))
        .fold(0usize, usize::saturating_add);
    ReserveInputs {
        workers,
        listeners: config.listen.len(),
        pooled_per_worker,
        // A `root` route's request holds a file open as a proxied one holds its origin
        // connection: one per HTTP/1.1 client, one per stream on HTTP/2.
        proxies: groups > 0
            || (config.vhost.iter().flat_map(|v| &v.routes))
                .any(|r| matches!(r.action, squall_config::Action::Files(_))),
    }
}

/// The descriptors open in this process now (`/proc/self/fd`), or 0 when it cannot be read.
pub fn count_open() -> usize {
    // The directory's own descriptor is listed too, and not ours to count.
    std::fs::read_dir("/proc/self/fd").map_or(0, |dir| dir.count().saturating_sub(1))
}

fn log_plan(
    nofile: u64,
    base: usize,
    reserve: DescriptorReserve,
    inputs: &ReserveInputs,
    plan: Plan,
) {
    if plan.clients_max == usize::MAX {
        info!(
            "accepting until descriptors run out (RLIMIT_NOFILE {nofile}, descriptor_reserve = 0)"
        );
        return;
    }
    info!(
        "accepting up to {} connections (RLIMIT_NOFILE {nofile}, reserve {})",
        plan.clients_max, plan.reserve
    );
    let wanted = match reserve {
        DescriptorReserve::Auto => auto_reserve(inputs),
        DescriptorReserve::Fixed(n) => n as usize,
    };
    if base.saturating_add(wanted) >= usize::try_from(nofile).unwrap_or(usize::MAX) {
        warn!(
            "RLIMIT_NOFILE {nofile} leaves no room for the descriptor reserve ({wanted} beside \
             {base} open at start-up): proxied requests may fail for want of descriptors; \
             raise the limit (LimitNOFILE= in systemd, ulimit -n)"
        );
    }
}

/// The process-wide count of open client connections and charged requests, the mark
/// accepting pauses at and the room requests may take.
#[derive(Debug)]
pub struct Budget {
    open: AtomicUsize,
    max: AtomicUsize,
    /// Requests in flight holding an origin connection or a file (see [`Budget::take`]).
    held: AtomicUsize,
    room: AtomicUsize,
    /// The soft `RLIMIT_NOFILE` and the base measured at start-up, kept for reloads.
    nofile: AtomicU64,
    base: AtomicUsize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            open: AtomicUsize::new(0),
            max: AtomicUsize::new(usize::MAX),
            held: AtomicUsize::new(0),
            room: AtomicUsize::new(usize::MAX),
            nofile: AtomicU64::new(u64::MAX),
            base: AtomicUsize::new(0),
        }
    }
}

impl Budget {
    /// Start-up: records the limit and the base, sets the mark and logs it.
    pub fn start(
        &self,
        nofile: u64,
        base: usize,
        reserve: DescriptorReserve,
        inputs: &ReserveInputs,
    ) {
        self.nofile.store(nofile, Ordering::Relaxed);
        self.base.store(base, Ordering::Relaxed);
        let plan = self.apply(reserve, inputs);
        log_plan(nofile, base, reserve, inputs, plan);
    }

    /// Sets the mark for `reserve` against the limit and base recorded at start-up (a reload's
    /// config may change the reserve).
    pub fn apply(&self, reserve: DescriptorReserve, inputs: &ReserveInputs) -> Plan {
        let nofile = self.nofile.load(Ordering::Relaxed);
        let plan = plan(nofile, self.base.load(Ordering::Relaxed), reserve, inputs);
        self.set_max(plan.clients_max);
        self.room.store(plan.room, Ordering::Relaxed);
        plan
    }

    /// Counts a connection accepted.
    pub fn opened(&self) {
        self.open.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a connection whose slot was freed (its socket is closed).
    pub fn closed(&self) {
        let _ = self
            .open
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    pub fn max(&self) -> usize {
        self.max.load(Ordering::Relaxed)
    }

    /// Sets the mark (start-up, reload).
    pub fn set_max(&self, max: usize) {
        self.max.store(max, Ordering::Relaxed);
    }

    /// Connections that may still be accepted before the mark: 0 means paused. Charged
    /// requests count against it when requests are charged.
    pub fn headroom(&self) -> usize {
        let mut used = self.open();
        if self.room.load(Ordering::Relaxed) != usize::MAX {
            used = used.saturating_add(self.held());
        }
        self.max().saturating_sub(used)
    }

    /// Requests holding a charge.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// Charges a request the descriptor it is about to open (an origin connection, a file):
    /// false when client connections and charged requests fill the room (the request waits
    /// and tries again as others end). Always true when requests are not charged (the room
    /// is unbounded; the count goes on, so that a reload may start charging). A charge taken
    /// is given back with [`Budget::give`].
    pub fn take(&self) -> bool {
        self.take_n(1)
    }

    /// Charges `n` descriptors at once (a request that holds several), all or none: false
    /// when they do not all fit in the room. Given back with [`Budget::give_n`].
    pub fn take_n(&self, n: usize) -> bool {
        let room = self.room.load(Ordering::Relaxed);
        let open = self.open();
        self.held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                let after = held.checked_add(n)?;
                (open.saturating_add(after) <= room).then_some(after)
            })
            .is_ok()
    }

    /// Gives back a charge [`Budget::take`] returned true for.
    pub fn give(&self) {
        self.give_n(1);
    }

    /// Gives back the `n` descriptors [`Budget::take_n`] charged.
    pub fn give_n(&self, n: usize) {
        let _ = self
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                Some(held.saturating_sub(n))
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_md_states_the_pool_size_the_binary_keeps() {
        // The idle pool the reserve counts, as the operator reference states it.
        let doc = include_str!("../../../docs/CONFIG.md");
        let n = POOL_IDLE_PER_SERVER_MAX;
        assert!(doc.contains(&format!("(up to {n} per server and worker,")));
        assert!(doc.contains(&format!(
            "Σ(upstream servers × {n} pooled idle connections)"
        )));
    }

    const INPUTS: ReserveInputs = ReserveInputs {
        workers: 2,
        listeners: 1,
        pooled_per_worker: 32,
        proxies: true,
    };

    #[test]
    fn the_auto_reserve_sums_pools_reload_and_the_floor() {
        assert_eq!(auto_reserve(&INPUTS), 64 + 2 * 32 + 2 + 16 + 4);
        let bare = ReserveInputs::default();
        assert_eq!(auto_reserve(&bare), RESERVE_FLOOR + RELOAD_FILES + 4);
    }

    #[test]
    fn proxying_keeps_a_quarter_of_the_room_for_requests() {
        let plan = plan(1024, 24, DescriptorReserve::Auto, &INPUTS);
        let room = 1024 - 24 - 150;
        assert_eq!((plan.clients_max, plan.room), (room - room / 4, room));
        assert_eq!(plan.reserve, 1024 - plan.clients_max);
        let local = ReserveInputs {
            proxies: false,
            ..INPUTS
        };
        let local = super::plan(1024, 24, DescriptorReserve::Auto, &local);
        assert_eq!((local.clients_max, local.room), (room, usize::MAX));
    }

    #[test]
    fn requests_take_the_room_idle_clients_leave_and_wait_past_it() {
        let budget = Budget::default();
        let plan = plan(1024, 24, DescriptorReserve::Auto, &INPUTS);
        budget.set_max(plan.clients_max);
        budget.room.store(plan.room, Ordering::Relaxed);
        // Idle clients up to the mark: accepting pauses there.
        (0..plan.clients_max).for_each(|_| budget.opened());
        assert_eq!(budget.headroom(), 0);
        // Their requests take the last quarter, then wait.
        let charged = (0..plan.room).take_while(|_| budget.take()).count();
        assert_eq!(charged, plan.room - plan.clients_max);
        assert!(!budget.take());
        budget.give();
        assert!(budget.take(), "a request that ends lets a waiting one go");
        // A client leaving frees a descriptor for a request, not for a new client.
        budget.closed();
        assert_eq!(budget.headroom(), 0);
        assert!(budget.take());
        assert!(!budget.take());
    }

    #[test]
    fn several_descriptors_are_charged_all_or_none() {
        let budget = Budget::default();
        budget.room.store(10, Ordering::Relaxed);
        (0..4).for_each(|_| budget.opened());
        assert!(budget.take_n(3));
        assert_eq!(budget.held(), 3);
        // 4 open and 3 held: 3 more fit exactly, 4 would not, and none is taken then.
        assert!(!budget.take_n(4));
        assert_eq!(budget.held(), 3);
        assert!(budget.take_n(3));
        assert!(!budget.take());
        budget.give_n(3);
        assert_eq!(budget.held(), 3);
        assert!(budget.take());
        budget.give_n(10);
        assert_eq!(budget.held(), 0, "never below zero");
    }

    #[test]
    fn a_fixed_reserve_is_taken_whole_and_zero_turns_it_off() {
        let plan = plan(1024, 24, DescriptorReserve::Fixed(100), &INPUTS);
        assert_eq!((plan.clients_max, plan.room), (900, usize::MAX));
        let off = super::plan(1024, 24, DescriptorReserve::Fixed(0), &INPUTS);
        assert_eq!(off.clients_max, usize::MAX);
    }

    #[test]
    fn a_limit_below_the_reserve_still_accepts_some() {
        let low = plan(64, 24, DescriptorReserve::Auto, &INPUTS);
        assert_eq!((low.clients_max, low.room), (8, 10));
        let none = plan(64, 80, DescriptorReserve::Auto, &INPUTS);
        assert_eq!((none.clients_max, none.room), (1, 2));
    }

    #[test]
    fn the_budget_counts_and_never_wraps() {
        let budget = Budget::default();
        budget.set_max(2);
        budget.opened();
        assert_eq!(budget.headroom(), 1);
        budget.opened();
        budget.opened();
        assert_eq!(budget.headroom(), 0);
        for _ in 0..4 {
            budget.closed();
        }
        assert_eq!(budget.open(), 0);
    }
}
