//! The retry decision as a table of the cases that matter, then properties over the whole
//! matrix of inputs, so that no combination slips through the rules in `retry.rs`.

use squall_upstream::{
    ATTEMPTS_CAP, AttemptFailure, NO_SERVER_STATUS, Retry, RetryPolicy, UpstreamErrorClass,
};

use UpstreamErrorClass as E;

const ERRORS: [E; 6] = [
    E::ConnectFailed,
    E::ConnectTimeout,
    E::ResetBeforeResponse,
    E::ClosedBeforeResponse,
    E::ResponseTimeout,
    E::InvalidResponse,
];

/// A failure of the first attempt on a fresh connection, request sent, nothing to the client.
fn failure(error: E, method_idempotent: bool) -> AttemptFailure {
    AttemptFailure {
        error,
        method_idempotent,
        attempts: 1,
        request_sent: true,
        response_started: false,
        connection_reused: false,
    }
}

#[test]
fn the_table() {
    let policy = RetryPolicy::new(3, 3, false);
    let get = |e| failure(e, true);
    let post = |e| failure(e, false);
    let rows: &[(&str, AttemptFailure, Retry)] = &[
        (
            "GET, connect refused",
            AttemptFailure {
                request_sent: false,
                ..get(E::ConnectFailed)
            },
            Retry::OtherServer,
        ),
        (
            "POST, connect refused",
            AttemptFailure {
                request_sent: false,
                ..post(E::ConnectFailed)
            },
            Retry::OtherServer,
        ),
        (
            "POST, connect timeout",
            AttemptFailure {
                request_sent: false,
                ..post(E::ConnectTimeout)
            },
            Retry::OtherServer,
        ),
        (
            "GET, reset after send",
            get(E::ResetBeforeResponse),
            Retry::OtherServer,
        ),
        (
            "POST, reset after send: may have been applied",
            post(E::ResetBeforeResponse),
            Retry::No,
        ),
        (
            "POST, closed before any byte was sent",
            AttemptFailure {
                request_sent: false,
                ..post(E::ClosedBeforeResponse)
            },
            Retry::OtherServer,
        ),
        (
            "GET, stale pooled connection",
            AttemptFailure {
                connection_reused: true,
                ..get(E::ClosedBeforeResponse)
            },
            Retry::SameServer,
        ),
        (
            "POST, stale pooled connection, sent",
            AttemptFailure {
                connection_reused: true,
                ..post(E::ResetBeforeResponse)
            },
            Retry::No,
        ),
        (
            "POST, stale pooled connection, write failed",
            AttemptFailure {
                connection_reused: true,
                request_sent: false,
                ..post(E::ResetBeforeResponse)
            },
            Retry::SameServer,
        ),
        (
            "GET, response timeout, default policy",
            get(E::ResponseTimeout),
            Retry::No,
        ),
        (
            "GET, invalid response",
            get(E::InvalidResponse),
            Retry::OtherServer,
        ),
        (
            "POST, invalid response",
            post(E::InvalidResponse),
            Retry::No,
        ),
        (
            "GET, response already streaming",
            AttemptFailure {
                response_started: true,
                ..get(E::ResetBeforeResponse)
            },
            Retry::No,
        ),
        (
            "GET, third server failed too",
            AttemptFailure {
                attempts: 3,
                ..get(E::ConnectFailed)
            },
            Retry::No,
        ),
        (
            "GET, stale on the last attempt: free",
            AttemptFailure {
                attempts: 3,
                connection_reused: true,
                ..get(E::ResetBeforeResponse)
            },
            Retry::SameServer,
        ),
    ];
    for (what, f, want) in rows {
        assert_eq!(policy.decide(f), *want, "{what}");
        assert_eq!(policy.should_retry(f), *want != Retry::No, "{what}");
    }
}

#[test]
fn response_timeouts_are_retried_only_when_asked_and_only_when_idempotent() {
    let policy = RetryPolicy::new(3, 3, true);
    assert_eq!(
        policy.decide(&failure(E::ResponseTimeout, true)),
        Retry::OtherServer
    );
    assert_eq!(
        policy.decide(&failure(E::ResponseTimeout, false)),
        Retry::No
    );
}

#[test]
fn attempts_are_capped_by_the_cap_and_the_number_of_servers() {
    assert_eq!(RetryPolicy::new(10, 64, false).attempts_max, ATTEMPTS_CAP);
    assert_eq!(RetryPolicy::new(3, 2, false).attempts_max, 2);
    assert_eq!(RetryPolicy::new(3, 1, false).attempts_max, 1);
    assert_eq!(RetryPolicy::new(0, 0, false).attempts_max, 1);
    let single = RetryPolicy::new(3, 1, false);
    let refused = AttemptFailure {
        request_sent: false,
        ..failure(E::ConnectFailed, true)
    };
    assert_eq!(
        single.decide(&refused),
        Retry::No,
        "no other server to fail over to"
    );
}

#[test]
fn properties_over_the_whole_matrix() {
    let bools = [false, true];
    for retry_timeout in bools {
        let policy = RetryPolicy::new(3, 5, retry_timeout);
        for error in ERRORS {
            for bits in 0..16u8 {
                let [idempotent, sent, started, reused] = [1, 2, 4, 8].map(|b| bits & b != 0);
                for attempts in 1..=4 {
                    let f = AttemptFailure {
                        error,
                        method_idempotent: idempotent,
                        attempts,
                        request_sent: sent,
                        response_started: started,
                        connection_reused: reused,
                    };
                    let decision = policy.decide(&f);
                    let connect = matches!(error, E::ConnectFailed | E::ConnectTimeout);
                    if started {
                        assert_eq!(
                            decision,
                            Retry::No,
                            "{f:?}: never after the client got bytes"
                        );
                    }
                    if !idempotent && sent && !connect {
                        assert_eq!(decision, Retry::No, "{f:?}: RFC 9110 §9.2.2");
                    }
                    if decision == Retry::SameServer {
                        assert!(
                            reused,
                            "{f:?}: a free retry only for a stale pooled connection"
                        );
                    }
                    if decision == Retry::OtherServer {
                        assert!(attempts < policy.attempts_max, "{f:?}: bounded");
                    }
                }
            }
        }
    }
}

#[test]
fn statuses_502_and_504() {
    for error in ERRORS {
        let want = if error == E::ResponseTimeout {
            504
        } else {
            502
        };
        assert_eq!(error.status(), want, "{error:?}");
    }
    assert_eq!(NO_SERVER_STATUS, 502);
}
