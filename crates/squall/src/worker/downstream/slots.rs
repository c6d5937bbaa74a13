//! The per-request slots of a client: which session, parked cache request, file transfer or
//! password check a request has, kept in the HTTP/1.1 connection's one slot or its HTTP/2
//! stream's entry ([`Proto`]). The rest of the worker goes through these functions and never asks which
//! protocol a client speaks.

use std::collections::HashMap;
use std::time::Instant;

use squall_h2::StreamId;

use super::super::conn::Conn;
use super::super::ids::Client;
use super::super::ids::FileId;
use super::super::ids::SessionId;
use super::super::session::Sessions;
use crate::worker::downstream::proto::{Proto, Streams};
use crate::worker::parked::Parked;

/// Records that `id` answers `client` (or, with `None`, that it no longer does).
pub(in crate::worker) fn set_session(conn: &mut Conn, client: Client, id: Option<SessionId>) {
    match &mut conn.proto {
        Proto::H1(h1) => h1.exchange = id,
        proto => {
            if let Some(streams) = proto.streams_mut() {
                set_stream(&mut streams.exchanges, client, id);
            }
        }
    }
}

/// Every session answering a client on this connection.
pub(in crate::worker) fn sessions_of(conn: &Conn) -> Vec<SessionId> {
    match &conn.proto {
        Proto::H1(h1) => h1.exchange.into_iter().collect(),
        proto => {
            (proto.streams()).map_or_else(Vec::new, |s| s.exchanges.values().copied().collect())
        }
    }
}

/// What answers a client on a connection: a proxied request's session or a file transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::worker) enum Answering {
    Session(SessionId),
    File(FileId),
}

/// Appends to `out` everything answering a client on this connection, sessions first (an
/// allocation-free [`sessions_of`] and [`files_of`] for the send path).
pub(in crate::worker) fn answering(conn: &Conn, out: &mut Vec<Answering>) {
    match &conn.proto {
        Proto::H1(h1) => {
            out.extend(h1.exchange.map(Answering::Session));
            out.extend(h1.file.map(Answering::File));
        }
        proto => {
            if let Some(streams) = proto.streams() {
                out.extend(streams.exchanges.values().copied().map(Answering::Session));
                out.extend(streams.files.values().copied().map(Answering::File));
            }
        }
    }
}

/// Whether a request on this connection waits on its origin (`Exchange::awaits_origin`): the
/// connection is then not idle, whatever its protocol.
pub(in crate::worker) fn awaits_origin(conn: &Conn, sessions: &Sessions) -> bool {
    let awaits = |id: &SessionId| sessions.get(*id).is_some_and(|s| s.ex.awaits_origin());
    match &conn.proto {
        Proto::H1(h1) => h1.exchange.iter().any(awaits),
        proto => (proto.streams()).is_some_and(|s| s.exchanges.values().any(awaits)),
    }
}

/// Takes the connection's body limit off `client`'s request, which its session bounds instead:
/// an HTTP/2 stream's; an HTTP/1.1 connection's decoder keeps `limits.body_bytes_max`, and an
/// HTTP/3 connection keeps it too.
pub(in crate::worker) fn lift_body_limit(conn: &mut Conn, client: Client) {
    if let (Client::H2(_, stream), Proto::H2(h2)) = (client, &mut conn.proto) {
        h2.conn.lift_body_limit(stream);
    }
}

pub(in crate::worker) fn park(conn: &mut Conn, client: Client, parked: Parked) {
    match (&mut conn.proto, client.stream()) {
        (Proto::H1(h1), None) => h1.parked = Some(Box::new(parked)),
        (proto, Some(stream)) => {
            if let Some(streams) = proto.streams_mut() {
                streams.parked.insert(stream, Box::new(parked));
            }
        }
        _ => debug_assert!(false, "a client of another protocol than its connection's"),
    }
}

pub(in crate::worker) fn take_parked(conn: &mut Conn, client: Client) -> Option<Box<Parked>> {
    match (&mut conn.proto, client.stream()) {
        (Proto::H1(h1), None) => h1.parked.take(),
        (proto, Some(stream)) => proto.streams_mut()?.parked.remove(&stream),
        _ => None,
    }
}

/// The requests on connection `index` whose wait on the cache ends by `now`.
pub(in crate::worker) fn parked_due(conn: &Conn, index: usize, now: Instant) -> Vec<Client> {
    let due = |streams: &Streams| -> Vec<u64> {
        let parked = streams.parked.iter();
        parked
            .filter(|(_, p)| p.until <= now)
            .map(|(&s, _)| s)
            .collect()
    };
    match &conn.proto {
        Proto::H1(h1) if h1.parked.as_ref().is_some_and(|p| p.until <= now) => {
            vec![Client::H1(index)]
        }
        Proto::H2(h2) => (due(&h2.streams).into_iter())
            .filter_map(|stream| Some(Client::H2(index, StreamId::try_from(stream).ok()?)))
            .collect(),
        Proto::H3(h3) => (due(&h3.streams).into_iter())
            .map(|stream| Client::H3(index, stream))
            .collect(),
        _ => Vec::new(),
    }
}

/// Records that transfer `id` answers `client` (or, with `None`, that none does).
pub(in crate::worker) fn set_file(conn: &mut Conn, client: Client, id: Option<FileId>) {
    match &mut conn.proto {
        Proto::H1(h1) => h1.file = id,
        proto => {
            if let Some(streams) = proto.streams_mut() {
                set_stream(&mut streams.files, client, id);
            }
        }
    }
}

/// Every file transfer answering a client on this connection.
pub(in crate::worker) fn files_of(conn: &Conn) -> Vec<FileId> {
    match &conn.proto {
        Proto::H1(h1) => h1.file.into_iter().collect(),
        proto => (proto.streams()).map_or_else(Vec::new, |s| s.files.values().copied().collect()),
    }
}

/// Marks that `client`'s request waits for a password check (`on`), or no longer does. An
/// HTTP/1.1 connection reads nothing more meanwhile; an HTTP/2 connection counts its waiting
/// streams (it is not idle while one waits).
pub(in crate::worker) fn set_verifying(conn: &mut Conn, on: bool) {
    match &mut conn.proto {
        Proto::H1(h1) => h1.verifying = on,
        proto => {
            if let Some(streams) = proto.streams_mut() {
                streams.verifying = match on {
                    true => streams.verifying + 1,
                    false => streams.verifying.saturating_sub(1),
                };
            }
        }
    }
}

/// The bytes an HTTP/2 tunnel's stream sent before its origin said yes (none on HTTP/1.1,
/// whose early bytes wait in the connection's receive buffer).
pub(in crate::worker) fn take_early(
    conn: &mut Conn,
    client: Client,
) -> Option<Vec<(bytes::Bytes, bool)>> {
    let stream = client.stream()?;
    conn.proto.streams_mut()?.early.remove(&stream)
}

/// The session of an HTTP/1.1 connection (whose received bytes may be its tunnel's); `None`
/// for an HTTP/2 connection, whose tunnels are streams.
pub(in crate::worker) fn h1_session(conn: &Conn) -> Option<SessionId> {
    conn.proto.h1().and_then(|h1| h1.exchange)
}

/// Sets (or, with `None`, clears) `client`'s entry in an HTTP/2 connection's map.
fn set_stream<T>(streams: &mut HashMap<u64, T>, client: Client, value: Option<T>) {
    let Some(stream) = client.stream() else {
        debug_assert!(false, "an HTTP/1.1 client on an HTTP/2 connection");
        return;
    };
    match value {
        Some(value) => streams.insert(stream, value),
        None => streams.remove(&stream),
    };
}
