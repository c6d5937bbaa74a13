//! The provided-buffer ring that multishot receives pick their buffers from.
//!
//! Why a buffer ring: with one buffer per connection, 10,000 idle keep-alive connections would
//! pin 10,000 buffers. With a provided ring the kernel takes a buffer only when bytes arrive, the
//! worker copies them into the connection and hands the buffer straight back, so memory follows
//! traffic rather than connection count (the same reasoning as nginx's lingering buffers).
//!
//! Ownership: a buffer id is owned by the kernel while it sits in the ring, by the caller from the
//! receive completion that names it until [`BufRing::recycle`] puts it back. The memory of all
//! buffers and of the ring itself lives as long as `BufRing`, and `Ring` drops it only once the
//! kernel can no longer write into it (see `Ring`'s `Drop`).

use std::alloc::{self, Layout};
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::IoUring;
use io_uring::types::BufRingEntry;

/// Page alignment the kernel requires of the ring memory (io_uring_register_buf_ring(3)).
const RING_ALIGN: usize = 4096;

/// A receive buffer the kernel filled: `len` bytes of buffer `bid`.
///
/// Not `Clone`: each one must go back to the ring exactly once, through [`BufRing::recycle`].
#[derive(Debug)]
pub struct RecvBuf {
    pub(crate) bid: u16,
    pub(crate) len: u32,
}

impl RecvBuf {
    /// Number of bytes received into this buffer.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when the completion carried no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

pub(crate) struct BufRing {
    /// The ring of `io_uring_buf` entries shared with the kernel; page aligned.
    ring: *mut BufRingEntry,
    ring_layout: Layout,
    /// All buffers, back to back: buffer `bid` is `data[bid * size .. (bid + 1) * size]`.
    data: *mut u8,
    data_layout: Layout,
    entries: u16,
    buf_bytes: u32,
    /// Our copy of the tail; published to the kernel in `publish`.
    tail: u16,
}

impl BufRing {
    /// Allocates `entries` buffers of `buf_bytes` each and registers them as group `group`.
    pub(crate) fn new(
        uring: &IoUring,
        group: u16,
        entries: u16,
        buf_bytes: u32,
    ) -> io::Result<BufRing> {
        assert!(
            entries.is_power_of_two() && entries <= 32_768,
            "kernel limit on ring size"
        );
        assert!(buf_bytes > 0);
        let ring_bytes = usize::from(entries) * size_of::<BufRingEntry>();
        let ring_layout =
            Layout::from_size_align(ring_bytes, RING_ALIGN).map_err(io::Error::other)?;
        let data_bytes = usize::from(entries) * buf_bytes as usize;
        let data_layout = Layout::from_size_align(data_bytes, 64).map_err(io::Error::other)?;
        // SAFETY: both layouts have a non-zero size (entries > 0, buf_bytes > 0); the zeroed ring
        // is a valid array of `io_uring_buf` (plain integers) with a tail of 0.
        let ring = unsafe { alloc::alloc_zeroed(ring_layout) }.cast::<BufRingEntry>();
        // SAFETY: as above; the buffers are only ever read as bytes after the kernel wrote them.
        let data = unsafe { alloc::alloc_zeroed(data_layout) };
        if ring.is_null() || data.is_null() {
            alloc::handle_alloc_error(ring_layout);
        }
        let mut this = BufRing {
            ring,
            ring_layout,
            data,
            data_layout,
            entries,
            buf_bytes,
            tail: 0,
        };
        // SAFETY: `ring` points to `entries` entries, page aligned, and stays allocated until
        // `self` is dropped, which `Ring` does only after the ring fd is closed and every
        // receive has completed (or the memory is leaked on purpose).
        let registered = unsafe {
            uring
                .submitter()
                .register_buf_ring_with_flags(ring as u64, entries, group, 0)
        };
        if let Err(e) = registered {
            this.free();
            return Err(e);
        }
        for bid in 0..entries {
            this.push(bid);
        }
        this.publish();
        Ok(this)
    }

    /// The size of each buffer.
    pub(crate) fn buf_bytes(&self) -> u32 {
        self.buf_bytes
    }

    /// The bytes the kernel wrote into `buf`.
    pub(crate) fn bytes(&self, buf: &RecvBuf) -> &[u8] {
        debug_assert!(buf.bid < self.entries && buf.len <= self.buf_bytes);
        let start = usize::from(buf.bid) * self.buf_bytes as usize;
        let len = buf.len.min(self.buf_bytes) as usize;
        // SAFETY: bid < entries, so [start, start + len) lies inside `data`. The caller owns the
        // buffer (it came out of a completion and has not been recycled), so the kernel does not
        // write into it while this shared borrow lives.
        unsafe { std::slice::from_raw_parts(self.data.add(start), len) }
    }

    /// Hands a buffer back to the kernel.
    pub(crate) fn recycle(&mut self, buf: RecvBuf) {
        self.push(buf.bid);
        self.publish();
    }

    fn push(&mut self, bid: u16) {
        let mask = self.entries - 1;
        let index = usize::from(self.tail & mask);
        // SAFETY: index < entries, inside the ring allocation; the kernel reads entries only
        // below the published tail, and this slot is past it until `publish`.
        let entry = unsafe { &mut *self.ring.add(index) };
        let addr = self.data as u64 + u64::from(bid) * u64::from(self.buf_bytes);
        entry.set_addr(addr);
        entry.set_len(self.buf_bytes);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&mut self) {
        // SAFETY: `tail` points into the first entry of the live, page-aligned ring, at the
        // u16 the kernel reads as the ring's tail; u16 alignment holds. The Release store orders
        // the entry writes above before the kernel can see the new tail.
        unsafe {
            let tail = BufRingEntry::tail(self.ring).cast_mut();
            AtomicU16::from_ptr(tail).store(self.tail, Ordering::Release);
        }
    }

    fn free(&mut self) {
        // SAFETY: allocated in `new` with these layouts; called once (from `new`'s error path or
        // from `Drop`), when the kernel holds no buffer of this ring.
        unsafe {
            alloc::dealloc(self.ring.cast(), self.ring_layout);
            alloc::dealloc(self.data, self.data_layout);
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        self.free();
    }
}
