//! The per-request slots of a client: which session, parked cache request, file transfer or
//! password check a request has, kept in the HTTP/1.1 connection's one slot or its HTTP/2
//! stream's entry. The rest of the worker goes through these functions and never asks which
//! protocol a client speaks.

use std::collections::HashMap;
use std::time::Instant;

use slab::Slab;
use squall_h2::StreamId;

use super::super::cache::Parked;
use super::super::conn::Conn;
use super::super::files::FileId;
use super::super::session::{Session, SessionId};
use super::Client;

/// Records that `id` answers `client` (or, with `None`, that it no longer does).
pub(in crate::worker) fn set_session(conn: &mut Conn, client: Client, id: Option<SessionId>) {
    let streams = conn.h2.as_mut().map(|h2| &mut h2.exchanges);
    set_slot(&mut conn.exchange, streams, client, id);
}

/// Every session answering a client on this connection.
pub(in crate::worker) fn sessions_of(conn: &Conn) -> Vec<SessionId> {
    every(conn.exchange, conn.h2.as_ref().map(|h2| &h2.exchanges))
}

/// Whether a request on this connection waits on its origin (`Exchange::awaits_origin`): the
/// connection is then not idle, whatever its protocol.
pub(in crate::worker) fn awaits_origin(conn: &Conn, sessions: &Slab<Session>) -> bool {
    let streams = conn.h2.as_ref().map(|h2| h2.exchanges.values());
    let mut ids = conn.exchange.iter().chain(streams.into_iter().flatten());
    ids.any(|id| (sessions.get(id.index)).is_some_and(|s| s.is(*id) && s.ex.awaits_origin()))
}

/// Takes the connection's body limit off `client`'s request, which its session bounds instead:
/// an HTTP/2 stream's; an HTTP/1.1 connection's decoder keeps `limits.body_bytes_max`.
pub(in crate::worker) fn lift_body_limit(conn: &mut Conn, client: Client) {
    if let (Client::H2(_, stream), Some(h2)) = (client, conn.h2.as_mut()) {
        h2.conn.lift_body_limit(stream);
    }
}

pub(in crate::worker) fn park(conn: &mut Conn, client: Client, parked: Parked) {
    match client {
        Client::H1(_) => conn.parked = Some(Box::new(parked)),
        Client::H2(_, stream) => {
            if let Some(h2) = conn.h2.as_mut() {
                h2.parked.insert(stream, Box::new(parked));
            }
        }
    }
}

pub(in crate::worker) fn take_parked(conn: &mut Conn, client: Client) -> Option<Box<Parked>> {
    match client {
        Client::H1(_) => conn.parked.take(),
        Client::H2(_, stream) => conn.h2.as_mut()?.parked.remove(&stream),
    }
}

/// The requests on connection `index` whose wait on the cache ends by `now`.
pub(in crate::worker) fn parked_due(conn: &Conn, index: usize, now: Instant) -> Vec<Client> {
    let mut due = Vec::new();
    if conn.parked.as_ref().is_some_and(|p| p.until <= now) {
        due.push(Client::H1(index));
    }
    if let Some(h2) = &conn.h2 {
        let streams = h2.parked.iter().filter(|(_, p)| p.until <= now);
        due.extend(streams.map(|(stream, _)| Client::H2(index, *stream)));
    }
    due
}

/// Records that transfer `id` answers `client` (or, with `None`, that none does).
pub(in crate::worker) fn set_file(conn: &mut Conn, client: Client, id: Option<FileId>) {
    let streams = conn.h2.as_mut().map(|h2| &mut h2.files);
    set_slot(&mut conn.file, streams, client, id);
}

/// Every file transfer answering a client on this connection.
pub(in crate::worker) fn files_of(conn: &Conn) -> Vec<FileId> {
    every(conn.file, conn.h2.as_ref().map(|h2| &h2.files))
}

/// Marks that `client`'s request waits for a password check (`on`), or no longer does. An
/// HTTP/1.1 connection reads nothing more meanwhile; an HTTP/2 connection counts its waiting
/// streams (it is not idle while one waits).
pub(in crate::worker) fn set_verifying(conn: &mut Conn, client: Client, on: bool) {
    match client {
        Client::H1(_) => conn.verifying = on,
        Client::H2(..) => {
            if let Some(h2) = conn.h2.as_mut() {
                h2.verifying = match on {
                    true => h2.verifying + 1,
                    false => h2.verifying.saturating_sub(1),
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
    match client {
        Client::H2(_, stream) => conn.h2.as_mut()?.early.remove(&stream),
        Client::H1(_) => None,
    }
}

/// The session of an HTTP/1.1 connection (whose received bytes may be its tunnel's); `None`
/// for an HTTP/2 connection, whose tunnels are streams.
pub(in crate::worker) fn h1_session(conn: &Conn) -> Option<SessionId> {
    conn.exchange.filter(|_| conn.h2.is_none())
}

/// Sets (or, with `None`, clears) `client`'s entry: the HTTP/1.1 connection's one slot, or
/// its stream's entry in the HTTP/2 connection's map.
fn set_slot<T>(
    one: &mut Option<T>,
    streams: Option<&mut HashMap<StreamId, T>>,
    client: Client,
    value: Option<T>,
) {
    match (client, streams) {
        (Client::H1(_), _) => *one = value,
        (Client::H2(_, stream), Some(streams)) => {
            match value {
                Some(value) => streams.insert(stream, value),
                None => streams.remove(&stream),
            };
        }
        (Client::H2(..), None) => {}
    }
}

/// The HTTP/1.1 slot's value and every stream's.
fn every<T: Copy>(one: Option<T>, streams: Option<&HashMap<StreamId, T>>) -> Vec<T> {
    let streams = streams.map(|s| s.values().copied());
    one.into_iter()
        .chain(streams.into_iter().flatten())
        .collect()
}
