//! The exchange when things go wrong: stale pooled connections, refused connects, a group
//! with nothing to give, slow origins, origins and clients leaving mid-body.

mod exchange_support;

use std::time::Duration;

use exchange_support::{CONNECT_TIMEOUT, Pair, READ_TIMEOUT, RESPONSE_TIMEOUT, Server, splits};
use squall_upstream::{Outcome, UpstreamErrorClass as E};

const GET: &str = "GET /p/x HTTP/1.1\r\nHost: x\r\n\r\n";
const POST: &str = "POST /p/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n";
const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

#[test]
fn a_get_on_a_pooled_connection_the_origin_had_closed_is_retried_on_a_fresh_one() {
    let mut pair = Pair::new(GET, &[Server::Accept]);
    pair.pool = vec![0];
    pair.run();
    assert!(pair.conns[0].reused);
    pair.origin_eof();
    // Same server, fresh connection, same pick: no report yet, no second pick.
    assert_eq!(pair.conns.len(), 2);
    assert_eq!(pair.conns[0].released, Some(false));
    assert!(!pair.conns[1].reused && pair.conns[1].server == 0);
    assert_eq!(pair.written(1), pair.written(0), "the same request again");
    assert!(pair.reports.is_empty() && pair.ex.tried().len() == 1);
    pair.origin_sends(&[OK]);
    assert_eq!(
        pair.client[0],
        "head 200 len=Some(2) Length(2) keep_alive=true []"
    );
    assert_eq!(pair.reports, [(0, Outcome::Success, None)]);
}

#[test]
fn a_post_on_a_pooled_connection_the_origin_had_closed_is_answered_502() {
    let mut pair = Pair::new(POST, &[Server::Accept, Server::Accept]);
    pair.pool = vec![0];
    pair.run();
    pair.client_sends(&[b"hi"]);
    pair.ex.on_client_end(None);
    pair.run();
    assert!(pair.written(0).ends_with("\r\n\r\nhi"));
    pair.origin_eof();
    // RFC 9110 §9.2.2: it may have been applied; never replayed, not even elsewhere.
    assert_eq!(pair.conns.len(), 1);
    assert_eq!(pair.client, ["error 502 unfinished=false"]);
    assert_eq!(
        pair.reports,
        [(0, Outcome::Neutral, Some(E::ClosedBeforeResponse))]
    );
    assert_eq!(pair.conns[0].released, Some(false));
    assert!(pair.ex.is_finished());
}

#[test]
fn a_refused_connect_fails_over_to_the_next_server() {
    let mut pair = Pair::new(POST, &[Server::Refuse, Server::Accept]);
    pair.client_sends(&[b"h"]);
    pair.run();
    assert_eq!(pair.conns.len(), 2);
    assert_eq!(pair.conns[0].released, Some(false));
    assert!(
        pair.conns[0].written.is_empty(),
        "nothing reached the refusing server"
    );
    assert_eq!(
        pair.reports,
        [(0, Outcome::Failure, Some(E::ConnectFailed))]
    );
    // Even a POST moves on: no byte of it reached anyone. Its body waited and goes now.
    assert!(
        pair.written(1).ends_with("\r\n\r\nh"),
        "{}",
        pair.written(1)
    );
    pair.client_sends(&[b"i"]);
    pair.ex.on_client_end(None);
    pair.run();
    assert!(pair.written(1).ends_with("\r\n\r\nhi"));
    pair.origin_sends(&[OK]);
    assert_eq!(
        pair.client.last().map(String::as_str),
        Some("end [] unfinished=false")
    );
    assert_eq!(pair.reports[1], (1, Outcome::Success, None));
    assert_eq!(pair.body_consumed, 2);
}

#[test]
fn all_servers_down_or_refusing_is_a_502() {
    // The balancer gives nothing: 502 at once, no connection, no report.
    let mut pair = Pair::new(GET, &[Server::Down, Server::Down]);
    pair.run();
    assert_eq!(pair.client, ["error 502 unfinished=false"]);
    assert!(pair.conns.is_empty() && pair.reports.is_empty());
    // Every server refuses: each is tried once (attempts capped by the group), then 502.
    let mut pair = Pair::new(GET, &[Server::Refuse, Server::Refuse, Server::Refuse]);
    pair.run();
    assert_eq!(pair.conns.len(), 3);
    assert_eq!(pair.client, ["error 502 unfinished=false"]);
    assert_eq!(pair.reports.len(), 3);
    // A request whose body is still coming gets its error with the connection closing.
    let mut pair = Pair::new(POST, &[Server::Refuse]);
    pair.run();
    assert_eq!(pair.client, ["error 502 unfinished=true"]);
}

#[test]
fn a_slow_origin_is_answered_504_after_the_response_timeout() {
    let mut pair = Pair::new(GET, &[Server::Accept, Server::Accept]);
    pair.run();
    pair.advance(RESPONSE_TIMEOUT - Duration::from_millis(1));
    assert!(pair.client.is_empty(), "not before the timeout");
    // Bytes of a head are life: the silence starts again.
    pair.origin_sends(&[b"HTTP/1.1 2"]);
    pair.advance(RESPONSE_TIMEOUT - Duration::from_millis(1));
    assert!(pair.client.is_empty());
    pair.advance(Duration::from_millis(1));
    // Not retried (retry_response_timeout is off): a slow origin is slow everywhere.
    assert_eq!(pair.client, ["error 504 unfinished=false"]);
    assert_eq!(
        pair.reports,
        [(0, Outcome::Failure, Some(E::ResponseTimeout))]
    );
    assert_eq!((pair.conns.len(), pair.conns[0].released), (1, Some(false)));
}

/// The head's timeout covers the wait for the head; once it arrived, the origin's silence is
/// bounded by the read timeout (the route's `read_timeout`), here longer: a stream that pauses
/// between messages longer than the head may take is not cut.
#[test]
fn after_the_head_the_read_timeout_bounds_the_origins_silence() {
    let mut pair = Pair::new(GET, &[Server::Accept]);
    pair.run();
    pair.origin_sends(&[b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhel"]);
    assert_eq!(pair.ex.next_deadline(), Some(pair.now + READ_TIMEOUT));
    pair.advance(READ_TIMEOUT - Duration::from_millis(1));
    assert_eq!(pair.client.len(), 2, "not cut at the head's timeout");
    // A body byte is life: the silence starts again.
    pair.origin_sends(&[b"lo"]);
    pair.advance(READ_TIMEOUT - Duration::from_millis(1));
    assert_eq!(pair.client.len(), 2);
    pair.advance(Duration::from_millis(1));
    assert_eq!(pair.client.last().map(String::as_str), Some("abort"));
    assert_eq!(
        pair.reports,
        [(0, Outcome::Failure, Some(E::ResponseTimeout))]
    );
    assert_eq!(
        pair.ex.failure(),
        Some(E::ResponseTimeout),
        "the cut's cause"
    );
    assert_eq!(pair.conns[0].released, Some(false));
}

#[test]
fn a_connect_that_hangs_fails_over_after_the_connect_timeout() {
    let mut pair = Pair::new(GET, &[Server::Hang, Server::Accept]);
    pair.run();
    assert_eq!(
        pair.ex.next_deadline(),
        Some(pair.ex.started() + CONNECT_TIMEOUT)
    );
    pair.advance(CONNECT_TIMEOUT);
    assert_eq!(
        pair.reports,
        [(0, Outcome::Failure, Some(E::ConnectTimeout))]
    );
    assert_eq!(
        pair.conns[0].released,
        Some(false),
        "the connect is cancelled"
    );
    assert_eq!(pair.conns[1].server, 1);
    pair.origin_sends(&[OK]);
    assert_eq!(pair.client.len(), 3);
    // The only server hangs: 502 (the origin is unreachable, not slow).
    let mut pair = Pair::new(GET, &[Server::Hang]);
    pair.run();
    pair.advance(CONNECT_TIMEOUT);
    assert_eq!(pair.client, ["error 502 unfinished=false"]);
}

#[test]
fn an_origin_dying_mid_body_cuts_the_client_and_is_not_reused() {
    let response = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello";
    for pieces in splits(response) {
        let mut pair = Pair::new(GET, &[Server::Accept, Server::Accept]);
        pair.run();
        pair.origin_sends(&pieces);
        pair.origin_eof();
        assert_eq!(
            pair.client,
            [
                "head 200 len=Some(10) Length(10) keep_alive=true []",
                "data hello",
                "abort"
            ]
        );
        assert_eq!(pair.conns.len(), 1, "never retried once the head went out");
        assert_eq!(pair.conns[0].released, Some(false));
        assert_eq!(
            pair.reports,
            [(0, Outcome::Failure, Some(E::InvalidResponse))]
        );
    }
    // A reset instead of a close: the same cut.
    let mut pair = Pair::new(GET, &[Server::Accept]);
    pair.run();
    pair.origin_sends(&[response]);
    pair.ex.on_origin_error(pair.now);
    pair.run();
    assert_eq!(pair.client.last().map(String::as_str), Some("abort"));
    assert_eq!(pair.conns[0].released, Some(false));
}

#[test]
fn garbage_from_a_fresh_origin_is_retried_elsewhere_for_a_get() {
    let mut pair = Pair::new(GET, &[Server::Accept, Server::Accept]);
    pair.run();
    pair.origin_sends(&[b"<html>"]);
    assert_eq!(
        pair.reports,
        [(0, Outcome::Failure, Some(E::InvalidResponse))]
    );
    assert_eq!(pair.conns[1].server, 1);
    pair.origin_sends(&[OK]);
    assert_eq!(
        pair.client.last().map(String::as_str),
        Some("end [] unfinished=false")
    );
}

#[test]
fn a_client_leaving_mid_body_releases_the_origin_unreusable() {
    let mut pair = Pair::new(GET, &[Server::Accept]);
    pair.run();
    pair.origin_sends(&[b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhel"]);
    pair.ex.on_client_gone(pair.now);
    pair.run();
    assert_eq!(pair.conns[0].released, Some(false));
    assert_eq!(pair.reports, [(0, Outcome::Neutral, None)]);
    assert!(pair.ex.is_finished() && pair.ex.next_deadline().is_none());
    // Whatever the origin still sends is ignored.
    pair.origin_sends(&[b"lo"]);
    assert_eq!(pair.client.len(), 2);
}
