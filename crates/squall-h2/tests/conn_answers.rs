//! How answers leave: a small last DATA piece framed at once behind its head, and a fixed
//! answer's fields sent through the HPACK table as indices after the first.

mod conn_support;

use bytes::{Bytes, BytesMut};
use conn_support::*;
use squall_h2::{ServerConfig, SettingId, StreamId};

/// A connection that received GETs on streams 1, 3, … up to `last`; and its client.
fn answering(last: StreamId) -> (Harness, Client) {
    let mut harness = Harness::new(ServerConfig::default());
    let mut client = Client::new();
    for id in (1..=last).step_by(2) {
        client.get(id, "/");
    }
    harness.feed(&client.take(), &no_app);
    harness.flush();
    (harness, client)
}

/// A small last piece is framed when it is sent, within the window of then: it leaves ahead
/// of the SETTINGS ACK, so the peer sees it sent under its old setting (RFC 9113 §6.9.2 lets
/// the stream's window go below zero).
#[test]
fn a_small_last_piece_leaves_under_the_settings_it_was_sent_with() {
    let (mut harness, mut client) = answering(1);
    harness.conn.send_headers(1, 200, [], false).unwrap();
    (harness
        .conn
        .send_data(1, Bytes::from(vec![0u8; 1000]), true))
    .unwrap();
    client.settings(&[(SettingId::InitialWindowSize, 0)]);
    harness.feed(&client.take(), &no_app);
    let out = harness.flush();
    let data = out.iter().position(|o| {
        matches!(
            o,
            Out::Data {
                end_stream: true,
                ..
            }
        )
    });
    let ack = out.iter().position(|o| matches!(o, Out::SettingsAck));
    assert!(data.is_some() && data < ack, "{out:?}");
}

/// Sends a fixed answer with `date` on stream `id`; the bytes its HEADERS took.
fn send_fixed(harness: &mut Harness, id: StreamId, date: &str) -> usize {
    let fields = [
        ("content-type", "text/plain"),
        ("server", "squall"),
        ("content-length", "5"),
        ("date", date),
    ];
    let fields = fields.map(|(n, v)| (n.as_bytes(), v.as_bytes()));
    let mut key = BytesMut::new();
    squall_hpack::encode_static(fields, &mut key);
    let before = harness.conn.encoded_bytes();
    let fixed = (&[&key[..]][..], fields);
    (harness.conn.send_headers_fixed(id, 200, fixed, [], true)).unwrap();
    harness.conn.encoded_bytes() - before
}

/// The decoded fields of each HEADERS in `out`.
fn heads(out: &[Out]) -> Vec<Vec<(String, String)>> {
    (out.iter())
        .filter_map(|o| match o {
            Out::Headers { fields, .. } => Some(fields.clone()),
            _ => None,
        })
        .collect()
}

/// The first fixed answer inserts its fields; the next ones name each by index (9 bytes of
/// frame header, `:status` and four indices), copied while the table is unchanged; a new
/// date is inserted once; the block given back by an idle connection is made again of
/// indices; and every answer decodes to its own fields.
#[test]
fn fixed_answers_are_sent_as_indices_after_the_first() {
    let (mut harness, _client) = answering(13);
    let dates = ["date 1", "date 1", "date 1", "date 2", "date 2", "date 1"];
    let sizes: Vec<usize> = (dates.iter().enumerate())
        .map(|(i, date)| send_fixed(&mut harness, 2 * i as StreamId + 1, date))
        .collect();
    let indices = 9 + 1 + 4;
    assert!(sizes[0] > indices + 15, "{sizes:?}");
    assert_eq!(sizes[1..3], [indices, indices], "{sizes:?}");
    // The new date is one literal among indices; then indices again. The old date is still
    // in the table.
    assert!(sizes[3] > indices && sizes[3] < sizes[0], "{sizes:?}");
    assert_eq!(sizes[4..], [indices, indices], "{sizes:?}");
    let out = harness.flush();
    // An idle connection gives the kept block back; the next fixed answer makes it again
    // of the indices still in the table.
    harness.conn.shrink_idle();
    assert_eq!(send_fixed(&mut harness, 13, "date 1"), indices);
    let heads = heads(&[out, harness.flush()].concat());
    assert_eq!(heads.len(), dates.len() + 1);
    for (head, date) in heads.iter().zip(dates.iter().chain(&["date 1"])) {
        assert_eq!(head, &expected_head(date));
    }
}

/// The fields a client decodes from [`send_fixed`]'s answer with `date`.
fn expected_head(date: &str) -> Vec<(String, String)> {
    let expected = [
        (":status", "200"),
        ("content-type", "text/plain"),
        ("server", "squall"),
        ("content-length", "5"),
        ("date", date),
    ];
    expected.map(|(n, v)| (n.into(), v.into())).to_vec()
}

/// A peer that allows no table gets literals, sent alike each time; the size update comes
/// first in the block after its SETTINGS, and every answer still decodes.
#[test]
fn fixed_answers_follow_the_peers_table_size() {
    let (mut harness, mut client) = answering(7);
    let first = send_fixed(&mut harness, 1, "d");
    client.settings(&[(SettingId::HeaderTableSize, 0)]);
    harness.feed(&client.take(), &no_app);
    let sizes = [3, 5, 7].map(|id| send_fixed(&mut harness, id, "d"));
    // Literals, a byte longer than the first's where a name's index needs a longer prefix;
    // one byte more in the first block after the SETTINGS: the size update to 0.
    assert!(sizes[1] > first, "{first} {sizes:?}");
    assert_eq!(sizes, [sizes[1] + 1, sizes[1], sizes[1]]);
    let heads = heads(&harness.flush());
    assert_eq!(heads.len(), 4);
    assert!(heads.windows(2).all(|w| w[0] == w[1]), "{heads:?}");
    assert_eq!(heads[0], expected_head("d"));
}
