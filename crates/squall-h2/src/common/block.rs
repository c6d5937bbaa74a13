//! A header block being assembled: a HEADERS fragment and the CONTINUATION fragments that
//! follow it (RFC 9113 §6.2, §6.10), until END_HEADERS. A fragment is appended only within
//! a bound on the frames and the bytes, each role's own; over it, each role ends the
//! connection its own way (a flood for the server).

use bytes::{Bytes, BytesMut};

/// The most bytes one header block (HEADERS and its CONTINUATIONs) may carry, for a list
/// limit and a frame size of ours: a compressed block is about as long as the list it
/// decodes to, so twice the list limit is slack for any honest encoder, and one frame
/// always fits. Beyond it the server counts a flood; the client gives up.
pub(crate) fn block_bytes_max(max_header_list_size: u32, max_frame_size: u32) -> usize {
    (max_header_list_size as usize)
        .saturating_mul(2)
        .max(max_frame_size as usize)
}

/// The fragments of one header block so far.
#[derive(Debug)]
pub(crate) struct BlockFragments {
    /// The HEADERS fragment; most blocks are only this, and then nothing is copied.
    first: Bytes,
    /// CONTINUATION fragments, with `first` copied in front once the first arrives.
    joined: BytesMut,
    /// CONTINUATION frames appended.
    continuations: u32,
}

impl BlockFragments {
    /// A block that starts with a HEADERS frame's fragment.
    pub(crate) fn new(first: Bytes) -> Self {
        Self {
            first,
            joined: BytesMut::new(),
            continuations: 0,
        }
    }

    /// Bytes of the block so far.
    pub(crate) fn len(&self) -> usize {
        if self.joined.is_empty() {
            self.first.len()
        } else {
            self.joined.len()
        }
    }

    /// Appends a CONTINUATION frame's fragment if the block stays within `frames_max`
    /// CONTINUATION frames and `bytes_max` bytes; `Err`: the reason it would not, and
    /// nothing is appended.
    pub(crate) fn append_within(
        &mut self,
        fragment: &[u8],
        frames_max: u32,
        bytes_max: usize,
    ) -> Result<(), &'static str> {
        if self.continuations + 1 > frames_max {
            return Err("too many CONTINUATION frames");
        }
        if self.len() + fragment.len() > bytes_max {
            return Err("header block too large");
        }
        self.append(fragment);
        Ok(())
    }

    fn append(&mut self, fragment: &[u8]) {
        if self.joined.is_empty() {
            self.joined.extend_from_slice(&self.first);
        }
        self.joined.extend_from_slice(fragment);
        self.continuations += 1;
    }

    /// The whole block, for the HPACK decoder.
    pub(crate) fn into_block(self) -> Bytes {
        if self.joined.is_empty() {
            self.first
        } else {
            self.joined.freeze()
        }
    }
}
