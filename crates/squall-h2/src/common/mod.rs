//! Pieces both roles share: the server [`crate::Connection`] (`conn/`) and the
//! [`crate::ClientConnection`] (`client/`) receive body, assemble header blocks and send
//! DATA the same way; each piece is written once here.
//!
//! - `inbox.rs`: a stream's received body waiting for the application.

pub(crate) mod inbox;
