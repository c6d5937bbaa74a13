//! What a connection shares between requests: the chunk that header blocks are decoded into,
//! and the queue of requests not yet polled. A request must never see anything of an earlier
//! one through them, nor of a stream closed before it opened.

mod conn_support;

use bytes::Bytes;
use conn_support::*;
use squall_h2::{ErrorCode, Event, ServerConfig, SettingId};

fn paths(events: &[Event]) -> Vec<(u32, String)> {
    (events.iter())
        .filter_map(|event| match event {
            Event::Request { stream_id, request } => Some((
                *stream_id,
                String::from_utf8_lossy(&request.path).into_owned(),
            )),
            _ => None,
        })
        .collect()
}

fn data_of(out: &[Out], id: u32) -> Vec<u8> {
    (out.iter())
        .filter_map(|o| match o {
            Out::Data {
                stream_id, data, ..
            } if *stream_id == id => Some(&data[..]),
            _ => None,
        })
        .flatten()
        .copied()
        .collect()
}

#[test]
fn a_request_reset_before_it_is_polled_leaves_the_others_in_order() {
    let mut client = Client::new();
    client
        .get(1, "/a")
        .get(3, "/b")
        .get(5, "/c")
        .rst(3, ErrorCode::Cancel)
        .get(7, "/d");
    let outcome = run_all_splits(&ServerConfig::default(), &client.take(), &no_app);
    assert_eq!(
        paths(&outcome.events),
        [(1, "/a".into()), (5, "/c".into()), (7, "/d".into())]
    );
}

#[test]
fn requests_on_one_connection_keep_their_own_heads() {
    let mut harness = Harness::new(ServerConfig::default());
    let mut client = Client::new();
    let mut expected = Vec::new();
    // Heads of many sizes, so that the decoded bytes fill the shared chunk, overflow it and
    // move to a new one; every request is answered and closed before the next batch.
    for batch in 0..20u32 {
        let mut held = Vec::new();
        for i in 0..5u32 {
            let id = 1 + 2 * (batch * 5 + i);
            let path = format!(
                "/{batch}/{i}/{}",
                "x".repeat((batch * 97 + i * 31) as usize % 700)
            );
            client.get(id, &path);
            expected.push((id, path));
            held.push(id);
        }
        harness.feed(&client.take(), &no_app);
        for id in held {
            harness.conn.send_headers(id, 200, [], true).unwrap();
        }
        harness.flush();
        if batch % 3 == 0 {
            harness.conn.shrink_idle();
        }
    }
    assert_eq!(paths(&harness.events), expected);
    assert!(harness.conn.is_idle());
}

#[test]
fn a_stream_opened_after_a_reset_one_sends_only_its_own_data() {
    let mut harness = Harness::new(ServerConfig::default());
    let mut client = Client::new();
    // No stream window: stream 1's answer stays queued until the client resets it.
    client
        .settings(&[(SettingId::InitialWindowSize, 0)])
        .post(1, "/", Some(3))
        .data(1, b"abc", true);
    harness.feed(&client.take(), &no_app);
    harness.conn.send_headers(1, 200, [], false).unwrap();
    (harness.conn)
        .send_data(1, Bytes::from(vec![b'x'; 500]), true)
        .unwrap();
    harness.flush();
    client.rst(1, ErrorCode::Cancel).get(3, "/next");
    harness.feed(&client.take(), &no_app);
    harness.conn.send_headers(3, 200, [], false).unwrap();
    (harness.conn)
        .send_data(3, Bytes::from(vec![b'y'; 100]), true)
        .unwrap();
    client.settings(&[(SettingId::InitialWindowSize, 65_535)]);
    harness.feed(&client.take(), &no_app);
    let out = harness.flush();
    assert_eq!(data_of(&out, 3), vec![b'y'; 100], "{out:?}");
    assert!(data_of(&out, 1).is_empty(), "{out:?}");
    // Stream 3's request is its own: no body, and no content-length from stream 1's.
    let Some(Event::Request { request, .. }) = harness.events.last() else {
        panic!("{:?}", harness.events);
    };
    assert!(request.end_stream && request.content_length.is_none());
    assert!(harness.conn.is_idle(), "{out:?}");
}
