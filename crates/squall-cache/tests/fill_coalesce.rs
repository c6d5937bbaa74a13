//! Tickets: a leader's end always hands its followers back exactly once, whether its fill
//! ends (stored, not storable, failed) or is dropped unfinished (its waiters then come out of
//! the abandoned queue), and [`admit`]'s coalescing of misses and stale-while-revalidate.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use common::{at, headers, t0};
use http::{HeaderMap, Method, StatusCode};
use squall_cache::{
    Admission, CacheKey, Decision, Entry, Fill, FillLimits, FillRequest, InFlight, Join,
    OriginHead, Outcome, Served, Store, admit, header_lines, request_cache_control, storable,
};

fn key(path: &str) -> CacheKey {
    CacheKey::new("http", b"example.com", path.as_bytes())
}

fn fill(path: &str, ticket: Option<squall_cache::Ticket>) -> Fill {
    let limits = FillLimits {
        object_bytes_max: 1024,
        default_ttl: None,
        encode_head: header_lines,
    };
    let request = FillRequest {
        key: key(path),
        method: Method::GET,
        headers: HeaderMap::new(),
    };
    let store = Arc::new(Store::new(1 << 20, 1, 1.0));
    Fill::new(store, limits, request, None, ticket, t0())
}

/// A leader for `path` with `followers` parked behind it.
fn led(table: &InFlight<u32>, path: &str, followers: u32) -> Fill {
    let Join::Leader(ticket) = table.join(&key(path), 0, std::time::UNIX_EPOCH) else {
        panic!("first is leader")
    };
    for w in 1..=followers {
        assert!(matches!(
            table.join(&key(path), w, std::time::UNIX_EPOCH),
            Join::Follower
        ));
    }
    fill(path, Some(ticket))
}

fn assert_once(woken: &[u32], followers: u32) {
    let unique: HashSet<_> = woken.iter().collect();
    assert_eq!(
        unique.len(),
        woken.len(),
        "a waiter handed out twice: {woken:?}"
    );
    assert_eq!(woken.len(), followers as usize, "{woken:?}");
}

#[test]
fn a_failed_leader_hands_back_every_follower_exactly_once() {
    let table = InFlight::<u32>::new(2);
    // Failed before any head.
    let mut f = led(&table, "/a", 3);
    assert!(f.release().is_none(), "fate still open");
    assert!(f.on_failed(at(1)).is_none());
    assert_eq!(f.outcome(), Some(Outcome::Failed));
    let woken = table.finish(f.release().expect("fate known"));
    assert_eq!(woken, [1, 2, 3], "in the order they joined");
    assert!(f.release().is_none());
    drop(f);
    assert!(
        table.take_abandoned().is_empty(),
        "a finished ticket abandons nothing"
    );
    assert!(table.is_empty());
    // Failed mid-body.
    let mut f = led(&table, "/b", 2);
    let fields = headers(&[("cache-control", "max-age=60")]);
    let head = OriginHead {
        status: StatusCode::OK,
        origin_headers: &fields,
        client_headers: &fields,
        content_length: Some(10),
    };
    f.on_head(head, at(1));
    f.on_body(b"abc");
    assert!(
        f.release().is_none(),
        "collecting: the followers may still get a hit"
    );
    f.on_failed(at(2));
    assert_once(&table.finish(f.release().unwrap()), 2);
    drop(f);
    assert!(table.take_abandoned().is_empty());
    // The next request for the key leads again.
    assert!(matches!(
        table.join(&key("/a"), 9, std::time::UNIX_EPOCH),
        Join::Leader(_)
    ));
}

#[test]
fn a_dropped_ticket_hands_its_followers_to_the_abandoned_queue() {
    let table = InFlight::<u32>::new(2);
    let f = led(&table, "/a", 3);
    let other = led(&table, "/b", 1);
    assert!(table.take_abandoned().is_empty(), "nothing abandoned yet");
    drop(f); // The client left mid-fetch.
    // Until a driver drains the queue the key stays led: a newcomer parks, and is handed
    // back with the others.
    assert!(matches!(
        table.join(&key("/a"), 4, std::time::UNIX_EPOCH),
        Join::Follower
    ));
    assert!(table.try_lead(&key("/a")).is_none());
    let mut woken = table.take_abandoned();
    woken.sort_unstable();
    assert_eq!(woken, [1, 2, 3, 4]);
    assert!(table.take_abandoned().is_empty(), "handed out once");
    assert!(!table.leave(&key("/a"), &2), "nobody parked any more");
    assert_eq!(
        table.waiters(&key("/b")),
        1,
        "another key's leader is untouched"
    );
    assert!(matches!(
        table.join(&key("/a"), 5, std::time::UNIX_EPOCH),
        Join::Leader(_)
    ));
    drop(other);
    assert_eq!(table.take_abandoned(), [1]);
}

#[test]
fn a_ticket_dropped_while_unwinding_still_releases_its_followers() {
    let table = InFlight::<u32>::new(1);
    let f = led(&table, "/a", 2);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _held = f;
        panic!("a bug in the session");
    }));
    assert!(result.is_err());
    assert_once(&table.take_abandoned(), 2);
    assert!(table.is_empty());
}

#[test]
fn a_ticket_finished_on_another_table_is_abandoned_to_its_own() {
    // The owner replaced its table (a reload) while a fetch ran.
    let old = InFlight::<u32>::new(1);
    let new = InFlight::<u32>::new(1);
    let Join::Leader(ticket) = old.join(&key("/a"), 0, std::time::UNIX_EPOCH) else {
        panic!()
    };
    assert!(matches!(
        old.join(&key("/a"), 1, std::time::UNIX_EPOCH),
        Join::Follower
    ));
    let Join::Leader(theirs) = new.join(&key("/a"), 7, std::time::UNIX_EPOCH) else {
        panic!()
    };
    assert!(new.finish(ticket).is_empty());
    assert_eq!(new.len(), 1, "the new table's own leader is untouched");
    assert!(new.take_abandoned().is_empty());
    assert_eq!(old.take_abandoned(), [1]);
    assert!(new.finish(theirs).is_empty());
}

/// An entry stored at t0: fresh for 60 s, then servable stale for `swr` more seconds while
/// revalidating.
fn entry(swr: u64) -> Arc<Entry> {
    let request = HeaderMap::new();
    let cc = format!("max-age=60, stale-while-revalidate={swr}");
    let response = headers(&[("cache-control", &cc), ("etag", "\"v\"")]);
    let fresh = storable(
        &Method::GET,
        &request,
        StatusCode::OK,
        &response,
        None,
        t0(),
        t0(),
    );
    Arc::new(Entry::new(
        StatusCode::OK,
        response,
        "x".into(),
        "".into(),
        fresh.unwrap(),
        &request,
    ))
}

#[test]
fn admit_leads_or_parks_misses_and_serves_stale_while_one_revalidates() {
    let table = InFlight::<u32>::new(1).with_waiters_max(1);
    let k = key("/a");
    let Admission::Fetch {
        stale: None,
        ticket: Some(ticket),
    } = admit(&table, &k, Decision::Miss, 0, std::time::UNIX_EPOCH)
    else {
        panic!("the first miss leads")
    };
    assert!(matches!(
        admit(&table, &k, Decision::Miss, 1, std::time::UNIX_EPOCH),
        Admission::Wait
    ));
    let Admission::Fetch {
        stale: None,
        ticket: None,
    } = admit(&table, &k, Decision::Miss, 2, std::time::UNIX_EPOCH)
    else {
        panic!("past the waiter limit a miss fetches alone")
    };
    assert_eq!(table.finish(ticket), [1]);
    // Stale while revalidating: everyone gets it stale at once, the first to find it also
    // revalidates (in the background), and nobody parks.
    let stale = entry(30);
    let control = request_cache_control(&HeaderMap::new());
    let decision = squall_cache::decide(Some(stale.clone()), &control, at(70));
    assert!(matches!(decision, Decision::StaleWhileRevalidate(_)));
    let Admission::ServeAndRevalidate {
        entry: revalidated,
        ticket,
    } = admit(&table, &k, decision.clone(), 3, std::time::UNIX_EPOCH)
    else {
        panic!("served stale, and leads the revalidation")
    };
    assert!(Arc::ptr_eq(&revalidated, &stale));
    let Admission::Serve(served, Served::Stale) =
        admit(&table, &k, decision, 4, std::time::UNIX_EPOCH)
    else {
        panic!("served stale meanwhile")
    };
    assert!(Arc::ptr_eq(&served, &stale));
    assert!(table.finish(ticket).is_empty(), "nobody parked");
    // Revalidate without a stale window: joins like a miss, keeping the entry.
    let decision = squall_cache::decide(Some(entry(0)), &control, at(70));
    let Admission::Fetch {
        stale: Some(_),
        ticket: Some(ticket),
    } = admit(&table, &k, decision.clone(), 5, std::time::UNIX_EPOCH)
    else {
        panic!("revalidation leads")
    };
    assert!(matches!(
        admit(&table, &k, decision, 6, std::time::UNIX_EPOCH),
        Admission::Wait
    ));
    assert_eq!(table.finish(ticket), [6]);
    let hit = squall_cache::decide(Some(entry(0)), &control, at(10));
    assert!(matches!(
        admit(&table, &k, hit, 7, std::time::UNIX_EPOCH),
        Admission::Serve(_, Served::Hit)
    ));
    assert!(table.is_empty(), "a hit joins nothing");
}

#[test]
fn racing_joins_and_dropped_tickets_hand_out_each_follower_once() {
    const THREADS: u32 = 8;
    for round in 0..50 {
        let table = Arc::new(InFlight::<u32>::new(2));
        let barrier = Arc::new(std::sync::Barrier::new(THREADS as usize + 1));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (table, barrier) = (Arc::clone(&table), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    // A leader drops its ticket at once, as a session torn down would.
                    matches!(
                        table.join(&key("/hot"), t, std::time::UNIX_EPOCH),
                        Join::Leader(_)
                    )
                })
            })
            .collect();
        barrier.wait();
        let mut woken = Vec::new();
        for _ in 0..100 {
            woken.extend(table.take_abandoned());
        }
        let leaders: Vec<u32> = handles
            .into_iter()
            .enumerate()
            .filter_map(|(t, h)| h.join().unwrap().then_some(t as u32))
            .collect();
        woken.extend(table.take_abandoned());
        assert!(table.is_empty(), "round {round}");
        woken.extend(leaders.iter().copied());
        woken.sort_unstable();
        let all: Vec<u32> = (0..THREADS).collect();
        assert_eq!(woken, all, "round {round}: leaders {leaders:?}");
    }
}

/// Hit-for-pass follows from what the response was, never from what the request asked.
#[test]
fn only_a_response_that_could_never_be_stored_passes_its_key() {
    use squall_cache::{NotStorable, Outcome, passes_after};
    for reason in [
        NotStorable::NoStore,
        NotStorable::Private,
        NotStorable::VaryStar,
        NotStorable::SetCookie,
        NotStorable::NoFreshness,
        NotStorable::Expired,
    ] {
        assert!(
            passes_after(Some(Outcome::NotStorable(reason))),
            "{reason:?}"
        );
    }
    assert!(passes_after(Some(Outcome::TooLarge)));
    for reason in [
        NotStorable::Method,
        NotStorable::RequestNoStore,
        NotStorable::Authorization,
        NotStorable::Status,
    ] {
        assert!(
            !passes_after(Some(Outcome::NotStorable(reason))),
            "{reason:?}"
        );
    }
    for outcome in [
        None,
        Some(Outcome::Stored),
        Some(Outcome::Freshened),
        Some(Outcome::StaleOnError),
        Some(Outcome::Failed),
    ] {
        assert!(!passes_after(outcome), "{outcome:?}");
    }
}

/// `admit` on a passed key: no ticket and no parking, with the stale entry kept for the fill.
#[test]
fn admit_on_a_passed_key_fetches_alone() {
    let table = InFlight::<u32>::new(1);
    let k = key("/a");
    let Admission::Fetch {
        ticket: Some(ticket),
        ..
    } = admit(&table, &k, Decision::Miss, 0, t0())
    else {
        panic!("leads")
    };
    let _ = table.finish_passing(ticket, t0(), std::time::Duration::from_secs(10));
    for waiter in 1..4 {
        assert!(matches!(
            admit(&table, &k, Decision::Miss, waiter, at(5)),
            Admission::Pass { stale: None }
        ));
    }
    let decision = squall_cache::decide(
        Some(entry(0)),
        &request_cache_control(&HeaderMap::new()),
        at(70),
    );
    assert!(matches!(
        admit(&table, &k, decision, 9, at(9)),
        Admission::Pass { stale: Some(_) }
    ));
}
