//! SIGHUP: a valid file replaces the routes for new requests without dropping connections; an
//! invalid one is refused, logged, and the running config stays.

use std::time::Duration;

use squall_e2e::{Squall, hello_config, roundtrip};

#[test]
fn sighup_swaps_routes_and_keeps_connections() {
    let squall = Squall::start(&hello_config(""));
    let mut kept = squall.connect();
    assert_eq!(
        roundtrip(&mut kept, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").body_text(),
        "A"
    );

    let changed = hello_config("").replace("body = \"A\"", "body = \"A2\"");
    squall.rewrite_config(&changed);
    squall.signal(libc::SIGHUP);
    assert!(
        squall.wait_log("configuration reloaded", 1, Duration::from_secs(5)),
        "{}",
        squall.log()
    );
    // The connection opened before the reload is still open and sees the new route.
    assert_eq!(
        roundtrip(&mut kept, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").body_text(),
        "A2"
    );

    squall.rewrite_config("[server]\nworkerz = 1\n");
    squall.signal(libc::SIGHUP);
    assert!(
        squall.wait_log("reload refused", 1, Duration::from_secs(5)),
        "{}",
        squall.log()
    );
    assert!(
        squall.log().contains(":2:1: "),
        "errors name their line: {}",
        squall.log()
    );
    let mut fresh = squall.connect();
    assert_eq!(
        roundtrip(&mut fresh, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n").body_text(),
        "A2"
    );
    assert_eq!(
        roundtrip(&mut kept, "GET /b HTTP/1.1\r\nHost: x\r\n\r\n").body_text(),
        "B"
    );
}
