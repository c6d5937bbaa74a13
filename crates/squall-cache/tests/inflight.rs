//! Request coalescing: one leader per key however many threads race, followers handed back on
//! finish, leave, and the waiter limit.

mod common;

use std::sync::{Arc, Barrier};

use squall_cache::{CacheKey, InFlight, Join};

fn key(path: &str) -> CacheKey {
    CacheKey::new("http", b"example.com", path.as_bytes())
}

#[test]
fn one_leader_among_racing_threads() {
    const THREADS: usize = 8;
    for round in 0..20 {
        let table = Arc::new(InFlight::<usize>::new(4));
        let barrier = Arc::new(Barrier::new(THREADS));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (table, barrier) = (Arc::clone(&table), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    match table.join(&key(&format!("/hot/{round}")), t, std::time::UNIX_EPOCH) {
                        Join::Leader(ticket) => Some(ticket),
                        Join::Follower => None,
                        Join::Full(_) | Join::Pass(_) => panic!("limit not reached"),
                    }
                })
            })
            .collect();
        let mut tickets: Vec<_> = handles
            .into_iter()
            .filter_map(|h| h.join().unwrap())
            .collect();
        assert_eq!(tickets.len(), 1, "round {round}: exactly one leader");
        assert_eq!(table.len(), 1);
        let ticket = tickets.pop().unwrap();
        assert_eq!(ticket.key(), &key(&format!("/hot/{round}")));
        let mut followers = table.finish(ticket);
        followers.sort_unstable();
        assert_eq!(followers.len(), THREADS - 1);
        followers.dedup();
        assert_eq!(followers.len(), THREADS - 1);
        assert!(table.is_empty());
    }
}

#[test]
fn finish_leave_and_full() {
    let table = InFlight::<u32>::new(2).with_waiters_max(3);
    let k = key("/a");
    let Join::Leader(ticket) = table.join(&k, 0, std::time::UNIX_EPOCH) else {
        panic!("first is leader")
    };
    for w in 1..=3 {
        assert!(matches!(
            table.join(&k, w, std::time::UNIX_EPOCH),
            Join::Follower
        ));
    }
    assert!(matches!(
        table.join(&k, 4, std::time::UNIX_EPOCH),
        Join::Full(4)
    ));
    assert_eq!(table.waiters(&k), 3);
    assert!(table.leave(&k, &2));
    assert!(!table.leave(&k, &2), "already left");
    assert!(!table.leave(&key("/other"), &1), "not in flight");
    // Room again after a leave.
    assert!(matches!(
        table.join(&k, 5, std::time::UNIX_EPOCH),
        Join::Follower
    ));
    // Another key is independent.
    let Join::Leader(other) = table.join(&key("/b"), 9, std::time::UNIX_EPOCH) else {
        panic!("other key has its own leader")
    };
    assert_eq!(table.len(), 2);
    assert_eq!(table.finish(ticket), vec![1, 3, 5]);
    assert!(!table.leave(&k, &1), "finished: nothing parked");
    assert_eq!(table.finish(other), Vec::<u32>::new());
    assert!(table.is_empty());
    // After finish, the next caller leads again.
    let Join::Leader(again) = table.join(&k, 7, std::time::UNIX_EPOCH) else {
        panic!("new leader")
    };
    assert!(table.finish(again).is_empty());
}

#[test]
fn zero_waiters_means_everyone_fetches() {
    let table = InFlight::<u8>::new(1).with_waiters_max(0);
    let k = key("/z");
    let Join::Leader(t) = table.join(&k, 1, std::time::UNIX_EPOCH) else {
        panic!()
    };
    assert!(matches!(
        table.join(&k, 2, std::time::UNIX_EPOCH),
        Join::Full(2)
    ));
    assert!(table.finish(t).is_empty());
}

fn at(secs: u64) -> std::time::SystemTime {
    std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs)
}

/// Hit-for-pass: after a leader's response was not storable, the key's requests go to the
/// origin unled (and unparked) until the mark expires; then one leads again.
#[test]
fn a_pass_mark_sends_everyone_to_the_origin_until_it_expires() {
    let table = InFlight::<u8>::new(1);
    let k = key("/p");
    let Join::Leader(ticket) = table.join(&k, 1, at(100)) else {
        panic!()
    };
    assert!(matches!(table.join(&k, 2, at(100)), Join::Follower));
    // Its followers are handed back as by `finish`, and the key is marked.
    let hold = std::time::Duration::from_secs(10);
    assert_eq!(table.finish_passing(ticket, at(101), hold), [2]);
    assert_eq!((table.len(), table.pass_marks()), (0, 1));
    assert!(table.is_empty(), "a pass mark is not a fetch in flight");
    for (waiter, now) in [(3, 101), (4, 105), (5, 110)] {
        assert!(
            matches!(table.join(&k, waiter, at(now)), Join::Pass(w) if w == waiter),
            "passes at {now}"
        );
        assert_eq!(table.waiters(&k), 0);
    }
    assert!(!table.leave(&k, &3), "nobody parks on a pass mark");
    // Another key is not affected.
    let Join::Leader(other) = table.join(&key("/q"), 6, at(105)) else {
        panic!()
    };
    assert!(table.finish(other).is_empty());
    // Expired: the next request leads, and a plain finish clears the key.
    let Join::Leader(again) = table.join(&k, 7, at(111)) else {
        panic!("an expired mark is replaced by a leader")
    };
    assert_eq!((table.len(), table.pass_marks()), (1, 0));
    assert!(matches!(table.join(&k, 8, at(111)), Join::Follower));
    assert_eq!(table.finish(again), [8]);
    assert_eq!((table.len(), table.pass_marks()), (0, 0));
}

/// A stale entry is still refreshed on a passed key: `try_lead` overrides the mark.
#[test]
fn try_lead_overrides_a_pass_mark() {
    let table = InFlight::<u8>::new(1);
    let k = key("/p");
    let Join::Leader(ticket) = table.join(&k, 1, at(0)) else {
        panic!()
    };
    let _ = table.finish_passing(ticket, at(0), std::time::Duration::from_secs(60));
    let lead = table.try_lead(&k).expect("leads over a pass mark");
    assert!(table.try_lead(&k).is_none(), "but not twice");
    assert_eq!((table.len(), table.pass_marks()), (1, 0));
    assert!(table.finish(lead).is_empty());
}

/// Pass marks per shard are bounded: a full shard sweeps the expired ones, and past the bound
/// with none expired, keys are simply not marked (they coalesce as before).
#[test]
fn pass_marks_are_bounded_per_shard() {
    use squall_cache::PASS_MARKS_PER_SHARD_MAX;
    let table = InFlight::<u32>::new(1);
    let hold = std::time::Duration::from_secs(10);
    let mark = |path: &str, now: u64| {
        let Join::Leader(ticket) = table.join(&key(path), 0, at(now)) else {
            panic!("{path} leads")
        };
        let _ = table.finish_passing(ticket, at(now), hold);
    };
    for i in 0..PASS_MARKS_PER_SHARD_MAX {
        mark(&format!("/m/{i}"), 0);
    }
    assert_eq!(table.pass_marks(), PASS_MARKS_PER_SHARD_MAX);
    mark("/over", 5);
    assert_eq!(
        table.pass_marks(),
        PASS_MARKS_PER_SHARD_MAX,
        "no room: not marked"
    );
    assert!(matches!(
        table.join(&key("/over"), 1, at(5)),
        Join::Leader(_)
    ));
    // At 10 s every earlier mark has expired: the next mark sweeps them.
    mark("/late", 10);
    assert_eq!(table.pass_marks(), 1);
    assert!(matches!(
        table.join(&key("/late"), 1, at(12)),
        Join::Pass(1)
    ));
}
