//! The block of a fixed response's fields, kept for the next one.
//!
//! A fixed answer (`respond` routes, error pages) sends the same fields on every stream, and
//! a `date` that changes once a second. Encoded through the connection's HPACK table with
//! each field indexed ([`Encoder::encode_repeated`]), they cost their literals once and one
//! byte each after. The block of indices is kept here and copied for the next answer with
//! the same fields while the table has not changed ([`Encoder::changes`]): the same bytes
//! then mean the same fields, and no field is looked up again.

use bytes::BytesMut;
use squall_hpack::Encoder;

/// The last fixed fields' block of indices.
#[derive(Debug, Default)]
pub(super) struct FixedBlock {
    /// The fields' static encoding (what identifies them), then the block.
    bytes: Vec<u8>,
    /// Where the block starts in `bytes`.
    key_len: usize,
    /// The encoder's change count the block was made at; `None` while nothing is kept.
    changes: Option<u64>,
}

impl FixedBlock {
    /// Appends `fields` to `out` through `hpack`, each indexed. `key` is their static
    /// encoding (`squall_hpack::encode_static`, in pieces), which identifies them.
    pub(super) fn encode<'a>(
        &mut self,
        hpack: &mut Encoder,
        key: &[&[u8]],
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        out: &mut BytesMut,
    ) {
        if self.changes == Some(hpack.changes()) && self.is_for(key) {
            out.extend_from_slice(&self.bytes[self.key_len..]);
            return;
        }
        let (start, before) = (out.len(), hpack.changes());
        hpack.encode_repeated(fields, out);
        // A block that added entries holds literals the peer must not insert twice: kept is
        // the next one, all indices, which changes nothing.
        if hpack.changes() != before {
            self.changes = None;
            return;
        }
        self.bytes.clear();
        for piece in key {
            self.bytes.extend_from_slice(piece);
        }
        self.key_len = self.bytes.len();
        self.bytes.extend_from_slice(&out[start..]);
        self.changes = Some(before);
    }

    /// Whether the kept block is for the fields `key` encodes.
    fn is_for(&self, key: &[&[u8]]) -> bool {
        let mut rest = &self.bytes[..self.key_len];
        for piece in key {
            match rest.strip_prefix(*piece) {
                Some(after) => rest = after,
                None => return false,
            }
        }
        rest.is_empty()
    }
}
