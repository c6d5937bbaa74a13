//! The worker's vocabulary: the names one part gives another for what it owns (a session, a
//! file transfer, a client, a request waiting for a descriptor). A leaf: it imports no other
//! part of the worker, so every part can name these without importing its owner.

use squall_h2::StreamId;

use super::token::Token;

/// A session's slot and the occupant of that slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SessionId {
    pub index: usize,
    pub generation: u32,
}

/// A transfer's slot and the occupant of that slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    pub index: usize,
    pub generation: u32,
}

/// A request waiting for a descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiter {
    /// A proxied request, before its first pick.
    Session(SessionId),
    /// A static file transfer, before its open.
    File(FileId),
}

/// Whom an answer goes to: an HTTP/1.x connection, or one stream of an HTTP/2 or HTTP/3
/// connection (HTTP/3's streams are QUIC stream ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    H1(usize),
    H2(usize, StreamId),
    H3(usize, u64),
}

/// A [`Client`] as something that outlives a turn of the loop remembers it (a request parked
/// on the cache, possibly on another worker): with the connection's generation, so that a
/// slot freed and reused is never mistaken for the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientToken {
    pub token: Token,
    pub client: Client,
}

/// The `X-Cache` label of a response (the access log's cache field).
pub type Label = squall_cache::Served;
