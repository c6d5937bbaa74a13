use super::*;

fn name(host: &str) -> Name {
    (host.to_owned(), 80)
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A resolver tracking `api` (interval 30 s, upstream "app") at `now`.
fn one(now: Instant) -> Resolver {
    let mut r = Resolver::default();
    r.set_names(&[(name("api"), secs(30), "app".into())], now);
    r
}

#[test]
fn a_new_name_is_due_at_once_then_every_interval() {
    let t0 = Instant::now();
    let mut r = one(t0);
    assert_eq!(r.due(t0), Ok(name("api")));
    let v = r.on_result(&name("api"), Ok(vec![addr("10.0.0.1:80")]), t0);
    assert_eq!(v, Verdict::Changed);
    assert_eq!(r.due(t0 + secs(29)), Err(Some(t0 + secs(30))));
    assert_eq!(r.due(t0 + secs(30)), Ok(name("api")));
}

#[test]
fn the_same_set_in_another_order_changes_nothing() {
    let t0 = Instant::now();
    let mut r = one(t0);
    let a = addr("10.0.0.1:80");
    let b = addr("10.0.0.2:80");
    assert_eq!(
        r.on_result(&name("api"), Ok(vec![a, b]), t0),
        Verdict::Changed
    );
    let generation = r.generation();
    let again = r.on_result(&name("api"), Ok(vec![b, a, b]), t0 + secs(30));
    assert_eq!(again, Verdict::Same);
    assert_eq!(r.generation(), generation);
    assert_eq!(r.addresses(&name("api")), [a, b]);
}

#[test]
fn an_added_or_removed_address_is_a_change() {
    let t0 = Instant::now();
    let mut r = one(t0);
    let a = addr("10.0.0.1:80");
    let b = addr("[::1]:80");
    r.on_result(&name("api"), Ok(vec![a]), t0);
    let g = r.generation();
    assert_eq!(
        r.on_result(&name("api"), Ok(vec![a, b]), t0),
        Verdict::Changed
    );
    assert_eq!(r.on_result(&name("api"), Ok(vec![b]), t0), Verdict::Changed);
    assert_eq!(r.generation(), g + 2);
    assert_eq!(r.snapshot()[&name("api")], [b]);
}

#[test]
fn a_failure_keeps_the_last_good_set_and_warns_once_a_minute() {
    let t0 = Instant::now();
    let mut r = one(t0);
    let a = addr("10.0.0.1:80");
    r.on_result(&name("api"), Ok(vec![a]), t0);
    let fail = |r: &mut Resolver, at| r.on_result(&name("api"), Err("timed out".into()), at);
    assert_eq!(fail(&mut r, t0 + secs(30)), Verdict::Failed { warn: true });
    assert_eq!(fail(&mut r, t0 + secs(60)), Verdict::Failed { warn: false });
    assert_eq!(fail(&mut r, t0 + secs(90)), Verdict::Failed { warn: true });
    // An empty answer is a failure too.
    assert_eq!(
        r.on_result(&name("api"), Ok(vec![]), t0 + secs(100)),
        Verdict::Failed { warn: false }
    );
    assert_eq!(r.addresses(&name("api")), [a]);
    assert_eq!(r.due(t0 + secs(100)), Err(Some(t0 + secs(130))));
}

#[test]
fn set_names_keeps_known_names_and_forgets_dropped_ones() {
    let t0 = Instant::now();
    let mut r = one(t0);
    let a = addr("10.0.0.1:80");
    r.on_result(&name("api"), Ok(vec![a]), t0);
    let names = [
        (name("api"), secs(60), "app".into()),
        (name("api"), secs(10), "other".into()),
        (name("db"), secs(60), "app".into()),
    ];
    r.set_names(&names, t0 + secs(1));
    assert_eq!(r.addresses(&name("api")), [a]);
    assert_eq!(r.upstreams(&name("api")), ["app", "other"]);
    // The new name first; the known one at its shortest interval.
    assert_eq!(r.due(t0 + secs(1)), Ok(name("db")));
    r.on_result(&name("db"), Err("nxdomain".into()), t0 + secs(1));
    assert_eq!(r.due(t0 + secs(1)), Err(Some(t0 + secs(11))));
    r.set_names(&[(name("db"), secs(60), "app".into())], t0 + secs(2));
    assert!(r.addresses(&name("api")).is_empty());
    assert_eq!(
        r.on_result(&name("api"), Ok(vec![a]), t0 + secs(2)),
        Verdict::Unknown
    );
}

#[test]
fn nothing_tracked_is_never_due() {
    assert_eq!(Resolver::default().due(Instant::now()), Err(None));
}

#[test]
fn localhost_resolves_to_loopback() {
    let addresses = lookup(&("localhost".to_owned(), 8080)).unwrap();
    assert!(
        addresses
            .iter()
            .all(|a| a.ip().is_loopback() && a.port() == 8080)
    );
}
