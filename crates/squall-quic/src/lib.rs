//! squall-quic: QUIC for Squall's HTTP/3, sans-IO.
//!
//! The transport is quinn-proto's (QUIC v1, RFC 9000, 9001, 9002: packets, TLS 1.3 inside
//! QUIC through rustls, loss recovery, congestion control, flow control, migration); the
//! HTTP/3 on top is `squall-h3`'s. This crate is the glue a Squall worker drives: like the
//! rest of the request path it takes datagrams and `now` and returns datagrams and events,
//! and touches no socket, no clock and no thread.
//!
//! - [`Endpoint`]: one worker's QUIC endpoint on one listener. It turns a received datagram
//!   into a packet for a connection, a new connection, an answer of its own (version
//!   negotiation, Retry, stateless reset), or a packet for another worker
//!   ([`Received::Misrouted`]). Its connection IDs name the worker ([`cid`]), so a
//!   reuseport BPF program can steer each packet to its owner.
//! - [`Conn`]: one connection, QUIC and HTTP/3 together: request events out of
//!   [`Conn::h3`], responses written into it, bytes moved between the two by [`Conn::drive`],
//!   datagrams out of [`Conn::transmit`].
//!
//! Address validation: with [`Retry::Load`], new clients are asked to retry (a round trip
//! more, and no state kept for them) only while the endpoint has more handshakes in progress
//! than its bound, which is when spoofed Initial floods cost most; QUIC's amplification limit
//! (three times the bytes received from an unvalidated address) holds either way.

#![forbid(unsafe_code)]

pub mod cid;
mod conn;
mod endpoint;

pub use cid::{CID_BYTES, WorkerCids};
pub use conn::{CLIENT_UNI_STREAMS, Conn, Ended, Progress};
pub use endpoint::{
    BadTls, Endpoint, EndpointStats, Outgoing, Received, Retry, Settings, SharedKeys,
};
pub use quinn_proto::{ConnectionEvent, ConnectionHandle, EndpointEvent};
