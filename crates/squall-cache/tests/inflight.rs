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
                    match table.join(&key(&format!("/hot/{round}")), t) {
                        Join::Leader(ticket) => Some(ticket),
                        Join::Follower => None,
                        Join::Full(_) => panic!("limit not reached"),
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
    let Join::Leader(ticket) = table.join(&k, 0) else {
        panic!("first is leader")
    };
    for w in 1..=3 {
        assert!(matches!(table.join(&k, w), Join::Follower));
    }
    assert!(matches!(table.join(&k, 4), Join::Full(4)));
    assert_eq!(table.waiters(&k), 3);
    assert!(table.leave(&k, &2));
    assert!(!table.leave(&k, &2), "already left");
    assert!(!table.leave(&key("/other"), &1), "not in flight");
    // Room again after a leave.
    assert!(matches!(table.join(&k, 5), Join::Follower));
    // Another key is independent.
    let Join::Leader(other) = table.join(&key("/b"), 9) else {
        panic!("other key has its own leader")
    };
    assert_eq!(table.len(), 2);
    assert_eq!(table.finish(ticket), vec![1, 3, 5]);
    assert!(!table.leave(&k, &1), "finished: nothing parked");
    assert_eq!(table.finish(other), Vec::<u32>::new());
    assert!(table.is_empty());
    // After finish, the next caller leads again.
    let Join::Leader(again) = table.join(&k, 7) else {
        panic!("new leader")
    };
    assert!(table.finish(again).is_empty());
}

#[test]
fn zero_waiters_means_everyone_fetches() {
    let table = InFlight::<u8>::new(1).with_waiters_max(0);
    let k = key("/z");
    let Join::Leader(t) = table.join(&k, 1) else {
        panic!()
    };
    assert!(matches!(table.join(&k, 2), Join::Full(2)));
    assert!(table.finish(t).is_empty());
}
