//! Pieces both roles share: the server [`crate::Connection`] (`conn/`) and the
//! [`crate::ClientConnection`] (`client/`) receive body, assemble header blocks, send
//! DATA and exchange SETTINGS the same way; each piece is written once here.
//!
//! - `block.rs`: a header block's HEADERS and CONTINUATION fragments, joined.
//! - `block_encoder.rs`: our HPACK encoder, for outgoing header blocks.
//! - `inbox.rs`: a stream's received body waiting for the application.
//! - `length.rs`: a received body against its content-length.
//! - `order.rs`: where a frame may come: SETTINGS first, nothing inside a header block.
//! - `send.rs`: a stream's send half: queued DATA, send window, END_STREAM or trailers.
//! - `settings.rs`: the SETTINGS exchange: the peer's values and ours, the HPACK state
//!   they size, and what applying one or acknowledging ours changes.
//! - `window.rs`: receive window given back to the peer in WINDOW_UPDATEs; the
//!   connection's receive window.

pub(crate) mod block;
pub(crate) mod block_encoder;
pub(crate) mod inbox;
pub(crate) mod length;
pub(crate) mod order;
pub(crate) mod send;
pub(crate) mod settings;
pub(crate) mod window;
