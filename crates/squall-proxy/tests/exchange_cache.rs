//! The cached exchange in the pair harness with a real store and in-flight table: what a
//! foreign 304, stale-if-error, a background revalidation, a ranged miss, a failed leader and
//! an invalidation lead to, each origin response split at every byte.

mod exchange_support;

use std::time::Duration;

use exchange_support::cache::{World, answer_line, fetch};
use exchange_support::{Pair, Server, splits};
use squall_proxy::ClientProtocol;
use squall_proxy::cached::{Answer, Count};

const GET: &str = "GET /p HTTP/1.1\r\nHost: x\r\n\r\n";
/// Fresh for 1 s, then servable stale on error for a minute.
const V1: &[u8] = b"HTTP/1.1 200 OK\r\nCache-Control: max-age=1, stale-if-error=60\r\n\
ETag: \"v1\"\r\nContent-Length: 2\r\n\r\nv1";
const V2: &[u8] = b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nETag: \"v2\"\r\n\
Content-Length: 2\r\n\r\nv2";

/// A world whose `/p` holds `V1`, gone stale (past max-age, inside stale-if-error).
fn stale_world() -> World {
    let mut world = World::new();
    world.fill(GET, V1);
    world.advance(Duration::from_secs(2));
    world
}

/// The revalidating fetch of a stale `/p`, its request sent.
fn revalidation(world: &World, servers: &[Server]) -> Pair {
    let begun = world.begin(GET, 1);
    assert_eq!(begun.count, Count::Miss);
    let mut pair = world.pair(fetch(begun), servers);
    pair.run();
    pair
}

#[test]
fn a_miss_streams_to_the_client_is_stored_and_then_hit() {
    for pieces in splits(V2) {
        let world = World::new();
        let begun = world.begin(GET, 1);
        assert_eq!(
            (answer_line(&begun), begun.count),
            ("fetch".into(), Count::Miss)
        );
        let mut pair = world.pair(fetch(begun), &[Server::Accept]);
        pair.run();
        pair.origin_sends(&pieces);
        assert_eq!(pair.client[1..], ["data v2", "end [] unfinished=false"]);
        assert_eq!(pair.cache, ["stored", "publish"]);
        assert_eq!(answer_line(&world.begin(GET, 2)), "serve HIT 200 v2");
    }
}

#[test]
fn a_foreign_304_is_fetched_again_without_conditionals() {
    let not_modified: &[u8] = b"HTTP/1.1 304 Not Modified\r\nETag: \"other\"\r\n\r\n";
    for pieces in splits(not_modified) {
        let world = stale_world();
        let mut pair = revalidation(&world, &[Server::Accept]);
        assert!(
            pair.written(0).contains("if-none-match: \"v1\""),
            "{}",
            pair.written(0)
        );
        pair.origin_sends(&pieces);
        // RFC 9111 §4.3.4: the 304 reaches nobody; the client's own request goes again.
        assert!(pair.client.is_empty(), "{:?}", pair.client);
        assert_eq!(pair.conns.len(), 2, "asked again");
        let again = pair.written(1).to_ascii_lowercase();
        assert!(!again.contains("if-none-match"), "{again}");
        pair.origin_sends(&[V2]);
        assert_eq!(pair.client[1..], ["data v2", "end [] unfinished=false"]);
        assert_eq!(pair.cache, ["stored", "publish"]);
        assert_eq!(answer_line(&world.begin(GET, 2)), "serve HIT 200 v2");
    }
}

#[test]
fn a_matching_304_answers_every_client_from_the_freshened_entry() {
    let not_modified: &[u8] =
        b"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nCache-Control: max-age=60\r\n\r\n";
    for protocol in [ClientProtocol::Http11, ClientProtocol::H2] {
        for pieces in splits(not_modified) {
            let world = stale_world();
            let mut pair = world.pair_for(fetch(world.begin(GET, 1)), protocol, &[Server::Accept]);
            pair.run();
            pair.origin_sends(&pieces);
            assert!(pair.client.is_empty(), "the 304 is not forwarded");
            assert_eq!(pair.cache, ["serve REVALIDATED 200 v1", "publish"]);
            assert!(pair.ex.is_finished());
            assert_eq!(answer_line(&world.begin(GET, 2)), "serve HIT 200 v1");
        }
    }
}

#[test]
fn stale_if_error_answers_an_origin_that_cannot_be_reached() {
    let world = stale_world();
    let pair = revalidation(&world, &[Server::Refuse]);
    assert!(pair.client.is_empty(), "no 502: {:?}", pair.client);
    assert_eq!(pair.cache, ["serve STALE 200 v1 failed", "publish"]);
    assert!(pair.ex.answered() && pair.ex.is_finished());
    // Past stale-if-error the error goes through.
    let mut world = stale_world();
    world.advance(Duration::from_secs(60));
    let pair = revalidation(&world, &[Server::Refuse]);
    assert_eq!(pair.client, ["error 502 unfinished=false"]);
    assert_eq!(pair.cache, ["publish"]);
}

#[test]
fn stale_if_error_answers_an_origin_5xx_and_drops_its_body() {
    let error: &[u8] = b"HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy";
    for pieces in splits(error) {
        let world = stale_world();
        let mut pair = revalidation(&world, &[Server::Accept]);
        pair.origin_sends(&pieces);
        assert!(pair.client.is_empty(), "{:?}", pair.client);
        assert_eq!(pair.cache, ["serve STALE 200 v1", "publish"]);
        // The dropped body was read whole: the connection is kept.
        assert_eq!(pair.conns[0].released, Some(true));
    }
}

#[test]
fn stale_if_error_answers_a_cut_before_the_head_but_not_after_it() {
    let head = b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 2\r\n\r\n";
    for at in 0..head.len() {
        let world = stale_world();
        let mut pair = revalidation(&world, &[Server::Accept]);
        if at > 0 {
            pair.origin_sends(&[&head[..at]]);
        }
        pair.origin_eof();
        assert!(pair.client.is_empty(), "cut at {at}: {:?}", pair.client);
        assert_eq!(pair.cache, ["serve STALE 200 v1 failed", "publish"], "{at}");
    }
    // After the head went out, a cut can only be passed on: nothing stored, nothing
    // published; the ticket goes with the exchange and its followers are woken all the same.
    let world = stale_world();
    let mut pair = revalidation(&world, &[Server::Accept]);
    assert_eq!(answer_line(&world.begin(GET, 7)), "park");
    pair.origin_sends(&[head, b"v"]);
    pair.origin_eof();
    assert_eq!(pair.client.last().map(String::as_str), Some("abort"));
    assert!(pair.cache.is_empty(), "{:?}", pair.cache);
    drop(pair);
    assert_eq!(world.inflight.take_abandoned(), [7]);
    assert_eq!(
        answer_line(&world.after_wait(GET, world.wall, false)),
        "fetch"
    );
}

#[test]
fn a_stale_while_revalidate_entry_is_served_at_once_and_revalidated_in_the_background() {
    let swr: &[u8] = b"HTTP/1.1 200 OK\r\nCache-Control: max-age=1, stale-while-revalidate=60\r\n\
ETag: \"v1\"\r\nContent-Length: 2\r\n\r\nv1";
    let conditional_head = "HEAD /p HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"mine\"\r\n\r\n";
    for pieces in splits(V2) {
        let mut world = World::new();
        world.fill(GET, swr);
        world.advance(Duration::from_secs(2));
        let begun = world.begin(conditional_head, 1);
        assert_eq!(answer_line(&begun), "serve STALE 200 v1 + background");
        assert_eq!(begun.count, Count::Stale);
        // Others inside the window are served too, and start nothing.
        assert_eq!(answer_line(&world.begin(GET, 2)), "serve STALE 200 v1");
        let background = begun.background.expect("a background fetch");
        assert!(background.plan.background());
        let mut pair = world.pair(background, &[Server::Accept]);
        pair.run();
        // A GET with the entry's validator, not the client's method or conditional.
        let sent = pair.written(0);
        assert!(sent.starts_with("GET /p "), "{sent}");
        assert!(
            sent.contains("if-none-match: \"v1\"") && !sent.contains("mine"),
            "{sent}"
        );
        pair.origin_sends(&pieces);
        assert!(pair.client.is_empty(), "answers nobody: {:?}", pair.client);
        assert_eq!(pair.cache, ["stored", "publish"]);
        assert_eq!(answer_line(&world.begin(GET, 3)), "serve HIT 200 v2");
    }
}

#[test]
fn a_background_fetch_that_will_store_nothing_lets_its_origin_go() {
    let swr: &[u8] = b"HTTP/1.1 200 OK\r\nCache-Control: max-age=1, stale-while-revalidate=60\r\n\
Content-Length: 2\r\n\r\nv1";
    let private: &[u8] = b"HTTP/1.1 200 OK\r\nCache-Control: private\r\nContent-Length: 9\r\n\r\n";
    let mut world = World::new();
    world.fill(GET, swr);
    world.advance(Duration::from_secs(2));
    let begun = world.begin(GET, 1);
    let mut pair = world.pair(
        begun.background.expect("a background fetch"),
        &[Server::Accept],
    );
    pair.run();
    pair.origin_sends(&[private]);
    // Known at the head: published (the key passes), the origin let go unread.
    assert_eq!(pair.cache, ["publish pass"]);
    assert_eq!(pair.conns[0].released, Some(false));
    assert!(pair.ex.is_finished() && pair.client.is_empty());
}

#[test]
fn a_ranged_miss_fetches_the_whole_object_and_is_served_from_the_entry() {
    let ranged = "GET /p HTTP/1.1\r\nHost: x\r\nRange: bytes=0-0\r\n\r\n";
    for pieces in splits(V2) {
        let world = World::new();
        let begun = world.begin(ranged, 1);
        assert_eq!(answer_line(&begun), "park fetched + background");
        assert_eq!(begun.count, Count::Miss);
        // A second range of it waits for the same fetch.
        assert_eq!(answer_line(&world.begin(ranged, 2)), "park");
        let mut pair = world.pair(
            begun.background.expect("the whole object"),
            &[Server::Accept],
        );
        pair.run();
        assert!(
            !pair.written(0).to_ascii_lowercase().contains("range"),
            "whole"
        );
        pair.origin_sends(&pieces);
        assert!(pair.client.is_empty());
        assert_eq!(pair.cache, ["stored", "publish"]);
        assert_eq!(pair.woken, [1, 2]);
        // Woken, the one that caused the fetch is its MISS; the range is cut from the entry.
        let woken = world.after_wait(ranged, world.wall, true);
        assert_eq!(
            (answer_line(&woken), woken.count),
            ("serve MISS 200 v2".into(), Count::Nothing)
        );
        assert_eq!(
            answer_line(&world.after_wait(ranged, world.wall, false)),
            "serve HIT 200 v2"
        );
    }
}

#[test]
fn a_ranged_miss_too_large_to_store_goes_to_the_origin_by_range() {
    let ranged = "GET /p HTTP/1.1\r\nHost: x\r\nRange: bytes=0-0\r\n\r\n";
    let large = format!(
        "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 100\r\n\r\n{}",
        "x".repeat(100)
    );
    let world = World::new();
    let begun = world.begin(ranged, 1);
    let mut pair = world.pair(
        begun.background.expect("the whole object"),
        &[Server::Accept],
    );
    pair.run();
    pair.origin_sends(&[large.as_bytes()]);
    assert_eq!(pair.cache, ["publish pass"]);
    assert_eq!(pair.woken, [1]);
    let woken = world.after_wait(ranged, world.wall, true);
    let Answer::Fetch(own) = woken.answer else {
        panic!("not a fetch");
    };
    assert!(own.head.headers.contains_key("range"), "its own range");
    assert!(!own.plan.background());
}

#[test]
fn followers_of_a_leader_that_fails_are_woken_and_fetch_on_their_own() {
    let world = World::new();
    let mut leader = world.pair(fetch(world.begin(GET, 1)), &[Server::Refuse]);
    for waiter in [2, 3] {
        let begun = world.begin(GET, waiter);
        assert_eq!(
            (answer_line(&begun), begun.count),
            ("park".into(), Count::Coalesced)
        );
    }
    leader.run();
    assert_eq!(leader.client, ["error 502 unfinished=false"]);
    assert_eq!(leader.cache, ["publish"]);
    assert_eq!(leader.woken, [2, 3]);
    let woken = world.after_wait(GET, world.wall, false);
    assert_eq!(answer_line(&woken), "fetch");
    // And a leader whose client went away drops its ticket: abandoned, woken all the same.
    let mut leader = world.pair(fetch(world.begin(GET, 4)), &[Server::Accept]);
    assert_eq!(answer_line(&world.begin(GET, 5)), "park");
    leader.run();
    leader.ex.on_client_gone(leader.now);
    leader.run();
    assert!(leader.cache.is_empty() && leader.ex.detached());
    drop(leader);
    assert_eq!(world.inflight.take_abandoned(), [5]);
}

#[test]
fn a_response_that_may_not_be_stored_passes_and_marks_its_key() {
    let no_store: &[u8] =
        b"HTTP/1.1 200 OK\r\nCache-Control: no-store\r\nContent-Length: 2\r\n\r\nno";
    for pieces in splits(no_store) {
        let world = World::new();
        let mut pair = world.pair(fetch(world.begin(GET, 1)), &[Server::Accept]);
        pair.run();
        pair.origin_sends(&pieces);
        assert_eq!(pair.client[1..], ["data no", "end [] unfinished=false"]);
        assert_eq!(pair.cache, ["publish pass"]);
        let next = world.begin(GET, 2);
        assert_eq!(
            (answer_line(&next), next.count),
            ("fetch".into(), Count::Pass)
        );
    }
}

#[test]
fn a_vary_entry_answers_only_the_requests_it_varies_by() {
    let varied: &[u8] =
        b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nVary: Accept-Language\r\n\
Content-Length: 2\r\n\r\nfr";
    let french = "GET /p HTTP/1.1\r\nHost: x\r\nAccept-Language: fr\r\n\r\n";
    let german = "GET /p HTTP/1.1\r\nHost: x\r\nAccept-Language: de\r\n\r\n";
    for pieces in splits(varied) {
        let world = World::new();
        let mut pair = world.pair(fetch(world.begin(french, 1)), &[Server::Accept]);
        pair.run();
        pair.origin_sends(&pieces);
        assert_eq!(pair.cache, ["stored", "publish"]);
        assert_eq!(answer_line(&world.begin(french, 2)), "serve HIT 200 fr");
        assert_eq!(answer_line(&world.begin(german, 3)), "fetch");
    }
}

#[test]
fn a_method_that_is_not_safe_purges_the_url_only_on_success() {
    let post = "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
    let created: &[u8] = b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
    let failed: &[u8] = b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n";
    for (response, removed) in [(failed, 0), (created, 1)] {
        for pieces in splits(response) {
            let world = stale_world();
            let mut pair = world.unsafe_pair(post, &[Server::Accept]);
            pair.run();
            pair.origin_sends(&pieces);
            assert_eq!(pair.cache, [format!("invalidated {removed}")]);
            assert_eq!(world.store().stats().entries, 1 - removed);
        }
    }
}

#[test]
fn a_purge_during_a_fill_removes_the_old_copy_and_the_fill_stores_the_new_one() {
    let post = "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
    let created: &[u8] = b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
    let (head, body) = V2.split_at(V2.len() - 2);
    let world = stale_world();
    let mut fill = revalidation(&world, &[Server::Accept]);
    assert_eq!(answer_line(&world.begin(GET, 2)), "park");
    fill.origin_sends(&[head]);
    // The stale copy goes while the new one is collected.
    let mut post = world.unsafe_pair(post, &[Server::Accept]);
    post.run();
    post.origin_sends(&[created]);
    assert_eq!(post.cache, ["invalidated 1"]);
    assert_eq!(world.store().stats().entries, 0);
    fill.origin_sends(&[body]);
    assert_eq!(fill.cache, ["stored", "publish"]);
    assert_eq!(fill.woken, [2]);
    let woken = world.after_wait(GET, world.wall, false);
    assert_eq!(answer_line(&woken), "serve HIT 200 v2");
}
